//! From runs to rows: every cell's repetitions summarised ([`aggregate`]), the timeline's
//! samples and the clock offsets the transfers saw.

use super::rep::{Rep, largest_of};
use super::{ClockSummary, LatencyRow, Matrix, SessionRow, StreamRow, Timeline};
use tsperf_results::json::{ClientJson, LatencyJson, StreamJson};
use tsperf_results::runs::{Cell, Run, Setup};
use tsperf_results::stats::median;

/// Groups runs by cell, in the order cells first appear, and summarises each.
pub fn aggregate(setup: Setup, runs: &[Run]) -> Matrix {
    let mut cells: Vec<&Cell> = Vec::new();
    for r in runs {
        if !cells.contains(&&r.cell) {
            cells.push(&r.cell);
        }
    }
    let mut stream = Vec::new();
    let mut sessions = Vec::new();
    let mut latency = Vec::new();
    for cell in cells {
        let of_cell = runs.iter().filter(|r| &r.cell == cell).map(|r| &r.result);
        match cell {
            Cell::Stream { chunk, io, log } => {
                let reps: Vec<Rep> = of_cell.filter_map(Rep::of).collect();
                stream.push(stream_row(*chunk, io, log, &reps));
            }
            Cell::Streams {
                chunk,
                io,
                log,
                streams,
                reverse,
            } => {
                let reps: Vec<Rep> = of_cell.filter_map(Rep::of).collect();
                sessions.push(SessionRow {
                    streams: *streams,
                    reverse: *reverse,
                    row: stream_row(*chunk, io, log, &reps),
                });
            }
            Cell::Latency { .. } => {
                let reps: Vec<&LatencyJson> = of_cell
                    .filter_map(|r| match r {
                        ClientJson::Latency(l) => Some(l),
                        _ => None,
                    })
                    .collect();
                latency.push(latency_row(cell, &reps));
            }
        }
    }
    Matrix {
        setup,
        stream,
        sessions,
        latency,
        clock: clock_summary(runs),
        timeline: timelines(runs),
    }
}

/// One stream cell's repetitions summarised.
fn stream_row(chunk: u32, io: &str, log: &str, reps: &[Rep]) -> StreamRow {
    let of = |f: fn(&Rep) -> f64| -> Vec<f64> { reps.iter().map(f).collect() };
    let mut mib = of(|s| s.mib_per_s);
    let (min, max) = tsperf_results::stats::min_max(&mib);
    let limited_by = most_common(reps.iter().filter_map(|s| s.limited_by.clone()));
    let largest = largest_of(reps);
    StreamRow {
        chunk,
        io: io.to_owned(),
        log: log.to_owned(),
        median_mib_s: median(&mut mib),
        min_mib_s: min,
        max_mib_s: max,
        median_gbit_s: median(&mut of(|s| s.gbit_per_s)),
        client_cpu_s: median(&mut of(|s| s.client_cpu_s)),
        reps: reps.len(),
        verified: reps.iter().all(|s| s.verified),
        sndbuf: median(&mut of(|s| s.sndbuf as f64)) as u64,
        rcvbuf: median(&mut of(|s| s.rcvbuf as f64)) as u64,
        limited_by_reps: reps
            .iter()
            .filter(|s| s.limited_by == limited_by && limited_by.is_some())
            .count(),
        limited_by,
        server_largest_pct: largest.as_ref().and_then(|l| l.1),
        server_largest: largest.map(|l| l.0),
    }
}

/// The value most often seen (the first of those tied), if any.
pub fn most_common<T: PartialEq>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(k, _)| *k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let top = counts.iter().map(|(_, n)| *n).max()?;
    counts.into_iter().find(|(_, n)| *n == top).map(|(k, _)| k)
}

/// One latency cell's repetitions summarised: under load, the loaded figures with the idle ones
/// beside them.
fn latency_row(cell: &Cell, reps: &[&LatencyJson]) -> LatencyRow {
    let Cell::Latency {
        codec,
        framing,
        nodelay,
        reconnect,
        count,
        under_load,
    } = cell
    else {
        unreachable!("a latency cell");
    };
    let idle = |f: fn(&tsperf_results::json::Rtt) -> f64| {
        median(
            &mut reps
                .iter()
                .map(|l| l.rtt_us.as_ref().map_or(0.0, f))
                .collect::<Vec<_>>(),
        )
    };
    let loaded = |f: fn(&tsperf_results::json::Rtt) -> f64| {
        median(
            &mut reps
                .iter()
                .map(|l| {
                    l.under_load
                        .as_ref()
                        .and_then(|u| u.rtt_us.as_ref())
                        .map_or(0.0, f)
                })
                .collect::<Vec<_>>(),
        )
    };
    let p = |f| {
        if under_load.is_some() {
            loaded(f)
        } else {
            idle(f)
        }
    };
    LatencyRow {
        codec: codec.clone(),
        framing: framing.clone(),
        nodelay: *nodelay,
        reconnect: *reconnect,
        // Under load, the queries answered while the stream ran (it may end first).
        count: match under_load {
            Some(_) => median(
                &mut reps
                    .iter()
                    .map(|l| l.under_load.as_ref().map_or(0, |u| u.count) as f64)
                    .collect::<Vec<_>>(),
            ) as u64,
            None => *count,
        },
        p50_us: p(|r| r.p50),
        p99_us: p(|r| r.p99),
        p50_range_us: p50_range(reps, under_load.is_some()),
        reps: reps.len(),
        hint: reps.iter().any(|l| l.hint.is_some()),
        under_load: under_load.clone(),
        idle_p50_us: under_load.is_some().then(|| idle(|r| r.p50)),
        idle_p99_us: under_load.is_some().then(|| idle(|r| r.p99)),
        stream_limited_by: most_common(reps.iter().filter_map(|l| {
            l.under_load
                .as_ref()
                .and_then(|u| u.stream_limited_by)
                .map(|v| v.to_string())
        })),
    }
}

/// The fastest and slowest repetition's p50 (the loaded one under load), µs.
fn p50_range(reps: &[&LatencyJson], loaded: bool) -> (f64, f64) {
    reps.iter()
        .filter_map(|l| match loaded {
            true => l.under_load.as_ref().and_then(|u| u.rtt_us.as_ref()),
            false => l.rtt_us.as_ref(),
        })
        .map(|r| r.p50)
        .fold(None, |acc: Option<(f64, f64)>, v| {
            Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
        })
        .unwrap_or_default()
}

/// The timelines of the smallest and largest chunk's cells that have intervals.
fn timelines(runs: &[Run]) -> Vec<Timeline> {
    let sampled = |r: &&Run| matches!(&r.result, ClientJson::Stream(s) if !s.intervals.is_empty());
    let chunks: Vec<u32> = runs
        .iter()
        .filter(sampled)
        .filter_map(|r| match &r.cell {
            Cell::Stream { chunk, .. } => Some(*chunk),
            Cell::Streams { .. } | Cell::Latency { .. } => None,
        })
        .collect();
    let (Some(&lo), Some(&hi)) = (chunks.iter().min(), chunks.iter().max()) else {
        return Vec::new();
    };
    let mut cells: Vec<&Cell> = Vec::new();
    for r in runs.iter().filter(sampled) {
        if matches!(&r.cell, Cell::Stream { chunk, .. } if *chunk == lo || *chunk == hi)
            && !cells.contains(&&r.cell)
        {
            cells.push(&r.cell);
        }
    }
    cells
        .into_iter()
        .filter_map(|cell| {
            let Cell::Stream { chunk, io, log } = cell else {
                return None;
            };
            let mut reps: Vec<&StreamJson> = runs
                .iter()
                .filter(|r| &r.cell == cell)
                .filter_map(|r| match &r.result {
                    ClientJson::Stream(s) if !s.intervals.is_empty() => Some(s),
                    _ => None,
                })
                .collect();
            reps.sort_by(|a, b| a.mib_per_s.total_cmp(&b.mib_per_s));
            let s = reps.get(reps.len() / 2)?;
            Some(Timeline {
                log: log.clone(),
                chunk: *chunk,
                io: io.clone(),
                points: s
                    .intervals
                    .iter()
                    .map(|i| (i.start_s, i.end_s, i.acked_mib_per_s.unwrap_or(i.mib_per_s)))
                    .collect(),
            })
        })
        .collect()
}

/// The offsets of the stream runs that measured one; `None` if none did.
fn clock_summary(runs: &[Run]) -> Option<ClockSummary> {
    let (mut offsets, mut errs): (Vec<f64>, Vec<f64>) = runs
        .iter()
        .filter_map(|r| match &r.result {
            ClientJson::Stream(s) => s.clock.offset_us.zip(s.clock.offset_err_us),
            _ => None,
        })
        .unzip();
    if offsets.is_empty() {
        return None;
    }
    let (min_offset_us, max_offset_us) = tsperf_results::stats::min_max(&offsets);
    let (_, max_err_us) = tsperf_results::stats::min_max(&errs);
    Some(ClockSummary {
        transfers: offsets.len(),
        median_offset_us: median(&mut offsets),
        min_offset_us,
        max_offset_us,
        median_err_us: median(&mut errs),
        max_err_us,
    })
}
