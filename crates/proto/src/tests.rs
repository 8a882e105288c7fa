//! The codecs against the specification: round trips, every refusal, and (proptest) no panic
//! and no over-read on any input.

use super::*;
use proptest::prelude::*;

fn hello() -> Hello {
    Hello {
        mode: Mode::Stream,
        nodelay: false,
        codec: 0,
        framing: 0,
        length: 36 * 1024 * 1024,
        chunk: 10240,
        name: "tsl.txt".into(),
        log: Some(LogMode::Stdout),
        clock_queries: 8,
    }
}

fn encoded(h: &Hello) -> Vec<u8> {
    let mut v = Vec::new();
    encode_hello(h, &mut v);
    v
}

fn report() -> Report {
    Report {
        bytes: 100,
        digest: 2,
        first_byte_unix_us: 3,
        last_byte_unix_us: 4,
        elapsed_ns: 5,
        reads: 6,
        wakeups: 7,
        cpu_user_us: 8,
        cpu_sys_us: 9,
        log_lines: 6,
        log_lines_lost: 2,
        rcvbuf: 11,
        output_dropped: 12,
        server_io: Some(ServerIo::EventLoop),
        log: Some(LogMode::File),
        saved_to: "/srv/ünïcode".into(),
        split: TimeSplit {
            read_ns: 13,
            hash_ns: 14,
            log_ns: 15,
            save_ns: 16,
            fsync_ns: 17,
            wait_ns: u64::MAX - 100,
        },
        tcp: crate::tcp::ReceiverTcp {
            rcv_space: Some(18),
            rcv_rtt_us: Some(0),
            rcv_wnd: None,
            bytes_received: Some(u64::MAX - 1),
            ..crate::tcp::ReceiverTcp::default()
        },
    }
}

/// A hello decodes to itself, and every proper prefix asks for more bytes.
#[test]
fn hello_round_trip_and_prefixes() {
    let h = hello();
    let bytes = encoded(&h);
    assert_eq!(bytes.len(), HELLO_FIXED + 7);
    assert_eq!(decode_hello(&bytes), Ok(Some((h, bytes.len()))));
    for n in 0..bytes.len() {
        assert_eq!(decode_hello(&bytes[..n]), Ok(None), "prefix {n}");
    }
}

/// Trailing bytes are left for the caller: `used` says where the hello ended.
#[test]
fn hello_reports_bytes_used() {
    let mut bytes = encoded(&hello());
    let n = bytes.len();
    bytes.extend_from_slice(b"extra");
    assert_eq!(decode_hello(&bytes).unwrap().unwrap().1, n);
}

fn refused(mut edit: impl FnMut(&mut Vec<u8>)) -> ProtocolError {
    let mut b = encoded(&hello());
    edit(&mut b);
    decode_hello(&b).expect_err("should be refused")
}

/// Every hello field with a bad value is refused with the error that names it.
#[test]
fn hello_refusals() {
    assert!(matches!(
        refused(|b| b[0] = b'G'),
        ProtocolError::BadMagic(_)
    ));
    assert_eq!(
        decode_hello(b"GET / HTTP/1.1\r\n"),
        Err(ProtocolError::BadMagic(*b"GET "))
    );
    assert_eq!(
        decode_hello(b"TX"),
        Err(ProtocolError::BadMagic(*b"TX\0\0"))
    );
    assert_eq!(refused(|b| b[5] = 1), ProtocolError::UnsupportedVersion(1));
    assert_eq!(refused(|b| b[5] = 2), ProtocolError::UnsupportedVersion(2));
    // The version is read as soon as it is in: an older, shorter hello is not waited for.
    assert_eq!(
        decode_hello(b"TSPF\x00\x02"),
        Err(ProtocolError::UnsupportedVersion(2))
    );
    assert_eq!(refused(|b| b[6] = 0), ProtocolError::BadMode(0));
    assert_eq!(refused(|b| b[6] = 3), ProtocolError::BadMode(3));
    assert_eq!(refused(|b| b[7] = 2), ProtocolError::BadFlags(2));
    assert_eq!(refused(|b| b[8] = 1), ProtocolError::BadCodec(1));
    assert_eq!(refused(|b| b[9] = 1), ProtocolError::BadFraming(1));
    let latency = |codec, framing| {
        refused(|b| {
            b[6] = 2;
            b[8] = codec;
            b[9] = framing;
        })
    };
    assert_eq!(latency(0, 1), ProtocolError::BadCodec(0));
    assert_eq!(latency(3, 1), ProtocolError::BadCodec(3));
    assert_eq!(latency(1, 0), ProtocolError::BadFraming(0));
    assert_eq!(latency(2, 3), ProtocolError::BadFraming(3));
    assert_eq!(refused(|b| b[10] = 4), ProtocolError::BadLog(4));
    assert_eq!(latency(1, 1), ProtocolError::BadLog(2));
    assert_eq!(
        refused(|b| b[11] = MAX_CLOCK_QUERIES + 1),
        ProtocolError::BadClockQueries(MAX_CLOCK_QUERIES + 1)
    );
    assert_eq!(
        refused(|b| {
            b[6] = 2;
            b[8] = 1;
            b[9] = 1;
            b[10] = 0;
        }),
        ProtocolError::BadClockQueries(8)
    );
    assert_eq!(
        refused(|b| b[12..14].copy_from_slice(&256u16.to_be_bytes())),
        ProtocolError::NameTooLong(256)
    );
    assert_eq!(
        refused(|b| b[22..26].copy_from_slice(&0u32.to_be_bytes())),
        ProtocolError::BadChunk(0)
    );
    assert_eq!(
        refused(|b| b[22..26].copy_from_slice(&(MAX_CHUNK + 1).to_be_bytes())),
        ProtocolError::BadChunk(MAX_CHUNK + 1)
    );
    assert_eq!(refused(|b| b[26] = 0xff), ProtocolError::NameNotUtf8);
    assert!(matches!(
        refused(|b| b[27] = b'/'),
        ProtocolError::BadName(_)
    ));
    assert!(matches!(refused(|b| b[27] = 0), ProtocolError::BadName(_)));
    assert!(matches!(
        refused(|b| b[27] = b'\n'),
        ProtocolError::BadName(_)
    ));
    // Latency mode carries no name and a chunk of 1.
    let latency = |edit: &dyn Fn(&mut Vec<u8>)| {
        refused(|b| {
            b[6] = 2;
            b[8] = 1;
            b[9] = 1;
            b[10] = 0;
            b[11] = 0;
            b[22..26].copy_from_slice(&1u32.to_be_bytes());
            edit(b);
        })
    };
    assert_eq!(latency(&|_| {}), ProtocolError::LatencyName(7));
    assert_eq!(
        latency(&|b| {
            b.truncate(HELLO_FIXED);
            b[12..14].copy_from_slice(&0u16.to_be_bytes());
            b[22..26].copy_from_slice(&2u32.to_be_bytes());
        }),
        ProtocolError::LatencyChunk(2)
    );
}

/// Limits are inclusive: a 255-byte name and a 16 MiB chunk are accepted.
#[test]
fn hello_limits_inclusive() {
    let mut h = hello();
    h.name = "n".repeat(MAX_NAME);
    h.chunk = MAX_CHUNK;
    let b = encoded(&h);
    assert_eq!(decode_hello(&b), Ok(Some((h.clone(), b.len()))));
    h.clock_queries = MAX_CLOCK_QUERIES;
    let b = encoded(&h);
    assert_eq!(decode_hello(&b), Ok(Some((h.clone(), b.len()))));
    h.name.clear();
    h.chunk = 1;
    h.log = None;
    h.clock_queries = 0;
    h.mode = Mode::Latency;
    h.nodelay = true;
    h.codec = 2;
    h.framing = 2;
    let b = encoded(&h);
    assert_eq!(decode_hello(&b), Ok(Some((h, b.len()))));
}

/// Every frame kind decodes to itself, and every proper prefix asks for more bytes.
#[test]
fn frame_round_trips() {
    for f in [
        Frame::Accept {
            read_size: 102,
            server_io: ServerIo::Blocking,
            log: LogMode::Stdout,
            stdout: StdoutKind::Terminal,
        },
        Frame::Accept {
            read_size: 1,
            server_io: ServerIo::EventLoop,
            log: LogMode::None,
            stdout: StdoutKind::Closed,
        },
        Frame::Time(clock::TimeResponse {
            seq: 3,
            server_recv_unix_ns: 4,
            server_send_unix_ns: u64::MAX,
        }),
        Frame::Refuse {
            code: RefuseCode::Limit,
            reason: "no thanks".into(),
        },
        Frame::Refuse {
            code: RefuseCode::Version,
            reason: "another version".into(),
        },
        Frame::Abort(String::new()),
        Frame::Report(report()),
        Frame::Report(Report::default()),
        Frame::Challenge([9; 32]),
    ] {
        let mut b = Vec::new();
        encode_frame(&f, &mut b);
        for n in 0..b.len() {
            assert_eq!(decode_frame(&b[..n]), Ok(None), "prefix {n} of {f:?}");
        }
        let expect = match f {
            // An absent enum travels as its first value.
            Frame::Report(r) if r.server_io.is_none() => Frame::Report(Report {
                server_io: Some(ServerIo::Blocking),
                log: Some(LogMode::None),
                ..r
            }),
            f => f,
        };
        assert_eq!(decode_frame(&b), Ok(Some((expect, b.len()))));
    }
}

/// Every refusal code travels as itself; the version refusal in the layout every version
/// reads (tag 2, the reason alone), the rest with their code (tag 7).
#[test]
fn refusal_codes_round_trip() {
    for code in RefuseCode::ALL {
        let f = Frame::Refuse {
            code,
            reason: format!("{code:?}"),
        };
        let mut b = Vec::new();
        encode_frame(&f, &mut b);
        assert_eq!(b[0], if code == RefuseCode::Version { 2 } else { 7 });
        assert_eq!(decode_frame(&b), Ok(Some((f, b.len()))));
        assert_eq!(RefuseCode::from_code(code.code()), Some(code));
    }
    // A version 4 server's refusal (tag 2) reads as another version's.
    let mut old = vec![2, 0, 4, 0, 2];
    old.extend_from_slice(b"no");
    assert_eq!(
        decode_frame(&old),
        Ok(Some((
            Frame::Refuse {
                code: RefuseCode::Version,
                reason: "no".into()
            },
            old.len()
        )))
    );
}

/// An over-long reason is cut at a character boundary and still decodes.
#[test]
fn long_reason_is_cut_to_limit() {
    let mut b = Vec::new();
    encode_frame(
        &Frame::Refuse {
            code: RefuseCode::Other,
            reason: "é".repeat(MAX_REASON),
        },
        &mut b,
    );
    let Ok(Some((Frame::Refuse { reason: s, .. }, _))) = decode_frame(&b) else {
        panic!("did not decode");
    };
    assert!(s.len() <= MAX_REASON && s.len() >= MAX_REASON - 1);
}

/// Every frame refusal: unknown tag, oversized body, wrong body sizes, bad enums and strings.
#[test]
fn frame_refusals() {
    assert_eq!(decode_frame(&[0]), Err(ProtocolError::BadTag(0)));
    assert_eq!(decode_frame(&[9, 0, 0]), Err(ProtocolError::BadTag(9)));
    assert!(matches!(
        decode_frame(&[5, 0, 2, 1, 2]),
        Err(ProtocolError::BadBodyLength { tag: 5, .. })
    ));
    assert_eq!(
        decode_frame(&[2, 0x10, 0x01]),
        Err(ProtocolError::FrameTooLong(4097))
    );
    assert!(matches!(
        decode_frame(&[1, 0, 1, 0]),
        Err(ProtocolError::BadBodyLength { tag: 1, .. })
    ));
    assert_eq!(
        decode_frame(&[1, 0, 7, 0, 0, 0, 1, 7, 0, 0]),
        Err(ProtocolError::BadEnum {
            field: "server_io",
            value: 7
        })
    );
    assert_eq!(
        decode_frame(&[1, 0, 7, 0, 0, 0, 1, 0, 3, 0]),
        Err(ProtocolError::BadEnum {
            field: "log",
            value: 3
        })
    );
    assert_eq!(
        decode_frame(&[1, 0, 7, 0, 0, 0, 1, 0, 0, 8]),
        Err(ProtocolError::BadEnum {
            field: "stdout",
            value: 8
        })
    );
    // The version 2 Accept (6 bytes of body) is not a version 3 one.
    assert!(matches!(
        decode_frame(&[1, 0, 6, 0, 0, 0, 1, 0, 0]),
        Err(ProtocolError::BadBodyLength { tag: 1, .. })
    ));
    let mut short_time = vec![6, 0, 23];
    short_time.resize(3 + 23, 0);
    assert!(matches!(
        decode_frame(&short_time),
        Err(ProtocolError::BadBodyLength { tag: 6, .. })
    ));
    assert_eq!(decode_frame(&[8, 0, 0]), Err(ProtocolError::BadTag(8)));
    assert_eq!(
        decode_frame(&[7, 0, 3, 8, 0, 0]),
        Err(ProtocolError::BadEnum {
            field: "refusal code",
            value: 8
        })
    );
    // A string length that disagrees with the body length: the body its string needs is the
    // size expected (issue 23: it said "a body of 3 bytes: expected 3").
    assert_eq!(
        decode_frame(&[2, 0, 3, 0, 5, b'x']),
        Err(ProtocolError::BadBodyLength {
            tag: 2,
            len: 3,
            expected: 7
        })
    );
    assert_eq!(
        decode_frame(&[4, 0, 1, 0]),
        Err(ProtocolError::BadBodyLength {
            tag: 4,
            len: 1,
            expected: 2
        })
    );
    assert_eq!(
        decode_frame(&[2, 0, 4, 0, 2, 0xff, 0xfe]),
        Err(ProtocolError::StringNotUtf8)
    );
    let mut too_long = vec![4, 0x04, 0x02, 0x04, 0x01];
    too_long.resize(3 + 1026, b'a');
    assert_eq!(
        decode_frame(&too_long),
        Err(ProtocolError::StringTooLong(1025))
    );
    assert!(matches!(
        decode_frame(&[3, 0, 2, 0, 0]),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
}

proptest! {
    /// The decoders never panic on arbitrary bytes, and what they accept they accept whole.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some((_, used))) = decode_hello(&bytes) {
            prop_assert!(used <= bytes.len());
        }
        if let Ok(Some((_, used))) = decode_frame(&bytes) {
            prop_assert!(used <= bytes.len());
        }
    }

    /// Random bytes behind a valid magic and version still never panic the hello decoder.
    #[test]
    fn hello_decoder_total_after_magic(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&VERSION.to_be_bytes());
        b.extend_from_slice(&tail);
        let _ = decode_hello(&b);
    }

    /// Any valid hello round-trips.
    #[test]
    fn hello_round_trip_any(length: u64, chunk in 1..=MAX_CHUNK, name in "[a-zA-Z0-9._ é-]{0,60}") {
        let h = Hello { clock_queries: (length % 65) as u8, ..Hello::stream(length, chunk, &name) };
        let b = encoded(&h);
        prop_assert_eq!(decode_hello(&b), Ok(Some((h, b.len()))));
    }
}

/// NTP's estimate: exact for a symmetric path, and the true offset always within its bound.
#[test]
fn offset_estimate_and_bound() {
    // Server 1000 ns ahead; 300 ns each way; the server takes 50 ns.
    let o = clock::Offset::of(10_000, 11_300, 11_350, 10_650);
    assert_eq!(o.offset_ns, 1000);
    assert_eq!(o.err_ns, 300);
    assert_eq!(o.to_client(11_300), 10_300);
    // An asymmetric path (100 ns there, 500 back): the estimate is off, but by no more than
    // its bound.
    let o = clock::Offset::of(10_000, 11_100, 11_150, 10_650);
    assert!((o.offset_ns - 1000).unsigned_abs() <= o.err_ns, "{o:?}");
}

/// Version 5's report carries the time split, the server's TCP_INFO and the log lines lost; a
/// version 3 report (86 fixed bytes) or a version 4 one (214) does not decode as one, and an
/// older hello is refused by its version.
#[test]
fn version_5_report_and_older_peers() {
    let mut b = Vec::new();
    encode_frame(&Frame::Report(report()), &mut b);
    assert_eq!(b.len(), FRAME_HEADER + 218 + 2 + "/srv/ünïcode".len());
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
    let mut v3 = vec![3, 0, 88];
    v3.extend_from_slice(&[0; 86]);
    v3.extend_from_slice(&[0, 0]);
    assert_eq!(
        decode_frame(&v3),
        Err(ProtocolError::BadBodyLength {
            tag: 3,
            len: 88,
            expected: 220
        })
    );
    let mut v4 = vec![3, 0, 216];
    v4.extend_from_slice(&[0; 216]);
    assert!(matches!(
        decode_frame(&v4),
        Err(ProtocolError::BadBodyLength { tag: 3, .. })
    ));
    for old in [3u16, 4] {
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
