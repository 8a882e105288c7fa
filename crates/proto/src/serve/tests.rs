//! The server's conversation without sockets: bytes and times in, frames, effects and outcomes
//! out, and the words it says.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::Report;
use crate::clock::{Codec, TimeRequest, TimeResponse, encode_query};
use crate::{LogMode, StdoutKind, encode_hello};

fn policy() -> Policy {
    Policy {
        stdout: StdoutKind::Pipe,
        max_bytes: 1 << 30,
        hello_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(7),
        ..Policy::default()
    }
}

fn hello_bytes(h: &Hello) -> Vec<u8> {
    let mut out = Vec::new();
    encode_hello(h, &mut out);
    out
}

fn stream_hello(length: u64) -> Vec<u8> {
    hello_bytes(&Hello::stream(length, 1024, "t.txt"))
}

/// A wall clock that ticks 10 ns a read.
fn clock() -> impl FnMut() -> u64 {
    let mut t = 1_000;
    move || {
        t += 10;
        t
    }
}

/// Feeds `bytes` one at a time, as a trickling client would send them, until a step says
/// something.
fn feed(c: &mut Conversation, bytes: &[u8]) -> Step {
    let mut clock = clock();
    for b in bytes {
        c.space()[0] = *b;
        let step = c.received(1, Instant::now(), &mut clock);
        if step.send.is_some() || step.end.is_some() || step.effect.is_some() {
            return step;
        }
    }
    Step::default()
}

/// Feeds a stream hello and begins its transfer, as a driver would: the Accept.
fn accepted(c: &mut Conversation, hello: &[u8]) -> Step {
    let step = feed(c, hello);
    assert!(
        matches!(step.effect, Some(Effect::Begin { .. })),
        "{step:?}"
    );
    c.begun(Ok(()), Instant::now())
}

/// A hello trickled in byte by byte asks the driver to begin the transfer; once it has, the
/// Accept carries the server's read size and model.
#[test]
fn hello_then_begin_then_accept() {
    let mut c = Conversation::new(ServerIo::Blocking, &policy(), None, Instant::now());
    assert_eq!(c.phase(), Phase::Hello);
    let step = feed(&mut c, &stream_hello(10));
    match &step.effect {
        Some(Effect::Begin { hello, admitted }) => {
            assert_eq!(hello.length, 10);
            assert_eq!(admitted.log, LogMode::None);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        step.send.is_none(),
        "no accept before the transfer has begun"
    );
    assert_eq!(c.phase(), Phase::Begin);
    let step = c.begun(Ok(()), Instant::now());
    assert!(
        matches!(
            step.send,
            Some(Frame::Accept { server_io: ServerIo::Blocking, read_size, .. }) if read_size > 0
        ),
        "{step:?}"
    );
    assert_eq!(c.phase(), Phase::Data);
}

/// A transfer the driver cannot begin (a name the save directory refuses) is refused with the
/// driver's code and reason.
#[test]
fn a_begin_that_fails_is_refused() {
    let mut c = Conversation::new(ServerIo::Blocking, &policy(), None, Instant::now());
    let _ = feed(&mut c, &stream_hello(10));
    let step = c.begun(
        Err((RefuseCode::Save, "'t.txt' already exists".into())),
        Instant::now(),
    );
    assert!(
        matches!(step.send, Some(Frame::Refuse { code: RefuseCode::Save, ref reason }) if reason == "'t.txt' already exists"),
        "{step:?}"
    );
    assert!(matches!(step.end, Some(Outcome::Refused(..))));
}

/// The same words for the same ends, whichever model: they are said here only.
#[test]
fn reasons() {
    let now = Instant::now();
    let mut ticks = clock();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = c.received(0, now, &mut ticks);
    assert!(
        matches!(step.end, Some(Outcome::Refused(_, ref r)) if r == "connection closed without a hello")
    );
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = c.timed_out(false, false);
    assert!(
        matches!(step.send, Some(Frame::Refuse { code: RefuseCode::Hello, ref reason }) if reason == "no complete hello within 2 s")
    );
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &stream_hello(10));
    assert!(c.deadline() >= now + Duration::from_secs(2));
    let step = c.timed_out(false, false);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "no data within 2 s of the accept")
    );
    assert!(
        matches!(step.effect, Some(Effect::Abandon { ref why, .. }) if why == "no data within 2 s of the accept"),
        "a transfer that stops short is abandoned: {step:?}"
    );
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &stream_hello(1));
    let step = c.data_turn(DataEnd::Complete, 1, now);
    assert!(step.end.is_none());
    assert_eq!(c.phase(), Phase::Trailer);
    let step = c.received(0, now, &mut ticks);
    assert!(
        matches!(step.end, Some(Outcome::Incomplete(ref r)) if r == "'t.txt': 1 of 1 bytes, then the client closed before sending its digest"),
        "{step:?}"
    );
}

/// The trailer asks the driver to finish; its report (or its failure to save) is what goes out.
#[test]
fn trailer_then_finish_then_report() {
    let now = Instant::now();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &stream_hello(5));
    let _ = c.data_turn(DataEnd::Complete, 5, now);
    let step = feed(&mut c, &7u64.to_be_bytes());
    assert!(
        matches!(step.effect, Some(Effect::Finish { digest: 7 })),
        "{step:?}"
    );
    assert_eq!(c.phase(), Phase::Finish);
    let report = Report {
        bytes: 5,
        reads: 1,
        ..Report::default()
    };
    let step = c.finished(Ok(report.clone()));
    assert_eq!(step.send, Some(Frame::Report(report)));
    assert_eq!(step.end, Some(Outcome::Complete));
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &stream_hello(5));
    let _ = c.data_turn(DataEnd::Complete, 5, now);
    let _ = feed(&mut c, &7u64.to_be_bytes());
    let step = c.finished(Err("cannot save 't.txt': disk full".into()));
    assert_eq!(
        step.send,
        Some(Frame::Abort("cannot save 't.txt': disk full".into()))
    );
}

/// Data after the hello, before the accept, is refused; a trickled hello that the client
/// abandons names how far it got; another version's hello is refused with the version's code.
#[test]
fn early_data_short_hellos_and_versions() {
    let now = Instant::now();
    let mut ticks = clock();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let mut bytes = stream_hello(10);
    bytes.push(b'x');
    let n = bytes.len();
    c.space()[..n].copy_from_slice(&bytes);
    let step = c.received(n, now, &mut ticks);
    assert!(
        matches!(step.end, Some(Outcome::Refused(_, ref r)) if r.contains("before the server accepted"))
    );
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    c.space()[..3].copy_from_slice(&bytes[..3]);
    let _ = c.received(3, now, &mut ticks);
    let step = c.received(0, now, &mut ticks);
    assert!(
        matches!(step.end, Some(Outcome::Refused(_, ref r)) if r == "connection closed after 3 bytes of a hello")
    );
    let mut old = stream_hello(10);
    old[4..6].copy_from_slice(&4u16.to_be_bytes());
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = feed(&mut c, &old);
    assert!(
        matches!(
            step.send,
            Some(Frame::Refuse {
                code: RefuseCode::Version,
                ..
            })
        ),
        "{step:?}"
    );
}

/// A client that asks for another sink than the server's is refused with the flag named and
/// the sink's code, unless the server allows it; the Accept names the transfer's sink and the
/// server's stdout.
#[test]
fn client_chosen_sink() {
    let now = Instant::now();
    let asking = Hello {
        log: Some(LogMode::File),
        ..Hello::stream(10, 1024, "t.txt")
    };
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = feed(&mut c, &hello_bytes(&asking));
    assert!(
        matches!(step.send, Some(Frame::Refuse { code: RefuseCode::Sink, ref reason }) if reason.contains("--allow-client-log")),
        "{step:?}"
    );
    let allowing = Policy {
        allow_client_log: true,
        ..policy()
    };
    let mut c = Conversation::new(ServerIo::EventLoop, &allowing, None, now);
    let step = accepted(&mut c, &hello_bytes(&asking));
    assert!(
        matches!(
            step.send,
            Some(Frame::Accept {
                log: LogMode::File,
                stdout: StdoutKind::Pipe,
                read_size: 1024,
                ..
            })
        ),
        "{step:?}"
    );
}

/// Clock queries come after the Accept and before the data, each answered in order with the
/// stamps of the clock handed in; one out of order ends the transfer with an Abort; they share
/// the accept's deadline.
#[test]
fn clock_queries_before_data() {
    let now = Instant::now();
    let h = Hello {
        clock_queries: 2,
        ..Hello::stream(10, 1024, "t.txt")
    };
    let query = |seq: u64| {
        encode_query(&TimeRequest {
            seq,
            client_send_unix_ns: 5,
        })
    };
    let mut c = Conversation::new(ServerIo::Blocking, &policy(), None, now);
    let _ = accepted(&mut c, &hello_bytes(&h));
    assert_eq!(c.phase(), Phase::Clock);
    let deadline = c.deadline();
    for seq in 0..2 {
        let step = feed(&mut c, &query(seq));
        match step.send {
            Some(Frame::Time(t)) => {
                assert_eq!(t.seq, seq);
                assert!(t.server_recv_unix_ns > 1_000);
                assert_eq!(
                    t.server_send_unix_ns,
                    t.server_recv_unix_ns + 10,
                    "stamped as it arrived and as it is sent, by the clock handed in"
                );
            }
            other => panic!("expected a Time frame, got {other:?}"),
        }
        assert_eq!(
            c.deadline(),
            deadline,
            "the queries do not move the deadline"
        );
    }
    assert_eq!(c.phase(), Phase::Data);
    let mut c = Conversation::new(ServerIo::Blocking, &policy(), None, now);
    let _ = accepted(&mut c, &hello_bytes(&h));
    let step = feed(&mut c, &query(1));
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "clock query 1 arrived when 0 was due"),
        "{step:?}"
    );
    let mut c = Conversation::new(ServerIo::Blocking, &policy(), None, now);
    let _ = accepted(&mut c, &hello_bytes(&h));
    let _ = feed(&mut c, &query(0));
    let step = c.timed_out(false, false);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "1 of 2 clock queries within 2 s of the accept"),
        "{step:?}"
    );
}

/// A key that takes one answer: the bytes of the challenge, reversed.
#[derive(Debug)]
struct Reversed;

impl Authenticator for Reversed {
    fn verify(&self, challenge: &[u8; 32], answer: &[u8; 32]) -> bool {
        challenge.iter().rev().eq(answer.iter())
    }

    fn prove(&self, binding: &[u8; 80]) -> [u8; 32] {
        std::array::from_fn(|i| binding[79 - i])
    }
}

/// With a key, the hello gets the driver's challenge; the right answer is admitted, a wrong
/// one refused with the authentication's code.
#[test]
fn authentication_by_the_key_handed_in() {
    let keyed = Policy {
        auth: Some(Arc::new(Reversed)),
        ..policy()
    };
    let challenge: [u8; 32] = std::array::from_fn(|i| i as u8);
    let mut right = challenge;
    right.reverse();
    for (answer, admitted) in [(right, true), ([0u8; 32], false)] {
        let mut c = Conversation::new(ServerIo::EventLoop, &keyed, Some(challenge), Instant::now());
        let step = feed(&mut c, &stream_hello(10));
        assert_eq!(step.send, Some(Frame::Challenge(challenge)));
        let step = feed(&mut c, &answer);
        if admitted {
            assert!(
                matches!(step.effect, Some(Effect::Begin { .. })),
                "{step:?}"
            );
        } else {
            assert!(
                matches!(step.send, Some(Frame::Refuse { code: RefuseCode::Auth, ref reason }) if reason == AUTH_FAILED),
                "{step:?}"
            );
        }
    }
}

/// A latency session answers whole requests with the clock handed in, and its end says what
/// it answered.
#[test]
fn latency_session_and_its_summary() {
    #[derive(Default)]
    struct Collected(Vec<TimeResponse>);
    impl Answers for Collected {
        fn answer(&mut self, r: &TimeResponse, _: Codec, _: crate::clock::Framing) {
            self.0.push(*r);
        }
    }
    let now = Instant::now();
    let hello = Hello::latency(2, Codec::Binary, crate::clock::Framing::Single, false);
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    // The driver begins the session as it begins a transfer: then the Accept.
    let step = accepted(&mut c, &hello_bytes(&hello));
    assert!(matches!(step.send, Some(Frame::Accept { .. })), "{step:?}");
    let mut req = Vec::new();
    for seq in 0..2 {
        crate::clock::encode_request(
            &TimeRequest {
                seq,
                client_send_unix_ns: 1,
            },
            Codec::Binary,
            &mut req,
        );
    }
    let mut out = Collected::default();
    let session = c.latency().unwrap();
    session.space()[..req.len()].copy_from_slice(&req);
    session.filled(req.len(), &mut clock(), &mut out).unwrap();
    assert_eq!(out.0.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1]);
    let step = c.end_latency(None);
    assert_eq!(step.end, Some(Outcome::Complete));
    assert!(
        matches!(step.effect, Some(Effect::SessionEnded { ref summary }) if summary.starts_with("2 clock queries (codec binary")),
        "{step:?}"
    );
}

mod timed;
