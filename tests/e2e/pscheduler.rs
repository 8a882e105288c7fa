//! The perfSONAR pScheduler tool plugin (packaging/pscheduler/tsperf/): each of its six
//! executables fed the JSON pScheduler sends, its answer's fields and exit code checked; a
//! two-participant throughput test run for real (participant 1 serves once, participant 0
//! measures) and merged. Skipped, saying so, where python3 is missing (`.ci/run` installs it).

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

const PLUGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/pscheduler/tsperf");

/// Runs method `name` with `input` on stdin: its exit code and stdout (JSON where it is 0).
fn method(name: &str, input: &str) -> (i32, String, String) {
    let mut child = Command::new(format!("{PLUGIN}/{name}"))
        .env("TSPERF_BIN_DIR", bin("tsclient").parent().unwrap())
        .env("TSPERF_PSCHEDULER_DELAY", "0.3")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn answer(name: &str, input: Value) -> Value {
    let (code, out, err) = method(name, &input.to_string());
    assert_eq!(code, 0, "{name}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out}"))
}

fn python() -> bool {
    let ok = Command::new("python3").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: python3 is not installed");
    }
    ok
}

/// enumerate, can-run, duration and participant-data answer as the interface asks; what tsperf
/// cannot do is refused with the reason; bad input is exit 1 naming it.
#[test]
fn the_plugin_describes_itself_and_what_it_can_run() {
    if !python() {
        return;
    }
    let e = answer("enumerate", json!({}));
    assert_eq!(
        (e["name"].as_str(), e["schema"].as_i64()),
        (Some("tsperf"), Some(1))
    );
    assert_eq!(e["tests"], json!(["throughput", "disk-to-disk"]));
    let can = |spec: Value| answer("can-run", json!({"type": "throughput", "spec": spec}));
    assert_eq!(
        can(json!({"dest": "h", "duration": "PT5S", "parallel": 4}))["can-run"],
        true
    );
    // The far end paces what it sends as asked (protocol 15).
    let paced = can(json!({"dest": "h", "bandwidth": 1000000, "reverse": true}));
    assert_eq!(paced["can-run"], true, "{paced}");
    for (spec, says) in [
        (json!({"udp": true}), "TCP only"),
        (json!({"parallel": 500}), "1 to 128 streams"),
        (json!({"duration": "ten seconds"}), "ISO 8601"),
        (json!({"dscp": 46}), "DSCP"),
    ] {
        let c = can(spec.clone());
        assert_eq!(c["can-run"], false, "{spec}");
        assert!(c["reasons"].to_string().contains(says), "{spec}: {c}");
    }
    let other = answer("can-run", json!({"type": "latency", "spec": {}}));
    assert_eq!(other["can-run"], false);
    let d = answer("duration", json!({"duration": "PT10S", "omit": "PT2S"}));
    assert_eq!(d["duration"], "PT17S");
    assert_eq!(
        answer("participant-data", json!({"participant": 0})),
        json!({})
    );
    assert!(answer("participant-data", json!({"participant": 1}))["port"].is_u64());
    let (code, _, err) = method("run", "not json");
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("tsperf run:"), "{err}");
    let (code, _, err) = method("merged-results", "{\"results\": []}");
    assert_eq!(
        (code, err.trim()),
        (1, "tsperf merged-results: no results to merge")
    );
}

/// A two-participant test run for real: participant 1's tsserver --once on the port of its
/// participant data, participant 0's tsclient timed with omit, interval and two streams; the
/// result has the throughput schema's fields, every byte verified, and merges to itself.
#[test]
fn a_throughput_test_runs_and_merges() {
    if !python() {
        return;
    }
    let port = dead_port();
    let spec = json!({
        "dest": "127.0.0.1", "duration": "PT2S", "omit": "PT1S", "interval": "PT1S",
        "parallel": 2,
    });
    let input = |participant: u32| {
        json!({
            "schema": 1, "participant": participant,
            "participant-data": [{}, {"port": port}],
            "test": {"type": "throughput", "spec": spec},
        })
    };
    let first = input(1);
    let serving = std::thread::spawn(move || answer("run", first));
    let r0 = answer("run", input(0));
    let r1 = serving.join().unwrap();
    assert_eq!(r1["succeeded"], true, "{r1}");
    assert_eq!(r0["succeeded"], true, "{r0}");
    let result = &r0["result"];
    let intervals = result["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 3, "{result}");
    assert_eq!(intervals[0]["summary"]["omitted"], true, "{result}");
    assert_eq!(intervals.last().unwrap()["summary"]["omitted"], false);
    for stream in intervals[1]["streams"].as_array().unwrap() {
        for field in [
            "stream-id",
            "start",
            "end",
            "throughput-bits",
            "retransmits",
            "rtt",
        ] {
            assert!(stream.get(field).is_some(), "no {field}: {stream}");
        }
    }
    assert_eq!(intervals[1]["streams"].as_array().unwrap().len(), 2);
    let summary = &result["summary"]["summary"];
    assert!(
        summary["throughput-bits"].as_f64().unwrap() > 0.0,
        "{result}"
    );
    assert_eq!(result["summary"]["streams"].as_array().unwrap().len(), 2);
    let merged = answer("merged-results", json!({"results": [r0, r1]}));
    assert_eq!(merged["succeeded"], true);
    assert_eq!(merged["summary"], result["summary"]);
}

/// A disk-to-disk test: a file the far tsserver serves (`tsperf://HOST:PORT/NAME`) copied to
/// dest whole, verified, with the result's time, bytes-sent and throughput (bits a second); a
/// source of another scheme or a parallel copy is refused with the reason.
#[test]
fn a_disk_to_disk_copy_is_saved_whole() {
    if !python() {
        return;
    }
    let served = tempfile::tempdir().unwrap();
    let file = test_file(served.path(), "big.txt", 3 << 20);
    let server = Server::start(&["--serve", served.path().to_str().unwrap()]);
    let into = tempfile::tempdir().unwrap();
    let dest = into.path().join("copy.txt");
    let spec = json!({
        "source": format!("tsperf://127.0.0.1:{}/big.txt", server.port),
        "dest": dest.to_str().unwrap(),
    });
    let can = answer("can-run", json!({"type": "disk-to-disk", "spec": spec}));
    assert_eq!(can["can-run"], true, "{can}");
    let r = answer(
        "run",
        json!({"test": {"type": "disk-to-disk", "spec": spec}}),
    );
    assert_eq!(r["succeeded"], true, "{r}");
    let result = &r["result"];
    assert_eq!(
        result["bytes-sent"],
        json!(f64::from(3u32 << 20)),
        "{result}"
    );
    assert!(result["throughput"].as_f64().unwrap() > 0.0, "{result}");
    assert!(
        result["time"].as_str().unwrap().starts_with("PT"),
        "{result}"
    );
    assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(&file).unwrap());
    let bad = answer(
        "can-run",
        json!({"type": "disk-to-disk", "spec": {"source": "http://h/f", "dest": "/tmp", "parallel": 2}}),
    );
    assert_eq!(bad["can-run"], false);
    let why = bad["reasons"].to_string();
    assert!(
        why.contains("expected tsperf://HOST[:PORT]/NAME") && why.contains("one stream"),
        "{why}"
    );
}
