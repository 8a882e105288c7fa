//! Timed runs (`--time`, `--omit`): the file again and again for a time, every byte
//! counted and checksummed by the server and the whole run verified; its end is the client's
//! end trailer and half-close (protocol 7), so the server bounds what it cannot know ahead.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::{Frame, Hello, encode_hello};

const MODELS: [(&[&str], &str); 2] = [(&[], "event-loop"), (&["--blocking"], "blocking")];

/// A `--time 2` run lasts its 2 s (from its first byte to the report, with a bounded slack),
/// moves more than its file, and is verified, in both client and both server models; with
/// `--interval 0.5` it reads like iperf3 `-t 2 -i 0.5`.
#[test]
fn a_timed_run_lasts_its_time_and_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.txt", 1 << 20);
    for (model, server_io) in MODELS {
        let server = Server::start(model);
        for io in [&[][..], &["--nonblocking"][..]] {
            let mut args = vec!["-t", "2", "--interval", "0.5", "--chunk", "1024"];
            args.extend_from_slice(io);
            args.push(path.to_str().unwrap());
            let (out, v) = client_json(server.port, &args);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(v["verified"], true, "{v:#}");
            assert_eq!(v["server"]["io"], server_io);
            let bytes = v["bytes"].as_u64().unwrap();
            assert_eq!(v["server"]["bytes"].as_u64(), Some(bytes), "{v:#}");
            assert_eq!(v["server"]["digest"], v["digest"]);
            let t = &v["timed"];
            assert_eq!(t["time_s"].as_f64(), Some(2.0), "{v:#}");
            assert_eq!(t["file_bytes"].as_u64(), Some(1 << 20));
            assert!(
                bytes > 1 << 20,
                "a timed run moves more than its file: {v:#}"
            );
            let passes = t["passes"].as_f64().unwrap();
            assert!(
                (passes - bytes as f64 / f64::from(1 << 20)).abs() < 1e-9,
                "{v:#}"
            );
            assert_eq!(t["interrupted"], false);
            let elapsed = v["elapsed_s"].as_f64().unwrap();
            assert!((2.0..10.0).contains(&elapsed), "a 2 s run took {elapsed} s");
            let intervals = v["intervals"].as_array().unwrap();
            assert!(intervals.len() >= 4, "{} intervals", intervals.len());
            // The digest is of every byte sent, the last pass's part included: the client's
            // own count says how far into its pass it stopped.
            assert!(bytes % (1 << 20) != 0 || passes.fract() == 0.0);
        }
    }
}

/// `--omit` leaves the run's start out of its rate, as iperf3 `-O` does: the run lasts omit
/// plus time, and the rate is that of the bytes after the omitted start over the time after it.
#[test]
fn omit_leaves_the_start_out_of_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.txt", 1 << 20);
    let server = Server::start(&[]);
    let (out, v) = client_json(
        server.port,
        &["-t", "1", "-O", "0.5", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true, "{v:#}");
    let t = &v["timed"];
    let (omitted, omitted_s) = (
        t["omitted_bytes"].as_u64().unwrap(),
        t["omitted_s"].as_f64().unwrap(),
    );
    let (bytes, elapsed) = (
        v["bytes"].as_u64().unwrap(),
        v["elapsed_s"].as_f64().unwrap(),
    );
    assert!(omitted > 0 && omitted < bytes, "{v:#}");
    assert!(omitted_s >= 0.5 && omitted_s < elapsed, "{v:#}");
    assert!(elapsed >= 1.5, "omit plus time: {elapsed} s");
    let rate = (bytes - omitted) as f64 / (elapsed - omitted_s) / (1024.0 * 1024.0);
    let shown = v["mib_per_s"].as_f64().unwrap();
    assert!((shown - rate).abs() <= rate * 1e-9, "{shown} vs {rate}");
    // The verbose report's headline divides: the bytes and the time after the omitted start,
    // then all of it.
    let port = server.port.to_string();
    let out = client(&[
        "--port",
        &port,
        "-V",
        "-t",
        "1",
        "-O",
        "0.5",
        path.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    let head = text
        .lines()
        .find(|l| l.starts_with("sent "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(head.contains(" after the omitted 500.00 ms ("), "{head}");
    // --omit without --time is a usage error, as is a time of 0.
    let out = client(&["-O", "1", path.to_str().unwrap()]);
    assert_fails(&out, 2, "--time");
    let out = client(&["-t", "0", path.to_str().unwrap()]);
    assert_fails(&out, 2, "invalid time '0'");
}

/// Ctrl-C in a timed run ends it as its time does: the end trailer, the server's report, every
/// byte sent until the stop verified, the figures printed, exit 130; in both server models.
#[test]
fn ctrl_c_ends_a_timed_run_verified() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.txt", 1 << 20);
    for (model, _) in MODELS {
        let server = Server::start(model);
        for json in [true, false] {
            let port = server.port.to_string();
            let mut args = vec!["--port", &port, "-t", "30", path.to_str().unwrap()];
            if json {
                args.push("--json");
            }
            let out = interrupt_client(&args, Duration::from_millis(700));
            assert_fails(&out, 130, "interrupted after");
            let text = stdout(&out);
            if json {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(v["verified"], true, "{v:#}");
                assert_eq!(v["timed"]["interrupted"], true, "{v:#}");
                assert_eq!(v["server"]["bytes"], v["bytes"]);
                assert!(v["elapsed_s"].as_f64().unwrap() < 30.0);
            } else {
                let text = text.replace("\n  ", " ");
                assert!(text.contains("verified: the server counted all "), "{text}");
                assert!(
                    text.contains("the interrupt that stopped it early"),
                    "{text}"
                );
            }
        }
    }
}

/// Sends a timed hello of `ms` and reads the Accept.
fn timed_conn(port: u16, ms: u32) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut hello = Vec::new();
    encode_hello(
        &Hello {
            duration_ms: ms,
            ..Hello::stream(1000, 1000, "t.txt")
        },
        &mut hello,
    );
    s.write_all(&hello).unwrap();
    assert!(
        matches!(read_one_frame(&mut s), Some(Frame::Accept { .. })),
        "accepted"
    );
    s
}

/// What the server must bound, since a timed run announces no length: a run longer than
/// `--max-time` is refused at the hello naming the flag; a stream closed before its end
/// trailer, or whose trailer counts otherwise, is aborted with the reason; in both models.
#[test]
fn the_server_bounds_a_timed_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.txt", 1 << 20);
    for (model, _) in MODELS {
        let mut args = vec!["--max-time", "1"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let out = client(&[
            "--port",
            &server.port.to_string(),
            "-t",
            "1",
            "-O",
            "0.5",
            path.to_str().unwrap(),
        ]);
        assert_fails(
            &out,
            1,
            "a timed run of 1.5 s was asked for (--time): this server runs at most 1 s (--max-time)",
        );
        // Closed before the trailer's 16 bytes.
        let mut s = timed_conn(server.port, 500);
        s.write_all(b"short").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Abort(why)) => assert!(why.contains("before its end trailer"), "{why}"),
            other => panic!("{model:?}: {other:?}"),
        }
        // A trailer that counts otherwise.
        let mut s = timed_conn(server.port, 500);
        s.write_all(&[7; 100]).unwrap();
        let end = tsperf_proto::end::End {
            length: 99,
            digest: 0,
        };
        s.write_all(&end.encode()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Abort(why)) => assert_eq!(
                why, "the client's end trailer says it sent 99 bytes: 100 arrived",
                "{model:?}"
            ),
            other => panic!("{model:?}: {other:?}"),
        }
        // A trailer that counts right with a wrong digest: the report, and the client's
        // compare says so (the server only counts and checksums).
        let mut s = timed_conn(server.port, 500);
        s.write_all(&[7; 100]).unwrap();
        let end = tsperf_proto::end::End {
            length: 100,
            digest: 1,
        };
        s.write_all(&end.encode()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Report(r)) => {
                assert_eq!(r.bytes, 100);
                assert_eq!(r.digest, xxhash_rust::xxh3::xxh3_64(&[7; 100]));
            }
            other => panic!("{model:?}: {other:?}"),
        }
    }
}

/// A timed stream that never ends is cut off its grace (10 s) after its time, even while its
/// bytes keep coming, so a client cannot hold a connection past what it asked for.
#[test]
fn a_timed_run_that_never_ends_is_cut_off() {
    for (model, _) in MODELS {
        let server = Server::start(model);
        let mut s = timed_conn(server.port, 1);
        s.set_nonblocking(true).unwrap();
        let start = Instant::now();
        let mut buf = Vec::new();
        let frame = loop {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{model:?}: not cut off"
            );
            let _ = s.write(&[1; 64]);
            let mut tmp = [0u8; 4096];
            match s.read(&mut tmp) {
                Ok(0) => break None,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break None,
            }
            if let Ok(Some((f, _))) = tsperf_proto::decode_frame(&buf) {
                break Some(f);
            }
            thread::sleep(Duration::from_millis(100));
        };
        match frame {
            Some(Frame::Abort(why)) => {
                assert!(
                    why.contains("went on 10 s past its time"),
                    "{model:?}: {why}"
                )
            }
            other => panic!("{model:?}: {other:?}"),
        }
        assert!(start.elapsed() >= Duration::from_secs(10));
    }
}

/// A timed run to a server that logs each read ends when its time does: the server sees the
/// client's half-close after a short read (the event loop stops a logged turn at one, and the
/// half-close comes with no new data to wake it). Before, the event loop saw it only at its
/// deadline: a 0.3 s run took 10.3 s, or was cut off.
#[test]
fn a_logged_timed_run_ends_with_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.txt", 1 << 20);
    let log = dir.path().join("reads.log");
    for (model, _) in MODELS {
        for floor in ["64", "1"] {
            let mut args = vec![
                "--log",
                "file",
                "--log-file",
                log.to_str().unwrap(),
                "--log-min-read",
                floor,
            ];
            args.extend_from_slice(model);
            let server = Server::start(&args);
            let (out, v) = client_json(
                server.port,
                &["-t", "0.3", "--chunk", "102", path.to_str().unwrap()],
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{model:?} {floor}: {}",
                stderr(&out)
            );
            assert_eq!(v["verified"], true);
            let elapsed = v["elapsed_s"].as_f64().unwrap();
            assert!(
                elapsed < 5.0,
                "{model:?}, --log-min-read {floor}: a 0.3 s run took {elapsed} s"
            );
        }
    }
}

/// A timed run that fails says how far it got in bytes of the run, not "N of" one
/// pass (it read "4258304 of 4194304 bytes").
#[test]
fn a_failed_timed_run_counts_the_run_not_one_pass() {
    // A server that accepts, takes 4 MiB and resets the connection.
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        while got < 4 << 20 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "pass.bin", 1 << 20);
    let (out, v) = client_json(
        port,
        &["-t", "5", "--clock-queries", "0", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let error = v["error"].as_str().unwrap_or_default();
    assert!(!error.contains("of 1048576 bytes"), "{v:#}");
    assert!(error.contains("of a timed run"), "{v:#}");
}
