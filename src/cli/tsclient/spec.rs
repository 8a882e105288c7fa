//! tsclient's flags lowered once into a run: a [`RunSpec`] (a direction, a stream count, what
//! is sent and how) or a latency run's configuration, and the checks of what a direction
//! cannot take.

use std::num::NonZeroU8;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tsperf_client::run::{Direction, RunSpec};
use tsperf_client::{self as client, latency};
use tsperf_proto::LogMode;
use tsperf_results::strategy::Strategy;

use super::{Args, LogArg, Plan};
use crate::cli;

/// Refuses (exit 2) what a reverse or two-way run cannot take.
pub(super) fn check(m: &clap::ArgMatches, args: &Args) {
    if args.bytes.is_some() && !args.reverse && !args.bidir && args.file.is_some() {
        cli::usage_error::<Args>(
            "--bytes sizes the generated stream, and a forward run with FILE sends FILE: give \
             FILE or --bytes, not both (with --reverse or --bidir, --bytes is what the server \
             sends)"
                .to_owned(),
        );
    }
    if args.reverse
        && let Some(name) = &args.file
        && (args.bytes.is_some() || name.components().count() != 1 || name.file_name().is_none())
    {
        cli::usage_error::<Args>(if args.bytes.is_some() {
            "--reverse takes --bytes (the generated stream) or a NAME the server serves, not both"
                .to_owned()
        } else {
            format!(
                "--reverse NAME takes the plain name of a file the server serves (--serve), not \
                 a path: '{}'",
                name.display()
            )
        });
    }
    if cli::given(m, "min_rate") && (!(args.reverse || args.bidir) || args.time.is_some()) {
        cli::usage_error::<Args>(
            "--min-rate bounds a sized stream the server sends (--reverse or --bidir, without \
             --time): a timed stream ends by its time"
                .to_owned(),
        );
    }
    if !args.reverse && (args.log.is_some() || cli::given(m, "log_file")) {
        cli::usage_error::<Args>(
            "--log and --log-file apply to --reverse (this end receives); the server's sink is \
             --server-log"
                .to_owned(),
        );
    }
    if args.json() && matches!(args.log, Some(LogArg::Stdout)) {
        cli::usage_error::<Args>(
            "--log stdout and --json both write to stdout: use --log file, or leave out --json"
                .to_owned(),
        );
    }
    if args.reverse {
        // What the client's writes are, it does not write: the server's writes are --chunk.
        for (given, flag) in [
            (cli::given(m, "strategy"), "--io"),
            (args.batch.is_some(), "--batch"),
            (args.sndbuf.is_some(), "--sndbuf"),
            (args.server_log.is_some(), "--server-log"),
        ] {
            if given {
                cli::usage_error::<Args>(format!(
                    "{flag} does not apply to --reverse (the server sends; --chunk sets its writes)"
                ));
            }
        }
    }
}

/// The key for --auth-key, if given (its warning printed).
fn auth_key(args: &Args) -> anyhow::Result<Option<std::sync::Arc<tsperf_sys::auth::Key>>> {
    let Some((key, warning)) = args.auth_key.as_deref().map(cli::load_key).transpose()? else {
        return Ok(None);
    };
    if let Some(w) = warning {
        eprintln!("tsclient: {w}");
    }
    Ok(Some(key))
}

/// The name a forward run without FILE announces: the generated stream's, as a reverse run
/// shows it.
const GENERATED: &str = "generated";

/// The generated stream's length: --bytes, by default the seed's.
fn stream_len(args: &Args) -> u64 {
    args.bytes.unwrap_or(tsperf_sys::testdata::SEED_FILE_LEN)
}

/// Lowers the checked flags into the run they ask for.
pub(super) fn lower(args: &Args, host: String, port: u16) -> anyhow::Result<Plan> {
    let auth = auth_key(args)?;
    if args.latency {
        return latency_config(args, host, port, auth).map(Plan::Latency);
    }
    let direction = match (args.reverse, args.bidir) {
        (true, _) => Direction::Receive,
        (false, true) => Direction::Both,
        (false, false) => Direction::Send,
    };
    let (stream, generated) = stream_config(args, host, port, auth)?;
    // What the server sends a pass: --bytes; in a two-way run by default FILE's size.
    let asked = match args.bytes {
        Some(b) => b,
        None if args.bidir => match stream.generated {
            Some(len) => len,
            None => std::fs::metadata(&stream.file)
                .map_or(tsperf_sys::testdata::SEED_FILE_LEN, |m| m.len()),
        },
        None => tsperf_sys::testdata::SEED_FILE_LEN,
    };
    let streams = NonZeroU8::new(args.parallel.unwrap_or(1)).unwrap_or(NonZeroU8::MIN);
    // Each stream of a two-way session asks for a byte at least.
    let least = if args.bidir { streams.get() } else { 1 };
    let spec = RunSpec {
        stream,
        direction,
        streams,
        asked: asked.max(u64::from(least)),
        served: args
            .reverse
            .then(|| args.file.as_ref().map(|n| n.to_string_lossy().into_owned()))
            .flatten(),
    };
    Ok(Plan::Streams(spec, generated))
}

/// Every stream's settings. Without FILE (forward) the generated stream of --bytes: one period
/// held in memory (`StreamConfig::held`), or for `--io sendfile` an in-memory file, returned to
/// be held open for the run.
fn stream_config(
    args: &Args,
    host: String,
    port: u16,
    auth: Option<Arc<tsperf_sys::auth::Key>>,
) -> anyhow::Result<(client::StreamConfig, Option<std::fs::File>)> {
    let strategy: Strategy = args.strategy.into();
    // --one-buffer: a period of one write, which stays in the CPU's cache.
    let period = if args.one_buffer {
        u64::from(args.chunk)
    } else {
        tsperf_sys::testdata::SEED_FILE_LEN
    };
    let forward_generated = args.file.is_none() && !args.reverse;
    // sendfile sends from a file: the period in an in-memory file; the other ways copy from
    // memory the process holds.
    let generated = (forward_generated && strategy == Strategy::Sendfile)
        .then(|| tsperf_sys::testdata::stream_file_of(stream_len(args), period))
        .transpose()?;
    let held = (forward_generated && strategy != Strategy::Sendfile)
        .then(|| {
            let len = stream_len(args).min(period);
            tsperf_sys::source::Held::text(usize::try_from(len).unwrap_or(usize::MAX))
        })
        .transpose()?;
    let file = match &generated {
        Some(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
        None if held.is_some() => PathBuf::from(GENERATED),
        None => args.file.clone().unwrap_or_default(),
    };
    let cfg = client::StreamConfig {
        host,
        port,
        chunk: args.chunk,
        file,
        timeout: Duration::from_secs_f64(args.timeout),
        min_rate: args.min_rate,
        nonblocking: args.nonblocking,
        sndbuf: args.sndbuf,
        congestion: args.congestion.clone(),
        one_buffer: args.one_buffer,
        auth,
        strategy,
        batch: args.batch.unwrap_or(client::DEFAULT_BATCH),
        server_log: args.server_log.map(LogMode::from),
        clock_queries: args.clock_queries,
        interval: args.interval.map(Duration::from_secs_f64),
        // Samples as they are taken: lines for people, JSON lines with --json-stream, none with
        // --json (they are in its one object).
        live: (!args.json || args.json_stream).then(|| client::live::Live {
            json: args.json_stream,
            ..client::live::Live::default()
        }),
        time: args.time.map(Duration::from_secs_f64),
        omit: Duration::from_secs_f64(args.omit.unwrap_or(0.0)),
        log: args.log.map_or(LogMode::None, LogMode::from),
        log_file: args.log_file.clone(),
        stripe: None,
        two_way: None,
        name: forward_generated.then(|| {
            if args.one_buffer {
                format!("{GENERATED}-one-buffer")
            } else {
                GENERATED.to_owned()
            }
        }),
        generated: forward_generated.then(|| stream_len(args)),
        held,
    };
    Ok((cfg, generated))
}

/// A latency run's configuration, with its loading stream (`--under-load`).
fn latency_config(
    args: &Args,
    host: String,
    port: u16,
    auth: Option<Arc<tsperf_sys::auth::Key>>,
) -> anyhow::Result<latency::LatencyConfig> {
    // The loading stream's file is checked before any query, as a stream's is.
    if let Some(file) = &args.under_load {
        tsperf_sys::source::Source::open(file, args.chunk, 1).context("--under-load")?;
    }
    let under_load = args.under_load.as_ref().map(|file| client::StreamConfig {
        host: host.clone(),
        port,
        chunk: args.chunk,
        file: file.clone(),
        timeout: Duration::from_secs_f64(args.timeout),
        min_rate: client::DEFAULT_MIN_RATE,
        nonblocking: args.nonblocking,
        sndbuf: None,
        congestion: None,
        one_buffer: false,
        auth: auth.clone(),
        strategy: Strategy::Write,
        batch: client::DEFAULT_BATCH,
        server_log: args.server_log.map(LogMode::from),
        clock_queries: 0,
        interval: None,
        live: None,
        time: None,
        omit: Duration::ZERO,
        log: LogMode::None,
        log_file: PathBuf::new(),
        stripe: None,
        two_way: None,
        name: None,
        generated: None,
        held: None,
    });
    Ok(latency::LatencyConfig {
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
        timeout: Duration::from_secs_f64(args.timeout),
        under_load,
        auth,
    })
}
