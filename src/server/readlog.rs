//! The server's per-read log, and the diagnostics beside it.
//!
//! Every read that returns data is one line: `conn=3 seq=17 bytes=102 total=1734`, after a
//! timestamp. Each transfer also gets a `start` line and an `end` line. Lines go through tracing
//! on a target per sink ([`TO_STDOUT`], [`TO_FILE`]) to the transfer's sink: the server's
//! `--log`, or with `--allow-client-log` the one its client asked for (both sinks are installed
//! then, and the file is opened at start):
//!
//! - `stdout`: one `write()` per line, as a terminal program's `printf` does, made by the
//!   console's writer thread ([`crate::console`]): a reader that stops reading holds back the
//!   transfers it logs (back-pressure, as in the seed), never the rest of the server, and no
//!   line is dropped. Nothing batches lines into fewer writes; that cost is what is measured.
//! - `file`: a buffered file, flushed when each transfer ends and when the server stops on
//!   SIGINT or SIGTERM. A line is formatted whole and written under the file's lock, so lines
//!   from concurrent connections never interleave mid-line, and none is lost.
//! - `none`: no layer at all; the hot path pays one branch on a bool.
//!
//! Diagnostics (`RUST_LOG`, to stderr) are a separate layer that never sees the per-read lines;
//! they go through the console too, as messages that are dropped (and counted) rather than wait.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use anyhow::{Context, Result};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;

use crate::protocol::LogMode;

/// The tracing target of per-read log lines (every sink's starts with it).
pub const TARGET: &str = "tsperf::readlog";
/// The target of lines for stdout.
pub const TO_STDOUT: &str = "tsperf::readlog::stdout";
/// The target of lines for the log file.
pub const TO_FILE: &str = "tsperf::readlog::file";

/// Buffer of the file sink.
const FILE_BUFFER: usize = 64 * 1024;

static FILE_SINK: OnceLock<FileSink> = OnceLock::new();

/// The log file, shared by every connection.
#[derive(Clone)]
struct FileSink(Arc<Mutex<BufWriter<File>>>);

/// Holds the file's lock while a line is written, so lines never interleave.
struct Locked<'a>(MutexGuard<'a, BufWriter<File>>);

impl Write for Locked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a> MakeWriter<'a> for FileSink {
    type Writer = Locked<'a>;

    fn make_writer(&'a self) -> Locked<'a> {
        Locked(self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Installs the global subscriber: diagnostics on stderr, and the per-read log in `mode`, or in
/// every sink with `any` (the client chooses); the file sink appends to `path`, creating it.
pub fn init(mode: LogMode, any: bool, path: &Path) -> Result<()> {
    let diagnostics = tracing_subscriber::fmt::layer()
        .with_writer(crate::console::Messages(crate::console::Stream::Err))
        .with_filter(crate::cli::env_filter())
        .with_filter(filter_fn(|m| !m.target().starts_with(TARGET)));
    let to_stdout = (any || mode == LogMode::Stdout).then(|| {
        lines()
            .with_writer(crate::console::Lines)
            .with_filter(filter_fn(|m| m.target() == TO_STDOUT))
    });
    let to_file = if any || mode == LogMode::File {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open log file '{}'", path.display()))?;
        let sink = FileSink(Arc::new(Mutex::new(BufWriter::with_capacity(
            FILE_BUFFER,
            file,
        ))));
        let _ = FILE_SINK.set(sink.clone());
        Some(
            lines()
                .with_writer(sink)
                .with_filter(filter_fn(|m| m.target() == TO_FILE)),
        )
    } else {
        None
    };
    tracing_subscriber::registry()
        .with(diagnostics)
        .with(to_stdout)
        .with(to_file)
        .try_init()
        .context("cannot install the log subscriber")
}

/// The format of per-read lines: a timestamp and the fields, nothing else.
fn lines<S>() -> tracing_subscriber::fmt::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_level(false)
        .with_target(false)
}

/// Writes out the file sink's buffer, if there is one.
pub fn flush() -> io::Result<()> {
    match FILE_SINK.get() {
        Some(sink) => sink.make_writer().flush(),
        None => Ok(()),
    }
}
