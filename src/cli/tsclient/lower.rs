//! tsclient's flags lowered into the run they ask for ([`RunSpec`]), a pure function: it reads
//! only the flags, never the system, and refuses what cannot mean anything with a [`Usage`]
//! error naming the flag (the caller prints it and exits 2). Every check of the flags is here,
//! each with its unit test.

use std::num::NonZeroU8;
use std::time::Duration;

use tsperf_client::ladder::LadderSpec;
use tsperf_client::run::Side;
use tsperf_client::spec::{LatencySpec, Mode, RunSpec, Source, StreamSpec, StreamsSpec};
use tsperf_client::{self as client};
use tsperf_proto::tls::Cipher;
use tsperf_proto::{LogMode, SaveMode};
use tsperf_results::strategy::Strategy;
use tsperf_sys::testdata::SEED_FILE_LEN;

use super::{Args, LogArg};

/// A command line that cannot mean anything: what is wrong, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Usage(pub(crate) String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Refuses with `msg` when `bad`.
fn refuse(bad: bool, msg: impl FnOnce() -> String) -> Result<(), Usage> {
    if bad { Err(Usage(msg())) } else { Ok(()) }
}

/// Flags that belong to stream transfers only, by their argument ids.
const STREAM_ONLY: [&str; 24] = [
    "window",
    "bitrate",
    "ladder",
    "tls",
    "ktls",
    "cold",
    "far_disk",
    "save",
    "parallel",
    "min_rate",
    "bidir",
    "reverse",
    "bytes",
    "time",
    "omit",
    "chunk",
    "chunk_reverse",
    "sndbuf",
    "congestion",
    "strategy",
    "batch",
    "server_log",
    "clock_queries",
    "interval",
];
/// Flags that belong to latency runs only.
const LATENCY_ONLY: [&str; 7] = [
    "count",
    "warmup",
    "codec",
    "framing",
    "reconnect",
    "busy_poll",
    "under_load",
];

impl Args {
    /// The flag `id` was given on the command line (not taken from its default).
    fn given(&self, id: &str) -> bool {
        self.given.contains(id)
    }
}

/// The flag an argument id is typed as.
fn flag(id: &str) -> String {
    match id {
        "strategy" => "--io".to_owned(),
        id => format!("--{}", id.replace('_', "-")),
    }
}

impl TryFrom<&Args> for RunSpec {
    type Error = Usage;

    fn try_from(args: &Args) -> Result<RunSpec, Usage> {
        refuse(args.udp, || {
            "tsperf measures TCP only (a file over TCP, verified end to end): for UDP, use \
             iperf3 -u"
                .to_owned()
        })?;
        one_mode(args)?;
        ports(args)?;
        refuse(args.runs.is_some() && !args.ladder, || {
            "--runs repeats the ladder's rungs: give --ladder (or run tsclient again)".to_owned()
        })?;
        let (host, port) = host_and_port(args)?;
        let mode = if args.latency {
            Mode::Latency(latency(args, host, port))
        } else if args.ladder {
            ladder(args)?;
            Mode::Ladder(LadderSpec {
                base: StreamSpec {
                    tls: None,
                    ..stream(args, Side::Sent, &host, port)
                },
                file: args.file.clone(),
                bytes: args.bytes.unwrap_or(SEED_FILE_LEN),
                cipher: args.tls.unwrap_or(Cipher::Aes128Gcm),
                runs: args.runs.unwrap_or(1),
            })
        } else {
            directions(args)?;
            reverse_takes(args)?;
            writes(args)?;
            saves(args)?;
            Mode::Streams(streams(args, host, port))
        };
        Ok(RunSpec {
            mode,
            auth_key: args.auth_key.clone(),
        })
    }
}

/// A flag of the other mode is refused (with `--under-load`, the loading stream takes
/// `--chunk` and `--server-log`).
fn one_mode(args: &Args) -> Result<(), Usage> {
    let (own, other, mode) = if args.latency {
        (&STREAM_ONLY[..], "stream transfers", "--latency")
    } else {
        (&LATENCY_ONLY[..], "--latency", "a stream transfer")
    };
    let loads = |id: &&&str| args.under_load.is_some() && matches!(**id, "chunk" | "server_log");
    match own.iter().filter(|id| !loads(id)).find(|id| args.given(id)) {
        Some(id) => Err(Usage(format!(
            "{} applies to {other} only, not to {mode}",
            flag(id)
        ))),
        None => Ok(()),
    }
}

/// `--host` may name the port; given both ways, they must agree.
fn host_and_port(args: &Args) -> Result<(String, u16), Usage> {
    let (host, port) = tsperf_sys::net::split_host(&args.host).map_err(Usage)?;
    match port {
        Some(p) if args.given("port") && p != args.port => Err(Usage(format!(
            "--host {} names port {p} but --port says {}: give the port once",
            args.host, args.port
        ))),
        Some(p) => Ok((host, p)),
        None => Ok((host, args.port)),
    }
}

/// What the ladder sets in each rung itself, or cannot take: a direction, stripes, a cold read
/// or a save asked for the whole run. A time (`-t`) times the rungs that can repeat their file.
fn ladder(args: &Args) -> Result<(), Usage> {
    for (given, flag) in [
        (args.reverse, "--reverse"),
        (args.bidir, "--bidir"),
        (args.parallel.is_some_and(|n| n > 1), "--parallel"),
        (args.cold, "--cold"),
        (args.far_disk.is_some(), "--far-disk"),
        (args.save.is_some(), "--save"),
        (args.strategy == Strategy::Sendfile, "--io sendfile"),
        (args.ktls, "--ktls"),
    ] {
        refuse(given, || {
            format!(
                "--ladder runs its own rungs (sized by FILE or --bytes, one stream each way it \
                 goes, each stage in its rung): not with {flag}"
            )
        })?;
    }
    Ok(())
}

/// Every stream's settings, as one side sends them.
fn stream(args: &Args, side: Side, host: &str, port: u16) -> StreamSpec {
    StreamSpec {
        side,
        host: host.to_owned(),
        port,
        chunk: args.chunk,
        source: Source::Generated(args.bytes.unwrap_or(SEED_FILE_LEN)),
        one_buffer: args.one_buffer,
        strategy: args.given("strategy").then_some(args.strategy),
        batch: args.batch.unwrap_or(client::DEFAULT_BATCH),
        timeout: Duration::from_secs_f64(args.timeout),
        min_rate: args.min_rate,
        nonblocking: args.nonblocking,
        sndbuf: args.sndbuf.or(args.window),
        rcvbuf: args.window,
        nodelay: args.nodelay,
        // The pacing is of each stream's sender: this client's, or asked of the server.
        pacing: args.bitrate.filter(|&r| r > 0),
        congestion: args.congestion.clone(),
        server_log: args.server_log.map(LogMode::from),
        clock_queries: args.clock_queries,
        // A timed run printed as it happens has a line each second unless told otherwise, as
        // iperf3's; `--json` keeps its object as it was (no samples unless asked for), and the
        // ladder its one table.
        interval: args
            .interval
            .or(
                (args.time.is_some() && (!args.json || args.json_stream) && !args.ladder)
                    .then_some(1.0),
            )
            .map(Duration::from_secs_f64),
        // Samples as they are taken: lines for people, JSON lines with --json-stream, none
        // with --json (they are in its one object).
        live: !args.json || args.json_stream,
        json_lines: args.json_stream,
        verbose: args.verbose || args.get_server_output,
        time: args.time.map(Duration::from_secs_f64),
        omit: Duration::from_secs_f64(args.omit.unwrap_or(0.0)),
        log: args.log.map_or(LogMode::None, LogMode::from),
        log_file: args.log_file.clone(),
        cold: args.cold,
        tls: args.tls.or(args.ktls.then_some(Cipher::Aes128Gcm)),
        kernel_tls: args.ktls,
        save: args
            .far_disk
            .or(args.save.is_some().then_some(SaveMode::Durable)),
        save_dir: args.save.clone(),
        measure_save: false,
    }
}

/// A stream run: a spec for each way the data goes.
fn streams(args: &Args, host: String, port: u16) -> StreamsSpec {
    let forward = (!args.reverse).then(|| StreamSpec {
        source: match &args.file {
            Some(file) => Source::File(file.clone()),
            None => Source::Generated(args.bytes.unwrap_or(SEED_FILE_LEN)),
        },
        ..stream(args, Side::Sent, &host, port)
    });
    let reverse = (args.reverse || args.bidir).then(|| StreamSpec {
        chunk: args.chunk_reverse.unwrap_or(args.chunk),
        // What the server sends a pass: --bytes, a served NAME, or in a two-way run by
        // default as much as FILE holds.
        source: match (&args.file, args.bytes) {
            (Some(name), None) if args.reverse => {
                Source::Served(name.to_string_lossy().into_owned())
            }
            (Some(file), None) if args.bidir => Source::GeneratedAsLong(file.clone()),
            (_, bytes) => Source::Generated(bytes.unwrap_or(SEED_FILE_LEN)),
        },
        ..stream(args, Side::Received, &host, port)
    });
    StreamsSpec {
        forward,
        reverse,
        streams: NonZeroU8::new(args.parallel.unwrap_or(1)).unwrap_or(NonZeroU8::MIN),
    }
}

/// A latency run, with its loading stream (`--under-load FILE`: the stream's `--chunk` and
/// `--server-log`, the rest as a plain stream's).
fn latency(args: &Args, host: String, port: u16) -> LatencySpec {
    let timeout = Duration::from_secs_f64(args.timeout);
    let under_load = args.under_load.as_ref().map(|file| StreamSpec {
        side: Side::Sent,
        host: host.clone(),
        port,
        chunk: args.chunk,
        source: Source::File(file.clone()),
        one_buffer: false,
        strategy: None,
        batch: client::DEFAULT_BATCH,
        timeout,
        min_rate: client::DEFAULT_MIN_RATE,
        nonblocking: args.nonblocking,
        sndbuf: None,
        rcvbuf: None,
        nodelay: false,
        pacing: None,
        congestion: None,
        server_log: args.server_log.map(LogMode::from),
        clock_queries: 0,
        interval: None,
        live: false,
        json_lines: false,
        verbose: false,
        time: None,
        omit: Duration::ZERO,
        log: LogMode::None,
        log_file: Default::default(),
        cold: false,
        tls: None,
        kernel_tls: false,
        save: None,
        save_dir: None,
        measure_save: false,
    });
    LatencySpec {
        host,
        port,
        count: args.count,
        warmup: args.warmup,
        codec: args.codec.into(),
        framing: args.framing.into(),
        nodelay: args.nodelay,
        reconnect: args.reconnect,
        busy_poll: args.busy_poll,
        nonblocking: args.nonblocking,
        timeout,
        under_load,
    }
}

mod checks;
use checks::{directions, ports, reverse_takes, saves, writes};

#[cfg(test)]
mod tests;
