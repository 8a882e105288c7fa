//! The far host's install: the Debian package `cargo deb` builds
//! from packaging/debian/ and Cargo.toml's `[package.metadata.deb]`, and its systemd unit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The binaries the package carries: every one of the root package's but tsdocs, which writes
/// this tree's docs/.
const PACKAGED: [&str; 6] = [
    "tsserver", "tsclient", "tsgen", "tsmatrix", "tsreport", "tsprobe",
];

/// What it never carries: tsdocs, and the programs that measure tsperf itself (tsperf-bench).
const NOT_PACKAGED: [&str; 4] = ["tsdocs", "tspeers", "tsscale", "tsverdicts"];

/// The flags tsserver.service starts tsserver with: `TSSERVER_OPTS` of the default file
/// (packaging/debian/tsserver.default, installed as /etc/default/tsserver).
fn service_flags(default_file: &Path) -> Vec<String> {
    opts(default_file, "TSSERVER_OPTS")
}

/// The words of the `NAME=` line of a default file.
fn opts(default_file: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(default_file).unwrap();
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= line in {}", default_file.display()));
    value
        .trim_matches('"')
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `systemd-analyze verify` finds nothing to say about packaging/debian/tsserver.service (with
/// its ExecStart pointed at the built binary), and the default file's flags start a tsserver.
/// Skipped, with a message, where systemd-analyze is not installed.
#[test]
fn systemd_unit_verifies() {
    let unit =
        std::fs::read_to_string(format!("{ROOT}/packaging/debian/tsserver.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    assert_eq!(exec, "/usr/bin/tsserver $TSSERVER_OPTS");
    for line in [
        "User=tsserver",
        "EnvironmentFile=-/etc/default/tsserver",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.lines().any(|l| l == line), "no {line}: {unit}");
    }
    let flags = service_flags(Path::new(&format!(
        "{ROOT}/packaging/debian/tsserver.default"
    )));
    assert!(flags.iter().any(|f| f == "--log"), "{flags:?}");
    let mut cmd = Command::new(bin("tsserver"));
    cmd.args(&flags)
        .args(["--bind", "127.0.0.1", "--port", "0"]);
    let server = Server::spawn(cmd);
    assert!(server.port > 0);

    analyze_verify("tsserver", &unit);
}

/// The same of packaging/debian/tsprobe.service: its own user, its default file, flags tsprobe
/// takes.
#[test]
fn the_probe_unit_verifies() {
    let unit = std::fs::read_to_string(format!("{ROOT}/packaging/debian/tsprobe.service")).unwrap();
    for line in [
        "ExecStart=/usr/bin/tsprobe $TSPROBE_OPTS",
        "User=tsprobe",
        "EnvironmentFile=-/etc/default/tsprobe",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.lines().any(|l| l == line), "no {line}: {unit}");
    }
    let flags = opts(
        Path::new(&format!("{ROOT}/packaging/debian/tsprobe.default")),
        "TSPROBE_OPTS",
    );
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.push("--help");
    let out = run(bin("tsprobe"), &args);
    assert_eq!(out.status.code(), Some(0), "{flags:?}: {}", stderr(&out));
    analyze_verify("tsprobe", &unit);
}

/// `systemd-analyze verify` of `unit` (program `name`'s, pointed at the built binary) says
/// nothing; skipped, with a message, where systemd-analyze is not installed.
fn analyze_verify(name: &str, unit: &str) {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.service"));
    let here = bin(name).display().to_string();
    std::fs::write(&path, unit.replace(&format!("/usr/bin/{name}"), &here)).unwrap();
    // --man=no: the Documentation= man page is the package's, not installed here.
    let out = run(
        "systemd-analyze".into(),
        &["verify", "--man=no", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "",
        "systemd-analyze has something to say"
    );
}

/// Runs `program args` (bounded at three minutes: `cargo deb` compresses 15 MB) and returns
/// its output, or None when the program is not there.
fn tool(program: &str, args: &[&str], dir: &Path) -> Option<Output> {
    let mut cmd = assert_cmd::Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .timeout(Duration::from_secs(180));
    let out = cmd.output().ok()?;
    assert!(
        out.status.code().is_some(),
        "{program} {args:?} was killed (timeout or signal): {}",
        stderr(&out)
    );
    Some(out)
}

/// Runs `program args` that must succeed, and returns its stdout.
fn ok(program: &str, args: &[&str]) -> String {
    let out = tool(program, args, Path::new(ROOT)).unwrap_or_else(|| panic!("no {program}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{program} {args:?}: {}",
        stderr(&out)
    );
    stdout(&out)
}

/// Builds the package with `cargo deb --no-build` from this build's release binaries into
/// `out`, or says why it cannot (and the test skips).
fn build_package(out: &Path) -> Result<PathBuf, String> {
    if bin("tsserver").parent().and_then(Path::file_name) != Some("release".as_ref()) {
        return Err("the package is made of release binaries: run cargo test --release".into());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(ROOT);
    match tool(&cargo, &["deb", "--version"], root) {
        Some(o) if o.status.success() => {}
        _ => return Err("cargo-deb is not installed (cargo install --locked cargo-deb)".into()),
    }
    if tool("dpkg-deb", &["--version"], root).is_none() {
        return Err("dpkg-deb is not installed".into());
    }
    let built = tool(
        &cargo,
        &[
            "deb",
            "--no-build",
            "--fast",
            "--output",
            out.to_str().unwrap(),
        ],
        root,
    )
    .unwrap();
    assert_eq!(
        built.status.code(),
        Some(0),
        "cargo deb: {}",
        stderr(&built)
    );
    let arch = ok("dpkg", &["--print-architecture"]);
    let name = format!("tsperf_{}-1_{}.deb", env!("CARGO_PKG_VERSION"), arch.trim());
    let deb = out.join(&name);
    assert!(deb.is_file(), "no {name}: {}", stdout(&built));
    Ok(deb)
}

/// `cargo deb` builds tsperf_VERSION-1_ARCH.deb; `dpkg-deb -c` lists every
/// binary but tsdocs (executable), each one's man page and bash, fish and zsh completions, the
/// systemd unit and /etc/default/tsserver (a conffile); its postinst makes the tsserver user
/// and neither enables nor starts the unit; unpacked in a scratch root, its tsserver names the
/// same commit as this build and, started with the default file's flags, serves a verified
/// transfer from its tsclient. Skipped, with a message, where cargo-deb or dpkg-deb is missing.
#[test]
fn the_debian_package_installs_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let deb = match build_package(dir.path()) {
        Ok(deb) => deb,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let deb_arg = deb.to_str().unwrap();
    let listing = ok("dpkg-deb", &["-c", deb_arg]);
    let entries: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|l| Some((l.split_whitespace().next()?, l.split_whitespace().last()?)))
        .collect();
    let has = |path: &str| entries.iter().find(|(_, p)| *p == path).map(|(m, _)| *m);
    for name in PACKAGED {
        assert_eq!(
            has(&format!("./usr/bin/{name}")),
            Some("-rwxr-xr-x"),
            "{listing}"
        );
        for file in [
            format!("./usr/share/man/man1/{name}.1.gz"),
            format!("./usr/share/bash-completion/completions/{name}.bash"),
            format!("./usr/share/fish/vendor_completions.d/{name}.fish"),
            format!("./usr/share/zsh/vendor-completions/_{name}"),
        ] {
            assert!(has(&file).is_some(), "no {file}: {listing}");
        }
    }
    // The README's links to docs/ resolve where it is installed; the man pages name them.
    for file in [
        "./usr/lib/systemd/system/tsserver.service",
        "./etc/default/tsserver",
        "./usr/lib/systemd/system/tsprobe.service",
        "./etc/default/tsprobe",
        "./usr/share/doc/tsperf/examples/prometheus.yml",
        "./usr/share/doc/tsperf/examples/tsperf-rules.yml",
        "./usr/share/doc/tsperf/examples/grafana-tsperf.json",
        "./usr/share/doc/tsperf/README.md",
        "./usr/share/doc/tsperf/docs/usage.md",
        "./usr/share/doc/tsperf/docs/json.md",
    ] {
        assert!(has(file).is_some(), "no {file}: {listing}");
    }
    for name in NOT_PACKAGED {
        assert!(!listing.contains(name), "{name} is packaged: {listing}");
    }

    let info = |part: &str| ok("dpkg-deb", &["-I", deb_arg, part]);
    assert_eq!(
        info("conffiles").trim(),
        "/etc/default/tsserver\n/etc/default/tsprobe"
    );
    assert!(ok("dpkg-deb", &["-f", deb_arg, "Depends"]).contains("adduser"));
    let postinst = info("postinst");
    assert!(postinst.contains("adduser --system --group"), "{postinst}");
    // Installed disabled and stopped: enabled again only if it was, restarted only on upgrade.
    assert!(!postinst.contains("invoke start"), "{postinst}");
    assert!(!postinst.contains("_dh_action=start"), "{postinst}");
    let enable = postinst.find("deb-systemd-helper enable").unwrap_or(0);
    assert!(
        postinst.find("was-enabled").is_some_and(|w| w < enable) || enable == 0,
        "{postinst}"
    );
    for script in ["postinst", "prerm", "postrm"] {
        let path = dir.path().join(script);
        std::fs::write(&path, info(script)).unwrap();
        ok("sh", &["-n", path.to_str().unwrap()]);
    }

    // The scratch root: the package's tree unpacked.
    let root = dir.path().join("root");
    ok("dpkg-deb", &["-x", deb_arg, root.to_str().unwrap()]);
    let installed = |name: &str| root.join("usr/bin").join(name);
    let version = ok(installed("tsserver").to_str().unwrap(), &["--version"]);
    assert!(version.contains("(commit "), "{version}");
    assert_eq!(
        version,
        ok(bin("tsserver").to_str().unwrap(), &["--version"]),
        "the package's tsserver is not this build's"
    );
    let mut cmd = Command::new(installed("tsserver"));
    cmd.args(service_flags(&root.join("etc/default/tsserver")))
        .args(["--bind", "127.0.0.1", "--port", "0"]);
    let server = Server::spawn(cmd);
    let out = run(
        installed("tsclient"),
        &[
            "--port",
            &server.port.to_string(),
            "--bytes",
            "1MiB",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["verified"], true, "{result}");
}

/// packaging/debian/NAME.service's sandbox, once it rates below 5 with `systemd-analyze
/// security`: the system calls its filter allows and the socket families it allows. `None`,
/// saying it skipped, where systemd-analyze or strace (which the tests trace with) is missing.
pub(crate) fn sandbox(name: &str) -> Option<(std::collections::BTreeSet<String>, Vec<String>)> {
    let unit_path = Path::new(ROOT).join(format!("packaging/debian/{name}.service"));
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    for missing in ["systemd-analyze", "strace"] {
        if tool(missing, &["--version"], Path::new(ROOT)).is_none() {
            eprintln!("skipped: {missing} is not installed");
            return None;
        }
    }
    let score = exposure(&unit_path).expect("systemd-analyze security gives an exposure");
    assert!(score < 5.0, "exposure {score}: {unit}");
    Some(unit_filter(&unit))
}

/// The unit's `systemd-analyze security` exposure, from its "Overall exposure level" line.
fn exposure(unit: &Path) -> Option<f64> {
    let out = tool(
        "systemd-analyze",
        &[
            "security",
            "--offline=yes",
            "--no-pager",
            unit.to_str().unwrap(),
        ],
        Path::new(ROOT),
    )?;
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))?;
    line.split(": ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The system calls `group` (a systemd filter group, `@system-service`) stands for, its
/// groups within it expanded, as `systemd-analyze syscall-filter` lists them.
fn syscalls_of(group: &str, into: &mut std::collections::BTreeSet<String>) {
    if !group.starts_with('@') {
        into.insert(group.to_owned());
        return;
    }
    let listing = ok("systemd-analyze", &["syscall-filter", "--no-pager", group]);
    for name in listing
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        syscalls_of(name, into);
    }
}

/// The unit's `SystemCallFilter=`: the system calls it allows (its allow list less its deny
/// list), and its `RestrictAddressFamilies=`.
fn unit_filter(unit: &str) -> (std::collections::BTreeSet<String>, Vec<String>) {
    let (mut allow, mut deny) = (Default::default(), Default::default());
    for value in unit
        .lines()
        .filter_map(|l| l.strip_prefix("SystemCallFilter="))
    {
        let (list, set) = match value.strip_prefix('~') {
            Some(rest) => (rest, &mut deny),
            None => (value, &mut allow),
        };
        for g in list.split_whitespace() {
            syscalls_of(g, set);
        }
    }
    let families = unit
        .lines()
        .find_map(|l| l.strip_prefix("RestrictAddressFamilies="))
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    (allow.difference(&deny).cloned().collect(), families)
}

/// The system calls an `strace -f` trace holds, and the address families of its sockets.
pub(crate) fn traced(trace: &str) -> (std::collections::BTreeSet<String>, Vec<String>) {
    let mut calls = std::collections::BTreeSet::new();
    let mut families = Vec::new();
    for line in trace.lines() {
        let rest = line.split_once(' ').map_or(line, |(_, r)| r).trim_start();
        let name = match rest.strip_prefix("<... ") {
            Some(resumed) => resumed.split_whitespace().next().unwrap_or_default(),
            None => rest.split('(').next().unwrap_or_default(),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        calls.insert(name.to_owned());
        if let Some(args) = rest
            .strip_prefix("socket(")
            .or(rest.strip_prefix("socketpair("))
        {
            families.push(args.split([',', ' ']).next().unwrap_or_default().to_owned());
        }
    }
    (calls, families)
}

/// The packaged unit's sandbox rates below 5 with `systemd-analyze security` (it was
/// 7.9 EXPOSED), and takes nothing tsserver needs: every system call tsserver makes, traced
/// with strace while it receives (and saves) files, serves a named file, sends the generated
/// stream (sized, timed, striped, with a congestion control), answers clock queries, checks a
/// key and stops on SIGTERM, in both models, is one the unit's `SystemCallFilter=` allows, and
/// every socket it opens is of a family `RestrictAddressFamilies=` allows. Skipped, with a
/// message, where systemd-analyze or strace is missing.
#[test]
fn the_units_sandbox_allows_what_tsserver_does() {
    let Some((allowed, families)) = sandbox("tsserver") else {
        return;
    };
    assert!(
        allowed.len() > 100 && allowed.contains("sendfile"),
        "{allowed:?}"
    );
    assert!(!allowed.contains("setrlimit") && !allowed.contains("setuid"));

    let dir = tempfile::tempdir().unwrap();
    let (save, serve) = (dir.path().join("save"), dir.path().join("serve"));
    std::fs::create_dir_all(&save).unwrap();
    std::fs::create_dir_all(&serve).unwrap();
    let file = test_file(&serve, "f.bin", 1 << 20);
    let key = dir.path().join("key");
    std::fs::write(&key, "a secret of more than sixteen bytes\n").unwrap();
    let mut perms = std::fs::metadata(&key).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&key, perms).unwrap();
    for model in [&[][..], &["--blocking"][..]] {
        let trace = dir.path().join(format!("trace{}", model.len()));
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-o", trace.to_str().unwrap()])
            .arg(bin("tsserver"))
            .args(["--bind", "127.0.0.1", "--port", "0", "--log", "none"])
            .args(["--save", save.to_str().unwrap(), "--overwrite"])
            .args(["--serve", serve.to_str().unwrap()])
            .args(["--auth-key", key.to_str().unwrap()])
            .args(model);
        let mut server = Server::spawn(cmd);
        let port = server.port.to_string();
        let f = file.to_str().unwrap();
        let k = key.to_str().unwrap();
        for run in [
            &[f][..],
            &["-R", "f.bin"],
            &["-R", "-P", "2", "--bytes", "1MiB"],
            &["-R", "-t", "0.3", "-C", "reno"],
            &["--bidir", f],
            &["--latency", "--count", "20"],
        ] {
            let mut args = vec!["--port", &port, "--auth-key", k, "--json"];
            args.extend_from_slice(run);
            let out = client(&args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{model:?} {run:?}: {}",
                stderr(&out)
            );
        }
        // The stop goes to tsserver, strace's child; strace ends with it.
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.pid())).unwrap();
        let tsserver: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
        // SAFETY: kill(2) on the tsserver this test started (under strace).
        assert_eq!(unsafe { libc::kill(tsserver, libc::SIGTERM) }, 0);
        assert_eq!(server.wait_exit(), Some(0), "{model:?}");
        let (calls, opened) = traced(&std::fs::read_to_string(&trace).unwrap());
        assert!(
            calls.contains("sendfile") && calls.contains("accept4"),
            "{calls:?}"
        );
        // strace's own start (the execve that runs tsserver) is made before the filter.
        let outside: Vec<&String> = calls
            .iter()
            .filter(|c| !allowed.contains(*c) && *c != "execve")
            .collect();
        assert!(
            outside.is_empty(),
            "{model:?}: tsserver made system calls the unit forbids: {outside:?}"
        );
        for family in opened {
            assert!(
                families.contains(&family),
                "{model:?}: a socket of {family}"
            );
        }
    }
}
