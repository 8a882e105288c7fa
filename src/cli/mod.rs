//! The command-line edge: what every binary shares (diagnostics set-up, and turning a result
//! into the process's output and exit code: 0 ok, 1 failure, 2 usage, 130 interrupted; clap exits
//! 2 on its own errors), and the front ends of the two main programs ([`tsclient`],
//! [`tsserver`]). Every binary is `fn main() -> ExitCode { cli::main(NAME, run) }` around a
//! `run() -> Result<ExitCode>`.

pub mod tsclient;
pub mod tsserver;

use std::io::{self, Write};
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// Exit code for a failed run.
pub const FAILURE: u8 = 1;

/// The diagnostics filter: `RUST_LOG`, or `warn` when unset or invalid.
pub fn env_filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"))
}

/// Sends diagnostics (`RUST_LOG`, default `warn`) to stderr, never to stdout; coloured only on
/// a terminal ([`colour`]).
pub fn init_diagnostics() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(env_filter())
        .with_ansi(colour(libc::STDERR_FILENO))
        .with_writer(io::stderr)
        .try_init();
}

/// True if output to `fd` may be coloured: it is a terminal and `NO_COLOR` is not set
/// (<https://no-color.org>: any non-empty value).
pub fn colour(fd: i32) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && crate::console::kind_of(fd) == crate::protocol::StdoutKind::Terminal
}

/// Runs a program's `run` and turns its result into the exit code: an error is printed as
/// `prog: error: ...` with its whole cause chain ([`fail`]) and exits 1.
pub fn main(prog: &str, run: impl FnOnce() -> anyhow::Result<ExitCode>) -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => fail(prog, &e),
    }
}

/// Prints `text` on stdout. A closed pipe on stdout is not a crash and not worth a message.
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Prints `prog: error: ...` with the whole cause chain and returns the failure exit code. The
/// chain may quote the peer (a reason, a name, a decoder's complaint about its bytes), so it is
/// printed with control and bidi characters escaped ([`crate::text::Peer`]).
pub fn fail(prog: &str, err: &anyhow::Error) -> ExitCode {
    eprintln!("{prog}: error: {}", crate::text::Peer(&format!("{err:#}")));
    ExitCode::from(FAILURE)
}

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
pub const INTERRUPTED: i32 = 130;

/// On SIGINT or SIGTERM: clears the progress bar, says how far the transfer got, exits 130.
pub fn exit_on_interrupt(
    prog: &'static str,
    progress: crate::progress::Progress,
) -> io::Result<()> {
    on_signal(move || {
        progress.clear();
        let (sent, total) = (progress.sent(), progress.total());
        if total > 0 {
            eprintln!("{prog}: interrupted after sending {sent} of {total} bytes");
        } else {
            eprintln!("{prog}: interrupted");
        }
        std::process::exit(INTERRUPTED);
    })
}

/// How long a run asked to stop by a signal has to stop by itself before the process exits.
pub const STOP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// On SIGINT or SIGTERM: clears the progress bar and sets the returned flag, so the run can stop
/// and report what it measured; if it has not ended within [`STOP_PATIENCE`] (stuck in a wait),
/// says so and exits 130.
pub fn stop_on_interrupt(
    prog: &'static str,
    progress: crate::progress::Progress,
) -> io::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    on_signal(move || {
        progress.clear();
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(STOP_PATIENCE);
        eprintln!("{prog}: interrupted");
        std::process::exit(INTERRUPTED);
    })?;
    Ok(stop)
}

/// Runs `action` on a helper thread when the first SIGINT or SIGTERM arrives.
pub fn on_signal(action: impl FnOnce() + Send + 'static) -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                action();
            }
        })?;
    Ok(())
}

/// True if the argument `id` was given on the command line (not taken from its default).
pub fn given(m: &clap::ArgMatches, id: &str) -> bool {
    m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
}

/// Exits with clap's usage-error format and code 2: `msg` names the flag and what it needs.
pub fn usage_error<A: clap::CommandFactory>(msg: impl std::fmt::Display) -> ! {
    A::command()
        .error(clap::error::ErrorKind::ArgumentConflict, msg)
        .exit()
}

/// Loads a key file for `--auth-key`; the warning, if any, is for the caller to print.
pub fn load_key(
    path: &std::path::Path,
) -> anyhow::Result<(std::sync::Arc<crate::auth::Key>, Option<String>)> {
    let (key, warning) = crate::auth::Key::load(path)?;
    Ok((std::sync::Arc::new(key), warning))
}

/// The directory this program's binary is in, where its sibling binaries (tsserver, tsclient)
/// are; empty (the current directory) when the system will not say.
pub fn bin_dir() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(std::path::PathBuf::from))
        .unwrap_or_default()
}
