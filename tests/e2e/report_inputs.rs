//! `tsreport` on a results folder it did not write: every number at its edge, special files in
//! place of its inputs, symlinks planted where it writes. A clear error or a sensible table,
//! never a panic, a hang, or a write outside the folder (issue 51: 3-6).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

fn tsreport() -> PathBuf {
    bin("tsserver").with_file_name("tsreport")
}

/// The committed results: a grid run, its verdicts and the machine they came from.
fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results")
}

/// Runs tsreport with `args`, killed after `limit` (a hang is a failure, not a wait).
fn report(args: &[&str], limit: Duration) -> Output {
    let mut cmd = assert_cmd::Command::new(tsreport());
    cmd.args(args).timeout(limit);
    let out = cmd.output().expect("run tsreport");
    assert!(
        out.status.code().is_some(),
        "tsreport {args:?} was killed (a hang past {limit:?}, or a signal); stderr: {}",
        stderr(&out)
    );
    out
}

/// Ends well: a table (exit 0), or a clear error (exit 1, one `tsreport:` line naming what it
/// could not take), never a panic (101) or a usage error for a good command line.
fn ends_well(out: &Output, what: &str) {
    let code = out.status.code();
    let err = stderr(out);
    assert!(
        code == Some(0) || (code == Some(1) && err.starts_with("tsreport: ")),
        "{what}: exit {code:?}, stderr: {err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// `text`, a JSON-lines file, with every fractional number set to `float` and every integer
/// to `int` (`None`: left as it was).
fn with_numbers(text: &str, float: Option<f64>, int: Option<&Value>) -> String {
    fn walk(v: &mut Value, float: Option<f64>, int: Option<&Value>) {
        match v {
            Value::Number(n) if n.is_f64() => {
                if let Some(f) = float {
                    *v = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
                }
            }
            Value::Number(_) => {
                if let Some(i) = int {
                    *v = i.clone();
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, float, int)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, float, int)),
            _ => {}
        }
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            walk(&mut v, float, int);
            serde_json::to_string(&v).unwrap() + "\n"
        })
        .collect()
}

/// The edges numbers are set to: every fraction at 0, negative, the smallest and the largest
/// double (the integers as they were, so the runs still parse), and every integer at 0 and at
/// its largest.
fn edges() -> Vec<(&'static str, Option<f64>, Option<Value>)> {
    vec![
        ("zero", Some(0.0), None),
        ("negative", Some(-1.5), None),
        ("tiny", Some(5e-324), None),
        ("huge", Some(1.7e308), None),
        ("negative-huge", Some(-1.7e308), None),
        ("integers-zero", None, Some(Value::from(0))),
        ("integers-max", None, Some(Value::from(u64::MAX))),
        ("all-zero", Some(0.0), Some(Value::from(0))),
    ]
}

/// A copy of the committed grid run with its numbers at an edge ([`with_numbers`]), in `dir`.
fn hostile_grid(dir: &Path, float: Option<f64>, int: Option<&Value>) {
    std::fs::create_dir_all(dir).unwrap();
    let runs = std::fs::read_to_string(committed().join("runs.jsonl")).unwrap();
    std::fs::write(dir.join("runs.jsonl"), with_numbers(&runs, float, int)).unwrap();
    std::fs::copy(committed().join("setup.json"), dir.join("setup.json")).unwrap();
}

/// The committed verdicts and their machine, copied into `dir`.
fn with_verdicts(dir: &Path) {
    for name in ["verdicts.jsonl", "verdicts-machine.json"] {
        std::fs::copy(committed().join(name), dir.join(name)).unwrap();
    }
}

/// Issue 51 (3, 4): every number of a grid run at 0, negative, 5e-324 or 1.7e308 (valid JSON)
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
        ends_well(&report(&[d], limit), name);
        let out = tmp.path().join(format!("{name}-compare"));
        let o = out.to_str().unwrap();
        for (old, new) in [(good, d), (d, good), (d, d)] {
            let r = report(&["--compare", old, new, "--out", o], limit);
            ends_well(&r, &format!("{name}: --compare {old} {new}"));
        }
    }
}

/// Issue 51 (4): the verdicts' truth table takes every number at its edge too.
#[test]
fn verdicts_at_every_edge_get_a_table_or_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = std::fs::read_to_string(committed().join("verdicts.jsonl")).unwrap();
    for (name, float, int) in edges() {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("verdicts.jsonl"),
            with_numbers(&runs, float, int.as_ref()),
        )
        .unwrap();
        std::fs::copy(
            committed().join("verdicts-machine.json"),
            dir.join("verdicts-machine.json"),
        )
        .unwrap();
        let d = dir.to_str().unwrap();
        ends_well(&report(&["--verdicts", d], Duration::from_secs(20)), name);
    }
}

/// Issue 51 (5): an input that is not a regular file (a symlink to `/dev/zero`, which grew
/// tsreport's memory without bound; a FIFO with no writer, which blocked it for ever; a
/// directory) is refused at once, naming the file and what was expected.
#[test]
fn special_files_in_place_of_its_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs: [(&str, &[&str]); 4] = [
        ("runs.jsonl", &[]),
        ("setup.json", &[]),
        ("verdicts.jsonl", &["--verdicts"]),
        ("verdicts-machine.json", &["--verdicts"]),
    ];
    for (n, (input, flags)) in inputs.into_iter().enumerate() {
        for (kind, make) in [
            ("zero", 0u8), // a symlink to /dev/zero
            ("fifo", 1),   // a FIFO with no writer
            ("dir", 2),    // a directory
        ] {
            let dir = tmp.path().join(format!("{n}-{kind}"));
            hostile_grid(&dir, None, None);
            with_verdicts(&dir);
            let at = dir.join(input);
            std::fs::remove_file(&at).unwrap();
            match make {
                0 => std::os::unix::fs::symlink("/dev/zero", &at).unwrap(),
                1 => {
                    let c = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
                    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                _ => std::fs::create_dir(&at).unwrap(),
            }
            let mut args = flags.to_vec();
            args.push(dir.to_str().unwrap());
            let out = report(&args, Duration::from_secs(20));
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

/// Issue 51 (6): a symlink planted where tsreport writes (`compare.md`, `compare.svg`,
/// `verdicts.md`, `matrix.md`) is replaced, never written through: the file it pointed at is
/// untouched.
#[test]
fn planted_symlinks_are_replaced_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    let dir = tmp.path().join("grid");
    hostile_grid(&dir, None, None);
    with_verdicts(&dir);
    let d = dir.to_str().unwrap();
    let good = committed();
    let g = good.to_str().unwrap();
    let cases: [(&str, Vec<&str>); 4] = [
        ("compare.md", vec!["--compare", g, g, "--out", d]),
        ("compare.svg", vec!["--compare", g, g, "--out", d]),
        ("verdicts.md", vec!["--verdicts", d]),
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
