//! Parallel sessions (`tsclient --parallel N`): the file striped over N connections,
//! each stripe verified by its own digest, the whole by their covering it; the server groups
//! the streams by the hello's session id and bounds a session as it bounds its streams.

use std::io::Write;
use std::net::TcpStream;

use crate::common::*;
use tsperf_proto::{Frame, Hello, Session, encode_hello};

/// `-P 4`: four streams, each verified, their stripes summing to the file, a SUM that adds
/// them; sized and timed (each stream repeats its stripe), in both server models; the server
/// prints the session's summary once its last stream has ended.
#[test]
fn parallel_four_verified_per_stream_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let len = (4 << 20) + 3;
    let path = test_file(dir.path(), "striped.txt", len);
    for model in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(
            server.port,
            &["-P", "4", "--chunk", "1024", path.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "parallel");
        let streams = v["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 4);
        let mut total = 0;
        for s in streams {
            assert_eq!(s["verified"], true, "{s:#}");
            assert_eq!(s["server"]["bytes"], s["bytes"]);
            total += s["bytes"].as_u64().unwrap();
        }
        assert_eq!(total, len, "the stripes cover the file");
        let sum = &v["sum"];
        assert_eq!(sum["bytes"].as_u64(), Some(len));
        assert_eq!(sum["verified"], true);
        assert_eq!(sum["streams"].as_u64(), Some(4));
        assert!(sum["limited_by"].is_string());
        assert!(
            server.wait_for(|out, _| out
                .contains("tsserver: session of 4 streams from 127.0.0.1: 4 of them complete")),
            "{}",
            server.stdout()
        );
        let (out, v) = client_json(server.port, &["-P", "2", "-t", "1", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        for s in v["streams"].as_array().unwrap() {
            assert!(
                s["bytes"].as_u64().unwrap() > len / 2,
                "each stream repeats its stripe"
            );
        }
    }
    let out = client(&["-P", "129", path.to_str().unwrap()]);
    assert_fails(&out, 2, "129");
    let out = client(&["-P", "4", "--latency"]);
    assert_fails(&out, 2, "cannot be used with");
    let tiny = test_file(dir.path(), "tiny.txt", 3);
    let out = client(&[
        "--port",
        &dead_port().to_string(),
        "-P",
        "4",
        tiny.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "--parallel 4 needs a file of at least 4 bytes");
}

/// A session of 128 streams that all go idle after their hellos costs the server what 128 idle
/// connections cost, and no more: each is cut off at the first byte's deadline, the session's
/// summary says none completed, and the server serves the next client; in both models.
#[test]
fn a_parallel_session_of_128_idle_streams_is_bounded() {
    for model in MODELS {
        let mut args = vec!["--hello-timeout", "1"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let conns: Vec<TcpStream> = (0..128u8)
            .map(|i| {
                let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let mut hello = Vec::new();
                encode_hello(
                    &Hello {
                        session: Session {
                            id: [9; 16],
                            index: i,
                            count: 128,
                        },
                        ..Hello::stream(1 << 20, 1024, "idle.bin")
                    },
                    &mut hello,
                );
                s.write_all(&hello).unwrap();
                s
            })
            .collect();
        for mut s in conns {
            // The Accept, then the Abort, then the close: read to the end, then decode.
            let mut bytes = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut bytes);
            let (accept, used) = tsperf_proto::decode_frame(&bytes).unwrap().unwrap();
            assert!(matches!(accept, Frame::Accept { .. }), "{accept:?}");
            match tsperf_proto::decode_frame(&bytes[used..]) {
                Ok(Some((Frame::Abort(why), _))) => {
                    assert!(why.contains("no data within 1 s"), "{why}")
                }
                other => panic!("{model:?}: {other:?}"),
            }
        }
        assert!(
            server
                .wait_for(|out, _| out
                    .contains("session of 128 streams from 127.0.0.1: 0 of them complete")),
            "{model:?}: {}",
            server.stdout()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = test_file(dir.path(), "after.txt", 100_000);
        let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
    }
}

/// `tsserver --threads 2` serves two sessions of four streams at once, every stripe verified,
/// with one shared listening socket and with one per loop (`--accept reuseport`),
/// and `--max-clients` holds across its event loops: a connection past it is refused whichever
/// loop accepts it.
#[test]
fn two_event_loops_serve_two_sessions_within_one_limit() {
    for accept in ["shared", "reuseport"] {
        two_loops(accept);
    }
}

fn two_loops(accept: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "both.txt", 8 << 20);
    let server = Server::start(&["--threads", "2", "--accept", accept]);
    let port = server.port;
    let p = path.to_str().unwrap().to_owned();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || client_json(port, &["-P", "4", "-t", "1", &p]))
        })
        .collect();
    for r in runs {
        let (out, v) = r.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{accept}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{accept}: {v:#}");
    }
    assert!(
        server.wait_for(|out, _| out
            .matches("session of 4 streams from 127.0.0.1: 4 of them complete")
            .count()
            == 2),
        "{}",
        server.stdout()
    );
    drop(server);
    let server = Server::start(&["--threads", "2", "--accept", accept, "--max-clients", "2"]);
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    assert!(server.wait_for(|_, _| true));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut third = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    third.set_read_timeout(Some(DEADLINE)).unwrap();
    match read_one_frame(&mut third) {
        Some(Frame::Refuse { reason, .. }) => {
            assert!(reason.contains("--max-clients"), "{accept}: {reason}")
        }
        other => panic!("{accept}: {other:?}"),
    }
    drop(idle);
}

/// `-R -P 4`: four reverse streams, each a share of --bytes, each verified, their shares
/// summing to what was asked; timed, each repeats its share; in both server models.
#[test]
fn reverse_parallel_four_verified() {
    for model in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(server.port, &["-R", "-P", "4", "--bytes", "1000003"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "parallel-reverse");
        let streams = v["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 4);
        assert!(streams.iter().all(|s| s["verified"] == true), "{v:#}");
        assert_eq!(v["sum"]["bytes"].as_u64(), Some(1_000_003));
        assert_eq!(v["sum"]["verified"], true);
        // The server groups the reverse streams by their session id, as it does forward ones.
        assert!(
            server
                .wait_for(|out, _| out
                    .contains("session of 4 streams from 127.0.0.1: 4 of them complete")),
            "{model:?}: {}",
            server.stdout()
        );
        let (out, v) = client_json(
            server.port,
            &["-R", "-P", "2", "-t", "1", "--bytes", "1MiB"],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        assert!(v["sum"]["bytes"].as_u64().unwrap() > 1 << 20);
    }
}

/// `-P 3 -R NAME` stripes the served file as `-P 3 FILE` stripes a local one:
/// the server sends each stream its stripe (its Accept's length the stripe's), each stripe is
/// verified by its own digest and the stripes cover the file; timed, each repeats its stripe;
/// a file shorter than the session is refused, saying why; in both server models.
#[test]
fn reverse_parallel_stripes_a_served_file() {
    let dir = tempfile::tempdir().unwrap();
    let serve = dir.path().join("serve");
    std::fs::create_dir(&serve).unwrap();
    // Random bytes: a stripe sent from the wrong offset cannot match by chance.
    let bytes: Vec<u8> = (0..1_000_003u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(serve.join("f.bin"), &bytes).unwrap();
    std::fs::write(serve.join("two.bin"), b"ab").unwrap();
    for model in MODELS {
        let mut args = vec!["--serve", serve.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let (out, v) = client_json(server.port, &["-R", "-P", "3", "f.bin"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "parallel-reverse");
        assert_eq!(v["asked_bytes"].as_u64(), Some(1_000_003), "{v:#}");
        assert_eq!(v["sum"]["bytes"].as_u64(), Some(1_000_003));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        let streams = v["streams"].as_array().unwrap();
        let stripes = [
            (0usize, 333_334usize),
            (333_334, 333_334),
            (666_668, 333_335),
        ];
        for (s, (from, len)) in streams.iter().zip(stripes) {
            assert_eq!(s["source"], "f.bin");
            assert_eq!(s["asked_bytes"].as_u64(), Some(len as u64), "{s:#}");
            assert_eq!(s["verified"], true, "{s:#}");
            let want = format!(
                "{:016x}",
                xxhash_rust::xxh3::xxh3_64(&bytes[from..from + len])
            );
            assert_eq!(s["digest"], want.as_str(), "stream at {from}");
        }
        let (out, v) = client_json(server.port, &["-R", "-P", "2", "-t", "0.5", "f.bin"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        let out = client(&[
            "--port",
            &server.port.to_string(),
            "-R",
            "-P",
            "3",
            "two.bin",
        ]);
        assert_fails(
            &out,
            1,
            "cannot stripe \"two.bin\" over 3 streams: it has 2 bytes",
        );
    }
}

/// `-P 2 -t 1 -O 0.5`: the session's rate is of what came after each stream's omitted start
/// (the bytes summed, from the earliest end of an omitted start to the last end), forward and
/// reverse, as each stream's own rate is.
#[test]
fn a_parallel_session_leaves_its_omitted_start_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "omit.txt", 1 << 20);
    let server = Server::start(&[]);
    for reverse in [false, true] {
        let mut args = vec!["-P", "2", "-t", "1", "-O", "0.5"];
        if reverse {
            args.extend(["-R", "--bytes", "1MiB"]);
        } else {
            args.push(path.to_str().unwrap());
        }
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        let (mut bytes, mut first, mut last) = (0.0, f64::MAX, 0.0f64);
        for s in v["streams"].as_array().unwrap() {
            let t = &s["timed"];
            let omitted = t["omitted_bytes"].as_f64().unwrap();
            assert!(omitted > 0.0, "reverse {reverse}: {t}");
            let measured_s = s["elapsed_s"].as_f64().unwrap() - t["omitted_s"].as_f64().unwrap();
            let end = s["end_unix_us"].as_f64().unwrap();
            bytes += s["bytes"].as_f64().unwrap() - omitted;
            first = first.min(end - measured_s * 1e6);
            last = last.max(end);
        }
        let want = bytes / ((last - first) / 1e6) / (1024.0 * 1024.0);
        let said = v["sum"]["mib_per_s"].as_f64().unwrap();
        assert!(
            (said - want).abs() <= want * 1e-3,
            "reverse {reverse}: {said} against {want}"
        );
    }
}

/// `-P 2 --bidir`, as iperf3 `-P 2 --bidir`: a session of two streams each way at once, every
/// stream and each whole verified, and the server groups both sessions; in both models.
#[test]
fn parallel_bidir_verifies_both_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "both-ways.txt", 1_000_003);
    for model in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(
            server.port,
            &[
                "-P",
                "2",
                "--bidir",
                "--bytes",
                "999999",
                path.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "bidir");
        let (fwd, rev) = (&v["forward"], &v["reverse"]);
        assert_eq!(fwd["mode"], "parallel", "{v:#}");
        assert_eq!(rev["mode"], "parallel-reverse", "{v:#}");
        for side in [fwd, rev] {
            assert_eq!(side["streams"].as_array().unwrap().len(), 2, "{side:#}");
            assert_eq!(side["sum"]["verified"], true, "{side:#}");
        }
        assert_eq!(fwd["sum"]["bytes"].as_u64(), Some(1_000_003));
        assert_eq!(rev["sum"]["bytes"].as_u64(), Some(999_999));
        assert!(
            server.wait_for(|out, _| out
                .matches("session of 2 streams from 127.0.0.1: 2 of them complete")
                .count()
                == 2),
            "{model:?}: {}",
            server.stdout()
        );
    }
}
