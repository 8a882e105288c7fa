//! The floor: how fast a bare write()/read() loop moves the seed file over loopback, side by
//! side with tsperf (issue 8).
//!
//! `cargo bench --bench floor` runs, for chunks 102, 1024 and 10240, alternately REPS times
//! (env `TSPERF_REPS`, default 5): the bare loop of `tsperf::floor` (a writer thread that
//! `write()`s exactly CHUNK bytes at a time from memory, a reader thread that `read()`s 256 KiB
//! at a time until EOF; std only, no other tsperf code on the path), and tsclient to a
//! `--log none` tsserver with the 36 MiB file. It prints receiver-side medians and tsperf's
//! fraction of the floor.

mod common;

use std::process::Stdio;

use common::{client, median, reps, seed_file, server};

/// The bare loop (`tsperf::floor`, std only), receiver-side MiB/s, reading 256 KiB at a time
/// as tsserver does with `--log none`.
fn floor(total: usize, chunk: usize) -> f64 {
    let f = tsperf::floor::run(total as u64, chunk, 256 * 1024).expect("floor loop");
    f.bytes as f64 / (1024.0 * 1024.0) / f.receiver.as_secs_f64()
}

/// tsperf's receiver-side MiB/s from a tsclient JSON.
fn receiver(v: &serde_json::Value) -> f64 {
    v["server"]["bytes"].as_f64().unwrap()
        / (1024.0 * 1024.0)
        / v["server"]["elapsed_s"].as_f64().unwrap()
}

fn main() {
    let reps = reps();
    let file = seed_file();
    let total = std::fs::metadata(&file).unwrap().len() as usize;
    let (_server, port) = server(&["--log", "none"], Stdio::null());
    println!("36 MiB over loopback, median of {reps} alternating runs (MiB/s)\n");
    println!(
        "| chunk | bare write/read loop | tsperf (blocking) | tsperf (nonblocking) | tsperf / floor |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for chunk in [102usize, 1024, 10240] {
        let (mut f, mut b, mut n) = (Vec::new(), Vec::new(), Vec::new());
        let c = chunk.to_string();
        for _ in 0..reps {
            f.push(floor(total, chunk));
            b.push(receiver(&client(
                &port,
                &["--chunk", &c, file.to_str().unwrap()],
            )));
            n.push(receiver(&client(
                &port,
                &["--chunk", &c, "--nonblocking", file.to_str().unwrap()],
            )));
        }
        let (f, b, n) = (median(&mut f), median(&mut b), median(&mut n));
        println!(
            "| {chunk} | {f:.1} | {b:.1} | {n:.1} | {:.2} / {:.2} |",
            b / f,
            n / f
        );
    }
}
