//! tsprobe: the Prometheus exporter of tsperf runs (see `tsperf_probe`): flags, then serve.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use tsperf_metrics::http::{self, Handler, Limits, Request};
use tsperf_probe::{Config, Exporter};

use crate::cli;

/// Serve Prometheus's /probe?target=HOST[:PORT]: each scrape runs one verified tsclient
/// transfer (or latency run) against the target's tsserver within the scrape's timeout and
/// answers with its figures as gauges. /metrics has the exporter's own counters.
#[derive(Parser)]
#[command(name = "tsprobe", version = crate::cli::VERSION)]
struct Args {
    /// Address to listen on: HOST:PORT, or :PORT for every interface.
    #[arg(long, default_value = ":9874", value_name = "ADDR")]
    listen: String,
    /// The tsclient to run; by default the one beside tsprobe, else tsclient on PATH.
    #[arg(long, value_name = "PATH")]
    tsclient: Option<PathBuf>,
    /// Probes at once, over every target; a scrape past them is answered 503 with the reason.
    /// One probe a target at a time whatever this says.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    max_probes: u16,
    /// HTTP connections at once (a scrape is one); one past them is answered 503 at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096), value_name = "N")]
    max_connections: u16,
    /// Seconds a probe has when the scrape does not say (Prometheus sends
    /// X-Prometheus-Scrape-Timeout-Seconds).
    #[arg(long, default_value_t = 10.0, value_parser = cli::parse_secs, value_name = "SECONDS")]
    default_timeout: f64,
    /// Seconds taken off the scrape's timeout, so the answer arrives before Prometheus gives
    /// up.
    #[arg(long, default_value_t = 0.5, value_parser = parse_offset, value_name = "SECONDS")]
    timeout_offset: f64,
}

fn parse_offset(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=60.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid offset '{s}': expected seconds from 0 to 60"
        )),
    }
}

/// The tsclient every probe runs, found at start so that a wrong one is an error now rather
/// than a failed probe at every scrape: `--tsclient`, else the one beside tsprobe, else PATH's.
fn find_tsclient(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        anyhow::ensure!(
            path.is_file(),
            "--tsclient '{}': no such file (expected the path of a tsclient)",
            path.display()
        );
        return Ok(path);
    }
    let beside = cli::bin_dir().join("tsclient");
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("tsclient"))
            .find(|p| p.is_file())
    });
    [Some(beside), on_path]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!("no tsclient beside tsprobe nor on PATH: give its path with --tsclient")
        })
}

/// tsprobe's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsprobe's `main`.
pub fn main() -> ExitCode {
    cli::main("tsprobe", || {
        let args = Args::parse();
        cli::init_diagnostics();
        let tsclient = find_tsclient(args.tsclient)?;
        let exporter = Arc::new(Exporter::new(Config {
            tsclient,
            max_probes: usize::from(args.max_probes),
            default_timeout: Duration::from_secs_f64(args.default_timeout),
            timeout_offset: Duration::from_secs_f64(args.timeout_offset),
        }));
        let listener = http::bind(&args.listen).context("--listen")?;
        eprintln!(
            "tsprobe: listening on http://{}/ (/probe?target=HOST[:PORT], /metrics)",
            listener.local_addr()?
        );
        let handler: Handler = Arc::new(move |r: &Request| exporter.handle(r));
        let limits = Limits {
            connections: usize::from(args.max_connections),
            // A probe's answer waits for its run: allow the longest scrape.
            write_timeout: Duration::from_secs(60),
            ..Limits::default()
        };
        let served = http::serve(listener, limits, handler)?;
        let _ = served.join();
        Ok(ExitCode::SUCCESS)
    })
}
