//! How tsclient should drive a `-P N` session's streams: a thread per stream (what it does)
//! against one event loop writing every socket (issue 26). `cargo bench --bench fanout` moves
//! 64 MiB per stream over loopback at 1, 2, 4 and 8 streams, 128 KiB and 10240-byte writes,
//! every chunk hashed with xxh3 as tsclient hashes what it sends, alternating the two models
//! REPS times (env `TSPERF_REPS`, default 7), and prints the medians: the rate, the writers'
//! CPU time, and one loop's rate over the threads'. See tsperf_bench::fanout.

use tsperf_bench::fanout::{self, Model};
use tsperf_results::stats::median;

fn main() {
    let reps: usize = std::env::var("TSPERF_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let per_stream = 64u64 << 20;
    println!(
        "64 MiB a stream over loopback, writers hashing with xxh3, median of {reps} alternating runs\n"
    );
    println!(
        "| streams | write | threads Gbit/s | one loop Gbit/s | one loop / threads | threads' CPU s | one loop's CPU s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for chunk in [131072usize, 10240] {
        for streams in [1usize, 2, 4, 8] {
            let (mut rate, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
            for rep in 0..reps {
                let order = if rep % 2 == 0 {
                    [Model::Threads, Model::OneLoop]
                } else {
                    [Model::OneLoop, Model::Threads]
                };
                for model in order {
                    let f = fanout::run(model, streams, per_stream, chunk).expect("a fan-out run");
                    let i = usize::from(model == Model::OneLoop);
                    rate[i].push(f.gbit_per_s());
                    cpu[i].push(f.writer_cpu.as_secs_f64());
                }
            }
            let [t, o] = rate.map(|mut v| median(&mut v));
            let [tc, oc] = cpu.map(|mut v| median(&mut v));
            println!(
                "| {streams} | {chunk} | {t:.2} | {o:.2} | {:.2} | {tc:.3} | {oc:.3} |",
                o / t
            );
        }
    }
}
