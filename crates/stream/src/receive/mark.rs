//! The receive low-water mark (`SO_RCVLOWAT`) a transfer wants ([`wake_at`]); on which paths
//! it is used and the socket options behind it are `tsperf_sys::mark`'s.

use tsperf_sys::mark::{WAKE_BYTES, bulk_mark};

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
/// A quarter of a read ([`WAKE_BYTES`] to [`tsperf_sys::mark::BULK_MARK_MAX`]) while a bulk transfer is in full
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
