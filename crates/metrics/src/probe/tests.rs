use super::*;
use tsperf_results::json::{Cpu, FailureJson, StreamJson};
use tsperf_results::verdict::LimitedBy;

fn stream() -> StreamJson {
    let mut s = StreamJson {
        bytes: 1 << 30,
        elapsed_s: 2.0,
        mib_per_s: 512.0,
        verified: true,
        cpu: Cpu {
            user_s: 0.1,
            sys_s: 0.4,
        },
        limited_by: Some(LimitedBy::Network),
        ..StreamJson::default()
    };
    s.server.bytes = 1 << 30;
    s.server.cpu.sys_s = 0.25;
    s.tcp.client.total_retrans = Some(3);
    s.tcp.client.rtt_us = Some(250);
    s
}

fn has(page: &str, line: &str) {
    assert!(
        page.lines().any(|l| l == line),
        "{line} missing from\n{page}"
    );
}

/// A verified stream's figures, each in its unit: bytes a second, seconds, CPU a GiB.
#[test]
fn a_verified_stream() {
    let out = ClientOutput::Result(ClientJson::Stream(stream()));
    let page = render(&Probe {
        figures: Some(Figures::of(&out)),
        duration: Duration::from_millis(2500),
        failure: None,
    });
    for line in [
        "tsperf_probe_success 1",
        "tsperf_probe_duration_seconds 2.5",
        "tsperf_verified 1",
        "tsperf_transfer_bytes 1073741824",
        "tsperf_rate_bytes_per_second 536870912",
        "tsperf_retransmits 3",
        "tsperf_rtt_seconds 0.00025",
        "tsperf_cpu_seconds_per_gibibyte{end=\"client\"} 0.5",
        "tsperf_cpu_seconds_per_gibibyte{end=\"server\"} 0.25",
        "tsperf_limited_by{stage=\"network\"} 1",
        "tsperf_run_info{mode=\"stream\"} 1",
    ] {
        has(&page, line);
    }
    assert!(!page.contains("tsperf_probe_failed"), "{page}");
    assert!(!page.contains("latency"), "{page}");
}

/// A failure keeps what was measured, says its kind in a label and its words in a comment.
#[test]
fn a_cut_short_probe_keeps_what_it_measured() {
    let mut s = stream();
    s.verified = false;
    let page = render(&Probe {
        figures: Some(Figures::of(&ClientOutput::Result(ClientJson::Stream(s)))),
        duration: Duration::from_secs(9),
        failure: Some(Failure {
            kind: "timeout",
            reason: "cut off at the scrape's 9.5 s\nsecond line".into(),
        }),
    });
    has(&page, "# tsperf: timeout: cut off at the scrape's 9.5 s");
    has(&page, "# tsperf: timeout: second line");
    has(&page, "tsperf_probe_success 0");
    has(&page, "tsperf_probe_failed{kind=\"timeout\"} 1");
    has(&page, "tsperf_verified 0");
    has(&page, "tsperf_transfer_bytes 1073741824");
}

/// A run that measured nothing has the probe's own lines only.
#[test]
fn a_failure_before_any_data() {
    let out = ClientOutput::Failed(FailureJson {
        tsperf: "0".into(),
        mode: "stream".into(),
        error: "cannot connect".into(),
        usage: false,
        interrupted: false,
    });
    let f = Figures::of(&out);
    assert_eq!(f.error.as_deref(), Some("cannot connect"));
    assert_eq!(f.bytes, None);
    let page = render(&Probe {
        figures: Some(f),
        duration: Duration::from_millis(3),
        failure: Some(Failure {
            kind: "connect",
            reason: "cannot connect".into(),
        }),
    });
    assert!(!page.contains("tsperf_transfer_bytes"), "{page}");
    has(&page, "tsperf_verified 0");
}

/// Every committed run reads into figures with a rate (or a latency run's percentiles).
#[test]
fn committed_runs_give_figures() {
    let mut seen = 0;
    for dir in ["results", "results/lan", "results/streams-grid"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir)
            .join("runs.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let run: tsperf_results::runs::Run = serde_json::from_str(line).unwrap();
            let f = Figures::of(&ClientOutput::Result(run.result));
            match f.mode.as_str() {
                "latency" => assert!(f.latency_p50_s.is_some(), "{dir}: {f:?}"),
                "ladder" => {}
                _ => assert!(
                    f.verified && f.rate_bytes_per_s.unwrap() > 0.0,
                    "{dir}: {f:?}"
                ),
            }
            seen += 1;
        }
    }
    assert!(seen > 60, "{seen} runs");
}
