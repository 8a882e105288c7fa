//! The server's per-read log, and the diagnostics beside it.
//!
//! Every read that returns data is one line: `conn=3 seq=17 bytes=102 total=1734`, after a
//! timestamp. Each transfer also gets a `start` line and an `end` line. Lines go through tracing
//! on their own target ([`TARGET`]) to one sink:
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

/// The tracing target of per-read log lines.
pub const TARGET: &str = "tsperf::readlog";

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

/// Installs the global subscriber: diagnostics on stderr, and the per-read log in `mode`
/// (`file` appends to `path`, creating it).
pub fn init(mode: LogMode, path: &Path) -> Result<()> {
    let diagnostics = tracing_subscriber::fmt::layer()
        .with_writer(crate::console::Messages(crate::console::Stream::Err))
        .with_filter(crate::cli::env_filter())
        .with_filter(filter_fn(|m| m.target() != TARGET));
    let lines = || {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_level(false)
            .with_target(false)
    };
    let only_lines = || filter_fn(|m| m.target() == TARGET);
    let registry = tracing_subscriber::registry().with(diagnostics);
    let result = match mode {
        LogMode::None => registry.try_init(),
        LogMode::Stdout => registry
            .with(
                lines()
                    .with_writer(crate::console::Lines)
                    .with_filter(only_lines()),
            )
            .try_init(),
        LogMode::File => {
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
            registry
                .with(lines().with_writer(sink).with_filter(only_lines()))
                .try_init()
        }
    };
    result.context("cannot install the log subscriber")
}

/// Writes out the file sink's buffer, if there is one.
pub fn flush() -> io::Result<()> {
    match FILE_SINK.get() {
        Some(sink) => sink.make_writer().flush(),
        None => Ok(()),
    }
}
