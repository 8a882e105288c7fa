//! The session arithmetic: sums, spans, omitted starts, verdicts.

use super::*;

/// A stream as a session sees it: its span, bytes, measured part and verdict.
struct Fake {
    begin_us: u64,
    end_us: u64,
    bytes: u64,
    /// Its omitted start: bytes and time left out.
    omitted: (u64, Duration),
    limited_by: LimitedBy,
}

impl Member for Fake {
    fn span_us(&self) -> (u64, u64) {
        (self.begin_us, self.end_us)
    }
    fn moved(&self) -> u64 {
        self.bytes
    }
    fn measured(&self) -> (u64, Duration) {
        let all = Duration::from_micros(self.end_us - self.begin_us);
        (self.bytes - self.omitted.0, all - self.omitted.1)
    }
    fn limited_by(&self) -> LimitedBy {
        self.limited_by
    }
}

fn fake(begin_us: u64, end_us: u64, bytes: u64, limited_by: LimitedBy) -> Fake {
    Fake {
        begin_us,
        end_us,
        bytes,
        omitted: (0, Duration::ZERO),
        limited_by,
    }
}

fn failed() -> StreamFailure {
    StreamFailure {
        name: "s".into(),
        bytes: Some(100),
        sent: 40,
        acked: None,
        elapsed: None,
        intervals: Vec::new(),
        interrupted: false,
        error: anyhow::anyhow!("lost"),
    }
}

/// A session's bytes are its completed streams' sum; its time runs from the first stream's
/// first byte to the last one's end; a failed stream adds nothing to either.
#[test]
fn a_sessions_bytes_and_time_span_its_completed_streams() {
    let streams = vec![
        Ok(fake(1_000_000, 3_000_000, 500, LimitedBy::Network)),
        Err(failed()),
        Ok(fake(1_500_000, 3_500_000, 700, LimitedBy::Network)),
    ];
    assert_eq!(total(&streams), 1200);
    assert_eq!(elapsed(&streams), Duration::from_millis(2500));
    assert_eq!(measured(&streams), (1200, Duration::from_millis(2500)));
    let none: Vec<Result<Fake, StreamFailure>> = vec![Err(failed())];
    assert_eq!((total(&none), elapsed(&none)), (0, Duration::ZERO));
    assert_eq!(measured(&none), (0, Duration::ZERO));
    assert_eq!(verdict(&none), None);
}

/// With omitted starts, the session's measured time runs from the earliest measured start
/// (each stream's end less its measured time) to the last end, and its bytes are the
/// measured ones.
#[test]
fn omitted_starts_leave_the_session_measured_from_the_earliest_measured_start() {
    let mut a = fake(0, 4_000_000, 1000, LimitedBy::Network);
    a.omitted = (200, Duration::from_secs(1));
    let mut b = fake(500_000, 3_000_000, 800, LimitedBy::Network);
    b.omitted = (100, Duration::from_millis(500));
    let streams: Vec<Result<Fake, StreamFailure>> = vec![Ok(a), Ok(b)];
    // a is measured from 1.0 s, b from 1.0 s: both to 4.0 s.
    assert_eq!(measured(&streams), (1500, Duration::from_secs(3)));
    assert_eq!(
        span([(10, (5, Duration::from_micros(20)))].into_iter()),
        (5, Duration::from_micros(10)),
        "a measured time longer than the end clamps at 0"
    );
}

/// The session's verdict is the one most streams got; on a tie, the first in stream order.
#[test]
fn the_verdict_most_streams_got_wins_and_a_tie_goes_to_the_first() {
    use LimitedBy::{Network, Receiver, Sender};
    assert_eq!(
        most_streams([Sender, Network, Network].into_iter()),
        Some(Network)
    );
    assert_eq!(
        most_streams([Receiver, Network].into_iter()),
        Some(Receiver)
    );
    assert_eq!(most_streams([Network, Receiver].into_iter()), Some(Network));
    assert_eq!(most_streams(std::iter::empty()), None);
}

/// A received session verifies only when the server's passes are the stripes of the whole,
/// in order: a pass that is not its place's share (a whole file where a third was asked,
/// stripes out of order, a stream short) is caught even when each stream agrees with its own
/// trailer.
#[test]
fn a_received_sessions_passes_must_be_the_stripes_of_the_whole() {
    assert!(passes_are_stripes(10, 3, &[3, 3, 4]));
    assert!(passes_are_stripes(
        1_000_003,
        3,
        &[333_334, 333_334, 333_335]
    ));
    assert!(!passes_are_stripes(10, 3, &[10, 10, 10]), "the whole each");
    assert!(!passes_are_stripes(10, 3, &[4, 3, 3]), "out of order");
    assert!(!passes_are_stripes(10, 3, &[3, 3]), "a stream short");
    assert!(
        !passes_are_stripes(2, 3, &[1, 1, 0]),
        "fewer bytes than streams"
    );
}
