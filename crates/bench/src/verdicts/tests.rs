//! The truth table's records and how they render.

use super::*;

/// A committed stream result, its verdict, rate and shares set.
fn run(case: &str, place: &str, expect: &str, by: &str, rate: f64) -> Run {
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/verdicts.jsonl");
    let mut stream = read(Path::new(committed))
        .unwrap()
        .into_iter()
        .find_map(|r| match r.result {
            Some(ClientOutput::Result(ClientJson::Stream(s))) => Some(s),
            _ => None,
        })
        .unwrap();
    stream.limited_by = serde_json::from_value(serde_json::Value::from(by)).ok();
    stream.mib_per_s = rate;
    stream.limits = Limits {
        rwnd_limited_pct: Some(0.0),
        sndbuf_limited_pct: Some(0.0),
        busy_pct: Some(99.0),
        client_cpu_pct: 98.0,
        retransmits: Some(0),
        ..Limits::default()
    };
    Run {
        case: case.into(),
        place: place.into(),
        made: "made | so".into(),
        expect: expect.into(),
        rep: 1,
        skipped: None,
        result: Some(ClientOutput::Result(ClientJson::Stream(stream))),
        error: None,
    }
}

/// Every committed run reads typed, and writing the runs back reads the same.
#[test]
fn committed_runs_read_typed_and_write_back() {
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/verdicts.jsonl");
    let runs = read(Path::new(committed)).unwrap();
    assert!(runs.iter().filter(|r| r.verified()).count() > 20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verdicts.jsonl");
    write(&path, &runs).unwrap();
    let again = read(&path).unwrap();
    assert_eq!(
        serde_json::to_value(&runs).unwrap(),
        serde_json::to_value(&again).unwrap()
    );
}

#[test]
fn the_table_says_which_cases_were_right() {
    let runs = vec![
        run(
            "loopback",
            "loopback",
            "sender-cpu|shared-cpu",
            "sender-cpu",
            2000.0,
        ),
        run(
            "loopback",
            "loopback",
            "sender-cpu|shared-cpu",
            "shared-cpu",
            1800.0,
        ),
        run(
            "server-quota",
            "loopback",
            "receiver-cpu",
            "receiver-cpu",
            300.0,
        ),
        run("server-quota", "loopback", "receiver-cpu", "unknown", 280.0),
    ];
    let mut runs = runs;
    runs.push(Run::skipped("lan-sndbuf-bdp", "needs netem"));
    let md = render(&runs, &Machine::default());
    assert!(md.contains("**1 of 2 cases named rightly"), "{md}");
    assert!(
        md.ends_with("## Not made on this machine\n\n- **lan-sndbuf-bdp**: needs netem\n"),
        "{md}"
    );
    assert!(
        md.contains("| loopback | loopback | made \\| so | sender-cpu or shared-cpu | sender-cpu ×1, shared-cpu ×1 | 1900.0 | 100% | yes |"),
        "{md}"
    );
    assert!(
        md.contains("receiver-cpu ×1, unknown ×1 | 290.0 | 15% | **no** |"),
        "{md}"
    );
    assert!(
        md.contains("- **loopback**: limited by the sender's CPU"),
        "{md}"
    );
}

#[test]
fn a_bad_line_is_named() {
    let dir = std::env::temp_dir().join(format!("tsperf-verdicts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("verdicts.jsonl");
    std::fs::write(&path, "{\"case\":\"a\"}\n").unwrap();
    let e = format!("{:#}", read(&path).unwrap_err());
    assert!(e.contains("line 1: not a verdicts.sh run"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
/// A ladder run whose closing line names `stage`.
fn ladder_run(case: &str, stage: &str, copy: f64) -> Run {
    use tsperf_results::json::{LadderJson, RungJson, StageCost};
    let rung = RungJson {
        rung: "cold → TLS aes128gcm → durable far disk".into(),
        base: Some("memory → memory".into()),
        status: "ran".into(),
        reason: None,
        mib_per_s: Some(copy),
        drop_x: None,
        drop_mib_per_s: None,
        client_cpu_s_per_gib: None,
        server_cpu_s_per_gib: None,
        limited_by: None,
        run: None,
    };
    let case = cases::case(case).unwrap();
    Run::made(
        case,
        1,
        Ok(ClientOutput::Result(ClientJson::Ladder(LadderJson {
            tsperf: "0".into(),
            file: "f".into(),
            bytes: 1,
            rungs: vec![rung],
            costs: vec![StageCost {
                stage: stage.into(),
                s_per_gib: 1.0,
            }],
            costliest: Some(format!(
                "the copy runs at {copy} MiB/s: {stage} costs it most"
            )),
            verified: true,
            runs: Vec::new(),
        }))),
    )
}

/// The ladder's cases get their own table: right when the closing line names the stage made
/// slow; the copy's rate; each case's closing line.
#[test]
fn the_ladders_table_says_which_stage_was_named() {
    let runs = vec![
        ladder_run("ladder-slow-source", "the source disk", 5.5),
        ladder_run("ladder-slow-save", "the network", 4.0),
    ];
    assert!(runs[0].right() && !runs[1].right());
    let md = render(&runs, &Machine::default());
    assert!(md.contains("**1 of 2 ladder cases named rightly"), "{md}");
    assert!(
        md.contains("| the source disk | the source disk ×1 | 5.5 | yes |"),
        "{md}"
    );
    assert!(
        md.contains("| the far disk | the network ×1 | 4.0 | **no** |"),
        "{md}"
    );
    assert!(
        md.contains("- **ladder-slow-source**: the copy runs at 5.5 MiB/s: the source disk"),
        "{md}"
    );
    assert!(md.contains("**0 of 0 cases named rightly"), "{md}");
}
