//! Blocking against non-blocking client I/O, side by side (issue 3).
//!
//! `cargo bench --bench io_models` starts a tsserver (event loop, `--log none`) on a free loopback
//! port and sends the 36 MiB seed file at chunks 102, 1024 and 10240, alternating blocking and
//! non-blocking runs, REPS times each (env `TSPERF_REPS`, default 5). It prints the median
//! throughput and client CPU time (user + sys) of each, and the non-blocking/blocking ratios.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let reps: usize = std::env::var("TSPERF_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tsl.txt");
    if !file.exists() {
        tsperf::testdata::generate(&file, tsperf::testdata::SEED_FILE_LEN)
            .expect("generate testdata/tsl.txt");
    }
    let mut server = Command::new(env!("CARGO_BIN_EXE_tsserver"))
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tsserver");
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Kill(server);
    let port = line.trim().rsplit(':').next().unwrap().to_owned();

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
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_tsclient"));
                cmd.args(["--port", &port, "--json", "--chunk", chunk]);
                if nb {
                    cmd.arg("--nonblocking");
                }
                let out = cmd.arg(&file).output().expect("run tsclient");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(v["verified"], true);
                rate[i].push(v["mib_per_s"].as_f64().unwrap());
                cpu[i].push(
                    v["cpu"]["user_s"].as_f64().unwrap() + v["cpu"]["sys_s"].as_f64().unwrap(),
                );
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
