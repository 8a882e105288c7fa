//! Reverse streams (`tsclient --reverse`): the server sends the generated stream,
//! the client receives, counts, checksums and verifies it against the server's end trailer;
//! the server bounds what a client may ask of it.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use std::io::Read;
use tsperf_proto::{Frame, Hello, RefuseCode, encode_hello};

const MODELS: [(&[&str], &str); 2] = [(&[], "event-loop"), (&["--blocking"], "blocking")];

/// The generated stream arrives whole and verified, in both server models and both client
/// models, and is the tsgen text byte for byte: its digest is that of a tsgen file of the size.
#[test]
fn reverse_receives_the_generated_stream_verified() {
    let digest = tsgen_digest(3_000_001);
    for (model, server_io) in MODELS {
        let server = Server::start(model);
        for io in [&[][..], &["--nonblocking"][..]] {
            for chunk in ["102", "10240"] {
                let mut args = vec!["--reverse", "--bytes", "3000001", "--chunk", chunk];
                args.extend_from_slice(io);
                let (out, v) = client_json(server.port, &args);
                assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                assert_eq!(v["mode"], "reverse");
                assert_eq!(v["verified"], true, "{v:#}");
                assert_eq!(v["bytes"].as_u64(), Some(3_000_001));
                assert_eq!(v["digest"], digest.as_str(), "the tsgen text");
                assert_eq!(v["server"]["digest"], digest.as_str());
                assert_eq!(v["server"]["io"], server_io);
                let writes = v["server"]["writes"].as_u64().unwrap();
                let c: u64 = chunk.parse().unwrap();
                assert!(writes >= 3_000_001u64.div_ceil(c), "{writes} writes of {c}");
                assert!(v["limited_by"].is_string(), "{v:#}");
            }
        }
        // The server's summary says what it sent.
        assert!(
            server.wait_for(|out, _| out.contains("tsserver: sent 2.86 MiB to")),
            "{}",
            server.stdout()
        );
    }
}

/// A timed reverse stream repeats its pass for its time and is verified whole, however far
/// into its last pass it stopped.
#[test]
fn a_timed_reverse_stream_is_verified() {
    for (model, _) in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(
            server.port,
            &["-R", "--bytes", "1MiB", "-t", "1", "--chunk", "1024"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        let bytes = v["bytes"].as_u64().unwrap();
        assert!(bytes > 1 << 20, "{model:?}: {bytes}");
        assert_eq!(v["server"]["bytes"].as_u64(), Some(bytes));
        let elapsed = v["elapsed_s"].as_f64().unwrap();
        assert!((0.9..10.0).contains(&elapsed), "a 1 s run took {elapsed} s");
        assert_eq!(v["timed"]["file_bytes"].as_u64(), Some(1 << 20));
        // The server's first to last write spans the run's time too (its clock is read once a
        // turn of writes, so the last turn's stamp is the last write's).
        let sent = v["server"]["elapsed_s"].as_f64().unwrap();
        assert!(
            (0.9..10.0).contains(&sent),
            "{model:?}: wrote for {sent} s of {elapsed}"
        );
    }
}

/// `-R -t 2 -O 1 -i 0.5`, as iperf3 users run it: the first second is left out of the rate
/// (its bytes and time named), the samples cover the run, every byte is verified; in both
/// models.
#[test]
fn reverse_takes_omit_and_interval() {
    for (model, _) in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(
            server.port,
            &[
                "-R", "--bytes", "1MiB", "-t", "1", "-O", "0.5", "-i", "0.25",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        let t = &v["timed"];
        assert_eq!(t["omit_s"].as_f64(), Some(0.5), "{t}");
        let (omitted, omitted_s) = (
            t["omitted_bytes"].as_u64().unwrap(),
            t["omitted_s"].as_f64().unwrap(),
        );
        let (bytes, elapsed) = (
            v["bytes"].as_u64().unwrap(),
            v["elapsed_s"].as_f64().unwrap(),
        );
        assert!(omitted > 0 && omitted < bytes, "{omitted} of {bytes}");
        assert!(
            omitted_s >= 0.5 && omitted_s < elapsed,
            "{omitted_s} of {elapsed}"
        );
        // The rate is of what came after the omitted start.
        let rate = (bytes - omitted) as f64 / (elapsed - omitted_s) / (1024.0 * 1024.0);
        let said = v["mib_per_s"].as_f64().unwrap();
        assert!(
            (said - rate).abs() <= rate * 1e-6 + 1e-9,
            "{said} against {rate}"
        );
        // Samples of what arrived, a quarter second each, summing to every byte received.
        let samples = v["intervals"].as_array().expect("intervals");
        assert!(samples.len() >= 4, "{model:?}: {} samples", samples.len());
        let sum: u64 = samples.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
        assert!(
            sum <= bytes && sum + (256 << 10) >= bytes,
            "{sum} of {bytes}"
        );
        assert!(
            samples.iter().all(|i| i["acked_bytes"].is_null()),
            "a receiver acknowledges nothing it sends"
        );
    }
}

/// What the server may refuse, it refuses at the hello, naming the flag: reverse on a server
/// started with --no-reverse, more bytes than --max-bytes; and the client refuses flags that
/// are the sender's, as usage errors.
#[test]
fn reverse_refusals_name_the_flag() {
    let server = Server::start(&["--no-reverse"]);
    let out = client(&["--port", &server.port.to_string(), "-R", "--bytes", "1k"]);
    assert_fails(&out, 1, "--no-reverse");
    let server = Server::start(&["--max-bytes", "1MiB"]);
    let out = client(&["--port", &server.port.to_string(), "-R", "--bytes", "2MiB"]);
    assert_fails(&out, 1, "(--max-bytes)");
    // A name asks for a served file, which a server without --serve does not have.
    let out = client(&["--port", &server.port.to_string(), "-R", "some.txt"]);
    assert_fails(&out, 1, "serves no files");
    let out = client(&["-R", "--bytes", "0"]);
    assert_fails(&out, 2, "invalid size '0'");
    // A hand-made hello naming a file: a path is refused as a bad name, a plain one because
    // this server serves none.
    let server = Server::start(&[]);
    for (name, code, words) in [
        ("../etc.txt", RefuseCode::Hello, "bad file name"),
        ("tsl.txt", RefuseCode::Unoffered, "serves no files"),
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut hello = Vec::new();
        encode_hello(
            &Hello {
                reverse: true,
                ..Hello::stream(10, 10, name)
            },
            &mut hello,
        );
        s.write_all(&hello).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Refuse { code: got, reason }) => {
                assert_eq!(got, code, "{name}: {reason}");
                assert!(reason.contains(words), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A reverse client that never reads costs the server one connection until --idle-timeout,
/// then is cut off with the reason, in both models; the server goes on serving.
#[test]
fn a_reverse_client_that_never_reads_is_cut_off() {
    for (model, _) in MODELS {
        let mut args = vec!["--idle-timeout", "1"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        socket2::SockRef::from(&s)
            .set_recv_buffer_size(4096)
            .unwrap();
        let mut hello = Vec::new();
        encode_hello(
            &Hello {
                reverse: true,
                ..Hello::stream(1 << 30, 65536, "")
            },
            &mut hello,
        );
        s.write_all(&hello).unwrap();
        assert!(
            server.wait_for(|_, err| err.contains("the client took no data for 1 s")),
            "{model:?}: {}",
            server.stderr()
        );
        drop(s);
        let (out, v) = client_json(server.port, &["-R", "--bytes", "10k"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ctrl-C in a reverse stream ends it as its end does: the client asks the server to stop, the
/// server sends its report and end trailer after what it had sent, and every byte received is
/// verified; exit 130, in both server models, timed or sized.
#[test]
fn ctrl_c_ends_a_reverse_stream_verified() {
    for (model, _) in MODELS {
        let server = Server::start(model);
        for args in [&["-t", "30"][..], &["--bytes", "60GiB"][..]] {
            let port = server.port.to_string();
            let mut all = vec!["--port", &port, "-R", "--json", "--chunk", "1024"];
            all.extend_from_slice(args);
            let out = interrupt_client(&all, Duration::from_millis(700));
            assert_fails(&out, 130, "every one verified");
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["verified"], true, "{model:?} {args:?}: {v:#}");
            assert_eq!(v["interrupted"], true);
            assert_eq!(v["server"]["bytes"], v["bytes"]);
            assert!(v["bytes"].as_u64().unwrap() > 0);
        }
    }
}

/// `--bidir` runs both directions at once on two connections, each verified with its own
/// figures and verdict: sized (the reverse pass is the file's size) and timed, in both models.
#[test]
fn bidir_verifies_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "both.txt", 2 << 20);
    let digest = xxh3_of(&path);
    for (model, _) in MODELS {
        let server = Server::start(model);
        for timed in [false, true] {
            let mut args = vec!["--bidir", path.to_str().unwrap()];
            if timed {
                args.extend(["-t", "1"]);
            }
            let (out, v) = client_json(server.port, &args);
            assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
            assert_eq!(v["mode"], "bidir");
            let (f, r) = (&v["forward"], &v["reverse"]);
            assert_eq!(f["mode"], "stream");
            assert_eq!(r["mode"], "reverse");
            assert_eq!(f["verified"], true, "{v:#}");
            assert_eq!(r["verified"], true, "{v:#}");
            assert_eq!(r["asked_bytes"].as_u64(), Some(2 << 20));
            assert!(f["limited_by"].is_string() && r["limited_by"].is_string());
            if timed {
                assert!(f["bytes"].as_u64().unwrap() > 2 << 20, "{v:#}");
                assert!(r["bytes"].as_u64().unwrap() > 2 << 20, "{v:#}");
            } else {
                assert_eq!(f["digest"], digest.as_str());
                assert_eq!(r["bytes"].as_u64(), Some(2 << 20));
            }
        }
    }
    // `--bidir` without FILE sends the generated stream both ways (sending.rs);
    // it used to be refused for want of a FILE.
    let out = client(&["--bidir", "-R", "f.txt"]);
    assert_fails(&out, 2, "cannot be used with");
}

/// `--bidir --chunk-reverse`: each direction is written at a chunk size of its own (this
/// client's 1024 B, the server's 128 KiB) and verified at it, alone and as `-P 2` sessions, in
/// both models.
#[test]
fn bidir_takes_a_chunk_each_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "each.txt", 3 << 20);
    let digest = xxh3_of(&path);
    for (model, _) in MODELS {
        let server = Server::start(model);
        for streams in ["1", "2"] {
            let args = ["--bidir", "-P", streams, "--chunk", "1024"];
            let mut args = args.to_vec();
            args.extend(["--chunk-reverse", "128K", path.to_str().unwrap()]);
            let (out, v) = client_json(server.port, &args);
            assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
            // -P 1 is a stream each way; -P 2 a session each way, a SUM and its streams.
            let (f, r) = (&v["forward"], &v["reverse"]);
            for (side, chunk) in [(f, 1024), (r, 128 << 10)] {
                let each = match side["streams"].as_array() {
                    Some(each) => {
                        assert_eq!(side["sum"]["verified"], true, "{v:#}");
                        each.clone()
                    }
                    None => vec![side.clone()],
                };
                assert_eq!(each.len().to_string(), streams, "{v:#}");
                for s in each {
                    assert_eq!(s["chunk"].as_u64(), Some(chunk), "{v:#}");
                    assert_eq!(s["verified"], true, "{v:#}");
                }
            }
            if streams == "1" {
                assert_eq!(f["digest"], digest.as_str());
                assert_eq!(r["bytes"].as_u64(), Some(3 << 20), "{v:#}");
            } else {
                assert_eq!(r["sum"]["bytes"].as_u64(), Some(3 << 20), "{v:#}");
            }
        }
    }
}

/// `tsserver --serve DIR`: a reverse stream naming a file gets that file, verified (its digest
/// is the file's), sized by it and, timed, again and again; a symlink, a FIFO, a missing file,
/// a path and a hostile name are refused with the reason, in both models.
#[test]
fn served_files_by_name_and_what_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let path = test_file(&served, "tsl.txt", 3 << 20);
    let digest = xxh3_of(&path);
    std::os::unix::fs::symlink(&path, served.join("link.txt")).unwrap();
    let fifo = std::ffi::CString::new(served.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for (model, _) in MODELS {
        let mut args = vec!["--serve", served.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let (out, v) = client_json(server.port, &["-R", "tsl.txt", "--chunk", "1000"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["source"], "tsl.txt");
        assert_eq!(v["digest"], digest.as_str());
        assert_eq!(v["bytes"].as_u64(), Some(3 << 20));
        let (out, v) = client_json(server.port, &["-R", "tsl.txt", "-t", "1"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        assert!(v["bytes"].as_u64().unwrap() > 3 << 20);
        let port = server.port.to_string();
        for (name, words) in [
            ("link.txt", "it is a symlink"),
            ("fifo", "not a regular file"),
            ("nope.txt", "no file \"nope.txt\" is served here"),
            ("a\u{202e}b.txt", "invisible formatting character"),
        ] {
            let out = client(&["--port", &port, "-R", name]);
            assert_fails(&out, 1, words);
        }
    }
    let server = Server::start(&["--serve", served.to_str().unwrap(), "--max-bytes", "1MiB"]);
    let out = client(&["--port", &server.port.to_string(), "-R", "tsl.txt"]);
    assert_fails(&out, 1, "this server sends at most 1048576 (--max-bytes)");
}

/// The receiving end's log sink in reverse: `tsclient --log file` writes the server's lines
/// (a start, a line per read of a chunk, an end) for what it receives, and the verdict can name
/// it; flags for it outside a reverse stream, or stdout beside --json, are usage errors.
#[test]
fn reverse_logs_each_read_on_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("reads.log");
    let server = Server::start(&[]);
    let (out, v) = client_json(
        server.port,
        &[
            "-R",
            "--bytes",
            "100000",
            "--chunk",
            "1000",
            "--log",
            "file",
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    let c = &v["client"];
    assert_eq!(c["log"], "file");
    assert_eq!(c["read_size"].as_u64(), Some(1000));
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, c["log_lines"].as_u64().unwrap());
    assert_eq!(lines.len() as u64, c["reads"].as_u64().unwrap() + 2);
    assert!(lines[0].contains("event=\"start\"") && lines[0].contains("chunk=1000"));
    assert!(lines[1].contains(" conn=1 seq=1 bytes="), "{}", lines[1]);
    assert!(lines.last().unwrap().contains("status=\"complete\""));
}

/// A reverse stream whose server dies mid-stream fails (exit 1), and with --json its one
/// object says what arrived until then: the bytes received and checksummed, their time, not
/// verified, and why.
#[test]
fn a_failed_reverse_stream_says_what_arrived() {
    for (model, _) in MODELS {
        let server = Server::start(model);
        let child = std::process::Command::new(bin("tsclient"))
            .args(["--port", &server.port.to_string(), "-R", "--json"])
            .args(["--bytes", "60GiB", "--chunk", "1024"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        drop(server);
        let out = wait_child(child);
        assert_eq!(out.status.code(), Some(1), "{model:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(v["mode"], "reverse", "{v:#}");
        assert_eq!(v["verified"], false);
        assert!(v["received_bytes"].as_u64().unwrap() > 0, "{v:#}");
        assert!(v["elapsed_s"].as_f64().unwrap() > 0.0, "{v:#}");
        assert!(v["error"].as_str().unwrap().contains("bytes"), "{v:#}");
    }
}

/// In `--bidir` the receiving direction's CPU time is its own thread's, not the process's (which
/// holds the sending thread's too, and made the receiver look busier than it was): it stays
/// within the receiving thread's time on a CPU.
#[test]
fn bidir_reverse_cpu_is_the_receiving_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "cpu.txt", 8 << 20);
    let server = Server::start(&[]);
    let (out, v) = client_json(
        server.port,
        &[
            "--bidir",
            "-t",
            "1",
            "--chunk",
            "1024",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = &v["reverse"];
    let cpu = r["cpu"]["user_s"].as_f64().unwrap() + r["cpu"]["sys_s"].as_f64().unwrap();
    let on_cpu = r["client"]["on_cpu_s"].as_f64().unwrap();
    let sender = v["forward"]["client"]["on_cpu_s"].as_f64().unwrap();
    assert!(
        sender > 0.1,
        "the forward stream kept its thread busy: {sender} s"
    );
    // rusage and schedstat count the same thread's time, rusage at tick resolution.
    assert!(
        cpu <= on_cpu * 1.25 + 0.02,
        "reverse cpu {cpu} s against its thread's {on_cpu} s on a CPU (the sender's: {sender} s)"
    );
}

/// With no clock queries, a reverse stream's data never overtakes its Accept
/// (the event loop queued the Accept and wrote the data straight to the socket, so the client
/// read text where the Accept belonged): `-R`, `--bidir` and `-P -R`.
#[test]
fn reverse_without_clock_queries_gets_its_accept_first() {
    for model in EVERY_MODEL {
        let server = Server::start(model);
        for mode in [
            &["-R", "--bytes", "1MiB"][..],
            &["--bidir", "--bytes", "1MiB"][..],
            &["-P", "2", "-R", "--bytes", "1MiB"][..],
        ] {
            for _ in 0..3 {
                let mut args = vec!["--clock-queries", "0"];
                args.extend_from_slice(mode);
                let (out, v) = client_json(server.port, &args);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{model:?} {mode:?}: {}",
                    stderr(&out)
                );
                let verified = match v["mode"].as_str() {
                    Some("bidir") => v["reverse"]["verified"].clone(),
                    Some("parallel-reverse") => v["sum"]["verified"].clone(),
                    _ => v["verified"].clone(),
                };
                assert_eq!(verified, true, "{v:#}");
            }
        }
    }
}

/// A client that asks its reverse stream to stop with more than one byte (here
/// 1000, more than the server looks at in a turn) still gets the stream's end: its data up to
/// the stop, the Sent frame and the trailer, not a reset that loses them, in both models.
#[test]
fn many_stop_bytes_still_end_with_the_trailer() {
    use tsperf_proto::sent::{Closing, REVERSE_TAIL, decode_closing};
    for model in EVERY_MODEL {
        let server = Server::start(model);
        let mut s = reverse_stream(server.port, 1 << 34, 10240);
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        let mut some = vec![0u8; 1 << 20];
        s.read_exact(&mut some).unwrap();
        s.write_all(&[1u8; 1000]).unwrap();
        let mut rest = Vec::new();
        let read = s.read_to_end(&mut rest);
        assert!(read.is_ok(), "{model:?}: {read:?}");
        assert!(
            rest.len() >= REVERSE_TAIL,
            "{model:?}: {} bytes",
            rest.len()
        );
        let tail = &rest[rest.len() - REVERSE_TAIL..];
        assert!(
            matches!(
                decode_closing(&tail[..REVERSE_TAIL - tsperf_proto::END_TRAILER]),
                Ok(Closing::Sent(_))
            ),
            "{model:?}"
        );
    }
}

/// A receiver's figures are one object whichever end received: a forward stream's `server` and
/// a reverse stream's `client` carry the same fields (the Report's, made by the engine's
/// receiver at either end), each end's receiving thread's time on a CPU among them (a server's
/// from protocol 13).
#[test]
fn a_receivers_figures_are_the_same_fields_at_either_end() {
    let server = Server::start(&[]);
    let (out, forward) = client_json(server.port, &["--bytes", "8MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, reverse) = client_json(server.port, &["-R", "--bytes", "8MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (whose, o) in [
        ("a forward stream's server", &forward["server"]),
        ("a reverse stream's client", &reverse["client"]),
    ] {
        for key in [
            "reads",
            "read_size",
            "log",
            "log_lines",
            "log_lines_lost",
            "rcvbuf",
            "on_cpu_s",
            "run_queue_s",
        ] {
            assert!(o.get(key).is_some(), "{whose} has no {key}: {o:#}");
        }
        assert!(o["reads"].as_u64().is_some_and(|n| n > 0), "{whose}: {o:#}");
        assert!(
            o["read_size"].as_u64().is_some_and(|n| n > 0),
            "{whose}: {o:#}"
        );
        assert_eq!(o["log"], "none", "{whose}: {o:#}");
        assert!(
            o["on_cpu_s"].as_f64().is_some_and(|s| s > 0.0),
            "{whose}: its receiving thread's time on a CPU: {o:#}"
        );
    }
}
