//! The server's report of a transfer ([`Report`]): what it counted, where its time went
//! ([`TimeSplit`]), and the rule that its numbers agree with one another ([`Report::check`]).

use crate::frame::{be32, be64, log_code, log_from, put_string, server_io_code, server_io_from};
use crate::{LogMode, ProtocolError, ServerIo};

/// How far the run-queue wait may exceed the time split: the scheduler updates its counts at a
/// tick (4 ms at 250 Hz) or a switch, so a reading can lag by one.
pub(crate) const RUN_QUEUE_SLACK_NS: u64 = 10_000_000;

/// The server's measurements of one transfer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// Data bytes the server read.
    pub bytes: u64,
    /// The xxh3-64 of those bytes.
    pub digest: u64,
    /// The server's wall clock at the first data byte, µs since the epoch (0: no data).
    pub first_byte_unix_us: u64,
    /// The server's wall clock at the last data byte (0: no data).
    pub last_byte_unix_us: u64,
    /// The server's monotonic time from the first to the last data byte.
    pub elapsed_ns: u64,
    /// Read calls that returned data.
    pub reads: u64,
    /// Event-loop wake-ups for this connection (0 when blocking).
    pub wakeups: u64,
    /// The serving thread's CPU time in user mode during the transfer.
    pub cpu_user_us: u64,
    /// The serving thread's CPU time in kernel mode during the transfer.
    pub cpu_sys_us: u64,
    /// Per-read log lines written (for stdout: handed to its queue).
    pub log_lines: u32,
    /// Per-read log lines that could not be written.
    pub log_lines_lost: u32,
    /// The receive buffer the server's socket got (`SO_RCVBUF`).
    pub rcvbuf: u32,
    /// Lines of the server's own output it could not print since it started (stuck stdout or
    /// stderr).
    pub output_dropped: u32,
    /// How the server did its I/O.
    pub server_io: Option<ServerIo>,
    /// Where the transfer's per-read lines went.
    pub log: Option<LogMode>,
    /// Where the file was saved (`--save`); empty when not saved.
    pub saved_to: String,
    /// Where the server's time went.
    pub split: TimeSplit,
    /// The server socket's `TCP_INFO` at the end of the transfer.
    pub tcp: crate::tcp::ReceiverTcp,
    /// Time the serving thread was runnable but waited for a CPU (Linux schedstat), from the
    /// first data byte to the report, in ns: the part of `wait` that was not waiting for data.
    /// A CPU quota that throttles the server shows here. `None`: not measured.
    pub run_queue_ns: Option<u64>,
    /// The server's kernel boot id (`/proc/sys/kernel/random/boot_id`): the same as the
    /// client's when both ends run on one machine, and share its CPUs. `None`: not known.
    pub boot_id: Option<[u8; 16]>,
    /// The most bytes one read asked for (version 13).
    pub read_size: u32,
    /// The receiving thread's time on a CPU from its first data byte to its last (Linux
    /// schedstat), in ns (version 13). `None`: not measured.
    pub on_cpu_ns: Option<u64>,
    /// How the receiver wrote the stream to its disk, where it saved it to `saved_to` (version
    /// 14); `None`: not saved.
    pub save: Option<crate::SaveMode>,
}

impl Report {
    /// Checks that the report's numbers agree with one another, as a server's always do; the
    /// first that does not is named. The decoder refuses a report that fails this, so a client
    /// never prints a share above 100% or a time outside the transfer from one.
    pub fn check(&self) -> Result<(), ProtocolError> {
        let bad = |field, why: String| Err(ProtocolError::BadReport { field, why });
        let Some(total) = self.split.checked_total_ns() else {
            return bad(
                "time split",
                "its phases add up to more than 2^64 ns".into(),
            );
        };
        if self.reads > self.bytes || (self.bytes > 0 && self.reads == 0) {
            return bad(
                "reads",
                format!(
                    "{} reads of {} bytes (every read returns at least one byte)",
                    self.reads, self.bytes
                ),
            );
        }
        if self.first_byte_unix_us > self.last_byte_unix_us {
            return bad(
                "first_byte_unix_us",
                format!(
                    "the first byte ({}) comes after the last ({})",
                    self.first_byte_unix_us, self.last_byte_unix_us
                ),
            );
        }
        if self.elapsed_ns > total && (total > 0 || self.bytes > 0) {
            return bad(
                "elapsed_ns",
                format!(
                    "first to last byte ({} ns) is longer than the time split ({total} ns), \
                     which runs from the first byte to the report",
                    self.elapsed_ns
                ),
            );
        }
        if let Some(q) = self.run_queue_ns
            && q > total.saturating_add(RUN_QUEUE_SLACK_NS)
        {
            return bad(
                "run_queue_ns",
                format!("{q} ns waiting for a CPU in a transfer whose time split is {total} ns"),
            );
        }
        if let Some(c) = self.on_cpu_ns
            && c > total.saturating_add(RUN_QUEUE_SLACK_NS)
        {
            return bad(
                "on_cpu_ns",
                format!("{c} ns on a CPU in a transfer whose time split is {total} ns"),
            );
        }
        // A save measured and not kept has its mode and no path.
        if (self.save.is_none() && !self.saved_to.is_empty())
            || self.save.is_some_and(|m| !m.writes())
        {
            return bad(
                "save",
                "a path saved to without the mode it was written in, or a mode that writes nothing"
                    .into(),
            );
        }
        let lines = u64::from(self.log_lines) + u64::from(self.log_lines_lost);
        let most = match self.log {
            Some(LogMode::None) | None => 0,
            _ => self.reads.saturating_add(2),
        };
        if lines > most {
            return bad(
                "log_lines",
                format!(
                    "{lines} log lines for {} reads (at most one per read, a start and an end)",
                    self.reads
                ),
            );
        }
        Ok(())
    }
}

/// The wire form of a Report (the table "Report body" in the crate's documentation).
impl Report {
    /// Appends the body: the fixed part, then `saved_to`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let r = self;
        for v in [
            r.bytes,
            r.digest,
            r.first_byte_unix_us,
            r.last_byte_unix_us,
            r.elapsed_ns,
            r.reads,
            r.wakeups,
            r.cpu_user_us,
            r.cpu_sys_us,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&r.log_lines.to_be_bytes());
        out.extend_from_slice(&r.rcvbuf.to_be_bytes());
        out.push(server_io_code(r.server_io));
        out.push(log_code(r.log));
        out.extend_from_slice(&r.output_dropped.to_be_bytes());
        for phase in TimePhase::ALL {
            out.extend_from_slice(&r.split.get(phase).to_be_bytes());
        }
        for v in r.tcp.to_array() {
            out.extend_from_slice(&v.unwrap_or(u64::MAX).to_be_bytes());
        }
        out.extend_from_slice(&r.log_lines_lost.to_be_bytes());
        out.extend_from_slice(&r.run_queue_ns.unwrap_or(u64::MAX).to_be_bytes());
        out.extend_from_slice(&r.boot_id.unwrap_or([0; 16]));
        out.extend_from_slice(&r.read_size.to_be_bytes());
        out.extend_from_slice(&r.on_cpu_ns.unwrap_or(u64::MAX).to_be_bytes());
        out.push(crate::SaveMode::code(r.save));
        put_string(out, &r.saved_to);
    }

    /// The fixed part of a body (its size checked by the caller) and its `saved_to`; the
    /// numbers must agree ([`Report::check`]).
    pub(crate) fn decode(body: &[u8], saved_to: String) -> Result<Report, ProtocolError> {
        let u = |i: usize| be64(&body[i * 8..i * 8 + 8]);
        let report = Report {
            bytes: u(0),
            digest: u(1),
            first_byte_unix_us: u(2),
            last_byte_unix_us: u(3),
            elapsed_ns: u(4),
            reads: u(5),
            wakeups: u(6),
            cpu_user_us: u(7),
            cpu_sys_us: u(8),
            log_lines: be32(&body[72..76]),
            rcvbuf: be32(&body[76..80]),
            server_io: server_io_from(body[80])?,
            log: log_from(body[81])?,
            output_dropped: be32(&body[82..86]),
            saved_to,
            split: {
                let mut split = TimeSplit::default();
                for (i, phase) in TimePhase::ALL.into_iter().enumerate() {
                    split.add(phase, be64(&body[86 + 8 * i..]));
                }
                split
            },
            tcp: crate::tcp::ReceiverTcp::from_array(std::array::from_fn(|i| {
                Some(be64(&body[134 + 8 * i..])).filter(|v| *v != u64::MAX)
            })),
            log_lines_lost: be32(&body[214..218]),
            run_queue_ns: Some(be64(&body[218..226])).filter(|v| *v != u64::MAX),
            boot_id: Some(<[u8; 16]>::try_from(&body[226..242]).expect("16 bytes"))
                .filter(|id| *id != [0; 16]),
            read_size: be32(&body[242..246]),
            on_cpu_ns: Some(be64(&body[246..254])).filter(|v| *v != u64::MAX),
            save: crate::SaveMode::of(body[254]).ok_or(ProtocolError::BadReport {
                field: "save",
                why: format!("unknown save mode {}", body[254]),
            })?,
        };
        report.check()?;
        Ok(report)
    }
}

/// Where the server's time went during one transfer, from its first data byte until its report
/// was ready, in monotonic ns (the report's table above says what each phase holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TimeSplit {
    /// In read calls (in the blocking model, their waits for data too).
    pub read_ns: u64,
    /// Checksumming.
    pub hash_ns: u64,
    /// Writing per-read log lines, and waiting for room on stdout for them.
    pub log_ns: u64,
    /// Writing received bytes to the `--save` file.
    pub save_ns: u64,
    /// Syncing and renaming the saved file into place.
    pub fsync_ns: u64,
    /// The rest: waiting for data or the trailer, for the CPU, for other connections.
    pub wait_ns: u64,
}

/// One phase of a [`TimeSplit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimePhase {
    /// [`TimeSplit::read_ns`].
    Read,
    /// [`TimeSplit::hash_ns`].
    Hash,
    /// [`TimeSplit::log_ns`].
    Log,
    /// [`TimeSplit::save_ns`].
    Save,
    /// [`TimeSplit::fsync_ns`].
    Fsync,
    /// [`TimeSplit::wait_ns`].
    Wait,
}

impl TimePhase {
    /// Every phase, in the split's order.
    pub const ALL: [TimePhase; 6] = [
        TimePhase::Read,
        TimePhase::Hash,
        TimePhase::Log,
        TimePhase::Save,
        TimePhase::Fsync,
        TimePhase::Wait,
    ];

    /// The phase's name in output: `read`, `hash`, `log`, `save`, `fsync`, `wait`.
    pub fn name(self) -> &'static str {
        match self {
            TimePhase::Read => "read",
            TimePhase::Hash => "hash",
            TimePhase::Log => "log",
            TimePhase::Save => "save",
            TimePhase::Fsync => "fsync",
            TimePhase::Wait => "wait",
        }
    }
}

impl TimeSplit {
    /// The time of `phase`, in ns.
    pub fn get(&self, phase: TimePhase) -> u64 {
        match phase {
            TimePhase::Read => self.read_ns,
            TimePhase::Hash => self.hash_ns,
            TimePhase::Log => self.log_ns,
            TimePhase::Save => self.save_ns,
            TimePhase::Fsync => self.fsync_ns,
            TimePhase::Wait => self.wait_ns,
        }
    }

    /// Adds `ns` to `phase`.
    #[inline]
    pub fn add(&mut self, phase: TimePhase, ns: u64) {
        let slot = match phase {
            TimePhase::Read => &mut self.read_ns,
            TimePhase::Hash => &mut self.hash_ns,
            TimePhase::Log => &mut self.log_ns,
            TimePhase::Save => &mut self.save_ns,
            TimePhase::Fsync => &mut self.fsync_ns,
            TimePhase::Wait => &mut self.wait_ns,
        };
        *slot += ns;
    }

    /// All phases together, in ns (at most `u64::MAX`: a decoded report's phases always fit,
    /// [`Report::check`]).
    pub fn total_ns(&self) -> u64 {
        self.checked_total_ns().unwrap_or(u64::MAX)
    }

    /// All phases together, in ns, if that fits in a u64.
    pub fn checked_total_ns(&self) -> Option<u64> {
        TimePhase::ALL
            .iter()
            .try_fold(0u64, |sum, p| sum.checked_add(self.get(*p)))
    }

    /// The phase with the most time, and its share of the total in percent; `None` when nothing
    /// was timed (an older server, or no data).
    pub fn largest(&self) -> Option<(TimePhase, f64)> {
        let total = self.total_ns();
        if total == 0 {
            return None;
        }
        let top = TimePhase::ALL.into_iter().max_by_key(|p| self.get(*p))?;
        Some((top, 100.0 * self.get(top) as f64 / total as f64))
    }
}
