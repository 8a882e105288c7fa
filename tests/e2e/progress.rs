//! What a client shows while it runs: a progress bar only on a terminal (with the run's time
//! for a timed run, and in latency mode), and interval lines labelled per stream for `-P` and
//! `--bidir`.

use crate::common::*;
use std::process::Command;

/// Latency mode shows a progress bar on a terminal.
#[test]
fn latency_progress_bar_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: the `script` command (util-linux) is not installed");
        return;
    }
    let server = Server::start(&[]);
    let cmd = format!(
        "{} --port {} --latency --framing split --count 20 --warmup 0",
        bin("tsclient").display(),
        server.port
    );
    let out = run("script".into(), &["-qefc", &cmd, "/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let screen = stdout(&out);
    assert!(screen.contains("/20 clock queries"), "{screen:?}");
    assert!(screen.contains("round trip: min "), "{screen:?}");
}

/// Without a terminal there is no progress bar: stderr stays empty and stdout is one
/// JSON object.
#[test]
fn no_progress_bar_without_terminal() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "p.txt", 4 << 20);
    let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(v["verified"], true);
    assert!(out.stderr.is_empty(), "stderr: {:?}", stderr(&out));
}

/// On a real pseudo-terminal (`script`) the bar renders, and the report after it is
/// intact and readable.
#[test]
fn progress_bar_renders_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: the `script` command (util-linux) is not installed");
        return;
    }
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tty.txt", 6 << 20);
    let cmd = format!(
        "{} --port {} --sndbuf 65536 {}",
        bin("tsclient").display(),
        server.port,
        path.display()
    );
    let out = run("script".into(), &["-qefc", &cmd, "/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let screen = stdout(&out);
    assert!(
        screen.contains("MiB/s, ETA"),
        "no progress bar drawn: {screen:?}"
    );
    assert!(screen.contains("/6 MiB ["), "{screen:?}");
    assert!(!screen.contains("panicked"));
    // Read it as a terminal shows it: the bar's line is cleared (ESC [2K) and returned to (CR),
    // then the report follows whole, each of its lines starting a line.
    let shown = screen.replace("\u{1b}[2K", "");
    let clean: Vec<&str> = shown.split(['\r', '\n']).collect();
    assert!(
        clean.iter().any(|l| l.starts_with("begin sec[")),
        "{screen:?}"
    );
    assert!(clean.contains(&"file[tty.txt] read over ."), "{screen:?}");
    assert!(
        clean
            .iter()
            .any(|l| l.starts_with("[  0] ") && l.contains(" 6 MiB ") && l.ends_with("sender")),
        "{screen:?}"
    );
    assert!(
        clean.iter().any(|l| l.starts_with("verified: ")),
        "{screen:?}"
    );
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

/// Lines of `text` that start with `label` and are an interval's row (`0.00-0.20   sec`, no
/// summary's `sender` or `receiver`).
fn interval_lines<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(label) && l.contains(" sec "))
        .filter(|l| !l.ends_with("sender") && !l.ends_with("receiver"))
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
    for label in ["[  0] ", "[  1] ", "[SUM] "] {
        let lines = interval_lines(&text, label);
        assert!(lines.len() >= 3, "{label}: {text}");
    }
    // Each SUM line is its streams' bytes: the samples add up.
    assert!(text.contains("[SUM] "), "{text}");

    let out = client(&["--port", &port, "--bidir", "-i", "0.2", "-t", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(interval_lines(&text, "[  0][TX] ").len() >= 3, "{text}");
    let rx = interval_lines(&text, "[  0][RX] ");
    assert!(rx.len() >= 3, "{text}");
    // A receiver's sample has no sender's figures (no congestion window).
    assert!(rx.iter().all(|l| !l.contains("cwnd")), "{text}");
    // Nothing unlabelled.
    assert!(interval_lines(&text, " ").is_empty(), "{text}");

    let out = client(&[
        "--port", &port, "-P", "2", "--bidir", "-i", "0.2", "-t", "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for label in ["[  0][TX]", "[  1][RX]", "[SUM][TX]", "[SUM][RX]"] {
        assert!(interval_lines(&text, label).len() >= 3, "{label}: {text}");
    }
}
