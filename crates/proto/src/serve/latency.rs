//! The server's side of latency mode: answer each clock request as soon as it is whole.
//!
//! The driver reads into [`LatencySession::space`], hands over the byte count, its wall clock
//! and where answers go ([`Answers`]) with [`LatencySession::filled`], then writes them out.

use crate::clock::{
    Codec, Framing, MAX_MESSAGE, PREFIX, TimeResponse, decode_request, split_message,
};
use crate::{Hello, ProtocolError};

/// Where a session's answers go: the driver's output, which keeps each answer's writes (one
/// with framing `single`, the prefix and the body apart with `split`).
pub trait Answers {
    /// Queues the answer `r`, encoded and framed so.
    fn answer(&mut self, r: &TimeResponse, codec: Codec, framing: Framing);
}

/// One latency connection's state.
#[derive(Debug)]
pub struct LatencySession {
    /// How message bodies are encoded.
    pub codec: Codec,
    /// One write per message or two.
    pub framing: Framing,
    /// The client asked for TCP_NODELAY.
    pub nodelay: bool,
    buf: Box<[u8; PREFIX + MAX_MESSAGE]>,
    have: usize,
    /// Requests answered so far.
    pub requests: u64,
}

impl LatencySession {
    /// A session for an accepted latency hello (its codec and framing were validated).
    pub fn new(hello: &Hello) -> LatencySession {
        LatencySession {
            codec: Codec::from_code(hello.codec).unwrap_or(Codec::Binary),
            framing: Framing::from_code(hello.framing).unwrap_or(Framing::Single),
            nodelay: hello.nodelay,
            buf: Box::new([0; PREFIX + MAX_MESSAGE]),
            have: 0,
            requests: 0,
        }
    }

    /// Where the next read goes.
    pub fn space(&mut self) -> &mut [u8] {
        &mut self.buf[self.have..]
    }

    /// True when no partial request is pending: the peer may close here cleanly.
    pub fn at_boundary(&self) -> bool {
        self.have == 0
    }

    /// Accounts for `n` bytes read into [`LatencySession::space`] and queues an answer for every
    /// request now whole, stamped with `clock` (the wall clock in ns since the epoch) as they
    /// arrived and as each is sent. A bad request ends the session with the reason.
    pub fn filled(
        &mut self,
        n: usize,
        clock: &mut dyn FnMut() -> u64,
        out: &mut dyn Answers,
    ) -> Result<(), ProtocolError> {
        let recv = clock();
        self.have += n;
        let mut at = 0;
        while let Some((body, used)) = split_message(&self.buf[at..self.have])? {
            let req = decode_request(body, self.codec)?;
            let resp = TimeResponse {
                seq: req.seq,
                server_recv_unix_ns: recv,
                server_send_unix_ns: clock(),
            };
            out.answer(&resp, self.codec, self.framing);
            self.requests += 1;
            at += used;
        }
        self.buf.copy_within(at..self.have, 0);
        self.have -= at;
        Ok(())
    }

    /// The server's account of a finished session: `12 clock queries (codec binary, ...)`.
    pub fn summary(&self) -> String {
        format!(
            "{} {} (codec {:?}, framing {:?}, nodelay {})",
            self.requests,
            if self.requests == 1 {
                "clock query"
            } else {
                "clock queries"
            },
            self.codec,
            self.framing,
            if self.nodelay { "on" } else { "off" }
        )
        .to_lowercase()
    }
}
