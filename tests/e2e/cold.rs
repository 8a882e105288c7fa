//! `tsclient --cold`: FILE read from its disk, not the page cache, and said so.

use crate::common::*;

/// `--cold` puts FILE's pages out of the page cache before sending it, so the sender reads the
/// disk: verified, in either socket model and with stripes, and said so in the JSON
/// (`client.cold`: the method, the pages, how many were cached before and after) and the human
/// report. A file in memory (tmpfs) is refused, naming it, before any connection.
#[test]
fn a_cold_read_is_verified_and_said_so() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let file = test_file(dir.path(), "cold.bin", 6 << 20);
    let f = file.to_str().unwrap();
    for extra in [&[][..], &["--nonblocking"], &["-P", "3"]] {
        // Read once, so its pages are cached before the run puts them out.
        let _ = std::fs::read(&file).unwrap();
        let mut args = vec!["--cold", f];
        args.extend_from_slice(extra);
        let (out, v) = client_json(server.port, &args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        let verified = match v.get("sum") {
            Some(sum) => &sum["verified"],
            None => &v["verified"],
        };
        assert_eq!(*verified, true, "{extra:?}: {v}");
        if extra.is_empty() {
            let cold = &v["client"]["cold"];
            assert_eq!(cold["method"], "posix_fadvise(DONTNEED)", "{v}");
            assert_eq!(cold["pages"], 1536, "{v}");
            assert_eq!(cold["cached_after"], 0, "{v}");
            assert!(cold["cached_before"].as_u64().unwrap() > 0, "{v}");
        }
    }
    let out = client(&["--port", &server.port.to_string(), "--cold", f]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("read cold: 1536 pages put out of the page cache first"),
        "{}",
        stdout(&out)
    );
    let (out, v) = client_json(server.port, &[f]);
    assert_eq!(out.status.code(), Some(0));
    assert!(v["client"].get("cold").is_none(), "{v}");
    if std::path::Path::new("/dev/shm").is_dir() {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        let in_memory = test_file(shm.path(), "m.bin", 1 << 20);
        let out = client(&[
            "--port",
            &server.port.to_string(),
            "--cold",
            in_memory.to_str().unwrap(),
        ]);
        assert_fails(&out, 1, "is on tmpfs, in memory");
    }
}
