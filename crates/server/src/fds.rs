//! File descriptors: the server's limit, how many connections fit in it, and what happens if
//! `accept` runs out anyway.
//!
//! At start the soft `RLIMIT_NOFILE` is raised to the hard limit (as nginx and most servers
//! do), and `--max-clients` is lowered to what fits in it: each connection holds its socket,
//! one more with `--save` (the file being written), and one more with `--blocking` (the clone a
//! shutdown uses to cut it off), beside [`RESERVE`] descriptors for the server itself.
//!
//! Should `accept` still fail for want of a descriptor (another process exhausting the
//! system's table, say), the waiting connection is not left unanswered: a descriptor kept in
//! reserve ([`Spare`]) is given up for one `accept`, the connection is told why and closed, and
//! the reserve is taken back. Repeated failures are logged at most once a second ([`Backoff`]).

use std::fs::File;
use std::io;
use std::time::{Duration, Instant};

use tracing::warn;

/// Descriptors kept for the server itself: standard streams, listener, poll, waker, log file,
/// save directory, the spare, and a margin.
pub const RESERVE: u64 = 32;

/// Raises the soft descriptor limit to the hard limit; returns the soft limit now in force.
pub fn raise_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit on a local rlimit struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        // An unlimited hard limit cannot be the soft one for descriptors; 1 Mi is the kernel's
        // usual nr_open.
        let want = if lim.rlim_max == libc::RLIM_INFINITY {
            1 << 20
        } else {
            lim.rlim_max
        };
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return want;
            }
        }
        lim.rlim_cur
    }
}

/// Descriptors one connection may hold at once.
pub fn per_connection(blocking: bool, save: bool) -> u64 {
    1 + u64::from(blocking) + u64::from(save)
}

/// The most connections whose descriptors fit in `limit` beside the server's own.
pub fn fitting(limit: u64, per_connection: u64) -> usize {
    (limit.saturating_sub(RESERVE) / per_connection.max(1)) as usize
}

/// True for the errors of running out of descriptors (per process or system-wide).
pub fn exhausted(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The reason given to a connection accepted with the spare descriptor.
pub const OUT_OF_DESCRIPTORS: &str = "server busy: it is out of file descriptors; try again later";

/// One descriptor held in reserve for telling a connection why it cannot be served.
pub struct Spare(Option<File>);

impl Spare {
    /// Keeps one descriptor open, to lend.
    pub fn new() -> Spare {
        Spare(File::open("/dev/null").ok())
    }

    /// Frees the reserved descriptor for `f` (one accept and its refusal), then takes it back.
    /// False if there was none to free.
    pub fn lend<T>(&mut self, f: impl FnOnce() -> T) -> Option<T> {
        self.0.take()?;
        let result = f();
        self.0 = File::open("/dev/null").ok();
        Some(result)
    }
}

impl Default for Spare {
    fn default() -> Spare {
        Spare::new()
    }
}

/// Pauses between failed accepts, growing to a second, and logs them at most once a second.
#[derive(Default)]
pub struct Backoff {
    pause: Duration,
    last_log: Option<Instant>,
    unlogged: u64,
}

impl Backoff {
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// Notes a failed accept; returns how long to pause before the next.
    pub fn failed(&mut self, e: &io::Error) -> Duration {
        self.pause = (self.pause * 2).clamp(Duration::from_millis(10), Self::MAX);
        if self
            .last_log
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            match std::mem::take(&mut self.unlogged) {
                0 => warn!("accept failed: {e}"),
                n => warn!("accept failed: {e} (and {n} more times since the last report)"),
            }
            self.last_log = Some(Instant::now());
        } else {
            self.unlogged += 1;
        }
        self.pause
    }

    /// Notes a successful accept.
    pub fn ok(&mut self) {
        self.pause = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pauses double from 10 ms to a second and start again after a success.
    #[test]
    fn backoff_grows_and_resets() {
        let mut b = Backoff::default();
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<u64> = (0..9).map(|_| b.failed(&e).as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.ok();
        assert_eq!(b.failed(&e), Duration::from_millis(10));
        assert!(exhausted(&e) && !exhausted(&io::Error::from_raw_os_error(libc::EINTR)));
    }

    /// What fits: the reserve comes off the top, and each connection's descriptors count.
    #[test]
    fn fitting_counts_descriptors() {
        assert_eq!(fitting(1024, per_connection(false, false)), 992);
        assert_eq!(fitting(1024, per_connection(true, true)), 330);
        assert_eq!(fitting(10, 1), 0);
    }

    /// The spare is lent for one call and taken back.
    #[test]
    fn spare_is_lent_and_returned() {
        let mut s = Spare::new();
        assert_eq!(s.lend(|| 7), Some(7));
        assert_eq!(s.lend(|| 8), Some(8));
    }
}
