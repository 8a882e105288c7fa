//! tsperf side by side with iperf3 on the same file and chunk sizes (`scripts/peers.sh`).
//!
//! For each chunk size, tsclient (to a `--log none` tsserver) and `iperf3 -F FILE -l CHUNK -J`
//! (to an `iperf3 -s`) run alternately, REPS times. iperf3's rate is its receiver's
//! (`end.sum_received.bits_per_second`); tsperf's is the client's end-to-end rate, which stops
//! only when the server has checksummed every byte. iperf3 also says how many bytes its receiver
//! counted: where that is less than the file, the table says so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::bars::apart;
use crate::report::Exporter;

/// One chunk size's medians. Rates are receiver-side unless named otherwise: tsperf's server
/// from its first byte to its last, iperf3's `sum_received`, the floor's reader likewise.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerRow {
    /// The chunk size.
    pub chunk: u32,
    /// The bare write/read loop ([`crate::floor`]).
    pub floor_mib_s: f64,
    /// tsclient (blocking, `--io write`) to the server.
    pub tsperf_mib_s: f64,
    /// The same runs, end to end at the client (first write to the server's report).
    pub tsperf_e2e_mib_s: f64,
    /// tsclient `--nonblocking`.
    pub nonblocking_mib_s: f64,
    /// The client's CPU seconds, blocking and non-blocking.
    pub blocking_cpu_s: f64,
    /// tsclient --nonblocking's median CPU time, seconds.
    pub nonblocking_cpu_s: f64,
    /// tsclient `--io writev --batch 64`.
    pub writev_mib_s: f64,
    /// iperf3 -F's median rate, MiB/s (`None` where it was not run).
    pub iperf3_mib_s: f64,
    /// The fewest bytes iperf3's receiver counted in any repetition.
    pub iperf3_min_bytes: u64,
    /// Every tsperf run verified.
    pub tsperf_verified: bool,
}

impl PeerRow {
    /// tsclient's rate over iperf3's.
    pub fn vs_iperf3(&self) -> f64 {
        self.tsperf_mib_s / self.iperf3_mib_s.max(f64::MIN_POSITIVE)
    }
    /// tsclient's rate over the bare loop's.
    pub fn vs_floor(&self) -> f64 {
        self.tsperf_mib_s / self.floor_mib_s.max(f64::MIN_POSITIVE)
    }
    /// Non-blocking tsclient's rate over blocking's.
    pub fn nonblocking_vs_blocking(&self) -> f64 {
        self.nonblocking_mib_s / self.tsperf_mib_s.max(f64::MIN_POSITIVE)
    }
    /// Non-blocking tsclient's CPU time over blocking's.
    pub fn cpu_ratio(&self) -> f64 {
        self.nonblocking_cpu_s / self.blocking_cpu_s.max(f64::MIN_POSITIVE)
    }
}

/// What the comparison with the peers runs.
pub struct PeersConfig {
    /// The file to send.
    pub file: PathBuf,
    /// The chunk sizes.
    pub chunks: Vec<u32>,
    /// Repetitions of each, alternating.
    pub reps: u32,
    /// The port of a `tsserver --log none` on 127.0.0.1 ([`start_tsserver`] starts one).
    pub tsperf_port: u16,
    /// The port of a running `iperf3 -s` on 127.0.0.1.
    pub iperf3_port: u16,
    /// Where tsserver and tsclient are.
    pub bin_dir: PathBuf,
}

/// Starts the `tsserver --log none` the tsperf runs go to, on `bind` under the command prefix
/// `wrap` (on a port of its choosing, read from its listening line); it stops when dropped.
pub fn start_tsserver(
    bin_dir: &Path,
    bind: &str,
    wrap: &[String],
) -> Result<crate::harness::ServerProcess> {
    use crate::harness::{ServerOptions, ServerProcess, Sink};
    ServerProcess::start(&ServerOptions {
        bin_dir,
        wrap,
        args: ["--bind", bind, "--port", "0", "--log", "none"]
            .map(String::from)
            .to_vec(),
        stdout: Sink::Null,
        stderr: None,
    })
}

/// Runs an iperf3 client (`cmd`, given `-J`) and returns its receiver's `end.sum_received`; an
/// iperf3 that printed no JSON, or an error, is an error saying so.
pub(crate) fn iperf3_received(cmd: &mut Command) -> Result<serde_json::Value> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("cannot run iperf3")?;
    let mut v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("iperf3 printed no JSON")?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3 failed: {e}");
    }
    Ok(v["end"]["sum_received"].take())
}

/// Runs iperf3 once and returns (receiver bits/s, receiver bytes).
fn iperf3(cfg: &PeersConfig, chunk: u32) -> Result<(f64, u64)> {
    let r = iperf3_received(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &cfg.iperf3_port.to_string(), "-J"])
            .args(["-l", &chunk.to_string(), "-F"])
            .arg(&cfg.file),
    )?;
    Ok((
        r["bits_per_second"].as_f64().unwrap_or(0.0),
        r["bytes"].as_u64().unwrap_or(0),
    ))
}

/// One tsclient run's numbers.
struct TsRun {
    receiver_mib_s: f64,
    e2e_mib_s: f64,
    cpu_s: f64,
    verified: bool,
}

fn tsclient(cfg: &PeersConfig, chunk: u32, extra: &[&str]) -> Result<TsRun> {
    let client = crate::harness::Client {
        bin_dir: &cfg.bin_dir,
        wrap: &[],
        host: "127.0.0.1",
        port: cfg.tsperf_port,
    };
    let mut args = vec!["--chunk".to_owned(), chunk.to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push(cfg.file.display().to_string());
    let s = client.run(&args)?.stream()?;
    Ok(TsRun {
        receiver_mib_s: s.server.mib_per_s(),
        e2e_mib_s: s.mib_per_s,
        cpu_s: s.cpu.total_s(),
        verified: s.verified,
    })
}

/// Runs the comparison; servers must already listen on the configured ports. Within each
/// repetition the five runs alternate (floor, tsperf blocking, non-blocking, writev, iperf3),
/// and each repetition starts one further along that list, so no tool always runs first or
/// always follows the same neighbour.
pub fn run(cfg: &PeersConfig, mut progress: impl FnMut(&PeerRow)) -> Result<Vec<PeerRow>> {
    let len = std::fs::metadata(&cfg.file)
        .with_context(|| format!("cannot read file '{}'", cfg.file.display()))?
        .len();
    let mib = |bytes: u64, d: std::time::Duration| {
        bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64().max(1e-9)
    };
    let mut rows = Vec::new();
    for &chunk in &cfg.chunks {
        let mut v: [Vec<f64>; 8] = Default::default();
        let (mut min_bytes, mut verified) = (u64::MAX, true);
        for rep in 0..cfg.reps as usize {
            for turn in 0..5 {
                match (rep + turn) % 5 {
                    0 => {
                        let read = (tsperf_proto::LOOP_READ as usize).max(chunk as usize);
                        let f = crate::floor::run(len, chunk as usize, read)
                            .context("the floor loop failed")?;
                        v[0].push(mib(f.bytes, f.receiver));
                    }
                    1 => {
                        let b = tsclient(cfg, chunk, &[])?;
                        verified &= b.verified;
                        v[1].push(b.receiver_mib_s);
                        v[2].push(b.e2e_mib_s);
                        v[4].push(b.cpu_s);
                    }
                    2 => {
                        let n = tsclient(cfg, chunk, &["--nonblocking"])?;
                        verified &= n.verified;
                        v[3].push(n.receiver_mib_s);
                        v[5].push(n.cpu_s);
                    }
                    3 => {
                        let w = tsclient(cfg, chunk, &["--io", "writev", "--batch", "64"])?;
                        verified &= w.verified;
                        v[6].push(w.receiver_mib_s);
                    }
                    _ => {
                        let (bps, bytes) = iperf3(cfg, chunk)?;
                        v[7].push(bps / 8.0 / (1024.0 * 1024.0));
                        min_bytes = min_bytes.min(bytes);
                    }
                }
            }
        }
        let [fl, ts, e2e, nb, bc, nc, wv, ip] =
            v.map(|mut x| tsperf_results::stats::median(&mut x));
        let row = PeerRow {
            chunk,
            floor_mib_s: fl,
            tsperf_mib_s: ts,
            tsperf_e2e_mib_s: e2e,
            nonblocking_mib_s: nb,
            blocking_cpu_s: bc,
            nonblocking_cpu_s: nc,
            writev_mib_s: wv,
            iperf3_mib_s: ip,
            iperf3_min_bytes: min_bytes,
            tsperf_verified: verified,
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// The bar for tsperf against iperf3 at `chunk`: 1.5× at 1024 bytes and below, 1.1×
/// above.
pub fn iperf3_bar(chunk: u32) -> f64 {
    if chunk <= 1024 { 1.5 } else { 1.1 }
}

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
    use crate::report::svg::{Series, grouped_bars};
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
            series("tsperf", |r| r.tsperf_mib_s),
            series("tsperf --nonblocking", |r| r.nonblocking_mib_s),
            series("tsperf --io writev --batch 64", |r| r.writev_mib_s),
            series("iperf3 -F", |r| r.iperf3_mib_s),
        ],
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
            verdict(r.vs_floor() >= 0.85),
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
         (crates/lab/src/floor.rs, std only, no checksum), its reader woken as tsserver's is \
         (SO_RCVLOWAT 256 KiB once its buffer has room: on loopback each wake-up of the reader \
         costs the sending core). tsperf: tsclient to a `--log none` event-loop server (1 MiB \
         reads), server's first to last byte, every run verified by digest (end to end: client's \
         first write to the server's report). iperf3: `iperf3 -F FILE -l CHUNK -J`, \
         `end.sum_received`. The floor's two ends often share one CPU (the scheduler places \
         them so when other programs ran just before): at 1024-byte writes a bare loop is a \
         third faster there than on two CPUs. tsperf gains nothing there: its stream follows \
         its hello and the server's answer, and on bbr a stream that follows a request and \
         its answer is paced (thousands of pacing timers a second at 1024 B), where the bare \
         loop's mostly is not (docs/performance.md, the tenth session).\n",
        file.display(),
        tsperf_results::units::size(file_len)
    );
    let _ = writeln!(
        o,
        "| chunk | floor MiB/s | tsperf MiB/s | tsperf end to end | iperf3 MiB/s | tsperf / iperf3 | tsperf / floor | tsperf verified | iperf3 receiver bytes |"
    );
    let _ = writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|---|---|");
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
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}× | {:.2} | {} | {} |",
            r.chunk,
            r.floor_mib_s,
            r.tsperf_mib_s,
            r.tsperf_e2e_mib_s,
            r.iperf3_mib_s,
            r.vs_iperf3(),
            r.vs_floor(),
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

    /// The table flags an iperf3 receiver that counted fewer bytes than the file holds, and
    /// the bars say which were met.
    #[test]
    fn shortfall_and_bars() {
        let rows = [
            PeerRow {
                chunk: 102,
                floor_mib_s: 90.0,
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
        ];
        let md = markdown(&rows, Path::new("f"), 1000, 3, &Default::default());
        assert!(
            md.contains(
                "| 102 | 90.0 | 80.0 | 75.0 | 40.0 | 2.00× | 0.89 | yes | **900 of 1000** (90.0%) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 10240 | 2000.0 | 1000.0 | 900.0 | 1000.0 | 1.00× | 0.50 | yes | all |"),
            "{md}"
        );
        assert!(md.contains("- 102 B: tsperf / iperf3 2.00× (bar 1.5×) met; tsperf / floor 0.89 (bar 0.85) met; nonblocking / blocking 0.97 (bar 0.90) met; client CPU 1.10× (bar 1.2×) met."), "{md}");
        assert!(md.contains("tsperf / iperf3 1.00× (bar 1.1×) **missed**; tsperf / floor 0.50 (bar 0.85) **missed**; nonblocking / blocking 0.80 (bar 0.90) **missed**; client CPU 2.00× (bar 1.2×) **missed**."), "{md}");

        // A bar missed by a hair shows the hair, not "0.85 (bar 0.85) missed".
        let hair = PeerRow {
            chunk: 1024,
            floor_mib_s: 1098.4,
            tsperf_mib_s: 930.0,
            ..rows[0].clone()
        };
        let md = markdown(&[hair], Path::new("f"), 1000, 3, &Default::default());
        assert!(
            md.contains("tsperf / floor 0.847 (bar 0.850) **missed**"),
            "{md}"
        );
        let labels = crate::report::svg::texts(&svg(&rows).unwrap());
        for want in [
            "floor: bare write/read loop",
            "iperf3 -F",
            "chunk 102 B",
            "chunk 10240 B",
        ] {
            assert!(labels.iter().any(|l| l == want), "{want} not in {labels:?}");
        }
    }
}
