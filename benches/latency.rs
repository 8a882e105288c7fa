//! Latency mode against sockperf, and the seed's variants (issue 5).
//!
//! `cargo bench --bench latency`:
//! 1. tsperf (`--latency --nodelay`, binary, single framing) and `sockperf ping-pong --tcp
//!    --full-rtt` on loopback, alternating, REPS times (env `TSPERF_REPS`, default 3): median p50
//!    and p99 round trip of each, and the ratio. sockperf without `--full-rtt` reports half the
//!    round trip; we ask it for the full one. Skipped with a message if sockperf is missing.
//! 2. The seed's experiment redone: codec × framing × nodelay, plus reconnect, one run each.
//!    Cells that stall on Nagle use 20 requests; the rest 2000.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};

use common::{Kill, client, median, server};

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
    let reps = common::reps().min(9);
    let (_server, port) = server(&[], Stdio::null());

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
            let v = client(&port, &["--latency", "--nodelay", "--count", "20000"]);
            t50.push(v["rtt_us"]["p50"].as_f64().unwrap());
            t99.push(v["rtt_us"]["p99"].as_f64().unwrap());
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

    println!("The seed's variants on loopback (one run each; round trip)\n");
    println!("| codec | framing | nodelay | reconnect | count | p50 | p99 | hint |");
    println!("|---|---|---|---|---:|---:|---:|---|");
    for cell in tsperf::matrix::latency_cells() {
        let count = if cell.stalls() { 20 } else { 2000 };
        let args = cell.args(count);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let tsperf::matrix::LatencyCell {
            codec,
            framing,
            nodelay,
            reconnect,
        } = cell;
        let v = client(&port, &args);
        let ms = |k: &str| v["rtt_us"][k].as_f64().unwrap() / 1000.0;
        println!(
            "| {codec} | {framing} | {} | {} | {count} | {:.3} ms | {:.3} ms | {} |",
            if nodelay { "on" } else { "off" },
            if reconnect { "yes" } else { "no" },
            ms("p50"),
            ms("p99"),
            if v["hint"].is_null() {
                ""
            } else {
                "Nagle + delayed ACK"
            }
        );
    }
}
