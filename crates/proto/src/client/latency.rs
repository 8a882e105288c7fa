//! The client's side of a latency session, without I/O: it numbers the requests, encodes each
//! in the session's codec and framing, and reads each answer: its sequence checked, its round
//! trip and the clock offset it gives. The driver hands in the times (the monotonic one for the
//! round trip, the wall clock for the offset) and does the reads and writes.

use std::time::{Duration, Instant};

use crate::clock::{
    Codec, END_OF_ANSWERS, Framing, Offset, PREFIX, TimeRequest, decode_response, encode_request,
    split_message,
};
use crate::{FRAME_HEADER, Frame, ProtocolError, decode_frame};

/// One answered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// The request's number.
    pub seq: u64,
    /// From the request's start to its answer.
    pub rtt: Duration,
    /// The server's clock against ours, from this request's four times.
    pub offset: Offset,
}

/// What the bytes read so far come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Not a whole answer yet: read this many more bytes (at least 1), no more.
    Need(usize),
    /// The answer, and the bytes it took.
    Answered(Answer, usize),
}

/// Why an answer is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LatencyError {
    /// Its bytes do not decode.
    #[error("bad answer from the server: {0}")]
    Bad(#[from] ProtocolError),
    /// It answers another request.
    #[error("the server answered request {got} when {asked} was asked")]
    OutOfOrder {
        /// The number it answers.
        got: u64,
        /// The request in flight.
        asked: u64,
    },
    /// Bytes came with no request in flight.
    #[error("the server sent an answer when no request was in flight")]
    Unasked,
    /// The server ended the session, and said why ([`crate::clock::END_OF_ANSWERS`]).
    #[error("the server ended the session: {0}")]
    Ended(String),
}

/// The client's side of one latency session (one or, with reconnects, many connections: the
/// requests are numbered across them).
#[derive(Debug)]
pub struct LatencyConversation {
    codec: Codec,
    framing: Framing,
    next: u64,
    /// The request in flight: its number and when it left, on both clocks.
    in_flight: Option<(u64, Instant, u64)>,
}

impl LatencyConversation {
    /// A session in `codec`, its requests written as `framing` says.
    pub fn new(codec: Codec, framing: Framing) -> LatencyConversation {
        LatencyConversation {
            codec,
            framing,
            next: 0,
            in_flight: None,
        }
    }

    /// The next request, started at `start` (monotonic) and leaving at `unix_ns` (the wall
    /// clock): its bytes replace `out`'s, and the answer is the offset where a second write
    /// begins when the framing splits the request (its length prefix alone first), else `None`.
    pub fn request(&mut self, start: Instant, unix_ns: u64, out: &mut Vec<u8>) -> Option<usize> {
        let seq = self.next;
        self.next += 1;
        self.in_flight = Some((seq, start, unix_ns));
        out.clear();
        let r = TimeRequest {
            seq,
            client_send_unix_ns: unix_ns,
        };
        encode_request(&r, self.codec, out);
        self.framing.splits_request().then_some(PREFIX)
    }

    /// The answer's bytes read so far, `buf`, at `now` (`unix_ns` on the wall clock): how many
    /// more to read, or the answer.
    pub fn on_bytes(
        &mut self,
        buf: &[u8],
        now: Instant,
        unix_ns: u64,
    ) -> Result<Read, LatencyError> {
        if let Some(rest) = buf.strip_prefix(&END_OF_ANSWERS) {
            return ended(rest);
        }
        let (body, used) = match split_message(buf)? {
            Some(whole) => whole,
            None if buf.len() < PREFIX => return Ok(Read::Need(PREFIX - buf.len())),
            None => {
                let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                return Ok(Read::Need(PREFIX + len - buf.len()));
            }
        };
        let resp = decode_response(body, self.codec)?;
        let (asked, start, t1) = self.in_flight.ok_or(LatencyError::Unasked)?;
        if resp.seq != asked {
            return Err(LatencyError::OutOfOrder {
                got: resp.seq,
                asked,
            });
        }
        self.in_flight = None;
        let answer = Answer {
            seq: asked,
            rtt: now.saturating_duration_since(start),
            offset: Offset::of(
                t1,
                resp.server_recv_unix_ns,
                resp.server_send_unix_ns,
                unix_ns,
            ),
        };
        Ok(Read::Answered(answer, used))
    }
}

/// The server's end of the session, `rest` of it read after [`END_OF_ANSWERS`]: how much more
/// to read, or its reason.
fn ended(rest: &[u8]) -> Result<Read, LatencyError> {
    match decode_frame(rest)? {
        Some((Frame::Abort(why), _)) => Err(LatencyError::Ended(why)),
        Some(_) => Err(LatencyError::Bad(ProtocolError::BadMessage(
            "the end of the answers is followed by a frame other than an Abort".to_owned(),
        ))),
        None if rest.len() < FRAME_HEADER => Ok(Read::Need(FRAME_HEADER - rest.len())),
        None => {
            let body = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
            Ok(Read::Need(FRAME_HEADER + body - rest.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{TimeResponse, encode_response};

    fn answer(seq: u64, codec: Codec) -> Vec<u8> {
        let mut out = Vec::new();
        let r = TimeResponse {
            seq,
            server_recv_unix_ns: 1_000_500,
            server_send_unix_ns: 1_000_600,
        };
        encode_response(&r, codec, &mut out);
        out
    }

    /// Requests are numbered from 0 and split where the framing says; an answer read a byte at
    /// a time asks for exactly what it lacks, then gives its round trip and offset.
    #[test]
    fn requests_and_answers() {
        for (codec, framing) in [
            (Codec::Binary, Framing::Single),
            (Codec::Object, Framing::SplitRequest),
        ] {
            let mut c = LatencyConversation::new(codec, framing);
            let t0 = Instant::now();
            let mut out = Vec::new();
            let split = c.request(t0, 1_000_000, &mut out);
            assert_eq!(split, framing.splits_request().then_some(PREFIX));
            let wire = answer(0, codec);
            let mut have = 0;
            let later = t0 + Duration::from_micros(1200);
            loop {
                match c.on_bytes(&wire[..have], later, 1_001_200).unwrap() {
                    Read::Need(n) => {
                        assert!(n >= 1 && have + n <= wire.len(), "{n} at {have}");
                        have += 1;
                    }
                    Read::Answered(a, used) => {
                        assert_eq!((a.seq, used, have), (0, wire.len(), wire.len()));
                        assert_eq!(a.rtt, Duration::from_micros(1200));
                        assert_eq!(
                            a.offset,
                            Offset::of(1_000_000, 1_000_500, 1_000_600, 1_001_200)
                        );
                        break;
                    }
                }
            }
            c.request(later, 1_001_300, &mut out);
            assert_eq!(
                c.on_bytes(&answer(5, codec), later, 0),
                Err(LatencyError::OutOfOrder { got: 5, asked: 1 })
            );
        }
    }

    /// An answer nobody asked for, and bytes that are not one, are errors.
    #[test]
    fn unasked_and_bad_answers() {
        let mut c = LatencyConversation::new(Codec::Binary, Framing::Single);
        let now = Instant::now();
        assert_eq!(
            c.on_bytes(&answer(0, Codec::Binary), now, 0),
            Err(LatencyError::Unasked)
        );
        c.request(now, 0, &mut Vec::new());
        assert!(matches!(
            c.on_bytes(&[0, 0, 0, 0, 1, 0, 0], now, 0),
            Err(LatencyError::Bad(_))
        ));
    }

    /// Issue 51 (8): the server's end of the session, read a byte at a time, asks for exactly
    /// what it lacks, then gives the server's reason.
    #[test]
    fn the_servers_end_gives_its_reason() {
        let mut wire = Vec::new();
        crate::clock::encode_end_of_answers("the server is shutting down", &mut wire);
        let mut c = LatencyConversation::new(Codec::Object, Framing::Split);
        let now = Instant::now();
        c.request(now, 0, &mut Vec::new());
        let mut have = 0;
        loop {
            match c.on_bytes(&wire[..have], now, 0) {
                Ok(Read::Need(n)) => {
                    assert!(n >= 1 && have + n <= wire.len(), "{n} at {have}");
                    have += 1;
                }
                Err(e) => {
                    assert_eq!(have, wire.len());
                    assert_eq!(e, LatencyError::Ended("the server is shutting down".into()));
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
