//! The client's phases and their deadlines (the hello's answer, the clock queries, each latency
//! answer, the report, a trickling reverse stream's floor rate, a listener that never answers),
//! files that would block it, empty files, and the address forms a user types.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use tsperf_proto::{Frame, Report, encode_frame};

/// Writes `bytes` one at a time, `gap` apart, until the peer goes away.
fn trickle_out(s: &mut TcpStream, bytes: &[u8], gap: Duration) {
    for b in bytes {
        if s.write_all(&[*b]).is_err() {
            return;
        }
        thread::sleep(gap);
    }
}

fn frame_bytes(f: &Frame) -> Vec<u8> {
    let mut b = Vec::new();
    encode_frame(f, &mut b);
    b
}

/// The report after the last byte has a deadline: a server that trickles its
/// report a byte at a time does not keep the client waiting past --timeout.
#[test]
fn report_deadline_is_not_reset_by_a_trickle() {
    let port = fake_server(|mut s, len| {
        let mut buf = vec![0u8; len as usize + 8];
        s.read_exact(&mut buf).unwrap();
        let report = Report {
            bytes: len,
            digest: xxhash_rust::xxh3::xxh3_64(&buf[..len as usize]),
            ..Report::default()
        };
        trickle_out(
            &mut s,
            &frame_bytes(&Frame::Report(report)),
            Duration::from_millis(700),
        );
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "r.txt", 1000);
    let out = client(&[
        "--port",
        &port.to_string(),
        "--timeout",
        "1",
        path.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "no report within 1 s of the last byte");
}

/// The answer to the hello has a deadline too.
#[test]
fn hello_answer_deadline_is_not_reset_by_a_trickle() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let accept = Frame::Accept {
            read_size: 1024,
            server_io: tsperf_proto::ServerIo::Blocking,
            log: tsperf_proto::LogMode::None,
            stdout: tsperf_proto::StdoutKind::Unknown,
            length: 0,
            tls: None,
        };
        trickle_out(&mut s, &frame_bytes(&accept), Duration::from_millis(700));
        thread::sleep(Duration::from_secs(30));
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "h.txt", 1000);
    let out = client(&[
        "--port",
        &port.to_string(),
        "--timeout",
        "1",
        path.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "no answer to the hello within 1 s");
}

/// In latency mode each answer has a deadline.
#[test]
fn latency_answer_deadline_is_not_reset_by_a_trickle() {
    let port = fake_server(|mut s, _| {
        let mut req = [0u8; 20];
        s.read_exact(&mut req).unwrap();
        let mut answer = Vec::new();
        tsperf_proto::clock::encode_response(
            &tsperf_proto::clock::TimeResponse {
                seq: 0,
                server_recv_unix_ns: 1,
                server_send_unix_ns: 2,
            },
            tsperf_proto::clock::Codec::Binary,
            &mut answer,
        );
        trickle_out(&mut s, &answer, Duration::from_millis(700));
    });
    let out = client(&[
        "--port",
        &port.to_string(),
        "--latency",
        "--count",
        "1",
        "--warmup",
        "0",
        "--timeout",
        "1",
    ]);
    assert_fails(&out, 1, "no answer to request 0 within 1 s");
}

/// A stall is detected --timeout after the server last took data, even when
/// large blocking writes return short: a short write no longer restarts the wait.
#[test]
fn stall_is_detected_within_the_timeout_after_short_writes() {
    let (tx, rx) = mpsc::channel();
    let port = fake_server(move |mut s, _| {
        // Take data slowly for a while (short writes on the client), then stop for good.
        let mut buf = [0u8; 4096];
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            s.read_exact(&mut buf).unwrap();
            thread::sleep(Duration::from_millis(20));
        }
        tx.send(Instant::now()).unwrap();
        thread::sleep(Duration::from_secs(30));
    });
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(dir.path(), "stall.bin", 64 << 20);
    let out = client(&[
        "--port",
        &port.to_string(),
        "--timeout",
        "2",
        "--chunk",
        "16m",
        "--sndbuf",
        "65536",
        path.to_str().unwrap(),
    ]);
    let exited = Instant::now();
    assert_fails(&out, 1, "took no data for 2 s");
    let last_read = rx.recv_timeout(Duration::from_secs(1)).unwrap();
    let waited = exited.duration_since(last_read);
    assert!(
        waited < Duration::from_millis(3300),
        "the stall was noticed {waited:?} after the server's last read (--timeout 2)"
    );
}

/// A FIFO (or any file that would block on open) is refused at once.
#[test]
fn fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = client(&["--port", &dead_port().to_string(), fifo.to_str().unwrap()]);
    assert_fails(&out, 1, "is not a regular file");
}

/// An empty file has nothing to measure: it is refused, not "verified" at 0 MiB/s.
#[test]
fn empty_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "empty.txt", 0);
    let out = client(&["--port", &dead_port().to_string(), path.to_str().unwrap()]);
    assert_fails(&out, 1, "is empty: there is nothing to measure");
}

/// True when this machine has IPv6 on loopback.
fn has_ipv6() -> bool {
    TcpListener::bind("[::1]:0").is_ok()
}

/// A default server listens on IPv4 and IPv6 at once; the client takes a host
/// as a name, an address, a bracketed IPv6 address, or any of those with `:PORT`.
#[test]
fn host_forms_and_a_dual_stack_server() {
    let mut cmd = Command::new(bin("tsserver"));
    cmd.args(["--port", "0"]);
    let server = Server::spawn(cmd);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "h.txt", 10_000);
    let port = server.port.to_string();
    let mut hosts = vec![
        vec!["--host", "127.0.0.1", "--port", &port],
        vec!["--host", "localhost", "--port", &port],
    ];
    let v4 = format!("127.0.0.1:{port}");
    let v6 = format!("[::1]:{port}");
    hosts.push(vec!["--host", &v4]);
    if has_ipv6() {
        hosts.push(vec!["--host", "::1", "--port", &port]);
        hosts.push(vec!["--host", "[::1]", "--port", &port]);
        hosts.push(vec!["--host", &v6]);
    } else {
        eprintln!("IPv6 forms skipped: no IPv6 on loopback");
    }
    for args in hosts {
        let mut all = args.clone();
        all.extend(["--json", path.to_str().unwrap()]);
        let out = client(&all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verified"], true, "{args:?}");
    }
    assert!(
        server.stderr().starts_with("tsserver: listening on [::]:")
            || server
                .stderr()
                .starts_with("tsserver: listening on 0.0.0.0:"),
        "{}",
        server.stderr()
    );

    // --bind takes a name.
    let mut cmd = Command::new(bin("tsserver"));
    cmd.args(["--port", "0", "--bind", "localhost"]);
    let named = Server::spawn(cmd);
    let (out, v) = client_json(named.port, &["--host", "localhost", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
}

/// A server for reverse streams that accepts each hello (as many connections as come), answers
/// its clock queries, then sends one byte every `gap`, for at most a minute: a trickle.
fn trickling_reverse_server(gap: Duration) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let Some(hello) = read_hello(&mut s) else {
                    return;
                };
                accept_hello(&mut s, &hello, hello.length);
                let bytes = vec![b'y'; (60_000 / gap.as_millis().max(1)) as usize];
                trickle_out(&mut s, &bytes, gap);
            });
        }
    });
    port
}

/// A sized reverse stream has a deadline, its size at the floor rate
/// (`--min-rate`, by default 128 KiB/s) plus `--timeout` after its first byte: a server that
/// sends a byte every half second held the client for ever, since each read had a timeout
/// and each read got its byte. `-R`, `-P 2`, the non-blocking client and `--json-stream`, whose
/// `end` event must still come, with what arrived.
#[test]
fn a_trickling_reverse_stream_is_cut_off_at_its_floor_rate() {
    let port = trickling_reverse_server(Duration::from_millis(500));
    let port = port.to_string();
    for (extra, words) in [
        // 256 KiB at the default 128 KiB/s: 2 s, then the 2 s timeout.
        (
            &["--bytes", "256KiB"][..],
            "slower than 128 KiB/s (--min-rate)",
        ),
        (
            &["--bytes", "4MiB", "--min-rate", "2MiB"][..],
            "slower than 2 MiB/s",
        ),
        (
            &["--bytes", "4MiB", "--min-rate", "2MiB", "-P", "2"][..],
            "slower than 2 MiB/s",
        ),
        (
            &["--bytes", "4MiB", "--min-rate", "2MiB", "--nonblocking"][..],
            "slower than 2 MiB/s",
        ),
    ] {
        let mut args = vec!["--port", &port, "--timeout", "2", "-R"];
        args.extend_from_slice(extra);
        let out = client(&args);
        assert_fails(&out, 1, words);
        assert!(stderr(&out).contains("cut off"), "{}", stderr(&out));
    }
    let mut args = vec!["--port", &port, "--timeout", "2", "-R", "--json-stream"];
    args.extend_from_slice(&["--bytes", "4MiB", "--min-rate", "2MiB"]);
    let out = client(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let last = stdout(&out).lines().last().unwrap_or_default().to_owned();
    let end: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(end["event"], "end", "{last}");
    assert!(
        end.to_string().contains("--min-rate"),
        "the end event names the floor: {last}"
    );
}

/// `--min-rate` bounds a sized stream the server sends, and says so when it is
/// given where it means nothing; a bad rate names itself.
#[test]
fn min_rate_is_refused_where_it_means_nothing() {
    for (args, words) in [
        (
            &["--min-rate", "1MiB"][..],
            "--min-rate bounds a sized stream the server sends",
        ),
        (
            &["-R", "-t", "1", "--min-rate", "1MiB"][..],
            "a timed stream ends by its time",
        ),
        (&["-R", "--min-rate", "0"][..], "invalid rate '0'"),
        (&["-R", "--min-rate", "fast"][..], "invalid rate 'fast'"),
        (
            &["--latency", "--min-rate", "1MiB"][..],
            "--min-rate applies to stream transfers",
        ),
    ] {
        let mut all = vec!["--port", "1"];
        all.extend_from_slice(args);
        let out = client(&all);
        assert_fails(&out, 2, words);
    }
}

/// A fake server that accepts a stream, answers each clock query after `delay`, and keeps
/// the connection until the client goes.
fn slow_clock_server(delay: Duration) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let hello = read_hello(&mut s).expect("a hello");
        send(
            &mut s,
            &Frame::Accept {
                read_size: hello.chunk,
                server_io: tsperf_proto::ServerIo::Blocking,
                log: tsperf_proto::LogMode::None,
                stdout: tsperf_proto::StdoutKind::Unknown,
                length: 0,
                tls: None,
            },
        );
        for _ in 0..hello.clock_queries {
            let mut q = [0u8; tsperf_proto::CLOCK_QUERY];
            if s.read_exact(&mut q).is_err() {
                return;
            }
            std::thread::sleep(delay);
            let seq = u64::from_be_bytes(q[..8].try_into().unwrap());
            let t = tsperf_proto::clock::TimeResponse {
                seq,
                server_recv_unix_ns: 1,
                server_send_unix_ns: 1,
            };
            let mut out = Vec::new();
            tsperf_proto::encode_frame(&Frame::Time(t), &mut out);
            if s.write_all(&out).is_err() {
                return;
            }
        }
        let _ = s.read_to_end(&mut Vec::new());
    });
    port
}

/// The clock queries are one phase with one deadline: a server answering each
/// after 0.6 s fails four queries under --timeout 1 (before, each query had its own second and
/// the phase took 2.4 s).
#[test]
fn the_clock_phase_has_one_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "c.txt", 1000);
    let port = slow_clock_server(Duration::from_millis(600)).to_string();
    let out = client(&[
        "--port",
        &port,
        "--timeout",
        "1",
        "--clock-queries",
        "4",
        file.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "1 of 4 clock queries answered within 1 s");
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

/// A host that never answers the connect (its SYNs dropped: here a listener whose accept queue
/// is full) is said out loud after 2 s, not only at the timeout, in either socket model; the
/// run then fails naming the address and the timeout.
#[test]
fn a_connect_without_an_answer_is_said_after_two_seconds() {
    use socket2::{Domain, Socket, Type};
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    // Fill the accept queue (never accepted): further SYNs are dropped.
    let mut held = Vec::new();
    for _ in 0..4 {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&addr.into());
        held.push(s);
    }
    thread::sleep(Duration::from_millis(300));
    let port = addr.port().to_string();
    for io in [&[][..], &["--nonblocking"]] {
        let mut args = vec!["--port", &port, "--timeout", "4", "--bytes", "1MiB"];
        args.extend_from_slice(io);
        let out = client(&args);
        let err = stderr(&out);
        assert!(
            err.contains(&format!("connecting to {addr}: no answer after 2 s")),
            "{io:?}: {err}"
        );
        assert_fails(&out, 1, "no answer within 4 s");
    }
}
