//! Receiving a stream, at either end: counting, checksumming and timing what arrives.
//!
//! Two pieces, kept apart so the I/O models can share buffers:
//! - [`Receiver`] is the accounting of one transfer: bytes, reads, digest, first/last byte.
//!   It holds no data buffer, so a connection costs a few hundred bytes of it. Its per-read
//!   log ([`ReadLog`]) and where it saves ([`Save`]) are the receiving end's own.
//! - [`Block`] is where reads land, one after another, until the block is checksummed in one
//!   go. The blocking server gives each connection thread a block; the event loop has one block
//!   for all connections and checksums it before it turns to the next connection; a client
//!   receiving a reverse stream has one for it.
//!
//! A stream that ends where its sender closes it holds its last `N` bytes back from the
//! checksum ([`tsperf_proto::end::Tail`]): the end trailer of a closed forward stream, or a
//! reverse stream's Sent frame and trailer.
//!
//! The receiver also keeps the transfer's time split ([`TimeSplit`]): from the first byte on,
//! each phase boundary reads the monotonic clock once and charges the time since the last
//! boundary to the phase that just ended ([`Receiver::lap`]), so the phases add up to the whole
//! time with no gap and no overlap. A read that returns data costs one clock read (two when it
//! is logged); a checksummed block one more.
//!
//! Each read is offered exactly `min(read_size, bytes still announced)` bytes: never more than
//! the client announced, so a read never swallows what follows the data.

use std::hash::Hasher as _;
use std::io;
use std::time::{Duration, Instant};

use twox_hash::XxHash3_64;

use tsperf_proto::END_TRAILER;
use tsperf_proto::end::Tail;
use tsperf_proto::{LogMode, Report, ServerIo, TimePhase, TimeSplit};
use tsperf_sys::timing::{CpuTime, unix_us_now};

/// Bytes gathered before they are checksummed, unless one read is larger.
pub const HASH_BLOCK: usize = tsperf_proto::BULK_READ as usize;

/// One turn of [`Block::read_turn`]: at most this many reads, and no more reads once this many
/// bytes have arrived. A client that always has data waiting then cannot keep an event loop from
/// its other connections, its deadlines or a shutdown.
pub const TURN_READS: u64 = 64;
/// Room on stdout a logged transfer asks for before one read turn (the server's console): a
/// line per read of the turn, plus its end line.
pub const LOG_TURN_RESERVE: usize = TURN_READS as usize * 128 + 2048;
/// One turn of [`Block::read_turn`] reads no more once this many bytes arrived.
pub const TURN_BYTES: usize = 1 << 20;

/// Where a transfer's per-read lines go: the receiving end's log ([`Receiver`] writes a line a
/// read through it, and its end line).
pub trait ReadLog {
    /// The sink (none: no lines, and reads are not gated for them).
    fn mode(&self) -> LogMode;
    /// The line of read `seq` of `bytes`, `total` received so far.
    fn read(&mut self, seq: u64, bytes: usize, total: u64);
    /// The end line: `total` bytes in `reads` reads, `status` complete or how it stopped.
    fn end(&mut self, total: u64, reads: u64, status: &str);
    /// Lines written so far.
    fn written(&self) -> u32;
    /// Lines lost (a sink that could not take them).
    fn lost(&self) -> u32;
}

/// No per-read log.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoLog;

impl ReadLog for NoLog {
    fn mode(&self) -> LogMode {
        LogMode::None
    }
    fn read(&mut self, _: u64, _: usize, _: u64) {}
    fn end(&mut self, _: u64, _: u64, _: &str) {}
    fn written(&self) -> u32 {
        0
    }
    fn lost(&self) -> u32 {
        0
    }
}

/// Where received bytes are saved, in the order they arrived.
pub trait Save {
    /// Saves the next bytes.
    fn write(&mut self, data: &[u8]) -> io::Result<()>;
}

/// Nothing is saved.
#[derive(Debug)]
pub enum NoSave {}

impl Save for NoSave {
    fn write(&mut self, _: &[u8]) -> io::Result<()> {
        match *self {}
    }
}

/// The accounting of one transfer in progress, its reads logged to `L`, saved to `S`, the last
/// `N` bytes of a closed stream held back.
pub struct Receiver<L: ReadLog = NoLog, S: Save = NoSave, const N: usize = END_TRAILER> {
    expected: u64,
    /// A closed stream's last bytes, held back from the checksum until it ends.
    tail: Option<Tail<N>>,
    read_size: usize,
    hasher: XxHash3_64,
    hashed: u64,
    bytes: u64,
    reads: u64,
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
    cpu_start: CpuTime,
    /// The serving thread's scheduler counts at the first byte.
    sched_start: Option<tsperf_sys::timing::SchedStat>,
    /// The same at the last byte: the run-queue wait is the split's, first byte to last, and
    /// not whatever the thread waited before the report was made (a busy event loop).
    sched_end: Option<tsperf_sys::timing::SchedStat>,
    /// Event-loop wake-ups for this connection, counted by the event loop.
    pub wakeups: u64,
    log: L,
    /// With a log sink, the fewest bytes a read should wait for ([`Receiver::set_log_gate`]).
    log_gate: u32,
    /// The path's segments are large enough for a bulk low-water mark
    /// ([`tsperf_sys::mark::MARK_MIN_MSS`]); set by the I/O model.
    pub large_segments: bool,
    /// Where received bytes are saved, if they are (the server's `--save`).
    pub sink: Option<S>,
    /// The event loop saw the client close its direction (a closed stream's end): its reads
    /// go on to the end of the stream, a short read no longer ends a logged turn (no event
    /// would come for the rest).
    pub peer_closed: bool,
    split: TimeSplit,
    /// The last phase boundary; `None` until the first byte.
    lap_at: Option<Instant>,
    /// Logged reads timed as one (read and line together), and the read and log time of the
    /// logged reads timed apart, whose division is applied to them.
    read_and_log_ns: u64,
    sampled_read_ns: u64,
    sampled_log_ns: u64,
}

/// One logged read in this many is timed in two parts, read and line ([`Receiver::count`]).
pub const SPLIT_SAMPLE: u64 = 16;

impl<L: ReadLog, S: Save, const N: usize> Receiver<L, S, N> {
    /// Starts a transfer of `expected` bytes (`None`: a stream that ends where its sender
    /// closes it, its last `N` bytes held back), read `read_size` bytes at a time, a line a
    /// read to `log`.
    pub fn new(expected: Option<u64>, read_size: u32, log: L) -> Receiver<L, S, N> {
        Receiver {
            expected: expected.unwrap_or(u64::MAX),
            tail: expected.is_none().then(Default::default),
            read_size: read_size.max(1) as usize,
            hasher: XxHash3_64::new(),
            hashed: 0,
            bytes: 0,
            reads: 0,
            first: None,
            last: None,
            cpu_start: CpuTime::thread(),
            sched_start: None,
            sched_end: None,
            wakeups: 0,
            log,
            log_gate: 1,
            large_segments: false,
            sink: None,
            peer_closed: false,
            split: TimeSplit::default(),
            lap_at: None,
            read_and_log_ns: 0,
            sampled_read_ns: 0,
            sampled_log_ns: 0,
        }
    }

    /// Charges the time since the last phase boundary to `phase`, which ends now. Nothing
    /// before the first byte is charged.
    #[inline]
    pub fn lap(&mut self, phase: TimePhase) {
        if let Some(at) = self.lap_at {
            self.lap_to(phase, at, Instant::now());
        }
    }

    #[inline]
    fn lap_to(&mut self, phase: TimePhase, at: Instant, now: Instant) {
        self.split
            .add(phase, now.saturating_duration_since(at).as_nanos() as u64);
        self.lap_at = Some(now);
    }

    /// The time split so far: the logged reads timed as one divided between read and log as
    /// the sampled ones were.
    pub fn split(&self) -> TimeSplit {
        let mut split = self.split;
        let both = self.read_and_log_ns;
        let sampled = self.sampled_read_ns + self.sampled_log_ns;
        let read = if sampled == 0 {
            both / 2
        } else {
            (u128::from(both) * u128::from(self.sampled_read_ns) / u128::from(sampled)) as u64
        };
        split.add(TimePhase::Read, read);
        split.add(TimePhase::Log, both - read);
        split
    }

    /// Where this transfer's per-read lines go.
    pub fn log(&self) -> LogMode {
        self.log.mode()
    }

    /// The per-read log, to set up its sink or write its start line.
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// With a log sink, a read waits for at least `log_min_read` bytes (or the read size, if
    /// smaller, or the rest of the transfer) before it is made, so a client that sends bytes one
    /// at a time does not get a log line per byte ([`Receiver::wake_at`]).
    pub fn set_log_gate(&mut self, log_min_read: u32) {
        if self.log() != LogMode::None {
            self.log_gate = log_min_read.min(self.read_size as u32).max(1);
        }
    }

    /// Logs the end of the transfer (when logging), complete or how it stopped, and writes out
    /// every line still buffered; the time since the last turn is the split's wait, the end
    /// line's its log.
    pub fn log_end(&mut self, status: &str) {
        self.lap(TimePhase::Wait);
        self.log.end(self.bytes, self.reads, status);
        self.lap(if self.log() == LogMode::None {
            TimePhase::Wait
        } else {
            TimePhase::Log
        });
    }

    /// Bytes the next read should ask for: 0 once complete.
    #[inline]
    pub fn want(&self) -> usize {
        (self.read_size as u64).min(self.expected - self.bytes) as usize
    }

    /// The receive low-water mark the next wait for this transfer should use
    /// ([`mark::wake_at`]).
    pub fn wake_at(&self) -> u32 {
        mark::wake_at(
            self.read_size,
            self.bytes,
            self.expected,
            self.log_gate,
            self.large_segments,
        )
    }

    /// The read size this transfer uses.
    pub fn read_size(&self) -> usize {
        self.read_size
    }

    /// Counts a read that returned `n` (> 0) bytes. The bytes are checksummed later, in order,
    /// through [`Receiver::hash`].
    ///
    /// A logged read is timed with one clock read, after its line: the time since the last
    /// boundary is its read and its line together. Every [`SPLIT_SAMPLE`]th logged read also
    /// reads the clock between the two, and the division those reads show is applied to the
    /// rest when the split is reported ([`Receiver::split`]).
    #[inline]
    pub fn count(&mut self, n: usize) {
        self.bytes += n as u64;
        self.reads += 1;
        let ends = self.bytes == self.expected;
        let logged = self.log() != LogMode::None;
        let Some(at) = self.lap_at else {
            return self.first_bytes(n, ends);
        };
        if logged && !ends && !self.reads.is_multiple_of(SPLIT_SAMPLE) {
            self.log_read(n);
            let now = Instant::now();
            self.read_and_log_ns += now.saturating_duration_since(at).as_nanos() as u64;
            self.lap_at = Some(now);
            return;
        }
        let now = Instant::now();
        let read = now.saturating_duration_since(at).as_nanos() as u64;
        self.lap_to(TimePhase::Read, at, now);
        if logged {
            self.sampled_read_ns += read;
            let log_from = self.split.log_ns;
            self.counted(n, ends, now);
            self.sampled_log_ns += self.split.log_ns - log_from;
        } else {
            self.counted(n, ends, now);
        }
    }

    /// The rest of [`Receiver::count`] for a read timed at `now`: the last byte's stamp, the
    /// line and its time.
    #[inline]
    fn counted(&mut self, n: usize, ends: bool, now: Instant) {
        if ends {
            self.last = Some((now, unix_us_now()));
            self.sched_end = tsperf_sys::timing::SchedStat::thread();
        }
        if self.log() != LogMode::None {
            self.log_read(n);
            self.lap(TimePhase::Log);
        }
    }

    /// The line of one read of `n` bytes, in this transfer's sink.
    #[inline]
    fn log_read(&mut self, n: usize) {
        self.log.read(self.reads, n, self.bytes);
    }

    /// Gives up saving: the partial file, if any, is removed now (not when the receiver is
    /// dropped), so whoever hears of the failure next finds nothing left behind.
    pub fn discard(&mut self) {
        self.sink = None;
    }

    /// Checksums (and, with a sink, saves) the next received bytes, in the order they arrived;
    /// a closed stream's held-back end is neither, until it is known not to be its end.
    pub fn hash(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.sink.is_some() {
            return self.hash_and_save(data);
        }
        match &mut self.tail {
            Some(tail) => {
                let (hasher, hashed) = (&mut self.hasher, &mut self.hashed);
                tail.feed(data, |d| {
                    hasher.write(d);
                    *hashed += d.len() as u64;
                });
            }
            None => {
                self.hasher.write(data);
                self.hashed += data.len() as u64;
            }
        }
        self.lap(TimePhase::Hash);
        Ok(())
    }

    /// The xxh3-64 of the bytes checksummed so far.
    pub fn digest(&self) -> u64 {
        self.hasher.finish()
    }

    /// True once every announced byte has arrived.
    pub fn is_complete(&self) -> bool {
        self.bytes == self.expected
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes checksummed so far: those received but what a closed stream holds back.
    pub fn hashed(&self) -> u64 {
        self.hashed
    }

    /// Reads that returned data so far.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// A closed stream's last bytes, held back from the checksum: at its end, what ends it.
    pub fn tail(&self) -> Option<&Tail<N>> {
        self.tail.as_ref()
    }

    /// The first read's bytes: the clocks start. The CPU and the run queue are counted from
    /// here, as the split is.
    #[cold]
    fn first_bytes(&mut self, n: usize, ends: bool) {
        // The clock first, then the scheduler's counts: a wait for a CPU while they are read
        // (a system call's exit is where a busy thread is preempted) falls inside the split,
        // never before it. The last reading is taken after the last byte's clock and before
        // its checksum's lap, so the run-queue wait always lies within the split.
        let now = Instant::now();
        self.cpu_start = CpuTime::thread();
        self.sched_start = tsperf_sys::timing::SchedStat::thread();
        self.first = Some((now, unix_us_now()));
        self.lap_at = Some(now);
        self.counted(n, ends, now)
    }

    /// Bytes announced in the hello (`u64::MAX` for a closed stream, which ends when it ends).
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// A closed stream ended (the client closed its direction): the last byte's stamp, and its
    /// end trailer, if whole. Every byte read must have been hashed.
    pub fn ended(&mut self) -> Option<tsperf_proto::end::End> {
        if self.last.is_none() && self.first.is_some() {
            self.last = Some((Instant::now(), unix_us_now()));
            self.sched_end = tsperf_sys::timing::SchedStat::thread();
        }
        self.tail.as_ref().and_then(|t| t.end())
    }

    /// True for a stream that ends where its sender closes it.
    pub fn closed(&self) -> bool {
        self.tail.is_some()
    }

    /// The report as it stands, complete or not. Every counted byte must have been hashed.
    pub fn report(&self, server_io: ServerIo, rcvbuf: u32) -> Report {
        self.report_with(
            Some(server_io),
            rcvbuf,
            tsperf_proto::tcp::ReceiverTcp::default(),
        )
    }

    /// The report, with the socket's `TCP_INFO` (`tcp`).
    pub fn report_with(
        &self,
        server_io: Option<ServerIo>,
        rcvbuf: u32,
        tcp: tsperf_proto::tcp::ReceiverTcp,
    ) -> Report {
        let held = self.tail.as_ref().map_or(0, |t| t.held() as u64);
        debug_assert_eq!(
            self.hashed + held,
            self.bytes,
            "bytes counted but not checksummed"
        );
        let cpu = CpuTime::thread().since(self.cpu_start);
        let sched = self
            .sched_start
            .zip(
                self.sched_end
                    .or_else(tsperf_sys::timing::SchedStat::thread),
            )
            .map(|(a, b)| b.since(a));
        let ns = |d: Duration| d.as_nanos() as u64;
        let (first_i, first_us) = self.first.unwrap_or((Instant::now(), 0));
        let (last_i, last_us) = self.last.unwrap_or((first_i, first_us));
        Report {
            save: None,
            bytes: self.hashed,
            digest: self.hasher.finish(),
            first_byte_unix_us: first_us,
            last_byte_unix_us: last_us,
            elapsed_ns: last_i.duration_since(first_i).as_nanos() as u64,
            reads: self.reads,
            wakeups: self.wakeups,
            cpu_user_us: cpu.user.as_micros() as u64,
            cpu_sys_us: cpu.sys.as_micros() as u64,
            log_lines: self.log.written(),
            log_lines_lost: self.log.lost(),
            rcvbuf,
            output_dropped: 0,
            server_io,
            log: Some(self.log()),
            saved_to: String::new(),
            split: self.split(),
            tcp,
            run_queue_ns: sched.map(|s| ns(s.run_queue)),
            boot_id: tsperf_sys::host::boot_id(),
            read_size: self.read_size as u32,
            on_cpu_ns: sched.map(|s| ns(s.on_cpu)),
        }
    }
}

mod block;
pub mod log;
pub mod mark;
mod save;

pub use block::{Block, ReadEnd};

#[cfg(test)]
mod tests;
