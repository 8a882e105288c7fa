//! Non-blocking I/O and the event-loop server: every transfer verified whichever I/O
//! model each end uses, short writes handled, and no client able to hold up another.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::{Frame, decode_frame};

const MODELS: [(&[&str], &str); 2] = [(&[], "event-loop"), (&["--blocking"], "blocking")];

/// Every chunk size and edge file size, over --nonblocking, against both server models;
/// the blocking client against both models too.
#[test]
fn edge_sizes_nonblocking_both_models() {
    let dir = tempfile::tempdir().unwrap();
    for (args, model) in MODELS {
        let server = Server::start(args);
        for chunk in [102u64, 1024, 10240] {
            for len in [1, chunk - 1, chunk, chunk + 1, 100 * chunk + 3] {
                let path = test_file(dir.path(), &format!("f{chunk}_{len}.txt"), len);
                let c = chunk.to_string();
                for (flag, io) in [(Some("--nonblocking"), "nonblocking"), (None, "blocking")] {
                    let mut a = vec!["--chunk", &c, path.to_str().unwrap()];
                    a.extend(flag);
                    let (out, v) = client_json(server.port, &a);
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "{model} {io} {chunk} {len}: {}",
                        stderr(&out)
                    );
                    assert_verified(&v, &path, chunk, io, model);
                }
            }
        }
    }
}

/// The seed's 36 MiB file over --nonblocking at each chunk size, against the event loop.
#[test]
fn seed_file_nonblocking() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tsl.txt", tsperf_sys::testdata::SEED_FILE_LEN);
    for chunk in [102u64, 1024, 10240] {
        let c = chunk.to_string();
        let (out, v) = client_json(
            server.port,
            &["--nonblocking", "--chunk", &c, path.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_verified(&v, &path, chunk, "nonblocking", "event-loop");
        assert!(v["server"]["wakeups"].as_u64().unwrap() > 0);
    }
}

/// With tiny socket buffers a non-blocking client really meets WouldBlock and short
/// writes, keeps its place, and the digest still matches, against both server models.
#[test]
fn short_writes_keep_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "f.txt", 4 << 20);
    for (args, model) in MODELS {
        let mut a = vec!["--rcvbuf", "4096"];
        a.extend_from_slice(args);
        let server = Server::start(&a);
        let (out, v) = client_json(
            server.port,
            &[
                "--nonblocking",
                "--sndbuf",
                "4096",
                "--chunk",
                "10240",
                path.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_verified(&v, &path, 10240, "nonblocking", model);
        let c = &v["client"];
        assert!(
            c["partial_writes"].as_u64().unwrap() > 0,
            "no short write happened: {c}"
        );
        assert!(
            c["would_block"].as_u64().unwrap() > 0,
            "no WouldBlock happened: {c}"
        );
        assert!(c["polls"].as_u64().unwrap() >= c["would_block"].as_u64().unwrap());
        assert!(c["sndbuf"].as_u64().unwrap() < 64 * 1024, "{c}");
    }
}

/// 64 concurrent clients, half blocking and half non-blocking, against the event
/// loop; every one verified.
#[test]
fn sixty_four_concurrent_clients() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = server.port.to_string();
    let mut children = Vec::new();
    for i in 0..64u64 {
        let path = test_file(dir.path(), &format!("c{i}.txt"), 256 * 1024 + i * 1000);
        let mut cmd = Command::new(bin("tsclient"));
        cmd.args([
            "--port",
            &port,
            "--json",
            "--chunk",
            ["102", "1024", "10240"][i as usize % 3],
        ]);
        if i % 2 == 0 {
            cmd.arg("--nonblocking");
        }
        cmd.arg(&path).stdout(Stdio::piped()).stderr(Stdio::piped());
        children.push((path, cmd.spawn().unwrap()));
    }
    let deadline = Instant::now() + DEADLINE;
    for (path, mut child) in children {
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "client did not finish in time");
            thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verified"], true);
        assert_eq!(v["digest"], xxh3_of(&path).as_str());
        assert_eq!(v["server"]["io"], "event-loop");
    }
}

/// Sends a hello for `len` bytes and `sent` bytes of data, then leaves the socket open.
fn stalled_client(port: u16, len: u64, sent: usize) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = Vec::new();
    hello.extend(stream_hello(len, 1024, "stalled.txt"));
    s.write_all(&hello).unwrap();
    let mut accept = [0u8; ACCEPT_LEN];
    s.read_exact(&mut accept).unwrap();
    assert!(matches!(
        decode_frame(&accept),
        Ok(Some((Frame::Accept { .. }, _)))
    ));
    s.write_all(&vec![b's'; sent]).unwrap();
    s
}

/// A client that sends half its data and stalls does not delay another client's
/// transfer, in either server model.
#[test]
fn stalled_client_does_not_delay_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "other.txt", 8 << 20);
    for (args, model) in MODELS {
        let server = Server::start(args);
        let stalled = stalled_client(server.port, 1 << 20, 512 * 1024);
        for flag in ["--nonblocking", "--chunk=10240"] {
            let (out, v) = client_json(server.port, &[flag, path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(0), "{model}: {}", stderr(&out));
            assert_eq!(v["verified"], true);
        }
        // The stalled transfer is still open: the server has reported nothing about it.
        assert!(
            !server.stderr().contains("stalled.txt"),
            "{}",
            server.stderr()
        );
        drop(stalled);
        assert!(
            server.wait_for(|_, e| e.contains("'stalled.txt': 524288 of 1048576 bytes")),
            "{model}: {}",
            server.stderr()
        );
    }
}

/// A client killed mid-transfer is logged as incomplete; the server keeps serving.
#[test]
fn killed_client_leaves_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    // 256 MiB: with 16-byte server reads it takes many seconds.
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    let small = test_file(dir.path(), "after.txt", 100_000);
    for (args, model) in MODELS {
        let mut a = vec!["--read-size", "16", "--rcvbuf", "65536"];
        a.extend_from_slice(args);
        let mut server = Server::start(&a);
        let port = server.port.to_string();
        let mut child = Command::new(bin("tsclient"))
            .args([
                "--port",
                &port,
                "--nonblocking",
                "--sndbuf",
                "65536",
                big.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(300));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the transfer ended before the kill"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            server.wait_for(|_, e| e.contains("incomplete transfer") && e.contains("'big.bin'")),
            "{model}: {}",
            server.stderr()
        );
        assert!(server.running());
        let (out, v) = client_json(server.port, &[small.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        assert_eq!(v["server"]["io"], model);
    }
}

/// A client that is always ahead of a slow reader (16-byte reads, 4 MiB receive
/// buffer, a 256 MiB file) does not keep the event loop to itself: another client's transfer
/// completes while the first is still running. (Before turns, the loop read the first client
/// until it ran dry, which it never did under load.)
#[test]
fn busy_client_does_not_starve_the_event_loop() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    let small = test_file(dir.path(), "small.txt", 200_000);
    let server = Server::start(&["--read-size", "16", "--rcvbuf", "4m"]);
    let port = server.port.to_string();
    let mut hog = Command::new(bin("tsclient"))
        .args(["--port", &port, big.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let the big transfer start and fill the server's receive buffer.
    thread::sleep(Duration::from_millis(300));
    assert!(
        hog.try_wait().unwrap().is_none(),
        "the big transfer ended early"
    );
    for flag in ["--nonblocking", "--chunk=1024"] {
        let (out, v) = client_json(server.port, &[flag, small.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
    }
    assert!(
        hog.try_wait().unwrap().is_none(),
        "the big transfer ended first"
    );
    hog.kill().unwrap();
    hog.wait().unwrap();
}
