//! The server's stdout and stderr, written so that a reader that stops reading (a paused pager,
//! a stalled `tee`) never stops the server.
//!
//! While a stream takes output, the thread that has something to say writes it itself, one
//! `write()` per line, as a program's `printf` to a terminal does: what a terminal costs per line
//! is still what is measured, paid where the seed's server paid it. It writes through a
//! description of the stream of its own that never blocks (the stream reopened non-blocking,
//! `send(MSG_DONTWAIT)` for a socket; a regular file is written as it is). When the stream takes
//! less than that, the rest waits in the stream's queue, and from then on everything goes
//! through the queue, in order, until a writer thread has drained it with ordinary blocking
//! writes.
//!
//! Two kinds of output share each stream's queue, in order:
//!
//! - **Log lines** (`--log stdout`, one per read) are never dropped and keep their
//!   back-pressure: a slow terminal slows the transfer it logs, as in the seed's experiment.
//!   While [`LINE_CAP`] bytes are waiting, a thread that writes a line waits for room (the
//!   blocking server's connection threads), except the event loop's thread, which never waits:
//!   it asks for [`Console::room`] before it reads a logged transfer and leaves that transfer unread
//!   until the writer has made room (and wakes it, see [`Console::on_room`]). Everything else it serves
//!   goes on meanwhile.
//! - **Messages** (per-transfer summaries, failures, diagnostics) never wait: while
//!   [`MESSAGE_CAP`] bytes are waiting, a message is dropped and counted, and the count is
//!   printed (`tsserver: N lines not printed: stdout was not being read`) as soon as the stream
//!   takes output again.
//!
//! The writer threads also write one line per `write()` call. At exit, [`Console::finish`] waits
//! for the queues to drain while the streams keep taking output, and gives up on a stream that
//! takes nothing for a second.
//!
//! A [`Console`] belongs to a server ([`crate::Server::console`]) and is handed to what writes
//! through it (the server's transfers, its `tracing` diagnostics: [`Messages`]); its two writer
//! threads live as long as the process, as the streams they write do.
//!
//! Memory: at most [`MESSAGE_CAP`] bytes per stream, plus, for stdout, what the event loop's
//! transfers add after it found room (a turn's lines, the reserve asked for) and one start and one
//! end line per connection.

use std::fs::File;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

mod direct;

use direct::Direct;

/// Log bytes waiting for stdout before a line waits for room.
pub const LINE_CAP: usize = 16 << 10;
/// Bytes waiting for a stream before a message is dropped.
pub const MESSAGE_CAP: usize = 128 << 10;
/// Bytes the writer writes before it gives their room back.
const GIVE_BACK: usize = 8 << 10;
/// How long [`Console::finish`] waits on a stream that takes no output.
pub const FINISH_PATIENCE: Duration = Duration::from_secs(1);

/// Which of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
}

struct Queue {
    /// Bytes waiting, whole lines.
    buf: Vec<u8>,
    /// Bytes the writer has taken and not yet written.
    in_flight: usize,
    /// Messages dropped since the last notice.
    dropped: u64,
    /// Someone found no room for this many bytes and wants [`Console::on_room`]'s wake-up when there is.
    wanted: Option<usize>,
    /// Bytes written since start (to tell progress at exit).
    written: u64,
    /// The writer is waiting for work: a producer must wake it (otherwise it will look again
    /// by itself, so a busy writer costs its producers no system call).
    writer_idle: bool,
    /// Threads waiting for room: the writer wakes them only when there are some.
    room_waiters: usize,
    /// The stream is gone (a closed pipe): output is discarded.
    broken: bool,
}

impl Queue {
    fn waiting(&self) -> usize {
        self.buf.len() + self.in_flight
    }
}

struct Channel {
    fd: i32,
    name: &'static str,
    direct: Direct,
    q: Mutex<Queue>,
    work: Condvar,
    room: Condvar,
}

/// A server's stdout and stderr: their queues and writer threads, and what waits on them.
pub struct Console {
    /// stdout, then stderr.
    channels: [Channel; 2],
    /// Called (from a writer thread) when room frees up after someone found none.
    on_room: Mutex<Vec<Box<dyn Fn() + Send>>>,
    /// Messages dropped since start, on both streams.
    dropped: AtomicU32,
    /// Set when the server stops: waiting writers append at once instead of waiting.
    released: AtomicBool,
    /// The longest a blocking writer of a log line waits for room before it appends anyway.
    line_wait: Mutex<Duration>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `c.room` for at most `left`, counted as a waiter so the writer wakes it.
fn wait_for_room<'a>(
    c: &Channel,
    mut q: MutexGuard<'a, Queue>,
    left: Duration,
) -> MutexGuard<'a, Queue> {
    q.room_waiters += 1;
    let mut q = c
        .room
        .wait_timeout(q, left)
        .unwrap_or_else(PoisonError::into_inner)
        .0;
    q.room_waiters -= 1;
    q
}

/// Writes `bytes` straight to the stream if nothing is queued before it; returns what is left
/// to queue (nothing if the stream is gone: output to it is discarded).
fn write_now<'b>(c: &Channel, q: &mut Queue, bytes: &'b [u8]) -> &'b [u8] {
    if q.broken {
        return &[];
    }
    if q.waiting() > 0 {
        return bytes;
    }
    match c.direct.write(c.fd, bytes) {
        Ok(n) => &bytes[n..],
        Err(_) => {
            q.broken = true;
            &[]
        }
    }
}

/// Wakes the writer if it waits for work.
fn kick(c: &Channel, q: &Queue) {
    if q.writer_idle {
        c.work.notify_one();
    }
}

impl Console {
    /// The console of fds 1 and 2, its writer threads started.
    pub fn start() -> Arc<Console> {
        let make = |fd, name| Channel {
            fd,
            name,
            direct: Direct::open(fd),
            q: Mutex::new(Queue {
                buf: Vec::new(),
                in_flight: 0,
                dropped: 0,
                wanted: None,
                written: 0,
                writer_idle: false,
                room_waiters: 0,
                broken: false,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
        };
        let console = Arc::new(Console {
            channels: [make(1, "stdout"), make(2, "stderr")],
            on_room: Mutex::new(Vec::new()),
            dropped: AtomicU32::new(0),
            released: AtomicBool::new(false),
            line_wait: Mutex::new(Duration::from_secs(60)),
        });
        for i in 0..2 {
            let c = console.clone();
            let _ = std::thread::Builder::new()
                .name(format!("console {i}"))
                .spawn(move || writer(&c, &c.channels[i]));
        }
        console
    }

    fn channel(&self, s: Stream) -> &Channel {
        &self.channels[match s {
            Stream::Out => 0,
            Stream::Err => 1,
        }]
    }

    /// Adds what to call when stdout has room again after [`Console::room`] found none (each
    /// event loop adds its waker).
    pub fn on_room(&self, wake: impl Fn() + Send + 'static) {
        lock(&self.on_room).push(Box::new(wake));
    }

    /// Sets the longest a blocking writer of a log line waits for room (the idle timeout).
    pub fn set_line_wait(&self, d: Duration) {
        *lock(&self.line_wait) = d;
    }

    /// Stops all waiting for room: a server cutting off its transfers lets their threads
    /// append what they have to say and get on with closing.
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
        for c in &self.channels {
            let _g = lock(&c.q);
            c.room.notify_all();
        }
    }

    fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// True if stdout has room for `reserve` more log bytes. If not, the next time it does,
    /// [`Console::on_room`]'s callbacks are called.
    pub fn room(&self, reserve: usize) -> bool {
        let c = self.channel(Stream::Out);
        let mut q = lock(&c.q);
        let fits = q.waiting() + reserve <= LINE_CAP;
        if !fits {
            q.wanted = Some(q.wanted.map_or(reserve, |r| r.max(reserve)));
        }
        fits
    }

    /// Waits until stdout has room for `reserve` more log bytes, or `until`; false if it had
    /// none.
    pub fn wait_room(&self, reserve: usize, until: Instant) -> bool {
        let c = self.channel(Stream::Out);
        let mut q = lock(&c.q);
        while q.waiting() + reserve > LINE_CAP && !self.released() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            q = wait_for_room(c, q, left);
        }
        true
    }

    /// Queues a log line (or several) for stdout; never drops it. With `wait` (never on an
    /// event loop's thread), waits while stdout is full, for at most the line wait. False if
    /// the line was discarded because stdout is gone (a closed pipe).
    pub fn line(&self, bytes: &[u8], wait: bool) -> bool {
        let c = self.channel(Stream::Out);
        let mut q = lock(&c.q);
        if q.broken {
            return false;
        }
        let bytes = write_now(c, &mut q, bytes);
        if bytes.is_empty() {
            return !q.broken;
        }
        if wait && q.waiting() >= LINE_CAP {
            let until = Instant::now() + *lock(&self.line_wait);
            while q.waiting() >= LINE_CAP && !self.released() {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                q = wait_for_room(c, q, left);
            }
        }
        q.buf.extend_from_slice(bytes);
        kick(c, &q);
        true
    }

    /// Queues `text` (whole lines) for `stream`, or drops and counts it if the stream is full.
    pub fn message(&self, stream: Stream, text: &str) {
        let c = self.channel(stream);
        let mut q = lock(&c.q);
        let rest = write_now(c, &mut q, text.as_bytes());
        if rest.is_empty() {
            return;
        }
        // The rest of a message the stream took part of is kept, so no line is torn.
        if rest.len() < text.len() || q.waiting() + text.len() <= MESSAGE_CAP {
            q.buf.extend_from_slice(rest);
        } else {
            q.dropped += 1;
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        kick(c, &q);
    }

    /// Messages not printed since start because their stream was not being read (both
    /// streams).
    pub fn dropped(&self) -> u32 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits for both streams to write what is queued, giving up on one that takes nothing for
    /// [`FINISH_PATIENCE`]. Returns the bytes left unwritten.
    pub fn finish(&self) -> usize {
        let mut left = 0;
        for c in &self.channels {
            let mut q = lock(&c.q);
            let mut seen = q.written;
            let mut since = Instant::now();
            while q.waiting() > 0 || q.dropped > 0 {
                if q.written != seen {
                    (seen, since) = (q.written, Instant::now());
                }
                let patience = FINISH_PATIENCE.saturating_sub(since.elapsed());
                if patience.is_zero() {
                    break;
                }
                q = wait_for_room(c, q, patience.min(Duration::from_millis(20)));
            }
            left += q.waiting();
        }
        left
    }
}

/// The writer thread of one stream: takes what is queued and writes it a line per call.
fn writer(console: &Console, c: &Channel) {
    // The stream's descriptor, borrowed for the life of the process (never closed here).
    // SAFETY: fds 1 and 2 stay open for the process's life; ManuallyDrop never closes them.
    let mut out = ManuallyDrop::new(unsafe { File::from_raw_fd(c.fd) });
    let mut spare = Vec::new();
    loop {
        let (batch, dropped) = {
            let mut q = lock(&c.q);
            while q.buf.is_empty() && q.dropped == 0 {
                q.writer_idle = true;
                q = c.work.wait(q).unwrap_or_else(PoisonError::into_inner);
                q.writer_idle = false;
            }
            let batch = std::mem::replace(&mut q.buf, std::mem::take(&mut spare));
            q.in_flight = batch.len();
            (batch, std::mem::take(&mut q.dropped))
        };
        let mut broken = lock(&c.q).broken;
        // Room is given back every few KiB, not per line: one lock per many lines.
        let mut done = 0;
        for piece in batch.split_inclusive(|b| *b == b'\n') {
            // A stream that is gone (EPIPE) takes nothing more; its output is discarded.
            broken = broken || write_fully(&mut out, piece).is_err();
            done += piece.len();
            if done >= GIVE_BACK {
                taken(console, c, std::mem::take(&mut done));
            }
        }
        taken(console, c, done);
        if dropped > 0 && !broken {
            let notice = format!(
                "tsserver: {dropped} {} not printed: {} was not being read\n",
                if dropped == 1 { "line" } else { "lines" },
                c.name
            );
            broken = write_fully(&mut out, notice.as_bytes()).is_err();
        }
        if broken {
            lock(&c.q).broken = true;
        }
        spare = batch;
        spare.clear();
        if spare.capacity() > MESSAGE_CAP {
            spare = Vec::new();
        }
    }
}

/// Accounts for `n` bytes written and wakes whoever waits for room.
fn taken(console: &Console, c: &Channel, n: usize) {
    let wake = {
        let mut q = lock(&c.q);
        q.in_flight -= n;
        q.written += n as u64;
        if q.room_waiters > 0 {
            c.room.notify_all();
        }
        let wake = q.wanted.is_some_and(|r| q.waiting() + r <= LINE_CAP);
        if wake {
            q.wanted = None;
        }
        wake
    };
    if wake {
        for f in lock(&console.on_room).iter() {
            f();
        }
    }
}

fn write_fully(out: &mut File, mut piece: &[u8]) -> io::Result<()> {
    while !piece.is_empty() {
        match out.write(piece) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => piece = &piece[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A `tracing` writer: each event it is given becomes one message on a console's stream.
#[derive(Clone)]
pub struct Messages(pub Arc<Console>, pub Stream);

impl Write for Messages {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.message(self.1, &String::from_utf8_lossy(buf));
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Messages {
    type Writer = Messages;
    fn make_writer(&'a self) -> Messages {
        self.clone()
    }
}
