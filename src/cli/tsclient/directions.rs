//! tsclient's other directions: `--reverse` (the server sends) and `--bidir` (both at once),
//! their flag checks and their runs.

use std::process::ExitCode;

use anyhow::Context;

use super::{Args, LogArg};
use crate::cli;
use tsperf_client::{self as client, output, progress::Progress};

/// Refuses (exit 2) what a reverse or two-way run cannot take.
pub(super) fn check(m: &clap::ArgMatches, args: &Args) {
    if args.bytes.is_some() && !args.reverse && !args.bidir && args.file.is_some() {
        cli::usage_error::<Args>(
            "--bytes sizes the generated stream, and a forward run with FILE sends FILE: give \
             FILE or --bytes, not both (with --reverse or --bidir, --bytes is what the server \
             sends)"
                .to_owned(),
        );
    }
    if args.reverse
        && let Some(name) = &args.file
        && (args.bytes.is_some() || name.components().count() != 1 || name.file_name().is_none())
    {
        cli::usage_error::<Args>(if args.bytes.is_some() {
            "--reverse takes --bytes (the generated stream) or a NAME the server serves, not both"
                .to_owned()
        } else {
            format!(
                "--reverse NAME takes the plain name of a file the server serves (--serve), not \
                 a path: '{}'",
                name.display()
            )
        });
    }
    if !args.reverse && (args.log.is_some() || cli::given(m, "log_file")) {
        cli::usage_error::<Args>(
            "--log and --log-file apply to --reverse (this end receives); the server's sink is \
             --server-log"
                .to_owned(),
        );
    }
    if args.json && matches!(args.log, Some(LogArg::Stdout)) {
        cli::usage_error::<Args>(
            "--log stdout and --json both write to stdout: use --log file, or leave out --json"
                .to_owned(),
        );
    }
    if args.reverse {
        // What the client's writes are, it does not write: the server's writes are --chunk.
        for (given, flag) in [
            (cli::given(m, "strategy"), "--io"),
            (args.batch.is_some(), "--batch"),
            (args.sndbuf.is_some(), "--sndbuf"),
            (args.server_log.is_some(), "--server-log"),
        ] {
            if given {
                cli::usage_error::<Args>(format!(
                    "{flag} does not apply to --reverse (the server sends; --chunk sets its writes)"
                ));
            }
        }
    }
}

/// The length of what `cfg` sends: the generated stream's, or the file's.
fn file_len(cfg: &client::StreamConfig) -> anyhow::Result<u64> {
    match cfg.generated {
        Some(len) => Ok(len),
        None => Ok(std::fs::metadata(&cfg.file)
            .with_context(|| format!("cannot open file '{}'", cfg.file.display()))?
            .len()),
    }
}

/// Both directions at once: each printed, each verified.
pub(super) fn bidir_run(args: &Args, cfg: &client::StreamConfig) -> anyhow::Result<ExitCode> {
    let bytes = args
        .bytes
        .unwrap_or_else(|| file_len(cfg).unwrap_or(tsperf_sys::testdata::SEED_FILE_LEN));
    if let Some(n) = args.parallel.filter(|&n| n > 1) {
        return bidir_parallel_run(args, cfg, n, bytes);
    }
    let b = client::bidir::run_bidir(cfg, bytes.max(1));
    let text = if args.json {
        output::bidir_json(&b) + "\n"
    } else {
        output::bidir_human(&b)
    };
    cli::print_result(&text)?;
    // A Ctrl-C that had to cut a direction off is still an interruption (issue 32).
    let interrupted = matches!(&b.forward, Ok(r) if r.timed.is_some_and(|t| t.interrupted))
        || matches!(&b.reverse, Ok(r) if r.interrupted)
        || matches!(&b.forward, Err(f) if f.interrupted)
        || matches!(&b.reverse, Err(f) if f.interrupted);
    let mut errors = Vec::new();
    match &b.forward {
        Ok(r) if !r.verified() => errors.push(format!("to the server: {}", output::mismatch(r))),
        Err(f) if !f.interrupted => errors.push(format!("to the server: {:#}", f.error)),
        _ => {}
    }
    match &b.reverse {
        Ok(r) if !r.verified() => {
            errors.push(format!("from the server: {}", output::reverse_mismatch(r)));
        }
        Err(f) if !f.interrupted => errors.push(format!("from the server: {:#}", f.error)),
        _ => {}
    }
    if !errors.is_empty() {
        anyhow::bail!(errors.join("; "));
    }
    if interrupted {
        match (&b.forward, &b.reverse) {
            (Ok(_), Ok(_)) => {
                eprintln!("tsclient: interrupted, both directions verified up to the stop");
            }
            (f, r) => {
                for (side, e) in [
                    ("to the server", f.as_ref().err()),
                    ("from the server", r.as_ref().err()),
                ] {
                    if let Some(f) = e {
                        eprintln!("tsclient: interrupted; {side}: {:#}", f.error);
                    }
                }
            }
        }
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    Ok(ExitCode::SUCCESS)
}

/// A reverse stream: the server sends, this client receives and verifies.
pub(super) fn reverse_run(
    args: &Args,
    cfg: &client::StreamConfig,
    progress: &mut Progress,
) -> anyhow::Result<ExitCode> {
    let (bytes, name) = match &args.file {
        Some(name) => (0, name.to_string_lossy().into_owned()),
        None => (
            args.bytes.unwrap_or(tsperf_sys::testdata::SEED_FILE_LEN),
            String::new(),
        ),
    };
    let result = match client::reverse::run_reverse(cfg, bytes, &name, progress) {
        Ok(r) => r,
        Err(f) => {
            // What arrived is said, with --json in the one object.
            if args.json {
                cli::print_result(&(output::reverse_failure_json(&f) + "\n"))?;
            }
            if f.interrupted {
                eprintln!("tsclient: interrupted after receiving {} bytes", f.sent);
                return Ok(ExitCode::from(cli::INTERRUPTED as u8));
            }
            return Err(f.error);
        }
    };
    let text = if args.json {
        output::reverse_json(&result) + "\n"
    } else {
        output::reverse_human(&result)
    };
    cli::print_result(&text)?;
    if !result.verified() {
        anyhow::bail!(output::reverse_mismatch(&result));
    }
    if result.interrupted {
        eprintln!(
            "tsclient: interrupted after receiving {} bytes, every one verified",
            result.bytes
        );
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    Ok(ExitCode::SUCCESS)
}

/// One session of `n` streams: a line each and a SUM line, every stripe verified.
pub(super) fn parallel_run(
    args: &Args,
    cfg: &client::StreamConfig,
    n: u8,
) -> anyhow::Result<ExitCode> {
    let len = file_len(cfg)?;
    let p = client::parallel::run_parallel(cfg, n, len).map_err(anyhow::Error::msg)?;
    let text = if args.json {
        output::parallel_json(&p) + "\n"
    } else {
        output::parallel_human(&p)
    };
    cli::print_result(&text)?;
    if let Some(Err(f)) = p.streams.iter().find(|s| s.is_err()) {
        if f.interrupted {
            return Ok(ExitCode::from(cli::INTERRUPTED as u8));
        }
        anyhow::bail!("a stream of the session failed: {:#}", f.error);
    }
    if !p.verified() {
        anyhow::bail!("NOT VERIFIED: the session's stripes do not all agree with the server");
    }
    if p.streams
        .iter()
        .flatten()
        .any(|r| r.timed.is_some_and(|t| t.interrupted))
    {
        eprintln!("tsclient: interrupted, every stream verified up to the stop");
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    Ok(ExitCode::SUCCESS)
}

/// A reverse session of `--parallel` streams, each a share of `--bytes` (the generated stream).
pub(super) fn parallel_reverse_run(
    args: &Args,
    cfg: &client::StreamConfig,
) -> anyhow::Result<ExitCode> {
    if args.file.is_some() {
        anyhow::bail!("--parallel with --reverse takes the generated stream (--bytes), not a NAME");
    }
    let n = args.parallel.unwrap_or(1);
    let bytes = args.bytes.unwrap_or(tsperf_sys::testdata::SEED_FILE_LEN);
    let p = client::parallel::run_parallel_reverse(cfg, n, bytes).map_err(anyhow::Error::msg)?;
    let text = if args.json {
        output::parallel_reverse_json(&p) + "\n"
    } else {
        output::parallel_reverse_human(&p)
    };
    cli::print_result(&text)?;
    if let Some(Err(f)) = p.streams.iter().find(|s| s.is_err()) {
        // Issue 32 (3): a Ctrl-C that had to cut a stream off is still an interruption.
        if f.interrupted {
            eprintln!("tsclient: interrupted: {:#}", f.error);
            return Ok(ExitCode::from(cli::INTERRUPTED as u8));
        }
        anyhow::bail!("a stream of the session failed: {:#}", f.error);
    }
    if !p.verified() {
        anyhow::bail!("NOT VERIFIED: the session's streams do not all agree with the server");
    }
    if p.streams.iter().flatten().any(|r| r.interrupted) {
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    Ok(ExitCode::SUCCESS)
}

/// `-P N --bidir`: a session of N streams each way, each stream and each whole verified.
fn bidir_parallel_run(
    args: &Args,
    cfg: &client::StreamConfig,
    n: u8,
    bytes: u64,
) -> anyhow::Result<ExitCode> {
    let len = file_len(cfg)?;
    let b = client::bidir::run_bidir_parallel(cfg, n, len, bytes.max(u64::from(n)));
    let text = if args.json {
        output::bidir_parallel_json(&b) + "\n"
    } else {
        output::bidir_parallel_human(&b)
    };
    cli::print_result(&text)?;
    let mut errors = Vec::new();
    let mut interrupted = false;
    match &b.forward {
        Err(e) => errors.push(format!("to the server: {e}")),
        Ok(p) => {
            interrupted |= p.streams.iter().any(|s| match s {
                Ok(r) => r.timed.is_some_and(|t| t.interrupted),
                Err(f) => f.interrupted,
            });
            if !p.verified() && !interrupted {
                errors.push("to the server: NOT VERIFIED: the session's stripes do not all agree with the server".into());
            }
        }
    }
    match &b.reverse {
        Err(e) => errors.push(format!("from the server: {e}")),
        Ok(p) => {
            let stopped = p.streams.iter().any(|s| match s {
                Ok(r) => r.interrupted,
                Err(f) => f.interrupted,
            });
            interrupted |= stopped;
            if !p.verified() && !stopped {
                errors.push("from the server: NOT VERIFIED: the session's streams do not all agree with the server".into());
            }
        }
    }
    if !errors.is_empty() {
        anyhow::bail!(errors.join("; "));
    }
    if interrupted {
        eprintln!("tsclient: interrupted, both sessions verified up to the stop");
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    Ok(ExitCode::SUCCESS)
}
