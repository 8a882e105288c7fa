//! The stages' costs from the rungs' times: what each stage is named and what it costs.

use super::*;

/// Times per MiB (seconds) of the rungs that ran.
fn times(ran: &[(Rung, f64)]) -> impl Fn(Rung) -> Option<f64> + '_ {
    move |rung| ran.iter().find(|(r, _)| *r == rung).map(|(_, t)| *t)
}

const AES: Cipher = Cipher::Aes128Gcm;

/// A first rung the sender's CPU limited (one machine, or a CPU quota) is not the network's
/// cost: the stage is named after that CPU, and the network only where it limited.
#[test]
fn the_first_stage_is_named_by_what_limited_the_first_rung() {
    let ran = [(Rung::Memory, 0.6e-3), (Rung::File, 0.6e-3)];
    let first = |v| stage_costs(times(&ran), None, v)[0].0.clone();
    assert_eq!(first(Some(LimitedBy::SenderCpu)), "the sender's CPU");
    assert_eq!(first(Some(LimitedBy::ReceiverCpu)), "the receiver's CPU");
    assert_eq!(first(Some(LimitedBy::SharedCpu)), "the CPU both ends share");
    assert_eq!(first(Some(LimitedBy::Network)), "the network");
    // Too short to judge: not called the network's.
    assert_eq!(
        first(Some(LimitedBy::TooShort)),
        "the network and both ends"
    );
    assert_eq!(first(None), "the network and both ends");
}

/// A slow source disk, a slow far disk, a dear cipher: each the costliest where it is made
/// slow, its cost the time it adds to the rung it stands on.
#[test]
fn the_stage_made_slow_costs_the_most() {
    let clear = [
        (Rung::Memory, 1.0e-3),
        (Rung::File, 1.0e-3),
        (Rung::Cold, 1.2e-3),
        (Rung::Tls(AES), 1.3e-3),
        (Rung::FarDisk(SaveMode::Durable), 1.5e-3),
    ];
    let costliest = |ran: &[(Rung, f64)]| {
        stage_costs(times(ran), Some(AES), Some(LimitedBy::Network))[0].clone()
    };
    assert_eq!(costliest(&clear).0, "the network");
    let with = |rung: Rung, t: f64| {
        let mut r = clear.to_vec();
        r.iter_mut().find(|(x, _)| *x == rung).unwrap().1 = t;
        r
    };
    let (stage, cost) = costliest(&with(Rung::Cold, 250e-3));
    assert_eq!(stage, "the source disk");
    assert!((cost - 249e-3).abs() < 1e-9, "{cost}");
    let (stage, cost) = costliest(&with(Rung::FarDisk(SaveMode::Durable), 250e-3));
    assert_eq!(stage, "the far disk");
    assert!((cost - 249e-3).abs() < 1e-9, "{cost}");
    assert_eq!(costliest(&with(Rung::Tls(AES), 5e-3)).0, "the cipher");
}

/// Stages whose rungs did not run are left out; none at all without the first rung's.
#[test]
fn stages_whose_rungs_did_not_run_are_left_out() {
    let ran = [(Rung::Memory, 1e-3), (Rung::File, 1e-3)];
    let names: Vec<String> = stage_costs(times(&ran), Some(AES), None)
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(names, ["the network and both ends", "the source disk"]);
    assert!(stage_costs(|_| None, Some(AES), None).is_empty());
}

/// A failure before any byte went.
fn failed_with(error: anyhow::Error) -> StreamFailure {
    StreamFailure {
        name: "x".into(),
        bytes: None,
        sent: 0,
        acked: None,
        elapsed: None,
        intervals: Vec::new(),
        interrupted: false,
        error,
    }
}

/// A rung is skipped (not failed) only where the machine refused what it asks: a cold read
/// refused (typed), not any error whose words mention "cold" (a missing file named so).
#[test]
fn only_a_refused_cold_read_skips_a_rung() {
    let refused = tsperf_sys::cold::NotCold("cannot read 'f' cold: it is on tmpfs".into());
    let why = not_here(&failed_with(
        anyhow::Error::new(refused).context("preparing"),
    ));
    assert!(why.unwrap().contains("it is on tmpfs"));
    let missing = anyhow::anyhow!("cannot open file '/data/cold.bin': No such file or directory");
    assert!(not_here(&failed_with(missing)).is_none());
}

/// A timed ladder (`-t`): the rungs that can repeat their file (memory, file, TLS, kernel
/// TLS) run for the time, after `-O`'s omitted start; a cold read and a save are one pass of
/// FILE each, so those rungs are sized by it whatever the time.
#[test]
fn a_timed_ladder_times_the_rungs_that_can_repeat() {
    let base = StreamSpec {
        side: crate::run::Side::Sent,
        host: "far".into(),
        port: 7433,
        chunk: 131072,
        source: Source::Generated(1 << 20),
        one_buffer: false,
        strategy: None,
        batch: 1,
        timeout: Duration::from_secs(30),
        min_rate: 0,
        nonblocking: false,
        sndbuf: None,
        rcvbuf: None,
        nodelay: false,
        pacing: None,
        congestion: None,
        server_log: None,
        clock_queries: 0,
        interval: None,
        live: false,
        verbose: false,
        json_lines: false,
        time: Some(Duration::from_secs(3)),
        omit: Duration::from_secs(1),
        log: tsperf_proto::LogMode::None,
        log_file: PathBuf::new(),
        cold: false,
        tls: None,
        kernel_tls: false,
        save: None,
        save_dir: None,
        measure_save: false,
    };
    let file = std::path::Path::new("f.bin");
    for rung in Rung::all(AES) {
        let s = rung.spec(&base, file, 1 << 20);
        let timed = matches!(
            rung,
            Rung::Memory | Rung::File | Rung::Tls(_) | Rung::KernelTls(_)
        );
        assert_eq!(rung.timed(), timed, "{}", rung.name());
        match timed {
            true => assert_eq!((s.time, s.omit), (base.time, base.omit), "{}", rung.name()),
            false => assert_eq!((s.time, s.omit), (None, Duration::ZERO), "{}", rung.name()),
        }
    }
}
