//! The load generator against a stand-in server on port 0.

use super::*;
use std::net::{TcpListener, TcpStream as StdStream};
use tsperf_proto::{Frame, LogMode, Report, ServerIo, StdoutKind, decode_hello, encode_frame};

/// What the stand-in server does with each connection once it has read the hello.
#[derive(Clone, Copy)]
enum Serve {
    /// Accepts, reads the data and the trailer, reports `wrong` added to the true digest.
    Report { wrong: u64 },
    /// Accepts, reads half the data, closes.
    CloseMidway,
    /// Reads the hello and says nothing (holds the connection until the test ends).
    Silent,
}

fn send(s: &mut StdStream, frame: &Frame) {
    let mut out = Vec::new();
    encode_frame(frame, &mut out);
    s.write_all(&out).unwrap();
}

/// One connection of the stand-in: the hello, then what `serve` says.
fn serve_one(mut s: StdStream, serve: Serve) {
    let mut buf = Vec::new();
    let hello = loop {
        let mut b = [0u8; 512];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed before its hello");
        buf.extend_from_slice(&b[..n]);
        if let Some((h, used)) = decode_hello(&buf).unwrap() {
            buf.drain(..used);
            break h;
        }
    };
    if let Serve::Silent = serve {
        let _ = s.read(&mut [0u8; 1]);
        return;
    }
    let accept = Frame::Accept {
        read_size: 65536,
        server_io: ServerIo::Blocking,
        log: LogMode::None,
        stdout: StdoutKind::Null,
        length: 0,
        tls: None,
    };
    send(&mut s, &accept);
    let want = hello.length as usize + tsperf_proto::TRAILER;
    let upto = match serve {
        Serve::CloseMidway => want / 2,
        _ => want,
    };
    while buf.len() < upto {
        let mut b = vec![0u8; 65536];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed before its data");
        buf.extend_from_slice(&b[..n]);
    }
    if let Serve::Report { wrong } = serve {
        let data = &buf[..hello.length as usize];
        let trailer = &buf[hello.length as usize..want];
        let digest = twox_hash::XxHash3_64::oneshot(data);
        assert_eq!(
            trailer,
            digest.to_be_bytes(),
            "the trailer is the data's digest"
        );
        let report = Report {
            bytes: data.len() as u64,
            digest: digest.wrapping_add(wrong),
            reads: 1,
            ..Report::default()
        };
        send(&mut s, &Frame::Report(report));
        let _ = s.read(&mut [0u8; 1]);
    }
}

/// A server on port 0 serving `clients` connections as `serve` says, each on a thread.
fn stand_in(clients: u32, serve: Serve) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let conns: Vec<_> = (0..clients)
            .map(|_| {
                let (s, _) = listener.accept().unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                std::thread::spawn(move || serve_one(s, serve))
            })
            .collect();
        for c in conns {
            let _ = c.join();
        }
    });
    (addr, server)
}

fn load(addr: SocketAddr, data: &[u8], clients: u32, threads: u32) -> Load<'_> {
    Load {
        addr,
        data,
        name: "x.txt",
        chunk: 1000,
        clients,
        threads,
        timeout: Duration::from_secs(10),
    }
}

fn data() -> Vec<u8> {
    (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// More clients than are opened at once, over two threads: every one is accepted, sends
/// every byte with its digest trailer, and counts once its report matches.
#[test]
fn every_transfer_is_verified_by_its_report() {
    let data = data();
    let clients = OPENING as u32 * 2 + 3;
    let (addr, server) = stand_in(clients, Serve::Report { wrong: 0 });
    let out = run(&load(addr, &data, clients, 2));
    server.join().unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures.first());
    assert_eq!(out.verified, clients);
    assert_eq!(out.bytes, u64::from(clients) * data.len() as u64);
    assert!(out.elapsed > Duration::ZERO);
}

/// A report whose digest is not the data's is a failure that says both.
#[test]
fn a_wrong_digest_fails_the_transfer() {
    let data = data();
    let (addr, server) = stand_in(3, Serve::Report { wrong: 1 });
    let out = run(&load(addr, &data, 3, 1));
    server.join().unwrap();
    assert_eq!(out.verified, 0);
    assert_eq!(out.bytes, 0);
    assert_eq!(out.failures.len(), 3, "{:?}", out.failures);
    let digest = twox_hash::XxHash3_64::oneshot(&data);
    assert!(
        out.failures[0].contains(&format!("{:016x}", digest.wrapping_add(1)))
            && out.failures[0].contains(&format!("{digest:016x} were sent")),
        "{:?}",
        out.failures
    );
}

/// A server that closes mid-data, or never answers, fails each transfer with where it
/// stood, and the silent one within the no-progress timeout.
#[test]
fn a_lost_or_silent_server_fails_every_transfer() {
    let data = data();
    let (addr, server) = stand_in(2, Serve::CloseMidway);
    let out = run(&load(addr, &data, 2, 1));
    server.join().unwrap();
    assert_eq!(
        (out.verified, out.failures.len()),
        (0, 2),
        "{:?}",
        out.failures
    );
    assert!(
        out.failures
            .iter()
            .all(|f| f.contains("sending the data") || f.contains("waiting for the report")),
        "{:?}",
        out.failures
    );
    let (addr, _server) = stand_in(2, Serve::Silent);
    let mut silent = load(addr, &data, 2, 1);
    silent.timeout = Duration::from_millis(300);
    let out = run(&silent);
    assert_eq!(out.failures.len(), 2, "{:?}", out.failures);
    assert!(
        out.failures
            .iter()
            .all(|f| f.contains("no progress within 0.3 s: waiting for the server's accept")),
        "{:?}",
        out.failures
    );
}

/// Nothing listening: every client fails at once, and nothing waits.
#[test]
fn no_server_fails_every_transfer() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let data = data();
    let out = run(&load(addr, &data, 5, 1));
    assert_eq!(
        (out.verified, out.failures.len()),
        (0, 5),
        "{:?}",
        out.failures
    );
}
