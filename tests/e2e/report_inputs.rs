//! `tsreport` on a results folder it did not write: every number at its edge, special files in
//! place of its inputs, symlinks planted where it writes. A clear error or a sensible table,
//! never a panic, a hang, or a write outside the folder (3-6).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use tsperf_lab::report::hostile::{edges, with_numbers};

fn tsreport() -> PathBuf {
    bin("tsserver").with_file_name("tsreport")
}

/// The committed results: a grid run and the machine it came from.
fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results")
}

/// Runs tsreport with `args`, killed after `limit` (a hang is a failure, not a wait).
fn report(args: &[&str], limit: Duration) -> Output {
    run_within(&tsreport(), args, limit)
}

/// A copy of the committed grid run with its numbers at an edge ([`with_numbers`]), in `dir`.
fn hostile_grid(dir: &Path, float: Option<f64>, int: Option<&Value>) {
    std::fs::create_dir_all(dir).unwrap();
    let runs = std::fs::read_to_string(committed().join("runs.jsonl")).unwrap();
    std::fs::write(dir.join("runs.jsonl"), with_numbers(&runs, float, int)).unwrap();
    std::fs::copy(committed().join("setup.json"), dir.join("setup.json")).unwrap();
}

/// Every number of a grid run at 0, negative, 5e-324 or 1.7e308 (valid JSON)
/// gets a table or a clear error from `tsreport DIR` and from `--compare` either way round. A
/// rate of 1.7e308 or 5e-324 made the log axis ~2^31 ticks long (a hang, memory growing);
/// an old cell of 0 an infinite ratio, the same; a negative or huge round trip a panic.
#[test]
fn every_number_at_its_edge_gets_a_table_or_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let good = committed();
    let good = good.to_str().unwrap();
    for (name, float, int) in edges() {
        let dir = tmp.path().join(name);
        hostile_grid(&dir, float, int.as_ref());
        let d = dir.to_str().unwrap();
        let limit = Duration::from_secs(20);
        ends_well(&report(&[d], limit), "tsreport", name);
        let out = tmp.path().join(format!("{name}-compare"));
        let o = out.to_str().unwrap();
        for (old, new) in [(good, d), (d, good), (d, d)] {
            let r = report(&["--compare", old, new, "--out", o], limit);
            ends_well(&r, "tsreport", &format!("{name}: --compare {old} {new}"));
        }
    }
}

/// An input that is not a regular file (a symlink to `/dev/zero`, which grew
/// tsreport's memory without bound; a FIFO with no writer, which blocked it for ever; a
/// directory) is refused at once, naming the file and what was expected.
#[test]
fn special_files_in_place_of_its_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (n, input) in ["runs.jsonl", "setup.json"].into_iter().enumerate() {
        for (kind, make) in [
            ("zero", 0u8), // a symlink to /dev/zero
            ("fifo", 1),   // a FIFO with no writer
            ("dir", 2),    // a directory
        ] {
            let dir = tmp.path().join(format!("{n}-{kind}"));
            hostile_grid(&dir, None, None);
            let at = dir.join(input);
            std::fs::remove_file(&at).unwrap();
            make_special(&at, make);
            let out = report(&[dir.to_str().unwrap()], Duration::from_secs(20));
            assert_fails(&out, 1, input);
            assert!(
                stderr(&out).contains("not a regular file"),
                "{input} as {kind}: {}",
                stderr(&out)
            );
            if input == "runs.jsonl" && kind != "dir" {
                // --compare reads the same way.
                let good = committed();
                let args = ["--compare", good.to_str().unwrap(), dir.to_str().unwrap()];
                let out = report(&args, Duration::from_secs(20));
                assert_fails(&out, 1, "not a regular file");
            }
        }
    }
}

/// A symlink planted where tsreport writes (`compare.md`, `compare.svg`,
/// `matrix.md`) is replaced, never written through: the file it pointed at is
/// untouched.
#[test]
fn planted_symlinks_are_replaced_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    let dir = tmp.path().join("grid");
    hostile_grid(&dir, None, None);
    let d = dir.to_str().unwrap();
    let good = committed();
    let g = good.to_str().unwrap();
    let cases: [(&str, Vec<&str>); 3] = [
        ("compare.md", vec!["--compare", g, g, "--out", d]),
        ("compare.svg", vec!["--compare", g, g, "--out", d]),
        ("matrix.md", vec![d]),
    ];
    for (file, args) in cases {
        std::fs::write(&victim, "keep me\n").unwrap();
        let link = dir.join(file);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let out = report(&args, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep me\n",
            "{file} was written through its symlink"
        );
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert!(meta.is_file(), "{file} is a file of the folder's own now");
    }
}
