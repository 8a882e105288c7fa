//! What `tsmatrix` prints when the grid is done: a few lines of what it found (the fastest and
//! slowest stream cells, the quickest and slowest round trips), not the tables themselves,
//! which are in `matrix.md` beside the charts.

use super::Matrix;

/// The grid's end, for the terminal.
pub fn summary(m: &Matrix) -> String {
    let mut out = String::new();
    let stream = |r: &super::StreamRow| format!("chunk {} B, {}, log {}", r.chunk, r.io, r.log);
    let by_rate =
        |a: &&super::StreamRow, b: &&super::StreamRow| a.median_mib_s.total_cmp(&b.median_mib_s);
    if let (Some(fast), Some(slow)) = (
        m.stream.iter().max_by(by_rate),
        m.stream.iter().min_by(by_rate),
    ) {
        let all = m.stream.iter().all(|r| r.verified);
        out += &format!(
            "stream: {} cells, {}; fastest {} at {:.1} MiB/s, slowest {} at {:.1} MiB/s\n",
            m.stream.len(),
            if all {
                "every one verified"
            } else {
                "NOT every one verified"
            },
            stream(fast),
            fast.median_mib_s,
            stream(slow),
            slow.median_mib_s
        );
    }
    let rtt = |r: &super::LatencyRow| {
        let load = r
            .under_load
            .as_ref()
            .map_or(String::new(), |l| format!(", under load (log {l})"));
        let nodelay = if r.nodelay { ", nodelay" } else { "" };
        format!("{}/{}{nodelay}{load}", r.codec, r.framing)
    };
    let by_p50 = |a: &&super::LatencyRow, b: &&super::LatencyRow| a.p50_us.total_cmp(&b.p50_us);
    if let (Some(quick), Some(slow)) = (
        m.latency.iter().min_by(by_p50),
        m.latency.iter().max_by(by_p50),
    ) {
        out += &format!(
            "latency: {} cells; p50 from {} ({}) to {} ({})\n",
            m.latency.len(),
            micros(quick.p50_us),
            rtt(quick),
            micros(slow.p50_us),
            rtt(slow)
        );
    }
    out + "the tables are in matrix.md, the charts in throughput.svg, latency.svg, timeline.svg\n"
}

/// A round trip in the unit that suits it: `16.4 µs`, `88.0 ms`.
fn micros(us: f64) -> String {
    match us {
        us if us >= 1000.0 => format!("{:.1} ms", us / 1000.0),
        us => format!("{us:.1} µs"),
    }
}
