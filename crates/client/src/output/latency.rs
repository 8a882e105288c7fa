//! What tsclient prints for a latency run: its JSON object, and the report for people (the
//! statistics, a ladder of percentiles, the clock offset, the run under load, and any hint).

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::json::{LatencyJson, Rtt, UnderLoadJson};
use super::{VERSION, host_port};
use crate::latency::{LatencyResult, Loaded, Stopped};
use tsperf_results::{json::ClientJson, units};

impl From<&LatencyResult> for LatencyJson {
    fn from(r: &LatencyResult) -> LatencyJson {
        let c = &r.cfg.spec;
        let measured = !r.rtt.is_empty();
        LatencyJson {
            tsperf: VERSION.into(),
            peer: host_port(&c.host, c.port),
            count: r.rtt.len(),
            warmup: c.warmup,
            codec: c.codec,
            framing: c.framing,
            nodelay: c.nodelay,
            reconnect: c.reconnect,
            busy_poll: c.busy_poll,
            io: r.io,
            rtt_us: measured.then(|| Rtt::of(&r.rtt)),
            offset_us: measured.then_some(r.offset_ns as f64 / 1e3),
            offset_err_us: measured.then_some(r.offset_err_ns as f64 / 1e3),
            hint: r.hint().map(String::from),
            interrupted: matches!(r.stopped, Some(Stopped::Interrupted)),
            error: match &r.stopped {
                Some(Stopped::Failed(e)) => Some(format!("{e:#}")),
                _ => None,
            },
            under_load: r.loaded.as_ref().map(|l| {
                let load = r.cfg.under_load.as_ref();
                UnderLoadJson {
                    file: load
                        .and_then(|s| s.file.file_name())
                        .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
                    chunk: load.map_or(0, |s| s.spec.chunk),
                    server_log: l
                        .streams
                        .last
                        .as_ref()
                        .and_then(|s| s.receiver.log)
                        .or_else(|| load.and_then(|s| s.spec.server_log)),
                    count: l.rtt.len(),
                    rtt_us: (!l.rtt.is_empty()).then(|| Rtt::of(&l.rtt)),
                    p50_ratio: (!l.rtt.is_empty() && measured).then(|| {
                        l.rtt.value_at_quantile(0.5) as f64
                            / r.rtt.value_at_quantile(0.5).max(1) as f64
                    }),
                    streams: u32::try_from(l.streams.count).unwrap_or(u32::MAX),
                    stream_mib_per_s: l.streams.median_mib_per_s(),
                    stream_verified: l.streams.all_verified(),
                    stream_limited_by: l.streams.usual_verdict(),
                    stream_error: l.streams.error.clone(),
                    idle_slower: idle_slower(r, l),
                }
            }),
        }
    }
}

/// The one JSON object `tsclient --latency --json` prints.
pub fn latency_json(r: &LatencyResult) -> tsperf_results::json::ClientOutput {
    tsperf_results::json::ClientOutput::Result(ClientJson::Latency(r.into()))
}

/// The human report: the statistics, a percentile ladder, the clock offset, and any hint.
pub fn latency_human(r: &LatencyResult) -> String {
    let c = &r.cfg.spec;
    let on = |b: bool| if b { "on" } else { "off" };
    let mut s = format!(
        "latency: {} to {} ({} warm-up not counted), codec {:?}, framing {:?}, \
         nodelay {}, reconnect {}, io {}\n",
        units::count(r.rtt.len(), "clock query"),
        host_port(&c.host, c.port),
        c.warmup,
        c.codec,
        c.framing,
        on(c.nodelay),
        on(c.reconnect),
        r.io
    )
    .to_lowercase();
    if r.rtt.is_empty() {
        return s;
    }
    round_trips(&mut s, &r.rtt);
    let sign = if r.offset_ns < 0 { "-" } else { "+" };
    let _ = writeln!(
        s,
        "  server clock = client clock {sign} {} ± {} (NTP-style, from the fastest round trip)",
        d(r.offset_ns.unsigned_abs()),
        d(r.offset_err_ns)
    );
    if let Some(l) = &r.loaded {
        under_load(&mut s, r, l);
    }
    if let Some(hint) = r.hint() {
        let _ = writeln!(s, "hint: {hint}");
    }
    s
}

/// A duration in ns, for people.
fn d(ns: u64) -> String {
    units::duration(Duration::from_nanos(ns))
}

/// The round trips' statistics, and a ladder of them on a log scale from 1 µs to the maximum,
/// so a 40 ms stall and a 50 µs round trip fit on one screen and a flat distribution looks
/// flat.
fn round_trips(s: &mut String, h: &Histogram<u64>) {
    let _ = writeln!(
        s,
        "  round trip: min {}, mean {}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
        d(h.min()),
        d(h.mean() as u64),
        d(h.value_at_quantile(0.5)),
        d(h.value_at_quantile(0.9)),
        d(h.value_at_quantile(0.99)),
        d(h.value_at_quantile(0.999)),
        d(h.max())
    );
    let lo = 1_000f64.min(h.min().max(1) as f64);
    let hi = (h.max().max(1) as f64).max(lo * 10.0);
    let span = (hi / lo).ln().max(f64::EPSILON);
    for (label, q) in [
        ("min", 0.0),
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("max", 1.0),
    ] {
        let v = if q == 0.0 {
            h.min()
        } else {
            h.value_at_quantile(q)
        };
        let width = 1 + ((v.max(1) as f64 / lo).ln() / span * 39.0).round() as usize;
        let _ = writeln!(
            s,
            "  {label:>6} {:>10} |{}",
            d(v),
            "#".repeat(width.min(40))
        );
    }
}

/// The queries made while the file streamed, and the stream's own result.
fn under_load(s: &mut String, r: &LatencyResult, l: &Loaded) {
    let j = LatencyJson::from(r).under_load.unwrap_or_default();
    let what = format!(
        "{} in {}-byte chunks, server log {}",
        j.file,
        j.chunk,
        j.server_log.map_or("?".to_owned(), |l| l.to_string())
    );
    if l.rtt.is_empty() {
        let _ = writeln!(
            s,
            "  under load ({what}): no query answered while it streamed"
        );
    } else {
        let _ = writeln!(
            s,
            "  under load ({what}): {} answered while it streamed: p50 {}, p99 {} \
             ({:.1}× the idle p50)",
            units::count(l.rtt.len(), "query"),
            d(l.rtt.value_at_quantile(0.5)),
            d(l.rtt.value_at_quantile(0.99)),
            j.p50_ratio.unwrap_or(0.0)
        );
        if let Some(line) = idle_slower(r, l) {
            let _ = writeln!(s, "  {line}");
        }
    }
    if let Some(e) = &l.streams.error {
        let _ = writeln!(s, "  the stream failed: {e}");
    }
    if let Some(last) = &l.streams.last {
        let _ = writeln!(
            s,
            "  the stream ({} of {}): median {:.1} MiB/s, {}, {}",
            units::count(l.streams.count, "transfer"),
            units::size(last.measured.bytes),
            j.stream_mib_per_s.unwrap_or(0.0),
            if j.stream_verified {
                "verified"
            } else {
                "NOT VERIFIED"
            },
            last.verdict().sentence()
        );
    }
}

/// The line for a run whose idle queries were slower than the loaded ones: an idle machine's
/// CPUs sleep between queries (deep C-states take tens of µs to wake from), a busy one's do not.
fn idle_slower(r: &LatencyResult, l: &Loaded) -> Option<String> {
    let (idle, loaded) = (r.rtt.value_at_quantile(0.5), l.rtt.value_at_quantile(0.5));
    (!r.rtt.is_empty() && !l.rtt.is_empty() && idle > loaded).then(|| {
        format!(
            "idle p50 {} is slower than loaded p50 {}: between idle queries the CPUs sleep, and \
             waking them is part of the round trip{}",
            d(idle),
            d(loaded),
            if r.cfg.spec.busy_poll {
                ""
            } else {
                " (try --busy-poll, which keeps the client's CPU awake)"
            }
        )
    })
}
