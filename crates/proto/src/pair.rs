//! Both ends of the protocol driven against each other with no sockets, as quinn's `Pair`
//! does: the client's conversation's bytes go into the server's, the server's frames into the
//! client's, and time is simulated (both ends' wall clocks, one ahead of the other by a known
//! offset, and a one-way delay per message).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{ClientError, ClientStep, Prover, StreamConversation};
use crate::serve::{Authenticator, Conversation, DataEnd, Effect, Policy, Step};
use crate::{Frame, Hello, RefuseCode, Report, ServerIo, decode_frame, encode_frame};

/// The server's wall clock is this far ahead of the client's.
const SKEW_NS: u64 = 5_000_000;
/// Each message takes this long on the way, either way.
const ONE_WAY: Duration = Duration::from_micros(40);

/// Simulated time: one monotonic clock, and the two ends' wall clocks.
struct Time {
    start: Instant,
    elapsed: Duration,
}

impl Time {
    fn now(&self) -> Instant {
        self.start + self.elapsed
    }
    fn client_unix_ns(&self) -> u64 {
        1_000_000_000_000 + self.elapsed.as_nanos() as u64
    }
    fn server_unix_ns(&self) -> u64 {
        self.client_unix_ns() + SKEW_NS
    }
    fn travel(&mut self) {
        self.elapsed += ONE_WAY;
    }
}

/// The two ends and the world between them.
struct Pair {
    client: StreamConversation,
    server: Conversation,
    time: Time,
    /// What the server's driver saw of the transfer.
    data: Vec<u8>,
    begun: bool,
    /// What the client took from the server's Accept.
    accepted: Option<crate::client::Accepted>,
}

impl Pair {
    fn new(hello: Hello, policy: &Policy, challenge: Option<[u8; 32]>) -> Pair {
        let time = Time {
            start: Instant::now(),
            elapsed: Duration::ZERO,
        };
        Pair {
            client: StreamConversation::new(hello, Duration::from_secs(5)),
            server: Conversation::new(ServerIo::EventLoop, policy, challenge, time.now()),
            time,
            data: Vec::new(),
            begun: false,
            accepted: None,
        }
    }

    /// Bytes from the client reach the server, which answers with at most one frame.
    fn deliver_to_server(&mut self, bytes: &[u8]) -> Option<Frame> {
        self.time.travel();
        let mut answer = None;
        let mut at = 0;
        while at < bytes.len() {
            let space = self.server.space();
            let n = space.len().min(bytes.len() - at);
            space[..n].copy_from_slice(&bytes[at..at + n]);
            at += n;
            let server_time = self.time.server_unix_ns();
            let step = self
                .server
                .received(n, self.time.now(), &mut || server_time);
            if let Some(f) = self.perform(step) {
                answer = Some(f);
            }
        }
        answer
    }

    /// The server's driver: performs effects, returns the frame to send.
    fn perform(&mut self, mut step: Step) -> Option<Frame> {
        while let Some(effect) = step.effect.take() {
            step = match effect {
                Effect::Begin { .. } => {
                    self.begun = true;
                    self.server.begun(Ok(()), self.time.now())
                }
                Effect::Finish { digest } => {
                    let ours = self.data.iter().map(|b| u64::from(*b)).sum::<u64>();
                    let report = Report {
                        bytes: self.data.len() as u64,
                        digest: ours,
                        reads: 1,
                        ..Report::default()
                    };
                    assert_eq!(digest, ours, "the trailer carries the client's digest");
                    self.server.finished(Ok(report))
                }
                Effect::Abandon { .. } | Effect::SessionEnded { .. } => step,
            };
        }
        step.send
    }

    /// A frame from the server reaches the client, through the wire format.
    fn deliver_to_client(
        &mut self,
        frame: Frame,
        key: Option<&dyn Prover>,
    ) -> Result<ClientStep, ClientError> {
        self.time.travel();
        let mut wire = Vec::new();
        encode_frame(&frame, &mut wire);
        let (decoded, used) = decode_frame(&wire).unwrap().unwrap();
        assert_eq!(used, wire.len());
        self.client
            .on_frame(decoded, key, self.time.now(), self.time.client_unix_ns())
    }

    /// Runs a transfer of `data` to its end: the client's last step or error.
    fn run(&mut self, data: &[u8], key: Option<&dyn Prover>) -> Result<ClientStep, ClientError> {
        let hello = self.client.hello_bytes();
        let mut frame = self
            .deliver_to_server(&hello)
            .expect("an answer to the hello");
        loop {
            let step = self.deliver_to_client(frame, key)?;
            if let ClientStep::Accepted(a) = &step {
                self.accepted = Some(*a);
            }
            match step {
                ClientStep::Send(bytes) => {
                    frame = self.deliver_to_server(&bytes).expect("an answer")
                }
                ClientStep::Accepted(_) | ClientStep::Queried
                    if self.server.phase() == crate::serve::Phase::Clock =>
                {
                    let q = self
                        .client
                        .query(self.time.now(), self.time.client_unix_ns());
                    frame = self.deliver_to_server(&q).expect("a clock answer");
                }
                ClientStep::Accepted(_) | ClientStep::Queried | ClientStep::Data(_) => {
                    self.data.extend_from_slice(data);
                    let step = self.server.data_turn(
                        DataEnd::Complete,
                        data.len() as u64,
                        self.time.now(),
                    );
                    assert!(self.perform(step).is_none());
                    let digest = data.iter().map(|b| u64::from(*b)).sum();
                    let trailer = self.client.trailer(digest);
                    frame = self.deliver_to_server(&trailer).expect("the report");
                }
                report @ ClientStep::Report(_) => return Ok(report),
            }
        }
    }
}

/// A transfer with clock queries runs end to end without a socket: the report counts every
/// byte, and the client's clock estimate finds the server's offset within its bound (exactly,
/// on a symmetric path).
#[test]
fn a_transfer_end_to_end_without_sockets() {
    let hello = Hello {
        clock_queries: 4,
        ..Hello::stream(11, 4, "pair.txt")
    };
    let mut pair = Pair::new(hello, &Policy::default(), None);
    let clock;
    let hello_bytes = pair.client.hello_bytes();
    let mut frame = pair.deliver_to_server(&hello_bytes).unwrap();
    loop {
        match pair.deliver_to_client(frame, None).unwrap() {
            ClientStep::Accepted(a) => {
                assert_eq!(a.server_io, ServerIo::EventLoop);
                let q = pair
                    .client
                    .query(pair.time.now(), pair.time.client_unix_ns());
                frame = pair.deliver_to_server(&q).unwrap();
            }
            ClientStep::Queried => {
                let q = pair
                    .client
                    .query(pair.time.now(), pair.time.client_unix_ns());
                frame = pair.deliver_to_server(&q).unwrap();
            }
            ClientStep::Data(c) => {
                clock = c;
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let c = clock.expect("an estimate from the queries");
    assert_eq!(c.queries, 4);
    assert_eq!(c.rtt_ns, 2 * ONE_WAY.as_nanos() as u64);
    assert_eq!(
        c.offset.offset_ns, SKEW_NS as i64,
        "a symmetric path gives it exactly"
    );
    assert!(pair.begun);
    let data = b"hello world";
    pair.data.extend_from_slice(data);
    let step = pair
        .server
        .data_turn(DataEnd::Complete, data.len() as u64, pair.time.now());
    assert!(pair.perform(step).is_none());
    let trailer = pair
        .client
        .trailer(data.iter().map(|b| u64::from(*b)).sum());
    let frame = pair.deliver_to_server(&trailer).unwrap();
    match pair.deliver_to_client(frame, None).unwrap() {
        ClientStep::Report(r) => assert_eq!(r.bytes, 11),
        other => panic!("{other:?}"),
    }
}

/// The key the server checks, and the one the client answers with: an answer is the challenge
/// reversed, with a salt only the right key knows.
#[derive(Debug)]
struct Key(u8);

impl Authenticator for Key {
    fn verify(&self, challenge: &[u8; 32], answer: &[u8; 32]) -> bool {
        *answer == Prover::answer(self, challenge)
    }

    fn prove(&self, binding: &[u8; 80]) -> [u8; 32] {
        Prover::prove(self, binding)
    }
}

impl Prover for Key {
    fn answer(&self, challenge: &[u8; 32]) -> [u8; 32] {
        std::array::from_fn(|i| challenge[31 - i] ^ self.0)
    }

    fn prove(&self, binding: &[u8; 80]) -> [u8; 32] {
        std::array::from_fn(|i| binding[i] ^ binding[79 - i] ^ self.0.wrapping_add(1))
    }
}

/// Version 14: a stream that asks for TLS is told the certificate the server will present;
/// where the server challenges the client, its key proves that certificate on this connection
/// and the client pins it as authenticated; a proof by another key is refused; a server that
/// authenticates no one names it unproved; one that offers no TLS refuses, naming the flag.
#[test]
fn a_tls_stream_pins_the_certificate_the_key_proves() {
    let cert = [0x5a; 32];
    let hello = || Hello {
        tls: Some(crate::tls::Cipher::Chacha20Poly1305),
        ..Hello::stream(3, 1, "k.txt")
    };
    let keyed = Policy {
        auth: Some(Arc::new(Key(7))),
        tls_cert: Some(cert),
        ..Policy::default()
    };
    let challenge = Some([3u8; 32]);
    let mut pair = Pair::new(hello(), &keyed, challenge);
    assert!(matches!(
        pair.run(b"abc", Some(&Key(7))),
        Ok(ClientStep::Report(_))
    ));
    let pin = pair.accepted.and_then(|a| a.tls).expect("a pin");
    assert_eq!((pin.cert_sha256, pin.authenticated), (cert, true));
    // A server whose key differs proves nothing the client's key accepts (its answer to the
    // challenge is refused first; a proof alone, forged, is refused too).
    let mut pair = Pair::new(hello(), &keyed, challenge);
    pair.deliver_to_server(&pair.client.hello_bytes()).unwrap();
    let forged = Frame::Accept {
        read_size: 1,
        server_io: ServerIo::EventLoop,
        log: crate::LogMode::None,
        stdout: crate::StdoutKind::Unknown,
        length: 0,
        tls: Some(crate::tls::Identity {
            cert_sha256: [0x66; 32],
            proof: Some(Prover::prove(
                &Key(9),
                &crate::tls::binding(&[3; 32], &[0x66; 32]),
            )),
        }),
    };
    let ClientStep::Send(_) = pair
        .deliver_to_client(Frame::Challenge([3; 32]), Some(&Key(7)))
        .unwrap()
    else {
        panic!("no answer to the challenge");
    };
    assert_eq!(
        pair.deliver_to_client(forged, Some(&Key(7))),
        Err(ClientError::BadTlsProof)
    );
    let open = Policy {
        tls_cert: Some(cert),
        ..Policy::default()
    };
    let mut pair = Pair::new(hello(), &open, None);
    assert!(matches!(pair.run(b"abc", None), Ok(ClientStep::Report(_))));
    let pin = pair.accepted.and_then(|a| a.tls).expect("a pin");
    assert!(!pin.authenticated);
    let mut pair = Pair::new(hello(), &Policy::default(), None);
    match pair.run(b"abc", None) {
        Err(ClientError::Refused { code, reason }) => {
            assert_eq!(code, RefuseCode::Unoffered);
            assert!(reason.contains("--no-tls"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut pair = Pair::new(Hello::stream(3, 1, "k.txt"), &open, None);
    assert!(matches!(pair.run(b"abc", None), Ok(ClientStep::Report(_))));
    assert_eq!(pair.accepted.unwrap().tls, None, "clear text pins nothing");
}

/// With a key on both ends the transfer runs; with the wrong one the client gets the
/// authentication's refusal, and with none it is told to pass one.
#[test]
fn authentication_end_to_end() {
    let policy = Policy {
        auth: Some(Arc::new(Key(7))),
        ..Policy::default()
    };
    let challenge = Some([3u8; 32]);
    let hello = || Hello::stream(3, 1, "k.txt");
    let mut pair = Pair::new(hello(), &policy, challenge);
    assert!(matches!(pair.run(b"abc", Some(&Key(7))), Ok(ClientStep::Report(r)) if r.bytes == 3));
    let mut pair = Pair::new(hello(), &policy, challenge);
    assert!(matches!(
        pair.run(b"abc", Some(&Key(8))),
        Err(ClientError::Refused {
            code: RefuseCode::Auth,
            ..
        })
    ));
    let mut pair = Pair::new(hello(), &policy, challenge);
    assert_eq!(pair.run(b"abc", None), Err(ClientError::NeedsKey));
}

/// A refusal reaches the client with its code: a transfer past `--max-bytes`.
#[test]
fn a_refusal_end_to_end() {
    let policy = Policy {
        max_bytes: 2,
        ..Policy::default()
    };
    let mut pair = Pair::new(Hello::stream(3, 1, "big.txt"), &policy, None);
    match pair.run(b"abc", None) {
        Err(ClientError::Refused { code, reason }) => {
            assert_eq!(code, RefuseCode::Limit);
            assert!(reason.contains("--max-bytes"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!pair.begun, "nothing begun for a refused hello");
}
