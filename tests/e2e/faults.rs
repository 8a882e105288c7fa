//! Hostile input, limits and faults: the server keeps serving through all of them, and
//! says why it refuses where the protocol allows.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::{Frame, decode_frame};

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends `bytes` (in pieces of `step`), closes the write side, and returns what the server said.
fn exchange(port: u16, bytes: &[u8], step: usize) -> Vec<u8> {
    let mut s = connect(port);
    for piece in bytes.chunks(step.max(1)) {
        if s.write_all(piece).is_err() {
            break;
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply
}

fn refusal(reply: &[u8]) -> String {
    match decode_frame(reply) {
        Ok(Some((Frame::Refuse { reason, .. }, _))) => reason,
        other => panic!("expected a refusal, got {other:?} from {reply:?}"),
    }
}

fn normal_client_verified(port: u16, dir: &std::path::Path) {
    let path = test_file(dir, "normal.txt", 300_000);
    let (out, v) = client_json(port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
}

/// Hostile bytes of every kind against both server models. Each gets a refusal with a
/// reason where the protocol allows, and a normal client is verified right after.
#[test]
fn hostile_bytes_both_models() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut random = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect()
    };
    let small_random = random(17);
    let large_random = random(1 << 20);
    for model in MODELS {
        let server = Server::start(model);
        let port = server.port;
        // Empty connections.
        for _ in 0..5 {
            drop(connect(port));
        }
        assert!(exchange(port, b"", 1).len() <= 64);
        // Random bytes, small and large (a random first byte is almost never 'T').
        let mut small = small_random.clone();
        small[0] = b'x';
        assert!(refusal(&exchange(port, &small, 1 << 20)).contains("bad magic"));
        let mut large = large_random.clone();
        large[0] = b'x';
        let _ = exchange(port, &large, 1 << 16);
        // An HTTP request.
        assert!(
            refusal(&exchange(
                port,
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                1 << 10
            ))
            .contains("bad magic")
        );
        // Wrong version, mode, chunk and name length: at and beyond every limit.
        let mut bad = stream_hello(10, 1024, "a");
        let next = tsperf_proto::VERSION + 1;
        bad[4..6].copy_from_slice(&next.to_be_bytes());
        assert!(refusal(&exchange(port, &bad, 64)).contains(&format!("protocol version {next}")));
        let mut bad = stream_hello(10, 1024, "a");
        bad[6] = 7;
        assert!(refusal(&exchange(port, &bad, 64)).contains("bad mode 7"));
        for chunk in [0u32, 16 * 1024 * 1024 + 1] {
            assert!(
                refusal(&exchange(port, &stream_hello(10, chunk, "a"), 64))
                    .contains("bad chunk size")
            );
        }
        let mut long = stream_hello(10, 1024, "a");
        long[12..14].copy_from_slice(&256u16.to_be_bytes());
        assert!(refusal(&exchange(port, &long, 64)).contains("too long"));
        // The limits themselves are accepted: a 255-byte name and a 16 MiB chunk.
        let name = "n".repeat(255);
        let mut s = connect(port);
        s.write_all(&stream_hello(1, 16 * 1024 * 1024, &name))
            .unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        assert!(matches!(
            decode_frame(&accept),
            Ok(Some((Frame::Accept { .. }, ACCEPT_LEN)))
        ));
        drop(s);
        // A hello one byte at a time is served normally.
        let mut s = connect(port);
        for b in stream_hello(3, 1, "slow.txt") {
            s.write_all(&[b]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        assert!(matches!(
            decode_frame(&accept),
            Ok(Some((Frame::Accept { .. }, ACCEPT_LEN)))
        ));
        s.write_all(b"abc").unwrap();
        s.write_all(&xxhash_rust::xxh3::xxh3_64(b"abc").to_be_bytes())
            .unwrap();
        let mut report = Vec::new();
        let _ = s.read_to_end(&mut report);
        assert!(matches!(decode_frame(&report), Ok(Some((Frame::Report(r), _))) if r.bytes == 3));
        // A hello followed by a disconnect.
        let mut s = connect(port);
        s.write_all(&stream_hello(1000, 10, "gone.txt")).unwrap();
        drop(s);
        assert!(
            server.wait_for(|_, e| e.contains("'gone.txt': 0 of 1000 bytes")),
            "{model:?}: {}",
            server.stderr()
        );
        normal_client_verified(port, dir.path());
    }
}

/// A transfer larger than --max-bytes is refused before any data flows.
#[test]
fn max_bytes_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let big = test_file(dir.path(), "big.txt", 2000);
    for model in MODELS {
        let mut args = vec!["--max-bytes", "1000"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let out = client(&["--port", &server.port.to_string(), big.to_str().unwrap()]);
        assert_fails(
            &out,
            1,
            "'big.txt' is 2000 bytes: this server accepts at most 1000 (--max-bytes)",
        );
        let ok = test_file(dir.path(), "ok.txt", 1000);
        let (out, v) = client_json(server.port, &[ok.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
    }
}

/// Connections beyond --max-clients are refused with a reason, not left hanging; when a
/// place frees up, clients get through again.
#[test]
fn max_clients_refuses_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 10_000);
    for model in MODELS {
        let mut args = vec!["--max-clients", "2"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let held: Vec<TcpStream> = (0..2).map(|_| connect(server.port)).collect();
        // Let the server account for them.
        std::thread::sleep(Duration::from_millis(200));
        let out = client(&["--port", &server.port.to_string(), file.to_str().unwrap()]);
        assert_fails(
            &out,
            1,
            "server busy: it serves at most 2 connections at once (--max-clients)",
        );
        drop(held);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let (out, v) = client_json(server.port, &[file.to_str().unwrap()]);
            if out.status.code() == Some(0) {
                assert_eq!(v["verified"], true);
                break;
            }
            assert!(
                Instant::now() < end,
                "{model:?}: places never freed: {}",
                stderr(&out)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A socket that sends no hello is closed at the hello timeout with a reason; one that
/// stops sending data is closed at the idle timeout and logged as incomplete.
#[test]
fn hello_and_idle_timeouts() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "0.5", "--idle-timeout", "0.5"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut silent = connect(server.port);
        let mut reply = Vec::new();
        let _ = silent.read_to_end(&mut reply);
        assert!(
            refusal(&reply).contains("no complete hello within 0.5 s"),
            "{model:?}"
        );

        let mut stalled = connect(server.port);
        stalled
            .write_all(&stream_hello(1000, 100, "idle.txt"))
            .unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        stalled.read_exact(&mut accept).unwrap();
        stalled.write_all(&[b'i'; 300]).unwrap();
        let mut rest = Vec::new();
        let _ = stalled.read_to_end(&mut rest);
        assert!(
            server.wait_for(
                |_, e| e.contains("'idle.txt': 300 of 1000 bytes, then no data for 0.5 s")
            ),
            "{model:?}: {}",
            server.stderr()
        );
    }
}

/// Once a bulk transfer flows, the server asks to be woken only per 64 KiB
/// (SO_RCVLOWAT). A stream slower than that per idle timeout is still not idle: its bytes are
/// read and counted. One that then stops is idle, with every byte it sent counted.
#[test]
fn slow_stream_below_the_low_water_mark() {
    for model in MODELS {
        // A locked 1 MiB buffer is large enough for the mark from the first read on.
        let mut args = vec!["--idle-timeout", "0.5", "--rcvbuf", "1m"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut s = connect(server.port);
        s.set_nodelay(true).unwrap();
        s.write_all(&stream_hello(4 << 20, 1024, "slow.txt"))
            .unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        s.write_all(&[b's'; 256 << 10]).unwrap();
        // 20 KiB over 2 s: four idle timeouts, a third of the mark.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(&[b's'; 1024]).unwrap();
        }
        let sent = (256 << 10) + 20 * 1024;
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        let want = format!("'slow.txt': {sent} of 4194304 bytes, then no data for 0.5 s");
        assert!(
            server.wait_for(|_, e| e.contains(&want)),
            "{model:?}: want {want:?} in {}",
            server.stderr()
        );
    }
}

/// 500 idle sockets held open: a real client still gets through, and the idle ones are
/// closed at the hello timeout.
#[test]
fn five_hundred_idle_sockets() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "2"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let idle: Vec<TcpStream> = (0..500).map(|_| connect(server.port)).collect();
        normal_client_verified(server.port, dir.path());
        for mut s in idle {
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            assert!(refusal(&buf).contains("no complete hello"), "{model:?}");
        }
        normal_client_verified(server.port, dir.path());
    }
}

/// A server killed mid-transfer makes the client exit 1 at once, saying how far it got.
#[test]
fn server_killed_mid_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    let server = Server::start(&["--read-size", "16", "--rcvbuf", "65536"]);
    let mut child = std::process::Command::new(bin("tsclient"))
        .args([
            "--port",
            &server.port.to_string(),
            "--timeout",
            "10",
            "--sndbuf",
            "65536",
        ])
        .arg(&big)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGKILL);
    let end = Instant::now() + DEADLINE;
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < end,
            "the client hung after the server died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_fails(&out, 1, "connection lost after sending ");
    assert!(
        stderr(&out).contains("the server's TCP acknowledged "),
        "{}",
        stderr(&out)
    );
}

/// A file truncated while it is being sent is a clean "shrank" error naming it, exit 1, for
/// every strategy over both transports: not a SIGBUS death (the mapped pages are gone), not a
/// network error, not a hang.
#[test]
fn file_truncated_mid_send() {
    let dir = tempfile::tempdir().unwrap();
    let strategies: [&[&str]; 3] = [&[], &["--io", "writev"], &["--io", "sendfile"]];
    for strategy in strategies {
        for transport in [&[][..], &["--nonblocking"][..]] {
            let path = sparse_file(dir.path(), "shrinking.bin", 64 << 20);
            let cut = path.clone();
            let port = fake_server(move |mut s, _len| {
                // Let the client get going, cut the file under it, then drain to the end.
                let mut first = vec![0u8; 1 << 20];
                s.read_exact(&mut first).unwrap();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&cut)
                    .unwrap()
                    .set_len(64 << 10)
                    .unwrap();
                let mut sink = [0u8; 1 << 16];
                while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
            });
            let mut args = vec!["--port".to_string(), port.to_string()];
            args.extend(strategy.iter().chain(transport).map(|a| a.to_string()));
            args.push(path.to_str().unwrap().into());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = client(&args);
            let what = format!("{strategy:?} {transport:?}");
            assert_fails(&out, 1, "shrank while it was read");
            assert!(
                stderr(&out).contains(path.to_str().unwrap()),
                "{what}: {}",
                stderr(&out)
            );
        }
    }
}

/// A latency hello must carry no name and a chunk of 1, as the specification
/// says; anything else is refused with a reason, by both models.
#[test]
fn latency_hello_with_name_or_chunk_is_refused() {
    for model in MODELS {
        let server = Server::start(model);
        let mut named = latency_hello(5, 1, 1);
        // Give it a one-byte name: name_len 1, then the name.
        named[12..14].copy_from_slice(&1u16.to_be_bytes());
        named.push(b'n');
        let mut chunked = latency_hello(5, 1, 1);
        chunked[22..26].copy_from_slice(&2u32.to_be_bytes());
        for (bytes, why) in [
            (named, "latency hello with a name"),
            (chunked, "bad chunk size 2 for latency mode"),
        ] {
            let reason = refusal(&exchange(server.port, &bytes, 64));
            assert!(reason.contains(why), "{model:?}: {reason}");
        }
    }
}

/// Both server models say the same words for the same ends of a conversation (they
/// share one, `server::conversation`): a client that closes without a hello, halfway through
/// one, before its authentication answer, during the data, and before its digest.
#[test]
fn both_models_give_the_same_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, b"correct horse battery staple\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let hello = stream_hello(100, 10, "t.txt");
    // (with a key, the bytes sent first, the bytes sent after the server's answer)
    let scenarios: Vec<(bool, Vec<u8>, Option<Vec<u8>>)> = vec![
        (false, vec![], None),
        (false, hello[..5].to_vec(), None),
        (true, hello.clone(), Some(vec![])),
        (false, hello.clone(), Some(vec![b'x'; 40])),
        (false, hello.clone(), Some(vec![b'x'; 100])),
    ];
    let mut said: Vec<Vec<String>> = Vec::new();
    for model in [&[][..], &["--blocking"][..]] {
        let mut lines = Vec::new();
        for (auth, bytes, after) in &scenarios {
            let mut args = model.to_vec();
            if *auth {
                args.extend(["--auth-key", key.to_str().unwrap()]);
            }
            let server = Server::start(&args);
            let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.write_all(bytes).unwrap();
            if let Some(after) = after {
                // The Accept (or the challenge) first, so the data counts as data.
                read_one_frame(&mut s);
                s.write_all(after).unwrap();
            }
            drop(s);
            assert!(
                server.wait_for(|_, e| e.contains("refused") || e.contains("incomplete")),
                "{:?}: {}",
                model,
                server.stderr()
            );
            let line = server
                .stderr()
                .lines()
                .find(|l| l.contains("refused") || l.contains("incomplete"))
                .unwrap()
                .to_owned();
            // Drop the peer's address: the ports differ.
            let (head, tail) = line.split_once(" 127.0.0.1:").unwrap();
            lines.push(format!("{head} {}", tail.split_once(": ").unwrap().1));
        }
        said.push(lines);
    }
    assert_eq!(said[0], said[1]);
    let expected = [
        "tsserver: refused connection closed without a hello",
        "tsserver: refused connection closed after 5 bytes of a hello",
        "tsserver: refused connection closed before its authentication answer",
        "tsserver: incomplete transfer from 't.txt': 40 of 100 bytes, then the client closed the connection",
        "tsserver: incomplete transfer from 't.txt': 100 of 100 bytes, then the client closed before sending its digest",
    ];
    assert_eq!(said[0], expected);
}

/// After the server resets the connection, the client's count of bytes sent is
/// every byte the kernel took (at least what the server read), and what it says the server's
/// TCP acknowledged is no more than that, for every strategy over both transports (`--io writev`
/// counted only whole batches: "sending 0 of N bytes (the server's TCP acknowledged 0)").
#[test]
fn a_reset_says_what_the_server_acknowledged() {
    const READ: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let file = sparse_file(dir.path(), "reset.bin", 256 << 20);
    let strategies: [&[&str]; 3] = [&[], &["--io", "writev"], &["--io", "sendfile"]];
    for strategy in strategies {
        for transport in [&[][..], &["--nonblocking"][..]] {
            let port = fake_server(|mut s, _| {
                let mut buf = vec![0u8; READ];
                s.read_exact(&mut buf).unwrap();
                socket2::SockRef::from(&s)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            });
            // At the default chunk a writev group is 640 KiB: with a small send buffer the reset
            // comes inside the first.
            let mut args = vec![
                "--port".to_owned(),
                port.to_string(),
                "--sndbuf".into(),
                "65536".into(),
            ];
            args.extend(strategy.iter().chain(transport).map(|a| a.to_string()));
            args.push(file.to_str().unwrap().into());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = client(&args);
            let err = stderr(&out);
            assert_fails(&out, 1, "connection lost after sending ");
            let acked: u64 = err
                .split("the server's TCP acknowledged ")
                .nth(1)
                .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{strategy:?} {transport:?}: {err}"));
            // `X MiB of Y MiB (SENT of WHOLE bytes)`: the exact count in the parentheses.
            let sent: u64 = err
                .split("connection lost after sending ")
                .nth(1)
                .and_then(|t| t.split_once('(').map(|(_, exact)| exact))
                .and_then(|t| t.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{strategy:?} {transport:?}: {err}"));
            assert!(
                sent >= READ as u64 && acked <= sent,
                "{strategy:?} {transport:?}: sent {sent}, acknowledged {acked}, the server read \
                 {READ}: {err}"
            );
        }
    }
}

/// A served file that shrinks while it is sent ends its own stream, with the
/// reason the client prints, and nothing else: the server goes on, a transfer beside it
/// completes, and the next client is served. Before, the server's SIGBUS guard ended the
/// process ("file ... shrank while it was read", exit 1).
#[test]
fn a_served_file_that_shrinks_ends_only_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    for model in EVERY_MODEL {
        let big = served.join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let mut args = vec!["--serve", served.to_str().unwrap()];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let port = server.port.to_string();
        // A slow reader (a log line per 102-byte read), so the file is cut mid-stream.
        let log = dir.path().join("client.log");
        let _ = std::fs::remove_file(&log);
        let victim = std::process::Command::new(bin("tsclient"))
            .args(["--port", &port, "--json", "-R", "big.bin", "--chunk", "102"])
            .args(["--log", "file", "--log-file", log.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A transfer beside it.
        let beside = std::process::Command::new(bin("tsclient"))
            .args([
                "--port", &port, "--json", "--bytes", "8MiB", "--chunk", "102",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert!(
            server.wait_for(|_, _| std::fs::metadata(&log).is_ok_and(|m| m.len() > 10_000)),
            "{model:?}: the reverse stream never started"
        );
        std::fs::File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(0)
            .unwrap();
        let out = wait_child(victim);
        assert_eq!(out.status.code(), Some(1), "{model:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("\"big.bin\" shrank while it was sent"),
            "{model:?}: {v:#}"
        );
        assert!(!stderr(&out).contains("panicked"));
        let out = wait_child(beside);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert!(server.running(), "{model:?}: {}", server.stderr());
        let (out, v) = client_json(server.port, &["--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
        assert!(
            server.wait_for(|_, e| e.contains("shrank while it was sent")),
            "{model:?}: {}",
            server.stderr()
        );
    }
}
