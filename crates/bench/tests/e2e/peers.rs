//! tspeers end to end: tsperf beside a stand-in iperf3 (on PATH, logging its arguments and
//! printing the JSON shape tspeers reads), with the real tsserver and tsclient; its report, its
//! `--streams` and `--steady` tables, and the flags it refuses.

use std::path::Path;

use crate::common::*;

/// tspeers names a file it cannot read.
#[test]
fn tspeers_missing_file_named() {
    let o = run(
        bin("tspeers"),
        &[
            "--file",
            "/nonexistent/peers-file",
            "--tsperf-port",
            "1",
            "--iperf3-port",
            "2",
            "--out",
            "/nonexistent/out",
        ],
    );
    assert_fails(&o, 1, "cannot read file '/nonexistent/peers-file'");
}

/// tspeers starts its own tsserver when no --tsperf-port is given (its port read
/// from the listening line by the one parser, the harness's) and writes peers.md and
/// peers.svg into --out through the exporters. iperf3 here is a stand-in on PATH that prints
/// the JSON shape tspeers reads: the receiver counted 1000 bytes fewer than the file.
#[test]
fn tspeers_starts_its_own_server_and_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let len = 200_000u64;
    let file = test_file(dir.path(), "p.txt", len);
    let json = format!(
        r#"{{"end":{{"sum_received":{{"bits_per_second":8388608000,"bytes":{}}}}}}}"#,
        len - 1000
    );
    let (path, _) = stand_in_iperf3(dir.path(), &json);
    let out_dir = dir.path().join("out");
    let out = assert_cmd::Command::new(bin("tspeers"))
        .args([
            "--file",
            file.to_str().unwrap(),
            "--chunks",
            "10240,102400",
            "--reps",
            "1",
        ])
        .args(["--iperf3-port", "1", "--out", out_dir.to_str().unwrap()])
        .env("PATH", path)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = std::fs::read_to_string(out_dir.join("peers.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| 10240 |"))
        .unwrap_or_else(|| panic!("no 10240 row in {md}"));
    // 8388608000 bit/s is 1000 MiB/s; tsperf verified; the shortfall named; the verified
    // floor (the file's bytes looped with xxh3 on both ends) measured beside the bare one.
    assert!(row.contains("| 1000.0 |"), "{row}");
    assert!(md.contains("| verified floor MiB/s |"), "{md}");
    // At 102400 B a hashed block (two chunks) is more than the file holds: the verified
    // floor loops one block of it instead, and still runs.
    for chunk in ["10240", "102400"] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {chunk} |")))
            .unwrap_or_else(|| panic!("no {chunk} row in {md}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let verified_floor: f64 = cells[3].parse().unwrap_or_else(|_| panic!("{row}"));
        assert!(verified_floor > 0.0, "{row}");
    }
    assert!(
        row.contains("| yes | **199000 of 200000** (99.5%) |"),
        "{row}"
    );
    let svg = std::fs::read_to_string(out_dir.join("peers.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("iperf3 -F"),
        "{svg:.200}"
    );
    assert_eq!(stdout(&out).matches("# tsperf against iperf3").count(), 1);
}

/// Runs `tspeers --streams 1,2` with the stand-in iperf3 in `dir` on PATH (it logs its
/// arguments and prints the JSON shape tspeers reads: 1 Gbit/s received) and `extra` flags.
fn tspeers_streams(dir: &Path, extra: &[&str]) -> (std::process::Output, String, String) {
    let file = test_file(dir, "s.txt", 1 << 20);
    let (path, log) = stand_in_iperf3(
        dir,
        r#"{"end":{"sum_received":{"bits_per_second":1000000000}}}"#,
    );
    let out_dir = dir.join("out");
    let out = assert_cmd::Command::new(bin("tspeers"))
        .args(["--file", file.to_str().unwrap(), "--streams", "1,2"])
        .args(["--time", "0.3", "--reps", "1", "--iperf3-port", "5201"])
        .args(["--out", out_dir.to_str().unwrap()])
        .args(extra)
        .env("PATH", path)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let md = std::fs::read_to_string(out_dir.join("streams.md")).unwrap_or_default();
    (out, md, std::fs::read_to_string(log).unwrap_or_default())
}

/// `tspeers --streams` runs tsperf -P N and -R -P N (verified) beside iperf3 with
/// the same -t, -P and -R, on loopback.
#[test]
fn tspeers_streams_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let (out, md, args) = tspeers_streams(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.ends_with(" | yes |"))
        .collect();
    assert_eq!(rows.len(), 4, "{md}");
    assert!(md.contains("\n\nLoopback on "), "{md}");
    assert!(
        args.contains("-c 127.0.0.1 -p 5201 -J -t 0.3 -P 2 -R"),
        "{args}"
    );
}

/// Given --host and the two wraps, `tspeers --streams` runs across the emulated
/// LAN: the server in one namespace, both clients in the other.
#[test]
#[ignore = "needs root: network namespaces (.ci/run runs it as root)"]
fn tspeers_streams_on_the_emulated_lan() {
    needs_namespaces();
    let name = format!("tss{}", std::process::id() % 100_000);
    let up = script("lan.sh", &["up", "--name", &name]);
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
    let lan = tempfile::tempdir().unwrap();
    let (srv, cli) = (
        format!("ip netns exec {name}-srv"),
        format!("ip netns exec {name}-cli"),
    );
    let (out, md, args) = tspeers_streams(
        lan.path(),
        &[
            "--host",
            "198.18.0.1",
            "--server-wrap",
            &srv,
            "--client-wrap",
            &cli,
            "--network",
            "An emulated LAN",
        ],
    );
    let down = script("lan.sh", &["down", "--name", &name]);
    assert_eq!(down.status.code(), Some(0), "{}", stderr(&down));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.ends_with(" | yes |"))
        .collect();
    assert_eq!(rows.len(), 4, "{md}");
    assert!(md.contains("\n\nAn emulated LAN on "), "{md}");
    assert!(
        args.contains("-c 198.18.0.1 -p 5201 -J -t 0.3 -P 1"),
        "{args}"
    );
    // tbf at 1 Gbit/s: no verified tsperf session beats the wire.
    for row in rows {
        let gbit: f64 = row.split(" | ").nth(2).unwrap().parse().unwrap();
        assert!(gbit > 0.0 && gbit < 1.05, "{row}");
    }
}

/// The per-chunk comparison runs on loopback: --host without --streams is refused.
#[test]
fn tspeers_host_needs_streams() {
    let o = run(
        bin("tspeers"),
        &[
            "--iperf3-port",
            "1",
            "--host",
            "198.18.0.1",
            "--file",
            "Cargo.toml",
        ],
    );
    assert_fails(
        &o,
        1,
        "--host, --server-wrap and --client-wrap apply to --streams",
    );
}
/// Every cell runs both tools with the same write size and length, tsperf verified; the
/// table and the raw JSON carry CPU per GiB on each end, measured from outside.
#[test]
fn tspeers_steady_runs_every_cell_with_cpu_on_each_end() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "big.bin", 1 << 20);
    let (path, log) = stand_in_iperf3(
        dir.path(),
        r#"{"end":{"sum_received":{"bits_per_second":8388608000,"bytes":1048576}}}"#,
    );
    let out_dir = dir.path().join("out");
    // The stand-in has no server: this test process stands in for its pid.
    let out = assert_cmd::Command::new(bin("tspeers"))
        .args(["--steady", "--file", file.to_str().unwrap(), "--reps", "1"])
        .args(["--iperf3-port", "5201", "--iperf3-pid"])
        .arg(std::process::id().to_string())
        .args(["--out", out_dir.to_str().unwrap()])
        .env("PATH", path)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = std::fs::read_to_string(out_dir.join("steady.md")).unwrap();
    let rows: Vec<&str> = md.lines().filter(|l| l.ends_with(" | all |")).collect();
    assert_eq!(rows.len(), 26, "{md}");
    assert!(md.contains("| memory -P 2, one buffer | 128 KiB |"), "{md}");
    assert!(md.contains("| memory -R, one buffer | 1 KiB |"), "{md}");
    assert!(md.contains("| memory, one buffer | 128 KiB |"), "{md}");
    assert!(
        md.contains("| memory, one buffer, -C cubic | 128 KiB |"),
        "{md}"
    );
    assert!(md.contains("## Pacing timers"), "{md}");
    assert!(md.contains("## The machine's limit"), "{md}");
    let args = std::fs::read_to_string(log).unwrap();
    for want in [
        "-c 127.0.0.1 -p 5201 -J -l 1024 -n 1048576",
        "-R -l 65536 -n 1048576",
        "-P 2 -l 10240 -n 1048576",
        "-Z -l 131072 -n 1048576",
        "-l 10240 -F ",
        "-C cubic -l 131072 -n 1048576",
    ] {
        assert!(args.contains(want), "{want} not in {args}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("steady.json")).unwrap()).unwrap();
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 26);
    let mut client_cpu = 0.0;
    for c in cells {
        let ts = &c["tsperf"][0];
        assert_eq!(ts["bytes"], 1 << 20, "{c}");
        assert_eq!(ts["verified"], true, "{c}");
        client_cpu += ts["client_cpu_s"].as_f64().unwrap();
    }
    assert!(client_cpu > 0.0, "no client CPU measured: {json}");
}

/// --steady needs the iperf3 server's pid, to read its CPU.
#[test]
fn tspeers_steady_needs_the_iperf3_pid() {
    let o = run(
        bin("tspeers"),
        &["--steady", "--iperf3-port", "1", "--file", "Cargo.toml"],
    );
    assert_fails(&o, 1, "--steady needs --iperf3-pid");
}
