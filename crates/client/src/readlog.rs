//! A reverse stream's per-read log (`tsclient --reverse --log stdout|file`): the lines the
//! server writes for what it receives, written by the client for what it receives, so the
//! field report's experiment (a line per read to a screen) runs either way. Stdout gets one
//! `write` per line, as `printf` to a screen does; the file sink is buffered and appended to.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tsperf_proto::LogMode;

/// Where the lines go.
enum Sink {
    Stdout(io::Stdout),
    File(BufWriter<File>),
}

/// One stream's log.
pub struct ClientLog {
    sink: Sink,
    line: Vec<u8>,
    /// Lines written.
    pub written: u64,
    /// Lines that could not be written.
    pub lost: u64,
}

impl ClientLog {
    /// The log for `mode` (`None` for no lines), the file sink appending to `file`.
    pub fn open(mode: LogMode, file: &Path) -> Result<Option<ClientLog>> {
        let sink = match mode {
            LogMode::None => return Ok(None),
            LogMode::Stdout => Sink::Stdout(io::stdout()),
            LogMode::File => Sink::File(BufWriter::with_capacity(
                16 << 10,
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(file)
                    .with_context(|| format!("cannot open log file '{}'", file.display()))?,
            )),
        };
        Ok(Some(ClientLog {
            sink,
            line: Vec::with_capacity(128),
            written: 0,
            lost: 0,
        }))
    }

    /// The start line: who sends, how much a pass, how it is read.
    pub fn start(
        &mut self,
        peer: SocketAddr,
        name: &str,
        length: u64,
        chunk: u32,
        read_size: usize,
    ) {
        let name = if name.is_empty() { "generated" } else { name };
        self.write(format_args!(
            "event=\"start\" peer={peer} file={name:?} length={length} chunk={chunk} \
             read_size={read_size}"
        ));
    }

    /// The line of read number `seq` of `bytes` bytes, `total` so far.
    #[inline(never)]
    pub fn read(&mut self, seq: u64, bytes: usize, total: u64) {
        self.write(format_args!("seq={seq} bytes={bytes} total={total}"));
    }

    /// The sink.
    pub fn mode(&self) -> LogMode {
        match self.sink {
            Sink::Stdout(_) => LogMode::Stdout,
            Sink::File(_) => LogMode::File,
        }
    }

    /// The end line, then everything buffered is written out.
    pub fn end(&mut self, total: u64, reads: u64, status: &str) {
        self.write(format_args!(
            "event=\"end\" total={total} reads={reads} status={status:?}"
        ));
        if let Sink::File(f) = &mut self.sink
            && f.flush().is_err()
        {
            self.lost += 1;
        }
    }

    fn write(&mut self, fields: std::fmt::Arguments<'_>) {
        self.line.clear();
        let now = SystemTime::now().max(UNIX_EPOCH);
        // Writing to a Vec cannot fail.
        let _ = writeln!(
            self.line,
            "{} conn=1 {fields}",
            humantime::format_rfc3339_micros(now)
        );
        let done = match &mut self.sink {
            Sink::Stdout(out) => out.lock().write_all(&self.line),
            Sink::File(f) => f.write_all(&self.line),
        };
        match done {
            Ok(()) => self.written += 1,
            Err(_) => self.lost += 1,
        }
    }
}
