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

mod alarm;
pub mod blocking;
#[cfg(test)]
mod evidence_tests;
pub mod interrupt;
pub mod intervals;
pub mod ladder;
pub mod latency;
pub mod live;
pub mod nonblocking;
pub mod outcome;
pub mod output;
pub mod parallel;
pub mod progress;
pub mod reverse;
pub mod run;
mod secure;
mod send;
mod session;
pub mod spec;
mod transfer;
#[cfg(test)]
mod transport_tests;

pub use outcome::StreamOutcome;
pub use session::{Refused, describe_bytes, handshake, read_frame_within};

use std::io::{self, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::progress::Progress;
use blocking::Blocking;
use nonblocking::MioConn;
use secure::Secure;
use tsperf_sys::auth::Key;
use tsperf_sys::source::Source;

pub use tsperf_results::strategy::{ClientIo, Strategy};

/// The slowest a sized reverse stream may arrive unless `--min-rate` says otherwise: 128 KiB a
/// second (about 1 Mbit/s), below any LAN's and most WAN links' rate; a server trickling slower
/// than that is cut off, with what it sent, rather than held for ever (issue 51).
pub const DEFAULT_MIN_RATE: u64 = 128 << 10;

/// Chunks per `writev` unless `--batch` says otherwise.
pub const DEFAULT_BATCH: u32 = 64;
pub use tsperf_stream::send::MAX_BATCH;

/// A stream as it runs: what was asked for ([`spec::StreamSpec`], the flags lowered) and what
/// running it takes beyond that: the file or generated period made for it, the key, the live
/// printer, its stripe of a session, a two-way run's id.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// What was asked for.
    pub spec: spec::StreamSpec,
    /// The file to send.
    pub file: PathBuf,
    /// The name announced for it instead of its basename: `generated` for the generated stream
    /// (held in memory, `held`, or for sendfile an in-memory file,
    /// [`tsperf_sys::testdata::stream_file`]).
    pub name: Option<String>,
    /// The generated stream: `held` (or `file`) holds one period of it, sent again and again to
    /// this many bytes ([`tsperf_sys::source::Source::cycled`]), so no length is ever held in
    /// memory.
    pub generated: Option<u64>,
    /// The generated stream's period held in memory, sent instead of `file` (which then only
    /// names it): what `--io write` and `writev` send from ([`tsperf_sys::source::Held`]).
    pub held: Option<std::sync::Arc<tsperf_sys::source::Held>>,
    /// The pre-shared key, for a server that asks for one.
    pub auth: Option<std::sync::Arc<Key>>,
    /// Print each sample as it is taken (a human run), labelled so.
    pub live: Option<live::Live>,
    /// One stream of a `--parallel` session: the stripe of the file it sends (offset, length;
    /// in reverse, its share of the bytes asked for) and its place in the session.
    pub stripe: Option<(u64, u64, tsperf_proto::Session)>,
    /// Half of a two-way run (`--bidir`): the session id both directions' streams carry, so a
    /// server that serves one run (`tsserver --once`) knows them all.
    pub two_way: Option<[u8; 16]>,
}

impl StreamConfig {
    /// The session this stream's hello names: its stripe's place, or with no stripe a stream
    /// of its own (under the two-way run's id when it is half of one).
    pub fn session(&self) -> tsperf_proto::Session {
        match (self.stripe, self.two_way) {
            (Some((.., s)), _) => s,
            (None, Some(id)) => tsperf_proto::Session {
                id,
                index: 0,
                count: 1,
            },
            (None, None) => tsperf_proto::Session::ALONE,
        }
    }
}

/// What a stream measured, whichever end sent it: the same names for the same things in both
/// directions (the rest of each direction's outcome is its two ends' own figures).
#[derive(Debug, Clone)]
pub struct Measured {
    /// Every byte it moved (a timed run's every pass).
    pub bytes: u64,
    /// From the first byte to the end: the report's arrival (sent), the stream's end
    /// (received).
    pub elapsed: Duration,
    /// The first byte, wall clock, µs since the epoch.
    pub begin_unix_us: u64,
    /// The end, wall clock.
    pub end_unix_us: u64,
    /// This client's xxh3-64 of the bytes.
    pub digest: u64,
    /// A timed run's time, passes and omitted start.
    pub timed: Option<Timed>,
    /// Samples in time, with `--interval`.
    pub intervals: Vec<intervals::Interval>,
}

impl Measured {
    /// The bytes and the time the rate is of: everything, or a timed run's without its
    /// omitted start.
    pub fn rated(&self) -> (u64, Duration) {
        match self.timed.and_then(|t| t.omitted) {
            Some((bytes, time)) => (
                self.bytes.saturating_sub(bytes),
                self.elapsed.saturating_sub(time),
            ),
            None => (self.bytes, self.elapsed),
        }
    }
}

/// What a timed run was, beside its figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// The time asked for (`--time`), after the omitted start.
    pub time: Duration,
    /// The start left out of the figures (`--omit`).
    pub omit: Duration,
    /// The file's size: one pass.
    pub file_bytes: u64,
    /// Passes of the file sent, the last one's part counted as a fraction.
    pub passes: f64,
    /// The figures left out: the bytes the server's TCP had acknowledged when the omitted start
    /// ended (or, where the kernel does not say, the bytes sent by then) and its length.
    pub omitted: Option<(u64, Duration)>,
    /// Ended by Ctrl-C or SIGTERM before its time: the figures are those up to the stop.
    pub interrupted: bool,
}

/// Clock queries a stream transfer makes before its data unless told otherwise.
pub const DEFAULT_CLOCK_QUERIES: u8 = 8;

pub use tsperf_proto::client::{Accepted, Clock};

/// A connected socket the transfer runs over. `Read` and `Write` have blocking meaning: the
/// non-blocking transport waits in poll inside them and counts what it waited for. Both give up
/// on a write once the peer has taken nothing for the timeout, and on a read at the deadline
/// set with [`Transport::read_by`] (or after the timeout without one).
pub trait Transport: Read + tsperf_stream::send::Sink + Sized {
    /// The JSON's `io` value.
    const IO: ClientIo;
    /// Connects to `host:port` within `timeout` (all its addresses together).
    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self>;
    /// The server's address.
    fn peer(&self) -> io::Result<SocketAddr>;
    /// The socket, for its options and `TCP_INFO`.
    fn socket(&self) -> socket2::SockRef<'_>;
    /// The longest the peer may take no data, or send nothing, before a call fails.
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    /// Makes reads fail with `TimedOut` at `deadline` (`None`: after the timeout, as before).
    fn read_by(&mut self, deadline: Option<Instant>);
    /// Writes that found the socket full, and wake-ups from poll.
    fn waits(&self) -> (u64, u64);
    /// Sends and receives through `tls` from here on (a stream over TLS, after its clock
    /// queries); only a TLS-carrying transport (the crate's `Secure`) can.
    fn start_tls(&mut self, tls: tsperf_stream::tls::Tls) -> Result<()> {
        let _ = tls;
        anyhow::bail!("this transport carries no TLS")
    }
    /// Ends this end's direction: a stream over TLS its close_notify first.
    fn close_write(&mut self) -> io::Result<()> {
        self.socket().shutdown(std::net::Shutdown::Write)
    }
    /// The stream's TLS, once begun.
    fn tls(&self) -> Option<&tsperf_stream::tls::Tls> {
        None
    }
}

/// Says on stderr that a connect to `addr` has had no answer for
/// [`tsperf_sys::net::CONNECT_NOTICE`] (a host down, or SYNs dropped), and how long it goes on.
fn say_unanswered(addr: &std::net::SocketAddr, left: Duration) {
    eprintln!(
        "tsclient: connecting to {addr}: no answer after {} s (trying {:.0} s more, --timeout; is \
         the host up and the port open?)",
        tsperf_sys::net::CONNECT_NOTICE.as_secs(),
        left.as_secs_f64()
    );
}

/// A stream transfer that did not finish: why, and what it had measured.
#[derive(Debug)]
pub struct StreamFailure {
    /// The file's name, as sent in the hello.
    pub name: String,
    /// The file's size, once it was opened.
    pub bytes: Option<u64>,
    /// Bytes of the file handed to the socket.
    pub sent: u64,
    /// Of those, the bytes the server's TCP acknowledged (`TCP_INFO`), where known.
    pub acked: Option<u64>,
    /// From the first byte handed over to the stop; `None` if it stopped before the data.
    pub elapsed: Option<Duration>,
    /// Samples in time so far, with `--interval`.
    pub intervals: Vec<intervals::Interval>,
    /// Stopped by Ctrl-C or SIGTERM ([`interrupt`]).
    pub interrupted: bool,
    /// Why it failed, with its causes.
    pub error: anyhow::Error,
}

impl StreamFailure {
    /// A failure before the file could be sent: nothing measured.
    fn before(cfg: &StreamConfig, bytes: Option<u64>, error: anyhow::Error) -> StreamFailure {
        StreamFailure {
            name: cfg.name.clone().unwrap_or_else(|| {
                cfg.file
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned())
            }),
            bytes,
            sent: 0,
            acked: None,
            elapsed: None,
            intervals: Vec::new(),
            interrupted: interrupt::requested(),
            error,
        }
    }
}

impl std::fmt::Display for StreamFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for StreamFailure {}

/// Runs one stream transfer over the transport the configuration asks for, showing `progress`.
pub fn run_stream(
    cfg: &StreamConfig,
    progress: &mut Progress,
) -> Result<StreamOutcome, StreamFailure> {
    // Blocks hold whole batches of writev's chunks; one chunk is a batch of the others.
    let batch = if cfg.spec.strategy() == Strategy::Writev {
        cfg.spec.batch.clamp(1, MAX_BATCH)
    } else {
        1
    };
    // Put out of the page cache before it is opened (a mapping of a cached file fills its first
    // pages at once): the stripe's range, so streams of one file do not evict each other's.
    let cold = cfg
        .spec
        .cold
        .then(|| {
            let (offset, len) = match cfg.stripe {
                Some((offset, len, _)) => (offset, len),
                None => (0, std::fs::metadata(&cfg.file).map_or(0, |m| m.len())),
            };
            tsperf_sys::cold::evict(&cfg.file, offset, len)
        })
        .transpose()
        .map_err(|e| StreamFailure::before(cfg, None, e))?;
    let source = match &cfg.held {
        Some(h) => Source::held(h.clone(), &cfg.file, cfg.spec.chunk, batch),
        None => Source::open(&cfg.file, cfg.spec.chunk, batch),
    }
    .map(|s| match &cfg.name {
        Some(name) => s.named(name.clone()),
        None => s,
    })
    .map(|s| match cfg.generated {
        Some(len) => s.cycled(len),
        None => s,
    })
    .and_then(|s| match cfg.stripe {
        Some((offset, len, _)) => s.stripe(offset, len),
        None => Ok(s),
    })
    .map_err(|e| StreamFailure::before(cfg, None, e))?;
    if cfg.spec.time.is_some() && cfg.spec.strategy() == Strategy::Sendfile {
        let e = anyhow::anyhow!(
            "--io sendfile sends the file once: a timed run (--time) takes --io write or writev"
        );
        return Err(StreamFailure::before(cfg, Some(source.len()), e));
    }
    // The size is known before anything can fail on the network: a failure's report has it.
    match cfg.spec.time {
        Some(time) => progress.start_timed(cfg.spec.omit + time),
        None => progress.start(source.len()),
    }
    let size = Some(source.len());
    let (host, port, timeout) = (&cfg.spec.host, cfg.spec.port, cfg.spec.timeout);
    let failed = |e| StreamFailure::before(cfg, size, e);
    // A stream in the clear never goes through the TLS layer.
    let result = match (cfg.spec.nonblocking, cfg.spec.tls.is_some()) {
        (true, false) => MioConn::connect(host, port, timeout)
            .map_err(failed)
            .and_then(|conn| transfer::transfer(conn, source, cfg, progress)),
        (false, false) => Blocking::connect(host, port, timeout)
            .map_err(failed)
            .and_then(|conn| transfer::transfer(conn, source, cfg, progress)),
        (true, true) => Secure::<MioConn>::connect(host, port, timeout)
            .map_err(failed)
            .and_then(|conn| transfer::transfer(conn, source, cfg, progress)),
        (false, true) => Secure::<Blocking>::connect(host, port, timeout)
            .map_err(failed)
            .and_then(|conn| transfer::transfer(conn, source, cfg, progress)),
    };
    progress.clear();
    result.map(|mut o| {
        if let outcome::Detail::Sent(d) = &mut o.detail {
            d.cold = cold;
        }
        o
    })
}
