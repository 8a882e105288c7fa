//! The receive low-water mark (`SO_RCVLOWAT`), all of it: when a transfer wants one
//! ([`wake_at`]), on which paths it is used ([`WakeMark`]), and the socket options behind it.

use std::io;

/// Bytes that must be waiting before the kernel wakes the reader of a bulk transfer in full
/// flow (see [`Receiver::wake_at`](crate::receiver::Receiver::wake_at)).
pub const WAKE_BYTES: u32 = 64 << 10;

/// The end of a transfer read with a wake-up threshold of 1: room for [`WAKE_BYTES`] and a
/// whole segment (loopback's MSS is 65483 bytes) that the client's Nagle algorithm may hold
/// back until the server acknowledges what came before. A threshold the client cannot reach
/// without that segment would wait for the server's delayed-ACK timer.
pub const WAKE_TAIL: u64 = WAKE_BYTES as u64 + (64 << 10);

/// The receive low-water mark (`SO_RCVLOWAT`) the next wait for a transfer should use, given
/// its read size, the bytes it has and expects, its log gate and whether the path's segments
/// are large.
///
/// [`WAKE_BYTES`] while a bulk transfer is in full flow on a path of large segments, so the
/// reader is woken once per 64 KiB instead of once per segment: on loopback, waking the reader
/// is a sixth of what a 10240-byte stream costs the sender. For a logged transfer, its log gate
/// (`--log-min-read`, or the rest of the transfer if less), so a client sending a byte at a time
/// does not get a read, and a log line, per byte: a blocking read waits for that many bytes
/// (or its timeout), the event loop is woken only once they are there. Otherwise 1 (the
/// kernel's default): before the first byte, so the first byte is timed when it arrives; for a
/// bulk transfer's last [`WAKE_TAIL`] bytes, a logged one's last two gates, and the trailer,
/// so no wait needs bytes that will not come; and when bulk reads are smaller than two
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
    if large && read_size >= 2 * WAKE_BYTES as usize && left >= WAKE_TAIL {
        return WAKE_BYTES;
    }
    if gate > 1 && left >= 2 * u64::from(gate) {
        return gate;
    }
    1
}

/// Segments at least this large (the receiver's advertised MSS) make a connection use the
/// receive low-water mark ([`WakeMark`]).
pub const MARK_MIN_MSS: u32 = 16 << 10;

/// A connection's receive low-water mark, kept where its transfer wants it
/// ([`Receiver::wake_at`](crate::receiver::Receiver::wake_at)).
///
/// A bulk mark only on paths with large segments (loopback's MSS is 65483): there each segment wakes the
/// reader, and the mark took the server's CPU per 36 MiB at 1024-byte chunks from ~18 to ~7 ms
/// and receiver throughput up 7-20%. With 1448-byte segments (the emulated gigabit LAN, two
/// network namespaces on one host) a mark of 16, 32 or 64 KiB sent 7-8 of 15 transfers at
/// 1024-byte chunks into a slow mode (70-80 MiB/s instead of 114, client CPU 0.5 s instead of
/// 0.04): a reader that sleeps until the mark leaves all of the receive processing to the
/// softirq on the sender's CPU, and the sender fell behind for good. So there it stays 1.
///
/// A mark above 1 also waits until the receive buffer is at least four times the mark: to fit
/// a larger mark the kernel grows the buffer and clamps the receive window to the mark, and a
/// window no larger than the mark stalled transfers until the delayed-ACK timer fired (36 MiB
/// in 270 ms instead of 16 with a 128 KiB mark set on a fresh 128 KiB buffer).
pub struct WakeMark {
    set: u32,
    usable: bool,
}

impl WakeMark {
    /// The kernel's default mark (1), usable if `stream`'s segments are large enough.
    pub fn new<S: std::os::fd::AsFd>(stream: &S) -> WakeMark {
        WakeMark {
            set: 1,
            usable: advertised_mss(stream).is_some_and(|m| m >= MARK_MIN_MSS),
        }
    }

    /// True while the mark is above 1: the socket raises no event for fewer bytes.
    pub fn raised(&self) -> bool {
        self.set > 1
    }

    /// True if the path's segments are large enough for a bulk mark (the receiver's
    /// `large_segments`).
    pub fn usable(&self) -> bool {
        self.usable
    }

    /// Sets the mark `want` (a transfer's
    /// [`Receiver::wake_at`](crate::receiver::Receiver::wake_at)), if it differs from the one
    /// set.
    pub fn follow<S: std::os::fd::AsFd>(&mut self, stream: &S, want: u32) {
        if want == self.set || (want > 1 && tsperf_sys::net::recv_buffer(stream) < 4 * want) {
            return;
        }
        if recv_lowat(stream, want).is_ok() {
            self.set = want;
        }
    }
}

/// Sets the socket's receive low-water mark (`SO_RCVLOWAT`): the kernel wakes a reader, and
/// poll reports the socket readable, only once `bytes` are waiting (or the connection ended, or
/// the receive window is nearly full). A read still returns whatever is there. Fewer, fuller
/// wake-ups: on loopback each wake-up of the reader costs the sender's CPU a few microseconds.
pub fn recv_lowat<S: std::os::fd::AsFd>(sock: &S, bytes: u32) -> io::Result<()> {
    tsperf_sys::net::set_int(
        sock,
        libc::SOL_SOCKET,
        libc::SO_RCVLOWAT,
        bytes.min(i32::MAX as u32) as libc::c_int,
    )
}

/// The MSS this end advertised to its peer (Linux `TCP_INFO`'s `tcpi_advmss`): the largest
/// segment that can arrive, 65483 on loopback, 1448 on an Ethernet path. None elsewhere or if
/// the kernel will not say.
pub fn advertised_mss<S: std::os::fd::AsFd>(sock: &S) -> Option<u32> {
    let mss = tsperf_sys::tcpinfo::TcpInfo::of(sock)?.receiver().advmss?;
    u32::try_from(mss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::Receiver;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
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

    fn readable(s: &TcpStream, ms: i32) -> bool {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, count 1.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        assert!(n >= 0, "poll failed");
        n == 1 && p.revents & libc::POLLIN != 0
    }

    /// Below its low-water mark a socket does not poll readable, yet a read returns what is
    /// there; at the mark it polls readable.
    #[test]
    fn recv_lowat_holds_back_wakeups_not_data() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        recv_lowat(&s, 4096).unwrap();
        c.write_all(&[7u8; 1000]).unwrap();
        assert!(!readable(&s, 200), "readable below the mark");
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 8192];
        assert_eq!(s.read(&mut buf).unwrap(), 1000);
        c.write_all(&[7u8; 4096]).unwrap();
        assert!(readable(&s, 10_000), "not readable at the mark");
        assert_eq!(s.read(&mut buf).unwrap(), 4096);
    }

    /// Loopback's segments are large (its MTU is 64 KiB).
    #[test]
    fn loopback_advertises_a_large_mss() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mss = advertised_mss(&s).unwrap();
        assert!(mss >= MARK_MIN_MSS, "{mss}");
    }
}
