//! A fixed matrix input for the exporters' snapshot tests.

use super::*;
use tsperf_results::intervals::Interval;
use tsperf_results::json::{ClientJson, Cpu, LatencyJson, Rtt, StreamJson, UnderLoadJson};
use tsperf_results::machine::Machine;
use tsperf_results::verdict::LimitedBy;

pub(crate) fn runs() -> Vec<Run> {
    let mut runs = stream_runs();
    runs.extend(latency_runs());
    runs
}

/// Three repetitions of every stream cell: two chunks, two client models, two sinks.
fn stream_runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for (chunk, base) in [(102u32, 80.0), (10240, 900.0)] {
        for (io, f) in [("blocking", 1.0), ("nonblocking", 0.95)] {
            for (log, g) in [("none", 1.0), ("stdout", 0.1)] {
                for rep in 1..=3 {
                    let mib = base * f * g + rep as f64;
                    let mut s = StreamJson {
                        mib_per_s: mib,
                        gbit_per_s: mib * 0.008388608,
                        verified: true,
                        cpu: Cpu {
                            user_s: 0.01,
                            sys_s: 0.1,
                        },
                        ..Default::default()
                    };
                    s.client.sender.sndbuf = 2626560;
                    s.server.receiver.rcvbuf = 131072;
                    // Stdout cells are the receiver's doing; one 102-byte none rep is
                    // called another way than the others.
                    s.limited_by = Some(match (log, chunk, rep) {
                        ("stdout", ..) => LimitedBy::Receiver,
                        (_, 102, 3) => LimitedBy::Network,
                        _ => LimitedBy::SenderCpu,
                    });
                    s.server.time_split.largest =
                        Some(if log == "stdout" { "log" } else { "wait" }.into());
                    s.server.time_split.largest_pct = Some(90.0 + rep as f64);
                    if rep == 2 {
                        let secs = if log == "stdout" { 2.0 } else { 0.2 };
                        s.intervals = (0..4)
                            .map(|i| Interval {
                                start_s: secs * i as f64 / 4.0,
                                end_s: secs * (i + 1) as f64 / 4.0,
                                mib_per_s: if i == 2 { mib / 4.0 } else { mib },
                                ..Interval::default()
                            })
                            .collect();
                    }
                    runs.push(Run {
                        cell: Cell::Stream {
                            chunk,
                            io: io.into(),
                            log: log.into(),
                        },
                        rep,
                        result: ClientJson::Stream(s),
                    });
                }
            }
        }
    }
    runs
}

/// Two idle latency cells (one that stalls on Nagle) and one under load.
fn latency_runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for (framing, nodelay, p50) in [("single", true, 110.0), ("split", false, 88000.0)] {
        runs.push(Run {
            cell: Cell::Latency {
                codec: "binary".into(),
                framing: framing.into(),
                nodelay,
                reconnect: false,
                count: 20,
                under_load: None,
            },
            rep: 1,
            result: ClientJson::Latency(LatencyJson {
                rtt_us: Some(Rtt {
                    p50,
                    p99: p50 * 1.5,
                    ..Default::default()
                }),
                hint: (!nodelay).then(|| "Nagle".to_owned()),
                ..Default::default()
            }),
        });
    }
    runs.push(Run {
        cell: Cell::Latency {
            codec: "binary".into(),
            framing: "single".into(),
            nodelay: true,
            reconnect: false,
            count: 20,
            under_load: Some("stdout".into()),
        },
        rep: 1,
        result: ClientJson::Latency(LatencyJson {
            rtt_us: Some(Rtt {
                p50: 100.0,
                p99: 150.0,
                ..Default::default()
            }),
            under_load: Some(UnderLoadJson {
                count: 17,
                rtt_us: Some(Rtt {
                    p50: 400.0,
                    p99: 2000.0,
                    ..Default::default()
                }),
                stream_limited_by: Some(LimitedBy::Receiver),
                ..Default::default()
            }),
            ..Default::default()
        }),
    });
    runs
}

pub(crate) fn matrix() -> Matrix {
    let setup = Setup {
        machine: Machine {
            cpu: "Test CPU".into(),
            cores: 2,
            kernel: "6.1.0".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
            tsperf: "0.1.0".into(),
            commit: "0123abc".into(),
            tcp_rmem: "4096 131072 6291456".into(),
            tcp_wmem: "4096 16384 4194304".into(),
            rmem_max: "212992".into(),
            wmem_max: "212992".into(),
            congestion_control: "cubic".into(),
        },
        file: "tsl.txt".into(),
        bytes: 37748736,
        digest: "ec40a45bcc9c239d".into(),
        server_stdout: None,
        reps: 3,
        network: "loopback".into(),
        stdout_to: "a pty read by tmux".into(),
        date: "2026-11-29T00:00:00Z".into(),
        line_gbit: None,
    };
    aggregate(setup, &runs())
}
