//! Issue 25: the verdict checked against limits made on purpose. `scripts/verdicts.sh --quick`
//! makes each limit of the fast subset (a send buffer below one write, a slow log reader, and,
//! as root, CPU quotas on either end and a 100 Mbit link between two namespaces) and every run
//! must be named rightly. Without root the script skips those cases, saying so.

use std::path::PathBuf;

use crate::common::*;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/verdicts.sh")
}

#[test]
fn made_limits_are_named_rightly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v");
    let bins = bin("tsserver").parent().unwrap().display().to_string();
    let o = run(
        script(),
        &[
            "--quick",
            "--bin-dir",
            &bins,
            "--out",
            out.to_str().unwrap(),
            "--only",
            "sndbuf-1,log-stdout,server-quota,client-quota,lan-100mbit",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let runs = tsperf_lab::verdicts::read(&out.join("verdicts.jsonl")).unwrap();
    let mut want = vec!["sndbuf-1", "log-stdout"];
    let root = unsafe { libc::geteuid() } == 0;
    if root && std::path::Path::new("/sys/fs/cgroup/cpu").is_dir() {
        want.extend(["server-quota", "client-quota"]);
    }
    if root {
        want.push("lan-100mbit");
    }
    for case in &want {
        let r: Vec<_> = runs.iter().filter(|r| r.case == *case).collect();
        assert_eq!(r.len(), 1, "{case}: one run with --quick\n{}", stderr(&o));
        assert!(
            r[0].right(),
            "{case}: expected {}, said {}: {}",
            r[0].expect,
            r[0].verdict(),
            r[0].result["limits"]
        );
        assert_eq!(r[0].result["verified"], true, "{case}");
    }
    let md = std::fs::read_to_string(out.join("verdicts.md")).unwrap();
    let n = want.len();
    assert!(
        md.contains(&format!("**{n} of {n} cases named rightly")),
        "{md}"
    );
    if !root {
        assert!(stderr(&o).contains("skipped"), "{}", stderr(&o));
    }
}
