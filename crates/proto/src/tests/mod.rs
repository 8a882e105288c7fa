//! The codecs against the specification: round trips, every refusal, and (proptest) no panic
//! and no over-read on any input.

use super::*;
use proptest::prelude::*;

pub(super) fn hello() -> Hello {
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
        duration_ms: 2500,
        reverse: true,
        one_buffer: false,
        session: Session {
            id: [7; 16],
            index: 3,
            count: 4,
        },
        two_way: true,
        congestion: None,
        call: None,
        save: None,
        measure_save: false,
        tls: Some(tls::Cipher::Aes256Gcm),
        pace: Some(1_250_000),
    }
}

pub(super) fn encoded(h: &Hello) -> Vec<u8> {
    let mut v = Vec::new();
    encode_hello(h, &mut v);
    v
}

pub(super) fn report() -> Report {
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
        save: Some(SaveMode::Durable),
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
        run_queue_ns: Some(19),
        boot_id: Some([0xab; 16]),
        read_size: 262_144,
        on_cpu_ns: Some(20),
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

pub(super) fn refused(mut edit: impl FnMut(&mut Vec<u8>)) -> ProtocolError {
    let mut b = encoded(&hello());
    edit(&mut b);
    decode_hello(&b).expect_err("should be refused")
}

/// Every field of a hello's header with a bad value is refused with the error that names it.
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
    // An iperf3 client opens with a cookie of 36 characters from a-z and 2-7: named so.
    let iperf3 = decode_hello(b"hc2uqquvwarw7kcnvat3rcux2ox2r7kucypt\0").unwrap_err();
    assert_eq!(iperf3, ProtocolError::BadMagic(*b"hc2u"));
    let said = iperf3.to_string();
    assert!(
        said.contains("an iperf3 client") && said.contains("tsclient"),
        "{said}"
    );
    let said = ProtocolError::BadMagic(*b"GET ").to_string();
    assert!(
        said.contains("expected \"TSPF\"") && !said.contains("iperf3"),
        "{said}"
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
    assert_eq!(refused(|b| b[8] = 1), ProtocolError::BadCodec(1));
    assert_eq!(refused(|b| b[9] = 1), ProtocolError::BadFraming(1));
    let latency = |codec, framing| {
        refused(|b| {
            b[6] = 2;
            b[7] = 0;
            b[8] = codec;
            b[9] = framing;
        })
    };
    assert_eq!(latency(0, 1), ProtocolError::BadCodec(0));
    assert_eq!(latency(3, 1), ProtocolError::BadCodec(3));
    assert_eq!(latency(1, 0), ProtocolError::BadFraming(0));
    assert_eq!(latency(2, 4), ProtocolError::BadFraming(4));
    assert_eq!(
        latency(2, 3),
        ProtocolError::BadLog(2),
        "framing 3 (split-request) is valid"
    );
    assert_eq!(refused(|b| b[10] = 4), ProtocolError::BadLog(4));
    assert_eq!(latency(1, 1), ProtocolError::BadLog(2));
    assert_eq!(
        refused(|b| b[11] = MAX_CLOCK_QUERIES + 1),
        ProtocolError::BadClockQueries(MAX_CLOCK_QUERIES + 1)
    );
    assert_eq!(
        refused(|b| {
            b[6] = 2;
            b[7] = 0;
            b[8] = 1;
            b[9] = 1;
            b[10] = 0;
        }),
        ProtocolError::BadClockQueries(8)
    );
}

/// Version 7's fields: an undefined flag, the reverse flag outside stream mode, a stream index
/// and count that do not fit.
#[test]
fn hello_refusals_of_flags_and_streams() {
    assert_eq!(refused(|b| b[7] = 16), ProtocolError::BadFlags(16));
    // One buffer (bit 2, version 9) is a reverse stream's of the generated text only: not
    // without reverse, not with a name.
    assert_eq!(refused(|b| b[7] = 4), ProtocolError::BadFlags(4));
    assert_eq!(refused(|b| b[7] = 6), ProtocolError::BadFlags(6));
    // The refusal names every flag this version defines, the one-buffer flag's rule included.
    let why = ProtocolError::BadFlags(4).to_string();
    for flag in [
        "bit 0 (nodelay)",
        "bit 1 (reverse)",
        "bit 2 (one buffer",
        "bit 3 (two-way)",
    ] {
        assert!(why.contains(flag), "{why}");
    }
    let generated = Hello {
        reverse: true,
        one_buffer: true,
        ..Hello::stream(1 << 30, 131072, "")
    };
    let bytes = encoded(&generated);
    assert_eq!(bytes[7], 6);
    assert_eq!(
        decode_hello(&bytes),
        Ok(Some((generated.clone(), bytes.len())))
    );
    let mut latency = encoded(&Hello::latency(
        5,
        clock::Codec::Binary,
        clock::Framing::Single,
        false,
    ));
    latency[7] = 4;
    assert_eq!(decode_hello(&latency), Err(ProtocolError::BadFlags(4)));
    // Two-way (bit 3, version 11) is a stream's flag only, in either direction.
    latency[7] = 8;
    assert_eq!(decode_hello(&latency), Err(ProtocolError::BadFlags(8)));
    let half = Hello {
        two_way: true,
        ..Hello::stream(1 << 20, 1024, "f.bin")
    };
    let bytes = encoded(&half);
    assert_eq!(bytes[7], 8);
    assert_eq!(decode_hello(&bytes), Ok(Some((half, bytes.len()))));
    // Reverse (bit 1) is a stream's flag only.
    assert_eq!(
        refused(|b| {
            b[6] = 2;
            b[7] = 2;
        }),
        ProtocolError::BadFlags(2)
    );
    assert_eq!(
        refused(|b| b[47] = 0),
        ProtocolError::BadStreams { index: 3, count: 0 }
    );
    assert_eq!(
        refused(|b| b[47] = MAX_STREAMS + 1),
        ProtocolError::BadStreams {
            index: 3,
            count: MAX_STREAMS + 1
        }
    );
    assert_eq!(
        refused(|b| b[46] = 4),
        ProtocolError::BadStreams { index: 4, count: 4 }
    );
}

/// A name too long, not UTF-8 or not a basename, a chunk out of range, and a latency hello's
/// name and chunk, are refused with the error that names them.
#[test]
fn hello_refusals_of_names_and_chunks() {
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
    let name = HELLO_FIXED;
    assert_eq!(refused(|b| b[name] = 0xff), ProtocolError::NameNotUtf8);
    assert!(matches!(
        refused(|b| b[name + 1] = b'/'),
        ProtocolError::BadName(_)
    ));
    assert!(matches!(
        refused(|b| b[name + 1] = 0),
        ProtocolError::BadName(_)
    ));
    assert!(matches!(
        refused(|b| b[name + 1] = b'\n'),
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
            b[7] = 0;
            b[26..30].copy_from_slice(&0u32.to_be_bytes());
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
    assert_eq!(
        latency(&|b| {
            b.truncate(HELLO_FIXED);
            b[12..14].copy_from_slice(&0u16.to_be_bytes());
            b[26..30].copy_from_slice(&1000u32.to_be_bytes());
        }),
        ProtocolError::LatencyDuration(1000)
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
    h.duration_ms = 0;
    h.reverse = false;
    h.two_way = false;
    h.session.count = MAX_STREAMS;
    h.session.index = MAX_STREAMS - 1;
    h.nodelay = true;
    h.codec = 2;
    h.framing = 2;
    h.tls = None;
    h.pace = None;
    let b = encoded(&h);
    assert_eq!(decode_hello(&b), Ok(Some((h, b.len()))));
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
    fn hello_round_trip_any(
        length: u64,
        chunk in 1..=MAX_CHUNK,
        name in "[a-zA-Z0-9._ é-]{0,60}",
        congestion in "([a-zA-Z0-9_-]{1,15})?",
        call in 0..4u8,
        batch in 1..=MAX_BATCH,
        pace: u64,
    ) {
        // A call is the generated stream's: a reverse hello with no name.
        let call = [None, Some(Call::Write), Some(Call::Writev(batch)), Some(Call::Sendfile)]
            [usize::from(call)];
        let h = Hello {
            clock_queries: (length % 65) as u8,
            reverse: !congestion.is_empty() || length % 2 == 0 || call.is_some(),
            congestion: crate::tcp::Congestion::new(&congestion),
            call,
            pace: (length % 2 == 0 && pace > 0).then_some(pace),
            ..Hello::stream(length, chunk, if call.is_some() { "" } else { &name })
        };
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

mod frames;
mod hello;
mod report;

/// Issue 34 (4): the specification is the crate's doc and names the version this crate speaks;
/// the changelog says what that version changed.
#[test]
fn the_specification_and_the_changelog_name_this_version() {
    let spec = include_str!("../../PROTOCOL.md");
    assert!(
        spec.starts_with(&format!("# The tsperf wire protocol, version {VERSION}\n")),
        "{}",
        &spec[..80]
    );
    let changelog = include_str!("../../../../CHANGELOG.md");
    assert!(
        changelog.contains(&format!("Protocol version {VERSION}:")),
        "CHANGELOG.md does not say what protocol version {VERSION} changed"
    );
}

/// Stripes are contiguous, cover the bytes exactly and differ by at most a byte; a stream of
/// a session gets its place's stripe, one of its own all of it, and no stripe is ever empty.
#[test]
fn stripes_cover_the_bytes_and_each_place_gets_its_own() {
    for (len, n) in [
        (10u64, 3u8),
        (36 << 20, 4),
        (128, 128),
        (1_000_003, 7),
        (u64::MAX, 3),
    ] {
        let s = crate::stripes(len, n).unwrap();
        assert_eq!(s.len(), usize::from(n));
        assert_eq!(s[0].0, 0);
        for w in s.windows(2) {
            assert_eq!(w[0].0 + w[0].1, w[1].0);
        }
        assert_eq!(
            s.iter().map(|x| u128::from(x.1)).sum::<u128>(),
            u128::from(len)
        );
        let (min, max) = (s.iter().map(|x| x.1).min(), s.iter().map(|x| x.1).max());
        assert!(max.unwrap() - min.unwrap() <= 1);
        for (i, stripe) in s.iter().enumerate() {
            assert_eq!(Session::of([7; 16], i, n).stripe(len), Some(*stripe));
        }
    }
    assert!(crate::stripes(3, 4).is_none());
    assert_eq!(Session::of([7; 16], 3, 4).stripe(3), None);
    assert_eq!(
        Session::of([7; 16], 4, 4).stripe(100),
        None,
        "a place past the count"
    );
    assert_eq!(Session::ALONE.stripe(5), Some((0, 5)));
    assert_eq!(Session::ALONE.stripe(0), None);
}
