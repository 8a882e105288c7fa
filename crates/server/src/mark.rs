//! The receive low-water mark (`SO_RCVLOWAT`) of the server's transfers: when a transfer wants
//! one ([`wake_at`]); on which paths it is used ([`WakeMark`]) and the socket options behind it
//! are `tsperf_sys::mark`'s, shared with the client's reverse receiver.

pub use tsperf_sys::mark::{
    BULK_MARK_MAX, MARK_MIN_MSS, WAKE_BYTES, WakeMark, advertised_mss, bulk_mark, recv_lowat,
};

/// The end of a transfer read with a wake-up threshold of 1: room for [`WAKE_BYTES`] and a
/// whole segment (loopback's MSS is 65483 bytes) that the client's Nagle algorithm may hold
/// back until the server acknowledges what came before. A threshold the client cannot reach
/// without that segment would wait for the server's delayed-ACK timer.
pub const WAKE_TAIL: u64 = wake_tail(WAKE_BYTES);

/// The end of a transfer read with a wake-up threshold of 1 when its bulk mark is `mark`: room
/// for the mark and a whole segment ([`WAKE_TAIL`] for [`WAKE_BYTES`]).
pub const fn wake_tail(mark: u32) -> u64 {
    mark as u64 + (64 << 10)
}

/// The receive low-water mark (`SO_RCVLOWAT`) the next wait for a transfer should use, given
/// its read size, the bytes it has and expects, its log gate and whether the path's segments
/// are large.
///
/// A quarter of a read ([`WAKE_BYTES`] to [`BULK_MARK_MAX`]) while a bulk transfer is in full
/// flow on a path of large segments, so the reader is woken once per 64-256 KiB instead of once
/// per segment: on loopback, waking the reader is a sixth of what a 10240-byte stream costs the
/// sender. For a logged transfer, its log gate
/// (`--log-min-read`, or the rest of the transfer if less), so a client sending a byte at a time
/// does not get a read, and a log line, per byte: a blocking read waits for that many bytes
/// (or its timeout), the event loop is woken only once they are there. Otherwise 1 (the
/// kernel's default): before the first byte, so the first byte is timed when it arrives; for a
/// bulk transfer's last mark and segment ([`wake_tail`]), a logged one's last two gates, and
/// the trailer, so no wait needs bytes that will not come; and when bulk reads are smaller than two
/// thresholds. A non-blocking read returns whatever is waiting either way: the mark only
/// changes wake-ups.
///
/// Why the tails: the kernel wakes a reader only when the bytes *queued* reach the mark, not
/// counting those a blocking read has already copied and holds while it waits for the rest
/// (`tcp_data_ready` against `sk_rcvlowat`). Mid-stream more bytes keep coming and the queue
/// gets there; at the end of a transfer they do not, and a read holding part of the last
/// bytes would sleep until its timeout (seen: 20 bytes copied, 45 queued, a mark of 57).
pub fn wake_at(read_size: usize, bytes: u64, expected: u64, gate: u32, large: bool) -> u32 {
    if bytes == 0 || bytes >= expected {
        return 1;
    }
    let left = expected - bytes;
    if let Some(mark) = bulk_mark(read_size).filter(|&m| large && left >= wake_tail(m)) {
        return mark;
    }
    if gate > 1 && left >= 2 * u64::from(gate) {
        return gate;
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::Receiver;
    use tsperf_proto::Hello;

    fn hello(length: u64) -> Hello {
        Hello::stream(length, 102, "x")
    }

    /// The low-water mark: 1 before the first byte, for the last `WAKE_TAIL` bytes and for
    /// small reads; `WAKE_BYTES` in between.
    #[test]
    fn wake_at_follows_the_transfer() {
        let len = 1 << 20;
        let mut rx = Receiver::new(&hello(len), 256 << 10, 0, tsperf_proto::LogMode::None);
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

        let mut small = Receiver::new(
            &hello(len),
            2 * WAKE_BYTES - 1,
            0,
            tsperf_proto::LogMode::None,
        );
        small.large_segments = true;
        small.count(1);
        assert_eq!(small.wake_at(), 1, "reads smaller than two marks");
        let mut short = Receiver::new(&hello(WAKE_TAIL), 256 << 10, 0, tsperf_proto::LogMode::None);
        short.large_segments = true;
        short.count(1);
        assert_eq!(short.wake_at(), 1, "a transfer shorter than the tail");
        let mut small_segments =
            Receiver::new(&hello(len), 256 << 10, 0, tsperf_proto::LogMode::None);
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
            let mut rx = Receiver::new(&hello(len), read, 0, tsperf_proto::LogMode::None);
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
        let mut rx = Receiver::new(&hello(1000), 1024, 0, tsperf_proto::LogMode::File);
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
        let mut small_reads = Receiver::new(&hello(1000), 16, 0, tsperf_proto::LogMode::Stdout);
        small_reads.set_log_gate(64);
        small_reads.count(1);
        assert_eq!(small_reads.wake_at(), 16, "never more than a read takes");
        let mut unlogged = Receiver::new(&hello(1000), 1024, 0, tsperf_proto::LogMode::None);
        unlogged.set_log_gate(64);
        unlogged.count(1);
        assert_eq!(unlogged.wake_at(), 1, "no gate without a log");
    }
}
