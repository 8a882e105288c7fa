//! What tsclient prints for a reverse stream: the seed's begin/end lines, both ends' figures
//! and the verdict (the server being the sender), or one JSON object.

use std::time::Duration;

use super::{VERSION, hex, sections};
use crate::reverse::ReverseResult;
use tsperf_results::json::{
    ClockJson, Cpu, ReceiverSide, ReverseFailureJson, ReverseJson, ReverseTcpJson, SenderSide,
};
use tsperf_results::units;

/// The object of a reverse stream.
pub(super) fn reverse_object(r: &ReverseResult) -> ReverseJson {
    let s = &r.server;
    let verdict = r.verdict();
    let secs = |ns: Option<u64>| ns.map(|ns| ns as f64 / 1e9);
    ReverseJson {
        tsperf: VERSION.into(),
        source: r.source().to_owned(),
        bytes: r.measured.bytes,
        asked_bytes: r.asked,
        chunk: r.chunk,
        io: r.io,
        peer: r.peer.to_string(),
        elapsed_s: r.measured.elapsed.as_secs_f64(),
        begin_unix_us: r.measured.begin_unix_us,
        end_unix_us: r.measured.end_unix_us,
        mib_per_s: units::mib_per_s(r.measured.rated().0, r.measured.rated().1),
        gbit_per_s: units::gbit_per_s(r.measured.rated().0, r.measured.rated().1),
        verified: r.verified(),
        digest: hex(r.measured.digest),
        interrupted: r.interrupted,
        cpu: Cpu::of(r.cpu.user, r.cpu.sys),
        client: ReceiverSide {
            reads: r.reads,
            read_size: r.read_size as u64,
            log: r.log,
            log_lines: r.log_lines.0,
            log_lines_lost: r.log_lines.1,
            log_s: r.log_time.as_secs_f64(),
            rcvbuf: r.rcvbuf,
            wake_mark: r.wake_mark,
            on_cpu_s: r.sched.map(|s| s.on_cpu.as_secs_f64()),
            run_queue_s: r.sched.map(|s| s.run_queue.as_secs_f64()),
        },
        server: SenderSide {
            bytes: s.bytes,
            digest: hex(r.end.digest),
            writes: s.writes,
            partial_writes: s.partial_writes,
            would_block: s.would_block,
            sndbuf: s.sndbuf,
            congestion: s.congestion.map(|c| c.to_string()),
            io: s.server_io,
            cpu: Cpu::of(
                Duration::from_micros(s.cpu_user_us),
                Duration::from_micros(s.cpu_sys_us),
            ),
            on_cpu_s: secs(s.on_cpu_ns),
            run_queue_s: secs(s.run_queue_ns),
            elapsed_s: s.elapsed_ns as f64 / 1e9,
            first_write_unix_us: s.first_write_unix_us,
            same_host: r.same_host(),
        },
        tcp: ReverseTcpJson {
            server: s.tcp,
            client: r.tcp,
            flight: s.flight,
        },
        clock: ClockJson {
            queries: r.clock.map_or(0, |c| c.queries),
            offset_us: r.clock.map(|c| c.offset.offset_ns as f64 / 1e3),
            offset_err_us: r.clock.map(|c| c.offset.err_ns as f64 / 1e3),
            rtt_us: r.clock.map(|c| c.rtt_ns as f64 / 1e3),
        },
        timed: r.measured.timed.map(sections::timed_json),
        intervals: r.measured.intervals.clone(),
        limited_by: Some(verdict.limited_by),
        limits: verdict.limits,
        error: (!r.verified()).then(|| reverse_mismatch(r)),
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

/// Why a reverse stream does not verify.
pub(super) fn reverse_mismatch(r: &ReverseResult) -> String {
    format!(
        "NOT VERIFIED: received {} bytes with xxh3 {:016x}; the server says it sent {} with xxh3 \
         {:016x}{}",
        r.measured.bytes,
        r.measured.digest,
        r.end.length,
        r.end.digest,
        if r.measured.timed.is_none() && r.measured.bytes != r.asked {
            format!(" ({} were asked for)", r.asked)
        } else {
            String::new()
        }
    )
}

/// The report for people.
pub(super) fn reverse_human(r: &ReverseResult) -> String {
    let s = &r.server;
    sections::seed_lines(r.measured.begin_unix_us, r.source(), r.measured.end_unix_us)
        + &format!(
            "received {} in {}: {}, server writes of {} B, io {}, {}\n\
             \x20 client: {} of up to {} B, cpu {} user + {} sys, log {}\n\
             \x20 server: {} ({} short){}, first to last write {}, cpu {} user + {} sys, io {}\n",
            units::size(r.measured.bytes),
            units::duration(r.measured.elapsed),
            sections::rate(r.measured.rated()),
            r.chunk,
            r.io,
            sections::check(r.verified(), r.measured.digest),
            units::count(r.reads, "read"),
            r.read_size,
            units::duration(r.cpu.user),
            units::duration(r.cpu.sys),
            match r.log {
                tsperf_proto::LogMode::None => "none".to_owned(),
                mode => format!(
                    "{mode} ({} lines, {} writing them)",
                    r.log_lines.0,
                    units::duration(r.log_time)
                ),
            },
            units::count(s.writes, "write"),
            s.partial_writes,
            s.congestion.map_or(String::new(), |c| format!(", TCP {c}")),
            units::duration(Duration::from_nanos(s.elapsed_ns)),
            units::duration(Duration::from_micros(s.cpu_user_us)),
            units::duration(Duration::from_micros(s.cpu_sys_us)),
            s.server_io,
        )
        + &sections::timed(r.measured.timed)
        + &sections::clock(r.clock, "")
        + &sections::verdict(&r.verdict())
}
