//! tsgen: write the deterministic test file (the field report's 36 MiB `tsl.txt` by default).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli;
use clap::Parser;
use tsperf_results::units;
use tsperf_sys::testdata;

/// Write SIZE bytes of deterministic text to PATH: the same size always gives the same bytes.
#[derive(Parser)]
#[command(name = "tsgen", version = crate::cli::VERSION)]
struct Args {
    /// Bytes to write; suffixes k/KiB/m/MiB/g/GiB (k = 1024).
    #[arg(long, default_value = "36MiB", value_parser = parse_len, value_name = "SIZE")]
    size: u64,
    /// Where to write the file.
    path: PathBuf,
}

fn parse_len(s: &str) -> Result<u64, String> {
    units::parse_size(s).ok_or_else(|| format!("invalid size '{s}': expected bytes such as 36MiB"))
}

/// tsgen's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsgen's `main`.
pub fn main() -> ExitCode {
    cli::main("tsgen", || {
        let args = Args::parse();
        testdata::generate(&args.path, args.size)?;
        Ok(ExitCode::SUCCESS)
    })
}
