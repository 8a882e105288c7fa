//! Ctrl-C (SIGINT) at every point of a run: the client stops at once, prints what it measured
//! so far (one JSON object with `"interrupted": true` under `--json`) and exits 130, whether it
//! was writing, blocked on a full window, waiting on a query, under load, or reading a reverse
//! stream that never ends.

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::*;
use tsperf_proto::Frame;

/// Ctrl-C during a stream prints what was measured so far, in one JSON object with
/// `"interrupted": true` (bytes sent, what the server's TCP acknowledged, the rate so far, the
/// intervals so far), or as a line for people; exit 130. Before, --json printed nothing.
#[test]
fn ctrl_c_during_a_stream_prints_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    let server = slow_server();
    let port = server.port.to_string();
    let out = interrupt_client(
        &[
            "--port",
            &port,
            "--sndbuf",
            "65536",
            "--json",
            "--interval",
            "0.05",
            big.to_str().unwrap(),
        ],
        Duration::from_millis(500),
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {:?}", stdout(&out)));
    assert_eq!(v["interrupted"], true, "{v:#}");
    assert_eq!(v["verified"], false);
    assert_eq!(v["bytes"], 256u64 << 20);
    let (sent, acked) = (
        v["sent"].as_u64().unwrap(),
        v["acked_bytes"].as_u64().unwrap(),
    );
    assert!(acked > 0 && acked <= sent, "{v:#}");
    assert!(v["elapsed_s"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["acked_mib_per_s"].as_f64().unwrap() > 0.0, "{v:#}");
    let samples = v["intervals"].as_array().unwrap();
    assert!(samples.len() >= 2, "{v:#}");
    // For people: the figures so far on stdout, the interruption on stderr.
    let out = interrupt_client(
        &["--port", &port, "--sndbuf", "65536", big.to_str().unwrap()],
        Duration::from_millis(300),
    );
    assert_fails(&out, 130, "tsclient: interrupted");
    // A sentence wrapped to the report's width, read whole.
    let text = stdout(&out).replace("\n  ", " ");
    assert!(
        text.contains("interrupted after ") && text.contains(" so far"),
        "{text}"
    );
    assert!(text.contains("the server's TCP acknowledged "), "{text}");
}

/// A client blocked in a write to a server that stopped reading (a full window)
/// still stops on Ctrl-C and prints its result: no blocking call keeps it from doing so.
#[test]
fn ctrl_c_while_blocked_on_a_full_window_prints_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    for transport in [&[][..], &["--nonblocking"][..]] {
        let port = fake_server(|s, _| {
            // Never reads: the client's writes block once both buffers are full.
            std::thread::sleep(Duration::from_secs(20));
            drop(s);
        });
        let port = port.to_string();
        let mut args = vec![
            "--port",
            &port,
            "--json",
            "--timeout",
            "60",
            big.to_str().unwrap(),
        ];
        args.extend_from_slice(transport);
        let out = interrupt_client(&args, Duration::from_millis(500));
        assert_eq!(
            out.status.code(),
            Some(130),
            "{transport:?}: {}",
            stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{transport:?}: not one JSON object ({e}): {:?}",
                stdout(&out)
            )
        });
        assert_eq!(v["interrupted"], true, "{v:#}");
        assert!(v["sent"].as_u64().unwrap() > 0, "{v:#}");
    }
}

/// A fake latency server: accepts the hello, answers `answered` binary requests, then reads on
/// without answering (a server gone silent) until the client goes.
fn silent_latency_server(answered: u64) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut hello = [0u8; tsperf_proto::HELLO_FIXED];
        s.read_exact(&mut hello).unwrap();
        send(
            &mut s,
            &Frame::Accept {
                read_size: 0,
                server_io: tsperf_proto::ServerIo::Blocking,
                log: tsperf_proto::LogMode::None,
                stdout: tsperf_proto::StdoutKind::Unknown,
                length: 0,
                tls: None,
            },
        );
        for _ in 0..answered {
            let mut req = [0u8; 4 + 16];
            s.read_exact(&mut req).unwrap();
            let mut answer = 24u32.to_be_bytes().to_vec();
            answer.extend_from_slice(&req[4..12]);
            answer.extend_from_slice(&[0u8; 16]);
            s.write_all(&answer).unwrap();
        }
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    port
}

/// Ctrl-C while a latency query waits on a server gone silent prints the
/// statistics of the queries answered so far (JSON `interrupted: true`), exit 130. Before, the
/// client waited out its 2 s patience and printed nothing.
#[test]
fn ctrl_c_while_a_query_waits_prints_the_statistics_so_far() {
    for json in [true, false] {
        let port = silent_latency_server(12).to_string();
        let mut args = vec![
            "--port",
            &port,
            "--latency",
            "--count",
            "1000",
            "--timeout",
            "60",
        ];
        if json {
            args.push("--json");
        }
        let out = interrupt_client(&args, Duration::from_millis(500));
        assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
        if json {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {:?}", stdout(&out)));
            assert_eq!(v["interrupted"], true, "{v:#}");
            // 12 answered, the first 5 warm-up.
            assert!(v["rtt_us"]["p50"].as_f64().is_some(), "{v:#}");
        } else {
            assert!(
                stdout(&out).contains("round trip: min "),
                "{}",
                stdout(&out)
            );
        }
    }
}

/// Ctrl-C under load, with the loading stream stuck on a slow server, still
/// prints the idle statistics and what was measured under load (JSON `interrupted: true`).
#[test]
fn ctrl_c_under_a_slow_load_prints_the_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "load.bin", 256 << 20);
    let server = slow_server();
    let port = server.port.to_string();
    let out = interrupt_client(
        &[
            "--port",
            &port,
            "--json",
            "--latency",
            "--count",
            "200",
            "--timeout",
            "60",
            "--under-load",
            big.to_str().unwrap(),
        ],
        Duration::from_millis(800),
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {:?}", stdout(&out)));
    assert_eq!(v["interrupted"], true, "{v:#}");
    assert!(
        v["rtt_us"]["p50"].as_f64().is_some(),
        "no idle statistics: {v:#}"
    );
    assert!(v["under_load"].is_object(), "{v:#}");
}

/// Ctrl-C on a `-P -R` session (or `-P --bidir`) whose server never ends its
/// data exits 130 (it exited 1) with one JSON object saying it was interrupted.
#[test]
fn ctrl_c_on_an_endless_reverse_session_exits_130() {
    for mode in [
        &["-P", "2", "-R"][..],
        &["-P", "2", "--bidir"][..],
        &["--bidir"][..],
        &["-R"][..],
    ] {
        let port = endless_reverse_server().to_string();
        let mut args = vec!["--port", &port, "--json", "-t", "60"];
        args.extend_from_slice(mode);
        let out = interrupt_client(&args, Duration::from_millis(700));
        assert_eq!(out.status.code(), Some(130), "{mode:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{mode:?}: not one JSON object ({e}): {}", stdout(&out)));
        assert!(
            v.to_string().contains("\"interrupted\":true"),
            "{mode:?}: {v:#}"
        );
    }
}

/// Ctrl-C in latency mode says so, prints the statistics so far, and exits 130,
/// in human and in JSON form.
#[test]
fn latency_interrupt_prints_statistics_so_far() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    for json in [false, true] {
        let mut args = vec!["--port", &port, "--latency", "--framing", "split"];
        args.extend(["--count", "1000", "--warmup", "0"]);
        if json {
            args.push("--json");
        }
        // Split framing with Nagle on: about 88 ms a query, so a few are done by now.
        let out = interrupt_client(&args, Duration::from_millis(800));
        assert_fails(&out, 130, "tsclient: interrupted after ");
        assert!(
            stderr(&out).contains(" of 1000 clock queries"),
            "{}",
            stderr(&out)
        );
        let text = stdout(&out);
        if json {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["interrupted"], true, "{v:#}");
            let n = v["count"].as_u64().unwrap();
            assert!(n > 0 && n < 1000, "{v:#}");
            assert!(v["rtt_us"]["p50"].as_f64().unwrap() > 0.0);
        } else {
            assert!(text.contains("round trip: min "), "{text}");
        }
    }
}

/// Ctrl-C (SIGINT) stops the client cleanly with a clear message and exit 130.
#[test]
fn interrupt_exits_130() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(dir.path(), "big.bin", 256 << 20);
    let port = server.port.to_string();
    let args = ["--port", &port, "--sndbuf", "65536", path.to_str().unwrap()];
    let out = interrupt_client(&args, Duration::from_millis(300));
    assert_fails(&out, 130, "tsclient: interrupted after sending ");
    assert!(
        stderr(&out).contains(&format!("of {} bytes", 256u64 << 20)),
        "{}",
        stderr(&out)
    );
    // In units a person reads, the exact count beside.
    assert!(stderr(&out).contains(" of 256 MiB ("), "{}", stderr(&out));
    assert!(stdout(&out).contains(" of 256 MiB ("), "{}", stdout(&out));
    // What was measured so far is a result, on stdout (it was empty before).
    assert!(
        stdout(&out).starts_with("interrupted after "),
        "{}",
        stdout(&out)
    );
}
