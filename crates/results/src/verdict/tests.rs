use super::*;

const MS: Duration = Duration::from_millis(1);

fn tcp(busy_ms: u64, rwnd_ms: u64, sndbuf_ms: u64) -> SenderTcp {
    SenderTcp {
        busy_time_us: Some(busy_ms * 1000),
        rwnd_limited_us: Some(rwnd_ms * 1000),
        sndbuf_limited_us: Some(sndbuf_ms * 1000),
        total_retrans: Some(0),
        min_rtt_us: Some(50),
        ..SenderTcp::default()
    }
}

/// Flight readings: `notsent` and `cwnd_full` of 10, `in_flight` bytes against a 4 MiB buffer.
fn flight(notsent: u64, cwnd_full: u64, in_flight: u64) -> Flight {
    Flight {
        samples: 10,
        notsent,
        cwnd_full,
        in_flight_bytes_sum: in_flight * 10,
        notsent_bytes_sum: notsent * 1_000_000,
        rtt_us_sum: 10 * 60,
        sndbuf_sum: 10 * (4 << 20),
    }
}

/// A 1000 ms transfer: sender `cpu`/`queue` ms of its thread, server `s_cpu`/`s_queue` ms of
/// 1000, nothing else; 100 MB sent in 10240-byte writes with a 4 MiB buffer.
fn base(cpu: u64, queue: u64, s_cpu: u64, s_queue: u64) -> Evidence {
    Evidence {
        tcp: tcp(950, 0, 0),
        flight: flight(0, 0, 100_000),
        elapsed: MS * 1000,
        client_cpu: MS * cpu as u32,
        sender_on_cpu: Some(MS * cpu as u32),
        sender_run_queue: Some(MS * queue as u32),
        source_read: Some(Duration::ZERO),
        sndbuf: 4 << 20,
        write_size: 10240,
        bytes: 100_000_000,
        line_mbit: None,
        same_host: false,
        cpus: 2,
        server: Some(ServerTime {
            total: MS * 990,
            cpu: MS * s_cpu as u32,
            run_queue: Some(MS * s_queue as u32),
            log: Duration::ZERO,
            disk: Duration::ZERO,
        }),
        sender_span: None,
        reverse: false,
        pace: None,
    }
}

fn by(e: Evidence) -> LimitedBy {
    judge(&e).limited_by
}

#[test]
fn a_slow_log_or_disk_at_the_server() {
    let mut e = base(100, 0, 600, 0);
    e.server.as_mut().unwrap().log = MS * 700;
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::ReceiverLog);
    assert!(
        v.sentence().contains("71% of its time writing"),
        "{}",
        v.sentence()
    );
    let mut e = base(100, 0, 100, 0);
    e.server.as_mut().unwrap().disk = MS * 800;
    assert_eq!(by(e), LimitedBy::ReceiverDisk);
}

#[test]
fn a_slow_source_file() {
    let mut e = base(100, 0, 50, 0);
    e.source_read = Some(MS * 800);
    assert_eq!(by(e), LimitedBy::SenderSource);
}

/// A quota shows as waiting for a CPU; the end that waits names itself.
#[test]
fn cpu_quota_on_either_end() {
    let v = judge(&base(200, 10, 100, 850));
    assert_eq!(v.limited_by, LimitedBy::ReceiverCpu);
    assert!(v.sentence().contains("a CPU quota"), "{}", v.sentence());
    assert_eq!(by(base(100, 850, 100, 10)), LimitedBy::SenderCpu);
    // A server busy 94% of its time, 42% of it writing its log: the log keeps it busy.
    let mut e = base(300, 0, 620, 310);
    e.server.as_mut().unwrap().log = MS * 420;
    assert_eq!(by(e), LimitedBy::ReceiverLog);
    // A throttled server busy only 71% of its time, 61% of it waiting for a CPU, while the
    // client waits on its socket with bytes unsent: the server's CPU, not the path.
    let mut e = base(340, 0, 100, 600);
    e.flight = flight(9, 4, 200_000);
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
    // Under other load the same quota: the server on a CPU 17%, waiting for one 47%, the client
    // waiting on its socket 78% with bytes unsent and the window open: still the server.
    let mut e = base(105, 115, 170, 465);
    e.flight = flight(7, 3, 200_000);
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
    // Both busy (one machine, two threads on one CPU): the busier end.
    assert_eq!(by(base(700, 290, 500, 400)), LimitedBy::SenderCpu);
    // A server before version 6 (no run queue) is judged on its CPU alone.
    let mut e = base(300, 0, 950, 0);
    e.server.as_mut().unwrap().run_queue = None;
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
}

#[test]
fn a_full_window_names_the_servers_largest_share() {
    let mut e = base(100, 0, 100, 0);
    e.tcp = tcp(950, 800, 0);
    assert_eq!(
        by(e),
        LimitedBy::Receiver,
        "nothing at the server shows why"
    );
    // The log at 30% with the window full: the log, though short of LOG_SHARE.
    e.server.as_mut().unwrap().log = MS * 300;
    assert_eq!(by(e), LimitedBy::ReceiverLog);
    // A log of 32% names the log though the CPU took 35% (its reader competes for the CPUs);
    // a log of 21% does not, and the CPU (on one 15%, waiting for one 52%) is named.
    let mut e = base(260, 0, 50, 300);
    e.tcp = tcp(950, 990, 0);
    e.server.as_mut().unwrap().log = MS * 320;
    assert_eq!(by(e), LimitedBy::ReceiverLog);
    let mut e = base(260, 0, 150, 515);
    e.tcp = tcp(950, 990, 0);
    e.server.as_mut().unwrap().log = MS * 210;
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
}

#[test]
fn a_send_buffer_below_one_write_or_all_in_flight() {
    let mut e = base(50, 0, 50, 0);
    e.sndbuf = 4608;
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::SenderBuffer);
    assert!(
        v.sentence().contains("smaller than one write"),
        "{}",
        v.sentence()
    );
    // Large enough for a write, but nothing ever waited unsent: the buffer bounds the flight.
    let mut e = base(50, 0, 50, 0);
    e.sndbuf = 8192;
    assert_eq!(by(e), LimitedBy::SenderBuffer);
    // Below one write it is named even with both ends busy on one machine.
    let mut e = base(320, 290, 690, 410);
    e.same_host = true;
    e.sndbuf = 4608;
    assert_eq!(by(e), LimitedBy::SenderBuffer);
    // The kernel's own count, where it keeps one.
    let mut e = base(50, 0, 50, 0);
    e.tcp = tcp(950, 0, 700);
    e.flight = flight(9, 0, 100_000);
    assert_eq!(by(e), LimitedBy::SenderBuffer);
}

#[test]
fn the_network_only_with_evidence() {
    // Both ends waiting, bytes queued unsent: the path held them.
    let mut e = base(50, 0, 50, 0);
    e.flight = flight(9, 0, 200_000);
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Network);
    assert!(
        v.sentence().contains("unsent in the send buffer in 90%"),
        "{}",
        v.sentence()
    );
    // At the line's rate (800 Mbit/s of a 1000 Mbit/s interface).
    let mut e = base(50, 0, 50, 0);
    e.flight = flight(0, 0, 200_000);
    e.line_mbit = Some(1000);
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Network);
    assert!(
        v.shares().contains("; 80% of the interface's 1000 Mbit/s"),
        "{}",
        v.shares()
    );
    // Both ends waiting and no reading: nothing shows the path, so unknown, not network.
    let mut e = base(50, 0, 50, 0);
    e.flight = Flight::default();
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Unknown);
    assert!(
        v.sentence().contains("nothing shows the path"),
        "{}",
        v.sentence()
    );
    // The server busy 60% of its time (logging, say) but its window never full: it kept up,
    // and the bytes queued unsent at the sender were the path's to carry.
    let mut e = base(50, 0, 600, 0);
    e.flight = flight(9, 0, 200_000);
    assert_eq!(by(e), LimitedBy::Network);
    // The same with the window full: the receiver, by its CPU.
    e.tcp = tcp(950, 900, 0);
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
    // The client not waiting on its socket: whatever else, not the network.
    let mut e = base(450, 100, 50, 0);
    e.flight = flight(9, 0, 200_000);
    assert_eq!(by(e), LimitedBy::Unknown);
}

/// A sender paced (`-b`) whose rate reached the pace was limited by what was asked, not by the
/// path its queued bytes show (the pace queues them); one that fell short of it is judged as
/// any other run, and an unpaced run's shares say nothing of a pace.
#[test]
fn a_pace_reached_is_the_limit_asked_for() {
    // 100 MB in a second: 800 Mbit/s, paced to 800, bytes queued unsent.
    let mut e = base(50, 0, 50, 0);
    e.flight = flight(9, 0, 200_000);
    e.pace = Some(100_000_000);
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Paced);
    assert_eq!(v.limited_by.as_str(), "paced");
    assert!(
        v.sentence()
            .contains("-b 800.0 Mbit/s): the rate reached 100% of it"),
        "{}",
        v.sentence()
    );
    // Paced to 1600 Mbit/s, it reached half: the path's.
    e.pace = Some(200_000_000);
    assert_eq!(by(e), LimitedBy::Network);
    let l = judge(&base(50, 0, 50, 0)).limits;
    assert_eq!((l.pace_bytes_per_s, l.of_pace_pct), (None, None));
    assert!(!serde_json::to_string(&l).unwrap().contains("pace"));
}

#[test]
fn nothing_to_judge_on() {
    let e = Evidence {
        elapsed: MS,
        ..Evidence::default()
    };
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Unknown);
    assert!(
        v.sentence().contains("neither TCP_INFO"),
        "{}",
        v.sentence()
    );
    assert_eq!(by(Evidence::default()), LimitedBy::Unknown);
}

/// Loopback on two CPUs: both ends busy, each waiting for a CPU the other (and the kernel's
/// packet work) holds.
#[test]
fn both_ends_busy_on_one_machine_share_its_cpus() {
    let mut e = base(510, 390, 390, 360);
    e.same_host = true;
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::SharedCpu);
    assert!(
        v.sentence().contains("this machine's 2 CPUs"),
        "{}",
        v.sentence()
    );
    // Both ends busy two thirds of their time, each waiting for a CPU 40-50% of it (a compiler
    // took the CPUs): the machine's CPUs, though neither end reached 80%.
    let mut e = base(270, 400, 255, 485);
    e.same_host = true;
    assert_eq!(by(e), LimitedBy::SharedCpu);
    // A quota on the server on the same machine: the client waits, so the server's CPU.
    let mut e = base(60, 0, 100, 880);
    e.same_host = true;
    assert_eq!(by(e), LimitedBy::ReceiverCpu);
    // The same shares on two machines: the busier end.
    assert_eq!(by(base(510, 390, 390, 360)), LimitedBy::SenderCpu);
}

#[test]
fn one_machine_is_said() {
    let mut e = base(980, 10, 300, 100);
    e.same_host = true;
    e.server.as_mut().unwrap().run_queue = Some(MS * 50);
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::SenderCpu);
    assert!(
        v.sentence().ends_with("share its 2 CPUs"),
        "{}",
        v.sentence()
    );
    assert!(v.shares().contains("server: on CPU 30%"), "{}", v.shares());
}

/// Old results keep their values; every value reads back as it was written.
#[test]
fn values_round_trip_and_old_ones_read() {
    for v in [
        LimitedBy::ReceiverLog,
        LimitedBy::ReceiverDisk,
        LimitedBy::SharedCpu,
        LimitedBy::ReceiverCpu,
        LimitedBy::Receiver,
        LimitedBy::SenderSource,
        LimitedBy::SenderCpu,
        LimitedBy::SenderBuffer,
        LimitedBy::Sender,
        LimitedBy::Network,
        LimitedBy::Unknown,
    ] {
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, format!("\"{v}\""));
        assert_eq!(serde_json::from_str::<LimitedBy>(&json).unwrap(), v);
    }
    let old: Limits = serde_json::from_str(
        r#"{"rwnd_limited_pct":1.0,"sndbuf_limited_pct":0.0,"busy_pct":90.0,
            "client_cpu_pct":50.0,"retransmits":0}"#,
    )
    .unwrap();
    assert_eq!(old.server_cpu_pct, None);
}

/// A reverse stream from a server held to 1 ms of CPU per 10 ms (measured: scripts/verdicts.sh
/// rev-server-quota, 8 MiB): the server wrote its last byte 21.5 ms in, on a CPU 1.7 ms and
/// throttled 17.2 ms of that; the client then read the 4 MiB send buffer's worth for 16 ms
/// more. Over the client's 37 ms the sender looked half idle (`unknown`); over its own span,
/// the one its figures are measured over, it was CPU-bound. (Each time here is ten times the
/// run's, the shares the same: 37 ms is now too short to judge, [`MIN_JUDGED`].)
#[test]
fn a_sender_is_judged_over_its_own_span() {
    let mut e = Evidence {
        tcp: tcp(80, 0, 0),
        flight: flight(10, 1, 800_000),
        elapsed: Duration::from_micros(371_300),
        client_cpu: Duration::from_micros(16_680),
        sender_on_cpu: Some(Duration::from_micros(16_670)),
        sender_run_queue: Some(Duration::from_micros(172_430)),
        source_read: None,
        sndbuf: 4 << 20,
        write_size: 10240,
        bytes: 8 << 20,
        line_mbit: None,
        same_host: true,
        cpus: 2,
        server: Some(ServerTime {
            total: Duration::from_micros(371_300),
            cpu: Duration::from_micros(35_950),
            run_queue: Some(Duration::from_micros(70_900)),
            log: Duration::ZERO,
            disk: Duration::ZERO,
        }),
        sender_span: None,
        reverse: true,
        pace: None,
    };
    assert_eq!(by(e), LimitedBy::Unknown, "over the receiver's time");
    e.sender_span = Some(Duration::from_micros(214_700));
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::SenderCpu, "{:?}", v.limits);
    assert!(over(v.limits.client_run_queue_pct, 75.0), "{:?}", v.limits);
}

/// In reverse the server sends: the sentence and the shares name it as the sender, the client
/// as the receiver (a quota on the sending server read "the client was on a CPU 10%").
#[test]
fn reverse_sentences_name_the_server_as_the_sender() {
    let mut e = base(100, 880, 300, 0);
    e.reverse = true;
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::SenderCpu);
    assert!(v.limits.reverse);
    let s = v.sentence();
    assert!(
        s.contains("the sender's CPU: the server was on a CPU 10%"),
        "{s}"
    );
    assert!(
        v.shares().starts_with("server (sending): on CPU 10%"),
        "{}",
        v.shares()
    );
    assert!(
        v.shares().contains("; client (receiving): on CPU 30%"),
        "{}",
        v.shares()
    );
    let mut e = base(100, 0, 950, 40);
    e.reverse = true;
    let s = judge(&e).sentence();
    assert!(
        s.contains("the receiver's CPU: the client was on a CPU 96%"),
        "{s}"
    );
    // Forward reads as it always has.
    let s = judge(&base(100, 880, 300, 0)).sentence();
    assert!(
        s.contains("the sender's CPU: the client was on a CPU 10%"),
        "{s}"
    );
    assert!(
        judge(&base(100, 880, 300, 0))
            .shares()
            .starts_with("client: on CPU")
    );
}

/// A mixed regime (measured: rev-loopback, the server sending on loopback): the sender on a CPU
/// 72% and waiting on its socket 27% with the congestion window often full, the receiver busy
/// 40%. No rule is met, so `unknown`; the sentence says what was seen against the rules'
/// thresholds, not "no end was busy and nothing shows the path".
#[test]
fn an_unknown_verdict_says_how_near_each_rule_came() {
    let mut e = base(724, 4, 322, 77);
    e.same_host = true;
    e.reverse = true;
    e.flight = flight(10, 4, 1_000_000);
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::Unknown, "{:?}", v.limits);
    let s = v.sentence();
    assert!(!s.contains("no end was busy"), "{s}");
    assert!(
        s.contains("the server was on a CPU or waiting for one 73% (the rule: 80%)"),
        "{s}"
    );
    assert!(s.contains("waited on its socket 27% (50%)"), "{s}");
    assert!(s.contains("the client was busy 40%"), "{s}");
}

/// A transfer shorter than [`MIN_JUDGED`] is `too-short`: its time shares are a few
/// scheduler slices and kernel ticks (36 MiB in 17 ms on loopback named the receiver's CPU in
/// one run of three). What needs no time share still names its limit: a send buffer below one
/// write, a log that took most of the server's time.
#[test]
fn a_transfer_too_short_to_judge_says_so() {
    let mut e = base(600, 370, 360, 100);
    e.same_host = true;
    e.elapsed = MS * 17;
    e.sender_span = Some(MS * 17);
    e.sender_on_cpu = Some(Duration::from_micros(10_200));
    e.sender_run_queue = Some(Duration::from_micros(6_300));
    e.server = Some(ServerTime {
        total: MS * 17,
        cpu: Duration::from_micros(6_100),
        run_queue: Some(Duration::from_micros(1_800)),
        log: Duration::ZERO,
        disk: Duration::ZERO,
    });
    let v = judge(&e);
    assert_eq!(v.limited_by, LimitedBy::TooShort, "{:?}", v.limits);
    assert_eq!(v.limited_by.as_str(), "too-short");
    assert_eq!(v.limits.elapsed_ms, Some(17.0));
    let s = v.sentence();
    assert!(
        s.starts_with("limited by: too short to tell (17 ms; a verdict needs 100 ms or more"),
        "{s}"
    );
    assert!(s.contains("-t"), "{s}");
    // Just long enough: judged.
    let mut long = e;
    long.elapsed = MIN_JUDGED;
    assert_ne!(by(long), LimitedBy::TooShort);
    // A send buffer below one write needs no share.
    let mut small = e;
    small.sndbuf = 4608;
    assert_eq!(by(small), LimitedBy::SenderBuffer);
    // Nor does a log that took most of the server's time.
    let mut logged = e;
    if let Some(s) = logged.server.as_mut() {
        s.log = MS * 12;
    }
    assert_eq!(by(logged), LimitedBy::ReceiverLog);
    // The value reads back.
    let json = serde_json::to_string(&LimitedBy::TooShort).unwrap();
    assert_eq!(json, "\"too-short\"");
    assert_eq!(
        serde_json::from_str::<LimitedBy>(&json).unwrap(),
        LimitedBy::TooShort
    );
}
