//! Frames: every kind round-trips, every refusal names what it refused.

use super::*;

/// Every frame kind decodes to itself, and every proper prefix asks for more bytes.
#[test]
fn frame_round_trips() {
    for f in [
        Frame::Accept {
            read_size: 102,
            server_io: ServerIo::Blocking,
            log: LogMode::Stdout,
            stdout: StdoutKind::Terminal,
            length: 0,
            tls: None,
        },
        Frame::Accept {
            read_size: 1,
            server_io: ServerIo::EventLoop,
            log: LogMode::None,
            stdout: StdoutKind::Closed,
            length: u64::MAX,
            tls: Some(tls::Identity {
                cert_sha256: [1; 32],
                proof: Some([2; 32]),
            }),
        },
        Frame::Accept {
            read_size: 1,
            server_io: ServerIo::EventLoop,
            log: LogMode::None,
            stdout: StdoutKind::Closed,
            length: 7,
            tls: Some(tls::Identity {
                cert_sha256: [3; 32],
                proof: None,
            }),
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
    let mut accept = vec![1, 0, 80, 0, 0, 0, 1, 7];
    accept.resize(3 + 80, 0);
    assert_eq!(
        decode_frame(&accept),
        Err(ProtocolError::BadEnum {
            field: "server_io",
            value: 7
        })
    );
    let mut accept = vec![1, 0, 80, 0, 0, 0, 1, 1, 0, 0];
    accept.resize(3 + 80, 0);
    accept[3 + 15] = 3;
    assert_eq!(
        decode_frame(&accept),
        Err(ProtocolError::BadEnum {
            field: "tls",
            value: 3
        })
    );
    assert_eq!(
        decode_frame(&padded(&[
            1, 0, 80, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0
        ])),
        Err(ProtocolError::BadEnum {
            field: "log",
            value: 3
        })
    );
    assert_eq!(
        decode_frame(&padded(&[
            1, 0, 80, 0, 0, 0, 1, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0
        ])),
        Err(ProtocolError::BadEnum {
            field: "stdout",
            value: 8
        })
    );
}

/// An Accept's first bytes, the rest of its 80-byte body zeros.
fn padded(head: &[u8]) -> Vec<u8> {
    let mut v = head.to_vec();
    v.resize(3 + 80, 0);
    v
}

/// Frames of an older layout, unknown refusal codes and strings that disagree with their
/// bodies are refused.
#[test]
fn frame_refusals_of_old_layouts_and_strings() {
    // The version 2 Accept (6 bytes of body) is not a version 3 one, nor version 6's (7) a
    // version 7 one.
    assert!(matches!(
        decode_frame(&[1, 0, 6, 0, 0, 0, 1, 0, 0]),
        Err(ProtocolError::BadBodyLength { tag: 1, .. })
    ));
    assert!(matches!(
        decode_frame(&[1, 0, 7, 0, 0, 0, 1, 0, 0, 0]),
        Err(ProtocolError::BadBodyLength { tag: 1, .. })
    ));
    let mut short_time = vec![6, 0, 23];
    short_time.resize(3 + 23, 0);
    assert!(matches!(
        decode_frame(&short_time),
        Err(ProtocolError::BadBodyLength { tag: 6, .. })
    ));
    assert_eq!(decode_frame(&[9, 0, 0]), Err(ProtocolError::BadTag(9)));
    assert!(matches!(
        decode_frame(&[8, 0, 0]),
        Err(ProtocolError::BadBodyLength { tag: 8, .. })
    ));
    assert_eq!(
        decode_frame(&[7, 0, 3, 9, 0, 0]),
        Err(ProtocolError::BadEnum {
            field: "refusal code",
            value: 9
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
