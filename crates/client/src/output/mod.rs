//! What tsclient prints: the seed's begin/end lines with a summary for people, or one JSON
//! object for scripts. Field names carry their unit (`elapsed_s`, `begin_unix_us`); names once
//! published are never renamed. A failed run still prints one JSON object, with `error` and what
//! was measured before it failed, so a script can always parse stdout (as iperf3 `-J` does).
//! Text from the server is escaped for the terminal ([`tsperf_sys::text`]).

pub use tsperf_results::json;

use serde::Serialize;

use crate::outcome::{Forward, StreamOutcome};
use crate::{Clock, StreamFailure};
use json::{
    ClientSide, ClockJson, Cpu, FailureJson, OneWayJson, SenderJson, ServerSide, StreamFailureJson,
    StreamJson, TcpJson, TimeSplitJson,
};
use tsperf_proto::Report;
use tsperf_proto::clock::Offset;
use tsperf_results::units;
use tsperf_sys::text::json_inert;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A forward stream's object (`mode: "stream"`): the client sent, the server's report is the
/// receiver's.
fn forward_object(o: &StreamOutcome, d: &Forward) -> StreamJson {
    let r = &o.receiver;
    let nonzero = |v: u64| (v != 0).then_some(v);
    let verdict = o.verdict();
    let (measured, measured_time) = o.measured.rated();
    StreamJson {
        tsperf: VERSION.into(),
        file: o.name.clone(),
        bytes: o.measured.bytes,
        chunk: o.chunk,
        io: o.io,
        strategy: d.strategy,
        batch: d.batch,
        peer: o.peer.to_string(),
        elapsed_s: o.measured.elapsed.as_secs_f64(),
        begin_unix_us: o.measured.begin_unix_us,
        end_unix_us: o.measured.end_unix_us,
        mib_per_s: units::mib_per_s(measured, measured_time),
        gbit_per_s: units::gbit_per_s(measured, measured_time),
        verified: o.verified(),
        digest: hex(o.measured.digest),
        cpu: sender_cpu(&o.sender),
        client: client_side(o, d),
        server: ServerSide {
            bytes: r.bytes,
            digest: hex(r.digest),
            receiver: r.into(),
            io: r.server_io,
            output_dropped: r.output_dropped,
            first_byte_unix_us: nonzero(r.first_byte_unix_us),
            last_byte_unix_us: nonzero(r.last_byte_unix_us),
            first_byte_client_unix_us: on_client(o, r.first_byte_unix_us),
            last_byte_client_unix_us: on_client(o, r.last_byte_unix_us),
            stdout: d.server_stdout,
            elapsed_s: r.elapsed_ns as f64 / 1e9,
            wakeups: r.wakeups,
            cpu: receiver_cpu(r),
            time_split: TimeSplitJson::of(&r.split),
            same_host: o.same_host(),
        },
        clock: clock_json(o.clock),
        one_way: one_way(o, r),
        tcp: TcpJson {
            available: o.sender.tcp.available(),
            client: o.sender.tcp,
            server: r.tcp,
            flight: o.sender.flight,
        },
        limited_by: Some(verdict.limited_by),
        limits: verdict.limits,
        intervals: o.measured.intervals.clone(),
        tls: o.tls.map(|t| {
            tsperf_results::json::TlsJson::of(t.cipher, t.authenticated, &t.cert_sha256, t.kernel)
        }),
        timed: o.measured.timed.map(sections::timed_json),
        error: (!o.verified()).then(|| human::mismatch(o)),
    }
}

/// The sender's CPU time.
fn sender_cpu(s: &tsperf_proto::sent::Sent) -> Cpu {
    cpu_us(s.cpu_user_us, s.cpu_sys_us)
}

/// The receiver's CPU time.
fn receiver_cpu(r: &Report) -> Cpu {
    cpu_us(r.cpu_user_us, r.cpu_sys_us)
}

fn cpu_us(user: u64, sys: u64) -> Cpu {
    use std::time::Duration;
    Cpu::of(Duration::from_micros(user), Duration::from_micros(sys))
}

/// The clock queries' figures.
fn clock_json(c: Option<Clock>) -> ClockJson {
    ClockJson {
        queries: c.map_or(0, |c| c.queries),
        offset_us: c.map(|c| c.offset.offset_ns as f64 / 1e3),
        offset_err_us: c.map(|c| c.offset.err_ns as f64 / 1e3),
        rtt_us: c.map(|c| c.rtt_ns as f64 / 1e3),
    }
}

/// What the sending client counted about its own writes and time.
fn client_side(o: &StreamOutcome, d: &Forward) -> ClientSide {
    let s = &o.sender;
    ClientSide {
        sender: SenderJson {
            polls: Some(d.polls),
            ..s.into()
        },
        source_read_s: s.source_read_ns as f64 / 1e9,
        source_read_before_s: d.source_read_before.as_secs_f64(),
        interface: d.interface.as_ref().map(|(name, _)| name.clone()),
        line_mbit: d.interface.as_ref().and_then(|(_, speed)| *speed),
        cold: d.cold.map(|e| tsperf_results::json::ColdJson {
            method: tsperf_sys::cold::METHOD.to_owned(),
            pages: e.pages,
            cached_before: e.cached_before,
            cached_after: e.cached_after,
        }),
    }
}

/// A server time (µs since the epoch, 0 for none) on the client's clock, in µs.
fn on_client(o: &StreamOutcome, server_unix_us: u64) -> Option<f64> {
    to_client(o.clock.map(|c| c.offset), server_unix_us)
}

fn to_client(offset: Option<Offset>, server_unix_us: u64) -> Option<f64> {
    let offset = offset?;
    let ns = server_unix_us.checked_mul(1000)?;
    (server_unix_us != 0).then(|| offset.to_client(ns) as f64 / 1e3)
}

/// A one-way figure is known when its error bound is at most this fraction of it.
pub const ONE_WAY_MAX_ERROR: f64 = 0.1;

/// The one-way times from the client's first byte sent, where the error bound allows.
fn one_way(o: &StreamOutcome, report: &Report) -> OneWayJson {
    one_way_of(
        (o.measured.begin_unix_us, o.measured.end_unix_us),
        report.first_byte_unix_us,
        report.last_byte_unix_us,
        o.clock.map(|c| c.offset),
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

mod brief;
mod human;
mod ladder;
mod latency;
mod render;
mod reverse;
mod sections;
mod session;

use render::entry;

pub use ladder::{ladder_human, ladder_json};
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
