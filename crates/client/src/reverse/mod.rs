//! tsclient `--reverse`: the server sends, the client receives, counts and checksums.
//!
//! The server sends the generated stream (the tsgen text: `--bytes 36MiB` is the seed's
//! `tsl.txt`), sized by `--bytes` or, with `--time`, repeated for that long; then its Sent frame
//! (what it measured while sending) and the end trailer (length and digest), then it closes
//! (protocol 7). The client reads to the end of the stream, holding the last bytes back from its
//! checksum ([`tsperf_proto::end::Tail`]): at the end they are the frame and the trailer. The
//! run is verified when the trailer's length is what arrived (and what a sized run asked for)
//! and its digest is the client's own. The clock runs from the first byte received to the end
//! of the stream: the receiver's view, as the server's is for a forward stream.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

mod read;

use super::session::{ask_clock, handshake};
use super::{StreamConfig, StreamFailure, Transport, interrupt};
use crate::blocking::Blocking;
use crate::nonblocking::MioConn;
use crate::progress::Progress;
use read::{Received, open_log, read_sampled};
use tsperf_proto::Hello;
use tsperf_proto::client::reverse::{self, Contradiction, Ending};
use tsperf_proto::client::{Accepted, Clock, StreamConversation};
use tsperf_proto::end::Tail;
use tsperf_proto::sent::{REVERSE_TAIL, Sent};
use tsperf_sys::text::Peer;
use tsperf_sys::timing::{CpuTime, SchedStat, unix_us_now};

/// Bytes one read asks for.
pub const READ_SIZE: usize = 256 << 10;

/// The receive low-water mark (`SO_RCVLOWAT`) of a reverse stream on a path of large segments
/// (`tsperf_sys::mark::WakeMark`): a read's worth, four times the server's for a forward
/// stream. On loopback the kernel wakes the reader from the sending server's context, so each
/// wake-up is the server's CPU. `-R --chunk 1024 --bytes 1G`, 64 KiB against 256 KiB, 9
/// alternating pairs (issue 33): server 1027 against 925 ms per GiB (per pair 0.93), client
/// 0.20 against 0.09 s (0.45), 996 against 1107 MiB/s (1.07).
pub const WAKE_MARK: u32 = READ_SIZE as u32;

/// Everything measured about one reverse stream, by both ends.
#[derive(Debug, Clone)]
pub struct ReverseResult {
    /// The bytes, the time, the digest (the client's, of what arrived), a timed run's passes
    /// (with `--omit`, the bytes received and the time since the first byte when the omitted
    /// start ended: the rate is of what came after).
    pub measured: crate::Measured,
    /// Bytes of one pass: asked for, or the served file's size.
    pub asked: u64,
    /// The served file's name; empty for the generated stream.
    pub name: String,
    /// The generated stream was one buffer, the text's first chunk again and again.
    pub one_buffer: bool,
    /// The server's write size.
    pub chunk: u32,
    /// The client's I/O model.
    pub io: super::ClientIo,
    /// The server's address.
    pub peer: SocketAddr,
    /// The digest and length the server's end trailer gives.
    pub end: tsperf_proto::end::End,
    /// Reads that returned data.
    pub reads: u64,
    /// The receiving thread's CPU time while it received (its own: in `--bidir` or `-R -P` the
    /// process also holds the other streams' threads).
    pub cpu: CpuTime,
    /// The receiving thread's time on a CPU and waiting for one.
    pub sched: Option<tsperf_sys::timing::SchedStat>,
    /// The receive buffer the socket had at the end.
    pub rcvbuf: u32,
    /// The client socket's `TCP_INFO` at the end: the receiver's view.
    pub tcp: tsperf_proto::tcp::ReceiverTcp,
    /// What the server measured while it sent.
    pub server: Sent,
    /// The clock offset, when clock queries were made.
    pub clock: Option<Clock>,
    /// Stopped by Ctrl-C or SIGTERM: the client asked the server to end the stream early, and
    /// every byte until then is verified.
    pub interrupted: bool,
    /// This end's per-read log sink (`--log`).
    pub log: tsperf_proto::LogMode,
    /// Its lines written, and lost (could not be written).
    pub log_lines: (u64, u64),
    /// Time spent writing them.
    pub log_time: Duration,
    /// The most bytes one read asked for.
    pub read_size: usize,
    /// The receive low-water mark it read with at the end (`SO_RCVLOWAT`), bytes: [`WAKE_MARK`]
    /// once raised on a path of large segments, else 1.
    pub wake_mark: u32,
}

impl ReverseResult {
    /// True when the server's trailer counts what arrived (a sized run: what was asked) and
    /// its digest is the client's.
    pub fn verified(&self) -> bool {
        self.end.length == self.measured.bytes
            && self.server.bytes == self.measured.bytes
            && self.end.digest == self.measured.digest
            && (self.measured.timed.is_some()
                || self.interrupted
                || self.measured.bytes == self.asked)
    }

    /// Both ends on one machine.
    pub fn same_host(&self) -> bool {
        tsperf_sys::host::same_host(self.peer.ip(), self.server.boot_id)
    }

    /// The verdict's evidence, with the roles turned round: the server sends, the client
    /// receives.
    pub fn evidence(&self) -> tsperf_results::verdict::Evidence {
        use tsperf_results::verdict::{Evidence, ServerTime};
        let s = &self.server;
        Evidence {
            tcp: s.tcp,
            flight: s.flight,
            elapsed: self.measured.elapsed,
            client_cpu: Duration::from_micros(s.cpu_user_us + s.cpu_sys_us),
            sender_on_cpu: s.on_cpu_ns.map(Duration::from_nanos),
            sender_run_queue: s.run_queue_ns.map(Duration::from_nanos),
            source_read: None,
            sndbuf: u64::from(s.sndbuf),
            write_size: s.chunk,
            bytes: self.measured.bytes,
            line_mbit: None,
            same_host: self.same_host(),
            cpus: tsperf_sys::host::cpus(),
            server: Some(ServerTime {
                total: self.measured.elapsed,
                cpu: self.cpu.user + self.cpu.sys,
                run_queue: self.sched.map(|s| s.run_queue),
                log: self.log_time,
                disk: Duration::ZERO,
            }),
            sender_span: Some(Duration::from_nanos(s.elapsed_ns)),
            reverse: true,
        }
    }

    /// What the report calls the source: the served file's name, or the generated stream's.
    pub fn source(&self) -> &str {
        match (self.name.is_empty(), self.one_buffer) {
            (false, _) => &self.name,
            (true, false) => "generated",
            (true, true) => "generated-one-buffer",
        }
    }

    /// What limited the stream, the roles turned round.
    pub fn verdict(&self) -> tsperf_results::verdict::Verdict {
        tsperf_results::verdict::judge(&self.evidence())
    }
}

/// True when the stream asks the server for one buffer (`--one-buffer`): the generated
/// stream's only, a served file (`name`) is sent as it is.
fn asks_one_buffer(cfg: &StreamConfig, name: &str) -> bool {
    cfg.spec.one_buffer && name.is_empty()
}

/// Runs one reverse stream of `bytes` bytes a pass (`cfg.spec.time`: timed) over the transport the
/// configuration asks for.
pub fn run_reverse(
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
    progress: &mut Progress,
) -> Result<ReverseResult, StreamFailure> {
    let before = |e: anyhow::Error| StreamFailure {
        name: String::new(),
        bytes: Some(bytes),
        sent: 0,
        acked: None,
        elapsed: None,
        intervals: Vec::new(),
        interrupted: interrupt::requested(),
        error: e,
    };
    match cfg.spec.time {
        Some(time) => progress.start_timed(cfg.spec.omit + time),
        None => progress.start(bytes),
    }
    let result = if cfg.spec.nonblocking {
        MioConn::connect(&cfg.spec.host, cfg.spec.port, cfg.spec.timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress))
    } else {
        Blocking::connect(&cfg.spec.host, cfg.spec.port, cfg.spec.timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress))
    };
    progress.clear();
    result
}

fn receive<T: Transport>(
    mut conn: T,
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
    progress: &mut Progress,
) -> Result<ReverseResult, StreamFailure> {
    let mut got = Received::new();
    let fail = |got: &Received, e: anyhow::Error| got.failed(bytes, e);
    let (hello_at, hello_unix_us) = (Instant::now(), unix_us_now());
    let (peer, accepted, clock) = match open(&mut conn, cfg, bytes, name) {
        Ok(p) => p,
        Err(e) => return Err(fail(&got, e)),
    };
    if let Err(e) = open_log(cfg, &mut got, peer, name, accepted.length) {
        return Err(fail(&got, e));
    }
    got.bound = match cfg.spec.time {
        Some(time) => read::Bound::Time(time + cfg.spec.omit),
        None => read::Bound::Bytes {
            pass: accepted.length,
        },
    };
    let (read, intervals) = read_sampled(&mut conn, cfg, &mut got, progress);
    got.log_end(read.is_ok());
    if let Err(e) = read {
        return Err(fail(&got, e));
    }
    let end_at = Instant::now();
    let span = end_at - hello_at;
    let window_us = clock.map(|c| server_window(c, hello_unix_us, span));
    let (server, end) = match checked_end(&got.rx, cfg.spec.chunk, span, window_us) {
        Ok(v) => v,
        Err(e) => return Err(fail(&got, e)),
    };
    let Some((first_at, first_us, cpu, sched)) = got.first else {
        return Err(fail(&got, anyhow!("the server sent no data")));
    };
    let sched = sched.zip(SchedStat::thread()).map(|(a, b)| b.since(a));
    let sock = conn.socket();
    Ok(ReverseResult {
        measured: crate::Measured {
            bytes: got.rx.hashed(),
            begin_unix_us: first_us,
            end_unix_us: first_us + end_at.duration_since(first_at).as_micros() as u64,
            elapsed: end_at.duration_since(first_at),
            digest: got.rx.digest(),
            timed: timed(cfg, accepted.length, &got),
            intervals,
        },
        asked: accepted.length,
        name: name.to_owned(),
        one_buffer: asks_one_buffer(cfg, name),
        chunk: cfg.spec.chunk,
        io: T::IO,
        peer,
        end,
        reads: got.rx.reads(),
        cpu: CpuTime::thread().since(cpu),
        sched,
        rcvbuf: sock.recv_buffer_size().map_or(0, |n| n as u32),
        tcp: tsperf_sys::tcpinfo::TcpInfo::of(&*sock)
            .map_or_else(Default::default, |i| i.receiver()),
        server,
        clock,
        interrupted: got.stop_sent,
        log: cfg.spec.log,
        log_lines: got.rx.log_ref().lines(),
        log_time: got.rx.log_ref().time(),
        read_size: got.rx.read_size(),
        wake_mark: got.wake_mark,
    })
}

/// A timed stream's time, its passes of `pass` bytes, its omitted start and a stop.
fn timed(cfg: &StreamConfig, pass: u64, got: &Received) -> Option<crate::Timed> {
    cfg.spec.time.map(|time| crate::Timed {
        time,
        omit: cfg.spec.omit,
        file_bytes: pass,
        passes: got.rx.hashed() as f64 / pass.max(1) as f64,
        omitted: got.omit_mark.filter(|_| !cfg.spec.omit.is_zero()),
        interrupted: got.stop_sent,
    })
}

/// The stream's end, `total` bytes having come in `span` from the hello: the server's report
/// and trailer, the report checked against the stream; why not, with how far it got, or the
/// reason the server gave in its report's place.
fn checked_end(
    rx: &read::Rx,
    chunk: u32,
    span: Duration,
    window_us: Option<(u64, u64)>,
) -> Result<(Sent, tsperf_proto::end::End)> {
    let (no_tail, total) = (Tail::default(), rx.bytes());
    let (server, end) = match ending(rx.tail().unwrap_or(&no_tail)) {
        Ok(v) => v,
        Err(e) if e.is::<Stopped>() => return Err(e),
        Err(e) => {
            return Err(e.context(format!(
                "the stream ended after {total} bytes without the server's report and end \
                 trailer (the server stopped, or its connection was cut)"
            )));
        }
    };
    let seen = reverse::Seen {
        end,
        chunk,
        span,
        window_us,
    };
    agrees(&server, &seen)?;
    Ok((server, end))
}

/// The hello (at `hello_unix_us` on this clock) and the end (`span` later) on the server's
/// clock as `clock` puts it, widened by its error and a millisecond.
fn server_window(clock: Clock, hello_unix_us: u64, span: Duration) -> (u64, u64) {
    let err_us = i128::from(clock.offset.err_ns / 1000) + 1000;
    let offset_us = i128::from(clock.offset.offset_ns / 1000);
    let at = |client_us: u64, widen: i128| {
        u64::try_from((i128::from(client_us) + offset_us + widen).max(0)).unwrap_or(u64::MAX)
    };
    let end_us = hello_unix_us.saturating_add(span.as_micros() as u64);
    (at(hello_unix_us, -err_us), at(end_us, err_us))
}

/// The hello, its answer and the clock queries.
fn open<T: Transport>(
    conn: &mut T,
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
) -> Result<(SocketAddr, Accepted, Option<Clock>)> {
    let peer = conn.peer().context("cannot read the server's address")?;
    conn.set_timeout(cfg.spec.timeout)?;
    let duration_ms = cfg.spec.time.map_or(0, |t| {
        u32::try_from((t + cfg.spec.omit).as_millis().max(1)).unwrap_or(u32::MAX)
    });
    let hello = Hello {
        reverse: true,
        one_buffer: asks_one_buffer(cfg, name),
        clock_queries: cfg.spec.clock_queries,
        duration_ms,
        session: cfg.session(),
        two_way: cfg.two_way.is_some(),
        // The server sends: the congestion control asked for is its socket's.
        congestion: cfg
            .spec
            .congestion
            .as_deref()
            .and_then(tsperf_proto::tcp::Congestion::new),
        ..Hello::stream(bytes, cfg.spec.chunk, name)
    };
    let mut conv = StreamConversation::new(hello, cfg.spec.timeout);
    let accepted = handshake(conn, &mut conv, cfg.auth.as_deref())
        .with_context(|| format!("the server at {peer} did not accept the reverse stream"))?;
    if accepted.length == 0 {
        bail!(
            "the server at {peer} would send a pass of 0 bytes: a pass is at least 1 byte (an \
             empty file cannot be measured)"
        );
    }
    if name.is_empty() && accepted.length != bytes {
        bail!(
            "the server at {peer} would send {} bytes a pass where {bytes} were asked for",
            accepted.length
        );
    }
    let clock = ask_clock(conn, &mut conv)
        .with_context(|| format!("the server at {peer} did not answer its clock queries"))?;
    Ok((peer, accepted, clock))
}

/// Checks the server's Sent report against this stream ([`reverse::check`]): a figure it
/// contradicts is refused, named.
fn agrees(s: &Sent, seen: &reverse::Seen) -> Result<()> {
    use tsperf_results::units::duration;
    let Err(c) = reverse::check(s, seen) else {
        return Ok(());
    };
    let why = match c {
        Contradiction::Time { what, took, span } => format!(
            "{what} took {}, longer than the whole stream took here ({})",
            duration(took),
            duration(span)
        ),
        Contradiction::Chunk { sent, asked } => {
            format!("a write size of {sent} bytes where {asked} were asked for")
        }
        Contradiction::Bytes { sent, trailer } => {
            format!("{sent} bytes sent, where its end trailer says {trailer}")
        }
        Contradiction::Writes {
            writes,
            partial,
            bytes,
            chunk,
        } => format!(
            "{writes} writes ({partial} of them partial) of at most {chunk} bytes moving \
             {bytes} bytes (a write moves at least 1 byte and at most a chunk)"
        ),
        Contradiction::Beyond { what, value, most } => {
            format!("{what} {value}, where a Linux sender has at most {most}")
        }
        Contradiction::FirstWrite { at_us, window_us } => format!(
            "a first write at {at_us} µs since the epoch on its clock, outside this stream \
             ({} to {}, from the clock queries)",
            window_us.0, window_us.1
        ),
    };
    bail!("the server's report contradicts this stream: {why}")
}

/// The server ended the stream early and said why, in its report's place.
#[derive(Debug, thiserror::Error)]
#[error("the server ended the stream after {bytes} bytes: {why}")]
struct Stopped {
    bytes: u64,
    why: String,
}

/// The end of the stream, held back: the server's Sent frame and its end trailer
/// ([`reverse::ending`]).
fn ending(tail: &Tail<REVERSE_TAIL>) -> Result<(Sent, tsperf_proto::end::End)> {
    reverse::ending(tail).map_err(|e| match e {
        Ending::Short { held } => anyhow!(
            "the stream ended after {held} bytes, before the server's report and end trailer \
             ({REVERSE_TAIL} bytes)"
        ),
        // The server could not go on, and said why in its report's place.
        Ending::Stopped { bytes, why } => Stopped {
            bytes,
            why: Peer(&why).to_string(),
        }
        .into(),
        Ending::NotReport(e) => anyhow!("the stream's end is not the server's report: {e}"),
    })
}
