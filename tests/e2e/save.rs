//! `tsserver --save`: files saved whole or not at all, and never outside DIR.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use tsperf_proto::{Frame, decode_frame};

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn save_server(dir: &Path, extra: &[&str], model: &[&str]) -> Server {
    let mut args = vec!["--save", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(model);
    Server::start(&args)
}

/// Sends a raw hello for `name` and returns the server's first frame.
fn hello_reply(port: u16, name: &str, length: u64) -> Frame {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let h = stream_hello(length, 1024, name);
    s.write_all(&h).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    decode_frame(&reply).unwrap().unwrap().0
}

/// A saved file has exactly the sent bytes, its path is in the report, no temporary is
/// left, an existing name is refused without --overwrite and replaced with it.
#[test]
fn saved_whole_and_overwrite_rules() {
    let src = tempfile::tempdir().unwrap();
    let file = test_file(src.path(), "tsl.txt", 3 << 20);
    for model in MODELS {
        let dir = tempfile::tempdir().unwrap();
        let server = save_server(dir.path(), &[], model);
        let (out, v) = client_json(server.port, &[file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        let saved = dir.path().join("tsl.txt");
        assert_eq!(v["server"]["saved_to"], saved.to_str().unwrap());
        assert_eq!(
            std::fs::read(&saved).unwrap(),
            std::fs::read(&file).unwrap()
        );
        assert_eq!(names_in(dir.path()), ["tsl.txt"]);
        let out = client(&["--port", &server.port.to_string(), file.to_str().unwrap()]);
        assert_fails(&out, 1, "'tsl.txt' already exists in the save directory");
        drop(server);

        let server = save_server(dir.path(), &["--overwrite"], model);
        let other = test_file(src.path(), "other.txt", 1000);
        std::fs::copy(&other, src.path().join("tsl.txt")).unwrap();
        let out = client(&[
            "--port",
            &server.port.to_string(),
            src.path().join("tsl.txt").to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("saved on the server as "),
            "{}",
            stdout(&out)
        );
        assert_eq!(
            std::fs::read(&saved).unwrap(),
            std::fs::read(&other).unwrap()
        );
        assert_eq!(names_in(dir.path()), ["tsl.txt"]);
        test_file(src.path(), "tsl.txt", 3 << 20);
    }
}

/// Names that could escape DIR or mislead are refused with a reason, by the protocol
/// decoder or by the save rules; a 255-byte name is fine.
#[test]
fn dangerous_names_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = save_server(dir.path(), &[], &[]);
    for (name, why) in [
        ("../x", "bad file name"),
        ("/etc/passwd", "bad file name"),
        ("a/b", "bad file name"),
        ("..", "a directory name"),
        (".", "a directory name"),
        ("", "an empty name"),
        ("a\0b", "bad file name"),
        ("a\x1bb", "bad file name"),
        ("a\u{2215}b", "look-alike"),
        ("evil\u{202E}txt.exe", "invisible formatting"),
        (".tsperf-1-1.part", "temporary files"),
    ] {
        match hello_reply(server.port, name, 10) {
            Frame::Refuse { reason, .. } => assert!(reason.contains(why), "{name:?}: {reason}"),
            other => panic!("{name:?} was not refused: {other:?}"),
        }
    }
    let mut long = Vec::new();
    long.extend(stream_hello(1, 1, "x"));
    long[12..14].copy_from_slice(&256u16.to_be_bytes());
    long.extend(std::iter::repeat_n(b'n', 255));
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&long).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(
        matches!(decode_frame(&reply), Ok(Some((Frame::Refuse { reason: r, .. }, _))) if r.contains("too long"))
    );
    assert!(names_in(dir.path()).is_empty());

    let src = tempfile::tempdir().unwrap();
    let longest = test_file(src.path(), &"n".repeat(255), 100);
    let (out, v) = client_json(server.port, &[longest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    assert_eq!(names_in(dir.path()), ["n".repeat(255)]);
}

/// A symlink planted in DIR is refused as existing, and with --overwrite it is
/// replaced itself; its target outside DIR is never written.
#[test]
fn planted_symlink_is_contained() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = test_file(src.path(), "link", 5000);
    let server = save_server(dir.path(), &[], &[]);
    assert_fails(
        &client(&["--port", &server.port.to_string(), file.to_str().unwrap()]),
        1,
        "already exists",
    );
    drop(server);
    let server = save_server(dir.path(), &["--overwrite"], &[]);
    let out = client(&["--port", &server.port.to_string(), file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    let meta = std::fs::symlink_metadata(dir.path().join("link")).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(
        std::fs::read(dir.path().join("link")).unwrap(),
        std::fs::read(&file).unwrap()
    );
}

/// A client killed mid-transfer leaves no file under the final name and no temporary;
/// a client whose digest disagrees leaves nothing either. The server keeps serving.
#[test]
fn failed_transfers_leave_nothing() {
    let src = tempfile::tempdir().unwrap();
    let big = sparse_file(src.path(), "big.bin", 256 << 20);
    for model in MODELS {
        let dir = tempfile::tempdir().unwrap();
        let mut extra = vec!["--read-size", "16", "--rcvbuf", "65536"];
        extra.extend_from_slice(model);
        let server = save_server(dir.path(), &extra, &[]);
        let mut child = Command::new(bin("tsclient"))
            .args(["--port", &server.port.to_string(), "--sndbuf", "65536"])
            .arg(&big)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The temporary appears once the server accepts (bounded wait: a loaded machine may
        // take a while to start the client).
        let end = std::time::Instant::now() + DEADLINE;
        while names_in(dir.path()).is_empty() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !names_in(dir.path()).is_empty(),
            "no temporary while receiving"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            server.wait_for(|_, e| e.contains("incomplete transfer")),
            "{}",
            server.stderr()
        );
        assert!(
            names_in(dir.path()).is_empty(),
            "{model:?}: left {:?}",
            names_in(dir.path())
        );

        // Data whose trailer (the client's digest) disagrees: reported, not saved.
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut h = Vec::new();
        h.extend(stream_hello(3, 3, "bad.txt"));
        s.write_all(&h).unwrap();
        let mut accept = [0u8; ACCEPT_LEN];
        s.read_exact(&mut accept).unwrap();
        s.write_all(b"abc").unwrap();
        s.write_all(&7u64.to_be_bytes()).unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        assert!(
            matches!(decode_frame(&reply), Ok(Some((Frame::Report(r), _))) if r.saved_to.is_empty() && r.bytes == 3)
        );
        assert!(
            names_in(dir.path()).is_empty(),
            "{model:?}: left {:?}",
            names_in(dir.path())
        );

        let ok = test_file(src.path(), "ok.txt", 1000);
        let (out, v) = client_json(server.port, &[ok.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            v["server"]["saved_to"]
                .as_str()
                .unwrap()
                .ends_with("ok.txt")
        );
    }
}

/// A full disk stops the transfer with the server's reason (the client exits 1), leaves
/// nothing in DIR, and the next transfer that fits works, whichever way the file is written
/// (`--far-disk`). Needs a small tmpfs (root: ignored unless asked for).
#[test]
#[ignore = "needs root: a tmpfs mount (.ci/run runs it as root)"]
fn disk_full_is_reported_and_cleaned() {
    let mnt = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "tsperf-test",
            mnt.path().to_str().unwrap(),
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(mounted, "cannot mount a tmpfs here: this test needs root");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).output();
        }
    }
    let _unmount = Unmount(mnt.path());
    let src = tempfile::tempdir().unwrap();
    let big = test_file(src.path(), "big.txt", 4 << 20);
    let small = test_file(src.path(), "small.txt", 100_000);
    // Each way of writing, the server's own (durable) and each asked for, fills the disk alike.
    let modes: [&[&str]; 4] = [
        &[],
        &["--far-disk", "buffered"],
        &["--far-disk", "durable"],
        &["--far-disk", "direct"],
    ];
    for (model, mode) in MODELS
        .iter()
        .flat_map(|m| modes.iter().map(move |d| (m, d)))
    {
        let server = save_server(mnt.path(), &[], model);
        let port = server.port.to_string();
        let mut args = vec!["--port", &port, "--timeout", "10"];
        args.extend_from_slice(mode);
        args.push(big.to_str().unwrap());
        let out = client(&args);
        assert_fails(&out, 1, "cannot save 'big.txt': No space left on device");
        assert!(
            names_in(mnt.path()).is_empty(),
            "{model:?}: left {:?}",
            names_in(mnt.path())
        );
        let (out, v) = client_json(server.port, &[small.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["verified"], true);
        std::fs::remove_file(mnt.path().join("small.txt")).unwrap();
    }
}

/// --save on a LAN address warns that anyone can write files; a bad DIR is an error.
#[test]
fn save_warnings_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin("tsserver"))
        .args([
            "--bind",
            "0.0.0.0",
            "--port",
            "0",
            "--save",
            dir.path().to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    std::io::BufRead::read_line(&mut err, &mut second).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.starts_with("tsserver: listening on 0.0.0.0:"),
        "{first}"
    );
    assert!(
        second.contains("tsserver: warning: --save on 0.0.0.0 lets anyone"),
        "{second}"
    );
    let out = run(
        bin("tsserver"),
        &["--port", "0", "--save", "/nonexistent/dir"],
    );
    assert_fails(&out, 1, "cannot use save directory '/nonexistent/dir'");
    let out = run(bin("tsserver"), &["--port", "0", "--overwrite"]);
    assert_fails(&out, 2, "--save");
}

/// Every Unicode format (Cf) character, bidi control, invisible filler and slash
/// look-alike is refused as a save name, including those the first filter missed.
#[test]
fn format_characters_and_lookalikes_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = save_server(dir.path(), &[], &[]);
    for c in [
        '\u{00AD}',
        '\u{061C}',
        '\u{180E}',
        '\u{3164}',
        '\u{2216}',
        '\u{2571}',
        '\u{27CB}',
        '\u{FE68}',
        '\u{200E}',
        '\u{2066}',
        '\u{E0041}',
        '\u{FFF9}',
    ] {
        let name = format!("a{c}b.txt");
        match hello_reply(server.port, &name, 10) {
            Frame::Refuse { reason, .. } => assert!(
                reason.contains("look-alike") || reason.contains("invisible"),
                "U+{:04X}: {reason}",
                c as u32
            ),
            other => panic!("U+{:04X} was not refused: {other:?}", c as u32),
        }
    }
    assert!(names_in(dir.path()).is_empty());
}

/// `--far-disk MODE` asks the server to write the file to its disk so: in each mode the file
/// is saved whole, the JSON says how (`server.save_mode`) and the human report says how with
/// the write's and the sync's times. A server without `--save` refuses, naming the flag.
#[test]
fn far_disk_modes_are_asked_of_the_server() {
    let src = tempfile::tempdir().unwrap();
    let file = test_file(src.path(), "tsl.txt", 3 << 20);
    let f = file.to_str().unwrap();
    for model in MODELS {
        let dir = tempfile::tempdir().unwrap();
        let server = save_server(dir.path(), &["--overwrite"], model);
        for mode in ["buffered", "durable", "direct"] {
            let (out, v) = client_json(server.port, &["--far-disk", mode, f]);
            assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
            assert_eq!(v["verified"], true, "{mode}");
            assert_eq!(v["server"]["save_mode"], mode, "{v}");
            let saved = dir.path().join("tsl.txt");
            assert_eq!(v["server"]["saved_to"], saved.to_str().unwrap());
            assert_eq!(xxh3_of(&saved), xxh3_of(&file), "{mode}");
        }
        let port = server.port.to_string();
        let out = client(&["--port", &port, "--far-disk", "direct", f]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("saved on the server as ")
                && stdout(&out).contains("(direct: written in "),
            "{}",
            stdout(&out)
        );
        assert_eq!(names_in(dir.path()), ["tsl.txt"]);
        // The server's own way, not asked: saved durably, and said so.
        let (_, v) = client_json(server.port, &[f]);
        assert_eq!(v["server"]["save_mode"], "durable", "{v}");
    }
    let plain = Server::start(&[]);
    let out = client(&[
        "--port",
        &plain.port.to_string(),
        "--far-disk",
        "durable",
        f,
    ]);
    assert_fails(&out, 1, "start it with --save DIR");
    let (out, v) = client_json(plain.port, &[f]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(v["server"].get("save_mode").is_none(), "{v}");
}

/// `-R --save DIR` saves the stream this client receives into DIR, whole and verified, durably
/// unless `--far-disk` says otherwise (the JSON's `client.save_mode`); a name already there is
/// refused before any data, and nothing half-written is left.
#[test]
fn a_reverse_stream_is_saved_here() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (out, v) = client_json(server.port, &["-R", "--bytes", "3MiB", "--save", d]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    assert_eq!(v["client"]["save_mode"], "durable", "{v}");
    let saved = dir.path().join("generated");
    assert_eq!(v["client"]["saved_to"], saved.to_str().unwrap());
    assert_eq!(std::fs::metadata(&saved).unwrap().len(), 3 << 20);
    assert_eq!(xxh3_of(&saved), v["digest"].as_str().unwrap());
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "-R",
        "--save",
        d,
        "--bytes",
        "1MiB",
    ]);
    assert_fails(&out, 1, "'generated' already exists in the save directory");
    assert_eq!(names_in(dir.path()), ["generated"]);
    for model in [&["--nonblocking"][..], &[]] {
        let other = tempfile::tempdir().unwrap();
        let mut args = vec![
            "-R",
            "--bytes",
            "2MiB",
            "--chunk",
            "1000",
            "--save",
            other.path().to_str().unwrap(),
            "--far-disk",
            "direct",
        ];
        args.extend_from_slice(model);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["client"]["save_mode"], "direct", "{v}");
        let saved = other.path().join("generated");
        assert_eq!(xxh3_of(&saved), v["digest"].as_str().unwrap());
        assert_eq!(names_in(other.path()), ["generated"]);
    }
}
