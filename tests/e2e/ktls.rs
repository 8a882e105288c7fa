//! `tsclient --ktls`: the client's TLS records sealed and opened by the kernel (kernel TLS)
//! after a handshake made in the process, the server's rustls at the far end.
//!
//! This machine's kernel may have no kernel TLS (CONFIG_TLS unset): there `--ktls` is refused
//! naming why, and the tests of the data path run on a kernel that has it, in a VM
//! (`scripts/ktls-vm.sh`, from [`the_kernel_tls_tests_pass_on_a_kernel_that_has_it`]).

use crate::common::*;

/// Where this kernel offers kernel TLS; else why not.
fn offered() -> Result<(), String> {
    tsperf_sys::ktls::offered()
}

/// The kernel's count of TLS records it sealed in software (`TlsTxSw`) and opened (`TlsRxSw`):
/// each counts the sockets given keys that way.
fn kernel_counts() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/net/tls_stat").unwrap();
    let field = |name: &str| {
        stat.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/net/tls_stat: {stat}"))
    };
    (field("TlsTxSw"), field("TlsRxSw"))
}

/// Runs tsclient `args` against `port` and returns each direction's object (a two-way run has
/// one each way), each verified over TLS with `cipher`.
fn verified_streams(port: u16, args: &[&str], cipher: &str, what: &str) -> Vec<serde_json::Value> {
    let (out, v) = client_json(port, args);
    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
    let streams = match v.get("forward") {
        Some(f) => vec![f.clone(), v["reverse"].clone()],
        None => vec![v],
    };
    for s in &streams {
        assert_eq!(s["verified"], true, "{what}: {s}");
        assert_eq!(s["tls"]["cipher"], cipher, "{what}: {s}");
    }
    streams
}

/// Each suite, forward by writes and by sendfile, reverse and both ways, with either socket
/// model at the client and either server model: every stream verified, the JSON saying the
/// kernel sealed the client's records, and the kernel's own counters showing sockets that got
/// keys both ways.
#[test]
fn kernel_tls_streams_verify_either_way_in_every_model() {
    if let Err(why) = offered() {
        eprintln!("skipped here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "k.bin", 3 << 20);
    let f = file.to_str().unwrap();
    let (tx0, rx0) = kernel_counts();
    let mut runs = 0;
    for model in MODELS {
        let server = Server::start(model);
        for cipher in ["aes128gcm", "aes256gcm", "chacha20poly1305"] {
            for io in [&[][..], &["--nonblocking"]] {
                let ways: [&[&str]; 4] = [
                    &[f],
                    &["--io", "sendfile", f],
                    &["-R", "--bytes", "3MiB"],
                    &["--bidir", "--bytes", "3MiB"],
                ];
                for way in ways {
                    let mut args = vec!["--ktls", "--tls", cipher, "--chunk", "10240"];
                    args.extend_from_slice(io);
                    args.extend_from_slice(way);
                    let what = format!("{model:?} {args:?}");
                    for s in verified_streams(server.port, &args, cipher, &what) {
                        assert_eq!(s["tls"]["kernel"], true, "{what}: {s}");
                    }
                    runs += 1;
                }
            }
        }
    }
    let (tx, rx) = kernel_counts();
    assert!(
        tx - tx0 >= runs && rx - rx0 >= runs,
        "{runs} runs, the kernel sealed on {} sockets and opened on {}",
        tx - tx0,
        rx - rx0
    );
}

/// The kernel really seals the records: a relay that keeps what the client sent finds none of
/// the file's plain text in a run by sendfile through kernel TLS, and the run is verified.
#[test]
fn sendfile_through_kernel_tls_puts_no_plain_text_on_the_wire() {
    if let Err(why) = offered() {
        eprintln!("skipped here: {why}");
        return;
    }
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = test_file(dir.path(), "k.bin", 2 << 20);
    let probe = std::fs::read(&file).unwrap()[1000..1064].to_vec();
    let (port, seen, t) = crate::tls::relay(server.port);
    let (out, v) = client_json(
        port,
        &["--ktls", "--io", "sendfile", file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["tls"]["kernel"], true, "{v}");
    t.join().unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 2 << 20, "{} bytes relayed", seen.len());
    assert!(
        !seen.windows(probe.len()).any(|w| w == probe.as_slice()),
        "the file's plain text was seen on the wire"
    );
}

/// A server with `--ktls` seals its records in the kernel too: in either server model, a
/// reverse stream asked by sendfile goes through TLS (each suite, the client's records sealed
/// by rustls or by the kernel), a forward stream is opened by the server's kernel, and a
/// two-way run does both; each verified, and the kernel counts the server's sockets as well.
#[test]
fn a_server_with_ktls_sends_by_sendfile_through_tls() {
    if let Err(why) = offered() {
        eprintln!("skipped here: {why}");
        return;
    }
    let (tx0, rx0) = kernel_counts();
    let mut runs = 0;
    for model in MODELS {
        let mut args = model.to_vec();
        args.push("--ktls");
        let server = Server::start(&args);
        for cipher in ["aes128gcm", "aes256gcm", "chacha20poly1305"] {
            let ways: [&[&str]; 4] = [
                &["-R", "--io", "sendfile", "--bytes", "3MiB"],
                &[
                    "-R",
                    "--io",
                    "sendfile",
                    "--bytes",
                    "3MiB",
                    "--ktls",
                    "--nonblocking",
                ],
                &["--bytes", "3MiB"],
                &["--bidir", "--bytes", "3MiB", "--ktls"],
            ];
            for way in ways {
                let mut args = vec!["--tls", cipher];
                args.extend_from_slice(way);
                let what = format!("{model:?} {args:?}");
                verified_streams(server.port, &args, cipher, &what);
                runs += 1;
            }
        }
    }
    // Every run's server end got keys both ways, and the runs with --ktls their client end too.
    let (tx, rx) = kernel_counts();
    assert!(
        tx - tx0 >= runs + runs / 2 && rx - rx0 >= runs + runs / 2,
        "{runs} runs, the kernel sealed on {} sockets and opened on {}",
        tx - tx0,
        rx - rx0
    );
}

/// A server without `--ktls` refuses a reverse stream asked over TLS by sendfile, naming the
/// flag and the calls it does take; one asked by writes is served.
#[test]
fn a_server_without_ktls_refuses_its_sendfile_through_tls() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = client(&[
        "--port",
        &port,
        "--tls",
        "aes128gcm",
        "-R",
        "--io",
        "sendfile",
        "--bytes",
        "1MiB",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("--ktls") && err.contains("--io write"),
        "{err}"
    );
    let (out, v) = client_json(
        server.port,
        &["--tls", "aes128gcm", "-R", "--bytes", "1MiB"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["verified"], true);
}

/// The ladder's kernel TLS rung runs where the kernel offers it: verified, its records sealed by
/// the kernel, the same suite as the TLS rung's.
#[test]
fn the_ladders_kernel_tls_rung_runs_where_the_kernel_offers_it() {
    if let Err(why) = offered() {
        eprintln!("skipped here: {why}");
        return;
    }
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["--ladder", "--bytes", "4MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rungs = v["rungs"].as_array().unwrap();
    let rung = |name: &str| {
        rungs
            .iter()
            .find(|r| r["rung"] == name)
            .unwrap_or_else(|| panic!("no rung {name}: {v}"))
    };
    let k = rung("file → kernel TLS aes128gcm → memory");
    assert_eq!(k["status"], "ran", "{k}");
    assert_eq!(k["run"]["verified"], true, "{k}");
    assert_eq!(k["run"]["tls"]["kernel"], true, "{k}");
    assert_eq!(
        rung("file → TLS aes128gcm → memory")["run"]["tls"]["kernel"],
        false
    );
}

/// Where the kernel has no kernel TLS, `--ktls` is refused before any byte is sent, saying
/// why and how to get it, and the run exits non-zero; `tsserver --ktls` will not start.
#[test]
fn without_kernel_tls_ktls_is_refused_saying_why() {
    if offered().is_ok() {
        eprintln!("skipped here: this kernel offers kernel TLS");
        return;
    }
    let server = Server::start(&[]);
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--ktls",
        "--bytes",
        "1MiB",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("--ktls") && err.contains("no kernel TLS") && err.contains("modprobe tls"),
        "{err}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tsserver"))
        .args(["--port", "0", "--ktls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "tsserver --ktls started");
    let err = stderr(&out);
    assert!(
        err.contains("--ktls") && err.contains("no kernel TLS"),
        "{err}"
    );
}

/// On a machine whose kernel has no kernel TLS, the tests above (and the engine's, and the
/// ladder's kernel TLS rung) run in a VM on a kernel that has it: they must pass there, having
/// run rather than skipped. Root only (the VM reads the kernel in /boot); where no VM can be
/// started it says why, and fails if `.ci/run` asked for it (`TSPERF_KTLS_VM=required`).
#[test]
#[ignore = "needs root: starts a VM"]
fn the_kernel_tls_tests_pass_on_a_kernel_that_has_it() {
    if offered().is_ok() {
        eprintln!("this kernel offers kernel TLS: the tests above ran here");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/ktls-vm.sh");
    let check = std::process::Command::new(script)
        .arg("--check")
        .output()
        .unwrap();
    if !check.status.success() {
        let why = String::from_utf8_lossy(&check.stdout);
        assert_ne!(
            std::env::var("TSPERF_KTLS_VM").as_deref(),
            Ok("required"),
            "{why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let me = std::env::current_exe().unwrap();
    let engine = engine_tests();
    let job = format!(
        "{me} --test-threads 1 --nocapture ktls:: && {engine} --nocapture kernel_tls",
        me = me.display(),
        engine = engine.display()
    );
    let out = std::process::Command::new(script)
        .arg(&job)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "in the VM: {text}\n{}", stderr(&out));
    // The data-path tests skip only where the kernel has no kernel TLS.
    assert!(
        !text.contains("no kernel TLS"),
        "a test skipped in the VM: {text}"
    );
    for test in [
        "kernel_tls_streams_verify_either_way_in_every_model",
        "sendfile_through_kernel_tls_puts_no_plain_text_on_the_wire",
        "a_server_with_ktls_sends_by_sendfile_through_tls",
        "the_ladders_kernel_tls_rung_runs_where_the_kernel_offers_it",
        "kernel_tls_carries_the_bytes_whole_with_writes_and_sendfile",
    ] {
        assert!(text.contains(&format!("{test} ... ok")), "{test}: {text}");
    }
}

/// The engine crate's unit-test binary (built by `cargo test --workspace`), newest first.
fn engine_tests() -> std::path::PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let mut found: Vec<_> = std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("tsperf_stream-") && !name.contains('.')
        })
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found
        .pop()
        .unwrap_or_else(|| panic!("no tsperf_stream test binary in {}", deps.display()))
}
