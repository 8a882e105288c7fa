//! Sending a stream in turns: counting, checksumming and timing what is handed to the socket,
//! through a [`Sink`] its driver offers. Every stream tsperf sends goes through it: the
//! server's reverse streams (`tsclient --reverse`) in either of its models (a blocking thread
//! turns until done, the event loop one turn a wake-up), the client's streams (a source it
//! holds, [`Sender::local`]: FILE, a stripe of it, the generated text; its transports wait in
//! `write`, so it turns until done) and tsscale's load generator (one mio loop for all).
//!
//! A server sends the generated stream, or with `--serve DIR` a file of DIR (`served`). The
//! generated stream is the tsgen text ([`pattern`]: the seed's 36 MiB, made once per server off
//! the event loop and shared by every connection, so a connection costs no buffer). One pass is
//! the hello's `length` bytes of it (the text repeated past 36 MiB); a sized stream is one pass,
//! so `--bytes 36MiB` is the seed's `tsl.txt` byte for byte; a timed one repeats passes until
//! its time is up. Each write is `chunk` bytes, the last of a pass less, as the client's are (a
//! write across the end of the text is one `writev` of two pieces). With the hello's one
//! buffer the period is the text's first `chunk` bytes, as iperf3 -R sends one buffer. A hello
//! that asks for a call of its own (`tsclient -R --io`) has the text sent as a held source by
//! that call, as the client sends its own ([`Sender::give`]; sendfile from the text's in-memory
//! file).
//!
//! When the data is done, [`Sender::closing`] gives the bytes that end the stream: the Sent
//! frame (these figures) and the end trailer (length and digest). The driver writes them and
//! closes: the client reads to the end of the stream and holds them back from its checksum. A
//! stream that cannot go on (its file shrank, the server is shutting down) ends instead with
//! [`Sender::failing`]: the reason in the Sent frame's place, so the client reads why.

mod ahead;
mod end;
mod listen;
mod local;
pub mod pattern;
mod served;

pub use listen::{Heard, LISTEN_MOST};
pub use pattern::{Generated, Wants};
pub use served::FileId;
pub use tsperf_proto::{Call, MAX_BATCH};

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tsperf_proto::Hello;
use tsperf_proto::tcp::Flight;
use tsperf_sys::timing::{CpuTime, SchedStat, unix_us_now};

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
    /// The data cannot be had (a file shrank or cannot be read): end the stream with
    /// [`Sender::failing`] and this reason.
    Source(anyhow::Error),
}

/// The socket a [`Sender`] writes to, as its driver offers it: `write` and `writev` (with the
/// driver's meaning of a full socket: a blocking wait, or `WouldBlock`), and `sendfile`, which
/// a driver that waits must wait in as it does in `write`.
pub trait Sink: Write + std::os::fd::AsFd {
    /// Sends up to `len` bytes of `file` from `offset`: the bytes the socket took.
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        tsperf_sys::net::sendfile(&self.as_fd(), file, offset, len)
    }
}

impl<S: Write + std::os::fd::AsFd> Sink for tsperf_sys::direct::Direct<'_, S> {}

/// The buffer a driver lends [`Sender::send_turn`] for a served file's read-ahead: one per
/// event loop, or per thread of the blocking model.
pub const SCRATCH: usize = 256 << 10;

/// What a reverse stream sends.
// The sender lives boxed in its connection, and the generated text is the common case: its
// checksum state inline saves a pointer chase on every write.
#[allow(clippy::large_enum_variant)]
enum Data {
    /// The generated text, shared (`None` until the driver has it: [`pattern`]); its own
    /// checksum, a step ahead of the writes.
    Generated {
        text: Option<Arc<tsperf_sys::source::Held>>,
        sum: ahead::Ahead,
        /// The hello's one buffer: the text's first `chunk` bytes are the period.
        one_buffer: bool,
        /// The hello asked for a call of its own: the text is sent as a [`Data::Local`]
        /// source, made when the driver hands it over ([`Sender::give`]).
        call: Option<Call>,
    },
    /// A served file (`--serve`): sent by `sendfile`, checksummed as it reads ahead.
    Served(Box<served::Served>),
    /// A source this end holds (the client's FILE or generated text), sent by its [`Call`].
    Local(Box<local::Local>),
}

/// A reverse stream in progress.
pub struct Sender {
    data: Data,
    /// Bytes of one pass.
    length: u64,
    chunk: u64,
    /// A timed stream's length in time.
    time: Option<Duration>,
    /// Passes repeat until the time is up or a stop comes; else the stream is one pass.
    repeats: bool,
    /// Looked at before every write: true stops the data there (a client's clock or Ctrl-C).
    halt: Option<Box<dyn Fn() -> bool + Send>>,
    /// A turn writes no more once this many bytes went ([`TURN_BYTES`], or the driver's).
    turn_bytes: u64,
    until: Option<Instant>,
    /// Where the next write starts in its pass.
    at: u64,
    sent: u64,
    writes: u64,
    partial_writes: u64,
    /// Writes that found the socket full.
    pub would_block: u64,
    /// Its clocks are its thread's, for the Sent frame (a server's stream); a held source's
    /// driver reads its own.
    thread_clocks: bool,
    first: Option<(Instant, u64)>,
    last: Option<Instant>,
    cpu_start: CpuTime,
    sched_start: Option<SchedStat>,
    flight: Flight,
    next_reading: u64,
    /// The client asked the stream to stop (a byte from it: its Ctrl-C): the data ends at
    /// this turn, as at a timed stream's time.
    stopped: bool,
    /// What the stream holds until it ends (the server's share of its send-buffer budget),
    /// given back when it is dropped.
    held: Option<Box<dyn Send>>,
    /// Cut off (the server is stopping): the next turn ends the stream with this reason.
    cut: Option<String>,
}

/// Why a write did not happen.
enum Failure {
    /// The socket's error.
    Io(io::Error),
    /// The data's: why, for the client.
    Source(anyhow::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Io(e)
    }
}

impl Sender {
    /// A reverse stream for `hello`: `hello.length` bytes a pass, `hello.chunk` a write, passes
    /// for `hello.duration_ms` if it is timed.
    pub fn new(hello: &Hello) -> Sender {
        Sender::from_hello(
            Data::Generated {
                text: None,
                sum: ahead::Ahead::new(),
                one_buffer: hello.one_buffer,
                call: hello.call,
            },
            hello.length.max(1),
            hello,
        )
    }

    /// A reverse stream of the file `name` a server started with `--serve` opened (a regular
    /// file): its size a pass. Refused if it is empty.
    pub fn served(hello: &Hello, file: std::fs::File, name: &str) -> Result<Sender, String> {
        let served = served::Served::new(file, name, hello.session)?;
        let length = served.len();
        Ok(Sender::from_hello(
            Data::Served(Box::new(served)),
            length,
            hello,
        ))
    }

    /// The served file this stream reads, if it reads one: its identity, and its whole size
    /// (what a session of its stripes moves together).
    pub fn served_file(&self) -> Option<(FileId, u64)> {
        match &self.data {
            Data::Served(s) => Some((s.id(), s.whole())),
            Data::Generated { .. } | Data::Local(_) => None,
        }
    }

    /// A stream of `source`, held by this end, handed over `chunk` bytes at a time by `call`;
    /// `repeats` for a timed stream, whose passes go on until [`Sender::stop_when`] says (not
    /// with sendfile: refused).
    pub fn local(
        source: tsperf_sys::source::Source,
        call: Call,
        chunk: u32,
        repeats: bool,
    ) -> anyhow::Result<Sender> {
        let local = local::Local::new(source, call, chunk, repeats)?;
        let length = local.len();
        let mut tx = Sender::with(Data::Local(Box::new(local)), length, chunk, None);
        tx.repeats = repeats;
        tx.thread_clocks = false;
        Ok(tx)
    }

    /// Makes a turn end once `bytes` went (at most [`TURN_BYTES`]): a driver that samples what
    /// went between turns (the client's bar and `--interval`) is never further behind.
    pub fn turns_of(mut self, bytes: u64) -> Sender {
        self.turn_bytes = bytes.clamp(1, TURN_BYTES);
        self
    }

    /// Says the digest of the held source's bytes is `digest`, known beforehand (a load
    /// generator's one buffer, sent by every stream), so they are not hashed again: only for a
    /// stream of one pass by write or writev (otherwise it changes nothing).
    pub fn known_digest(mut self, digest: u64) -> Sender {
        if let Data::Local(local) = &mut self.data {
            local.known(digest);
        }
        self
    }

    fn from_hello(data: Data, length: u64, hello: &Hello) -> Sender {
        let time =
            (hello.duration_ms > 0).then(|| Duration::from_millis(u64::from(hello.duration_ms)));
        Sender::with(data, length, hello.chunk, time)
    }

    fn with(data: Data, length: u64, chunk: u32, time: Option<Duration>) -> Sender {
        Sender {
            data,
            length,
            chunk: u64::from(chunk.max(1)),
            time,
            repeats: time.is_some(),
            halt: None,
            turn_bytes: TURN_BYTES,
            until: None,
            at: 0,
            sent: 0,
            writes: 0,
            partial_writes: 0,
            would_block: 0,
            thread_clocks: true,
            first: None,
            last: None,
            cpu_start: CpuTime::thread(),
            sched_start: None,
            flight: Flight::default(),
            next_reading: FLIGHT_EVERY,
            stopped: false,
            held: None,
            cut: None,
        }
    }

    /// Cuts the stream off for `why`: its next turn ends with [`SendEnd::Source`].
    pub fn cut(&mut self, why: &str) {
        self.cut = Some(why.to_owned());
    }

    /// True once cut off.
    pub fn is_cut(&self) -> bool {
        self.cut.is_some()
    }

    /// Makes `halt` looked at before every write: once it says true, the data ends there, as
    /// at a timed stream's time (a client's clock, its Ctrl-C).
    pub fn stop_when(&mut self, halt: impl Fn() -> bool + Send + 'static) {
        self.halt = Some(Box::new(halt));
    }

    /// Keeps `what` until the stream ends (the server's share of its send-buffer budget).
    pub fn hold(&mut self, what: impl Send + 'static) {
        self.held = Some(Box::new(what));
    }

    /// Bytes a pass sends.
    pub fn pass_length(&self) -> u64 {
        self.length
    }

    /// Bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Writes that found the socket full, wholly or partly: a blocking model's writes that
    /// waited out their timeout are among them.
    pub fn stalls(&self) -> u64 {
        self.partial_writes + self.would_block
    }

    /// True once every byte of the data is sent: a sized stream's pass, or a timed stream's
    /// time (looked at once per turn).
    fn done(&self, now: Instant) -> bool {
        if self.stopped {
            return true;
        }
        match self.until {
            Some(until) => now >= until,
            None => !self.repeats && self.at == self.length,
        }
    }

    /// Writes to `w` until the data is done, the socket is full, a write fails, or the turn is
    /// over ([`TURN_WRITES`] writes or [`TURN_BYTES`] bytes, or fewer: [`Sender::turns_of`]). `sock` is read for `TCP_INFO`
    /// about every MiB.
    pub fn send_turn<W: Sink>(&mut self, w: &mut W, scratch: &mut [u8]) -> SendEnd {
        if self.first.is_none()
            && let Err(e) = self.begin()
        {
            return SendEnd::Source(e);
        }
        let now = Instant::now();
        if let Some(why) = &self.cut {
            return SendEnd::Source(anyhow::anyhow!("{why}"));
        }
        if self.done(now) {
            return SendEnd::Done;
        }
        let start = self.sent;
        let end = self.writes_of_turn(w, scratch);
        // One clock reading a turn, not one a write: the stream's last write is the last of
        // its turn, so this is its time, give or take the checks after it (and, for a turn
        // that ends on a full socket, the write that found it full: a later turn restamps).
        if self.sent > start {
            self.last = Some(Instant::now());
        }
        end
    }

    /// Readies the first byte (a held source's first block is fetched, or sendfile's checksum
    /// begun) and starts the stream's clocks: its time, CPU and scheduler figures count from
    /// here. The first turn does it if the driver has not; a driver that reads its own clocks
    /// at the first byte calls it first. Returns the time spent waiting for the data so far.
    pub fn begin(&mut self) -> anyhow::Result<Duration> {
        let waited = match &mut self.data {
            Data::Local(local) => local.begin()?,
            _ => Duration::ZERO,
        };
        let now = Instant::now();
        self.first = Some((now, unix_us_now()));
        self.until = self.time.map(|t| now + t);
        // A held source's driver reads its own clocks (the client's are its process's); the
        // Sent frame's are this thread's.
        if self.thread_clocks {
            self.cpu_start = CpuTime::thread();
            self.sched_start = SchedStat::thread();
        }
        Ok(waited)
    }

    /// The writes of one [`Sender::send_turn`].
    fn writes_of_turn<W: Sink>(&mut self, w: &mut W, scratch: &mut [u8]) -> SendEnd {
        let (mut writes, start) = (0u64, self.sent);
        loop {
            if self.repeats
                && self.at == self.length
                && let Err(e) = self.next_pass()
            {
                return SendEnd::Source(e);
            }
            if self.halt.as_ref().is_some_and(|halt| halt()) {
                self.stopped = true;
            }
            if self.at == self.length || self.stopped {
                return SendEnd::Done;
            }
            if writes == TURN_WRITES || self.sent - start >= self.turn_bytes {
                return SendEnd::TurnOver;
            }
            match self.write_once(w, scratch) {
                Ok(()) => writes += 1,
                Err(Failure::Source(why)) => return SendEnd::Source(why),
                Err(Failure::Io(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(Failure::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.would_block += 1;
                    return SendEnd::WouldBlock;
                }
                Err(Failure::Io(e)) => return SendEnd::Error(e),
            }
            if self.sent >= self.next_reading {
                self.next_reading = self.sent + FLIGHT_EVERY;
                self.read_flight(w);
            }
        }
    }

    /// A timed stream's next pass, from the start of its data.
    fn next_pass(&mut self) -> anyhow::Result<()> {
        self.at = 0;
        match &mut self.data {
            Data::Served(served) => served.next_pass(),
            Data::Generated { sum, .. } => sum.next_pass(),
            Data::Local(local) => local.next_pass()?,
        }
        Ok(())
    }

    /// One write of the rest of the current chunk (a chunk starts at a multiple of `chunk` in
    /// its pass); what it took is counted (and checksummed: the generated text as it goes, a
    /// served file ahead of the socket).
    #[inline]
    fn write_once<W: Sink>(&mut self, w: &mut W, scratch: &mut [u8]) -> Result<(), Failure> {
        // A held source cuts its own chunks (from each block's start, with no division).
        let pass_chunk = |at: u64, chunk: u64, length: u64| {
            (((at / chunk + 1) * chunk).min(length) - at) as usize
        };
        let (n, want) = match &mut self.data {
            Data::Local(local) => local.send(w, self.at, self.sent)?,
            Data::Generated {
                text: Some(text),
                sum,
                one_buffer,
                ..
            } => {
                let want = pass_chunk(self.at, self.chunk, self.length);
                let text = pattern::period(text, *one_buffer, self.chunk);
                (
                    pattern::send(w, text, sum, (self.at, self.length), want)?,
                    want,
                )
            }
            Data::Generated { text: None, .. } => {
                return Err(Failure::Source(anyhow::anyhow!(
                    "the generated text is not there"
                )));
            }
            Data::Served(served) => {
                let want = pass_chunk(self.at, self.chunk, self.length);
                match served.send(w, self.at, want, scratch) {
                    served::Write::Sent(n) => (n, want),
                    served::Write::Socket(e) => return Err(Failure::Io(e)),
                    served::Write::Source(why) => {
                        return Err(Failure::Source(anyhow::anyhow!(why)));
                    }
                }
            }
        };
        if n == 0 {
            return Err(Failure::Io(io::ErrorKind::WriteZero.into()));
        }
        self.writes += 1;
        if n < want {
            self.partial_writes += 1;
        }
        self.at += n as u64;
        self.sent += n as u64;
        Ok(())
    }

    /// Time spent waiting for the data's bytes (a file's reads or page faults, off the CPU).
    fn waited(&self) -> Duration {
        match &self.data {
            Data::Served(served) => served.waited(),
            Data::Local(local) => local.waited(),
            Data::Generated { .. } => Duration::ZERO,
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
}

#[cfg(test)]
mod tests;
