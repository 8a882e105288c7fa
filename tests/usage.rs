//! Issue 14 (14): a flag that does not apply to the run it is given to is refused (exit 2, with
//! a message naming it), never silently ignored.

mod common;

use common::*;

/// Issue 14 (14): client flags of the other mode.
#[test]
fn client_flags_of_the_other_mode_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "u.txt", 10);
    let file = file.to_str().unwrap();
    let port = dead_port().to_string();
    let cases: [(&[&str], &str); 11] = [
        (&["--latency", "--chunk", "1024"], "--chunk"),
        (&["--latency", "--sndbuf", "64k"], "--sndbuf"),
        (&["--latency", "--io", "writev"], "--io"),
        (&["--latency", "--batch", "4"], "--batch"),
        (&["--nodelay", file], "--nodelay"),
        (&["--count", "5", file], "--count"),
        (&["--warmup", "1", file], "--warmup"),
        (&["--codec", "object", file], "--codec"),
        (&["--framing", "split", file], "--framing"),
        (&["--reconnect", file], "--reconnect"),
        (&["--batch", "4", file], "--batch"),
    ];
    for (args, flag) in cases {
        let mut all = vec!["--port", &port];
        all.extend_from_slice(args);
        let out = client(&all);
        assert_fails(&out, 2, flag);
        assert!(
            stderr(&out).contains("applies to"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Issue 14 (14): server log flags without the sink they belong to.
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
