//! A `--parallel` session is one run: its streams are bounded together (`--max-bytes`), read one
//! served file, and a `--once` server serves all of it and nothing more. Each case runs against
//! the event loop, `--blocking` and `--threads 2`.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;

use crate::common::*;
use tsperf_proto::{Frame, Hello, Session};

/// A server serving `dir` (`--serve`), with `more` and the model's flags.
fn serving(dir: &Path, more: &[&str], model: &[&str]) -> Server {
    let mut args = vec!["--serve", dir.to_str().unwrap()];
    args.extend_from_slice(more);
    args.extend_from_slice(model);
    Server::start(&args)
}

/// Stream `index` of a reverse session `id` of `count` streams asking for the served `name`:
/// its connection and its first frame (the Accept, or the refusal's reason).
fn served_stripe(
    port: u16,
    id: [u8; 16],
    index: u8,
    count: u8,
    name: &str,
) -> (TcpStream, Result<(), String>) {
    let hello = Hello {
        reverse: true,
        clock_queries: 0,
        session: Session { id, index, count },
        ..Hello::stream(0, 10240, name)
    };
    hello_answer(port, &hello)
}

/// `--max-bytes` bounds a served file's session whole. An 8 MiB file asked for
/// in 16 stripes of 512 KiB was served in full by a server that sends at most 1 MiB: a named
/// file's hello announces no length, so the session counted nothing and each stripe was
/// checked alone.
#[test]
fn max_bytes_bounds_a_served_files_session() {
    let dir = tempfile::tempdir().unwrap();
    test_file(dir.path(), "big.bin", 8 << 20);
    for model in EVERY_MODEL {
        let server = serving(dir.path(), &["--max-bytes", "1MiB"], model);
        let port = server.port.to_string();
        for streams in ["1", "2", "16"] {
            let out = client(&["--port", &port, "-R", "-P", streams, "big.bin"]);
            assert_fails(&out, 1, "(--max-bytes)");
        }
        // Nothing of it was sent: every stripe was refused before its data.
        assert!(
            !server.stdout().contains("sent "),
            "{model:?}: {}",
            server.stdout()
        );
        // And the bound still lets a session within it through.
        test_file(dir.path(), "small.bin", 1 << 20);
        let (out, v) = client_json(server.port, &["-R", "-P", "4", "small.bin"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
    }
}

/// A session's streams read one file. A served file replaced (by rename) with
/// another of the same size between two of a session's streams made a session "verified" from
/// stripes of both; the later stream is refused, naming the change.
#[test]
fn a_sessions_streams_read_one_served_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "f.bin", 1 << 20);
    for (n, model) in EVERY_MODEL.into_iter().enumerate() {
        let server = serving(dir.path(), &[], model);
        let id = [n as u8 + 1; 16];
        let (_first, answer) = served_stripe(server.port, id, 0, 2, "f.bin");
        assert_eq!(answer, Ok(()), "{model:?}");
        // Another file of the same size, renamed over the served name.
        let other = dir.path().join("other.tmp");
        std::fs::write(&other, vec![b'x'; 1 << 20]).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let (_second, answer) = served_stripe(server.port, id, 1, 2, "f.bin");
        let why = answer.unwrap_err();
        assert!(
            why.contains("f.bin") && why.contains("changed") && why.contains("one file"),
            "{model:?}: {why}"
        );
        // A new session reads the new file, all of its streams.
        let (_a, answer) = served_stripe(server.port, [0x40 + n as u8; 16], 0, 2, "f.bin");
        assert_eq!(answer, Ok(()), "{model:?}");
        let (_b, answer) = served_stripe(server.port, [0x40 + n as u8; 16], 1, 2, "f.bin");
        assert_eq!(answer, Ok(()), "{model:?}");
    }
}

/// `--once` serves one client's run, whole: every stream of a `-P` session, both
/// directions of a `--bidir`, then exits 0 (each verified). The event loop exited when the
/// first connection ended and cut the others mid-stream (the client read "connection reset"
/// or "unknown frame tag 110"); `--blocking` reset the second before its hello.
#[test]
fn once_serves_one_clients_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.bin", 4 << 20);
    let f = file.to_str().unwrap();
    for model in EVERY_MODEL {
        for run in [
            &["-P", "2", f][..],
            &["-R", "-P", "2", "--bytes", "4MiB"][..],
            &["--bidir", f][..],
            &["--bidir", "-P", "2", f][..],
            &[f][..],
            &["--latency", "--count", "5"][..],
        ] {
            let mut args = vec!["--once"];
            args.extend_from_slice(model);
            let mut server = Server::start(&args);
            let (out, v) = client_json(server.port, run);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{model:?} {run:?}: {}\nserver: {}",
                stderr(&out),
                server.stderr()
            );
            assert_ne!(v["verified"], false, "{model:?} {run:?}: {v:#}");
            assert_eq!(
                server.wait_exit(),
                Some(0),
                "{model:?} {run:?}: {}",
                server.stderr()
            );
        }
    }
}

/// A connection beyond the `--once` run is refused with a reason (not reset, not
/// served), and the run's own transfer goes on; the server exits with the run's result.
#[test]
fn once_refuses_a_connection_beyond_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.bin", 1 << 20);
    for model in EVERY_MODEL {
        let mut args = vec!["--once"];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        // The run: a transfer of 10000 bytes, begun and held.
        let mut first = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        first
            .write_all(&stream_hello(10_000, 1000, "held.bin"))
            .unwrap();
        first.set_read_timeout(Some(DEADLINE)).unwrap();
        assert!(matches!(
            read_one_frame(&mut first),
            Some(Frame::Accept { .. })
        ));
        first.write_all(&[b'x'; 4000]).unwrap();
        // Another client meanwhile.
        let out = client(&["--port", &server.port.to_string(), file.to_str().unwrap()]);
        assert_fails(&out, 1, "--once");
        // The run ends incomplete: the server says so and exits 1.
        drop(first);
        assert_eq!(
            server.wait_exit(),
            Some(1),
            "{model:?}: {}",
            server.stderr()
        );
        assert!(
            server.stderr().contains("'held.bin': 4000 of 10000 bytes"),
            "{model:?}: {}",
            server.stderr()
        );
    }
}

/// A `--once` run whose other connections never come (its client died after
/// opening one of two) does not hold the server: once the one that came has ended, the server
/// waits the hello timeout for the rest, then exits 1, in every model.
#[test]
fn once_does_not_wait_for_ever_for_a_run_cut_short() {
    use std::io::Read;
    for model in EVERY_MODEL {
        let mut args = vec!["--once", "--hello-timeout", "1"];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let hello = Hello {
            reverse: true,
            clock_queries: 0,
            session: Session {
                id: [5; 16],
                index: 0,
                count: 2,
            },
            ..Hello::stream(64 << 10, 10240, "")
        };
        let (mut first, answer) = hello_answer(server.port, &hello);
        assert_eq!(answer, Ok(()), "{model:?}");
        let mut all = Vec::new();
        first.read_to_end(&mut all).unwrap();
        drop(first);
        assert_eq!(
            server.wait_exit(),
            Some(1),
            "{model:?}: {}",
            server.stderr()
        );
    }
}

/// The first answer to a raw hello for stream `index` of a session of `count` (`id`),
/// announcing `length` bytes ([`hello_answer`]).
fn session_hello(
    port: u16,
    id: [u8; 16],
    index: u8,
    count: u8,
    length: u64,
    reverse: bool,
) -> (std::net::TcpStream, Result<(), String>) {
    use tsperf_proto::{Hello, Session};
    let hello = Hello {
        reverse,
        clock_queries: 0,
        session: Session { id, index, count },
        ..Hello::stream(length, 10240, if reverse { "" } else { "s.bin" })
    };
    hello_answer(port, &hello)
}

/// `--max-bytes` bounds a session's streams together as well as each, and a
/// session's stream index is taken once: a second stream 0 is refused, in both models and both
/// directions.
#[test]
fn a_session_is_bounded_whole_and_its_indexes_are_its_own() {
    for model in EVERY_MODEL {
        let mut args = vec!["--max-bytes", "1MiB"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        for (n, reverse) in [(1u8, false), (2, true)] {
            let id = [n; 16];
            let (_a, first) = session_hello(server.port, id, 0, 3, 600 << 10, reverse);
            assert_eq!(first, Ok(()), "{model:?}");
            let (_b, twice) = session_hello(server.port, id, 0, 3, 1000, reverse);
            let why = twice.unwrap_err();
            assert!(
                why.contains("stream 0") && why.contains("already"),
                "{model:?}: {why}"
            );
            let (_c, over) = session_hello(server.port, id, 1, 3, 600 << 10, reverse);
            let why = over.unwrap_err();
            assert!(
                why.contains("session") && why.contains("--max-bytes"),
                "{model:?}: {why}"
            );
            // Another session, or a stream of its own, is not held to this one's count.
            let (_d, other) = session_hello(server.port, [9 + n; 16], 0, 2, 600 << 10, reverse);
            assert_eq!(other, Ok(()), "{model:?}");
        }
    }
}
