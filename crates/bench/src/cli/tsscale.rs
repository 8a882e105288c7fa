//! tsscale: many concurrent clients against each server model (run by scripts/scale.sh).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli;
use crate::scale::{self, ScaleConfig, ScaleMarkdown, ScaleReport};
use clap::Parser;
use tsperf_lab::machine;
use tsperf_lab::report::Exporter;
use tsperf_results::units;

/// Start a fresh tsserver per measurement, send FILE over N connections at once from an event-driven load generator (N from
/// --counts), and write scale.md, scale.json and scale.svg into --out.
#[derive(Parser)]
#[command(name = "tsscale", version = crate::cli::VERSION)]
struct Args {
    /// The file every client sends.
    #[arg(long, default_value = "testdata/tsl-quick.txt")]
    file: PathBuf,
    /// Bytes per write.
    #[arg(long, default_value = "10240", value_parser = units::parse_chunk, value_name = "BYTES")]
    chunk: u32,
    /// Concurrent client counts, comma-separated (1 to 10000 each; the blocking server is
    /// measured to 1024).
    #[arg(long, default_value = "1,2,4,8,16,32,64,128,256", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=10000))]
    counts: Vec<u32>,
    /// Server models, comma-separated.
    #[arg(long, default_value = "event-loop,blocking", value_delimiter = ',',
          value_parser = ["event-loop", "blocking"])]
    models: Vec<String>,
    /// Repetitions per cell (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// Directory for scale.md, scale.json and scale.svg.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Load generator threads: each drives its share of the clients from one poll.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), value_name = "N")]
    generator_threads: u32,
    /// The tsperf commit to name in the report.
    #[arg(long, default_value = "unknown")]
    commit: String,
}

/// tsscale's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsscale's `main`.
pub fn main() -> ExitCode {
    cli::main("tsscale", || {
        let args = Args::parse();
        let bin_dir = cli::bin_dir();
        let len = cli::file_len(&args.file)?;
        let most = args.counts.iter().copied().max().unwrap_or(1);
        tsperf_lab::harness::fds::raise_open_files(u64::from(most) + 1024)?;
        let cfg = ScaleConfig {
            file: args.file.clone(),
            chunk: args.chunk,
            counts: args.counts.clone(),
            models: args.models.clone(),
            reps: args.reps,
            bin_dir,
            // A stall is a time with no progress on any connection: well under the tests' 60 s
            // deadline, so a stalled client is reported, not killed.
            timeout: Duration::from_secs(20),
            generator_threads: args.generator_threads,
        };
        let rows = scale::run(&cfg, |r| {
            eprintln!(
                "tsscale: {:>10} {:>4} clients: {:>8.1} MiB/s, server cpu {:.2} s, peak rss {:.1} MiB ({:.1} KiB/conn)",
                r.server,
                r.clients,
                r.mib_per_s,
                r.server_cpu_s,
                r.peak_rss_kib as f64 / 1024.0,
                r.growth_per_conn_kib()
            )
        })?;
        let report = ScaleReport {
            rows,
            file: args.file.clone(),
            file_len: len,
            chunk: args.chunk,
            reps: args.reps,
            generator_threads: args.generator_threads,
            machine: machine::probe(&args.commit),
        };
        tsperf_lab::report::export(&report, &scale::exporters(), &args.out)?;
        cli::print(&String::from_utf8_lossy(&ScaleMarkdown.serialize(&report)?))?;
        Ok(ExitCode::SUCCESS)
    })
}
