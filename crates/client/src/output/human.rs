//! A lone stream's report for people, whichever end sent it: the seed's lines, a headline, a
//! line for each end (the client's first) from its figures, then the sections (a timed run,
//! the clock, the verdict and where the receiver's time went, what the server saved or lost).

use std::time::Duration;

use super::{ONE_WAY_MAX_ERROR, one_way, sections, to_client};
use crate::outcome::{Detail, Forward, Side, StreamOutcome};
use tsperf_proto::sent::Sent;
use tsperf_proto::{LogMode, Report};
use tsperf_results::units;
use tsperf_sys::text::Peer;

/// The report of one stream.
pub(super) fn stream_human(o: &StreamOutcome) -> String {
    let (client, server) = match o.side() {
        Side::Sent => (sender_line(o, &o.sender), receiver_line(o, &o.receiver)),
        Side::Received => (receiver_line(o, &o.receiver), sender_line(o, &o.sender)),
    };
    let forward = match &o.detail {
        Detail::Sent(d) => Some(&**d),
        Detail::Received(_) => None,
    };
    sections::seed_lines(o.measured.begin_unix_us, o.source(), o.measured.end_unix_us)
        + &headline(o)
        + &format!("  client: {client}\n  server: {server}\n")
        + &sections::timed(o.measured.timed)
        + &forward.map_or_else(|| sections::clock(o.clock, ""), |_| clock_human(o))
        + &sections::verdict(&o.verdict())
        + &forward.map_or(String::new(), |_| server_after(&o.receiver))
        + &unprinted(o)
        + &tls(o)
        + &cold(forward)
        + &saved(o)
        + &lost_log_lines(o)
}

/// `sent|received SIZE in TIME: RATE, what each write was, io MODEL, the check`.
fn headline(o: &StreamOutcome) -> String {
    let m = &o.measured;
    let (verb, writes) = match &o.detail {
        Detail::Sent(d) => (
            "sent",
            format!(
                "chunk {} B, io {} {}",
                o.chunk,
                o.io,
                match d.batch {
                    Some(k) => format!("writev of {k}"),
                    None => d.strategy.to_string(),
                }
            ),
        ),
        Detail::Received(d) => (
            "received",
            format!(
                "server writes of {} B{}, io {}",
                o.chunk,
                match (d.strategy, d.batch) {
                    (_, Some(k)) => format!(" (writev of {k})"),
                    (Some(s), None) => format!(" ({s})"),
                    (None, None) => String::new(),
                },
                o.io
            ),
        ),
    };
    // The figures the rate is of: a timed run's omitted start left out, and said so.
    let (bytes, time) = m.rated();
    let all = match m.timed.filter(|_| bytes != m.bytes) {
        Some(t) => format!(
            " after the omitted {} ({} in {} in all)",
            units::duration(t.omit),
            units::size(m.bytes),
            units::duration(m.elapsed)
        ),
        None => String::new(),
    };
    format!(
        "{verb} {} in {}{all}: {}, {writes}, {}\n",
        units::size(bytes),
        units::duration(time),
        sections::rate((bytes, time)),
        sections::check(o.verified(), m.digest),
    )
}

/// The sending end: its writes, its congestion control, its own span, its CPU, the server's
/// I/O model, the client's wait for its file.
fn sender_line(o: &StreamOutcome, s: &Sent) -> String {
    let (call, span, tail) = match &o.detail {
        Detail::Sent(d) => (
            format!("{} call", d.strategy),
            String::new(),
            file_wait(s, d),
        ),
        Detail::Received(_) => (
            "write".to_owned(),
            format!(
                ", first to last write {}",
                units::duration(Duration::from_nanos(s.elapsed_ns))
            ),
            format!(", io {}", s.server_io),
        ),
    };
    format!(
        "{} ({} short){}{span}, cpu {}{tail}",
        units::count(s.writes, &call),
        s.partial_writes,
        s.congestion
            .as_ref()
            .map_or(String::new(), |c| format!(", TCP {}", Peer(c.as_str()))),
        units::cpu(s.cpu_user_us, s.cpu_sys_us, true),
    )
}

/// The receiving end: its reads, its own span (a server's), its CPU, the server's I/O model,
/// the log, the server's stdout.
fn receiver_line(o: &StreamOutcome, r: &Report) -> String {
    let (span, io, stdout) = match &o.detail {
        Detail::Sent(d) => (
            format!(
                ", first to last byte {}",
                units::duration(Duration::from_nanos(r.elapsed_ns))
            ),
            format!(
                ", io {}",
                r.server_io.map_or("?".to_owned(), |v| v.to_string())
            ),
            format!(", stdout to {}", d.server_stdout.describe()),
        ),
        Detail::Received(_) => Default::default(),
    };
    format!(
        "{} of up to {} B{span}, cpu {}{io}, log {}{stdout}",
        units::count(r.reads, "read"),
        r.read_size,
        units::cpu(r.cpu_user_us, r.cpu_sys_us, true),
        match r.log {
            None => "?".to_owned(),
            Some(LogMode::None) => "none".to_owned(),
            Some(mode) => format!(
                "{mode} ({} lines, {} writing them)",
                r.log_lines,
                units::duration(Duration::from_nanos(r.split.log_ns))
            ),
        },
    )
}

/// `, waited 8.91 s for its file (1.02 s before the first byte)` when the file kept the client
/// waiting at least a millisecond; empty otherwise.
fn file_wait(s: &Sent, d: &Forward) -> String {
    let total = Duration::from_nanos(s.source_read_ns) + d.source_read_before;
    if total < Duration::from_millis(1) {
        return String::new();
    }
    format!(
        ", waited {} for its file ({} before the first byte)",
        units::duration(total),
        units::duration(d.source_read_before)
    )
}

/// A receiving server's time split, the output it could not print.
fn server_after(s: &Report) -> String {
    let mut out = String::new();
    let split = &s.split;
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

/// A line when a receiving server could not print some of its own output.
pub(super) fn unprinted(o: &StreamOutcome) -> String {
    let s = &o.receiver;
    if s.output_dropped == 0 || o.side() != Side::Sent {
        return String::new();
    }
    format!(
        "  the server could not print {} of its own output: its stdout or stderr is not being \
         read\n",
        units::count(u64::from(s.output_dropped), "line")
    )
}

/// The stream's TLS: its suite, and whether the key vouched for the server.
fn tls(o: &StreamOutcome) -> String {
    let Some(t) = o.tls else {
        return String::new();
    };
    let who = if t.authenticated {
        "the server's certificate proved by the key"
    } else {
        "the server NOT authenticated (no --auth-key: encrypted, but anyone could be at the far end)"
    };
    let kernel = match t.kernel {
        true => " (this end's records sealed by the kernel: kernel TLS)",
        false => "",
    };
    format!("  over TLS 1.3, {}{kernel}: {who}\n", t.cipher.suite())
}

/// How a file read cold was put out of the page cache first.
pub(super) fn cold(forward: Option<&Forward>) -> String {
    let Some(e) = forward.and_then(|d| d.cold) else {
        return String::new();
    };
    format!(
        "  read cold: {} pages put out of the page cache first ({}; {} had been cached, {} \
         were after)\n",
        e.pages,
        tsperf_sys::cold::METHOD,
        e.cached_before,
        e.cached_after
    )
}

/// Where the receiving end saved the stream, how, and the write's and the sync's times.
pub(super) fn saved(o: &StreamOutcome) -> String {
    let r = &o.receiver;
    let Some(mode) = r.save else {
        return String::new();
    };
    let place = match o.side() {
        Side::Sent => "on the server",
        Side::Received => "here",
    };
    let took = |ns: u64| units::duration(Duration::from_nanos(ns));
    if r.saved_to.is_empty() {
        return format!(
            "  written to the disk {place} and not kept ({}: written in {}, synced in {})\n",
            mode.name(),
            took(r.split.save_ns),
            took(r.split.fsync_ns)
        );
    }
    format!(
        "  saved {place} as {} ({}: written in {}, synced and renamed in {})\n",
        Peer(&r.saved_to),
        mode.name(),
        took(r.split.save_ns),
        took(r.split.fsync_ns)
    )
}

/// A line when some of the receiver's per-read log lines could not be written.
pub(super) fn lost_log_lines(o: &StreamOutcome) -> String {
    let r = &o.receiver;
    let (written, lost) = (u64::from(r.log_lines), u64::from(r.log_lines_lost));
    if lost == 0 {
        return String::new();
    }
    let sink = match r.log {
        Some(LogMode::Stdout) => "its stdout was closed",
        _ => "the log file could not be written (a full disk?)",
    };
    let whose = match o.side() {
        Side::Sent => "the server's",
        Side::Received => "this client's",
    };
    format!(
        "  {whose} log lost {} of {} lines: {sink}\n",
        units::count(lost, "line"),
        written + lost
    )
}

/// The clock line of a forward stream: the offset, and the one-way times it allows.
fn clock_human(o: &StreamOutcome) -> String {
    let Some(c) = o.clock else {
        return sections::clock(None, "");
    };
    let w = one_way(o, &o.receiver);
    let err = w.err_us.unwrap_or(0.0);
    let us = |us: f64| units::duration(Duration::from_secs_f64(us.max(0.0) / 1e6));
    // A figure left out says why: too near the first byte for the clocks' error bound to
    // allow a figure, or a stamp the client's clock cannot place inside the transfer.
    let figure = |v: Option<f64>, server_us: u64| match v {
        Some(v) => us(v),
        None => match to_client(Some(c.offset), server_us)
            .map(|t| t - o.measured.begin_unix_us as f64)
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
        o.clock,
        &format!(
            "; one way from the first byte sent (± {}): to the server's first read {}, to its \
             last {}",
            units::duration(Duration::from_secs_f64(err / 1e6)),
            figure(w.first_byte_us, o.receiver.first_byte_unix_us),
            figure(w.last_byte_us, o.receiver.last_byte_unix_us),
        ),
    )
}

/// Why a finished stream does not verify, for stderr and the JSON's `error`.
pub(super) fn mismatch(o: &StreamOutcome) -> String {
    let m = &o.measured;
    match &o.detail {
        Detail::Sent(d) => format!(
            "MISMATCH: sent {} bytes with xxh3 {:016x}, the server received {} bytes with xxh3 \
             {:016x}{}",
            m.bytes,
            m.digest,
            o.far.length,
            o.far.digest,
            if d.source_changed {
                "; the file was written to while it was sent, so the bytes read are a mix of \
                 its old and new contents (send a file nothing is writing to)"
            } else {
                ""
            }
        ),
        Detail::Received(d) => format!(
            "NOT VERIFIED: received {} bytes with xxh3 {:016x}; the server says it sent {} with \
             xxh3 {:016x}{}",
            m.bytes,
            m.digest,
            o.far.length,
            o.far.digest,
            if m.timed.is_none() && m.bytes != d.asked {
                format!(" ({} were asked for)", d.asked)
            } else {
                String::new()
            }
        ),
    }
}
