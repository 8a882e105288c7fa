//! The conversation's opening and closing steps: the clock queries, the admission and its
//! Accept, the driver's begin and finish.

use std::time::Instant;

use super::{Admitted, Conversation, Outcome, Refusal, State, Step, Transfer, admit};
use crate::clock::{Codec, TimeResponse, decode_request};
use crate::{CLOCK_QUERY, Frame, Hello, Mode, Report};

use super::{Effect, LatencySession};

impl Conversation {
    /// `n` more bytes of a clock query: once it is whole, the answer, stamped with the server's
    /// clock on arrival and on sending. After the last query the data is due.
    pub(super) fn clock_query(&mut self, n: usize, clock: &mut dyn FnMut() -> u64) -> Step {
        let received = clock();
        let State::Clock {
            buf, have, next, t, ..
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
        if *next >= t.hello.clock_queries {
            let State::Clock { t, .. } = std::mem::replace(&mut self.state, State::Done) else {
                unreachable!("matched above");
            };
            self.state = State::data_or_send(t);
        }
        Step::send(Frame::Time(TimeResponse {
            seq,
            server_recv_unix_ns: received,
            server_send_unix_ns: clock(),
        }))
    }

    /// Accepts an (authenticated) hello the server will serve, or refuses it with the reason.
    /// The accept waits for the driver to begin the transfer or session ([`Effect::Begin`]):
    /// the driver may still refuse it (a server that serves one run, `--once`, refuses a
    /// connection of another).
    pub(super) fn admit(&mut self, hello: Hello, now: Instant) -> Step {
        let admitted = match admit(&hello, &self.policy) {
            Ok(a) => a,
            Err(refusal) => return Step::refuse(refusal),
        };
        // The clock queries and the first byte (or request) are due within the hello timeout of
        // the accept.
        self.deadline = now + self.policy.hello_timeout;
        self.state = State::Begin {
            hello: hello.clone(),
            admitted,
        };
        Step {
            effect: Some(Effect::Begin { hello, admitted }),
            ..Step::default()
        }
    }

    /// The Accept of `admitted`; for a stream that asked for TLS (`tls`), the certificate the
    /// server will present, proved by its key on this connection's challenge where it has one.
    fn accept(&self, admitted: Admitted, tls: bool) -> Frame {
        let identity = self.policy.tls_cert.filter(|_| tls).map(|cert_sha256| {
            let proof = match (&self.policy.auth, &self.challenge) {
                (Some(key), Some(challenge)) => {
                    Some(key.prove(&crate::tls::binding(challenge, &cert_sha256)))
                }
                _ => None,
            };
            crate::tls::Identity { cert_sha256, proof }
        });
        Frame::Accept {
            read_size: admitted.read_size,
            server_io: self.server_io,
            log: admitted.log,
            stdout: self.policy.stdout,
            length: admitted.length,
            tls: identity,
        }
    }

    /// The bytes a pass of the reverse stream being begun sends, once the driver knows them (a
    /// served file's size): the Accept says so.
    pub fn set_pass_length(&mut self, length: u64) {
        if let State::Begin { admitted, .. } = &mut self.state {
            admitted.length = length;
        }
    }

    /// The driver began the admitted transfer (`Ok`), or could not (`Err`: the refusal, such
    /// as a name the save directory will not take), at `now`. Returns the Accept, or the
    /// refusal.
    pub fn begun(&mut self, result: Result<(), Refusal>, now: Instant) -> Step {
        let State::Begin { hello, admitted } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Step::default();
        };
        if let Err(refusal) = result {
            return Step::refuse(refusal);
        }
        if hello.mode == Mode::Latency {
            self.state = State::Latency {
                session: Box::new(LatencySession::new(&hello)),
            };
            return Step::send(self.accept(admitted, false));
        }
        let accept = self.accept(admitted, hello.tls.is_some());
        let t = Transfer {
            hello,
            got: 0,
            until: None,
        };
        self.state = if t.hello.clock_queries > 0 {
            State::Clock {
                t,
                buf: [0; CLOCK_QUERY],
                have: 0,
                next: 0,
            }
        } else {
            State::data_or_send(t)
        };
        if self.state.sends() {
            // The server's first byte is due at once: from here each wait is for the client
            // to take bytes.
            self.deadline = now + self.policy.idle_timeout;
        }
        Step::send(accept)
    }

    /// The driver finished the transfer: its report, or why it could not be saved. Returns the
    /// frame to send and the outcome.
    pub fn finished(&mut self, result: Result<Report, String>) -> Step {
        let State::Finish { t } = std::mem::replace(&mut self.state, State::Done) else {
            return Step::default();
        };
        match result {
            Ok(report) => Step::end(Some(Frame::Report(report)), Outcome::Complete),
            Err(reason) => Step::end(
                Some(Frame::Abort(reason)),
                Outcome::Incomplete(format!("'{}' could not be saved", t.hello.name)),
            ),
        }
    }
}
