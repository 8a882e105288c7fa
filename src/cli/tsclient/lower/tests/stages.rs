//! The lowering of the copy's stages: TLS, kernel TLS, and the ladder that runs them rung by
//! rung.

use super::*;

/// `--tls SUITE` carries a stream's data over TLS, either way; not with sendfile, which
/// cannot encrypt.
#[test]
fn tls_asks_a_suite_either_way() {
    use tsperf_proto::tls::Cipher;
    let s = streams(&["--tls", "chacha20poly1305", "f.bin"]);
    assert_eq!(s.forward.unwrap().tls, Some(Cipher::Chacha20Poly1305));
    let s = streams(&["--tls", "aes128gcm", "--bidir"]);
    assert_eq!(s.forward.unwrap().tls, Some(Cipher::Aes128Gcm));
    assert_eq!(s.reverse.unwrap().tls, Some(Cipher::Aes128Gcm));
    assert_eq!(streams(&["f.bin"]).forward.unwrap().tls, None);
    refused(
        &["--tls", "aes256gcm", "--io", "sendfile", "f.bin"],
        "sendfile",
    );
    // The server's sendfile through TLS is the server's to grant (tsserver --ktls).
    let r = streams(&["--tls", "aes256gcm", "-R", "--io", "sendfile"]);
    assert_eq!(r.reverse.unwrap().strategy, Some(Strategy::Sendfile));
    refused(&["--latency", "--tls", "aes256gcm"], "--tls");
}

/// `--ktls` seals this end's records in the kernel: TLS (AES-128-GCM unless --tls says) on
/// every stream this client runs, and sendfile through it where this client sends; whether
/// the server's sendfile goes through TLS is the server's to say (tsserver --ktls).
#[test]
fn kernel_tls_is_this_ends_and_lets_sendfile_through() {
    use tsperf_proto::tls::Cipher;
    let f = streams(&["--ktls", "f.bin"]).forward.unwrap();
    assert_eq!((f.tls, f.kernel_tls), (Some(Cipher::Aes128Gcm), true));
    let f = streams(&[
        "--ktls",
        "--tls",
        "chacha20poly1305",
        "--io",
        "sendfile",
        "f.bin",
    ]);
    let f = f.forward.unwrap();
    assert_eq!(f.tls, Some(Cipher::Chacha20Poly1305));
    assert_eq!(f.strategy, Some(Strategy::Sendfile));
    let s = streams(&["--ktls", "--bidir"]);
    assert!(s.forward.unwrap().kernel_tls && s.reverse.unwrap().kernel_tls);
    assert!(
        !streams(&["--tls", "aes128gcm", "f.bin"])
            .forward
            .unwrap()
            .kernel_tls
    );
    let s = streams(&["--ktls", "--bidir", "--io", "sendfile"]);
    assert_eq!(s.forward.unwrap().strategy, Some(Strategy::Sendfile));
    refused(
        &["--tls", "aes128gcm", "--bidir", "--io", "sendfile"],
        "--ktls",
    );
    refused(&["--latency", "--ktls"], "--ktls");
    refused(&["--ladder", "--ktls"], "--ktls");
}

/// `--ladder [FILE]` runs its own rungs from one stream's settings: FILE or the generated text
/// of `--bytes`, the encrypted rungs with `--tls`'s suite (AES-128-GCM by default), timed by
/// `-t`; what the rungs set themselves, a direction or a stream count is refused.
#[test]
fn the_ladder_runs_its_rungs_from_one_streams_settings() {
    use tsperf_proto::tls::Cipher;
    let ladder = |line: &[&str]| match lower(line).unwrap().mode {
        Mode::Ladder(l) => l,
        other => panic!("{line:?}: {other:?}"),
    };
    let l = ladder(&["--ladder", "f.bin", "--chunk", "1024"]);
    assert_eq!(l.file, Some(PathBuf::from("f.bin")));
    assert_eq!((l.base.chunk, l.cipher), (1024, Cipher::Aes128Gcm));
    let l = ladder(&["--ladder", "--bytes", "64MiB", "--tls", "chacha20poly1305"]);
    assert_eq!((l.file, l.bytes), (None, 64 << 20));
    assert_eq!(l.cipher, Cipher::Chacha20Poly1305);
    assert_eq!(l.base.tls, None, "the rungs choose where TLS goes");
    for (flag, value) in [
        ("-R", None),
        ("--bidir", None),
        ("-P", Some("2")),
        ("--cold", None),
        ("--far-disk", Some("durable")),
    ] {
        let mut line = vec!["--ladder", flag];
        line.extend(value);
        line.push("f.bin");
        refused(&line, "--ladder");
    }
    refused(
        &["--ladder", "--latency"],
        "--ladder applies to stream transfers only",
    );
    assert_eq!(ladder(&["--ladder", "f.bin"]).runs, 1);
    // Timed: the rungs that can repeat their file run for the time (the ladder's own test).
    let l = ladder(&["--ladder", "-t", "2", "-O", "1", "f.bin"]);
    assert_eq!(l.base.time, Some(std::time::Duration::from_secs(2)));
    assert_eq!(l.base.omit, std::time::Duration::from_secs(1));
    assert_eq!(ladder(&["--ladder", "--runs", "5", "f.bin"]).runs, 5);
    refused(
        &["--runs", "3", "f.bin"],
        "--runs repeats the ladder's rungs",
    );
}
