//! The packaged tsprobe.service's sandbox: it rates below 5 with `systemd-analyze security`, and
//! every system call tsprobe and the tsclient runs it starts make (a stream, a reverse stream, a
//! latency run, a failed probe, a probe cut at its deadline) is one its `SystemCallFilter=`
//! allows, traced by strace. Skipped, with a message, where systemd-analyze or strace is
//! missing.

use crate::common::*;
use crate::package::{sandbox, traced};
use crate::prometheus::{Probe, http_get};

#[test]
fn the_probe_units_sandbox_allows_what_tsprobe_does() {
    let Some((allowed, families)) = sandbox("tsprobe") else {
        return;
    };
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let trace_arg = trace.to_str().unwrap();
    let mut probe = Probe::start_under(&["strace", "-f", "-qq", "-o", trace_arg], &[]);
    let (silent, port) = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        (l, p)
    };
    let t = format!("127.0.0.1:{}", server.port);
    for (query, success) in [
        (format!("target={t}&bytes=4MiB"), "1"),
        (format!("target={t}&reverse=1&bytes=4MiB"), "1"),
        (format!("target={t}&latency=20"), "1"),
        (format!("target=127.0.0.1:{}", dead_port()), "0"),
        (format!("target=127.0.0.1:{port}"), "0"),
    ] {
        let (status, page) = http_get(
            &probe.addr,
            &format!("/probe?{query}"),
            &[("X-Prometheus-Scrape-Timeout-Seconds", "2")],
        );
        assert_eq!(status, 200, "{query}: {page}");
        assert!(
            page.contains(&format!("tsperf_probe_success {success}\n")),
            "{query}: {page}"
        );
    }
    drop(silent);
    // The stop goes to tsprobe, strace's child; strace ends with it.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", probe.pid())).unwrap();
    let pid: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: kill(2) on the tsprobe this test started (under strace).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    probe.wait();
    let (calls, opened) = traced(&std::fs::read_to_string(&trace).unwrap());
    assert!(
        calls.contains("execve") && calls.contains("accept4"),
        "{calls:?}"
    );
    let outside: Vec<&String> = calls.iter().filter(|c| !allowed.contains(*c)).collect();
    assert!(
        outside.is_empty(),
        "tsprobe or its tsclient made system calls the unit forbids: {outside:?}"
    );
    for family in opened {
        assert!(families.contains(&family), "a socket of {family}");
    }
}
