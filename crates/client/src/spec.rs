//! A run as the user asked for it, as data ([`RunSpec`]): what the flags say, lowered without
//! touching the system, so it can be built and checked in a unit test. Then prepared
//! ([`RunSpec::prepare`]): the key read, the generated stream made, each direction's
//! [`StreamConfig`] written out, into what runs ([`Prepared`]).
//!
//! A stream run has a spec per direction ([`StreamSpec`]: its side, chunk, strategy, source,
//! ...), so `--bidir` with a different chunk each way is two values, not a special case.

use std::num::NonZeroU8;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tsperf_proto::LogMode;
use tsperf_proto::clock::{Codec, Framing};
use tsperf_results::strategy::Strategy;
use tsperf_stream::send::Call;
use tsperf_sys::auth::Key;
use tsperf_sys::testdata::SEED_FILE_LEN;

use crate::StreamConfig;
use crate::latency::LatencyConfig;
use crate::run::{Direction, Side};

/// The name a forward run without FILE announces: the generated stream's, as a reverse run
/// shows it.
pub const GENERATED: &str = "generated";

/// Where a stream's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file of this client's, by its path (forward).
    File(PathBuf),
    /// The generated stream (the seed's text again and again) of this many bytes a pass.
    Generated(u64),
    /// The generated stream, a pass as long as this file (`--bidir FILE` without `--bytes`).
    GeneratedAsLong(PathBuf),
    /// A file the server serves (`--serve`), by its name (reverse).
    Served(String),
}

/// One direction's streams, as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSpec {
    /// Which end sends.
    pub side: Side,
    /// The server's host name or address.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// Bytes per write, on the sending end.
    pub chunk: u32,
    /// What is sent.
    pub source: Source,
    /// The generated stream is one `chunk` sent again and again (`--one-buffer`): forward, the
    /// period this client makes is one chunk long; in reverse, the hello asks it of the server.
    pub one_buffer: bool,
    /// How chunks reach the kernel (`--io`): this client's writes, or in reverse asked of the
    /// server; `None`: the sending end's own way (this client's: write).
    pub strategy: Option<Strategy>,
    /// Chunks per `writev` (with [`Strategy::Writev`]; 1 to [`crate::MAX_BATCH`]).
    pub batch: u32,
    /// Deadline of each phase (connecting, the hello's answer, the report after the last byte),
    /// and the longest the server may take no data.
    pub timeout: Duration,
    /// The slowest a sized reverse stream may arrive, bytes a second (`--min-rate`): it is cut
    /// off `timeout` plus its pass at this rate after its first byte
    /// ([`crate::DEFAULT_MIN_RATE`]).
    pub min_rate: u64,
    /// A mio non-blocking socket instead of a blocking one.
    pub nonblocking: bool,
    /// The send buffer to ask for (SO_SNDBUF).
    pub sndbuf: Option<u32>,
    /// The receive buffer to ask for (SO_RCVBUF, iperf3's `-w` on this end).
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY on this client's data socket from the start (iperf3's `-N`).
    pub nodelay: bool,
    /// This client's sends paced to at most this many bytes a second (`SO_MAX_PACING_RATE`,
    /// iperf3's `-b`).
    pub pacing: Option<u64>,
    /// The TCP congestion control to send with (`TCP_CONGESTION`, iperf3's `-C`); by default
    /// the kernel's. In reverse the hello asks it of the server.
    pub congestion: Option<String>,
    /// The server log sink to ask for; `None`: the server's own.
    pub server_log: Option<LogMode>,
    /// Clock queries before the data (0 to [`tsperf_proto::MAX_CLOCK_QUERIES`]).
    pub clock_queries: u8,
    /// A sample this often (`--interval`).
    pub interval: Option<Duration>,
    /// Samples printed as they are taken (a human run, or `--json-stream`).
    pub live: bool,
    /// Printed as JSON lines (`--json-stream`).
    pub json_lines: bool,
    /// The report's full detail (`--verbose`): here, every TCP figure on each interval line.
    pub verbose: bool,
    /// A timed run (`--time`): the data again and again for this long after `omit`.
    pub time: Option<Duration>,
    /// A timed run's start left out of its figures (`--omit`), as iperf3 `-O` does: slow start.
    pub omit: Duration,
    /// This end's per-read log sink (receiving), and its file.
    pub log: LogMode,
    /// The file the file sink appends to.
    pub log_file: PathBuf,
    /// FILE is read from its disk, not the page cache (`--cold`): its pages evicted first.
    pub cold: bool,
    /// The data over TLS 1.3 with this suite (`--tls`); `None`: in the clear.
    pub tls: Option<tsperf_proto::tls::Cipher>,
    /// This end's TLS records sealed and opened by the kernel (`--ktls`): rustls makes the
    /// handshake, then hands the keys to kernel TLS, and `sendfile` works through TLS.
    pub kernel_tls: bool,
    /// How the receiving end writes the stream to its disk (`--far-disk`): forward, asked of
    /// the server; in reverse, this client's, into `save_dir`. `None`: not asked (forward: the
    /// server's own way).
    pub save: Option<tsperf_proto::SaveMode>,
    /// In reverse, the directory this client saves the stream into (`--save`).
    pub save_dir: Option<PathBuf>,
    /// Forward: the server's save is measured and not kept (the ladder's far-disk rungs).
    pub measure_save: bool,
}

/// A stream run: a spec for each direction the data goes, and the streams each way.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamsSpec {
    /// What this client sends, if it sends.
    pub forward: Option<StreamSpec>,
    /// What the server sends this client, if it does.
    pub reverse: Option<StreamSpec>,
    /// Streams each way (`--parallel`).
    pub streams: NonZeroU8,
}

impl StreamsSpec {
    /// Which way the data goes.
    pub fn direction(&self) -> Direction {
        match (&self.forward, &self.reverse) {
            (Some(_), Some(_)) => Direction::Both,
            (None, Some(_)) => Direction::Receive,
            _ => Direction::Send,
        }
    }

    /// The first direction's spec (forward where there is one).
    pub fn first(&self) -> &StreamSpec {
        self.forward
            .as_ref()
            .or(self.reverse.as_ref())
            .expect("a stream run goes at least one way")
    }
}

/// A latency run, as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySpec {
    /// The server's host name or address.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// Queries to measure.
    pub count: u64,
    /// Queries made first and not counted.
    pub warmup: u64,
    /// How message bodies are encoded.
    pub codec: Codec,
    /// One write per message or two.
    pub framing: Framing,
    /// TCP_NODELAY on both ends.
    pub nodelay: bool,
    /// A new connection for every query.
    pub reconnect: bool,
    /// Spin for each answer instead of sleeping in a read.
    pub busy_poll: bool,
    /// A mio non-blocking socket instead of a blocking one.
    pub nonblocking: bool,
    /// How long each answer may take.
    pub timeout: Duration,
    /// Measure again while this stream runs (`--under-load FILE`).
    pub under_load: Option<StreamSpec>,
}

/// What a run is. One is made a run, so the variants' sizes do not matter.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Mode {
    /// Streams, any direction and count.
    Streams(StreamsSpec),
    /// Clock queries.
    Latency(LatencySpec),
    /// A file copy's rungs (`--ladder`).
    Ladder(crate::ladder::LadderSpec),
}

/// A run as asked for: its mode and the key file to authenticate with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// What runs.
    pub mode: Mode,
    /// The pre-shared key's file (`--auth-key`).
    pub auth_key: Option<PathBuf>,
}

/// A stream run ready to go: what was asked for, and each direction's configuration.
#[derive(Debug)]
pub struct Run {
    /// What was asked for.
    pub spec: StreamsSpec,
    /// What this client sends, if it sends.
    pub forward: Option<StreamConfig>,
    /// What the server sends, if it does.
    pub reverse: Option<StreamConfig>,
    /// Streams each way.
    pub streams: NonZeroU8,
    /// What the server sends a pass (receiving); 0 for a served file.
    pub asked: u64,
    /// A file the server serves, instead of the generated stream.
    pub served: Option<String>,
    /// The generated stream's in-memory file (for sendfile), held open while it runs.
    _memfd: Option<std::fs::File>,
}

/// A run ready to go, and what the caller should say first (a key file's warning).
#[derive(Debug)]
pub struct Prepared {
    /// The run.
    pub run: Ready,
    /// Warnings to print before it starts.
    pub warnings: Vec<String>,
}

/// A prepared run of either mode.
#[derive(Debug)]
pub enum Ready {
    /// Streams.
    Streams(Box<Run>),
    /// Clock queries.
    Latency(Box<LatencyConfig>),
    /// A file copy's rungs, and the key to authenticate with.
    Ladder(Box<crate::ladder::LadderSpec>, Option<Arc<Key>>),
}

impl RunSpec {
    /// Reads the key, makes what the streams send, and writes out each configuration.
    pub fn prepare(&self) -> Result<Prepared> {
        let mut warnings = Vec::new();
        let auth = match &self.auth_key {
            Some(path) => {
                let (key, warning) = Key::load(path)?;
                warnings.extend(warning);
                Some(Arc::new(key))
            }
            None => None,
        };
        let run = match &self.mode {
            Mode::Streams(s) => Ready::Streams(Box::new(prepare_streams(s, &auth)?)),
            Mode::Latency(l) => Ready::Latency(Box::new(prepare_latency(l, &auth)?)),
            Mode::Ladder(l) => Ready::Ladder(Box::new(l.clone()), auth),
        };
        Ok(Prepared { run, warnings })
    }
}

/// A stream run's configurations; its generated stream made.
fn prepare_streams(s: &StreamsSpec, auth: &Option<Arc<Key>>) -> Result<Run> {
    let (forward, memfd) = match &s.forward {
        Some(spec) => {
            let (cfg, memfd) = StreamConfig::prepare(spec, auth.clone())?;
            (Some(cfg), memfd)
        }
        None => (None, None),
    };
    let reverse = match &s.reverse {
        Some(spec) => Some(StreamConfig::prepare(spec, auth.clone())?.0),
        None => None,
    };
    // Each stream of a two-way session asks for a byte at least.
    let least = if forward.is_some() {
        s.streams.get()
    } else {
        1
    };
    let (asked, served) = match s.reverse.as_ref().map(|r| &r.source) {
        Some(Source::Served(name)) => (0, Some(name.clone())),
        Some(Source::Generated(len)) => ((*len).max(u64::from(least)), None),
        Some(Source::GeneratedAsLong(file)) => {
            let len = std::fs::metadata(file).map_or(SEED_FILE_LEN, |m| m.len());
            (len.max(u64::from(least)), None)
        }
        _ => (0, None),
    };
    Ok(Run {
        spec: s.clone(),
        forward,
        reverse,
        streams: s.streams,
        asked,
        served,
        _memfd: memfd,
    })
}

/// A latency run's configuration; its loading stream's file checked before any query.
fn prepare_latency(l: &LatencySpec, auth: &Option<Arc<Key>>) -> Result<LatencyConfig> {
    let under_load = match &l.under_load {
        Some(spec) => {
            if let Source::File(file) = &spec.source {
                tsperf_sys::source::Source::open(file, spec.chunk, 1).context("--under-load")?;
            }
            Some(StreamConfig::prepare(spec, auth.clone())?.0)
        }
        None => None,
    };
    Ok(LatencyConfig {
        spec: l.clone(),
        auth: auth.clone(),
        under_load,
    })
}

impl StreamSpec {
    /// How the sending end hands chunks to the kernel (the one place a strategy becomes the
    /// engine's call); `None`: its own way.
    pub fn call(&self) -> Option<Call> {
        self.strategy.map(|s| s.call(self.batch))
    }

    /// The strategy this client sends by: the one asked for, else write.
    pub fn strategy(&self) -> Strategy {
        self.strategy.unwrap_or_default()
    }
}

impl StreamConfig {
    /// The configuration `spec` runs with. A forward generated stream is made here: one period
    /// held in memory, or for `--io sendfile` an in-memory file, returned to be held open for
    /// the run.
    pub fn prepare(
        spec: &StreamSpec,
        auth: Option<Arc<Key>>,
    ) -> Result<(StreamConfig, Option<std::fs::File>)> {
        if spec.kernel_tls {
            tsperf_sys::ktls::offered().map_err(|why| anyhow::anyhow!("--ktls: {why}"))?;
        }
        let generated = match (&spec.source, spec.side) {
            (Source::Generated(len), Side::Sent) => Some(*len),
            _ => None,
        };
        // --one-buffer: a period of one write, which stays in the CPU's cache.
        let period = if spec.one_buffer {
            u64::from(spec.chunk)
        } else {
            SEED_FILE_LEN
        };
        // sendfile sends from a file: the period in an in-memory file; the other ways copy
        // from memory the process holds.
        let sendfile = spec.strategy == Some(Strategy::Sendfile);
        let memfd = generated
            .filter(|_| sendfile)
            .map(|len| tsperf_sys::testdata::stream_file_of(len, period))
            .transpose()?;
        let held = generated
            .filter(|_| !sendfile)
            .map(|len| {
                let len = usize::try_from(len.min(period)).unwrap_or(usize::MAX);
                tsperf_sys::source::Held::text(len)
            })
            .transpose()?;
        let file = match (&memfd, &spec.source) {
            (Some(f), _) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            (None, Source::File(path)) => path.clone(),
            (None, _) => PathBuf::from(GENERATED),
        };
        let cfg = StreamConfig {
            spec: spec.clone(),
            file,
            name: generated.map(|_| match spec.one_buffer {
                true => format!("{GENERATED}-one-buffer"),
                false => GENERATED.to_owned(),
            }),
            generated,
            held,
            auth,
            live: spec.live.then(|| crate::live::Live {
                json: spec.json_lines,
                omit_s: spec.omit.as_secs_f64(),
                verbose: spec.verbose,
                ..crate::live::Live::default()
            }),
            stripe: None,
            two_way: None,
        };
        Ok((cfg, memfd))
    }
}
