//! Samples of a transfer in time (`--interval`), as values: one [`Interval`] each, merged in
//! pairs when a long transfer has too many ([`merge_pairs`]), and their line in a human report.

use serde::{Deserialize, Serialize};

/// One sample: `start_s` to `end_s` after the first byte was handed over.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The sample's start, seconds after the first byte was handed over.
    pub start_s: f64,
    /// Its end, seconds after the first byte.
    pub end_s: f64,
    /// Bytes handed to the socket in the interval (counted per 128 KiB file block).
    pub bytes: u64,
    /// `bytes` over the sample's length, MiB/s.
    pub mib_per_s: f64,
    /// Bytes the receiver acknowledged in the interval, and their rate: what it took, exact in
    /// time.
    pub acked_bytes: Option<u64>,
    /// `acked_bytes` over the sample's length, MiB/s.
    #[serde(default)]
    pub acked_mib_per_s: Option<f64>,
    /// Time in the interval the receiver's window was full, and the send buffer, in µs (the
    /// kernel counts in jiffies, 4 ms on most kernels).
    pub rwnd_limited_us: Option<u64>,
    /// Time in the sample the send buffer was full, µs.
    pub sndbuf_limited_us: Option<u64>,
    /// Segments retransmitted in the sample.
    pub retransmits: Option<u64>,
    /// At the interval's end.
    pub rtt_us: Option<u64>,
    /// The congestion window at its end, segments.
    pub snd_cwnd: Option<u64>,
    /// The receiver's window at its end, bytes.
    pub snd_wnd: Option<u64>,
    /// The kernel's delivery-rate estimate at its end, B/s.
    pub delivery_rate: Option<u64>,
}

/// Neighbours merged in pairs: sums of what adds up, the later one's gauges.
pub fn merge_pairs(samples: Vec<Interval>) -> Vec<Interval> {
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    samples
        .chunks(2)
        .map(|pair| match pair {
            [a, b] => {
                let bytes = a.bytes + b.bytes;
                Interval {
                    start_s: a.start_s,
                    end_s: b.end_s,
                    bytes,
                    mib_per_s: bytes as f64 / (1024.0 * 1024.0) / (b.end_s - a.start_s).max(1e-9),
                    acked_bytes: add(a.acked_bytes, b.acked_bytes),
                    acked_mib_per_s: add(a.acked_bytes, b.acked_bytes)
                        .map(|n| n as f64 / (1024.0 * 1024.0) / (b.end_s - a.start_s).max(1e-9)),
                    rwnd_limited_us: add(a.rwnd_limited_us, b.rwnd_limited_us),
                    sndbuf_limited_us: add(a.sndbuf_limited_us, b.sndbuf_limited_us),
                    retransmits: add(a.retransmits, b.retransmits),
                    ..b.clone()
                }
            }
            [a] => a.clone(),
            _ => unreachable!("chunks(2)"),
        })
        .collect()
}

/// One sample as a line of the human report, as iperf3 `-i` prints them.
pub fn line(i: &Interval) -> String {
    let opt = |v: Option<u64>, f: &dyn Fn(u64) -> String| v.map_or("?".to_owned(), f);
    format!(
        "  [{:7.3}-{:7.3} s] {:>10} {:9.1} MiB/s  acked {:>9}  rtt {}  cwnd {}  window full {}  \
         retrans {}",
        i.start_s,
        i.end_s,
        crate::units::size(i.bytes),
        i.mib_per_s,
        i.acked_mib_per_s
            .map_or("?".to_owned(), |r| format!("{r:.1} MiB/s")),
        opt(i.rtt_us, &|v| format!("{v} µs")),
        opt(i.snd_cwnd, &|v| v.to_string()),
        opt(i.rwnd_limited_us, &|v| format!("{} ms", v / 1000)),
        opt(i.retransmits, &|v| v.to_string()),
    )
}

/// A receiver's sample as a line (a reverse stream: it has no sender's figures): its bytes,
/// their rate and the round trip.
pub fn received_line(i: &Interval) -> String {
    format!(
        "  [{:7.3}-{:7.3} s] {:>10} {:9.1} MiB/s  received, rtt {}",
        i.start_s,
        i.end_s,
        crate::units::size(i.bytes),
        i.mib_per_s,
        i.rtt_us.map_or("?".to_owned(), |v| format!("{v} µs")),
    )
}
