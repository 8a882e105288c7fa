//! TLS over real loopback sockets: every suite carries the bytes whole, a certificate other
//! than the pinned one is refused, a cut stream is an error and not an end, and the same
//! [`Wire`] serves non-blocking sockets, a handshake driven by whichever end comes first.

use super::*;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A connected pair of loopback sockets, each read with a deadline.
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    for end in [&c, &s] {
        end.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        end.set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
    }
    (c, s)
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// Every suite carries 3 MiB whole from client to server and back, and both ends name the
/// suite the client asked for.
#[test]
fn every_suite_carries_the_bytes_whole_both_ways() {
    let server = ServerTls::ephemeral().unwrap();
    let sent = data(3 << 20);
    for cipher in Cipher::ALL {
        let (mut c, mut s) = pair();
        let mut stls = server.connection().unwrap();
        let expect = sent.clone();
        let served = std::thread::scope(|scope| {
            let far = scope.spawn(|| {
                let mut w = Wire::new(&mut s, Some(&mut stls));
                let mut got = vec![0u8; expect.len()];
                w.read_exact(&mut got).unwrap();
                assert!(got == expect);
                w.write_all(&got).unwrap();
                w.close().unwrap();
                w.cipher()
            });
            let mut ctls = client(cipher, server.cert_sha256()).unwrap();
            let mut w = Wire::new(&mut c, Some(&mut ctls));
            w.write_all(&sent).unwrap();
            w.flush().unwrap();
            let mut back = Vec::new();
            w.read_to_end(&mut back).unwrap();
            assert!(back == sent, "{cipher:?}: {} bytes back", back.len());
            assert_eq!(w.cipher(), Some(cipher));
            far.join().unwrap()
        });
        assert_eq!(served, Some(cipher));
    }
}

/// A server presenting a certificate other than the pinned one is refused in the handshake,
/// saying so.
#[test]
fn another_certificate_is_refused() {
    let server = ServerTls::ephemeral().unwrap();
    let other = ServerTls::ephemeral().unwrap();
    let (mut c, mut s) = pair();
    let mut stls = server.connection().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = Wire::new(&mut s, Some(&mut stls));
            let _ = w.read(&mut [0u8; 16]);
        });
        let mut ctls = client(Cipher::Aes128Gcm, other.cert_sha256()).unwrap();
        let mut w = Wire::new(&mut c, Some(&mut ctls));
        let e = w.write_all(b"x").and_then(|()| w.flush()).unwrap_err();
        assert!(e.to_string().contains("another certificate"), "{e}");
    });
}

/// A peer that closes its socket without ending its TLS (mid-record, or after whole records)
/// is an error at the reader, never a clean end of the data.
#[test]
fn a_cut_stream_is_an_error_not_an_end() {
    let server = ServerTls::ephemeral().unwrap();
    let (mut c, mut s) = pair();
    let mut stls = server.connection().unwrap();
    std::thread::scope(|scope| {
        let far = scope.spawn(|| {
            let mut w = Wire::new(&mut s, Some(&mut stls));
            let mut all = Vec::new();
            w.read_to_end(&mut all).map(|_| all.len())
        });
        let mut ctls = client(Cipher::Aes256Gcm, server.cert_sha256()).unwrap();
        let mut w = Wire::new(&mut c, Some(&mut ctls));
        w.write_all(&data(100_000)).unwrap();
        w.flush().unwrap();
        // No close_notify: the socket just goes.
        c.shutdown(std::net::Shutdown::Both).unwrap();
        let got = far.join().unwrap();
        assert_eq!(
            got.unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof,
            "a cut is not an end"
        );
    });
}

/// Non-blocking sockets in one thread: writes and reads say `WouldBlock` where the socket
/// would, the handshake goes on from either end, and the bytes arrive whole.
#[test]
fn non_blocking_sockets_carry_the_bytes_whole() {
    let server = ServerTls::ephemeral().unwrap();
    let (mut c, mut s) = pair();
    c.set_nonblocking(true).unwrap();
    s.set_nonblocking(true).unwrap();
    let mut stls = server.connection().unwrap();
    let mut ctls = client(Cipher::Chacha20Poly1305, server.cert_sha256()).unwrap();
    let sent = data(2 << 20);
    let (mut at, mut got, mut buf) = (0, Vec::new(), vec![0u8; 64 << 10]);
    let mut would_block = 0u64;
    let mut closed = false;
    for _ in 0..1_000_000 {
        let mut cw = Wire::new(&mut c, Some(&mut ctls));
        if at < sent.len() {
            match cw.write(&sent[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => would_block += 1,
                Err(e) => panic!("{e}"),
            }
        } else if !closed {
            match cw.flush() {
                Ok(()) => {
                    cw.close().unwrap();
                    closed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        let mut sw = Wire::new(&mut s, Some(&mut stls));
        match sw.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(got == sent, "{} of {} bytes", got.len(), sent.len());
    assert!(would_block > 0 || at == sent.len());
}
