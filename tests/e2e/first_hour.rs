//! Issue 36: what a new user met in a first hour. A forward run without a FILE sends the
//! generated stream, a timed run's bar shows the run's time, `-P` and `--bidir` label their
//! intervals, the clock line says why a one-way time is not given, an idle server stops without
//! talking of transfers in flight, and a listener that never answers is announced before the
//! deadline.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];

/// The xxh3 of the first `len` bytes of the generated stream: the tsgen text of the seed's
/// size, again and again (what a reverse stream of `--bytes len` carries).
pub(crate) fn generated_digest(len: u64) -> String {
    use tsperf_sys::testdata::{SEED_FILE_LEN, text};
    let pattern = text(SEED_FILE_LEN as usize);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut left = len;
    while left > 0 {
        let n = left.min(pattern.len() as u64) as usize;
        h.update(&pattern[..n]);
        left -= n as u64;
    }
    format!("{:016x}", h.digest())
}

/// A forward run without FILE sends the generated stream, as iperf3 does without -F: `--bytes`
/// of it (by default the seed's 36 MiB), with `-t` for a time, with `-P` in stripes, with
/// `--bidir` both ways; the bytes are the ones a reverse stream of the same size carries.
#[test]
fn a_forward_run_without_a_file_sends_the_generated_stream() {
    for model in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(server.port, &["--bytes", "3000001", "--chunk", "1024"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "stream");
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["bytes"].as_u64(), Some(3_000_001));
        assert_eq!(v["digest"], generated_digest(3_000_001).as_str());
        assert_eq!(v["server"]["digest"], v["digest"]);
        assert_eq!(v["file"], "generated");

        // The default size is the seed's file: tsl.txt byte for byte.
        let (out, v) = client_json(server.port, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            v["bytes"].as_u64(),
            Some(tsperf_sys::testdata::SEED_FILE_LEN)
        );
        assert_eq!(v["digest"], "ec40a45bcc9c239d", "tsl.txt's digest");

        // More than one pattern: the pattern again, as the server's generated stream is.
        let big = tsperf_sys::testdata::SEED_FILE_LEN + 12345;
        let (out, v) = client_json(server.port, &["--bytes", &big.to_string()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["digest"], generated_digest(big).as_str());

        let (out, v) = client_json(server.port, &["-t", "0.3", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["timed"]["file_bytes"].as_u64(), Some(1 << 20));

        let (out, v) = client_json(server.port, &["-P", "2", "--bytes", "2MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["mode"], "parallel");
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        assert_eq!(v["sum"]["bytes"].as_u64(), Some(2 << 20));

        let (out, v) = client_json(server.port, &["--bidir", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["forward"]["verified"], true, "{v:#}");
        assert_eq!(v["forward"]["digest"], generated_digest(1 << 20).as_str());
        assert_eq!(v["reverse"]["verified"], true, "{v:#}");
        assert_eq!(v["reverse"]["digest"], v["forward"]["digest"]);
    }
    // A FILE and --bytes say two different things.
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "f.txt", 1000);
    let out = client(&["--bytes", "1MiB", path.to_str().unwrap()]);
    assert_fails(&out, 2, "--bytes");
    assert!(stderr(&out).contains("not both"), "{}", stderr(&out));
}

/// Runs `tsclient ARGS` on a pseudo-terminal (util-linux `script`) and returns what the
/// terminal showed; `None` (the test skips) where `script` is missing.
fn on_a_terminal(args: &str) -> Option<(i32, String)> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: the `script` command (util-linux) is not installed");
        return None;
    }
    let cmd = format!("{} {args}", bin("tsclient").display());
    let out = run("script".into(), &["-qefc", &cmd, "/dev/null"]);
    Some((out.status.code().unwrap_or(-1), stdout(&out)))
}

/// A timed run's progress bar counts the run's time, not the file's bytes (it read
/// `2.09 GiB/36 MiB [=====] ETA 0s`); a sized run's counts bytes with an ETA.
#[test]
fn a_timed_runs_bar_shows_its_time() {
    let server = Server::start(&[]);
    let Some((code, screen)) =
        on_a_terminal(&format!("--port {} -t 1 -O 0.5 --bytes 1MiB", server.port))
    else {
        return;
    };
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains(" of 1.5 s ["), "{screen:?}");
    assert!(!screen.contains("ETA"), "{screen:?}");
    assert!(!screen.contains("/1 MiB"), "{screen:?}");
    let Some((code, screen)) =
        on_a_terminal(&format!("--port {} --bytes 64MiB --chunk 102", server.port))
    else {
        return;
    };
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("/64 MiB ["), "{screen:?}");
    assert!(screen.contains("ETA"), "{screen:?}");
}

/// Lines of `text` that start with `label` and carry an interval (`[  0.000-  0.200 s]`).
fn interval_lines<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(label) && l.contains(" s] "))
        .collect()
}

/// `-P N -i S` prints each stream's samples labelled with its number and a SUM line per
/// interval, as iperf3 does; `--bidir -i` labels each direction, and `-P --bidir -i` both.
#[test]
fn parallel_and_bidir_intervals_are_printed_and_labelled() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&["--port", &port, "-P", "2", "-i", "0.2", "-t", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for label in ["[  0]  [", "[  1]  [", "[SUM]  ["] {
        let lines = interval_lines(&text, label);
        assert!(lines.len() >= 3, "{label}: {text}");
    }
    // Each SUM line is its streams' bytes: the samples add up.
    assert!(text.contains("[SUM] "), "{text}");

    let out = client(&["--port", &port, "--bidir", "-i", "0.2", "-t", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(interval_lines(&text, "[TX]  [").len() >= 3, "{text}");
    let rx = interval_lines(&text, "[RX]  [");
    assert!(rx.len() >= 3, "{text}");
    assert!(rx.iter().all(|l| l.contains("received")), "{text}");
    // Nothing unlabelled.
    assert!(interval_lines(&text, "  [").is_empty(), "{text}");

    let out = client(&[
        "--port", &port, "-P", "2", "--bidir", "-i", "0.2", "-t", "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for label in ["[  0][TX]", "[  1][RX]", "[SUM][TX]", "[SUM][RX]"] {
        assert!(interval_lines(&text, label).len() >= 3, "{label}: {text}");
    }
}

/// The clock line never prints a bare `unknown` for a one-way time: a figure too small for the
/// clocks' error bound says so, with the bound.
#[test]
fn the_clock_line_says_why_a_one_way_time_is_missing() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    for chunk in ["102", "10240"] {
        let out = client(&["--port", &port, "--bytes", "4MiB", "--chunk", chunk]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let clock = text
            .lines()
            .find(|l| l.trim_start().starts_with("clock:"))
            .unwrap_or_else(|| panic!("no clock line: {text}"));
        assert!(!clock.contains("unknown"), "{clock}");
        assert!(clock.contains("to the server's first read"), "{clock}");
    }
}

/// An idle server stops at SIGTERM without promising transfers in flight a grace period (there
/// are none), in both models; with one in flight it says how many.
#[test]
fn an_idle_server_stops_without_talk_of_transfers_in_flight() {
    for model in MODELS {
        let mut server = Server::start(model);
        server.signal(libc::SIGTERM);
        assert_eq!(server.wait_exit(), Some(0), "{model:?}");
        let err = server.stderr();
        assert!(
            err.contains("tsserver: stopping: no transfers in flight"),
            "{err}"
        );
        assert!(!err.contains("have 5 s to finish"), "{err}");
    }
    for model in MODELS {
        let mut args = vec!["--grace", "30"];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        // A connection whose hello was accepted: a transfer in flight.
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        use std::io::Write;
        s.write_all(&stream_hello(1 << 20, 1024, "slow.txt"))
            .unwrap();
        assert!(matches!(
            read_one_frame(&mut s),
            Some(tsperf_proto::Frame::Accept { .. })
        ));
        server.signal(libc::SIGTERM);
        assert!(
            server.wait_for(|_, e| e.contains("tsserver: stopping: 1 connection")),
            "{model:?}: {}",
            server.stderr()
        );
        drop(s);
        assert_eq!(server.wait_exit(), Some(0), "{model:?}");
    }
}

/// A listener that accepts and never answers is announced after a second or two, not after a
/// silent `--timeout`: the client says it is connected and waiting for the server's answer.
#[test]
fn a_silent_listener_is_announced_before_the_deadline() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let hold = std::thread::spawn(move || {
        // Accept and keep each connection open, answering nothing, for a bounded time.
        l.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        let end = std::time::Instant::now() + DEADLINE;
        while std::time::Instant::now() < end && held.len() < 3 {
            if let Ok((s, _)) = l.accept() {
                held.push(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_secs(8));
    });
    for mode in [
        &["--bytes", "1MiB"][..],
        &["-R"][..],
        &["--latency", "--count", "3"][..],
    ] {
        let mut args = vec!["--port", &port, "--timeout", "4"];
        args.extend_from_slice(mode);
        let out = client(&args);
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("waiting for the server's answer"),
            "{mode:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    drop(hold);
}
