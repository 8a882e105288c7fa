//! tsreport: render a grid's tables and charts again from its raw runs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli;
use anyhow::Context;
use clap::Parser;
use tsperf_lab::report;
use tsperf_lab::report::markdown;

/// Read DIR/runs.jsonl and DIR/setup.json and write matrix.md, matrix.csv and the SVG charts
/// into DIR again; print the tables. With --compare OLD NEW, put two grid runs
/// side by side cell by cell and write compare.md and compare.svg into NEW (or --out).
#[derive(Parser)]
#[command(name = "tsreport", version = crate::cli::VERSION)]
struct Args {
    /// A results directory written by scripts/matrix.sh.
    #[arg(required_unless_present = "compare")]
    dir: Option<PathBuf>,
    /// Compare two grid runs (results directories of scripts/matrix.sh): each cell's ratio of
    /// medians (new / old), the spread of each, and whether the difference is beyond the runs'
    /// own noise (an exact Mann-Whitney U test over the repetitions, p < 0.05). Runs of another
    /// file, chunk set or host pair are refused.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], conflicts_with = "dir")]
    compare: Option<Vec<PathBuf>>,
    /// With --compare: where compare.md and compare.svg go (default: NEW).
    #[arg(long, requires = "compare", value_name = "DIR")]
    out: Option<PathBuf>,
}

/// tsreport's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsreport's `main`.
pub fn main() -> ExitCode {
    cli::main("tsreport", || {
        let args = Args::parse();
        if let Some(dirs) = &args.compare {
            return compare(&dirs[0], &dirs[1], args.out.as_deref());
        }
        // Without --compare, clap has required DIR.
        let dir = args.dir.clone().unwrap_or_default();
        let (setup, runs) = tsperf_lab::folder::read_grid(&dir)?;
        let m = report::aggregate(setup, &runs);
        report::export_all(&m, &dir)?;
        cli::print(&markdown::render(&m))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `tsreport --compare OLD NEW`.
fn compare(
    old: &std::path::Path,
    new: &std::path::Path,
    out: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    use tsperf_lab::compare;
    let c = compare::compare(old, new)?;
    let name = |p: &std::path::Path| p.display().to_string();
    let md = compare::markdown(&c, &name(old), &name(new));
    let out = out.unwrap_or(new);
    std::fs::create_dir_all(out).with_context(|| format!("cannot make '{}'", out.display()))?;
    for (file, bytes) in [
        ("compare.md", md.clone().into_bytes()),
        ("compare.svg", compare::chart(&c, &name(old), &name(new))?),
    ] {
        tsperf_lab::folder::write_atomic(&out.join(file), &bytes)?;
    }
    cli::print(&md)?;
    Ok(ExitCode::SUCCESS)
}
