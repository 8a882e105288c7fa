//! One connection's conversation with its client, without I/O: bytes in, frames and an outcome
//! out. Both server models drive it, so the hello, the authentication, the admission, the
//! trailer and the report, every deadline and every reason given to a client or printed, are
//! one piece of code and say the same words whichever model serves.
//!
//! The I/O model reads and writes; the conversation decides. For the small pieces (hello,
//! authentication answer, trailer) the model reads into [`Conversation::space`] and hands over
//! the count with [`Conversation::received`]; for a transfer's data it reads through
//! [`crate::receiver::Block`] into [`Conversation::receiver`] and reports the turn with
//! [`Conversation::data_turn`]; a latency session is [`Conversation::latency`]. Every call that
//! can end the connection returns a [`Step`]: a frame to send, and the outcome once it is over.
//!
//! Deadlines count from a start ([`Conversation::deadline`]): the hello and the authentication
//! answer from the accept of the connection, the first byte (or request) from the server's
//! Accept frame, and after that each wait from the last byte.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Instant;

use super::latency::LatencySession;
use super::receiver::{ReadEnd, Receiver};
use super::{
    AUTH_FAILED, Outcome, SHUTTING_DOWN, ServerConfig, admit, finish_latency, finish_transfer,
    incomplete, save_failed, start_transfer,
};
use tsperf_proto::clock::{Codec, TimeResponse, decode_request};
use tsperf_proto::{CLOCK_QUERY, Frame, Hello, MAX_HELLO, Mode, ServerIo, TRAILER, decode_hello};
use tsperf_sys::text::Peer;
use tsperf_sys::timing::unix_ns_now;

/// What the conversation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The hello: read into [`Conversation::space`].
    Hello,
    /// The answer to the authentication challenge: read into [`Conversation::space`].
    Auth,
    /// A stream's clock queries, before its data: read into [`Conversation::space`].
    Clock,
    /// The transfer's data: read into [`Conversation::receiver`].
    Data,
    /// The client's digest after the data: read into [`Conversation::space`].
    Trailer,
    /// Clock requests: [`Conversation::latency`].
    Latency,
    /// Over: the outcome has been returned.
    Done,
}

/// What one event led to: a frame to send the client, and the outcome once the conversation is
/// over (send the frame first).
#[derive(Debug, Default)]
#[must_use]
pub struct Step {
    /// The frame to send, first.
    pub send: Option<Frame>,
    /// The outcome, once the conversation is over.
    pub end: Option<Outcome>,
}

impl Step {
    fn send(frame: Frame) -> Step {
        Step {
            send: Some(frame),
            end: None,
        }
    }

    fn end(frame: Option<Frame>, outcome: Outcome) -> Step {
        Step {
            send: frame,
            end: Some(outcome),
        }
    }

    fn refuse(reason: String) -> Step {
        Step::end(
            Some(Frame::Refuse(reason.clone())),
            Outcome::Refused(reason),
        )
    }
}

enum State {
    Hello {
        buf: Box<[u8; MAX_HELLO + 1]>,
        have: usize,
    },
    Auth {
        hello: Hello,
        challenge: [u8; tsperf_sys::auth::LEN],
        buf: [u8; tsperf_sys::auth::LEN],
        have: usize,
    },
    Clock {
        hello: Hello,
        rx: Box<Receiver>,
        buf: [u8; CLOCK_QUERY],
        have: usize,
        /// The sequence number of the query due next.
        next: u8,
    },
    Data {
        hello: Hello,
        rx: Box<Receiver>,
    },
    Trailer {
        hello: Hello,
        rx: Box<Receiver>,
        buf: [u8; TRAILER],
        have: usize,
    },
    Latency {
        session: Box<LatencySession>,
    },
    Done,
}

/// One connection's conversation.
pub struct Conversation {
    state: State,
    peer: SocketAddr,
    server_io: ServerIo,
    deadline: Instant,
}

impl Conversation {
    /// A connection accepted at `now` from `peer`, served by `server_io`.
    pub fn new(
        peer: SocketAddr,
        server_io: ServerIo,
        cfg: &ServerConfig,
        now: Instant,
    ) -> Conversation {
        Conversation {
            state: State::Hello {
                buf: Box::new([0; MAX_HELLO + 1]),
                have: 0,
            },
            peer,
            server_io,
            deadline: now + cfg.hello_timeout,
        }
    }

    /// What the conversation waits for now.
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Hello { .. } => Phase::Hello,
            State::Auth { .. } => Phase::Auth,
            State::Clock { .. } => Phase::Clock,
            State::Data { .. } => Phase::Data,
            State::Trailer { .. } => Phase::Trailer,
            State::Latency { .. } => Phase::Latency,
            State::Done => Phase::Done,
        }
    }

    /// When the current wait ends: past it, call [`Conversation::timed_out`].
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True while no transfer or latency session has begun (a shutdown refuses these at once).
    pub fn not_started(&self) -> bool {
        matches!(self.state, State::Hello { .. } | State::Auth { .. })
    }

    /// Where the next bytes of the hello, the authentication answer, a clock query or the
    /// trailer go (empty in the other phases).
    pub fn space(&mut self) -> &mut [u8] {
        match &mut self.state {
            State::Hello { buf, have } => &mut buf[*have..],
            State::Auth { buf, have, .. } => &mut buf[*have..],
            State::Clock { buf, have, .. } => &mut buf[*have..],
            State::Trailer { buf, have, .. } => &mut buf[*have..],
            _ => &mut [],
        }
    }

    /// `n` bytes arrived in [`Conversation::space`]; 0 means the client closed. `socket` is
    /// asked for its receive buffer when the report is made.
    pub fn received(
        &mut self,
        n: usize,
        cfg: &ServerConfig,
        now: Instant,
        socket: &impl AsFd,
    ) -> Step {
        match &mut self.state {
            State::Hello { have, .. } if n == 0 => Step::refuse(if *have == 0 {
                "connection closed without a hello".to_owned()
            } else {
                format!("connection closed after {have} bytes of a hello")
            }),
            State::Hello { buf, have } => {
                *have += n;
                match decode_hello(&buf[..*have]) {
                    Ok(Some((hello, used))) if used == *have => self.hello(hello, cfg, now),
                    Ok(Some(_)) => {
                        Step::refuse("data arrived before the server accepted the hello".into())
                    }
                    Ok(None) => Step::default(),
                    Err(e) => Step::refuse(e.to_string()),
                }
            }
            State::Auth { .. } if n == 0 => {
                Step::refuse("connection closed before its authentication answer".into())
            }
            State::Auth {
                challenge,
                buf,
                have,
                ..
            } => {
                *have += n;
                if *have < buf.len() {
                    return Step::default();
                }
                if !cfg.auth.as_ref().is_some_and(|k| k.verify(challenge, buf)) {
                    return Step::refuse(AUTH_FAILED.to_owned());
                }
                let State::Auth { hello, .. } = std::mem::replace(&mut self.state, State::Done)
                else {
                    unreachable!("matched above");
                };
                self.admit(hello, cfg, now)
            }
            State::Clock { .. } if n == 0 => {
                self.stop("the client closed during its clock queries", false)
            }
            State::Clock { .. } => self.clock_query(n),
            State::Trailer { .. } if n == 0 => {
                self.stop("the client closed before sending its digest", false)
            }
            State::Trailer { buf, have, .. } => {
                *have += n;
                if *have < TRAILER {
                    return Step::default();
                }
                let digest = u64::from_be_bytes(*buf);
                self.finish(digest, socket)
            }
            _ => Step::default(),
        }
    }

    /// A complete hello: challenge it, or admit it.
    fn hello(&mut self, hello: Hello, cfg: &ServerConfig, now: Instant) -> Step {
        if cfg.auth.is_none() {
            return self.admit(hello, cfg, now);
        }
        let challenge = tsperf_sys::auth::challenge();
        self.state = State::Auth {
            hello,
            challenge,
            buf: [0; tsperf_sys::auth::LEN],
            have: 0,
        };
        Step::send(Frame::Challenge(challenge))
    }

    /// `n` more bytes of a clock query: once it is whole, the answer, stamped with the server's
    /// clock on arrival and on sending. After the last query the data is due.
    fn clock_query(&mut self, n: usize) -> Step {
        let received = unix_ns_now();
        let State::Clock {
            buf, have, next, ..
        } = &mut self.state
        else {
            return Step::default();
        };
        *have += n;
        if *have < CLOCK_QUERY {
            return Step::default();
        }
        *have = 0;
        let seq = match decode_request(buf, Codec::Binary) {
            Ok(q) if q.seq == u64::from(*next) => q.seq,
            Ok(q) => {
                let why = format!("clock query {} arrived when {next} was due", q.seq);
                return self.stop(&why, true);
            }
            Err(e) => return self.stop(&format!("bad clock query: {e}"), true),
        };
        *next += 1;
        let done =
            matches!(&self.state, State::Clock { hello, next, .. } if *next >= hello.clock_queries);
        if done {
            let State::Clock { hello, rx, .. } = std::mem::replace(&mut self.state, State::Done)
            else {
                unreachable!("matched above");
            };
            self.state = State::Data { hello, rx };
        }
        Step::send(Frame::Time(TimeResponse {
            seq,
            server_recv_unix_ns: received,
            server_send_unix_ns: unix_ns_now(),
        }))
    }

    /// Accepts a (authenticated) hello the server will serve, or refuses it with the reason.
    fn admit(&mut self, hello: Hello, cfg: &ServerConfig, now: Instant) -> Step {
        let admitted = match admit(&hello, cfg) {
            Ok(a) => a,
            Err(reason) => return Step::refuse(reason),
        };
        self.state = match hello.mode {
            Mode::Stream => match start_transfer(&hello, admitted, self.peer, cfg) {
                Ok(rx) if hello.clock_queries > 0 => State::Clock {
                    hello,
                    rx: Box::new(rx),
                    buf: [0; CLOCK_QUERY],
                    have: 0,
                    next: 0,
                },
                Ok(rx) => State::Data {
                    hello,
                    rx: Box::new(rx),
                },
                Err(reason) => return Step::refuse(reason),
            },
            Mode::Latency => State::Latency {
                session: Box::new(LatencySession::new(&hello)),
            },
        };
        // The clock queries and the first byte (or request) are due within the hello timeout of
        // the accept.
        self.deadline = now + cfg.hello_timeout;
        Step::send(Frame::Accept {
            read_size: admitted.read_size,
            server_io: self.server_io,
            log: admitted.log,
            stdout: cfg.stdout,
        })
    }

    /// The transfer's accounting, while its data is read.
    pub fn receiver(&mut self) -> Option<&mut Receiver> {
        match &mut self.state {
            State::Data { rx, .. } => Some(rx),
            _ => None,
        }
    }

    /// A turn of data reads ended with `end`, having read `got` bytes. A blocking model's
    /// timeout is not an end here: it calls [`Conversation::timed_out`].
    pub fn data_turn(&mut self, end: ReadEnd, got: u64, cfg: &ServerConfig, now: Instant) -> Step {
        if got > 0 {
            self.deadline = now + cfg.idle_timeout;
        }
        let State::Data { hello, rx } = &mut self.state else {
            return Step::default();
        };
        match end {
            ReadEnd::WouldBlock | ReadEnd::TurnOver => Step::default(),
            ReadEnd::Complete => {
                let State::Data { hello, rx } = std::mem::replace(&mut self.state, State::Done)
                else {
                    unreachable!("matched above");
                };
                self.state = State::Trailer {
                    hello,
                    rx,
                    buf: [0; TRAILER],
                    have: 0,
                };
                Step::default()
            }
            // Nobody left to tell.
            ReadEnd::Eof if super::stopping() => self.stop(SHUTTING_DOWN, false),
            ReadEnd::Eof => self.stop("the client closed the connection", false),
            ReadEnd::Error(e) => self.stop(&e.to_string(), true),
            ReadEnd::Sink(e) => {
                let why = save_failed(hello, &e);
                rx.discard();
                self.stop(&why, true)
            }
        }
    }

    /// True while the transfer's data is read and its per-read lines go to stdout: both models
    /// read it only while stdout has room for a turn's lines.
    pub fn logs_to_stdout(&self) -> bool {
        matches!(&self.state, State::Data { rx, .. } if rx.log() == tsperf_proto::LogMode::Stdout)
    }

    /// The latency session, once accepted.
    pub fn latency(&mut self) -> Option<&mut LatencySession> {
        match &mut self.state {
            State::Latency { session } => Some(session),
            _ => None,
        }
    }

    /// A latency client sent a request or took answers at `now`: it is not idle.
    pub fn busy_at(&mut self, cfg: &ServerConfig, now: Instant) {
        if matches!(&self.state, State::Latency { session } if session.requests > 0) {
            self.deadline = now + cfg.idle_timeout;
        }
    }

    /// A request arrived at `now` (the first one replaces the accept's deadline).
    pub fn request_at(&mut self, cfg: &ServerConfig, now: Instant) {
        self.deadline = now + cfg.idle_timeout;
    }

    /// A latency session ended: the client closed (`why` is `None`) or `why`.
    pub fn end_latency(&mut self, why: Option<String>) -> Outcome {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Latency { session } => finish_latency(&session, self.peer, why),
            _ => Outcome::Incomplete(why.unwrap_or_default()),
        }
    }

    /// A bad clock request ends the session.
    pub fn bad_request(&mut self, e: &dyn std::fmt::Display) -> Outcome {
        self.end_latency(Some(format!("bad request: {e}")))
    }

    /// Answers could not be written.
    pub fn cannot_answer(&mut self, e: &std::io::Error) -> Outcome {
        self.end_latency(Some(format!("cannot answer: {e}")))
    }

    /// A read failed with `e` (not a timeout: [`Conversation::timed_out`]).
    pub fn read_failed(&mut self, e: &std::io::Error) -> Step {
        match &self.state {
            State::Hello { .. } => Step::refuse(format!("error reading the hello: {e}")),
            State::Auth { .. } => Step::refuse(format!("no authentication answer ({e})")),
            State::Clock { .. } | State::Data { .. } | State::Trailer { .. } => {
                self.stop(&e.to_string(), true)
            }
            State::Latency { .. } => Step::end(None, self.end_latency(Some(e.to_string()))),
            State::Done => Step::default(),
        }
    }

    /// The deadline passed. `log_wait`: a logged transfer waits for room on stdout; `unsent`:
    /// answers wait for a latency client to take them.
    pub fn timed_out(&mut self, cfg: &ServerConfig, log_wait: bool, unsent: bool) -> Step {
        let hello = cfg.hello_timeout.as_secs_f64();
        let idle = cfg.idle_timeout.as_secs_f64();
        match &self.state {
            State::Hello { .. } => Step::refuse(format!("no complete hello within {hello} s")),
            State::Auth { .. } => Step::refuse(format!(
                "no authentication answer within {hello} s of the connection"
            )),
            State::Clock { hello: h, next, .. } => self.stop(
                &format!(
                    "{next} of {} clock queries within {hello} s of the accept",
                    h.clock_queries
                ),
                true,
            ),
            State::Data { rx, .. } if rx.bytes() == 0 => {
                self.stop(&format!("no data within {hello} s of the accept"), true)
            }
            State::Data { .. } if log_wait => self.stop(
                &format!("its log output (stdout) was not taken for {idle} s"),
                true,
            ),
            State::Data { .. } => self.stop(&format!("no data for {idle} s"), true),
            State::Trailer { .. } => {
                self.stop(&format!("no digest after the data for {idle} s"), true)
            }
            State::Latency { session } => {
                let why = if unsent {
                    format!("the client took no answer for {idle} s")
                } else if session.requests == 0 && session.at_boundary() {
                    format!("no request within {hello} s of the accept")
                } else {
                    format!("no request for {idle} s")
                };
                Step::end(None, self.end_latency(Some(why)))
            }
            State::Done => Step::end(
                None,
                Outcome::Incomplete("the client did not take its reply".into()),
            ),
        }
    }

    /// Ends the conversation now for `why` (a shutdown), telling the client where the protocol
    /// allows and removing any partly saved file.
    pub fn abort(&mut self, why: &str) -> Step {
        match &self.state {
            State::Hello { .. } | State::Auth { .. } => Step::refuse(why.to_owned()),
            State::Clock { .. } | State::Data { .. } | State::Trailer { .. } => {
                self.stop(why, true)
            }
            State::Latency { .. } => Step::end(None, self.end_latency(Some(why.to_owned()))),
            State::Done => Step::default(),
        }
    }

    /// Ends a transfer short of its end for `why`; `tell`: with an Abort frame saying so.
    fn stop(&mut self, why: &str, tell: bool) -> Step {
        let outcome = match &mut self.state {
            State::Clock { hello, rx, .. }
            | State::Data { hello, rx }
            | State::Trailer { hello, rx, .. } => incomplete(hello, rx, why),
            _ => Outcome::Incomplete(why.to_owned()),
        };
        self.state = State::Done;
        Step::end(tell.then(|| Frame::Abort(why.to_owned())), outcome)
    }

    /// Every byte and the client's digest are in: save, log, report.
    fn finish(&mut self, digest: u64, socket: &impl AsFd) -> Step {
        let State::Trailer { hello, mut rx, .. } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Step::default();
        };
        let rcvbuf = tsperf_sys::net::recv_buffer(socket);
        let tcp = tsperf_sys::tcpinfo::TcpInfo::of(socket)
            .map_or_else(Default::default, |i| i.receiver());
        let frame = finish_transfer(
            &mut rx,
            &hello,
            self.peer,
            self.server_io,
            rcvbuf,
            tcp,
            digest,
        );
        let outcome = match &frame {
            Frame::Report(_) => Outcome::Complete,
            _ => Outcome::Incomplete(format!("'{}' could not be saved", Peer(&hello.name))),
        };
        Step::end(Some(frame), outcome)
    }

    /// The event loop's wake-ups for this connection, for the transfer's report.
    pub fn set_wakeups(&mut self, n: u64) {
        if let State::Data { rx, .. } | State::Trailer { rx, .. } = &mut self.state {
            rx.wakeups = n;
        }
    }
}

#[cfg(test)]
mod tests;
