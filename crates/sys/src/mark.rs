//! The receive low-water mark (`SO_RCVLOWAT`) of a bulk reader, the server's of a forward
//! stream and the client's of a reverse one: the socket options behind it and when a path may
//! use one ([`WakeMark`]). When a server's transfer wants which mark is the server's own
//! policy (tsperf-server's `mark::wake_at`).

use std::io;

/// Bytes that must be waiting before the kernel wakes the reader of a bulk transfer in full
/// flow: the server's for a forward stream (its receiver's `wake_at`). (A client receiving a
/// reverse stream raises its own to a read's worth, 256 KiB: tsperf-client's
/// `reverse::WAKE_MARK`.)
pub const WAKE_BYTES: u32 = 64 << 10;

/// The most a bulk reader's mark rises to: a quarter of the server event loop's 1 MiB read
/// ([`tsperf_proto::LOOP_READ`]). Reads of up to 256 KiB (the blocking model's) keep
/// [`WAKE_BYTES`].
///
/// Measured (issue 33), `tsclient --chunk C --bytes 1G` to two event-loop servers alternating,
/// 64 KiB against 256 KiB, 9 pairs, per pair: at 128 KiB writes 2.01x the rate (2109 against
/// 3972 MiB/s), the server's CPU 0.60x and the client's 0.55x; at 10240 B 1.19x, 0.72x, 0.87x.
/// On loopback each wake-up of the reader is work in the sender's context (why the rate
/// doubles at 128 KiB on bbr was not looked into further).
pub const BULK_MARK_MAX: u32 = 256 << 10;

/// The mark of a bulk reader in full flow that reads `read_size` bytes at a time: a quarter of
/// a read, from [`WAKE_BYTES`] to [`BULK_MARK_MAX`]; None for reads smaller than two
/// [`WAKE_BYTES`], which keep the kernel's 1. The server's for a forward stream
/// (tsperf-server's `mark::wake_at`) and the floor loops' reader (tsperf-lab's `floor`).
pub fn bulk_mark(read_size: usize) -> Option<u32> {
    (read_size >= 2 * WAKE_BYTES as usize).then(|| {
        u32::try_from(read_size / 4)
            .unwrap_or(u32::MAX)
            .clamp(WAKE_BYTES, BULK_MARK_MAX)
    })
}

/// Segments at least this large (the receiver's advertised MSS) make a connection use the
/// receive low-water mark ([`WakeMark`]).
pub const MARK_MIN_MSS: u32 = 16 << 10;

/// A connection's receive low-water mark, kept where its reader wants it (the server's
/// transfer's `wake_at`; a client's reverse stream, its own mark).
///
/// A bulk mark only on paths with large segments (loopback's MSS is 65483): there each segment
/// wakes the reader, and the wake-up is paid on the sender's CPU. The server's mark on a forward
/// stream took its CPU per 36 MiB at 1024-byte chunks from ~18 to ~7 ms and receiver throughput up
/// 7-20%; the client's on a reverse stream of 1 GiB at 10240-byte chunks took the sending server's
/// CPU from 0.61 to 0.47 s per GiB and the rate up 1.25x (medians of 9 alternating pairs,
/// loopback). With 1448-byte segments (the emulated gigabit LAN, two network namespaces on one
/// host) a mark of 16, 32 or 64 KiB sent 7-8 of 15 transfers at 1024-byte chunks into a slow mode
/// (70-80 MiB/s instead of 114, client CPU 0.5 s instead of 0.04): a reader that sleeps until the
/// mark leaves all of the receive processing to the softirq on the sender's CPU, and the sender
/// fell behind for good. So there it stays 1.
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

    /// The mark set now, bytes (1: the kernel's default).
    pub fn get(&self) -> u32 {
        self.set
    }

    /// True if the path's segments are large enough for a bulk mark.
    pub fn usable(&self) -> bool {
        self.usable
    }

    /// Sets the mark `want` (for the server's transfers, its receiver's `wake_at`; for a
    /// client receiving a reverse stream, its own mark throughout), if it differs from the
    /// one set.
    pub fn follow<S: std::os::fd::AsFd>(&mut self, stream: &S, want: u32) {
        if want == self.set || (want > 1 && crate::net::recv_buffer(stream) < 4 * want) {
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
    crate::net::set_int(
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
    let mss = crate::tcpinfo::TcpInfo::of(sock)?.receiver().advmss?;
    u32::try_from(mss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use crate::test_util::readable;

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

    /// A mark is raised only on a path of large segments, and only once the receive buffer is
    /// four times it; then the socket holds it.
    #[test]
    fn a_mark_needs_large_segments_and_room() {
        use socket2::{Domain, SockRef, Socket, Type};
        let lowat =
            |s: &TcpStream| crate::net::get_int(s, libc::SOL_SOCKET, libc::SO_RCVLOWAT).unwrap();
        // Loopback, a small buffer: usable, not raised; a large one: raised.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        SockRef::from(&c).set_recv_buffer_size(16 << 10).unwrap();
        let mut m = WakeMark::new(&c);
        assert!(m.usable());
        m.follow(&c, WAKE_BYTES);
        assert!(!m.raised());
        assert_eq!((m.get(), lowat(&c)), (1, 1));
        SockRef::from(&c).set_recv_buffer_size(1 << 20).unwrap();
        m.follow(&c, WAKE_BYTES);
        assert!(m.raised());
        assert_eq!(
            (m.get(), lowat(&c)),
            (WAKE_BYTES, WAKE_BYTES as libc::c_int)
        );
        // Segments of 1200 bytes (an MSS set before connecting): not usable.
        let small = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        crate::net::set_int(&small, libc::IPPROTO_TCP, libc::TCP_MAXSEG, 1200).unwrap();
        small.connect(&l.local_addr().unwrap().into()).unwrap();
        let small: TcpStream = small.into();
        assert!(!WakeMark::new(&small).usable());
        drop(l);
    }
}
