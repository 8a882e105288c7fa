//! The default report for people, read at a glance as iperf3's is: the seed's begin and end
//! lines, then iperf3's table (a sender's and a receiver's row for each stream, a `[SUM]` for a
//! session and for both ways of `--bidir`), then a few plain sentences: the check, the CPU,
//! what limited the run. No line is longer than [`WIDTH`]. `--verbose` prints the full detail
//! instead ([`super::human`]); the JSON always has all of it.

use std::time::Duration;

use super::{human, sections};
use crate::StreamOutcome;
use crate::outcome::Side;
use crate::run::{Session, Streams};
use tsperf_results::intervals::{header, row};
use tsperf_results::units;
use tsperf_results::verdict::LimitedBy;

/// The widest line this report prints.
pub(super) const WIDTH: usize = 99;

/// One direction's part of the report: its seed lines, its table rows, the sentences below
/// the table, and its total for a `--bidir` SUM (bytes, start and end in seconds).
#[derive(Default)]
struct Part {
    seed: String,
    rows: Vec<String>,
    notes: Vec<String>,
    total: Option<(u64, f64, f64)>,
}

/// The report of a stream run, any direction, any stream count.
pub(super) fn report(o: &Streams) -> String {
    match (&o.forward, &o.reverse) {
        (Some(f), Some(r)) => bidir(&part(f, "[TX]"), &part(r, "[RX]")),
        (Some(d), None) | (None, Some(d)) => {
            let p = part(d, "");
            match p.rows.is_empty() {
                true => p.seed + &lines(&p.notes),
                false => p.seed + &table(&p.rows) + &lines(&p.notes),
            }
        }
        (None, None) => String::new(),
    }
}

/// Both ways: each direction's seed lines under its heading, one table, a SUM of both ways,
/// then each direction's sentences under its label.
fn bidir(tx: &Part, rx: &Part) -> String {
    let mut rows: Vec<String> = tx.rows.iter().chain(&rx.rows).cloned().collect();
    if let (Some((a, a0, a1)), Some((b, b0, b1))) = (tx.total, rx.total) {
        let span = (a0.min(b0), a1.max(b1));
        rows.push(row("[SUM]", span, a + b, None) + "  both ways");
    }
    let label = |tag: &str, notes: &[String]| -> Vec<String> {
        notes.iter().map(|n| format!("{tag} {n}")).collect()
    };
    let notes = [label("[TX]", &tx.notes), label("[RX]", &rx.notes)].concat();
    format!("to the server ([TX]):\n{}", tx.seed)
        + &format!("from the server ([RX]):\n{}", rx.seed)
        + &table(&rows)
        + &lines(&notes)
}

/// The table: iperf3's header, then the rows.
fn table(rows: &[String]) -> String {
    let mut out = header() + "\n";
    for r in rows {
        out += r.trim_end();
        out.push('\n');
    }
    out
}

/// Sentences, each wrapped to [`WIDTH`].
fn lines(notes: &[String]) -> String {
    notes.iter().map(|n| wrap(n)).collect()
}

/// One direction: a lone stream's, a session's, or why it could not start.
fn part(d: &Result<Session, String>, tag: &str) -> Part {
    let s = match d {
        Err(e) if !tag.is_empty() => return notes_only(format!("failed: {e}")),
        Err(_) => return Part::default(),
        Ok(s) if s.striped => return session(s, tag),
        Ok(s) => s,
    };
    match &s.streams[0] {
        Ok(o) => stream(o, tag),
        Err(f) if !tag.is_empty() => notes_only(format!("failed: {:#}", f.error)),
        Err(f) if f.interrupted => notes_only(sections::interrupted(f, s.side, s.timed)),
        Err(_) => Part::default(),
    }
}

fn notes_only(note: String) -> Part {
    Part {
        notes: vec![note.trim_end().to_owned()],
        ..Part::default()
    }
}

/// A lone stream: its two rows and its sentences.
fn stream(o: &StreamOutcome, tag: &str) -> Part {
    let m = &o.measured;
    let (rows, total) = rows(&format!("[  0]{tag}"), o);
    let mut notes = vec![check(o)];
    notes.extend(omitted(o));
    notes.push(cpu(o));
    notes.push(o.verdict().sentence());
    notes.extend(tls(o));
    let cold = match &o.detail {
        crate::outcome::Detail::Sent(d) => human::cold(Some(d)),
        crate::outcome::Detail::Received(_) => String::new(),
    };
    for extra in [
        cold,
        human::saved(o),
        human::lost_log_lines(o),
        human::unprinted(o),
    ] {
        if !extra.is_empty() {
            notes.push(extra.trim().to_owned());
        }
    }
    Part {
        seed: sections::seed_lines(m.begin_unix_us, o.source(), m.end_unix_us),
        rows,
        notes,
        total: Some(total),
    }
}

/// A stream's sender row and receiver row, as iperf3 prints them, and this client's figure
/// for a SUM. This client's row is the rate's (a timed run's omitted start left out, so it
/// starts at `-O`); the far end's is all it counted, over its own first to last byte.
fn rows(label: &str, o: &StreamOutcome) -> (Vec<String>, (u64, f64, f64)) {
    let m = &o.measured;
    let (bytes, time) = m.rated();
    let end = m.elapsed.as_secs_f64();
    let start = (m.elapsed.saturating_sub(time)).as_secs_f64();
    let secs = |ns: u64| Duration::from_nanos(ns).as_secs_f64();
    let (s, r) = (&o.sender, &o.receiver);
    let rows = match o.side() {
        Side::Sent => vec![
            row(label, (start, end), bytes, s.tcp.total_retrans) + "  sender",
            row(label, (0.0, secs(r.elapsed_ns)), r.bytes, None) + "  receiver",
        ],
        Side::Received => vec![
            row(
                label,
                (0.0, secs(s.elapsed_ns)),
                s.bytes,
                s.tcp.total_retrans,
            ) + "  sender",
            row(label, (start, end), bytes, None) + "  receiver",
        ],
    };
    (rows, (bytes, start, end))
}

/// The check, in words: who counted and hashed what.
fn check(o: &StreamOutcome) -> String {
    let m = &o.measured;
    let stop = match o.interrupted {
        true => ", up to the interrupt that stopped it early",
        false => "",
    };
    match (o.verified(), o.side()) {
        (false, _) => "NOT VERIFIED: the two ends' byte counts or checksums differ (the error \
                       says how)"
            .to_owned(),
        (true, Side::Sent) => format!(
            "verified: the server counted all {}; its xxh3 matches this client's ({:016x}){stop}",
            units::size(m.bytes),
            m.digest
        ),
        (true, Side::Received) => format!(
            "verified: this client counted all {}; its xxh3 matches the server's ({:016x}){stop}",
            units::size(m.bytes),
            m.digest
        ),
    }
}

/// A timed run's omitted start: what left it out of this client's row.
fn omitted(o: &StreamOutcome) -> Option<String> {
    let t = o.measured.timed?;
    let (bytes, time) = t.omitted?;
    Some(format!(
        "omitted: the first {} ({} of slow start, -O) is left out of this client's row",
        units::duration(time),
        units::size(bytes)
    ))
}

/// Each end's time on a CPU while the data moved, and per GiB: one figure an end, the
/// kernel's count of the thread's time on a CPU where it has one (schedstat), else the
/// process's user plus system time.
fn cpu(o: &StreamOutcome) -> String {
    let (s, r) = (&o.sender, &o.receiver);
    let sender = on_cpu(s.on_cpu_ns, s.cpu_user_us, s.cpu_sys_us);
    let receiver = on_cpu(r.on_cpu_ns, r.cpu_user_us, r.cpu_sys_us);
    let (client, server) = match o.side() {
        Side::Sent => (sender, receiver),
        Side::Received => (receiver, sender),
    };
    let gib = o.measured.bytes as f64 / f64::from(1u32 << 30);
    let per_gib = match gib > 0.0 {
        true => format!(
            " ({} and {} a GiB)",
            short(client.div_f64(gib)),
            short(server.div_f64(gib))
        ),
        false => String::new(),
    };
    format!(
        "cpu: client {}, server {} on a CPU{per_gib}",
        short(client),
        short(server)
    )
}

/// A time in three figures: `781 ms`, `27.5 ms`, `1.06 s`, `412 µs`.
fn short(d: Duration) -> String {
    let three = |v: f64, unit: &str| match v {
        v if v >= 100.0 => format!("{v:.0} {unit}"),
        v if v >= 10.0 => format!("{v:.1} {unit}"),
        v => format!("{v:.2} {unit}"),
    };
    match d.as_secs_f64() {
        0.0 => "0 µs".to_owned(),
        s if s >= 1.0 => three(s, "s"),
        s if s >= 1e-3 => three(s * 1e3, "ms"),
        s => three(s * 1e6, "µs"),
    }
}

fn on_cpu(on_cpu_ns: Option<u64>, user_us: u64, sys_us: u64) -> Duration {
    on_cpu_ns.map_or_else(
        || Duration::from_micros(user_us + sys_us),
        Duration::from_nanos,
    )
}

/// The stream's TLS, where it had one.
fn tls(o: &StreamOutcome) -> Option<String> {
    let t = o.tls?;
    let kernel = match t.kernel {
        true => ", this end's records sealed by the kernel (kernel TLS)",
        false => "",
    };
    let who = match t.authenticated {
        true => "the server proved by the key",
        false => "the server NOT authenticated (no --auth-key)",
    };
    Some(format!(
        "encrypted: TLS 1.3 {}{kernel}; {who}",
        t.cipher.suite()
    ))
}

/// A `-P` session: each stream's rows (or why it failed), the SUM rows, the check and the
/// streams' verdict.
fn session(p: &Session, tag: &str) -> Part {
    let mut rows = Vec::new();
    for (i, s) in p.streams.iter().enumerate() {
        match s {
            Ok(o) => rows.extend(self::rows(&format!("[{i:>3}]{tag}"), o).0),
            Err(f) => rows.push(format!("[{i:>3}]{tag} failed: {:#}", f.error)),
        }
    }
    let ok: Vec<&StreamOutcome> = p.streams.iter().flatten().collect();
    let (bytes, time) = p.measured();
    let end = p.elapsed().as_secs_f64();
    let start = (end - time.as_secs_f64()).max(0.0);
    let label = format!("[SUM]{tag}");
    let mine = row(&label, (start, end), bytes, None);
    let far = far_sum(&label, p.side, &ok);
    rows.extend(match p.side {
        Side::Sent => [mine + "  sender", far + "  receiver"],
        Side::Received => [far + "  sender", mine + "  receiver"],
    });
    let n = p.streams.len();
    let verdict = match p.verdict() {
        Some(LimitedBy::TooShort) => "limited by: too short to tell (a verdict needs 100 ms or \
                                      more: send more, or run for a time with -t)"
            .to_owned(),
        v => format!(
            "limited by {} (the verdict of most of the {n} streams; -V for each)",
            v.map_or("nothing known", LimitedBy::words)
        ),
    };
    Part {
        seed: super::session::stamps(p),
        rows,
        notes: vec![session_check(p), verdict],
        total: Some((bytes, start, end)),
    }
}

/// The far end's SUM row: every byte it counted, over its longest stream's span.
fn far_sum(label: &str, side: Side, ok: &[&StreamOutcome]) -> String {
    let (bytes, ns) = ok.iter().fold((0, 0), |(b, t), o| match side {
        Side::Sent => (b + o.receiver.bytes, t.max(o.receiver.elapsed_ns)),
        Side::Received => (b + o.sender.bytes, t.max(o.sender.elapsed_ns)),
    });
    row(
        label,
        (0.0, Duration::from_nanos(ns).as_secs_f64()),
        bytes,
        None,
    )
}

/// A session's check: every stream's bytes counted and hashed by the far end.
fn session_check(p: &Session) -> String {
    let n = p.streams.len();
    let generated = p
        .streams
        .iter()
        .flatten()
        .all(|o| o.name.is_empty() || o.name.starts_with("generated"));
    let whole = match (p.side, p.timed, generated) {
        (Side::Sent, false, false) => format!(
            "; FILE was split into {n} ranges, one a stream, that cover all {}",
            units::size(p.whole)
        ),
        (Side::Sent, false, true) => format!(
            "; the generated text was split into {n} ranges, one a stream, that cover all {}",
            units::size(p.whole)
        ),
        _ => String::new(),
    };
    match (p.verified(), p.side) {
        (false, _) => "NOT VERIFIED: a stream's byte count or checksum differs at the two ends \
                       (the error says how)"
            .to_owned(),
        (true, Side::Sent) => format!(
            "verified: the server counted each of the {n} streams' bytes and its xxh3 checksums \
             match this client's{whole}"
        ),
        (true, Side::Received) => format!(
            "verified: this client counted each of the {n} streams' bytes and its xxh3 \
             checksums match the server's"
        ),
    }
}

/// `text` as lines no wider than [`WIDTH`] (in characters), broken between words; the lines
/// after the first indented by two spaces.
pub(super) fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let width = line.chars().count();
        if width > 2 && width + 1 + word.chars().count() > WIDTH {
            out += &line;
            out.push('\n');
            line = "  ".to_owned();
        } else if !line.is_empty() && line != "  " {
            line.push(' ');
        }
        line += word;
    }
    out + &line + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long sentence breaks between words into lines of at most WIDTH characters, the
    /// later ones indented; no word is lost or split.
    #[test]
    fn a_long_sentence_wraps_between_words() {
        let text = "limited by this machine's 2 CPUs, which both ends share: ".repeat(5);
        let wrapped = wrap(&text);
        assert!(wrapped.lines().count() > 1, "{wrapped}");
        for (i, l) in wrapped.lines().enumerate() {
            assert!(l.chars().count() <= WIDTH, "{l}");
            assert_eq!(l.starts_with("  "), i > 0, "{l}");
        }
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&wrapped), words(&text));
        assert_eq!(wrap("short"), "short\n");
    }
}
