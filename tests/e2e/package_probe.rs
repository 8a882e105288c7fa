//! The packaged tsprobe.service's sandbox: it rates below 5 with `systemd-analyze security`, and
//! every system call tsprobe and the tsclient runs it starts make (a stream, a reverse stream, a
//! latency run, a failed probe, a probe cut at its deadline) is one its `SystemCallFilter=`
//! allows, traced by strace. Skipped, with a message, where systemd-analyze or strace is
//! missing.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::package::{exposure, tool, traced, unit_filter};
use crate::prometheus::http_get;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_probe_units_sandbox_allows_what_tsprobe_does() {
    let unit_path = Path::new(ROOT).join("packaging/debian/tsprobe.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    for missing in ["systemd-analyze", "strace"] {
        if tool(missing, &["--version"], Path::new(ROOT)).is_none() {
            eprintln!("skipped: {missing} is not installed");
            return;
        }
    }
    let score = exposure(&unit_path).expect("systemd-analyze security gives an exposure");
    assert!(score < 5.0, "exposure {score}: {unit}");
    let (allowed, families) = unit_filter(&unit);
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let mut probe = Command::new("strace")
        .args(["-f", "-qq", "-o", trace.to_str().unwrap()])
        .arg(bin("tsprobe"))
        .args(["--listen", "127.0.0.1:0", "--tsclient"])
        .arg(bin("tsclient"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(probe.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("tsprobe said {line:?}"))
        .to_owned();
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
            &addr,
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
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", probe.id())).unwrap();
    let pid: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: kill(2) on the tsprobe this test started (under strace).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let _ = probe.wait();
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
