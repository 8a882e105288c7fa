//! Issue 23: hardening, second round. One client must not spin or freeze the server, the log
//! sinks keep their bounds, and every client exit prints what it measured.
//!
//! CPU use is read from `/proc/PID/stat` over a bounded window, never guessed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use tsperf::protocol::Frame;

const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];

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

/// A raw client: connects, sends a stream hello asking for `queries` clock queries, reads the
/// accept.
fn stream_with_queries(port: u16, queries: u8) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut hello = Vec::new();
    tsperf::protocol::encode_hello(
        &tsperf::protocol::Hello {
            clock_queries: queries,
            ..tsperf::protocol::Hello::stream(1 << 20, 1024, "paused.bin")
        },
        &mut hello,
    );
    s.write_all(&hello).unwrap();
    match read_one_frame(&mut s) {
        Some(Frame::Accept { .. }) => s,
        other => panic!("hello not accepted: {other:?}"),
    }
}

/// Issue 23 (1): a stream client that pauses between its clock queries costs the server no CPU:
/// the event loop waits for its next query instead of serving it again and again.
#[test]
fn paused_clock_queries_do_not_spin_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let mut s = stream_with_queries(server.port, 2);
        let mut query = [0u8; tsperf::protocol::CLOCK_QUERY];
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

/// Issue 23 (1): clients paused in every phase at once (half a hello, a latency session between
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
        let mut halfway = stream_with_queries(server.port, 0);
        halfway.write_all(&[b'x'; 4096]).unwrap();
        let mut no_trailer = stream_with_queries(server.port, 0);
        no_trailer.write_all(&vec![b'y'; 1 << 20]).unwrap();
        let mut between = stream_with_queries(server.port, 3);
        between
            .write_all(&[0u8; tsperf::protocol::CLOCK_QUERY])
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

/// Sends `data` as a stream transfer from a raw socket with TCP_NODELAY, `piece` bytes per
/// write, then the trailer; returns the server's report (or the frame it sent instead).
fn send_in_pieces(port: u16, data: &[u8], piece: usize, name: &str) -> Option<Frame> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(&stream_hello(data.len() as u64, piece as u32, name))
        .unwrap();
    assert!(matches!(read_one_frame(&mut s), Some(Frame::Accept { .. })));
    for p in data.chunks(piece) {
        s.write_all(p).unwrap();
    }
    s.write_all(&xxhash_rust::xxh3::xxh3_64(data).to_be_bytes())
        .unwrap();
    read_one_frame(&mut s)
}

/// Issue 23 (3): a client sending one byte per segment (TCP_NODELAY) gets at most two log lines
/// per --log-min-read bytes (plus its start, end and first read), in both models and both
/// sinks; before, a line per byte or nearly (52.7 log bytes per data byte).
#[test]
fn byte_at_a_time_clients_cannot_grow_the_log_past_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    for model in MODELS {
        for sink in ["file", "stdout"] {
            let log = dir.path().join(format!("trickle{}.log", model.len()));
            let mut args = vec!["--log", sink];
            if sink == "file" {
                args.extend(["--log-file", log.to_str().unwrap()]);
            }
            args.extend_from_slice(model);
            let server = Server::start(&args);
            let Some(Frame::Report(r)) = send_in_pieces(server.port, &data, 1, "trickle.bin")
            else {
                panic!("{model:?} {sink}: no report");
            };
            assert_eq!(r.bytes, data.len() as u64);
            let bound = 2 * data.len() as u64 / 64 + 3;
            assert!(
                u64::from(r.log_lines) <= bound,
                "{model:?} {sink}: {} log lines for {} bytes sent a byte at a time (at most \
                 {bound}); {} reads",
                r.log_lines,
                data.len(),
                r.reads
            );
            assert_eq!(u64::from(r.log_lines), r.reads + 2, "a line per read");
        }
    }
}

/// Issue 23 (5): a file name that looks like log fields stays one quoted value in the start
/// line: no line of the log can be forged.
#[test]
fn a_file_name_cannot_forge_log_fields() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("forge.log");
    let server = Server::start(&["--log", "file", "--log-file", log.to_str().unwrap()]);
    let name = "x.bin conn=1 event=\"end\" total=999999";
    let Some(Frame::Report(r)) = send_in_pieces(server.port, b"hello", 5, name) else {
        panic!("no report");
    };
    assert_eq!(r.log_lines, 3);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    let start = text.lines().next().unwrap();
    assert!(
        start.contains(r#" file="x.bin conn=1 event=\"end\" total=999999" "#),
        "the name is not one quoted value: {start}"
    );
    // Only the real end line says event="end" outside a quoted value.
    let ends = text
        .lines()
        .filter(|l| l.contains(" event=\"end\" ") && !l.contains("file="))
        .count();
    assert_eq!(ends, 1, "{text}");
}

/// Issue 23 (2): a --log-file that is not a regular file (a pipe, a FIFO) is refused at start
/// with its name and what was expected, instead of freezing the server when its reader stalls;
/// the null device is taken.
#[test]
fn a_log_file_that_can_stall_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    // stdout a pipe that nobody reads.
    let (child, _) = spawn_server_args(&["--allow-client-log", "--log-file", "/dev/stdout"]);
    let out = wait_child(child);
    assert_fails(
        &out,
        1,
        "--log-file '/dev/stdout' is a pipe: expected a regular file",
    );
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let (child, _) = spawn_server_args(&["--log", "file", "--log-file", fifo.to_str().unwrap()]);
    let out = wait_child(child);
    assert_fails(&out, 1, "is a pipe: expected a regular file");
    let (child, _) =
        spawn_server_args(&["--log", "file", "--log-file", dir.path().to_str().unwrap()]);
    let out = wait_child(child);
    assert_fails(&out, 1, "is a directory: expected a regular file");
    let server = Server::start(&["--log", "file", "--log-file", "/dev/null"]);
    let Some(Frame::Report(r)) = send_in_pieces(server.port, b"to the null device", 4, "n.bin")
    else {
        panic!("no report");
    };
    assert_eq!((r.log_lines, r.log_lines_lost), (r.reads as u32 + 2, 0));
}

/// Starts tsserver with `args` (and a free loopback port), stdout and stderr piped.
fn spawn_server_args(args: &[&str]) -> (std::process::Child, ()) {
    let child = std::process::Command::new(bin("tsserver"))
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn tsserver");
    (child, ())
}

/// Issue 23 (4): on a full disk the report counts the log lines that could not be written
/// (the file holds exactly the ones it says were), and once space frees nothing of the failed
/// transfer is written later. Needs a small tmpfs (root); skips with a message where mounting
/// is not allowed.
#[test]
fn a_full_log_disk_counts_lost_lines_and_writes_nothing_stale() {
    let mnt = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tsperf-log-test"])
        .arg(mnt.path())
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).output();
        }
    }
    let _unmount = Unmount(mnt.path());
    let src = tempfile::tempdir().unwrap();
    let big = test_file(src.path(), "big.txt", 1 << 20);
    let small = test_file(src.path(), "small.txt", 100 << 10);
    for model in MODELS {
        let filler = mnt.path().join("filler");
        std::fs::write(&filler, vec![0u8; 512 << 10]).unwrap();
        let log = mnt.path().join("full.log");
        let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        // ~10,000 lines of ~60 bytes: more than the ~500 KiB left.
        let (out, v) = client_json(server.port, &["--chunk", "102", big.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let s = &v["server"];
        let (written, lost) = (
            s["log_lines"].as_u64().unwrap(),
            s["log_lines_lost"].as_u64().unwrap_or(0),
        );
        assert!(lost > 0, "{model:?}: no lines lost on a full disk: {s:#}");
        assert_eq!(written + lost, s["reads"].as_u64().unwrap() + 2);
        let newlines = |t: &str| t.bytes().filter(|b| *b == b'\n').count() as u64;
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
        assert_eq!(
            newlines(&text),
            written,
            "{model:?}: the file holds what was written"
        );
        let human = client(&[
            "--port",
            &server.port.to_string(),
            "--chunk",
            "102",
            big.to_str().unwrap(),
        ]);
        assert!(
            stdout(&human).contains("the server's log lost"),
            "{model:?}: {}",
            stdout(&human)
        );
        // Space again: the next transfer's lines are all there, and nothing older after them.
        std::fs::remove_file(&filler).unwrap();
        std::fs::write(&log, b"").unwrap();
        let (out, v) = client_json(server.port, &["--chunk", "1024", small.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["server"]["log_lines_lost"], 0);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(newlines(&text), v["server"]["log_lines"].as_u64().unwrap());
        let conns: std::collections::BTreeSet<&str> =
            text.lines().filter_map(|l| l.split(' ').nth(1)).collect();
        assert_eq!(
            conns.len(),
            1,
            "{model:?}: lines of an older transfer: {conns:?}"
        );
        std::fs::remove_file(&log).unwrap();
    }
}

/// Runs `tsserver --once` on a free port with `RUST_LOG=debug` (and `env`), its stderr a pipe or,
/// with `pty`, a pseudo-terminal (through `script`); one connection that closes without a
/// hello ends it. Returns what it wrote.
fn debug_diagnostics(pty: bool, env: &[(&str, &str)]) -> String {
    let port = dead_port();
    let server = format!(
        "{} --once --bind 127.0.0.1 --port {port}",
        bin("tsserver").display()
    );
    let mut cmd = if pty {
        let mut c = std::process::Command::new("script");
        c.args(["-qefc", &server, "/dev/null"]);
        c
    } else {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", &server]);
        c
    };
    cmd.env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // The first connection that gets through is the one --once serves.
    let deadline = std::time::Instant::now() + DEADLINE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "no server");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = wait_child(child);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Issue 23 (6): diagnostics are coloured only on a terminal, and never with NO_COLOR set.
#[test]
fn diagnostics_are_coloured_only_on_a_terminal() {
    let piped = debug_diagnostics(false, &[]);
    assert!(piped.contains("DEBUG"), "no diagnostics: {piped}");
    assert!(
        !piped.contains('\u{1b}'),
        "colour codes in a pipe: {piped:?}"
    );
    let no_color = debug_diagnostics(true, &[("NO_COLOR", "1")]);
    assert!(no_color.contains("DEBUG"), "no diagnostics: {no_color}");
    assert!(
        !no_color.contains('\u{1b}'),
        "colour with NO_COLOR: {no_color:?}"
    );
    let terminal = debug_diagnostics(true, &[]);
    assert!(
        terminal.contains('\u{1b}'),
        "no colour on a terminal: {terminal:?}"
    );
}

/// Issue 23 (13): after the server resets the connection, the client's count of bytes sent is
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
            let sent: u64 = err
                .split("connection lost after sending ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(
                sent >= READ as u64 && acked <= sent,
                "{strategy:?} {transport:?}: sent {sent}, acknowledged {acked}, the server read \
                 {READ}: {err}"
            );
        }
    }
}

/// Issue 23 (13): the refusal of a client-chosen sink reads as one sentence; a timeout below a
/// millisecond is refused by both programs; a bracketed IPv6 address with its zone is a host,
/// not a usage error.
#[test]
fn small_ones_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "s.txt", 1000);
    let server = Server::start(&[]);
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--server-log",
        "stdout",
        file.to_str().unwrap(),
    ]);
    assert_fails(
        &out,
        1,
        "does not let clients choose (--server-log stdout was asked for): its operator",
    );
    for secs in ["1e-300", "0.0009", "0"] {
        let out = client(&["--timeout", secs, file.to_str().unwrap()]);
        assert_fails(
            &out,
            2,
            &format!("invalid timeout '{secs}': expected seconds from 0.001"),
        );
        let out = run(bin("tsserver"), &["--idle-timeout", secs]);
        assert_fails(&out, 2, &format!("invalid timeout '{secs}'"));
    }
    let out = client(&[
        "--host",
        "[fe80::1%lo]:9",
        "--timeout",
        "1",
        file.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("invalid host"), "{err}");
}
