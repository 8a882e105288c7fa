//! `tsverdicts --render` on a results folder it did not write: every number at its edge,
//! special files in place of its inputs, a symlink planted where it writes. A clear error or a
//! table, never a panic, a hang, or a write outside the folder.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use tsperf_lab::report::hostile::{edges, with_numbers};

use crate::common::*;

/// The committed results: the verdicts and the machine they came from.
fn committed() -> PathBuf {
    repo_root().join("results")
}

/// Runs `tsverdicts --render DIR`, killed after 20 s (a hang is a failure, not a wait).
fn render(dir: &Path) -> Output {
    let args = ["--render", dir.to_str().unwrap()];
    run_within(&bin("tsverdicts"), &args, Duration::from_secs(20))
}

/// A copy of the committed verdicts and their machine, in `dir`.
fn verdicts_folder(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for name in ["verdicts.jsonl", "verdicts-machine.json"] {
        std::fs::copy(committed().join(name), dir.join(name)).unwrap();
    }
}

/// Every number of the verdicts' runs at 0, negative, 5e-324, 1.7e308 or the integers' ends
/// gets a table or a clear error.
#[test]
fn verdicts_at_every_edge_get_a_table_or_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = std::fs::read_to_string(committed().join("verdicts.jsonl")).unwrap();
    for (name, float, int) in edges() {
        let dir = tmp.path().join(name);
        verdicts_folder(&dir);
        let hostile = with_numbers(&runs, float, int.as_ref());
        std::fs::write(dir.join("verdicts.jsonl"), hostile).unwrap();
        ends_well(&render(&dir), "tsverdicts", name);
    }
}

/// An input that is not a regular file (a symlink to `/dev/zero`, a FIFO with no writer, a
/// directory) is refused at once, naming the file and what was expected.
#[test]
fn special_files_in_place_of_its_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for input in ["verdicts.jsonl", "verdicts-machine.json"] {
        for kind in 0..3 {
            let dir = tmp.path().join(format!("{input}-{kind}"));
            verdicts_folder(&dir);
            let at = dir.join(input);
            std::fs::remove_file(&at).unwrap();
            make_special(&at, kind);
            let out = render(&dir);
            assert_fails(&out, 1, input);
            assert!(
                stderr(&out).contains("not a regular file"),
                "{input} as {kind}: {}",
                stderr(&out)
            );
        }
    }
}

/// A symlink planted at `verdicts.md` is replaced, never written through: the file it pointed
/// at is untouched.
#[test]
fn a_planted_symlink_is_replaced_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    let dir = tmp.path().join("verdicts");
    verdicts_folder(&dir);
    let link = dir.join("verdicts.md");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = render(&dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("verdict"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
}
