//! Sending a stream in turns: counting, checksumming and timing what is handed to the socket.
//! The server's reverse streams (`tsclient --reverse`) send through it, in either of its
//! models: a blocking thread turns until done, the event loop one turn a wake-up.
//!
//! What it sends is the generated stream, or with `--serve DIR` a file of DIR (`served`). The
//! generated stream is the tsgen text ([`pattern`]: the seed's 36 MiB, made once per server off
//! the event loop and shared by every connection, so a connection costs no buffer). One pass is
//! the hello's `length` bytes of it (the text repeated past 36 MiB); a sized stream is one pass,
//! so `--bytes 36MiB` is the seed's `tsl.txt` byte for byte; a timed one repeats passes until
//! its time is up. Each write is `chunk` bytes, the last of a pass less, as the client's are (a
//! write across the end of the text is one `writev` of two pieces). With the hello's one
//! buffer the period is the text's first `chunk` bytes, as iperf3 -R sends one buffer.
//!
//! When the data is done, [`Sender::closing`] gives the bytes that end the stream: the Sent
//! frame (these figures) and the end trailer (length and digest). The driver writes them and
//! closes: the client reads to the end of the stream and holds them back from its checksum. A
//! stream that cannot go on (its file shrank, the server is shutting down) ends instead with
//! [`Sender::failing`]: the reason in the Sent frame's place, so the client reads why.

mod ahead;
pub mod pattern;
mod served;

pub use served::FileId;

use std::hash::Hasher as _;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use twox_hash::XxHash3_64;

use tsperf_proto::sent::Sent;
use tsperf_proto::tcp::Flight;
use tsperf_proto::{Frame, Hello, ServerIo, encode_frame};
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
    /// The data cannot be had (a served file shrank or cannot be read): end the stream with
    /// [`Sender::failing`] and this reason.
    Source(String),
}

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
    },
    /// A served file (`--serve`): sent by `sendfile`, checksummed as it reads ahead.
    Served(Box<served::Served>),
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
    Source(String),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Io(e)
    }
}

/// The most bytes [`Sender::listen`] takes from the client in one look: it should send one.
pub const LISTEN_MOST: usize = 64 << 10;

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
                text: None,
                sum: ahead::Ahead::new(),
                one_buffer: hello.one_buffer,
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
        Ok(Sender::with(Data::Served(Box::new(served)), length, hello))
    }

    /// The served file this stream reads, if it reads one: its identity, and its whole size
    /// (what a session of its stripes moves together).
    pub fn served_file(&self) -> Option<(FileId, u64)> {
        match &self.data {
            Data::Served(s) => Some((s.id(), s.whole())),
            Data::Generated { .. } => None,
        }
    }

    /// True while the generated text is still to be handed over ([`Sender::give_text`]).
    pub fn needs_text(&self) -> bool {
        matches!(self.data, Data::Generated { text: None, .. })
    }

    /// Hands over the generated text ([`pattern`]), before the first turn.
    pub fn give_text(&mut self, t: Arc<tsperf_sys::source::Held>) {
        if let Data::Generated { text, .. } = &mut self.data {
            *text = Some(t);
        }
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

    /// Keeps `what` until the stream ends (the server's share of its send-buffer budget).
    pub fn hold(&mut self, what: impl Send + 'static) {
        self.held = Some(Box::new(what));
    }

    /// Looks, without waiting, whether the client sent anything: a byte asks the data to stop
    /// (it ends at once, as at a timed stream's time); the end of its stream means it has gone.
    ///
    /// Everything the client sent is taken (up to [`LISTEN_MOST`] a look), not only its first
    /// byte: bytes left unread when the stream closes would make the close a reset, and the
    /// client would lose the stream's end (issue 32).
    pub fn listen<S: std::os::fd::AsFd>(&mut self, sock: &S) -> io::Result<Heard> {
        let mut buf = [0u8; 256];
        let mut heard = Heard::Nothing;
        let mut taken = 0;
        while taken < LISTEN_MOST {
            match tsperf_sys::net::read_now(sock, &mut buf)? {
                None => break,
                Some(0) => return Ok(Heard::Closed),
                Some(n) => {
                    taken += n;
                    self.stopped = true;
                    heard = Heard::Stop;
                }
            }
        }
        Ok(heard)
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
            None => self.time.is_none() && self.at == self.length,
        }
    }

    /// Writes to `w` until the data is done, the socket is full, a write fails, or the turn is
    /// over ([`TURN_WRITES`] writes or [`TURN_BYTES`] bytes). `sock` is read for `TCP_INFO`
    /// about every MiB.
    pub fn send_turn<W: Write + std::os::fd::AsFd>(
        &mut self,
        w: &mut W,
        scratch: &mut [u8],
    ) -> SendEnd {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some((now, unix_us_now()));
            self.until = self.time.map(|t| now + t);
            self.cpu_start = CpuTime::thread();
            self.sched_start = SchedStat::thread();
        }
        if let Some(why) = &self.cut {
            return SendEnd::Source(why.clone());
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

    /// The writes of one [`Sender::send_turn`].
    fn writes_of_turn<W: Write + std::os::fd::AsFd>(
        &mut self,
        w: &mut W,
        scratch: &mut [u8],
    ) -> SendEnd {
        let (mut writes, start) = (0u64, self.sent);
        loop {
            if self.time.is_some() && self.at == self.length {
                self.next_pass();
            }
            if self.at == self.length || self.stopped {
                return SendEnd::Done;
            }
            if writes == TURN_WRITES || self.sent - start >= TURN_BYTES {
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
    fn next_pass(&mut self) {
        self.at = 0;
        match &mut self.data {
            Data::Served(served) => served.next_pass(),
            Data::Generated { sum, .. } => sum.next_pass(),
        }
    }

    /// One write of the rest of the current chunk (a chunk starts at a multiple of `chunk` in
    /// its pass); what it took is counted (and checksummed: the generated text as it goes, a
    /// served file ahead of the socket).
    #[inline]
    fn write_once<W: Write + std::os::fd::AsFd>(
        &mut self,
        w: &mut W,
        scratch: &mut [u8],
    ) -> Result<(), Failure> {
        let chunk_end = ((self.at / self.chunk + 1) * self.chunk).min(self.length);
        let want = (chunk_end - self.at) as usize;
        let n = match &mut self.data {
            Data::Generated {
                text: Some(text),
                sum,
                one_buffer,
            } => {
                let text = pattern::period(text, *one_buffer, self.chunk);
                pattern::send(w, text, sum, (self.at, self.length), want)?
            }
            Data::Generated { text: None, .. } => {
                return Err(Failure::Source("the generated text is not there".into()));
            }
            Data::Served(served) => match served.send(w, self.at, want, scratch) {
                served::Write::Sent(n) => n,
                served::Write::Socket(e) => return Err(Failure::Io(e)),
                served::Write::Source(why) => return Err(Failure::Source(why)),
            },
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

    /// The xxh3-64 of everything sent (a served file's last read-ahead may be read again).
    fn digest(&self, scratch: &mut [u8]) -> Result<u64, String> {
        match &self.data {
            Data::Generated {
                text: Some(text),
                sum,
                one_buffer,
            } => {
                let text = pattern::period(text, *one_buffer, self.chunk);
                Ok(pattern::digest(sum, text, self.at))
            }
            // Nothing was sent.
            Data::Generated { text: None, .. } => Ok(XxHash3_64::new().finish()),
            Data::Served(served) => served.digest_sent(self.at, scratch),
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

    /// The bytes that end a stream that could not go on for `why` ([`SendEnd::Source`], a
    /// shutdown): the reason in the Sent frame's place, then the end trailer of what was sent,
    /// so the client reads why and can still check the bytes it got.
    pub fn failing(&self, why: &str, scratch: &mut [u8]) -> Vec<u8> {
        tsperf_proto::sent::failed_end(
            why,
            tsperf_proto::end::End {
                length: self.sent,
                digest: self.digest(scratch).unwrap_or(0),
            },
        )
    }

    /// The bytes that end the stream, once the data is done: the Sent frame (what was
    /// measured) and the end trailer (the bytes sent and their digest). `Err(why)` if it
    /// cannot end as sent (a served file written to meanwhile): end it with
    /// [`Sender::failing`].
    pub fn closing<S: std::os::fd::AsFd>(
        &self,
        sock: &S,
        server_io: ServerIo,
        scratch: &mut [u8],
    ) -> Result<Vec<u8>, String> {
        if let Data::Served(served) = &self.data
            && let Some(why) = served.changed()
        {
            return Err(why);
        }
        let digest = self.digest(scratch)?;
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
                Data::Served(served) => served.waited().as_nanos() as u64,
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
            congestion: tsperf_sys::congestion::of(sock)
                .and_then(|name| tsperf_proto::tcp::Congestion::new(&name)),
        };
        let mut out = Vec::with_capacity(tsperf_proto::sent::REVERSE_TAIL);
        encode_frame(&Frame::Sent(sent), &mut out);
        out.extend_from_slice(
            &tsperf_proto::end::End {
                length: self.sent,
                digest,
            }
            .encode(),
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
