//! peers.md and peers.svg from [`super::run`]'s rows: the comparison table, the I/O models,
//! and each bar met or not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{PeerRow, iperf3_bar};
use crate::bars::apart;
use tsperf_lab::report::Exporter;

/// What `peers.md` and `peers.svg` render: the rows and what they were measured on.
pub struct PeersReport {
    /// One row per chunk size.
    pub rows: Vec<PeerRow>,
    /// The file both tools sent.
    pub file: PathBuf,
    /// Its length in bytes.
    pub file_len: u64,
    /// Repetitions of every run.
    pub reps: u32,
    /// The machine they ran on.
    pub machine: tsperf_results::machine::Machine,
}

/// `peers.md`: the comparison, the I/O models and the bars.
pub struct PeersMarkdown;

impl Exporter<PeersReport> for PeersMarkdown {
    fn file_name(&self) -> &'static str {
        "peers.md"
    }

    fn serialize(&self, r: &PeersReport) -> Result<Vec<u8>> {
        Ok(markdown(&r.rows, &r.file, r.file_len, r.reps, &r.machine).into_bytes())
    }
}

/// `peers.svg`: the bars of every tool per chunk size.
pub struct PeersSvg;

impl Exporter<PeersReport> for PeersSvg {
    fn file_name(&self) -> &'static str {
        "peers.svg"
    }

    fn serialize(&self, r: &PeersReport) -> Result<Vec<u8>> {
        svg(&r.rows)
    }
}

/// The peers' exporters, in the order the files are written.
pub fn exporters() -> Vec<Box<dyn Exporter<PeersReport>>> {
    vec![Box::new(PeersMarkdown), Box::new(PeersSvg)]
}

/// `peers.svg`: the floor, tsperf (blocking, non-blocking, writev) and iperf3 side by side,
/// receiver-side MiB/s per chunk size.
fn svg(rows: &[PeerRow]) -> Result<Vec<u8>> {
    use tsperf_lab::report::svg::{Axis, Series, grouped_bars};
    let series = |label: &str, f: fn(&PeerRow) -> f64| {
        Series::new(label, rows.iter().map(|r| Some(f(r))).collect())
    };
    let groups: Vec<String> = rows
        .iter()
        .map(|r| format!("chunk {} B", r.chunk))
        .collect();
    grouped_bars(
        "One stream of the file on loopback, receiver MiB/s (log scale)",
        "MiB/s",
        &groups,
        &[
            series("floor: bare write/read loop", |r| r.floor_mib_s),
            series(
                "verified floor: the loop sending the file's bytes, xxh3 on both ends",
                |r| r.verified_floor_mib_s,
            ),
            series("tsperf", |r| r.tsperf_mib_s),
            series("tsperf --nonblocking", |r| r.nonblocking_mib_s),
            series("tsperf --io writev --batch 64", |r| r.writev_mib_s),
            series("iperf3 -F", |r| r.iperf3_mib_s),
        ],
        Axis::Log,
    )
}

/// The I/O models table and the bars, from the same runs.
fn models_and_bars(rows: &[PeerRow], o: &mut String) {
    let _ = writeln!(
        o,
        "\n## I/O models and strategies (same runs)\n\n\
         | chunk | blocking MiB/s | nonblocking MiB/s | nonblocking / blocking | client CPU s blocking | nonblocking | CPU ratio | writev ×64 MiB/s | writev / write |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {:.1} | {:.1} | {:.2} | {:.4} | {:.4} | {:.2} | {:.1} | {:.2}× |",
            r.chunk,
            r.tsperf_mib_s,
            r.nonblocking_mib_s,
            r.nonblocking_vs_blocking(),
            r.blocking_cpu_s,
            r.nonblocking_cpu_s,
            r.cpu_ratio(),
            r.writev_mib_s,
            r.writev_mib_s / r.tsperf_mib_s.max(f64::MIN_POSITIVE)
        );
    }
    let _ = writeln!(o, "\n## Bars\n");
    let verdict = |ok: bool| if ok { "met" } else { "**missed**" };
    for r in rows {
        let bar = iperf3_bar(r.chunk);
        // Each figure beside its bar, with a digit more where two places would hide a miss.
        let (peer, peer_bar) = apart(r.vs_iperf3(), bar, 2);
        let (floor, floor_bar) = apart(r.vs_floor(), 0.85, 2);
        // Where the bare loop verifying the same bytes misses the bar too, the line says how
        // far tsperf is from that limit; within the bar of it, the miss is the checksum's.
        let floor_verdict = if r.vs_floor() >= 0.85 || r.verified_of_floor() >= 0.85 {
            verdict(r.vs_floor() >= 0.85).to_owned()
        } else {
            format!(
                "**missed**{} (the bare loop verifying the file's bytes moves {:.2} of the \
                 floor; tsperf {:.2} of that)",
                if r.vs_verified_floor() >= 0.85 {
                    ", beyond this machine's limit"
                } else {
                    ""
                },
                r.verified_of_floor(),
                r.vs_verified_floor()
            )
        };
        let (models, models_bar) = apart(r.nonblocking_vs_blocking(), 0.9, 2);
        let (cpu, cpu_bar) = apart(r.cpu_ratio(), 1.2, 2);
        let _ = writeln!(
            o,
            "- {} B: tsperf / iperf3 {peer}× (bar {}×) {}; tsperf / floor {floor} (bar \
             {floor_bar}) {}; nonblocking / blocking {models} (bar {models_bar}) {}; client CPU \
             {cpu}× (bar {}×) {}.",
            r.chunk,
            bar_text(bar, &peer_bar),
            verdict(r.vs_iperf3() >= bar),
            floor_verdict,
            verdict(r.nonblocking_vs_blocking() >= 0.9),
            bar_text(1.2, &cpu_bar),
            verdict(r.cpu_ratio() <= 1.2)
        );
    }
}

/// The text of `peers.md`.
fn markdown(
    rows: &[PeerRow],
    file: &Path,
    file_len: u64,
    reps: u32,
    machine: &tsperf_results::machine::Machine,
) -> String {
    let mut o = String::from("# tsperf against iperf3\n\n");
    let _ = writeln!(
        o,
        "Loopback on {machine}. File `{}` ({}), median of {reps} \
         alternating runs (each repetition starting with the next tool), all rates receiver-side. Floor: a bare `write(chunk)` / `read(1 MiB)` loop \
         (crates/bench/src/floor.rs, std only, no checksum), its reader woken as tsserver's is \
         (SO_RCVLOWAT 256 KiB once its buffer has room: on loopback each wake-up of the reader \
         costs the sending core). tsperf: tsclient to a `--log none` event-loop server (1 MiB \
         reads), server's first to last byte, every run verified by digest (end to end: client's \
         first write to the server's report). iperf3: `iperf3 -F FILE -l CHUNK -J`, \
         `end.sum_received`. The floor's two ends often share one CPU (the scheduler places \
         them so when other programs ran just before): at 1024-byte writes a bare loop is a \
         third faster there than on two CPUs. A verified stream gains nothing there: on one \
         CPU, work its reader does per byte (the checksum, or a spin as long) makes bbr pace \
         the sender, thousands of pacing timers a second at 1024 B where the bare loop arms \
         almost none (docs/performance.md). Verified floor: the same loop sending the file's \
         bytes from memory (read before the runs), xxh3 on both ends: the limit of a verified \
         stream of these bytes, without even the file's reading.\n",
        file.display(),
        tsperf_results::units::size(file_len)
    );
    let _ = writeln!(
        o,
        "| chunk | floor MiB/s | verified floor MiB/s | tsperf MiB/s | tsperf end to end | iperf3 MiB/s | tsperf / iperf3 | tsperf / floor | tsperf / verified floor | tsperf verified | iperf3 receiver bytes |"
    );
    let _ = writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for r in rows {
        let counted = if r.iperf3_min_bytes >= file_len {
            "all".to_owned()
        } else {
            format!(
                "**{} of {}** ({:.1}%)",
                r.iperf3_min_bytes,
                file_len,
                100.0 * r.iperf3_min_bytes as f64 / file_len as f64
            )
        };
        let _ = writeln!(
            o,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}× | {:.2} | {:.2} | {} | {} |",
            r.chunk,
            r.floor_mib_s,
            r.verified_floor_mib_s,
            r.tsperf_mib_s,
            r.tsperf_e2e_mib_s,
            r.iperf3_mib_s,
            r.vs_iperf3(),
            r.vs_floor(),
            r.vs_verified_floor(),
            if r.tsperf_verified { "yes" } else { "**NO**" },
            counted
        );
    }
    models_and_bars(rows, &mut o);
    o
}

/// A ratio bar as the bars line names it (`1.5`), or to the places `apart` needed to show a
/// hair's miss beside it (`1.500`).
fn bar_text(bar: f64, apart: &str) -> String {
    if apart.split('.').nth(1).is_some_and(|d| d.len() > 2) {
        apart.to_owned()
    } else {
        format!("{bar}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rows: one meeting every bar, one missing every bar.
    fn rows() -> [PeerRow; 2] {
        [
            PeerRow {
                chunk: 102,
                floor_mib_s: 90.0,
                verified_floor_mib_s: 85.0,
                tsperf_mib_s: 80.0,
                tsperf_e2e_mib_s: 75.0,
                nonblocking_mib_s: 78.0,
                blocking_cpu_s: 0.4,
                nonblocking_cpu_s: 0.44,
                writev_mib_s: 800.0,
                iperf3_mib_s: 40.0,
                iperf3_min_bytes: 900,
                tsperf_verified: true,
            },
            PeerRow {
                chunk: 10240,
                floor_mib_s: 2000.0,
                verified_floor_mib_s: 1100.0,
                tsperf_mib_s: 1000.0,
                tsperf_e2e_mib_s: 900.0,
                nonblocking_mib_s: 800.0,
                blocking_cpu_s: 0.1,
                nonblocking_cpu_s: 0.2,
                writev_mib_s: 1000.0,
                iperf3_mib_s: 1000.0,
                iperf3_min_bytes: 1000,
                tsperf_verified: true,
            },
        ]
    }

    /// The table flags an iperf3 receiver that counted fewer bytes than the file holds, and
    /// the bars say which were met.
    #[test]
    fn shortfall_and_bars() {
        let rows = rows();
        let md = markdown(&rows, Path::new("f"), 1000, 3, &Default::default());
        assert!(
            md.contains(
                "| 102 | 90.0 | 85.0 | 80.0 | 75.0 | 40.0 | 2.00× | 0.89 | 0.94 | yes | **900 of 1000** (90.0%) |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 10240 | 2000.0 | 1100.0 | 1000.0 | 900.0 | 1000.0 | 1.00× | 0.50 | 0.91 | yes | all |"
            ),
            "{md}"
        );
        assert!(md.contains("- 102 B: tsperf / iperf3 2.00× (bar 1.5×) met; tsperf / floor 0.89 (bar 0.85) met; nonblocking / blocking 0.97 (bar 0.90) met; client CPU 1.10× (bar 1.2×) met."), "{md}");
        assert!(md.contains("tsperf / iperf3 1.00× (bar 1.1×) **missed**; tsperf / floor 0.50 (bar 0.85) **missed**, beyond this machine's limit (the bare loop verifying the file's bytes moves 0.55 of the floor; tsperf 0.91 of that); nonblocking / blocking 0.80 (bar 0.90) **missed**; client CPU 2.00× (bar 1.2×) **missed**."), "{md}");
        let labels = tsperf_lab::report::svg::texts(&svg(&rows).unwrap());
        for want in [
            "floor: bare write/read loop",
            "verified floor: the loop sending the file's bytes, xxh3 on both ends",
            "iperf3 -F",
            "chunk 102 B",
            "chunk 10240 B",
        ] {
            assert!(labels.iter().any(|l| l == want), "{want} not in {labels:?}");
        }
    }

    /// The floor bar is "beyond this machine's limit" only where the verified floor misses it
    /// too and tsperf is within the bar of that limit; a hair's miss shows the hair.
    #[test]
    fn the_floor_bar_names_the_checksums_limit() {
        let rows = rows();
        // Far below the verified floor as well, tsperf's miss is its own: not "beyond".
        let own = PeerRow {
            tsperf_mib_s: 600.0,
            ..rows[1].clone()
        };
        let md = markdown(&[own], Path::new("f"), 1000, 3, &Default::default());
        assert!(
            md.contains(
                "tsperf / floor 0.30 (bar 0.85) **missed** (the bare loop verifying the file's \
                 bytes moves 0.55 of the floor; tsperf 0.55 of that); nonblocking"
            ),
            "{md}"
        );
        // A bar missed by a hair shows the hair, not "0.85 (bar 0.85) missed"; a verified
        // loop that meets the bar is no excuse for missing it.
        let hair = PeerRow {
            chunk: 1024,
            floor_mib_s: 1098.4,
            verified_floor_mib_s: 1000.0,
            tsperf_mib_s: 930.0,
            ..rows[0].clone()
        };
        let md = markdown(&[hair], Path::new("f"), 1000, 3, &Default::default());
        assert!(
            md.contains("tsperf / floor 0.847 (bar 0.850) **missed**; nonblocking"),
            "{md}"
        );
    }
}
