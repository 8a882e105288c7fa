//! A transfer's per-read log ([`TransferLog`]), written the same way by either end that
//! receives: every read that returns data is one line, after a UTC timestamp to the
//! microsecond:
//!
//! ```text
//! 2026-12-01T21:38:53.586043Z conn=1 seq=2 bytes=1024 total=2048
//! ```
//!
//! Each transfer also gets a start line and an end line:
//!
//! ```text
//! 2026-12-01T21:38:53.579520Z conn=1 event="start" peer=127.0.0.1:33664 file="small.txt" length=3000 chunk=1024 read_size=1024
//! 2026-12-01T21:38:53.586135Z conn=1 event="end" total=3000 reads=3 status="complete"
//! ```
//!
//! Every text value (the file name the client chose, the status) is quoted and escaped as Rust's
//! `{:?}` writes a string, so no name can forge a field or a line.
//!
//! The sinks:
//! - `stdout`: one `write()` per line, as a terminal program's `printf` does, handed to the
//!   end's [`LineOut`] (a server's console, with its back-pressure; a client's own stdout).
//!   Nothing batches lines into fewer writes; that cost is what is measured.
//! - `file`: a file opened for appending. Each transfer gathers its lines in a buffer of its
//!   own of [`FILE_BUFFER`] bytes and appends it whole with one `write()` (`O_APPEND`: lines
//!   from concurrent transfers never interleave mid-line, and no lock is shared) when it fills
//!   and when the transfer ends. A write that fails (a full disk) loses the lines it held: they
//!   are counted ([`TransferLog::lost`], the report's `log_lines_lost`) and never written later.
//! - `none`: nothing; the hot path pays one branch.

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tsperf_proto::LogMode;

/// The bytes of lines a transfer logging to a file gathers before it appends them.
pub const FILE_BUFFER: usize = 16 << 10;

/// Where a log's stdout lines go, one whole line at a time.
pub trait LineOut {
    /// Writes `line` (one line, its newline included); false when it could not (stdout gone).
    fn line(&self, line: &[u8]) -> bool;
}

/// The process's own stdout, a `write()` a line.
pub struct ProcessStdout;

impl LineOut for ProcessStdout {
    fn line(&self, line: &[u8]) -> bool {
        io::stdout().lock().write_all(line).is_ok()
    }
}

/// One transfer's log: its sink, the lines it has not written yet (file sink), and what became
/// of its lines.
pub struct TransferLog<O: LineOut> {
    mode: LogMode,
    conn: u64,
    /// The log file (file sink), shared by the end's transfers; none: every line is lost,
    /// counted.
    file: Option<Arc<File>>,
    /// Where stdout lines go (stdout sink); none: every line is lost, counted.
    stdout: Option<O>,
    /// File sink: whole lines not yet appended. Stdout sink: the line being formatted.
    buf: Vec<u8>,
    /// Lines in `buf` (file sink).
    pending: u32,
    written: u32,
    lost: u32,
}

impl<O: LineOut> TransferLog<O> {
    /// The log of transfer number `conn`, to `mode`'s sink.
    pub fn new(mode: LogMode, conn: u64) -> TransferLog<O> {
        TransferLog {
            mode,
            conn,
            file: None,
            stdout: None,
            buf: Vec::new(),
            pending: 0,
            written: 0,
            lost: 0,
        }
    }

    /// Where the lines go.
    pub fn mode(&self) -> LogMode {
        self.mode
    }

    /// Lines written, or handed to stdout's queue.
    pub fn written(&self) -> u32 {
        self.written
    }

    /// Appends the file sink's lines to `file` (opened for appending: the server's
    /// `--log-file`, opened at start; a client's `--log-file`).
    pub fn set_file(&mut self, file: Option<Arc<File>>) {
        self.file = file;
    }

    /// Writes the stdout sink's lines through `out`.
    pub fn set_stdout(&mut self, out: O) {
        self.stdout = Some(out);
    }

    /// Lines that could not be written: the log file's write failed (a full disk), or stdout
    /// was gone.
    pub fn lost(&self) -> u32 {
        self.lost
    }

    /// The start line: who sends (`name`: the file, empty for the generated stream), how much,
    /// in what chunks, and how it is read.
    pub fn start(
        &mut self,
        peer: SocketAddr,
        name: &str,
        length: u64,
        chunk: u32,
        read_size: usize,
    ) {
        self.line(format_args!(
            "event=\"start\" peer={peer} file={name:?} length={length} chunk={chunk} \
             read_size={read_size}"
        ));
    }

    /// The line of read number `seq`, of `bytes` bytes, `total` so far.
    #[inline(never)]
    pub fn read(&mut self, seq: u64, bytes: usize, total: u64) {
        self.line(format_args!("seq={seq} bytes={bytes} total={total}"));
    }

    /// The end line (`status`: complete, or why it stopped), then everything still buffered is
    /// written out.
    pub fn end(&mut self, total: u64, reads: u64, status: &str) {
        self.line(format_args!(
            "event=\"end\" total={total} reads={reads} status={status:?}"
        ));
        self.flush();
    }

    fn line(&mut self, fields: std::fmt::Arguments<'_>) {
        match self.mode {
            LogMode::None => return,
            LogMode::Stdout => self.buf.clear(),
            LogMode::File => {}
        }
        // Before 1970 (a clock set wrong) the stamp reads 1970: never a panic.
        let now = SystemTime::now().max(UNIX_EPOCH);
        // Writing to a Vec cannot fail.
        let _ = writeln!(
            self.buf,
            "{} conn={} {fields}",
            humantime::format_rfc3339_micros(now),
            self.conn
        );
        match self.mode {
            LogMode::Stdout if self.stdout.as_ref().is_some_and(|o| o.line(&self.buf)) => {
                self.written += 1
            }
            LogMode::Stdout => self.lost += 1,
            _ => {
                self.pending += 1;
                if self.buf.len() >= FILE_BUFFER {
                    self.flush();
                }
            }
        }
    }

    /// Appends the buffered lines to the log file. Lines a failed write did not finish are
    /// lost and counted; none is kept to be written later.
    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        let done = match self.file.as_deref() {
            Some(mut file) => append(&mut file, &self.buf),
            None => Err((0, io::ErrorKind::NotFound.into())),
        };
        let pending = std::mem::take(&mut self.pending);
        match done {
            Ok(()) => self.written += pending,
            Err((at, e)) => {
                // A line is written only with its newline.
                let whole = self.buf[..at].iter().filter(|b| **b == b'\n').count() as u32;
                self.written += whole;
                self.lost += pending - whole;
                let lost = pending - whole;
                tracing::warn!(
                    conn = self.conn,
                    "cannot write the log file: {e} ({lost} line{} lost)",
                    if lost == 1 { "" } else { "s" }
                );
            }
        }
        self.buf.clear();
        // A large transfer's buffer is kept for its next lines; one that grew past its size
        // (a long start line) is not.
        if self.buf.capacity() > 2 * FILE_BUFFER {
            self.buf = Vec::new();
        }
    }
}

impl<O: LineOut> Drop for TransferLog<O> {
    /// A transfer dropped without its end line still writes what it logged.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Writes all of `bytes` to `out`; on failure, how much was written and why.
fn append(out: &mut impl Write, bytes: &[u8]) -> Result<(), (usize, io::Error)> {
    let mut at = 0;
    while at < bytes.len() {
        match out.write(&bytes[at..]) {
            Ok(0) => return Err((at, io::ErrorKind::WriteZero.into())),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((at, e)),
        }
    }
    Ok(())
}

impl<O: LineOut> super::ReadLog for TransferLog<O> {
    fn mode(&self) -> LogMode {
        self.mode
    }
    #[inline]
    fn read(&mut self, seq: u64, bytes: usize, total: u64) {
        TransferLog::read(self, seq, bytes, total);
    }
    fn end(&mut self, total: u64, reads: u64, status: &str) {
        TransferLog::end(self, total, reads, status);
    }
    fn written(&self) -> u32 {
        self.written
    }
    fn lost(&self) -> u32 {
        self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes `room` bytes, then fails as a full disk does.
    struct Full {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.got.len());
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A short write then a failure says how far it got, so the lines it finished are counted
    /// as written and the rest as lost.
    #[test]
    fn append_says_how_far_a_failed_write_got() {
        let mut full = Full {
            got: Vec::new(),
            room: 5,
        };
        let (at, e) = append(&mut full, b"abc\ndef\n").unwrap_err();
        assert_eq!(at, 5);
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        let mut roomy = Full {
            got: Vec::new(),
            room: 100,
        };
        append(&mut roomy, b"abc\ndef\n").unwrap();
        assert_eq!(roomy.got, b"abc\ndef\n");
    }

    /// A name that looks like fields stays one quoted value: no field can be forged.
    #[test]
    fn a_peer_name_cannot_forge_fields() {
        let name = "x.bin conn=1 event=\"end\" total=999999\n2026 conn=9";
        let mut log = TransferLog::<ProcessStdout>::new(LogMode::File, 3);
        log.start("127.0.0.1:1".parse().unwrap(), name, 1, 1, 64);
        let line = String::from_utf8(log.buf.clone()).unwrap();
        log.pending = 0;
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.contains(
                r#" conn=3 event="start" peer=127.0.0.1:1 file="x.bin conn=1 event=\"end\" total=999999\n2026 conn=9" length=1"#
            ),
            "{line}"
        );
    }

    /// The line format: a UTC timestamp to the microsecond, then the fields.
    #[test]
    fn read_lines_are_stamped_fields() {
        let mut log = TransferLog::<ProcessStdout>::new(LogMode::File, 7);
        log.read(17, 102, 1734);
        let line = String::from_utf8(std::mem::take(&mut log.buf)).unwrap();
        log.pending = 0;
        let (stamp, fields) = line.split_once(' ').unwrap();
        assert_eq!(fields, "conn=7 seq=17 bytes=102 total=1734\n");
        assert_eq!(stamp.len(), "2026-12-01T21:38:53.586043Z".len(), "{stamp}");
        assert!(
            stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{stamp}"
        );
    }

    /// Without a log file (never opened), buffered lines are counted lost, not kept.
    #[test]
    fn lines_that_cannot_be_written_are_counted_and_dropped() {
        let mut log = TransferLog::<ProcessStdout>::new(LogMode::File, 1);
        for seq in 1..=3 {
            log.read(seq, 10, seq * 10);
        }
        // No log file was given.
        log.flush();
        assert_eq!((log.written(), log.lost()), (0, 3));
        assert!(log.buf.is_empty() && log.pending == 0);
        let mut none = TransferLog::<ProcessStdout>::new(LogMode::None, 1);
        none.read(1, 10, 10);
        assert_eq!((none.written(), none.lost()), (0, 0));
    }
}
