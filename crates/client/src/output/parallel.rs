//! What tsclient prints for a `--parallel` session: a line per stream and a SUM line, as iperf3
//! prints them, or one JSON object with `streams[]` and `sum`.

use super::{VERSION, to_json};
use crate::parallel::Parallel;
use tsperf_results::json::{ClientJson, SessionJson, SumJson};
use tsperf_results::units;
use tsperf_results::verdict::LimitedBy;
use tsperf_sys::timing::Stamp;

/// The JSON object of a session.
pub fn parallel_json(p: &Parallel) -> String {
    let streams = p.streams.iter().map(|s| match s {
        Ok(r) => super::stream_json(r),
        Err(f) => super::stream_failure_json(f),
    });
    to_json(&ClientJson::Parallel(SessionJson {
        tsperf: VERSION.into(),
        file_bytes: Some(p.file_bytes),
        asked_bytes: None,
        streams: values(streams),
        sum: sum_json(
            p.streams.len(),
            (p.bytes(), p.elapsed()),
            p.measured(),
            p.verified(),
            p.verdict(),
        ),
    }))
}

/// Each stream's object (printed alone, then parsed back), in order.
fn values(texts: impl Iterator<Item = String>) -> Vec<serde_json::Value> {
    texts
        .map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::Null))
        .collect()
}

/// A session's `sum`: its streams, bytes and time, its rate (of the bytes and time after the
/// omitted start, with `--omit`), whether it verified, its verdict.
fn sum_json(
    streams: usize,
    (bytes, elapsed): (u64, std::time::Duration),
    (measured, measured_time): (u64, std::time::Duration),
    verified: bool,
    limited_by: Option<LimitedBy>,
) -> SumJson {
    SumJson {
        streams,
        bytes,
        elapsed_s: elapsed.as_secs_f64(),
        mib_per_s: units::mib_per_s(measured, measured_time),
        gbit_per_s: units::gbit_per_s(measured, measured_time),
        verified,
        limited_by,
    }
}

/// The report for people: the session's begin and end lines, a line per stream, a SUM line.
pub fn parallel_human(p: &Parallel) -> String {
    let ok: Vec<_> = p.streams.iter().flatten().collect();
    let begin = ok.iter().map(|r| r.begin_unix_us).min().unwrap_or(0);
    let end = ok.iter().map(|r| r.end_unix_us).max().unwrap_or(0);
    let mut out = format!(
        "{}\nfile[{}] read over .\n{}\n",
        Stamp {
            label: "begin",
            unix_us: begin
        },
        ok.first().map_or("?", |r| r.name.as_str()),
        Stamp {
            label: "end",
            unix_us: end
        },
    );
    for (i, s) in p.streams.iter().enumerate() {
        out += &match s {
            Ok(r) => {
                let checked = if r.verified() {
                    format!("verified (xxh3 {:016x})", r.digest)
                } else {
                    "NOT VERIFIED".to_owned()
                };
                rate_line(&format!("[{i:>3}]"), r.measured())
                    + &format!(", {checked}, limited by {}\n", r.verdict().limited_by)
            }
            Err(f) => format!("[{i:>3}] failed: {:#}\n", f.error),
        };
    }
    let verdict = p.verdict().map_or("?".to_owned(), |v| v.to_string());
    out + &rate_line("[SUM]", p.measured())
        + &format!(
            ", {} streams, {}, limited by {verdict} (most streams' verdict)\n",
            p.streams.len(),
            if p.verified() {
                "every stripe verified, the stripes cover the file"
            } else {
                "NOT VERIFIED"
            },
        )
}

/// `LABEL BYTES in TIME: RATE MiB/s (RATE Gbit/s)`, a stream's or a session's.
fn rate_line(label: &str, (bytes, elapsed): (u64, std::time::Duration)) -> String {
    format!(
        "{label} {} in {}: {:.1} MiB/s ({:.2} Gbit/s)",
        units::size(bytes),
        units::duration(elapsed),
        units::mib_per_s(bytes, elapsed),
        units::gbit_per_s(bytes, elapsed),
    )
}

/// The JSON object of a reverse session: `{"mode": "parallel-reverse", "streams", "sum"}`.
pub fn parallel_reverse_json(p: &crate::parallel::ParallelReverse) -> String {
    let streams = p.streams.iter().map(|s| match s {
        Ok(r) => super::reverse_json(r),
        Err(f) => super::reverse_failure_json(f),
    });
    to_json(&ClientJson::ParallelReverse(SessionJson {
        tsperf: VERSION.into(),
        file_bytes: None,
        asked_bytes: Some(p.asked),
        streams: values(streams),
        sum: sum_json(
            p.streams.len(),
            (p.bytes(), p.elapsed()),
            p.measured(),
            p.verified(),
            p.verdict(),
        ),
    }))
}

/// A reverse session for people: a line per stream and a SUM line.
pub fn parallel_reverse_human(p: &crate::parallel::ParallelReverse) -> String {
    let mut out = String::new();
    for (i, s) in p.streams.iter().enumerate() {
        out += &match s {
            Ok(r) => {
                let checked = if r.verified() {
                    "verified"
                } else {
                    "NOT VERIFIED"
                };
                rate_line(&format!("[{i:>3}] received"), r.measured())
                    + &format!(", {checked}, limited by {}\n", r.verdict().limited_by)
            }
            Err(f) => format!("[{i:>3}] failed: {:#}\n", f.error),
        };
    }
    out + &rate_line("[SUM] received", p.measured())
        + &format!(
            ", {} streams, {}\n",
            p.streams.len(),
            if p.verified() {
                "every stream verified"
            } else {
                "NOT VERIFIED"
            },
        )
}

/// The JSON object of `-P N --bidir`: `{"mode": "bidir", "forward": {parallel}, "reverse":
/// {parallel-reverse}}` (a session that could not start: `{"error": ...}`).
pub fn bidir_parallel_json(b: &crate::bidir::BidirParallel) -> String {
    let value = |r: Result<String, &String>| match r {
        Ok(text) => serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        Err(e) => serde_json::json!({ "error": e }),
    };
    to_json(&serde_json::json!({
        "mode": "bidir",
        "tsperf": VERSION,
        "forward": value(b.forward.as_ref().map(parallel_json)),
        "reverse": value(b.reverse.as_ref().map(parallel_reverse_json)),
    }))
}

/// `-P N --bidir` for people: each direction's session under its heading.
pub fn bidir_parallel_human(b: &crate::bidir::BidirParallel) -> String {
    let forward = b
        .forward
        .as_ref()
        .map_or_else(|e| format!("  failed: {e}\n"), parallel_human);
    let reverse = b
        .reverse
        .as_ref()
        .map_or_else(|e| format!("  failed: {e}\n"), parallel_reverse_human);
    format!("to the server:\n{forward}\nfrom the server:\n{reverse}")
}
