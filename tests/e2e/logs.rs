//! The server's log sinks (`--log stdout|file|none`) and diagnostics: a line per read, complete
//! after a transfer and a SIGTERM, never torn by concurrent clients, bounded against a client
//! sending a byte at a time, unforgeable by a file name, refused when the file could stall, and
//! honest about lines lost on a full disk; diagnostics coloured only on a terminal.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use std::io::Write;
use std::net::TcpStream;
use tsperf_proto::Frame;

/// A per-read line: `TIMESTAMP conn=N seq=N bytes=N total=N`.
fn is_read_line(l: &str) -> bool {
    let mut f = l.split(' ');
    let stamp = f.next().unwrap_or("");
    let fields: Vec<&str> = f.collect();
    stamp.ends_with('Z')
        && fields.len() == 4
        && ["conn=", "seq=", "bytes=", "total="]
            .iter()
            .zip(&fields)
            .all(|(k, v)| v.strip_prefix(k).is_some_and(|n| n.parse::<u64>().is_ok()))
}

/// A start or end line of a transfer.
fn is_event_line(l: &str) -> bool {
    l.contains(" conn=") && (l.contains(" event=\"start\" ") || l.contains(" event=\"end\" "))
}

fn run_8mib(port: u16, dir: &std::path::Path) -> serde_json::Value {
    let path = test_file(dir, "eight.txt", 8 << 20);
    let (out, v) = client_json(port, &["--chunk", "1024", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    v
}

/// --log stdout writes one line per read (plus start and end) to stdout, and the
/// report counts them.
#[test]
fn stdout_sink_one_line_per_read() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut args = vec!["--log", "stdout"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        let reads = v["server"]["reads"].as_u64().unwrap();
        assert_eq!(v["server"]["log"], "stdout");
        assert_eq!(v["server"]["log_lines"].as_u64().unwrap(), reads + 2);
        assert!(server.wait_for(|o, _| o.contains("file[eight.txt] read over .")));
        let out = server.stdout();
        let read_lines = out.lines().filter(|l| is_read_line(l)).count() as u64;
        assert_eq!(read_lines, reads, "{model:?}");
        assert_eq!(out.lines().filter(|l| is_event_line(l)).count(), 2);
    }
}

/// --log file holds exactly log_lines lines after the transfer, and still after a
/// SIGTERM shutdown, which exits 0.
#[test]
fn file_sink_complete_after_transfer_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let log = dir.path().join(format!("server{}.log", model.len()));
        let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        let lines = v["server"]["log_lines"].as_u64().unwrap();
        assert_eq!(v["server"]["log"], "file");
        assert_eq!(lines, v["server"]["reads"].as_u64().unwrap() + 2);
        let count = || std::fs::read_to_string(&log).unwrap().lines().count() as u64;
        assert_eq!(count(), lines, "{model:?}: log file after the transfer");
        server.signal(libc::SIGTERM);
        assert_eq!(server.wait_exit(), Some(0));
        assert_eq!(count(), lines, "{model:?}: log file after SIGTERM");
        assert!(!server.stdout().lines().any(is_read_line));
    }
}

/// --log none writes no per-read lines anywhere and reports none.
#[test]
fn none_sink_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut args = vec!["--log", "none"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        assert_eq!(v["server"]["log"], "none");
        assert_eq!(v["server"]["log_lines"], 0);
        assert!(server.wait_for(|o, _| o.contains("read over")));
        assert!(
            !server
                .stdout()
                .lines()
                .any(|l| is_read_line(l) || is_event_line(l))
        );
        assert!(!server.stderr().lines().any(is_read_line));
    }
    assert!(!dir.path().join("tsserver.log").exists());
}

/// 16 concurrent clients with --log file: the file's lines equal the sum of their
/// log_lines, and every line parses (none is torn), in both server models.
#[test]
fn concurrent_clients_file_log_not_torn() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let log = dir.path().join(format!("many{}.log", model.len()));
        let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let port = server.port.to_string();
        let children: Vec<_> = (0..16)
            .map(|i| {
                let path = test_file(dir.path(), &format!("c{i}.txt"), 512 * 1024 + i * 101);
                Command::new(bin("tsclient"))
                    .args([
                        "--port",
                        &port,
                        "--json",
                        "--chunk",
                        ["102", "1024"][i as usize % 2],
                    ])
                    .arg(&path)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut total = 0;
        for child in children {
            let out = wait_child(child);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["verified"], true);
            total += v["server"]["log_lines"].as_u64().unwrap();
        }
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.lines().count() as u64, total, "{model:?}");
        for l in text.lines() {
            assert!(
                is_read_line(l) || is_event_line(l),
                "torn or foreign line: {l:?}"
            );
        }
        assert_eq!(
            text.lines().filter(|l| l.contains("event=\"end\"")).count(),
            16
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

/// A client sending one byte per segment (TCP_NODELAY) gets at most two log lines
/// per --log-min-read bytes, plus one per byte of the last two --log-min-read (and its start
/// and end), in both models and both sinks; before, a line per byte or nearly (52.7 log bytes
/// per data byte).
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
            // Two lines per 64 bytes; a line per byte of the last two gates (128 bytes), read
            // as they come so no read waits for bytes that will not; a start, an end.
            let bound = 2 * data.len() as u64 / 64 + 2 * 64 + 2;
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

/// A file name that looks like log fields stays one quoted value in the start
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

/// A --log-file that is not a regular file (a pipe, a FIFO) is refused at start
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

/// On a full disk the report counts the log lines that could not be written
/// (the file holds exactly the ones it says were), and once space frees nothing of the failed
/// transfer is written later. Needs a small tmpfs (root: ignored unless asked for).
#[test]
#[ignore = "needs root: a tmpfs mount (.ci/run runs it as root)"]
fn a_full_log_disk_counts_lost_lines_and_writes_nothing_stale() {
    let mnt = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tsperf-log-test"])
        .arg(mnt.path())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(mounted, "cannot mount a tmpfs here: this test needs root");
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

/// Diagnostics are coloured only on a terminal, and never with NO_COLOR set.
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
