//! `scripts/scale.sh`'s load generator: thousands of verified transfers, each connection a
//! state machine in one thread's `mio::Poll`.
//!
//! A thread per client (what tsscale ran before, tsclient's own transfer code) spends more CPU
//! on scheduling than on the copy once clients run to thousands: results/scale.md at 8cbc6fc
//! shows 1.21 ns of generator CPU per byte at 10,000 clients against 0.53 at 1024, on a machine
//! of two cores that it shares with the server under test.
//!
//! Here every connection speaks the same protocol through the same pure conversation
//! ([`StreamConversation`]): it connects and says its hello, and once accepted waits for the
//! start. Opening is paced ([`OPENING`] handshakes at once) so that the server's listen backlog
//! never overflows into SYN retransmits, and the clock starts only once every connection of
//! every generator thread is accepted: the aggregate is of the data, not of connection set-up.
//! Then each connection sends the file through the engine's sender
//! ([`tsperf_stream::send::Sender`], the one tsclient sends with), one `write()` per chunk (a
//! short write keeps its place), in turns as the socket takes them; then the digest trailer,
//! and waits for the report. A transfer counts when the server's report has the file's byte
//! count and xxh3 (computed once: every connection sends the same buffer, so its senders are
//! told the digest rather than hash it again). Every wait is bounded: with no progress for `timeout`, every
//! connection not yet done fails, naming its phase.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use tsperf_proto::client::{ClientStep, StreamConversation};
use tsperf_proto::{Hello, decode_frame};
use tsperf_stream::send::{Call, SendEnd, Sender};
use tsperf_sys::direct::Direct;
use tsperf_sys::source::{Held, Source};

/// Handshakes in flight at once, per generator thread: well under any listen backlog.
pub const OPENING: usize = 64;

/// What to run: `clients` transfers of `data` to `addr`.
#[derive(Debug, Clone, Copy)]
pub struct Load<'a> {
    /// The server.
    pub addr: SocketAddr,
    /// The bytes every client sends.
    pub data: &'a [u8],
    /// The name the hello gives them (a file's basename).
    pub name: &'a str,
    /// Bytes per write.
    pub chunk: u32,
    /// Transfers at once.
    pub clients: u32,
    /// Generator threads (each its own poll and share of the clients).
    pub threads: u32,
    /// The longest time without progress before every unfinished transfer fails.
    pub timeout: Duration,
}

/// What a load did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Bytes of the transfers whose reports verified.
    pub bytes: u64,
    /// Transfers whose reports verified.
    pub verified: u32,
    /// From the start (every connection accepted) to the last report.
    pub elapsed: Duration,
    /// Why each failed transfer failed.
    pub failures: Vec<String>,
}

/// Runs `load`: every transfer at once, spread over its threads.
pub fn run(load: &Load<'_>) -> Outcome {
    let threads = load.threads.clamp(1, load.clients.max(1));
    let digest = twox_hash::XxHash3_64::oneshot(load.data);
    let text = Held::of(load.data);
    let barrier = Barrier::new(threads as usize);
    let shards: Vec<Shard> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let count = load.clients / threads + u32::from(t < load.clients % threads);
                let (barrier, text) = (&barrier, &text);
                s.spawn(move || Shard::run(load, (text, digest), count, barrier))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Shard::failed("a generator thread panicked"))
            })
            .collect()
    });
    let mut out = Outcome::default();
    let start = shards.iter().filter_map(|s| s.start).min();
    let end = shards.iter().filter_map(|s| s.end).max();
    if let (Some(start), Some(end)) = (start, end) {
        out.elapsed = end.saturating_duration_since(start);
    }
    for s in shards {
        out.verified += s.verified;
        out.failures.extend(s.failures);
    }
    out.bytes = u64::from(out.verified) * load.data.len() as u64;
    out
}

/// One transfer.
struct Conn {
    stream: TcpStream,
    conv: StreamConversation,
    phase: Phase,
    /// Protocol bytes (the hello, the trailer) still to write.
    out: Vec<u8>,
    /// The data's sender.
    tx: Sender,
    /// Bytes read and not yet a whole frame.
    inbuf: Vec<u8>,
}

/// What one connection's event came to.
enum Step {
    /// Still going.
    Going,
    /// Accepted.
    Ready,
    /// Its report verified.
    Verified,
    /// It failed, for this reason.
    Failed(String),
}

/// One generator thread: its connections and its poll.
struct Shard {
    start: Option<Instant>,
    end: Option<Instant>,
    verified: u32,
    failures: Vec<String>,
}

impl Shard {
    fn failed(why: &str) -> Shard {
        Shard {
            start: None,
            end: None,
            verified: 0,
            failures: vec![why.to_owned()],
        }
    }

    /// Opens `count` connections, waits at `barrier` for every thread's to be accepted, then
    /// sends on all of them and collects their reports. Reaches the barrier whatever happens,
    /// so one thread's failure never leaves the others waiting.
    fn run(load: &Load<'_>, data: (&Arc<Held>, u64), count: u32, barrier: &Barrier) -> Shard {
        let mut shard = Shard {
            start: None,
            end: None,
            verified: 0,
            failures: Vec::new(),
        };
        let driver = Driver::new(load, data, count);
        let mut driver = match driver {
            Ok(d) => d,
            Err(e) => {
                barrier.wait();
                shard.failures.push(format!("{e:#}"));
                return shard;
            }
        };
        driver.open_all(&mut shard);
        barrier.wait();
        shard.start = Some(Instant::now());
        driver.send_all(&mut shard);
        shard
    }
}

/// The connections of one shard and the poll they wait in.
struct Driver<'a> {
    load: &'a Load<'a>,
    /// The bytes every connection sends, held once, and their digest.
    text: &'a Arc<Held>,
    digest: u64,
    count: usize,
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    /// Connections not yet done.
    live: usize,
    scratch: Box<[u8; 4096]>,
    /// The tokens of one poll's events (kept: no allocation per poll).
    tokens: Vec<usize>,
}

impl<'a> Driver<'a> {
    fn new(
        load: &'a Load<'a>,
        (text, digest): (&'a Arc<Held>, u64),
        count: u32,
    ) -> Result<Driver<'a>> {
        Ok(Driver {
            load,
            text,
            digest,
            count: count as usize,
            poll: Poll::new().context("cannot create a poll")?,
            events: Events::with_capacity(1024),
            conns: Vec::with_capacity(count as usize),
            live: 0,
            scratch: Box::new([0; 4096]),
            tokens: Vec::new(),
        })
    }

    /// Connects every client, [`OPENING`] at a time, until each is accepted or failed.
    fn open_all(&mut self, shard: &mut Shard) {
        let (mut attempted, mut opening) = (0, 0);
        loop {
            while opening < OPENING && attempted < self.count {
                attempted += 1;
                match self.connect() {
                    Ok(()) => opening += 1,
                    Err(e) => shard.failures.push(format!("{e:#}")),
                }
            }
            if opening == 0 {
                return;
            }
            let Some(steps) = self.wait(shard) else {
                // Every connection still open failed: nothing more will be accepted.
                return;
            };
            for (token, was, step) in steps {
                opening -= usize::from(was == Phase::Opening && !matches!(step, Step::Going));
                if let Step::Failed(why) = step {
                    self.finish(token);
                    shard.failures.push(why);
                }
            }
        }
    }

    /// Starts the data on every accepted connection and drives them all to their reports.
    fn send_all(&mut self, shard: &mut Shard) {
        for token in 0..self.conns.len() {
            if self.conns[token].phase != Phase::Ready {
                continue;
            }
            self.conns[token].phase = Phase::Sending;
            // Its writable edge came long ago: write now, not at the next event.
            let step = self.drive(token);
            self.settle(token, step, shard);
        }
        while self.live > 0 {
            let Some(steps) = self.wait(shard) else {
                return;
            };
            for (token, _, step) in steps {
                self.settle(token, step, shard);
            }
        }
    }

    /// Counts what a step of the data phase came to.
    fn settle(&mut self, token: usize, step: Step, shard: &mut Shard) {
        match step {
            Step::Verified => {
                shard.verified += 1;
                shard.end = Some(Instant::now());
                self.finish(token);
            }
            Step::Failed(why) => {
                shard.failures.push(why);
                self.finish(token);
            }
            Step::Going | Step::Ready => {}
        }
    }

    /// Opens the next connection and queues its hello.
    fn connect(&mut self) -> Result<()> {
        let addr = self.load.addr;
        let index = self.conns.len();
        let mut stream =
            TcpStream::connect(addr).with_context(|| format!("could not connect to {addr}"))?;
        self.poll
            .registry()
            .register(
                &mut stream,
                Token(index),
                Interest::READABLE | Interest::WRITABLE,
            )
            .context("cannot register a connection")?;
        let (name, chunk) = (self.load.name, self.load.chunk);
        let source = Source::held(self.text.clone(), std::path::Path::new(name), chunk, 1)?;
        let tx = Sender::local(source, Call::Write, chunk, false)?.known_digest(self.digest);
        let hello = Hello::stream(self.load.data.len() as u64, chunk, name);
        let conv = StreamConversation::new(hello, self.load.timeout);
        self.conns.push(Conn {
            stream,
            out: conv.hello_bytes(),
            conv,
            phase: Phase::Opening,
            tx,
            inbuf: Vec::new(),
        });
        self.live += 1;
        Ok(())
    }

    /// Closes a connection that is done.
    fn finish(&mut self, token: usize) {
        let conn = &mut self.conns[token];
        if conn.phase != Phase::Done {
            conn.phase = Phase::Done;
            self.live -= 1;
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            conn.inbuf = Vec::new();
        }
    }

    /// Waits for events (at most the timeout) and drives each connection that has one: its
    /// token, its phase before, and what the event came to. With none for the whole timeout,
    /// every live connection fails, naming where it stood, and the answer is `None`.
    fn wait(&mut self, shard: &mut Shard) -> Option<Vec<(usize, Phase, Step)>> {
        loop {
            match self.poll.poll(&mut self.events, Some(self.load.timeout)) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.fail_live(&format!("the generator's poll failed: {e}"), shard);
                    return None;
                }
                Ok(()) => break,
            }
        }
        if self.events.is_empty() {
            let secs = self.load.timeout.as_secs_f64();
            self.fail_live(&format!("no progress within {secs} s"), shard);
            return None;
        }
        let mut tokens = std::mem::take(&mut self.tokens);
        tokens.clear();
        tokens.extend(self.events.iter().map(|e| e.token().0));
        let mut steps = Vec::with_capacity(tokens.len());
        for &token in &tokens {
            let was = self.conns[token].phase;
            if was != Phase::Done {
                steps.push((token, was, self.drive(token)));
            }
        }
        self.tokens = tokens;
        Some(steps)
    }

    /// Fails every live connection with `why` and where it stood.
    fn fail_live(&mut self, why: &str, shard: &mut Shard) {
        for token in 0..self.conns.len() {
            let phase = self.conns[token].phase;
            if phase != Phase::Done {
                shard.failures.push(format!("{why}: {}", phase.name()));
                self.finish(token);
            }
        }
    }

    /// Does all a connection can do now: write what is due until the socket takes no more,
    /// read and act on every whole frame.
    fn drive(&mut self, token: usize) -> Step {
        match self.write(token) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Step::Failed(self.lost(token, &e)),
        }
        self.read(token)
    }

    /// Writes the protocol bytes due, and in the data phase the data (turn after turn of the
    /// engine's sender, until the socket is full) and then the trailer.
    fn write(&mut self, token: usize) -> io::Result<()> {
        let conn = &mut self.conns[token];
        flush(&mut conn.stream, &mut conn.out)?;
        if conn.phase != Phase::Sending {
            return Ok(());
        }
        loop {
            match conn.tx.send_turn(&mut Direct(&mut conn.stream), &mut []) {
                SendEnd::TurnOver => {}
                SendEnd::Done => break,
                SendEnd::WouldBlock => return Err(io::ErrorKind::WouldBlock.into()),
                SendEnd::Error(e) => return Err(e),
                SendEnd::Source(e) => return Err(io::Error::other(format!("{e:#}"))),
            }
        }
        let digest = conn
            .tx
            .digest(&mut [])
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        conn.out.extend_from_slice(&conn.conv.trailer(digest));
        conn.phase = Phase::Reporting;
        flush(&mut conn.stream, &mut conn.out)
    }

    /// Acts on each whole frame read, reading more while the socket has it.
    fn read(&mut self, token: usize) -> Step {
        loop {
            match self.frame(token) {
                Step::Going => {}
                other => return other,
            }
            let conn = &mut self.conns[token];
            match retry(|| conn.stream.read(&mut self.scratch[..])) {
                Ok(0) => {
                    return Step::Failed(format!(
                        "the server closed the connection ({})",
                        conn.phase.name()
                    ));
                }
                Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Going,
                Err(e) => return Step::Failed(self.lost(token, &e)),
            }
        }
    }

    /// Acts on the first whole frame read, if there is one.
    fn frame(&mut self, token: usize) -> Step {
        let (len, digest) = (self.load.data.len() as u64, self.digest);
        let conn = &mut self.conns[token];
        let (frame, used) = match decode_frame(&conn.inbuf) {
            Ok(Some(f)) => f,
            Ok(None) => return Step::Going,
            Err(e) => return Step::Failed(format!("not a tsperf frame: {e}")),
        };
        conn.inbuf.drain(..used);
        match conn.conv.on_frame(frame, None, Instant::now(), 0) {
            Ok(ClientStep::Accepted(_)) if conn.phase == Phase::Opening => {
                conn.phase = Phase::Ready;
                Step::Ready
            }
            Ok(ClientStep::Report(r)) if r.bytes == len && r.digest == digest => Step::Verified,
            Ok(ClientStep::Report(r)) => Step::Failed(format!(
                "the server counted {} bytes with xxh3 {:016x}; {len} with {digest:016x} were sent",
                r.bytes, r.digest
            )),
            Ok(other) => Step::Failed(format!("unexpected answer: {other:?}")),
            Err(e) => Step::Failed(e.to_string()),
        }
    }

    /// A connection's I/O error, with where it stood.
    fn lost(&self, token: usize, e: &io::Error) -> String {
        let conn = &self.conns[token];
        format!(
            "connection lost ({}, {} of {} bytes sent): {e}",
            conn.phase.name(),
            conn.tx.sent(),
            self.load.data.len()
        )
    }
}

/// Writes `out` until it is empty or the socket takes no more.
fn flush(stream: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    while !out.is_empty() {
        let n = retry(|| stream.write(out))?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        out.drain(..n);
    }
    Ok(())
}

/// Runs one socket call again after `EINTR`.
fn retry(mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

mod phase;
use phase::Phase;

#[cfg(test)]
mod tests;
