//! tsperf side by side with iperf3 on the same file and chunk sizes (`scripts/peers.sh`).
//!
//! For each chunk size, tsclient (to a `--log none` tsserver) and `iperf3 -F FILE -l CHUNK -J`
//! (to an `iperf3 -s`) run alternately, REPS times. iperf3's rate is its receiver's
//! (`end.sum_received.bits_per_second`); tsperf's is the client's end-to-end rate, which stops
//! only when the server has checksummed every byte. iperf3 also says how many bytes its receiver
//! counted: where that is less than the file, the table says so. What the runs leave is rendered
//! by [`PeersMarkdown`] and [`PeersSvg`] (peers.md and peers.svg).

mod report;

pub use report::{PeersMarkdown, PeersReport, PeersSvg, exporters};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// One chunk size's medians. Rates are receiver-side unless named otherwise: tsperf's server
/// from its first byte to its last, iperf3's `sum_received`, the floor's reader likewise.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerRow {
    /// The chunk size.
    pub chunk: u32,
    /// The bare write/read loop ([`crate::floor`]).
    pub floor_mib_s: f64,
    /// The same loop sending the file's bytes (read into memory before the runs, up to
    /// [`VERIFIED_SOURCE_MAX`]) with xxh3 on both ends ([`crate::floor::run_from`]): what a
    /// verified stream of these bytes costs with nothing of tsperf's around it, not even the
    /// file's reading.
    pub verified_floor_mib_s: f64,
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
        over(self.tsperf_mib_s, self.iperf3_mib_s)
    }
    /// tsclient's rate over the bare loop's.
    pub fn vs_floor(&self) -> f64 {
        over(self.tsperf_mib_s, self.floor_mib_s)
    }
    /// tsclient's rate over the verified loop's.
    pub fn vs_verified_floor(&self) -> f64 {
        over(self.tsperf_mib_s, self.verified_floor_mib_s)
    }
    /// The verified loop's rate over the bare loop's: what checksumming both ends (and bytes
    /// that do not stay in the caches) leave of the floor.
    pub fn verified_of_floor(&self) -> f64 {
        over(self.verified_floor_mib_s, self.floor_mib_s)
    }
    /// Non-blocking tsclient's rate over blocking's.
    pub fn nonblocking_vs_blocking(&self) -> f64 {
        over(self.nonblocking_mib_s, self.tsperf_mib_s)
    }
    /// Non-blocking tsclient's CPU time over blocking's.
    pub fn cpu_ratio(&self) -> f64 {
        over(self.nonblocking_cpu_s, self.blocking_cpu_s)
    }
}

/// `a` over `b`, where a `b` of zero (a run that did not happen) cannot divide by zero.
fn over(a: f64, b: f64) -> f64 {
    a / b.max(f64::MIN_POSITIVE)
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
) -> Result<tsperf_lab::harness::ServerProcess> {
    use tsperf_lab::harness::{ServerOptions, ServerProcess, Sink};
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
    let client = tsperf_lab::harness::Client {
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
/// repetition the six runs alternate (floor, tsperf blocking, non-blocking, writev, iperf3,
/// verified floor),
/// and each repetition starts one further along that list, so no tool always runs first or
/// always follows the same neighbour.
pub fn run(cfg: &PeersConfig, mut progress: impl FnMut(&PeerRow)) -> Result<Vec<PeerRow>> {
    let len = std::fs::metadata(&cfg.file)
        .with_context(|| format!("cannot read file '{}'", cfg.file.display()))?
        .len();
    let source = verified_source(&cfg.file)?;
    let mib = |bytes: u64, d: std::time::Duration| {
        bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64().max(1e-9)
    };
    let mut rows = Vec::new();
    for &chunk in &cfg.chunks {
        let mut v: [Vec<f64>; 9] = Default::default();
        let (mut min_bytes, mut verified) = (u64::MAX, true);
        for rep in 0..cfg.reps as usize {
            let read = (tsperf_proto::LOOP_READ as usize).max(chunk as usize);
            for turn in 0..6 {
                match (rep + turn) % 6 {
                    0 => {
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
                    4 => {
                        let (bps, bytes) = iperf3(cfg, chunk)?;
                        v[7].push(bps / 8.0 / (1024.0 * 1024.0));
                        min_bytes = min_bytes.min(bytes);
                    }
                    _ => {
                        let chunk = chunk as usize;
                        let f = if source.len() >= crate::floor::block(chunk) {
                            crate::floor::run_from(len, chunk, read, &source)
                        } else {
                            crate::floor::run_hashed(len, chunk, read)
                        }
                        .context("the verified floor loop failed")?;
                        v[8].push(mib(f.bytes, f.receiver));
                    }
                }
            }
        }
        let [fl, ts, e2e, nb, bc, nc, wv, ip, vf] =
            v.map(|mut x| tsperf_results::stats::median(&mut x));
        let row = PeerRow {
            chunk,
            floor_mib_s: fl,
            verified_floor_mib_s: vf,
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

/// The most of the file the verified floor sends from memory (cycled where the file is longer).
pub const VERIFIED_SOURCE_MAX: u64 = 256 << 20;

/// The verified floor's source: the file's first [`VERIFIED_SOURCE_MAX`] bytes, in memory.
fn verified_source(file: &Path) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let mut source = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(VERIFIED_SOURCE_MAX).read_to_end(&mut source))
        .with_context(|| format!("cannot read file '{}'", file.display()))?;
    Ok(source)
}

/// The bar for tsperf against iperf3 at `chunk`: 1.5× at 1024 bytes and below, 1.1×
/// above.
pub fn iperf3_bar(chunk: u32) -> f64 {
    if chunk <= 1024 { 1.5 } else { 1.1 }
}
