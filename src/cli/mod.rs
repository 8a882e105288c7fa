//! The command-line edge: what every binary shares (diagnostics set-up, and turning a result
//! into the process's output and exit code: 0 ok, 1 failure, 2 usage, 130 interrupted; clap exits
//! 2 on its own errors), and the front end of every program ([`tsclient`], [`tsserver`], the
//! grid's tools), each a module with its `main` and its clap [`Command`](clap::Command), from
//! which [`docs`] makes the man pages and shell completions. Every binary is
//! `fn main() -> ExitCode { cli::NAME::main() }`, and each `main` is `cli::main(NAME, run)`
//! around a `run() -> Result<ExitCode>`.

pub mod docs;
pub mod tsclient;
pub mod tsgen;
pub mod tsmatrix;
pub mod tsprobe;
pub mod tsreport;
pub mod tsserver;
pub(crate) mod values;

use std::io;

use tracing_subscriber::EnvFilter;

pub use tsperf_sys::program::FAILURE;

/// The diagnostics filter: `RUST_LOG`, or `warn` when unset or invalid.
pub fn env_filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"))
}

/// Sends diagnostics (`RUST_LOG`, default `warn`) to stderr, never to stdout; coloured only on
/// a terminal ([`tsperf_sys::term::colour`]).
pub fn init_diagnostics() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(env_filter())
        .with_ansi(tsperf_sys::term::colour(libc::STDERR_FILENO))
        .with_writer(io::stderr)
        .try_init();
}

/// The server's diagnostics: the same, written through its console as messages that are
/// dropped (and counted) rather than wait for a stderr nobody reads.
pub fn init_server_diagnostics(
    console: &std::sync::Arc<tsperf_server::console::Console>,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tsperf_server::console::{Messages, Stream};
    tracing_subscriber::fmt()
        .with_env_filter(env_filter())
        .with_ansi(tsperf_sys::term::colour(libc::STDERR_FILENO))
        .with_writer(Messages(console.clone(), Stream::Err))
        .try_init()
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("cannot install the diagnostics")
}

pub use tsperf_sys::program::{bin_dir, fail, file_len, main, print};

/// The shortest timeout a flag takes: below a millisecond no deadline can be kept, and the
/// error would read "no answer within 0 s".
pub const MIN_SECS: f64 = 0.001;
/// The longest: a day.
pub const MAX_SECS: f64 = 86_400.0;

/// Parses a timeout or a grace period in seconds, [`MIN_SECS`] to [`MAX_SECS`].
pub fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (MIN_SECS..=MAX_SECS).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid timeout '{s}': expected seconds from {MIN_SECS} (1 ms) to {MAX_SECS}"
        )),
    }
}

/// Exit code after Ctrl-C, as shells report a SIGINT death.
pub const INTERRUPTED: i32 = tsperf_client::interrupt::EXIT_CODE;

/// Set when the run prints one JSON object (`--json`): the mode it names.
static JSON_MODE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
/// Set when the run prints JSON lines as things happen (`--json-stream`): its result is the
/// last line, an `end` event.
static JSON_STREAM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The run's result has been printed (at most once, whoever gets there first).
static PRINTED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

/// This run prints one JSON object on stdout whatever happens (`--json`), for `mode`: usage
/// errors and failures print theirs ([`usage_error`], [`print_result`]).
pub fn set_json_mode(mode: &'static str) {
    let _ = JSON_MODE.set(mode);
}

/// This run writes JSON lines (`--json-stream`): its one object comes as the last line.
pub fn set_json_stream() {
    JSON_STREAM.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// True in a `--json-stream` run.
pub fn json_stream() -> bool {
    JSON_STREAM.load(std::sync::atomic::Ordering::Relaxed)
}

/// The text of a run's one object: pretty (`--json`), or the `end` line (`--json-stream`).
pub fn json_text(o: &tsperf_results::json::ClientOutput) -> String {
    use tsperf_client::output;
    if json_stream() {
        output::json_line(&tsperf_results::json::Event::End(o.clone())) + "\n"
    } else {
        output::to_json(o) + "\n"
    }
}

/// True if `flag` is among the program's arguments (before a `--`).
pub fn flag_given(flag: &str) -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == flag)
}

/// The mode of a `--json` run, if this is one.
pub fn json_mode() -> Option<&'static str> {
    JSON_MODE.get().copied()
}

/// True if `--json` (`-J`, alone or in a cluster of short flags such as `-RJ`) or
/// `--json-stream` is among the program's arguments (before a `--`), as `cmd` defines them:
/// known before they are parsed, so even a usage error prints its object.
pub fn json_asked(cmd: &clap::Command) -> bool {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    json_in(cmd, &args)
}

/// [`json_asked`] of `args`.
fn json_in(cmd: &clap::Command, args: &[String]) -> bool {
    // The short flags that take a value: in a cluster, the rest of it is that value.
    let valued: Vec<char> = cmd
        .get_arguments()
        .filter(|a| a.get_action().takes_values())
        .filter_map(clap::Arg::get_short)
        .collect();
    // A value given as an argument of its own never starts with `-` (clap reads `-c -J` as a
    // missing host and `-J`), so only arguments that do are looked at.
    for a in args.iter().take_while(|a| *a != "--") {
        if a == "--json" || a == "--json-stream" {
            return true;
        }
        let Some(cluster) = a.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
            continue;
        };
        for c in cluster.chars() {
            if c == 'J' {
                return true;
            }
            if valued.contains(&c) {
                break;
            }
        }
    }
    false
}

/// What `--version` prints after the program's name: the release and the commit it was built
/// from (`unknown` outside a repository).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TSPERF_COMMIT"),
    ")"
);

/// Prints the run's result on stdout, unless one was printed already (the run and the signal
/// thread's last resort may both try: exactly one object comes out).
pub fn print_result(text: &str) -> io::Result<()> {
    let mut printed = PRINTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *printed {
        return Ok(());
    }
    *printed = true;
    print(text)
}

/// With `--json`, prints the failure's object (unless a result was printed already).
pub fn print_failure_json(err: &anyhow::Error) {
    if let Some(mode) = json_mode() {
        let _ = print_result(&json_text(&tsperf_client::output::failure_json(mode, err)));
    }
}

/// True if the argument `id` was given on the command line (not taken from its default).
pub fn given(m: &clap::ArgMatches, id: &str) -> bool {
    m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
}

/// Exits with clap's usage-error format and code 2: `msg` names the flag and what it needs.
pub fn usage_error<A: clap::CommandFactory>(msg: impl std::fmt::Display) -> ! {
    clap_exit(A::command().error(clap::error::ErrorKind::ArgumentConflict, msg))
}

/// Exits as clap does for `e` (help and version on stdout, exit 0; a usage error on stderr,
/// exit 2), first printing, in a `--json` run, the usage error's object
/// (`{"error": ..., "usage": true}`).
pub fn clap_exit(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let asked = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if let (Some(mode), false) = (json_mode(), asked) {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        let msg = first.strip_prefix("error: ").unwrap_or(first);
        let _ = print_result(&json_text(&tsperf_client::output::usage_json(mode, msg)));
    }
    e.exit()
}

/// Loads a key file for `--auth-key`; the warning, if any, is for the caller to print.
pub fn load_key(
    path: &std::path::Path,
) -> anyhow::Result<(std::sync::Arc<tsperf_sys::auth::Key>, Option<String>)> {
    let (key, warning) = tsperf_sys::auth::Key::load(path)?;
    Ok((std::sync::Arc::new(key), warning))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 51 (9): `-J` is seen alone and in a cluster of short flags, never in a value.
    #[test]
    fn json_is_seen_in_clusters_not_in_values() {
        let cmd = tsclient::command();
        let seen = |args: &[&str]| {
            json_in(
                &cmd,
                &args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            )
        };
        for yes in [
            &["-J"][..],
            &["-RJ"],
            &["-JR"],
            &["-R", "-J"],
            &["--json"],
            &["--json-stream"],
            &["-Rc", "h", "-J"],
            &["-c", "-J"],
        ] {
            assert!(seen(yes), "{yes:?}");
        }
        for no in [
            &["-cJ"][..],
            &["-RcJ"],
            &["--", "-J"],
            &["-R"],
            &["--jsonx"],
        ] {
            assert!(!seen(no), "{no:?}");
        }
    }
}
