//! `--interval SECS`: samples of a transfer in time, like iperf3 `-i`, so a stall shows where it
//! happened. A thread of its own wakes every interval while the data is sent ([`sample_while`])
//! and reads two things: the bytes handed to the socket so far (the progress counter, updated
//! once per 128 KiB file block) and the socket's `TCP_INFO` (bytes the receiver acknowledged,
//! the limited times, retransmits, round trip, windows). Each sample covers the time since the
//! last one; the last ends when the last byte is handed over. The sending loop pays nothing: it
//! never looks at the clock for this.
//!
//! At most [`MAX_SAMPLES`] are kept: when a long transfer reaches that, neighbours are merged
//! in pairs and the interval doubles.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use tsperf_results::intervals::{Interval, line, merge_pairs, received_line};

use tsperf_sys::tcpinfo::{SenderTcp, TcpInfo};

/// The shortest `--interval`, in seconds.
pub const MIN_INTERVAL_S: f64 = 0.0001;
/// The longest `--interval`, in seconds.
pub const MAX_INTERVAL_S: f64 = 3600.0;
/// Samples kept at most (then pairs merge).
pub const MAX_SAMPLES: usize = 10_000;

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

    /// Ends a sample now, `sent` bytes handed over so far, the socket saying `tcp`.
    pub fn take(&mut self, now: Instant, sent: u64, tcp: SenderTcp) -> &Interval {
        let (was, secs) = (
            &self.last_tcp,
            now.duration_since(self.last_at).as_secs_f64(),
        );
        let bytes = sent.saturating_sub(self.last_bytes);
        let rate = |b: u64| b as f64 / (1024.0 * 1024.0) / secs.max(1e-9);
        let acked = diff(tcp.bytes_acked, was.bytes_acked);
        self.samples.push(Interval {
            start_s: self.last_at.duration_since(self.start).as_secs_f64(),
            end_s: now.duration_since(self.start).as_secs_f64(),
            bytes,
            mib_per_s: rate(bytes),
            acked_bytes: acked,
            acked_mib_per_s: acked.map(rate),
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
        self.samples.last().expect("just pushed")
    }

    /// The last sample, when the work ended at `now` with `sent` bytes: taken only if something
    /// came since the previous one; shorter than a tenth of the interval, it joins the previous
    /// sample (as iperf3 leaves out a sliver of a last interval) so the samples still add up to
    /// every byte. True when it stands as a sample of its own, to be printed.
    pub fn finish(&mut self, now: Instant, sent: u64, tcp: SenderTcp) -> bool {
        if sent <= self.last_bytes && !self.samples.is_empty() {
            return false;
        }
        let sliver = !self.samples.is_empty() && now.duration_since(self.last_at) < self.every / 10;
        self.take(now, sent, tcp);
        if sliver && let [.., a, b] = &self.samples[..] {
            let joined = merge_pairs(vec![a.clone(), b.clone()]);
            let n = self.samples.len();
            self.samples.splice(n - 2.., joined);
        }
        !sliver
    }

    /// When the next sample is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Moves the next sample's time on past `now`.
    fn advance(&mut self, now: Instant) {
        while self.next <= now {
            self.next += self.every;
        }
    }

    /// Every sample taken.
    pub fn into_samples(self) -> Vec<Interval> {
        self.samples
    }
}

/// Runs `work` (the sending) while a thread samples `sock` every `every`, reading the bytes
/// handed over from `sent` (the progress counter); `live` prints each sample as it is taken.
/// The last sample ends when `work` returns. Returns what `work` returned and the samples.
pub fn sample_while<R>(
    every: Duration,
    sock: BorrowedFd<'_>,
    sent: &(dyn Fn() -> u64 + Sync),
    live: Option<&(dyn Fn(&Interval) + Sync)>,
    work: impl FnOnce() -> R,
) -> (R, Vec<Interval>) {
    let stop = AtomicBool::new(false);
    let sent = &sent;
    std::thread::scope(|scope| {
        let mut sampler = Sampler::new(every, &sock);
        let (stop, sock) = (&stop, &sock);
        let spawned = std::thread::Builder::new()
            .name("intervals".into())
            .spawn_scoped(scope, move || {
                // With a descriptor table of its own the sending thread's calls take no file
                // reference (tsperf_sys::fdtable); it reads TCP_INFO through a duplicate of the
                // socket, closed when it ends, before the scope does. Where the kernel cannot
                // give it a table, it reads through the shared one; a socket it cannot reach
                // from its own reads as nothing known.
                let own = tsperf_sys::fdtable::leave(&[])
                    .ok()
                    .map(|reach| reach.get(sock.as_raw_fd()).ok());
                let tcp_now = || match &own {
                    None => read_tcp(sock),
                    Some(Some(dup)) => read_tcp(dup),
                    Some(None) => SenderTcp::default(),
                };
                loop {
                    let due = sampler.next();
                    let mut now = Instant::now();
                    while !stop.load(Ordering::Acquire) && now < due {
                        std::thread::park_timeout(due - now);
                        now = Instant::now();
                    }
                    let bytes = sent();
                    if stop.load(Ordering::Acquire) {
                        let fresh = sampler.finish(now, bytes, tcp_now());
                        return (sampler, fresh);
                    }
                    let i = sampler.take(now, bytes, tcp_now());
                    if let Some(print) = live {
                        print(i);
                    }
                    sampler.advance(now);
                }
            });
        let thread = spawned.expect("a thread to sample the transfer");
        let r = work();
        stop.store(true, Ordering::Release);
        thread.thread().unpark();
        let (sampler, fresh) = thread.join().expect("the sampling thread does not panic");
        if let (Some(print), Some(last), true) = (live, sampler.samples.last(), fresh) {
            print(last);
        }
        (r, sampler.into_samples())
    })
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

    /// A last sample shorter than a tenth of the interval joins the one before it (no sliver
    /// such as `[1.501-1.501 s] 320 B`), keeping every byte; a longer one stands alone.
    #[test]
    fn a_sliver_of_a_last_sample_joins_the_one_before() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let every = Duration::from_millis(100);
        let mut s = Sampler::new(every, &c);
        let t0 = s.start;
        s.take(t0 + every, 1000, SenderTcp::default());
        assert!(!s.finish(
            t0 + every + Duration::from_millis(5),
            1320,
            SenderTcp::default()
        ));
        let all = s.into_samples();
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].bytes, all[0].end_s), (1320, 0.105));
        let mut s = Sampler::new(every, &c);
        let t0 = s.start;
        s.take(t0 + every, 1000, SenderTcp::default());
        assert!(s.finish(
            t0 + every * 2 - Duration::from_millis(50),
            1500,
            SenderTcp::default()
        ));
        assert_eq!(s.into_samples().len(), 2);
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

    /// Samples taken by the thread cover the work without gaps and add up to what it handed
    /// over; the last ends when the work does.
    #[test]
    fn samples_add_up_to_what_was_sent() {
        use std::sync::atomic::AtomicU64;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let sent = AtomicU64::new(0);
        let printed = std::sync::Mutex::new(0);
        let print = |_: &Interval| *printed.lock().unwrap() += 1;
        let (r, all) = sample_while(
            Duration::from_millis(1),
            c.as_fd(),
            &|| sent.load(Ordering::Relaxed),
            Some(&print),
            || {
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_micros(600));
                    sent.fetch_add(1000, Ordering::Relaxed);
                }
                sent.fetch_add(7, Ordering::Relaxed);
                42
            },
        );
        assert_eq!(r, 42);
        assert!(all.len() >= 5, "{}", all.len());
        assert_eq!(all.iter().map(|i| i.bytes).sum::<u64>(), 20_007);
        for w in all.windows(2) {
            assert_eq!(w[0].end_s, w[1].start_s);
        }
        assert_eq!(all[0].start_s, 0.0);
        assert!(
            all.iter().all(|i| i.rtt_us.is_some()),
            "TCP_INFO per sample"
        );
        assert_eq!(*printed.lock().unwrap(), all.len(), "each printed once");
    }
}
