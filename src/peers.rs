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

/// One chunk size's medians.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRow {
    pub chunk: u32,
    pub tsperf_mib_s: f64,
    pub iperf3_mib_s: f64,
    /// The fewest bytes iperf3's receiver counted in any repetition.
    pub iperf3_min_bytes: u64,
    pub tsperf_verified: bool,
}

pub struct PeersConfig {
    pub file: PathBuf,
    pub chunks: Vec<u32>,
    pub reps: u32,
    pub tsperf_port: u16,
    pub iperf3_port: u16,
    pub bin_dir: PathBuf,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs iperf3 once and returns (receiver bits/s, receiver bytes).
fn iperf3(cfg: &PeersConfig, chunk: u32) -> Result<(f64, u64)> {
    let out = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &cfg.iperf3_port.to_string(),
            "-J",
            "-l",
            &chunk.to_string(),
            "-F",
        ])
        .arg(&cfg.file)
        .stdin(Stdio::null())
        .output()
        .context("cannot run iperf3")?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("iperf3 printed no JSON")?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3 failed: {e}");
    }
    let r = &v["end"]["sum_received"];
    Ok((
        r["bits_per_second"].as_f64().unwrap_or(0.0),
        r["bytes"].as_u64().unwrap_or(0),
    ))
}

fn tsclient(cfg: &PeersConfig, chunk: u32) -> Result<(f64, bool)> {
    let out = Command::new(cfg.bin_dir.join("tsclient"))
        .args([
            "--port",
            &cfg.tsperf_port.to_string(),
            "--json",
            "--chunk",
            &chunk.to_string(),
        ])
        .arg(&cfg.file)
        .stdin(Stdio::null())
        .output()
        .context("cannot run tsclient")?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("tsclient printed no JSON")?;
    Ok((
        v["mib_per_s"].as_f64().unwrap_or(0.0),
        v["verified"] == true,
    ))
}

/// Runs the comparison; servers must already listen on the configured ports.
pub fn run(cfg: &PeersConfig, mut progress: impl FnMut(&PeerRow)) -> Result<Vec<PeerRow>> {
    let mut rows = Vec::new();
    for &chunk in &cfg.chunks {
        let (mut ts, mut ip, mut min_bytes, mut verified) =
            (Vec::new(), Vec::new(), u64::MAX, true);
        for _ in 0..cfg.reps {
            let (rate, ok) = tsclient(cfg, chunk)?;
            ts.push(rate);
            verified &= ok;
            let (bps, bytes) = iperf3(cfg, chunk)?;
            ip.push(bps / 8.0 / (1024.0 * 1024.0));
            min_bytes = min_bytes.min(bytes);
        }
        let row = PeerRow {
            chunk,
            tsperf_mib_s: median(&mut ts),
            iperf3_mib_s: median(&mut ip),
            iperf3_min_bytes: min_bytes,
            tsperf_verified: verified,
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// `peers.md`.
pub fn markdown(
    rows: &[PeerRow],
    file: &Path,
    file_len: u64,
    reps: u32,
    machine: &crate::machine::Machine,
) -> String {
    let mut o = String::from("# tsperf against iperf3\n\n");
    let _ = writeln!(
        o,
        "Loopback on {} ({} cores), kernel {}; tsperf {} (commit {}). File `{}` ({}), median of {reps} \
         alternating runs. tsperf: client end-to-end rate to a `--log none` event-loop server, verified \
         by digest. iperf3: `iperf3 -F FILE -l CHUNK -J`, receiver rate (`end.sum_received`).\n",
        machine.cpu,
        machine.cores,
        machine.kernel,
        machine.tsperf,
        machine.commit,
        file.display(),
        crate::units::size(file_len)
    );
    let _ = writeln!(
        o,
        "| chunk | tsperf MiB/s | iperf3 MiB/s | tsperf / iperf3 | tsperf verified | iperf3 receiver bytes |"
    );
    let _ = writeln!(o, "|---:|---:|---:|---:|---|---|");
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
            "| {} | {:.1} | {:.1} | {:.2}× | {} | {} |",
            r.chunk,
            r.tsperf_mib_s,
            r.iperf3_mib_s,
            r.tsperf_mib_s / r.iperf3_mib_s.max(f64::MIN_POSITIVE),
            if r.tsperf_verified { "yes" } else { "**NO**" },
            counted
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table flags an iperf3 receiver that counted fewer bytes than the file holds.
    #[test]
    fn shortfall_is_flagged() {
        let rows = [
            PeerRow {
                chunk: 102,
                tsperf_mib_s: 80.0,
                iperf3_mib_s: 40.0,
                iperf3_min_bytes: 900,
                tsperf_verified: true,
            },
            PeerRow {
                chunk: 1024,
                tsperf_mib_s: 300.0,
                iperf3_mib_s: 200.0,
                iperf3_min_bytes: 1000,
                tsperf_verified: true,
            },
        ];
        let md = markdown(
            &rows,
            Path::new("f"),
            1000,
            3,
            &crate::machine::Machine::default(),
        );
        assert!(
            md.contains("| 102 | 80.0 | 40.0 | 2.00× | yes | **900 of 1000** (90.0%) |"),
            "{md}"
        );
        assert!(
            md.contains("| 1024 | 300.0 | 200.0 | 1.50× | yes | all |"),
            "{md}"
        );
    }
}
