//! iperf3's client flags against a real server: each does what iperf3's does, every run still
//! verified.

use crate::common::*;

/// The first of `n` ports in a row that nothing here holds, below the kernel's ephemeral
/// range so that no other test's connection can take one meanwhile.
fn free_block(n: u16) -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    (low.saturating_sub(8000)..low - n)
        .step_by(usize::from(n))
        .find(|&first| {
            let held: Vec<_> = (first..first + n)
                .map_while(|p| std::net::TcpListener::bind(("0.0.0.0", p)).ok())
                .collect();
            held.len() == usize::from(n)
        })
        .expect("a free block of ports below the ephemeral range")
}

/// `-b RATE` paces the stream (bits a second): a 40 Mbit/s run of 3 MiB arrives no faster
/// than half again the rate asked, and verified; the verdict names the pace asked when the run
/// reached it (a timed run, long enough to judge), and the report says so.
#[test]
fn bitrate_paces_the_stream() {
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["-b", "40M", "-n", "3M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true, "{v:#}");
    let asked = 40e6 / 8.0 / 1048576.0;
    let got = v["mib_per_s"].as_f64().unwrap();
    assert!(
        got <= asked * 1.5,
        "paced to {asked:.2} MiB/s, moved {got:.2}"
    );
    assert_eq!(v["limits"]["pace_bytes_per_s"], 5_000_000, "{v:#}");
    let port = server.port.to_string();
    for way in [&[][..], &["-R"]] {
        let mut args = vec!["--port", &port, "-b", "40M", "-t", "1"];
        args.extend_from_slice(way);
        let out = client(&args);
        assert_eq!(out.status.code(), Some(0), "{way:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.contains("limited by the pace asked of the")
                && text.contains("(-b 40.0 Mbit/s): the rate reached"),
            "{way:?}: {text}"
        );
    }
}

/// `-R -b RATE` (protocol 15): the server paces what it sends to the rate asked, in both of
/// its models, as iperf3 -R -b does; `--bidir -b` paces both ways. Each paced stream arrives no
/// faster than half again the rate asked, and verified.
#[test]
fn bitrate_paces_the_servers_sends() {
    let asked = 40e6 / 8.0 / 1048576.0;
    let paced = |s: &serde_json::Value, what: &str| {
        assert_eq!(s["verified"], true, "{what}: {s:#}");
        let got = s["mib_per_s"].as_f64().unwrap();
        assert!(
            got <= asked * 1.5,
            "{what}: paced to {asked:.2} MiB/s, moved {got:.2}"
        );
    };
    for model in [&[][..], &["--blocking"]] {
        let server = Server::start(model);
        let (out, v) = client_json(server.port, &["-R", "-b", "40M", "-n", "3M"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        paced(&v, &format!("{model:?} -R"));
        let (out, v) = client_json(server.port, &["--bidir", "-b", "40M", "-n", "3M"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        paced(&v["forward"], &format!("{model:?} --bidir forward"));
        paced(&v["reverse"], &format!("{model:?} --bidir reverse"));
    }
}

/// `-b` with `-t`: a paced timed run ends at its time, not once its sender's socket has
/// drained seconds of queued data at the pace (what waits unsent is held near 50 ms of it),
/// each way, in both server models, verified.
#[test]
fn a_paced_timed_run_ends_at_its_time() {
    for model in [&[][..], &["--blocking"]] {
        let server = Server::start(model);
        for way in [&[][..], &["-R"]] {
            let mut args = vec!["-b", "1M", "-t", "2"];
            args.extend_from_slice(way);
            let (out, v) = client_json(server.port, &args);
            let what = format!("{model:?} {way:?}");
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
            assert_eq!(v["verified"], true, "{what}: {v:#}");
        }
    }
}

/// `-w BYTES` sizes this client's socket buffers (the kernel doubles what it is asked).
#[test]
fn window_sizes_the_send_buffer() {
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["-w", "256K", "-n", "1M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["client"]["sndbuf"], 2 * 256 * 1024, "{v:#}");
}

/// `-T TITLE` begins every line of the report; `-f m` prints the rows' rates in Mbit/s alone,
/// under the header's `Bitrate`.
#[test]
fn title_and_format_shape_the_report() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&["--port", &port, "-T", "lab", "-f", "m", "-n", "1M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().all(|l| l.starts_with("lab:  ")), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" sec ")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows.iter()
            .all(|r| r.contains("Mbit/s") && !r.contains("MiB/s")),
        "{text}"
    );
    // The rate's number ends under the header's `Bitrate`, as the default's MiB/s does.
    let head = text.lines().find(|l| l.contains("Bitrate")).unwrap();
    let from = head.find("Bitrate").unwrap();
    for r in &rows {
        let end = r.find(" Mbit/s").unwrap();
        assert!(
            (from..from + 7).contains(&end),
            "the rate does not stand under Bitrate:\n{head}\n{r}"
        );
    }
}

/// `--logfile FILE` appends the report to FILE and leaves stdout empty.
#[test]
fn logfile_takes_the_report() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    for _ in 0..2 {
        let out = client(&[
            "--port",
            &port,
            "--logfile",
            log.to_str().unwrap(),
            "-n",
            "1M",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("verified: ").count(), 2, "{text}");
    let out = client(&[
        "--port",
        &port,
        "--logfile",
        "/nonexistent/dir/x.log",
        "-n",
        "1M",
    ]);
    assert_fails(&out, 1, "cannot write --logfile '/nonexistent/dir/x.log'");
}

/// `-4` and `-6` hold the connection to one family: an IPv4 address under -6 is refused,
/// naming the flag; under -4 it runs.
#[test]
fn a_family_flag_holds_the_connection_to_it() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&["--port", &port, "-6", "-n", "1M"]);
    assert_fails(&out, 1, "has no IPv6 address (-6 asks for one)");
    let out = client(&["--port", &port, "-4", "-n", "1M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `-B ADDR` and `--cport PORT` set where the connections come from, as the server sees them:
/// a session's streams from PORT and the ports after it. An address not this host's is
/// refused, naming it.
#[test]
fn bind_and_cport_set_this_end() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let cport = free_block(32);
    let c = cport.to_string();
    let out = client(&[
        "--port",
        &port,
        "-B",
        "127.0.0.2",
        "--cport",
        &c,
        "-n",
        "1M",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(server.wait_for(|o, _| o.contains(&format!("from 127.0.0.2:{cport} "))));
    for (k, model) in [&[][..], &["--nonblocking"][..]].into_iter().enumerate() {
        let first = cport + 10 * (k as u16 + 1);
        let next = first.to_string();
        let mut args = vec!["--port", &port, "--cport", &next, "-P", "2", "-n", "1M"];
        args.extend_from_slice(model);
        let out = client(&args);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        for p in [first, first + 1] {
            assert!(
                server.wait_for(|o, _| o.contains(&format!("from 127.0.0.1:{p} "))),
                "{model:?} {p}: {}",
                server.stdout()
            );
        }
    }
    // Not this host's: the bind fails before anything is sent.
    let out = client(&["--port", &port, "-B", "198.18.255.254", "-n", "1M"]);
    assert_fails(&out, 1, "cannot bind this end to 198.18.255.254:0");
}
