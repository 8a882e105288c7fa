//! Authenticated clients: HMAC-SHA256 challenge and response with a pre-shared key.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use tsperf_proto::{Frame, decode_frame};
use tsperf_sys::auth::Key;

fn key_file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// The right key passes (stream and latency); a wrong key and no key are refused with a
/// clear error on both sides. Both server models.
#[test]
fn right_wrong_and_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", b"correct horse battery staple\n", 0o600);
    let wrong = key_file(
        dir.path(),
        "wrong",
        b"incorrect horse battery staple",
        0o600,
    );
    let file = test_file(dir.path(), "f.txt", 200_000);
    for model in MODELS {
        let mut args = vec!["--auth-key", key.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        assert!(!server.stderr().contains("warning"), "{}", server.stderr());
        let (out, v) = client_json(
            server.port,
            &["--auth-key", key.to_str().unwrap(), file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        let (out, v) = client_json(
            server.port,
            &[
                "--auth-key",
                key.to_str().unwrap(),
                "--latency",
                "--count",
                "5",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["count"], 5);

        let port = server.port.to_string();
        let out = client(&[
            "--port",
            &port,
            "--auth-key",
            wrong.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert_fails(
            &out,
            1,
            "authentication failed: the client does not hold this server's key",
        );
        let out = client(&["--port", &port, file.to_str().unwrap()]);
        assert_fails(
            &out,
            1,
            "the server requires authentication: pass --auth-key FILE",
        );
        let out = client(&["--port", &port, "--latency", "--count", "1"]);
        assert_fails(&out, 1, "the server requires authentication");
        assert!(
            server.wait_for(|_, e| e.contains("refused") && e.contains("authentication failed")),
            "{}",
            server.stderr()
        );
    }
}

/// An answer recorded from one connection does not open another (fresh challenges).
#[test]
fn replayed_answer_fails() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"0123456789abcdef0123";
    let key = key_file(dir.path(), "key", secret, 0o600);
    for model in MODELS {
        let mut args = vec!["--auth-key", key.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let mut hello = Vec::new();
        hello.extend(stream_hello(1, 1, "r.txt"));
        let open = || {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&hello).unwrap();
            let mut frame = [0u8; 35];
            s.read_exact(&mut frame).unwrap();
            let Ok(Some((Frame::Challenge(c), _))) = decode_frame(&frame) else {
                panic!("no challenge: {frame:?}")
            };
            (s, c)
        };
        let (mut first, c1) = open();
        let answer = Key::from_bytes(secret).answer(&c1);
        first.write_all(&answer).unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        first.read_exact(&mut accept).unwrap();
        assert!(matches!(
            decode_frame(&accept),
            Ok(Some((Frame::Accept { .. }, _)))
        ));
        drop(first);

        let (mut second, c2) = open();
        assert_ne!(c1, c2);
        second.write_all(&answer).unwrap();
        let mut reply = Vec::new();
        let _ = second.read_to_end(&mut reply);
        assert!(
            matches!(decode_frame(&reply), Ok(Some((Frame::Refuse { code: tsperf_proto::RefuseCode::Auth, reason: r }, _))) if r.contains("authentication failed")),
            "{reply:?}"
        );
    }
}

/// A world-readable key file gets a warning; a short or missing one is an error.
#[test]
fn key_file_checks() {
    let dir = tempfile::tempdir().unwrap();
    let open_key = key_file(dir.path(), "open", b"0123456789abcdef", 0o644);
    let server = Server::start(&["--auth-key", open_key.to_str().unwrap()]);
    assert!(
        server.wait_for(|_, e| e.contains("is readable by every user")),
        "{}",
        server.stderr()
    );
    let file = test_file(dir.path(), "f.txt", 10);
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--auth-key",
        open_key.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("is readable by every user"));
    let short = key_file(dir.path(), "short", b"tiny", 0o600);
    assert_fails(
        &client(&[
            "--auth-key",
            short.to_str().unwrap(),
            file.to_str().unwrap(),
        ]),
        1,
        "expected at least 16",
    );
    assert_fails(
        &run(
            bin("tsserver"),
            &["--port", "0", "--auth-key", "/nonexistent/key"],
        ),
        1,
        "cannot read key file '/nonexistent/key'",
    );
}

/// A key file of only whitespace or NUL bytes is no secret and is refused; a
/// group-readable key file gets a warning, as a world-readable one does.
#[test]
fn blank_and_group_readable_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.txt", 10);
    for (name, bytes) in [
        ("spaces", &b"                        \n"[..]),
        ("nuls", &[0u8; 32][..]),
        ("mixed", &b" \t\r\n\0 \t\r\n\0 \t\r\n\0 \t\r\n\0"[..]),
    ] {
        let key = key_file(dir.path(), name, bytes, 0o600);
        for prog in ["tsclient", "tsserver"] {
            let out = run(
                bin(prog),
                &[
                    "--port",
                    "0",
                    "--auth-key",
                    key.to_str().unwrap(),
                    file.to_str().unwrap(),
                ][..if prog == "tsserver" { 4 } else { 5 }],
            );
            assert_fails(&out, 1, "holds only whitespace or NUL bytes");
        }
    }
    let group = key_file(dir.path(), "group", b"0123456789abcdef", 0o640);
    let server = Server::start(&["--auth-key", group.to_str().unwrap()]);
    assert!(
        server.wait_for(|_, e| e.contains("is readable by its group")),
        "{}",
        server.stderr()
    );
}
