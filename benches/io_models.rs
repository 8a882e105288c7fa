//! Blocking against non-blocking client I/O, side by side (issue 3), and the A/B tool for
//! changes on the per-chunk path: run it before and after, compare the medians.
//!
//! `cargo bench --bench io_models` starts a tsserver (event loop, `--log none`) on a free loopback
//! port and sends the 36 MiB seed file at chunks 102, 1024 and 10240, alternating blocking and
//! non-blocking runs, REPS times each (env `TSPERF_REPS`, default 5). It prints the median
//! throughput and client CPU time (user + sys) of each, and the non-blocking/blocking ratios.

mod common;

use common::{median, reps, seed_file, server, stream};

fn main() {
    let reps = reps(5);
    let file = seed_file();
    let server = server(&[]);

    println!("36 MiB file on loopback, event-loop server, median of {reps} alternating runs\n");
    println!(
        "| chunk | blocking MiB/s | nonblocking MiB/s | ratio | blocking CPU s | nonblocking CPU s | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for chunk in ["102", "1024", "10240"] {
        let mut rate = [Vec::new(), Vec::new()];
        let mut cpu = [Vec::new(), Vec::new()];
        for _ in 0..reps {
            for (i, nb) in [false, true].into_iter().enumerate() {
                let mut args = vec!["--chunk", chunk, file.to_str().unwrap()];
                if nb {
                    args.push("--nonblocking");
                }
                let s = stream(server.port, &args);
                rate[i].push(s.mib_per_s);
                cpu[i].push(s.cpu.total_s());
            }
        }
        let (rb, rn) = (median(&mut rate[0]), median(&mut rate[1]));
        let (cb, cn) = (median(&mut cpu[0]), median(&mut cpu[1]));
        println!(
            "| {chunk} | {rb:.1} | {rn:.1} | {:.2} | {cb:.4} | {cn:.4} | {:.2} |",
            rn / rb,
            cn / cb
        );
    }
}
