//! The server's stdout and stderr are pipes or terminals that may stop being read
//! (a paused pager, a stalled tee). `--log stdout` keeps its back-pressure, so a slow reader
//! slows the transfers it logs and no log line is ever dropped; but a stuck stdout or stderr
//! never freezes other connections, or the server, for ever.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::*;

/// Reads everything from `r` on a thread; join it for the text.
fn drain(mut r: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut all = Vec::new();
        let _ = r.read_to_end(&mut all);
        String::from_utf8_lossy(&all).into_owned()
    })
}

/// Reads from `r` on a thread into a shared text, for [`wait_text`].
fn collect_text(mut r: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// Waits (at most 20 s) until the collected text satisfies `pred`; returns the text.
fn wait_text(text: &Mutex<String>, pred: impl Fn(&str) -> bool) -> String {
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let t = text.lock().unwrap().clone();
        if pred(&t) || std::time::Instant::now() > end {
            return t;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// With `--log stdout` to a pipe nobody reads, the logged transfer waits (the
/// back-pressure the seed measured), while a latency client and a refused connection are
/// served; once the pipe is read, the transfer completes and every one of its log lines is there.
#[test]
fn stuck_stdout_pauses_only_what_it_logs() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "logged.txt", 4 << 20);
    for model in MODELS {
        let mut args = vec!["--log", "stdout"];
        args.extend_from_slice(model);
        let (child, port, stdout) = server_with_stuck_stdout(&args);
        let p = port.to_string();
        let logged = Command::new(bin("tsclient"))
            .args(["--port", &p, "--json", "--chunk", "1024", "--timeout", "60"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The pipe (64 KiB) fills with the logged transfer's lines.
        thread::sleep(Duration::from_millis(500));
        let out = client(&[
            "--port",
            &p,
            "--latency",
            "--count",
            "20",
            "--timeout",
            "10",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{model:?}: latency client not served while stdout was stuck: {}",
            stderr(&out)
        );
        let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
        garbage
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(
            matches!(
                read_one_frame(&mut garbage),
                Some(tsperf_proto::Frame::Refuse { .. })
            ),
            "{model:?}: garbage not refused while stdout was stuck"
        );
        // Now read stdout: the logged transfer completes, and no line of it is missing.
        let text = drain(stdout);
        let out = wait_child(logged);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verified"], true);
        let reads = v["server"]["reads"].as_u64().unwrap();
        assert_eq!(v["server"]["log_lines"].as_u64().unwrap(), reads + 2);
        kill(child);
        let text = text.join().unwrap();
        let read_lines = text
            .lines()
            .filter(|l| l.contains(" seq=") && l.contains(" total="))
            .count() as u64;
        assert_eq!(read_lines, reads, "{model:?}: log lines were dropped");
        assert!(text.contains("file[logged.txt] read over ."), "{model:?}");
    }
}

/// The summaries of `tiny.txt` in `text`, and the lines counted as not printed.
fn summaries(text: &str) -> (usize, usize) {
    let printed = text.matches("file[tiny.txt] read over .").count();
    let dropped = text
        .lines()
        .filter(|l| l.contains("not printed"))
        .filter_map(|l| {
            l.strip_prefix("tsserver: ")?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    (printed, dropped)
}

/// Per-transfer summaries never block the server: a thousand transfers complete
/// while stdout is not read. Summaries that do not fit in the server's queue are counted and
/// the count is printed once stdout is read again.
#[test]
fn stuck_stdout_does_not_block_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tiny.txt", 10);
    for model in MODELS {
        let (child, port, stdout) = server_with_stuck_stdout(model);
        let p = port.to_string();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (p, path) = (p.clone(), path.clone());
                thread::spawn(move || {
                    for _ in 0..500 {
                        let out =
                            client(&["--port", &p, "--timeout", "10", path.to_str().unwrap()]);
                        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a transfer failed while stdout was stuck");
        }
        let text = collect_text(stdout);
        // One more transfer after the drain: its summary and the dropped count appear, and its
        // report carries the count.
        let (out, v) = client_json(port, &[path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let reported = v["server"]["output_dropped"].as_u64().unwrap() as usize;
        let text = wait_text(&text, |t| {
            let (p, d) = summaries(t);
            p + d == 1001
        });
        kill(child);
        let (printed, dropped) = summaries(&text);
        assert_eq!(
            printed + dropped,
            1001,
            "{model:?}: {printed} printed, {dropped} counted as not printed"
        );
        assert!(dropped > 0, "{model:?}: nothing was held back: {printed}");
        assert_eq!(reported, dropped, "{model:?}: the report's count");
    }
}

/// A stuck stderr (where refusals and failures go) does not block the server
/// either: four thousand refused connections are answered, then a transfer is verified.
#[test]
fn stuck_stderr_does_not_block_refusals() {
    for model in MODELS {
        let mut child = Command::new(bin("tsserver"))
            .args(["--port", "0", "--bind", "127.0.0.1"])
            .args(model)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        let port = listening_port(&first);
        for i in 0..4000 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"NOPE, not a hello at all").unwrap();
            assert!(
                matches!(
                    read_one_frame(&mut s),
                    Some(tsperf_proto::Frame::Refuse { .. })
                ),
                "{model:?}: connection {i} not refused while stderr was stuck"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = test_file(dir.path(), "after.txt", 100_000);
        let (out, v) = client_json(port, &["--timeout", "10", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{model:?}: {}", stderr(&out));
        assert_eq!(v["verified"], true);
        let text = collect_text(err);
        let text = wait_text(&text, |t| t.contains("not printed"));
        kill(child);
        assert!(text.contains("not printed"), "{model:?}: {text:.500}");
    }
}

/// SIGTERM ends a server whose stdout is stuck, within its grace period and
/// a bounded wait, with the logged transfer aborted.
#[test]
fn stuck_stdout_does_not_stop_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "cut.txt", 4 << 20);
    for model in MODELS {
        let mut args = vec!["--log", "stdout", "--grace", "1"];
        args.extend_from_slice(model);
        let (child, port, stdout) = server_with_stuck_stdout(&args);
        let logged = Command::new(bin("tsclient"))
            .args(["--port", &port.to_string(), "--chunk", "1024"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let out = wait_child(child);
        assert!(out.status.code().is_some(), "{model:?}: killed, not exited");
        let client_out = wait_child(logged);
        assert_fails(&client_out, 1, "the server");
        drop(stdout);
    }
}

/// A logged transfer whose lines stdout takes none of for the idle timeout is
/// ended with that reason (it holds its place no longer than a silent client would), and the
/// client is told why.
#[test]
fn stuck_stdout_ends_its_transfers_at_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "stuck.txt", 8 << 20);
    for model in MODELS {
        let mut args = vec!["--log", "stdout", "--idle-timeout", "1"];
        args.extend_from_slice(model);
        let (child, port, stdout) = server_with_stuck_stdout(&args);
        let out = client(&[
            "--port",
            &port.to_string(),
            "--chunk",
            "1024",
            path.to_str().unwrap(),
        ]);
        assert_fails(&out, 1, "its log output (stdout) was not taken for 1 s");
        kill(child);
        drop(stdout);
    }
}
