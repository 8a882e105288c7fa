//! tsmatrix: run the comparison grid (called by scripts/matrix.sh, which prepares the machine).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli;
use crate::cli::values::StdoutToArg;
use clap::Parser;
use tsperf_lab::matrix::{self, GridConfig};
use tsperf_results::units;

/// Run the stream and latency grid and write tables, charts and raw JSON to --out.
#[derive(Parser)]
#[command(name = "tsmatrix", version = crate::cli::VERSION)]
struct Args {
    /// Where results go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// The file to stream.
    #[arg(long, default_value = "testdata/tsl.txt")]
    file: PathBuf,
    /// Repetitions of every stream cell.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// Chunk sizes, comma-separated.
    #[arg(long, default_value = "102,1024,10240", value_delimiter = ',', value_parser = units::parse_chunk)]
    chunks: Vec<u32>,
    /// tsclient --io strategies to add as a grid dimension, comma-separated.
    #[arg(long, value_parser = crate::cli::values::strategy(), default_value = "write", value_delimiter = ',')]
    io: Vec<tsperf_client::Strategy>,
    /// Requests per latency cell.
    #[arg(long, default_value_t = 1000)]
    latency_count: u64,
    /// Requests per latency cell that stalls on Nagle (each takes about 88 ms).
    #[arg(long, default_value_t = 20)]
    stall_count: u64,
    /// Run the whole grid against a tsserver already running on HOST (the real LAN case; start
    /// it with --allow-client-log, each transfer asks for its sink).
    #[arg(long)]
    host: Option<String>,
    /// The port of the tsserver on --host.
    #[arg(long, default_value_t = tsperf_proto::DEFAULT_PORT)]
    port: u16,
    /// The address our own servers listen on and clients connect to.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// A command prefix for our servers, e.g. "ip netns exec NS" (split on spaces).
    #[arg(long, default_value = "")]
    server_wrap: String,
    /// A command prefix for the clients (split on spaces).
    #[arg(long, default_value = "")]
    client_wrap: String,
    /// Where the --log stdout server's stdout goes.
    #[arg(long, value_enum, default_value_t = StdoutToArg::Pty)]
    stdout_to: StdoutToArg,
    /// The tmux session name for the pty server.
    #[arg(long, default_value = "tsperf-matrix")]
    tmux_session: String,
    /// How to describe the network in the results.
    #[arg(long, default_value = "loopback")]
    network: String,
    /// The tsperf git commit, for the results.
    #[arg(long, default_value = "unknown")]
    commit: String,
    /// Scratch directory for server logs (default: a new temporary directory).
    #[arg(long)]
    work: Option<PathBuf>,
    /// The link's rate in Gbit/s, when known: tables then show each cell's fraction of it.
    #[arg(long)]
    line_gbit: Option<f64>,
    /// Size every stream cell by time: a timed run of SECS seconds (tsclient --time) instead of
    /// one pass of the file (--io sendfile is refused with it).
    #[arg(long, value_name = "SECS")]
    time: Option<f64>,
    /// Stream counts as a grid dimension (tsclient -P), comma-separated, 1 to 128 each; 1 is
    /// the seed's single stream.
    #[arg(long, default_value = "1", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=128))]
    streams: Vec<u32>,
    /// Run the stream grid in reverse too (tsclient -R: the server sends, the client receives
    /// and logs; its log sinks are none and file).
    #[arg(long)]
    reverse: bool,
    /// After the grid, the file-copy ladder (tsclient --ladder FILE, --reps times) against a
    /// server that saves: ladder.md, ladder.json and ladder.svg.
    #[arg(long)]
    ladder: bool,
    /// Only the ladder, not the grid.
    #[arg(long)]
    ladder_only: bool,
    /// A real copy tool beside the ladder's rungs, NAME=COMMAND (repeatable): a shell command
    /// that copies $TSPERF_COPY_SRC to $TSPERF_COPY_DEST, run after each ladder run from a
    /// cold source, synced and checked (`scripts/matrix.sh --anchors` gives scp, rsync, curl).
    #[arg(long, value_name = "NAME=COMMAND")]
    anchor: Vec<tsperf_lab::anchors::Anchor>,
}

/// tsmatrix's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsmatrix's `main`.
pub fn main() -> ExitCode {
    cli::main("tsmatrix", run)
}

/// The grid's ladder section, on the grid's server settings (its own server saves into the
/// scratch directory).
fn ladder(cfg: &GridConfig, anchors: &[tsperf_lab::anchors::Anchor]) -> anyhow::Result<String> {
    let m = tsperf_lab::machine::probe(&cfg.commit);
    tsperf_lab::ladder::run(
        &tsperf_lab::ladder::LadderConfig {
            out: cfg.out.clone(),
            file: cfg.file.clone(),
            reps: cfg.reps,
            bin_dir: cfg.bin_dir.clone(),
            host: cfg.host.clone(),
            bind: cfg.bind.clone(),
            server_wrap: cfg.server_wrap.clone(),
            client_wrap: cfg.client_wrap.clone(),
            cipher: "aes128gcm".into(),
            machine: m.to_string(),
            network: cfg.network.clone(),
            // The grid's largest chunk (its writes nearest a copy tool's).
            chunk: cfg.chunks.iter().copied().max().unwrap_or(10240),
            anchors: anchors.to_vec(),
        },
        cfg.work.as_deref(),
    )
}

fn run() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    cli::init_diagnostics();
    let bin_dir = cli::bin_dir();
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let cfg = GridConfig {
        out: args.out,
        file: args.file,
        reps: args.reps,
        chunks: args.chunks,
        strategies: args.io,
        latency_count: args.latency_count,
        stall_count: args.stall_count,
        host: args.host.map(|h| (h, args.port)),
        bind: args.bind,
        server_wrap: words(&args.server_wrap),
        client_wrap: words(&args.client_wrap),
        stdout_to: args.stdout_to.into(),
        tmux_session: args.tmux_session,
        network: args.network,
        commit: args.commit,
        bin_dir,
        work: args.work,
        line_gbit: args.line_gbit,
        time: args.time,
        streams: args.streams,
        reverse: args.reverse,
    };
    if let Some(t) = cfg.time {
        anyhow::ensure!(
            (0.001..=86_400.0).contains(&t),
            "invalid --time '{t}': expected seconds from 0.001 to 86400"
        );
        anyhow::ensure!(
            !cfg.strategies.contains(&tsperf_client::Strategy::Sendfile),
            "--io sendfile sends the file once: a timed grid (--time) takes write or writev"
        );
    }
    anyhow::ensure!(
        args.anchor.is_empty() || args.ladder || args.ladder_only,
        "--anchor runs beside the ladder: give --ladder or --ladder-only"
    );
    let grid = if args.ladder_only {
        Ok(String::new())
    } else {
        matrix::run(&cfg)
    };
    match grid {
        Ok(tables) => {
            cli::print(&format!("\n{tables}"))?;
            if args.ladder || args.ladder_only {
                cli::print(&format!("\n{}", ladder(&cfg, &args.anchor)?))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.is::<matrix::Interrupted>() => {
            eprintln!("tsmatrix: interrupted");
            Ok(ExitCode::from(cli::INTERRUPTED as u8))
        }
        Err(e) => Err(e),
    }
}
