//! CPU time measured from outside, the same way for every tool (issue 33): a client's from the
//! kernel's account when it is reaped (`wait4`'s rusage: every thread, ended or not), a
//! server's as the difference of its threads' `schedstat` before and after a run (nanoseconds;
//! `/proc/PID/stat`'s ticks where a thread ended meanwhile, [`Threads`]). Neither trusts what
//! the tool says of itself, so tsperf and iperf3 are held to one ruler.

use std::io::Read;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// User plus system CPU of process `pid`, every thread live or ended, in seconds (clock ticks,
/// 10 ms on most kernels).
pub fn process_cpu_s(pid: u32) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime is field 14 and stime 15 (1-based), i.e. 11 and 12 after the state field.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11) + ticks(12)) as f64 / hz)
}

/// CPU time of the live threads of process `pid`, seconds with nanosecond resolution (the
/// first field of each `/proc/PID/task/TID/schedstat`); threads that ended are not in it, so
/// it is a baseline taken before work starts, to subtract from [`reap`]'s total.
pub fn live_threads_cpu_s(pid: u32) -> Result<f64> {
    let dir = format!("/proc/{pid}/task");
    let mut ns = 0u64;
    for task in std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread may end between the listing and the read.
        if let Ok(text) = std::fs::read_to_string(&path) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(ns as f64 / 1e9)
}

/// A process's CPU at one moment: each live thread's, nanoseconds by thread id
/// (`/proc/PID/task/TID/schedstat`), and the whole process's in clock ticks, ended threads
/// included ([`process_cpu_s`]). Two of them give a server's CPU over a run
/// ([`Threads::since`]).
pub struct Threads {
    live: Vec<(u32, u64)>,
    ticks_s: f64,
}

impl Threads {
    /// Process `pid`'s threads now.
    pub fn of(pid: u32) -> Result<Threads> {
        let ticks_s = process_cpu_s(pid)?;
        let dir = format!("/proc/{pid}/task");
        let mut live = Vec::new();
        for task in std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir}"))? {
            let task = task?;
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread may end between the listing and the read.
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat"))
                && let Some(ns) = text.split_whitespace().next().and_then(|v| v.parse().ok())
            {
                live.push((tid, ns));
            }
        }
        Ok(Threads { live, ticks_s })
    }

    /// The CPU seconds the process used since `before`: its threads' nanoseconds, a thread
    /// born meanwhile from zero; but where the process's ticks moved more than two ticks past
    /// that, a thread ended during the run and took its time out of the live threads' sum,
    /// and the ticks (10 ms resolution) are the figure.
    pub fn since(&self, before: &Threads) -> f64 {
        let was = |tid: u32| {
            before
                .live
                .iter()
                .find(|(t, _)| *t == tid)
                .map_or(0, |b| b.1)
        };
        let ns: u64 = self
            .live
            .iter()
            .map(|&(tid, ns)| ns.saturating_sub(was(tid)))
            .sum();
        let live = ns as f64 / 1e9;
        let ticks = (self.ticks_s - before.ticks_s).max(0.0);
        // SAFETY: sysconf has no preconditions.
        let tick = 1.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        if ticks > live + 2.0 * tick {
            ticks
        } else {
            live
        }
    }
}

/// Kills `child` and reaps it with `wait4`: the kernel's account of all the CPU it used, every
/// thread, ended or not, in seconds (microsecond resolution).
pub fn reap(mut child: std::process::Child) -> Result<f64> {
    let _ = child.kill();
    Ok(wait_rusage(child)?.1)
}

/// Waits for `child` with `wait4`: its wait status and the CPU it used (user plus system,
/// every thread), seconds. The child is consumed, so std never waits on its pid again.
fn wait_rusage(child: std::process::Child) -> Result<(libc::c_int, f64)> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = loop {
        // SAFETY: wait4(2) on our own child with live out-pointers; `child` is forgotten
        // below, so the pid is reaped exactly once.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break r;
        }
    };
    std::mem::forget(child);
    if got != pid {
        bail!(
            "cannot reap process {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((status, secs(usage.ru_utime) + secs(usage.ru_stime)))
}

/// This process's CPU time so far (`getrusage`, every thread), seconds.
pub fn own_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage(2) with a live out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// What a measured run printed, how it exited, and the CPU it took.
#[derive(Debug)]
pub struct Measured {
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// It exited 0.
    pub success: bool,
    /// User plus system CPU of the whole process (rusage at `wait4`), seconds.
    pub cpu_s: f64,
}

/// Runs `cmd` to its end (stdin empty, stdout and stderr captured) and reaps it with `wait4`, so
/// its CPU is the kernel's account of every thread it had.
pub fn run_measured(cmd: &mut Command) -> Result<Measured> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the measured command")?;
    let mut out = child.stdout.take().context("no stdout")?;
    let mut err = child.stderr.take().context("no stderr")?;
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout)
        .context("cannot read the command's output")?;
    let stderr = reader.join().unwrap_or_default();
    let (status, cpu_s) = wait_rusage(child)?;
    Ok(Measured {
        stdout,
        stderr,
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu_s,
    })
}

/// The soft hrtimer expiries of every CPU so far (the `HRTIMER` row of `/proc/softirqs`); 0
/// where the kernel does not say. TCP's pacing timer is one: a run's difference counts the
/// times a paced sender had to wait for its next segment's time.
pub fn hrtimer_softirqs() -> u64 {
    std::fs::read_to_string("/proc/softirqs").map_or(0, |t| softirq_row(&t, "HRTIMER"))
}

/// The sum over every CPU of `row` in the text of `/proc/softirqs`.
fn softirq_row(text: &str, row: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix(row)?.strip_prefix(':'))
        .flat_map(|counts| counts.split_whitespace())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads' nanoseconds where they account for the process's ticks; the ticks where a
    /// thread ended during the run took its time with it.
    #[test]
    fn a_servers_cpu_is_its_threads_unless_one_ended() {
        let at = |live: &[(u32, u64)], ticks_s: f64| Threads {
            live: live.to_vec(),
            ticks_s,
        };
        let before = at(&[(1, 1_000_000_000), (2, 500_000_000)], 1.50);
        // Both threads ran 12.345 ms between them; the ticks moved one.
        let after = at(&[(1, 1_010_000_000), (2, 502_345_000)], 1.51);
        assert!((after.since(&before) - 0.012345).abs() < 1e-9);
        // A thread born during the run counts from zero.
        let after = at(
            &[(1, 1_010_000_000), (2, 500_000_000), (3, 7_000_000)],
            1.51,
        );
        assert!((after.since(&before) - 0.017).abs() < 1e-9);
        // Thread 2 ended after 140 ms more: the ticks say so, the live threads cannot.
        let after = at(&[(1, 1_010_000_000)], 1.65);
        assert!((after.since(&before) - 0.15).abs() < 1e-9);
        // This process, a thread made to work: measured to the nanosecond.
        let me = std::process::id();
        let before = Threads::of(me).unwrap();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(t.elapsed());
        }
        let used = Threads::of(me).unwrap().since(&before);
        // Not a whole number of 10 ms ticks: nanoseconds.
        assert!(used > 0.0 && (used * 100.0).fract() != 0.0, "{used}");
    }

    /// The row of every CPU is summed; another row or a longer name is not counted.
    #[test]
    fn softirq_rows_are_summed_over_cpus() {
        let text = "                    CPU0       CPU1
                              HI:          1          0
                           TIMER:     441012     396145
                         HRTIMER:       8163       4285
                       HRTIMERX:          7          7
                             RCU:     901231     855555
";
        assert_eq!(softirq_row(text, "HRTIMER"), 12448);
        assert_eq!(softirq_row(text, "TIMER"), 837157);
        assert_eq!(softirq_row(text, "NONE"), 0);
        let a = hrtimer_softirqs();
        assert!(hrtimer_softirqs() >= a);
    }

    /// A child that burns CPU is charged for it, its output is kept, its exit code read.
    #[test]
    fn a_child_is_charged_its_cpu() {
        let m = run_measured(Command::new("sh").args([
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; exit 3",
        ]))
        .unwrap();
        assert_eq!(m.stdout, b"done\n");
        assert!(!m.success);
        assert!(m.cpu_s > 0.0, "{m:?}");
        assert!(process_cpu_s(std::process::id()).unwrap() >= 0.0);
        assert!(live_threads_cpu_s(std::process::id()).unwrap() > 0.0);
        let busy = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; sleep 30",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(reap(busy).unwrap() > 0.0);
    }
}
