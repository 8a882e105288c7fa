//! The clock of a timed run (`--time`, `--omit`): a thread that sleeps until each mark and
//! raises its flag, so the sending loop pays one relaxed load per chunk to know, never a clock
//! read or a system call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// A timed run's marks from its first byte: the end of the omitted start, and the end.
pub(crate) struct Alarm {
    flags: Arc<[AtomicBool; 2]>,
    /// Dropped with the alarm: the thread wakes and ends.
    _stop: mpsc::Sender<()>,
}

const OMIT: usize = 0;
const END: usize = 1;

impl Alarm {
    /// Starts the clock now: the omitted start ends after `omit`, the run after `omit + time`.
    pub(crate) fn start(omit: Duration, time: Duration) -> Alarm {
        let flags = Arc::new([AtomicBool::new(omit.is_zero()), AtomicBool::new(false)]);
        let (stop, stopped) = mpsc::channel::<()>();
        let raised = Arc::clone(&flags);
        let spawned = std::thread::Builder::new()
            .name("alarm".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                // It uses no descriptor: with a table of its own it costs the sending thread
                // nothing per call (tsperf_sys::fdtable).
                drop(tsperf_sys::fdtable::leave(&[]));
                for (flag, at) in [(OMIT, omit), (END, omit + time)] {
                    let left = at.saturating_sub(start.elapsed());
                    if !left.is_zero()
                        && !matches!(
                            stopped.recv_timeout(left),
                            Err(mpsc::RecvTimeoutError::Timeout)
                        )
                    {
                        return;
                    }
                    raised[flag].store(true, Ordering::Relaxed);
                }
            });
        if spawned.is_err() {
            // No thread: the run cannot be timed, so it ends at once rather than never.
            for f in flags.iter() {
                f.store(true, Ordering::Relaxed);
            }
        }
        Alarm { flags, _stop: stop }
    }

    /// True once the omitted start is over.
    #[inline]
    pub(crate) fn omit_over(&self) -> bool {
        self.flags[OMIT].load(Ordering::Relaxed)
    }

    /// True once the run's time is up, for whoever looks before each write (the engine's
    /// sender).
    pub(crate) fn watch(&self) -> impl Fn() -> bool + Send + 'static {
        let flags = Arc::clone(&self.flags);
        move || flags[END].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marks are raised in order, and not before their time.
    #[test]
    fn raises_the_omit_mark_then_the_end() {
        let t = std::time::Instant::now();
        let a = Alarm::start(Duration::from_millis(30), Duration::from_millis(30));
        let up = a.watch();
        assert!(!up());
        while !a.omit_over() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(t.elapsed() >= Duration::from_millis(30));
        while !up() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(t.elapsed() >= Duration::from_millis(60));
        let none = Alarm::start(Duration::ZERO, Duration::from_secs(60));
        assert!(none.omit_over() && !none.watch()());
    }
}
