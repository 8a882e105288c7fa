//! The report's sections for people, each written once and used by every mode that has it:
//! the seed's begin and end lines, the rate, the check, the verdict and its shares, a timed
//! run's passes (and the JSON's `timed`).

use std::time::Duration;

use crate::run::Side;
use crate::{Clock, StreamFailure, Timed};
use tsperf_results::json::TimedJson;
use tsperf_results::units;
use tsperf_results::verdict::Verdict;
use tsperf_sys::text::Peer;
use tsperf_sys::timing::Stamp;

/// The seed's three lines: `begin sec[..], microsec[..]`, the file read over, `end ...`.
pub(super) fn seed_lines(begin_unix_us: u64, name: &str, end_unix_us: u64) -> String {
    format!(
        "{}\nfile[{}] read over .\n{}\n",
        Stamp {
            label: "begin",
            unix_us: begin_unix_us
        },
        Peer(name),
        Stamp {
            label: "end",
            unix_us: end_unix_us
        },
    )
}

/// `RATE MiB/s (RATE Gbit/s)` of `bytes` in `time`.
pub(super) fn rate((bytes, time): (u64, std::time::Duration)) -> String {
    format!(
        "{:.1} MiB/s ({:.2} Gbit/s)",
        units::mib_per_s(bytes, time),
        units::gbit_per_s(bytes, time)
    )
}

/// `verified (xxh3 ..)`, or `NOT VERIFIED`.
pub(super) fn check(verified: bool, digest: u64) -> String {
    if verified {
        format!("verified (xxh3 {digest:016x})")
    } else {
        "NOT VERIFIED".to_owned()
    }
}

/// The verdict's sentence and, below it, the shares it was judged on.
pub(super) fn verdict(v: &Verdict) -> String {
    format!("  {}\n    ({})\n", v.sentence(), v.shares())
}

/// A timed run's line: its time, its passes, its omitted start, a stop.
pub(super) fn timed(t: Option<Timed>) -> String {
    let Some(t) = t else {
        return String::new();
    };
    let omitted = match t.omitted {
        Some((bytes, time)) => format!(
            "; the first {} ({} in {}) left out of the rate (--omit)",
            units::duration(t.omit),
            units::size(bytes),
            units::duration(time)
        ),
        None => String::new(),
    };
    format!(
        "  timed: {} asked for, {:.2} passes of {}{omitted}{}\n",
        units::duration(t.time),
        t.passes,
        units::size(t.file_bytes),
        if t.interrupted {
            "; stopped early by an interrupt, every byte until then verified"
        } else {
            ""
        }
    )
}

/// A timed run's JSON `timed`.
pub(super) fn timed_json(t: Timed) -> TimedJson {
    TimedJson {
        time_s: t.time.as_secs_f64(),
        omit_s: t.omit.as_secs_f64(),
        file_bytes: t.file_bytes,
        passes: t.passes,
        omitted_bytes: t.omitted.map_or(0, |(b, _)| b),
        omitted_s: t.omitted.map_or(0.0, |(_, d)| d.as_secs_f64()),
        interrupted: t.interrupted,
    }
}

/// The clock line: the server's clock against the client's, from the clock queries, and what
/// the mode can say with it (`then`: a forward stream's one-way times).
pub(super) fn clock(c: Option<Clock>, then: &str) -> String {
    let Some(c) = c else {
        return "  clock: not compared (--clock-queries 0)\n".to_owned();
    };
    let d = |ns: u64| units::duration(Duration::from_nanos(ns));
    let sign = if c.offset.offset_ns < 0 { "-" } else { "+" };
    format!(
        "  clock: server minus client {sign}{} ± {} ({}, fastest round trip {}){then}\n",
        d(c.offset.offset_ns.unsigned_abs()),
        d(c.offset.err_ns),
        units::count(u64::from(c.queries), "query"),
        d(c.rtt_ns),
    )
}

/// What an interrupted stream had done, for people: how long, how much it moved of how much,
/// what the server's TCP acknowledged (sending), the rate so far.
pub(super) fn interrupted(f: &StreamFailure, side: Side, timed: bool) -> String {
    let total = match f.bytes {
        _ if timed => " of a timed run".to_owned(),
        Some(b) if b > 0 => format!(" of {}", units::size(b)),
        _ => String::new(),
    };
    let verb = match side {
        Side::Sent => "sent",
        Side::Received => "received",
    };
    let Some(elapsed) = f.elapsed else {
        return format!("interrupted before the data: {verb} 0 bytes{total}\n");
    };
    let acked = f.acked.map_or(String::new(), |a| {
        format!(
            "; the server's TCP acknowledged {}: {:.1} MiB/s so far",
            units::size(a),
            units::mib_per_s(a, elapsed)
        )
    });
    format!(
        "interrupted after {}: {verb} {}{total} ({:.1} MiB/s so far){acked}; not verified (the \
         transfer did not finish)\n",
        units::duration(elapsed),
        units::size(f.sent),
        units::mib_per_s(f.sent, elapsed),
    )
}
