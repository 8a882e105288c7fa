//! A stream run: what runs ([`Run`], prepared from a [`crate::spec::RunSpec`]: a configuration
//! each way the data goes, a stream count) and what came of it ([`Streams`]: a session each way, each of one or more streams, each
//! stream's outcome one type with its side). Every combination of direction and stream count
//! runs through [`run`], is rendered by [`crate::output`] and judged by [`crate::output::finish`],
//! as iperf3 covers `-R`, `-P` and `--bidir` with one stream type and a sender flag.

use std::time::Duration;

use crate::outcome::{Detail, StreamOutcome};
use crate::progress::Progress;
use crate::reverse::run_reverse;
use crate::spec::Run;
use crate::{StreamConfig, StreamFailure, run_stream};
use tsperf_results::verdict::LimitedBy;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The client sends (the default).
    Send,
    /// The server sends (`--reverse`).
    Receive,
    /// Both at once, on connections of their own (`--bidir`).
    Both,
}

pub use crate::outcome::Side;

/// A stream's outcome: what it measured, or why it did not finish (and what it had measured).
pub type Outcome = Result<StreamOutcome, StreamFailure>;

impl StreamOutcome {
    /// Timed, or stopped early by an interrupt: its bytes are not a stripe's whole.
    fn open_ended(&self) -> bool {
        self.measured.timed.is_some() || self.interrupted
    }
}

/// What a session takes of each of its streams, whichever side sent it.
pub(crate) trait Member {
    /// The first byte and the end, µs since the epoch.
    fn span_us(&self) -> (u64, u64);
    /// Every byte it moved.
    fn moved(&self) -> u64;
    /// The bytes and time its rate is of.
    fn measured(&self) -> (u64, Duration);
    /// Its verdict.
    fn limited_by(&self) -> LimitedBy;
}

impl Member for StreamOutcome {
    fn span_us(&self) -> (u64, u64) {
        (self.measured.begin_unix_us, self.measured.end_unix_us)
    }
    fn moved(&self) -> u64 {
        self.measured.bytes
    }
    fn measured(&self) -> (u64, Duration) {
        self.measured.rated()
    }
    fn limited_by(&self) -> LimitedBy {
        self.verdict().limited_by
    }
}

/// One direction's streams: one stream alone, or a session of `--parallel` streams.
#[derive(Debug)]
pub struct Session {
    /// Which end sent.
    pub side: Side,
    /// Each stream's outcome, stream 0 first.
    pub streams: Vec<Outcome>,
    /// What the streams cover together: the file's size (sent), or the bytes asked a pass
    /// (received).
    pub whole: u64,
    /// A session of `--parallel` streams, not a stream alone.
    pub striped: bool,
    /// A timed run (`--time`).
    pub timed: bool,
}

impl Session {
    /// Every stream verified and, a session, the stripes covering the whole: the server's
    /// passes are the stripes of the whole, and a sized session's bytes are the whole.
    pub fn verified(&self) -> bool {
        let ok: Vec<&StreamOutcome> = self.streams.iter().flatten().collect();
        let n = u8::try_from(self.streams.len()).unwrap_or(u8::MAX);
        let striped_so =
            || self.side == Side::Sent || passes_are_stripes(self.whole, n, &self.passes());
        ok.len() == self.streams.len()
            && ok.iter().all(|s| s.verified())
            && (!self.striped
                || (striped_so()
                    && (ok.iter().any(|s| s.open_ended()) || self.bytes() == self.whole)))
    }

    /// Each completed received stream's pass, as the server accepted it.
    fn passes(&self) -> Vec<u64> {
        self.streams
            .iter()
            .flatten()
            .filter_map(|s| match &s.detail {
                Detail::Received(d) => Some(d.asked),
                Detail::Sent(_) => None,
            })
            .collect()
    }

    /// Some stream was stopped early by Ctrl-C or SIGTERM (finished or cut off).
    pub fn interrupted(&self) -> bool {
        self.streams.iter().any(|s| match s {
            Ok(s) => s.interrupted,
            Err(f) => f.interrupted,
        })
    }

    /// The first stream that failed, if one did.
    pub fn failure(&self) -> Option<&StreamFailure> {
        self.streams.iter().find_map(|s| s.as_ref().err())
    }

    /// Bytes every stream that completed moved.
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

    /// The verdict most of its streams got (the first such, in stream order, on a tie).
    pub fn verdict(&self) -> Option<LimitedBy> {
        verdict(&self.streams)
    }
}

/// A stream run's outcome: a session each way it went (`None`: not that way), or why that
/// way's session could not start.
#[derive(Debug)]
pub struct Streams {
    /// To the server.
    pub forward: Option<Result<Session, String>>,
    /// From the server.
    pub reverse: Option<Result<Session, String>>,
}

/// Runs `run`: its sessions, both at once for [`Direction::Both`] (each on threads of its own,
/// no progress bar: two would fight over the terminal).
pub fn run(run: &Run, progress: &mut Progress) -> Streams {
    match (&run.forward, &run.reverse) {
        (Some(to), Some(from)) => {
            let id = crate::parallel::session_id();
            let label = |cfg: &StreamConfig, sending: bool| StreamConfig {
                live: cfg.live.as_ref().map(|l| l.direction(sending)),
                two_way: Some(id),
                ..cfg.clone()
            };
            let (to, from) = (label(to, true), label(from, false));
            std::thread::scope(|s| {
                let back = s.spawn(|| receive(run, &from, &mut Progress::new(false)));
                let forward = send(run, &to, &mut Progress::new(false));
                let reverse = back
                    .join()
                    .unwrap_or_else(|_| Err("the receiving thread panicked".to_owned()));
                Streams {
                    forward: Some(forward),
                    reverse: Some(reverse),
                }
            })
        }
        (None, Some(from)) => Streams {
            forward: None,
            reverse: Some(receive(run, from, progress)),
        },
        (Some(to), None) => Streams {
            forward: Some(send(run, to, progress)),
            reverse: None,
        },
        (None, None) => Streams {
            forward: None,
            reverse: None,
        },
    }
}

/// The client's session: FILE (or the generated stream) alone, or striped over the streams.
fn send(spec: &Run, cfg: &StreamConfig, progress: &mut Progress) -> Result<Session, String> {
    let n = spec.streams.get();
    if n == 1 {
        let r = run_stream(cfg, progress);
        return Ok(Session {
            side: Side::Sent,
            whole: r
                .as_ref()
                .map_or_else(|f| f.bytes.unwrap_or(0), |r| r.measured.bytes),
            streams: vec![r],
            striped: false,
            timed: cfg.spec.time.is_some(),
        });
    }
    let len = match cfg.generated {
        Some(len) => len,
        None => std::fs::metadata(&cfg.file)
            .map_err(|e| format!("cannot open file '{}': {e}", cfg.file.display()))?
            .len(),
    };
    let stripes = crate::parallel::stripes(len, n).ok_or_else(|| {
        format!("--parallel {n} needs a file of at least {n} bytes: it has {len}")
    })?;
    Ok(crate::parallel::session(
        cfg,
        &stripes,
        len,
        Side::Sent,
        |cfg, _| run_stream(cfg, &mut Progress::new(false)),
    ))
}

/// The server's session: the generated stream (or a served file) alone, or shared out.
fn receive(spec: &Run, cfg: &StreamConfig, progress: &mut Progress) -> Result<Session, String> {
    let n = spec.streams.get();
    let name = spec.served.as_deref().unwrap_or("");
    if n == 1 {
        let asked = if spec.served.is_some() { 0 } else { spec.asked };
        let r = run_reverse(cfg, asked, name, progress);
        return Ok(Session {
            side: Side::Received,
            whole: match r.as_ref().map(|r| &r.detail) {
                Ok(Detail::Received(d)) => d.asked,
                _ => asked,
            },
            streams: vec![r],
            striped: false,
            timed: cfg.spec.time.is_some(),
        });
    }
    if spec.served.is_some() {
        // The server stripes its file: each stream asks for its place's stripe, and the
        // whole is what the stripes came to.
        let mut s = crate::parallel::session(
            cfg,
            &vec![(0, 0); usize::from(n)],
            0,
            Side::Received,
            |cfg, _| run_reverse(cfg, 0, name, &mut Progress::new(false)),
        );
        s.whole = s.passes().iter().sum();
        return Ok(s);
    }
    let asked = spec.asked;
    let stripes = crate::parallel::stripes(asked, n)
        .ok_or_else(|| format!("--parallel {n} needs at least {n} bytes: --bytes is {asked}"))?;
    Ok(crate::parallel::session(
        cfg,
        &stripes,
        asked,
        Side::Received,
        |cfg, len| run_reverse(cfg, len, "", &mut Progress::new(false)),
    ))
}

/// True when `passes` (each received stream's pass, as the server accepted it, in stream
/// order) are the stripes of `whole` over `n` streams: the server sent each stream its own
/// share, and together they cover the whole.
pub(crate) fn passes_are_stripes(whole: u64, n: u8, passes: &[u64]) -> bool {
    crate::parallel::stripes(whole, n)
        .is_some_and(|stripes| stripes.iter().map(|s| s.1).eq(passes.iter().copied()))
}

/// Bytes every stream that completed moved.
pub(crate) fn total<T: Member>(streams: &[Result<T, StreamFailure>]) -> u64 {
    streams.iter().flatten().map(Member::moved).sum()
}

/// From the first stream's first byte to the last stream's end.
pub(crate) fn elapsed<T: Member>(streams: &[Result<T, StreamFailure>]) -> Duration {
    let spans: Vec<(u64, u64)> = streams.iter().flatten().map(Member::span_us).collect();
    let first = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let last = spans.iter().map(|s| s.1).max().unwrap_or(0);
    Duration::from_micros(last.saturating_sub(first))
}

/// [`span`] of each completed stream's measured part.
pub(crate) fn measured<T: Member>(streams: &[Result<T, StreamFailure>]) -> (u64, Duration) {
    span(
        streams
            .iter()
            .flatten()
            .map(|r| (r.span_us().1, r.measured())),
    )
}

/// The verdict most completed streams got.
pub(crate) fn verdict<T: Member>(streams: &[Result<T, StreamFailure>]) -> Option<LimitedBy> {
    most_streams(streams.iter().flatten().map(Member::limited_by))
}

/// A session's measured bytes and time from each stream's end (µs since the epoch) and its
/// measured bytes and time (all of them, or those after its omitted start): the bytes summed,
/// the time from the earliest measured start to the last end.
pub(crate) fn span(streams: impl Iterator<Item = (u64, (u64, Duration))>) -> (u64, Duration) {
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
pub(crate) fn most_streams(verdicts: impl Iterator<Item = LimitedBy>) -> Option<LimitedBy> {
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
mod tests;
