//! A `--parallel` session, either way: a line per stream and a SUM line, as iperf3 prints
//! them, or the JSON's `streams[]` and `sum`.

use super::{VERSION, entry, sections};
use crate::StreamOutcome;
use crate::outcome::Detail;
use crate::run::{Member, Session, Side};
use tsperf_results::json::{SessionJson, SumJson};
use tsperf_results::units;

/// A session's object: each stream's own and their sum.
pub(super) fn session_json(p: &Session) -> SessionJson {
    let (measured, measured_time) = p.measured();
    let elapsed = p.elapsed();
    SessionJson {
        tsperf: VERSION.into(),
        file_bytes: (p.side == Side::Sent).then_some(p.whole),
        asked_bytes: (p.side == Side::Received).then_some(p.whole),
        streams: p.streams.iter().map(|s| entry(p.side, s)).collect(),
        sum: SumJson {
            streams: p.streams.len(),
            bytes: p.bytes(),
            elapsed_s: elapsed.as_secs_f64(),
            mib_per_s: units::mib_per_s(measured, measured_time),
            gbit_per_s: units::gbit_per_s(measured, measured_time),
            verified: p.verified(),
            limited_by: p.verdict(),
        },
    }
}

/// A session for people: the session's begin and end lines, a line per stream, a SUM
/// line.
pub(super) fn session_human(p: &Session) -> String {
    let mut out = stamps(p);
    let received = match p.side {
        Side::Sent => "",
        Side::Received => " received",
    };
    for (i, s) in p.streams.iter().enumerate() {
        out += &match s {
            Ok(s) => {
                let checked = sections::check(s.verified(), s.measured.digest);
                rate_line(&format!("[{i:>3}]{received}"), s.measured.rated())
                    + &format!(", {checked}, limited by {}\n", s.limited_by().words())
            }
            Err(f) => format!("[{i:>3}] failed: {:#}\n", f.error),
        };
    }
    let whole = match (p.side, p.verified()) {
        (_, false) => "NOT VERIFIED".to_owned(),
        (Side::Sent, true) => format!(
            "every stripe verified, the stripes cover all {}",
            tsperf_results::units::size(p.whole)
        ),
        (Side::Received, true) => "every stream verified".to_owned(),
    };
    let verdict = match p.side {
        Side::Sent => format!(
            ", limited by {} (most streams' verdict)",
            p.verdict().map_or("?", |v| v.words())
        ),
        Side::Received => String::new(),
    };
    out + &rate_line(&format!("[SUM]{received}"), p.measured())
        + &format!(
            ", {} streams, {whole}{}{verdict}\n",
            p.streams.len(),
            sent_with(p)
        )
}

/// `, sent with TCP NAME` for the congestion control the session's streams were sent with
/// (the client's for streams it sent, the server's for those it received; names joined by `/`
/// should they differ), or nothing where no end said.
fn sent_with(p: &Session) -> String {
    let mut names: Vec<String> = p
        .streams
        .iter()
        .flatten()
        .filter_map(|s| s.sender.congestion.map(|c| c.to_string()))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        String::new()
    } else {
        format!(", sent with TCP {}", names.join("/"))
    }
}

/// The seed's begin and end lines, from the first stream's first byte to the last one's end.
pub(super) fn stamps(p: &Session) -> String {
    use crate::run::Member;
    let ok: Vec<&StreamOutcome> = p.streams.iter().flatten().collect();
    let begin = ok.iter().map(|s| s.span_us().0).min().unwrap_or(0);
    let end = ok.iter().map(|s| s.span_us().1).max().unwrap_or(0);
    let name = match ok.first() {
        Some(s) if matches!(s.detail, Detail::Received(_)) && s.name.is_empty() => "generated",
        Some(s) => s.name.as_str(),
        None => "?",
    };
    sections::seed_lines(begin, name, end)
}

/// `LABEL BYTES in TIME: RATE MiB/s (RATE Gbit/s)`, a stream's or a session's.
fn rate_line(label: &str, (bytes, elapsed): (u64, std::time::Duration)) -> String {
    format!(
        "{label} {} in {}: {}",
        units::size(bytes),
        units::duration(elapsed),
        sections::rate((bytes, elapsed)),
    )
}
