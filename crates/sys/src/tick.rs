//! A periodic wake-up for an event loop that waits without a timeout ([`Ticker`]).
//!
//! An `epoll_wait` given a timeout arms a kernel timer on every wait and cancels it when an
//! event comes first: on a busy loop that is a timer armed and cancelled per wake-up (about
//! 3000 a second for one 1024-byte stream on loopback, 93% of the machine's `hrtimer_start`
//! calls). A timer file armed once, period after period, wakes the loop as often as its
//! deadlines need and costs nothing per wait. Measured (issue 33): tsserver before and after
//! (its loop waiting on a ticker), two servers alternating, `tsclient --chunk 1024` on the
//! 36 MiB file, the receiver's rate per pair: 1.08x with both ends on one CPU (11 pairs), 1.05x
//! and 1.03x unpinned (11 and 15 pairs), 1.03x at 10240-byte chunks (15 pairs).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

/// A timer file (`timerfd`, `CLOCK_MONOTONIC`, non-blocking) that becomes readable once per
/// period until dropped. Register its descriptor with the loop's poll; on its event call
/// [`Ticker::clear`].
#[derive(Debug)]
pub struct Ticker {
    fd: OwnedFd,
}

impl Ticker {
    /// A ticker with this period (at least 1 ms), its first tick one period from now.
    pub fn every(period: Duration) -> io::Result<Ticker> {
        use rustix::time::{
            Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, timerfd_create,
            timerfd_settime,
        };
        let period = period.max(Duration::from_millis(1));
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let spec = rustix::time::Timespec {
            tv_sec: period.as_secs() as _,
            tv_nsec: period.subsec_nanos() as _,
        };
        let when = Itimerspec {
            it_interval: spec,
            it_value: spec,
        };
        timerfd_settime(&fd, TimerfdTimerFlags::empty(), &when)?;
        Ok(Ticker { fd })
    }

    /// Takes the ticks that came (so the descriptor is not readable until the next one);
    /// returns how many, 0 if none was waiting.
    pub fn clear(&self) -> u64 {
        let mut count = [0u8; 8];
        match rustix::io::read(&self.fd, &mut count) {
            Ok(8) => u64::from_ne_bytes(count),
            _ => 0,
        }
    }
}

impl AsFd for Ticker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Ticker {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_util::readable;

    /// The ticker is readable each period, again after it is cleared, and not in between.
    #[test]
    fn ticks_every_period_until_cleared() {
        let t = Ticker::every(Duration::from_millis(20)).unwrap();
        assert_eq!(t.clear(), 0, "no tick before the first period");
        for _ in 0..3 {
            assert!(readable(&t, 5_000), "a tick within the wait");
            assert!(t.clear() >= 1);
            assert!(
                !readable(&t, 0),
                "cleared: not readable until the next tick"
            );
        }
    }
}
