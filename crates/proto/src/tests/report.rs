//! The report: its layout against older versions', and the agreement of its numbers.

use super::*;

/// Version 6's report carries the time split, the server's TCP_INFO, the log lines lost, its
/// run-queue wait and boot id; a version 3 report (86 fixed bytes), a version 4 one (214) or a
/// version 5 one (218) does not decode as one, and an older hello is refused by its version.
#[test]
fn version_6_report_and_older_peers() {
    let mut b = Vec::new();
    encode_frame(&Frame::Report(report()), &mut b);
    assert_eq!(b.len(), FRAME_HEADER + 255 + 2 + "/srv/ünïcode".len());
    assert_eq!(
        decode_frame(&b),
        Ok(Some((Frame::Report(report()), b.len())))
    );
    let Ok(Some((Frame::Report(r), _))) = decode_frame(&b) else {
        panic!("did not decode");
    };
    assert_eq!(r.split.wait_ns, u64::MAX - 100);
    assert_eq!(r.tcp.rcv_wnd, None, "u64::MAX is not known");
    assert_eq!(r.tcp.rcv_rtt_us, Some(0));
    assert_eq!((r.run_queue_ns, r.boot_id), (Some(19), Some([0xab; 16])));
    // Not known: u64::MAX and all zero on the wire.
    let unknown = Report {
        run_queue_ns: None,
        boot_id: None,
        ..report()
    };
    let mut u = Vec::new();
    encode_frame(&Frame::Report(unknown.clone()), &mut u);
    assert_eq!(&u[FRAME_HEADER + 218..FRAME_HEADER + 226], &[0xff; 8]);
    assert_eq!(&u[FRAME_HEADER + 226..FRAME_HEADER + 242], &[0; 16]);
    assert_eq!(
        decode_frame(&u),
        Ok(Some((Frame::Report(unknown), u.len())))
    );
    let mut v5 = vec![3, 0, 220];
    v5.extend_from_slice(&[0; 220]);
    assert!(matches!(
        decode_frame(&v5),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
    let mut v3 = vec![3, 0, 88];
    v3.extend_from_slice(&[0; 86]);
    v3.extend_from_slice(&[0, 0]);
    assert_eq!(
        decode_frame(&v3),
        Err(ProtocolError::BadBodyLength {
            tag: 3,
            len: 88,
            expected: 257
        })
    );
    let mut v4 = vec![3, 0, 216];
    v4.extend_from_slice(&[0; 216]);
    assert!(matches!(
        decode_frame(&v4),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
    for old in [3u16, 4, 5] {
        let mut hello = encoded(&Hello::stream(1, 1, "x"));
        hello[4..6].copy_from_slice(&old.to_be_bytes());
        assert_eq!(
            decode_hello(&hello),
            Err(ProtocolError::UnsupportedVersion(old))
        );
    }
}

/// Issue 23 (10): a report whose numbers contradict each other is refused, naming the field:
/// phases that overflow, more reads than bytes, a first byte after the last, first to last
/// byte longer than the whole split, more log lines than reads.
#[test]
fn contradictory_reports_are_refused() {
    assert_eq!(report().check(), Ok(()));
    let field = |r: Report| match r.check() {
        Err(ProtocolError::BadReport { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let mut r = report();
    r.split.read_ns = u64::MAX;
    assert_eq!(field(r), "time split");
    assert_eq!(
        field(Report {
            reads: 101,
            ..report()
        }),
        "reads"
    );
    assert_eq!(
        field(Report {
            first_byte_unix_us: u64::MAX,
            ..report()
        }),
        "first_byte_unix_us"
    );
    assert_eq!(
        field(Report {
            elapsed_ns: u64::MAX,
            ..report()
        }),
        "elapsed_ns"
    );
    assert_eq!(
        field(Report {
            log_lines: 9,
            ..report()
        }),
        "log_lines"
    );
    assert_eq!(
        field(Report {
            log: Some(LogMode::None),
            ..report()
        }),
        "log_lines"
    );
}

/// Version 6: more waiting for a CPU than the whole split, beyond a tick's lag, is refused.
#[test]
fn more_run_queue_wait_than_the_transfer_is_refused() {
    let field = |r: Report| match r.check() {
        Err(ProtocolError::BadReport { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let mut r = report();
    r.split = TimeSplit {
        wait_ns: 1_000_000,
        ..TimeSplit::default()
    };
    r.elapsed_ns = 0;
    r.run_queue_ns = Some(11_000_001);
    assert_eq!(field(r.clone()), "run_queue_ns");
    r.run_queue_ns = Some(11_000_000);
    assert_eq!(r.check(), Ok(()));
    // The decoder refuses one on the wire.
    let mut r = report();
    r.split.hash_ns = u64::MAX;
    let mut b = Vec::new();
    encode_frame(&Frame::Report(r), &mut b);
    assert!(matches!(
        decode_frame(&b),
        Err(ProtocolError::BadReport {
            field: "time split",
            ..
        })
    ));
    // A transfer of no bytes: nothing read, nothing timed.
    let empty = Report {
        bytes: 0,
        reads: 0,
        first_byte_unix_us: 0,
        last_byte_unix_us: 0,
        elapsed_ns: 0,
        log_lines: 2,
        log_lines_lost: 0,
        split: TimeSplit::default(),
        ..report()
    };
    assert_eq!(empty.check(), Ok(()));
}

/// Version 13: the report carries the receiver's read size and its thread's time on a CPU (the
/// figures a receiving client has, so one type serves both ends); a version 12 report (242
/// fixed bytes) does not decode as one, and time on a CPU beyond the split is refused.
#[test]
fn version_13_report_carries_read_size_and_time_on_a_cpu() {
    let mut b = Vec::new();
    encode_frame(&Frame::Report(report()), &mut b);
    let Ok(Some((Frame::Report(r), _))) = decode_frame(&b) else {
        panic!("did not decode");
    };
    assert_eq!((r.read_size, r.on_cpu_ns), (262_144, Some(20)));
    let unknown = Report {
        on_cpu_ns: None,
        ..report()
    };
    let mut u = Vec::new();
    encode_frame(&Frame::Report(unknown.clone()), &mut u);
    assert_eq!(&u[FRAME_HEADER + 246..FRAME_HEADER + 254], &[0xff; 8]);
    assert_eq!(
        decode_frame(&u),
        Ok(Some((Frame::Report(unknown), u.len())))
    );
    let mut v12 = vec![3, 0, 244];
    v12.extend_from_slice(&[0; 244]);
    let mut v13 = vec![3, 1, 0];
    v13.extend_from_slice(&[0; 256]);
    assert!(matches!(
        decode_frame(&v13),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
    assert!(matches!(
        decode_frame(&v12),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
    let mut r = report();
    r.split = TimeSplit {
        wait_ns: 1_000_000,
        ..TimeSplit::default()
    };
    r.elapsed_ns = 0;
    r.run_queue_ns = None;
    r.on_cpu_ns = Some(11_000_001);
    assert!(matches!(
        r.check(),
        Err(ProtocolError::BadReport {
            field: "on_cpu_ns",
            ..
        })
    ));
    r.on_cpu_ns = Some(11_000_000);
    assert_eq!(r.check(), Ok(()));
}

/// Version 14: the report says how the receiver wrote the stream to its disk and where it
/// saved it: a path needs its mode (a mode alone is a save measured and not kept); an unknown
/// mode, or one that writes nothing, is refused.
#[test]
fn version_14_report_says_how_it_saved() {
    for save in [None, Some(SaveMode::Buffered), Some(SaveMode::Direct)] {
        let r = Report {
            save,
            saved_to: save.map_or(String::new(), |_| "/srv/x".into()),
            ..report()
        };
        let mut b = Vec::new();
        encode_frame(&Frame::Report(r.clone()), &mut b);
        assert_eq!(b[FRAME_HEADER + 254], save.map_or(0, |m| m as u8 + 1));
        assert_eq!(decode_frame(&b), Ok(Some((Frame::Report(r), b.len()))));
    }
    // Measured and not kept: a mode and no path.
    let measured = Report {
        save: Some(SaveMode::Durable),
        saved_to: String::new(),
        ..report()
    };
    assert_eq!(measured.check(), Ok(()));
    for (save, saved_to) in [(None, "/srv/x"), (Some(SaveMode::Discard), "/srv/x")] {
        let r = Report {
            save,
            saved_to: saved_to.into(),
            ..report()
        };
        assert!(
            matches!(
                r.check(),
                Err(ProtocolError::BadReport { field: "save", .. })
            ),
            "{save:?} {saved_to:?}"
        );
    }
    let mut b = Vec::new();
    encode_frame(&Frame::Report(report()), &mut b);
    b[FRAME_HEADER + 254] = 4;
    assert!(decode_frame(&b).is_err());
}

/// The time split's total and largest share.
#[test]
fn time_split_largest_share() {
    assert_eq!(TimeSplit::default().largest(), None);
    let s = TimeSplit {
        read_ns: 10,
        log_ns: 70,
        wait_ns: 20,
        ..TimeSplit::default()
    };
    assert_eq!(s.total_ns(), 100);
    assert_eq!(s.largest(), Some((TimePhase::Log, 70.0)));
}
