//! Blocking against non-blocking client I/O, side by side (issue 3), and the A/B tool for
//! changes on the per-chunk path: run it before and after, compare the medians.
//!
//! `cargo bench --bench io_models` starts a tsserver (event loop, `--log none`) on a free loopback
//! port and sends the 36 MiB seed file at chunks 102, 1024 and 10240, alternating blocking and
//! non-blocking runs, REPS times each (env `TSPERF_REPS`, default 5). It prints the median
//! throughput and client CPU time (user + sys) of each, and the non-blocking/blocking ratios.
//!
//! **A/B against another build**: with env `TSPERF_AB_BIN_DIR` naming the directory of an older
//! build's tsserver and tsclient (say `git worktree add /tmp/before HEAD~1` and
//! `CARGO_TARGET_DIR=/tmp/before-target cargo build --release` there), it starts one server of
//! each build and, at the chunks in `TSPERF_AB_CHUNKS` (default `102`), alternates
//! old-client-to-old-server and new-to-new transfers in both client models, REPS times (default
//! 11), and prints the medians and new/old ratios of throughput, client CPU and server CPU.
//! `TSPERF_AB_SERVER_ARGS` (split on spaces) is given to both servers, e.g. `--log file
//! --log-file /tmp/ab.log` to compare the logged path.

mod common;

use std::path::PathBuf;

use common::{bin_dir, median, reps, seed_file, server, server_from, stream, stream_from};

fn main() {
    if let Ok(old) = std::env::var("TSPERF_AB_BIN_DIR") {
        return ab(PathBuf::from(old));
    }
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

/// Old build against this one, alternating, at `TSPERF_AB_CHUNKS`.
fn ab(old: PathBuf) {
    let reps = reps(11);
    let file = seed_file();
    let new = bin_dir();
    let extra = std::env::var("TSPERF_AB_SERVER_ARGS").unwrap_or_default();
    let extra: Vec<&str> = extra.split_whitespace().collect();
    let builds = [(&old, server_from(&old, &extra)), (&new, server(&extra))];
    let chunks = std::env::var("TSPERF_AB_CHUNKS").unwrap_or_else(|_| "102".into());
    println!(
        "36 MiB on loopback, event-loop server {extra:?}, old = {}, new = this build; median \
         of {reps} alternating runs\n",
        old.display()
    );
    println!(
        "| chunk | client io | old MiB/s | new MiB/s | new/old | old client CPU s | new | new/old | old server CPU s | new | new/old |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for chunk in chunks.split(',') {
        for nb in [false, true] {
            let mut rate = [Vec::new(), Vec::new()];
            let mut cpu = [Vec::new(), Vec::new()];
            let mut scpu = [Vec::new(), Vec::new()];
            for _ in 0..reps {
                for (i, (dir, srv)) in builds.iter().enumerate() {
                    let mut args = vec!["--chunk", chunk, file.to_str().unwrap()];
                    if nb {
                        args.push("--nonblocking");
                    }
                    let s = stream_from(dir, srv.port, &args);
                    rate[i].push(s.mib_per_s);
                    cpu[i].push(s.cpu.total_s());
                    scpu[i].push(s.server.cpu.total_s());
                }
            }
            let m = |v: &mut [Vec<f64>; 2]| (median(&mut v[0]), median(&mut v[1]));
            let (ro, rn) = m(&mut rate);
            let (co, cn) = m(&mut cpu);
            let (so, sn) = m(&mut scpu);
            println!(
                "| {chunk} | {} | {ro:.1} | {rn:.1} | {:.2} | {co:.4} | {cn:.4} | {:.2} | {so:.4} | {sn:.4} | {:.2} |",
                if nb { "nonblocking" } else { "blocking" },
                rn / ro,
                cn / co,
                sn / so
            );
        }
    }
}
