//! `matrix.md`: the tables, with the machine and settings they came from.

use std::fmt::Write as _;

use anyhow::Result;

use super::{Exporter, Matrix};
use tsperf_results::units;

/// The tables: `matrix.md`.
pub struct Markdown;

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "matrix.md"
    }

    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        Ok(render(m).into_bytes())
    }
}

/// The Markdown text, also printed by the grid at the end of a run.
pub fn render(m: &Matrix) -> String {
    let s = &m.setup;
    let mc = &s.machine;
    let mut o = String::new();
    let _ = writeln!(o, "# tsperf matrix\n");
    let _ = writeln!(
        o,
        "Run {} on {} ({} cores), kernel {}, {}; tsperf {} (commit {}).\n",
        s.date, mc.cpu, mc.cores, mc.kernel, mc.os, mc.tsperf, mc.commit
    );
    let _ = writeln!(
        o,
        "- Network: {}. File: `{}`, {}, xxh3 `{}`. Repetitions per stream cell: {}.",
        s.network,
        s.file,
        units::size(s.bytes),
        s.digest,
        s.reps
    );
    let _ = writeln!(
        o,
        "- TCP: `tcp_rmem` {}, `tcp_wmem` {}, `rmem_max` {}, `wmem_max` {}, congestion control {}.",
        mc.tcp_rmem, mc.tcp_wmem, mc.rmem_max, mc.wmem_max, mc.congestion_control
    );
    // Autotuned buffers differ from run to run: show the range.
    let bufs = |f: fn(&super::StreamRow) -> u64| {
        let lo = m.stream.iter().map(f).min().unwrap_or(0);
        let hi = m.stream.iter().map(f).max().unwrap_or(0);
        if lo == hi {
            units::size(lo)
        } else {
            format!("{} to {}", units::size(lo), units::size(hi))
        }
    };
    let _ = writeln!(
        o,
        "- Socket buffers the runs got: client `SO_SNDBUF` {}; server `SO_RCVBUF` {}.",
        bufs(|r| r.sndbuf),
        bufs(|r| r.rcvbuf)
    );

    if let Some(c) = &m.clock {
        let _ = writeln!(
            o,
            "- Clock offset, server minus client, from each transfer's clock queries: median \
             {:+.1} µs ± {:.1} µs (from {:+.1} to {:+.1} µs over {}; largest error bound \
             {:.1} µs).",
            c.median_offset_us,
            c.median_err_us,
            c.min_offset_us,
            c.max_offset_us,
            units::count(c.transfers as u64, "transfer"),
            c.max_err_us
        );
    }

    if !m.stream.is_empty() {
        stream_table(m, &mut o);
    }
    super::sessions::table(m, &mut o);
    if !m.latency.is_empty() {
        latency_table(m, &mut o);
        super::seed::seed_table(m, &mut o);
    }
    o
}

/// The "of the line" column's header and rule, when the link's rate is known.
pub(super) fn line_columns(line_gbit: Option<f64>) -> (String, &'static str) {
    match line_gbit {
        Some(g) => (format!(" of {g} Gbit/s line |"), "---:|"),
        None => (String::new(), ""),
    }
}

/// A row's share of the line, when its rate is known.
pub(super) fn line_cell(line_gbit: Option<f64>, gbit: f64) -> String {
    line_gbit.map_or(String::new(), |g| format!(" {:.0}% |", 100.0 * gbit / g))
}

/// The stream table: one row per cell.
fn stream_table(m: &Matrix, o: &mut String) {
    let s = &m.setup;
    let slowest = m.slowest_stream();
    let _ = writeln!(o, "\n## Stream: throughput\n");
    let seen = s.server_stdout.map_or(String::new(), |k| {
        format!("; the server saw {}", k.describe())
    });
    let _ = writeln!(
        o,
        "Server `--log stdout` cells: stdout went to {}{seen}.\n",
        s.stdout_to
    );
    let (line_head, line_rule) = line_columns(s.line_gbit);
    let _ = writeln!(
        o,
        "| chunk | client io | server log | median MiB/s | min | max | Gbit/s |{line_head} client CPU | vs slowest | limited by | server's time | verified |"
    );
    let _ = writeln!(
        o,
        "|---:|---|---|---:|---:|---:|---:|{line_rule}---:|---:|---|---|---|"
    );
    for r in &m.stream {
        let line = line_cell(s.line_gbit, r.median_gbit_s);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} |{line} {} | {:.1}× | {} | {} | {} |",
            r.chunk,
            r.io,
            r.log,
            r.median_mib_s,
            r.min_mib_s,
            r.max_mib_s,
            r.median_gbit_s,
            units::seconds(r.client_cpu_s),
            if slowest > 0.0 {
                r.median_mib_s / slowest
            } else {
                0.0
            },
            match &r.limited_by {
                Some(l) if r.limited_by_reps < r.reps => {
                    format!("{l} ({}/{})", r.limited_by_reps, r.reps)
                }
                Some(l) => l.clone(),
                None => "—".into(),
            },
            match (&r.server_largest, r.server_largest_pct) {
                (Some(p), Some(pct)) => format!("{p} {pct:.0}%"),
                _ => "—".into(),
            },
            if r.verified { "yes" } else { "**NO**" }
        );
    }
    if m.stream.iter().any(|r| r.limited_by.is_some()) {
        let _ = writeln!(
            o,
            "\n*limited by*: the verdict of most repetitions (how many gave it, when not all), \
             from both ends' time: `receiver-log` when the server spent half its time writing \
             per-read lines, `sender-cpu` when the client's sending thread was on (or waiting \
             for) a CPU 80% of its time, `shared-cpu` when both ends on one machine were busy, \
             `network` only with evidence from the path, `too-short` for a transfer of less \
             than 100 ms (its shares are a few scheduler slices), and so on (docs/usage.md, \"Why it was \
             slow\"; checked against made limits in results/verdicts.md). *server's time*: the \
             phase the server spent most of its time in, and its share."
        );
    }
}

/// The latency table: one row per cell.
fn latency_table(m: &Matrix, o: &mut String) {
    let slowest = m.slowest_latency();
    let most = m.latency.iter().map(|r| r.count).max().unwrap_or(0);
    let _ = writeln!(o, "\n## Latency: clock query round trip\n");
    let _ = writeln!(
        o,
        "Repetitions per cell: {} (a cell that stalls on Nagle and delayed ACK runs once: the \
         kernel's timer sets its round trip); p50 is their median, with the fastest and slowest \
         repetition's p50 in brackets.\n",
        m.setup.reps
    );
    let _ = writeln!(
        o,
        "| codec | framing | nodelay | reconnect | under load | requests | p50 | p99 | vs slowest | note |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---:|---:|---:|---:|---|");
    for r in &m.latency {
        let mut note = Vec::new();
        if r.count < most && r.under_load.is_none() {
            note.push("fewer requests: each stalls");
        }
        if r.count < most && r.under_load.is_some() {
            note.push("fewer answered under load");
        }
        if r.hint {
            note.push("Nagle + delayed ACK");
        }
        let us = units::micros;
        let idle = match (r.idle_p50_us, r.idle_p99_us) {
            (Some(p50), Some(p99)) => format!(
                "idle p50 {}, p99 {}; the stream: {}",
                us(p50),
                us(p99),
                r.stream_limited_by.as_deref().unwrap_or("?")
            ),
            _ => String::new(),
        };
        if !idle.is_empty() {
            note.push(&idle);
        }
        if r.idle_p50_us.is_some_and(|i| i > r.p50_us) {
            note.push("idle slower than loaded: idle CPUs sleep between queries");
        }
        let p50 = if r.reps > 1 {
            format!(
                "{} ({}–{})",
                us(r.p50_us),
                us(r.p50_range_us.0),
                us(r.p50_range_us.1)
            )
        } else {
            us(r.p50_us)
        };
        let on = |b: bool| if b { "on" } else { "off" };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0}× | {} |",
            r.codec,
            r.framing,
            on(r.nodelay),
            if r.reconnect { "yes" } else { "no" },
            r.under_load
                .as_ref()
                .map_or("—".to_owned(), |l| format!("stream, log {l}")),
            r.count,
            p50,
            us(r.p99_us),
            if r.p50_us > 0.0 {
                slowest / r.p50_us
            } else {
                0.0
            },
            note.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    /// The Markdown for a fixed matrix.
    #[test]
    fn snapshot() {
        insta::assert_snapshot!(super::render(&super::super::fixture::matrix()));
    }

    /// With a known line rate, every stream row gives its fraction of it.
    #[test]
    fn line_rate_column() {
        let mut m = super::super::fixture::matrix();
        m.setup.line_gbit = Some(1.0);
        let md = super::render(&m);
        assert!(
            md.contains("| Gbit/s | of 1 Gbit/s line | client CPU |"),
            "{md}"
        );
        assert!(
            md.contains("| 102 | blocking | none | 82.0 | 81.0 | 83.0 | 0.69 | 69% |"),
            "{md}"
        );
    }
}
