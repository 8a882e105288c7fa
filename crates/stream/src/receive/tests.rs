//! The engine's receiving, alone, reads from in-memory sources and no socket: every byte
//! counted and checksummed once, in any read size, never past the announced end; the time
//! split whole.

use super::*;
use std::io::{self, Read};
use tsperf_proto::{Hello, ServerIo};

/// A receiver of `h`'s transfer, read `read_size` bytes at a time, no log.
fn receiver(h: &Hello, read_size: u32) -> Receiver {
    Receiver::new((!h.closed_end()).then_some(h.length), read_size, NoLog)
}

/// A log that takes its lines and keeps none, of a given sink.
struct Lines(LogMode);

impl ReadLog for Lines {
    fn mode(&self) -> LogMode {
        self.0
    }
    fn read(&mut self, _: u64, _: usize, _: u64) {}
    fn end(&mut self, _: u64, _: u64, _: &str) {}
    fn written(&self) -> u32 {
        0
    }
    fn lost(&self) -> u32 {
        0
    }
}

/// The time split covers the transfer from its first byte to the last boundary exactly, with
/// no gap and no overlap, logged or not; a logged transfer's time is divided between read and
/// log (most of its reads timed as one, every SPLIT_SAMPLE-th apart).
#[test]
fn time_split_covers_first_byte_to_last_boundary() {
    for log in [LogMode::None, LogMode::File] {
        let reads = 5 * SPLIT_SAMPLE + 3;
        let mut rx: Receiver<Lines> = Receiver::new(Some(reads * 10), 10, Lines(log));
        for i in 0..reads {
            if i % 7 == 0 {
                rx.lap(TimePhase::Wait);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            std::thread::sleep(std::time::Duration::from_micros(20));
            rx.count(10);
            rx.hash(&[0; 10]).unwrap();
        }
        assert!(rx.is_complete());
        let (first, last) = (rx.first.unwrap().0, rx.lap_at.unwrap());
        let split = rx.split();
        assert_eq!(
            split.total_ns(),
            last.duration_since(first).as_nanos() as u64,
            "{log:?}: {split:?}"
        );
        assert!(
            split.read_ns > 0 && split.hash_ns > 0 && split.wait_ns > 0,
            "{split:?}"
        );
        assert_eq!(split.log_ns > 0, log != LogMode::None, "{log:?}: {split:?}");
        assert_eq!(rx.report(ServerIo::EventLoop, 0).split, split);
    }
}

/// Reads without turn limits: until complete, closed, `WouldBlock`, an error, or a new
/// low-water mark.
fn read_all<R: Read>(block: &mut Block, src: &mut R, rx: &mut Receiver) -> ReadEnd {
    block.read_some(src, rx, u64::MAX, usize::MAX)
}

fn hello(length: u64) -> Hello {
    Hello::stream(length, 102, "x")
}

/// Hands out its data in pieces, saying WouldBlock between pieces, like a non-blocking socket.
struct Trickle<'a> {
    data: &'a [u8],
    piece: usize,
    asked: Vec<usize>,
    block_next: bool,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.asked.push(buf.len());
        if std::mem::take(&mut self.block_next) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.block_next = true;
        let n = buf.len().min(self.piece).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The digest over many pieces equals a one-shot hash, whatever the read size, and no read
/// asks for more than the read size or past the announced end.
#[test]
fn digest_matches_one_shot() {
    let data: Vec<u8> = (0..700_001u32).map(|i| (i * 7 % 256) as u8).collect();
    for rs in [1u32, 102, 1024, 10240, 300_000] {
        let mut rx = receiver(&hello(data.len() as u64), rs);
        let mut block = Block::new(rs as usize, data.len() as u64);
        let mut src = Trickle {
            data: &data,
            piece: 5000,
            asked: vec![],
            block_next: false,
        };
        loop {
            match read_all(&mut block, &mut src, &mut rx) {
                ReadEnd::Complete => break,
                ReadEnd::WouldBlock | ReadEnd::TurnOver => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(src.asked.iter().all(|&n| n > 0 && n <= rs as usize));
        let rep = rx.report(ServerIo::Blocking, 0);
        assert_eq!(rep.bytes, data.len() as u64);
        assert_eq!(
            rep.digest,
            xxhash_rust::xxh3::xxh3_64(&data),
            "read size {rs}"
        );
        assert!(rep.first_byte_unix_us > 0 && rep.last_byte_unix_us >= rep.first_byte_unix_us);
    }
}

/// One shared block serves two interleaved transfers without mixing their digests.
#[test]
fn shared_block_keeps_transfers_apart() {
    let (a, b) = (vec![b'a'; 100_000], vec![b'b'; 70_000]);
    let mut ra = receiver(&hello(a.len() as u64), 1024);
    let mut rb = receiver(&hello(b.len() as u64), 10240);
    let mut sa = Trickle {
        data: &a,
        piece: 3000,
        asked: vec![],
        block_next: false,
    };
    let mut sb = Trickle {
        data: &b,
        piece: 7000,
        asked: vec![],
        block_next: false,
    };
    let mut block = Block::new(1024, u64::MAX);
    while !(ra.is_complete() && rb.is_complete()) {
        read_all(&mut block, &mut sa, &mut ra);
        read_all(&mut block, &mut sb, &mut rb);
    }
    let digest = |r: &Receiver| r.report(ServerIo::EventLoop, 0).digest;
    assert_eq!(digest(&ra), xxhash_rust::xxh3::xxh3_64(&a));
    assert_eq!(digest(&rb), xxhash_rust::xxh3::xxh3_64(&b));
}

/// A source that never runs dry (a client always ahead of the server) ends a turn after
/// TURN_READS small reads, or TURN_BYTES of large ones, or when the low-water mark changes
/// (after the first byte, and entering the tail); turn after turn completes the transfer
/// with the right digest.
#[test]
fn turns_end_on_a_source_that_never_runs_dry() {
    let len = 3 * TURN_BYTES as u64 + 5;
    let mut small = receiver(&hello(len), 16);
    let mut block = Block::new(16, len);
    let mut src = io::repeat(b'r');
    assert!(matches!(
        block.read_turn(&mut src, &mut small),
        ReadEnd::TurnOver
    ));
    assert_eq!(small.bytes(), 16 * TURN_READS);

    let rs = 256 << 10;
    let mut rx = receiver(&hello(len), rs as u32);
    // A path of large segments (loopback), where bulk transfers use the low-water mark.
    rx.large_segments = true;
    let mut block = Block::new(rs, len);
    let mut turns = Vec::new();
    loop {
        let before = rx.bytes();
        let end = block.read_turn(&mut src, &mut rx);
        turns.push(rx.bytes() - before);
        match end {
            ReadEnd::TurnOver => {}
            ReadEnd::Complete => break,
            other => panic!("{other:?}"),
        }
    }
    let (rs, mib) = (rs as u64, TURN_BYTES as u64);
    // The first read sets the mark; 1 MiB turns; the read that enters the tail; the rest.
    assert_eq!(turns, [rs, mib, mib, 3 * rs, 5]);
    let digest = rx.report(ServerIo::EventLoop, 0).digest;
    assert_eq!(
        digest,
        xxhash_rust::xxh3::xxh3_64(&vec![b'r'; len as usize])
    );
}

/// The receiver never asks for more than the bytes still announced.
#[test]
fn never_reads_past_announced_length() {
    let mut r = receiver(&hello(150), 102);
    assert_eq!(r.want(), 102);
    r.count(100);
    assert_eq!(r.want(), 50);
    r.count(50);
    assert!(r.is_complete());
    assert_eq!(r.want(), 0);
}

/// An empty transfer is complete at once and reports zero bytes and no timestamps.
#[test]
fn empty_transfer() {
    let r = receiver(&hello(0), 1024);
    assert!(r.is_complete());
    let rep = r.report(ServerIo::Blocking, 0);
    assert_eq!((rep.bytes, rep.reads, rep.first_byte_unix_us), (0, 0, 0));
    assert_eq!(rep.digest, xxhash_rust::xxh3::xxh3_64(&[]));
}

/// A transfer cut short reports what arrived, with the digest of exactly those bytes.
#[test]
fn eof_reports_partial() {
    let mut rx = receiver(&hello(1000), 64);
    let mut block = Block::new(64, 1000);
    let mut src: &[u8] = b"0123456789";
    assert!(matches!(
        read_all(&mut block, &mut src, &mut rx),
        ReadEnd::Eof
    ));
    let rep = rx.report(ServerIo::Blocking, 0);
    assert_eq!(rep.bytes, 10);
    assert_eq!(rep.digest, xxhash_rust::xxh3::xxh3_64(b"0123456789"));
    assert_eq!(rep.last_byte_unix_us, rep.first_byte_unix_us);
}

/// A closed stream (a timed run) is read to its end, in any read size: its last 16 bytes are
/// the end trailer, held out of the count and the digest of the data.
#[test]
fn a_closed_stream_holds_its_end_trailer_out_of_the_data() {
    let data: Vec<u8> = (0..100_003u32).map(|i| (i * 13 % 251) as u8).collect();
    let end = tsperf_proto::end::End {
        length: data.len() as u64,
        digest: xxhash_rust::xxh3::xxh3_64(&data),
    };
    let mut stream = data.clone();
    stream.extend_from_slice(&end.encode());
    for rs in [1u32, 7, 102, 65536] {
        let h = Hello {
            duration_ms: 1000,
            ..hello(data.len() as u64)
        };
        let mut rx = receiver(&h, rs);
        let mut block = Block::new(rs as usize, u64::MAX);
        let mut src = Trickle {
            data: &stream,
            piece: 3001,
            asked: vec![],
            block_next: false,
        };
        let got = loop {
            match read_all(&mut block, &mut src, &mut rx) {
                ReadEnd::Ended(got) => break got,
                ReadEnd::WouldBlock | ReadEnd::TurnOver => {}
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(got, Some(end), "read size {rs}");
        let rep = rx.report(ServerIo::Blocking, 0);
        assert_eq!((rep.bytes, rep.digest), (end.length, end.digest));
        assert!(rep.last_byte_unix_us >= rep.first_byte_unix_us);
    }
    // Fewer bytes than a trailer: no end.
    let h = Hello {
        duration_ms: 1000,
        ..hello(10)
    };
    let mut rx = receiver(&h, 64);
    let mut block = Block::new(64, u64::MAX);
    let mut src: &[u8] = b"short";
    assert!(matches!(
        read_all(&mut block, &mut src, &mut rx),
        ReadEnd::Ended(None)
    ));
}

/// Keeps what it is given.
struct Kept(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Save for Kept {
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.borrow_mut().extend_from_slice(data);
        Ok(())
    }
}

/// A closed stream saved as it arrives (a reverse client's `--save`) saves its data, every
/// byte in order, and not the end trailer held back from it, in any read size.
#[test]
fn a_saved_closed_stream_saves_its_data_and_not_its_trailer() {
    let data: Vec<u8> = (0..50_001u32).map(|i| (i * 31 % 253) as u8).collect();
    let end = tsperf_proto::end::End {
        length: data.len() as u64,
        digest: xxhash_rust::xxh3::xxh3_64(&data),
    };
    let mut stream = data.clone();
    stream.extend_from_slice(&end.encode());
    for rs in [1u32, 5, 17, 4096, 65536] {
        let kept = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut rx: Receiver<NoLog, Kept> = Receiver::new(None, rs, NoLog);
        rx.sink = Some(Kept(kept.clone()));
        let mut block = Block::new(rs as usize, u64::MAX);
        let mut src = Trickle {
            data: &stream,
            piece: 777,
            asked: vec![],
            block_next: false,
        };
        let got = loop {
            match block.read_some(&mut src, &mut rx, u64::MAX, usize::MAX) {
                ReadEnd::Ended(got) => break got,
                ReadEnd::WouldBlock | ReadEnd::TurnOver => {}
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(got, Some(end), "read size {rs}");
        assert!(
            *kept.borrow() == data,
            "read size {rs}: {} bytes saved",
            kept.borrow().len()
        );
        let split = rx.split();
        assert!(split.save_ns > 0 || split.total_ns() == 0, "{split:?}");
    }
}

/// Found with 6,000 clients at once (issue 33): the run-queue wait is counted over the
/// transfer's time split, first byte to last, not to whenever the report is made. A thread that
/// waits long for a CPU after the last byte (a busy event loop) made a report the client
/// refused ("run_queue_ns contradicts the rest of it").
#[test]
fn the_run_queue_wait_ends_with_the_last_byte() {
    let data = vec![7u8; 10_000];
    let mut rx = receiver(&hello(data.len() as u64), 4096);
    let mut block = Block::new(4096, data.len() as u64);
    let mut src = Trickle {
        data: &data,
        piece: 10_000,
        asked: vec![],
        block_next: false,
    };
    while !matches!(read_all(&mut block, &mut src, &mut rx), ReadEnd::Complete) {}
    // This thread and two spinning ones share one CPU for a while before the report.
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity act on this thread's
    // own set (pid 0 is the calling thread).
    let pin = || unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    };
    pin();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    let rep = rx.report(ServerIo::EventLoop, 0);
    assert_eq!(rep.check(), Ok(()), "{:?}", rep.run_queue_ns);
}
