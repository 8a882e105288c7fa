//! Latency mode: the seed's clock queries, the 40 ms Nagle stall reproduced, and the
//! cure measured.

use std::io::{Read, Write};

use crate::common::*;
use serde_json::Value;
use std::time::Duration;

fn latency(port: u16, args: &[&str]) -> Value {
    let mut all = vec!["--latency"];
    all.extend_from_slice(args);
    let (out, v) = client_json(port, &all);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    assert_eq!(v["mode"], "latency");
    v
}

fn p50_ms(v: &Value) -> f64 {
    v["rtt_us"]["p50"].as_f64().unwrap() / 1000.0
}

/// Split framing with Nagle on stalls on delayed ACK (p50 of 30 ms or more) and says
/// why; with --nodelay, or with single framing, the same queries take under 5 ms. Both models.
#[test]
fn nagle_stall_and_its_cures() {
    for model in MODELS {
        let server = Server::start(model);
        let v = latency(
            server.port,
            &["--count", "3", "--warmup", "1", "--framing", "split"],
        );
        assert!(
            p50_ms(&v) >= 30.0,
            "{model:?}: split + Nagle p50 {} ms",
            p50_ms(&v)
        );
        assert!(v["hint"].as_str().unwrap().contains("Nagle"), "{v}");
        assert_eq!(
            (v["count"].as_u64(), v["warmup"].as_u64()),
            (Some(3), Some(1))
        );

        let v = latency(
            server.port,
            &["--count", "50", "--framing", "split", "--nodelay"],
        );
        assert!(
            p50_ms(&v) < 5.0,
            "{model:?}: split + nodelay p50 {} ms",
            p50_ms(&v)
        );
        assert!(v["hint"].is_null());
        assert_eq!(v["nodelay"], true);

        let v = latency(server.port, &["--count", "50", "--framing", "single"]);
        assert!(p50_ms(&v) < 5.0, "{model:?}: single p50 {} ms", p50_ms(&v));
        assert!(v["hint"].is_null());
    }
}

/// With only the request split (the response whole) a round trip meets one delayed
/// ACK, not two: it stalls (p50 of 30 ms or more), in well under the both-ways split's time.
#[test]
fn split_request_stalls_once() {
    for model in MODELS {
        let server = Server::start(model);
        let both = latency(
            server.port,
            &["--count", "3", "--warmup", "1", "--framing", "split"],
        );
        let once = latency(
            server.port,
            &[
                "--count",
                "3",
                "--warmup",
                "1",
                "--framing",
                "split-request",
            ],
        );
        assert_eq!(once["framing"], "split-request");
        assert!(p50_ms(&once) >= 30.0, "{model:?}: {}", p50_ms(&once));
        assert!(
            p50_ms(&once) < 0.75 * p50_ms(&both),
            "{model:?}: split-request {} ms against split {} ms",
            p50_ms(&once),
            p50_ms(&both)
        );
        assert!(once["hint"].as_str().unwrap().contains("Nagle"), "{once}");
    }
}

/// --busy-poll measures as the sleeping read does, says so in the JSON, and under
/// load says when the idle queries were the slower ones, with the figures that show it.
#[test]
fn busy_poll_and_the_idle_slower_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "load.txt", 4 << 20);
    let server = Server::start(&[]);
    for extra in [
        &[][..],
        &["--busy-poll"][..],
        &["--busy-poll", "--nonblocking"][..],
    ] {
        let mut a = vec![
            "--count",
            "200",
            "--nodelay",
            "--under-load",
            file.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let v = latency(server.port, &a);
        assert_eq!(v["count"], 200);
        assert_eq!(v["busy_poll"], extra.contains(&"--busy-poll"), "{v}");
        let u = &v["under_load"];
        let (idle, loaded) = (
            v["rtt_us"]["p50"].as_f64().unwrap(),
            u["rtt_us"]["p50"].as_f64().unwrap(),
        );
        match u["idle_slower"].as_str() {
            Some(line) => {
                assert!(idle > loaded, "{v}");
                assert!(line.contains("the CPUs sleep"), "{line}");
                assert_eq!(line.contains("try --busy-poll"), extra.is_empty(), "{line}");
            }
            None => assert!(idle <= loaded, "{v}"),
        }
    }
}

/// Every codec, framing, transport and reconnect combination works end to end, and
/// the JSON says what was measured.
#[test]
fn every_variant_end_to_end() {
    let server = Server::start(&[]);
    for codec in ["binary", "object"] {
        for io in [None, Some("--nonblocking")] {
            for reconnect in [None, Some("--reconnect")] {
                let mut a = vec!["--count", "20", "--codec", codec, "--nodelay"];
                a.extend(io);
                a.extend(reconnect);
                let v = latency(server.port, &a);
                assert_eq!(v["count"], 20);
                assert_eq!(v["codec"], codec);
                assert_eq!(v["framing"], "single");
                assert_eq!(v["reconnect"], reconnect.is_some());
                assert_eq!(
                    v["io"],
                    if io.is_some() {
                        "nonblocking"
                    } else {
                        "blocking"
                    }
                );
                let r = &v["rtt_us"];
                let order =
                    ["min", "p50", "p90", "p99", "p999", "max"].map(|k| r[k].as_f64().unwrap());
                assert!(order.windows(2).all(|w| w[0] <= w[1]), "{r}");
                assert!(order[0] > 0.0);
            }
        }
    }
    assert!(server.wait_for(|o, _| o.contains("answered 25 clock queries (codec object")));
}

/// On one machine the clock offset is within its error bound (plus a small margin).
#[test]
fn offset_is_sane_on_one_machine() {
    let server = Server::start(&[]);
    let v = latency(server.port, &["--count", "200", "--nodelay"]);
    let (offset, err) = (
        v["offset_us"].as_f64().unwrap(),
        v["offset_err_us"].as_f64().unwrap(),
    );
    assert!(
        err > 0.0 && err <= v["rtt_us"]["min"].as_f64().unwrap() / 2.0 + 1.0,
        "{v}"
    );
    assert!(
        offset.abs() <= err + 500.0,
        "offset {offset} µs, bound {err} µs"
    );
}

/// The human report has the statistics, the ladder, the offset and the hint.
#[test]
fn human_report() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&[
        "--port",
        &port,
        "--latency",
        "--count",
        "2",
        "--warmup",
        "1",
        "--framing",
        "split",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("latency: 2 clock queries to 127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("(1 warm-up not counted)"), "{text}");
    for k in ["min ", "mean ", "p50 ", "p90 ", "p99 ", "p99.9 ", "max "] {
        assert!(text.contains(k), "{k} missing: {text}");
    }
    assert!(
        text.lines().filter(|l| l.contains(" |#")).count() == 6,
        "{text}"
    );
    assert!(text.contains("server clock = client clock "), "{text}");
    assert!(
        text.contains("hint: ") && text.contains("--nodelay"),
        "{text}"
    );
}

/// A garbled or hostile answer is a clear error, not a panic or a hang.
#[test]
fn hostile_answers_are_clear_errors() {
    let answers: [(&[u8], &str); 4] = [
        (b"\x00\x00\x00\x05hello", "binary body of 5 bytes"),
        (b"\xff\xff\xff\xff", "bad message length 4294967295"),
        (
            b"\x00\x00\x00\x18AAAAAAAABBBBBBBBCCCCCCCC",
            "the server answered request 4702111234474983745",
        ),
        (b"\x00\x00", "closed the connection before answering"),
    ];
    for (answer, needle) in answers {
        let port = fake_server(move |mut s, _| {
            let mut req = [0u8; 20];
            s.read_exact(&mut req).unwrap();
            s.write_all(answer).unwrap();
        });
        let out = client(&[
            "--port",
            &port.to_string(),
            "--latency",
            "--count",
            "1",
            "--warmup",
            "0",
        ]);
        assert_fails(&out, 1, needle);
    }
}

/// A client that sends a bad request is cut off; the server goes on serving.
#[test]
fn bad_request_does_not_stop_the_server() {
    for model in MODELS {
        let server = Server::start(model);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut hello = Vec::new();
        tsperf_proto::encode_hello(
            &tsperf_proto::Hello {
                mode: tsperf_proto::Mode::Latency,
                nodelay: false,
                codec: 1,
                framing: 1,
                length: 1,
                chunk: 1,
                name: String::new(),
                log: None,
                clock_queries: 0,
                duration_ms: 0,
                reverse: false,
                one_buffer: false,
                session: tsperf_proto::Session::ALONE,
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
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        s.write_all(b"\x00\x00\x00\x03abc").unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{rest:?}");
        assert!(
            server.wait_for(|_, e| e.contains("bad request: bad message: binary body of 3 bytes")),
            "{}",
            server.stderr()
        );
        latency(server.port, &["--count", "5"]);
    }
}

/// Runs tsclient with `args` to its end: its exit code, its peak RSS in KiB, its stdout.
///
/// The peak is the client's own: `VmHWM` of its image, read while it runs (a high-water mark:
/// the last reading holds the peak but for the last moments). Not wait4's `ru_maxrss`: that
/// counts the memory of the process it was spawned from (a vforked child shares the test
/// process's memory until exec, and the kernel keeps that high-water mark), so it grew with
/// whatever the other tests held.
#[allow(clippy::zombie_processes)]
fn client_peak_rss(args: &[&str]) -> (i32, i64, String) {
    let mut child = std::process::Command::new(bin("tsclient"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut peak = 0i64;
    loop {
        peak = peak.max(own_hwm_kib(pid).unwrap_or(0));
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4(2) on our own child, with pointers to locals.
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            assert!(peak > 0, "no reading of the client's memory");
            return (libc::WEXITSTATUS(status), peak, out);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tsclient did not finish"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `VmHWM` of process `pid` in KiB, once it runs tsclient's image (not before its exec).
fn own_hwm_kib(pid: i32) -> Option<i64> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim() != "tsclient" {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Under load a small file is sent again and again; what is kept of the streams
/// does not grow with their number (before, each kept its whole result: 11,066 streams took
/// 9.4 MB more than 23 did, 127,060 held 115 MB).
#[test]
fn many_loading_streams_take_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = test_file(dir.path(), "tiny.txt", 1);
    // One event loop, as when this was written: with one per CPU the queries and the loading
    // streams are served side by side, the queries end sooner and fewer streams load them.
    let server = Server::start(&["--threads", "1"]);
    let port = server.port.to_string();
    let run = |count: &str| {
        let (code, rss, out) = client_peak_rss(&[
            "--port",
            &port,
            "--latency",
            "--warmup",
            "0",
            "--count",
            count,
            "--under-load",
            tiny.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0, "--count {count}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (rss, v)
    };
    let (small, _) = run("200");
    // At least 5000 streams, or the bound below could not tell (the old growth was ~850 bytes
    // a stream): how many load while the queries run is the machine's speed, so a slow or busy
    // machine asks for more queries.
    let mut tries = ["100000", "200000", "300000"].into_iter();
    let (big, v, streams) = loop {
        let count = tries.next().unwrap();
        let (big, v) = run(count);
        let streams = v["under_load"]["streams"].as_u64().unwrap();
        if streams >= 5000 || count == "300000" {
            break (big, v, streams);
        }
    };
    assert!(streams >= 5000, "only {streams} streams: {v:#}");
    assert_eq!(v["under_load"]["stream_verified"], true, "{v:#}");
    assert!(
        big - small < 4 * 1024,
        "peak RSS {small} KiB for 200 queries, {big} KiB for 100,000 ({streams} streams)"
    );
}
