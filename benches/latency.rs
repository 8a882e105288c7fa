//! Latency mode against sockperf (issue 5).
//!
//! `cargo bench --bench latency`:
//! 1. tsperf (`--latency --nodelay`, binary, single framing) and `sockperf ping-pong --tcp
//!    --full-rtt` on loopback, alternating, REPS times (env `TSPERF_REPS`, default 3): median p50
//!    and p99 round trip of each, and the ratio. sockperf without `--full-rtt` reports half the
//!    round trip; we ask it for the full one. Skipped with a message if sockperf is missing.
//!
//! The seed's variants (codec × framing × nodelay, reconnect) are the grid's latency table:
//! `scripts/matrix.sh`.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};

use common::{latency, median, server};

/// A process killed when dropped.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// p50 and p99 round trip in µs from sockperf's `--full-rtt` output.
fn sockperf_run(port: u16) -> (f64, f64) {
    let out = Command::new("sockperf")
        .args([
            "ping-pong",
            "--tcp",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "2",
            "-m",
            "24",
            "--full-rtt",
        ])
        .output()
        .expect("run sockperf");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let pct = |p: &str| {
        text.lines()
            .find(|l| l.contains(&format!("percentile {p} =")))
            .and_then(|l| l.rsplit('=').next())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no percentile {p} in sockperf output:\n{text}"))
    };
    (pct("50.000"), pct("99.000"))
}

fn main() {
    let reps = common::reps(5).min(9);
    let server = server(&[]);

    let has_sockperf = Command::new("sockperf").arg("--version").output().is_ok();
    if has_sockperf {
        let sp_port = free_port();
        let _sp = Kill(
            Command::new("sockperf")
                .args([
                    "server",
                    "--tcp",
                    "-i",
                    "127.0.0.1",
                    "-p",
                    &sp_port.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (mut t50, mut t99, mut s50, mut s99) = (vec![], vec![], vec![], vec![]);
        for _ in 0..reps {
            let rtt = latency(server.port, &["--nodelay", "--count", "20000"])
                .rtt_us
                .expect("round trips measured");
            t50.push(rtt.p50);
            t99.push(rtt.p99);
            let (a, b) = sockperf_run(sp_port);
            s50.push(a);
            s99.push(b);
        }
        let (t50, t99, s50, s99) = (
            median(&mut t50),
            median(&mut t99),
            median(&mut s50),
            median(&mut s99),
        );
        println!(
            "Loopback round trip (µs), median of {reps} alternating runs; sockperf with --full-rtt\n"
        );
        println!("| tool | p50 RTT | p99 RTT |");
        println!("|---|---:|---:|");
        println!("| tsperf --latency --nodelay (binary, single) | {t50:.1} | {t99:.1} |");
        println!("| sockperf ping-pong --tcp -m 24 | {s50:.1} | {s99:.1} |");
        println!(
            "| ratio tsperf / sockperf | {:.2} | {:.2} |\n",
            t50 / s50,
            t99 / s99
        );
    } else {
        println!("sockperf is not installed (apt-get install sockperf): comparison skipped\n");
    }
}
