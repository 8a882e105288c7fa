//! The client's side of a stream transfer, without I/O: the frames it reads and the times it is
//! handed in, the bytes it must send out, and what each answer means.
//!
//! The driver sends [`StreamConversation::hello_bytes`], then for every frame it reads calls
//! [`StreamConversation::on_frame`] and does what the [`ClientStep`] says: send the
//! authentication answer, send the next clock query ([`StreamConversation::query`]), send the
//! data, or take the report. The conversation keeps the phase's deadline: the clock queries
//! share one ([`StreamConversation::deadline`]).

use std::time::{Duration, Instant};

use crate::clock::{Offset, TimeRequest, encode_query};
use crate::{Frame, Hello, LogMode, RefuseCode, Report, ServerIo, StdoutKind, encode_hello};

pub mod latency;
pub mod reverse;

/// Answers the server's authentication challenge: the client's key, as a pure function the
/// driver supplies (`tsperf_sys::auth::Key`).
pub trait Prover: Send + Sync {
    /// The answer to `challenge`.
    fn answer(&self, challenge: &[u8; 32]) -> [u8; 32];
    /// The key's proof of a TLS certificate's fingerprint ([`crate::tls::binding`]), as the
    /// server makes it.
    fn prove(&self, binding: &[u8; 80]) -> [u8; 32];
}

/// What the server's Accept said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// The most bytes one server read asks for.
    pub read_size: u32,
    /// How the server does its I/O.
    pub server_io: ServerIo,
    /// Where the transfer's per-read lines go.
    pub log: LogMode,
    /// What the server's stdout is, as it sees it.
    pub stdout: StdoutKind,
    /// A reverse stream: the bytes of one pass the server sends.
    pub length: u64,
    /// A stream over TLS: the certificate the server will present, and whether the key
    /// vouched for it.
    pub tls: Option<TlsPin>,
}

/// The certificate a stream over TLS expects the server to present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsPin {
    /// The SHA-256 of the certificate (DER), as the Accept named it.
    pub cert_sha256: [u8; 32],
    /// The pre-shared key proved it on this connection: a handshake that presents it is with
    /// the server that holds the key. False: the server authenticates no one, and nothing
    /// vouches for the certificate (the TLS is encrypted, not authenticated).
    pub authenticated: bool,
}

/// The server's clock against ours, from a transfer's clock queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Clock queries made.
    pub queries: u8,
    /// The estimate from the fastest query.
    pub offset: Offset,
    /// That query's round trip, in ns.
    pub rtt_ns: u64,
}

/// What an answer means for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send these bytes (the authentication answer), then read on.
    Send(Vec<u8>),
    /// The server accepted the transfer. With clock queries asked for, send the first
    /// ([`StreamConversation::query`]); else send the data.
    Accepted(Accepted),
    /// A clock query was answered and more are due: send the next.
    Queried,
    /// The clock queries are done (`None` when none were asked for): send the data.
    Data(Option<Clock>),
    /// Every byte was counted: the server's report.
    Report(Box<Report>),
}

/// Why the conversation cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server refused the hello.
    #[error("refused ({code:?}): {reason}")]
    Refused {
        /// What kind of refusal.
        code: RefuseCode,
        /// Why, in the server's words.
        reason: String,
    },
    /// The server gave up on the transfer.
    #[error("the server aborted the transfer: {0}")]
    Aborted(String),
    /// The server asks for a key this client does not have.
    #[error("the server requires authentication: pass --auth-key FILE with its key")]
    NeedsKey,
    /// The server's proof of its TLS certificate is wrong: someone between may be
    /// presenting their own.
    #[error(
        "the server's TLS certificate is not proved by the key (--auth-key): a machine between \
         this client and the server may be presenting its own"
    )]
    BadTlsProof,
    /// A frame that has no place here.
    #[error("the server broke the protocol: {got} where {expected} was due")]
    Unexpected {
        /// What was due.
        expected: &'static str,
        /// What came (its debug form).
        got: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Hello,
    Auth,
    /// Waiting for the answer to clock query `seq`.
    Clock {
        seq: u8,
    },
    Data,
    Report,
    Done,
}

/// The client's side of one stream transfer.
#[derive(Debug)]
pub struct StreamConversation {
    hello: Hello,
    state: State,
    timeout: Duration,
    /// The clock phase's one deadline, set by its first query.
    clock_by: Option<Instant>,
    /// The query in flight: when it left, on both clocks.
    sent: Option<(Instant, u64)>,
    best: Option<Clock>,
    /// The server's challenge, once it sent one.
    challenge: Option<[u8; 32]>,
}

impl StreamConversation {
    /// The transfer `hello` asks for; each phase is due within `timeout`.
    pub fn new(hello: Hello, timeout: Duration) -> StreamConversation {
        StreamConversation {
            hello,
            state: State::Hello,
            timeout,
            clock_by: None,
            sent: None,
            best: None,
            challenge: None,
        }
    }

    /// The hello, to send first.
    pub fn hello_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(crate::MAX_HELLO);
        encode_hello(&self.hello, &mut out);
        out
    }

    /// The frame awaited now, as an error names it.
    pub fn awaiting(&self) -> &'static str {
        match self.state {
            State::Hello => "answer to the hello",
            State::Auth => "answer to the authentication",
            State::Clock { .. } => "answer to a clock query",
            State::Data | State::Report => "report",
            State::Done => "nothing",
        }
    }

    /// When the wait for the next frame ends, a wait that starts at `now`: `timeout` from now,
    /// except during the clock queries, which all share the first one's.
    pub fn deadline(&self, now: Instant) -> Instant {
        match (self.state, self.clock_by) {
            (State::Clock { .. }, Some(by)) => by,
            _ => now + self.timeout,
        }
    }

    /// The late error of the current wait, in words.
    pub fn late(&self) -> String {
        let secs = self.timeout.as_secs_f64();
        match self.state {
            State::Hello => format!(
                "no answer to the hello within {secs} s: the server took the connection but \
                 said nothing (is it a tsserver?)"
            ),
            State::Auth => format!("no answer to the authentication within {secs} s"),
            State::Clock { seq } => format!(
                "{seq} of {} clock queries answered within {secs} s",
                self.hello.clock_queries
            ),
            State::Data | State::Report | State::Done => {
                format!("the server sent no report within {secs} s of the last byte")
            }
        }
    }

    /// The next clock query, leaving at `now` (monotonic) and `unix_ns` (the wall clock).
    pub fn query(&mut self, now: Instant, unix_ns: u64) -> [u8; crate::CLOCK_QUERY] {
        let seq = match self.state {
            State::Clock { seq } => seq,
            _ => 0,
        };
        self.clock_by.get_or_insert(now + self.timeout);
        self.sent = Some((now, unix_ns));
        encode_query(&TimeRequest {
            seq: seq.into(),
            client_send_unix_ns: unix_ns,
        })
    }

    /// The trailer, once the data is sent: the client's digest of it. The report is awaited.
    pub fn trailer(&mut self, digest: u64) -> [u8; crate::TRAILER] {
        self.state = State::Report;
        digest.to_be_bytes()
    }

    /// The end trailer of a closed stream ([`crate::Hello::closed_end`]), once its data is
    /// sent: `length` bytes whose digest is `digest`. The sender then closes its direction and
    /// the report is awaited.
    pub fn end(&mut self, length: u64, digest: u64) -> [u8; crate::END_TRAILER] {
        self.state = State::Report;
        crate::end::End { length, digest }.encode()
    }

    /// The Accept: what it grants, the TLS certificate pinned, and on to the clock queries or
    /// the data.
    fn accepted(
        &mut self,
        frame: Frame,
        key: Option<&dyn Prover>,
    ) -> Result<ClientStep, ClientError> {
        let Frame::Accept {
            read_size,
            server_io,
            log,
            stdout,
            length,
            tls,
        } = frame
        else {
            return Err(ClientError::Unexpected {
                expected: "an Accept",
                got: format!("{frame:?}"),
            });
        };
        let tls = self.pin(tls, key)?;
        self.state = if self.hello.clock_queries > 0 {
            State::Clock { seq: 0 }
        } else {
            State::Data
        };
        Ok(ClientStep::Accepted(Accepted {
            read_size,
            server_io,
            log,
            stdout,
            length,
            tls,
        }))
    }

    /// The certificate a stream over TLS will pin: the Accept's, proved by `key` where the
    /// server challenged this client (a wrong proof is refused); `None` for clear text. A
    /// hello that asked for TLS and an Accept that names none is the server's breach.
    fn pin(
        &self,
        tls: Option<crate::tls::Identity>,
        key: Option<&dyn Prover>,
    ) -> Result<Option<TlsPin>, ClientError> {
        let Some(_) = self.hello.tls else {
            return Ok(None);
        };
        let Some(id) = tls else {
            return Err(ClientError::Unexpected {
                expected: "an Accept naming the server's TLS certificate",
                got: "an Accept without one".into(),
            });
        };
        let authenticated = match (self.challenge, key) {
            (Some(challenge), Some(key)) => {
                let want = key.prove(&crate::tls::binding(&challenge, &id.cert_sha256));
                let got = id.proof.ok_or(ClientError::BadTlsProof)?;
                // Compared whole, not stopping at the first difference.
                if want.iter().zip(got).fold(0u8, |d, (a, b)| d | (a ^ b)) != 0 {
                    return Err(ClientError::BadTlsProof);
                }
                true
            }
            _ => false,
        };
        Ok(Some(TlsPin {
            cert_sha256: id.cert_sha256,
            authenticated,
        }))
    }

    /// The hello this conversation sent.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// A frame arrived at `now` (`unix_ns` on the wall clock). `key` answers a challenge.
    pub fn on_frame(
        &mut self,
        frame: Frame,
        key: Option<&dyn Prover>,
        now: Instant,
        unix_ns: u64,
    ) -> Result<ClientStep, ClientError> {
        match (self.state, frame) {
            (State::Hello, Frame::Challenge(c)) => {
                let key = key.ok_or(ClientError::NeedsKey)?;
                self.state = State::Auth;
                self.challenge = Some(c);
                Ok(ClientStep::Send(key.answer(&c).to_vec()))
            }
            (State::Hello | State::Auth, frame @ Frame::Accept { .. }) => self.accepted(frame, key),
            (State::Hello | State::Auth, Frame::Refuse { code, reason }) => {
                self.state = State::Done;
                Err(ClientError::Refused { code, reason })
            }
            (State::Clock { seq }, Frame::Time(t)) if t.seq == u64::from(seq) => {
                let (at, t1) = self.sent.take().unwrap_or((now, unix_ns));
                let rtt_ns = now.saturating_duration_since(at).as_nanos() as u64;
                if self.best.is_none_or(|b| rtt_ns < b.rtt_ns) {
                    self.best = Some(Clock {
                        queries: self.hello.clock_queries,
                        offset: Offset::of(
                            t1,
                            t.server_recv_unix_ns,
                            t.server_send_unix_ns,
                            unix_ns,
                        ),
                        rtt_ns,
                    });
                }
                if seq + 1 < self.hello.clock_queries {
                    self.state = State::Clock { seq: seq + 1 };
                    Ok(ClientStep::Queried)
                } else {
                    self.state = State::Data;
                    Ok(ClientStep::Data(self.best))
                }
            }
            (State::Report, Frame::Report(r)) => {
                self.state = State::Done;
                Ok(ClientStep::Report(Box::new(r)))
            }
            (_, Frame::Abort(reason)) => {
                self.state = State::Done;
                Err(ClientError::Aborted(reason))
            }
            (_, other) => Err(ClientError::Unexpected {
                expected: self.awaiting(),
                got: format!("{other:?}"),
            }),
        }
    }
}
