//! tspeers: tsperf against iperf3 on the same file and chunk sizes (run by scripts/peers.sh).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli;
use crate::peers::{self, PeersConfig, PeersMarkdown, PeersReport};
use clap::Parser;
use tsperf_lab::machine;
use tsperf_lab::report::Exporter;
use tsperf_results::units;

/// Alternate tsclient and `iperf3 -F FILE -l CHUNK` runs and write peers.md and peers.svg. An
/// iperf3 server must already listen on --iperf3-port; tspeers starts its own tsserver unless
/// --tsperf-port names one.
#[derive(Parser)]
#[command(name = "tspeers", version = crate::cli::VERSION)]
struct Args {
    /// The file both tools send.
    #[arg(long, default_value = "testdata/tsl.txt")]
    file: PathBuf,
    /// Chunk sizes (tsclient --chunk, iperf3 -l), comma-separated.
    #[arg(long, default_value = "102,1024,10240", value_delimiter = ',', value_parser = units::parse_chunk)]
    chunks: Vec<u32>,
    /// Repetitions of every run (the median is reported).
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// The port of a running `tsserver --log none` on 127.0.0.1 (default: start one).
    #[arg(long)]
    tsperf_port: Option<u16>,
    /// The port of an `iperf3 -s` on 127.0.0.1.
    #[arg(long)]
    iperf3_port: u16,
    /// The directory peers.md and peers.svg go to.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// The tsperf commit to name in the report.
    #[arg(long, default_value = "unknown")]
    commit: String,
    /// Compare streams and directions instead: timed runs of these stream counts
    /// (comma-separated, 1 to 128), forward and reverse, against iperf3 -P N and -R; writes
    /// streams.md.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=128), value_name = "LIST")]
    streams: Option<Vec<u8>>,
    /// With --streams, the seconds each run lasts.
    #[arg(long, default_value_t = 3.0, value_name = "SECS")]
    time: f64,
    /// With --streams, the address both servers listen on and the clients connect to (the
    /// emulated LAN's server side, 198.18.0.1).
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    host: String,
    /// With --streams, a command prefix for our tsserver, e.g. "ip netns exec NS" (split on
    /// spaces).
    #[arg(long, default_value = "")]
    server_wrap: String,
    /// With --streams, a command prefix for both clients (split on spaces).
    #[arg(long, default_value = "")]
    client_wrap: String,
    /// With --streams, how the table names the network.
    #[arg(long, default_value = "Loopback")]
    network: String,
    /// Compare at large writes instead (issue 33): memory to memory, -R, -P 2, sendfile
    /// against -Z and the file against -F, with CPU per GiB on each end; --file is the large
    /// file (1 GiB) whose length every cell moves. Writes steady.md and steady.json.
    #[arg(long)]
    steady: bool,
    /// With --steady, the pid of the `iperf3 -s` on --iperf3-port (its CPU is read from
    /// /proc).
    #[arg(long, value_name = "PID")]
    iperf3_pid: Option<u32>,
}

/// `--steady`: large writes against iperf3, CPU per GiB on each end; writes steady.md and
/// steady.json.
fn steady_run(
    args: &Args,
    bin_dir: PathBuf,
    server: Option<tsperf_lab::harness::ServerProcess>,
) -> anyhow::Result<ExitCode> {
    use crate::steady;
    let server = server.context("--steady starts its own tsserver (leave out --tsperf-port)")?;
    let iperf3_pid = args
        .iperf3_pid
        .context("--steady needs --iperf3-pid, the pid of the iperf3 -s on --iperf3-port")?;
    let tsperf_pid = server.pid().context("the tsserver is not our child")?;
    let len = cli::file_len(&args.file)?;
    let cfg = steady::SteadyConfig {
        bin_dir,
        file: args.file.clone(),
        cells: steady::default_cells(),
        reps: args.reps,
        tsperf: (server.port, tsperf_pid),
        iperf3: (args.iperf3_port, iperf3_pid),
    };
    let cells = steady::run(&cfg, std::path::Path::new("iperf3"), |c| {
        println!(
            "{:>14} {:>7}: tsperf/iperf3 {:.2}x{}",
            c.cell.kind.label(),
            c.cell.chunk,
            c.ratio(),
            if c.verified() {
                ""
            } else {
                " (NOT ALL VERIFIED)"
            }
        )
    })?;
    drop(server);
    let mut chunks: Vec<u32> = cfg.cells.iter().map(|c| c.chunk).collect();
    chunks.sort_unstable();
    chunks.dedup();
    let floors = steady::floors(&chunks, len, args.reps)?;
    let report = steady::SteadyReport {
        cells,
        floors,
        hash_s_per_gib: steady::hash_cost(),
        len,
        reps: args.reps,
        machine: machine::probe(&args.commit),
    };
    std::fs::create_dir_all(&args.out)?;
    let md = steady::markdown(&report);
    for (name, body) in [
        ("steady.md", md.clone().into_bytes()),
        ("steady.json", serde_json::to_vec_pretty(&report)?),
    ] {
        tsperf_lab::folder::write_atomic(&args.out.join(name), &body)?;
    }
    cli::print(&format!("\n{md}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `--streams`: streams and directions against iperf3 -P N and -R; writes streams.md.
fn streams_run(
    args: &Args,
    streams: &[u8],
    bin_dir: std::path::PathBuf,
    server: Option<tsperf_lab::harness::ServerProcess>,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        (0.1..=3600.0).contains(&args.time),
        "invalid --time '{}': expected seconds from 0.1 to 3600",
        args.time
    );
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let cfg = crate::streams::StreamsConfig {
        streams: streams.to_vec(),
        secs: args.time,
        reps: args.reps,
        file: args.file.clone(),
        host: args.host.clone(),
        client_wrap: words(&args.client_wrap),
        network: args.network.clone(),
        tsperf_port: args
            .tsperf_port
            .or(server.as_ref().map(|s| s.port))
            .unwrap_or_default(),
        iperf3_port: args.iperf3_port,
        bin_dir: bin_dir.clone(),
    };
    let rows = crate::streams::run(&cfg, |r| {
        println!(
            "{} streams {}: tsperf {:.2}, iperf3 {:.2} Gbit/s",
            r.streams,
            if r.reverse { "reverse" } else { "forward" },
            r.tsperf_gbit,
            r.iperf3_gbit
        )
    })?;
    drop(server);
    let md = crate::streams::markdown(&rows, &cfg, &machine::probe(&args.commit));
    std::fs::create_dir_all(&args.out)?;
    tsperf_lab::folder::write_atomic(&args.out.join("streams.md"), md.as_bytes())?;
    cli::print(&format!("\n{md}"))?;
    Ok(ExitCode::SUCCESS)
}

/// tspeers's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tspeers's `main`.
pub fn main() -> ExitCode {
    cli::main("tspeers", || {
        let args = Args::parse();
        let bin_dir = cli::bin_dir();
        let len = cli::file_len(&args.file)?;
        let remote = args.host != "127.0.0.1"
            || !args.server_wrap.is_empty()
            || !args.client_wrap.is_empty();
        anyhow::ensure!(
            args.streams.is_some() || !remote,
            "--host, --server-wrap and --client-wrap apply to --streams (the per-chunk \
             comparison runs on loopback)"
        );
        let server_wrap: Vec<String> = args
            .server_wrap
            .split_whitespace()
            .map(String::from)
            .collect();
        let server = match args.tsperf_port {
            Some(_) => None,
            None => Some(peers::start_tsserver(&bin_dir, &args.host, &server_wrap)?),
        };
        if args.steady {
            return steady_run(&args, bin_dir, server);
        }
        if let Some(streams) = &args.streams {
            return streams_run(&args, streams, bin_dir, server);
        }
        let cfg = PeersConfig {
            file: args.file.clone(),
            chunks: args.chunks.clone(),
            reps: args.reps,
            tsperf_port: args
                .tsperf_port
                .or(server.as_ref().map(|s| s.port))
                .unwrap_or_default(),
            iperf3_port: args.iperf3_port,
            bin_dir,
        };
        let rows = peers::run(&cfg, |r| {
            println!(
                "chunk {:>5}: floor {:>8.1} (verified {:>8.1}), tsperf {:>8.1} (nonblocking {:>8.1}, writev {:>8.1}), iperf3 {:>8.1} MiB/s; tsperf/iperf3 {:.2}, tsperf/floor {:.2}",
                r.chunk,
                r.floor_mib_s,
                r.verified_floor_mib_s,
                r.tsperf_mib_s,
                r.nonblocking_mib_s,
                r.writev_mib_s,
                r.iperf3_mib_s,
                r.vs_iperf3(),
                r.vs_floor()
            )
        })?;
        drop(server);
        let report = PeersReport {
            rows,
            file: args.file.clone(),
            file_len: len,
            reps: args.reps,
            machine: machine::probe(&args.commit),
        };
        tsperf_lab::report::export(&report, &peers::exporters(), &args.out)?;
        let md = PeersMarkdown.serialize(&report)?;
        cli::print(&format!("\n{}", String::from_utf8_lossy(&md)))?;
        Ok(ExitCode::SUCCESS)
    })
}
