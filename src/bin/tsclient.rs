//! tsclient: send a file to a tsserver and report what both ends measured.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use tsperf::progress::Progress;
use tsperf::protocol::clock::{Codec, Framing};
use tsperf::{DEFAULT_PORT, cli, client, latency, output, units};

/// Stream FILE to a tsserver in chunks of exactly --chunk bytes; the clock stops when the server
/// has checksummed every byte. With --latency, ask the server for its clock instead and report
/// the round trips.
#[derive(Parser)]
#[command(name = "tsclient", version, about)]
struct Args {
    /// Server host name or address.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Bytes per write: 1 to 16 MiB; suffixes k/KiB/m/MiB (k = 1024).
    #[arg(long, default_value = "10240", value_parser = units::parse_chunk, value_name = "BYTES")]
    chunk: u32,
    /// Print one JSON object on stdout instead of the human report.
    #[arg(long)]
    json: bool,
    /// Do not show the progress bar (it is shown on stderr only when stderr is a terminal).
    #[arg(long)]
    no_progress: bool,
    /// Seconds to wait for the connection, and for the server to take data or answer.
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout, value_name = "SECS")]
    timeout: f64,
    /// Use a mio non-blocking socket (waits in poll, handles short writes) instead of blocking I/O.
    #[arg(long)]
    nonblocking: bool,
    /// How chunks reach the kernel: one write per chunk (the seed's way), --batch chunks per
    /// writev, or sendfile of one chunk per call from the page cache (zero-copy).
    #[arg(long = "io", value_enum, default_value_t = client::Strategy::Write, value_name = "STRATEGY")]
    strategy: client::Strategy,
    /// Chunks per writev call with --io writev (1 to 1024).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=client::MAX_BATCH as i64), value_name = "K")]
    batch: Option<u32>,
    /// Send buffer (SO_SNDBUF) to ask the kernel for; by default the kernel's own.
    #[arg(long, value_parser = units::parse_buffer, value_name = "BYTES")]
    sndbuf: Option<u32>,
    /// The key shared with a server started with --auth-key.
    #[arg(long, value_name = "FILE")]
    auth_key: Option<PathBuf>,
    /// Latency mode: clock queries, request and response, instead of a file.
    #[arg(long)]
    latency: bool,
    /// Latency: requests to measure.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    count: u64,
    /// Latency: requests sent first and not counted.
    #[arg(long, default_value_t = latency::DEFAULT_WARMUP, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    warmup: u64,
    /// Latency: message body encoding.
    #[arg(long, value_enum, default_value_t = Codec::Binary)]
    codec: Codec,
    /// Latency: one write per message, or the length prefix and body in two writes.
    #[arg(long, value_enum, default_value_t = Framing::Single)]
    framing: Framing,
    /// Latency: set TCP_NODELAY on both ends (by default Nagle's algorithm stays on, as in most
    /// programs).
    #[arg(long)]
    nodelay: bool,
    /// Latency: a new TCP connection for every request (like netperf TCP_CRR).
    #[arg(long)]
    reconnect: bool,
    /// The file to send (not with --latency).
    #[arg(required_unless_present = "latency", conflicts_with = "latency")]
    file: Option<PathBuf>,
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "invalid timeout '{s}': expected seconds, more than 0 and at most 86400"
        )),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.batch.is_some() && args.strategy != client::Strategy::Writev {
        Args::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--batch applies to --io writev only (this run uses --io {})",
                    args.strategy
                ),
            )
            .exit();
    }
    if args.latency && args.strategy != client::Strategy::Write {
        Args::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--io applies to stream transfers, not to --latency",
            )
            .exit();
    }
    cli::init_diagnostics();
    let auth = match args.auth_key.as_deref().map(cli::load_key).transpose() {
        Ok(Some((key, warning))) => {
            if let Some(w) = warning {
                eprintln!("tsclient: {w}");
            }
            Some(key)
        }
        Ok(None) => None,
        Err(e) => return cli::fail("tsclient", &e),
    };
    if args.latency {
        return latency_main(&args, auth);
    }
    let cfg = client::StreamConfig {
        host: args.host,
        port: args.port,
        chunk: args.chunk,
        file: args.file.clone().unwrap_or_default(),
        timeout: Duration::from_secs_f64(args.timeout),
        nonblocking: args.nonblocking,
        sndbuf: args.sndbuf,
        auth,
        strategy: args.strategy,
        batch: args.batch.unwrap_or(client::DEFAULT_BATCH),
    };
    let mut progress = Progress::new(!args.no_progress);
    if let Err(e) = cli::exit_on_interrupt("tsclient", progress.clone()) {
        return cli::fail("tsclient", &e.into());
    }
    let result = match client::run_stream(&cfg, &mut progress) {
        Ok(r) => r,
        Err(e) => return cli::fail("tsclient", &e),
    };
    let text = if args.json {
        output::stream_json(&result) + "\n"
    } else {
        output::stream_human(&result)
    };
    if let Err(e) = cli::print(&text) {
        return cli::fail("tsclient", &e.into());
    }
    if !result.verified() {
        return cli::fail("tsclient", &anyhow::anyhow!(output::mismatch(&result)));
    }
    ExitCode::SUCCESS
}

fn latency_main(args: &Args, auth: Option<std::sync::Arc<tsperf::auth::Key>>) -> ExitCode {
    let cfg = latency::LatencyConfig {
        host: args.host.clone(),
        port: args.port,
        count: args.count,
        warmup: args.warmup,
        codec: args.codec,
        framing: args.framing,
        nodelay: args.nodelay,
        reconnect: args.reconnect,
        nonblocking: args.nonblocking,
        timeout: Duration::from_secs_f64(args.timeout),
        auth,
    };
    let result = match latency::run_latency(&cfg) {
        Ok(r) => r,
        Err(e) => return cli::fail("tsclient", &e),
    };
    let text = if args.json {
        output::latency_json(&result) + "\n"
    } else {
        output::latency_human(&result)
    };
    match cli::print(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => cli::fail("tsclient", &e.into()),
    }
}
