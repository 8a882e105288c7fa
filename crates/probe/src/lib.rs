//! tsprobe: a Prometheus exporter of tsperf runs, in the multi-target pattern of
//! blackbox_exporter and iperf3_exporter.
//!
//! Prometheus scrapes `/probe?target=HOST[:PORT]` (its relabelling turns each target's
//! `__address__` into `__param_target`); the exporter runs one verified tsclient transfer (or
//! latency run) against that target's tsserver within the scrape's timeout (the
//! `X-Prometheus-Scrape-Timeout-Seconds` header, less [`Config::timeout_offset`]) and answers
//! with its figures as gauges ([`tsperf_metrics::probe`]). A run cut off at the deadline
//! answers with what it measured and `tsperf_probe_success 0`.
//!
//! Bounded: one probe per target at a time ([`flights`]), at most [`Config::max_probes`] at
//! once (a scrape past them waits up to half its time for one to end, then gets a `503` with
//! the reason), the endpoint's connections bounded
//! as [`tsperf_metrics::http`] bounds them. `/metrics` is the exporter's own counters.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use tsperf_metrics::http::{Request, Response};
use tsperf_metrics::probe::{Failure, Probe, render};

pub mod flights;
pub mod params;
pub mod run;

use flights::{Flights, Joined};
use params::Spec;

/// How the exporter runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The tsclient it runs.
    pub tsclient: PathBuf,
    /// Probes at once, over every target.
    pub max_probes: usize,
    /// The time a probe has when the scrape does not say (no
    /// `X-Prometheus-Scrape-Timeout-Seconds`).
    pub default_timeout: Duration,
    /// Taken off the scrape's timeout, so the answer arrives before Prometheus gives up.
    pub timeout_offset: Duration,
}

/// The exporter: its settings, its running probes and its own counters.
pub struct Exporter {
    cfg: Config,
    flights: Flights<(u16, String)>,
    registry: Registry,
    scrapes: IntCounterVec,
    running: IntGauge,
}

/// The results a `/probe` scrape is counted under.
const RESULTS: [&str; 5] = ["success", "failure", "shared", "bad-request", "busy"];

impl Exporter {
    /// An exporter of `cfg`, no probe running.
    pub fn new(cfg: Config) -> Exporter {
        let registry = Registry::new();
        let scrapes = IntCounterVec::new(
            Opts::new(
                "tsprobe_scrapes_total",
                "/probe scrapes, by result (success, failure, shared: answered from a running \
                 probe of the same target and parameters, bad-request, busy).",
            ),
            &["result"],
        )
        .expect("a valid name");
        let running =
            IntGauge::new("tsprobe_probes_running", "Probes running now.").expect("a valid name");
        registry
            .register(Box::new(scrapes.clone()))
            .expect("a new name");
        registry
            .register(Box::new(running.clone()))
            .expect("a new name");
        for r in RESULTS {
            scrapes.with_label_values(&[r]);
        }
        Exporter {
            flights: Flights::new(cfg.max_probes),
            cfg,
            registry,
            scrapes,
            running,
        }
    }

    /// Answers one request: `/probe`, `/metrics`, or a page that says where they are.
    pub fn handle(&self, r: &Request) -> Response {
        match r.path.as_str() {
            // A HEAD is often a health check: it must not move data on a link.
            "/probe" if r.method == "HEAD" => Response::text(
                405,
                "HEAD does not run a probe: GET /probe?target=HOST[:PORT]",
            ),
            "/probe" => self.probe(r),
            "/metrics" => {
                self.running.set(self.flights.running() as i64);
                Response::metrics(
                    prometheus::TextEncoder::new()
                        .encode_to_string(&self.registry.gather())
                        .unwrap_or_default(),
                )
            }
            "/" => Response::text(
                200,
                "tsprobe: /probe?target=HOST[:PORT] runs one verified transfer against the \
                 target's tsserver (see man tsprobe); /metrics has this exporter's own counters",
            ),
            other => Response::text(404, format!("{other}: not here; try /probe or /metrics")),
        }
    }

    /// The time a scrape's probe has: its timeout less the offset, at least a tenth of a
    /// second.
    pub fn budget(&self, r: &Request) -> Duration {
        let asked = r
            .header("x-prometheus-scrape-timeout-seconds")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(self.cfg.default_timeout, |s| {
                Duration::from_secs_f64(s.min(3600.0))
            });
        asked
            .saturating_sub(self.cfg.timeout_offset)
            .max(Duration::from_millis(100))
    }

    fn probe(&self, r: &Request) -> Response {
        let budget = self.budget(r);
        let deadline = Instant::now() + budget;
        let spec = match Spec::parse(&r.query) {
            Ok(s) => s,
            Err(why) => return self.refuse(400, "bad-request", why),
        };
        // Past --max-probes, wait for a free slot for up to half the scrape's time.
        let queue_until = Instant::now() + budget / 2;
        let flight = match self.flights.join(&spec, deadline, queue_until) {
            Joined::Run(f) => f,
            Joined::Shared(Some(answer)) => {
                self.scrapes.with_label_values(&["shared"]).inc();
                return Response::metrics(answer.1.clone());
            }
            Joined::Shared(None) => {
                let why = format!(
                    "the probe of {} that this scrape shares did not end by its deadline",
                    spec.target
                );
                return self.refuse(503, "busy", why);
            }
            Joined::Other => {
                let why = format!(
                    "a probe of {} with other parameters is running: one probe a target at a \
                     time",
                    spec.target
                );
                return self.refuse(409, "busy", why);
            }
            Joined::Full(n) => {
                let why = format!(
                    "{n} probes are running, the most at once (--max-probes), and none ended \
                     within half this scrape's time"
                );
                return self.refuse(503, "busy", why);
            }
        };
        let probe = run::run(&self.cfg.tsclient, &spec, deadline);
        let status = match &probe.failure {
            Some(f) if f.kind == "bad-request" => 400,
            _ => 200,
        };
        let result = match &probe.failure {
            None => "success",
            Some(f) if f.kind == "bad-request" => "bad-request",
            Some(_) => "failure",
        };
        self.scrapes.with_label_values(&[result]).inc();
        let answer = self.flights.land(&flight, (status, render(&probe)));
        Response {
            status: answer.0,
            ..Response::metrics(answer.1.clone())
        }
    }

    /// A scrape refused before any run: its status, and a page that says why.
    fn refuse(&self, status: u16, kind: &'static str, reason: String) -> Response {
        self.scrapes.with_label_values(&[kind]).inc();
        let page = render(&Probe {
            failure: Some(Failure { kind, reason }),
            ..Probe::default()
        });
        Response {
            status,
            ..Response::metrics(page)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exporter() -> Exporter {
        Exporter::new(Config {
            tsclient: PathBuf::from("/nonexistent/tsclient"),
            max_probes: 1,
            default_timeout: Duration::from_secs(10),
            timeout_offset: Duration::from_millis(500),
        })
    }

    fn get(e: &Exporter, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        e.handle(&Request {
            method: method.into(),
            path: path.into(),
            query: query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (k.into(), v.into())
                })
                .collect(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    /// The pages besides a probe: a HEAD never runs one, an unknown path is a 404, and a
    /// tsclient that cannot be run is a failed probe saying why.
    #[test]
    fn routes() {
        let e = exporter();
        assert_eq!(get(&e, "HEAD", "/probe?target=h", &[]).status, 405);
        assert_eq!(get(&e, "GET", "/", &[]).status, 200);
        assert_eq!(get(&e, "GET", "/x", &[]).status, 404);
        let r = get(&e, "GET", "/probe?target=h", &[]);
        assert_eq!(r.status, 200);
        assert!(
            r.body.contains("tsperf_probe_failed{kind=\"internal\"} 1"),
            "{}",
            r.body
        );
        assert!(
            r.body
                .contains("# tsperf: internal: cannot run /nonexistent/tsclient"),
            "{}",
            r.body
        );
        let own = get(&e, "GET", "/metrics", &[]).body;
        assert!(
            own.contains("tsprobe_scrapes_total{result=\"failure\"} 1"),
            "{own}"
        );
    }

    /// A scrape's time is its timeout less the offset, the default without the header, never
    /// under a tenth of a second, and a header that is not a time is the default.
    #[test]
    fn the_budget_follows_the_scrape() {
        let e = exporter();
        let budget = |v: &str| {
            e.budget(&Request {
                headers: vec![("x-prometheus-scrape-timeout-seconds".into(), v.into())],
                ..Request::default()
            })
        };
        assert_eq!(budget("3"), Duration::from_millis(2500));
        assert_eq!(budget("0.2"), Duration::from_millis(100));
        assert_eq!(budget("soon"), Duration::from_millis(9500));
        assert_eq!(budget("-1"), Duration::from_millis(9500));
        assert_eq!(e.budget(&Request::default()), Duration::from_millis(9500));
    }
}
