//! The default report, read at a glance as an iperf3 user reads iperf3's: the seed's lines,
//! iperf3's table (a sender's and a receiver's row for each stream, SUM rows, interval lines
//! each second in a timed run with the omitted ones marked), a few plain sentences, and no
//! line of 100 columns or more. Each mode's report is compared with its snapshot
//! (`snapshots/`), numbers masked; `INSTA_UPDATE=always` rewrites them after a change meant.

use std::io::Read as _;

use crate::common::*;
use tsperf_proto::{Frame, Report};

/// The report with what changes from run to run masked: numbers, sizes, times, digests, the
/// verdict's sentence (it names what limited this run on this machine), a wrapped sentence's
/// later lines joined to it, runs of spaces (the columns' widths follow the numbers), and
/// repeated interval lines (their count follows the timer) kept once.
fn masked(text: &str) -> String {
    let mut joined: Vec<String> = Vec::new();
    for line in text.lines() {
        match (line.strip_prefix("  "), joined.last_mut()) {
            (Some(rest), Some(last)) => *last += &format!(" {rest}"),
            _ => joined.push(line.to_owned()),
        }
    }
    let mut out: Vec<String> = Vec::new();
    for line in joined {
        let line = match line.find("limited by") {
            Some(at) => format!("{}limited by …", &line[..at]),
            None => line,
        };
        let line: Vec<String> = line.split_whitespace().map(mask).collect();
        let line = line.join(" ");
        if out.last() != Some(&line) {
            out.push(line);
        }
    }
    out.join("\n") + "\n"
}

/// One word masked: a digest is HEX, a size's unit SIZE, a time's TIME, every number N.
fn mask(word: &str) -> String {
    let core = word.trim_matches(|c: char| "()[],;:".contains(c));
    if core.len() == 16 && core.chars().all(|c| c.is_ascii_hexdigit()) {
        return word.replace(core, "HEX");
    }
    if ["B", "KiB", "MiB", "GiB", "TiB"].contains(&core) {
        return word.replace(core, "SIZE");
    }
    if ["µs", "ms", "s"].contains(&core) {
        return word.replace(core, "TIME");
    }
    let mut out = String::new();
    let mut number = false;
    for c in word.chars() {
        if c.is_ascii_digit() || (number && c == '.') {
            if !number {
                out.push('N');
            }
            number = true;
        } else {
            number = false;
            out.push(c);
        }
    }
    out
}

/// Every line of `text` is narrower than 100 columns.
fn assert_narrow(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() < 100,
            "a line of {} columns: {line}\n{text}",
            line.chars().count()
        );
    }
}

/// Runs tsclient ARGS against a server (any server flags), expecting `code`; returns stdout.
fn report_of(server: &[&str], args: &[&str]) -> String {
    let s = Server::start(server);
    let port = s.port.to_string();
    let mut all = vec!["--port", &port];
    all.extend_from_slice(args);
    let out = client(&all);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    stdout(&out)
}

/// A forward run of a file: the seed's lines, the sender's and the receiver's rows, the check,
/// the CPU, the verdict.
#[test]
fn a_forward_run_reads_at_a_glance() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 4 << 20);
    let text = report_of(&["--log", "none"], &[path.to_str().unwrap()]);
    assert_narrow(&text);
    insta::assert_snapshot!("forward", masked(&text));
}

/// A reverse run: the server's row is the sender's.
#[test]
fn a_reverse_run_reads_at_a_glance() {
    let text = report_of(&["--log", "none"], &["-R", "-n", "4M"]);
    assert_narrow(&text);
    insta::assert_snapshot!("reverse", masked(&text));
}

/// Both ways: each direction's seed lines under its heading, one table with a SUM of both
/// ways, each direction's sentences under its label.
#[test]
fn a_bidir_run_has_a_sum_of_both_ways() {
    let text = report_of(&["--log", "none"], &["--bidir", "-n", "4M"]);
    assert_narrow(&text);
    assert!(text.contains("both ways"), "{text}");
    insta::assert_snapshot!("bidir", masked(&text));
}

/// A session of four streams: each stream's two rows, the SUM rows, one check and one verdict.
#[test]
fn a_parallel_run_has_sum_rows() {
    let text = report_of(&["--log", "none"], &["-P", "4", "-n", "4M"]);
    assert_narrow(&text);
    insta::assert_snapshot!("parallel", masked(&text));
}

/// A timed run prints a line each second without -i, marks the omitted ones, and its rows
/// divide: this client's row starts where the omitted start ends.
#[test]
fn a_timed_run_prints_each_second_and_marks_the_omitted() {
    let text = report_of(
        &["--log", "none"],
        &["-t", "2", "-i", "1", "-O", "1", "-n", "4M"],
    );
    assert_narrow(&text);
    let omitted = text.lines().filter(|l| l.ends_with("(omitted)")).count();
    assert_eq!(omitted, 1, "{text}");
    // The omitted start ends at the first write after the second, a little late on a busy
    // machine: the sender's row starts there, not at 0.
    let start = text
        .lines()
        .find(|l| l.ends_with("sender"))
        .and_then(|l| l[5..].trim_start().split('-').next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no sender row: {text}"));
    assert!(
        (1.0..1.2).contains(&start),
        "this client's row starts after -O: {text}"
    );
    insta::assert_snapshot!("timed", masked(&text));
}

/// A run whose checksums differ says NOT VERIFIED in its report (and exits 1 with the error).
#[test]
fn a_failed_run_says_not_verified() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 5000);
    let port = fake_server(move |mut s, len| {
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
    let out = client(&["--port", &port.to_string(), path.to_str().unwrap()]);
    assert_fails(&out, 1, "MISMATCH");
    let text = stdout(&out);
    assert_narrow(&text);
    insta::assert_snapshot!("failure", masked(&text));
}
