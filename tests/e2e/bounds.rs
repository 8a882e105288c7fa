//! Issue 14: no client can make the server hold more memory, time or descriptors than bounds the
//! server sets. Memory is read from the server's `/proc/PID/status` (`VmHWM`), never guessed.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::Frame;

const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];

/// A connection to the server on loopback whose receive buffer is as small as the kernel allows,
/// so the server's answers back up quickly into the server.
fn small_window(port: u16) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    sock.connect_timeout(&addr.into(), DEADLINE).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Opens a latency session (binary codec, single framing) and reads its accept.
fn latency_session(port: u16) -> TcpStream {
    let mut s = small_window(port);
    s.write_all(&latency_hello(u64::MAX, 1, 1)).unwrap();
    match read_one_frame(&mut s) {
        Some(Frame::Accept { .. }) => s,
        other => panic!("latency hello not accepted: {other:?}"),
    }
}

/// Opens a stream session announcing `length` bytes in chunks of `chunk` and reads its accept;
/// returns the socket and the accepted read size.
fn stream_session(port: u16, length: u64, chunk: u32) -> (TcpStream, u32) {
    let mut s = small_window(port);
    s.write_all(&stream_hello(length, chunk, "big-chunks.bin"))
        .unwrap();
    match read_one_frame(&mut s) {
        Some(Frame::Accept { read_size, .. }) => (s, read_size),
        other => panic!("stream hello not accepted: {other:?}"),
    }
}

/// Writes `piece` over and over to every socket (non-blocking), at most `most` bytes to each,
/// until none has taken a byte for `quiet`, or `limit` has passed. Returns the bytes each
/// socket took.
fn pump(
    socks: &mut [TcpStream],
    piece: &[u8],
    most: u64,
    quiet: Duration,
    limit: Duration,
) -> Vec<u64> {
    for s in socks.iter() {
        s.set_nonblocking(true).unwrap();
    }
    let mut taken = vec![0u64; socks.len()];
    let start = Instant::now();
    let mut last_progress = Instant::now();
    while last_progress.elapsed() < quiet && start.elapsed() < limit {
        let mut moved = false;
        for (s, n) in socks.iter_mut().zip(taken.iter_mut()) {
            if *n >= most {
                continue;
            }
            match s.write(piece) {
                Ok(k) => {
                    *n += k as u64;
                    moved |= k > 0;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("the server dropped a hostile connection early: {e}"),
            }
        }
        if moved {
            last_progress = Instant::now();
        } else {
            thread::sleep(Duration::from_millis(5));
        }
    }
    taken
}

/// Many binary clock requests back to back, as one buffer.
fn requests(n: u64) -> Vec<u8> {
    (0..n).flat_map(binary_request).collect()
}

/// Issue 14 (1): a latency client that pipelines requests and never reads its answers cannot
/// make the event loop buffer answers without bound, and while it keeps sending, another
/// client is answered.
#[test]
fn pipelining_latency_client_cannot_grow_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let base = server.status_kib("VmHWM");
        let mut hog = latency_session(server.port);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // Sends until told to stop or for at most 10 s: (bytes the server took, gave up).
        let pipeliner = thread::spawn(move || {
            let batch = requests(1000);
            hog.set_write_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let (start, mut sent) = (Instant::now(), 0u64);
            while !flag.load(Ordering::Relaxed) {
                if start.elapsed() > Duration::from_secs(10) {
                    return (sent, true);
                }
                match hog.write(&batch) {
                    Ok(n) => sent += n as u64,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{model:?}: the server dropped the pipeliner: {e}"),
                }
            }
            (sent, false)
        });
        thread::sleep(Duration::from_millis(300));
        let port = server.port.to_string();
        let out = client(&[
            "--port",
            &port,
            "--latency",
            "--count",
            "200",
            "--timeout",
            "20",
        ]);
        stop.store(true, Ordering::Relaxed);
        let (sent, gave_up) = pipeliner.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert!(
            !gave_up,
            "{model:?}: the other client was answered only after the pipeliner stopped"
        );
        let grown = server.status_kib("VmHWM").saturating_sub(base);
        eprintln!("{model:?}: pipelined {sent} bytes of requests: VmHWM +{grown} KiB");
        assert!(
            grown < 16 << 10,
            "{model:?}: the server grew by {grown} KiB while a client pipelined {sent} bytes of requests"
        );
    }
}

/// Issue 14 (2): the client's announced chunk does not size the server's buffers: 64 clients
/// announcing 16 MiB chunks, each with several MiB sent and then stalled, keep the server
/// within its documented bound, with or without a log sink.
#[test]
fn announced_chunk_does_not_size_the_server_buffer() {
    for model in MODELS {
        for log in [
            &["--log", "none"][..],
            &["--log", "file", "--log-file", "/dev/null"],
        ] {
            let mut args = log.to_vec();
            args.extend_from_slice(model);
            let server = Server::start(&args);
            let base = server.status_kib("VmHWM");
            let mut socks = Vec::new();
            for _ in 0..64 {
                let (s, read_size) = stream_session(server.port, 1 << 30, 16 << 20);
                // The model's own bulk read (an event loop's one block serves all its
                // connections), never the client's chunk.
                let most = if model.is_empty() { 1 << 20 } else { 256 << 10 };
                assert!(
                    read_size <= most,
                    "{args:?}: a 16 MiB chunk got reads of {read_size} bytes"
                );
                socks.push(s);
            }
            let piece = vec![b'c'; 1 << 20];
            let taken = pump(
                &mut socks,
                &piece,
                8 << 20,
                Duration::from_millis(500),
                Duration::from_secs(20),
            );
            let least = *taken.iter().min().unwrap();
            assert!(
                least >= 1 << 20,
                "{args:?}: a client sent only {least} bytes"
            );
            let grown = server.status_kib("VmHWM").saturating_sub(base);
            eprintln!("{args:?}: 64 stalled 16 MiB-chunk clients: VmHWM +{grown} KiB");
            // The documented bound (docs/security.md: 512 KiB per blocking connection) times 64.
            assert!(
                grown < 64 * 512,
                "{args:?}: 64 stalled clients with 16 MiB chunks grew the server by {grown} KiB"
            );
        }
    }
}

/// Issue 14: 1000 hostile connections of the worst kind for each model stay within the
/// per-connection bound docs/security.md states: for the event loop, latency clients that pipeline
/// requests and never read (their answers are what the server holds); for the blocking server,
/// stream clients that fill its read buffer and stall.
#[test]
fn thousand_hostile_connections_stay_under_the_bound() {
    // docs/security.md: at most 64 KiB per event-loop connection, 512 KiB per blocking connection.
    for (model, per_conn_kib) in [(MODELS[0], 64u64), (MODELS[1], 512)] {
        let mut args = vec!["--max-clients", "1100"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let base = server.status_kib("VmHWM");
        let mut socks: Vec<TcpStream> = if model.is_empty() {
            (0..1000).map(|_| latency_session(server.port)).collect()
        } else {
            (0..1000)
                .map(|_| stream_session(server.port, 1 << 30, 16 << 20).0)
                .collect()
        };
        let piece = if model.is_empty() {
            requests(200)
        } else {
            vec![b'h'; 64 << 10]
        };
        // Latency clients send until the server stops reading them; stream clients 1 MiB each,
        // enough to fill a blocking connection's read block, then they stall.
        let taken = pump(
            &mut socks,
            &piece,
            if model.is_empty() { u64::MAX } else { 1 << 20 },
            Duration::from_millis(1000),
            Duration::from_secs(60),
        );
        let total: u64 = taken.iter().sum();
        let grown = server.status_kib("VmHWM").saturating_sub(base);
        eprintln!(
            "{model:?}: 1000 hostile connections, {total} bytes sent: VmHWM +{grown} KiB ({} KiB each)",
            grown / 1000
        );
        assert!(
            grown < 1000 * per_conn_kib,
            "{model:?}: 1000 hostile connections ({total} bytes sent) grew the server by {grown} KiB"
        );
        // And it still serves.
        let dir = tempfile::tempdir().unwrap();
        let path = test_file(dir.path(), "after.txt", 100_000);
        drop(socks);
        let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
    }
}

/// Issue 14 (3): with --blocking, a latency client that never reads its answers is cut off at
/// the idle timeout instead of holding its thread and its place for ever.
#[test]
fn blocking_latency_client_that_never_reads_is_closed() {
    let server = Server::start(&["--blocking", "--idle-timeout", "1", "--max-clients", "1"]);
    let mut hog = latency_session(server.port);
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let batch = requests(1000);
    let start = Instant::now();
    // Pipeline until the server stops taking requests (its answers fill both buffers).
    while start.elapsed() < Duration::from_secs(20) {
        match hog.write(&batch) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => break,
        }
    }
    assert!(
        server.wait_for(|_, e| e.contains("took no answer for 1 s")),
        "the silent reader was not cut off: {}",
        server.stderr()
    );
    // Its place is free again.
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--latency",
        "--count",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Sets RLIMIT_NOFILE of the child to `soft`/`hard` before it runs.
fn nofile(cmd: &mut std::process::Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn server_with_nofile(soft: u64, hard: u64, args: &[&str]) -> Server {
    let mut cmd = std::process::Command::new(bin("tsserver"));
    cmd.args(["--port", "0", "--bind", "127.0.0.1"]).args(args);
    nofile(&mut cmd, soft, hard);
    Server::spawn(cmd)
}

/// The soft `Max open files` limit of a process.
fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// Issue 14 (5): the server raises its descriptor limit to the hard limit at start.
#[test]
fn descriptor_limit_is_raised_to_the_hard_limit() {
    for model in MODELS {
        let server = server_with_nofile(64, 4096, model);
        assert_eq!(soft_nofile(server.pid()), 4096, "{model:?}");
    }
}

/// Issue 14 (5): with few descriptors, --max-clients is lowered to what fits (with a warning
/// naming it), and every connection gets an answer: the ones past the limit a refusal with a
/// reason, the silent ones a refusal at the hello timeout. None is left hanging.
#[test]
fn descriptor_exhaustion_refuses_instead_of_hanging() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "1"];
        args.extend_from_slice(model);
        let server = server_with_nofile(64, 64, &args);
        assert!(
            server.wait_for(|_, e| e.contains("--max-clients lowered from 1024 to ")),
            "{model:?}: {}",
            server.stderr()
        );
        let mut socks: Vec<TcpStream> = (0..100)
            .map(|_| {
                let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                s
            })
            .collect();
        let mut reasons = Vec::new();
        for (i, s) in socks.iter_mut().enumerate() {
            match read_one_frame(s) {
                Some(Frame::Refuse { code, reason: r }) => {
                    // Issue 24: a refusal a program can act on, beside its words.
                    if r.contains("server busy") {
                        assert_eq!(code, tsperf_proto::RefuseCode::Limit, "{r}");
                    }
                    reasons.push(r)
                }
                other => panic!("{model:?}: connection {i} got {other:?} instead of a refusal"),
            }
        }
        assert!(
            reasons.iter().any(|r| r.contains("server busy")),
            "{model:?}: {reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r.contains("no complete hello")),
            "{model:?}: {reasons:?}"
        );
        drop(socks);
        // Places free again.
        let dir = tempfile::tempdir().unwrap();
        let path = test_file(dir.path(), "after.txt", 10_000);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
            if out.status.code() == Some(0) {
                assert_eq!(v["verified"], true);
                break;
            }
            assert!(Instant::now() < end, "{model:?}: {}", stderr(&out));
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Issue 14 (7): with a log sink, a client announcing 1-byte chunks does not get one log line
/// per byte: the server's reads ask for at least --log-min-read (default 64) bytes. A read
/// returns what has arrived, so lines are fewer than bytes by less than 64 (about 25 here), but
/// far fewer than one per byte. `--log-min-read 1` gives the seed's behaviour back.
#[test]
fn log_min_read_bounds_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let big = test_file(dir.path(), "ones.txt", 1 << 20);
    let small = test_file(dir.path(), "few.txt", 4096);
    for model in MODELS {
        for (extra, read_size, path) in [
            (&[][..], 64u64, &big),
            (&["--log-min-read", "1"][..], 1, &small),
        ] {
            let log = dir.path().join("reads.log");
            let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
            args.extend_from_slice(extra);
            args.extend_from_slice(model);
            let server = Server::start(&args);
            let (out, v) = client_json(server.port, &["--chunk", "1", path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(v["server"]["read_size"], read_size, "{args:?}");
            let lines = v["server"]["log_lines"].as_u64().unwrap();
            let bytes = v["bytes"].as_u64().unwrap();
            assert_eq!(lines, v["server"]["reads"].as_u64().unwrap() + 2);
            if read_size == 64 {
                assert!(
                    4 * lines < bytes,
                    "{args:?}: {lines} log lines for {bytes} bytes"
                );
            }
        }
    }
    let out = run(bin("tsserver"), &["--log-min-read", "64", "--port", "0"]);
    assert_fails(&out, 2, "--log-min-read");
}

/// Reads until the peer closes or `limit` passes; true if it closed.
fn closes_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Issue 14 (8): a hello accepted and then silence is closed at the hello timeout, not held
/// until the idle timeout; the same for a latency session that never asks.
#[test]
fn silence_after_the_accept_is_held_only_the_hello_timeout() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "1", "--idle-timeout", "60"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let (mut s, _) = stream_session(server.port, 1000, 100);
        assert!(
            closes_within(&mut s, Duration::from_secs(20)),
            "{model:?}: a silent stream was held past the hello timeout"
        );
        assert!(
            server.wait_for(|_, e| e.contains(
                "'big-chunks.bin': 0 of 1000 bytes, then no data within 1 s of the accept"
            )),
            "{model:?}: {}",
            server.stderr()
        );
        let mut l = latency_session(server.port);
        assert!(
            closes_within(&mut l, Duration::from_secs(20)),
            "{model:?}: a silent latency session was held past the hello timeout"
        );
        assert!(
            server.wait_for(|_, e| e.contains("no request within 1 s of the accept")),
            "{model:?}: {}",
            server.stderr()
        );
    }
}

/// Sends `bytes` one at a time, `gap` apart, until the server answers or closes; returns how
/// many were sent and what the server said.
fn trickle(s: TcpStream, bytes: &[u8], gap: Duration) -> (usize, Vec<u8>) {
    let mut r = s.try_clone().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let reader = thread::spawn(move || {
        r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = Vec::new();
        let _ = r.read_to_end(&mut got);
        flag.store(true, Ordering::Relaxed);
        got
    });
    let mut s = s;
    let mut sent = 0;
    for b in bytes {
        if done.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
            break;
        }
        sent += 1;
        thread::sleep(gap);
    }
    (sent, reader.join().unwrap())
}

/// Issue 14 (4): the hello timeout is a deadline from the accept, not a wait that restarts on
/// every byte: a hello sent a byte at a time is refused once the deadline passes.
#[test]
fn hello_deadline_counts_from_the_accept() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "1"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let hello = stream_hello(1000, 100, "trickle.txt");
        let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let (sent, reply) = trickle(s, &hello, Duration::from_millis(250));
        assert!(
            sent < hello.len(),
            "{model:?}: the whole trickled hello was read"
        );
        match tsperf_proto::decode_frame(&reply) {
            Ok(Some((Frame::Refuse { reason: r, .. }, _))) => {
                assert!(r.contains("no complete hello within 1 s"), "{model:?}: {r}")
            }
            other => panic!("{model:?}: {other:?}"),
        }
    }
}

/// Issue 14 (4): the authentication answer has the same deadline, counted from the accept.
#[test]
fn auth_answer_deadline_counts_from_the_accept() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "a key of more than sixteen bytes").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "1", "--auth-key", key.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&stream_hello(1000, 100, "auth.txt")).unwrap();
        assert!(
            matches!(read_one_frame(&mut s), Some(Frame::Challenge(_))),
            "{model:?}: no challenge"
        );
        let (sent, reply) = trickle(s, &[0u8; 32], Duration::from_millis(250));
        assert!(sent < 32, "{model:?}: the whole trickled answer was read");
        match tsperf_proto::decode_frame(&reply) {
            Ok(Some((Frame::Refuse { reason: r, .. }, _))) => assert!(
                r.contains("no authentication answer within 1 s"),
                "{model:?}: {r}"
            ),
            other => panic!("{model:?}: {other:?}"),
        }
    }
}
