//! `tsclient --tls SUITE`: the data over TLS 1.3, verified either way in every I/O model,
//! encrypted on the wire, its server pinned and, with a key, authenticated.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

/// Every suite carries a forward and a reverse stream, each verified, with either socket model
/// at the client and either server model; the JSON names the suite, and without a key says the
/// server was not authenticated.
#[test]
fn every_suite_either_way_in_every_model() {
    for model in MODELS {
        let server = Server::start(model);
        for cipher in ["aes128gcm", "aes256gcm", "chacha20poly1305"] {
            for io in [&[][..], &["--nonblocking"]] {
                for dir in [&[][..], &["-R"]] {
                    let mut args = vec!["--tls", cipher, "--bytes", "3MiB", "--chunk", "1000"];
                    args.extend_from_slice(io);
                    args.extend_from_slice(dir);
                    let (out, v) = client_json(server.port, &args);
                    let what = format!("{model:?} {args:?}");
                    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
                    assert_eq!(v["verified"], true, "{what}");
                    assert_eq!(v["tls"]["cipher"], cipher, "{what}: {v}");
                    assert_eq!(v["tls"]["authenticated"], false, "{what}");
                    assert_eq!(v["bytes"], 3 << 20, "{what}");
                }
            }
        }
        let (_, v) = client_json(server.port, &["--bytes", "1MiB"]);
        assert!(v.get("tls").is_none(), "clear text says no TLS: {v}");
    }
}

/// A relay between client and server that keeps what the client sent.
pub(crate) fn relay(to: u16) -> (u16, Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", to)).unwrap();
        for end in [&c, &s] {
            end.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        }
        let (mut c2, mut s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Write);
        });
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    kept.lock().unwrap().extend_from_slice(&buf[..n]);
                    if s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = back.join();
    });
    (port, seen, t)
}

/// On the wire the data is not the plain text: a relay that keeps what the client sent finds
/// the generated text's bytes in a clear run and not in one over TLS, both verified.
#[test]
fn the_wire_carries_no_plain_text() {
    let server = Server::start(&[]);
    let probe = tsperf_sys::testdata::text(4096)[1000..1064].to_vec();
    for (tls, plain) in [(false, true), (true, false)] {
        let (port, seen, t) = relay(server.port);
        let mut args = vec!["--bytes", "1MiB"];
        if tls {
            args.extend_from_slice(&["--tls", "aes256gcm"]);
        }
        let (out, v) = client_json(port, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        t.join().unwrap();
        let seen = seen.lock().unwrap();
        assert!(seen.len() > 1 << 20, "{} bytes relayed", seen.len());
        let found = seen.windows(probe.len()).any(|w| w == probe.as_slice());
        assert_eq!(
            found, plain,
            "tls {tls}: the plain text seen on the wire: {found}"
        );
    }
}

/// With the key on both ends the server's certificate is proved by it (`tls.authenticated`);
/// a server started with `--no-tls` refuses `--tls`, naming the flag, and serves the clear run.
#[test]
fn a_key_authenticates_and_no_tls_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, b"correct horse battery staple\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let k = key.to_str().unwrap();
    let server = Server::start(&["--auth-key", k]);
    for dir in [&[][..], &["-R"]] {
        let mut args = vec![
            "--auth-key",
            k,
            "--tls",
            "chacha20poly1305",
            "--bytes",
            "2MiB",
        ];
        args.extend_from_slice(dir);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["tls"]["authenticated"], true, "{v}");
        assert_eq!(v["tls"]["suite"], "TLS13_CHACHA20_POLY1305_SHA256");
    }
    let port = server.port.to_string();
    let out = client(&[
        "--port",
        &port,
        "--auth-key",
        k,
        "--tls",
        "aes128gcm",
        "--bytes",
        "1MiB",
    ]);
    assert!(
        stdout(&out)
            .contains("encrypted: TLS 1.3 TLS13_AES_128_GCM_SHA256; the server proved by the key"),
        "{}",
        stdout(&out)
    );
    let clear = Server::start(&["--no-tls"]);
    let out = client(&[
        "--port",
        &clear.port.to_string(),
        "--tls",
        "aes128gcm",
        "--bytes",
        "1MiB",
    ]);
    assert_fails(&out, 1, "--no-tls");
    let (out, _) = client_json(clear.port, &["--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(0));
}

/// A client that asks for TLS and then sends bytes that are no TLS handshake, or that closes
/// in the middle of its handshake, is ended by the server (its connection closed, the reason on
/// its stderr), and the server serves the next client, over TLS and in the clear, in either
/// model.
#[test]
fn a_broken_handshake_hurts_no_one_else() {
    use tsperf_proto::{Frame, Hello, encode_hello, tls::Cipher};
    for model in MODELS {
        let server = Server::start(model);
        for garbage in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            &[0x16, 0x03, 0x01, 0x02],
        ] {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut hello = Vec::new();
            let h = Hello {
                tls: Some(Cipher::Aes128Gcm),
                ..Hello::stream(1 << 20, 1024, "x.bin")
            };
            encode_hello(&h, &mut hello);
            s.write_all(&hello).unwrap();
            assert!(
                matches!(
                    read_one_frame(&mut s),
                    Some(Frame::Accept { tls: Some(_), .. })
                ),
                "{model:?}"
            );
            s.write_all(garbage).unwrap();
            if garbage.len() < 8 {
                // A record header and then the end: closed mid-handshake.
                s.shutdown(std::net::Shutdown::Write).unwrap();
            }
            let mut rest = Vec::new();
            // The server closes it (an end or a reset), not the read's 20 s timeout.
            let ended = s.read_to_end(&mut rest);
            assert!(
                !ended.as_ref().is_err_and(|e| matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )),
                "{model:?}: the server left a broken handshake open: {ended:?}"
            );
            for args in [
                &["--tls", "aes256gcm", "--bytes", "1MiB"][..],
                &["--bytes", "1MiB"],
            ] {
                let (out, v) = client_json(server.port, args);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{model:?} {args:?}: {}",
                    stderr(&out)
                );
                assert_eq!(v["verified"], true);
            }
        }
    }
}

/// A relay that passes both ways until `cut` bytes went from the client to the server
/// (`upstream`) or back (else), then drops both connections: a peer gone mid-record.
fn cutting_relay(to: u16, cut: usize, upstream: bool) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect(("127.0.0.1", to)).unwrap();
        for end in [&c, &s] {
            end.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        }
        // Passes `limit` bytes, then ends that way (a FIN, mid-record) and drains the rest
        // until the sender's end, so that no socket closes with bytes unread (a reset).
        let pass = move |mut from: TcpStream, mut to: TcpStream, limit: usize| {
            let mut buf = vec![0u8; 16 << 10];
            let mut went = 0;
            while let Ok(n @ 1..) = from.read(&mut buf) {
                if went < limit {
                    let k = n.min(limit - went);
                    went = match to.write_all(&buf[..k]) {
                        Ok(()) => went + k,
                        Err(_) => limit,
                    };
                    if went >= limit {
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    }
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        };
        let (up, down) = if upstream {
            (cut, usize::MAX)
        } else {
            (usize::MAX, cut)
        };
        let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let back = std::thread::spawn(move || pass(s2, c2, down));
        pass(c, s, up);
        let _ = back.join();
    });
    (port, t)
}

/// A peer gone in the middle of a TLS record, either way and in either server model: the
/// receiving end fails with a reason, no partial file is left under the save directory on
/// either end, and the server serves the next client over TLS.
#[test]
fn a_peer_gone_mid_record_leaves_nothing_half_saved() {
    let src = tempfile::tempdir().unwrap();
    let file = test_file(src.path(), "gone.bin", 4 << 20);
    for model in MODELS {
        let save = tempfile::tempdir().unwrap();
        let mut args = vec!["--save", save.path().to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mine = tempfile::tempdir().unwrap();
        for upstream in [true, false] {
            let (port, relay) = cutting_relay(server.port, 300_001, upstream);
            let port = port.to_string();
            let mut args = vec!["--port", &port, "--tls", "aes128gcm", "--timeout", "10"];
            if upstream {
                args.push(file.to_str().unwrap());
            } else {
                args.extend([
                    "-R",
                    "--bytes",
                    "4MiB",
                    "--save",
                    mine.path().to_str().unwrap(),
                ]);
            }
            let out = client(&args);
            relay.join().unwrap();
            let what = format!("{model:?} upstream {upstream}");
            assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
            if !upstream {
                // Said in tsperf's words, not a library's link.
                assert_fails(&out, 1, "the server's TLS stream was cut off mid-stream");
            }
            // The server ends its side on its own time: wait for it (bounded).
            let until = std::time::Instant::now() + DEADLINE;
            for dir in [save.path(), mine.path()] {
                let left = || std::fs::read_dir(dir).unwrap().count();
                while left() > 0 && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
                assert!(
                    left.is_empty(),
                    "{what}: left {left:?}\n{}",
                    server.stderr()
                );
            }
        }
        let (out, v) = client_json(server.port, &["--tls", "aes128gcm", "--bytes", "1MiB"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
        let said = server.stderr();
        assert!(
            said.contains("then the client's TLS stream was cut off mid-stream"),
            "{model:?}: {said}"
        );
        assert!(!said.contains("https://"), "{model:?}: {said}");
    }
}

/// A hello asking for a suite the server does not offer (a byte no suite has) is refused
/// with a reason naming the suite it asked for and those offered, in either model, and the
/// server serves the next client over TLS.
#[test]
fn a_suite_not_offered_is_refused_by_name() {
    use tsperf_proto::{Frame, Hello, encode_hello, tls::Cipher};
    for model in MODELS {
        let server = Server::start(model);
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut hello = Vec::new();
        let h = Hello {
            tls: Some(Cipher::Aes128Gcm),
            ..Hello::stream(1 << 20, 1024, "x.bin")
        };
        encode_hello(&h, &mut hello);
        assert_eq!(hello[53], 1, "the suite's byte");
        hello[53] = 9;
        s.write_all(&hello).unwrap();
        match read_one_frame(&mut s) {
            Some(Frame::Refuse { reason, .. }) => assert!(
                reason.contains("cipher suite 9") && reason.contains("chacha20poly1305"),
                "{model:?}: {reason}"
            ),
            other => panic!("{model:?}: expected a refusal, got {other:?}"),
        }
        let (out, v) = client_json(
            server.port,
            &["--tls", "chacha20poly1305", "--bytes", "1MiB"],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
    }
}

/// A certificate and key of the operator's (`--tls-cert`, `--tls-key`, PEM) are what the
/// server presents: the client's JSON names the certificate's SHA-256, the one the operator
/// gave, in either model. Without the flags the server makes its own (another fingerprint).
#[test]
fn the_operators_certificate_is_presented_and_named() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["far.example".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let want: String = sha2::Sha256::digest(made.cert.der().as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for model in MODELS {
        let mut args = vec![
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        for dir in [&[][..], &["-R"]] {
            let mut args = vec!["--tls", "aes256gcm", "--bytes", "1MiB"];
            args.extend_from_slice(dir);
            let (out, v) = client_json(server.port, &args);
            assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
            assert_eq!(v["verified"], true);
            assert_eq!(v["tls"]["cert_sha256"], want, "{model:?} {dir:?}: {v}");
        }
    }
    let server = Server::start(&[]);
    let (_, v) = client_json(server.port, &["--tls", "aes128gcm", "--bytes", "1MiB"]);
    let own = v["tls"]["cert_sha256"].as_str().unwrap();
    assert_eq!(own.len(), 64, "{v}");
    assert_ne!(own, want);
}

/// A certificate or key that cannot be used stops tsserver at start with the file named and
/// what was expected: a missing file, a file with no certificate, a key that is not the
/// certificate's, one flag without the other, either with --no-tls.
#[test]
fn an_unusable_certificate_stops_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let a = rcgen::generate_simple_self_signed(vec!["a.example".to_owned()]).unwrap();
    let b = rcgen::generate_simple_self_signed(vec!["b.example".to_owned()]).unwrap();
    let path = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let cert = path("cert.pem", &a.cert.pem());
    let key = path("key.pem", &a.signing_key.serialize_pem());
    let other = path("other.pem", &b.signing_key.serialize_pem());
    let text = path("notes.txt", "not a certificate\n");
    let missing = dir.path().join("none.pem").to_str().unwrap().to_owned();
    let server = bin("tsserver");
    for (args, code, needle) in [
        (
            vec!["--tls-cert", &missing, "--tls-key", &key],
            1,
            format!("cannot read --tls-cert '{missing}'"),
        ),
        (
            vec!["--tls-cert", &text, "--tls-key", &key],
            1,
            format!("--tls-cert '{text}' holds no certificate: expected PEM"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &text],
            1,
            format!("--tls-key '{text}' holds no private key: expected PEM"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other],
            1,
            format!("--tls-key '{other}' is not the key of --tls-cert '{cert}'"),
        ),
        (vec!["--tls-cert", &cert], 2, "--tls-key".to_owned()),
        (
            vec!["--tls-cert", &cert, "--tls-key", &key, "--no-tls"],
            2,
            "--no-tls".to_owned(),
        ),
    ] {
        let mut all = vec!["--port", "0", "--bind", "127.0.0.1"];
        all.extend(args.iter().copied());
        let o = run(server.clone(), &all);
        assert_fails(&o, code, &needle);
    }
}

/// Clients that ask for a reverse stream over TLS and then stop reading (stopped processes)
/// hold the server to its TLS bound, docs/security.md's: records unsent up to 256 KiB and
/// rustls's own buffers, well under 1 MiB a connection, in either model; the server still
/// serves another client over TLS meanwhile.
#[test]
fn stalled_tls_readers_stay_under_the_bound() {
    const CLIENTS: u64 = 24;
    for model in MODELS {
        let server = Server::start(model);
        // The generated text a reverse stream sends is made once and shared (36 MiB): made
        // before the base is read, so what grows after is the connections'.
        let (out, _) = client_json(
            server.port,
            &["--tls", "aes128gcm", "-R", "--bytes", "1MiB"],
        );
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        let base = server.status_kib("VmHWM");
        let port = server.port.to_string();
        let mut stalled: Vec<std::process::Child> = (0..CLIENTS)
            .map(|_| {
                std::process::Command::new(bin("tsclient"))
                    .args(["--port", &port, "--tls", "chacha20poly1305", "-R"])
                    .args(["--bytes", "4GiB", "--no-progress", "--timeout", "60"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Let each get its stream going, then stop them all: the server's writes back up.
        std::thread::sleep(Duration::from_millis(1500));
        for c in &stalled {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGSTOP) };
        }
        std::thread::sleep(Duration::from_millis(1500));
        let (out, v) = client_json(server.port, &["--tls", "aes128gcm", "--bytes", "4MiB"]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
        let grown = server.status_kib("VmHWM").saturating_sub(base);
        for c in &mut stalled {
            let _ = c.kill();
            // SAFETY: kill(2) on our own child: a stopped process takes SIGKILL.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.wait();
        }
        eprintln!(
            "{model:?}: {CLIENTS} stalled TLS readers: VmHWM +{grown} KiB ({} KiB each)",
            grown / CLIENTS
        );
        assert!(
            grown < CLIENTS * 1024,
            "{model:?}: {CLIENTS} stalled TLS readers grew the server by {grown} KiB"
        );
    }
}
