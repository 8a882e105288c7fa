//! Output waiting for a socket, with the write boundaries the protocol asks for.
//!
//! A split-framed latency message must leave in two `write()` calls (prefix, then body), even
//! from the event loop, where output is queued and flushed later. The outbox remembers where
//! each write must end and never writes across such a mark; a partial write keeps its place.
//!
//! What it holds is bounded by its users: the event loop stops reading a latency connection
//! whose unsent answers reach [`LATENCY_CAP`], and bytes already sent are dropped from the
//! front once they are half the buffer, so a client that reads slowly but never stops cannot
//! grow it either.

use std::collections::VecDeque;
use std::io::{self, Write};

use tsperf_proto::clock::{Codec, Framing, PREFIX, TimeResponse, encode_response};
use tsperf_proto::{Frame, encode_frame};

/// Unsent answers at which the event loop stops reading a latency connection until the client
/// takes some: a client that pipelines requests and never reads is then held back by TCP, not
/// by the server's memory.
pub const LATENCY_CAP: usize = 16 << 10;

/// Frames and answers waiting to be written to one connection, and where the writing got to.
#[derive(Default)]
pub struct Outbox {
    buf: Vec<u8>,
    /// Offsets in `buf` where a write must end, ascending.
    marks: VecDeque<usize>,
    sent: usize,
}

impl Outbox {
    /// Queues a frame to go out in one write.
    pub fn frame(&mut self, frame: &Frame) {
        encode_frame(frame, &mut self.buf);
        self.marks.push_back(self.buf.len());
    }

    /// Queues what a conversation's step sends, in one write ([`tsperf_proto::serve::Step::encode_send`]).
    pub fn step(&mut self, step: &tsperf_proto::serve::Step) {
        step.encode_send(&mut self.buf);
        self.marks.push_back(self.buf.len());
    }

    /// Queues bytes to go out in one write (a reverse stream's end: its Sent frame and trailer).
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
        self.marks.push_back(self.buf.len());
    }

    /// Queues a clock response in the session's codec and framing.
    pub fn response(&mut self, r: &TimeResponse, codec: Codec, framing: Framing) {
        let start = self.buf.len();
        encode_response(r, codec, &mut self.buf);
        if framing.splits_response() {
            self.marks.push_back(start + PREFIX);
        }
        self.marks.push_back(self.buf.len());
    }

    /// True when everything queued has been written.
    pub fn is_empty(&self) -> bool {
        self.sent == self.buf.len()
    }

    /// Bytes queued and not yet written.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Drops the bytes already written from the front, once they are half the buffer.
    fn compact(&mut self) {
        if self.sent > 0 && self.sent >= self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            for m in &mut self.marks {
                *m -= self.sent;
            }
            self.sent = 0;
        }
    }

    /// Writes queued output, one write per marked piece, until it is all gone (`Ok(true)`) or
    /// the socket is full (`Ok(false)`).
    pub fn flush<W: Write>(&mut self, w: &mut W) -> io::Result<bool> {
        while self.sent < self.buf.len() {
            let end = self.marks.front().copied().unwrap_or(self.buf.len());
            match w.write(&self.buf[self.sent..end]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    if self.sent == end {
                        self.marks.pop_front();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.compact();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.marks.clear();
        self.sent = 0;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write call, taking at most `cap` bytes per call.
    struct Calls {
        writes: Vec<Vec<u8>>,
        cap: usize,
    }

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.cap);
            self.writes.push(buf[..n].to_vec());
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn resp() -> TimeResponse {
        TimeResponse {
            seq: 1,
            server_recv_unix_ns: 2,
            server_send_unix_ns: 3,
        }
    }

    /// Split framing leaves as two writes per message (prefix, body); single as one.
    #[test]
    fn split_is_two_writes_single_is_one() {
        let mut o = Outbox::default();
        o.response(&resp(), Codec::Binary, Framing::Split);
        o.response(&resp(), Codec::Binary, Framing::Single);
        let mut w = Calls {
            writes: vec![],
            cap: usize::MAX,
        };
        assert!(o.flush(&mut w).unwrap());
        let sizes: Vec<usize> = w.writes.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 24, 28]);
        assert!(o.is_empty());
    }

    /// Takes `cap` bytes per flush, then says WouldBlock, like a socket read slowly.
    struct Slow {
        cap: usize,
        taken: Vec<u8>,
    }

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.cap == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.cap);
            self.cap -= n;
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A peer that always takes a little less than is queued never lets the buffer grow past
    /// twice what is pending, and every byte still leaves in order.
    #[test]
    fn slow_reader_does_not_grow_the_buffer() {
        let mut o = Outbox::default();
        let mut w = Slow {
            cap: 0,
            taken: vec![],
        };
        let mut expect = Vec::new();
        for i in 0..10_000u64 {
            let r = TimeResponse { seq: i, ..resp() };
            o.response(&r, Codec::Binary, Framing::Split);
            encode_response(&r, Codec::Binary, &mut expect);
            w.cap = 27;
            let _ = o.flush(&mut w).unwrap();
            assert!(
                o.buf.len() <= 2 * o.pending() + 28,
                "{} for {}",
                o.buf.len(),
                o.pending()
            );
        }
        w.cap = usize::MAX;
        assert!(o.flush(&mut w).unwrap());
        assert_eq!(w.taken, expect);
    }

    /// A short write resumes where it stopped and still never crosses a mark.
    #[test]
    fn partial_writes_keep_place() {
        let mut o = Outbox::default();
        o.response(&resp(), Codec::Binary, Framing::Split);
        let mut w = Calls {
            writes: vec![],
            cap: 3,
        };
        assert!(o.flush(&mut w).unwrap());
        let sizes: Vec<usize> = w.writes.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 1, 3, 3, 3, 3, 3, 3, 3, 3]);
        let all: Vec<u8> = w.writes.concat();
        let mut expect = Vec::new();
        encode_response(&resp(), Codec::Binary, &mut expect);
        assert_eq!(all, expect);
    }
}
