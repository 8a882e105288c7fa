//! The client chooses the server's log sink per transfer (when the server allows it),
//! the server says where its stdout goes, peers of different protocol versions refuse each other
//! at once, and a stream transfer measures the clock offset before its data.

use std::io::Write;
use std::net::TcpStream;

use crate::common::*;

/// A per-read log line (`conn=N seq=N bytes=N total=N`) of connection `conn`.
fn read_line_of(l: &str, conn: &str) -> bool {
    l.contains(&format!(" conn={conn} seq="))
}

/// The connection number of the transfer's start line in `text`.
fn conns(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains(" event=\"start\" "))
        .filter_map(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("conn=").map(str::to_owned))
        })
        .collect()
}

/// Without `--allow-client-log` a server keeps its own sink: asking for another is refused with
/// a reason naming the flag; asking for the sink it has anyway is served.
#[test]
fn server_log_needs_the_operators_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 64 << 10);
    for model in MODELS {
        let mut args = vec!["--log", "none"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let port = server.port.to_string();
        let out = client(&[
            "--port",
            &port,
            "--server-log",
            "stdout",
            file.to_str().unwrap(),
        ]);
        assert_fails(&out, 1, "--allow-client-log");
        let (out, v) = client_json(
            server.port,
            &["--server-log", "none", file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["server"]["log"], "none");
    }
}

/// With `--allow-client-log`, each transfer logs where its client asked: per-read lines on the
/// server's stdout, in the operator's `--log-file`, or nowhere; without `--server-log` the
/// server's own `--log` applies.
#[test]
fn client_chooses_each_transfers_sink() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 1 << 20);
    for (i, model) in MODELS.iter().enumerate() {
        let log = dir.path().join(format!("server{i}.log"));
        let mut args = vec![
            "--log",
            "none",
            "--allow-client-log",
            "--log-file",
            log.to_str().unwrap(),
        ];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let lines = |sink: Option<&str>| {
            let mut a = vec!["--chunk", "1024"];
            if let Some(s) = sink {
                a.extend(["--server-log", s]);
            }
            a.push(file.to_str().unwrap());
            let (out, v) = client_json(server.port, &a);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{model:?} {sink:?}: {}",
                stderr(&out)
            );
            assert_eq!(v["verified"], true);
            assert_eq!(v["server"]["log"], sink.unwrap_or("none"), "{model:?}");
            // A logged read size is the chunk (the seed's server); none reads in bulk: 1 MiB
            // in an event loop, 256 KiB with --blocking.
            let want_read = if sink.is_some_and(|s| s != "none") {
                1024
            } else if model.is_empty() {
                1 << 20
            } else {
                256 << 10
            };
            assert_eq!(v["server"]["read_size"], want_read, "{model:?} {sink:?}");
            v["server"]["log_lines"].as_u64().unwrap()
        };
        assert_eq!(lines(Some("none")), 0);
        assert_eq!(lines(None), 0);
        let file_lines = lines(Some("file"));
        let stdout_lines = lines(Some("stdout"));
        assert!(
            file_lines > 2 && stdout_lines > 2,
            "{file_lines} {stdout_lines}"
        );

        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            logged.lines().count() as u64,
            file_lines,
            "{model:?}: {logged}"
        );
        let in_file = conns(&logged);
        assert_eq!(in_file.len(), 1, "{model:?}: one transfer in the file");
        assert!(server.wait_for(|o, _| o.matches("read over .").count() == 4));
        let out = server.stdout();
        let on_stdout = conns(&out);
        assert_eq!(on_stdout.len(), 1, "{model:?}: one transfer on stdout");
        assert_ne!(in_file, on_stdout);
        let reads = out
            .lines()
            .filter(|l| read_line_of(l, &on_stdout[0]))
            .count();
        assert_eq!(reads as u64 + 2, stdout_lines, "{model:?}");
        assert!(!logged.lines().any(|l| read_line_of(l, &on_stdout[0])));
    }
}

/// `--server-log` takes none, stdout or file.
#[test]
fn server_log_bad_values() {
    let out = client(&["--server-log", "screen", "x"]);
    assert_fails(&out, 2, "screen");
}

/// The server says where its stdout goes, as it sees it: a pipe, a file, the null device.
#[test]
fn server_reports_its_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 64 << 10);
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["server"]["stdout"], "pipe");
    for (stdout, kind) in [
        (
            std::process::Stdio::from(std::fs::File::create(dir.path().join("out.txt")).unwrap()),
            "file",
        ),
        (std::process::Stdio::null(), "null"),
    ] {
        let mut cmd = std::process::Command::new(bin("tsserver"));
        cmd.args(["--port", "0", "--bind", "127.0.0.1", "--once"])
            .stdout(stdout)
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let port = first_stderr_port(&mut child);
        let (out, v) = client_json(port, &[file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["server"]["stdout"], kind);
        let _ = wait_child(child);
    }
}

/// The port in a server's `listening on` line, read from its piped stderr (bounded).
fn first_stderr_port(child: &mut std::process::Child) -> u16 {
    use std::io::{BufRead, BufReader};
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(err).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(DEADLINE).expect("a listening line");
    listening_port(&line)
}

/// A version 2 hello (24 bytes) is refused at once with both versions named, not left to time
/// out waiting for the longer hello of later versions; so is a version 3 hello.
#[test]
fn older_protocol_is_refused_by_version() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "50"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        // Version 2's latency hello: magic, version 2, mode 2, flags, codec 1, framing 1,
        // name_len 0, count 10, chunk 1.
        let mut hello = b"TSPF".to_vec();
        hello.extend_from_slice(&2u16.to_be_bytes());
        hello.extend_from_slice(&[2, 0, 1, 1, 0, 0]);
        hello.extend_from_slice(&10u64.to_be_bytes());
        hello.extend_from_slice(&1u32.to_be_bytes());
        assert_eq!(hello.len(), 24);
        s.write_all(&hello).unwrap();
        let this = format!("version {}", tsperf_proto::VERSION);
        match read_one_frame(&mut s) {
            Some(tsperf_proto::Frame::Refuse { code, reason }) => {
                // In the layout every version reads, with the version's code.
                assert_eq!(code, tsperf_proto::RefuseCode::Version);
                assert!(
                    reason.contains("version 2") && reason.contains(&this),
                    "{model:?}: {reason}"
                );
            }
            other => panic!("{model:?}: expected a refusal, got {other:?}"),
        }
        // Version 3's stream hello has version 4's layout; only its version differs.
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut hello = Vec::new();
        tsperf_proto::encode_hello(&tsperf_proto::Hello::stream(10, 1, "x"), &mut hello);
        hello[4..6].copy_from_slice(&3u16.to_be_bytes());
        s.write_all(&hello).unwrap();
        match read_one_frame(&mut s) {
            Some(tsperf_proto::Frame::Refuse { code, reason }) => {
                assert_eq!(code, tsperf_proto::RefuseCode::Version);
                assert!(
                    reason.contains("version 3") && reason.contains(&this),
                    "{model:?}: {reason}"
                );
            }
            other => panic!("{model:?}: expected a refusal, got {other:?}"),
        }
        // Version 6's stream hello (26 bytes and the name), the last before timed
        // runs, is refused by version too, before its shorter layout is waited for.
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut hello = Vec::new();
        tsperf_proto::encode_hello(&tsperf_proto::Hello::stream(10, 1, "x"), &mut hello);
        hello[4..6].copy_from_slice(&6u16.to_be_bytes());
        hello.truncate(26);
        hello[12..14].copy_from_slice(&0u16.to_be_bytes());
        s.write_all(&hello).unwrap();
        match read_one_frame(&mut s) {
            Some(tsperf_proto::Frame::Refuse { code, reason }) => {
                assert_eq!(code, tsperf_proto::RefuseCode::Version);
                assert!(
                    reason.contains("version 6") && reason.contains(&this),
                    "{model:?}: {reason}"
                );
            }
            other => panic!("{model:?}: expected a refusal, got {other:?}"),
        }
    }
}

/// A stream transfer asks the server's clock first: on one machine (one clock) the offset is
/// within its error bound of 0, and the server's first and last byte on the client's clock fall
/// after the client's begin and before its end, within that bound.
#[test]
fn stream_measures_the_clock_offset() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 4 << 20);
    for model in MODELS {
        let server = Server::start(model);
        for nb in [false, true] {
            let mut a = vec![file.to_str().unwrap()];
            if nb {
                a.push("--nonblocking");
            }
            let (out, v) = client_json(server.port, &a);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let clock = &v["clock"];
            assert_eq!(clock["queries"], 8, "{v}");
            let offset = clock["offset_us"].as_f64().unwrap();
            let err = clock["offset_err_us"].as_f64().unwrap();
            assert!(err > 0.0, "{v}");
            assert!(
                offset.abs() <= err + 0.001,
                "{model:?}: offset {offset} ± {err}"
            );
            let begin = v["begin_unix_us"].as_f64().unwrap();
            let end = v["end_unix_us"].as_f64().unwrap();
            let first = v["server"]["first_byte_client_unix_us"].as_f64().unwrap();
            let last = v["server"]["last_byte_client_unix_us"].as_f64().unwrap();
            // µs rounding of the server's stamps: 1 µs more either way.
            let slack = err + 1.0;
            assert!(first >= begin - slack, "{first} < {begin} - {slack}");
            assert!(last >= first && last <= end + slack, "{first} {last} {end}");
            let one_way = &v["one_way"];
            if let Some(us) = one_way["last_byte_us"].as_f64() {
                assert!((us - (last - begin)).abs() < 1.0, "{one_way}");
            }
        }
        let (out, v) = client_json(
            server.port,
            &["--clock-queries", "0", file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["clock"]["queries"], 0);
        assert!(v["clock"]["offset_us"].is_null(), "{v}");
        assert!(v["one_way"]["last_byte_us"].is_null(), "{v}");
        assert!(v["server"]["first_byte_client_unix_us"].is_null(), "{v}");
    }
}

/// `--clock-queries` is bounded by what the protocol allows.
#[test]
fn clock_queries_bounded() {
    let out = client(&["--clock-queries", "65", "x"]);
    assert_fails(&out, 2, "--clock-queries");
}
