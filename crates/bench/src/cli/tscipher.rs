//! tscipher: the cipher's own cost beside tsperf over TLS (run by scripts/cipher.sh).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cipher::{self, CipherConfig};
use crate::cli;
use clap::Parser;
use tsperf_lab::machine;
use tsperf_results::units;

/// Seal and open each TLS 1.3 suite in memory (rustls, no socket), then run tsclient clear
/// and over TLS against one tsserver, alternating, and write cipher.md and cipher.json into
/// --out: whether an end over TLS costs no more than its clear run plus the cipher's own cost.
#[derive(Parser)]
#[command(name = "tscipher", version = crate::cli::VERSION)]
struct Args {
    /// Bytes per run, and sealed and opened in memory.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    bytes: u64,
    /// Bytes per write.
    #[arg(long, default_value = "10240", value_parser = units::parse_chunk, value_name = "BYTES")]
    chunk: u32,
    /// Alternating pairs per suite (the medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// Directory for cipher.md and cipher.json.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// The tsperf commit to name in the report.
    #[arg(long, default_value = "unknown")]
    commit: String,
}

fn parse_size(text: &str) -> Result<u64, String> {
    units::parse_size(text)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid size '{text}': expected bytes, e.g. 1GiB or 256MiB"))
}

/// tscipher's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// tscipher's `main`.
pub fn main() -> ExitCode {
    cli::main("tscipher", || {
        let args = Args::parse();
        let cfg = CipherConfig {
            bin_dir: cli::bin_dir(),
            bytes: args.bytes,
            chunk: args.chunk,
            reps: args.reps,
        };
        let rows = cipher::run(&cfg, |r| {
            eprintln!(
                "tscipher: {:<17} seal {:.3} open {:.3} s/GiB; client {:.2}×, server {:.2}× of clear + cipher",
                r.cipher,
                r.encrypt_s_per_gib,
                r.decrypt_s_per_gib,
                r.client_ratio(),
                r.server_ratio()
            )
        })?;
        let m = machine::probe(&args.commit);
        let md = cipher::markdown(&rows, &cfg, &m);
        std::fs::create_dir_all(&args.out)?;
        tsperf_lab::folder::write_atomic(&args.out.join("cipher.md"), md.as_bytes())?;
        let json = serde_json::json!({ "machine": m, "bytes": cfg.bytes, "chunk": cfg.chunk,
            "reps": cfg.reps, "rows": rows });
        tsperf_lab::folder::write_atomic(
            &args.out.join("cipher.json"),
            serde_json::to_string_pretty(&json)?.as_bytes(),
        )?;
        cli::print(&md)?;
        Ok(ExitCode::SUCCESS)
    })
}
