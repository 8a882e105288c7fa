//! What both binaries share at their edge: diagnostics set-up, and turning a result into the
//! process's output and exit code (0 ok, 1 failure, 2 usage; clap exits 2 on its own errors).

use std::io::{self, Write};
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// Exit code for a failed run.
pub const FAILURE: u8 = 1;

/// Sends diagnostics (`RUST_LOG`, default `warn`) to stderr, never to stdout.
pub fn init_diagnostics() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .try_init();
}

/// Prints `text` on stdout. A closed pipe on stdout is not a crash and not worth a message.
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Prints `prog: error: ...` with the whole cause chain and returns the failure exit code.
pub fn fail(prog: &str, err: &anyhow::Error) -> ExitCode {
    eprintln!("{prog}: error: {err:#}");
    ExitCode::from(FAILURE)
}
