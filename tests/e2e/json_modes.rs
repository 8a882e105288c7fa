//! Every mode's `--json` is one typed object. Each run's stdout parses into
//! [`ClientOutput`], as the kind of object its mode prints, and the typed value written back
//! is the very object printed: no field the types do not know, none they drop.

use std::time::Duration;

use serde_json::Value;
use tsperf_results::json::{
    ClientJson, ClientOutput, Direction, Event, Measured, SessionEntry, StreamEntry,
};

use crate::common::*;
use std::io::Read;
use tsperf_proto::{Frame, Report};

/// The kind of object a run printed, by its type.
fn kind(o: &ClientOutput) -> String {
    let direction = |d: &Direction| match d {
        Direction::Stream(StreamEntry::Done(Measured::Stream(_))) => "stream",
        Direction::Stream(StreamEntry::Done(Measured::Reverse(_))) => "reverse",
        Direction::Stream(StreamEntry::SendFailed(_)) => "stream-failed",
        Direction::Stream(StreamEntry::ReceiveFailed(_)) => "reverse-failed",
        Direction::Session(SessionEntry::Sent(_)) => "parallel",
        Direction::Session(SessionEntry::Received(_)) => "parallel-reverse",
        Direction::Failed(_) => "failed",
    };
    match o {
        ClientOutput::Result(ClientJson::Bidir(b)) => {
            format!(
                "bidir({}, {})",
                direction(&b.forward),
                direction(&b.reverse)
            )
        }
        ClientOutput::Result(r) => r.mode().to_owned(),
        ClientOutput::StreamFailed(StreamEntry::SendFailed(_)) => "stream-failed".to_owned(),
        ClientOutput::StreamFailed(StreamEntry::ReceiveFailed(_)) => "reverse-failed".to_owned(),
        ClientOutput::StreamFailed(StreamEntry::Done(_)) => "done-as-failure".to_owned(),
        ClientOutput::Failed(f) if f.usage => "usage".to_owned(),
        ClientOutput::Failed(_) => "failed".to_owned(),
    }
}

/// Parses a run's stdout as one typed object, checks it is `expected`, and that writing the
/// typed value back gives the object printed.
fn parses_as(out: &std::process::Output, expected: &str, code: i32) -> ClientOutput {
    let text = stdout(out);
    assert_eq!(out.status.code(), Some(code), "{expected}: {}", stderr(out));
    let typed = ClientOutput::parse(&text)
        .unwrap_or_else(|e| panic!("{expected}: not a typed object ({e}): {text}"));
    assert_eq!(kind(&typed), expected, "{text}");
    let printed: Value = serde_json::from_str(&text).unwrap();
    let written = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        written, printed,
        "{expected}: the typed value differs from what was printed"
    );
    typed
}

/// Every mode's `--json` output is one object that parses into its typed shape, with no field
/// the type does not know.
#[test]
fn every_mode_prints_one_typed_object() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    test_file(&served, "s.bin", 100_001);
    let file = test_file(dir.path(), "f.bin", 300_000);
    let file = file.to_str().unwrap();
    let server = Server::start(&["--serve", served.to_str().unwrap()]);
    let port = server.port.to_string();
    let json = |args: &[&str]| {
        let mut all = vec!["--port", &port, "--json", "--no-progress"];
        all.extend_from_slice(args);
        client(&all)
    };
    let cases: [(&[&str], &str, i32); 13] = [
        (&[file], "stream", 0),
        (&["--bytes", "1MiB", "-t", "0.2", "-i", "0.1"], "stream", 0),
        (&["-R", "--bytes", "1MiB"], "reverse", 0),
        (&["-R", "s.bin"], "reverse", 0),
        (&["--bidir", "--bytes", "1MiB"], "bidir(stream, reverse)", 0),
        (&["-P", "2", file], "parallel", 0),
        (&["-P", "2", "-R", "--bytes", "1MiB"], "parallel-reverse", 0),
        (
            &["-P", "2", "--bidir", "--bytes", "1MiB"],
            "bidir(parallel, parallel-reverse)",
            0,
        ),
        (&["--latency", "--count", "20"], "latency", 0),
        // Refused by the server: no such file is served.
        (&["-R", "nosuch.bin"], "reverse-failed", 1),
        // A session that cannot start, and one direction of two that cannot.
        (&["-P", "3", "--bytes", "2"], "failed", 1),
        (
            &["--bidir", "--bytes", "1MiB", "/nonexistent/f"],
            "bidir(stream-failed, reverse)",
            1,
        ),
        (&["-R", "--sndbuf", "64k"], "usage", 2),
    ];
    for (args, expected, code) in cases {
        parses_as(&json(args), expected, code);
    }
    // No server there: the stream fails before its data.
    let dead = dead_port().to_string();
    let out = client(&["--port", &dead, "--json", "--bytes", "1MiB"]);
    parses_as(&out, "stream-failed", 1);
}

/// Ctrl-C: a timed run stopped early is a result (every byte until then verified); a sized
/// stream cut off is a failure object with what it had sent.
#[test]
fn ctrl_c_prints_one_typed_object() {
    let server = Server::start(&["--read-size", "16", "--rcvbuf", "65536"]);
    let port = server.port.to_string();
    let out = interrupt_client(
        &["--port", &port, "--json", "--bytes", "64MiB", "-t", "30"],
        Duration::from_millis(500),
    );
    match parses_as(&out, "stream", 130) {
        ClientOutput::Result(ClientJson::Stream(s)) => {
            assert!(
                s.timed.as_ref().is_some_and(|t| t.interrupted) && s.verified,
                "{s:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let out = interrupt_client(
        &[
            "--port", &port, "--json", "--sndbuf", "65536", "--bytes", "256MiB",
        ],
        Duration::from_millis(500),
    );
    parses_as(&out, "stream-failed", 130);
    let out = interrupt_client(
        &["--port", &port, "--json", "--bidir", "--bytes", "256MiB"],
        Duration::from_millis(500),
    );
    let typed = parses_as(&out, &kind_of(&out), 130);
    assert!(
        matches!(typed, ClientOutput::Result(ClientJson::Bidir(_))),
        "{typed:?}"
    );
}

/// The kind a bidir run's object has (either direction may finish or be cut off by the stop).
fn kind_of(out: &std::process::Output) -> String {
    ClientOutput::parse(&stdout(out)).map_or_else(|e| e.to_string(), |o| kind(&o))
}

/// A `--json-stream` run's lines, each parsed as an event.
fn events(out: &std::process::Output) -> Vec<Event> {
    stdout(out)
        .lines()
        .map(|l| {
            serde_json::from_str::<Event>(l)
                .unwrap_or_else(|e| panic!("not an event ({e}): {l}\n{}", stderr(out)))
        })
        .collect()
}

/// How many `end` events there are.
fn ends(ev: &[Event]) -> usize {
    ev.iter().filter(|e| matches!(e, Event::End(_))).count()
}

/// `--json-stream` lines parse one by one into a typed [`Event`]: a `start`
/// first, samples as they come (a session's `sum` after its streams'), and last, exactly once,
/// the `end` holding the object `--json` prints; for a success, a failure, Ctrl-C and a usage
/// error alike.
#[test]
fn json_stream_lines_parse_one_by_one() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&[
        "-p",
        &port,
        "--json-stream",
        "-t",
        "0.5",
        "-i",
        "0.1",
        "-P",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ev = events(&out);
    assert!(
        matches!(&ev[0], Event::Start(s) if s.streams == Some(2)),
        "{ev:?}"
    );
    let samples = ev
        .iter()
        .filter(|e| matches!(e, Event::Interval(_)))
        .count();
    let sums = ev.iter().filter(|e| matches!(e, Event::Sum(_))).count();
    assert!(samples >= 6 && sums >= 3, "{samples} samples, {sums} sums");
    assert!(
        matches!(ev.last(), Some(Event::End(ClientOutput::Result(ClientJson::Parallel(p)))) if p.sum.verified),
        "{:?}",
        ev.last()
    );
    assert_eq!(ends(&ev), 1);
    // A failure: the end holds the stream's failure object.
    let dead = dead_port().to_string();
    let out = client(&["-p", &dead, "--json-stream", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    assert!(matches!(&ev[0], Event::Start(_)));
    assert!(
        matches!(ev.last(), Some(Event::End(ClientOutput::StreamFailed(_)))),
        "{ev:?}"
    );
    assert_eq!(ends(&ev), 1);
    // A usage error: the end alone.
    let out = client(&["--json-stream", "-l", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let ev = events(&out);
    assert!(
        matches!(ev.as_slice(), [Event::End(ClientOutput::Failed(f))] if f.usage),
        "{ev:?}"
    );
    // Ctrl-C in a timed run: samples, then the end with every byte until then verified.
    let slow = Server::start(&["--read-size", "16", "--rcvbuf", "65536"]);
    let slow_port = slow.port.to_string();
    let out = interrupt_client(
        &[
            "-p",
            &slow_port,
            "--json-stream",
            "-t",
            "30",
            "-i",
            "0.1",
            "--bytes",
            "64MiB",
        ],
        Duration::from_millis(700),
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let ev = events(&out);
    assert!(ev.iter().any(|e| matches!(e, Event::Interval(_))), "{ev:?}");
    match ev.last() {
        Some(Event::End(ClientOutput::Result(ClientJson::Stream(s)))) => {
            assert!(s.verified && s.timed.as_ref().is_some_and(|t| t.interrupted));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ends(&ev), 1);
}

/// `-J` inside a cluster of short flags (`-RJ`, `-JR`, `-RJc HOST`) is `--json`
/// from the start: a usage error and an early failure print their one object too.
#[test]
fn json_in_a_cluster_of_short_flags_is_seen_at_once() {
    for cluster in ["-RJ", "-JR"] {
        let out = client(&[cluster, "--no-such-flag"]);
        parses_as(&out, "usage", 2);
        let dead = dead_port().to_string();
        let out = client(&[cluster, "-p", &dead, "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{cluster}: not one object ({e}): {}", stdout(&out)));
        assert!(v["error"].is_string(), "{v:#}");
    }
    // A value in the cluster is a value: `-c` takes the rest.
    let out = client(&["-Rc127.0.0.1", "-J", "--no-such-flag"]);
    parses_as(&out, "usage", 2);
}

/// The stop handler is in place before anything that takes time or may block:
/// a Ctrl-C in the first tens of milliseconds of `--json-stream -t 30` (while the generated
/// text is made) still ends with the `end` event, and a key file that is a FIFO is refused, not
/// waited on.
#[test]
fn an_early_ctrl_c_still_prints_the_end() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    for ms in [15u64, 30, 50, 70] {
        let out = interrupt_client(
            &["-p", &port, "--json-stream", "-t", "30"],
            Duration::from_millis(ms),
        );
        let code = out.status.code();
        assert!(
            code == Some(130) || code == Some(1),
            "{ms} ms: {code:?} {}",
            stderr(&out)
        );
        let ev = events(&out);
        assert!(
            matches!(ev.last(), Some(Event::End(_))),
            "{ms} ms: no end event: {}",
            stdout(&out)
        );
        assert_eq!(ends(&ev), 1, "{ms} ms");
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("key");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = client(&["-p", &port, "--json", "--auth-key", fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["error"].as_str().unwrap().contains("key file"), "{v:#}");
}

/// With --json every exit prints exactly one object on stdout: a usage error
/// (`"usage": true`, exit 2), a missing or empty --under-load file (exit 1).
#[test]
fn every_json_exit_prints_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 100);
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.txt");
    let f = file.to_str().unwrap();
    let port = dead_port().to_string();
    let cases: [(&[&str], i32, &str, bool); 6] = [
        (
            &["--json", "--chunk", "0", f],
            2,
            "invalid chunk size '0'",
            true,
        ),
        (&["--json", "--latency", "--bogus"], 2, "--bogus", true),
        (
            &["--json", "--batch", "4", f],
            2,
            "--batch applies to --io writev only",
            true,
        ),
        (&["--json", "--latency", "--count", "5", f], 2, "", true),
        (
            &[
                "--json",
                "--latency",
                "--port",
                &port,
                "--under-load",
                missing.to_str().unwrap(),
            ],
            1,
            "--under-load",
            false,
        ),
        (
            &[
                "--json",
                "--latency",
                "--port",
                &port,
                "--under-load",
                empty.to_str().unwrap(),
            ],
            1,
            "--under-load",
            false,
        ),
    ];
    for (args, code, needle, usage) in cases {
        let out = client(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}): {:?}", stdout(&out)));
        let error = v["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{args:?}: {v:#}");
        assert_eq!(v["usage"] == true, usage, "{args:?}: {v:#}");
        assert!(v["mode"].is_string(), "{args:?}: {v:#}");
    }
}

/// A failed transfer's JSON keeps its interval samples, exactly when they show
/// the stall.
#[test]
fn a_failed_transfers_json_keeps_its_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "stall.bin", 256 << 20);
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 1 << 20];
        s.read_exact(&mut buf).unwrap();
        // A stall, then a reset.
        std::thread::sleep(Duration::from_millis(300));
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    });
    let (out, v) = client_json(
        port,
        &[
            "--interval",
            "0.02",
            "--sndbuf",
            "65536",
            big.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        v["error"].as_str().unwrap().contains("connection lost"),
        "{v:#}"
    );
    let samples = v["intervals"].as_array().unwrap();
    assert!(samples.len() >= 5, "{v:#}");
    assert!(
        samples.iter().any(|i| i["bytes"] == 0),
        "the stall is not in the samples: {v:#}"
    );
}

/// With --json, a failure still prints one JSON object, with the error and what
/// was measured so far, and keeps the exit code.
#[test]
fn json_failure_is_one_object_with_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "j.txt", 1 << 20);
    let dead = dead_port();
    let (out, v) = client_json(dead, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        v["error"].as_str().unwrap().contains("could not connect"),
        "{v:#}"
    );
    assert_eq!(v["mode"], "stream");
    assert_eq!(v["bytes"], 1 << 20);
    assert_eq!(v["sent"], 0);

    let (out, v) = client_json(dead, &["--latency", "--count", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["mode"], "latency");
    assert!(v["error"].as_str().unwrap().contains("could not connect"));

    // Cut off mid-transfer: what was sent so far is there.
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        send(&mut s, &Frame::Abort("enough".into()));
    });
    let (out, v) = client_json(port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(v["error"].as_str().unwrap().contains("enough"), "{v:#}");
    let sent = v["sent"].as_u64().unwrap();
    assert!((100_000..=1 << 20).contains(&sent), "{v:#}");

    // A failure before anything is measured (a key file that is not there) too.
    let (out, v) = client_json(
        dead,
        &["--auth-key", "/nonexistent/key", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        v["error"].as_str().unwrap().contains("/nonexistent/key"),
        "{v:#}"
    );

    // A mismatch keeps its full report, with the error beside it.
    let port = fake_server(|mut s, len| {
        let mut buf = vec![0u8; len as usize + 8];
        s.read_exact(&mut buf).unwrap();
        // A report consistent in itself (one that is not is refused), but for
        // other bytes than the client sent.
        let report = Report {
            bytes: len,
            digest: 1,
            reads: 1,
            ..Report::default()
        };
        send(&mut s, &Frame::Report(report));
    });
    let (out, v) = client_json(port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["verified"], false);
    assert!(v["error"].as_str().unwrap().contains("MISMATCH"), "{v:#}");
}
