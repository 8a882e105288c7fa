//! What tsclient prints for a reverse stream: the seed's begin/end lines, both ends' figures
//! and the verdict (the server being the sender), or one JSON object.

use std::time::Duration;

use serde_json::json;

use super::{VERSION, hex, to_json};
use crate::reverse::ReverseResult;
use tsperf_results::json::{ClockJson, Cpu, ReverseJson, TimedJson};
use tsperf_results::units;
use tsperf_sys::timing::Stamp;

/// The JSON object of a reverse stream.
pub fn reverse_json(r: &ReverseResult) -> String {
    to_json(&tsperf_results::json::ClientJson::Reverse(reverse_object(
        r,
    )))
}

fn reverse_object(r: &ReverseResult) -> ReverseJson {
    let s = &r.server;
    let verdict = r.verdict();
    let secs = |ns: Option<u64>| ns.map(|ns| ns as f64 / 1e9);
    ReverseJson {
        tsperf: VERSION.into(),
        source: if r.name.is_empty() {
            "generated".into()
        } else {
            r.name.clone()
        },
        bytes: r.bytes,
        asked_bytes: r.asked,
        chunk: r.chunk,
        io: r.io,
        peer: r.peer.to_string(),
        elapsed_s: r.elapsed.as_secs_f64(),
        begin_unix_us: r.begin_unix_us,
        end_unix_us: r.end_unix_us,
        mib_per_s: units::mib_per_s(r.measured().0, r.measured().1),
        gbit_per_s: units::gbit_per_s(r.measured().0, r.measured().1),
        verified: r.verified(),
        digest: hex(r.digest),
        interrupted: r.interrupted,
        cpu: Cpu::of(r.cpu.user, r.cpu.sys),
        client: json!({
            "reads": r.reads,
            "read_size": r.read_size,
            "log": r.log,
            "log_lines": r.log_lines.0,
            "log_lines_lost": r.log_lines.1,
            "log_s": r.log_time.as_secs_f64(),
            "rcvbuf": r.rcvbuf,
            "on_cpu_s": r.sched.map(|s| s.on_cpu.as_secs_f64()),
            "run_queue_s": r.sched.map(|s| s.run_queue.as_secs_f64()),
        }),
        server: json!({
            "bytes": s.bytes,
            "digest": hex(r.end.digest),
            "writes": s.writes,
            "partial_writes": s.partial_writes,
            "would_block": s.would_block,
            "sndbuf": s.sndbuf,
            "io": s.server_io,
            "cpu": Cpu::of(Duration::from_micros(s.cpu_user_us), Duration::from_micros(s.cpu_sys_us)),
            "on_cpu_s": secs(s.on_cpu_ns),
            "run_queue_s": secs(s.run_queue_ns),
            "elapsed_s": s.elapsed_ns as f64 / 1e9,
            "first_write_unix_us": s.first_write_unix_us,
            "same_host": r.same_host(),
        }),
        tcp: json!({ "server": s.tcp, "client": r.tcp, "flight": s.flight }),
        clock: ClockJson {
            queries: r.clock.map_or(0, |c| c.queries),
            offset_us: r.clock.map(|c| c.offset.offset_ns as f64 / 1e3),
            offset_err_us: r.clock.map(|c| c.offset.err_ns as f64 / 1e3),
            rtt_us: r.clock.map(|c| c.rtt_ns as f64 / 1e3),
        },
        timed: r.time.map(|t| TimedJson {
            time_s: t.as_secs_f64(),
            omit_s: r.omit.as_secs_f64(),
            file_bytes: r.asked,
            passes: r.bytes as f64 / r.asked.max(1) as f64,
            omitted_bytes: r.omitted.map_or(0, |(b, _)| b),
            omitted_s: r.omitted.map_or(0.0, |(_, t)| t.as_secs_f64()),
            interrupted: r.interrupted,
        }),
        intervals: r.intervals.clone(),
        limited_by: Some(verdict.limited_by),
        limits: verdict.limits,
        error: (!r.verified()).then(|| mismatch(r)),
    }
}

/// The JSON object of a reverse stream that failed or stopped before its end: what arrived.
pub fn reverse_failure_json(f: &crate::StreamFailure) -> String {
    let elapsed = f.elapsed;
    to_json(&tsperf_results::json::ReverseFailureJson {
        tsperf: VERSION.into(),
        mode: "reverse".into(),
        asked_bytes: f.bytes,
        received_bytes: f.sent,
        elapsed_s: elapsed.map(|d| d.as_secs_f64()),
        mib_per_s: elapsed.map(|d| units::mib_per_s(f.sent, d)),
        verified: false,
        interrupted: f.interrupted,
        error: format!("{:#}", f.error),
    })
}

/// Why a reverse stream does not verify.
pub fn reverse_mismatch(r: &ReverseResult) -> String {
    mismatch(r)
}

fn mismatch(r: &ReverseResult) -> String {
    format!(
        "NOT VERIFIED: received {} bytes with xxh3 {:016x}; the server says it sent {} with xxh3 \
         {:016x}{}",
        r.bytes,
        r.digest,
        r.end.length,
        r.end.digest,
        if r.time.is_none() && r.bytes != r.asked {
            format!(" ({} were asked for)", r.asked)
        } else {
            String::new()
        }
    )
}

/// The report for people.
pub fn reverse_human(r: &ReverseResult) -> String {
    let s = &r.server;
    let verdict = if r.verified() {
        format!("verified (xxh3 {:016x})", r.digest)
    } else {
        "NOT VERIFIED".to_owned()
    };
    let v = r.verdict();
    format!(
        "{}\nfile[{}] read over .\n{}\n\
         received {} in {}: {:.1} MiB/s ({:.2} Gbit/s), server writes of {} B, io {}, {verdict}\n\
         \x20 client: {} of up to {} B, cpu {} user + {} sys, log {}\n\
         \x20 server: {} ({} short), first to last write {}, cpu {} user + {} sys, io {}\n{}\
         \x20 {}\n    ({})\n",
        Stamp {
            label: "begin",
            unix_us: r.begin_unix_us
        },
        if r.name.is_empty() {
            "generated".to_owned()
        } else {
            tsperf_sys::text::Peer(&r.name).to_string()
        },
        Stamp {
            label: "end",
            unix_us: r.end_unix_us
        },
        units::size(r.bytes),
        units::duration(r.elapsed),
        units::mib_per_s(r.measured().0, r.measured().1),
        units::gbit_per_s(r.measured().0, r.measured().1),
        r.chunk,
        r.io,
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
        units::duration(Duration::from_nanos(s.elapsed_ns)),
        units::duration(Duration::from_micros(s.cpu_user_us)),
        units::duration(Duration::from_micros(s.cpu_sys_us)),
        s.server_io,
        match r.time {
            Some(t) => format!(
                "  timed: {} asked for, {:.2} passes of {}{}\n",
                units::duration(t),
                r.bytes as f64 / r.asked.max(1) as f64,
                units::size(r.asked),
                r.omitted.map_or(String::new(), |(b, at)| format!(
                    "; the first {} ({} in {}) left out of the rate (--omit)",
                    units::duration(r.omit),
                    units::size(b),
                    units::duration(at)
                ))
            ),
            None => String::new(),
        },
        v.sentence(),
        v.shares(),
    )
}

/// The JSON object of a `--bidir` run: `{"mode": "bidir", "forward": .., "reverse": ..}`, each
/// the object its direction prints alone (a failure's included).
pub fn bidir_json(b: &crate::bidir::Bidir) -> String {
    let value = |text: String| {
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or(serde_json::Value::Null)
    };
    let forward = match &b.forward {
        Ok(r) => value(super::stream_json(r)),
        Err(f) => value(super::stream_failure_json(f)),
    };
    let reverse = match &b.reverse {
        Ok(r) => value(reverse_json(r)),
        Err(f) => value(reverse_failure_json(f)),
    };
    to_json(&json!({
        "mode": "bidir",
        "tsperf": VERSION,
        "forward": forward,
        "reverse": reverse,
    }))
}

/// The report of a `--bidir` run for people: each direction's, under its heading.
pub fn bidir_human(b: &crate::bidir::Bidir) -> String {
    let forward = match &b.forward {
        Ok(r) => super::stream_human(r),
        Err(f) => format!("  failed: {:#}\n", f.error),
    };
    let reverse = match &b.reverse {
        Ok(r) => reverse_human(r),
        Err(f) => format!("  failed: {:#}\n", f.error),
    };
    format!("to the server:\n{forward}\nfrom the server:\n{reverse}")
}
