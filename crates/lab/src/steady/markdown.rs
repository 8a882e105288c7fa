//! steady.md: the table, the bars and the machine's limit.

use std::fmt::Write as _;

use super::{CellResult, Kind, Loop, LoopSample, Sample, SteadyReport, limit_of, median};

/// `steady.md`.
pub fn markdown(r: &SteadyReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Steady state at large writes: tsperf and iperf3\n\n\
         Loopback on {}. {} per run, {} alternating pairs per cell (the first tool changes \
         each repetition), medians and [min-max]. Made by `scripts/peers.sh --steady`.\n\n\
         Rates: tsperf end to end (first byte written to the server's report of every byte \
         counted and checksummed), iperf3 its receiver. CPU per GiB on each end, measured from \
         outside the same way for both: the client's `wait4` rusage (its whole life, start-up \
         included), the server's `/proc/PID/stat` before and after (10 ms ticks). tsperf \
         checksums every byte on both ends; iperf3 checksums nothing. *memory*: tsclient's \
         generated stream (36 MiB of the seed's text, cycled: bytes that leave the CPU's cache) \
         against iperf3's one `-l` buffer sent again and again; *memory, one buffer*: \
         `tsclient --one-buffer`, one `--chunk` sent again and again, the same work as \
         iperf3's (*-R, one buffer*: the server sends so, `tsclient -R --one-buffer`); *-C cubic*: both tools send with TCP cubic (`tsclient --congestion cubic`, \
         `iperf3 -C cubic`; with -R each asks its server to), the others with the kernel's default ({}). \
         *Its checksummed loop*: after each pair, the floor loop below that does the cell's work \
         with nothing else (xxh3 on both ends; from one buffer, from the generated stream for \
         the text and -P 2 cells, or for the file cells from the file, `read()` block by block \
         into one buffer as iperf3 -F reads it; on the cell's congestion control), median: the \
         cell's limit in the same sitting.\n",
        r.machine,
        tsperf_results::units::size(r.len),
        r.reps,
        if r.machine.congestion_control.is_empty() {
            "not known"
        } else {
            &r.machine.congestion_control
        },
    );
    let _ = writeln!(
        o,
        "| cell | write | tsperf MiB/s | iperf3 MiB/s | ratio | its checksummed loop MiB/s | client CPU s/GiB tsperf | iperf3 | server CPU s/GiB tsperf | iperf3 | verified |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for c in &r.cells {
        let spread = |v: &[Sample]| {
            let m = median(v, |s| s.mib_s);
            let lo = v.iter().map(|s| s.mib_s).fold(f64::INFINITY, f64::min);
            let hi = v.iter().map(|s| s.mib_s).fold(0.0, f64::max);
            format!("{m:.0} [{lo:.0}-{hi:.0}]")
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.2}x | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} |",
            c.cell.kind.label(),
            tsperf_results::units::size(u64::from(c.cell.chunk)),
            spread(&c.tsperf),
            spread(&c.iperf3),
            c.ratio(),
            own_loop(c).map_or("-".to_owned(), |(l, _)| format!("{:.0}", l.mib_s)),
            cpu_per_gib(&c.tsperf, true),
            cpu_per_gib(&c.iperf3, true),
            cpu_per_gib(&c.tsperf, false),
            cpu_per_gib(&c.iperf3, false),
            if c.verified() { "all" } else { "NOT ALL" }
        );
    }
    bars_section(r, &mut o);
    floors_section(r, &mut o);
    floor_cpu_section(r, &mut o);
    timers_section(r, &mut o);
    o
}

/// The pacing timers each tool's runs set off, per GiB: where bbr paces, the sender waits for
/// a timer before each segment it may not send yet, and each expiry costs CPU.
fn timers_section(r: &SteadyReport, o: &mut String) {
    let _ = writeln!(
        o,
        "\n## Pacing timers\n\n\
         Soft hrtimer expiries per GiB, the whole machine's, during each run (the `HRTIMER` row \
         of `/proc/softirqs`; on an idle loopback mostly TCP's pacing timers, one each time a \
         sender paced by bbr had to wait to send its next segment; cubic does not pace, and \
         what is left with it is the tools' own timers). Medians.\n\n\
         | cell | write | tsperf | iperf3 |\n|---|---:|---:|---:|"
    );
    let per_gib = |v: &[Sample]| median(v, |s| s.per_gib(s.timers as f64));
    for c in &r.cells {
        let _ = writeln!(
            o,
            "| {} | {} | {:.0} | {:.0} |",
            c.cell.kind.label(),
            tsperf_results::units::size(u64::from(c.cell.chunk)),
            per_gib(&c.tsperf),
            per_gib(&c.iperf3)
        );
    }
}

/// The medians of the cell's own checksummed loop, run beside it, and whether the client is
/// its writer; None for a cell without one (sendfile) or whose loop did not run.
fn own_loop(c: &CellResult) -> Option<(LoopSample, bool)> {
    let (_, client_writes) = limit_of(c.cell.kind)?;
    (!c.limit.is_empty()).then(|| (super::limits::medians(&c.limit), client_writes))
}

/// "met", or "NOT met" naming the limit where the cell's floor loop misses the bar too
/// (`beyond`: what the loop did, if it missed).
fn verdict(ok: bool, beyond: Option<String>) -> String {
    match beyond {
        _ if ok => "met".into(),
        Some(what) => format!("NOT met, beyond this machine's limit ({what})"),
        None => "NOT met".into(),
    }
}

/// The bars, each met or not: rates against iperf3 where it sets one, and CPU per GiB
/// on each end against iperf3's plus one checksum's cost. Where a bar is not met and the
/// checksummed loop that does the cell's work with nothing else misses it too, it says so.
fn bars_section(r: &SteadyReport, o: &mut String) {
    let _ = writeln!(
        o,
        "\n## Bars\n\nxxh3 costs one core {:.3} s per GiB here (64 MiB buffer, fastest of 3): \
         tsperf's CPU on each end is held to iperf3's plus that. A bar marked *beyond this \
         machine's limit* is missed by the cell's checksummed loop too (the loop below doing \
         the cell's work, from one buffer, the generated stream or the file, on the cell's congestion \
         control, run after each pair of the cell, medians; sendfile has none): no tool that \
         verifies its bytes meets it here. *Both ends*, not a \
         bar: the two ends' CPU together against iperf3's plus two checksums; on loopback the \
         kernel does a segment's receive work (and an ACK's sending) on whichever end's thread \
         is running, so work moves between the ends from run to run.\n",
        r.hash_s_per_gib
    );
    for c in &r.cells {
        let floor = own_loop(c);
        let rate_bar = match (c.cell.kind, c.cell.chunk) {
            (Kind::Memory | Kind::OneBuffer | Kind::OneBufferCubic, 10240 | 131072)
            | (Kind::Sendfile, 131072) => {
                let iperf3 = median(&c.iperf3, |s| s.mib_s);
                let beyond = floor
                    .map(|(f, _)| f.mib_s / iperf3.max(1e-9))
                    .filter(|&v| v < 1.0)
                    .map(|v| format!("the checksummed loop moves {v:.2}x iperf3's rate"));
                let (ratio, bar) = apart(c.ratio(), 1.0, 2);
                format!(
                    "rate {ratio}x (bar {bar}x) {}; ",
                    verdict(c.ratio() >= 1.0, beyond)
                )
            }
            _ => String::new(),
        };
        let (tc, ic) = (cpu_per_gib(&c.tsperf, true), cpu_per_gib(&c.iperf3, true));
        let (ts, is) = (cpu_per_gib(&c.tsperf, false), cpu_per_gib(&c.iperf3, false));
        let h = r.hash_s_per_gib;
        // The loop's own CPU at this end, named, if it is over `bar`.
        let beyond = |client: bool, bar: f64| {
            let (f, client_writes) = floor?;
            let (v, who) = if client == client_writes {
                (f.cpu.writer, "writer")
            } else {
                (f.cpu.reader, "reader")
            };
            (v > bar).then(|| format!("the checksummed loop's {who} spends {v:.3}"))
        };
        let ((tc_s, ic_s), (ts_s, is_s)) = (apart(tc, ic + h, 3), apart(ts, is + h, 3));
        let _ = writeln!(
            o,
            "- {} {}: {rate_bar}client CPU {tc_s} against {ic_s} {}; server CPU {ts_s} against {is_s} {}; \
             both ends {:.3} against {:.3}.",
            c.cell.kind.label(),
            tsperf_results::units::size(u64::from(c.cell.chunk)),
            verdict(tc <= ic + h, beyond(true, ic + h)),
            verdict(ts <= is + h, beyond(false, is + h)),
            both_per_gib(&c.tsperf),
            both_per_gib(&c.iperf3) + 2.0 * h,
        );
    }
}

fn floors_section(r: &SteadyReport, o: &mut String) {
    let _ = writeln!(
        o,
        "\n## The machine's limit\n\n\
         The bare write/read loop on loopback (`crate::floor`: one thread writes one buffer again \
         and again, one reads; nothing else), and the same loop with tsperf's checksum on both \
         ends (xxh3 over each block written and each read): what any tool that verifies its \
         bytes can reach here; and that loop written from tsperf's generated stream (36 MiB of \
         text, cycled, as `tsclient --bytes` sends) instead of one cache-resident block, the \
         cost of bytes that do not repeat; and the first two with the writer sending with TCP \
         cubic. Medians of {} runs of {}, the five alternating.\n\n\
         | write | bare loop MiB/s | with checksums | checksums cost | with checksums, from the generated stream | bare, cubic | with checksums, cubic | checksums cost, cubic |\n|---:|---:|---:|---:|---:|---:|---:|---:|",
        r.reps,
        tsperf_results::units::size(r.len)
    );
    for f in &r.floors {
        let _ = writeln!(
            o,
            "| {} | {:.0} | {:.0} | {:.0}% | {:.0} | {:.0} | {:.0} | {:.0}% |",
            tsperf_results::units::size(u64::from(f.chunk)),
            f.bare_mib_s,
            f.hashed_mib_s,
            (1.0 - f.hashed_mib_s / f.bare_mib_s.max(1e-9)) * 100.0,
            f.stream_mib_s,
            f.bare_cubic_mib_s,
            f.hashed_cubic_mib_s,
            (1.0 - f.hashed_cubic_mib_s / f.bare_cubic_mib_s.max(1e-9)) * 100.0,
        );
    }
}

/// The floor loops' CPU per GiB at each end: what the kernel's work and the checksums cost a
/// writer and a reader with nothing else in the way.
fn floor_cpu_section(r: &SteadyReport, o: &mut String) {
    let _ = writeln!(
        o,
        "\nWhat each loop's threads spent, CPU seconds per GiB, writer / reader (each thread's \
         `CLOCK_THREAD_CPUTIME_ID`, medians; on loopback the writer's includes the receive \
         path the kernel runs as it sends). The loop doing a cell's work is the cell's limit \
         in the bars above.\n\n\
         | write | bare loop | with checksums | with checksums, from the generated stream | bare, cubic | with checksums, cubic |\n|---:|---:|---:|---:|---:|---:|"
    );
    for f in &r.floors {
        let cell = |l: Loop| {
            f.cpu(l)
                .map_or("-".into(), |c| format!("{:.3} / {:.3}", c.writer, c.reader))
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            tsperf_results::units::size(u64::from(f.chunk)),
            cell(Loop::Bare),
            cell(Loop::Hashed),
            cell(Loop::Stream),
            cell(Loop::BareCubic),
            cell(Loop::HashedCubic),
        );
    }
}

/// The median over `v`'s runs of the CPU seconds per GiB at both ends together.
fn both_per_gib(v: &[Sample]) -> f64 {
    median(v, |s| s.per_gib(s.client_cpu_s + s.server_cpu_s))
}

/// The median CPU seconds per GiB of `v`'s runs, at the client's end or the server's.
/// A figure and its bar, to `places` places, or more where three would show two different
/// values as one (a bar missed by a hair reads as missed).
fn apart(v: f64, bar: f64, places: usize) -> (String, String) {
    let mut places = places;
    while places < 6 && v != bar && format!("{v:.places$}") == format!("{bar:.places$}") {
        places += 1;
    }
    (format!("{v:.places$}"), format!("{bar:.places$}"))
}

fn cpu_per_gib(v: &[Sample], client: bool) -> f64 {
    median(v, |s| {
        s.per_gib(if client {
            s.client_cpu_s
        } else {
            s.server_cpu_s
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Cell, CellResult, Floor, LoopCpu};

    fn looped(mib_s: f64, writer: f64, reader: f64) -> LoopSample {
        LoopSample {
            mib_s,
            cpu: LoopCpu { writer, reader },
        }
    }
    use super::*;

    fn sample(mib_s: f64, cpu: f64) -> Sample {
        Sample {
            mib_s,
            bytes: 1 << 30,
            client_cpu_s: cpu,
            server_cpu_s: cpu / 2.0,
            verified: true,
            timers: 2048,
        }
    }

    /// The table shows medians, spreads, the ratio and CPU per GiB; a run not verified says so.
    #[test]
    fn the_table_has_medians_ratios_and_cpu_per_gib() {
        let mut cell = CellResult {
            cell: Cell {
                kind: Kind::Memory,
                chunk: 10240,
            },
            tsperf: vec![sample(100.0, 0.5), sample(300.0, 0.4), sample(200.0, 0.3)],
            iperf3: vec![sample(100.0, 0.2), sample(100.0, 0.2), sample(400.0, 0.2)],
            limit: vec![
                looped(800.0, 0.25, 0.01),
                looped(900.0, 0.2, 0.03),
                looped(700.0, 0.1, 0.02),
            ],
        };
        let mut r = SteadyReport {
            cells: vec![cell.clone()],
            floors: vec![Floor {
                chunk: 10240,
                bare_mib_s: 1000.0,
                hashed_mib_s: 900.0,
                stream_mib_s: 850.0,
                bare_cubic_mib_s: 2000.0,
                hashed_cubic_mib_s: 1500.0,
                cpu: [0.1, 0.2, 0.25, 0.05, 0.15].map(|w| LoopCpu {
                    writer: w,
                    reader: w / 10.0,
                }),
            }],
            hash_s_per_gib: 0.1,
            len: 1 << 30,
            reps: 3,
            machine: crate::machine::probe("test"),
        };
        let md = markdown(&r);
        assert!(
            md.contains("| memory | 10 KiB | 200 [100-300] | 100 [100-400] | 2.00x | 800 | 0.400 | 0.200 | 0.200 | 0.100 | all |"),
            "{md}"
        );
        assert!(
            md.contains("| 10 KiB | 1000 | 900 | 10% | 850 | 2000 | 1500 | 25% |"),
            "{md}"
        );
        assert!(md.contains("| memory | 10 KiB | 2048 | 2048 |"), "{md}");
        assert!(
            md.contains("- memory 10 KiB: rate 2.00x (bar 1.00x) met; client CPU 0.400 against 0.300 NOT met; server CPU 0.200 against 0.200 met; both ends 0.600 against 0.500."),
            "{md}"
        );
        assert!(
            md.contains("| 10 KiB | 0.100 / 0.010 | 0.200 / 0.020 | 0.250 / 0.025 | 0.050 / 0.005 | 0.150 / 0.015 |"),
            "{md}"
        );
        cell.tsperf[0].verified = false;
        r.cells = vec![cell];
        assert!(markdown(&r).contains("NOT ALL"));
    }

    /// A bar the cell's own checksummed loop (run beside it) misses too says so, with the loop's
    /// figure; one the loop meets is plainly not met.
    #[test]
    fn a_bar_the_cells_own_loop_misses_too_names_the_limit() {
        // Each cell's own loop: the stream loop's writer over the client's bar (0.2 + 0.1),
        // its reader under the server's (0.1 + 0.1); the one-buffer loop under both.
        let cell = |kind, t: f64, i: f64| CellResult {
            cell: Cell { kind, chunk: 10240 },
            tsperf: vec![sample(t, 0.5)],
            iperf3: vec![sample(i, 0.2)],
            limit: match kind {
                Kind::Memory | Kind::Reverse => vec![looped(900.0, 0.4, 0.04)],
                Kind::OneBuffer => vec![looped(1500.0, 0.2, 0.02)],
                _ => vec![],
            },
        };
        let r = SteadyReport {
            cells: vec![
                cell(Kind::Memory, 100.0, 1000.0),
                cell(Kind::OneBuffer, 100.0, 1000.0),
                cell(Kind::Reverse, 100.0, 1000.0),
                cell(Kind::Sendfile, 100.0, 1000.0),
            ],
            floors: vec![Floor {
                chunk: 10240,
                bare_mib_s: 2000.0,
                hashed_mib_s: 1500.0,
                stream_mib_s: 900.0,
                bare_cubic_mib_s: 2000.0,
                hashed_cubic_mib_s: 1500.0,
                // the whole-sitting loops, which the bars do not use: over every bar.
                cpu: [0.9; 5].map(|w| LoopCpu {
                    writer: w,
                    reader: w / 10.0,
                }),
            }],
            hash_s_per_gib: 0.1,
            len: 1 << 30,
            reps: 1,
            machine: crate::machine::probe("test"),
        };
        let md = markdown(&r);
        let beyond = "NOT met, beyond this machine's limit";
        assert!(
            md.contains(&format!(
                "- memory 10 KiB: rate 0.10x (bar 1.00x) {beyond} (the checksummed loop moves \
                 0.90x iperf3's rate); client CPU 0.500 against 0.300 {beyond} (the checksummed \
                 loop's writer spends 0.400); server CPU 0.250 against 0.200 NOT met; both ends \
                 0.750 against 0.500."
            )),
            "{md}"
        );
        assert!(
            md.contains(
                "- memory, one buffer 10 KiB: rate 0.10x (bar 1.00x) NOT met; client CPU 0.500 \
                 against 0.300 NOT met; server CPU 0.250 against 0.200 NOT met; both ends 0.750 \
                 against 0.500."
            ),
            "{md}"
        );
        // Reverse: the server writes, so the writer's figure is the server's limit.
        assert!(
            md.contains(&format!(
                "- memory -R 10 KiB: client CPU 0.500 against 0.300 NOT met; server CPU 0.250 \
                 against 0.200 {beyond} (the checksummed loop's writer spends 0.400); both ends \
                 0.750 against 0.500."
            )),
            "{md}"
        );
        assert!(
            md.contains("- sendfile / -Z 10 KiB: client CPU 0.500 against 0.300 NOT met;"),
            "{md}"
        );
        assert!(
            md.contains(
                "| sendfile / -Z | 10 KiB | 100 [100-100] | 1000 [1000-1000] | 0.10x | - |"
            ),
            "{md}"
        );
    }

    /// A bar missed by less than its figures' last digit gives them a digit more: it never
    /// reads "0.153 against 0.153 NOT met" (seen in results/steady.md).
    #[test]
    fn a_bar_missed_by_a_hair_shows_the_hair() {
        let r = SteadyReport {
            cells: vec![CellResult {
                cell: Cell {
                    kind: Kind::Reverse,
                    chunk: 131072,
                },
                tsperf: vec![sample(100.0, 0.1532)],
                iperf3: vec![sample(100.0, 0.0528)],
                limit: vec![],
            }],
            floors: vec![],
            hash_s_per_gib: 0.1,
            len: 1 << 30,
            reps: 1,
            machine: crate::machine::probe("test"),
        };
        let md = markdown(&r);
        assert!(
            md.contains(
                "client CPU 0.1532 against 0.1528 NOT met; server CPU 0.077 against 0.126 met;"
            ),
            "{md}"
        );
        let mut rate = r.cells[0].clone();
        rate.cell = Cell {
            kind: Kind::Memory,
            chunk: 131072,
        };
        rate.tsperf[0].mib_s = 99.7;
        let md = markdown(&SteadyReport {
            cells: vec![rate],
            ..r
        });
        assert!(md.contains("rate 0.997x (bar 1.000x) NOT met;"), "{md}");
    }
}
