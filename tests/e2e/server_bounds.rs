//! No client can make the server hold more memory, time or descriptors than bounds the
//! server sets. Memory is read from the server's `/proc/PID/status` (`VmHWM`), never guessed.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::{Frame, Hello};

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

/// A latency client that pipelines requests and never reads its answers cannot
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

/// The client's announced chunk does not size the server's buffers: 64 clients
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

/// 1000 hostile connections of the worst kind for each model stay within the
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

/// With --blocking, a latency client that never reads its answers is cut off at
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

/// The server raises its descriptor limit to the hard limit at start.
#[test]
fn descriptor_limit_is_raised_to_the_hard_limit() {
    for model in MODELS {
        let server = server_with_nofile(64, 4096, model);
        assert_eq!(soft_nofile(server.pid()), 4096, "{model:?}");
    }
}

/// With few descriptors, --max-clients is lowered to what fits (with a warning
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
                    // A refusal a program can act on, beside its words.
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

/// With a log sink, a client announcing 1-byte chunks does not get one log line
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

/// A hello accepted and then silence is closed at the hello timeout, not held
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

/// The hello timeout is a deadline from the accept, not a wait that restarts on
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

/// The authentication answer has the same deadline, counted from the accept.
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

/// The user and system CPU time of process `pid` so far (`/proc/PID/stat`, clock ticks).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The CPU share (0.0-1.0 of one core) `pid` used while `window` passed.
fn cpu_share_over(pid: u32, window: Duration) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let before = cpu_ticks(pid);
    std::thread::sleep(window);
    (cpu_ticks(pid) - before) as f64 / hz / window.as_secs_f64()
}

/// A stream client that pauses between its clock queries costs the server no CPU:
/// the event loop waits for its next query instead of serving it again and again.
#[test]
fn paused_clock_queries_do_not_spin_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let mut s = accepted(server.port, &paused(2));
        let mut query = [0u8; tsperf_proto::CLOCK_QUERY];
        query[15] = 1;
        s.write_all(&query).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Time(t)) => assert_eq!(t.seq, 0),
            other => panic!("no answer to query 0: {other:?}"),
        }
        // Query 1 never comes (within the window): the server has nothing to do.
        let share = cpu_share_over(server.pid(), Duration::from_secs(1));
        assert!(
            share < 0.2,
            "{model:?}: the server used {:.0}% of a CPU while its only client paused",
            share * 100.0
        );
        drop(s);
    }
}

/// Clients paused in every phase at once (half a hello, a latency session between
/// requests, a stream halfway through its data, a stream whose trailer is late, a stream
/// between clock queries) cost the server no CPU while they pause.
#[test]
fn clients_paused_in_every_phase_do_not_spin_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let connect = || {
            let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            s
        };
        let mut half_hello = connect();
        half_hello
            .write_all(&stream_hello(10, 10, "half.bin")[..10])
            .unwrap();
        let mut latency = connect();
        latency.write_all(&latency_hello(100, 1, 1)).unwrap();
        assert!(matches!(
            read_one_frame(&mut latency),
            Some(Frame::Accept { .. })
        ));
        latency.write_all(&binary_request(0)).unwrap();
        let mut halfway = accepted(server.port, &paused(0));
        halfway.write_all(&[b'x'; 4096]).unwrap();
        let mut no_trailer = accepted(server.port, &paused(0));
        no_trailer.write_all(&vec![b'y'; 1 << 20]).unwrap();
        let mut between = accepted(server.port, &paused(3));
        between
            .write_all(&[0u8; tsperf_proto::CLOCK_QUERY])
            .unwrap();
        // The latency answer and the clock answer are out: everyone now waits.
        let mut answer = [0u8; 4];
        latency.read_exact(&mut answer).unwrap();
        assert!(matches!(read_one_frame(&mut between), Some(Frame::Time(_))));
        std::thread::sleep(Duration::from_millis(100));
        let share = cpu_share_over(server.pid(), Duration::from_secs(1));
        assert!(
            share < 0.2,
            "{model:?}: the server used {:.0}% of a CPU while its five clients paused",
            share * 100.0
        );
    }
}

/// A timed run is cut off its grace (10 s) after its time, whatever still
/// arrives, in both models: a client trickling a byte a second, and one that sent one byte and
/// fell silent, each get the Abort saying so well before the idle timeout (60 s here). The
/// blocking model cut the first at 66 s (a turn of 64 one-byte reads) and the second at the
/// idle timeout.
#[test]
fn a_timed_run_is_cut_off_at_its_time_and_grace() {
    let runs: Vec<_> = EVERY_MODEL
        .iter()
        .map(|model| std::thread::spawn(move || timed_run_cut_off(model)))
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

fn timed_run_cut_off(model: &[&str]) {
    let mut args = vec!["--idle-timeout", "60"];
    args.extend_from_slice(model);
    let server = Server::start(&args);
    let mut trickle = timed_stream(server.port, 500);
    let trickler = std::thread::spawn(move || {
        // A byte a second, for at most 40 s, while the server takes them.
        for _ in 0..40 {
            if trickle.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let mut silent = timed_stream(server.port, 500);
    silent.write_all(b"x").unwrap();
    // Due within the grace after its time; 30 s is well before the idle timeout, which the
    // blocking model waited for.
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    match read_one_frame(&mut silent) {
        Some(tsperf_proto::Frame::Abort(why)) => {
            assert!(why.contains("past its time"), "{model:?}: {why}");
        }
        other => panic!("{model:?}: the silent timed run got {other:?}"),
    }
    trickler.join().unwrap();
    assert!(
        server.wait_for(|_, e| e.matches("past its time").count() >= 2),
        "{model:?}: {}",
        server.stderr()
    );
}

/// A reverse client that stops reading is cut off at the idle timeout in both
/// models. The blocking model took 2-3 times as long: each blocking write waited the whole
/// timeout and came back with the few bytes the client's kernel still squeezed in, which
/// counted as progress.
#[test]
fn a_stalled_reverse_stream_is_cut_off_at_the_idle_timeout() {
    for model in EVERY_MODEL {
        let mut args = vec!["--idle-timeout", "3"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let start = std::time::Instant::now();
        let _s = reverse_stream(server.port, 1 << 30, 10240);
        let mut cut = None;
        while start.elapsed() < Duration::from_secs(20) {
            if server.stderr().contains("took no data for 3 s") {
                cut = Some(start.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let cut = cut.unwrap_or_else(|| panic!("{model:?}: not cut off: {}", server.stderr()));
        // The idle timeout, the blocking model's write slice (at most 1 s) and slack.
        assert!(
            cut < Duration::from_secs(5),
            "{model:?}: cut off after {cut:?}, the idle timeout is 3 s"
        );
    }
}

/// Reverse streams' send buffers come out of one budget (`--send-buffers`):
/// while half of it is free a stream keeps the kernel's autotuning, then it gets a fixed
/// 256 KiB buffer, then it is refused with the reason, in both models; a stream's share comes
/// back when it ends. Before, 600 clients that never read pinned 3.75 MiB each, past the
/// kernel's TCP memory pressure.
#[test]
fn reverse_send_buffers_come_out_of_one_budget() {
    for model in EVERY_MODEL {
        // Half of 9 MiB holds one autotuned buffer (tcp_wmem's 4 MiB), the rest 20 small ones.
        let mut args = vec!["--send-buffers", "9MiB"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        // Accepted (its Accept read) before the next comes: its share is taken by then.
        let first = Hello {
            reverse: true,
            clock_queries: 0,
            ..Hello::stream(1 << 30, 10240, "")
        };
        let mut held = vec![accepted(server.port, &first)];
        // A stream while the autotuned half is taken: a fixed buffer of 256 KiB.
        let (out, v) = client_json(server.port, &["-R", "--bytes", "4MiB"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
        let sndbuf = v["server"]["sndbuf"].as_u64().unwrap();
        assert!(sndbuf <= 256 << 10, "{model:?}: {v:#}");
        // Fill the rest with clients that never read; the next is refused, saying why.
        let mut refused = None;
        for _ in 0..64 {
            let mut s = reverse_stream(server.port, 1 << 30, 10240);
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut first = [0u8; 3];
            s.read_exact(&mut first).unwrap();
            if first[0] == 7 {
                refused = Some(s);
                break;
            }
            held.push(s);
        }
        assert!(refused.is_some(), "{model:?}: never refused");
        assert!(
            held.len() <= 1 + 20,
            "{model:?}: {} streams held",
            held.len()
        );
        let (out, v) = client_json(server.port, &["-R", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(1), "{model:?}");
        assert!(
            v["error"].as_str().unwrap().contains("--send-buffers"),
            "{model:?}: {v:#}"
        );
        // Their shares come back when they go.
        drop(held);
        let mut back = false;
        for _ in 0..50 {
            let (out, _) = client_json(server.port, &["-R", "--bytes", "1MiB"]);
            if out.status.code() == Some(0) {
                back = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            back,
            "{model:?}: the budget never came back: {}",
            server.stderr()
        );
    }
}

/// A served file's stream holds no buffer of its chunk's size, however many there
/// are: 300 streams of 16 MiB chunks that read nothing stay within the documented memory per
/// connection (docs/security.md: 64 KiB in the event loop, which lends one read-ahead buffer to
/// all; 512 KiB with `--blocking`, a thread's stack and buffers). Past 1024 (the mapping guard's
/// slots) each took a read buffer of its chunk: 1100 took 1.25 GB. (300, not 1100: on
/// loopback an autotuned send buffer starts near 2 MiB, its segments being 64 KiB, and 1100
/// streams under a budget that autotunes them all took the kernel's TCP memory to its limit,
/// which made the other tests' sockets ignore their low-water marks.)
#[test]
fn served_streams_hold_no_buffer_each() {
    use std::io::Read as _;
    const STREAMS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    std::fs::File::create(dir.path().join("big.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    for (model, each_kib) in [(&[][..], 64), (&["--blocking"][..], 512)] {
        // The default send buffer budget; each client's window a few KiB.
        let mut args = vec!["--serve", dir.path().to_str().unwrap()];
        args.extend(["--max-clients", "1200"]);
        // One event loop (its memory is what is measured); the blocking model has none.
        args.extend_from_slice(if model.is_empty() {
            &["--threads", "1"][..]
        } else {
            model
        });
        let server = Server::start(&args);
        let (out, _) = client_json(
            server.port,
            &["-R", "big.bin", "--chunk", "1m", "-t", "0.2"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let before = server.status_kib("VmRSS");
        let mut held = Vec::new();
        for _ in 0..STREAMS {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.set_recv_buffer_size(4096).unwrap();
            let addr: std::net::SocketAddr = ([127, 0, 0, 1], server.port).into();
            sock.connect(&addr.into()).unwrap();
            let mut s: std::net::TcpStream = sock.into();
            let mut hello = Vec::new();
            tsperf_proto::encode_hello(
                &tsperf_proto::Hello {
                    reverse: true,
                    clock_queries: 0,
                    ..tsperf_proto::Hello::stream(0, 16 << 20, "big.bin")
                },
                &mut hello,
            );
            s.write_all(&hello).unwrap();
            held.push(s);
        }
        // Each has its Accept and the stream under way.
        for s in &mut held {
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            let mut accept = [0u8; ACCEPT_LEN];
            s.read_exact(&mut accept).unwrap();
            if accept[0] != 1 {
                // A refusal: its code and reason follow (a refusal was seen in 2 of 10 runs of
                // the server_bounds tests together, its reason not yet known; never alone).
                let mut rest = vec![0u8; 1100];
                let n = s.read(&mut rest).unwrap_or(0);
                let reason = String::from_utf8_lossy(&accept).into_owned()
                    + &String::from_utf8_lossy(&rest[..n]);
                panic!("{model:?}: not accepted (tag {}): {reason:?}", accept[0]);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        let grown = server.status_kib("VmRSS").saturating_sub(before);
        eprintln!("{model:?}: {STREAMS} served streams of 16 MiB chunks: +{grown} KiB");
        assert!(
            grown < STREAMS * each_kib,
            "{model:?}: {STREAMS} served streams grew the server by {grown} KiB"
        );
        drop(held);
    }
}

/// The generated text (36 MiB, about 140 ms of a CPU to make) is made off the
/// event loop: while the first reverse stream waits for it, the loop answers others. Here a
/// clock query on the same one-loop server is answered before that stream's first byte;
/// before, the loop stalled making the text, then sent the stream, then answered.
#[test]
fn the_generated_text_is_made_off_the_event_loop() {
    let server = Server::start(&["--threads", "1"]);
    let mut rev = reverse_stream(server.port, 1 << 20, 10240);
    rev.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut accept = [0u8; ACCEPT_LEN];
    rev.read_exact(&mut accept).unwrap();
    assert_eq!(accept[0], 1);
    let mut lat = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    lat.set_read_timeout(Some(DEADLINE)).unwrap();
    lat.write_all(&latency_hello(1, 1, 1)).unwrap();
    assert!(matches!(
        read_one_frame(&mut lat),
        Some(tsperf_proto::Frame::Accept { .. })
    ));
    lat.write_all(&binary_request(0)).unwrap();
    let mut answer = [0u8; 1];
    lat.read_exact(&mut answer).unwrap();
    rev.set_nonblocking(true).unwrap();
    let mut data = [0u8; 1];
    let early = rev.read(&mut data);
    assert!(
        early
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the reverse stream's data came before the clock answer: {early:?}"
    );
    // And the stream goes on once the text is there.
    rev.set_nonblocking(false).unwrap();
    let mut all = Vec::new();
    rev.read_to_end(&mut all).unwrap();
    assert_eq!(all.len(), (1 << 20) + tsperf_proto::sent::REVERSE_TAIL);
}

/// A stream hello of 1 MiB at 1024-byte chunks asking for `queries` clock queries.
fn paused(queries: u8) -> tsperf_proto::Hello {
    tsperf_proto::Hello {
        clock_queries: queries,
        ..tsperf_proto::Hello::stream(1 << 20, 1024, "paused.bin")
    }
}
