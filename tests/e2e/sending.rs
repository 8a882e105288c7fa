//! What is sent, and how: the generated stream (one period in memory, sent without a FILE),
//! `--one-buffer`, the congestion control each sending end uses, and the reverse receiver's
//! wake-up mark.

use crate::common::*;

/// Runs `cmd` (stdout to a file) and samples its `VmHWM` until it exits: the peak resident set
/// of the program itself. (`wait4`'s `ru_maxrss` is no use here: exec keeps the larger of the
/// new program's peak and the spawning process's, and a test process is large.)
fn peak_rss_kib(cmd: &mut std::process::Command) -> (bool, Vec<u8>, u64) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdout(out.reopen().unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let (mut peak, end) = (0u64, std::time::Instant::now() + DEADLINE);
    let code = loop {
        if let Some(kib) = std::fs::read_to_string(&status).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        }) {
            peak = peak.max(kib);
        }
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        assert!(std::time::Instant::now() < end, "the client did not end");
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    (code.success(), std::fs::read(out.path()).unwrap(), peak)
}

/// The generated stream is one period in memory, sent again and again: a stream
/// many periods long takes the memory of one (it used to be made whole in memory before the
/// clock, 0.7 s of client CPU per GiB), and its bytes are still the reverse stream's, whole,
/// in stripes and by sendfile.
#[test]
fn the_generated_stream_takes_one_period_of_memory() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let len: u64 = 5 * tsperf_sys::testdata::SEED_FILE_LEN + 7;
    let run = |extra: &[&str]| {
        let (ok, stdout, peak) = peak_rss_kib(
            std::process::Command::new(bin("tsclient"))
                .args(["--port", &port, "--json", "--chunk", "128k"])
                .args(["--bytes", &len.to_string()])
                .args(extra),
        );
        assert!(ok, "{extra:?} failed: {}", String::from_utf8_lossy(&stdout));
        let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        (peak, v)
    };
    let want = generated_digest(len);
    let (peak, v) = run(&[]);
    assert_eq!(v["verified"], true, "{v:#}");
    assert_eq!(v["digest"], want.as_str());
    assert_eq!(v["bytes"].as_u64(), Some(len));
    // One period is 36 MiB; the whole stream 180 MiB.
    assert!(peak > 0 && peak < 100 << 10, "the client held {peak} KiB");
    let (_, v) = run(&["--io", "sendfile"]);
    assert_eq!(v["digest"], want.as_str(), "{v:#}");
    let (_, v) = run(&["--io", "writev", "--batch", "7", "--nonblocking"]);
    assert_eq!(v["digest"], want.as_str(), "{v:#}");
    let (_, v) = run(&["-P", "3"]);
    assert_eq!(v["sum"]["verified"], true, "{v:#}");
    assert_eq!(v["sum"]["bytes"].as_u64(), Some(len));
    // Past what memory could hold before (4 GiB, refused then): accepted.
    let out = client(&["--port", &port, "--bytes", "5GiB", "-t", "0.2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `--one-buffer` sends one `--chunk` of the generated stream again and again (iperf3's
/// memory mode): the server's digest is that of the seed text's first chunk repeated to
/// `--bytes`, verified on both ends, in every I/O model, and sent so by the server with
/// `--reverse`; with FILE or a served NAME it is refused.
#[test]
fn one_buffer_sends_one_chunk_again_and_again() {
    let dir = tempfile::tempdir().unwrap();
    let seed = test_file(dir.path(), "first.txt", 10240);
    let block = std::fs::read(&seed).unwrap();
    let len = (1 << 20) + 777;
    let want: Vec<u8> = block.iter().copied().cycle().take(len).collect();
    let want = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&want));
    let server = Server::start(&[]);
    let bytes = len.to_string();
    for extra in [
        &[][..],
        &["--nonblocking"],
        &["--io", "writev"],
        &["-P", "2"],
    ] {
        let mut args = vec!["--one-buffer", "--chunk", "10240", "--bytes", &bytes];
        args.extend_from_slice(extra);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        if extra == ["-P", "2"] {
            assert_eq!(v["sum"]["verified"], true, "{v}");
            continue;
        }
        assert_eq!(v["verified"], true, "{extra:?}: {v}");
        assert_eq!(v["digest"], want.as_str(), "{extra:?}: {v}");
        assert_eq!(v["file"], "generated-one-buffer", "{v}");
    }
    // In reverse the server sends it so (protocol 9), in both of its models.
    for model in [&[][..], &["--blocking"]] {
        let server = Server::start(model);
        let mut args = vec!["-R", "--one-buffer", "--chunk", "10240", "--bytes", &bytes];
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true, "{model:?}: {v}");
        assert_eq!(v["digest"], want.as_str(), "{model:?}: {v}");
        assert_eq!(v["server"]["digest"], want.as_str(), "{model:?}: {v}");
        assert_eq!(v["source"], "generated-one-buffer", "{v}");
        args.extend_from_slice(&["-P", "2"]);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["sum"]["verified"], true, "{model:?}: {v}");
        // --bidir: one buffer both ways, the same bytes.
        let args = [
            "--bidir",
            "--one-buffer",
            "--chunk",
            "10240",
            "--bytes",
            &bytes,
        ];
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        for (side, name) in [("forward", "file"), ("reverse", "source")] {
            assert_eq!(v[side]["verified"], true, "{side}: {v}");
            assert_eq!(v[side]["digest"], want.as_str(), "{side}: {v}");
            assert_eq!(v[side][name], "generated-one-buffer", "{side}: {v}");
        }
    }
    let port = server.port.to_string();
    let file = seed.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--port", &port, "--one-buffer", file],
            "'--one-buffer' cannot be used with",
        ),
        (
            vec!["--port", &port, "--one-buffer", "-R", "served.txt"],
            "'--one-buffer' cannot be used with '[FILE]'",
        ),
    ] {
        assert_fails(&client(&args), 2, needle);
    }
}

/// `--congestion` (iperf3's `-C`) sends with the algorithm asked for, in every way of sending,
/// and the report names the one used (the kernel's default without the flag); a name the
/// kernel has not, a malformed name and a reverse run are refused, each saying why.
#[cfg(target_os = "linux")]
#[test]
fn congestion_control_is_chosen_and_named() {
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["--bytes", "1M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["client"]["congestion"], default.trim(), "{v}");
    // reno is built into every Linux kernel; whatever the default, it is asked for here.
    for extra in [
        &[][..],
        &["--nonblocking"],
        &["--io", "sendfile"],
        &["--one-buffer", "--chunk", "131072"],
        &["-P", "2"],
    ] {
        let mut args = vec!["--bytes", "3M", "--congestion", "reno"];
        args.extend_from_slice(extra);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        let streams = match v["streams"].as_array() {
            Some(s) => s.clone(),
            None => vec![v.clone()],
        };
        assert_eq!(streams.len(), if extra == ["-P", "2"] { 2 } else { 1 });
        for s in &streams {
            assert_eq!(s["verified"], true, "{extra:?}: {s}");
            assert_eq!(s["client"]["congestion"], "reno", "{extra:?}: {s}");
        }
    }
    let port = server.port.to_string();
    let human = client(&["--port", &port, "-V", "--bytes", "1M", "-C", "reno"]);
    assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
    assert!(
        stdout(&human).contains(", TCP reno, cpu "),
        "{}",
        stdout(&human)
    );
    for (args, code, needle) in [
        (
            vec!["--port", &port, "--bytes", "1M", "-C", "no_such_algo"],
            1,
            "no TCP congestion control 'no_such_algo' (available: ",
        ),
        (
            vec!["--port", &port, "-C", "cu bic"],
            2,
            "'cu bic' is not a congestion control name",
        ),
        (
            vec!["--port", &port, "-C", "reno", "--latency"],
            2,
            "--congestion applies to stream transfers only",
        ),
    ] {
        assert_fails(&client(&args), code, needle);
    }
}

/// `-R -C ALGO` (protocol 10): the server sends with the congestion control asked for, as
/// iperf3 -R -C does, in both server models, each stream of a session and both ways of
/// `--bidir`; every reverse report names the algorithm the server sent with (by default its
/// kernel's); one the server's kernel has not is refused, naming it and what it offers.
#[test]
fn the_server_sends_with_the_congestion_control_asked_for() {
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    for model in [&[][..], &["--blocking"]] {
        let server = Server::start(model);
        let (out, v) = client_json(server.port, &["-R", "--bytes", "1M"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["server"]["congestion"], default.trim(), "{v}");
        for extra in [
            &[][..],
            &["-P", "2"],
            &["--one-buffer", "--chunk", "131072"],
        ] {
            let mut args = vec!["-R", "--bytes", "3M", "-C", "reno"];
            args.extend_from_slice(extra);
            let (out, v) = client_json(server.port, &args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{model:?} {extra:?}: {}",
                stderr(&out)
            );
            let streams = match v["streams"].as_array() {
                Some(s) => s.clone(),
                None => vec![v.clone()],
            };
            assert_eq!(streams.len(), if extra == ["-P", "2"] { 2 } else { 1 });
            for s in &streams {
                assert_eq!(s["verified"], true, "{model:?} {extra:?}: {s}");
                assert_eq!(
                    s["server"]["congestion"], "reno",
                    "{model:?} {extra:?}: {s}"
                );
            }
        }
        let (out, v) = client_json(server.port, &["--bidir", "--bytes", "2M", "-C", "reno"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["forward"]["client"]["congestion"], "reno", "{v}");
        assert_eq!(v["reverse"]["server"]["congestion"], "reno", "{v}");
        let port = server.port.to_string();
        let human = client(&["--port", &port, "-V", "-R", "--bytes", "1M", "-C", "reno"]);
        assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
        assert!(
            stdout(&human).contains(" short), TCP reno, first to last write "),
            "{}",
            stdout(&human)
        );
        // A parallel session's SUM line names the algorithm its streams were sent with,
        // either way.
        for reverse in [&["-R"][..], &[]] {
            let mut args = vec![
                "--port", &port, "-V", "-P", "2", "--bytes", "2M", "-C", "reno",
            ];
            args.extend_from_slice(reverse);
            let human = client(&args);
            assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
            let sum = stdout(&human)
                .lines()
                .find(|l| l.starts_with("[SUM]"))
                .map(str::to_owned);
            assert!(
                sum.as_deref()
                    .is_some_and(|l| l.contains(", sent with TCP reno")),
                "{reverse:?}: {}",
                stdout(&human)
            );
        }
        assert_fails(
            &client(&["--port", &port, "-R", "--bytes", "1M", "-C", "no_such_algo"]),
            1,
            "no TCP congestion control 'no_such_algo' (available: ",
        );
    }
}

/// A client receiving a reverse stream on a path of large segments (loopback) raises
/// its receive low-water mark to 256 KiB once its buffer is four times that (a forward stream's
/// server raises its own to 64 KiB), so each segment the server sends does not wake it (on
/// loopback the wake-up is the sender's CPU); JSON `client.wake_mark` says which mark it read
/// with. Every stream still ends, and verifies, at sizes that are no multiple of the mark.
/// How fast the buffer grows is the kernel's: on a loaded machine (the whole suite at once) an
/// 8 MiB stream once ended with its buffer at 872 KiB and the mark at 1, so a run's mark is
/// either, and each server model must see it raised.
#[test]
fn a_reverse_receiver_raises_its_wake_mark_on_loopback() {
    for model in [&[][..], &["--blocking"]] {
        let server = Server::start(model);
        let mut raised = 0;
        for io in [&[][..], &["--nonblocking"]] {
            for bytes in ["64M", "3000001"] {
                let mut args = vec!["-R", "--bytes", bytes];
                args.extend_from_slice(io);
                let (out, v) = client_json(server.port, &args);
                assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
                assert_eq!(v["verified"], true, "{args:?}: {v}");
                let mark = &v["client"]["wake_mark"];
                assert!(mark == 262144 || mark == 1, "{model:?} {args:?}: {v}");
                raised += usize::from(mark == 262144);
            }
        }
        assert!(raised > 0, "{model:?}: no reverse stream raised its mark");
        // A stream shorter than what grows the buffer never raises it, and ends.
        let (out, v) = client_json(server.port, &["-R", "--bytes", "1000"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["client"]["wake_mark"], 1, "{v}");
    }
}

/// A forward run without FILE sends the generated stream, as iperf3 does without -F: `--bytes`
/// of it (by default the seed's 36 MiB), with `-t` for a time, with `-P` in stripes, with
/// `--bidir` both ways; the bytes are the ones a reverse stream of the same size carries.
#[test]
fn a_forward_run_without_a_file_sends_the_generated_stream() {
    for model in MODELS {
        let server = Server::start(model);
        let (out, v) = client_json(server.port, &["--bytes", "3000001", "--chunk", "1024"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["mode"], "stream");
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["bytes"].as_u64(), Some(3_000_001));
        assert_eq!(v["digest"], generated_digest(3_000_001).as_str());
        assert_eq!(v["server"]["digest"], v["digest"]);
        assert_eq!(v["file"], "generated");

        // The default size is the seed's file: tsl.txt byte for byte.
        let (out, v) = client_json(server.port, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            v["bytes"].as_u64(),
            Some(tsperf_sys::testdata::SEED_FILE_LEN)
        );
        assert_eq!(v["digest"], "ec40a45bcc9c239d", "tsl.txt's digest");

        // More than one pattern: the pattern again, as the server's generated stream is.
        let big = tsperf_sys::testdata::SEED_FILE_LEN + 12345;
        let (out, v) = client_json(server.port, &["--bytes", &big.to_string()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["digest"], generated_digest(big).as_str());

        let (out, v) = client_json(server.port, &["-t", "0.3", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["timed"]["file_bytes"].as_u64(), Some(1 << 20));

        let (out, v) = client_json(server.port, &["-P", "2", "--bytes", "2MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["mode"], "parallel");
        assert_eq!(v["sum"]["verified"], true, "{v:#}");
        assert_eq!(v["sum"]["bytes"].as_u64(), Some(2 << 20));

        let (out, v) = client_json(server.port, &["--bidir", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["forward"]["verified"], true, "{v:#}");
        assert_eq!(v["forward"]["digest"], generated_digest(1 << 20).as_str());
        assert_eq!(v["reverse"]["verified"], true, "{v:#}");
        assert_eq!(v["reverse"]["digest"], v["forward"]["digest"]);
    }
}
