//! `--interval SECS`: samples of a transfer in time, like iperf3 `-i`, so a stall shows where it
//! happened. Each sample covers the time since the last one: the bytes handed to the socket,
//! their rate, and what the sender's `TCP_INFO` says changed (the limited times and retransmits
//! as differences, the round trip and windows as they stand at its end).
//!
//! The clock is read once per file block (128 KiB, see [`crate::source::BLOCK_TARGET`]), never
//! per chunk, so a sample ends at the first block boundary after its interval is up, and says
//! exactly when. `TCP_INFO` is read once per sample. At most [`MAX_SAMPLES`] are kept: when a
//! long transfer reaches that, neighbours are merged in pairs and the interval doubles.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::tcpinfo::{SenderTcp, TcpInfo};

/// The shortest `--interval`, in seconds.
pub const MIN_INTERVAL_S: f64 = 0.001;
/// The longest `--interval`, in seconds.
pub const MAX_INTERVAL_S: f64 = 3600.0;
/// Samples kept at most (then pairs merge).
pub const MAX_SAMPLES: usize = 10_000;

/// One sample: `start_s` to `end_s` after the first byte was handed over.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes handed to the socket in the interval.
    pub bytes: u64,
    pub mib_per_s: f64,
    /// Bytes the receiver acknowledged in the interval.
    pub acked_bytes: Option<u64>,
    /// Time in the interval the receiver's window was full, and the send buffer, in µs (the
    /// kernel counts in jiffies, 4 ms on most kernels).
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub retransmits: Option<u64>,
    /// At the interval's end.
    pub rtt_us: Option<u64>,
    pub snd_cwnd: Option<u64>,
    pub snd_wnd: Option<u64>,
    pub delivery_rate: Option<u64>,
}

/// Takes the samples of one transfer.
pub struct Sampler {
    every: Duration,
    start: Instant,
    next: Instant,
    last_at: Instant,
    last_bytes: u64,
    last_tcp: SenderTcp,
    samples: Vec<Interval>,
}

fn read_tcp<S: AsFd>(sock: &S) -> SenderTcp {
    TcpInfo::of(sock).map_or_else(SenderTcp::default, |i| i.sender())
}

fn diff(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    now.map(|n| n.saturating_sub(before.unwrap_or(0)))
}

impl Sampler {
    /// Starts sampling every `every` from now (the first byte), on `sock`.
    pub fn new<S: AsFd>(every: Duration, sock: &S) -> Sampler {
        let now = Instant::now();
        Sampler {
            every,
            start: now,
            next: now + every,
            last_at: now,
            last_bytes: 0,
            last_tcp: read_tcp(sock),
            samples: Vec::new(),
        }
    }

    /// At a block boundary, `sent` bytes handed over so far: a sample if its interval is up.
    #[inline]
    pub fn at<S: AsFd>(&mut self, sent: u64, sock: &S) -> Option<&Interval> {
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        self.take(now, sent, sock);
        while self.next <= now {
            self.next += self.every;
        }
        self.samples.last()
    }

    /// Ends the last sample at the last byte; returns them all.
    pub fn finish<S: AsFd>(mut self, sent: u64, sock: &S) -> (Vec<Interval>, Option<Interval>) {
        let now = Instant::now();
        let last = (sent > self.last_bytes || self.samples.is_empty()).then(|| {
            self.take(now, sent, sock);
            self.samples.last().cloned()
        });
        (self.samples, last.flatten())
    }

    fn take<S: AsFd>(&mut self, now: Instant, sent: u64, sock: &S) {
        let tcp = read_tcp(sock);
        let (was, secs) = (
            &self.last_tcp,
            now.duration_since(self.last_at).as_secs_f64(),
        );
        let bytes = sent - self.last_bytes;
        self.samples.push(Interval {
            start_s: self.last_at.duration_since(self.start).as_secs_f64(),
            end_s: now.duration_since(self.start).as_secs_f64(),
            bytes,
            mib_per_s: bytes as f64 / (1024.0 * 1024.0) / secs.max(1e-9),
            acked_bytes: diff(tcp.bytes_acked, was.bytes_acked),
            rwnd_limited_us: diff(tcp.rwnd_limited_us, was.rwnd_limited_us),
            sndbuf_limited_us: diff(tcp.sndbuf_limited_us, was.sndbuf_limited_us),
            retransmits: diff(tcp.total_retrans, was.total_retrans),
            rtt_us: tcp.rtt_us,
            snd_cwnd: tcp.snd_cwnd,
            snd_wnd: tcp.snd_wnd,
            delivery_rate: tcp.delivery_rate,
        });
        self.last_at = now;
        self.last_bytes = sent;
        self.last_tcp = tcp;
        if self.samples.len() >= MAX_SAMPLES {
            self.samples = merge_pairs(std::mem::take(&mut self.samples));
            self.every *= 2;
        }
    }
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
        "  [{:7.3}-{:7.3} s] {:>10} {:9.1} MiB/s  rtt {}  cwnd {}  window full {}  retrans {}",
        i.start_s,
        i.end_s,
        crate::units::size(i.bytes),
        i.mib_per_s,
        opt(i.rtt_us, &|v| format!("{v} µs")),
        opt(i.snd_cwnd, &|v| v.to_string()),
        opt(i.rwnd_limited_us, &|v| format!("{} ms", v / 1000)),
        opt(i.retransmits, &|v| v.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start: f64, end: f64, bytes: u64) -> Interval {
        Interval {
            start_s: start,
            end_s: end,
            bytes,
            retransmits: Some(1),
            rtt_us: Some(end as u64),
            ..Interval::default()
        }
    }

    /// Merging keeps every byte and the whole span, sums the counts, keeps the later gauges.
    #[test]
    fn merging_pairs_keeps_the_totals() {
        let s: Vec<_> = (0..5)
            .map(|i| sample(i as f64, i as f64 + 1.0, 100 * (i + 1)))
            .collect();
        let m = merge_pairs(s);
        assert_eq!(m.len(), 3);
        assert_eq!(m.iter().map(|i| i.bytes).sum::<u64>(), 1500);
        assert_eq!((m[0].start_s, m[0].end_s), (0.0, 2.0));
        assert_eq!(m[0].retransmits, Some(2));
        assert_eq!(m[0].rtt_us, Some(2));
        assert_eq!(m[2], sample(4.0, 5.0, 500));
    }

    /// Samples over a real socket add up to what was sent, and cover the time without gaps.
    #[test]
    fn samples_add_up_to_what_was_sent() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut s = Sampler::new(Duration::from_millis(1), &c);
        let mut sent = 0;
        for _ in 0..20 {
            std::thread::sleep(Duration::from_micros(600));
            sent += 1000;
            s.at(sent, &c);
        }
        let (all, last) = s.finish(sent + 7, &c);
        assert!(last.is_some());
        assert!(all.len() >= 5, "{}", all.len());
        assert_eq!(all.iter().map(|i| i.bytes).sum::<u64>(), sent + 7);
        for w in all.windows(2) {
            assert_eq!(w[0].end_s, w[1].start_s);
        }
        assert_eq!(all[0].start_s, 0.0);
    }
}
