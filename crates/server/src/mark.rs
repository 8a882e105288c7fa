//! The receive low-water mark (`SO_RCVLOWAT`) of the server's transfers: when a transfer wants
//! one ([`wake_at`], the engine's); on which paths it is used ([`WakeMark`]) and the socket options behind it
//! are `tsperf_sys::mark`'s, shared with the client's reverse receiver.

pub use tsperf_stream::receive::mark::{WAKE_TAIL, wake_at, wake_tail};
pub use tsperf_sys::mark::{
    BULK_MARK_MAX, MARK_MIN_MSS, WAKE_BYTES, WakeMark, advertised_mss, bulk_mark, recv_lowat,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::new as receiver;
    use tsperf_proto::Hello;

    fn hello(length: u64) -> Hello {
        Hello::stream(length, 102, "x")
    }

    /// The low-water mark: 1 before the first byte, for the last `WAKE_TAIL` bytes and for
    /// small reads; `WAKE_BYTES` in between.
    #[test]
    fn wake_at_follows_the_transfer() {
        let len = 1 << 20;
        let mut rx = receiver(&hello(len), 256 << 10, 0, tsperf_proto::LogMode::None);
        rx.large_segments = true;
        assert_eq!(rx.wake_at(), 1, "before the first byte");
        rx.count(1);
        assert_eq!(rx.wake_at(), WAKE_BYTES);
        rx.count((len - WAKE_TAIL - 1) as usize);
        assert_eq!(rx.wake_at(), WAKE_BYTES, "exactly the tail left");
        rx.count(1);
        assert_eq!(rx.wake_at(), 1, "inside the tail");
        rx.count((WAKE_TAIL - 1) as usize);
        assert!(rx.is_complete());
        assert_eq!(rx.wake_at(), 1, "complete: the trailer follows");

        let mut small = receiver(
            &hello(len),
            2 * WAKE_BYTES - 1,
            0,
            tsperf_proto::LogMode::None,
        );
        small.large_segments = true;
        small.count(1);
        assert_eq!(small.wake_at(), 1, "reads smaller than two marks");
        let mut short = receiver(&hello(WAKE_TAIL), 256 << 10, 0, tsperf_proto::LogMode::None);
        short.large_segments = true;
        short.count(1);
        assert_eq!(short.wake_at(), 1, "a transfer shorter than the tail");
        let mut small_segments = receiver(&hello(len), 256 << 10, 0, tsperf_proto::LogMode::None);
        small_segments.count(1);
        assert_eq!(
            small_segments.wake_at(),
            1,
            "no bulk mark on small segments"
        );
    }

    /// Issue 33: the bulk mark is a quarter of a read, from `WAKE_BYTES` (reads of up to
    /// 256 KiB, the blocking model's) to `BULK_MARK_MAX` (the event loop's 1 MiB), its tail
    /// that mark and a segment.
    #[test]
    fn the_bulk_mark_is_a_quarter_of_a_read() {
        for (read, mark) in [
            (2 * WAKE_BYTES, WAKE_BYTES),
            (256 << 10, WAKE_BYTES),
            (512 << 10, 128 << 10),
            (1 << 20, BULK_MARK_MAX),
            (4 << 20, BULK_MARK_MAX),
        ] {
            let len = 8 << 20;
            let mut rx = receiver(&hello(len), read, 0, tsperf_proto::LogMode::None);
            rx.large_segments = true;
            rx.count(1);
            assert_eq!(rx.wake_at(), mark, "reads of {read}");
            let tail = wake_tail(mark);
            rx.count((len - tail - 1) as usize);
            assert_eq!(rx.wake_at(), mark, "reads of {read}: exactly the tail left");
            rx.count(1);
            assert_eq!(rx.wake_at(), 1, "reads of {read}: inside the tail");
        }
        assert_eq!(BULK_MARK_MAX, 256 << 10);
    }

    /// Issue 23 (3): a logged transfer's mark is its log gate after the first byte (whatever
    /// the segments) until two gates are left, then 1, and 1 once complete.
    #[test]
    fn logged_transfers_wait_for_their_log_gate() {
        let mut rx = receiver(&hello(1000), 1024, 0, tsperf_proto::LogMode::File);
        rx.set_log_gate(64);
        assert_eq!(rx.wake_at(), 1, "before the first byte");
        rx.count(1);
        assert_eq!(rx.wake_at(), 64);
        rx.count(871);
        assert_eq!(rx.wake_at(), 64, "exactly two gates left");
        rx.count(1);
        assert_eq!(
            rx.wake_at(),
            1,
            "the tail: no wait for bytes that may not come"
        );
        rx.count(127);
        assert_eq!(rx.wake_at(), 1, "complete: the trailer follows");
        let mut small_reads = receiver(&hello(1000), 16, 0, tsperf_proto::LogMode::Stdout);
        small_reads.set_log_gate(64);
        small_reads.count(1);
        assert_eq!(small_reads.wake_at(), 16, "never more than a read takes");
        let mut unlogged = receiver(&hello(1000), 1024, 0, tsperf_proto::LogMode::None);
        unlogged.set_log_gate(64);
        unlogged.count(1);
        assert_eq!(unlogged.wake_at(), 1, "no gate without a log");
    }
}
