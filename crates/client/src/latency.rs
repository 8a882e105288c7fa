//! tsclient's latency mode: ask the server for its clock, many times, and explain the result.
//!
//! Each request is timed with the monotonic clock from just before it is encoded to the arrival
//! of the whole answer (with `--reconnect`, from before the connect). Its wall-clock stamps give
//! an NTP-style clock offset: from the request's send time t1, the server's receive and send
//! times t2 and t3, and the answer's arrival t4, the offset is ((t2 − t1) + (t3 − t4)) / 2,
//! good to ± half the round trip. The fastest round trip gives the tightest bound.
//!
//! Each answer is due within `--timeout` of its request (a deadline, however the bytes trickle
//! in). A run that stops early, interrupted or failed, still returns what it measured.
//!
//! **Under load** (`--under-load FILE`, after crusader and flent's RRUL): first the queries on
//! an idle connection, then the same number again on a second connection while FILE streams to
//! the same server on a third, so the two sets compare how the server answers idle and busy
//! (with `--server-log stdout`, busy logging). The loaded queries start once the stream's first
//! bytes are out; the file is sent again and again until they are done (the stream in flight
//! then is the last), so even a small file loads every query.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::interrupt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;

use crate::Transport;
use crate::blocking::Blocking;
use crate::nonblocking::MioConn;
use crate::progress::Progress;
use tsperf_proto::Hello;
use tsperf_proto::client::latency::{self, Answer, LatencyConversation};
use tsperf_proto::clock::{MAX_MESSAGE, Offset, PREFIX};
use tsperf_sys::net;
use tsperf_sys::timing::unix_ns_now;

/// Requests sent first and left out of the statistics (connection set-up, cold caches).
pub const DEFAULT_WARMUP: u64 = 5;

/// The p50 at or above which a Nagle stall is the likely story.
pub const NAGLE_HINT_NS: u64 = 35_000_000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// What was asked for.
    pub spec: crate::spec::LatencySpec,
    /// The pre-shared key, for a server that asks for one.
    pub auth: Option<std::sync::Arc<tsperf_sys::auth::Key>>,
    /// Measure again while this transfer runs (`--under-load`).
    pub under_load: Option<crate::StreamConfig>,
}

/// The queries made while the file streamed, and the streams' own results.
pub struct Loaded {
    /// Round trips answered while the file streamed, in ns.
    pub rtt: Histogram<u64>,
    /// The streams of the file (it is sent again until the queries are done).
    pub streams: Streams,
}

/// The loading streams, summed up as each ends: a long run sends a small file hundreds of
/// thousands of times, and keeping every result would grow without bound (127,060 results held
/// 115 MB). What is kept is the same size however many there were.
pub struct Streams {
    /// Streams that ended, verified or not, and failures.
    pub count: u64,
    /// Of those, streams verified.
    pub verified: u64,
    /// Each completed stream's rate, in thousandths of a MiB/s.
    rates: Histogram<u64>,
    /// How many completed streams got each verdict.
    verdicts: Vec<(tsperf_results::verdict::LimitedBy, u64)>,
    /// The last stream that completed (its size, its verdict).
    pub last: Option<crate::StreamOutcome>,
    /// The first failure.
    pub error: Option<String>,
}

impl Default for Streams {
    fn default() -> Streams {
        Streams {
            count: 0,
            verified: 0,
            rates: Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid histogram bounds"),
            verdicts: Vec::new(),
            last: None,
            error: None,
        }
    }
}

impl Streams {
    /// Adds one stream's end.
    pub fn add(&mut self, r: std::result::Result<crate::StreamOutcome, String>) {
        self.count += 1;
        match r {
            Ok(s) => {
                self.verified += u64::from(s.verified());
                let rate = tsperf_results::units::mib_per_s(s.measured.bytes, s.measured.elapsed);
                self.rates.saturating_record(((rate * 1e3) as u64).max(1));
                let v = s.verdict().limited_by;
                match self.verdicts.iter_mut().find(|(k, _)| *k == v) {
                    Some((_, n)) => *n += 1,
                    None => self.verdicts.push((v, 1)),
                }
                self.last = Some(s);
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }

    /// The median rate of the completed streams, in MiB/s (to 3 significant digits).
    pub fn median_mib_per_s(&self) -> Option<f64> {
        (!self.rates.is_empty()).then(|| self.rates.value_at_quantile(0.5) as f64 / 1e3)
    }

    /// True if there were streams and every one was verified.
    pub fn all_verified(&self) -> bool {
        self.count > 0 && self.verified == self.count
    }

    /// The verdict most completed streams got.
    pub fn usual_verdict(&self) -> Option<tsperf_results::verdict::LimitedBy> {
        let top = self.verdicts.iter().map(|(_, n)| *n).max()?;
        self.verdicts
            .iter()
            .find(|(_, n)| *n == top)
            .map(|(k, _)| *k)
    }
}

/// The measurements.
pub struct LatencyResult {
    /// What was asked for.
    pub cfg: LatencyConfig,
    /// The client's I/O model.
    pub io: tsperf_results::strategy::ClientIo,
    /// Round-trip times in nanoseconds.
    pub rtt: Histogram<u64>,
    /// Offset (server clock minus client clock) from the fastest round trip, in ns.
    pub offset_ns: i64,
    /// Its error bound (half that round trip), in ns.
    pub offset_err_ns: u64,
    /// Why the run ended before `count` queries, if it did.
    pub stopped: Option<Stopped>,
    /// With `--under-load`: the queries made while the file streamed.
    pub loaded: Option<Loaded>,
}

/// Why a latency run ended early.
#[derive(Debug)]
pub enum Stopped {
    /// Ctrl-C (SIGINT) or SIGTERM.
    Interrupted,
    /// The connection or the server failed.
    Failed(anyhow::Error),
}

impl LatencyResult {
    /// The hint for a result that shows the Nagle/delayed-ACK stall, if it does.
    pub fn hint(&self) -> Option<&'static str> {
        let exposed = !self.cfg.spec.nodelay
            && (self.cfg.spec.framing.splits_request() || self.cfg.spec.reconnect);
        (exposed && self.rtt.value_at_quantile(0.5) >= NAGLE_HINT_NS).then_some(
            "a median round trip of 35 ms or more with small split writes and Nagle's algorithm on \
             is Nagle meeting delayed ACK: the second write waits for the ACK of the first, and \
             Linux delays that ACK by at least 40 ms. It is not serialization or the network. \
             Try --nodelay (TCP_NODELAY) or --framing single (one write per message).",
        )
    }
}

/// Runs the latency test over the configured transport, showing `progress`, until `count`
/// queries are answered, a stop is asked for ([`interrupt`]), or something fails; what was
/// measured is returned in every case.
pub fn run_latency(cfg: &LatencyConfig, progress: &mut Progress) -> LatencyResult {
    progress.start(cfg.spec.count);
    let result = if cfg.spec.nonblocking {
        run::<MioConn>(cfg, progress)
    } else {
        run::<Blocking>(cfg, progress)
    };
    progress.clear();
    result
}

/// The best (fastest) round trip so far: its time and the offset it gives.
type Best = Option<(u64, Offset)>;

fn run<T: Transport>(cfg: &LatencyConfig, progress: &mut Progress) -> LatencyResult {
    let mut rtt = histogram();
    let mut best: Best = None;
    let mut stopped = measure::<T>(cfg, progress, &mut rtt, &mut best, &|| true).err();
    let loaded = match (&cfg.under_load, &stopped) {
        (Some(stream), None) => {
            let (loaded, why) = under_load::<T>(cfg, stream, progress);
            stopped = why;
            Some(loaded)
        }
        _ => None,
    };
    // Whatever a stop made fail (a read cut off, a stream shut down), the run was interrupted.
    if stopped.is_some() && interrupt::requested() {
        stopped = Some(Stopped::Interrupted);
    }
    let (_, est) = best.unwrap_or_default();
    LatencyResult {
        cfg: cfg.clone(),
        io: T::IO,
        rtt,
        offset_ns: est.offset_ns,
        offset_err_ns: est.err_ns,
        stopped,
        loaded,
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Streams `stream`'s file on a thread of its own, again and again, and once its bytes flow,
/// makes the queries again on a new connection; when they are done the stream in flight is the
/// last. A stream that fails ends the queries.
fn under_load<T: Transport>(
    cfg: &LatencyConfig,
    stream: &crate::StreamConfig,
    progress: &mut Progress,
) -> (Loaded, Option<Stopped>) {
    let sending = Progress::new(false);
    let done = AtomicBool::new(false);
    let (rtt, streams, stopped) = std::thread::scope(|scope| {
        let streamer = std::thread::Builder::new()
            .name("under load".into())
            .spawn_scoped(scope, || {
                let mut streams = Streams::default();
                loop {
                    let mut p = sending.clone();
                    let r = crate::run_stream(stream, &mut p).map_err(|e| e.to_string());
                    let failed = r.is_err();
                    streams.add(r);
                    if failed || done.load(Ordering::Acquire) || interrupt::requested() {
                        return streams;
                    }
                }
            });
        let streamer = match streamer {
            Ok(t) => t,
            Err(e) => {
                let why = format!("cannot start the stream: {e}");
                let mut streams = Streams::default();
                streams.add(Err(why.clone()));
                return (
                    histogram(),
                    streams,
                    Some(Stopped::Failed(anyhow::anyhow!(why))),
                );
            }
        };
        // The stream's first bytes, within its timeout.
        let by = Instant::now() + stream.spec.timeout;
        while sending.sent() == 0 && !streamer.is_finished() && Instant::now() < by {
            std::thread::sleep(Duration::from_micros(200));
        }
        progress.start(cfg.spec.count);
        let mut rtt = histogram();
        let running = || !streamer.is_finished();
        let stopped = if running() {
            measure::<T>(cfg, progress, &mut rtt, &mut None, &running).err()
        } else {
            None
        };
        done.store(true, Ordering::Release);
        let streams = streamer.join().unwrap_or_else(|_| {
            let mut streams = Streams::default();
            streams.add(Err("the stream's thread panicked".into()));
            streams
        });
        (rtt, streams, stopped)
    });
    let stopped = stopped.or_else(|| match (&streams.error, rtt.len()) {
        (Some(e), _) => Some(Stopped::Failed(anyhow::anyhow!(
            "the loading stream failed: {e}"
        ))),
        (None, 0) => Some(Stopped::Failed(anyhow::anyhow!(
            "no query was answered while the file streamed"
        ))),
        _ => None,
    });
    (Loaded { rtt, streams }, stopped)
}

/// Makes the queries, recording each counted round trip in `rtt` and the fastest in `best`,
/// while `go()` holds: an answer that arrives after it turned false is not counted.
fn measure<T: Transport>(
    cfg: &LatencyConfig,
    progress: &mut Progress,
    rtt: &mut Histogram<u64>,
    best: &mut Best,
    go: &dyn Fn() -> bool,
) -> Result<(), Stopped> {
    let mut conn = None;
    let mut conv = LatencyConversation::new(cfg.spec.codec, cfg.spec.framing);
    let mut out = Vec::with_capacity(PREFIX + MAX_MESSAGE);
    let mut inbuf = vec![0u8; PREFIX + MAX_MESSAGE];
    for seq in 0..cfg.spec.warmup + cfg.spec.count {
        if interrupt::requested() {
            return Err(Stopped::Interrupted);
        }
        if !go() {
            return Ok(());
        }
        let start = Instant::now();
        if cfg.spec.reconnect || conn.is_none() {
            let count = if cfg.spec.reconnect {
                1
            } else {
                cfg.spec.warmup + cfg.spec.count
            };
            conn = Some(open::<T>(cfg, count).map_err(Stopped::Failed)?);
        }
        let c = conn.as_mut().expect("connected above");
        let sent = match conv.request(start, unix_ns_now(), &mut out) {
            Some(at) => c
                .write_all(&out[..at])
                .and_then(|()| c.write_all(&out[at..])),
            None => c.write_all(&out),
        };
        sent.with_context(|| format!("cannot send request {seq}"))
            .map_err(Stopped::Failed)?;
        c.read_by(Some(Instant::now() + cfg.spec.timeout));
        if cfg.spec.busy_poll {
            // The read below then finds the answer (or the error) waiting.
            let _ = net::spin_until_readable(&*c.socket(), Instant::now() + cfg.spec.timeout);
        }
        let answer = read_answer(c, &mut conv, &mut inbuf, seq, cfg.spec.timeout)
            .map_err(Stopped::Failed)?;
        if cfg.spec.reconnect {
            conn = None;
        }
        if seq < cfg.spec.warmup {
            continue;
        }
        if !go() {
            return Ok(());
        }
        let ns = (answer.rtt.as_nanos() as u64).max(1);
        rtt.saturating_record(ns);
        progress.update(rtt.len());
        if best.is_none_or(|(b, _)| ns < b) {
            *best = Some((ns, answer.offset));
        }
    }
    Ok(())
}

/// Connects and has a latency session accepted for `count` requests.
fn open<T: Transport>(cfg: &LatencyConfig, count: u64) -> Result<T> {
    let mut c = T::connect(&cfg.spec.host, cfg.spec.port, cfg.spec.timeout)?;
    c.set_timeout(cfg.spec.timeout)?;
    if cfg.spec.nodelay {
        c.socket()
            .set_tcp_nodelay(true)
            .context("cannot set TCP_NODELAY")?;
    }
    let hello = Hello::latency(count, cfg.spec.codec, cfg.spec.framing, cfg.spec.nodelay);
    let mut conv = tsperf_proto::client::StreamConversation::new(hello, cfg.spec.timeout);
    crate::handshake(&mut c, &mut conv, cfg.auth.as_deref())
        .context("the server did not accept latency mode")?;
    Ok(c)
}

/// Reads request `seq`'s whole answer, each read at most what `conv` says it lacks.
fn read_answer<R: Read>(
    c: &mut R,
    conv: &mut LatencyConversation,
    buf: &mut [u8],
    seq: u64,
    timeout: Duration,
) -> Result<Answer> {
    let (mut have, mut need) = (0, PREFIX);
    loop {
        match c.read(&mut buf[have..have + need]) {
            Ok(0) => bail!("the server closed the connection before answering request {seq}"),
            Ok(n) => have += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if net::is_timeout(&e) => bail!(
                "no answer to request {seq} within {} s",
                timeout.as_secs_f64()
            ),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("lost the connection waiting for answer {seq}"));
            }
        }
        match conv.on_bytes(&buf[..have], Instant::now(), unix_ns_now())? {
            latency::Read::Need(n) => need = n,
            latency::Read::Answered(answer, _) => return Ok(answer),
        }
    }
}
