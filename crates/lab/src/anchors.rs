//! Real copy tools beside the ladder's rungs (`scripts/matrix.sh --ladder-only --lan
//! --anchors`): each tool copies the ladder's file between the same two hosts, alternating with
//! the ladder's runs, from a cold source (the page cache dropped before each copy) to a file on
//! the far host that is synced (an fsync after the tool ends, timed in) and checked against the
//! source: the whole-copy rung's setting (cold file → cipher → durable far disk).
//!
//! A tool is a shell command given by the caller (the script that started its far end: an
//! OpenSSH server, a static file server) that copies `$TSPERF_COPY_SRC` to `$TSPERF_COPY_DEST`.

use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// A tool: its name in the table and the shell command that copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// What the table calls it (`scp aes128-gcm`).
    pub name: String,
    /// The command, run by `sh -c` with `TSPERF_COPY_SRC` and `TSPERF_COPY_DEST` set.
    pub command: String,
}

impl std::str::FromStr for Anchor {
    type Err = String;

    /// `NAME=COMMAND`.
    fn from_str(s: &str) -> Result<Anchor, String> {
        match s.split_once('=') {
            Some((name, command)) if !name.trim().is_empty() && !command.trim().is_empty() => {
                Ok(Anchor {
                    name: name.trim().to_owned(),
                    command: command.to_owned(),
                })
            }
            _ => Err(format!(
                "invalid anchor '{s}': expected NAME=COMMAND (a shell command copying \
                 $TSPERF_COPY_SRC to $TSPERF_COPY_DEST)"
            )),
        }
    }
}

/// One copy by one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnchorRun {
    /// The tool's name.
    pub tool: String,
    /// Its command.
    pub command: String,
    /// The bytes of the copy on the far host.
    pub bytes: u64,
    /// From the command's start to the copy synced, s.
    pub seconds: f64,
    /// The CPU the command and its children took (the end it runs on: scp and ssh on the
    /// sending host, curl on the receiving one), user + system, s.
    pub cpu_s: f64,
    /// The source's size over that time.
    pub mib_per_s: f64,
    /// The page cache was dropped before (root only): the source was read from its disk.
    pub cold: bool,
    /// The copy's bytes are the source's (xxh3-64 of both).
    pub verified: bool,
    /// Why it failed, where it did (the command's status and stderr).
    pub error: Option<String>,
}

/// The xxh3-64 of a file, read through a small buffer.
fn digest(path: &Path) -> Result<u64> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    let mut h = twox_hash::XxHash3_64::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
    }
    Ok(h.finish())
}

/// Drops the page cache (written back first), so the source is read from its disk; false
/// where it cannot (not root).
fn drop_caches() -> bool {
    // SAFETY: sync(2) takes nothing and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

/// The CPU this process's waited-for children took, user + system, s.
fn children_cpu() -> f64 {
    // SAFETY: getrusage(2) fills the struct it is given; zeroed is a valid rusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage this function owns.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// Copies `src` to `dest` with `tool`, timed from its start to the copy synced, and checks
/// the copy against `want` (the source's digest); the copy is removed after.
pub fn copy(tool: &Anchor, src: &Path, dest: &Path, want: u64) -> Result<AnchorRun> {
    let _ = std::fs::remove_file(dest);
    let cold = drop_caches();
    let len = std::fs::metadata(src)
        .with_context(|| format!("cannot read '{}'", src.display()))?
        .len();
    let cpu_before = children_cpu();
    let start = Instant::now();
    let out = Command::new("sh")
        .args(["-c", &tool.command])
        .env("TSPERF_COPY_SRC", src)
        .env("TSPERF_COPY_DEST", dest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", tool.name))?;
    let synced = std::fs::File::open(dest).and_then(|f| f.sync_all());
    let seconds = start.elapsed().as_secs_f64();
    let cpu_s = children_cpu() - cpu_before;
    let error = match (out.status.success(), synced) {
        (true, Ok(())) => None,
        (true, Err(e)) => Some(format!("no copy at '{}': {e}", dest.display())),
        (false, _) => Some(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    };
    let bytes = std::fs::metadata(dest).map_or(0, |m| m.len());
    let verified = error.is_none() && bytes == len && digest(dest)? == want;
    let _ = std::fs::remove_file(dest);
    Ok(AnchorRun {
        tool: tool.name.clone(),
        command: tool.command.clone(),
        bytes,
        seconds,
        cpu_s,
        mib_per_s: len as f64 / (1 << 20) as f64 / seconds,
        cold,
        verified,
        error,
    })
}

/// The tools, each once, copying `src` into `dir` (a file named after the tool).
pub fn run_once(tools: &[Anchor], src: &Path, dir: &Path, want: u64) -> Result<Vec<AnchorRun>> {
    let mut runs = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let dest: PathBuf = dir.join(format!("anchor-{i}.copy"));
        let run = copy(tool, src, &dest, want)?;
        eprintln!(
            "tsmatrix: {}: {:.1} MiB/s{}",
            tool.name,
            run.mib_per_s,
            match (&run.error, run.verified) {
                (Some(e), _) => format!(", failed: {e}"),
                (None, false) => ", NOT verified: the copy differs".into(),
                (None, true) => String::new(),
            }
        );
        runs.push(run);
    }
    Ok(runs)
}

/// The source's digest, for [`copy`].
pub fn source_digest(src: &Path) -> Result<u64> {
    if !src.is_file() {
        bail!("'{}' is not a file", src.display());
    }
    digest(src)
}

/// The tools' section of ladder.md: each tool's median rate and CPU beside the whole copy's
/// (`copy`: its rung's name, rate and client CPU per GiB), then the commands, with `work` (the
/// run's scratch directory) written `$WORK`.
pub fn markdown(runs: &[AnchorRun], copy: Option<(&str, f64, f64)>, work: &Path) -> String {
    let mut tools: Vec<&AnchorRun> = Vec::new();
    for r in runs {
        if !tools.iter().any(|t| t.tool == r.tool) {
            tools.push(r);
        }
    }
    let cold = runs.iter().all(|r| r.cold);
    let mut out = format!(
        "\n## Real copy tools beside the rungs\n\nEach tool copied the same file between the \
         same two hosts, alternating with the ladder's runs, {} to a file on the far host, \
         synced (an fsync after the tool ends, timed in) and checked against the source \
         (xxh3-64): the whole copy's setting{}. A tool's CPU is what its processes on the end \
         that ran it took (scp and rsync with their ssh: the sending host; curl: the receiving \
         one), beside the whole copy's client CPU. Where both hosts share one machine's cores \
         (namespaces), a tool's rate is bounded by the CPU it spends per byte: one that spends \
         more than tsperf's ends runs slower for that, not for the network.\n\n| tool | \
         MiB/s (median) | verified | the whole copy's rate over the tool's | CPU s/GiB \
         (median) | its CPU over the whole copy's client CPU |\n|---|---:|:-:|---:|---:|---:|\n",
        if cold {
            "each from a cold source (the page cache dropped before it)"
        } else {
            "from the page cache (not root: the cache could not be dropped)"
        },
        copy.map_or(String::new(), |(rung, rate, cpu)| format!(
            " (`{rung}`: {rate:.1} MiB/s, client CPU {cpu:.2} s/GiB)"
        ))
    );
    for tool in &tools {
        let ok: Vec<&AnchorRun> = runs
            .iter()
            .filter(|r| r.tool == tool.tool && r.verified)
            .collect();
        let all = runs.iter().filter(|r| r.tool == tool.tool).count();
        let rate = super::ladder::median(ok.iter().map(|r| r.mib_per_s).collect());
        let cpu = super::ladder::median(
            ok.iter()
                .map(|r| r.cpu_s / (r.bytes.max(1) as f64 / (1u64 << 30) as f64))
                .collect(),
        );
        let over = match (copy, cpu) {
            (Some((_, _, c)), Some(t)) if c > 0.0 => format!("{:.2}×", t / c),
            _ => "—".into(),
        };
        out += &format!(
            "| {} | {} | {} of {all} | {} | {} | {over} |\n",
            tool.tool,
            rate.map_or("failed".into(), |r| format!("{r:.1}")),
            ok.len(),
            match (copy, rate) {
                (Some((_, c, _)), Some(r)) if r > 0.0 => format!("{:.2}×", c / r),
                _ => "—".into(),
            },
            cpu.map_or("—".into(), |c| format!("{c:.2}"))
        );
    }
    out += "\nThe commands (`$WORK` is the run's scratch directory; `$TSPERF_COPY_SRC` the file, \
            `$TSPERF_COPY_DEST` the copy's path on the far host):\n\n";
    let work = work.display().to_string();
    for tool in &tools {
        out += &format!(
            "- {}: `{}`\n",
            tool.tool,
            tool.command.replace(&work, "$WORK")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool is NAME=COMMAND; anything else is refused naming the input and the form.
    #[test]
    fn an_anchor_is_a_name_and_a_command() {
        let a: Anchor = "cp=cp \"$TSPERF_COPY_SRC\" \"$TSPERF_COPY_DEST\""
            .parse()
            .unwrap();
        assert_eq!(a.name, "cp");
        assert_eq!(a.command, "cp \"$TSPERF_COPY_SRC\" \"$TSPERF_COPY_DEST\"");
        for bad in ["cp", "=cp x y", "cp="] {
            let e = bad.parse::<Anchor>().unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("NAME=COMMAND"),
                "{e}"
            );
        }
    }

    /// A copy by a real command is timed, synced and verified, and the copy removed; a
    /// command that copies wrong bytes is not verified, and one that fails says how.
    #[test]
    fn a_copy_is_verified_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        std::fs::write(&src, b"the bytes of the source\n".repeat(5000)).unwrap();
        let want = source_digest(&src).unwrap();
        let tools: Vec<Anchor> = [
            "cp=cp \"$TSPERF_COPY_SRC\" \"$TSPERF_COPY_DEST\"",
            "short=head -c 100 \"$TSPERF_COPY_SRC\" > \"$TSPERF_COPY_DEST\"",
            "fails=echo no route >&2; exit 3",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let runs = run_once(&tools, &src, dir.path(), want).unwrap();
        assert!(runs[0].verified && runs[0].error.is_none(), "{:?}", runs[0]);
        assert_eq!(runs[0].bytes, 120_000);
        assert!(
            !runs[1].verified && runs[1].error.is_none(),
            "{:?}",
            runs[1]
        );
        assert!(!runs[2].verified, "{:?}", runs[2]);
        assert!(
            runs[2].error.as_deref().unwrap().contains("no route"),
            "{:?}",
            runs[2]
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the source is left: {left:?}");
        let md = markdown(
            &runs,
            Some(("cold → TLS aes128gcm → durable far disk", 100.0, 1.5)),
            Path::new("/nowhere"),
        );
        assert!(md.contains("- cp: `cp \"$TSPERF_COPY_SRC\""), "{md}");
        assert!(
            md.contains("| short | failed | 0 of 1 | — | — | — |"),
            "{md}"
        );
        assert!(
            md.contains("| fails | failed | 0 of 1 | — | — | — |"),
            "{md}"
        );
        assert!(md.contains("100.0 MiB/s, client CPU 1.50 s/GiB"), "{md}");
        let cp = runs[0].mib_per_s;
        assert!(
            md.contains(&format!("| cp | {cp:.1} | 1 of 1 | {:.2}× |", 100.0 / cp)),
            "{md}"
        );
    }
}
