//! Sending the file's bytes: the engine's sender ([`tsperf_stream::send`]) driven over a
//! client transport, turn after turn, until the data is done, a timed run's clock ends it, or
//! a stop is asked for (Ctrl-C). The engine chooses the call (`--io`: a `write` a chunk, a
//! `writev` of `--batch` chunks, or `sendfile`) and counts and checksums what the socket took;
//! this end reads its clocks at the first byte, moves the bar and marks the omitted start.

use std::io;
use std::time::{Duration, Instant};

use super::{StreamConfig, Transport};
use crate::progress::Progress;
use tsperf_stream::send::{Call, SendEnd, Sender};
use tsperf_sys::source::Source;

/// Why sending stopped early: the file, the connection, or a stop asked for (Ctrl-C).
pub(super) enum Stop {
    File(anyhow::Error),
    Net(io::Error),
    Interrupted,
}

/// The most bytes sent between two updates of the bar and of the count `--interval` samples:
/// a turn of the engine's sender ends there.
const SHOW_EVERY: u64 = tsperf_sys::source::BLOCK_TARGET as u64;

/// What sending counted beside the engine's figures: the bytes the kernel took so far, a timed
/// run's marks.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) sent: u64,
    /// A timed run: when its omitted start ended, the bytes sent by then, and the socket's
    /// acknowledged bytes then.
    pub(super) omit_mark: Option<(Instant, u64, Option<u64>)>,
    /// A timed run ended by a stop asked for (Ctrl-C), not by its time.
    pub(super) interrupted: bool,
}

/// The engine's sender of `source` as `cfg` says: its call (`--io`, `--batch`), its chunk, and
/// passes again and again for a timed run.
pub(super) fn sender(source: Source, cfg: &StreamConfig) -> anyhow::Result<Sender> {
    let call = cfg.spec.call().unwrap_or(Call::Write);
    Ok(Sender::local(source, call, cfg.spec.chunk, cfg.spec.time.is_some())?.turns_of(SHOW_EVERY))
}

/// Sends every byte of `tx`'s source (a timed run: until `cfg.spec.time` after the omitted start, or
/// a stop asked for), counting into `tally`. `begin` is called once, just before the first byte
/// is handed to the socket, with the time spent waiting for the file so far. Returns the
/// xxh3-64 of exactly what was sent.
pub(super) fn send_data<T: Transport>(
    conn: &mut T,
    tx: &mut Sender,
    cfg: &StreamConfig,
    progress: &mut Progress,
    tally: &mut Tally,
    begin: &mut dyn FnMut(&T, Duration),
) -> Result<u64, Stop> {
    let waited = tx.begin().map_err(Stop::File)?;
    progress.restart();
    begin(conn, waited);
    // A timed run's clock starts at its first byte; Ctrl-C ends it as its time does.
    let alarm = cfg.spec.time.map(|time| {
        super::interrupt::ends_itself();
        super::alarm::Alarm::start(cfg.spec.omit, time)
    });
    let up = alarm.as_ref().map(super::alarm::Alarm::watch);
    tx.stop_when(move || super::interrupt::requested() || up.as_ref().is_some_and(|up| up()));
    let end = loop {
        match tx.send_turn(conn, &mut []) {
            SendEnd::TurnOver | SendEnd::WouldBlock => {}
            end => break end,
        }
        progress.update(tx.sent());
        if let Some(alarm) = &alarm
            && tally.omit_mark.is_none()
            && alarm.omit_over()
        {
            tally.omit_mark = Some((Instant::now(), tx.sent(), acknowledged(conn)));
        }
    };
    tally.sent = tx.sent();
    progress.update(tally.sent);
    match end {
        SendEnd::Error(e) => return Err(Stop::Net(e)),
        SendEnd::Source(e) => return Err(Stop::File(e)),
        _ if cfg.spec.time.is_none() && tally.sent < tx.pass_length() => {
            return Err(Stop::Interrupted);
        }
        _ => {}
    }
    tally.interrupted = super::interrupt::requested();
    tx.digest(&mut []).map_err(Stop::File)
}

/// The socket's bytes acknowledged by the peer (`TCP_INFO`), where the kernel says.
pub(super) fn acknowledged<T: Transport>(conn: &T) -> Option<u64> {
    tsperf_sys::tcpinfo::TcpInfo::of(&*conn.socket())?
        .sender()
        .bytes_acked
}
