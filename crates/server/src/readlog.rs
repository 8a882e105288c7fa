//! The server's per-read log: the engine's ([`tsperf_stream::receive::log`], its line format)
//! with the server's sinks, and the diagnostics beside it.
//!
//! A transfer's lines go to its sink ([`TransferLog`]): the server's `--log`, or with
//! `--allow-client-log` the one its client asked for:
//!
//! - `stdout`: one `write()` per line, as a terminal program's `printf` does, made through the
//!   console ([`crate::console`]): a reader that stops reading holds back the transfers it logs
//!   (back-pressure, as in the seed), never the rest of the server, and no line is dropped while
//!   stdout is open. Nothing batches lines into fewer writes; that cost is what is measured.
//! - `file`: the operator's `--log-file`, opened at start, which must be a regular file (or the
//!   null device): a pipe, FIFO, socket or terminal is refused at start ([`open_log_file`]),
//!   since a reader that stalls it would stall whoever writes to it. Each transfer gathers its
//!   lines in a buffer of its own of [`FILE_BUFFER`] bytes and appends it whole with one
//!   `write()` (`O_APPEND`: lines from concurrent transfers never interleave mid-line, and no
//!   lock is shared) when it fills and when the transfer ends, before its client hears back. A
//!   write that fails (a full disk) loses the lines it held: they are counted
//!   ([`TransferLog::lost`], the report's `log_lines_lost`) and never written later.
//! - `none`: nothing; the hot path pays one branch.
//!
//! Diagnostics (`RUST_LOG`, to stderr) are not this module's: they go through tracing and the
//! console ([`crate::console::Messages`]), as messages that are dropped (and counted) rather
//! than wait.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use tsperf_proto::{LogMode, StdoutKind};

use crate::console::Console;

pub use tsperf_stream::receive::log::FILE_BUFFER;

/// A transfer's log, its stdout lines through the server's console.
pub type TransferLog = tsperf_stream::receive::log::TransferLog<ConsoleOut>;

/// The server's console as a log's stdout: `wait`, a line may wait for room on it (not on an
/// event loop's thread).
pub struct ConsoleOut(pub Arc<Console>, pub bool);

impl tsperf_stream::receive::log::LineOut for ConsoleOut {
    fn line(&self, line: &[u8]) -> bool {
        self.0.line(line, self.1)
    }
}

/// Whether a server of `mode` (with `any`: clients may choose their sink) needs its log file
/// opened at start ([`open_log_file`]): every file-sink transfer appends to that one file.
pub fn needs_file(mode: LogMode, any: bool) -> bool {
    any || mode == LogMode::File
}

/// Opens the log file for appending, creating it. Only a regular file or the null device is
/// taken: writing to a pipe, FIFO, socket or terminal waits for its reader, and a reader that
/// stalls would stall the server. The path is checked before it is opened (so a FIFO without a
/// reader is named for what it is) and the open file again (so nothing swapped in between
/// slips through).
pub fn open_log_file(path: &Path) -> Result<File> {
    let refuse = |kind: StdoutKind| -> anyhow::Error {
        anyhow::anyhow!(
            "--log-file '{}' is {}: expected a regular file (a reader that stalls it would stall \
             the server; for a pipe or a terminal use --log stdout)",
            path.display(),
            kind.describe()
        )
    };
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let kind = if t.is_fifo() {
            Some(StdoutKind::Pipe)
        } else if t.is_socket() {
            Some(StdoutKind::Socket)
        } else if t.is_dir() {
            bail!(
                "--log-file '{}' is a directory: expected a regular file",
                path.display()
            );
        } else {
            None
        };
        if let Some(kind) = kind {
            return Err(refuse(kind));
        }
    }
    // O_NONBLOCK only for the open itself: a FIFO swapped in fails at once instead of waiting
    // for a reader; for a regular file the flag means nothing.
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open log file '{}'", path.display()))?;
    match tsperf_sys::term::kind_of(file.as_raw_fd()) {
        StdoutKind::File | StdoutKind::Null => Ok(file),
        kind => Err(refuse(kind)),
    }
}
