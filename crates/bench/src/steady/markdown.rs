//! steady.md: the table, the bars and the machine's limit.

use std::fmt::Write as _;

use super::{CellResult, Kind, Loop, LoopSample, Sample, SteadyReport, limit_of, median};
use crate::bars::apart;

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
         included), the server's threads' `/proc/PID/task/TID/schedstat` before and after \
         (nanoseconds; its `/proc/PID/stat`, 10 ms ticks, where a thread ended during the run). tsperf \
         checksums every byte on both ends; iperf3 checksums nothing. *memory*: tsclient's \
         generated stream (36 MiB of the seed's text, cycled: bytes that leave the CPU's cache) \
         against iperf3's one `-l` buffer sent again and again; *memory, one buffer*: \
         `tsclient --one-buffer`, one `--chunk` sent again and again, the same work as \
         iperf3's (*-R, one buffer*: the server sends so, `tsclient -R --one-buffer`; *-P 2, one \
         buffer*: each stream so, `tsclient -P 2 --one-buffer`); *-C cubic*: both tools send with TCP cubic (`tsclient --congestion cubic`, \
         `iperf3 -C cubic`; with -R each asks its server to), the others with the kernel's default ({}). \
         *Its checksummed loop*: after each pair, the floor loop below that does the cell's work \
         with nothing else (xxh3 on both ends; from one buffer, from the generated stream for \
         the text and -P 2 cells (one stream: it shows no two streams' memory traffic), or for the file cells from the file, `read()` block by block \
         into one buffer as iperf3 -F reads it, for the sendfile cells the file sent with \
         `sendfile` and hashed on a thread of its own, read block by block, as tsclient does \
         (the writer's CPU is both threads'); on the cell's congestion control), median: the cell's limit in the same sitting.\n",
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
/// its writer; None for a cell whose loop did not run.
fn own_loop(c: &CellResult) -> Option<(LoopSample, bool)> {
    let (_, client_writes) = limit_of(c.cell.kind)?;
    (!c.limit.is_empty()).then(|| (super::limits::medians(&c.limit), client_writes))
}

/// How near tsperf must be to its cell's checksummed loop for a bar the loop misses too to be
/// the machine's limit rather than tsperf's: within 5% of the loop's rate or CPU.
const AT_THE_LOOP: f64 = 0.05;

/// A bar the cell's checksummed loop misses too: what the loop did, and tsperf's figure over
/// the loop's (rate or CPU).
struct LoopMiss {
    what: String,
    tsperf_over_loop: f64,
    /// tsperf is within [`AT_THE_LOOP`] of the loop.
    at_the_loop: bool,
}

/// "met", or "NOT met" with the pairs that missed it (`missed`: how many of how many); where the
/// cell's floor loop misses the bar too, "beyond this machine's limit" if tsperf is at the
/// loop, else "not this machine's limit" and how far from the loop tsperf is.
fn verdict(ok: bool, missed: (usize, usize), loop_miss: Option<LoopMiss>) -> String {
    let pairs = format!("NOT met (missed in {} of {} pairs)", missed.0, missed.1);
    match loop_miss {
        _ if ok => "met".into(),
        Some(l) if l.at_the_loop => format!("{pairs}, beyond this machine's limit ({})", l.what),
        Some(l) => format!(
            "{pairs}, not this machine's limit: tsperf {:.2}x its loop ({})",
            l.tsperf_over_loop, l.what
        ),
        None => pairs,
    }
}

/// Of the cell's pairs (each tsperf run and the iperf3 run beside it), how many miss a bar,
/// and how many there are: `misses(tsperf's figure, iperf3's)`.
fn missed(c: &CellResult, misses: impl Fn(&Sample, &Sample) -> bool) -> (usize, usize) {
    let pairs = c.tsperf.iter().zip(&c.iperf3);
    (
        pairs.clone().filter(|(t, i)| misses(t, i)).count(),
        pairs.count(),
    )
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
         control, run after each pair of the cell, medians) and tsperf is \
         within 5% of that loop (a client's CPU against the loop's writer with what making \
         its period cost it: a client makes it each run, a server once for all its runs): no \
         tool that verifies its bytes meets it here. *Not this \
         machine's limit*: the loop misses it too, but tsperf is further from the loop than \
         that, and says how far. A bar not met says in how many of the pairs (each \
         tsperf run against the iperf3 run beside it) it was missed. *Both ends*, not a \
         bar: the two ends' CPU together against iperf3's plus two checksums; on loopback the \
         kernel does a segment's receive work (and an ACK's sending) on whichever end's thread \
         is running, so work moves between the ends from run to run.\n",
        r.hash_s_per_gib
    );
    for c in &r.cells {
        let floor = own_loop(c);
        let rate_bar = rate_bar(c, floor.as_ref().map(|(f, _)| f));
        let (tc, ic) = (cpu_per_gib(&c.tsperf, true), cpu_per_gib(&c.iperf3, true));
        let (ts, is) = (cpu_per_gib(&c.tsperf, false), cpu_per_gib(&c.iperf3, false));
        let h = r.hash_s_per_gib;
        // The loop's own CPU at this end, named, if it is over `bar`, beside tsperf's `cpu`.
        // A client is a new process each run and makes its period each run, as the loop's
        // writer does; a server makes its once for all its runs.
        let beyond = |client: bool, bar: f64, cpu: f64| {
            let (f, client_writes) = floor?;
            let (v, who) = match (client == client_writes, client && f.cpu.making > 0.0) {
                (true, true) => {
                    let (v, m) = (f.cpu.writer + f.cpu.making, f.cpu.making);
                    (
                        v,
                        format!("writer spends {v:.3}, {m:.3} of it making its period"),
                    )
                }
                (true, false) => (f.cpu.writer, format!("writer spends {:.3}", f.cpu.writer)),
                _ => (f.cpu.reader, format!("reader spends {:.3}", f.cpu.reader)),
            };
            (v > bar).then(|| LoopMiss {
                what: format!("the checksummed loop's {who}"),
                tsperf_over_loop: cpu / v.max(1e-9),
                at_the_loop: cpu <= (1.0 + AT_THE_LOOP) * v,
            })
        };
        let ((tc_s, ic_s), (ts_s, is_s)) = (apart(tc, ic + h, 3), apart(ts, is + h, 3));
        let over = |client: bool| {
            missed(c, |t, i| {
                let at = |s: &Sample| s.per_gib(s.cpu_s(client));
                at(t) > at(i) + h
            })
        };
        let _ = writeln!(
            o,
            "- {} {}: {rate_bar}client CPU {tc_s} against {ic_s} {}; server CPU {ts_s} against {is_s} {}; \
             both ends {:.3} against {:.3}.",
            c.cell.kind.label(),
            tsperf_results::units::size(u64::from(c.cell.chunk)),
            verdict(tc <= ic + h, over(true), beyond(true, ic + h, tc)),
            verdict(ts <= is + h, over(false), beyond(false, is + h, ts)),
            both_per_gib(&c.tsperf),
            both_per_gib(&c.iperf3) + 2.0 * h,
        );
    }
}

/// The rate bar of a cell that has one ("" for the others): against iperf3, with the cell's
/// checksummed loop `floor` where it misses the bar too.
fn rate_bar(c: &CellResult, floor: Option<&LoopSample>) -> String {
    match (c.cell.kind, c.cell.chunk) {
        (Kind::Memory | Kind::OneBuffer | Kind::OneBufferCubic, 10240 | 131072)
        | (Kind::Sendfile, 131072) => {
            let iperf3 = median(&c.iperf3, |s| s.mib_s);
            let tsperf = median(&c.tsperf, |s| s.mib_s);
            let beyond = floor
                .map(|f| f.mib_s)
                .filter(|&f| f < iperf3)
                .map(|f| LoopMiss {
                    what: format!(
                        "the checksummed loop moves {:.2}x iperf3's rate",
                        f / iperf3.max(1e-9)
                    ),
                    tsperf_over_loop: tsperf / f.max(1e-9),
                    at_the_loop: tsperf >= (1.0 - AT_THE_LOOP) * f,
                });
            let (ratio, bar) = apart(c.ratio(), 1.0, 2);
            let slower = missed(c, |t, i| t.mib_s < i.mib_s);
            format!(
                "rate {ratio}x (bar {bar}x) {}; ",
                verdict(c.ratio() >= 1.0, slower, beyond)
            )
        }
        _ => String::new(),
    }
}

fn floors_section(r: &SteadyReport, o: &mut String) {
    let _ = writeln!(
        o,
        "\n## The machine's limit\n\n\
         The bare write/read loop on loopback (`crate::floor`: one thread writes one buffer again \
         and again, one reads 1 MiB at a time, woken as tsserver's event loop is: once per \
         256 KiB, SO_RCVLOWAT, once its buffer has room; nothing else), and the same loop with tsperf's checksum on both \
         ends (xxh3 over each block written and each read): what any tool that verifies its \
         bytes can reach here; and that loop written from tsperf's generated stream (36 MiB of \
         text, cycled, as `tsclient --bytes` sends, its period made by the writer each run as \
         tsclient makes it) instead of one cache-resident block, the cost of bytes that do not \
         repeat; and the first two with the writer sending with TCP \
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
         path the kernel runs as it sends; *+ making*: what the generated stream's writer \
         spent making its period before its loop, as a client does each run). The loop doing \
         a cell's work is the cell's limit in the bars above, a client's with its making.\n\n\
         | write | bare loop | with checksums | with checksums, from the generated stream | bare, cubic | with checksums, cubic |\n|---:|---:|---:|---:|---:|---:|"
    );
    for f in &r.floors {
        let cell = |l: Loop| {
            f.cpu(l).map_or("-".into(), |c| {
                let making = if c.making > 0.0 {
                    format!(" + {:.3} making", c.making)
                } else {
                    String::new()
                };
                format!("{:.3}{making} / {:.3}", c.writer, c.reader)
            })
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
fn cpu_per_gib(v: &[Sample], client: bool) -> f64 {
    median(v, |s| s.per_gib(s.cpu_s(client)))
}

#[cfg(test)]
mod tests;
