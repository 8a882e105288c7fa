//! What tsclient prints: the seed's begin/end lines with a summary for people, or one JSON
//! object for scripts. Field names carry their unit (`elapsed_s`, `begin_unix_us`); names once
//! published are never renamed. A failed run still prints one JSON object, with `error` and what
//! was measured before it failed, so a script can always parse stdout (as iperf3 `-J` does).
//! Text from the server is escaped for the terminal ([`tsperf_sys::text`]).

pub use tsperf_results::json;

use std::time::Duration;

use serde::Serialize;

use crate::{StreamFailure, StreamResult};
use json::{
    ClientSide, ClockJson, Cpu, FailureJson, OneWayJson, ServerSide, StreamFailureJson, StreamJson,
    TcpJson, TimeSplitJson,
};
use tsperf_proto::clock::Offset;
use tsperf_proto::{LogMode, Report};
use tsperf_results::units;
use tsperf_sys::text::{Peer, json_inert};

const VERSION: &str = env!("CARGO_PKG_VERSION");

impl From<&StreamResult> for StreamJson {
    fn from(r: &StreamResult) -> StreamJson {
        let s = &r.server;
        let nonzero = |v: u64| (v != 0).then_some(v);
        let verdict = r.verdict();
        let (measured, measured_time) = r.measured.rated();
        StreamJson {
            tsperf: VERSION.into(),
            file: r.name.clone(),
            bytes: r.measured.bytes,
            chunk: r.chunk,
            io: r.io,
            strategy: r.strategy,
            batch: r.batch,
            peer: r.peer.to_string(),
            elapsed_s: r.measured.elapsed.as_secs_f64(),
            begin_unix_us: r.measured.begin_unix_us,
            end_unix_us: r.measured.end_unix_us,
            mib_per_s: units::mib_per_s(measured, measured_time),
            gbit_per_s: units::gbit_per_s(measured, measured_time),
            verified: r.verified(),
            digest: hex(r.measured.digest),
            cpu: Cpu::of(r.cpu.user, r.cpu.sys),
            client: client_side(r),
            server: ServerSide {
                bytes: s.bytes,
                digest: hex(s.digest),
                reads: s.reads,
                read_size: r.read_size,
                io: s.server_io,
                log: s.log,
                log_lines: s.log_lines,
                log_lines_lost: s.log_lines_lost,
                output_dropped: s.output_dropped,
                first_byte_unix_us: nonzero(s.first_byte_unix_us),
                last_byte_unix_us: nonzero(s.last_byte_unix_us),
                first_byte_client_unix_us: on_client(r, s.first_byte_unix_us),
                last_byte_client_unix_us: on_client(r, s.last_byte_unix_us),
                stdout: r.server_stdout,
                elapsed_s: Duration::from_nanos(s.elapsed_ns).as_secs_f64(),
                wakeups: s.wakeups,
                rcvbuf: s.rcvbuf,
                cpu: Cpu::of(
                    Duration::from_micros(s.cpu_user_us),
                    Duration::from_micros(s.cpu_sys_us),
                ),
                saved_to: s.saved_to.clone(),
                time_split: TimeSplitJson::of(&s.split),
                run_queue_s: s.run_queue_ns.map(|ns| ns as f64 / 1e9),
                same_host: r.same_host(),
            },
            clock: ClockJson {
                queries: r.clock.map_or(0, |c| c.queries),
                offset_us: r.clock.map(|c| c.offset.offset_ns as f64 / 1e3),
                offset_err_us: r.clock.map(|c| c.offset.err_ns as f64 / 1e3),
                rtt_us: r.clock.map(|c| c.rtt_ns as f64 / 1e3),
            },
            one_way: one_way(r),
            tcp: TcpJson {
                available: r.tcp.available(),
                client: r.tcp,
                server: s.tcp,
                flight: r.flight,
            },
            limited_by: Some(verdict.limited_by),
            limits: verdict.limits,
            intervals: r.measured.intervals.clone(),
            timed: r.measured.timed.map(sections::timed_json),
            error: (!r.verified()).then(|| mismatch(r)),
        }
    }
}

/// What the client counted about its own writes and time.
fn client_side(r: &StreamResult) -> ClientSide {
    ClientSide {
        writes: r.writes.writes,
        partial_writes: r.writes.partial_writes,
        would_block: r.writes.would_block,
        polls: r.writes.polls,
        sndbuf: r.sndbuf,
        congestion: r.congestion.clone(),
        on_cpu_s: r.sched.map(|s| s.on_cpu.as_secs_f64()),
        run_queue_s: r.sched.map(|s| s.run_queue.as_secs_f64()),
        source_read_s: r.source_read.as_secs_f64(),
        source_read_before_s: r.source_read_before.as_secs_f64(),
        interface: r.interface.as_ref().map(|(name, _)| name.clone()),
        line_mbit: r.interface.as_ref().and_then(|(_, speed)| *speed),
    }
}

/// A server time (µs since the epoch, 0 for none) on the client's clock, in µs.
fn on_client(r: &StreamResult, server_unix_us: u64) -> Option<f64> {
    to_client(r.clock.map(|c| c.offset), server_unix_us)
}

fn to_client(offset: Option<Offset>, server_unix_us: u64) -> Option<f64> {
    let offset = offset?;
    let ns = server_unix_us.checked_mul(1000)?;
    (server_unix_us != 0).then(|| offset.to_client(ns) as f64 / 1e3)
}

/// A one-way figure is known when its error bound is at most this fraction of it.
pub const ONE_WAY_MAX_ERROR: f64 = 0.1;

/// The one-way times from the client's first byte sent, where the error bound allows.
fn one_way(r: &StreamResult) -> OneWayJson {
    one_way_of(
        (r.measured.begin_unix_us, r.measured.end_unix_us),
        r.server.first_byte_unix_us,
        r.server.last_byte_unix_us,
        r.clock.map(|c| c.offset),
    )
}

/// From the client's first byte sent at `begin_us` (its clock) to the server's first and last
/// read at `first_us` and `last_us` (the server's clock), given the offset between the clocks.
/// The error bound is the offset's, plus the µs the server's stamps are rounded to. A read
/// that lands outside the transfer (before its first byte or after the report came, by more
/// than the bound: a server clock stepped mid-run, or a report that says nonsense) is unknown.
fn one_way_of(
    (begin_us, end_us): (u64, u64),
    first_us: u64,
    last_us: u64,
    offset: Option<Offset>,
) -> OneWayJson {
    let err = offset.map(|o| o.err_ns as f64 / 1e3 + 1.0);
    let whole = end_us.saturating_sub(begin_us) as f64;
    let from_begin = |server_us: u64| {
        let figure = to_client(offset, server_us)? - begin_us as f64;
        let err = err?;
        let inside = figure >= -err && figure <= whole + err;
        (inside && err <= ONE_WAY_MAX_ERROR * figure).then_some(figure)
    };
    OneWayJson {
        first_byte_us: from_begin(first_us),
        last_byte_us: from_begin(last_us),
        err_us: err,
    }
}

/// One line of `--json-stream`: the event on one line, with active characters escaped.
pub fn json_line(e: &json::Event) -> String {
    json_inert(serde_json::to_string(e).expect("plain data always serializes"))
}

/// Serializes one output object, with active characters escaped.
pub fn to_json(v: &impl Serialize) -> String {
    json_inert(serde_json::to_string_pretty(v).expect("plain data always serializes"))
}

/// The JSON object for a run that failed before it measured anything (a bad key file, say).
pub fn failure_json(mode: &str, e: &anyhow::Error) -> json::ClientOutput {
    json::ClientOutput::Failed(FailureJson {
        tsperf: VERSION.into(),
        mode: mode.into(),
        error: format!("{e:#}"),
        usage: false,
        interrupted: crate::interrupt::requested(),
    })
}

/// The JSON object for a usage error (exit 2).
pub fn usage_json(mode: &str, msg: &str) -> json::ClientOutput {
    json::ClientOutput::Failed(FailureJson {
        tsperf: VERSION.into(),
        mode: mode.into(),
        error: msg.into(),
        usage: true,
        interrupted: false,
    })
}

/// The object for a stream the client sent that failed or was interrupted, with what it had
/// measured.
fn stream_failure_object(f: &StreamFailure) -> StreamFailureJson {
    let elapsed = f.elapsed.map(|d| d.as_secs_f64());
    StreamFailureJson {
        tsperf: VERSION.into(),
        mode: "stream".into(),
        file: f.name.clone(),
        bytes: f.bytes,
        sent: f.sent,
        acked_bytes: f.acked,
        elapsed_s: elapsed,
        acked_mib_per_s: f.acked.zip(f.elapsed).map(|(b, d)| units::mib_per_s(b, d)),
        verified: false,
        interrupted: f.interrupted,
        intervals: f.intervals.clone(),
        error: format!("{:#}", f.error),
    }
}

/// `, waited 8.91 s for its file (1.02 s before the first byte)` when the file kept the client
/// waiting at least a millisecond; empty otherwise.
fn file_wait(r: &StreamResult) -> String {
    let total = r.source_read + r.source_read_before;
    if total < Duration::from_millis(1) {
        return String::new();
    }
    format!(
        ", waited {} for its file ({} before the first byte)",
        units::duration(total),
        units::duration(r.source_read_before)
    )
}

/// The human report: the seed's three lines, then what both ends saw.
fn stream_human(r: &StreamResult) -> String {
    let s = &r.server;
    let server_elapsed = Duration::from_nanos(s.elapsed_ns);
    sections::seed_lines(r.measured.begin_unix_us, &r.name, r.measured.end_unix_us)
        + &format!(
            "sent {} in {}: {}, chunk {} B, io {} {}, {}\n\
             \x20 client: {} ({} short){}, cpu {} user + {} sys{}\n\
             \x20 server: {} of up to {} B, first to last byte {}, cpu {} user + {} sys, io {}, \
             log {}, stdout to {}\n",
            units::size(r.measured.bytes),
            units::duration(r.measured.elapsed),
            sections::rate(r.measured.rated()),
            r.chunk,
            r.io,
            match r.batch {
                Some(k) => format!("writev of {k}"),
                None => r.strategy.to_string(),
            },
            sections::check(r.verified(), r.measured.digest),
            units::count(r.writes.writes, &format!("{} call", r.strategy)),
            r.writes.partial_writes,
            r.congestion
                .as_ref()
                .map_or(String::new(), |c| format!(", TCP {}", Peer(c))),
            units::duration(r.cpu.user),
            units::duration(r.cpu.sys),
            file_wait(r),
            units::count(s.reads, "read"),
            r.read_size,
            units::duration(server_elapsed),
            units::duration(Duration::from_micros(s.cpu_user_us)),
            units::duration(Duration::from_micros(s.cpu_sys_us)),
            s.server_io.map_or("?".to_owned(), |v| v.to_string()),
            s.log.map_or("?".to_owned(), |v| v.to_string()),
            r.server_stdout.describe(),
        )
        + &sections::timed(r.measured.timed)
        + &clock_human(r)
        + &why_human(r)
        + &if s.saved_to.is_empty() {
            String::new()
        } else {
            format!("  saved on the server as {}\n", Peer(&s.saved_to))
        }
        + &if s.output_dropped == 0 {
            String::new()
        } else {
            format!(
                "  the server could not print {} of its own output: its stdout or stderr is \
             not being read\n",
                units::count(s.output_dropped, "line")
            )
        }
        + &lost_log_lines(s)
}

/// A line when some of the transfer's per-read log lines could not be written.
fn lost_log_lines(s: &Report) -> String {
    if s.log_lines_lost == 0 {
        return String::new();
    }
    let sink = match s.log {
        Some(LogMode::Stdout) => "its stdout was closed",
        _ => "the log file could not be written (a full disk?)",
    };
    format!(
        "  the server's log lost {} of {} lines: {sink}\n",
        units::count(u64::from(s.log_lines_lost), "line"),
        u64::from(s.log_lines) + u64::from(s.log_lines_lost)
    )
}

/// The verdict, its shares, and where the server's time went.
fn why_human(r: &StreamResult) -> String {
    let mut out = sections::verdict(&r.verdict());
    let split = &r.server.split;
    if split.total_ns() > 0 {
        let total = split.total_ns() as f64;
        let parts: Vec<String> = tsperf_proto::TimePhase::ALL
            .into_iter()
            .filter(|p| split.get(*p) > 0)
            .map(|p| match 100.0 * split.get(p) as f64 / total {
                pct if pct < 0.5 => format!("{} <1%", p.name()),
                pct => format!("{} {pct:.0}%", p.name()),
            })
            .collect();
        out += &format!(
            "  server's time ({}): {}\n",
            units::duration(Duration::from_nanos(split.total_ns())),
            parts.join(", ")
        );
    }
    out
}

/// The clock line of the human report: the offset, and the one-way times it allows.
fn clock_human(r: &StreamResult) -> String {
    let Some(c) = r.clock else {
        return sections::clock(None, "");
    };
    let w = one_way(r);
    let err = w.err_us.unwrap_or(0.0);
    let us = |us: f64| units::duration(Duration::from_secs_f64(us.max(0.0) / 1e6));
    // A figure left out says why: too near the first byte for the clocks' error bound to
    // allow a figure, or a stamp the client's clock cannot place inside the transfer.
    let figure = |v: Option<f64>, server_us: u64| match v {
        Some(v) => us(v),
        None => match to_client(Some(c.offset), server_us)
            .map(|t| t - r.measured.begin_unix_us as f64)
        {
            Some(t) if t <= err / ONE_WAY_MAX_ERROR => format!(
                "under {} (a figure needs ten times the ±)",
                us(err / ONE_WAY_MAX_ERROR)
            ),
            _ => "not placed (the server's stamp falls outside the transfer on this clock)"
                .to_owned(),
        },
    };
    sections::clock(
        r.clock,
        &format!(
            "; one way from the first byte sent (± {}): to the server's first read {}, to its \
             last {}",
            units::duration(Duration::from_secs_f64(err / 1e6)),
            figure(w.first_byte_us, r.server.first_byte_unix_us),
            figure(w.last_byte_us, r.server.last_byte_unix_us),
        ),
    )
}

/// Why a finished transfer does not verify, for stderr.
fn mismatch(r: &StreamResult) -> String {
    let why = if r.source_changed {
        "; the file was written to while it was sent, so the bytes read are a mix of its old \
         and new contents (send a file nothing is writing to)"
    } else {
        ""
    };
    format!(
        "MISMATCH: sent {} bytes with xxh3 {:016x}, the server received {} bytes with xxh3 {:016x}{why}",
        r.measured.bytes, r.measured.digest, r.server.bytes, r.server.digest
    )
}

fn hex(d: u64) -> String {
    format!("{d:016x}")
}

/// `host:port`, with an IPv6 address in brackets (`[::1]:7433`).
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

mod latency;
mod render;
mod reverse;
mod sections;
mod session;

use render::entry;

pub use latency::{latency_human, latency_json};
pub use render::{Exit, finish, human, json};

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset moves the server's times onto the client's clock; a figure is known only
    /// when its error bound is at most a tenth of it, and nothing is known without an offset.
    #[test]
    fn one_way_known_only_within_its_bound() {
        // The server's clock is 2 ms ahead, known to ± 9 µs (10 µs with the rounding).
        let offset = Offset {
            offset_ns: 2_000_000,
            err_ns: 9_000,
        };
        let begin = 1_000_000_000;
        // The report came 110 ms after the first byte.
        let span = (begin, begin + 110_000);
        // First read 50 µs after the first byte sent, last one 100 ms after, on the client's clock.
        let w = one_way_of(span, begin + 2_050, begin + 102_000, Some(offset));
        assert_eq!(w.err_us, Some(10.0));
        assert_eq!(w.first_byte_us, None, "50 µs ± 10 µs is unknown");
        assert_eq!(w.last_byte_us, Some(100_000.0));
        let w = one_way_of(span, begin + 2_100, begin + 102_000, Some(offset));
        assert_eq!(w.first_byte_us, Some(100.0), "100 µs ± 10 µs is known");
        let w = one_way_of(span, begin + 2_100, begin + 102_000, None);
        assert_eq!(
            (w.first_byte_us, w.last_byte_us, w.err_us),
            (None, None, None)
        );
        // Issue 23 (10): a read after the report came, or one so far off its µs overflow ns, is
        // unknown, not a one-way time of 16,650,588,101 s.
        let w = one_way_of(span, begin + 2_100, begin + 200_000, Some(offset));
        assert_eq!(w.last_byte_us, None, "98 ms after the report came");
        let w = one_way_of(span, u64::MAX, u64::MAX, Some(offset));
        assert_eq!((w.first_byte_us, w.last_byte_us), (None, None));
    }
}
