//! The cells and the commands each tool runs for them.

use super::*;

/// Both tools' arguments for a `kind` cell at 128 KiB writes, 1 GiB.
fn at_128k(kind: Kind) -> (Vec<String>, Vec<String>) {
    commands(
        Cell {
            kind,
            chunk: 131072,
        },
        Path::new("/f"),
        1 << 30,
    )
}

/// The commands name the same write size and length for both tools.
#[test]
fn both_tools_get_the_same_write_and_length() {
    for cell in default_cells() {
        let (ts, ip) = commands(cell, Path::new("/f"), 1 << 30);
        let c = cell.chunk.to_string();
        assert!(
            ts.windows(2).any(|w| w == ["--chunk", c.as_str()]),
            "{ts:?}"
        );
        assert!(ip.windows(2).any(|w| w == ["-l", c.as_str()]), "{ip:?}");
        let sized = ip.iter().any(|a| a == "-n") || ip.iter().any(|a| a == "-F");
        assert!(sized, "{ip:?}");
    }
    assert_eq!(default_cells().len(), 26);
    // Two streams from one buffer each: the same work as iperf3 -P 2, checked against the
    // one-buffer loop.
    let (ts, ip) = at_128k(Kind::ParallelOneBuffer);
    assert!(
        ts.windows(2).any(|w| w == ["-P", "2"]) && ts.contains(&"--one-buffer".into()),
        "{ts:?}"
    );
    assert!(ip.windows(2).any(|w| w == ["-P", "2"]), "{ip:?}");
    assert_eq!(
        limit_of(Kind::ParallelOneBuffer),
        Some((Loop::Hashed, true))
    );
    let (ts, _) = at_128k(Kind::OneBuffer);
    assert_eq!(ts[0], "--one-buffer", "{ts:?}");
    let (ts, ip) = at_128k(Kind::OneBufferCubic);
    assert!(
        ts.windows(2).any(|w| w == ["--congestion", "cubic"]),
        "{ts:?}"
    );
    assert!(ip.windows(2).any(|w| w == ["-C", "cubic"]), "{ip:?}");
    let (ts, ip) = at_128k(Kind::ReverseOneBufferCubic);
    for args in [&ts, &ip] {
        assert_eq!(args[0], "-R", "{args:?}");
    }
    assert!(
        ts.windows(2).any(|w| w == ["--congestion", "cubic"])
            && ts.contains(&"--one-buffer".into()),
        "{ts:?}"
    );
    assert!(ip.windows(2).any(|w| w == ["-C", "cubic"]), "{ip:?}");
}

/// The file cells' own loop writes from their file, read as iperf3 -F reads it, and the
/// sendfile cells' sends it with sendfile; the table's loops have no file.
#[test]
fn the_file_cells_limit_reads_their_file() {
    assert_eq!(limit_of(Kind::File), Some((Loop::File, true)));
    assert_eq!(limit_of(Kind::Sendfile), Some((Loop::Sendfile, true)));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, vec![b'q'; 1 << 20]).unwrap();
    for l in [Loop::File, Loop::Sendfile] {
        let s = limits::loop_run(l, 1 << 20, 10240, Some(&file)).unwrap();
        assert!(s.mib_s > 0.0 && s.cpu.writer > 0.0, "{l:?}: {s:?}");
        let e = limits::loop_run(l, 1 << 20, 10240, None).unwrap_err();
        assert!(e.to_string().contains("file"), "{l:?}: {e}");
    }
}
