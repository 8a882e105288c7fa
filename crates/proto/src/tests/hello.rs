//! The hello's fields a stream asks the server by: a reverse stream's congestion control
//! (version 10), send call (version 12) and pace (version 15), a forward stream's save mode
//! (version 14).

use super::*;

/// Version 12: a hello asking for the generated stream may say how the server hands its chunks
/// to the kernel (write, writev of a batch, sendfile); none is the server's own way. A call in
/// any other hello, an unknown code, a batch out of range or with another call, and sendfile
/// for a timed stream are refused.
#[test]
fn hello_carries_the_senders_call() {
    let asking = |call| Hello {
        reverse: true,
        call,
        ..Hello::stream(1 << 20, 10240, "")
    };
    for call in [
        None,
        Some(Call::Write),
        Some(Call::Writev(1)),
        Some(Call::Writev(MAX_BATCH)),
        Some(Call::Sendfile),
    ] {
        let h = asking(call);
        let bytes = encoded(&h);
        assert_eq!(bytes.len(), HELLO_FIXED);
        assert_eq!(decode_hello(&bytes), Ok(Some((h, HELLO_FIXED))), "{call:?}");
    }
    let writev = encoded(&asking(Some(Call::Writev(64))));
    assert_eq!(&writev[49..52], &[2, 0, 64]);
    let bad = |call: Option<Call>, edit: &dyn Fn(&mut Hello)| {
        let mut h = asking(call);
        edit(&mut h);
        decode_hello(&encoded(&h))
    };
    for (what, got) in [
        (
            "a forward stream",
            bad(Some(Call::Write), &|h| h.reverse = false),
        ),
        (
            "a served file",
            bad(Some(Call::Write), &|h| h.name = "f.bin".into()),
        ),
        ("writev of none", bad(Some(Call::Writev(0)), &|_| ())),
        (
            "writev of too many",
            bad(Some(Call::Writev(MAX_BATCH + 1)), &|_| ()),
        ),
        (
            "sendfile of a timed stream",
            bad(Some(Call::Sendfile), &|h| h.duration_ms = 1000),
        ),
    ] {
        assert!(
            matches!(got, Err(ProtocolError::BadCall(..))),
            "{what}: {got:?}"
        );
    }
    let mut unknown = encoded(&asking(None));
    unknown[49] = 4;
    assert_eq!(decode_hello(&unknown), Err(ProtocolError::BadCall(4, 0)));
    let mut batch_without_writev = encoded(&asking(Some(Call::Write)));
    batch_without_writev[51] = 8;
    assert_eq!(
        decode_hello(&batch_without_writev),
        Err(ProtocolError::BadCall(1, 8))
    );
    assert!(
        ProtocolError::BadCall(4, 0)
            .to_string()
            .contains("writev of 1 to 1024")
    );
}

/// Version 10: a hello that asks the server to send may name the TCP congestion control to
/// send with; the name travels after the file's, and a bad one is refused as soon as its length
/// or its bytes show it, as is one in a hello the server does not send for.
#[test]
fn hello_carries_the_senders_congestion_control() {
    use crate::tcp::Congestion;
    let h = Hello {
        reverse: true,
        congestion: Congestion::new("cubic"),
        ..Hello::stream(1 << 20, 10240, "f.bin")
    };
    let bytes = encoded(&h);
    assert_eq!(bytes[48], 5);
    assert_eq!(&bytes[HELLO_FIXED..], b"f.bincubic");
    assert_eq!(decode_hello(&bytes), Ok(Some((h.clone(), bytes.len()))));
    assert_eq!(decode_hello(&bytes[..bytes.len() - 1]), Ok(None));
    let plain = Hello {
        reverse: true,
        ..Hello::stream(1 << 20, 10240, "")
    };
    let bytes = encoded(&plain);
    assert_eq!((bytes.len(), bytes[48]), (HELLO_FIXED, 0));
    assert_eq!(decode_hello(&bytes), Ok(Some((plain, HELLO_FIXED))));
    assert_eq!(
        refused(|b| b[48] = 16),
        ProtocolError::CongestionTooLong(16)
    );
    let mut bad = encoded(&h);
    *bad.last_mut().unwrap() = b'/';
    assert_eq!(
        decode_hello(&bad),
        Err(ProtocolError::BadCongestion("cubi/".into()))
    );
    // The receiving end's algorithm is not the stream's: a forward or latency hello with one is
    // refused.
    let forward = Hello {
        congestion: Congestion::new("bbr"),
        ..Hello::stream(1 << 20, 10240, "f.bin")
    };
    assert_eq!(
        decode_hello(&encoded(&forward)),
        Err(ProtocolError::BadCongestion("bbr".into()))
    );
    assert!(
        ProtocolError::CongestionTooLong(16)
            .to_string()
            .contains("at most 15")
    );
    for good in ["cubic", "bbr", "reno", "a", "x_y-1", "abcdefghijklmno"] {
        assert_eq!(
            Congestion::new(good).map(|c| c.to_string()),
            Some(good.into())
        );
    }
    for bad in ["", "abcdefghijklmnop", "cu bic", "cubic\0", "é", "a/b"] {
        assert_eq!(Congestion::new(bad), None, "{bad:?}");
    }
}

/// Version 15: a hello that asks the server to send may ask it to pace its sends, in bytes a
/// second (`tsclient -R -b`); 0 is unpaced. A pace in a hello the server does not send for (a
/// forward stream, a latency session) is refused.
#[test]
fn hello_carries_the_senders_pace() {
    let h = Hello {
        reverse: true,
        pace: Some(5_000_000),
        ..Hello::stream(1 << 20, 10240, "")
    };
    let bytes = encoded(&h);
    assert_eq!(bytes[54..62], 5_000_000u64.to_be_bytes());
    assert_eq!(decode_hello(&bytes), Ok(Some((h, HELLO_FIXED))));
    let forward = Hello {
        pace: Some(1),
        ..Hello::stream(1 << 20, 10240, "f.bin")
    };
    assert_eq!(
        decode_hello(&encoded(&forward)),
        Err(ProtocolError::BadPace(1))
    );
    let latency = Hello {
        pace: Some(7),
        ..Hello::latency(10, clock::Codec::Binary, clock::Framing::Single, true)
    };
    assert_eq!(
        decode_hello(&encoded(&latency)),
        Err(ProtocolError::BadPace(7))
    );
    assert!(ProtocolError::BadPace(1).to_string().contains("reverse"));
}

/// Version 14: a sized forward stream of a named file may ask how the server writes it to its
/// disk (buffered, durable, direct); none is the server's own way. A save mode in a reverse,
/// timed, unnamed or latency hello, and an unknown code, are refused.
#[test]
fn hello_carries_the_save_mode() {
    let asking = |save| Hello {
        save,
        ..Hello::stream(1 << 20, 10240, "f.bin")
    };
    for save in [
        None,
        Some(SaveMode::Buffered),
        Some(SaveMode::Durable),
        Some(SaveMode::Direct),
        Some(SaveMode::Discard),
    ] {
        let h = asking(save);
        let bytes = encoded(&h);
        assert_eq!(bytes.len(), HELLO_FIXED + 5);
        assert_eq!(
            decode_hello(&bytes),
            Ok(Some((h, HELLO_FIXED + 5))),
            "{save:?}"
        );
    }
    assert_eq!(encoded(&asking(Some(SaveMode::Direct)))[52], 3);
    let bad = |edit: &dyn Fn(&mut Hello)| {
        let mut h = asking(Some(SaveMode::Durable));
        edit(&mut h);
        decode_hello(&encoded(&h))
    };
    for (what, got) in [
        ("a reverse stream", bad(&|h| h.reverse = true)),
        ("a timed stream", bad(&|h| h.duration_ms = 1000)),
        ("an unnamed stream", bad(&|h| h.name.clear())),
        (
            "a latency session",
            bad(&|h| {
                *h = Hello {
                    save: h.save,
                    ..Hello::latency(10, clock::Codec::Binary, clock::Framing::Single, true)
                }
            }),
        ),
    ] {
        assert_eq!(got, Err(ProtocolError::BadSave(2)), "{what}");
    }
    let mut unknown = encoded(&asking(None));
    unknown[52] = 5;
    assert_eq!(decode_hello(&unknown), Err(ProtocolError::BadSave(5)));
    assert!(
        ProtocolError::BadSave(5)
            .to_string()
            .contains("4 (not written)")
    );
}

/// Version 14: a stream's hello may ask for its data over TLS with a cipher suite, either way;
/// not a latency session's, not a stream the server sends by sendfile, not an unknown suite.
#[test]
fn hello_carries_the_cipher_suite() {
    use crate::tls::Cipher;
    for tls in [None].into_iter().chain(Cipher::ALL.map(Some)) {
        for reverse in [false, true] {
            let h = Hello {
                tls,
                reverse,
                ..Hello::stream(1 << 20, 10240, "")
            };
            let bytes = encoded(&h);
            assert_eq!(bytes[53], tls.map_or(0, |c| c as u8 + 1));
            assert_eq!(decode_hello(&bytes), Ok(Some((h, HELLO_FIXED))), "{tls:?}");
        }
    }
    let sendfile = Hello {
        tls: Some(Cipher::Aes128Gcm),
        reverse: true,
        call: Some(Call::Sendfile),
        ..Hello::stream(1 << 20, 10240, "")
    };
    // Sendfile through TLS is the server's to grant (kernel TLS: --ktls), not the wire's.
    assert_eq!(
        decode_hello(&encoded(&sendfile)),
        Ok(Some((sendfile.clone(), HELLO_FIXED)))
    );
    let latency = Hello {
        tls: Some(Cipher::Chacha20Poly1305),
        ..Hello::latency(10, clock::Codec::Binary, clock::Framing::Single, true)
    };
    assert_eq!(
        decode_hello(&encoded(&latency)),
        Err(ProtocolError::BadTls(3))
    );
    let mut unknown = encoded(&Hello::stream(1, 1, "x"));
    unknown[53] = 4;
    assert_eq!(decode_hello(&unknown), Err(ProtocolError::BadTls(4)));
    assert_eq!(Cipher::named("aes256gcm"), Some(Cipher::Aes256Gcm));
    assert_eq!(Cipher::Aes256Gcm.suite(), "TLS13_AES_256_GCM_SHA384");
}

/// Version 14: a save may be measured and not kept (flag bit 4): the server writes and syncs
/// the file as `save` says, then removes it, taking no name. Only with a save mode that writes.
#[test]
fn a_save_may_be_measured_and_not_kept() {
    let h = Hello {
        save: Some(SaveMode::Durable),
        measure_save: true,
        ..Hello::stream(1 << 20, 10240, "f.bin")
    };
    let bytes = encoded(&h);
    assert_eq!(bytes[7] & 16, 16);
    assert_eq!(decode_hello(&bytes), Ok(Some((h.clone(), bytes.len()))));
    for save in [None, Some(SaveMode::Discard)] {
        let bad = Hello { save, ..h.clone() };
        assert!(
            matches!(
                decode_hello(&encoded(&bad)),
                Err(ProtocolError::BadFlags(_))
            ),
            "{save:?}"
        );
    }
}
