//! CPU time measured from outside, the same way for every tool (issue 33): a client's from the
//! kernel's account when it is reaped (`wait4`'s rusage: every thread, ended or not), a
//! server's as the difference of `/proc/PID/stat` before and after a run. Neither trusts what
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
