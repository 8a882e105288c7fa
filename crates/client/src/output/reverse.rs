//! A reverse stream's JSON: its object (the client's figures the receiver's, the server's
//! Sent frame the sender's), or what arrived before it failed.

use super::human::mismatch;
use super::{VERSION, clock_json, hex, receiver_cpu, sections, sender_cpu};
use crate::outcome::{Reverse, StreamOutcome};
use tsperf_results::json::{
    ReceiverSide, ReverseFailureJson, ReverseJson, ReverseTcpJson, SenderSide,
};
use tsperf_results::units;

/// The object of a reverse stream: the server sent, its Sent frame is the sender's figures.
pub(super) fn reverse_object(o: &StreamOutcome, d: &Reverse) -> ReverseJson {
    let (s, r) = (&o.sender, &o.receiver);
    let verdict = o.verdict();
    let (rated, rated_time) = o.measured.rated();
    ReverseJson {
        tsperf: VERSION.into(),
        source: o.source().to_owned(),
        bytes: o.measured.bytes,
        asked_bytes: d.asked,
        chunk: o.chunk,
        strategy: d.strategy,
        batch: d.batch,
        io: o.io,
        peer: o.peer.to_string(),
        elapsed_s: o.measured.elapsed.as_secs_f64(),
        begin_unix_us: o.measured.begin_unix_us,
        end_unix_us: o.measured.end_unix_us,
        mib_per_s: units::mib_per_s(rated, rated_time),
        gbit_per_s: units::gbit_per_s(rated, rated_time),
        verified: o.verified(),
        digest: hex(o.measured.digest),
        interrupted: o.interrupted,
        cpu: receiver_cpu(r),
        client: ReceiverSide {
            receiver: r.into(),
            log_s: r.split.log_ns as f64 / 1e9,
            wake_mark: d.wake_mark,
        },
        server: SenderSide {
            bytes: s.bytes,
            digest: hex(o.far.digest),
            sender: s.into(),
            io: s.server_io,
            cpu: sender_cpu(s),
            elapsed_s: s.elapsed_ns as f64 / 1e9,
            first_write_unix_us: s.first_write_unix_us,
            same_host: o.same_host(),
        },
        tcp: ReverseTcpJson {
            server: s.tcp,
            client: r.tcp,
            flight: s.flight,
        },
        clock: clock_json(o.clock),
        timed: o.measured.timed.map(sections::timed_json),
        intervals: o.measured.intervals.clone(),
        tls: o.tls.map(|t| {
            tsperf_results::json::TlsJson::of(t.cipher, t.authenticated, &t.cert_sha256, t.kernel)
        }),
        limited_by: Some(verdict.limited_by),
        limits: verdict.limits,
        error: (!o.verified()).then(|| mismatch(o)),
    }
}

/// The object of a reverse stream that failed or stopped before its end: what arrived.
pub(super) fn reverse_failure_object(f: &crate::StreamFailure) -> ReverseFailureJson {
    let elapsed = f.elapsed;
    ReverseFailureJson {
        tsperf: VERSION.into(),
        mode: "reverse".into(),
        asked_bytes: f.bytes,
        received_bytes: f.sent,
        elapsed_s: elapsed.map(|d| d.as_secs_f64()),
        mib_per_s: elapsed.map(|d| units::mib_per_s(f.sent, d)),
        verified: false,
        interrupted: f.interrupted,
        error: format!("{:#}", f.error),
    }
}
