//! Handing the file's bytes to the kernel, the way `--io` says: one `write` per chunk,
//! `writev` of `--batch` chunks, or `sendfile`; every short call continued from where it stopped.

use std::io::{self, IoSlice};

use std::time::Duration;

use super::{MAX_BATCH, Strategy, StreamConfig, Transport, WriteStats};
use crate::progress::Progress;
use tsperf_sys::source::Source;

/// Why sending stopped early: the file, the connection, or a stop asked for (Ctrl-C).
pub(super) enum Stop {
    File(anyhow::Error),
    /// A write met pages of the mapped file that are gone: the file shrank to less than this.
    Shrank(u64),
    Net(io::Error),
    Interrupted,
}

impl Stop {
    /// A failed write of the file's bytes, `at` bytes into it.
    fn write(e: io::Error, at: u64) -> Stop {
        if tsperf_sys::source::is_fault(&e) {
            Stop::Shrank(at)
        } else {
            Stop::Net(e)
        }
    }
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Stop {
        Stop::Net(e)
    }
}

/// Bytes sent between two readings of the connection's `TCP_INFO` during a transfer.
pub(super) const FLIGHT_EVERY: u64 = 1 << 20;

/// What sending counts as it goes: the calls, the bytes the kernel took, the connection read
/// about every [`FLIGHT_EVERY`] bytes.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) writes: WriteStats,
    pub(super) sent: u64,
    pub(super) flight: tsperf_proto::tcp::Flight,
    next_reading: u64,
    /// A timed run: when its omitted start ended, the bytes sent by then, and the socket's
    /// acknowledged bytes then.
    pub(super) omit_mark: Option<(std::time::Instant, u64, Option<u64>)>,
    /// A timed run: full passes of the file begun after the first.
    pub(super) rewinds: u64,
    /// A timed run ended by a stop asked for (Ctrl-C), not by its time.
    pub(super) interrupted: bool,
}

impl Tally {
    /// Reads the connection if another [`FLIGHT_EVERY`] bytes went since the last reading.
    #[inline]
    fn read_flight<T: Transport>(&mut self, conn: &T) {
        if self.sent >= self.next_reading {
            self.next_reading = self.sent + FLIGHT_EVERY;
            let sock = conn.socket();
            let sndbuf = sock.send_buffer_size().map_or(0, |n| n as u64);
            if let Some(s) = tsperf_sys::tcpinfo::TcpInfo::of(&*sock).and_then(|i| i.flight(sndbuf))
            {
                self.flight.add(s);
            }
        }
    }
}

/// Sends every byte of `source` the way `cfg.strategy` says, counting into `tally` as it goes,
/// and stopping at the next file block once a stop is asked for ([`super::interrupt`]).
/// `begin` is called once, just before the first byte is handed to the socket, with the time
/// spent waiting for the file so far. Returns the xxh3-64 of what was sent.
pub(super) fn send_data<T: Transport>(
    conn: &mut T,
    source: &mut Source,
    cfg: &StreamConfig,
    progress: &mut Progress,
    tally: &mut Tally,
    begin: &mut dyn FnMut(&T, Duration),
) -> Result<u64, Stop> {
    let chunk = cfg.chunk as usize;
    // The first reading comes after the first MiB, when the connection is under way.
    tally.next_reading = FLIGHT_EVERY;
    if let Some(time) = cfg.time {
        return send_timed(conn, source, cfg, time, progress, tally, begin);
    }
    if cfg.strategy == Strategy::Sendfile {
        // sendfile never copies the bytes into the process: the checksum is made on a thread
        // of its own, from the page cache.
        let checksum = source.digest_in_background().map_err(Stop::File)?;
        source.hash_elsewhere();
        progress.restart();
        begin(conn, source.read_time());
        send_file(conn, source, chunk, progress, tally)?;
        return checksum.join().map_err(Stop::File);
    }
    // write and writev hash each block just before its chunks are written, while it is in the
    // CPU's cache. Hashing on a thread of its own instead (as sendfile does) was measured
    // (issue 33, 1 GiB at 128 KiB, 7 alternating pairs): no faster (1832 against 1820 MiB/s)
    // and 0.07 s more client CPU per GiB (the second mapping's page tables); leaving the hash
    // out altogether was no faster either. On loopback the kernel's TCP work, not the hash,
    // sets the pace.
    send_blocks(conn, source, cfg, progress, tally, begin)?;
    Ok(source.digest())
}

/// Hands every block of `source` to the socket, a chunk per `write` or `--batch` per `writev`.
fn send_blocks<T: Transport>(
    conn: &mut T,
    source: &mut Source,
    cfg: &StreamConfig,
    progress: &mut Progress,
    tally: &mut Tally,
    begin: &mut dyn FnMut(&T, Duration),
) -> Result<(), Stop> {
    let (chunk, batch) = (cfg.chunk as usize, cfg.batch.clamp(1, MAX_BATCH) as usize);
    let mut begun = false;
    loop {
        if super::interrupt::requested() {
            return Err(Stop::Interrupted);
        }
        let (block, waited) = source.next_block_waited().map_err(Stop::File)?;
        if block.is_empty() {
            return Ok(());
        }
        if !begun {
            begun = true;
            progress.restart();
            begin(conn, waited);
        }
        let (writes, sent) = (&mut tally.writes, &mut tally.sent);
        if cfg.strategy == Strategy::Writev {
            // The iovecs live on the stack, filled afresh for each batch of the block.
            let mut slots = [IoSlice::new(&[]); MAX_BATCH as usize];
            for group in block.chunks(chunk * batch) {
                write_batch(conn, group, chunk, &mut slots, writes, sent)
                    .map_err(|e| Stop::write(e, *sent))?;
            }
        } else {
            for piece in block.chunks(chunk) {
                write_chunk(conn, piece, writes, sent).map_err(|e| Stop::write(e, *sent))?;
            }
        }
        progress.update(tally.sent);
        tally.read_flight(conn);
    }
}

/// [`send_data`] for a timed run: the file again and again, from the first byte until `time`
/// after the omitted start (`cfg.omit`), or until a stop is asked for (Ctrl-C ends a timed run
/// as its time does). The time and the stop are looked at before every write, so the run ends
/// within one chunk (or one `writev` batch) of its time. Returns the xxh3-64 of exactly what
/// was sent, the last pass's partial block included.
fn send_timed<T: Transport>(
    conn: &mut T,
    source: &mut Source,
    cfg: &StreamConfig,
    time: Duration,
    progress: &mut Progress,
    tally: &mut Tally,
    begin: &mut dyn FnMut(&T, Duration),
) -> Result<u64, Stop> {
    let (chunk, batch) = (cfg.chunk as usize, cfg.batch.clamp(1, MAX_BATCH) as usize);
    source.repeat();
    super::interrupt::ends_itself();
    let mut alarm: Option<super::alarm::Alarm> = None;
    let over = |alarm: &Option<super::alarm::Alarm>| {
        super::interrupt::requested() || alarm.as_ref().is_some_and(|a| a.up())
    };
    loop {
        let (block, waited) = source.next_block_waited().map_err(Stop::File)?;
        if block.is_empty() {
            source.rewind().map_err(Stop::File)?;
            tally.rewinds += 1;
            continue;
        }
        let timer = alarm.get_or_insert_with(|| {
            progress.restart();
            begin(conn, waited);
            super::alarm::Alarm::start(cfg.omit, time)
        });
        if tally.omit_mark.is_none() && timer.omit_over() {
            tally.omit_mark = Some((std::time::Instant::now(), tally.sent, acked(conn)));
        }
        let at = tally.sent;
        let (writes, sent) = (&mut tally.writes, &mut tally.sent);
        let mut stopped = false;
        if cfg.strategy == Strategy::Writev {
            let mut slots = [IoSlice::new(&[]); MAX_BATCH as usize];
            for group in block.chunks(chunk * batch) {
                if over(&alarm) {
                    stopped = true;
                    break;
                }
                write_batch(conn, group, chunk, &mut slots, writes, sent)
                    .map_err(|e| Stop::write(e, *sent))?;
            }
        } else {
            for piece in block.chunks(chunk) {
                if over(&alarm) {
                    stopped = true;
                    break;
                }
                write_chunk(conn, piece, writes, sent).map_err(|e| Stop::write(e, *sent))?;
            }
        }
        progress.update(tally.sent);
        tally.read_flight(conn);
        if stopped || over(&alarm) {
            tally.interrupted = super::interrupt::requested();
            return Ok(source.digest_sent((tally.sent - at) as usize));
        }
    }
}

/// The socket's bytes acknowledged by the peer (`TCP_INFO`), where the kernel says.
fn acked<T: Transport>(conn: &T) -> Option<u64> {
    tsperf_sys::tcpinfo::TcpInfo::of(&*conn.socket())?
        .sender()
        .bytes_acked
}

/// Sends the file with one `sendfile` of up to `chunk` bytes per call, continuing a short call
/// from where it stopped; every byte a call takes counts in `sent` at once.
fn send_file<T: Transport>(
    conn: &mut T,
    source: &Source,
    chunk: usize,
    progress: &mut Progress,
    tally: &mut Tally,
) -> Result<(), Stop> {
    let len = source.len();
    let Some(file) = source.file() else {
        return Err(Stop::File(anyhow::anyhow!(
            "'{}' is held in memory: sendfile needs a file",
            source.name()
        )));
    };
    let mut shown = 0u64;
    while tally.sent < len {
        let chunk_end = (tally.sent + chunk as u64).min(len);
        while tally.sent < chunk_end {
            // A cycled source's call stops at the file's end, the next starts it again.
            let (pos, run) = source.file_span(tally.sent);
            let want = (chunk_end - tally.sent).min(run) as usize;
            match conn.sendfile(file, pos, want)? {
                0 => return Err(Stop::File(source.shrank(tally.sent))),
                n => {
                    tally.writes.writes += 1;
                    if n < want {
                        tally.writes.partial_writes += 1;
                    }
                    tally.sent += n as u64;
                }
            }
        }
        if tally.sent - shown >= tsperf_sys::source::BLOCK_TARGET as u64 {
            shown = tally.sent;
            progress.update(shown);
            tally.read_flight(conn);
            if super::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
        }
    }
    progress.update(tally.sent);
    Ok(())
}

/// Writes `group` (whole chunks of `chunk` bytes, the last maybe shorter) with `writev`, each
/// chunk its own iovec, continuing a short call from where it stopped. Every byte a call takes
/// counts in `sent` at once, so a failure says exactly how many the kernel took.
#[inline]
fn write_batch<'a, T: Transport>(
    conn: &mut T,
    group: &'a [u8],
    chunk: usize,
    slots: &mut [IoSlice<'a>],
    stats: &mut WriteStats,
    sent: &mut u64,
) -> io::Result<()> {
    let mut used = 0;
    for (slot, piece) in slots.iter_mut().zip(group.chunks(chunk)) {
        *slot = IoSlice::new(piece);
        used += 1;
    }
    let mut bufs = &mut slots[..used];
    let mut left = group.len();
    while left > 0 {
        match conn.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                stats.writes += 1;
                if n < left {
                    stats.partial_writes += 1;
                }
                left -= n;
                *sent += n as u64;
                IoSlice::advance_slices(&mut bufs, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes one chunk, finishing it from where a short write stopped; counts what each call took
/// in `sent`.
#[inline]
fn write_chunk<T: Transport>(
    conn: &mut T,
    mut piece: &[u8],
    stats: &mut WriteStats,
    sent: &mut u64,
) -> io::Result<()> {
    loop {
        match conn.write(piece) {
            Ok(n) if n == piece.len() => {
                stats.writes += 1;
                *sent += n as u64;
                return Ok(());
            }
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                stats.writes += 1;
                stats.partial_writes += 1;
                *sent += n as u64;
                piece = &piece[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
