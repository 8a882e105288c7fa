//! `tsreport --compare OLD NEW`: two grid runs cell by cell, as after a tuning change one asks
//! "did it help?". Each cell's repetitions on both sides, the ratio of their medians (new over
//! old), the spread of each (min to max), and a mark where the difference is beyond the runs'
//! own noise: an exact two-sided Mann-Whitney U test over the repetitions, p < 0.05. With 3
//! repetitions a side the smallest p is 0.1, so nothing can be marked: the table says so, and
//! `matrix.sh --reps 5` gives cells that can be.
//!
//! Runs whose setup makes them incomparable (another file, another chunk set, another host
//! pair) are refused with the reason; what else differs (kernel, sysctls, commit, CPU) is
//! listed above the table.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Result, bail};

use tsperf_results::json::ClientJson;
use tsperf_results::runs::{Cell, Run, Setup};
use tsperf_results::stats;

/// The level below which a difference is marked.
pub const ALPHA: f64 = 0.05;

/// One cell of both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The cell, for people.
    pub cell: String,
    /// `MiB/s` (higher is better) or `µs p50` (lower is better).
    pub unit: &'static str,
    /// The old run's repetitions.
    pub old: Vec<f64>,
    /// The new run's.
    pub new: Vec<f64>,
    /// Median of new over median of old.
    pub ratio: f64,
    /// The test's two-sided p.
    pub p: f64,
}

impl Row {
    /// Beyond the runs' noise.
    pub fn differs(&self) -> bool {
        self.p < ALPHA
    }

    /// True when the new run is the better one (faster, or quicker to answer).
    pub fn better(&self) -> bool {
        (self.unit == "MiB/s") == (self.ratio > 1.0)
    }
}

/// Two runs compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Each cell both have, in the old run's order.
    pub rows: Vec<Row>,
    /// What differs in their setups besides what would refuse them.
    pub differences: Vec<String>,
    /// Cells only one run has.
    pub unmatched: usize,
}

/// Compares the grid runs in the results folders `old` and `new`.
pub fn compare(old: &Path, new: &Path) -> Result<Comparison> {
    let old = crate::folder::read_grid(old)?;
    let new = crate::folder::read_grid(new)?;
    compare_runs((&old.0, &old.1), (&new.0, &new.1))
}

/// Compares two grid runs, each its setup and its runs.
pub fn compare_runs(
    (old_setup, old_runs): (&Setup, &[Run]),
    (new_setup, new_runs): (&Setup, &[Run]),
) -> Result<Comparison> {
    refuse_incomparable(old_setup, new_setup, old_runs, new_runs)?;
    let old_cells = cells(old_runs);
    let new_cells = cells(new_runs);
    let mut rows = Vec::new();
    for (cell, unit, old_values) in &old_cells {
        let Some((_, _, new_values)) = new_cells.iter().find(|(c, ..)| c == cell) else {
            continue;
        };
        let (mut o, mut n) = (old_values.clone(), new_values.clone());
        rows.push(Row {
            cell: label(cell),
            unit,
            ratio: stats::median(&mut n) / stats::median(&mut o),
            p: mann_whitney_p(old_values, new_values),
            old: old_values.clone(),
            new: new_values.clone(),
        });
    }
    let unmatched = old_cells.len() + new_cells.len() - 2 * rows.len();
    Ok(Comparison {
        rows,
        differences: differences(old_setup, new_setup),
        unmatched,
    })
}

/// Refuses runs that measure different things: another file, another chunk set, another host
/// pair (where the server ran).
fn refuse_incomparable(old: &Setup, new: &Setup, o: &[Run], n: &[Run]) -> Result<()> {
    if (&old.file, old.bytes, &old.digest) != (&new.file, new.bytes, &new.digest) {
        bail!(
            "the runs sent different files ({} of {} bytes, xxh3 {}; {} of {} bytes, xxh3 {}): \
             their cells are not comparable",
            old.file,
            old.bytes,
            old.digest,
            new.file,
            new.bytes,
            new.digest
        );
    }
    let (oc, nc) = (chunks(o), chunks(n));
    if oc != nc {
        bail!("the runs have different chunk sets ({oc:?}; {nc:?}): compare grids of one shape");
    }
    if old.network != new.network {
        bail!(
            "the runs were between different hosts ('{}'; '{}'): a cell's rate is its path's",
            old.network,
            new.network
        );
    }
    Ok(())
}

/// The chunk sizes a run's stream cells used.
fn chunks(runs: &[Run]) -> BTreeSet<u32> {
    runs.iter()
        .filter_map(|r| match r.cell {
            Cell::Stream { chunk, .. } | Cell::Streams { chunk, .. } => Some(chunk),
            Cell::Latency { .. } => None,
        })
        .collect()
}

/// What else differs: the machine, its TCP settings, the commit, the repetitions.
fn differences(old: &Setup, new: &Setup) -> Vec<String> {
    let (a, b) = (&old.machine, &new.machine);
    let fields = [
        ("CPU", &a.cpu, &b.cpu),
        ("kernel", &a.kernel, &b.kernel),
        ("OS", &a.os, &b.os),
        ("commit", &a.commit, &b.commit),
        ("net.ipv4.tcp_rmem", &a.tcp_rmem, &b.tcp_rmem),
        ("net.ipv4.tcp_wmem", &a.tcp_wmem, &b.tcp_wmem),
        ("net.core.rmem_max", &a.rmem_max, &b.rmem_max),
        ("net.core.wmem_max", &a.wmem_max, &b.wmem_max),
        (
            "congestion control",
            &a.congestion_control,
            &b.congestion_control,
        ),
        ("server stdout", &old.stdout_to, &new.stdout_to),
    ];
    let mut out: Vec<String> = fields
        .iter()
        .filter(|(_, x, y)| x != y)
        .map(|(name, x, y)| format!("{name}: {x} → {y}"))
        .collect();
    if old.reps != new.reps {
        out.push(format!("repetitions: {} → {}", old.reps, new.reps));
    }
    out
}

/// Each cell's repetitions, in first-seen order: a stream cell's rate (a session's sum), a
/// latency cell's median round trip (under load, the loaded one).
fn cells(runs: &[Run]) -> Vec<(Cell, &'static str, Vec<f64>)> {
    let mut out: Vec<(Cell, &'static str, Vec<f64>)> = Vec::new();
    for r in runs {
        let (unit, value) = match &r.result {
            ClientJson::Stream(s) if s.verified => ("MiB/s", s.mib_per_s),
            ClientJson::Reverse(s) if s.verified => ("MiB/s", s.mib_per_s),
            ClientJson::Parallel(p) | ClientJson::ParallelReverse(p) if p.sum.verified => {
                ("MiB/s", p.sum.mib_per_s)
            }
            // A cell under load is its loaded round trips (its runs measure idle ones too).
            ClientJson::Latency(l) => {
                match l.under_load.as_ref().map_or(&l.rtt_us, |u| &u.rtt_us) {
                    Some(rtt) => ("µs p50", rtt.p50),
                    None => continue,
                }
            }
            _ => continue,
        };
        match out.iter_mut().find(|(c, ..)| *c == r.cell) {
            Some((_, _, v)) => v.push(value),
            None => out.push((r.cell.clone(), unit, vec![value])),
        }
    }
    out
}

/// A cell for people: `10240 B blocking, log none`, `latency binary/single nodelay`.
pub fn label(cell: &Cell) -> String {
    match cell {
        Cell::Stream { chunk, io, log } => format!("{chunk} B {io}, log {log}"),
        Cell::Streams {
            chunk,
            io,
            log,
            streams,
            reverse,
        } => format!(
            "{chunk} B {io}, log {log}, {streams} stream{}{}",
            if *streams == 1 { "" } else { "s" },
            if *reverse { ", reverse" } else { "" }
        ),
        Cell::Latency {
            codec,
            framing,
            nodelay,
            reconnect,
            under_load,
            ..
        } => format!(
            "latency {codec}/{framing}{}{}{}",
            if *nodelay { ", nodelay" } else { "" },
            if *reconnect { ", reconnect" } else { "" },
            under_load
                .as_ref()
                .map_or(String::new(), |l| format!(", under load (log {l})"))
        ),
    }
}

/// The exact two-sided p of the Mann-Whitney U test of `a` against `b`: the share of all ways
/// to split the pooled values into groups of their sizes whose rank sum (ties given their mean
/// rank) is at least as far from its mean as the one seen. Exact by counting splits, for the
/// grid's few repetitions (at most 10 a side are used).
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (a, b) = (&a[..a.len().min(10)], &b[..b.len().min(10)]);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    // Each value's rank among all, ties sharing the mean of theirs (from 1).
    let ranks: Vec<f64> = pooled
        .iter()
        .map(|x| {
            let below = pooled.iter().filter(|y| *y < x).count() as f64;
            let equal = pooled.iter().filter(|y| *y == x).count() as f64;
            below + (equal + 1.0) / 2.0
        })
        .collect();
    let mean = a.len() as f64 * (pooled.len() + 1) as f64 / 2.0;
    let sum = |pick: &[usize]| pick.iter().map(|&i| ranks[i]).sum::<f64>();
    let mut pick: Vec<usize> = (0..a.len()).collect();
    let seen = (sum(&pick) - mean).abs();
    let (mut extreme, mut all) = (0u64, 0u64);
    loop {
        all += 1;
        if (sum(&pick) - mean).abs() >= seen - 1e-9 {
            extreme += 1;
        }
        if !next_combination(&mut pick, pooled.len()) {
            break;
        }
    }
    extreme as f64 / all as f64
}

/// The next `k`-combination of `0..n` in lexicographic order; false after the last.
fn next_combination(pick: &mut [usize], n: usize) -> bool {
    let k = pick.len();
    for i in (0..k).rev() {
        if pick[i] < n - k + i {
            pick[i] += 1;
            for j in i + 1..k {
                pick[j] = pick[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// `compare.md`: what differs in the setups, then a row per cell.
pub fn markdown(c: &Comparison, old: &str, new: &str) -> String {
    let mut out = format!(
        "# {new} against {old}\n\nEach cell's repetitions on both sides: the ratio of their \
         medians (new / old), the spread of each (min to max), and whether the difference is \
         beyond the runs' own noise: an exact two-sided Mann-Whitney U test over the \
         repetitions, p < {ALPHA}.\n\n"
    );
    if c.differences.is_empty() {
        out += "The setups differ in nothing recorded.\n\n";
    } else {
        out += "Besides the cells, the setups differ in:\n\n";
        for d in &c.differences {
            let _ = writeln!(out, "- {d}");
        }
        out.push('\n');
    }
    let fewest = c
        .rows
        .iter()
        .map(|r| r.old.len().min(r.new.len()))
        .min()
        .unwrap_or(0);
    if fewest > 0 && fewest < 4 {
        let _ = writeln!(
            out,
            "With {fewest} repetition(s) a side in some cells the test's smallest p is {:.2}: those \
             cannot be marked. Run both with `scripts/matrix.sh --reps 5` (smallest p 0.008).\n",
            mann_whitney_p(&vec![0.0; fewest], &vec![1.0; fewest])
        );
    }
    let differ = c.rows.iter().filter(|r| r.differs()).count();
    let _ = writeln!(
        out,
        "**{differ} of {} cells differ beyond noise** ({} better, {} worse).\n",
        c.rows.len(),
        c.rows.iter().filter(|r| r.differs() && r.better()).count(),
        c.rows.iter().filter(|r| r.differs() && !r.better()).count()
    );
    out += "| cell | unit | old median (min-max) | new median (min-max) | new / old | p | beyond noise |\n";
    out += "|---|---|---:|---:|---:|---:|:-:|\n";
    for r in &c.rows {
        // A round trip of a millisecond or more in ms: `88.0`, not `88014.8` µs.
        let ms = r.unit == "µs p50"
            && [&r.old, &r.new]
                .iter()
                .any(|v| stats::median(&mut v.to_vec()) >= 1000.0);
        let (unit, scale) = if ms { ("ms p50", 1e-3) } else { (r.unit, 1.0) };
        let spread = |v: &[f64]| {
            let (lo, hi) = stats::min_max(v);
            let med = stats::median(&mut v.to_vec());
            format!("{:.1} ({:.1}-{:.1})", med * scale, lo * scale, hi * scale)
        };
        // A side whose median is 0 (a cell that measured nothing) has no ratio.
        let ratio = if r.ratio.is_finite() {
            format!("{:.3}x", r.ratio)
        } else {
            "no ratio (a median of 0)".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {ratio} | {:.3} | {} |",
            r.cell,
            unit,
            spread(&r.old),
            spread(&r.new),
            r.p,
            match (r.differs(), r.better()) {
                (false, _) => "",
                (true, true) => "**better**",
                (true, false) => "**worse**",
            }
        );
    }
    if c.unmatched > 0 {
        let _ = writeln!(out, "\n{} cells are in one run only.", c.unmatched);
    }
    out
}

/// The chart of ratios ([`crate::report::svg::compare`]): a row a cell, right of 1 better.
pub fn chart(c: &Comparison, old: &str, new: &str) -> Result<Vec<u8>> {
    crate::report::svg::compare::chart(c, old, new)
}

/// A comparison of `n` cells as a grid makes them (stream and latency cells, labels as long
/// as the grid's, some ratios beyond the noise), for the chart's tests.
#[cfg(any(test, feature = "testing"))]
pub fn fixture(n: usize) -> Comparison {
    let rows = (0..n)
        .map(|i| {
            let latency = i % 3 == 2;
            let ratio = [0.5, 0.97, 1.04, 1.8, 12.0, 0.08][i % 6];
            Row {
                cell: match latency {
                    true => format!("latency binary/split, nodelay, under load (log stdout) #{i}"),
                    false => format!(
                        "stream {} B, nonblocking writev, log stdout #{i}",
                        102 << (i % 3)
                    ),
                },
                unit: if latency { "µs p50" } else { "MiB/s" },
                old: vec![100.0; 5],
                new: vec![100.0 * ratio; 5],
                ratio,
                p: if i % 2 == 0 { 0.008 } else { 0.4 },
            }
        })
        .collect();
    Comparison {
        rows,
        differences: Vec::new(),
        unmatched: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round trip of a millisecond or more reads in ms in the table.
    #[test]
    fn a_long_round_trip_reads_in_ms() {
        let mut c = fixture(3);
        c.rows[2].old = vec![88_014.8; 5];
        c.rows[2].new = vec![88_014.8; 5];
        let md = markdown(&c, "a", "b");
        assert!(md.contains("| ms p50 | 88.0 (88.0-88.0) |"), "{md}");
        assert!(!md.contains("88014.8"), "{md}");
    }

    /// The exact test: fully separated groups of 5 give p = 2/252; of 3, 2/20 = 0.1; one
    /// group inside the other is no difference; ties count a half.
    #[test]
    fn mann_whitney_exact_p() {
        let lo = [1.0, 2.0, 3.0, 4.0, 5.0];
        let hi = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&lo, &hi) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&hi, &lo) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&lo[..3], &hi[..3]) - 0.1).abs() < 1e-12);
        let mixed = mann_whitney_p(&[1.0, 4.0, 5.0, 8.0], &[2.0, 3.0, 6.0, 7.0]);
        assert!(mixed > 0.5, "{mixed}");
        assert_eq!(mann_whitney_p(&[5.0, 5.0, 5.0], &[5.0, 5.0, 5.0]), 1.0);
        assert_eq!(mann_whitney_p(&[], &[1.0]), 1.0);
    }

    /// The committed grid compared with itself: every ratio 1, nothing beyond noise; with
    /// another file or another host pair it is refused, saying why.
    #[test]
    fn a_run_against_itself_and_incomparable_runs() {
        let results = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../results"));
        let c = compare(results, results).unwrap();
        assert!(c.rows.len() > 20);
        assert!(
            c.rows
                .iter()
                .all(|r| (r.ratio - 1.0).abs() < 1e-12 && !r.differs())
        );
        assert!(c.differences.is_empty() && c.unmatched == 0);
        let md = markdown(&c, "a", "b");
        assert!(md.contains("**0 of"), "{md}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(results.join("runs.jsonl"), dir.path().join("runs.jsonl")).unwrap();
        let setup = std::fs::read_to_string(results.join("setup.json")).unwrap();
        let other = setup.replace("\"network\": \"loopback\"", "\"network\": \"198.18.0.1\"");
        assert_ne!(setup, other);
        std::fs::write(dir.path().join("setup.json"), other).unwrap();
        let e = compare(results, dir.path()).unwrap_err().to_string();
        assert!(e.contains("different hosts"), "{e}");
        let other = setup.replace("tsl.txt", "other.txt");
        std::fs::write(dir.path().join("setup.json"), other).unwrap();
        let e = compare(results, dir.path()).unwrap_err().to_string();
        assert!(e.contains("different files"), "{e}");
    }

    /// A latency cell under load compares the loaded round trips, not the idle ones its
    /// runs also measured: each such row holds the committed runs' `under_load.rtt_us.p50`.
    #[test]
    fn under_load_rows_compare_the_loaded_round_trips() {
        let results = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../results"));
        let (_, runs) = crate::folder::read_grid(results).unwrap();
        let c = compare(results, results).unwrap();
        let loaded: Vec<&Row> = c
            .rows
            .iter()
            .filter(|r| r.cell.contains("under load"))
            .collect();
        assert!(
            !loaded.is_empty(),
            "the committed grid has cells under load"
        );
        for row in loaded {
            let want: Vec<f64> = runs
                .iter()
                .filter(|r| label(&r.cell) == row.cell)
                .filter_map(|r| match &r.result {
                    ClientJson::Latency(l) => l.under_load.as_ref()?.rtt_us.as_ref().map(|t| t.p50),
                    _ => None,
                })
                .collect();
            assert_eq!(row.old, want, "{}", row.cell);
        }
    }
}
