//! Names the commit the binaries are built from, for `--version`: `TSPERF_COMMIT` is the short
//! hash of git's HEAD, or `unknown` outside a repository (a source tarball, a package build).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=9", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=TSPERF_COMMIT={commit}");
    // A new commit (HEAD moves, or the branch it names does) builds the name again.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
