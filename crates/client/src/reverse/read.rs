//! Receiving a reverse stream through the engine ([`tsperf_stream::receive`]): every read
//! counted and checksummed (the tail held back for the server's report and end trailer),
//! logged per read with `--log`; here, around it: sampled with `--interval`, its omitted start
//! marked with `--omit`, its bound kept, and Ctrl-C passed on as one byte back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tsperf_stream::receive::log::{ProcessStdout, TransferLog};
use tsperf_stream::receive::{Block, ReadEnd};

use super::READ_SIZE;
use crate::progress::Progress;
use crate::{StreamConfig, StreamFailure, Transport, interrupt};
use tsperf_proto::LogMode;
use tsperf_proto::sent::REVERSE_TAIL;
use tsperf_proto::serve::TIMED_GRACE;
use tsperf_sys::mark::WakeMark;
use tsperf_sys::timing::unix_us_now;

/// A reverse stream's per-read log (`--log`): the engine's, its stdout lines this process's.
pub(super) type RxLog = TransferLog<ProcessStdout>;

/// The engine's receiver of a reverse stream: its Sent frame and end trailer held back.
pub(super) type Rx =
    tsperf_stream::receive::Receiver<RxLog, tsperf_sys::save::Partial, REVERSE_TAIL>;

/// What the receiving counted so far.
pub(super) struct Received {
    /// The reads, their count and checksum, the log.
    pub(super) rx: Rx,
    /// The first byte's instant and wall clock.
    pub(super) first: Option<(Instant, u64)>,
    /// The client asked the server to stop (Ctrl-C).
    pub(super) stop_sent: bool,
    /// With `--omit`: what had arrived when the omitted start ended.
    pub(super) omit_mark: Option<(u64, Duration)>,
    /// What the server may send at most ([`Received::bound`]).
    pub(super) bound: Bound,
    /// The receive low-water mark read with at the end, bytes ([`read_to_end`]).
    pub(super) wake_mark: u32,
}

/// How far a server may go before the client cuts the stream off (issue 32: a server whose
/// data never ends cannot keep the client): a sized stream's pass and the server's end, by the
/// time that pass takes at the floor rate (issue 51: nor can one that trickles), or a timed
/// stream's time and the protocol's grace after its first byte.
#[derive(Debug, Clone, Copy, Default)]
pub(super) enum Bound {
    /// Not known yet (before the Accept).
    #[default]
    None,
    /// A sized stream: `pass` bytes asked for, then [`REVERSE_TAIL`], by
    /// [`sized_deadline`] after the first byte.
    Bytes { pass: u64 },
    /// A timed stream: this long from the first byte (its omitted start and its time), then
    /// [`tsperf_proto::serve::TIMED_GRACE`].
    Time(Duration),
}

/// How long a sized stream of `pass` bytes may take from its first byte: `--timeout` (the
/// server's end) and the pass at the floor rate (`--min-rate`).
pub(super) fn sized_deadline(pass: u64, cfg: &StreamConfig) -> Duration {
    let rate = cfg.spec.min_rate.max(1) as f64;
    cfg.spec
        .timeout
        .saturating_add(Duration::try_from_secs_f64(pass as f64 / rate).unwrap_or(Duration::MAX))
}

/// [`read_to_end`], sampled in time by a thread of its own with `--interval` (the bytes
/// received so far, from the progress counter). A receiving socket's `TCP_INFO` says nothing of
/// what it acknowledged or of the sender's limits: the samples keep only the bytes, their rate
/// and the round trip.
pub(super) fn read_sampled<T: Transport>(
    conn: &mut T,
    cfg: &StreamConfig,
    got: &mut Received,
    progress: &mut Progress,
) -> (Result<()>, Vec<crate::intervals::Interval>) {
    use crate::intervals::{self, Interval};
    let Some(every) = cfg.spec.interval else {
        return (read_to_end(conn, cfg, got, progress), Vec::new());
    };
    use std::os::fd::{AsRawFd, BorrowedFd};
    let fd = conn.socket().as_raw_fd();
    // SAFETY: `conn` owns the socket and outlives `sample_while`, which joins its thread first.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    let counter = progress.clone();
    let print = cfg.live.as_ref().map(|l| l.printer(true, progress));
    let live = print.as_ref().map(|p| p as &(dyn Fn(&Interval) + Sync));
    let (read, samples) = intervals::sample_while(every, sock, &|| counter.sent(), live, || {
        read_to_end(conn, cfg, got, progress)
    });
    (read, samples.into_iter().map(received_only).collect())
}

/// A sample as a receiver can take it: the bytes, their rate and the round trip.
fn received_only(i: crate::intervals::Interval) -> crate::intervals::Interval {
    crate::intervals::Interval {
        start_s: i.start_s,
        end_s: i.end_s,
        bytes: i.bytes,
        mib_per_s: i.mib_per_s,
        rtt_us: i.rtt_us,
        ..Default::default()
    }
}

impl Received {
    pub(super) fn new() -> Received {
        Received {
            rx: Rx::new(None, READ_SIZE as u32, RxLog::new(LogMode::None, 1)),
            first: None,
            stop_sent: false,
            omit_mark: None,
            bound: Bound::None,
            wake_mark: 1,
        }
    }

    /// The first byte came: the clocks start, and the stream's end is set: a timed stream's
    /// time and the grace, a sized one's pass at the floor rate (whatever still comes).
    fn begin<T: Transport>(&mut self, conn: &mut T, cfg: &StreamConfig, progress: &mut Progress) {
        let now = Instant::now();
        self.first = Some((now, unix_us_now()));
        progress.restart();
        match self.bound {
            Bound::Time(run) => conn.read_by(Some(now + run + TIMED_GRACE)),
            Bound::Bytes { pass } => conn.read_by(Some(now + sized_deadline(pass, cfg))),
            Bound::None => {}
        }
    }

    /// After a read: checked against the bound, its omitted start marked, shown.
    fn took(&mut self, cfg: &StreamConfig, progress: &mut Progress) -> Result<()> {
        if let Some(why) = self.past_bound() {
            return Err(anyhow!(why));
        }
        if self.omit_mark.is_none()
            && !cfg.spec.omit.is_zero()
            && let Some((at, ..)) = self.first
            && at.elapsed() >= cfg.spec.omit
        {
            self.omit_mark = Some((self.rx.hashed(), at.elapsed()));
        }
        progress.update(self.rx.hashed());
        Ok(())
    }

    /// Why a read timed out: a timed stream past its time and the grace, a sized one past its
    /// pass at the floor rate, or a server silent for the timeout.
    fn silent(&self, cfg: &StreamConfig) -> anyhow::Error {
        match (self.bound, self.first) {
            (Bound::Bytes { pass }, Some((at, ..)))
                if at.elapsed() >= sized_deadline(pass, cfg) =>
            {
                anyhow!(
                    "the server sent {} of {pass} bytes in {:.1} s, slower than {}/s \
                     (--min-rate) could take: cut off",
                    self.rx.hashed(),
                    at.elapsed().as_secs_f64(),
                    tsperf_results::units::size(cfg.spec.min_rate),
                )
            }
            (Bound::Time(run), Some((at, ..))) if at.elapsed() >= run + TIMED_GRACE => anyhow!(
                "the server was still sending {} s past the run's time ({} s) after {} bytes; \
                 cut off",
                TIMED_GRACE.as_secs(),
                run.as_secs_f64(),
                self.rx.hashed()
            ),
            _ => anyhow!(
                "the server sent nothing for {} s after {} bytes",
                cfg.spec.timeout.as_secs_f64(),
                self.rx.hashed()
            ),
        }
    }

    /// What the server is past, if it has sent more than its stream may carry.
    fn past_bound(&self) -> Option<String> {
        match self.bound {
            Bound::Bytes { pass } if self.rx.bytes() > pass + REVERSE_TAIL as u64 => Some(format!(
                "the server sent more than the {pass} bytes asked for and its end ({REVERSE_TAIL} \
                 bytes): {} arrived; cut off",
                self.rx.bytes()
            )),
            _ => None,
        }
    }

    /// The log's end line, with `--log`: the stream complete or not.
    pub(super) fn log_end(&mut self, complete: bool) {
        self.rx
            .log_end(if complete { "complete" } else { "incomplete" });
    }

    /// The failure `error` of a stream asked to be `bytes` a pass, with what arrived.
    pub(super) fn failed(&self, bytes: u64, error: anyhow::Error) -> StreamFailure {
        StreamFailure {
            name: String::new(),
            bytes: Some(bytes),
            sent: self.rx.hashed(),
            acked: None,
            elapsed: self.first.map(|(at, ..)| at.elapsed()),
            intervals: Vec::new(),
            interrupted: interrupt::requested(),
            error,
        }
    }
}

/// With `--log`, the log and its start line; reads of a chunk then, as the field report's
/// server read (at least LOG_MIN_READ, at most a bulk read): a line each.
pub(super) fn open_log(
    cfg: &StreamConfig,
    got: &mut Received,
    peer: SocketAddr,
    name: &str,
    length: u64,
) -> Result<()> {
    let mut log = RxLog::new(cfg.spec.log, 1);
    match cfg.spec.log {
        LogMode::None => return Ok(()),
        LogMode::Stdout => log.set_stdout(ProcessStdout),
        LogMode::File => log.set_file(Some(std::sync::Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&cfg.spec.log_file)
                .with_context(|| {
                    format!("cannot open log file '{}'", cfg.spec.log_file.display())
                })?,
        ))),
    }
    let read_size = tsperf_proto::serve::default_read_size(
        cfg.spec.chunk,
        cfg.spec.log,
        tsperf_proto::serve::LOG_MIN_READ,
    );
    let name = if name.is_empty() { "generated" } else { name };
    log.start(peer, name, length, cfg.spec.chunk, read_size as usize);
    got.rx = Rx::new(None, read_size, log);
    Ok(())
}

/// Reads the stream to its end, counting and checksumming all but what the receiver holds
/// back, a read at a time (each hashed as it comes, checked against the bound, shown).
fn read_to_end<T: Transport>(
    conn: &mut T,
    cfg: &StreamConfig,
    got: &mut Received,
    progress: &mut Progress,
) -> Result<()> {
    let read_size = got.rx.read_size();
    let mut block = Block::new(read_size, read_size as u64);
    // On a path of large segments (loopback) the reader asks to be woken once per 64 KiB, as
    // the server does for a forward stream, from its first byte on, once its buffer is four
    // times that: on loopback waking the reader is the sending server's CPU. A stream always
    // ends with the server closing, and the close wakes the reader whatever the mark.
    let mut mark: Option<WakeMark> = None;
    conn.read_by(None);
    // A stop ends the stream as its end does: the server is asked to stop, and sends its
    // report and end trailer after what it had sent.
    interrupt::ends_itself();
    loop {
        if interrupt::requested() && !got.stop_sent {
            got.stop_sent = true;
            conn.write_all(&[1])
                .context("cannot ask the server to stop")?;
        }
        let end = block.read_once(conn, &mut got.rx);
        if got.first.is_none() && got.rx.bytes() > 0 {
            got.begin(conn, cfg, progress);
            mark = Some(WakeMark::new(&*conn.socket()));
        }
        if let Some(m) = mark.as_mut().filter(|m| m.usable() && !m.raised()) {
            m.follow(&*conn.socket(), super::WAKE_MARK);
            got.wake_mark = m.get();
        }
        match end {
            ReadEnd::TurnOver => got.took(cfg, progress)?,
            ReadEnd::Eof | ReadEnd::Ended(_) | ReadEnd::Complete => return Ok(()),
            ReadEnd::Error(e) if tsperf_sys::net::is_timeout(&e) => return Err(got.silent(cfg)),
            ReadEnd::Error(e) | ReadEnd::Sink(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "connection lost after receiving {} bytes",
                    got.rx.hashed()
                )));
            }
            // A transport that waits never says it would block.
            ReadEnd::WouldBlock => {}
        }
    }
}
