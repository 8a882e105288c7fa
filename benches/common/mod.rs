//! What the benchmark programs share: starting servers, running clients, medians.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process killed when dropped.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn reps() -> usize {
    std::env::var("TSPERF_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// The 36 MiB seed file, generated on first use.
pub fn seed_file() -> PathBuf {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tsl.txt");
    if !file.exists() {
        tsperf::testdata::generate(&file, tsperf::testdata::SEED_FILE_LEN)
            .expect("generate testdata/tsl.txt");
    }
    file
}

/// Starts `tsserver --bind 127.0.0.1 --port 0 ARGS` with stdout going to `stdout` and returns it
/// with its port.
pub fn server(args: &[&str], stdout: Stdio) -> (Kill, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tsserver"))
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tsserver");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().rsplit(':').next().unwrap().to_owned();
    (Kill(child), port)
}

/// Waits (up to 10 s) for a `listening on` line in `path` and returns the port.
pub fn port_from_file(path: &Path) -> String {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(p) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("tsserver: listening on "))
        {
            return p.rsplit(':').next().unwrap().to_owned();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no listening line in {}", path.display());
}

/// Runs `tsclient --port PORT --json ARGS` and returns its JSON; panics on failure, and on a
/// stream transfer that did not verify.
pub fn client(port: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tsclient"))
        .args(["--port", port, "--json"])
        .args(args)
        .output()
        .expect("run tsclient");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if v["mode"] == "stream" {
        assert_eq!(v["verified"], true);
    }
    v
}

pub fn cpu_s(v: &serde_json::Value) -> f64 {
    v["cpu"]["user_s"].as_f64().unwrap() + v["cpu"]["sys_s"].as_f64().unwrap()
}
