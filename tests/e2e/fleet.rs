//! A fleet as an operator sets it up (docs/fleet.md): three tsservers, tsprobe, and a real
//! Prometheus scraping them with the relabelling of `packaging/prometheus/prometheus.yml`;
//! its query API gives each target's verified rate (the same kind of number as tsclient's own
//! run) and each server's counters (exactly what its clients did). The Grafana dashboard and
//! the alert rules name only metrics that are served. Where Prometheus is not installed, the
//! Prometheus test says it skipped (`.ci/run` installs it and requires it).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::prometheus::{Probe, http_get, prometheus_tool, promtool_checks, sample};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A running Prometheus, killed when dropped.
struct Prometheus {
    child: Child,
    addr: String,
    log: std::path::PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// `query`'s result vector: each series' labels and value.
    fn query(&self, query: &str) -> Vec<(serde_json::Value, f64)> {
        let q: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let (status, body) = http_get(&self.addr, &format!("/api/v1/query?query={q}"), &[]);
        assert_eq!(status, 200, "{query}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"].clone(), value)
            })
            .collect()
    }

    /// Waits (at most `limit`) until `ok` holds of `query`'s result; the last result.
    fn until(
        &self,
        query: &str,
        limit: Duration,
        ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
    ) -> Vec<(serde_json::Value, f64)> {
        let end = Instant::now() + limit;
        loop {
            let r = self.query(query);
            if ok(&r) {
                return r;
            }
            assert!(
                Instant::now() < end,
                "{query} never held: {r:?}\nprometheus said:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// The documented scrape jobs, pointed at this test's hosts and made quick.
fn config(targets: &[String], probe: &str, metrics: &[String]) -> String {
    let text =
        std::fs::read_to_string(format!("{ROOT}/packaging/prometheus/prometheus.yml")).unwrap();
    let mut text = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n".to_owned() + &text;
    let targets: String = targets
        .iter()
        .map(|t| format!("          - {t}\n"))
        .collect();
    for (from, to) in [
        (
            "          - host-b.example:7433\n          - host-c.example:7433\n",
            targets,
        ),
        ("probe-host.example:9874", probe.to_owned()),
        (
            "[host-b.example:9875, host-c.example:9875]",
            format!("[{}]", metrics.join(", ")),
        ),
        ("scrape_interval: 60s", "scrape_interval: 2s".to_owned()),
        ("scrape_timeout: 30s", "scrape_timeout: 2s".to_owned()),
    ] {
        assert!(text.contains(from), "the documented config has no {from:?}");
        text = text.replace(from, &to);
    }
    text
}

/// Three servers, the probe and Prometheus: each target's verified rate within 2x of
/// tsclient's own run of the same size, every probe a success, and each server's counters as
/// Prometheus stored them exactly what its clients did.
#[test]
fn prometheus_scrapes_three_servers_through_the_probe() {
    let (Some(prometheus), Some(promtool)) =
        (prometheus_tool("prometheus"), prometheus_tool("promtool"))
    else {
        return;
    };
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&["--metrics", "127.0.0.1:0"]))
        .collect();
    let metrics: Vec<String> = servers
        .iter()
        .map(crate::prometheus::metrics_addr)
        .collect();
    // Three runs of tsclient's own to each (64 MiB, as the probes' transfers).
    for s in &servers {
        for _ in 0..3 {
            let out = client(&["--port", &s.port.to_string(), "-n", "64MiB"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        }
    }
    // A bad hello to the first: one refusal.
    let mut junk = TcpStream::connect(("127.0.0.1", servers[0].port)).unwrap();
    junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    junk.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = junk.read_to_end(&mut Vec::new());
    // One probe at a time: the three targets share this machine as a link.
    let probe = Probe::start(&["--max-probes", "1"]);
    let targets: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(&cfg, config(&targets, &probe.addr, &metrics)).unwrap();
    std::fs::copy(
        format!("{ROOT}/packaging/prometheus/tsperf-rules.yml"),
        dir.path().join("tsperf-rules.yml"),
    )
    .unwrap();
    let check = run(promtool, &["check", "config", cfg.to_str().unwrap()]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}{}",
        stdout(&check),
        stderr(&check)
    );
    let port = dead_port();
    let log = dir.path().join("prometheus.log");
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let p = Prometheus {
        child,
        addr: format!("127.0.0.1:{port}"),
        log,
    };
    let end = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(&p.addr).is_err() || http_get(&p.addr, "/-/ready", &[]).0 != 200 {
        assert!(Instant::now() < end, "prometheus never became ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    let limit = Duration::from_secs(90);
    p.until("max_over_time(tsperf_probe_success[5m])", limit, |r| {
        r.len() == 3 && r.iter().all(|(_, v)| *v == 1.0)
    });
    // Each target's rate as Prometheus stored it, beside tsclient's own run of the same size
    // just before that probe: on a busy machine both move, so each pair is taken close in
    // time, and the first of up to five pairs within 2x passes.
    for (server, target) in servers.iter().zip(&targets) {
        let mut pairs = Vec::new();
        let close = (0..5).any(|_| {
            let (out, v) = client_json(server.port, &["-n", "64MiB"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let own = v["mib_per_s"].as_f64().unwrap() * 1048576.0;
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let series = format!("tsperf_rate_bytes_per_second{{instance=\"{target}\"}}");
            let newer = format!("{series} and timestamp({series}) > {since}");
            let rate = p.until(&newer, limit, |r| r.len() == 1)[0].1;
            pairs.push((rate.round(), own.round()));
            rate / own < 2.0 && own / rate < 2.0
        });
        assert!(close, "{target}: (Prometheus, tsclient) B/s: {pairs:?}");
    }
    // The servers' counters, as stored: every transfer is 64 MiB (three of tsclient's, the
    // rest the probe's), so bytes are exactly transfers times 64 MiB.
    let q = |d: &str| {
        format!(
            "sum by (instance) (tsperf_server_bytes_total{{direction=\"{d}\"}}) - 67108864 * \
             sum by (instance) \
             (tsperf_server_transfers_total{{direction=\"{d}\",result=\"complete\"}})"
        )
    };
    let exact = p.until(&q("receive"), limit, |r| r.len() == 3);
    assert!(exact.iter().all(|(_, v)| *v == 0.0), "{exact:?}");
    p.until(
        "tsperf_server_transfers_total{direction=\"receive\",result=\"complete\"}",
        limit,
        |r| r.len() == 3 && r.iter().all(|(_, v)| *v >= 4.0),
    );
    let refused = p.until("tsperf_server_refusals_total{code=\"hello\"}", limit, |r| {
        r.len() == 3
    });
    for (labels, v) in refused {
        let first = labels["instance"].as_str() == Some(metrics[0].as_str());
        assert_eq!(v, if first { 1.0 } else { 0.0 }, "{labels}");
    }
}

/// Every metric name in an expression (`tsperf_...`, `tsprobe_...`).
fn names_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &expr[i..];
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let at_start = i == 0 || !word(bytes[i - 1] as char);
        if at_start && (rest.starts_with("tsperf_") || rest.starts_with("tsprobe_")) {
            let len = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
            names.push(rest[..len].to_owned());
            i += len;
        } else {
            i += 1;
        }
    }
    names
}

/// The metric names on a page (a histogram's series under their own names).
fn served(page: &str, into: &mut std::collections::BTreeSet<String>) {
    for line in page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        into.insert(line[..end].to_owned());
    }
}

/// The Grafana dashboard parses and each of its queries names only metrics tsserver, tsprobe
/// and a probe's page serve; so do the alert rules, which `promtool check rules` passes.
#[test]
fn the_dashboard_and_the_alerts_name_only_served_metrics() {
    let s = Server::start(&["--metrics", "127.0.0.1:0"]);
    let probe = Probe::start(&[]);
    let mut names = std::collections::BTreeSet::new();
    for path in [
        format!("/probe?target=127.0.0.1:{}&bytes=4MiB", s.port),
        format!("/probe?target=127.0.0.1:{}&latency=50", s.port),
        format!("/probe?target=127.0.0.1:{}", dead_port()),
        "/metrics".to_owned(),
    ] {
        served(&probe.get(&path).1, &mut names);
    }
    let (_, page) = http_get(&crate::prometheus::metrics_addr(&s), "/metrics", &[]);
    served(&page, &mut names);
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{ROOT}/packaging/grafana/tsperf.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_owned());
        }
    }
    assert!(exprs.len() >= 10, "{exprs:?}");
    let rules =
        std::fs::read_to_string(format!("{ROOT}/packaging/prometheus/tsperf-rules.yml")).unwrap();
    exprs.push(rules.clone());
    for expr in &exprs {
        let found = names_in(expr);
        assert!(!found.is_empty(), "no metric in {expr}");
        for name in found {
            assert!(
                names.contains(&name),
                "{name} (in {expr}) is not served: {names:?}"
            );
        }
    }
    assert!(sample(&page, "tsperf_server_connections_open").is_some());
    promtool_checks(&page);
    if let Some(promtool) = prometheus_tool("promtool") {
        let path = format!("{ROOT}/packaging/prometheus/tsperf-rules.yml");
        let out = run(promtool, &["check", "rules", &path]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}
