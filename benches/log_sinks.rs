//! What the server's per-read log costs (issue 4): the seed's 169 s against 0.65 s, measured.
//!
//! `cargo bench --bench log_sinks` starts four servers on free loopback ports:
//! - `--log none`;
//! - `--log file` (buffered file);
//! - `--log stdout` with stdout redirected to a file;
//! - `--log stdout` on a pseudo-terminal rendered by a terminal emulator: tmux when installed,
//!   else `script` reading the pty (the seed's slow case: a log line per chunk on a screen).
//!
//! Then it sends the 36 MiB seed file at chunks 102, 1024 and 10240 to each in turn,
//! alternating, REPS times (env `TSPERF_REPS`, default 3), and prints median throughput and the
//! slowdown against `none`.

mod common;

use std::process::{Command, Stdio};

use common::{Kill, client, median, port_from_file, seed_file, server};

/// tmux (a real terminal emulator) running the server, killed with its session when dropped.
struct Tmux(String);

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

enum Pty {
    Tmux(#[allow(dead_code)] Tmux),
    Script(#[allow(dead_code)] Kill),
}

fn main() {
    let reps = std::env::var("TSPERF_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let file = seed_file();
    let dir = tempfile::tempdir().unwrap();
    let (_none, none) = server(&["--log", "none"], Stdio::null());
    let log = dir.path().join("tsserver.log");
    let (_file, file_port) = server(
        &["--log", "file", "--log-file", log.to_str().unwrap()],
        Stdio::null(),
    );
    let redirected = std::fs::File::create(dir.path().join("stdout.txt")).unwrap();
    let (_redir, redir) = server(&["--log", "stdout"], redirected.into());

    let err = dir.path().join("pty.err");
    let cmd = format!(
        "{} --bind 127.0.0.1 --port 0 --log stdout 2>{}",
        env!("CARGO_BIN_EXE_tsserver"),
        err.display()
    );
    let has_tmux = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let (_pty, pty_name) = if has_tmux {
        let session = format!("tsperf-bench-{}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "200",
                "-y",
                "50",
                &cmd,
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux could not start");
        (Pty::Tmux(Tmux(session)), "pty (tmux)")
    } else {
        let child = Command::new("script")
            .args(["-qfc", &cmd, "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("neither tmux nor script is installed");
        (Pty::Script(Kill(child)), "pty (script)")
    };
    let pty = port_from_file(&err);

    let sinks = [
        ("none", none),
        ("file", file_port),
        ("stdout > file", redir),
        (pty_name, pty),
    ];
    println!(
        "36 MiB seed file on loopback, event-loop server, median MiB/s of {reps} alternating runs\n"
    );
    print!("| chunk |");
    for (name, _) in &sinks {
        print!(" {name} |");
    }
    println!(" slowest vs none |");
    println!("|---:|{}---:|", "---:|".repeat(sinks.len()));
    for chunk in ["102", "1024", "10240"] {
        let mut rates = vec![Vec::new(); sinks.len()];
        for _ in 0..reps {
            for (i, (_, port)) in sinks.iter().enumerate() {
                let v = client(port, &["--chunk", chunk, file.to_str().unwrap()]);
                rates[i].push(v["mib_per_s"].as_f64().unwrap());
            }
        }
        let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
        print!("| {chunk} |");
        for m in &medians {
            print!(" {m:.1} |");
        }
        let slowest = medians.iter().copied().fold(f64::INFINITY, f64::min);
        println!(" {:.1}× slower |", medians[0] / slowest);
    }
}
