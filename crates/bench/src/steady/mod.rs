//! Steady state at large writes against iperf3 (`scripts/peers.sh --steady`, issue 33).
//!
//! Each cell is one way of moving a large amount of data, run by both tools with the same
//! write size: memory to memory (tsclient's generated stream of `--bytes`, iperf3 without -F),
//! the same in reverse and with two streams, `sendfile` (`--io sendfile` of the file, iperf3
//! `-Z`) and a file read (tsclient FILE, iperf3 `-F FILE`). The tools alternate, the one that
//! goes first changing every repetition, and the table shows medians.
//!
//! CPU is measured the same way for both tools, from outside: a client's is the kernel's
//! account when it is reaped (`wait4`, every thread, start-up included), a server's the
//! difference of its threads' times around the run (nanoseconds, `schedstat`; the process's
//! 10 ms ticks where a thread ended during it: `harness::cpu::Threads`). Neither tool's own
//! figure is used. Rates are tsclient's end to end (first byte written to the server's report
//! of every byte counted and checksummed) and iperf3's receiver (`end.sum_received`).
//!
//! Beside them, the limit of this machine: the bare write/read loop ([`crate::floor`]) from one
//! buffer, and the same loop with tsperf's checksum on both ends.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use tsperf_lab::harness::cpu::{Threads, hrtimer_softirqs, run_measured};

/// How a cell moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Memory to memory, client to server.
    Memory,
    /// Memory to memory, tsclient sending one buffer again and again (`--one-buffer`), as
    /// iperf3 does: the same work on both sides.
    OneBuffer,
    /// [`Kind::OneBuffer`] with both tools sending with TCP cubic (`--congestion cubic`, iperf3
    /// `-C cubic`) whatever the kernel's default: a window-driven sender, without the pacing
    /// timers of bbr (see [`Sample::timers`]).
    OneBufferCubic,
    /// Memory to memory, server to client (`-R`).
    Reverse,
    /// [`Kind::Reverse`] with the server sending one buffer again and again (`-R
    /// --one-buffer`), as iperf3 -R does.
    ReverseOneBuffer,
    /// [`Kind::ReverseOneBuffer`] with both servers sending with TCP cubic (`tsclient -R -C
    /// cubic`, `iperf3 -R -C cubic`: each asks its server).
    ReverseOneBufferCubic,
    /// Memory to memory, two streams (`-P 2`).
    Parallel,
    /// [`Kind::Parallel`] with each stream sending one buffer again and again (`-P 2
    /// --one-buffer`), as iperf3 -P 2 does: the same work on both sides, where two streams
    /// of the generated text read twice the memory.
    ParallelOneBuffer,
    /// The file with `sendfile` (`--io sendfile`, iperf3 `-Z`).
    Sendfile,
    /// The file read and written (tsclient FILE, iperf3 `-F`).
    File,
}

impl Kind {
    /// The cell's name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::OneBuffer => "memory, one buffer",
            Kind::OneBufferCubic => "memory, one buffer, -C cubic",
            Kind::Reverse => "memory -R",
            Kind::ReverseOneBuffer => "memory -R, one buffer",
            Kind::ReverseOneBufferCubic => "memory -R, one buffer, -C cubic",
            Kind::Parallel => "memory -P 2",
            Kind::ParallelOneBuffer => "memory -P 2, one buffer",
            Kind::Sendfile => "sendfile / -Z",
            Kind::File => "file / -F",
        }
    }
}

/// One cell: a kind and a write size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// How the bytes move.
    pub kind: Kind,
    /// Bytes per write (tsclient `--chunk`, iperf3 `-l`).
    pub chunk: u32,
}

/// The cells: memory forward, reverse and reverse from one buffer at 1024, 10240, 64
/// KiB and 128 KiB; one buffer (with the kernel's congestion control and with cubic, forward and
/// reverse), two streams (of the generated stream and of one buffer), sendfile and the file at
/// 10240 and 128 KiB.
pub fn default_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for kind in [Kind::Memory, Kind::Reverse, Kind::ReverseOneBuffer] {
        for chunk in [1024, 10240, 64 << 10, 128 << 10] {
            cells.push(Cell { kind, chunk });
        }
    }
    for kind in [
        Kind::OneBuffer,
        Kind::OneBufferCubic,
        Kind::ReverseOneBufferCubic,
        Kind::Parallel,
        Kind::ParallelOneBuffer,
        Kind::Sendfile,
        Kind::File,
    ] {
        for chunk in [10240, 128 << 10] {
            cells.push(Cell { kind, chunk });
        }
    }
    cells
}

/// What the comparison runs.
pub struct SteadyConfig {
    /// Where tsclient is.
    pub bin_dir: PathBuf,
    /// The file of the sendfile and file cells; its length is every cell's.
    pub file: PathBuf,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Repetitions of each tool in each cell.
    pub reps: u32,
    /// The port of the tsserver (`--log none`) on 127.0.0.1, and its pid.
    pub tsperf: (u16, u32),
    /// The port of the `iperf3 -s` on 127.0.0.1, and its pid.
    pub iperf3: (u16, u32),
}

/// One run of one tool: its rate, bytes and CPU at each end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    /// MiB/s (tsclient end to end; iperf3's receiver).
    pub mib_s: f64,
    /// Bytes the receiver counted.
    pub bytes: u64,
    /// The client's CPU, seconds (`wait4`).
    pub client_cpu_s: f64,
    /// The server's CPU during the run, seconds (`harness::cpu::Threads`).
    pub server_cpu_s: f64,
    /// tsperf: every byte verified (iperf3: true).
    pub verified: bool,
    /// The whole machine's soft hrtimer expiries during the run (the `HRTIMER` row of
    /// `/proc/softirqs`): on an otherwise idle loopback, TCP's pacing timers, one each time a
    /// paced sender (bbr) had to wait before its next segment.
    #[serde(default)]
    pub timers: u64,
}

impl Sample {
    fn per_gib(&self, cpu: f64) -> f64 {
        cpu / (self.bytes.max(1) as f64 / f64::from(1u32 << 30))
    }

    /// The CPU seconds at the client's end or the server's.
    fn cpu_s(&self, client: bool) -> f64 {
        if client {
            self.client_cpu_s
        } else {
            self.server_cpu_s
        }
    }
}

/// One cell's repetitions of both tools, and the floor at its write size.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// tsperf's runs.
    pub tsperf: Vec<Sample>,
    /// iperf3's runs.
    pub iperf3: Vec<Sample>,
    /// The cell's own limit in the same repetitions: the checksummed floor loop doing its work
    /// ([`limit_of`]), run after each pair; empty for sendfile.
    #[serde(default)]
    pub limit: Vec<LoopSample>,
}

/// The median of `f` over `samples`.
fn median(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    tsperf_results::stats::median(&mut v)
}

impl CellResult {
    /// tsperf's median rate over iperf3's.
    pub fn ratio(&self) -> f64 {
        median(&self.tsperf, |s| s.mib_s) / median(&self.iperf3, |s| s.mib_s).max(1e-9)
    }

    /// Every tsperf run verified.
    pub fn verified(&self) -> bool {
        self.tsperf.iter().all(|s| s.verified)
    }
}

/// The arguments of each tool for `cell` (the client's, before the server's address).
pub fn commands(cell: Cell, file: &Path, len: u64) -> (Vec<String>, Vec<String>) {
    let c = cell.chunk.to_string();
    let n = len.to_string();
    let f = file.display().to_string();
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    match cell.kind {
        Kind::Memory => (s(&["--chunk", &c, "--bytes", &n]), s(&["-l", &c, "-n", &n])),
        Kind::OneBuffer => (
            s(&["--one-buffer", "--chunk", &c, "--bytes", &n]),
            s(&["-l", &c, "-n", &n]),
        ),
        Kind::OneBufferCubic => (
            s(&[
                "--one-buffer",
                "--congestion",
                "cubic",
                "--chunk",
                &c,
                "--bytes",
                &n,
            ]),
            s(&["-C", "cubic", "-l", &c, "-n", &n]),
        ),
        // Each reverse cell is its forward cell with -R: the same flags, the server sending.
        Kind::Reverse | Kind::ReverseOneBuffer | Kind::ReverseOneBufferCubic => {
            let kind = match cell.kind {
                Kind::Reverse => Kind::Memory,
                Kind::ReverseOneBuffer => Kind::OneBuffer,
                _ => Kind::OneBufferCubic,
            };
            let (ts, ip) = commands(Cell { kind, ..cell }, file, len);
            let r = |v: Vec<String>| [vec!["-R".to_owned()], v].concat();
            (r(ts), r(ip))
        }
        Kind::Parallel => (
            s(&["-P", "2", "--chunk", &c, "--bytes", &n]),
            s(&["-P", "2", "-l", &c, "-n", &n]),
        ),
        Kind::ParallelOneBuffer => (
            s(&["-P", "2", "--one-buffer", "--chunk", &c, "--bytes", &n]),
            s(&["-P", "2", "-l", &c, "-n", &n]),
        ),
        Kind::Sendfile => (
            s(&["--io", "sendfile", "--chunk", &c, &f]),
            s(&["-Z", "-l", &c, "-n", &n]),
        ),
        Kind::File => (s(&["--chunk", &c, &f]), s(&["-l", &c, "-F", &f])),
    }
}

/// What [`measured`] saw around a run beside the client's own figures.
struct Around {
    /// The server's CPU, seconds.
    server_cpu_s: f64,
    /// The machine's soft hrtimer expiries ([`Sample::timers`]).
    timers: u64,
}

/// Runs `args` with the server at `pid` watched: the client's measured run, and the server's
/// CPU and the machine's soft timers around it.
fn measured(cmd: &mut Command, pid: u32) -> Result<(tsperf_lab::harness::cpu::Measured, Around)> {
    let (cpu, timers) = (Threads::of(pid)?, hrtimer_softirqs());
    let m = run_measured(cmd)?;
    let around = Around {
        server_cpu_s: Threads::of(pid)?.since(&cpu),
        timers: hrtimer_softirqs().saturating_sub(timers),
    };
    Ok((m, around))
}

fn tsperf_run(cfg: &SteadyConfig, args: &[String]) -> Result<Sample> {
    let mut cmd = Command::new(cfg.bin_dir.join("tsclient"));
    cmd.args(["--host", "127.0.0.1", "--port", &cfg.tsperf.0.to_string()])
        .args(["--json", "--no-progress"])
        .args(args);
    let (m, server) = measured(&mut cmd, cfg.tsperf.1)?;
    let v: serde_json::Value = serde_json::from_slice(&m.stdout).with_context(|| {
        format!(
            "tsclient {} printed no JSON: {}",
            args.join(" "),
            String::from_utf8_lossy(&m.stderr).trim()
        )
    })?;
    // A session's figures are in its sum.
    let top = if v["sum"].is_object() { &v["sum"] } else { &v };
    if !m.success {
        bail!("tsclient {} failed: {}", args.join(" "), top["error"]);
    }
    Ok(Sample {
        mib_s: top["mib_per_s"].as_f64().unwrap_or(0.0),
        bytes: top["bytes"].as_u64().unwrap_or(0),
        client_cpu_s: m.cpu_s,
        server_cpu_s: server.server_cpu_s,
        verified: top["verified"].as_bool() == Some(true),
        timers: server.timers,
    })
}

fn iperf3_run(cfg: &SteadyConfig, iperf3: &Path, args: &[String]) -> Result<Sample> {
    let mut cmd = Command::new(iperf3);
    cmd.args(["-c", "127.0.0.1", "-p", &cfg.iperf3.0.to_string(), "-J"])
        .args(args);
    let (m, server) = measured(&mut cmd, cfg.iperf3.1)?;
    let v: serde_json::Value = serde_json::from_slice(&m.stdout)
        .with_context(|| format!("iperf3 {} printed no JSON", args.join(" ")))?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3 {} failed: {e}", args.join(" "));
    }
    let r = &v["end"]["sum_received"];
    Ok(Sample {
        mib_s: r["bits_per_second"].as_f64().unwrap_or(0.0) / 8.0 / f64::from(1u32 << 20),
        bytes: r["bytes"].as_u64().unwrap_or(0),
        client_cpu_s: m.cpu_s,
        server_cpu_s: server.server_cpu_s,
        verified: true,
        timers: server.timers,
    })
}

/// Runs every cell, `reps` alternating pairs each (odd repetitions start with iperf3) and the
/// cell's own floor loop after each pair, calling `progress` after each cell.
pub fn run(
    cfg: &SteadyConfig,
    iperf3: &Path,
    mut progress: impl FnMut(&CellResult),
) -> Result<Vec<CellResult>> {
    let len = std::fs::metadata(&cfg.file)
        .with_context(|| format!("cannot read file '{}'", cfg.file.display()))?
        .len();
    let mut out = Vec::new();
    for &cell in &cfg.cells {
        let (ts, ip) = commands(cell, &cfg.file, len);
        let mut r = CellResult {
            cell,
            tsperf: Vec::new(),
            iperf3: Vec::new(),
            limit: Vec::new(),
        };
        for rep in 0..cfg.reps {
            for turn in 0..2 {
                if (rep + turn) % 2 == 0 {
                    r.tsperf.push(tsperf_run(cfg, &ts)?);
                } else {
                    r.iperf3.push(iperf3_run(cfg, iperf3, &ip)?);
                }
            }
            if let Some((l, _)) = limit_of(cell.kind) {
                r.limit
                    .push(limits::loop_run(l, len, cell.chunk, Some(&cfg.file))?);
            }
        }
        progress(&r);
        out.push(r);
    }
    Ok(out)
}

/// Everything steady.md and steady.json hold.
#[derive(Debug, Serialize)]
pub struct SteadyReport {
    /// Each cell's runs.
    pub cells: Vec<CellResult>,
    /// The machine's limits.
    pub floors: Vec<Floor>,
    /// What xxh3 costs one core here, seconds per GiB ([`hash_cost`]): tsperf's CPU bar is
    /// iperf3's plus this on each end.
    pub hash_s_per_gib: f64,
    /// Bytes per run.
    pub len: u64,
    /// Repetitions of each tool per cell.
    pub reps: u32,
    /// The machine.
    pub machine: tsperf_results::machine::Machine,
}

mod limits;
mod markdown;
pub use limits::{Floor, Loop, LoopCpu, LoopSample, floors, hash_cost, limit_of};
pub use markdown::markdown;

#[cfg(test)]
mod tests;
