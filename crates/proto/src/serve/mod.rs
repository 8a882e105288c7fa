//! The server's side of one connection, without I/O: bytes and times in, frames, effects and an
//! outcome out. Both server models drive it, so the hello, the authentication, the admission,
//! the clock queries, the trailer and the report, every deadline and every reason given to a
//! client, are one piece of code and say the same words whichever model serves.
//!
//! The driver reads and writes; the conversation decides. For the small pieces (hello,
//! authentication answer, clock query, trailer) the driver reads into
//! [`Conversation::space`] and hands over the count with [`Conversation::received`]; a
//! transfer's data it reads and counts itself, reporting each turn with
//! [`Conversation::data_turn`]; a latency session is [`Conversation::latency`]. Time is handed
//! in: `now` (monotonic) for deadlines, a wall clock for the clock queries' stamps.
//!
//! Every call that can move the conversation on returns a [`Step`]: a frame to send, an
//! [`Effect`] the driver performs (and reports back), and the outcome once it is over. The
//! effects are what touches the world: starting a transfer's accounting (its save file, its
//! log), finishing it (the save's commit, the log's end, the report's figures), abandoning it,
//! and the summary of a latency session.
//!
//! Deadlines count from a start ([`Conversation::deadline`]): the hello and the authentication
//! answer from the accept of the connection, the clock queries and the first byte (or request)
//! from the server's Accept frame, and after that each wait from the last byte.

mod admit;
mod latency;
#[cfg(test)]
mod tests;

use std::time::Instant;

pub use admit::{
    AUTH_FAILED, Admitted, Authenticator, HELLO_TIMEOUT, IDLE_TIMEOUT, LOG_MIN_READ, MAX_DURATION,
    Policy, Refusal, SHUTTING_DOWN, TIMED_GRACE, admit, busy, default_read_size, transfer_log,
};
pub use latency::{Answers, LatencySession};

use crate::{CLOCK_QUERY, Frame, Hello, MAX_HELLO, RefuseCode, ServerIo, TRAILER, decode_hello};

/// Bytes in an authentication challenge and in its answer.
pub const CHALLENGE: usize = 32;

/// What the conversation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The hello: read into [`Conversation::space`].
    Hello,
    /// The answer to the authentication challenge: read into [`Conversation::space`].
    Auth,
    /// The driver to begin an admitted transfer ([`Effect::Begin`], then [`Conversation::begun`]).
    Begin,
    /// A stream's clock queries, before its data: read into [`Conversation::space`].
    Clock,
    /// The transfer's data: read by the driver, reported with [`Conversation::data_turn`].
    Data,
    /// The client's digest after the data: read into [`Conversation::space`].
    Trailer,
    /// A reverse stream: the driver sends the data, its Sent frame and its end trailer,
    /// reporting each turn with [`Conversation::sending`], then [`Conversation::sent_all`].
    Send,
    /// The driver to finish the transfer ([`Effect::Finish`], then [`Conversation::finished`]).
    Finish,
    /// Clock requests: [`Conversation::latency`].
    Latency,
    /// Over: the outcome has been returned.
    Done,
}

/// How one connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every announced byte arrived and the report was sent.
    Complete,
    /// The hello was refused with this code; the reason was sent to the peer where the
    /// protocol allowed.
    Refused(RefuseCode, String),
    /// The transfer stopped short; the reason says why.
    Incomplete(String),
}

/// What the driver does for the conversation: the parts that touch the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Start the accounting of an admitted stream (its save file, its log's start line), or
    /// admit a latency session (nothing to account for but the driver's say), then call
    /// [`Conversation::begun`] with the result.
    Begin {
        /// The admitted hello.
        hello: Hello,
        /// What it was granted.
        admitted: Admitted,
    },
    /// Every byte and the client's digest are in: finish the transfer (save, log its end, make
    /// the report from what was measured), then call [`Conversation::finished`].
    Finish {
        /// The client's digest of the data, from its trailer.
        digest: u64,
    },
    /// The transfer stopped short: remove any partial file and log its end with `why`.
    Abandon {
        /// Why, as the log's end line says.
        why: String,
        /// The session the stream was part of ([`crate::Session::ALONE`] when none).
        session: crate::Session,
        /// The stream was one the server sent (its session is of that direction).
        reverse: bool,
    },
    /// A latency session ended: the server says what it answered (`summary`).
    SessionEnded {
        /// [`LatencySession::summary`].
        summary: String,
    },
}

/// What one event led to: a frame to send the client, an effect to perform, and the outcome
/// once the conversation is over (perform the effect, then send the frame, then close).
#[derive(Debug, Default)]
#[must_use]
pub struct Step {
    /// The frame to send.
    pub send: Option<Frame>,
    /// The frame goes into a latency session's answers, which are not frames: it is an Abort,
    /// and goes out after [`crate::clock::END_OF_ANSWERS`] ([`crate::clock::encode_end_of_answers`]).
    pub in_answers: bool,
    /// What the driver must do, first.
    pub effect: Option<Effect>,
    /// The outcome, once the conversation is over.
    pub end: Option<Outcome>,
}

impl Step {
    /// Appends what the step sends to `out`, as the wire takes it: its frame, or in a latency
    /// session's answers the end of them ([`Step::in_answers`]). Nothing if it sends nothing.
    pub fn encode_send(&self, out: &mut Vec<u8>) {
        match (&self.send, self.in_answers) {
            (Some(Frame::Abort(why)), true) => crate::clock::encode_end_of_answers(why, out),
            (Some(frame), _) => crate::encode_frame(frame, out),
            (None, _) => {}
        }
    }

    fn send(frame: Frame) -> Step {
        Step {
            send: Some(frame),
            ..Step::default()
        }
    }

    fn end(frame: Option<Frame>, outcome: Outcome) -> Step {
        Step {
            send: frame,
            end: Some(outcome),
            ..Step::default()
        }
    }

    fn refuse((code, reason): Refusal) -> Step {
        Step::end(
            Some(Frame::Refuse {
                code,
                reason: reason.clone(),
            }),
            Outcome::Refused(code, reason),
        )
    }
}

/// A stream transfer in progress, as far as the conversation follows it.
#[derive(Debug)]
struct Transfer {
    hello: Hello,
    /// Bytes the driver counted so far (a closed stream's: its end trailer's too).
    got: u64,
    /// A timed run is cut off at this instant, its duration and [`TIMED_GRACE`] after its
    /// first byte.
    until: Option<Instant>,
}

#[derive(Debug)]
enum State {
    Hello {
        buf: Box<[u8; MAX_HELLO + 1]>,
        have: usize,
    },
    Auth {
        hello: Hello,
        buf: [u8; CHALLENGE],
        have: usize,
    },
    Begin {
        hello: Hello,
        admitted: Admitted,
    },
    Clock {
        t: Transfer,
        buf: [u8; CLOCK_QUERY],
        have: usize,
        /// The sequence number of the query due next.
        next: u8,
    },
    Data {
        t: Transfer,
    },
    Send {
        t: Transfer,
    },
    Trailer {
        t: Transfer,
        buf: [u8; TRAILER],
        have: usize,
    },
    Finish {
        t: Transfer,
    },
    Latency {
        session: Box<LatencySession>,
    },
    Done,
}

impl State {
    /// After the Accept and the clock queries: the data, read (`Data`) or sent (`Send`).
    fn data_or_send(t: Transfer) -> State {
        if t.hello.reverse {
            State::Send { t }
        } else {
            State::Data { t }
        }
    }

    fn sends(&self) -> bool {
        matches!(self, State::Send { .. })
    }
}

/// One connection's conversation.
#[derive(Debug)]
pub struct Conversation {
    state: State,
    server_io: ServerIo,
    policy: Policy,
    /// The challenge for this connection, when the policy asks for authentication.
    challenge: Option<[u8; CHALLENGE]>,
    deadline: Instant,
}

mod opening;
mod steps;

pub use steps::DataEnd;

impl Conversation {
    /// A connection accepted at `now`, served by `server_io` under `policy`. With
    /// authentication on, `challenge` is its fresh random challenge (the driver's randomness).
    pub fn new(
        server_io: ServerIo,
        policy: &Policy,
        challenge: Option<[u8; CHALLENGE]>,
        now: Instant,
    ) -> Conversation {
        Conversation {
            state: State::Hello {
                buf: Box::new([0; MAX_HELLO + 1]),
                have: 0,
            },
            server_io,
            policy: policy.clone(),
            challenge,
            deadline: now + policy.hello_timeout,
        }
    }

    /// What the conversation waits for now.
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Hello { .. } => Phase::Hello,
            State::Auth { .. } => Phase::Auth,
            State::Begin { .. } => Phase::Begin,
            State::Clock { .. } => Phase::Clock,
            State::Data { .. } => Phase::Data,
            State::Send { .. } => Phase::Send,
            State::Trailer { .. } => Phase::Trailer,
            State::Finish { .. } => Phase::Finish,
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
        matches!(
            self.state,
            State::Hello { .. } | State::Auth { .. } | State::Begin { .. }
        )
    }

    /// The stream's hello, while a transfer is under way.
    pub fn hello(&self) -> Option<&Hello> {
        match &self.state {
            State::Begin { hello, .. } => Some(hello),
            State::Clock { t, .. }
            | State::Data { t }
            | State::Send { t }
            | State::Trailer { t, .. }
            | State::Finish { t } => Some(&t.hello),
            _ => None,
        }
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

    /// `n` bytes arrived in [`Conversation::space`] at `now`; 0 means the client closed.
    /// `clock` is the wall clock (ns since the epoch) the clock queries' answers are stamped
    /// with.
    pub fn received(&mut self, n: usize, now: Instant, clock: &mut dyn FnMut() -> u64) -> Step {
        match &mut self.state {
            State::Hello { have, .. } if n == 0 => Step::refuse((
                RefuseCode::Hello,
                if *have == 0 {
                    "connection closed without a hello".to_owned()
                } else {
                    format!("connection closed after {have} bytes of a hello")
                },
            )),
            State::Hello { buf, have } => {
                *have += n;
                match decode_hello(&buf[..*have]) {
                    Ok(Some((hello, used))) if used == *have => self.hello_in(hello, now),
                    Ok(Some(_)) => Step::refuse((
                        RefuseCode::Hello,
                        "data arrived before the server accepted the hello".into(),
                    )),
                    Ok(None) => Step::default(),
                    Err(e @ crate::ProtocolError::UnsupportedVersion(_)) => {
                        Step::refuse((RefuseCode::Version, e.to_string()))
                    }
                    Err(e) => Step::refuse((RefuseCode::Hello, e.to_string())),
                }
            }
            State::Auth { .. } if n == 0 => Step::refuse((
                RefuseCode::Auth,
                "connection closed before its authentication answer".into(),
            )),
            State::Auth { buf, have, .. } => {
                *have += n;
                if *have < buf.len() {
                    return Step::default();
                }
                let verified = match (&self.policy.auth, &self.challenge) {
                    (Some(key), Some(challenge)) => key.verify(challenge, buf),
                    _ => false,
                };
                if !verified {
                    return Step::refuse((RefuseCode::Auth, AUTH_FAILED.to_owned()));
                }
                let State::Auth { hello, .. } = std::mem::replace(&mut self.state, State::Done)
                else {
                    unreachable!("matched above");
                };
                self.admit(hello, now)
            }
            State::Clock { .. } if n == 0 => {
                self.stop("the client closed during its clock queries", false)
            }
            State::Clock { .. } => self.clock_query(n, clock),
            State::Trailer { .. } if n == 0 => {
                self.stop("the client closed before sending its digest", false)
            }
            State::Trailer { buf, have, .. } => {
                *have += n;
                if *have < TRAILER {
                    return Step::default();
                }
                let digest = u64::from_be_bytes(*buf);
                let State::Trailer { t, .. } = std::mem::replace(&mut self.state, State::Done)
                else {
                    unreachable!("matched above");
                };
                self.state = State::Finish { t };
                Step {
                    effect: Some(Effect::Finish { digest }),
                    ..Step::default()
                }
            }
            _ => Step::default(),
        }
    }

    /// A complete hello: challenge it, or admit it.
    fn hello_in(&mut self, hello: Hello, now: Instant) -> Step {
        let Some(challenge) = self.challenge.filter(|_| self.policy.auth.is_some()) else {
            return self.admit(hello, now);
        };
        self.state = State::Auth {
            hello,
            buf: [0; CHALLENGE],
            have: 0,
        };
        Step::send(Frame::Challenge(challenge))
    }

    /// The latency session, once accepted.
    pub fn latency(&mut self) -> Option<&mut LatencySession> {
        match &mut self.state {
            State::Latency { session } => Some(session),
            _ => None,
        }
    }
}
