//! The verdict's evidence of a stream in both directions, from fixed figures: what each end
//! measured lands in the same place whichever end sent (the sender's CPU, scheduler figures,
//! `TCP_INFO`, send buffer and write size; the receiver's time, CPU, log and disk).

use std::time::Duration;

use super::outcome::{Detail, Forward, Reverse, StreamOutcome};
use super::*;
use tsperf_proto::end::End;
use tsperf_proto::sent::Sent;
use tsperf_proto::tcp::{Flight, SenderTcp};
use tsperf_proto::{Report, StdoutKind};
use tsperf_results::verdict::{Evidence, ServerTime};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn sender_tcp() -> SenderTcp {
    SenderTcp {
        busy_time_us: Some(900_000),
        rwnd_limited_us: Some(1_000),
        snd_cwnd: Some(10),
        ..SenderTcp::default()
    }
}

fn flight() -> Flight {
    Flight {
        samples: 7,
        cwnd_full: 3,
        ..Flight::default()
    }
}

fn measured() -> Measured {
    Measured {
        bytes: 1 << 30,
        elapsed: ms(1000),
        begin_unix_us: 1_000_000,
        end_unix_us: 2_000_000,
        digest: 0xabc,
        timed: None,
        intervals: Vec::new(),
    }
}

fn peer() -> SocketAddr {
    "198.18.0.2:7433".parse().unwrap()
}

/// A sending server's Sent frame.
fn sent() -> Sent {
    Sent {
        bytes: 1 << 30,
        writes: 1 << 20,
        partial_writes: 0,
        would_block: 0,
        first_write_unix_us: 999_000,
        elapsed_ns: 990_000_000,
        cpu_user_us: 30_000,
        cpu_sys_us: 600_000,
        on_cpu_ns: Some(620_000_000),
        run_queue_ns: Some(5_000_000),
        source_read_ns: 0,
        chunk: 1024,
        sndbuf: 2 << 20,
        server_io: tsperf_proto::ServerIo::EventLoop,
        boot_id: None,
        tcp: sender_tcp(),
        flight: flight(),
        congestion: None,
    }
}

fn report() -> Report {
    let mut split = tsperf_proto::TimeSplit::default();
    split.add(tsperf_proto::TimePhase::Read, 700_000_000);
    split.add(tsperf_proto::TimePhase::Log, 200_000_000);
    split.add(tsperf_proto::TimePhase::Save, 50_000_000);
    split.add(tsperf_proto::TimePhase::Fsync, 30_000_000);
    Report {
        bytes: 1 << 30,
        digest: 0xabc,
        cpu_user_us: 20_000,
        cpu_sys_us: 500_000,
        run_queue_ns: Some(9_000_000),
        split,
        ..Report::default()
    }
}

/// A forward stream as `transfer` makes it: the client's own sending, the server's report.
pub(crate) fn forward(strategy: Strategy, batch: Option<u32>, report: Report) -> StreamOutcome {
    StreamOutcome {
        name: "f".into(),
        measured: measured(),
        sender: Sent {
            cpu_user_us: 100_000,
            cpu_sys_us: 300_000,
            on_cpu_ns: Some(390_000_000),
            run_queue_ns: Some(12_000_000),
            sndbuf: 4 << 20,
            source_read_ns: 40_000_000,
            elapsed_ns: 950_000_000,
            ..sent()
        },
        far: End {
            length: report.bytes,
            digest: report.digest,
        },
        chunk: 1024,
        io: ClientIo::Blocking,
        peer: peer(),
        boot_id: None,
        clock: None,
        interrupted: false,
        tls: None,
        pace: None,
        detail: Detail::Sent(Box::new(Forward {
            strategy,
            batch,
            server_stdout: StdoutKind::Pipe,
            source_read_before: ms(1),
            polls: 0,
            interface: Some(("eth0".into(), Some(1000))),
            source_changed: false,
            cold: None,
        })),
        receiver: report,
    }
}

/// A receiving client's own report, as its engine makes it: its reads, its thread's CPU and
/// scheduler figures, its log, its time split from the first byte (a little short of the
/// stream's elapsed time, which runs to the end of the stream's reading).
fn client_report() -> Report {
    let mut split = tsperf_proto::TimeSplit::default();
    split.add(tsperf_proto::TimePhase::Read, 880_000_000);
    split.add(tsperf_proto::TimePhase::Log, 80_000_000);
    split.add(tsperf_proto::TimePhase::Wait, 35_000_000);
    Report {
        bytes: 1 << 30,
        digest: 0xabc,
        reads: 4096,
        read_size: 1 << 18,
        cpu_user_us: 50_000,
        cpu_sys_us: 250_000,
        on_cpu_ns: Some(299_000_000),
        run_queue_ns: Some(3_000_000),
        log: Some(tsperf_proto::LogMode::File),
        log_lines: 4096,
        rcvbuf: 6 << 20,
        split,
        ..Report::default()
    }
}

/// A reverse stream as `reverse` makes it: the server's Sent frame, the client's receiving.
pub(crate) fn reverse() -> StreamOutcome {
    let sent = sent();
    StreamOutcome {
        name: String::new(),
        measured: measured(),
        sender: sent,
        receiver: client_report(),
        far: End {
            length: 1 << 30,
            digest: 0xabc,
        },
        chunk: 1024,
        io: ClientIo::Nonblocking,
        peer: peer(),
        boot_id: None,
        clock: None,
        interrupted: false,
        tls: None,
        pace: None,
        detail: Detail::Received(Reverse {
            asked: 1 << 30,
            one_buffer: false,
            strategy: None,
            batch: None,
            wake_mark: 1,
        }),
    }
}

/// A forward stream: the client sends, the server's report is the receiver's time.
#[test]
fn a_forward_streams_evidence_is_the_clients_sending_and_the_servers_receiving() {
    assert_eq!(
        forward(Strategy::Writev, Some(8), report()).evidence(),
        Evidence {
            tcp: sender_tcp(),
            flight: flight(),
            elapsed: ms(1000),
            client_cpu: ms(400),
            sender_on_cpu: Some(ms(390)),
            sender_run_queue: Some(ms(12)),
            source_read: Some(ms(40)),
            sndbuf: 4 << 20,
            write_size: 8 * 1024,
            bytes: 1 << 30,
            line_mbit: Some(1000),
            same_host: false,
            cpus: tsperf_sys::host::cpus(),
            server: Some(ServerTime {
                total: ms(980),
                cpu: ms(520),
                run_queue: Some(ms(9)),
                log: ms(200),
                disk: ms(80),
            }),
            sender_span: None,
            reverse: false,
            pace: None,
        }
    );
    let e = forward(Strategy::Sendfile, None, report()).evidence();
    assert_eq!(
        (e.source_read, e.write_size),
        (None, 1024),
        "sendfile waits for no read"
    );
    let unsplit = forward(Strategy::Write, None, Report::default());
    assert_eq!(
        unsplit.evidence().server,
        None,
        "a report without a time split"
    );
}

/// A reverse stream: the server's Sent frame is the sender's, the client's own report the
/// receiver's time (its time split, its thread's CPU, its log). Until the client's receiving
/// figures became a report (protocol 13), the receiver's total was the stream's elapsed time
/// (1000 ms here) and its log time the log's own clock; now both ends' receivers are judged
/// on their time split alike (995 ms).
#[test]
fn a_reverse_streams_evidence_is_the_servers_sending_and_the_clients_receiving() {
    assert_eq!(
        reverse().evidence(),
        Evidence {
            tcp: sender_tcp(),
            flight: flight(),
            elapsed: ms(1000),
            client_cpu: ms(630),
            sender_on_cpu: Some(ms(620)),
            sender_run_queue: Some(ms(5)),
            source_read: None,
            sndbuf: 2 << 20,
            write_size: 1024,
            bytes: 1 << 30,
            line_mbit: None,
            same_host: false,
            cpus: tsperf_sys::host::cpus(),
            server: Some(ServerTime {
                total: ms(995),
                cpu: ms(300),
                run_queue: Some(ms(3)),
                log: ms(80),
                disk: Duration::ZERO,
            }),
            sender_span: Some(ms(990)),
            reverse: true,
            pace: None,
        }
    );
}
