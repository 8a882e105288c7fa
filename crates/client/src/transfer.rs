//! One stream transfer over a connected transport: the hello, the clock queries, the data
//! (sampled in time with `--interval`), the trailer and the report.
//!
//! Whatever stops it early (a refusal, a lost connection, a file that shrank, Ctrl-C), what it
//! had measured comes back with the reason ([`StreamFailure`]): the bytes handed to the socket,
//! those the server's TCP acknowledged, the time since the first byte, and the samples so far.

use std::io;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::outcome::{Detail, Forward, StreamOutcome};
use super::send::{Stop, Tally, acknowledged, send_data};
use super::session::{await_report, open_stream, read_frame_within, stream_hello};
use super::{Strategy, StreamConfig, StreamFailure, Transport, intervals};
use crate::progress::Progress;
use tsperf_proto::client::{Accepted, Clock, StreamConversation};
use tsperf_proto::end::End;
use tsperf_proto::{Frame, Hello, Report};
use tsperf_results::units;
use tsperf_sys::net;
use tsperf_sys::source::Source;
use tsperf_sys::text::Peer;
use tsperf_sys::timing::{CpuTime, SchedStat, unix_us_now};

/// What a transfer has measured so far, to give back with a failure.
struct SoFar {
    name: String,
    bytes: u64,
    /// A timed run: `bytes` is one pass of many.
    timed: bool,
    sent: u64,
    /// When the first byte was about to be handed over, and the socket's acknowledged bytes
    /// then (the hello and the clock queries).
    begin: Option<(Instant, Option<u64>)>,
    intervals: Vec<intervals::Interval>,
}

impl SoFar {
    /// The bytes of the file the server's TCP acknowledged: the socket's count less what it
    /// had acknowledged before the data, at most what was sent.
    fn acked<T: Transport>(&self, conn: &T) -> Option<u64> {
        let (_, before) = self.begin?;
        let now = acknowledged(conn)?;
        Some(now.saturating_sub(before?).min(self.sent))
    }

    /// How far it got: `N of M bytes`, or for a timed run `N bytes of a timed run`.
    fn how_far(&self) -> String {
        if self.timed {
            format!("{} of a timed run", units::bytes(self.sent))
        } else {
            units::bytes_of(self.sent, self.bytes)
        }
    }

    /// The failure `error`, with everything measured so far.
    fn failed<T: Transport>(self, conn: &T, error: anyhow::Error) -> StreamFailure {
        StreamFailure {
            acked: self.acked(conn),
            elapsed: self.begin.map(|(at, _)| at.elapsed()),
            name: self.name,
            bytes: Some(self.bytes),
            sent: self.sent,
            intervals: self.intervals,
            interrupted: super::interrupt::requested(),
            error,
        }
    }
}

/// Runs one transfer of `source` over `conn`.
pub(super) fn transfer<T: Transport>(
    mut conn: T,
    source: Source,
    cfg: &StreamConfig,
    progress: &mut Progress,
) -> Result<StreamOutcome, StreamFailure> {
    let mut so_far = SoFar {
        name: source.name().to_owned(),
        bytes: source.len(),
        timed: cfg.spec.time.is_some(),
        sent: 0,
        begin: None,
        intervals: Vec::new(),
    };
    let prepared = prepare(&mut conn, &source, cfg)
        .and_then(|prepared| Ok((prepared, super::send::sender(source, cfg)?)));
    let (mut prepared, mut tx) = match prepared {
        Ok(both) => both,
        Err(e) => return Err(so_far.failed(&conn, e)),
    };
    let mut start: Option<(Start, Option<u64>)> = None;
    let mut tally = Tally::default();
    let (sent_data, samples) = send_sampled(
        &mut conn,
        &mut tx,
        cfg,
        progress,
        &mut tally,
        &mut |conn: &T, waited| start = Some((Start::now(waited), acknowledged(conn))),
    );
    so_far.intervals = samples;
    so_far.sent = tally.sent;
    so_far.begin = start.as_ref().map(|(s, acked)| (s.at, *acked));
    // What a failure's report says was sent.
    progress.update(so_far.sent);
    let digest = match sent_data {
        Ok(digest) => digest,
        Err(stop) => {
            let e = match stop {
                Stop::File(e) => e,
                Stop::Net(e) => lost(&mut conn, e, &so_far, cfg.spec.timeout),
                Stop::Interrupted => anyhow::anyhow!("interrupted"),
            };
            return Err(so_far.failed(&conn, e));
        }
    };
    let report = end_data(
        &mut conn,
        &mut prepared.conv,
        cfg,
        &tally,
        digest,
        &mut so_far,
    );
    let Some((mut start, acked_at_start)) = start else {
        // Every file has a first byte (an empty one is refused when opened).
        let e = anyhow::anyhow!("no data was sent");
        return Err(so_far.failed(&conn, e));
    };
    start.acked = acked_at_start;
    let elapsed = start.at.elapsed();
    let server = match report.and_then(|r| agrees(r, elapsed)) {
        Ok(r) => r,
        Err(e) => return Err(so_far.failed(&conn, e)),
    };
    let source_changed = server.digest != digest && tx.changed();
    let timed = timed(cfg, tx.pass_length(), &tally, &start);
    let server_io = server.server_io.unwrap_or(tsperf_proto::ServerIo::Blocking);
    let done = Done {
        digest,
        figures: tx.figures(&*conn.socket(), server_io),
        server,
        elapsed,
        source_changed,
        timed,
    };
    Ok(result(&conn, cfg, prepared, start, so_far, done))
}

/// Ends the data and waits for the report: the digest trailer after a sized stream; after a
/// timed one, its end trailer and this end's half-close (the stream ends where it does).
fn end_data<T: Transport>(
    conn: &mut T,
    conv: &mut StreamConversation,
    cfg: &StreamConfig,
    tally: &Tally,
    digest: u64,
    so_far: &mut SoFar,
) -> Result<Report> {
    if cfg.spec.time.is_some() {
        so_far.bytes = tally.sent;
        let end = conv.end(tally.sent, digest);
        conn.write_all(&end)
            .and_then(|()| conn.close_write())
            .map_err(|e| lost(conn, e, so_far, cfg.spec.timeout))
            .and_then(|()| await_report(conn, conv))
    } else {
        let trailer = conv.trailer(digest);
        conn.write_all(&trailer)
            .and_then(|()| conn.flush())
            .map_err(|e| lost(conn, e, so_far, cfg.spec.timeout))
            .and_then(|()| await_report(conn, conv))
    }
}

/// What a timed run was: its passes, its omitted start (the bytes the server's TCP had
/// acknowledged by its end, where the kernel says, else those sent), an interrupt.
fn timed(
    cfg: &StreamConfig,
    file_bytes: u64,
    tally: &Tally,
    start: &Start,
) -> Option<crate::Timed> {
    let time = cfg.spec.time?;
    let omitted = tally
        .omit_mark
        .filter(|_| !cfg.spec.omit.is_zero())
        .map(|mark| omitted_start(mark, start.at, start.acked));
    Some(crate::Timed {
        time,
        omit: cfg.spec.omit,
        file_bytes,
        passes: tally.sent as f64 / file_bytes as f64,
        omitted,
        interrupted: tally.interrupted,
    })
}

/// A timed run's omitted start, from its mark (when it ended, the bytes sent by then, the
/// socket's acknowledged bytes then) and the data's start (when, and the acknowledged bytes
/// then: the hello's and the clock queries'): the data bytes the server's TCP had acknowledged
/// by the mark (those sent, where the kernel does not say; never more), and its length.
fn omitted_start(
    (at, sent, acked): (Instant, u64, Option<u64>),
    start: Instant,
    acked_at_start: Option<u64>,
) -> (u64, Duration) {
    let data_acked = acked.zip(acked_at_start).map(|(a, b)| a.saturating_sub(b));
    (
        data_acked.unwrap_or(sent).min(sent),
        at.saturating_duration_since(start),
    )
}

/// What the hello and the clock queries settled.
struct Prepared {
    peer: std::net::SocketAddr,
    accepted: Accepted,
    clock: Option<Clock>,
    /// The conversation, which goes on after the data, to the report.
    conv: StreamConversation,
}

/// The clocks as the first byte is about to be handed over.
struct Start {
    at: Instant,
    unix_us: u64,
    cpu: CpuTime,
    sched: Option<SchedStat>,
    /// Time spent waiting for the file before the first byte (its first block).
    source_before: Duration,
    /// The socket's acknowledged bytes then (the hello and the clock queries).
    acked: Option<u64>,
}

impl Start {
    fn now(source_before: Duration) -> Start {
        Start {
            cpu: CpuTime::process(),
            sched: SchedStat::thread(),
            at: Instant::now(),
            unix_us: unix_us_now(),
            source_before,
            acked: None,
        }
    }
}

/// How the data went: its digest, the engine's figures, the server's report, the time to it.
struct Done {
    digest: u64,
    figures: tsperf_proto::sent::Sent,
    server: Report,
    elapsed: Duration,
    source_changed: bool,
    timed: Option<crate::Timed>,
}

/// Everything measured about a verified-or-not transfer, once the report is in. The engine's
/// figures are the sender's, but for the clocks: the process's CPU and the driver's scheduler
/// figures since the first byte, the transport's waits, the file's wait after the first byte.
fn result<T: Transport>(
    conn: &T,
    cfg: &StreamConfig,
    prepared: Prepared,
    start: Start,
    so_far: SoFar,
    done: Done,
) -> StreamOutcome {
    let sched = start
        .sched
        .zip(SchedStat::thread())
        .map(|(a, b)| b.since(a));
    let cpu = CpuTime::process().since(start.cpu);
    let (would_block, polls) = conn.waits();
    let sender = tsperf_proto::sent::Sent {
        cpu_user_us: cpu.user.as_micros() as u64,
        cpu_sys_us: cpu.sys.as_micros() as u64,
        on_cpu_ns: sched.map(|s| s.on_cpu.as_nanos() as u64),
        run_queue_ns: sched.map(|s| s.run_queue.as_nanos() as u64),
        would_block,
        source_read_ns: Duration::from_nanos(done.figures.source_read_ns)
            .saturating_sub(start.source_before)
            .as_nanos() as u64,
        ..done.figures
    };
    let strategy = cfg.spec.strategy();
    let sock = conn.socket();
    StreamOutcome {
        name: so_far.name,
        measured: crate::Measured {
            bytes: so_far.bytes,
            begin_unix_us: start.unix_us,
            end_unix_us: unix_us_now(),
            elapsed: done.elapsed,
            digest: done.digest,
            timed: done.timed,
            intervals: so_far.intervals,
        },
        sender,
        far: End {
            length: done.server.bytes,
            digest: done.server.digest,
        },
        chunk: cfg.spec.chunk,
        io: T::IO,
        peer: prepared.peer,
        boot_id: done.server.boot_id,
        clock: prepared.clock,
        interrupted: done.timed.is_some_and(|t| t.interrupted),
        tls: crate::outcome::TlsUsed::of(conn.tls(), prepared.accepted.tls),
        pace: cfg.spec.pacing,
        detail: Detail::Sent(Box::new(Forward {
            strategy,
            batch: (strategy == Strategy::Writev).then_some(cfg.spec.batch),
            server_stdout: prepared.accepted.stdout,
            source_read_before: start.source_before,
            polls,
            interface: sock
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .and_then(|a| tsperf_sys::host::interface_of(a.ip())),
            source_changed: done.source_changed,
            cold: None,
        })),
        receiver: done.server,
    }
}

/// Everything before the data: the socket's settings, the hello and its answer, the clock
/// queries. The conversation goes on after the data, to the report.
fn prepare<T: Transport>(conn: &mut T, source: &Source, cfg: &StreamConfig) -> Result<Prepared> {
    super::session::tune(conn, &cfg.spec, true)?;
    let hello = Hello {
        log: cfg.spec.server_log,
        save: cfg.spec.save,
        measure_save: cfg.spec.measure_save,
        tls: cfg.spec.tls,
        ..stream_hello(cfg, source.len(), source.name())
    };
    let (peer, accepted, clock, conv) = open_stream(conn, cfg, hello, "the transfer")?;
    super::session::start_tls(conn, cfg, &accepted)?;
    Ok(Prepared {
        peer,
        accepted,
        clock,
        conv,
    })
}

/// Sends the data, sampled in time by a thread of its own with `--interval`. Returns how the
/// sending ended and the samples.
fn send_sampled<T: Transport>(
    conn: &mut T,
    tx: &mut tsperf_stream::send::Sender,
    cfg: &StreamConfig,
    progress: &mut Progress,
    tally: &mut Tally,
    begin: &mut dyn FnMut(&T, Duration),
) -> (Result<u64, Stop>, Vec<intervals::Interval>) {
    let Some(every) = cfg.spec.interval else {
        return (send_data(conn, tx, cfg, progress, tally, begin), Vec::new());
    };
    // The sampler reads the socket through its own descriptor number while this thread
    // writes; the socket outlives the scope the sampler runs in.
    use std::os::fd::{AsRawFd, BorrowedFd};
    let fd = conn.socket().as_raw_fd();
    // SAFETY: `conn` owns the socket and is not dropped before `sample_while` returns (it joins
    // the sampling thread first).
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    let counter = progress.clone();
    let print = cfg.live.as_ref().map(|l| l.printer(false, progress));
    let live = print
        .as_ref()
        .map(|p| p as &(dyn Fn(&intervals::Interval) + Sync));
    intervals::sample_while(every, sock, &|| counter.sent(), live, || {
        send_data(conn, tx, cfg, progress, tally, begin)
    })
}

/// A monotonic duration the server measured may exceed the client's by clock-rate differences
/// (NTP slews by at most 500 ppm) and no more: this fraction, plus [`SLACK`].
const RATE_TOLERANCE: f64 = 0.001;
/// The absolute slack on the server's durations against the client's.
const SLACK: Duration = Duration::from_millis(1);

/// Checks the server's report against this transfer: its durations, from its first byte to its
/// report, lie inside the client's, from before the first byte to the report's arrival. A report
/// that says otherwise is refused, naming the figure.
fn agrees(r: Report, elapsed: Duration) -> Result<Report> {
    let bound = elapsed.mul_f64(1.0 + RATE_TOLERANCE) + SLACK;
    let total = Duration::from_nanos(r.split.total_ns());
    let first_to_last = Duration::from_nanos(r.elapsed_ns);
    for (what, d) in [
        ("its time split", total),
        ("its first to last byte", first_to_last),
    ] {
        anyhow::ensure!(
            d <= bound,
            "the server's report contradicts this transfer: {what} took {}, longer than the \
             whole transfer took here ({})",
            tsperf_results::units::duration(d),
            tsperf_results::units::duration(elapsed)
        );
    }
    Ok(r)
}

/// Explains a failed write. The server may have said why it stopped (an abort frame); if so,
/// that reason is the error. Otherwise the error says how far the transfer got.
fn lost<T: Transport>(
    conn: &mut T,
    e: io::Error,
    so_far: &SoFar,
    timeout: Duration,
) -> anyhow::Error {
    let far = so_far.how_far();
    if super::interrupt::requested() {
        return anyhow::anyhow!("interrupted after sending {far}");
    }
    if net::is_timeout(&e) {
        return anyhow::anyhow!(
            "the server took no data for {} s after {far}",
            timeout.as_secs_f64()
        );
    }
    let reason = read_frame_within(conn, "reason", Duration::from_millis(500), String::new);
    if let Ok(Frame::Abort(reason) | Frame::Refuse { reason, .. }) = reason {
        return anyhow::anyhow!(
            "the server aborted the transfer after {far}: {}",
            Peer(&reason)
        );
    }
    let acked = so_far.acked(conn).map_or(String::new(), |a| {
        format!(" (the server's TCP acknowledged {a})")
    });
    anyhow::Error::new(e).context(format!("connection lost after sending {far}{acked}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The omitted start counts the data the server's TCP had acknowledged (less the hello's
    /// and the clock queries' bytes), never more than was sent, and the bytes sent where the
    /// kernel does not say.
    #[test]
    fn the_omitted_start_counts_acknowledged_data() {
        let start = Instant::now();
        let mark = start + Duration::from_secs(2);
        assert_eq!(
            omitted_start((mark, 5000, Some(4100)), start, Some(100)),
            (4000, Duration::from_secs(2))
        );
        assert_eq!(
            omitted_start((mark, 5000, Some(9100)), start, Some(100)),
            (5000, Duration::from_secs(2)),
            "no more than was sent"
        );
        assert_eq!(omitted_start((mark, 5000, None), start, Some(100)).0, 5000);
        assert_eq!(omitted_start((mark, 5000, Some(4100)), start, None).0, 5000);
        assert_eq!(
            omitted_start((start, 0, Some(0)), mark, Some(100)),
            (0, Duration::ZERO),
            "a mark before the start is empty"
        );
    }
}
