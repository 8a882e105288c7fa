//! `tsclient --ladder`: a file copy's rungs against one server, each verified, the table and
//! the JSON, the rungs a server or the machine cannot run skipped with their reasons.

use crate::common::*;

/// Against a server that saves (`--save`), every rung runs verified but kernel TLS (skipped
/// with this kernel's reason where it has none): the table has a line per rung and the
/// closing line; the JSON has each rung with a single run's fields and the stages' costs.
/// The rungs that do not test the far disk ask the server to write nothing.
#[test]
fn every_rung_runs_verified_against_a_saving_server() {
    let save = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let server = Server::start(&["--save", save.path().to_str().unwrap(), "--overwrite"]);
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let file = test_file(dir.path(), "copy.bin", 8 << 20);
    let f = file.to_str().unwrap();
    let (out, v) = client_json(server.port, &["--ladder", f, "--tls", "chacha20poly1305"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["mode"], "ladder");
    assert_eq!(v["verified"], true, "{v}");
    let rungs = v["rungs"].as_array().unwrap();
    let names: Vec<&str> = rungs.iter().map(|r| r["rung"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "memory → memory",
            "file → memory",
            "cold file → memory",
            "file → far disk (direct)",
            "file → far disk (durable)",
            "file → TLS chacha20poly1305 → memory",
            "file → kernel TLS chacha20poly1305 → memory",
            "cold → TLS chacha20poly1305 → durable far disk",
            "file → far disk (buffered)",
        ]
    );
    for r in rungs {
        let name = r["rung"].as_str().unwrap();
        if name.contains("kernel TLS") && tsperf_sys::ktls::offered().is_err() {
            assert_eq!(r["status"], "skipped", "{r}");
            assert!(
                r["reason"].as_str().unwrap().contains("no kernel TLS"),
                "{r}"
            );
            continue;
        }
        assert_eq!(r["status"], "ran", "{name}: {r}");
        assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{name}");
        assert_eq!(r["run"]["verified"], true, "{name}");
    }
    assert_eq!(rungs[2]["run"]["client"]["cold"]["cached_after"], 0);
    assert_eq!(rungs[4]["run"]["server"]["save_mode"], "durable");
    assert!(
        rungs[1]["run"]["server"].get("save_mode").is_none(),
        "memory rungs write nothing"
    );
    assert_eq!(rungs[5]["run"]["tls"]["cipher"], "chacha20poly1305");
    assert_eq!(rungs[5]["run"]["tls"]["kernel"], false);
    if tsperf_sys::ktls::offered().is_ok() {
        assert_eq!(rungs[6]["run"]["tls"]["kernel"], true, "{}", rungs[6]);
    }
    assert_eq!(rungs[7]["run"]["tls"]["cipher"], "chacha20poly1305");
    assert_eq!(rungs[7]["run"]["client"]["cold"]["cached_after"], 0);
    assert_eq!(rungs[8]["run"]["server"]["save_mode"], "buffered");
    assert!(
        v["costliest"]
            .as_str()
            .unwrap()
            .starts_with("the copy runs at "),
        "{v}"
    );
    assert!(!v["costs"].as_array().unwrap().is_empty());
    let out = client(&["--port", &server.port.to_string(), "--ladder", f]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("cold → TLS aes128gcm → durable far disk"),
        "{text}"
    );
    assert!(text.contains("the copy runs at "), "{text}");
}

/// Against a server without `--save` the far-disk rungs and the whole copy are skipped, each
/// naming the flag, and the others still run verified; without FILE the ladder copies a
/// generated file of `--bytes`.
#[test]
fn a_server_that_does_not_save_skips_the_disk_rungs() {
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["--ladder", "--bytes", "4MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["bytes"], 4 << 20);
    for r in v["rungs"].as_array().unwrap() {
        let name = r["rung"].as_str().unwrap();
        if name.contains("far disk") {
            assert_eq!(r["status"], "skipped", "{r}");
            assert!(r["reason"].as_str().unwrap().contains("--save DIR"), "{r}");
        } else if !name.contains("kernel TLS") {
            assert_eq!(r["status"], "ran", "{r}");
        }
    }
    assert!(v["costliest"].is_null(), "no whole copy ran: {v}");
}

/// The far-disk rungs are measured and not kept: against a `tsserver --save DIR` without
/// `--overwrite`, every disk rung runs verified, twice over, the reports say how each was written
/// and that it was not kept, and DIR is empty after.
#[test]
fn the_disk_rungs_keep_nothing_and_take_no_name() {
    let save = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let server = Server::start(&["--save", save.path().to_str().unwrap()]);
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let file = test_file(dir.path(), "kept.bin", 2 << 20);
    for _ in 0..2 {
        let (out, v) = client_json(server.port, &["--ladder", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        for r in v["rungs"].as_array().unwrap() {
            let name = r["rung"].as_str().unwrap();
            if name.contains("far disk") {
                assert_eq!(r["status"], "ran", "{r}");
                assert!(r["run"]["server"].get("saved_to").is_none(), "{r}");
                assert!(r["run"]["server"]["save_mode"].is_string(), "{r}");
            }
        }
        assert_eq!(
            std::fs::read_dir(save.path()).unwrap().count(),
            0,
            "the save directory keeps nothing"
        );
    }
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--ladder",
        file.to_str().unwrap(),
    ]);
    assert!(
        stdout(&out).contains("file → far disk (durable)"),
        "{}",
        stdout(&out)
    );
}

/// The grid's ladder section by hand (`tsmatrix --ladder-only`) with a real copy tool beside
/// the rungs (`--anchor NAME=COMMAND`, here `cp`): ladder.md has the rungs at the chunk asked
/// for and the tools' table, the copy verified each run; ladder-anchors.json has every copy,
/// and the copies are removed after.
#[test]
fn the_ladder_section_puts_copy_tools_beside_the_rungs() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let file = test_file(dir.path(), "copy.bin", 2 << 20);
    let out = dir.path().join("r");
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let o = run(
        bin("tsserver").with_file_name("tsmatrix"),
        &[
            "--ladder-only",
            "--reps",
            "2",
            "--chunks",
            "1024,65536",
            "--file",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--work",
            work.to_str().unwrap(),
            "--anchor",
            "cp=cp \"$TSPERF_COPY_SRC\" \"$TSPERF_COPY_DEST\"",
            "--anchor",
            "short=head -c 10 \"$TSPERF_COPY_SRC\" > \"$TSPERF_COPY_DEST\"",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("ladder.md")).unwrap();
    assert!(md.contains("`tsclient --ladder --chunk 65536`"), "{md}");
    assert!(md.contains("| memory → memory |"), "{md}");
    assert!(md.contains("## Real copy tools beside the rungs"), "{md}");
    assert!(md.contains("| short | failed | 0 of 2 |"), "{md}");
    let cp = md.lines().find(|l| l.starts_with("| cp |")).unwrap();
    assert!(cp.contains("| 2 of 2 |"), "{md}");
    assert!(
        md.contains("- cp: `cp \"$TSPERF_COPY_SRC\" \"$TSPERF_COPY_DEST\"`"),
        "{md}"
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("ladder-anchors.json")).unwrap()).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 4, "two tools, two runs: {runs:?}");
    assert_eq!(runs[0]["tool"], "cp");
    assert_eq!(runs[0]["verified"], true);
    assert_eq!(runs[0]["bytes"], 2 << 20);
    assert_eq!(runs[1]["verified"], false);
    let left: Vec<_> = std::fs::read_dir(work.join("ladder-save"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "copies left: {left:?}");
}

/// A tool that is not NAME=COMMAND, or tools without a ladder, are usage errors naming what
/// was expected; `matrix.sh --anchors` without the two namespaces and a ladder too.
#[test]
fn copy_tools_need_a_ladder_and_a_name() {
    let tsmatrix = bin("tsserver").with_file_name("tsmatrix");
    let o = run(tsmatrix.clone(), &["--ladder-only", "--anchor", "cp"]);
    assert_fails(&o, 2, "invalid anchor 'cp': expected NAME=COMMAND");
    let o = run(tsmatrix, &["--anchor", "cp=cp a b"]);
    assert_fails(&o, 1, "--anchor runs beside the ladder");
    let o = script("matrix.sh", &["--anchors", "--ladder-only"]);
    assert_fails(&o, 2, "give --lan and --ladder or --ladder-only");
}

/// `--ladder --runs 3` runs the whole ladder three times, one run after another (the rungs
/// alternating): the JSON keeps every run's rungs, each verified, and reports each rung's
/// median run; the table says it is the median of 3 runs.
#[test]
fn runs_alternate_and_report_each_rungs_median() {
    let save = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let server = Server::start(&["--save", save.path().to_str().unwrap()]);
    let (out, v) = client_json(server.port, &["--ladder", "--runs", "3", "--bytes", "2MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{v}");
    let rungs = v["rungs"].as_array().unwrap();
    for (i, r) in rungs.iter().enumerate() {
        if r["status"] != "ran" {
            continue;
        }
        let mut rates: Vec<f64> = runs
            .iter()
            .map(|run| {
                assert_eq!(run[i]["rung"], r["rung"]);
                assert_eq!(run[i]["run"]["verified"], true, "{}", run[i]);
                run[i]["mib_per_s"].as_f64().unwrap()
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        assert_eq!(
            r["mib_per_s"].as_f64().unwrap(),
            rates[1],
            "{}: the median",
            r["rung"]
        );
    }
    let (out, v) = client_json(server.port, &["--ladder", "--bytes", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(v.get("runs").is_none(), "one run keeps no runs: {v}");
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--ladder",
        "--runs",
        "2",
        "--bytes",
        "1MiB",
    ]);
    assert!(
        stdout(&out).contains("the median of 2 runs (the rungs alternating)"),
        "{}",
        stdout(&out)
    );
}

/// A file in memory (tmpfs) cannot be read cold: the ladder skips its cold rungs with the
/// reason (naming the filesystem) and runs the others verified; it exits 0.
#[test]
fn a_file_in_memory_skips_the_cold_rungs() {
    if !std::path::Path::new("/dev/shm").is_dir() {
        eprintln!("skipped: no /dev/shm here");
        return;
    }
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let file = test_file(shm.path(), "in-memory.bin", 1 << 20);
    let server = Server::start(&[]);
    let (out, v) = client_json(server.port, &["--ladder", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for r in v["rungs"].as_array().unwrap() {
        let name = r["rung"].as_str().unwrap();
        if name.starts_with("cold") {
            assert_eq!(r["status"], "skipped", "{r}");
            assert!(r["reason"].as_str().unwrap().contains("tmpfs"), "{r}");
        } else if name == "file → memory" {
            assert_eq!(r["status"], "ran", "{r}");
        }
    }
}

/// A timed ladder (`-t`): the rungs that can repeat the file run for the time, each verified
/// (the JSON's `timed.time_s`); the cold read, the far-disk rungs and the whole copy are one
/// pass of it, saved and measured as in a sized ladder; the table's first line says which.
#[test]
fn a_timed_ladder_times_the_rungs_that_can_repeat_the_file() {
    let save = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let server = Server::start(&["--save", save.path().to_str().unwrap()]);
    let (out, v) = client_json(server.port, &["--ladder", "-t", "0.3", "--bytes", "2MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for r in v["rungs"].as_array().unwrap() {
        let name = r["rung"].as_str().unwrap();
        if r["status"] == "skipped" {
            // Cold reads of a file on tmpfs, kernel TLS where the kernel has none.
            assert!(name.contains("cold") || name.contains("kernel TLS"), "{r}");
            continue;
        }
        assert_eq!(r["status"], "ran", "{name}: {r}");
        assert_eq!(r["run"]["verified"], true, "{name}");
        let repeats = !(name.contains("cold") || name.contains("far disk"));
        match repeats {
            true => assert_eq!(r["run"]["timed"]["time_s"], 0.3, "{name}: {r}"),
            false => {
                assert!(r["run"].get("timed").is_none(), "{name}: {r}");
                assert_eq!(r["run"]["bytes"], 2 << 20, "{name}: one pass");
            }
        }
    }
    let out = client(&[
        "--port",
        &server.port.to_string(),
        "--ladder",
        "-t",
        "0.3",
        "--bytes",
        "2MiB",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("for 0.3 s each (cold and far disk: one pass)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read_dir(save.path()).unwrap().count(),
        0,
        "nothing kept"
    );
}
