//! The server's side of a reverse stream (`tsclient --reverse`): sending, counting,
//! checksumming and timing what it hands to the socket.
//!
//! What it sends is the generated stream: the tsgen text ([`tsperf_sys::testdata`]), made once
//! per server on the first reverse stream ([`pattern`]: the seed's 36 MiB, shared by every
//! connection, so a connection costs no buffer). One pass is the hello's `length` bytes of it
//! (the text repeated past 36 MiB); a sized stream is one pass, so `--bytes 36MiB` is the
//! seed's `tsl.txt` byte for byte; a timed one repeats passes until its time is up. Each write
//! is `chunk` bytes, the last of a pass less, as the client's are (a write across the end of the
//! text is one `writev` of two pieces).
//!
//! When the data is done, [`Sender::closing`] gives the bytes that end the stream: the Sent
//! frame (these figures) and the end trailer (length and digest). The driver writes them and
//! closes: the client reads to the end of the stream and holds them back from its checksum.

use std::hash::Hasher as _;
use std::io::{self, IoSlice, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use twox_hash::XxHash3_64;

use tsperf_proto::sent::Sent;
use tsperf_proto::tcp::Flight;
use tsperf_proto::{Frame, Hello, ServerIo, encode_frame};
use tsperf_sys::source::Source;
use tsperf_sys::timing::{CpuTime, SchedStat, unix_us_now};

/// One write of `want` bytes of the generated text from `at` (a write across the end of the
/// text is one `writev` of two pieces); what it took is checksummed. Returns the bytes taken.
#[inline]
fn write_text<W: Write>(
    w: &mut W,
    text: &[u8],
    hasher: &mut XxHash3_64,
    at: u64,
    want: usize,
) -> io::Result<usize> {
    let from = (at % text.len() as u64) as usize;
    let first = &text[from..text.len().min(from + want)];
    let n = if first.len() == want {
        w.write(first)?
    } else {
        let rest = &text[..want - first.len()];
        w.write_vectored(&[IoSlice::new(first), IoSlice::new(rest)])?
    };
    let took = n.min(first.len());
    hasher.write(&first[..took]);
    if n > took {
        hasher.write(&text[..n - took]);
    }
    Ok(n)
}

/// The generated text, made on first use: the seed's 36 MiB.
pub fn pattern() -> Arc<[u8]> {
    static PATTERN: OnceLock<Arc<[u8]>> = OnceLock::new();
    PATTERN
        .get_or_init(|| {
            tsperf_sys::testdata::text(tsperf_sys::testdata::SEED_FILE_LEN as usize).into()
        })
        .clone()
}

/// One turn of [`Sender::send_turn`]: at most this many writes, and no more once this many
/// bytes went, so one connection cannot keep an event loop from the others.
pub const TURN_WRITES: u64 = 64;
/// One turn writes no more once this many bytes went.
pub const TURN_BYTES: u64 = 1 << 20;
/// Bytes between two readings of the socket's `TCP_INFO`.
const FLIGHT_EVERY: u64 = 1 << 20;

/// How a turn of writes ended.
#[derive(Debug)]
pub enum SendEnd {
    /// The turn's share is used; the socket may take more.
    TurnOver,
    /// The socket is full for now (non-blocking).
    WouldBlock,
    /// Every byte of the data is sent: write [`Sender::closing`] next.
    Done,
    /// A write failed (a blocking socket's timeout included).
    Error(io::Error),
}

/// What a reverse stream sends.
// The sender lives boxed in its connection, and the generated text is the common case: its
// checksum state inline saves a pointer chase on every write.
#[allow(clippy::large_enum_variant)]
enum Data {
    /// The generated text, shared; its own checksum as it goes.
    Generated { text: Arc<[u8]>, hasher: XxHash3_64 },
    /// A served file (`--serve`), in the source's blocks (which it checksums as it hands them
    /// out); `block_at` bytes of the current block are sent.
    Served {
        source: Box<Source>,
        block_at: usize,
    },
}

/// A reverse stream in progress.
pub struct Sender {
    data: Data,
    /// Bytes of one pass.
    length: u64,
    chunk: u64,
    /// A timed stream's length in time; `None`: one pass.
    time: Option<Duration>,
    until: Option<Instant>,
    /// Where the next write starts in its pass.
    at: u64,
    sent: u64,
    writes: u64,
    partial_writes: u64,
    /// Writes that found the socket full.
    pub would_block: u64,
    first: Option<(Instant, u64)>,
    last: Option<Instant>,
    cpu_start: CpuTime,
    sched_start: Option<SchedStat>,
    flight: Flight,
    next_reading: u64,
    /// The client asked the stream to stop (a byte from it: its Ctrl-C): the data ends at
    /// this turn, as at a timed stream's time.
    stopped: bool,
}

/// What the client sent during a reverse stream, looked at once a turn.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// Nothing.
    Nothing,
    /// A byte: stop the data now (the client's Ctrl-C), end the stream as at its time.
    Stop,
    /// The client closed the connection.
    Closed,
}

impl Sender {
    /// A reverse stream for `hello`: `hello.length` bytes a pass, `hello.chunk` a write, passes
    /// for `hello.duration_ms` if it is timed.
    pub fn new(hello: &Hello) -> Sender {
        Sender::with(
            Data::Generated {
                text: pattern(),
                hasher: XxHash3_64::new(),
            },
            hello.length.max(1),
            hello,
        )
    }

    /// A reverse stream of a served file (`--serve`): its size a pass.
    pub fn served(hello: &Hello, mut source: Source) -> Sender {
        source.repeat();
        let length = source.len();
        Sender::with(
            Data::Served {
                source: Box::new(source),
                block_at: 0,
            },
            length,
            hello,
        )
    }

    fn with(data: Data, length: u64, hello: &Hello) -> Sender {
        Sender {
            data,
            length,
            chunk: u64::from(hello.chunk.max(1)),
            time: (hello.duration_ms > 0)
                .then(|| Duration::from_millis(u64::from(hello.duration_ms))),
            until: None,
            at: 0,
            sent: 0,
            writes: 0,
            partial_writes: 0,
            would_block: 0,
            first: None,
            last: None,
            cpu_start: CpuTime::thread(),
            sched_start: None,
            flight: Flight::default(),
            next_reading: FLIGHT_EVERY,
            stopped: false,
        }
    }

    /// Looks, without waiting, whether the client sent anything: a byte asks the data to stop
    /// (it ends at once, as at a timed stream's time); the end of its stream means it has gone.
    pub fn listen<S: std::os::fd::AsFd>(&mut self, sock: &S) -> io::Result<Heard> {
        let mut buf = [0u8; 64];
        match tsperf_sys::net::read_now(sock, &mut buf)? {
            None => Ok(Heard::Nothing),
            Some(0) => Ok(Heard::Closed),
            Some(_) => {
                self.stopped = true;
                Ok(Heard::Stop)
            }
        }
    }

    /// Bytes a pass sends.
    pub fn pass_length(&self) -> u64 {
        self.length
    }

    /// Bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// True once every byte of the data is sent: a sized stream's pass, or a timed stream's
    /// time (looked at once per turn).
    fn done(&self, now: Instant) -> bool {
        if self.stopped {
            return true;
        }
        match self.until {
            Some(until) => now >= until,
            None => self.time.is_none() && self.at == self.length,
        }
    }

    /// Writes to `w` until the data is done, the socket is full, a write fails, or the turn is
    /// over ([`TURN_WRITES`] writes or [`TURN_BYTES`] bytes). `sock` is read for `TCP_INFO`
    /// about every MiB.
    pub fn send_turn<W: Write + std::os::fd::AsFd>(&mut self, w: &mut W) -> SendEnd {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some((now, unix_us_now()));
            self.until = self.time.map(|t| now + t);
            self.cpu_start = CpuTime::thread();
            self.sched_start = SchedStat::thread();
        }
        if self.done(now) {
            return SendEnd::Done;
        }
        let (mut writes, start) = (0u64, self.sent);
        loop {
            if self.time.is_some()
                && self.at == self.length
                && let Err(e) = self.next_pass()
            {
                return SendEnd::Error(e);
            }
            if self.at == self.length || self.stopped {
                return SendEnd::Done;
            }
            if writes == TURN_WRITES || self.sent - start >= TURN_BYTES {
                return SendEnd::TurnOver;
            }
            match self.write_once(w) {
                Ok(()) => writes += 1,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.would_block += 1;
                    return SendEnd::WouldBlock;
                }
                Err(e) => return SendEnd::Error(e),
            }
            if self.sent >= self.next_reading {
                self.next_reading = self.sent + FLIGHT_EVERY;
                self.read_flight(w);
            }
        }
    }

    /// A timed stream's next pass, from the start of its data.
    fn next_pass(&mut self) -> io::Result<()> {
        self.at = 0;
        if let Data::Served { source, block_at } = &mut self.data {
            // The pass's last block is all sent: the source is at its end.
            source.next_block().map_err(io::Error::other)?;
            source.rewind().map_err(io::Error::other)?;
            *block_at = 0;
        }
        Ok(())
    }

    /// One write of the rest of the current chunk (a chunk starts at a multiple of `chunk` in
    /// its pass); what it took is counted (and, for the generated text, checksummed: a served
    /// file's blocks are checksummed as they are taken).
    #[inline]
    fn write_once<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        let chunk_end = ((self.at / self.chunk + 1) * self.chunk).min(self.length);
        let want = (chunk_end - self.at) as usize;
        let n = match &mut self.data {
            Data::Generated { text, hasher } => write_text(w, text, hasher, self.at, want)?,
            Data::Served { source, block_at } => {
                if *block_at == source.last_block().len() {
                    source.next_block().map_err(io::Error::other)?;
                    *block_at = 0;
                }
                let block = source.last_block();
                let piece = &block[*block_at..block.len().min(*block_at + want)];
                if piece.is_empty() {
                    return Err(io::Error::other("the served file ended early"));
                }
                let n = w.write(piece)?;
                *block_at += n;
                n
            }
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        self.writes += 1;
        if n < want {
            self.partial_writes += 1;
        }
        self.at += n as u64;
        self.sent += n as u64;
        self.last = Some(Instant::now());
        Ok(())
    }

    /// The xxh3-64 of everything sent.
    fn digest(&self) -> u64 {
        match &self.data {
            Data::Generated { hasher, .. } => hasher.finish(),
            Data::Served { source, block_at } => source.digest_sent(*block_at),
        }
    }

    fn read_flight<S: std::os::fd::AsFd>(&mut self, sock: &S) {
        let sndbuf = socket2::SockRef::from(sock)
            .send_buffer_size()
            .map_or(0, |n| n as u64);
        if let Some(s) = tsperf_sys::tcpinfo::TcpInfo::of(sock).and_then(|i| i.flight(sndbuf)) {
            self.flight.add(s);
        }
    }

    /// The bytes that end the stream, once the data is done: the Sent frame (what was
    /// measured) and the end trailer (the bytes sent and their digest).
    pub fn closing<S: std::os::fd::AsFd>(&self, sock: &S, server_io: ServerIo) -> Vec<u8> {
        let cpu = CpuTime::thread().since(self.cpu_start);
        let sched = self
            .sched_start
            .zip(SchedStat::thread())
            .map(|(a, b)| b.since(a));
        let (first_at, first_us) = self.first.unwrap_or((Instant::now(), 0));
        let sent = Sent {
            bytes: self.sent,
            writes: self.writes,
            partial_writes: self.partial_writes,
            would_block: self.would_block,
            first_write_unix_us: first_us,
            elapsed_ns: self.last.map_or(0, |l| {
                l.saturating_duration_since(first_at).as_nanos() as u64
            }),
            cpu_user_us: cpu.user.as_micros() as u64,
            cpu_sys_us: cpu.sys.as_micros() as u64,
            on_cpu_ns: sched.map(|s| s.on_cpu.as_nanos() as u64),
            run_queue_ns: sched.map(|s| s.run_queue.as_nanos() as u64),
            source_read_ns: match &self.data {
                Data::Served { source, .. } => source.read_time().as_nanos() as u64,
                Data::Generated { .. } => 0,
            },
            chunk: self.chunk,
            sndbuf: socket2::SockRef::from(sock)
                .send_buffer_size()
                .map_or(0, |n| n as u32),
            server_io,
            boot_id: tsperf_sys::host::boot_id(),
            tcp: tsperf_sys::tcpinfo::TcpInfo::of(sock)
                .map_or_else(Default::default, |i| i.sender()),
            flight: self.flight,
        };
        let mut out = Vec::with_capacity(tsperf_proto::sent::REVERSE_TAIL);
        encode_frame(&Frame::Sent(sent), &mut out);
        out.extend_from_slice(
            &tsperf_proto::end::End {
                length: self.sent,
                digest: self.digest(),
            }
            .encode(),
        );
        out
    }
}
