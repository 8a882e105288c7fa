//! Issue 16 (5): the systemd unit example in docs/ is valid and starts a server that listens.

use crate::common::*;

/// `systemd-analyze verify` finds nothing to say about docs/tsserver.service (with its
/// ExecStart pointed at the built binary), and the flags of its ExecStart start a tsserver.
/// Skipped, with a message, where systemd-analyze is not installed.
#[test]
fn systemd_unit_verifies() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/tsserver.service"
    ))
    .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/tsserver"));
    let flags: Vec<&str> = words.collect();
    let mut cmd = std::process::Command::new(bin("tsserver"));
    cmd.args(&flags)
        .args(["--bind", "127.0.0.1", "--port", "0"]);
    let server = Server::spawn(cmd);
    assert!(server.port > 0);

    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tsserver.service");
    let here = bin("tsserver").display().to_string();
    std::fs::write(&path, unit.replace("/usr/local/bin/tsserver", &here)).unwrap();
    let out = run(
        "systemd-analyze".into(),
        &["verify", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "",
        "systemd-analyze has something to say"
    );
}
