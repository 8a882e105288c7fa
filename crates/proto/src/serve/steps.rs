//! The conversation's later steps: the data's turns, the latency session's events, deadlines,
//! failures and a shutdown's abort, and how a transfer that stops short ends.

use std::time::Instant;

use super::{Conversation, Effect, Outcome, SHUTTING_DOWN, State, Step, TIMED_GRACE};
use crate::end::End;
use crate::{END_TRAILER, Frame, RefuseCode};

/// How a turn of data reads ended, as the driver saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEnd {
    /// More is due: the socket had no more for now, or the turn's share was used.
    More,
    /// Every announced byte has arrived.
    Complete,
    /// The client closed the connection first; `shutting_down` when the server's own stop
    /// closed it (then nobody is left to tell).
    Closed {
        /// The server is stopping.
        shutting_down: bool,
    },
    /// A read failed (not a timeout: [`Conversation::timed_out`]).
    Failed(String),
    /// Saving the received bytes failed: the reason to give.
    Sink(String),
    /// A closed stream ([`crate::Hello::closed_end`]) ended: the client closed its direction.
    /// Its last bytes, held back from the data, are its end trailer (`None`: fewer came).
    Ended(Option<End>),
}

impl Conversation {
    /// A turn of data reads ended with `end` at `now`, having read `got` bytes.
    pub fn data_turn(&mut self, end: DataEnd, got: u64, now: Instant) -> Step {
        if got > 0 {
            self.deadline = now + self.policy.idle_timeout;
        }
        let State::Data { t } = &mut self.state else {
            return Step::default();
        };
        if t.got == 0 && got > 0 && t.hello.duration_ms > 0 {
            let run = std::time::Duration::from_millis(u64::from(t.hello.duration_ms));
            t.until = Some(now + run + TIMED_GRACE);
        }
        t.got += got;
        if let Some(until) = t.until {
            self.deadline = self.deadline.min(until);
        }
        match end {
            DataEnd::More => Step::default(),
            DataEnd::Ended(None) => self.stop(
                "the client closed its stream before its end trailer (16 bytes)",
                true,
            ),
            DataEnd::Ended(Some(e)) if e.length != t.got - END_TRAILER as u64 => {
                let why = format!(
                    "the client's end trailer says it sent {} bytes: {} arrived",
                    e.length,
                    t.got - END_TRAILER as u64
                );
                self.stop(&why, true)
            }
            DataEnd::Ended(Some(e)) => {
                self.state = match std::mem::replace(&mut self.state, State::Done) {
                    State::Data { t } => State::Finish { t },
                    other => other,
                };
                Step {
                    effect: Some(Effect::Finish { digest: e.digest }),
                    ..Step::default()
                }
            }
            DataEnd::Complete => {
                let State::Data { t } = std::mem::replace(&mut self.state, State::Done) else {
                    unreachable!("matched above");
                };
                self.state = State::Trailer {
                    t,
                    buf: [0; crate::TRAILER],
                    have: 0,
                };
                Step::default()
            }
            DataEnd::Closed {
                shutting_down: true,
            } => self.stop(SHUTTING_DOWN, false),
            DataEnd::Closed { .. } => self.stop("the client closed the connection", false),
            DataEnd::Failed(e) => self.stop(&e, true),
            DataEnd::Sink(why) => self.stop(&why, true),
        }
    }

    /// A reverse stream's turn of writes at `now` handed `sent` bytes to the socket: the
    /// client took some, so it is not idle (a client that stops reading is cut off at the idle
    /// timeout).
    pub fn sending(&mut self, sent: u64, now: Instant) {
        if let State::Send { t } = &mut self.state {
            if sent > 0 {
                self.deadline = now + self.policy.idle_timeout;
            }
            t.got += sent;
        }
    }

    /// A reverse stream's data, its Sent frame and its end trailer are all in the socket: the
    /// conversation is over (the driver closes, which ends the stream).
    pub fn sent_all(&mut self) -> Step {
        if !self.state.sends() {
            return Step::default();
        }
        self.state = State::Done;
        Step::end(None, Outcome::Complete)
    }

    /// A reverse stream could not go on: writing failed with `why`, or the client closed or
    /// sent bytes it should not.
    pub fn send_failed(&mut self, why: &str) -> Step {
        self.stop(why, false)
    }

    /// A latency client sent a request or took answers at `now`: it is not idle.
    pub fn busy_at(&mut self, now: Instant) {
        if matches!(&self.state, State::Latency { session } if session.requests > 0) {
            self.deadline = now + self.policy.idle_timeout;
        }
    }

    /// A request arrived at `now` (the first one replaces the accept's deadline).
    pub fn request_at(&mut self, now: Instant) {
        self.deadline = now + self.policy.idle_timeout;
    }

    /// A latency session ended: the client closed (`why` is `None`) or `why`.
    pub fn end_latency(&mut self, why: Option<String>) -> Step {
        let State::Latency { session } = std::mem::replace(&mut self.state, State::Done) else {
            return Step::end(None, Outcome::Incomplete(why.unwrap_or_default()));
        };
        let outcome = match why {
            None if session.at_boundary() => Outcome::Complete,
            None => Outcome::Incomplete("the client closed in the middle of a request".into()),
            Some(why) => Outcome::Incomplete(why),
        };
        Step {
            effect: Some(Effect::SessionEnded {
                summary: session.summary(),
            }),
            ..Step::end(None, outcome)
        }
    }

    /// A bad clock request ends the session.
    pub fn bad_request(&mut self, e: &dyn std::fmt::Display) -> Step {
        self.end_latency(Some(format!("bad request: {e}")))
    }

    /// Answers could not be written (`e`).
    pub fn cannot_answer(&mut self, e: &dyn std::fmt::Display) -> Step {
        self.end_latency(Some(format!("cannot answer: {e}")))
    }

    /// A read failed with `e` (not a timeout: [`Conversation::timed_out`]).
    pub fn read_failed(&mut self, e: &dyn std::fmt::Display) -> Step {
        match &self.state {
            State::Hello { .. } => {
                Step::refuse((RefuseCode::Hello, format!("error reading the hello: {e}")))
            }
            State::Auth { .. } => {
                Step::refuse((RefuseCode::Auth, format!("no authentication answer ({e})")))
            }
            State::Begin { .. } | State::Finish { .. } => Step::default(),
            State::Clock { .. } | State::Data { .. } | State::Trailer { .. } => {
                self.stop(&e.to_string(), true)
            }
            State::Send { .. } => self.stop(&e.to_string(), false),
            State::Latency { .. } => self.end_latency(Some(e.to_string())),
            State::Done => Step::default(),
        }
    }

    /// The deadline passed. `log_wait`: a logged transfer waits for room on stdout; `unsent`:
    /// answers wait for a latency client to take them.
    pub fn timed_out(&mut self, log_wait: bool, unsent: bool) -> Step {
        let hello = self.policy.hello_timeout.as_secs_f64();
        let idle = self.policy.idle_timeout.as_secs_f64();
        match &self.state {
            State::Hello { .. } => Step::refuse((
                RefuseCode::Hello,
                format!("no complete hello within {hello} s"),
            )),
            State::Auth { .. } => Step::refuse((
                RefuseCode::Auth,
                format!("no authentication answer within {hello} s of the connection"),
            )),
            State::Begin { .. } | State::Finish { .. } => Step::default(),
            State::Clock { t, next, .. } => self.stop(
                &format!(
                    "{next} of {} clock queries within {hello} s of the accept",
                    t.hello.clock_queries
                ),
                true,
            ),
            State::Data { t } if t.got == 0 => {
                self.stop(&format!("no data within {hello} s of the accept"), true)
            }
            State::Data { t } if t.until.is_some_and(|u| u <= self.deadline) => {
                let why = format!(
                    "the timed run of {} s went on {} s past its time without its end",
                    f64::from(t.hello.duration_ms) / 1000.0,
                    TIMED_GRACE.as_secs()
                );
                self.stop(&why, true)
            }
            State::Data { .. } if log_wait => self.stop(
                &format!("its log output (stdout) was not taken for {idle} s"),
                true,
            ),
            State::Data { .. } => self.stop(&format!("no data for {idle} s"), true),
            State::Trailer { .. } => {
                self.stop(&format!("no digest after the data for {idle} s"), true)
            }
            State::Send { .. } => {
                self.stop(&format!("the client took no data for {idle} s"), false)
            }
            State::Latency { session } => {
                let why = if unsent {
                    format!("the client took no answer for {idle} s")
                } else if session.requests == 0 && session.at_boundary() {
                    format!("no request within {hello} s of the accept")
                } else {
                    format!("no request for {idle} s")
                };
                self.end_latency(Some(why))
            }
            State::Done => Step::end(
                None,
                Outcome::Incomplete("the client did not take its reply".into()),
            ),
        }
    }

    /// Ends the conversation now for `why` (a shutdown), telling the client where the protocol
    /// allows and abandoning any transfer.
    pub fn abort(&mut self, why: &str) -> Step {
        match &self.state {
            State::Hello { .. } | State::Auth { .. } | State::Begin { .. } => {
                Step::refuse((RefuseCode::Shutdown, why.to_owned()))
            }
            State::Clock { .. }
            | State::Data { .. }
            | State::Trailer { .. }
            | State::Finish { .. } => self.stop(why, true),
            State::Send { .. } => self.stop(why, false),
            // The client waits for answers: it is told in their stream (version 11).
            State::Latency { .. } => Step {
                send: Some(Frame::Abort(why.to_owned())),
                in_answers: true,
                ..self.end_latency(Some(why.to_owned()))
            },
            State::Done => Step::default(),
        }
    }

    /// Ends a transfer short of its end for `why`; `tell`: with an Abort frame saying so. The
    /// driver abandons it ([`Effect::Abandon`]).
    pub(super) fn stop(&mut self, why: &str, tell: bool) -> Step {
        let outcome = match &self.state {
            State::Send { t } => Outcome::Incomplete(format!(
                "sent {} bytes of a reverse stream, then {why}",
                t.got
            )),
            State::Clock { t, .. }
            | State::Data { t }
            | State::Trailer { t, .. }
            | State::Finish { t }
                if t.hello.duration_ms > 0 =>
            {
                Outcome::Incomplete(format!(
                    "'{}': {} bytes of a timed run, then {why}",
                    t.hello.name, t.got
                ))
            }
            State::Clock { t, .. }
            | State::Data { t }
            | State::Trailer { t, .. }
            | State::Finish { t } => Outcome::Incomplete(format!(
                "'{}': {} of {} bytes, then {why}",
                t.hello.name, t.got, t.hello.length
            )),
            _ => Outcome::Incomplete(why.to_owned()),
        };
        let session = self.hello().map_or(crate::Session::ALONE, |h| h.session);
        let reverse = self.hello().is_some_and(|h| h.reverse);
        self.state = State::Done;
        Step {
            effect: Some(Effect::Abandon {
                why: why.to_owned(),
                session,
                reverse,
            }),
            ..Step::end(tell.then(|| Frame::Abort(why.to_owned())), outcome)
        }
    }
}
