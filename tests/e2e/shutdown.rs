//! Shutdown on SIGINT/SIGTERM: stop accepting, let transfers in flight finish within
//! the grace period, abort the rest cleanly (no partial file), flush the log, exit 0.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use std::io::Write;

/// A transfer in flight when SIGTERM arrives finishes within the grace period, no new
/// connection is accepted, and the server exits 0 with its log flushed.
#[test]
fn in_flight_transfer_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 4 << 20);
    for model in MODELS {
        let log = dir.path().join(format!("s{}.log", model.len()));
        let mut args = vec![
            "--read-size",
            "64",
            "--rcvbuf",
            "65536",
            "--grace",
            "30",
            "--log",
            "file",
        ];
        args.extend(["--log-file", log.to_str().unwrap()]);
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let child = Command::new(bin("tsclient"))
            .args([
                "--port",
                &server.port.to_string(),
                "--json",
                "--sndbuf",
                "65536",
            ])
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(server.wait_for(|_, _| std::fs::metadata(&log).is_ok_and(|m| m.len() > 0)));
        std::thread::sleep(Duration::from_millis(100));
        server.signal(libc::SIGTERM);
        let out = wait_child(child);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verified"], true);
        assert_eq!(server.wait_exit(), Some(0));
        let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
        assert_eq!(lines, v["server"]["log_lines"].as_u64().unwrap());
        let late = std::net::TcpStream::connect(("127.0.0.1", server.port));
        assert!(late.is_err(), "{model:?}: still accepting after shutdown");
    }
}

/// Starts a server that saves into `save` and reads slowly (16-byte reads, small buffers), with
/// a grace period of `grace` seconds, and a client sending `file` to it; both are running when
/// this returns, the transfer a little under way.
fn slow_saved_transfer(
    file: &std::path::Path,
    save: &std::path::Path,
    grace: &str,
    model: &[&str],
) -> (Server, std::process::Child) {
    let mut args = vec!["--read-size", "16", "--rcvbuf", "65536", "--grace", grace];
    args.extend(["--save", save.to_str().unwrap()]);
    args.extend_from_slice(model);
    let server = Server::start(&args);
    let child = Command::new(bin("tsclient"))
        .args(["--port", &server.port.to_string(), "--sndbuf", "65536"])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (server, child)
}

/// A transfer that cannot finish within the grace period is aborted with a reason the
/// client prints; with --save no partial file is left; the server exits 0.
#[test]
fn late_transfer_is_aborted_cleanly() {
    let src = tempfile::tempdir().unwrap();
    let big = sparse_file(src.path(), "big.bin", 256 << 20);
    for model in MODELS {
        let save = tempfile::tempdir().unwrap();
        let (mut server, child) = slow_saved_transfer(&big, save.path(), "0.3", model);
        server.signal(libc::SIGINT);
        let out = wait_child(child);
        assert_fails(&out, 1, "the server is shutting down");
        assert_eq!(server.wait_exit(), Some(0));
        let left: Vec<_> = std::fs::read_dir(save.path()).unwrap().collect();
        assert!(left.is_empty(), "{model:?}: left {left:?}");
        assert!(
            server.stderr().contains("the server is shutting down"),
            "{}",
            server.stderr()
        );
    }
}

/// A second SIGINT or SIGTERM during the grace period ends the server at once:
/// the transfer still in flight is aborted with a reason and leaves no partial file.
#[test]
fn second_signal_ends_the_grace_at_once() {
    let src = tempfile::tempdir().unwrap();
    let big = sparse_file(src.path(), "big.bin", 256 << 20);
    for (model, sig) in [
        (&[][..], libc::SIGTERM),
        (&["--blocking"][..], libc::SIGINT),
    ] {
        let save = tempfile::tempdir().unwrap();
        let (mut server, child) = slow_saved_transfer(&big, save.path(), "3600", model);
        server.signal(sig);
        assert!(
            server.wait_for(|_, e| e.contains("press Ctrl-C again")),
            "{model:?}: {}",
            server.stderr()
        );
        server.signal(sig);
        let out = wait_child(child);
        assert_fails(&out, 1, "the server is shutting down");
        assert!(server.wait_exit().is_some(), "{model:?}: still running");
        let left: Vec<_> = std::fs::read_dir(save.path()).unwrap().collect();
        assert!(left.is_empty(), "{model:?}: left {left:?}");
    }
}

/// A server is a value, its stop its own. Two in one process, each on a port of
/// its own (one of each model): asked to stop, one returns from `serve` while the other goes on
/// serving verified transfers, until it is asked too.
#[test]
fn two_servers_in_one_process_stop_apart() {
    let (a, b) = (
        tsperf_server::Server::new(in_process(false)),
        tsperf_server::Server::new(in_process(true)),
    );
    let (la, lb) = (
        tsperf_server::bind(&a.cfg).unwrap(),
        tsperf_server::bind(&b.cfg).unwrap(),
    );
    let (pa, pb) = (
        la.local_addr().unwrap().port(),
        lb.local_addr().unwrap().port(),
    );
    let verified = |port: u16| {
        let (out, v) = client_json(port, &["--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true, "{v}");
    };
    let ends_within = |h: &std::thread::ScopedJoinHandle<'_, anyhow::Result<bool>>| {
        let by = std::time::Instant::now() + DEADLINE;
        while !h.is_finished() && std::time::Instant::now() < by {
            std::thread::sleep(Duration::from_millis(10));
        }
        h.is_finished()
    };
    std::thread::scope(|s| {
        let ha = s.spawn(|| a.serve(la));
        let hb = s.spawn(|| b.serve(lb));
        verified(pa);
        verified(pb);
        a.request_stop();
        assert!(ends_within(&ha), "the stopped server is still serving");
        assert!(!hb.is_finished(), "stopping one server stopped the other");
        assert!(!b.stopping());
        verified(pb);
        b.request_stop();
        assert!(ends_within(&hb), "the second server did not stop");
        assert!(ha.join().unwrap().unwrap() && hb.join().unwrap().unwrap());
    });
}

/// A quiet server's settings for one run in this process, on a port of its own.
fn in_process(blocking: bool) -> tsperf_server::ServerConfig {
    use tsperf_proto::{LogMode, StdoutKind};
    use tsperf_server::{Accept, Policy, ServerConfig, budget::SendBudget};
    ServerConfig {
        bind: Some(std::net::Ipv4Addr::LOCALHOST.into()),
        port: 0,
        once: false,
        rcvbuf: None,
        blocking,
        max_clients: 16,
        save: None,
        threads: 1,
        accept: Accept::Shared,
        serve: None,
        policy: Policy {
            log: LogMode::None,
            stdout: StdoutKind::Null,
            ..Policy::default()
        },
        grace: Duration::from_secs(2),
        send_budget: SendBudget::new(64 << 20),
        log_file: None,
        tls: None,
    }
}

/// A stop asked for before the server's loop has begun (a SIGTERM just after the listening
/// line) still stops it, in both models: the loop that starts after the request sees it and
/// does not wait in accept or poll for ever.
#[test]
fn a_stop_asked_before_serving_begins_still_stops() {
    for blocking in [false, true] {
        let srv = tsperf_server::Server::new(in_process(blocking));
        let listener = tsperf_server::bind(&srv.cfg).unwrap();
        srv.request_stop();
        let (tx, rx) = std::sync::mpsc::channel();
        let serving = srv.clone();
        // Not scoped: a loop that never ends must fail the test, not hang it.
        std::thread::spawn(move || {
            let _ = tx.send(serving.serve(listener).map_err(|e| e.to_string()));
        });
        let ended = rx.recv_timeout(DEADLINE);
        assert!(
            matches!(ended, Ok(Ok(_))),
            "blocking {blocking}: a stop asked before serving began did not stop it: {ended:?}"
        );
    }
}

/// A latency session cut off by a stop hears "the server is shutting down" in its
/// own answer stream, in every model and both codecs. The blocking server wrote an Abort frame
/// where a length-prefixed answer belonged (the client printed "bad message length
/// 67116288"); the event loop reset the connection with no reason.
#[test]
fn a_latency_session_hears_the_shutdown() {
    for model in [&[][..], &["--blocking"][..], &["--threads", "2"][..]] {
        for codec in ["binary", "object"] {
            let mut args = vec!["--grace", "0.3"];
            args.extend_from_slice(model);
            let mut server = Server::start(&args);
            let child = Command::new(bin("tsclient"))
                .args(["--port", &server.port.to_string(), "--latency"])
                .args(["--count", "10000000", "--codec", codec, "--nodelay"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // The session under way (the server prints nothing before it ends).
            std::thread::sleep(Duration::from_millis(500));
            server.signal(libc::SIGTERM);
            let out = wait_child(child);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{model:?} {codec}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(
                err.contains("the server is shutting down") && !err.contains("bad message"),
                "{model:?} {codec}: {err}"
            );
            // What was measured before is still printed.
            assert!(stdout(&out).contains("p50"), "{model:?}: {}", stdout(&out));
            assert_eq!(server.wait_exit(), Some(0), "{model:?}");
        }
    }
}

/// A reverse stream still going when the server's grace runs out is told why
/// ("the server is shutting down", in the Sent frame's place), in both models; and the blocking
/// server's log of a forward transfer it cut off says the same, not that the client closed.
#[test]
fn a_shutdown_tells_reverse_clients_why() {
    for model in EVERY_MODEL {
        let mut args = vec!["--grace", "0.5"];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let port = server.port.to_string();
        let reverse = std::process::Command::new(bin("tsclient"))
            .args(["--port", &port, "--json", "-R", "-t", "30"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A forward transfer the server reads slowly: still in flight at the cut.
        let mut forward = timed_stream(server.port, 30_000);
        let trickle = std::thread::spawn(move || {
            for _ in 0..100 {
                if forward.write_all(&[b'x'; 100]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        std::thread::sleep(Duration::from_millis(800));
        server.signal(libc::SIGTERM);
        let out = wait_child(reverse);
        assert_eq!(out.status.code(), Some(1), "{model:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("the server is shutting down"),
            "{model:?}: {v:#}"
        );
        trickle.join().unwrap();
        assert_eq!(server.wait_exit(), Some(0), "{model:?}");
        let err = server.stderr();
        let cut: Vec<&str> = err.lines().filter(|l| l.contains("incomplete")).collect();
        assert_eq!(cut.len(), 2, "{model:?}: {err}");
        assert!(
            cut.iter().all(|l| l.contains("shutting down")),
            "{model:?}: {err}"
        );
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
