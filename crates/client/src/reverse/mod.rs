//! tsclient `--reverse`: the server sends, the client receives, counts and checksums.
//!
//! The server sends the generated stream (the tsgen text: `--bytes 36MiB` is the seed's
//! `tsl.txt`), sized by `--bytes` or, with `--time`, repeated for that long; then its Sent frame
//! (what it measured while sending) and the end trailer (length and digest), then it closes
//! (protocol 7). The client reads to the end of the stream, holding the last bytes back from its
//! checksum ([`tsperf_proto::end::Tail`]): at the end they are the frame and the trailer. The
//! run is verified when the trailer's length is what arrived (and what a sized run asked for)
//! and its digest is the client's own. The clock runs from the first byte received to the end
//! of the stream: the receiver's view, as the server's is for a forward stream.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};

mod read;

use super::outcome::{Detail, Reverse, StreamOutcome};
use super::session::{open_stream, stream_hello};
use super::{Strategy, StreamConfig, StreamFailure, Transport, interrupt};
use crate::blocking::Blocking;
use crate::nonblocking::MioConn;
use crate::progress::Progress;
use crate::secure::Secure;
use read::{Received, open_log, read_sampled};
use tsperf_proto::client::reverse::{self, Contradiction, Ending};
use tsperf_proto::client::{Accepted, Clock};
use tsperf_proto::end::Tail;
use tsperf_proto::sent::{REVERSE_TAIL, Sent};
use tsperf_proto::{Hello, Report};
use tsperf_sys::text::Peer;
use tsperf_sys::timing::unix_us_now;

/// Bytes one read asks for.
pub const READ_SIZE: usize = 256 << 10;

/// The receive low-water mark (`SO_RCVLOWAT`) of a reverse stream on a path of large segments
/// (`tsperf_sys::mark::WakeMark`): a read's worth, four times the server's for a forward
/// stream. On loopback the kernel wakes the reader from the sending server's context, so each
/// wake-up is the server's CPU. `-R --chunk 1024 --bytes 1G`, 64 KiB against 256 KiB, 9
/// alternating pairs (issue 33): server 1027 against 925 ms per GiB (per pair 0.93), client
/// 0.20 against 0.09 s (0.45), 996 against 1107 MiB/s (1.07).
pub const WAKE_MARK: u32 = READ_SIZE as u32;

/// True when the stream asks the server for one buffer (`--one-buffer`): the generated
/// stream's only, a served file (`name`) is sent as it is.
fn asks_one_buffer(cfg: &StreamConfig, name: &str) -> bool {
    cfg.spec.one_buffer && name.is_empty()
}

/// Runs one reverse stream of `bytes` bytes a pass (`cfg.spec.time`: timed) over the transport the
/// configuration asks for.
pub fn run_reverse(
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
    progress: &mut Progress,
) -> Result<StreamOutcome, StreamFailure> {
    let before = |e: anyhow::Error| StreamFailure {
        name: String::new(),
        bytes: Some(bytes),
        sent: 0,
        acked: None,
        elapsed: None,
        intervals: Vec::new(),
        interrupted: interrupt::requested(),
        error: e,
    };
    match cfg.spec.time {
        Some(time) => progress.start_timed(cfg.spec.omit + time),
        None => progress.start(bytes),
    }
    let (host, port, timeout) = (&cfg.spec.host, cfg.spec.port, cfg.spec.timeout);
    // A stream in the clear never goes through the TLS layer.
    let result = match (cfg.spec.nonblocking, cfg.spec.tls.is_some()) {
        (true, false) => MioConn::connect(host, port, timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress)),
        (false, false) => Blocking::connect(host, port, timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress)),
        (true, true) => Secure::<MioConn>::connect(host, port, timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress)),
        (false, true) => Secure::<Blocking>::connect(host, port, timeout)
            .map_err(before)
            .and_then(|conn| receive(conn, cfg, bytes, name, progress)),
    };
    progress.clear();
    result
}

fn receive<T: Transport>(
    mut conn: T,
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
    progress: &mut Progress,
) -> Result<StreamOutcome, StreamFailure> {
    let mut got = Received::new();
    let fail = |got: &Received, e: anyhow::Error| got.failed(bytes, e);
    let (hello_at, hello_unix_us) = (Instant::now(), unix_us_now());
    let (peer, accepted, clock) = match open(&mut conn, cfg, bytes, name) {
        Ok(p) => p,
        Err(e) => return Err(fail(&got, e)),
    };
    if let Err(e) = open_log(cfg, &mut got, peer, name, accepted.length) {
        return Err(fail(&got, e));
    }
    match open_save(cfg, name) {
        Ok(partial) => got.rx.sink = partial,
        Err(e) => return Err(fail(&got, e)),
    }
    got.bound = match cfg.spec.time {
        Some(time) => read::Bound::Time(time + cfg.spec.omit),
        None => read::Bound::Bytes {
            pass: accepted.length,
        },
    };
    let (read, intervals) = read_sampled(&mut conn, cfg, &mut got, progress);
    got.log_end(read.is_ok());
    if let Err(e) = read {
        return Err(fail(&got, e));
    }
    let end_at = Instant::now();
    let span = end_at - hello_at;
    let window_us = clock.map(|c| server_window(c, hello_unix_us, span));
    let (server, end) = match checked_end(&got.rx, cfg, span, window_us) {
        Ok(v) => v,
        Err(e) => return Err(fail(&got, e)),
    };
    let Some((first_at, first_us)) = got.first else {
        return Err(fail(&got, anyhow!("the server sent no data")));
    };
    let elapsed = end_at.duration_since(first_at);
    let receiver = match this_ends_report(&conn, &mut got, end) {
        Ok(r) => r,
        Err(e) => return Err(fail(&got, e.context(cannot_save(cfg, name)))),
    };
    Ok(StreamOutcome {
        measured: crate::Measured {
            bytes: receiver.bytes,
            begin_unix_us: first_us,
            end_unix_us: first_us + elapsed.as_micros() as u64,
            elapsed,
            digest: receiver.digest,
            timed: timed(cfg, accepted.length, &got),
            intervals,
        },
        name: name.to_owned(),
        sender: server,
        receiver,
        far: end,
        chunk: cfg.spec.chunk,
        io: T::IO,
        peer,
        boot_id: server.boot_id,
        clock,
        interrupted: got.stop_sent,
        tls: crate::outcome::TlsUsed::of(conn.tls(), accepted.tls),
        pace: cfg.spec.pacing,
        detail: Detail::Received(Reverse {
            asked: accepted.length,
            one_buffer: asks_one_buffer(cfg, name),
            strategy: cfg.spec.strategy,
            batch: (cfg.spec.strategy == Some(Strategy::Writev)).then(|| batch(cfg)),
            wake_mark: got.wake_mark,
        }),
    })
}

/// This end's figures as a receiver, once the stream has ended at `end`: its file saved, if it
/// is saved, only when whole and verified (else its temporary goes).
fn this_ends_report<T: Transport>(
    conn: &T,
    got: &mut Received,
    end: tsperf_proto::end::End,
) -> Result<Report> {
    let whole = got.rx.digest() == end.digest && got.rx.hashed() == end.length;
    let saved = got.rx.commit_save(whole, false)?;
    let sock = conn.socket();
    Ok(Report {
        saved_to: saved
            .as_ref()
            .map_or(String::new(), |(path, _)| path.display().to_string()),
        save: saved.map(|(_, mode)| mode),
        ..got.rx.report_with(
            None,
            sock.recv_buffer_size().map_or(0, |n| n as u32),
            tsperf_sys::tcpinfo::TcpInfo::of(&*sock)
                .map_or_else(Default::default, |i| i.receiver()),
        )
    })
}

/// The name a reverse stream is saved under: the served file's, else the generated stream's.
fn saved_name(name: &str) -> &str {
    if name.is_empty() {
        crate::spec::GENERATED
    } else {
        name
    }
}

/// What a failed save says.
fn cannot_save(cfg: &StreamConfig, name: &str) -> String {
    let dir = cfg
        .spec
        .save_dir
        .as_deref()
        .unwrap_or(std::path::Path::new(""));
    format!(
        "cannot save '{}' into '{}'",
        saved_name(name),
        dir.display()
    )
}

/// The temporary the stream is saved to as it arrives (`--save DIR`, in `--far-disk`'s mode),
/// if it is saved: its name admitted by the directory's rules first.
fn open_save(cfg: &StreamConfig, name: &str) -> Result<Option<tsperf_sys::save::Partial>> {
    let Some(dir) = &cfg.spec.save_dir else {
        return Ok(None);
    };
    let mode = cfg.spec.save.unwrap_or(tsperf_proto::SaveMode::Durable);
    let dir = std::sync::Arc::new(tsperf_sys::save::SaveDir::open(dir, false)?);
    dir.admit(saved_name(name)).map_err(|why| anyhow!(why))?;
    let partial = dir
        .create(saved_name(name), mode)
        .with_context(|| cannot_save(cfg, name))?;
    Ok(Some(partial))
}

/// Chunks per call the server was asked for: writev's batch, else 1.
fn batch(cfg: &StreamConfig) -> u32 {
    match cfg.spec.call() {
        Some(tsperf_stream::send::Call::Writev(batch)) => batch,
        _ => 1,
    }
}

/// A timed stream's time, its passes of `pass` bytes, its omitted start and a stop.
fn timed(cfg: &StreamConfig, pass: u64, got: &Received) -> Option<crate::Timed> {
    cfg.spec.time.map(|time| crate::Timed {
        time,
        omit: cfg.spec.omit,
        file_bytes: pass,
        passes: got.rx.hashed() as f64 / pass.max(1) as f64,
        omitted: got.omit_mark.filter(|_| !cfg.spec.omit.is_zero()),
        interrupted: got.stop_sent,
    })
}

/// The stream's end, `total` bytes having come in `span` from the hello: the server's report
/// and trailer, the report checked against the stream; why not, with how far it got, or the
/// reason the server gave in its report's place.
fn checked_end(
    rx: &read::Rx,
    cfg: &StreamConfig,
    span: Duration,
    window_us: Option<(u64, u64)>,
) -> Result<(Sent, tsperf_proto::end::End)> {
    let (no_tail, total) = (Tail::default(), rx.bytes());
    let (server, end) = match ending(rx.tail().unwrap_or(&no_tail)) {
        Ok(v) => v,
        Err(e) if e.is::<Stopped>() => return Err(e),
        Err(e) => {
            return Err(e.context(format!(
                "the stream ended after {total} bytes without the server's report and end \
                 trailer (the server stopped, or its connection was cut)"
            )));
        }
    };
    let seen = reverse::Seen {
        end,
        chunk: cfg.spec.chunk,
        batch: batch(cfg),
        span,
        window_us,
    };
    agrees(&server, &seen)?;
    Ok((server, end))
}

/// The hello (at `hello_unix_us` on this clock) and the end (`span` later) on the server's
/// clock as `clock` puts it, widened by its error and a millisecond.
fn server_window(clock: Clock, hello_unix_us: u64, span: Duration) -> (u64, u64) {
    let err_us = i128::from(clock.offset.err_ns / 1000) + 1000;
    let offset_us = i128::from(clock.offset.offset_ns / 1000);
    let at = |client_us: u64, widen: i128| {
        u64::try_from((i128::from(client_us) + offset_us + widen).max(0)).unwrap_or(u64::MAX)
    };
    let end_us = hello_unix_us.saturating_add(span.as_micros() as u64);
    (at(hello_unix_us, -err_us), at(end_us, err_us))
}

/// The hello, its answer and the clock queries.
fn open<T: Transport>(
    conn: &mut T,
    cfg: &StreamConfig,
    bytes: u64,
    name: &str,
) -> Result<(SocketAddr, Accepted, Option<Clock>)> {
    crate::session::tune(conn, &cfg.spec, false)?;
    let hello = Hello {
        reverse: true,
        tls: cfg.spec.tls,
        one_buffer: asks_one_buffer(cfg, name),
        // The server sends: the congestion control asked for is its socket's.
        congestion: cfg
            .spec
            .congestion
            .as_deref()
            .and_then(tsperf_proto::tcp::Congestion::new),
        // The server's writes, as asked (`--io`, `--batch`), else its own way.
        call: cfg.spec.call(),
        // The server sends: the pacing asked for is its socket's (`-b`).
        pace: cfg.spec.pacing,
        ..stream_hello(cfg, bytes, name)
    };
    let (peer, accepted, clock, _) = open_stream(conn, cfg, hello, "the reverse stream")?;
    crate::session::start_tls(conn, cfg, &accepted)?;
    if accepted.length == 0 {
        bail!(
            "the server at {peer} would send a pass of 0 bytes: a pass is at least 1 byte (an \
             empty file cannot be measured)"
        );
    }
    if name.is_empty() && accepted.length != bytes {
        bail!(
            "the server at {peer} would send {} bytes a pass where {bytes} were asked for",
            accepted.length
        );
    }
    Ok((peer, accepted, clock))
}

/// Checks the server's Sent report against this stream ([`reverse::check`]): a figure it
/// contradicts is refused, named.
fn agrees(s: &Sent, seen: &reverse::Seen) -> Result<()> {
    use tsperf_results::units::duration;
    let Err(c) = reverse::check(s, seen) else {
        return Ok(());
    };
    let why = match c {
        Contradiction::Time { what, took, span } => format!(
            "{what} took {}, longer than the whole stream took here ({})",
            duration(took),
            duration(span)
        ),
        Contradiction::Chunk { sent, asked } => {
            format!("a write size of {sent} bytes where {asked} were asked for")
        }
        Contradiction::Bytes { sent, trailer } => {
            format!("{sent} bytes sent, where its end trailer says {trailer}")
        }
        Contradiction::Writes {
            writes,
            partial,
            bytes,
            chunk,
        } => format!(
            "{writes} writes ({partial} of them partial) of at most {chunk} bytes moving \
             {bytes} bytes (a write moves at least 1 byte and at most a chunk)"
        ),
        Contradiction::Beyond { what, value, most } => {
            format!("{what} {value}, where a Linux sender has at most {most}")
        }
        Contradiction::FirstWrite { at_us, window_us } => format!(
            "a first write at {at_us} µs since the epoch on its clock, outside this stream \
             ({} to {}, from the clock queries)",
            window_us.0, window_us.1
        ),
    };
    bail!("the server's report contradicts this stream: {why}")
}

/// The server ended the stream early and said why, in its report's place.
#[derive(Debug, thiserror::Error)]
#[error("the server ended the stream after {bytes} bytes: {why}")]
struct Stopped {
    bytes: u64,
    why: String,
}

/// The end of the stream, held back: the server's Sent frame and its end trailer
/// ([`reverse::ending`]).
fn ending(tail: &Tail<REVERSE_TAIL>) -> Result<(Sent, tsperf_proto::end::End)> {
    reverse::ending(tail).map_err(|e| match e {
        Ending::Short { held } => anyhow!(
            "the stream ended after {held} bytes, before the server's report and end trailer \
             ({REVERSE_TAIL} bytes)"
        ),
        // The server could not go on, and said why in its report's place.
        Ending::Stopped { bytes, why } => Stopped {
            bytes,
            why: Peer(&why).to_string(),
        }
        .into(),
        Ending::NotReport(e) => anyhow!("the stream's end is not the server's report: {e}"),
    })
}
