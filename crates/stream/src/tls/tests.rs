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
            let mut ctls = client(cipher, server.cert_sha256(), Records::Process).unwrap();
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
        let mut ctls = client(Cipher::Aes128Gcm, other.cert_sha256(), Records::Process).unwrap();
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
        let mut ctls = client(Cipher::Aes256Gcm, server.cert_sha256(), Records::Process).unwrap();
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
    let mut ctls = client(
        Cipher::Chacha20Poly1305,
        server.cert_sha256(),
        Records::Process,
    )
    .unwrap();
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

/// While a handshake whose keys go to the kernel runs, the socket is read no further than the
/// record in hand: a header, then its body, so the first record after the handshake stays in
/// the kernel for kernel TLS to open.
#[test]
fn a_handshake_for_the_kernel_reads_no_record_beyond_its_own() {
    let record = |kind: u8, len: usize| {
        let mut r = vec![kind, 3, 3, (len >> 8) as u8, len as u8];
        r.extend(std::iter::repeat_n(7u8, len));
        r
    };
    let wire = [
        record(22, 90),
        record(23, 4000),
        record(21, 0),
        record(23, 2),
    ]
    .concat();
    let mut raw = Raw {
        exact: Some((0, [0; 5], 0)),
        ..Raw::default()
    };
    let (mut at, mut ends) = (0, Vec::new());
    while at < wire.len() {
        // A socket that hands over at most 1000 bytes at a time, and never more than asked.
        let n = raw.room().min(1000).min(wire.len() - at);
        assert!(n > 0, "no room at byte {at}");
        raw.saw(&wire[at..at + n]);
        at += n;
        if raw.exact.is_some_and(|(got, _, _)| got == 0) {
            ends.push(at);
        }
    }
    // Every read ended at or before a record's end, and each end was reached exactly.
    assert_eq!(ends, [95, 4100, 4105, 4112]);
    // Without the kernel, reads take up to TLS_READ.
    assert_eq!(Raw::default().room(), TLS_READ);
}

/// Kernel TLS where the kernel offers it: a client whose records the kernel seals sends with
/// writes and with sendfile, and receives, every suite, the server's rustls reading and
/// writing the same records; the bytes arrive whole and each end names the suite. Where the
/// kernel has none, says so and checks nothing (the VM test runs it on a kernel that has).
#[test]
fn kernel_tls_carries_the_bytes_whole_with_writes_and_sendfile() {
    if let Err(why) = tsperf_sys::ktls::offered() {
        eprintln!("skipped: {why}");
        return;
    }
    let server = ServerTls::ephemeral().unwrap();
    let sent = data(3 << 20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    std::fs::write(&path, &sent).unwrap();
    for cipher in Cipher::ALL {
        let (mut c, mut s) = pair();
        let mut stls = server.connection().unwrap();
        let expect = sent.clone();
        std::thread::scope(|scope| {
            let far = scope.spawn(|| {
                let mut w = Wire::new(&mut s, Some(&mut stls));
                let mut got = vec![0u8; 2 * expect.len()];
                w.read_exact(&mut got).unwrap();
                assert!(got[..expect.len()] == expect[..] && got[expect.len()..] == expect[..]);
                w.write_all(&expect).unwrap();
                w.close().unwrap();
                w.cipher()
            });
            let mut ctls = client(cipher, server.cert_sha256(), Records::Kernel).unwrap();
            let mut w = Wire::new(&mut c, Some(&mut ctls));
            w.write_all(&sent).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let mut off = 0;
            while off < sent.len() {
                use crate::send::Sink;
                off += w.sendfile(&file, off as u64, sent.len() - off).unwrap();
            }
            let mut back = Vec::new();
            w.read_to_end(&mut back).unwrap();
            assert!(back == sent, "{cipher:?}: {} bytes back", back.len());
            assert_eq!(w.cipher(), Some(cipher));
            assert_eq!(ctls.records(), Records::Kernel);
            assert_eq!(far.join().unwrap(), Some(cipher));
        });
    }
}
