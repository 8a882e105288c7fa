//! A flag that does not apply to the run it is given to is refused (exit 2, with
//! a message naming it), never silently ignored.

use crate::common::*;

/// A command line the lowering refuses (its checks are the unit tests of
/// `src/cli/tsclient/lower.rs`) exits 2 before anything is sent, with clap's usage-error
/// layout naming the flag, in both modes.
#[test]
fn a_refused_command_line_exits_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "u.txt", 10);
    let file = file.to_str().unwrap();
    let port = dead_port().to_string();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--latency", "--chunk", "1024"],
            "--chunk applies to stream transfers only",
        ),
        (
            &["--reconnect", file],
            "--reconnect applies to --latency only",
        ),
        (
            &["-R", "--chunk-reverse", "1k"],
            "--chunk-reverse sets the server's writes",
        ),
    ];
    for (args, words) in cases {
        let mut all = vec!["--port", &port];
        all.extend_from_slice(args);
        let out = client(&all);
        assert_fails(&out, 2, words);
        assert!(
            stderr(&out).starts_with("error: "),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("Usage: tsclient"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Server log flags without the sink they belong to.
#[test]
fn server_log_flags_without_their_sink_are_refused() {
    let cases: [(&[&str], &str); 4] = [
        (&["--log-file", "x.log"], "--log-file"),
        (&["--log", "stdout", "--log-file", "x.log"], "--log-file"),
        (&["--log-min-read", "128"], "--log-min-read"),
        (
            &["--log", "none", "--log-min-read", "128"],
            "--log-min-read",
        ),
    ];
    for (args, flag) in cases {
        let mut all = vec!["--port", "0"];
        all.extend_from_slice(args);
        let out = run(bin("tsserver"), &all);
        assert_fails(&out, 2, flag);
        assert!(
            stderr(&out).contains("applies to"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Every option of every binary says what it does in `-h`.
#[test]
fn every_option_has_help_text() {
    for name in [
        "tsserver", "tsclient", "tsgen", "tsmatrix", "tsreport", "tsdocs",
    ] {
        assert_every_option_has_help(name);
    }
}

/// tsmatrix takes comma-separated chunk sizes, and its default list parses.
#[test]
fn tsmatrix_chunk_lists() {
    let tsmatrix = bin("tsserver").with_file_name("tsmatrix");
    for args in [&["--chunks", "102,1024"][..], &[][..]] {
        let mut all = vec![
            "--file",
            "/nonexistent/grid-file",
            "--out",
            "/nonexistent/out",
        ];
        all.extend_from_slice(args);
        let out = run(tsmatrix.clone(), &all);
        let e = stderr(&out);
        assert!(!e.contains("invalid chunk size"), "{args:?}: {e}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
    }
    assert_fails(
        &run(tsmatrix, &["--chunks", "102,0"]),
        2,
        "invalid chunk size '0'",
    );
}

/// `--bind` takes `HOST:PORT` and `[v6]:PORT` as `--host` does; a port given both
/// ways must agree.
#[test]
fn bind_takes_host_and_port() {
    let mut cmd = std::process::Command::new(bin("tsserver"));
    cmd.args(["--bind", "127.0.0.1:0"]);
    let server = Server::spawn(cmd);
    assert!(server.port > 0);
    let v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if v6 {
        let mut cmd = std::process::Command::new(bin("tsserver"));
        cmd.args(["--bind", "[::1]:0"]);
        let server = Server::spawn(cmd);
        assert!(
            server.wait_for(|_, e| e.contains("listening on [::1]:")),
            "{}",
            server.stderr()
        );
    }
    assert_fails(
        &run(bin("tsserver"), &["--bind", "127.0.0.1:1", "--port", "2"]),
        2,
        "give the port once",
    );
    assert_fails(
        &run(bin("tsserver"), &["--bind", "[::1"]),
        2,
        "invalid address '[::1'",
    );
}

/// Each program's help (and so its man page) opens with what that program does, not
/// the package's description (clap's bare `about` takes Cargo's, which the workspace split set).
#[test]
fn each_program_describes_itself() {
    for (name, opening) in [
        ("tsserver", "Receive files from tsclient"),
        ("tsclient", "Stream FILE to a tsserver"),
        ("tsgen", "Write SIZE bytes of deterministic text"),
        ("tsmatrix", "Run the stream and latency grid"),
        ("tsreport", "Read DIR/runs.jsonl"),
        ("tsdocs", "Write the man pages"),
    ] {
        assert_describes_itself(name, opening);
    }
}

/// The committed man pages and completions are what the flags make now (`tsdocs
/// --check`), so the flag reference cannot drift; a stale or missing file is named and exits 1;
/// the bash completion loads and offers a program's flags.
#[test]
fn generated_docs_match_the_flags() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = root.join("docs");
    let tsdocs = bin("tsserver").with_file_name("tsdocs");
    let ok = run(tsdocs.clone(), &["--check", docs.to_str().unwrap()]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}{}: run `cargo run --release --bin tsdocs` and commit docs/",
        stdout(&ok),
        stderr(&ok)
    );

    let dir = tempfile::tempdir().unwrap();
    let made = run(tsdocs.clone(), &[dir.path().to_str().unwrap()]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    // A man page and three completions for each program the committed pages name.
    let programs = std::fs::read_dir(docs.join("man")).unwrap().count();
    assert!(
        stdout(&made).contains(&format!("wrote {} files", programs * 4)),
        "{}",
        stdout(&made)
    );
    let page = dir.path().join("man/tsclient.1");
    std::fs::write(&page, b".TH stale 1\n").unwrap();
    std::fs::remove_file(dir.path().join("completions/_tsserver")).unwrap();
    let stale = run(tsdocs, &["--check", dir.path().to_str().unwrap()]);
    assert_fails(&stale, 1, "2 of the generated docs are missing or stale");
    let err = stderr(&stale);
    assert!(err.contains(&format!("'{}'", page.display())), "{err}");
    assert!(err.contains("completions/_tsserver'"), "{err}");

    let script = format!(
        "source '{}' && COMP_WORDS=(tsclient --nonbl) COMP_CWORD=1 COMP_LINE='tsclient --nonbl' \
         COMP_POINT=16 && _tsclient tsclient --nonbl tsclient && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        docs.join("completions/tsclient.bash").display()
    );
    let out = run(std::path::PathBuf::from("bash"), &["-c", &script]);
    assert_eq!(stdout(&out).trim(), "--nonblocking", "{}", stderr(&out));
}

/// Iperf3's short flags work as iperf3 users type them (`-c HOST`, `-p PORT`,
/// `-l 128K`, `-J`), on both ends where they apply, and `--version` names the commit.
#[test]
fn iperf3_short_flags_and_a_version_naming_the_commit() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&[
        "-c",
        "127.0.0.1",
        "-p",
        &port,
        "-l",
        "128K",
        "-J",
        "--bytes",
        "1MiB",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chunk"], 131072, "{v:#}");
    assert_eq!(v["verified"], true);
    // -J is --json even for a usage error: one object on stdout.
    let out = client(&["-J", "-l", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["usage"], true, "{v:#}");
    // -n sizes the stream, -F names the file, -Z sends it with sendfile, each verified.
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "f.bin", 1 << 20);
    let (out, v) = client_json(server.port, &["-n", "2MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        (v["bytes"].as_u64(), v["verified"].as_bool()),
        (Some(2 << 20), Some(true))
    );
    let (out, v) = client_json(server.port, &["-Z", "-F", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
    assert_eq!(v["strategy"], "sendfile", "{v:#}");
    // -k N: N writes of the chunk, counted and verified.
    let (out, v) = client_json(server.port, &["-k", "300", "-l", "1K"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        (v["bytes"].as_u64(), v["chunk"].as_u64()),
        (Some(300 << 10), Some(1024))
    );
    assert_eq!(v["verified"], true);
    // -u: tsperf is TCP only, and says where UDP is; IPv6 with a port in brackets.
    assert_fails(&client(&["-u"]), 2, "for UDP, use iperf3 -u");
    assert_fails(
        &client(&["--host", "::1:7433"]),
        2,
        "did you mean [::1]:7433?",
    );
    // tsserver takes -p too: a second server on the first's port is refused, naming it.
    let taken = run(bin("tsserver"), &["-p", &port, "--once"]);
    assert_eq!(taken.status.code(), Some(1), "{}", stderr(&taken));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=9", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    for prog in ["tsclient", "tsserver"] {
        let out = run(bin(prog), &["--version"]);
        let text = stdout(&out);
        assert!(text.starts_with(&format!("{prog} 0.")), "{text}");
        let want = head.clone().unwrap_or_else(|| "unknown".to_owned());
        assert!(text.contains(&format!("(commit {want})")), "{text}");
    }
}

/// The refusal of a client-chosen sink reads as one sentence; a timeout below a
/// millisecond is refused by both programs; a bracketed IPv6 address with its zone is a host,
/// not a usage error.
#[test]
fn small_ones_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "s.txt", 1000);
    let server = Server::start(&[]);
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--server-log",
        "stdout",
        file.to_str().unwrap(),
    ]);
    assert_fails(
        &out,
        1,
        "does not let clients choose (--server-log stdout was asked for): its operator",
    );
    for secs in ["1e-300", "0.0009", "0"] {
        let out = client(&["--timeout", secs, file.to_str().unwrap()]);
        assert_fails(
            &out,
            2,
            &format!("invalid timeout '{secs}': expected seconds from 0.001"),
        );
        let out = run(bin("tsserver"), &["--idle-timeout", secs]);
        assert_fails(&out, 2, &format!("invalid timeout '{secs}'"));
    }
    let out = client(&[
        "--host",
        "[fe80::1%lo]:9",
        "--timeout",
        "1",
        file.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("invalid host"), "{err}");
}

/// Settings that cannot mean anything are refused with the reason (exit 2):
/// `--max-bytes 0`, and the event loops' `--threads` and `--accept` with `--blocking`, which
/// has none; before, the first refused every transfer and the others were ignored.
#[test]
fn meaningless_server_settings_are_refused() {
    for (args, words) in [
        (&["--max-bytes", "0"][..], "invalid size '0'"),
        (&["--blocking", "--threads", "2"][..], "--threads"),
        (&["--blocking", "--accept", "reuseport"][..], "--accept"),
        (&["--send-buffers", "1k"][..], "at least"),
    ] {
        let mut all = vec!["--port", "0", "--bind", "127.0.0.1"];
        all.extend_from_slice(args);
        let out = run(bin("tsserver"), &all);
        assert_fails(&out, 2, words);
        if args.contains(&"--blocking") {
            assert!(stderr(&out).contains("--blocking"), "{}", stderr(&out));
        }
    }
}

/// Words a first-time user meets read right: tsgen into a folder that does not exist names
/// that folder (not a temporary file); a reverse stream of generated text does not speak of
/// the server's file; `-P` without FILE does not speak of a file.
#[test]
fn first_hour_words_name_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin("tsgen"))
        .arg("testdata/tsl.txt")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_fails(
        &out,
        1,
        "cannot write 'testdata/tsl.txt': its folder 'testdata' does not exist",
    );
    assert!(!stderr(&out).contains(".tmp"), "{}", stderr(&out));
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&["--port", &port, "-R", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("for its file ?"), "{}", stdout(&out));
    let out = client(&["--port", &port, "-P", "2", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("the file"), "{text}");
    assert!(
        text.replace("\n  ", " ").contains("that cover all 1 MiB"),
        "{text}"
    );
}
