//! The conversation without sockets: bytes in, frames and outcomes out, and the words it says.

use super::*;
use std::time::Duration;
use tsperf_proto::{LogMode, encode_hello};

fn cfg() -> ServerConfig {
    ServerConfig {
        bind: None,
        port: 0,
        once: false,
        read_size: None,
        rcvbuf: None,
        blocking: false,
        log: LogMode::None,
        allow_client_log: false,
        stdout: tsperf_proto::StdoutKind::Pipe,
        log_min_read: super::super::LOG_MIN_READ,
        max_bytes: 1 << 30,
        max_clients: 8,
        hello_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(7),
        save: None,
        auth: None,
        grace: Duration::from_secs(1),
    }
}

fn peer() -> SocketAddr {
    "198.18.0.2:5000".parse().unwrap()
}

fn stream_hello(length: u64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_hello(&Hello::stream(length, 1024, "t.txt"), &mut out);
    out
}

/// Feeds `bytes` one at a time, as a trickling client would send them.
fn feed(c: &mut Conversation, bytes: &[u8], cfg: &ServerConfig) -> Step {
    let sock = std::io::stdin();
    for b in bytes {
        c.space()[0] = *b;
        let step = c.received(1, cfg, Instant::now(), &sock);
        if step.send.is_some() || step.end.is_some() {
            return step;
        }
    }
    Step::default()
}

/// A hello trickled in byte by byte is accepted, with the server's read size and model.
#[test]
fn hello_then_accept() {
    let cfg = cfg();
    let mut c = Conversation::new(peer(), ServerIo::Blocking, &cfg, Instant::now());
    assert_eq!(c.phase(), Phase::Hello);
    let step = feed(&mut c, &stream_hello(10), &cfg);
    assert!(
        matches!(
            step.send,
            Some(Frame::Accept { server_io: ServerIo::Blocking, read_size, .. }) if read_size > 0
        ),
        "{step:?}"
    );
    assert!(step.end.is_none());
    assert_eq!(c.phase(), Phase::Data);
}

/// The same words for the same ends, whichever model: they are said here only.
#[test]
fn reasons() {
    let cfg = cfg();
    let sock = std::io::stdin();
    let now = Instant::now();
    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let step = c.received(0, &cfg, now, &sock);
    assert!(
        matches!(step.end, Some(Outcome::Refused(ref r)) if r == "connection closed without a hello")
    );

    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let step = c.timed_out(&cfg, false, false);
    assert!(matches!(step.send, Some(Frame::Refuse(ref r)) if r == "no complete hello within 2 s"));

    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let _ = feed(&mut c, &stream_hello(10), &cfg);
    assert_eq!(c.deadline(), c.deadline().max(now + cfg.hello_timeout));
    let step = c.timed_out(&cfg, false, false);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "no data within 2 s of the accept")
    );

    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let _ = feed(&mut c, &stream_hello(1), &cfg);
    c.receiver().unwrap().count(1);
    let step = c.data_turn(ReadEnd::Complete, 1, &cfg, now);
    assert!(step.end.is_none());
    assert_eq!(c.phase(), Phase::Trailer);
    let step = c.received(0, &cfg, now, &sock);
    assert!(
        matches!(step.end, Some(Outcome::Incomplete(ref r)) if r.ends_with("then the client closed before sending its digest")),
        "{step:?}"
    );
}

/// Data after the hello, before the accept, is refused; a trickled hello that the client
/// abandons names how far it got.
#[test]
fn early_data_and_short_hellos() {
    let cfg = cfg();
    let now = Instant::now();
    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let mut bytes = stream_hello(10);
    bytes.push(b'x');
    let sock = std::io::stdin();
    let n = bytes.len();
    c.space()[..n].copy_from_slice(&bytes);
    let step = c.received(n, &cfg, now, &sock);
    assert!(
        matches!(step.end, Some(Outcome::Refused(ref r)) if r.contains("before the server accepted"))
    );
    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    c.space()[..3].copy_from_slice(&bytes[..3]);
    let _ = c.received(3, &cfg, now, &sock);
    let step = c.received(0, &cfg, now, &sock);
    assert!(
        matches!(step.end, Some(Outcome::Refused(ref r)) if r == "connection closed after 3 bytes of a hello")
    );
}

fn hello_bytes(h: &Hello) -> Vec<u8> {
    let mut out = Vec::new();
    encode_hello(h, &mut out);
    out
}

/// A client that asks for another sink than the server's is refused with the flag named, unless
/// the server allows it; the Accept names the transfer's sink and the server's stdout.
#[test]
fn client_chosen_sink() {
    let mut cfg = cfg();
    let now = Instant::now();
    let asking = Hello {
        log: Some(LogMode::File),
        ..Hello::stream(10, 1024, "t.txt")
    };
    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let step = feed(&mut c, &hello_bytes(&asking), &cfg);
    assert!(
        matches!(step.end, Some(Outcome::Refused(ref r)) if r.contains("--allow-client-log")),
        "{step:?}"
    );
    cfg.allow_client_log = true;
    let mut c = Conversation::new(peer(), ServerIo::EventLoop, &cfg, now);
    let step = feed(&mut c, &hello_bytes(&asking), &cfg);
    assert!(
        matches!(
            step.send,
            Some(Frame::Accept {
                log: LogMode::File,
                stdout: tsperf_proto::StdoutKind::Pipe,
                read_size: 1024,
                ..
            })
        ),
        "{step:?}"
    );
    assert_eq!(c.receiver().map(|rx| rx.log()), Some(LogMode::File));
}

/// Clock queries come before the data, each answered in order with the server's stamps; one out
/// of order ends the transfer with an Abort; they share the accept's deadline.
#[test]
fn clock_queries_before_data() {
    let cfg = cfg();
    let now = Instant::now();
    let h = Hello {
        clock_queries: 2,
        ..Hello::stream(10, 1024, "t.txt")
    };
    let query = |seq: u64| {
        tsperf_proto::clock::encode_query(&tsperf_proto::clock::TimeRequest {
            seq,
            client_send_unix_ns: 5,
        })
    };
    let mut c = Conversation::new(peer(), ServerIo::Blocking, &cfg, now);
    let _ = feed(&mut c, &hello_bytes(&h), &cfg);
    assert_eq!(c.phase(), Phase::Clock);
    let deadline = c.deadline();
    assert!(c.receiver().is_none(), "no data is read before the queries");
    for seq in 0..2 {
        let step = feed(&mut c, &query(seq), &cfg);
        match step.send {
            Some(Frame::Time(t)) => {
                assert_eq!(t.seq, seq);
                assert!(
                    t.server_recv_unix_ns > 0 && t.server_send_unix_ns >= t.server_recv_unix_ns
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

    let mut c = Conversation::new(peer(), ServerIo::Blocking, &cfg, now);
    let _ = feed(&mut c, &hello_bytes(&h), &cfg);
    let step = feed(&mut c, &query(1), &cfg);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "clock query 1 arrived when 0 was due"),
        "{step:?}"
    );
    let mut c = Conversation::new(peer(), ServerIo::Blocking, &cfg, now);
    let _ = feed(&mut c, &hello_bytes(&h), &cfg);
    let _ = feed(&mut c, &query(0), &cfg);
    let step = c.timed_out(&cfg, false, false);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "1 of 2 clock queries within 2 s of the accept"),
        "{step:?}"
    );
}
