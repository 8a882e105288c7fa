//! The comparison grid: scripts/matrix.sh end to end, its results, its clean-up, and
//! the emulated LAN.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use tsperf_results::json::ClientJson;
use tsperf_results::strategy::Strategy;

/// Grid runs take this lock, so one run's clean-up check never sees another run's servers.
static GRID: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn grid_lock() -> std::sync::MutexGuard<'static, ()> {
    GRID.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bin_dir() -> String {
    bin("tsserver").parent().unwrap().display().to_string()
}

/// Processes and tmux sessions a grid could leave behind.
fn leftovers() -> String {
    let ps = Command::new("pgrep")
        .args(["-fa", "tsperf-matrix"])
        .output()
        .unwrap();
    let tmux = Command::new("tmux")
        .arg("ls")
        .output()
        .map(|o| stdout(&o))
        .unwrap_or_default();
    let mut found: Vec<String> = stdout(&ps).lines().map(String::from).collect();
    found.extend(
        tmux.lines()
            .filter(|l| l.starts_with("tsperf-matrix-"))
            .map(String::from),
    );
    found.join("\n")
}

fn check_results(out: &Path, stream_cells: usize, latency_cells: usize) {
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    let stream_rows = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.ends_with(" | yes |"))
        .count();
    assert_eq!(stream_rows, stream_cells, "{md}");
    assert!(!md.contains("**NO**"), "{md}");
    for codec in ["binary", "object"] {
        for framing in ["single", "split", "split-request"] {
            for nodelay in ["off", "on"] {
                let row = format!("| {codec} | {framing} | {nodelay} | no |");
                assert!(md.contains(&row), "{row} missing:\n{md}");
            }
        }
    }
    assert!(
        md.contains("| binary | single | off | yes |")
            && md.contains("| binary | split | off | yes |")
    );
    assert!(
        md.contains("fewer requests: each stalls; Nagle + delayed ACK"),
        "{md}"
    );
    assert!(md.contains("stdout went to "), "{md}");
    // The field report's latency table, a row per client it tried.
    assert!(
        md.contains("## The field report's latency, side by side")
            && md.contains(
                "| one persistent Java object stream | about 40 ms | object split-request |"
            ),
        "{md}"
    );
    assert!(
        md.contains("`tcp_rmem`") && md.contains("congestion control"),
        "{md}"
    );

    let runs = tsperf_lab::report::read_runs(&out.join("runs.jsonl")).unwrap();
    assert_eq!(runs.len(), stream_cells + latency_cells);
    assert!(runs.iter().all(|r| match &r.result {
        ClientJson::Stream(s) => s.verified,
        ClientJson::Latency(_) => true,
        other => panic!("the seed's grid recorded a {} result", other.mode()),
    }));
    let csv = std::fs::read_to_string(out.join("matrix.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + stream_cells + latency_cells,
        "{csv}"
    );
    // Every transfer has a verdict and a time split; the latency table has its rows
    // under load; the timeline is drawn.
    for r in &runs {
        match &r.result {
            ClientJson::Stream(s) => {
                // A verdict, and both ends' shares it rests on (`unknown` is a verdict too:
                // nothing showed the cause).
                assert!(s.limited_by.is_some(), "a verdict");
                assert!(
                    s.limits.client_waiting_pct.is_some() && s.limits.server_cpu_pct.is_some(),
                    "{:?}",
                    s.limits
                );
                assert!(s.server.time_split.total_us > 0.0);
                assert!(s.intervals.len() <= tsperf_lab::matrix::TIMELINE_MAX_SAMPLES);
            }
            ClientJson::Latency(l) => {
                if let Some(u) = &l.under_load {
                    assert!(u.count > 0 && u.stream_verified, "{u:?}");
                }
            }
            other => panic!("the seed's grid recorded a {} result", other.mode()),
        }
    }
    for load in ["none", "stdout"] {
        let row = format!("| binary | single | on | no | stream, log {load} |");
        assert!(md.contains(&row), "{row} missing:\n{md}");
    }
    assert!(md.contains("| limited by | server's time |"), "{md}");
    for svg in ["throughput.svg", "latency.svg", "timeline.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{svg} is not well-formed: {e}"));
    }
    let setup: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("setup.json")).unwrap()).unwrap();
    assert!(setup["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(!setup["machine"]["kernel"].as_str().unwrap().is_empty());
}

/// `matrix.sh --quick` runs all 18 stream cells and the latency cells, writes every
/// result file, and leaves nothing running.
#[test]
fn quick_grid_on_loopback() {
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = script(
        "matrix.sh",
        &[
            "--quick",
            "--out",
            out.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    let text = stdout(&o);
    assert!(
        text.contains("stream  chunk   102  blocking"),
        "no per-cell lines: {text}"
    );
    // A few lines of what it found, not the tables (they are in matrix.md).
    assert!(
        text.contains("stream: 18 cells, every one verified; fastest "),
        "{text}"
    );
    assert!(text.contains("latency: 16 cells; p50 from "), "{text}");
    assert!(
        !text.contains("## Stream: throughput"),
        "the tables printed: {text}"
    );
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(md.contains("## Stream: throughput"), "{md}");
    check_results(&out, 18, 16);
    assert_eq!(leftovers(), "", "left behind");
}

/// tsreport renders the same tables again from the raw runs. `--io` adds the
/// client's I/O strategy as a dimension (3 strategies x 2 io x 3 logs at one chunk size).
#[test]
fn tsreport_rerenders() {
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    test_file(dir.path(), "small.txt", 1 << 20);
    // Relative --out and --file are the caller's, not the repository's.
    let mut cmd = assert_cmd::Command::new(repo_root().join("scripts/matrix.sh"));
    cmd.current_dir(dir.path())
        .args([
            "--quick",
            "--chunks",
            "1024",
            "--io",
            "write,writev,sendfile",
        ])
        .args(["--out", "r", "--file", "small.txt", "--bin-dir", &bin_dir()])
        .timeout(DEADLINE * 3);
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let setup: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("setup.json")).unwrap()).unwrap();
    assert_eq!(setup["file"], "small.txt");
    assert_eq!(setup["bytes"], 1 << 20);
    let before = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    check_results(&out, 18, 16);
    for label in [
        "| blocking |",
        "| nonblocking writev |",
        "| blocking sendfile |",
    ] {
        assert!(before.contains(label), "{label} missing:\n{before}");
    }
    let runs = tsperf_lab::report::read_runs(&out.join("runs.jsonl")).unwrap();
    let strategies: Vec<Strategy> = runs
        .iter()
        .filter_map(|r| match &r.result {
            ClientJson::Stream(s) => Some(s.strategy),
            _ => None,
        })
        .collect();
    for s in [Strategy::Write, Strategy::Writev, Strategy::Sendfile] {
        assert_eq!(strategies.iter().filter(|x| **x == s).count(), 6, "{s}");
    }
    std::fs::remove_file(out.join("matrix.md")).unwrap();
    let tsreport = bin("tsserver").with_file_name("tsreport");
    let r = run(tsreport.clone(), &[out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(
        std::fs::read_to_string(out.join("matrix.md")).unwrap(),
        before
    );
    assert_eq!(stdout(&r), before);
    let missing = run(tsreport, &[dir.path().join("nope").to_str().unwrap()]);
    assert_fails(&missing, 1, "cannot read");
}

/// `tsreport --compare OLD NEW` puts two runs side by side (the committed grid
/// against itself: every ratio 1, none beyond noise) and writes compare.md and compare.svg
/// (its legend and a bar per cell); runs of another host pair are refused with the reason, and
/// a missing run names what it could not read.
#[test]
fn tsreport_compares_two_runs() {
    let tsreport = bin("tsserver").with_file_name("tsreport");
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let dir = tempfile::tempdir().unwrap();
    let r = results.to_str().unwrap();
    let out = run(
        tsreport.clone(),
        &["--compare", r, r, "--out", dir.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = std::fs::read_to_string(dir.path().join("compare.md")).unwrap();
    assert_eq!(stdout(&out), md);
    assert!(
        md.contains("cells differ beyond noise** (0 better, 0 worse)"),
        "{md}"
    );
    assert!(md.contains("| 1.000x |"), "{md}");
    let svg = std::fs::read_to_string(dir.path().join("compare.svg")).unwrap();
    assert!(
        svg.contains(&format!("{r} against {r}, cell by cell")) && svg.contains("times better"),
        "the caption names the runs, the axis what a ratio means: {svg}"
    );
    let lan = results.join("lan");
    let refused = run(tsreport.clone(), &["--compare", r, lan.to_str().unwrap()]);
    assert_fails(&refused, 1, "the runs were between different hosts");
    let nope = dir.path().join("nope");
    let missing = run(tsreport.clone(), &["--compare", r, nope.to_str().unwrap()]);
    assert_fails(&missing, 1, "cannot read");
    let usage = run(tsreport, &["--compare", r]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
}

/// Bad options are usage errors that name the option.
#[test]
fn matrix_usage_errors() {
    for (args, needle) in [
        (&["--reps", "0"][..], "invalid --reps '0'"),
        (&["--stdout-to", "tty"][..], "invalid --stdout-to 'tty'"),
        (&["--io", "write,mmap"][..], "invalid --io 'write,mmap'"),
        (&["--frobnicate"][..], "unknown option '--frobnicate'"),
        (&["--streams", "1,0"][..], "invalid --streams '1,0'"),
        (&["--streams", "129"][..], "invalid --streams '129'"),
        (&["--streams", "4,x"][..], "invalid --streams '4,x'"),
        (&["--host", "198.18.0.9", "--lan"][..], "cannot be combined"),
    ] {
        let o = script("matrix.sh", args);
        assert_fails(&o, 2, needle);
    }
    let o = script(
        "matrix.sh",
        &[
            "--bin-dir",
            &bin_dir(),
            "--file",
            "/nonexistent/file",
            "--quick",
        ],
    );
    assert_fails(&o, 1, "file '/nonexistent/file' not found");
}

/// The emulated LAN comes up, carries one verified transfer from one namespace to the
/// other, and goes away. Needs root (ignored unless asked for).
#[test]
#[ignore = "needs root: network namespaces (.ci/run runs it as root)"]
fn emulated_lan_transfer() {
    needs_namespaces();
    let name = format!("tsl{}", std::process::id() % 100_000);
    let up = script("lan.sh", &["up", "--name", &name]);
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
    let (srv, cli) = (format!("{name}-srv"), format!("{name}-cli"));
    let mut server = std::process::Command::new("ip")
        .args(["netns", "exec", &srv])
        .arg(bin("tsserver"))
        .args(["--bind", "198.18.0.1", "--port", "7433", "--once"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert_eq!(line.trim(), "tsserver: listening on 198.18.0.1:7433");
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "lan.txt", 8 << 20);
    let mut client = std::process::Command::new("ip");
    client
        .args(["netns", "exec", &cli])
        .arg(bin("tsclient"))
        .args(["--host", "198.18.0.1", "--json"])
        .arg(&file);
    let out = assert_cmd::Command::from_std(client)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let down = script("lan.sh", &["down", "--name", &name]);
    assert_eq!(down.status.code(), Some(0), "{}", stderr(&down));
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !stdout(&list).contains(&name),
        "namespaces left: {}",
        stdout(&list)
    );

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], true);
    assert_eq!(v["peer"], "198.18.0.1:7433");
    // tbf at 1 Gbit/s: a verified transfer cannot beat the wire.
    assert!(v["gbit_per_s"].as_f64().unwrap() < 1.05, "{v}");
}

/// `lan.sh` refuses bad input before touching the network.
#[test]
fn lan_usage_errors() {
    assert_fails(
        &script("lan.sh", &["sideways"]),
        2,
        "unknown command 'sideways'",
    );
    assert_fails(
        &script("lan.sh", &["up", "--name", "Bad_Name"]),
        2,
        "invalid name 'Bad_Name'",
    );
    assert_fails(
        &script("lan.sh", &["up", "--rate", "fast"]),
        2,
        "invalid rate 'fast'",
    );
    // verdicts.sh names the bad input too.
    assert_fails(
        &script("verdicts.sh", &["--reps", "0"]),
        2,
        "invalid --reps '0'",
    );
    assert_fails(
        &script("verdicts.sh", &["--sideways"]),
        2,
        "unknown option '--sideways'",
    );
    // Asking for help is not a usage error.
    for script_name in ["lan.sh", "matrix.sh", "peers.sh", "scale.sh", "verdicts.sh"] {
        let o = script(script_name, &["--help"]);
        assert_eq!(o.status.code(), Some(0), "{script_name}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(script_name),
            "{script_name}: {}",
            stdout(&o)
        );
    }
}

/// `peers.sh` and `scale.sh` take --bin-dir like matrix.sh, and name a missing binary.
#[test]
fn scripts_take_bin_dir() {
    for script_name in ["peers.sh", "scale.sh", "matrix.sh"] {
        let o = script(script_name, &["--bin-dir", "/nonexistent/bin"]);
        assert_fails(&o, 1, "'/nonexistent/bin/tsserver' not found");
    }
}

/// Waits (bounded) until a grid writing to `out` has measured a run, then sends Ctrl-C (SIGINT to
/// its process group, as a terminal does) and waits (bounded) for it to end.
fn ctrl_c_once_measuring(child: &mut std::process::Child, out: &Path) -> std::process::ExitStatus {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::metadata(out.join("runs.jsonl")).map_or(0, |m| m.len()) == 0 {
        assert!(std::time::Instant::now() < end, "the grid never measured");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's process group.
    assert_eq!(unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) }, 0);
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            std::time::Instant::now() < end,
            "the grid did not stop after SIGINT"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Ctrl-C (SIGINT to the script's process group) stops the grid with exit 130 and leaves no server or
/// tmux session behind.
#[test]
fn interrupted_grid_cleans_up() {
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    // The grid's temporary directories go under a TMPDIR of our own, which must be
    // empty again after the interrupt.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut child = Command::new(repo_root().join("scripts/matrix.sh"))
        .args([
            "--quick",
            "--out",
            out.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
        ])
        .env("TMPDIR", &tmp)
        // Its own process group, which the interrupt goes to, as a terminal's Ctrl-C does.
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = ctrl_c_once_measuring(&mut child, &out);
    assert_eq!(status.code(), Some(130));
    // Give killed servers a moment to be reaped, then check.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !leftovers().is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(leftovers(), "", "left behind after SIGINT");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        left.is_empty(),
        "temporary files left after SIGINT: {left:?}"
    );
}

/// `matrix.sh --quick --lan` runs across the emulated LAN, reports the fraction of the
/// line, and removes its namespaces. Needs root (ignored unless asked for).
#[test]
#[ignore = "needs root: network namespaces (.ci/run runs it as root)"]
fn quick_grid_on_emulated_lan() {
    needs_namespaces();
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lan");
    let o = script(
        "matrix.sh",
        &[
            "--quick",
            "--lan",
            "--chunks",
            "10240",
            "--out",
            out.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    check_results(&out, 6, 16);
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(
        md.contains("an emulated LAN") && md.contains("of 1 Gbit/s line"),
        "{md}"
    );
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !stdout(&list).contains("tsm"),
        "namespaces left: {}",
        stdout(&list)
    );
    assert_eq!(leftovers(), "", "left behind");
}

/// tsmatrix run by hand (no --work) removes its own temporary directory on Ctrl-C.
#[test]
fn interrupted_tsmatrix_removes_its_scratch() {
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let file = test_file(dir.path(), "g.txt", 4 << 20);
    let out = dir.path().join("r");
    let mut child = Command::new(bin("tsserver").with_file_name("tsmatrix"))
        .args(["--reps", "50", "--stdout-to", "file", "--chunks", "102"])
        .arg("--file")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .env("TMPDIR", &tmp)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = ctrl_c_once_measuring(&mut child, &out);
    assert_eq!(status.code(), Some(130));
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        left.is_empty(),
        "temporary files left after SIGINT: {left:?}"
    );
}

/// The two namespaces as two hosts. One `tsserver --allow-client-log` runs in the
/// far namespace (its stdout on a pseudo-terminal); `matrix.sh --quick --host` runs from the
/// other, with no server of its own. Every cell is verified, all three sinks are present, the
/// server said its stdout was a terminal, and every transfer's clock offset is within its error
/// bound of 0 (both namespaces share one kernel clock). Needs root (ignored unless asked for).
#[test]
#[ignore = "needs root: network namespaces (.ci/run runs it as root)"]
fn quick_grid_between_two_hosts() {
    needs_namespaces();
    let _grid = grid_lock();
    let name = format!("tsh{}", std::process::id() % 100_000);
    let up = script("lan.sh", &["up", "--name", &name]);
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("far.log");
    let bins = PathBuf::from(bin_dir());
    let wrap = ["ip", "netns", "exec", &format!("{name}-srv")].map(String::from);
    let server = tsperf_lab::harness::ServerProcess::start(&tsperf_lab::harness::ServerOptions {
        bin_dir: &bins,
        wrap: &wrap,
        args: [
            "--bind",
            "198.18.0.1:0",
            "--allow-client-log",
            "--log-file",
            log_file.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec(),
        stdout: tsperf_lab::harness::Sink::Pty {
            tmux_session: format!("{name}-far"),
        },
        stderr: Some(dir.path().join("far.err")),
    });
    let out = dir.path().join("two");
    let run = server.as_ref().map_err(|e| format!("{e:#}")).map(|s| {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &format!("{name}-cli")])
            .arg(repo_root().join("scripts/matrix.sh"))
            .args(["--quick", "--host", "198.18.0.1", "--port"])
            .arg(s.port.to_string())
            .arg("--out")
            .arg(&out)
            .args(["--bin-dir", &bin_dir()]);
        assert_cmd::Command::from_std(cmd)
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    });
    drop(server);
    let down = script("lan.sh", &["down", "--name", &name]);
    assert_eq!(down.status.code(), Some(0), "{}", stderr(&down));

    let o = run.unwrap_or_else(|e| panic!("the far server did not start: {e}"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    check_results(&out, 18, 16);
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    for sink in ["none", "file", "stdout"] {
        assert!(
            md.lines().any(|l| l.contains(&format!(" | {sink} | "))),
            "no {sink} rows:\n{md}"
        );
    }
    assert!(md.contains("; the server saw a terminal."), "{md}");
    assert!(md.contains("Clock offset, server minus client"), "{md}");
    let setup: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("setup.json")).unwrap()).unwrap();
    assert_eq!(setup["server_stdout"], "terminal");
    let runs = tsperf_lab::report::read_runs(&out.join("runs.jsonl")).unwrap();
    let mut measured = 0;
    for r in &runs {
        if let ClientJson::Stream(s) = &r.result {
            let (offset, err) = (s.clock.offset_us.unwrap(), s.clock.offset_err_us.unwrap());
            assert!(offset.abs() <= err + 0.001, "offset {offset} ± {err}");
            assert_eq!(
                s.peer,
                format!("198.18.0.1:{}", s.peer.rsplit(':').next().unwrap())
            );
            measured += 1;
        }
    }
    assert_eq!(measured, 18);
    // The file cells' lines are in the operator's file on the far host.
    let logged = std::fs::read_to_string(&log_file).unwrap();
    assert!(logged.lines().any(|l| l.contains(" seq=")), "{logged}");
}

/// `matrix.sh --host` against a server that does not let clients choose its log
/// sink stops before the first cell, saying how to start the server; nothing is measured.
#[test]
fn grid_against_a_server_without_client_log_stops_at_once() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = script(
        "matrix.sh",
        &[
            "--quick",
            "--host",
            "127.0.0.1",
            "--port",
            &server.port.to_string(),
            "--out",
            out_dir.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
        ],
    );
    assert_fails(&out, 1, "tsserver --allow-client-log");
    let runs = std::fs::read_to_string(out_dir.join("runs.jsonl")).unwrap_or_default();
    assert!(runs.is_empty(), "cells ran before the check: {runs}");
}

/// `matrix.sh --quick` without `--out` writes to the scratch directory
/// results/tmp/quick, never over the committed results/; a full run (and any `--out`) writes
/// where it says. The scripts run from a copy of the repository's scripts/ with a stand-in
/// tsmatrix that records its arguments, so nothing is measured and the checkout is untouched.
#[test]
fn quick_grid_writes_to_scratch() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let bins = dir.path().join("bin");
    std::fs::create_dir_all(repo.join("scripts")).unwrap();
    std::fs::create_dir_all(repo.join("testdata")).unwrap();
    std::fs::create_dir_all(&bins).unwrap();
    for f in ["matrix.sh", "common.sh"] {
        std::fs::copy(
            repo_root().join("scripts").join(f),
            repo.join("scripts").join(f),
        )
        .unwrap();
    }
    for b in ["tsserver", "tsclient", "tsgen"] {
        std::os::unix::fs::symlink(bin("tsserver").with_file_name(b), bins.join(b)).unwrap();
    }
    let args_file = dir.path().join("args");
    let fake = bins.join("tsmatrix");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n",
            args_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out_of = |args: &[&str]| {
        let o = assert_cmd::Command::new(repo.join("scripts/matrix.sh"))
            .current_dir(dir.path())
            .args(args)
            .args(["--bin-dir", bins.to_str().unwrap(), "--file", "f.txt"])
            .timeout(DEADLINE)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let recorded = std::fs::read_to_string(&args_file).unwrap();
        let mut lines = recorded.lines();
        lines.find(|l| *l == "--out").expect("an --out");
        lines.next().unwrap().to_owned()
    };
    test_file(dir.path(), "f.txt", 1000);
    assert_eq!(out_of(&["--quick"]), "results/tmp/quick");
    assert!(repo.join("results/tmp/quick").is_dir());
    assert!(!repo.join("results/matrix.md").exists());
    assert_eq!(out_of(&[]), "results");
    let mine = dir.path().join("mine");
    assert_eq!(
        out_of(&["--quick", "--out", "mine"]),
        mine.display().to_string()
    );
}

/// `matrix.sh --streams 1,2 --reverse` adds the dimensions: forward sessions of
/// two streams and reverse runs of one and two, each cell recorded with its direction and
/// streams, every repetition verified, and a streams table beside the seed's.
#[test]
fn grid_with_streams_and_reverse() {
    let _grid = grid_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = script(
        "matrix.sh",
        &[
            "--quick",
            "--chunks",
            "1024",
            "--streams",
            "1,2",
            "--reverse",
            "--stdout-to",
            "file",
            "--out",
            out.to_str().unwrap(),
            "--bin-dir",
            &bin_dir(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let runs = tsperf_lab::folder::read_runs(&out.join("runs.jsonl")).unwrap();
    let mut seen = Vec::new();
    for r in &runs {
        use tsperf_results::runs::Cell;
        let (streams, reverse, log) = match &r.cell {
            Cell::Stream { log, .. } => (1, false, log.clone()),
            Cell::Streams {
                streams,
                reverse,
                log,
                ..
            } => (*streams, *reverse, log.clone()),
            Cell::Latency { .. } => continue,
        };
        let verified = match (&r.result, streams, reverse) {
            (ClientJson::Stream(s), 1, false) => s.verified,
            (ClientJson::Parallel(p), 2, false) => p.sum.verified && p.forward_streams().len() == 2,
            (ClientJson::Reverse(v), 1, true) => {
                v.verified
                    && v.client
                        .receiver
                        .log
                        .is_some_and(|l| l.to_string() == log.as_str())
            }
            (ClientJson::ParallelReverse(p), 2, true) => {
                let each = p.reverse_streams();
                p.sum.verified && each.len() == 2 && each.iter().all(|v| v.verified)
            }
            (other, ..) => panic!("cell {:?} recorded a {} result", r.cell, other.mode()),
        };
        assert!(verified, "{:?} not verified", r.cell);
        seen.push((streams, reverse, log));
    }
    // Forward: 2 io x 3 sinks per stream count; reverse: 2 io x the client's none and file.
    for (streams, reverse, cells) in [(1, false, 6), (2, false, 6), (1, true, 4), (2, true, 4)] {
        let n = seen
            .iter()
            .filter(|(s, r, _)| (*s, *r) == (streams, reverse))
            .count();
        assert_eq!(n, cells, "{streams} streams, reverse {reverse}: {seen:?}");
    }
    assert!(!seen.iter().any(|(_, r, log)| *r && log == "stdout"));
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    let table = md
        .split("## Streams and directions")
        .nth(1)
        .expect("a streams table")
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    // A header and 20 rows, every one verified.
    assert_eq!(rows.len(), 21, "{table}");
    assert!(rows[1..].iter().all(|l| l.ends_with(" | yes |")), "{table}");
    assert!(
        rows.iter()
            .any(|l| l.starts_with("| reverse | 2 | 1024 | nonblocking | file |")),
        "{table}"
    );
    let csv = std::fs::read_to_string(out.join("matrix.csv")).unwrap();
    assert_eq!(
        csv.lines().filter(|l| l.ends_with(",2,reverse")).count(),
        4,
        "{csv}"
    );
    assert_eq!(leftovers(), "", "left behind");
}
