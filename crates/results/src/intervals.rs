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

/// A unit for the rows' rates, as iperf3's `-f` names them: lower case bits a second (powers of
/// 1000), upper case bytes a second (powers of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    /// Kbit/s.
    Kbit,
    /// Mbit/s.
    Mbit,
    /// Gbit/s.
    Gbit,
    /// Tbit/s.
    Tbit,
    /// KiB/s.
    KiB,
    /// MiB/s.
    MiB,
    /// GiB/s.
    GiB,
    /// TiB/s.
    TiB,
}

impl RateUnit {
    /// `bytes` over `secs` in this unit, and the unit's name.
    fn of(self, bytes: f64, secs: f64) -> (f64, &'static str) {
        let per_s = if secs > 0.0 { bytes / secs } else { 0.0 };
        let (scale, name) = match self {
            RateUnit::Kbit => (1e3 / 8.0, "Kbit/s"),
            RateUnit::Mbit => (1e6 / 8.0, "Mbit/s"),
            RateUnit::Gbit => (1e9 / 8.0, "Gbit/s"),
            RateUnit::Tbit => (1e12 / 8.0, "Tbit/s"),
            RateUnit::KiB => (1024.0, "KiB/s"),
            RateUnit::MiB => (1024.0 * 1024.0, "MiB/s"),
            RateUnit::GiB => (1024.0 * 1024.0 * 1024.0, "GiB/s"),
            RateUnit::TiB => (1024.0f64.powi(4), "TiB/s"),
        };
        (per_s / scale, name)
    }
}

static UNIT: std::sync::OnceLock<RateUnit> = std::sync::OnceLock::new();

/// Prints every later row's rate in `unit` alone (iperf3's `-f`), set once, at start.
pub fn set_rate_unit(unit: RateUnit) {
    let _ = UNIT.set(unit);
}

/// The rate columns of a row: MiB/s and Gbit/s, or the one unit set.
fn rates(bytes: u64, secs: f64) -> String {
    match UNIT.get() {
        None => {
            let time = std::time::Duration::from_secs_f64(secs.max(0.0));
            format!(
                "{:>9.1} MiB/s {:>6.2} Gbit/s",
                crate::units::mib_per_s(bytes, time),
                crate::units::gbit_per_s(bytes, time),
            )
        }
        Some(unit) => {
            // The number where the default's MiB/s stands, under the header's `Bitrate`.
            let (v, name) = unit.of(bytes as f64, secs);
            format!("{v:>9.2} {name:<19}")
        }
    }
}

/// The head of iperf3's table, above the interval lines and the summary's rows: its columns
/// over [`row`]'s.
pub fn header() -> String {
    format!(
        "{:<5} {:<18}{:>10} {:<30}{:>5}",
        "[ ID]", "Interval", "Transfer", "   Bitrate", "Retr"
    )
}

/// One row of iperf3's table: the label (`[  0]`, `[SUM]`, `[  1][TX]`), the interval in
/// seconds, the bytes, their rate in MiB/s and Gbit/s (or the unit set), the retransmits
/// where the row has them. Every row divides: the rate is the bytes over the interval shown.
pub fn row(label: &str, (start_s, end_s): (f64, f64), bytes: u64, retr: Option<u64>) -> String {
    // Hundredths, as iperf3's; thousandths for a row shorter than a tenth of a second.
    let places = if end_s - start_s < 0.1 { 3 } else { 2 };
    format!(
        "{label:<5} {start_s:>6.places$}-{end_s:<6.places$} sec {:>10} {} {:>5}",
        crate::units::size(bytes),
        rates(bytes, end_s - start_s),
        retr.map_or(String::new(), |r| r.to_string()),
    )
}

/// One sender's sample as a row of iperf3's table (the label's, then `-i`'s columns) and the
/// congestion window in segments; `verbose` adds the round trip, what the receiver
/// acknowledged and the time its window was full.
pub fn line(label: &str, i: &Interval, verbose: bool) -> String {
    let opt = |v: Option<u64>, f: &dyn Fn(u64) -> String| v.map_or("?".to_owned(), f);
    let mut s = row(label, (i.start_s, i.end_s), i.bytes, i.retransmits)
        + &format!("  cwnd {} seg", opt(i.snd_cwnd, &|v| v.to_string()));
    if verbose {
        s += &format!(
            "  rtt {}  acked {}  window full {}",
            opt(i.rtt_us, &rtt),
            i.acked_mib_per_s
                .map_or("?".to_owned(), |r| format!("{r:.1} MiB/s")),
            opt(i.rwnd_limited_us, &|v| format!("{} ms", v / 1000)),
        );
    }
    s
}

/// A round trip in µs for people: `870 µs`, `3.2 ms` from a millisecond on.
fn rtt(us: u64) -> String {
    match us {
        0..1000 => format!("{us} µs"),
        _ => format!("{:.1} ms", us as f64 / 1e3),
    }
}

/// A receiver's sample as a row (a reverse stream: it has no sender's figures): its bytes and
/// their rate; `verbose` adds the round trip as the receiver sees it.
pub fn received_line(label: &str, i: &Interval, verbose: bool) -> String {
    let r = row(label, (i.start_s, i.end_s), i.bytes, None);
    match verbose {
        true => r + &format!("  rtt {}", i.rtt_us.map_or("?".to_owned(), rtt)),
        false => r,
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    /// The header's columns end where the rows' do, and a row divides: 1 GiB in 2 s is 512
    /// MiB/s.
    #[test]
    fn the_header_stands_over_the_rows_columns() {
        let r = row("[  0]", (1.0, 3.0), 1 << 30, Some(7));
        let h = header();
        assert_eq!(r.len(), h.len(), "{h}\n{r}");
        assert!(r.contains("1.00-3.00   sec"), "{r}");
        assert!(r.contains("512.0 MiB/s"), "{r}");
        for (word, end) in [("Transfer", "GiB"), ("Retr", "7")] {
            assert_eq!(
                h.find(word).unwrap() + word.len(),
                r.find(end).unwrap() + end.len(),
                "{h}\n{r}"
            );
        }
    }
}
