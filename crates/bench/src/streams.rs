//! tsperf's streams and directions side by side with iperf3's (`scripts/peers.sh --streams`):
//! timed runs of 1, 2, 4, 8 streams, forward (`-P N`) and reverse (`-R -P N`), each tsperf run
//! alternating with the iperf3 run it is compared with, medians of REPS. Both write 128 KiB
//! (iperf3's default `-l`); tsperf's rate is the session's SUM (verified), iperf3's its
//! receiver's `sum_received`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Result, bail};

use tsperf_lab::harness::{Client, wrapped};
use tsperf_results::json::ClientJson;

/// What the comparison runs.
pub struct StreamsConfig {
    /// Stream counts.
    pub streams: Vec<u8>,
    /// Seconds a run lasts (both tools' `-t`).
    pub secs: f64,
    /// Repetitions, alternating.
    pub reps: u32,
    /// The file tsperf's forward runs stripe and repeat.
    pub file: PathBuf,
    /// The address both servers listen on and the clients connect to.
    pub host: String,
    /// A tsserver's port on `host`.
    pub tsperf_port: u16,
    /// An `iperf3 -s`'s port on `host`.
    pub iperf3_port: u16,
    /// Where tsclient is.
    pub bin_dir: PathBuf,
    /// A command prefix for both clients (e.g. `ip netns exec NS`), empty for none.
    pub client_wrap: Vec<String>,
    /// Where the runs went, as the table names it: `Loopback`, `An emulated LAN (...)`.
    pub network: String,
}

/// One row: a stream count and a direction.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamsRow {
    /// Streams.
    pub streams: u8,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// tsperf's median, Gbit/s.
    pub tsperf_gbit: f64,
    /// iperf3's median, Gbit/s.
    pub iperf3_gbit: f64,
    /// Every tsperf run verified.
    pub verified: bool,
}

/// One tsclient run: its rate (a session's SUM) in Gbit/s and whether it verified. A failed or
/// unverified run is an error (the client exits non-zero).
fn tsclient(cfg: &StreamsConfig, n: u8, reverse: bool) -> Result<(f64, bool)> {
    let mut args: Vec<String> = [
        "--chunk",
        "128k",
        "-t",
        &cfg.secs.to_string(),
        "-P",
        &n.to_string(),
    ]
    .map(String::from)
    .to_vec();
    if reverse {
        args.push("-R".into());
    } else {
        args.push(cfg.file.display().to_string());
    }
    let client = Client {
        bin_dir: &cfg.bin_dir,
        wrap: &cfg.client_wrap,
        host: &cfg.host,
        port: cfg.tsperf_port,
    };
    Ok(match client.run(&args)? {
        ClientJson::Stream(s) => (s.gbit_per_s, s.verified),
        ClientJson::Reverse(r) => (r.gbit_per_s, r.verified),
        ClientJson::Parallel(p) | ClientJson::ParallelReverse(p) => {
            (p.sum.gbit_per_s, p.sum.verified)
        }
        other => bail!(
            "tsclient printed a {} result for a stream run",
            other.mode()
        ),
    })
}

fn iperf3(cfg: &StreamsConfig, n: u8, reverse: bool) -> Result<f64> {
    let mut cmd = wrapped(&cfg.client_wrap, "iperf3".as_ref());
    cmd.args(["-c", &cfg.host, "-p", &cfg.iperf3_port.to_string(), "-J"])
        .args(["-t", &cfg.secs.to_string(), "-P", &n.to_string()]);
    if reverse {
        cmd.arg("-R");
    }
    let r = crate::peers::iperf3_received(&mut cmd)?;
    Ok(r["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9)
}

/// Runs the comparison; both servers must already listen. Each repetition alternates which tool
/// goes first.
pub fn run(cfg: &StreamsConfig, mut progress: impl FnMut(&StreamsRow)) -> Result<Vec<StreamsRow>> {
    let mut rows = Vec::new();
    for reverse in [false, true] {
        for &n in &cfg.streams {
            let (mut ts, mut ip, mut verified) = (Vec::new(), Vec::new(), true);
            for rep in 0..cfg.reps {
                let mut t = || -> Result<()> {
                    let (g, ok) = tsclient(cfg, n, reverse)?;
                    ts.push(g);
                    verified &= ok;
                    Ok(())
                };
                if rep % 2 == 0 {
                    t()?;
                    ip.push(iperf3(cfg, n, reverse)?);
                } else {
                    ip.push(iperf3(cfg, n, reverse)?);
                    t()?;
                }
            }
            let row = StreamsRow {
                streams: n,
                reverse,
                tsperf_gbit: tsperf_results::stats::median(&mut ts),
                iperf3_gbit: tsperf_results::stats::median(&mut ip),
                verified,
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The streams table in Markdown, naming the machine.
pub fn markdown(
    rows: &[StreamsRow],
    cfg: &StreamsConfig,
    machine: &tsperf_results::machine::Machine,
) -> String {
    let mut o = String::from("# Streams and directions: tsperf against iperf3\n\n");
    let _ = writeln!(
        o,
        "{} on {machine}. Timed runs of {} s, both tools writing 128 KiB, median of {} \
         alternating runs per cell. tsperf: `tsclient -t {} --chunk 128k -P N FILE` (forward: \
         the file `{}` striped over the streams, each repeating its stripe) and `-R -P N` (the \
         server sends the generated stream), the session's SUM rate, every stream verified by \
         digest. iperf3: `iperf3 -t {} -P N [-R] -J`, `end.sum_received` (memory to memory, \
         nothing checksummed). Made by `scripts/peers.sh --streams`.\n",
        cfg.network,
        cfg.secs,
        cfg.reps,
        cfg.secs,
        cfg.file.display(),
        cfg.secs
    );
    let _ = writeln!(
        o,
        "| streams | direction | tsperf Gbit/s | iperf3 Gbit/s | tsperf / iperf3 | tsperf verified |"
    );
    let _ = writeln!(o, "|---:|---|---:|---:|---:|---|");
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} |",
            r.streams,
            if r.reverse { "reverse (-R)" } else { "forward" },
            r.tsperf_gbit,
            r.iperf3_gbit,
            r.tsperf_gbit / r.iperf3_gbit.max(f64::MIN_POSITIVE),
            if r.verified { "yes" } else { "NO" }
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table has a row per stream count and direction, the ratio, and says an unverified
    /// run.
    #[test]
    fn markdown_rows() {
        let cfg = StreamsConfig {
            streams: vec![1, 4],
            secs: 3.0,
            reps: 5,
            file: "testdata/tsl.txt".into(),
            host: "127.0.0.1".into(),
            tsperf_port: 1,
            iperf3_port: 2,
            bin_dir: ".".into(),
            client_wrap: Vec::new(),
            network: "Loopback".into(),
        };
        let rows = [
            StreamsRow {
                streams: 4,
                reverse: true,
                tsperf_gbit: 10.0,
                iperf3_gbit: 8.0,
                verified: false,
            },
            StreamsRow {
                streams: 1,
                reverse: false,
                tsperf_gbit: 9.0,
                iperf3_gbit: 10.0,
                verified: true,
            },
        ];
        let md = markdown(&rows, &cfg, &tsperf_lab::machine::probe("abc"));
        assert!(
            md.contains("| 4 | reverse (-R) | 10.00 | 8.00 | 1.25 | NO |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 | forward | 9.00 | 10.00 | 0.90 | yes |"),
            "{md}"
        );
        assert!(md.contains("median of 5"), "{md}");
        assert!(
            md.starts_with("# Streams and directions: tsperf against iperf3\n\nLoopback on "),
            "{md}"
        );
    }
}
