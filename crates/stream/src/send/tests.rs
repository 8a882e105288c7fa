//! The generated text's checksum runs ahead of the writes: wherever a stream stops, its digest
//! is that of exactly the bytes the socket took.

use super::*;
use std::hash::Hasher as _;
use twox_hash::XxHash3_64;

/// Takes what its pattern says of each write (none, part, all), keeping what it took.
struct Taker {
    took: Vec<u8>,
    /// Each call's iovecs' lengths.
    calls: Vec<Vec<usize>>,
    seed: u64,
    /// A descriptor for the writes' bound (the generated text never uses it).
    null: std::fs::File,
}

impl std::os::fd::AsFd for Taker {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.null.as_fd()
    }
}

impl Taker {
    fn next(&mut self, n: u64) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % n
    }

    fn take(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.calls.push(bufs.iter().map(|b| b.len()).collect());
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let n = match self.next(4) {
            0 => return Err(io::ErrorKind::WouldBlock.into()),
            1 => 1 + self.next(want as u64) as usize,
            _ => want,
        };
        let mut left = n;
        for b in bufs {
            let k = left.min(b.len());
            self.took.extend_from_slice(&b[..k]);
            left -= k;
        }
        Ok(n)
    }
}

/// sendfile as the writes: what its pattern says of the file's bytes.
impl Sink for Taker {
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        let n = file.read_at(&mut buf, offset)?;
        self.take(&[io::IoSlice::new(&buf[..n])])
    }
}

impl Write for Taker {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.take(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.take(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Short writes, refused writes, passes of a timed stream, a pass across the text's end, one
/// buffer: after every write the digest is of the bytes taken, and what a stop hashes again
/// stays within two steps.
#[test]
fn the_texts_digest_is_of_what_was_sent_wherever_it_stopped() {
    let bytes: Vec<u8> = (0..300_007u32).map(|i| (i * 7 % 251) as u8).collect();
    let text = tsperf_sys::source::Held::of(&bytes);
    let mut scratch = vec![0u8; 1000];
    for (length, chunk, one_buffer) in [
        (700_001u64, 1024u32, false),
        (100_000, 10_240, false),
        (50_000, 131_072, false),
        (400_000, 1024, true),
        (3, 1, false),
    ] {
        let hello = Hello {
            one_buffer,
            ..Hello::stream(length, chunk, "")
        };
        let mut s = Sender::new(&hello);
        s.give(Generated::Text(text.clone()));
        let mut w = Taker {
            took: vec![],
            calls: vec![],
            seed: 0x9e37_79b9_7f4a_7c15 ^ length,
            null: std::fs::File::open("/dev/null").unwrap(),
        };
        let mut sum = XxHash3_64::new();
        for _ in 0..3000 {
            let before = w.took.len();
            if s.at == s.length {
                s.next_pass().unwrap();
            }
            match s.write_once(&mut w, &mut scratch) {
                Ok(()) => {}
                Err(Failure::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                Err(Failure::Source(why)) => panic!("{why}"),
            }
            assert_eq!(s.sent, w.took.len() as u64);
            sum.write(&w.took[before..]);
            assert_eq!(
                s.digest(&mut scratch).unwrap(),
                sum.finish(),
                "length {length}, chunk {chunk}, one buffer {one_buffer}: stopped at {}",
                s.sent
            );
            if let Data::Generated { sum, .. } = &s.data {
                assert!(s.at - sum.mark() <= 2 * ahead::TEXT_STEP + u64::from(chunk));
            }
        }
        assert!(s.sent > 3 * length.min(100_000), "{} sent", s.sent);
        // What went out is the text, cycled, each pass from its start.
        let period = pattern::period(&text, one_buffer, u64::from(chunk));
        let want: Vec<u8> = (0..w.took.len() as u64)
            .map(|i| period[((i % length) % period.len() as u64) as usize])
            .collect();
        assert!(w.took == want, "length {length}, chunk {chunk}");
    }
}

/// A file this end holds, sent by each call, sized and timed, the socket taking all, part or
/// none of each call: what went out is the file (its passes again and again), each call is
/// offered at most a chunk (writev: at most a batch of chunk-sized iovecs), and the digest is
/// of exactly the bytes taken, wherever the stream stopped.
#[test]
fn a_held_files_stream_is_the_file_in_chunks_and_its_digest_is_of_what_went() {
    use std::io::Write as _;
    let bytes: Vec<u8> = (0..300_007u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&bytes).unwrap();
    for (call, chunk, timed) in [
        (Call::Write, 1024u32, false),
        (Call::Write, 10_240, true),
        (Call::Writev(4), 1000, false),
        (Call::Writev(64), 102, true),
        (Call::Sendfile, 4096, false),
    ] {
        let source = tsperf_sys::source::Source::open(file.path(), chunk, 4).unwrap();
        let mut s = Sender::local(source, call, chunk, timed).unwrap();
        let turns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = turns.clone();
        // A timed stream runs about three passes.
        s.stop_when(move || timed && seen.load(std::sync::atomic::Ordering::Relaxed) > 3000);
        let mut w = Taker {
            took: vec![],
            calls: vec![],
            seed: 0x9e37_79b9_7f4a_7c15 ^ u64::from(chunk),
            null: std::fs::File::open("/dev/null").unwrap(),
        };
        let what = format!("{call:?}, chunk {chunk}, timed {timed}");
        for _ in 0..200_000 {
            turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match s.send_turn(&mut w, &mut []) {
                SendEnd::Done => break,
                SendEnd::TurnOver | SendEnd::WouldBlock => {}
                other => panic!("{what}: {other:?}"),
            }
        }
        assert_eq!(s.sent(), w.took.len() as u64, "{what}");
        if timed {
            assert!(
                w.took.len() > 2 * bytes.len(),
                "{what}: {} sent",
                w.took.len()
            );
        } else {
            assert_eq!(w.took.len(), bytes.len(), "{what}");
        }
        let want: Vec<u8> = (0..w.took.len()).map(|i| bytes[i % bytes.len()]).collect();
        assert!(w.took == want, "{what}: not the file's bytes");
        digest_and_calls_are_right(&mut s, &w, call, chunk, &what);
    }
}

/// A server's generated stream sent by the call its hello asked for (`tsclient -R --io`): it
/// wants the text (or for sendfile, its in-memory file), and what goes out is the text cycled
/// to the pass's length (one buffer: its first chunk), in calls of at most a chunk (writev: a
/// batch of chunk-sized iovecs), its digest that of exactly the bytes taken; a timed stream's
/// passes go on until its stop.
#[test]
fn a_generated_stream_goes_by_the_call_its_hello_asked_for() {
    let bytes: Vec<u8> = (0..300_007u32).map(|i| (i * 11 % 251) as u8).collect();
    let text = tsperf_sys::source::Held::of(&bytes);
    let file = Arc::new(tsperf_sys::testdata::file_of(&bytes).unwrap());
    for (call, chunk, length, one_buffer, timed) in [
        (Call::Write, 1024u32, 700_001u64, false, false),
        (Call::Writev(8), 1000, 100_000, true, false),
        (Call::Writev(64), 102, 400_000, false, true),
        (Call::Sendfile, 4096, 650_000, false, false),
        (Call::Sendfile, 4096, 50_000, true, false),
    ] {
        let hello = Hello {
            reverse: true,
            one_buffer,
            call: Some(call),
            duration_ms: if timed { 60_000 } else { 0 },
            ..Hello::stream(length, chunk, "")
        };
        let mut s = Sender::new(&hello);
        let what = format!("{call:?}, chunk {chunk}, one buffer {one_buffer}, timed {timed}");
        match s.wants() {
            Some(Wants::File) => s.give(Generated::File(Ok(file.clone()))),
            Some(Wants::Text) => s.give(Generated::Text(text.clone())),
            None => panic!("{what}: wants nothing"),
        }
        assert_eq!(s.wants(), None, "{what}");
        assert!(
            matches!(s.data, Data::Local(_)),
            "{what}: not a held source"
        );
        let w = turned_until_done(&mut s, 0x9e37_79b9_7f4a_7c15 ^ length, timed, &what);
        if timed {
            assert!(
                w.took.len() as u64 > 2 * length,
                "{what}: {} sent",
                w.took.len()
            );
        } else {
            assert_eq!(w.took.len() as u64, length, "{what}");
        }
        let period = if one_buffer {
            &bytes[..chunk as usize]
        } else {
            &bytes[..]
        };
        let want: Vec<u8> = (0..w.took.len() as u64)
            .map(|i| period[((i % length) % period.len() as u64) as usize])
            .collect();
        assert!(w.took == want, "{what}: not the text");
        digest_and_calls_are_right(&mut s, &w, call, chunk, &what);
        assert!(!s.changed(), "{what}: the text's file did not change");
    }
    // A file that could not be made cuts the stream off with why.
    let hello = Hello {
        reverse: true,
        call: Some(Call::Sendfile),
        ..Hello::stream(1000, 100, "")
    };
    let mut s = Sender::new(&hello);
    s.give(Generated::File(Err("no memfd here".into())));
    match s.send_turn(&mut taker(1), &mut []) {
        SendEnd::Source(e) => assert!(format!("{e:#}").contains("no memfd here"), "{e:#}"),
        other => panic!("{other:?}"),
    }
}

/// The digest is that of exactly the bytes `w` took, and each call was offered at most a chunk
/// (writev: at most a batch of chunk-sized iovecs).
fn digest_and_calls_are_right(s: &mut Sender, w: &Taker, call: Call, chunk: u32, what: &str) {
    let mut sum = XxHash3_64::new();
    sum.write(&w.took);
    assert_eq!(s.digest(&mut []).unwrap(), sum.finish(), "{what}");
    let most = match call {
        Call::Writev(batch) => batch as usize,
        _ => 1,
    };
    for c in &w.calls {
        assert!(
            c.len() <= most && c.iter().all(|&n| n <= chunk as usize),
            "{what}: {c:?}"
        );
    }
}

fn taker(seed: u64) -> Taker {
    Taker {
        took: vec![],
        calls: vec![],
        seed,
        null: std::fs::File::open("/dev/null").unwrap(),
    }
}

/// Turns `s` until its data is done (a timed stream: stopped after 3000 turns, about three
/// passes) into a [`Taker`] of `seed`.
fn turned_until_done(s: &mut Sender, seed: u64, timed: bool, what: &str) -> Taker {
    let turns = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = turns.clone();
    s.stop_when(move || timed && seen.load(std::sync::atomic::Ordering::Relaxed) > 3000);
    let mut w = taker(seed);
    for _ in 0..200_000 {
        turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match s.send_turn(&mut w, &mut []) {
            SendEnd::Done => return w,
            SendEnd::TurnOver | SendEnd::WouldBlock => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    panic!("{what}: not done in 200,000 turns")
}

/// A driver that samples what went (the client's bar and `--interval`) can make turns shorter
/// than an event loop's: a turn ends once its bytes reach the driver's bound, so the count it
/// reads between turns is never further behind than that.
#[test]
fn a_turn_ends_at_the_drivers_bound() {
    use std::io::Write as _;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&vec![b'x'; 4 << 20]).unwrap();
    let source = tsperf_sys::source::Source::open(file.path(), 10_240, 1).unwrap();
    let mut s = Sender::local(source, Call::Write, 10_240, false)
        .unwrap()
        .turns_of(64 << 10);
    // A socket that takes everything it is given.
    struct All(std::fs::File);
    impl Write for All {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl std::os::fd::AsFd for All {
        fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
            self.0.as_fd()
        }
    }
    impl Sink for All {}
    let mut w = All(std::fs::File::open("/dev/null").unwrap());
    let mut turns = 0;
    loop {
        let before = s.sent();
        let end = s.send_turn(&mut w, &mut []);
        assert!(
            s.sent() - before < (64 << 10) + 10_240,
            "a turn of {}",
            s.sent() - before
        );
        turns += 1;
        match end {
            SendEnd::TurnOver => {}
            SendEnd::Done => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.sent(), 4 << 20);
    assert!(turns >= (4 << 20) / ((64 << 10) + 10_240), "{turns} turns");
}

/// A socket that takes one `sendfile` of a few bytes, then nothing more: a client that reads a
/// trickle, or nothing.
struct Trickle {
    took: u64,
    null: std::fs::File,
}

impl std::os::fd::AsFd for Trickle {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.null.as_fd()
    }
}

impl Write for Trickle {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for Trickle {
    fn sendfile(&mut self, _: &std::fs::File, _: u64, len: usize) -> io::Result<usize> {
        if self.took > 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.took = len.min(4096) as u64;
        Ok(self.took as usize)
    }
}

/// A server's sendfile stream hashes its text no further than the checksum's lead past what
/// its client took: a client that asks for 64 GiB and reads a trickle costs the server the
/// hashing of what it read, not of the whole stream on a thread of its own.
#[test]
fn a_servers_sendfile_checksum_keeps_within_its_lead_of_what_its_client_took() {
    use tsperf_sys::source::CHECKSUM_LEAD;
    let bytes: Vec<u8> = (0..300_007u32).map(|i| (i * 7 % 251) as u8).collect();
    let file = Arc::new(tsperf_sys::testdata::file_of(&bytes).unwrap());
    let hello = Hello {
        reverse: true,
        call: Some(Call::Sendfile),
        ..Hello::stream(4 * CHECKSUM_LEAD, 4096, "")
    };
    let mut s = Sender::new(&hello);
    s.give(Generated::File(Ok(file)));
    let mut sink = Trickle {
        took: 0,
        null: std::fs::File::open("/dev/null").unwrap(),
    };
    assert!(matches!(
        s.send_turn(&mut sink, &mut []),
        SendEnd::WouldBlock
    ));
    assert_eq!(s.sent(), 4096);
    let Data::Local(local) = &s.data else {
        panic!("not a held source");
    };
    let sum = local.checksum().expect("sendfile's checksum runs");
    let by = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !sum.waiting() && !sum.finished() && std::time::Instant::now() < by {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        sum.hashed() <= 4096 + CHECKSUM_LEAD,
        "{} bytes hashed for 4096 taken",
        sum.hashed()
    );
}
