//! How long the loop's next poll waits, and the ticker that lets it wait without a timeout.

use std::time::{Duration, Instant};

use mio::{Interest, Poll, Token};
use tsperf_sys::tick::Ticker;

/// A ticker every `tick`, registered with `poll` as `token`; None if either fails (the waits
/// then time out at `tick`).
pub(super) fn ticker(poll: &Poll, token: Token, tick: Duration) -> Option<Ticker> {
    use std::os::fd::AsRawFd;
    let t = Ticker::every(tick).ok()?;
    poll.registry()
        .register(
            &mut mio::unix::SourceFd(&t.as_raw_fd()),
            token,
            Interest::READABLE,
        )
        .ok()?;
    Some(t)
}

/// The next poll's timeout: none while connections wait to be served again (`ready`); until a
/// stop's next step (`stop`), at most `tick`; else none at all with a ticker (it wakes the loop
/// for its deadlines, and a wait with a timeout would arm a kernel timer every time), or
/// `tick` without one.
pub(super) fn next(
    ready: bool,
    stop: Option<Instant>,
    ticker: bool,
    tick: Duration,
) -> Option<Duration> {
    if ready {
        Some(Duration::ZERO)
    } else if let Some(t) = stop {
        Some(t.saturating_duration_since(Instant::now()).min(tick))
    } else if ticker {
        None
    } else {
        Some(tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(500);

    /// A loop with a ticker waits without a timeout unless it has work queued or a stop to
    /// step; without one it wakes every tick.
    #[test]
    fn waits_without_a_timeout_when_a_ticker_wakes_it() {
        assert_eq!(next(false, None, true, TICK), None);
        assert_eq!(next(false, None, false, TICK), Some(TICK));
        assert_eq!(next(true, None, true, TICK), Some(Duration::ZERO));
        let soon = Instant::now() + Duration::from_millis(50);
        let w = next(false, Some(soon), true, TICK).unwrap();
        assert!(w <= Duration::from_millis(50), "{w:?}");
        let late = Instant::now() + Duration::from_secs(60);
        assert_eq!(next(false, Some(late), true, TICK), Some(TICK));
    }

    /// The ticker wakes a poll that waits without a timeout.
    #[test]
    fn the_ticker_wakes_the_poll() {
        let mut poll = Poll::new().unwrap();
        let t = ticker(&poll, Token(7), Duration::from_millis(20)).unwrap();
        let mut events = mio::Events::with_capacity(4);
        let start = Instant::now();
        while events.is_empty() {
            poll.poll(&mut events, Some(Duration::from_secs(10)))
                .unwrap();
            assert!(start.elapsed() < Duration::from_secs(10), "no tick");
        }
        assert_eq!(events.iter().next().map(|e| e.token()), Some(Token(7)));
        assert!(t.clear() >= 1);
    }
}
