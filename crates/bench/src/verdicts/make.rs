//! Makes the verdict's cases ([`super::cases`]): each limit on purpose, a fresh tsserver for
//! it, tsclient against it, one typed record a run in `verdicts.jsonl`. Only what needs root
//! is set up outside: the two namespaces (`scripts/lan.sh`), control groups ([`Hierarchy`]),
//! and the loop device of a slow disk (`losetup`, `mkfs.ext4`, `mount`). A case whose means are
//! missing is recorded as skipped, saying why.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::Run;
use super::cases::{CASES, Case, File, Limit, NOT_MADE, Place, TIMED, TIMED_QUICK};
use super::cgroup::{Group, Hierarchy};
use super::root::{Disk, Lan, drop_caches};
use tsperf_results::json::ClientOutput;

/// What to make, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where `verdicts.jsonl` goes.
    pub out: PathBuf,
    /// Runs per case.
    pub reps: u32,
    /// Small files (the tests' fast subset).
    pub quick: bool,
    /// Only these cases (empty: all).
    pub only: Vec<String>,
    /// The directory holding tsserver and tsclient.
    pub bin: PathBuf,
    /// The repository's top, for `scripts/lan.sh`.
    pub top: PathBuf,
}

/// Namespaces' names and the server's address in them.
const SERVER_ADDR: &str = "198.18.0.1";
/// CPU quota: 1 ms per 10 ms period.
const QUOTA_US: u64 = 1000;
const PERIOD_US: u64 = 10_000;
/// A slow disk's rate.
const DISK_BPS: u64 = 4 << 20;

/// What this machine offers the cases.
struct Means {
    cgroups: Option<Hierarchy>,
    tc: bool,
    disk: bool,
}

impl Means {
    fn probe(top: &Path) -> Means {
        // SAFETY: geteuid(2) takes nothing and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let has = |tool: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        Means {
            cgroups: root.then(Hierarchy::detect).flatten(),
            tc: root && has("ip") && has("tc") && top.join("scripts/lan.sh").is_file(),
            disk: root && has("losetup") && has("mkfs.ext4"),
        }
    }

    /// Why `case` cannot be made here, if it cannot.
    fn lacks(&self, case: &Case) -> Option<&'static str> {
        let cpu = self.cgroups.as_ref().is_some_and(Hierarchy::has_cpu);
        let io = self.cgroups.as_ref().is_some_and(Hierarchy::has_io);
        match case.limit {
            Limit::ServerCpu | Limit::ClientCpu if !cpu => {
                return Some("needs root and a cgroup cpu controller (v1 cpu or v2 cpu.max)");
            }
            Limit::SlowSource | Limit::SlowSave if !(io && self.disk) => {
                return Some(
                    "needs root, a cgroup io controller (v1 blkio or v2 io.max), losetup and \
                     mkfs.ext4",
                );
            }
            _ => {}
        }
        match case.place {
            Place::Namespaces(_) if !self.tc => {
                Some("needs root, iproute2 (ip, tc) and scripts/lan.sh (run from the repository)")
            }
            _ => None,
        }
    }
}

/// tsverdicts was stopped (Ctrl-C or SIGTERM): the runs made so far are kept in `kept`.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: the {} made {} in '{}'", tsperf_results::units::count(*.runs as u64, "run"), if *.runs == 1 { "is" } else { "are" }, .kept.display())]
pub struct Interrupted {
    /// How many runs were made (skipped cases included).
    pub runs: usize,
    /// Where they are: `verdicts.interrupted.jsonl` beside (never over) the whole table.
    pub kept: PathBuf,
}

/// Runs the cases `opts` asks for and writes `verdicts.jsonl`; returns its runs. Once `stop`
/// is set (Ctrl-C), no run begins, and whatever the signal made fail (the run in flight, whose
/// client and server got it too) is the signal's: it fails with [`Interrupted`], the runs made
/// kept, having taken down what it made.
pub fn make(opts: &Options, stop: &std::sync::atomic::AtomicBool) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    let made = make_runs(opts, stop, &mut runs);
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        let kept = opts.out.join("verdicts.interrupted.jsonl");
        super::write(&kept, &runs)?;
        return Err(Interrupted {
            runs: runs.len(),
            kept,
        }
        .into());
    }
    made?;
    super::write(&opts.out.join("verdicts.jsonl"), &runs)?;
    Ok(runs)
}

/// The cases' runs, into `runs`, until done or `stop` is set.
fn make_runs(
    opts: &Options,
    stop: &std::sync::atomic::AtomicBool,
    runs: &mut Vec<Run>,
) -> Result<()> {
    let means = Means::probe(&opts.top);
    let work = tempfile::Builder::new()
        .prefix("tsperf-verdicts.")
        .tempdir()?;
    let files = Files::make(work.path(), opts.quick)?;
    let tag = format!("tv{}", std::process::id() % 1_000_000);
    let wanted = |name: &str| opts.only.is_empty() || opts.only.iter().any(|o| o == name);
    let mut lan = Lan::new(&opts.top, &tag);
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    for case in CASES.iter().filter(|c| wanted(c.name)) {
        if let Some(why) = means.lacks(case) {
            eprintln!("tsverdicts: skipped {}: {why}", case.name);
            runs.push(Run::skipped(case.name, why));
            continue;
        }
        if let Place::Namespaces(rate) = case.place {
            lan.up(rate)?;
        }
        let made = Made::new(case, &means, &files, work.path(), &tag)?;
        for rep in 1..=opts.reps {
            if stopped() {
                return Ok(());
            }
            // A slow source is read from the disk each time, not the page cache.
            if case.limit == Limit::SlowSource {
                drop_caches();
            }
            let result = made.run(case, opts)?;
            let run = Run::made(case, rep, result);
            eprintln!(
                "tsverdicts: {} {rep}/{}: {}",
                case.name,
                opts.reps,
                run.verdict()
            );
            runs.push(run);
        }
    }
    lan.down();
    for (name, why) in NOT_MADE.iter().filter(|(n, _)| wanted(n)) {
        eprintln!("tsverdicts: skipped {name}: {why}");
        runs.push(Run::skipped(name, why));
    }
    Ok(())
}

/// The files the cases send, made once.
struct Files {
    big: PathBuf,
    mid: PathBuf,
    small: PathBuf,
    copy: PathBuf,
    long_copy: PathBuf,
    big_len: u64,
}

impl Files {
    fn make(dir: &Path, quick: bool) -> Result<Files> {
        let (big, mid, small, copy, long) = if quick {
            (8 << 20, 4 << 20, 256 << 10, 16 << 20, 64 << 20)
        } else {
            (36 << 20, 4 << 20, 1 << 20, 32 << 20, 128 << 20)
        };
        let make = |name: &str, len: u64| -> Result<PathBuf> {
            let p = dir.join(name);
            tsperf_sys::testdata::generate(&p, len)?;
            Ok(p)
        };
        Ok(Files {
            big: make("big.txt", big)?,
            mid: make("mid.txt", mid)?,
            small: make("small.txt", small)?,
            copy: make("copy.txt", copy)?,
            long_copy: make("long-copy.txt", long)?,
            big_len: big,
        })
    }
}

/// A case's limit made: its groups, its disk, the file it sends.
struct Made {
    server_group: Option<Group>,
    client_group: Option<Group>,
    disk: Option<Disk>,
    file: Option<PathBuf>,
    /// The server's `--save` directory, where it has one (a slow disk's, or a ladder's).
    save: Option<PathBuf>,
    big_len: u64,
    ns: Option<(String, String)>,
}

impl Made {
    fn new(case: &Case, means: &Means, files: &Files, work: &Path, tag: &str) -> Result<Made> {
        let cpu = |who: &str| -> Result<Group> {
            let h = means.cgroups.as_ref().context("no cgroups")?;
            h.cpu_quota(&format!("tsperf-{tag}-{who}"), QUOTA_US, PERIOD_US)
        };
        let mut made = Made {
            server_group: None,
            client_group: None,
            disk: None,
            file: match case.file {
                File::Big | File::BigTimed => Some(files.big.clone()),
                File::Mid => Some(files.mid.clone()),
                File::Small => Some(files.small.clone()),
                File::Copy => Some(files.copy.clone()),
                File::LongCopy => Some(files.long_copy.clone()),
                File::Reverse | File::ReverseTimed => None,
            },
            // A ladder's far-disk rungs write into the work directory unless a slow disk
            // takes them (they keep nothing).
            save: case.ladder().then(|| work.to_owned()),
            big_len: files.big_len,
            ns: matches!(case.place, Place::Namespaces(_))
                .then(|| (format!("{tag}-srv"), format!("{tag}-cli"))),
        };
        match case.limit {
            Limit::ServerCpu => made.server_group = Some(cpu("srv")?),
            Limit::ClientCpu => made.client_group = Some(cpu("cli")?),
            Limit::SlowSource | Limit::SlowSave => {
                let h = means.cgroups.as_ref().context("no cgroups")?;
                let source = made.file.clone().unwrap_or_else(|| files.big.clone());
                let disk = Disk::make(work, &source)?;
                let group = h.io_rate(&format!("tsperf-{tag}-io"), &disk.devno, DISK_BPS)?;
                if case.limit == Limit::SlowSource {
                    made.file = Some(disk.mnt.join("source.txt"));
                    made.client_group = Some(group);
                } else {
                    made.save = Some(disk.mnt.join("save"));
                    made.server_group = Some(group);
                }
                made.disk = Some(disk);
            }
            Limit::None | Limit::SlowStdout => {}
        }
        Ok(made)
    }

    /// One run: a fresh server, the client against it; the client's typed object, or why
    /// there is none.
    fn run(&self, case: &Case, opts: &Options) -> Result<Result<ClientOutput, String>> {
        let mut server_args = vec!["--port", "0", "--log", "none"];
        if case.limit == Limit::SlowStdout {
            server_args[3] = "stdout";
        }
        let save;
        if let Some(dir) = &self.save {
            save = dir.display().to_string();
            server_args.extend(["--save", &save, "--overwrite"]);
        }
        let server = ServerProcess::start(
            placed(
                &opts.bin.join("tsserver"),
                self.ns.as_ref().map(|n| n.0.as_str()),
                self.server_group.as_ref(),
            ),
            &server_args,
            case.limit == Limit::SlowStdout,
        )?;
        let host = if self.ns.is_some() {
            SERVER_ADDR
        } else {
            "127.0.0.1"
        };
        let port = server.port.to_string();
        let big = self.big_len.to_string();
        let mut client = placed(
            &opts.bin.join("tsclient"),
            self.ns.as_ref().map(|n| n.1.as_str()),
            self.client_group.as_ref(),
        );
        client.args(["--host", host, "--port", &port, "--json", "--no-progress"]);
        client.args(case.client);
        if case.file.timed() {
            client.args(["-t", if opts.quick { TIMED_QUICK } else { TIMED }]);
        }
        match &self.file {
            Some(f) => client.arg(f),
            None if case.file.timed() => &mut client,
            None => client.args(["--bytes", &big]),
        };
        let out = client
            .stderr(Stdio::null())
            .output()
            .context("cannot run tsclient")?;
        drop(server);
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(match text.trim() {
            "" => Err("tsclient printed nothing".to_owned()),
            t => ClientOutput::parse(t).map_err(|e| format!("tsclient's object: {e}")),
        })
    }
}

/// `program` to run in network namespace `ns` (if any) and control group `group` (if any):
/// the group is joined first, by a shell writing its own pid, since `ip netns exec` hides
/// `/sys/fs/cgroup`.
fn placed(program: &Path, ns: Option<&str>, group: Option<&Group>) -> Command {
    let mut inner: Vec<String> = Vec::new();
    if let Some(ns) = ns {
        inner.extend(["ip".into(), "netns".into(), "exec".into(), ns.into()]);
    }
    inner.push(program.display().to_string());
    match group {
        None => {
            let mut c = Command::new(&inner[0]);
            c.args(&inner[1..]);
            c
        }
        Some(g) => {
            let mut c = Command::new("sh");
            c.args(["-c", "echo $$ > \"$0\" && exec \"$@\""])
                .arg(g.procs())
                .args(&inner);
            c
        }
    }
}

/// A tsserver of one run, killed when dropped.
struct ServerProcess {
    child: Child,
    port: u16,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ServerProcess {
    /// Starts `cmd` with `args` and waits (10 s at most) for its listening line. With
    /// `slow_stdout`, its stdout is a pipe read a line per 0.2 ms (a slow terminal); otherwise
    /// discarded.
    fn start(mut cmd: Command, args: &[&str], slow_stdout: bool) -> Result<ServerProcess> {
        cmd.args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .stdout(if slow_stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = cmd.spawn().context("cannot start tsserver")?;
        let reader = child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    if line.is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().context("no stderr")?;
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let until = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            if let Some(port) = line
                .strip_prefix("tsserver: listening on ")
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
            {
                return Ok(ServerProcess {
                    child,
                    port,
                    reader,
                });
            }
            seen.push(line);
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("tsserver did not start within 10 s: {}", seen.join("; "))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; SIGTERM lets it finish its output.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}
