//! Prometheus across a fleet: `tsserver --metrics` counts exactly what its clients did,
//! `tsprobe` answers a scrape with one verified run's figures (or why it has none) within the
//! scrape's timeout and stays bounded under a flood, and a real Prometheus scrapes three
//! servers through the probe with the relabelling `packaging/prometheus/prometheus.yml`
//! documents. `promtool check metrics` passes on every page.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// `GET path` from `addr` with `headers`: the status and the body (each wait bounded).
pub(crate) fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    s.write_all((req + "\r\n").as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// The value of the sample `series` (name and labels, as printed) on a metrics page.
pub(crate) fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `promtool check metrics` on `page`, where promtool is installed (`.ci/run` installs it and
/// sets `TSPERF_PROMETHEUS=required`, so there it cannot be skipped).
pub(crate) fn promtool_checks(page: &str) {
    let Some(promtool) = prometheus_tool("promtool") else {
        return;
    };
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{page}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The path of Prometheus's `name` (`prometheus`, `promtool`), if installed; where
/// `TSPERF_PROMETHEUS=required`, a test fails without it rather than pass unrun.
pub(crate) fn prometheus_tool(name: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("TSPERF_PROMETHEUS").as_deref() != Ok("required"),
            "{name} is not installed and TSPERF_PROMETHEUS=required"
        );
        eprintln!("skipped: {name} is not installed (apt-get install prometheus)");
    }
    found
}

/// The address a server's `--metrics 127.0.0.1:0` serves at.
pub(crate) fn metrics_addr(s: &Server) -> String {
    assert!(
        s.wait_for(|_, e| e.contains("metrics at http://")),
        "{}",
        s.stderr()
    );
    let err = s.stderr();
    let at = err.split("metrics at http://").nth(1).unwrap();
    at.split('/').next().unwrap().to_owned()
}

/// A running tsprobe, killed when dropped.
pub(crate) struct Probe {
    child: Child,
    pub addr: String,
}

impl Probe {
    pub(crate) fn start(args: &[&str]) -> Probe {
        Probe::start_under(&[], args)
    }

    /// tsprobe with ARGS, run by `wrapper` (`["strace", ...]`) where one is given.
    pub(crate) fn start_under(wrapper: &[&str], args: &[&str]) -> Probe {
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin("tsprobe"));
                c
            }
            None => Command::new(bin("tsprobe")),
        };
        let mut child = cmd
            .args(["--listen", "127.0.0.1:0", "--tsclient"])
            .arg(bin("tsclient"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = err.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        });
        let line = rx.recv_timeout(DEADLINE).expect("tsprobe's listening line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|a| a.split('/').next())
            .unwrap_or_else(|| panic!("tsprobe said {line:?}"))
            .to_owned();
        Probe { child, addr }
    }

    /// The process started (the wrapper, where there is one).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process started to exit.
    pub(crate) fn wait(&mut self) {
        let _ = self.child.wait();
    }

    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.addr, path, &[])
    }

    /// Its resident memory (KiB) and open descriptors once its last connection has closed (the
    /// fewest descriptors over a second).
    fn footprint(&self) -> (u64, usize) {
        (0..50)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                self.footprint_now()
            })
            .min_by_key(|&(_, fds)| fds)
            .unwrap()
    }

    fn footprint_now(&self) -> (u64, usize) {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count();
        (rss, fds)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that takes connections and never answers: a probe of it waits until its deadline.
fn silent_target() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// The server's counters move by exactly what its clients did: bytes each way, a transfer of
/// each, a bad hello's refusal; connections open go back to 0.
#[test]
fn server_metrics_count_what_the_clients_did() {
    let s = Server::start(&["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&s);
    let (status, before) = http_get(&addr, "/metrics", &[]);
    assert_eq!(status, 200, "{before}");
    promtool_checks(&before);
    let port = s.port.to_string();
    let out = client(&["--port", &port, "-n", "3M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = client(&["--port", &port, "-R", "-n", "2M"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut junk = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    junk.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = junk.read_to_end(&mut Vec::new());
    assert!(s.wait_for(|_, e| e.contains("refused")), "{}", s.stderr());
    let (_, after) = http_get(&addr, "/metrics", &[]);
    promtool_checks(&after);
    let moved = |series: &str| {
        sample(&after, series).unwrap_or_else(|| panic!("{series} missing:\n{after}"))
            - sample(&before, series).unwrap_or_else(|| panic!("{series} missing:\n{before}"))
    };
    for (series, by) in [
        (
            r#"tsperf_server_bytes_total{direction="receive"}"#,
            3.0 * 1048576.0,
        ),
        (
            r#"tsperf_server_bytes_total{direction="send"}"#,
            2.0 * 1048576.0,
        ),
        (
            r#"tsperf_server_transfers_total{direction="receive",result="complete"}"#,
            1.0,
        ),
        (
            r#"tsperf_server_transfers_total{direction="send",result="complete"}"#,
            1.0,
        ),
        (
            r#"tsperf_server_transfer_rate_bytes_per_second_count{direction="receive"}"#,
            1.0,
        ),
        (r#"tsperf_server_refusals_total{code="hello"}"#, 1.0),
        (r#"tsperf_server_refusals_total{code="limit"}"#, 0.0),
    ] {
        assert_eq!(moved(series), by, "{series}\n{after}");
    }
    assert_eq!(sample(&after, "tsperf_server_connections_open"), Some(0.0));
    let (status, body) = http_get(&addr, "/nothing", &[]);
    assert_eq!(
        (status, body.trim()),
        (404, "/nothing: not here; try /metrics")
    );
}

/// A tsclient that is not there is an error at start, naming --tsclient, not a failed probe
/// at every scrape.
#[test]
fn a_missing_tsclient_is_an_error_at_start() {
    let out = run(
        bin("tsprobe"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tsclient",
            "/nonexistent/tsclient",
        ],
    );
    assert_fails(&out, 1, "--tsclient '/nonexistent/tsclient': no such file");
}

/// A probe of a tsserver answers with a verified run's figures, of the same kind as tsclient's
/// own run of the same size (within 2x); a latency probe with its percentiles.
#[test]
fn a_probe_answers_with_a_verified_run() {
    let s = Server::start(&[]);
    let probe = Probe::start(&[]);
    let target = format!("/probe?target=127.0.0.1:{}&bytes=256MiB", s.port);
    let (status, page) = probe.get(&target);
    assert_eq!(status, 200, "{page}");
    promtool_checks(&page);
    assert_eq!(sample(&page, "tsperf_probe_success"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "tsperf_verified"), Some(1.0), "{page}");
    assert_eq!(
        sample(&page, "tsperf_transfer_bytes"),
        Some(256.0 * 1048576.0)
    );
    let rate = sample(&page, "tsperf_rate_bytes_per_second").unwrap();
    let (out, v) = client_json(s.port, &["-n", "256MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let own = v["mib_per_s"].as_f64().unwrap() * 1048576.0;
    assert!(
        rate / own < 2.0 && own / rate < 2.0,
        "probe {rate:.0} B/s, tsclient {own:.0} B/s"
    );
    for series in [
        r#"tsperf_cpu_seconds_per_gibibyte{end="client"}"#,
        r#"tsperf_cpu_seconds_per_gibibyte{end="server"}"#,
        "tsperf_rtt_seconds",
        "tsperf_retransmits",
    ] {
        assert!(sample(&page, series).is_some(), "{series}:\n{page}");
    }
    assert!(page.contains("tsperf_limited_by{stage="), "{page}");
    let (status, page) = probe.get(&format!("/probe?target=127.0.0.1:{}&latency=200", s.port));
    assert_eq!(status, 200, "{page}");
    promtool_checks(&page);
    let p50 = sample(&page, "tsperf_latency_p50_seconds").unwrap();
    let p99 = sample(&page, "tsperf_latency_p99_seconds").unwrap();
    assert!(p50 > 0.0 && p99 >= p50, "{page}");
    let (status, page) = probe.get(&format!(
        "/probe?target=127.0.0.1:{}&reverse=1&streams=2&bytes=4MiB",
        s.port
    ));
    assert_eq!(status, 200, "{page}");
    assert_eq!(sample(&page, "tsperf_probe_success"), Some(1.0), "{page}");
    assert!(
        page.contains("tsperf_run_info{mode=\"parallel-reverse\"} 1"),
        "{page}"
    );
    // A paced probe (`bitrate`, -b): the target sends at the rate asked, and the stage that
    // limited it is the pace.
    let (status, page) = probe.get(&format!(
        "/probe?target=127.0.0.1:{}&reverse=1&bitrate=40M&time=1",
        s.port
    ));
    assert_eq!(status, 200, "{page}");
    assert_eq!(sample(&page, "tsperf_verified"), Some(1.0), "{page}");
    let rate = sample(&page, "tsperf_rate_bytes_per_second").unwrap();
    assert!(
        rate <= 1.5 * 40e6 / 8.0,
        "paced to 5 MB/s, moved {rate:.0} B/s"
    );
    assert_eq!(
        sample(&page, r#"tsperf_limited_by{stage="paced"}"#),
        Some(1.0),
        "{page}"
    );
}

/// Every way a probe cannot succeed is `tsperf_probe_success 0` with its kind and reason, never
/// a hang past the scrape's timeout: a port with nothing on it, a name that does not resolve,
/// an iperf3 server, a server that never answers (cut off at the deadline), a parameter out of
/// range (a 400 naming it).
#[test]
fn a_probe_that_cannot_succeed_says_why() {
    let probe = Probe::start(&[]);
    let failed = |path: &str, kind: &str, says: &str| {
        let (status, page) = http_get(
            &probe.addr,
            path,
            &[("X-Prometheus-Scrape-Timeout-Seconds", "2")],
        );
        promtool_checks(&page);
        assert_eq!(sample(&page, "tsperf_probe_success"), Some(0.0), "{page}");
        let label = format!("tsperf_probe_failed{{kind=\"{kind}\"}}");
        assert_eq!(sample(&page, &label), Some(1.0), "{path}: {page}");
        assert!(page.contains(says), "{path}: {says} not in\n{page}");
        status
    };
    let dead = dead_port();
    assert_eq!(
        failed(
            &format!("/probe?target=127.0.0.1:{dead}"),
            "failed",
            "Connection refused"
        ),
        200
    );
    assert_eq!(
        failed(
            "/probe?target=no-such-host.invalid",
            "failed",
            "no-such-host.invalid"
        ),
        200
    );
    let iperf3 = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = iperf3.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = iperf3.accept() {
            let _ = s.read(&mut [0u8; 512]);
            let _ = s.write_all(&[9]);
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
    });
    failed(
        &format!("/probe?target=127.0.0.1:{port}"),
        "failed",
        "iperf3",
    );
    let (_silent, port) = silent_target();
    let status = failed(
        &format!("/probe?target=127.0.0.1:{port}"),
        "timeout",
        "deadline",
    );
    assert_eq!(status, 200);
    assert_eq!(
        failed(
            "/probe?target=h&streams=500",
            "bad-request",
            "streams '500'"
        ),
        400
    );
    assert_eq!(failed("/probe?bytes=1M", "bad-request", "no 'target'"), 400);
    assert_eq!(
        failed("/probe?target=h&io=nonsense", "bad-request", "nonsense"),
        400
    );
}

/// A flood is bounded: past --max-probes a scrape is told 503 with the reason, a second probe
/// of a busy target with other parameters 409, one with the same shares its answer; and 1,000
/// scrapes leave the exporter's memory and descriptors where they were.
#[test]
fn a_flood_of_scrapes_is_bounded() {
    let probe = Probe::start(&["--max-probes", "2"]);
    let silent: Vec<(TcpListener, u16)> = (0..3).map(|_| silent_target()).collect();
    let scrape = |port: u16, extra: &'static str| {
        let addr = probe.addr.clone();
        std::thread::spawn(move || {
            http_get(
                &addr,
                &format!("/probe?target=127.0.0.1:{port}{extra}"),
                &[("X-Prometheus-Scrape-Timeout-Seconds", "3")],
            )
        })
    };
    let first = [scrape(silent[0].1, ""), scrape(silent[1].1, "")];
    // Both run (the exporter says so) before the others come.
    let until = std::time::Instant::now() + DEADLINE;
    while sample(&probe.get("/metrics").1, "tsprobe_probes_running") != Some(2.0) {
        assert!(
            std::time::Instant::now() < until,
            "the two probes never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let full = scrape(silent[2].1, "").join().unwrap();
    assert_eq!(full.0, 503, "{}", full.1);
    assert!(full.1.contains("2 probes are running"), "{}", full.1);
    let other = scrape(silent[0].1, "&bytes=1M").join().unwrap();
    assert_eq!(other.0, 409, "{}", other.1);
    assert!(other.1.contains("other parameters"), "{}", other.1);
    let shared = scrape(silent[1].1, "").join().unwrap();
    for f in first {
        let (status, page) = f.join().unwrap();
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("kind=\"timeout\""), "{page}");
    }
    assert_eq!(shared.0, 200, "{}", shared.1);
    let (_, own) = probe.get("/metrics");
    assert_eq!(
        sample(&own, r#"tsprobe_scrapes_total{result="shared"}"#),
        Some(1.0),
        "{own}"
    );
    promtool_checks(&own);
    // A thousand scrapes (every fifth a tsclient run that fails at once, the others refused
    // for a parameter out of range): nothing grows.
    let dead = format!("/probe?target=127.0.0.1:{}", dead_port());
    let scrapes = |n: usize| {
        for i in 0..n {
            match i % 5 {
                0 => assert_eq!(probe.get(&dead).0, 200),
                _ => assert_eq!(probe.get("/probe?target=h&streams=0").0, 400),
            }
        }
    };
    scrapes(100);
    let (rss, fds) = probe.footprint();
    scrapes(900);
    let (rss_after, fds_after) = probe.footprint();
    assert_eq!(fds_after, fds, "descriptors");
    assert!(
        rss_after < rss + 4096,
        "resident memory grew from {rss} KiB to {rss_after} KiB over 900 scrapes"
    );
}
