//! Text that comes from the peer (a refusal or abort reason, a saved path, a file
//! name) is printed with control, format and bidi characters escaped, so a hostile peer cannot
//! clear the screen, retitle the terminal or reorder what a person reads.

use std::io::Read;

use crate::common::*;
use tsperf_proto::{Frame, Report};

/// Screen-clearing, title-setting and right-to-left text, as a hostile server would send.
const HOSTILE: &str = "x\u{1b}[2J\u{1b}]0;owned\u{7}y\u{202e}txt.exe\u{2066}z";

/// Nothing in `text` that a terminal would act on: no ESC, BEL or bidi control.
fn assert_inert(text: &str, what: &str) {
    for c in ['\u{1b}', '\u{7}', '\u{202e}', '\u{2066}'] {
        assert!(
            !text.contains(c),
            "{what}: raw U+{:04X} reached the terminal: {text:?}",
            c as u32
        );
    }
}

/// A refusal reason is shown escaped, and still readable.
#[test]
fn client_escapes_a_refusal_reason() {
    let port = fake_refuser(HOSTILE);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 100);
    let out = client(&["--port", &port.to_string(), path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_inert(&err, "refusal");
    assert!(err.contains("\\u{1b}[2J"), "{err}");
    assert!(err.contains("\\u{202e}txt.exe"), "{err}");
}

/// A server that answers any hello with a refusal of `reason`.
fn fake_refuser(reason: &'static str) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        send(
            &mut s,
            &Frame::Refuse {
                code: tsperf_proto::RefuseCode::Other,
                reason: reason.into(),
            },
        );
    });
    port
}

/// An abort reason is shown escaped.
#[test]
fn client_escapes_an_abort_reason() {
    let port = fake_server(|mut s, _| {
        let mut buf = vec![0u8; 1000];
        s.read_exact(&mut buf).unwrap();
        send(&mut s, &Frame::Abort(HOSTILE.into()));
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 4000);
    let out = client(&["--port", &port.to_string(), path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_inert(&err, "abort");
    assert!(err.contains("\\u{1b}]0;owned\\u{7}"), "{err}");
}

/// A saved path from the server is escaped in the human report and in the JSON
/// (where `\u` escapes keep the value exact for a parser).
#[test]
fn client_escapes_a_saved_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "a.txt", 5000);
    for json in [false, true] {
        let port = fake_server(|mut s, len| {
            let mut buf = vec![0u8; len as usize + 8];
            s.read_exact(&mut buf).unwrap();
            let report = Report {
                bytes: len,
                digest: xxhash_rust::xxh3::xxh3_64(&buf[..len as usize]),
                saved_to: HOSTILE.into(),
                save: Some(tsperf_proto::SaveMode::Durable),
                reads: 1,
                ..Report::default()
            };
            send(&mut s, &Frame::Report(report));
        });
        let mut args = vec!["--port".to_owned(), port.to_string()];
        if json {
            args.push("--json".into());
        }
        args.push(path.to_str().unwrap().into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = client(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert_inert(&text, if json { "json" } else { "report" });
        if json {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["server"]["saved_to"], HOSTILE);
        } else {
            assert!(
                text.contains("saved on the server as x\\u{1b}[2J"),
                "{text}"
            );
        }
    }
}

/// The server prints received file names escaped, in its summary on stdout, in
/// its failure lines on stderr and in its log file.
#[test]
fn server_escapes_received_names() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("reads.log");
    let server = Server::start(&["--log", "file", "--log-file", log.to_str().unwrap()]);
    let path = test_file(dir.path(), "evil\u{202e}txt.exe", 1000);
    let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    // A transfer that stops short names the file on stderr.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    use std::io::Write;
    s.write_all(&stream_hello(1000, 100, "half\u{202e}.txt"))
        .unwrap();
    let mut accept = [0u8; ACCEPT_LEN];
    s.read_exact(&mut accept).unwrap();
    s.write_all(&[b'h'; 10]).unwrap();
    drop(s);
    assert!(
        server.wait_for(|o, e| o.contains("file[evil\\u{202e}txt.exe]")
            && e.contains("'half\\u{202e}.txt': 10 of 1000 bytes")),
        "stdout: {}\nstderr: {}",
        server.stdout(),
        server.stderr()
    );
    assert_inert(&server.stdout(), "server stdout");
    assert_inert(&server.stderr(), "server stderr");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_inert(&logged, "log file");
    assert!(logged.contains("evil\\u{202e}txt.exe"), "{logged}");
}
