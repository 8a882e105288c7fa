//! tsclient's helper threads (the signal watcher, the interval sampler, a timed run's alarm)
//! keep a descriptor table of their own. While threads share one table, the kernel takes and
//! drops a reference on the socket at every send and receive; with the table to itself, the
//! sending thread pays nothing.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// The sockets (`socket:[inode]`) in the descriptor table of task `tid` of process `pid`.
fn sockets(pid: u32, tid: &str) -> BTreeSet<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task/{tid}/fd")) else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| l.starts_with("socket:"))
        .collect()
}

/// Every task of `pid`: its id, name and sockets.
fn tasks(pid: u32) -> Vec<(String, String, BTreeSet<String>)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .map(|tid| {
            let comm =
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
            let socks = sockets(pid, &tid);
            (tid, comm.trim().to_string(), socks)
        })
        .collect()
}

/// True if task `tid` of process `pid` shares the main task's descriptor table (`kcmp(2)`,
/// `KCMP_FILES`: 0 when both use the same one).
fn shares_the_table(pid: u32, tid: &str) -> bool {
    const KCMP_FILES: libc::c_long = 2;
    let tid: libc::c_long = tid.parse().expect("a task id");
    // SAFETY: kcmp(2) compares two tasks of our own child; it reads no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, pid as libc::c_long, tid, KCMP_FILES, 0, 0) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        // A task that ended between the listing and the call shares nothing.
        assert_eq!(
            e.raw_os_error(),
            Some(libc::ESRCH),
            "kcmp({pid}, {tid}): {e}"
        );
    }
    r == 0
}

/// True if the main task of `pid` holds a socket, the `helpers` are running, and no other task
/// shares its descriptor table; `seen` is left holding what was looked at.
fn alone(pid: u32, helpers: &[&str], seen: &mut Vec<(String, String, BTreeSet<String>)>) -> bool {
    *seen = tasks(pid);
    let me = pid.to_string();
    let held = seen.iter().any(|(tid, _, s)| *tid == me && !s.is_empty());
    let names: Vec<&str> = seen.iter().map(|(_, n, _)| n.as_str()).collect();
    let shared = seen
        .iter()
        .any(|(tid, ..)| *tid != me && shares_the_table(pid, tid));
    held && helpers.iter().all(|h| names.contains(h)) && !shared
}

/// While tsclient streams, sized, sampled or timed, the sending thread has its descriptor table
/// to itself: the signal thread, the interval sampler and the alarm each have their own (the
/// sampler holds a duplicate of the socket, for TCP_INFO). Ctrl-C still stops
/// the run where it is blocked (a full window) and prints what it measured.
#[test]
fn the_sending_thread_has_its_descriptor_table_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse_file(dir.path(), "big.bin", 256 << 20);
    // Reads 16 bytes at a time through a small window: the run is still going when looked at.
    let server = Server::start(&["--read-size", "16", "--rcvbuf", "65536"]);
    let port = server.port.to_string();
    // A timed run ends itself on Ctrl-C, verified: its JSON says so under "timed", and its
    // bytes are the ones it moved.
    for (extra, helpers, said, moved) in [
        (&[][..], &["signals"][..], "/interrupted", "/sent"),
        (
            &["--interval", "0.1"][..],
            &["signals", "intervals"][..],
            "/interrupted",
            "/sent",
        ),
        (
            &["--time", "30"][..],
            &["signals", "alarm"][..],
            "/timed/interrupted",
            "/bytes",
        ),
    ] {
        let big = big.to_str().unwrap();
        let mut child = spawn_client(
            &[
                &["--port", &port, "--sndbuf", "65536", "--json"],
                extra,
                &[big],
            ]
            .concat(),
        );
        let pid = child.id();
        // Alone from the first look that finds the helpers, and for 300 ms on (the run is
        // streaming by then, so Ctrl-C has something to report).
        let end = Instant::now() + Duration::from_secs(10);
        let (mut seen, mut since) = (Vec::new(), None);
        let alone = loop {
            let now = alone(pid, helpers, &mut seen);
            if now && since.get_or_insert_with(Instant::now).elapsed() > Duration::from_millis(300)
            {
                break true;
            }
            if (!now && since.is_some())
                || Instant::now() > end
                || child.try_wait().unwrap().is_some()
            {
                break false;
            }
            thread::sleep(Duration::from_millis(20));
        };
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
        let out = wait_child(child);
        assert!(alone, "{extra:?}: threads and their sockets: {seen:?}");
        assert_eq!(out.status.code(), Some(130), "{extra:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{extra:?}: not one JSON object ({e}): {}", stdout(&out)));
        assert_eq!(v.pointer(said), Some(&true.into()), "{v:#}");
        assert!(v.pointer(moved).and_then(|m| m.as_u64()) > Some(0), "{v:#}");
    }
}
