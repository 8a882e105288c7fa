//! One run's result as gauges: the page `tsprobe` answers a `/probe` scrape with, and what
//! `tsclient --prom-file` writes for node_exporter's textfile collector.
//!
//! [`Figures::of`] reads any object `tsclient --json` prints ([`ClientOutput`]) into the few
//! numbers a fleet watches; [`render`] writes them, `tsperf_probe_success` first. A failed or
//! cut-short probe still shows what was measured, with `tsperf_probe_success 0`, the kind of
//! failure as a label from a closed set, and the reason's words in a comment line (a label of
//! free text would make a new series of every message).

use std::time::Duration;

use prometheus::{Gauge, GaugeVec, Opts, Registry};
use tsperf_results::json::{
    BidirJson, ClientJson, ClientOutput, Direction, Measured, SessionEntry, SessionJson,
    StreamEntry,
};

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// The numbers of one run a fleet watches. `None`: the run did not measure it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// The run's `mode` (`stream`, `reverse`, `parallel`, `latency`, ...).
    pub mode: String,
    /// Every byte counted at the far end and its checksum equal to this end's.
    pub verified: bool,
    /// Data bytes moved.
    pub bytes: Option<u64>,
    /// The measured time, s.
    pub elapsed_s: Option<f64>,
    /// The rate, bytes a second.
    pub rate_bytes_per_s: Option<f64>,
    /// The client's CPU time a GiB, s.
    pub client_cpu_s_per_gib: Option<f64>,
    /// The server's CPU time a GiB, s.
    pub server_cpu_s_per_gib: Option<f64>,
    /// Segments the sender retransmitted.
    pub retransmits: Option<u64>,
    /// The sender's smoothed round trip at the end, s.
    pub rtt_s: Option<f64>,
    /// The verdict's stage (`network`, `sender-cpu`, ...).
    pub limited_by: Option<String>,
    /// A latency run's median round trip, s.
    pub latency_p50_s: Option<f64>,
    /// A latency run's 99th percentile, s.
    pub latency_p99_s: Option<f64>,
    /// What failed, in the run's own words.
    pub error: Option<String>,
}

/// Why a probe did not succeed: a kind from a closed set (a label) and the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `bad-request`, `busy`, `connect`, `refused`, `timeout`, `not-verified`, `failed`.
    pub kind: &'static str,
    /// The reason, for people.
    pub reason: String,
}

/// A probe: what it measured (if anything), how long it took, and why it failed (if it did).
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// The run's figures; `None` if it measured nothing.
    pub figures: Option<Figures>,
    /// The probe's wall time.
    pub duration: Duration,
    /// Why it failed; `None`: it succeeded.
    pub failure: Option<Failure>,
}

impl Figures {
    /// The figures of whatever `tsclient --json` printed.
    pub fn of(out: &ClientOutput) -> Figures {
        match out {
            ClientOutput::Result(r) => Figures::of_result(r),
            ClientOutput::StreamFailed(e) => Figures::of_entry(e),
            ClientOutput::Failed(f) => Figures {
                mode: f.mode.clone(),
                error: Some(f.error.clone()),
                ..Figures::default()
            },
        }
    }

    fn of_result(r: &ClientJson) -> Figures {
        match r {
            ClientJson::Stream(s) => Figures::of_measured(&Measured::Stream(s.clone())),
            ClientJson::Reverse(s) => Figures::of_measured(&Measured::Reverse(s.clone())),
            ClientJson::Parallel(p) | ClientJson::ParallelReverse(p) => {
                Figures::of_session(r.mode(), p)
            }
            ClientJson::Bidir(b) => Figures::of_bidir(b),
            ClientJson::Latency(l) => Figures {
                mode: "latency".into(),
                verified: l.error.is_none() && !l.interrupted,
                latency_p50_s: l.rtt_us.as_ref().map(|r| r.p50 / 1e6),
                latency_p99_s: l.rtt_us.as_ref().map(|r| r.p99 / 1e6),
                error: l.error.clone(),
                ..Figures::default()
            },
            ClientJson::Ladder(_) => Figures {
                mode: "ladder".into(),
                error: Some("a ladder's rungs are not a probe's figures".into()),
                ..Figures::default()
            },
        }
    }

    fn of_measured(m: &Measured) -> Figures {
        let per_gib = |cpu_s: f64, bytes: u64| (bytes > 0).then(|| cpu_s * GIB / bytes as f64);
        match m {
            Measured::Stream(s) => Figures {
                mode: "stream".into(),
                verified: s.verified,
                bytes: Some(s.bytes),
                elapsed_s: Some(s.elapsed_s),
                rate_bytes_per_s: Some(s.mib_per_s * MIB),
                client_cpu_s_per_gib: per_gib(s.cpu.total_s(), s.bytes),
                server_cpu_s_per_gib: per_gib(s.server.cpu.total_s(), s.server.bytes),
                retransmits: s.tcp.client.total_retrans,
                rtt_s: s.tcp.client.rtt_us.map(|us| us as f64 / 1e6),
                limited_by: s.limited_by.map(|l| l.as_str().to_owned()),
                error: s.error.clone(),
                ..Figures::default()
            },
            Measured::Reverse(s) => Figures {
                mode: "reverse".into(),
                verified: s.verified,
                bytes: Some(s.bytes),
                elapsed_s: Some(s.elapsed_s),
                rate_bytes_per_s: Some(s.mib_per_s * MIB),
                client_cpu_s_per_gib: per_gib(s.cpu.total_s(), s.bytes),
                server_cpu_s_per_gib: per_gib(s.server.cpu.total_s(), s.server.bytes),
                retransmits: s.tcp.server.total_retrans,
                rtt_s: s.tcp.server.rtt_us.map(|us| us as f64 / 1e6),
                limited_by: s.limited_by.map(|l| l.as_str().to_owned()),
                error: s.error.clone(),
                ..Figures::default()
            },
        }
    }

    fn of_entry(e: &StreamEntry) -> Figures {
        match e {
            StreamEntry::Done(m) => Figures::of_measured(m),
            StreamEntry::SendFailed(f) => Figures {
                mode: "stream".into(),
                bytes: f.acked_bytes,
                elapsed_s: f.elapsed_s,
                rate_bytes_per_s: f.acked_mib_per_s.map(|r| r * MIB),
                error: Some(f.error.clone()),
                ..Figures::default()
            },
            StreamEntry::ReceiveFailed(f) => Figures {
                mode: "reverse".into(),
                bytes: Some(f.received_bytes),
                elapsed_s: f.elapsed_s,
                rate_bytes_per_s: f.mib_per_s.map(|r| r * MIB),
                error: Some(f.error.clone()),
                ..Figures::default()
            },
        }
    }

    /// A session: its sum, and its streams' figures added (CPU and retransmits) or taken at
    /// their worst (the round trip).
    fn of_session(mode: &str, p: &SessionJson) -> Figures {
        let streams: Vec<Figures> = p.streams.iter().map(Figures::of_entry).collect();
        let sum_of = |f: fn(&Figures) -> Option<f64>| -> Option<f64> {
            streams.iter().map(f).sum::<Option<f64>>()
        };
        let cpu = |f: fn(&Figures) -> Option<f64>| {
            // Per GiB of each stream, weighted by its bytes: the session's CPU a GiB.
            let weighted = |s: &Figures| Some(f(s)? * s.bytes? as f64);
            let total: Option<f64> = streams.iter().map(weighted).sum();
            total
                .filter(|_| p.sum.bytes > 0)
                .map(|t| t / p.sum.bytes as f64)
        };
        Figures {
            mode: mode.to_owned(),
            verified: p.sum.verified,
            bytes: Some(p.sum.bytes),
            elapsed_s: Some(p.sum.elapsed_s),
            rate_bytes_per_s: Some(p.sum.mib_per_s * MIB),
            client_cpu_s_per_gib: cpu(|s| s.client_cpu_s_per_gib),
            server_cpu_s_per_gib: cpu(|s| s.server_cpu_s_per_gib),
            retransmits: sum_of(|s| s.retransmits.map(|r| r as f64)).map(|r| r as u64),
            rtt_s: streams.iter().filter_map(|s| s.rtt_s).reduce(f64::max),
            limited_by: p.sum.limited_by.map(|l| l.as_str().to_owned()),
            error: streams.iter().find_map(|s| s.error.clone()),
            ..Figures::default()
        }
    }

    fn of_direction(d: &Direction) -> Figures {
        match d {
            Direction::Stream(e) => Figures::of_entry(e),
            Direction::Session(SessionEntry::Sent(p)) => Figures::of_session("parallel", p),
            Direction::Session(SessionEntry::Received(p)) => {
                Figures::of_session("parallel-reverse", p)
            }
            Direction::Failed(f) => Figures {
                mode: f.mode.clone(),
                error: Some(f.error.clone()),
                ..Figures::default()
            },
        }
    }

    /// Both directions: bytes and rates added (the link's load both ways), verified only if
    /// both are.
    fn of_bidir(b: &BidirJson) -> Figures {
        let (f, r) = (
            Figures::of_direction(&b.forward),
            Figures::of_direction(&b.reverse),
        );
        let add = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
        Figures {
            mode: "bidir".into(),
            verified: f.verified && r.verified,
            bytes: add(f.bytes.map(|b| b as f64), r.bytes.map(|b| b as f64)).map(|b| b as u64),
            elapsed_s: f.elapsed_s.zip(r.elapsed_s).map(|(a, b)| a.max(b)),
            rate_bytes_per_s: add(f.rate_bytes_per_s, r.rate_bytes_per_s),
            retransmits: add(
                f.retransmits.map(|r| r as f64),
                r.retransmits.map(|r| r as f64),
            )
            .map(|r| r as u64),
            rtt_s: f.rtt_s.or(r.rtt_s),
            limited_by: f.limited_by.clone(),
            error: f.error.clone().or(r.error.clone()),
            ..Figures::default()
        }
    }
}

/// The page of one probe.
pub fn render(p: &Probe) -> String {
    let registry = Registry::new();
    let gauge = |name: &str, help: &str, v: f64| {
        let g = Gauge::new(name, help).expect("a valid name");
        g.set(v);
        registry.register(Box::new(g)).expect("a new name");
    };
    gauge(
        "tsperf_probe_success",
        "1 if the run completed within the scrape's time and was verified, else 0.",
        f64::from(u8::from(p.failure.is_none())),
    );
    gauge(
        "tsperf_probe_duration_seconds",
        "How long the probe took, s.",
        p.duration.as_secs_f64(),
    );
    if let Some(f) = &p.failure {
        labelled(
            &registry,
            (
                "tsperf_probe_failed",
                "1, labelled with the kind of failure (the reason is in the comment above).",
            ),
            "kind",
            &[(f.kind, Some(1.0))],
        );
    }
    if let Some(f) = &p.figures {
        figures(&registry, f);
    }
    let mut page = String::new();
    if let Some(f) = &p.failure {
        for line in f.reason.lines() {
            page += &format!("# tsperf: {}: {line}\n", f.kind);
        }
    }
    page + &crate::encode(&registry)
}

fn figures(registry: &Registry, f: &Figures) {
    let gauges: [(&str, &str, Option<f64>); 8] = [
        (
            "tsperf_verified",
            "1 if the far end counted every byte and its checksum equals this end's.",
            Some(f64::from(u8::from(f.verified))),
        ),
        (
            "tsperf_transfer_bytes",
            "Data bytes moved.",
            f.bytes.map(|b| b as f64),
        ),
        (
            "tsperf_transfer_seconds",
            "The measured time, s.",
            f.elapsed_s,
        ),
        (
            "tsperf_rate_bytes_per_second",
            "The rate, bytes a second: the bytes over the measured time.",
            f.rate_bytes_per_s,
        ),
        (
            "tsperf_retransmits",
            "Segments the sender retransmitted in this run.",
            f.retransmits.map(|r| r as f64),
        ),
        (
            "tsperf_rtt_seconds",
            "The sender's smoothed round trip at the end of the run, s.",
            f.rtt_s,
        ),
        (
            "tsperf_latency_p50_seconds",
            "A latency run's median round trip, s.",
            f.latency_p50_s,
        ),
        (
            "tsperf_latency_p99_seconds",
            "A latency run's 99th percentile round trip, s.",
            f.latency_p99_s,
        ),
    ];
    for (name, help, v) in gauges {
        if let Some(v) = v {
            let g = Gauge::new(name, help).expect("a valid name");
            g.set(v);
            registry.register(Box::new(g)).expect("a new name");
        }
    }
    labelled(
        registry,
        (
            "tsperf_cpu_seconds_per_gibibyte",
            "CPU time each end spent for each GiB moved, s.",
        ),
        "end",
        &[
            ("client", f.client_cpu_s_per_gib),
            ("server", f.server_cpu_s_per_gib),
        ],
    );
    let stage = f.limited_by.as_deref().map(|s| (s, Some(1.0)));
    labelled(
        registry,
        (
            "tsperf_limited_by",
            "1, labelled with the stage that limited the run (its verdict).",
        ),
        "stage",
        stage.as_slice(),
    );
    labelled(
        registry,
        ("tsperf_run_info", "1, labelled with the run's mode."),
        "mode",
        &[(f.mode.as_str(), Some(1.0))],
    );
}

/// A gauge of one label with a value for each of `values` that has one; none if none has.
fn labelled(
    registry: &Registry,
    (name, help): (&str, &str),
    label: &str,
    values: &[(&str, Option<f64>)],
) {
    if values.iter().all(|(_, v)| v.is_none()) {
        return;
    }
    let g = GaugeVec::new(Opts::new(name, help), &[label]).expect("a valid name");
    for (value, v) in values {
        if let Some(v) = v {
            g.with_label_values(&[*value]).set(*v);
        }
    }
    registry.register(Box::new(g)).expect("a new name");
}

#[cfg(test)]
mod tests;
