//! Many clients at once: tsscale and scripts/scale.sh end to end, every transfer
//! verified, tables, raw JSON and chart written; bad input refused.

use crate::common::*;

/// Runs `tsscale` once (`--reps 1`) on `file` into `out` with `extra`, which must succeed; the
/// rows of its scale.json.
fn tsscale(file: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--file",
        file.to_str().unwrap(),
        "--reps",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(bin("tsscale"), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(out.join("scale.json")).unwrap()).unwrap()
}

/// Both server models at 1 and 8 clients: a row each, every byte of every client counted, the
/// server's RSS and CPU read, the chart well-formed.
#[test]
fn tsscale_writes_table_json_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "s.txt", 300_000);
    let out_dir = dir.path().join("out");
    let rows = tsscale(&file, &out_dir, &["--counts", "1,8"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in rows {
        let clients = r["clients"].as_u64().unwrap();
        assert_eq!(r["bytes"], clients * 300_000, "{r}");
        assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let (base, peak) = (
            r["base_rss_kib"].as_u64().unwrap(),
            r["peak_rss_kib"].as_u64().unwrap(),
        );
        assert!(base > 0 && peak >= base, "{r}");
        // The server's CPU is the kernel's account at reap, not 10 ms ticks that read
        // 0 for small runs; the load generator's own CPU is beside it.
        assert!(r["server_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["generator_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let md = std::fs::read_to_string(out_dir.join("scale.md")).unwrap();
    assert!(
        md.contains("| event-loop | 8 |") && md.contains("| blocking | 1 |"),
        "{md}"
    );
    assert!(md.contains("- event-loop: at 8 clients"), "{md}");
    assert!(
        md.contains("| server CPU ms | CPU ns per byte | load generator CPU s |"),
        "{md}"
    );
    let svg = std::fs::read_to_string(out_dir.join("scale.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    assert!(
        doc.descendants()
            .any(|n| n.text().map(str::trim) == Some("event-loop"))
    );
}

/// The script runs the given binaries (no build inside a test) and writes its results where
/// --out says.
#[test]
fn scale_script_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        repo_root().join("scripts/scale.sh"),
        &[
            "--counts",
            "2",
            "--reps",
            "1",
            "--out",
            dir.path().to_str().unwrap(),
            "--bin-dir",
            bin("tsserver").parent().unwrap().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for f in ["scale.md", "scale.json", "scale.svg"] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    let out = run(repo_root().join("scripts/scale.sh"), &["--bogus"]);
    assert_fails(&out, 2, "unknown option '--bogus'");
}

/// Bad counts, models and files are refused with a message naming them.
#[test]
fn bad_input_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "s.txt", 1000);
    let f = file.to_str().unwrap();
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap();
    let out = run(bin("tsscale"), &["--file", f, "--counts", "0", "--out", o]);
    assert_fails(&out, 2, "'--counts <COUNTS>'");
    let out = run(
        bin("tsscale"),
        &["--file", f, "--models", "threads", "--out", o],
    );
    assert_fails(&out, 2, "'threads'");
    let missing = dir.path().join("nope.txt");
    let out = run(
        bin("tsscale"),
        &["--file", missing.to_str().unwrap(), "--out", o],
    );
    assert_fails(&out, 1, "nope.txt");
    assert!(!out_dir.exists());
    let out = run(
        bin("tsscale"),
        &["--file", f, "--generator-threads", "0", "--out", o],
    );
    assert_fails(&out, 2, "'--generator-threads <N>'");
    let empty = test_file(dir.path(), "empty.txt", 0);
    let out = run(
        bin("tsscale"),
        &[
            "--file",
            empty.to_str().unwrap(),
            "--counts",
            "1",
            "--out",
            o,
        ],
    );
    assert_fails(&out, 1, "empty.txt' is empty");
    assert!(!out_dir.exists());
}

/// More clients than the generator opens at once, from two generator threads, against
/// the real event-loop server: every transfer verified, and the table names the generator.
#[test]
fn the_event_driven_generator_verifies_every_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "s.txt", 100_000);
    let out_dir = dir.path().join("out");
    let rows = tsscale(
        &file,
        &out_dir,
        &[
            "--counts",
            "300",
            "--models",
            "event-loop",
            "--generator-threads",
            "2",
        ],
    );
    assert_eq!(rows[0]["clients"], 300, "{rows}");
    assert_eq!(rows[0]["bytes"], 300 * 100_000, "{rows}");
    let md = std::fs::read_to_string(out_dir.join("scale.md")).unwrap();
    assert!(
        md.contains("event-driven load generator (2 threads"),
        "{md}"
    );
}
