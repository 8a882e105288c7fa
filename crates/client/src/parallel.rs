//! tsclient `--parallel N` (`-P`), as iperf3 `-P`: one session of N connections. The file is
//! striped into N contiguous ranges, each sent on its own connection from its own thread and
//! verified by its own digest; the whole is verified when every stripe is and the stripes
//! cover the file exactly (with `--time`, each stream repeats its stripe). The hellos carry one
//! random session id and each stream's place, so the server groups them (reverse sessions,
//! `-R -P N`, too).
//!
//! A thread per stream: each stream is the single-stream transfer unchanged, with its own
//! socket, clock and figures; the session's time runs from the first stream's first byte to the
//! last stream's report. Measured against one event loop writing every socket (`cargo bench
//! --bench fanout`, docs/performance.md): one loop is one CPU and held at one stream's rate,
//! 0.52-0.71× the threads' from two streams on, so the threads stay.

use std::time::Duration;

use crate::progress::Progress;
use crate::{StreamConfig, StreamFailure, StreamResult, run_stream};
use tsperf_proto::Session;
use tsperf_results::verdict::LimitedBy;

/// A session's streams, in order.
pub struct Parallel {
    /// Each stream's outcome, stream 0 first.
    pub streams: Vec<Result<StreamResult, StreamFailure>>,
    /// The file's size: what the stripes must cover.
    pub file_bytes: u64,
}

/// The stripes of a file of `len` bytes for `n` streams: contiguous, in order, covering it
/// exactly, their lengths differing by at most one byte. `None` if a stripe would be empty.
pub fn stripes(len: u64, n: u8) -> Option<Vec<(u64, u64)>> {
    let n = u64::from(n.max(1));
    if len < n {
        return None;
    }
    Some(
        (0..n)
            .map(|i| {
                let (from, to) = (len * i / n, len * (i + 1) / n);
                (from, to - from)
            })
            .collect(),
    )
}

/// Each stream thread's outcome, in order (a thread that panicked: a failure saying so).
fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, StreamFailure>>>,
    cfg: &StreamConfig,
) -> Vec<Result<T, StreamFailure>> {
    handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(StreamFailure::before(
                    cfg,
                    None,
                    anyhow::anyhow!("a stream's thread panicked"),
                ))
            })
        })
        .collect()
}

/// A random id for a session's hellos, so the server groups its streams.
fn session_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    id.copy_from_slice(&tsperf_sys::auth::challenge()[..16]);
    id
}

/// Stream `i` of a session: its stripe and place, and its samples labelled with its number and
/// added to the session's `sums`.
fn member(
    cfg: &StreamConfig,
    sums: Option<&std::sync::Arc<crate::live::Sums>>,
    i: usize,
    stripe: (u64, u64, Session),
) -> StreamConfig {
    StreamConfig {
        stripe: Some(stripe),
        live: cfg
            .live
            .as_ref()
            .zip(sums)
            .map(|(l, sums)| l.stream(i, sums)),
        ..cfg.clone()
    }
}

/// Runs one session of `n` streams of `cfg`'s file, `file_bytes` long.
pub fn run_parallel(cfg: &StreamConfig, n: u8, file_bytes: u64) -> Result<Parallel, String> {
    let stripes = stripes(file_bytes, n).ok_or_else(|| {
        format!("--parallel {n} needs a file of at least {n} bytes: it has {file_bytes}")
    })?;
    let id = session_id();
    let sums = cfg.live.as_ref().map(|l| l.session(stripes.len()));
    let streams = std::thread::scope(|s| {
        let handles: Vec<_> = stripes
            .iter()
            .enumerate()
            .map(|(i, &(offset, len))| {
                let cfg = member(cfg, sums.as_ref(), i, (offset, len, Session::of(id, i, n)));
                s.spawn(move || run_stream(&cfg, &mut Progress::new(false)))
            })
            .collect();
        join_all(handles, cfg)
    });
    if let Some(sums) = sums {
        sums.finish();
    }
    Ok(Parallel {
        streams,
        file_bytes,
    })
}

/// A reverse session's streams, in order: the server sends each.
pub struct ParallelReverse {
    /// Each stream's outcome, stream 0 first.
    pub streams: Vec<Result<crate::reverse::ReverseResult, StreamFailure>>,
    /// The bytes asked for in all (a pass of every stream together).
    pub asked: u64,
}

/// Runs one reverse session of `n` streams, each asking for its share of `bytes` (within a
/// byte of the others; a timed session repeats each share for the time).
pub fn run_parallel_reverse(
    cfg: &StreamConfig,
    n: u8,
    bytes: u64,
) -> Result<ParallelReverse, String> {
    let shares = stripes(bytes, n)
        .ok_or_else(|| format!("--parallel {n} needs at least {n} bytes: --bytes is {bytes}"))?;
    let id = session_id();
    let sums = cfg.live.as_ref().map(|l| l.session(shares.len()));
    let streams = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .enumerate()
            .map(|(i, &(offset, len))| {
                let cfg = member(cfg, sums.as_ref(), i, (offset, len, Session::of(id, i, n)));
                s.spawn(move || {
                    crate::reverse::run_reverse(&cfg, len, "", &mut Progress::new(false))
                })
            })
            .collect();
        join_all(handles, cfg)
    });
    if let Some(sums) = sums {
        sums.finish();
    }
    Ok(ParallelReverse {
        streams,
        asked: bytes,
    })
}

impl ParallelReverse {
    /// Every stream verified, and (a sized session) they received what was asked in all.
    pub fn verified(&self) -> bool {
        let ok: Vec<_> = self.streams.iter().flatten().collect();
        ok.len() == self.streams.len()
            && ok.iter().all(|r| r.verified())
            && (ok.iter().any(|r| r.time.is_some() || r.interrupted) || self.bytes() == self.asked)
    }

    /// Bytes every stream received.
    pub fn bytes(&self) -> u64 {
        total(&self.streams)
    }

    /// From the first stream's first byte to the last stream's end.
    pub fn elapsed(&self) -> Duration {
        elapsed(&self.streams)
    }

    /// The bytes and time the session's rate is of: `span` of each stream's measured part.
    pub fn measured(&self) -> (u64, Duration) {
        measured(&self.streams)
    }

    /// The session's verdict: the one most of its streams got (the sender is the server).
    pub fn verdict(&self) -> Option<LimitedBy> {
        verdict(&self.streams)
    }
}

impl Parallel {
    /// Every stream verified, and (a sized session) the stripes sum to the file.
    pub fn verified(&self) -> bool {
        let all = self
            .streams
            .iter()
            .all(|s| s.as_ref().is_ok_and(StreamResult::verified));
        let timed = self
            .streams
            .iter()
            .any(|s| s.as_ref().is_ok_and(|r| r.timed.is_some()));
        all && (timed || self.bytes() == self.file_bytes)
    }

    /// Bytes every stream sent (and the server counted).
    pub fn bytes(&self) -> u64 {
        total(&self.streams)
    }

    /// From the first stream's first byte to the last stream's report.
    pub fn elapsed(&self) -> Duration {
        elapsed(&self.streams)
    }

    /// The bytes and time the session's rate is of: `span` of each stream's measured part.
    pub fn measured(&self) -> (u64, Duration) {
        measured(&self.streams)
    }

    /// The session's verdict: the one most of its streams got (the first such, in stream
    /// order, on a tie).
    pub fn verdict(&self) -> Option<LimitedBy> {
        verdict(&self.streams)
    }
}

/// What a session takes of each of its streams, forward or reverse.
trait Member {
    /// The first byte and the end, µs since the epoch.
    fn span_us(&self) -> (u64, u64);
    /// Every byte it moved.
    fn moved(&self) -> u64;
    /// The bytes and time its rate is of.
    fn measured(&self) -> (u64, Duration);
    /// Its verdict.
    fn limited_by(&self) -> LimitedBy;
}

impl Member for StreamResult {
    fn span_us(&self) -> (u64, u64) {
        (self.begin_unix_us, self.end_unix_us)
    }
    fn moved(&self) -> u64 {
        self.bytes
    }
    fn measured(&self) -> (u64, Duration) {
        StreamResult::measured(self)
    }
    fn limited_by(&self) -> LimitedBy {
        self.verdict().limited_by
    }
}

impl Member for crate::reverse::ReverseResult {
    fn span_us(&self) -> (u64, u64) {
        (self.begin_unix_us, self.end_unix_us)
    }
    fn moved(&self) -> u64 {
        self.bytes
    }
    fn measured(&self) -> (u64, Duration) {
        crate::reverse::ReverseResult::measured(self)
    }
    fn limited_by(&self) -> LimitedBy {
        self.verdict().limited_by
    }
}

/// Bytes every stream that completed moved.
fn total<T: Member>(streams: &[Result<T, StreamFailure>]) -> u64 {
    streams.iter().flatten().map(Member::moved).sum()
}

/// From the first stream's first byte to the last stream's end.
fn elapsed<T: Member>(streams: &[Result<T, StreamFailure>]) -> Duration {
    let spans: Vec<(u64, u64)> = streams.iter().flatten().map(Member::span_us).collect();
    let first = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let last = spans.iter().map(|s| s.1).max().unwrap_or(0);
    Duration::from_micros(last.saturating_sub(first))
}

/// [`span`] of each completed stream's measured part.
fn measured<T: Member>(streams: &[Result<T, StreamFailure>]) -> (u64, Duration) {
    span(
        streams
            .iter()
            .flatten()
            .map(|r| (r.span_us().1, r.measured())),
    )
}

/// The verdict most completed streams got.
fn verdict<T: Member>(streams: &[Result<T, StreamFailure>]) -> Option<LimitedBy> {
    most_streams(streams.iter().flatten().map(Member::limited_by))
}

/// A session's measured bytes and time from each stream's end (µs since the epoch) and its
/// measured bytes and time (all of them, or those after its omitted start): the bytes summed,
/// the time from the earliest measured start to the last end.
fn span(streams: impl Iterator<Item = (u64, (u64, Duration))>) -> (u64, Duration) {
    let (mut bytes, mut first, mut last) = (0, u64::MAX, 0);
    for (end, (b, time)) in streams {
        bytes += b;
        first = first.min(end.saturating_sub(time.as_micros() as u64));
        last = last.max(end);
    }
    (
        bytes,
        Duration::from_micros(last.saturating_sub(first.min(last))),
    )
}

/// The verdict most of `verdicts` are (the first such, in stream order, on a tie).
fn most_streams(verdicts: impl Iterator<Item = LimitedBy>) -> Option<LimitedBy> {
    let verdicts: Vec<_> = verdicts.collect();
    verdicts
        .iter()
        .max_by_key(|v| {
            (
                verdicts.iter().filter(|w| w == v).count(),
                std::cmp::Reverse(verdicts.iter().position(|w| w == *v)),
            )
        })
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stripes are contiguous, cover the file exactly and differ by at most a byte.
    #[test]
    fn stripes_cover_the_file() {
        for (len, n) in [(10u64, 3u8), (36 << 20, 4), (128, 128), (1_000_003, 7)] {
            let s = stripes(len, n).unwrap();
            assert_eq!(s.len(), usize::from(n));
            assert_eq!(s[0].0, 0);
            for w in s.windows(2) {
                assert_eq!(w[0].0 + w[0].1, w[1].0);
            }
            assert_eq!(s.iter().map(|x| x.1).sum::<u64>(), len);
            let (min, max) = (s.iter().map(|x| x.1).min(), s.iter().map(|x| x.1).max());
            assert!(max.unwrap() - min.unwrap() <= 1);
        }
        assert!(stripes(3, 4).is_none());
    }

    /// A stream as a session sees it: its span, bytes, measured part and verdict.
    struct Fake {
        begin_us: u64,
        end_us: u64,
        bytes: u64,
        /// Its omitted start: bytes and time left out.
        omitted: (u64, Duration),
        limited_by: LimitedBy,
    }

    impl Member for Fake {
        fn span_us(&self) -> (u64, u64) {
            (self.begin_us, self.end_us)
        }
        fn moved(&self) -> u64 {
            self.bytes
        }
        fn measured(&self) -> (u64, Duration) {
            let all = Duration::from_micros(self.end_us - self.begin_us);
            (self.bytes - self.omitted.0, all - self.omitted.1)
        }
        fn limited_by(&self) -> LimitedBy {
            self.limited_by
        }
    }

    fn fake(begin_us: u64, end_us: u64, bytes: u64, limited_by: LimitedBy) -> Fake {
        Fake {
            begin_us,
            end_us,
            bytes,
            omitted: (0, Duration::ZERO),
            limited_by,
        }
    }

    fn failed() -> StreamFailure {
        StreamFailure {
            name: "s".into(),
            bytes: Some(100),
            sent: 40,
            acked: None,
            elapsed: None,
            intervals: Vec::new(),
            interrupted: false,
            error: anyhow::anyhow!("lost"),
        }
    }

    /// A session's bytes are its completed streams' sum; its time runs from the first stream's
    /// first byte to the last one's end; a failed stream adds nothing to either.
    #[test]
    fn a_sessions_bytes_and_time_span_its_completed_streams() {
        let streams = vec![
            Ok(fake(1_000_000, 3_000_000, 500, LimitedBy::Network)),
            Err(failed()),
            Ok(fake(1_500_000, 3_500_000, 700, LimitedBy::Network)),
        ];
        assert_eq!(total(&streams), 1200);
        assert_eq!(elapsed(&streams), Duration::from_millis(2500));
        assert_eq!(measured(&streams), (1200, Duration::from_millis(2500)));
        let none: Vec<Result<Fake, StreamFailure>> = vec![Err(failed())];
        assert_eq!((total(&none), elapsed(&none)), (0, Duration::ZERO));
        assert_eq!(measured(&none), (0, Duration::ZERO));
        assert_eq!(verdict(&none), None);
    }

    /// With omitted starts, the session's measured time runs from the earliest measured start
    /// (each stream's end less its measured time) to the last end, and its bytes are the
    /// measured ones.
    #[test]
    fn omitted_starts_leave_the_session_measured_from_the_earliest_measured_start() {
        let mut a = fake(0, 4_000_000, 1000, LimitedBy::Network);
        a.omitted = (200, Duration::from_secs(1));
        let mut b = fake(500_000, 3_000_000, 800, LimitedBy::Network);
        b.omitted = (100, Duration::from_millis(500));
        let streams: Vec<Result<Fake, StreamFailure>> = vec![Ok(a), Ok(b)];
        // a is measured from 1.0 s, b from 1.0 s: both to 4.0 s.
        assert_eq!(measured(&streams), (1500, Duration::from_secs(3)));
        assert_eq!(
            span([(10, (5, Duration::from_micros(20)))].into_iter()),
            (5, Duration::from_micros(10)),
            "a measured time longer than the end clamps at 0"
        );
    }

    /// The session's verdict is the one most streams got; on a tie, the first in stream order.
    #[test]
    fn the_verdict_most_streams_got_wins_and_a_tie_goes_to_the_first() {
        use LimitedBy::{Network, Receiver, Sender};
        assert_eq!(
            most_streams([Sender, Network, Network].into_iter()),
            Some(Network)
        );
        assert_eq!(
            most_streams([Receiver, Network].into_iter()),
            Some(Receiver)
        );
        assert_eq!(most_streams([Network, Receiver].into_iter()), Some(Network));
        assert_eq!(most_streams(std::iter::empty()), None);
    }
}
