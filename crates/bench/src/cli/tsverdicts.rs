//! tsverdicts: the verdict's truth table (run by scripts/verdicts.sh).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::verdicts::{self, cases, make};
use clap::Parser;

use crate::cli;

/// Make each limit of the verdict's table on purpose (a small send buffer, a slow log reader,
/// CPU quotas on either end, a slow disk, a shaped link between two namespaces), run tsclient
/// against a fresh tsserver under it, and write verdicts.jsonl and verdicts.md into --out:
/// what tsperf said limited each run beside what was made. Cases that need root (control
/// groups v1 or v2, namespaces, a loop device) are skipped without it, saying why.
#[derive(Parser)]
#[command(name = "tsverdicts", version = crate::cli::VERSION)]
struct Args {
    /// Where verdicts.jsonl and verdicts.md go (default results/; with --quick,
    /// results/tmp/verdicts).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runs per case: a verdict must hold in each.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=99))]
    reps: u32,
    /// Small files and one run per case: the fast subset the tests run.
    #[arg(long)]
    quick: bool,
    /// Only these cases, comma-separated (names as in the table).
    #[arg(long, value_delimiter = ',', value_parser = case_name, value_name = "LIST")]
    only: Vec<String>,
    /// The directory holding tsserver and tsclient (default: this program's own).
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Run nothing: render DIR/verdicts.md again from DIR/verdicts.jsonl, with the machine from
    /// DIR/verdicts-machine.json (written, probed now, when missing), and print it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "reps", "quick", "only", "bin_dir"])]
    render: Option<PathBuf>,
}

fn case_name(s: &str) -> Result<String, String> {
    let known = cases::CASES
        .iter()
        .map(|c| c.name)
        .chain(cases::NOT_MADE.iter().map(|(n, _)| *n));
    if known.clone().any(|n| n == s) {
        return Ok(s.to_owned());
    }
    Err(format!(
        "unknown case '{s}': expected one of {}",
        known.collect::<Vec<_>>().join(", ")
    ))
}

/// tsverdicts's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tsverdicts's `main`.
pub fn main() -> ExitCode {
    cli::main("tsverdicts", || {
        let args = Args::parse();
        if let Some(dir) = &args.render {
            let (_, md) = verdicts::write_report(dir, &commit())?;
            cli::print(&md)?;
            return Ok(ExitCode::SUCCESS);
        }
        let out = args.out.clone().unwrap_or_else(|| {
            PathBuf::from(if args.quick {
                "results/tmp/verdicts"
            } else {
                "results"
            })
        });
        let opts = make::Options {
            out: out.clone(),
            reps: if args.quick { 1 } else { args.reps },
            quick: args.quick,
            only: args.only.clone(),
            bin: args.bin_dir.clone().unwrap_or_else(cli::bin_dir),
            top: std::env::current_dir()?,
        };
        // Ctrl-C ends the run between two runs of a case, the namespaces, groups and disk
        // taken down on the way out (the client, in this process group, stops at once).
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())?;
        }
        match make::make(&opts, &stop) {
            Ok(_) => {}
            Err(e) if e.is::<make::Interrupted>() => {
                eprintln!("tsverdicts: {e}");
                return Ok(ExitCode::from(cli::INTERRUPTED as u8));
            }
            Err(e) => return Err(e),
        }
        // The machine these runs were made on, probed now.
        let _ = std::fs::remove_file(out.join("verdicts-machine.json"));
        let (md_path, _) = verdicts::write_report(&out, &commit())?;
        eprintln!(
            "tsverdicts: wrote {} and {}",
            out.join("verdicts.jsonl").display(),
            md_path.display()
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// The checked-out commit, short; `unknown` outside a repository.
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".to_owned(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        })
}
