//! Server log sinks, progress bar and interruption (issue 4).

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::common::*;

const MODELS: [&[&str]; 2] = [&[], &["--blocking"]];

/// A per-read line: `TIMESTAMP conn=N seq=N bytes=N total=N`.
fn is_read_line(l: &str) -> bool {
    let mut f = l.split(' ');
    let stamp = f.next().unwrap_or("");
    let fields: Vec<&str> = f.collect();
    stamp.ends_with('Z')
        && fields.len() == 4
        && ["conn=", "seq=", "bytes=", "total="]
            .iter()
            .zip(&fields)
            .all(|(k, v)| v.strip_prefix(k).is_some_and(|n| n.parse::<u64>().is_ok()))
}

/// A start or end line of a transfer.
fn is_event_line(l: &str) -> bool {
    l.contains(" conn=") && (l.contains(" event=\"start\" ") || l.contains(" event=\"end\" "))
}

fn run_8mib(port: u16, dir: &std::path::Path) -> serde_json::Value {
    let path = test_file(dir, "eight.txt", 8 << 20);
    let (out, v) = client_json(port, &["--chunk", "1024", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    v
}

/// Issue 4: --log stdout writes one line per read (plus start and end) to stdout, and the
/// report counts them.
#[test]
fn stdout_sink_one_line_per_read() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut args = vec!["--log", "stdout"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        let reads = v["server"]["reads"].as_u64().unwrap();
        assert_eq!(v["server"]["log"], "stdout");
        assert_eq!(v["server"]["log_lines"].as_u64().unwrap(), reads + 2);
        assert!(server.wait_for(|o, _| o.contains("file[eight.txt] read over .")));
        let out = server.stdout();
        let read_lines = out.lines().filter(|l| is_read_line(l)).count() as u64;
        assert_eq!(read_lines, reads, "{model:?}");
        assert_eq!(out.lines().filter(|l| is_event_line(l)).count(), 2);
    }
}

/// Issue 4: --log file holds exactly log_lines lines after the transfer, and still after a
/// SIGTERM shutdown, which exits 0.
#[test]
fn file_sink_complete_after_transfer_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let log = dir.path().join(format!("server{}.log", model.len()));
        let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
        args.extend_from_slice(model);
        let mut server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        let lines = v["server"]["log_lines"].as_u64().unwrap();
        assert_eq!(v["server"]["log"], "file");
        assert_eq!(lines, v["server"]["reads"].as_u64().unwrap() + 2);
        let count = || std::fs::read_to_string(&log).unwrap().lines().count() as u64;
        assert_eq!(count(), lines, "{model:?}: log file after the transfer");
        server.signal(libc::SIGTERM);
        assert_eq!(server.wait_exit(), Some(0));
        assert_eq!(count(), lines, "{model:?}: log file after SIGTERM");
        assert!(!server.stdout().lines().any(is_read_line));
    }
}

/// Issue 4: --log none writes no per-read lines anywhere and reports none.
#[test]
fn none_sink_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut args = vec!["--log", "none"];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let v = run_8mib(server.port, dir.path());
        assert_eq!(v["server"]["log"], "none");
        assert_eq!(v["server"]["log_lines"], 0);
        assert!(server.wait_for(|o, _| o.contains("read over")));
        assert!(
            !server
                .stdout()
                .lines()
                .any(|l| is_read_line(l) || is_event_line(l))
        );
        assert!(!server.stderr().lines().any(is_read_line));
    }
    assert!(!dir.path().join("tsserver.log").exists());
}

/// Issue 4: 16 concurrent clients with --log file: the file's lines equal the sum of their
/// log_lines, and every line parses (none is torn), in both server models.
#[test]
fn concurrent_clients_file_log_not_torn() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let log = dir.path().join(format!("many{}.log", model.len()));
        let mut args = vec!["--log", "file", "--log-file", log.to_str().unwrap()];
        args.extend_from_slice(model);
        let server = Server::start(&args);
        let port = server.port.to_string();
        let children: Vec<_> = (0..16)
            .map(|i| {
                let path = test_file(dir.path(), &format!("c{i}.txt"), 512 * 1024 + i * 101);
                Command::new(bin("tsclient"))
                    .args([
                        "--port",
                        &port,
                        "--json",
                        "--chunk",
                        ["102", "1024"][i as usize % 2],
                    ])
                    .arg(&path)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut total = 0;
        for child in children {
            let out = wait_child(child);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["verified"], true);
            total += v["server"]["log_lines"].as_u64().unwrap();
        }
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.lines().count() as u64, total, "{model:?}");
        for l in text.lines() {
            assert!(
                is_read_line(l) || is_event_line(l),
                "torn or foreign line: {l:?}"
            );
        }
        assert_eq!(
            text.lines().filter(|l| l.contains("event=\"end\"")).count(),
            16
        );
    }
}

/// Issue 4: without a terminal there is no progress bar: stderr stays empty and stdout is one
/// JSON object.
#[test]
fn no_progress_bar_without_terminal() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "p.txt", 4 << 20);
    let (out, v) = client_json(server.port, &[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(v["verified"], true);
    assert!(out.stderr.is_empty(), "stderr: {:?}", stderr(&out));
}

/// A server slow enough (tiny reads and buffers) that a transfer takes seconds.
fn slow_server() -> Server {
    Server::start(&["--read-size", "16", "--rcvbuf", "65536"])
}

/// Issue 4: on a real pseudo-terminal (`script`) the bar renders, and the report after it is
/// intact and readable.
#[test]
fn progress_bar_renders_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: the `script` command (util-linux) is not installed");
        return;
    }
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "tty.txt", 6 << 20);
    let cmd = format!(
        "{} --port {} --sndbuf 65536 {}",
        bin("tsclient").display(),
        server.port,
        path.display()
    );
    let out = run("script".into(), &["-qefc", &cmd, "/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let screen = stdout(&out);
    assert!(
        screen.contains("MiB/s, ETA"),
        "no progress bar drawn: {screen:?}"
    );
    assert!(screen.contains("/6 MiB ["), "{screen:?}");
    assert!(!screen.contains("panicked"));
    // Read it as a terminal shows it: the bar's line is cleared (ESC [2K) and returned to (CR),
    // then the report follows whole, each of its lines starting a line.
    let shown = screen.replace("\u{1b}[2K", "");
    let clean: Vec<&str> = shown.split(['\r', '\n']).collect();
    assert!(
        clean.iter().any(|l| l.starts_with("begin sec[")),
        "{screen:?}"
    );
    assert!(clean.contains(&"file[tty.txt] read over ."), "{screen:?}");
    assert!(
        clean
            .iter()
            .any(|l| l.starts_with("sent 6 MiB in ") && l.contains("verified"))
    );
}

/// Issue 4: Ctrl-C (SIGINT) stops the client cleanly with a clear message and exit 130.
#[test]
fn interrupt_exits_130() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(dir.path(), "big.bin", 256 << 20);
    let child = Command::new(bin("tsclient"))
        .args(["--port", &server.port.to_string(), "--sndbuf", "65536"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = wait_child(child);
    assert_fails(&out, 130, "tsclient: interrupted after sending ");
    assert!(
        stderr(&out).contains(&format!("of {} bytes", 256u64 << 20)),
        "{}",
        stderr(&out)
    );
    // Issue 23 (7): what was measured so far is a result, on stdout (it was empty before).
    assert!(
        stdout(&out).starts_with("interrupted after "),
        "{}",
        stdout(&out)
    );
}
