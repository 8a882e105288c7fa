//! tsreport: render a grid's tables and charts again from its raw runs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli;
use anyhow::Context;
use clap::Parser;
use tsperf_lab::report::markdown;
use tsperf_lab::report::{self, Setup};

/// Read DIR/runs.jsonl and DIR/setup.json and write matrix.md, matrix.csv and the SVG charts
/// into DIR again; print the tables. With --verdicts, read DIR/verdicts.jsonl (from
/// scripts/verdicts.sh) and write DIR/verdicts.md.
#[derive(Parser)]
#[command(name = "tsreport", version = crate::cli::VERSION)]
struct Args {
    /// A results directory written by scripts/matrix.sh (or scripts/verdicts.sh).
    dir: PathBuf,
    /// Render the verdict's truth table (verdicts.jsonl to verdicts.md) instead of the grid.
    /// The machine is read from DIR/verdicts-machine.json, written when missing.
    #[arg(long)]
    verdicts: bool,
    /// The tsperf commit, for a verdicts-machine.json written now.
    #[arg(long, default_value = "unknown")]
    commit: String,
}

/// tsreport's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsreport's `main`.
pub fn main() -> ExitCode {
    cli::main("tsreport", || {
        let args = Args::parse();
        if args.verdicts {
            return verdicts(&args);
        }
        let runs = report::read_runs(&args.dir.join("runs.jsonl"))?;
        let setup_path = args.dir.join("setup.json");
        let text = std::fs::read_to_string(&setup_path)
            .with_context(|| format!("cannot read '{}'", setup_path.display()))?;
        let setup: Setup = serde_json::from_str(&text)
            .with_context(|| format!("'{}' is not a grid setup", setup_path.display()))?;
        let m = report::aggregate(setup, &runs);
        report::export_all(&m, &args.dir)?;
        cli::print(&markdown::render(&m))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `tsreport --verdicts DIR`.
fn verdicts(args: &Args) -> anyhow::Result<ExitCode> {
    let (_, md) = tsperf_lab::verdicts::write_report(&args.dir, &args.commit)?;
    cli::print(&md)?;
    Ok(ExitCode::SUCCESS)
}
