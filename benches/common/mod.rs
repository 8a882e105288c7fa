//! What the benchmark programs share, on top of [`tsperf_lab::harness`]: the built binaries, the
//! seed file, and the repetition count.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tsperf_lab::harness::{Client, ServerOptions, ServerProcess, Sink};
use tsperf_results::json::{LatencyJson, StreamJson};

pub(crate) use tsperf_results::stats::median;

/// Where cargo put tsserver and tsclient for this bench.
pub(crate) fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_tsserver"))
        .parent()
        .expect("the binaries' directory")
        .to_owned()
}

/// Repetitions: env `TSPERF_REPS`, else `default`.
pub(crate) fn reps(default: usize) -> usize {
    std::env::var("TSPERF_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The 36 MiB seed file, generated on first use.
pub(crate) fn seed_file() -> PathBuf {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tsl.txt");
    if !file.exists() {
        tsperf_sys::testdata::generate(&file, tsperf_sys::testdata::SEED_FILE_LEN)
            .expect("generate testdata/tsl.txt");
    }
    file
}

/// Starts `tsserver --bind 127.0.0.1 --port 0 ARGS` with stdout discarded.
pub(crate) fn server(args: &[&str]) -> ServerProcess {
    server_from(&bin_dir(), args)
}

/// [`server`], from the tsserver in `dir` (another build, for an A/B).
pub(crate) fn server_from(dir: &Path, args: &[&str]) -> ServerProcess {
    let mut all: Vec<String> = ["--bind", "127.0.0.1", "--port", "0"]
        .map(String::from)
        .to_vec();
    all.extend(args.iter().map(|a| a.to_string()));
    ServerProcess::start(&ServerOptions {
        bin_dir: dir,
        wrap: &[],
        args: all,
        stdout: Sink::Null,
        stderr: None,
    })
    .expect("start tsserver")
}

fn client(port: u16, args: &[&str]) -> tsperf_results::json::ClientJson {
    client_from(&bin_dir(), port, args)
}

fn client_from(dir: &Path, port: u16, args: &[&str]) -> tsperf_results::json::ClientJson {
    let c = Client {
        bin_dir: dir,
        wrap: &[],
        host: "127.0.0.1",
        port,
    };
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    c.run(&args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// A verified stream transfer to `port` with tsclient `ARGS`; panics on any failure.
pub(crate) fn stream(port: u16, args: &[&str]) -> StreamJson {
    let s = client(port, args).stream().expect("a stream result");
    assert!(s.verified, "not verified: {s:?}");
    s
}

/// [`stream`], with the tsclient in `dir` (another build, for an A/B; its JSON reads as ours,
/// fields added since then at their defaults).
pub(crate) fn stream_from(dir: &Path, port: u16, args: &[&str]) -> StreamJson {
    let s = client_from(dir, port, args)
        .stream()
        .expect("a stream result");
    assert!(s.verified, "not verified: {s:?}");
    s
}

/// A latency run to `port` with tsclient `--latency ARGS`.
pub(crate) fn latency(port: u16, args: &[&str]) -> LatencyJson {
    let mut all = vec!["--latency"];
    all.extend_from_slice(args);
    client(port, &all).latency().expect("a latency result")
}
