//! Output waiting for a socket, with the write boundaries the protocol asks for.
//!
//! A split-framed latency message must leave in two `write()` calls (prefix, then body), even
//! from the event loop, where output is queued and flushed later. The outbox remembers where
//! each write must end and never writes across such a mark; a partial write keeps its place.

use std::collections::VecDeque;
use std::io::{self, Write};

use crate::protocol::clock::{Codec, Framing, PREFIX, TimeResponse, encode_response};
use crate::protocol::{Frame, encode_frame};

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

    /// Queues a clock response in the session's codec and framing.
    pub fn response(&mut self, r: &TimeResponse, codec: Codec, framing: Framing) {
        let start = self.buf.len();
        encode_response(r, codec, &mut self.buf);
        if framing == Framing::Split {
            self.marks.push_back(start + PREFIX);
        }
        self.marks.push_back(self.buf.len());
    }

    /// True when everything queued has been written.
    pub fn is_empty(&self) -> bool {
        self.sent == self.buf.len()
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
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
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
