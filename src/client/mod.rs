//! tsclient's stream mode: send a file in chunks of exactly `chunk` bytes and get the server's
//! verdict.
//!
//! The clock starts when the server has accepted the hello and stops when the server's report
//! arrives, after the server has read and checksummed every byte. A transfer whose byte count or
//! digest disagrees with the server's is returned with `verified() == false`; the caller treats
//! that as a failure.
//!
//! The same transfer code runs over a blocking `TcpStream` or a mio non-blocking socket
//! ([`nonblocking`]); the two differ only in how they wait. Three [`Strategy`]s hand the chunks
//! to the kernel: one `write` per chunk (the seed's way, and the default), `writev` of `--batch`
//! chunks per call, or `sendfile` of one chunk per call straight from the page cache.

pub mod blocking;
pub mod intervals;
pub mod nonblocking;
mod send;

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::auth::Key;
use crate::net;
use crate::progress::Progress;
use crate::protocol::clock::{Offset, TimeRequest, encode_query};
use crate::protocol::{Frame, Hello, LogMode, Report, ServerIo, StdoutKind, encode_hello};
use crate::source::Source;
use crate::text::Peer;
use crate::timing::{CpuTime, unix_ns_now, unix_us_now};
use blocking::Blocking;
use nonblocking::MioConn;
use send::{Stop, send_data};

/// The client's I/O model: blocking sockets, or mio non-blocking ones (`--nonblocking`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientIo {
    #[default]
    Blocking,
    Nonblocking,
}

impl ClientIo {
    /// The JSON's `io` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientIo::Blocking => "blocking",
            ClientIo::Nonblocking => "nonblocking",
        }
    }
}

impl std::fmt::Display for ClientIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the client hands chunks to the kernel (`--io`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// One write() per chunk, as the seed did.
    #[default]
    Write,
    /// --batch chunks per writev(), each chunk its own buffer of --chunk bytes.
    Writev,
    /// sendfile() of --chunk bytes per call, from the page cache to the socket (zero-copy);
    /// the checksum is computed on a thread of its own.
    Sendfile,
}

impl Strategy {
    /// The JSON's `strategy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Write => "write",
            Strategy::Writev => "writev",
            Strategy::Sendfile => "sendfile",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Chunks per `writev` unless `--batch` says otherwise.
pub const DEFAULT_BATCH: u32 = 64;
/// The most chunks one `writev` takes (Linux's `IOV_MAX`).
pub const MAX_BATCH: u32 = 1024;

/// What to send, where, and how.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    pub host: String,
    pub port: u16,
    pub chunk: u32,
    pub file: PathBuf,
    /// Deadline of each phase (connecting, the hello's answer, the report after the last byte),
    /// and the longest the server may take no data.
    pub timeout: Duration,
    /// Use a mio non-blocking socket instead of a blocking one.
    pub nonblocking: bool,
    /// Ask the kernel for this send buffer size (SO_SNDBUF).
    pub sndbuf: Option<u32>,
    /// The pre-shared key, for a server that asks for one.
    pub auth: Option<std::sync::Arc<Key>>,
    /// How chunks reach the kernel.
    pub strategy: Strategy,
    /// Chunks per `writev` (with [`Strategy::Writev`]; 1 to [`MAX_BATCH`]).
    pub batch: u32,
    /// The server log sink to ask for; `None`: the server's own.
    pub server_log: Option<LogMode>,
    /// Clock queries before the data (0 to [`crate::protocol::MAX_CLOCK_QUERIES`]).
    pub clock_queries: u8,
    /// Take a sample this often (`--interval`).
    pub interval: Option<Duration>,
    /// Print each sample as it is taken (a human run).
    pub live_intervals: bool,
}

/// Clock queries a stream transfer makes before its data unless told otherwise.
pub const DEFAULT_CLOCK_QUERIES: u8 = 8;

/// The server's clock against ours, from a transfer's clock queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub queries: u8,
    /// The estimate from the fastest query.
    pub offset: Offset,
    /// That query's round trip, in ns.
    pub rtt_ns: u64,
}

/// What the server's Accept said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    pub read_size: u32,
    pub server_io: ServerIo,
    pub log: LogMode,
    pub stdout: StdoutKind,
}

/// Counts of what the client's writes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Calls (write, writev or sendfile) that moved at least one byte.
    pub writes: u64,
    /// Calls that took fewer bytes than offered.
    pub partial_writes: u64,
    /// Writes that found the socket full (non-blocking only).
    pub would_block: u64,
    /// Wake-ups from poll (non-blocking only).
    pub polls: u64,
}

/// Everything measured about one transfer, by both ends.
#[derive(Debug, Clone)]
pub struct StreamResult {
    pub name: String,
    pub bytes: u64,
    pub chunk: u32,
    pub io: ClientIo,
    pub strategy: Strategy,
    /// Chunks per call with `writev`; `None` for the other strategies.
    pub batch: Option<u32>,
    pub peer: SocketAddr,
    pub begin_unix_us: u64,
    pub end_unix_us: u64,
    pub elapsed: Duration,
    pub digest: u64,
    pub writes: WriteStats,
    pub cpu: CpuTime,
    pub sndbuf: u32,
    pub read_size: u32,
    /// What the server's stdout is, as it said in its Accept.
    pub server_stdout: StdoutKind,
    /// The clock offset, when clock queries were made.
    pub clock: Option<Clock>,
    pub server: Report,
    /// The client socket's `TCP_INFO` once the report arrived.
    pub tcp: crate::tcpinfo::SenderTcp,
    /// Time the sending thread waited for a CPU during the transfer (Linux).
    pub run_queue: Option<Duration>,
    /// Samples in time, with `--interval`.
    pub intervals: Vec<intervals::Interval>,
    /// The file's size or modification time changed while it was sent (checked only when the
    /// digests disagree, to say why).
    pub source_changed: bool,
}

impl StreamResult {
    /// True when the server counted every byte and its digest equals ours.
    pub fn verified(&self) -> bool {
        self.server.bytes == self.bytes && self.server.digest == self.digest
    }

    /// What limited the transfer.
    pub fn verdict(&self) -> crate::verdict::Verdict {
        crate::verdict::judge(
            &self.tcp,
            self.cpu.user + self.cpu.sys,
            self.run_queue,
            self.elapsed,
        )
    }
}

/// A connected socket the transfer runs over. `Read` and `Write` have blocking meaning: the
/// non-blocking transport waits in poll inside them and counts what it waited for. Both give up
/// on a write once the peer has taken nothing for the timeout, and on a read at the deadline
/// set with [`Transport::read_by`] (or after the timeout without one).
pub trait Transport: Read + Write + Sized {
    /// The JSON's `io` value.
    const IO: ClientIo;
    /// Connects to `host:port` within `timeout` (all its addresses together).
    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self>;
    fn peer(&self) -> io::Result<SocketAddr>;
    fn socket(&self) -> socket2::SockRef<'_>;
    /// The longest the peer may take no data, or send nothing, before a call fails.
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    /// Makes reads fail with `TimedOut` at `deadline` (`None`: after the timeout, as before).
    fn read_by(&mut self, deadline: Option<Instant>);
    /// Writes that found the socket full, and wake-ups from poll.
    fn waits(&self) -> (u64, u64);
    /// Sends up to `len` bytes of `file` from `offset` with `sendfile`, waiting like `write`.
    fn sendfile(&mut self, file: &File, offset: u64, len: usize) -> io::Result<usize>;
}

/// Reads one frame from `conn`, all of it by `within` from now. `what` names it for errors;
/// `late` is the error when the deadline passes.
pub fn read_frame_within<T: Transport>(
    conn: &mut T,
    what: &str,
    within: Duration,
    late: impl FnOnce() -> String,
) -> Result<Frame> {
    conn.read_by(Some(Instant::now() + within));
    let frame = net::read_frame(conn, what);
    conn.read_by(None);
    match frame {
        Err(e) if e.downcast_ref::<net::TimedOut>().is_some() => Err(anyhow::anyhow!(late())),
        other => other,
    }
}

/// Runs one stream transfer over the transport the configuration asks for, showing `progress`.
pub fn run_stream(cfg: &StreamConfig, progress: &mut Progress) -> Result<StreamResult> {
    let batch = match cfg.strategy {
        Strategy::Writev => cfg.batch.clamp(1, MAX_BATCH),
        Strategy::Write | Strategy::Sendfile => 1,
    };
    let source = Source::open(&cfg.file, cfg.chunk, batch)?;
    // The size is known before anything can fail on the network: a failure's report has it.
    progress.start(source.len());
    let result = if cfg.nonblocking {
        let conn = MioConn::connect(&cfg.host, cfg.port, cfg.timeout)?;
        transfer(conn, source, cfg, progress)
    } else {
        let conn = Blocking::connect(&cfg.host, cfg.port, cfg.timeout)?;
        transfer(conn, source, cfg, progress)
    };
    progress.clear();
    result
}

fn transfer<T: Transport>(
    mut conn: T,
    mut source: Source,
    cfg: &StreamConfig,
    progress: &mut Progress,
) -> Result<StreamResult> {
    let peer = conn.peer().context("cannot read the server's address")?;
    conn.set_timeout(cfg.timeout)?;
    if let Some(n) = cfg.sndbuf {
        conn.socket()
            .set_send_buffer_size(n as usize)
            .with_context(|| format!("cannot set the send buffer to {n} bytes"))?;
    }
    let hello = Hello {
        log: cfg.server_log,
        clock_queries: cfg.clock_queries,
        ..Hello::stream(source.len(), cfg.chunk, source.name())
    };
    let accepted = handshake(&mut conn, &hello, cfg.auth.as_deref(), cfg.timeout)
        .with_context(|| format!("the server at {peer} did not accept the transfer"))?;
    let clock = ask_clock(&mut conn, cfg.clock_queries, cfg.timeout)
        .with_context(|| format!("the server at {peer} did not answer its clock queries"))?;

    progress.restart();
    let cpu_start = CpuTime::process();
    let queue_start = crate::timing::run_queue_wait();
    let begin = Instant::now();
    let begin_unix_us = unix_us_now();
    let mut writes = WriteStats::default();
    let mut sent = 0u64;
    let every = cfg.interval;
    let (sent_data, samples) = match every {
        None => (
            send_data(
                &mut conn,
                &mut source,
                cfg,
                progress,
                &mut writes,
                &mut sent,
            ),
            Vec::new(),
        ),
        Some(every) => {
            // The sampler reads the socket through its own descriptor number while this
            // thread writes; the socket outlives the scope the sampler runs in.
            use std::os::fd::{AsRawFd, BorrowedFd};
            let fd = conn.socket().as_raw_fd();
            // SAFETY: `conn` owns the socket and is not dropped before `sample_while` returns
            // (it joins the sampling thread first).
            let sock = unsafe { BorrowedFd::borrow_raw(fd) };
            let counter = progress.clone();
            let shown = progress.clone();
            let print = move |i: &intervals::Interval| shown.println(&intervals::line(i));
            let live: Option<&(dyn Fn(&intervals::Interval) + Sync)> =
                cfg.live_intervals.then_some(&print);
            intervals::sample_while(every, sock, &|| counter.sent(), live, || {
                send_data(
                    &mut conn,
                    &mut source,
                    cfg,
                    progress,
                    &mut writes,
                    &mut sent,
                )
            })
        }
    };
    let digest = match sent_data {
        Ok(digest) => digest,
        Err(stop) => {
            // What a failure's report says was sent.
            progress.update(sent);
            return Err(match stop {
                Stop::File(e) => e,
                Stop::Shrank(at) => source.shrank(at),
                Stop::Net(e) => lost(&mut conn, e, sent, source.len(), cfg.timeout),
            });
        }
    };
    progress.update(sent);
    if let Err(e) = conn.write_all(&digest.to_be_bytes()) {
        return Err(lost(&mut conn, e, sent, source.len(), cfg.timeout));
    }
    let server = await_report(&mut conn, cfg.timeout)?;
    let elapsed = begin.elapsed();
    let end_unix_us = unix_us_now();
    let cpu = CpuTime::process().since(cpu_start);
    let run_queue = queue_start
        .zip(crate::timing::run_queue_wait())
        .map(|(a, b)| b.saturating_sub(a));
    let tcp =
        crate::tcpinfo::TcpInfo::of(&*conn.socket()).map_or_else(Default::default, |i| i.sender());
    (writes.would_block, writes.polls) = conn.waits();
    let source_changed = server.digest != digest && source.changed();

    Ok(StreamResult {
        name: source.name().to_owned(),
        bytes: source.len(),
        chunk: cfg.chunk,
        io: T::IO,
        strategy: cfg.strategy,
        batch: (cfg.strategy == Strategy::Writev).then_some(cfg.batch),
        peer,
        begin_unix_us,
        end_unix_us,
        elapsed,
        digest,
        writes,
        cpu,
        sndbuf: conn.socket().send_buffer_size().map_or(0, |n| n as u32),
        read_size: accepted.read_size,
        server_stdout: accepted.stdout,
        clock,
        server,
        tcp,
        run_queue,
        intervals: samples,
        source_changed,
    })
}

/// Waits for the server's report after the last byte and the trailer.
fn await_report<T: Transport>(conn: &mut T, timeout: Duration) -> Result<Report> {
    // Nagle stays on while sending, as in the seed; once the last chunk is written, push the
    // tail out now instead of letting it wait for a delayed ACK (up to 40 ms on Linux).
    let _ = conn.socket().set_tcp_nodelay(true);
    let late = || {
        format!(
            "the server sent no report within {} s of the last byte",
            timeout.as_secs_f64()
        )
    };
    match read_frame_within(conn, "report", timeout, late)? {
        Frame::Report(r) => Ok(r),
        Frame::Abort(reason) => bail!("the server aborted the transfer: {}", Peer(&reason)),
        other => bail!("the server sent {other:?} where its report was expected"),
    }
}

/// Makes `queries` clock queries, one at a time, each answer due within `timeout`, and returns
/// the estimate of the fastest (`None` for no queries).
fn ask_clock<T: Transport>(conn: &mut T, queries: u8, timeout: Duration) -> Result<Option<Clock>> {
    let mut best: Option<Clock> = None;
    for seq in 0..queries {
        let start = Instant::now();
        let t1 = unix_ns_now();
        let query = encode_query(&TimeRequest {
            seq: seq.into(),
            client_send_unix_ns: t1,
        });
        conn.write_all(&query)
            .with_context(|| format!("cannot send clock query {seq}"))?;
        let late = || {
            format!(
                "no answer to clock query {seq} within {} s",
                timeout.as_secs_f64()
            )
        };
        let answer = read_frame_within(conn, "answer to a clock query", timeout, late)?;
        let t4 = unix_ns_now();
        let rtt_ns = start.elapsed().as_nanos() as u64;
        let t = match answer {
            Frame::Time(t) if t.seq == u64::from(seq) => t,
            Frame::Abort(reason) => bail!("the server aborted the transfer: {}", Peer(&reason)),
            other => {
                bail!("the server sent {other:?} where the answer to clock query {seq} belonged")
            }
        };
        if best.is_none_or(|b| rtt_ns < b.rtt_ns) {
            best = Some(Clock {
                queries,
                offset: Offset::of(t1, t.server_recv_unix_ns, t.server_send_unix_ns, t4),
                rtt_ns,
            });
        }
    }
    Ok(best)
}

/// Sends the hello, answers the server's challenge if it sends one (with `key`), and returns
/// the server's accept; a refusal is an error carrying the server's reason. Each answer is due
/// within `timeout`.
pub fn handshake<T: Transport>(
    conn: &mut T,
    hello: &Hello,
    key: Option<&Key>,
    timeout: Duration,
) -> Result<Accepted> {
    let mut msg = Vec::with_capacity(crate::protocol::MAX_HELLO);
    encode_hello(hello, &mut msg);
    conn.write_all(&msg).context("cannot send the hello")?;
    let secs = timeout.as_secs_f64();
    let late = || format!("no answer to the hello within {secs} s");
    let mut answer = read_frame_within(conn, "answer to the hello", timeout, late)?;
    if let Frame::Challenge(challenge) = answer {
        let Some(key) = key else {
            bail!("the server requires authentication: pass --auth-key FILE with its key");
        };
        conn.write_all(&key.answer(&challenge))
            .context("cannot send the authentication answer")?;
        let late = || format!("no answer to the authentication within {secs} s");
        answer = read_frame_within(conn, "answer to the authentication", timeout, late)?;
    }
    match answer {
        Frame::Accept {
            read_size,
            server_io,
            log,
            stdout,
        } => Ok(Accepted {
            read_size,
            server_io,
            log,
            stdout,
        }),
        // An older or newer server names its own version only.
        Frame::Refuse(reason) if reason.contains("unsupported protocol version") => bail!(
            "refused: {} (this tsclient speaks protocol version {})",
            Peer(&reason),
            crate::protocol::VERSION
        ),
        Frame::Refuse(reason) | Frame::Abort(reason) => bail!("refused: {}", Peer(&reason)),
        Frame::Report(_) | Frame::Challenge(_) | Frame::Time(_) => {
            bail!("the server broke the protocol: {answer:?} instead of an accept")
        }
    }
}

/// Bytes written to the socket that the peer has not acknowledged yet (Linux `TIOCOUTQ`).
fn unacknowledged<T: Transport>(conn: &T) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int into `n`, which we own.
    let rc = unsafe { libc::ioctl(conn.socket().as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    (rc == 0 && n >= 0).then_some(n as u64)
}

/// Explains a failed write. The server may have said why it stopped (an abort frame); if so,
/// that reason is the error. Otherwise the error says how far the transfer got.
fn lost<T: Transport>(
    conn: &mut T,
    e: io::Error,
    sent: u64,
    total: u64,
    timeout: Duration,
) -> anyhow::Error {
    if net::is_timeout(&e) {
        return anyhow::anyhow!(
            "the server took no data for {} s after {sent} of {total} bytes",
            timeout.as_secs_f64()
        );
    }
    let reason = read_frame_within(conn, "reason", Duration::from_millis(500), String::new);
    if let Ok(Frame::Abort(reason) | Frame::Refuse(reason)) = reason {
        return anyhow::anyhow!(
            "the server aborted the transfer after {sent} of {total} bytes: {}",
            Peer(&reason)
        );
    }
    let acked = unacknowledged(conn).map_or(String::new(), |q| {
        format!(
            " (the server's TCP acknowledged {})",
            sent.saturating_sub(q)
        )
    });
    anyhow::Error::new(e).context(format!(
        "connection lost after sending {sent} of {total} bytes{acked}"
    ))
}
