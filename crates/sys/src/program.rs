//! What every tsperf program does at its edges: print on stdout (a closed pipe is no crash),
//! turn an error into `prog: error: ...` and exit code 1, and find its sibling binaries.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The exit code of a failure (an error, a mismatch): 2 is a usage error, 130 an interrupt.
pub const FAILURE: u8 = 1;

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

/// The directory this program's binary is in, where its sibling binaries (tsserver, tsclient)
/// are; empty (the current directory) when the system will not say.
pub fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default()
}

/// The length of the file at `path`, or an error naming it.
pub fn file_len(path: &Path) -> anyhow::Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| anyhow::anyhow!("cannot read file '{}': {e}", path.display()))
}
