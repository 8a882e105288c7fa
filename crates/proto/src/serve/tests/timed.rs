//! Timed runs (version 7): the end trailer, the cut-off past the time, and what a server does
//! not offer, refused naming the flag.

use super::*;

fn timed_hello(ms: u32) -> Vec<u8> {
    hello_bytes(&Hello {
        duration_ms: ms,
        ..Hello::stream(10, 1024, "t.txt")
    })
}

/// A timed run ends where the client closes its direction: its last 16 bytes are the end
/// trailer, whose length must be what arrived before it; then the report is due.
#[test]
fn a_timed_run_ends_with_its_end_trailer() {
    let now = Instant::now();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &timed_hello(2000));
    let _ = c.data_turn(DataEnd::More, 100, now);
    let end = crate::end::End {
        length: 100,
        digest: 77,
    };
    let step = c.data_turn(DataEnd::Ended(Some(end)), 16, now);
    assert!(
        matches!(step.effect, Some(Effect::Finish { digest: 77 })),
        "{step:?}"
    );
    assert_eq!(c.phase(), Phase::Finish);

    // A trailer that counts otherwise, or none, is the client's failure, told.
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &timed_hello(2000));
    let step = c.data_turn(DataEnd::Ended(Some(end)), 50, now);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "the client's end trailer says it sent 100 bytes: 34 arrived"),
        "{step:?}"
    );
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &timed_hello(2000));
    let step = c.data_turn(DataEnd::Ended(None), 5, now);
    assert!(
        matches!(step.end, Some(Outcome::Incomplete(ref r)) if r.contains("5 bytes of a timed run") && r.contains("before its end trailer")),
        "{step:?}"
    );
}

/// A timed run that goes on past its time and the grace is cut off, even while data flows.
#[test]
fn a_timed_run_past_its_time_is_cut_off() {
    let now = Instant::now();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &timed_hello(1500));
    let _ = c.data_turn(DataEnd::More, 10, now);
    let until = now + Duration::from_millis(1500) + TIMED_GRACE;
    assert_eq!(
        c.deadline(),
        now + Duration::from_secs(7),
        "the idle timeout first"
    );
    let late = now + Duration::from_secs(5);
    let _ = c.data_turn(DataEnd::More, 10, late);
    assert_eq!(
        c.deadline(),
        until,
        "data keeps coming: the run's end is the deadline"
    );
    let step = c.timed_out(false, false);
    assert!(
        matches!(step.send, Some(Frame::Abort(ref r)) if r == "the timed run of 1.5 s went on 10 s past its time without its end"),
        "{step:?}"
    );
}

/// What the server does not offer, or allows no longer, is refused at the hello with the flag
/// named.
#[test]
fn modes_not_offered_and_runs_too_long_are_refused_naming_the_flag() {
    let now = Instant::now();
    let refusal = |h: Hello| {
        let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
        match feed(&mut c, &hello_bytes(&h)).send {
            Some(Frame::Refuse { code, reason }) => (code, reason),
            other => panic!("{other:?}"),
        }
    };
    let (code, reason) = refusal(Hello {
        duration_ms: 3_600_001,
        ..Hello::stream(10, 1024, "t.txt")
    });
    assert_eq!(code, RefuseCode::Limit);
    assert!(
        reason.contains("--max-time") && reason.contains("3600.001 s"),
        "{reason}"
    );
    // A timed run is bounded by its time, not by --max-bytes (nothing of it is kept).
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = feed(
        &mut c,
        &hello_bytes(&Hello {
            duration_ms: 1000,
            ..Hello::stream(1 << 40, 1024, "t.txt")
        }),
    );
    assert!(
        matches!(step.effect, Some(Effect::Begin { .. })),
        "{step:?}"
    );
}

fn reverse_hello(length: u64) -> Vec<u8> {
    hello_bytes(&Hello {
        reverse: true,
        ..Hello::stream(length, 1024, "")
    })
}

/// A reverse stream is accepted with its pass length, goes straight to sending (no clock
/// queries asked), is not idle while the client takes bytes, and is over once everything is
/// sent; a client that takes nothing is cut off at the idle timeout, with nothing to tell it
/// in-band.
#[test]
fn a_reverse_stream_sends_then_ends() {
    let now = Instant::now();
    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let step = accepted(&mut c, &reverse_hello(5000));
    assert!(
        matches!(step.send, Some(Frame::Accept { length: 5000, .. })),
        "{step:?}"
    );
    assert_eq!(c.phase(), Phase::Send);
    let later = now + Duration::from_secs(3);
    c.sending(4000, later);
    assert_eq!(c.deadline(), later + Duration::from_secs(7));
    let step = c.sent_all();
    assert_eq!(step.end, Some(Outcome::Complete));
    assert_eq!(c.phase(), Phase::Done);

    let mut c = Conversation::new(ServerIo::EventLoop, &policy(), None, now);
    let _ = accepted(&mut c, &reverse_hello(5000));
    c.sending(100, now);
    let step = c.timed_out(false, false);
    assert!(
        step.send.is_none(),
        "the data direction is the client's to read"
    );
    assert!(
        matches!(step.end, Some(Outcome::Incomplete(ref r)) if r == "sent 100 bytes of a reverse stream, then the client took no data for 7 s"),
        "{step:?}"
    );
}

/// What a reverse hello may not ask: no bytes, more than --max-bytes, a server log sink, a
/// file by name; and nothing at all of a server started with --no-reverse.
#[test]
fn reverse_refusals() {
    let now = Instant::now();
    let refusal = |p: &Policy, h: Hello| {
        let mut c = Conversation::new(ServerIo::EventLoop, p, None, now);
        match feed(&mut c, &hello_bytes(&h)).send {
            Some(Frame::Refuse { code, reason }) => (code, reason),
            other => panic!("{other:?}"),
        }
    };
    let rev = |length, name: &str| Hello {
        reverse: true,
        ..Hello::stream(length, 1024, name)
    };
    let p = policy();
    assert_eq!(refusal(&p, rev(0, "")).0, RefuseCode::Hello);
    let (code, why) = refusal(&p, rev((1 << 30) + 1, ""));
    assert_eq!(code, RefuseCode::Limit);
    assert!(why.contains("--max-bytes"), "{why}");
    let (code, why) = refusal(&p, rev(10, "tsl.txt"));
    assert_eq!(code, RefuseCode::Unoffered);
    assert!(why.contains("serves no files"), "{why}");
    let (code, _) = refusal(
        &p,
        Hello {
            log: Some(LogMode::Stdout),
            ..rev(10, "")
        },
    );
    assert_eq!(code, RefuseCode::Sink);
    let closed = Policy {
        reverse: false,
        ..policy()
    };
    let (code, why) = refusal(&closed, rev(10, ""));
    assert_eq!(code, RefuseCode::Unoffered);
    assert!(why.contains("--no-reverse"), "{why}");
}

/// A reverse stream asked over TLS by sendfile is served only by a server whose TLS records
/// the kernel seals (`--ktls`); another refuses it, naming the flag and the other calls.
#[test]
fn sendfile_through_tls_needs_the_servers_kernel_tls() {
    use crate::Call;
    use crate::tls::Cipher;
    let hello = Hello {
        reverse: true,
        tls: Some(Cipher::Aes128Gcm),
        call: Some(Call::Sendfile),
        ..Hello::stream(1 << 20, 10240, "")
    };
    let with_tls = |kernel| Policy {
        tls_cert: Some([7; 32]),
        tls_kernel: kernel,
        ..policy()
    };
    let (code, why) = admit(&hello, &with_tls(false)).unwrap_err();
    assert_eq!(code, RefuseCode::Unoffered);
    assert!(
        why.contains("--ktls") && why.contains("--io write"),
        "{why}"
    );
    assert!(admit(&hello, &with_tls(true)).is_ok());
    let clear = Hello { tls: None, ..hello };
    assert!(admit(&clear, &with_tls(false)).is_ok());
}
