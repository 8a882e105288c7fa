//! I/O strategies: `--io write|writev|sendfile` and `--batch`, every transfer verified
//! whichever transport and server model, short calls continued from where they stopped, and
//! bad combinations refused with a usage error.

use crate::common::*;

const MODELS: [(&[&str], &str); 2] = [(&[], "event-loop"), (&["--blocking"], "blocking")];
const TRANSPORTS: [(Option<&str>, &str); 2] =
    [(None, "blocking"), (Some("--nonblocking"), "nonblocking")];

/// Edge file sizes with writev (batches of 1, 3 and the default 64) and sendfile, over both
/// transports, against both server models; the JSON counts one call per batch or chunk.
#[test]
fn edge_sizes_every_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Option<u64>); 4] = [
        ("writev", Some(1)),
        ("writev", Some(3)),
        ("writev", None),
        ("sendfile", None),
    ];
    for (args, model) in MODELS {
        let server = Server::start(args);
        for chunk in [102u64, 10240] {
            for len in [1, chunk - 1, chunk + 1, 64 * chunk, 200 * chunk + 7] {
                let path = test_file(dir.path(), &format!("f{chunk}_{len}.txt"), len);
                let c = chunk.to_string();
                for (strategy, batch) in cases {
                    for (flag, io) in TRANSPORTS {
                        let k = batch.map(|k| k.to_string());
                        let mut a = vec!["--chunk", &c, "--io", strategy];
                        if let Some(k) = &k {
                            a.extend(["--batch", k]);
                        }
                        a.extend(flag);
                        a.push(path.to_str().unwrap());
                        let (out, v) = client_json(server.port, &a);
                        let what = format!("{model} {io} {strategy} {batch:?} {chunk} {len}");
                        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
                        let per_call = match strategy {
                            "writev" => batch.unwrap_or(64),
                            _ => 1,
                        };
                        assert_verified_io(&v, &path, chunk, io, model, strategy, per_call);
                        if strategy == "writev" {
                            assert_eq!(v["batch"], per_call, "{what}");
                        } else {
                            assert!(v["batch"].is_null(), "{what}");
                        }
                    }
                }
            }
        }
    }
}

/// With tiny socket buffers, non-blocking writev and sendfile meet WouldBlock and short calls,
/// keep their place, and the digest still matches.
#[test]
fn short_calls_keep_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "f.txt", 4 << 20);
    for (args, model) in MODELS {
        let mut a = vec!["--rcvbuf", "4096"];
        a.extend_from_slice(args);
        let server = Server::start(&a);
        for strategy in ["writev", "sendfile"] {
            for (flag, io) in TRANSPORTS {
                let mut a = vec!["--io", strategy, "--sndbuf", "4096", "--chunk", "10240"];
                a.extend(flag);
                a.push(path.to_str().unwrap());
                let (out, v) = client_json(server.port, &a);
                assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                let per_call = if strategy == "writev" { 64 } else { 1 };
                assert_verified_io(&v, &path, 10240, io, model, strategy, per_call);
                // A blocking socket waits inside the call until all is taken; a non-blocking
                // one returns short and the client continues from there.
                let c = &v["client"];
                if io == "nonblocking" {
                    assert!(
                        c["partial_writes"].as_u64().unwrap() > 0,
                        "{model} {strategy}: no short call: {c}"
                    );
                    assert!(c["would_block"].as_u64().unwrap() > 0, "{strategy}: {c}");
                }
            }
        }
    }
}

/// The human report names the strategy and the batch.
#[test]
fn human_report_names_strategy() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "h.txt", 100_000);
    let port = server.port.to_string();
    let p = path.to_str().unwrap();
    let out = client(&["--port", &port, "-V", "--io", "writev", "--batch", "8", p]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("io blocking writev of 8, verified"),
        "{}",
        stdout(&out)
    );
    let out = client(&[
        "--port",
        &port,
        "-V",
        "--io",
        "sendfile",
        "--nonblocking",
        p,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("io nonblocking sendfile, verified"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(" sendfile calls ("),
        "{}",
        stdout(&out)
    );
}

/// Bad combinations get a usage error naming the option, exit 2, and send nothing.
#[test]
fn bad_strategy_arguments_refused() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = test_file(dir.path(), "b.txt", 1000);
    let port = server.port.to_string();
    let p = path.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--io", "writev", "--batch", "0", p], "'--batch <K>'"),
        (
            &["--io", "writev", "--batch", "1025", p],
            "1025 is not in 1..=1024",
        ),
        (
            &["--io", "mmap", p],
            "invalid value 'mmap' for '--io <STRATEGY>'",
        ),
    ];
    for (args, needle) in cases {
        let mut a = vec!["--port", &port];
        a.extend_from_slice(args);
        let out = client(&a);
        assert_fails(&out, 2, needle);
        assert!(out.stderr.starts_with(b"error:"), "{}", stderr(&out));
    }
    // K x chunk beyond what one block may hold: a clear error naming both options, exit 1.
    let out = client(&[
        "--port", &port, "--io", "writev", "--batch", "1024", "--chunk", "16m", p,
    ]);
    assert_fails(&out, 1, "lower --batch or --chunk");
    assert!(!server.stderr().contains("b.txt"), "{}", server.stderr());
}

/// What a running client holds the generated stream's period in: `(an in-memory file open,
/// the size in KiB of its largest read-only anonymous mapping and whether the kernel may give
/// that mapping huge pages)`, from `/proc`.
fn period_holder(pid: u32) -> (bool, u64, bool) {
    let memfd = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .any(|l| l.to_string_lossy().contains("memfd:tsperf-generated"))
        })
        .unwrap_or(false);
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut largest, mut eligible) = (0u64, false);
    // A mapping's first line: range, perms, offset, device, inode and (if any) its path.
    let (mut read_only_anon, mut size) = (false, 0u64);
    for line in smaps.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [range, perms, _, _, "0"] if range.contains('-') => {
                (read_only_anon, size) = (*perms == "r--p", 0);
            }
            [range, ..] if range.contains('-') => read_only_anon = false,
            ["Size:", kib, ..] => size = kib.parse().unwrap_or(0),
            ["THPeligible:", flag] if read_only_anon && size > largest => {
                (largest, eligible) = (size, *flag == "1");
            }
            _ => {}
        }
    }
    (memfd, largest, eligible)
}

/// `--io write` and `writev` send the generated stream from memory the client holds
/// (36 MiB, asked for huge pages), not from an in-memory file; `sendfile` still sends from the
/// in-memory file, which it needs. Each run still verifies.
#[test]
fn the_generated_period_is_held_in_memory_but_for_sendfile() {
    use std::time::{Duration, Instant};
    // Reads 16 bytes at a time through a small window: the run is still going when looked at.
    let server = Server::start(&["--read-size", "16", "--rcvbuf", "65536"]);
    let port = server.port.to_string();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| !s.contains("[never]"));
    for (io, in_memfd) in [("write", false), ("writev", false), ("sendfile", true)] {
        let mut child = spawn_client(&[
            "--port", &port, "--sndbuf", "65536", "--json", "--io", io, "--chunk", "10240",
            "--bytes", "1G",
        ]);
        let pid = child.id();
        // Looked at once the socket is open (the period is made before it connects).
        let end = Instant::now() + Duration::from_secs(10);
        let streaming = loop {
            let socket = std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|dir| {
                dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .any(|l| l.to_string_lossy().starts_with("socket:"))
            });
            if socket || Instant::now() > end || child.try_wait().unwrap().is_some() {
                break socket;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let (memfd, largest, eligible) = period_holder(pid);
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
        let out = wait_child(child);
        assert!(streaming, "{io}: never connected: {}", stderr(&out));
        assert_eq!(out.status.code(), Some(130), "{io}: {}", stderr(&out));
        assert_eq!(memfd, in_memfd, "{io}: an in-memory file open");
        if !in_memfd {
            assert!(largest >= 36 << 10, "{io}: largest mapping {largest} KiB");
            assert_eq!(eligible, thp, "{io}: huge pages where the kernel has them");
        }
    }
}

/// The server sends a generated reverse stream the way `-R --io` asks, in both server models
/// and both client transports: the tsgen text, verified (its digest a tsgen file's), writev's
/// calls a batch of chunks each, the JSON naming the strategy asked; one buffer too; without
/// `--io` the server's own way, no strategy named.
#[test]
fn the_server_sends_a_reverse_stream_the_way_asked() {
    let digest = tsgen_digest(3_000_001);
    let cases: [(Option<&str>, Option<u64>, &[&str]); 6] = [
        (None, None, &[]),
        (Some("write"), None, &[]),
        (Some("writev"), Some(8), &[]),
        (Some("sendfile"), None, &["--nonblocking"]),
        (Some("writev"), Some(4), &["--one-buffer", "--nonblocking"]),
        (Some("sendfile"), None, &["--one-buffer"]),
    ];
    for (args, model) in MODELS {
        let server = Server::start(args);
        for (strategy, batch, extra) in cases {
            let k = batch.map(|k| k.to_string());
            let mut a = vec!["--reverse", "--bytes", "3000001", "--chunk", "1024"];
            a.extend(strategy.iter().flat_map(|s| ["--io", s]));
            a.extend(k.iter().flat_map(|k| ["--batch", k.as_str()]));
            a.extend(extra);
            let what = format!("{model} {a:?}");
            let (out, v) = client_json(server.port, &a);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
            assert_eq!(v["verified"], true, "{what}: {v:#}");
            assert_eq!(v["bytes"].as_u64(), Some(3_000_001), "{what}");
            assert_eq!(v["strategy"].as_str(), strategy, "{what}: {v:#}");
            assert_eq!(v["batch"].as_u64(), batch, "{what}: {v:#}");
            if !extra.contains(&"--one-buffer") {
                assert_eq!(v["digest"], digest.as_str(), "{what}: the tsgen text");
            }
            let writes = v["server"]["writes"].as_u64().unwrap();
            let per_call = 1024 * batch.unwrap_or(1);
            assert!(
                writes >= 3_000_001u64.div_ceil(per_call),
                "{what}: {writes} writes"
            );
            // One buffer's period is one chunk: a block, so a call, ends at its end (as the
            // client's own one buffer does).
            if batch.is_some() && !extra.contains(&"--one-buffer") {
                assert!(
                    writes < 3_000_001u64.div_ceil(1024),
                    "{what}: {writes} writes, not batches"
                );
            }
        }
    }
}
