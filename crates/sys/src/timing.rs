//! Clocks. Intervals are measured with [`Instant`](std::time::Instant); wall-clock time from [`SystemTime`] is used
//! only for the timestamps people compare across hosts (the seed's `begin sec[..]` lines and the
//! report's first/last byte). CPU time comes from `getrusage`.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, now.
pub fn unix_us_now() -> u64 {
    unix_us(SystemTime::now())
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_ns_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Microseconds since the Unix epoch; 0 for times before it.
pub fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now_rfc3339() -> String {
    rfc3339(unix_us_now() / 1_000_000)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub fn rfc3339(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A wall-clock instant printed as the seed printed it: `begin sec[1433750824], microsec[847467]`.
pub struct Stamp<'a> {
    /// `begin` or `end`.
    pub label: &'a str,
    /// The wall clock, µs since the epoch.
    pub unix_us: u64,
}

impl fmt::Display for Stamp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sec[{}], microsec[{}]",
            self.label,
            self.unix_us / 1_000_000,
            self.unix_us % 1_000_000
        )
    }
}

/// A span's wall time less the calling thread's CPU time in it: the time it slept (on a
/// disk, say). Two clock reads and two `getrusage` calls: once per file block, not per chunk.
pub struct OffCpu {
    at: std::time::Instant,
    cpu: CpuTime,
}

impl OffCpu {
    /// Starts the span now.
    pub fn start() -> OffCpu {
        OffCpu {
            cpu: CpuTime::thread(),
            at: std::time::Instant::now(),
        }
    }

    /// The span's time off the CPU so far.
    pub fn stop(self) -> Duration {
        let wall = self.at.elapsed();
        let cpu = CpuTime::thread().since(self.cpu);
        wall.saturating_sub(cpu.user + cpu.sys)
    }
}

/// CPU time consumed, split as the kernel accounts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// In user mode.
    pub user: Duration,
    /// In kernel mode.
    pub sys: Duration,
}

impl CpuTime {
    /// CPU time of the whole process so far.
    pub fn process() -> CpuTime {
        rusage(libc::RUSAGE_SELF)
    }

    /// CPU time of the calling thread so far (Linux); the process's elsewhere.
    pub fn thread() -> CpuTime {
        #[cfg(target_os = "linux")]
        {
            rusage(libc::RUSAGE_THREAD)
        }
        #[cfg(not(target_os = "linux"))]
        {
            rusage(libc::RUSAGE_SELF)
        }
    }

    /// The CPU time spent since `earlier`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }
}

/// The calling thread's CPU time so far, to the nanosecond (`CLOCK_THREAD_CPUTIME_ID`: the
/// kernel brings a running thread's count up to date when asked, where `getrusage` and
/// schedstat lag by up to a tick); zero if the clock cannot be read.
pub fn thread_cpu_clock() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// Where the calling thread's time went as the scheduler counts it (Linux's
/// `/proc/thread-self/schedstat`): on a CPU, and runnable but waiting for one. The rest of a
/// span is time it slept (in a blocking call, in poll). A CPU quota (cgroup `cpu.cfs_quota_us`)
/// that throttles the thread shows as run-queue wait: the thread stays runnable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    /// On a CPU (`sum_exec_runtime`; updated at the scheduler's events, so up to a tick behind
    /// for a thread that is running).
    pub on_cpu: Duration,
    /// Runnable, waiting for a CPU (`run_delay`).
    pub run_queue: Duration,
}

impl SchedStat {
    /// The calling thread's counts so far; `None` where the kernel does not keep them.
    pub fn thread() -> Option<SchedStat> {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        SchedStat::parse(&s)
    }

    /// Parses schedstat's line: `on_cpu_ns run_delay_ns timeslices`.
    pub fn parse(line: &str) -> Option<SchedStat> {
        let mut f = line.split_whitespace().map(|v| v.parse::<u64>().ok());
        Some(SchedStat {
            on_cpu: Duration::from_nanos(f.next()??),
            run_queue: Duration::from_nanos(f.next()??),
        })
    }

    /// The counts since `earlier`.
    pub fn since(self, earlier: SchedStat) -> SchedStat {
        SchedStat {
            on_cpu: self.on_cpu.saturating_sub(earlier.on_cpu),
            run_queue: self.run_queue.saturating_sub(earlier.run_queue),
        }
    }
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we own.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return CpuTime::default();
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    CpuTime {
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's CPU clock counts a busy loop shorter than a tick (which rusage reads as 0).
    #[test]
    fn the_thread_cpu_clock_counts_a_short_spin() {
        let before = thread_cpu_clock();
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_micros(500) {
            std::hint::spin_loop();
        }
        assert!(thread_cpu_clock() > before);
    }

    /// Linux keeps the run-queue wait of every thread, and this reads it.
    #[test]
    #[cfg(target_os = "linux")]
    fn run_queue_wait_is_read() {
        let wait = SchedStat::thread()
            .expect("/proc/thread-self/schedstat")
            .run_queue;
        assert!(wait < Duration::from_secs(3600), "{wait:?}");
        assert_eq!(
            SchedStat::parse("4522185 757921 278\n"),
            Some(SchedStat {
                on_cpu: Duration::from_nanos(4_522_185),
                run_queue: Duration::from_nanos(757_921),
            })
        );
        assert_eq!(SchedStat::parse("12"), None);
        assert_eq!(SchedStat::parse("x 1 2"), None);
    }

    /// The stamp keeps the seed's exact format, microseconds unpadded as its printf wrote them.
    #[test]
    fn stamp_format() {
        let s = Stamp {
            label: "begin",
            unix_us: 1_433_750_824_047_467,
        };
        assert_eq!(s.to_string(), "begin sec[1433750824], microsec[47467]");
    }

    /// Dates render in UTC, across leap years and the epoch.
    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_433_750_824), "2015-06-08T08:07:04Z");
        assert_eq!(rfc3339(1_795_977_675), "2026-11-29T18:41:15Z");
    }

    /// CPU time only moves forward, and `since` never underflows.
    #[test]
    fn cpu_time_monotonic() {
        let a = CpuTime::process();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = CpuTime::process();
        assert!(b.user >= a.user && b.sys >= a.sys);
        assert_eq!(a.since(b), CpuTime::default());
    }
}
