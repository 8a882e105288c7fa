//! End-to-end stream transfers: real tsserver and tsclient over loopback, every byte
//! counted and checksummed by both ends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use tsperf_proto::{Frame, Hello, Mode, Report, Session, decode_frame, encode_hello};

/// Every chunk size with file sizes 1, chunk-1, chunk, chunk+1 and a few chunks (an
/// empty file is refused: client_phases.rs).
#[test]
fn edge_sizes_at_every_chunk() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    for chunk in [102u64, 1024, 10240] {
        for len in [1, chunk - 1, chunk, chunk + 1, 3 * chunk + 7] {
            let path = test_file(dir.path(), &format!("f{chunk}_{len}.txt"), len);
            let c = chunk.to_string();
            let (out, v) = client_json(server.port, &["--chunk", &c, path.to_str().unwrap()]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "chunk {chunk} len {len}: {}",
                stderr(&out)
            );
            assert_verified(&v, &path, chunk, "blocking", "event-loop");
        }
    }
}

/// The seed's 36 MiB file arrives whole at each chunk size.
#[test]
fn seed_file_at_every_chunk() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tsl.txt", tsperf_sys::testdata::SEED_FILE_LEN);
    for chunk in [102u64, 1024, 10240] {
        let c = chunk.to_string();
        let (out, v) = client_json(server.port, &["--chunk", &c, path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_verified(&v, &path, chunk, "blocking", "event-loop");
    }
}

/// The seed's generator is deterministic; this digest is quoted in committed results.
#[test]
fn seed_file_digest_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tsl.txt");
    let out = run(bin("tsgen"), &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 36 * 1024 * 1024);
    assert_eq!(xxh3_of(&path), "ec40a45bcc9c239d");
}

/// Both ends print the seed's begin / read over / end lines; the client adds a verdict.
#[test]
fn human_output_has_seed_lines() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tsl.txt", 100_000);
    let port = server.port.to_string();
    let out = client(&["--port", &port, "--chunk", "1k", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let stamp = |l: &str, label: &str| {
        let rest = l
            .strip_prefix(&format!("{label} sec["))
            .unwrap_or_else(|| panic!("{l:?}"));
        let (sec, rest) = rest.split_once("], microsec[").unwrap();
        let usec = rest.strip_suffix(']').unwrap();
        assert!(sec.parse::<u64>().unwrap() > 1_600_000_000);
        assert!(usec.parse::<u32>().unwrap() < 1_000_000);
    };
    stamp(lines[0], "begin");
    assert_eq!(lines[1], "file[tsl.txt] read over .");
    stamp(lines[2], "end");
    assert!(lines[3].starts_with("[ ID] Interval "), "{}", lines[3]);
    for (line, end) in [(lines[4], "sender"), (lines[5], "receiver")] {
        assert!(line.starts_with("[  0] ") && line.ends_with(end), "{line}");
        assert!(line.contains(" 97.66 KiB ") && line.contains("MiB/s") && line.contains("Gbit/s"));
    }
    assert!(
        lines[6].starts_with("verified: the server counted all 97.66 KiB"),
        "{text}"
    );
    // With -V, the headline says how it was sent.
    let out = client(&[
        "--port",
        &port,
        "-V",
        "--chunk",
        "1k",
        path.to_str().unwrap(),
    ]);
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert!(lines[3].starts_with("sent 97.66 KiB in "), "{}", lines[3]);
    assert!(
        lines[3].contains("chunk 1024 B, io blocking write, verified (xxh3 "),
        "{}",
        lines[3]
    );
    assert!(
        server.wait_for(|o, _| o.contains("file[tsl.txt] read over .")
            && o.contains("tsserver: received 97.66 KiB"))
    );
    let srv = server.stdout();
    assert!(
        srv.lines().any(|l| l.starts_with("begin sec["))
            && srv.lines().any(|l| l.starts_with("end sec["))
    );
}

/// Bad file arguments fail with exit 1, a message that names the file, and no panic.
#[test]
fn bad_files_are_clear_errors() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let out = client(&["--port", &port, missing.to_str().unwrap()]);
    assert_fails(&out, 1, "cannot open file");
    assert!(stderr(&out).contains("missing.txt"));

    let out = client(&["--port", &port, dir.path().to_str().unwrap()]);
    assert_fails(&out, 1, "is a directory");

    let out = client(&["--port", &port, "/dev/null"]);
    assert_fails(&out, 1, "not a regular file");
}

/// A file the user may not read is refused with the OS's reason. Root reads anything,
/// so as root the client runs as `nobody`.
#[test]
fn unreadable_file_is_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = test_file(dir.path(), "secret.txt", 10);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = std::process::Command::new(bin("tsclient"));
    cmd.arg(&path);
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let mut cmd = assert_cmd::Command::from_std(cmd);
    let out = cmd.timeout(DEADLINE).output().unwrap();
    assert_fails(&out, 1, "cannot open file");
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
}

/// Chunk 0, an oversized chunk and garbage are usage errors (exit 2) that quote the input.
#[test]
fn bad_chunk_sizes_are_usage_errors() {
    for (bad, why) in [
        ("0", "expected 1 to 16777216"),
        ("16777217", "expected 1 to 16777216"),
        ("ten", "expected a number"),
    ] {
        let out = client(&["--chunk", bad, "/dev/null"]);
        assert_fails(&out, 2, &format!("invalid chunk size '{bad}'"));
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    }
}

/// Nothing listening on the port is exit 1 with the address in the message.
#[test]
fn nothing_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 10);
    let port = dead_port().to_string();
    let out = client(&["--port", &port, path.to_str().unwrap()]);
    assert_fails(&out, 1, &format!("could not connect to 127.0.0.1:{port}"));
}

/// A server that closes mid-transfer makes the client fail, saying how far it got.
#[test]
fn server_closing_mid_transfer() {
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        // Close with unread data pending: the kernel answers the client with a reset.
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "big.txt", 64 << 20);
    let out = client(&["--port", &port.to_string(), path.to_str().unwrap()]);
    assert_fails(&out, 1, "connection lost after sending");
    assert!(
        stderr(&out).contains(&format!("of {} bytes", 64 << 20)),
        "{}",
        stderr(&out)
    );
}

/// A server that aborts with a reason has its reason shown by the client.
#[test]
fn server_abort_reason_is_shown() {
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 1000];
        s.read_exact(&mut buf).unwrap();
        send(&mut s, &Frame::Abort("disk full".into()));
        std::thread::sleep(Duration::from_millis(200));
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 4000);
    let out = client(&["--port", &port.to_string(), path.to_str().unwrap()]);
    assert_fails(&out, 1, "disk full");
}

/// A digest that disagrees is a failure: exit 1, MISMATCH on stderr, verified false.
/// On a file that was written to while it was sent, the message says so; on an untouched file
/// it does not.
#[test]
fn mismatch_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    for touch in [true, false] {
        let path = test_file(dir.path(), &format!("t{touch}.txt"), 5000);
        let target = path.clone();
        let port = fake_server(move |mut s, len| {
            if touch {
                // A later modification time stands for a write (without racing the client's
                // reads, and whatever the file system's timestamp granularity).
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .unwrap();
                f.set_modified(std::time::SystemTime::now() + Duration::from_secs(10))
                    .unwrap();
            }
            let mut buf = vec![0u8; len as usize];
            s.read_exact(&mut buf).unwrap();
            let report = Report {
                bytes: len,
                digest: xxhash_rust::xxh3::xxh3_64(&buf) ^ 1,
                reads: 1,
                ..Report::default()
            };
            send(&mut s, &Frame::Report(report));
        });
        let (out, v) = client_json(port, &[path.to_str().unwrap()]);
        assert_fails(&out, 1, "MISMATCH");
        assert_eq!(v["verified"], false);
        assert_eq!(
            stderr(&out).contains("written to while it was sent"),
            touch,
            "{}",
            stderr(&out)
        );
    }
}

/// A server that refuses (here: bad hello bytes) gets its reason shown and the server
/// keeps serving the next client.
#[test]
fn refusals_and_server_survives_garbage() {
    let server = Server::start(&[]);
    let addr = format!("127.0.0.1:{}", server.port);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    match decode_frame(&reply) {
        Ok(Some((Frame::Refuse { reason, .. }, _))) => {
            assert!(reason.contains("bad magic"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // An iperf3 client's cookie: the server's log names iperf3.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"hc2uqquvwarw7kcnvat3rcux2ox2r7kucypt\0")
        .unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    assert!(
        server.wait_for(|_, e| e.contains("an iperf3 client, it seems")),
        "{}",
        server.stderr()
    );

    // A latency hello is refused with a reason until latency mode exists.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = Vec::new();
    encode_hello(
        &Hello {
            mode: Mode::Latency,
            nodelay: false,
            codec: 0,
            framing: 0,
            length: 1,
            chunk: 1,
            name: String::new(),
            log: None,
            clock_queries: 0,
            duration_ms: 0,
            reverse: false,
            one_buffer: false,
            session: Session::ALONE,
            two_way: false,
            congestion: None,
            call: None,
            save: None,
            measure_save: false,
            tls: None,
            pace: None,
        },
        &mut hello,
    );
    s.write_all(&hello).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(
        matches!(decode_frame(&reply), Ok(Some((Frame::Refuse { .. }, _)))),
        "{reply:?}"
    );

    // An empty connection.
    drop(TcpStream::connect(&addr).unwrap());

    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "after.txt", 50_000);
    let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    assert!(
        server.wait_for(|_, e| e.contains("bad magic") && e.contains("without a hello")),
        "{}",
        server.stderr()
    );
}

/// A client that disconnects early is an incomplete transfer; the server goes on, and
/// with --once it exits 1.
#[test]
fn early_disconnect_is_incomplete() {
    let mut server = Server::start(&["--once"]);
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = Vec::new();
    hello.extend(stream_hello(10_000, 1000, "half.txt"));
    s.write_all(&hello).unwrap();
    let mut accept = [0u8; ACCEPT_LEN];
    s.read_exact(&mut accept).unwrap();
    assert!(matches!(
        decode_frame(&accept),
        Ok(Some((
            Frame::Accept {
                read_size: 1048576,
                ..
            },
            ACCEPT_LEN
        )))
    ));
    s.write_all(&[b'x'; 5000]).unwrap();
    drop(s);
    assert_eq!(server.wait_exit(), Some(1));
    assert!(
        server.stderr().contains("incomplete transfer"),
        "{}",
        server.stderr()
    );
    assert!(
        server.stderr().contains("'half.txt': 5000 of 10000 bytes"),
        "{}",
        server.stderr()
    );
}

/// --once exits 0 after one complete transfer.
#[test]
fn once_exits_zero_when_complete() {
    let mut server = Server::start(&["--once"]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 12345);
    let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    assert_eq!(server.wait_exit(), Some(0));
}

/// --read-size overrides the server's read size, and the report says so.
#[test]
fn read_size_override() {
    let server = Server::start(&["--read-size", "64k"]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 1 << 20);
    let (out, v) = client_json(server.port, &["--chunk", "102", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["server"]["read_size"], 65536);
    assert_eq!(v["verified"], true);
}

/// With --log none the server reads in bulk (fewer reads than chunks): 1 MiB in an
/// event loop, whose one block serves all its connections, 256 KiB with --blocking, a block per
/// connection; with a log sink it reads one chunk at a time, as the seed's server did.
#[test]
fn default_read_size_follows_log_sink() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 1 << 20);
    for (model, bulk) in [(&[][..], 1 << 20), (&["--blocking"][..], 256 << 10)] {
        let quiet = Server::start(model);
        let (out, v) = client_json(quiet.port, &["--chunk", "1024", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["server"]["read_size"], bulk, "{model:?}");
        assert_eq!(v["verified"], true);
    }
    let log = dir.path().join("reads.log");
    let logging = Server::start(&["--log", "file", "--log-file", log.to_str().unwrap()]);
    let (out, v) = client_json(logging.port, &["--chunk", "1024", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["server"]["read_size"], 1024);
    assert!(v["server"]["reads"].as_u64().unwrap() >= 1024);
    assert_eq!(v["verified"], true);
}

/// The committed fixture is the generator's output, byte for byte, and it transfers.
#[test]
fn committed_fixture_matches_generator() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tsl-4k.txt");
    let dir = tempfile::tempdir().unwrap();
    let made = test_file(dir.path(), "tsl-4k.txt", 4096);
    assert_eq!(
        std::fs::read(&fixture).unwrap(),
        std::fs::read(&made).unwrap()
    );
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["--chunk", "102", fixture.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_verified(&v, &fixture, 102, "blocking", "event-loop");
}

/// Counts of one read as one ("1 write call", "1 read", "1 connection"), on both
/// ends and in both server models.
#[test]
fn counts_of_one_are_singular() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "one.txt", 1);
    for model in [&[][..], &["--blocking"][..]] {
        let mut args = vec!["--max-clients", "1"];
        args.extend(model);
        let server = Server::start(&args);
        let port = server.port.to_string();
        let out = client(&[
            "--port",
            &port,
            "-V",
            "--no-progress",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("client: 1 write call (0 short)"), "{text}");
        assert!(text.contains("server: 1 read of up to"), "{text}");
        assert!(
            server.wait_for(|out, _| out.contains(" read over")),
            "{}",
            server.stdout()
        );
        assert!(
            server.wait_for(|out, _| out.contains(" 1 read of up to")),
            "{}",
            server.stdout()
        );
        // A second client while the first holds the only slot is refused in the singular.
        let hold = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let busy = client(&[
            "--port",
            &port,
            "--no-progress",
            "--timeout",
            "5",
            path.to_str().unwrap(),
        ]);
        drop(hold);
        let e = stderr(&busy);
        assert!(e.contains("at most 1 connection at once"), "{e}");
    }
}
