//! The default server: one thread, one mio event loop, many transfers at once.
//!
//! mio's registrations are edge-triggered, so every handler repeats its operation until the
//! socket says `WouldBlock`: accept until `WouldBlock`, read until `WouldBlock`, write until the
//! output is gone or `WouldBlock`. Stopping early would wait for an event that never comes.
//! Each connection is a small state machine (hello, data, closing) in a token table; events for
//! tokens no longer in the table are ignored, and closed connections are deregistered.
//!
//! All connections share one read [`Block`]: a connection's reads land in it and are checksummed
//! before the loop turns to the next connection, so a connection costs its socket, its hasher and
//! a few counters, not a buffer.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;
use tracing::{debug, warn};

use super::latency::LatencySession;
use super::outbox::Outbox;
use super::{
    AUTH_FAILED, Outcome, SHUTTING_DOWN, ServerConfig, admit, busy, finish_latency,
    finish_transfer, incomplete, print_failed, save_failed, start_transfer,
};
use crate::net;
use crate::protocol::{Frame, Hello, MAX_HELLO, Mode, ServerIo, TRAILER, decode_hello};
use crate::receiver::{Block, HASH_BLOCK, ReadEnd, Receiver};

const LISTENER: Token = Token(usize::MAX);
const WAKE: Token = Token(usize::MAX - 1);
/// How often deadlines are checked when nothing else wakes the loop.
const TICK: Duration = Duration::from_millis(500);

enum State {
    Hello {
        buf: Box<[u8; MAX_HELLO + 1]>,
        have: usize,
    },
    Data {
        hello: Hello,
        rx: Box<Receiver>,
    },
    /// Waiting for the answer to the authentication challenge.
    Auth {
        hello: Hello,
        challenge: [u8; crate::auth::LEN],
        buf: [u8; crate::auth::LEN],
        have: usize,
    },
    /// Every data byte is in; waiting for the client's digest.
    Trailer {
        hello: Hello,
        rx: Box<Receiver>,
        buf: [u8; TRAILER],
        have: usize,
    },
    Latency(Box<LatencySession>),
    /// Flushing the last frame; the outcome is final.
    Closing(Outcome),
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    state: State,
    out: Outbox,
    deadline: Instant,
    idle: Duration,
    hello_timeout: Duration,
    wakeups: u64,
    /// Its last turn ended with data maybe still waiting: it is in the ready list and gets
    /// another turn without waiting for an event (edge-triggered epoll sends no new one).
    more: bool,
    /// The socket's receive low-water mark.
    mark: super::WakeMark,
}

/// Serves until the process ends, or one connection with `--once`; then the result says whether
/// that connection completed a transfer.
pub fn serve(listener: StdListener, cfg: &ServerConfig) -> Result<bool> {
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let mut listener = Some(TcpListener::from_std(listener));
    let mut poll = Poll::new().context("cannot create the event loop")?;
    if let Some(l) = &mut listener {
        poll.registry()
            .register(l, LISTENER, Interest::READABLE)
            .context("cannot register the listener")?;
    }
    let waker = std::sync::Arc::new(
        mio::Waker::new(poll.registry(), WAKE).context("cannot create a waker")?,
    );
    super::on_stop(move || {
        let _ = waker.wake();
    });
    let mut stop_by: Option<Instant> = None;
    let mut conns: Slab<Conn> = Slab::new();
    let mut events = Events::with_capacity(1024);
    let mut block = Block::new(HASH_BLOCK, u64::MAX);
    let mut next_sweep = Instant::now() + TICK;

    // Connections whose last turn ended with data maybe still waiting, served again after each
    // poll (which then does not wait), so no connection keeps the loop to itself.
    let mut ready: Vec<usize> = Vec::new();

    loop {
        let wait = if ready.is_empty() {
            stop_by.map_or(TICK, |t| {
                t.saturating_duration_since(Instant::now()).min(TICK)
            })
        } else {
            Duration::ZERO
        };
        match poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("event loop poll failed"),
        }
        for event in events.iter() {
            if event.token() == WAKE {
                continue;
            }
            if event.token() == LISTENER {
                if let Some(l) = &listener {
                    accept_all(l, &poll, &mut conns, cfg);
                }
                continue;
            }
            let key = event.token().0;
            // A token we no longer know: its connection closed earlier in this batch.
            let Some(conn) = conns.get_mut(key) else {
                continue;
            };
            conn.wakeups += 1;
            let was_ready = conn.more;
            if let Some(done) = turn(&poll, &mut conns, key, &mut block, cfg)
                && cfg.once
            {
                return Ok(done);
            }
            if !was_ready && conns.get(key).is_some_and(|c| c.more) {
                ready.push(key);
            }
        }
        for key in std::mem::take(&mut ready) {
            // Served by an event since, closed, or the key reused by a new connection: skip.
            if !conns.get(key).is_some_and(|c| c.more) {
                continue;
            }
            if let Some(done) = turn(&poll, &mut conns, key, &mut block, cfg)
                && cfg.once
            {
                return Ok(done);
            }
            if conns.get(key).is_some_and(|c| c.more) {
                ready.push(key);
            }
        }
        if super::stopping() {
            if stop_by.is_none() {
                // Stop accepting; connections that have not started a transfer are refused now.
                if let Some(mut l) = listener.take() {
                    let _ = poll.registry().deregister(&mut l);
                }
                stop_by = Some(Instant::now() + cfg.grace);
                let waiting: Vec<usize> = conns
                    .iter()
                    .filter(|(_, c)| c.not_started())
                    .map(|(k, _)| k)
                    .collect();
                for key in waiting {
                    let mut conn = conns.remove(key);
                    let outcome = conn.abort(SHUTTING_DOWN);
                    close(&poll, conn, outcome);
                }
            }
            if stop_by.is_some_and(|t| Instant::now() >= t) {
                let keys: Vec<usize> = conns.iter().map(|(k, _)| k).collect();
                for key in keys {
                    let mut conn = conns.remove(key);
                    let outcome = conn.abort(SHUTTING_DOWN);
                    close(&poll, conn, outcome);
                }
            }
            if conns.is_empty() {
                return Ok(true);
            }
        }
        let now = Instant::now();
        if now >= next_sweep {
            next_sweep = now + TICK;
            let expired: Vec<usize> = conns
                .iter()
                .filter(|(_, c)| now >= c.deadline)
                .map(|(k, _)| k)
                .collect();
            for key in expired {
                // Below its low-water mark a slow stream raises no event: read what is waiting
                // before calling it idle.
                if conns[key].mark.raised() {
                    let was_ready = conns[key].more;
                    let closed = turn(&poll, &mut conns, key, &mut block, cfg);
                    if let Some(done) = closed
                        && cfg.once
                    {
                        return Ok(done);
                    }
                    if !was_ready && conns.get(key).is_some_and(|c| c.more) {
                        ready.push(key);
                    }
                    if conns.get(key).is_none_or(|c| now < c.deadline) {
                        continue;
                    }
                }
                let mut conn = conns.remove(key);
                let outcome = conn.timed_out();
                // Say why, where the protocol allows: a hello that never came is refused.
                if let Outcome::Refused(reason) = &outcome {
                    conn.queue(&Frame::Refuse(reason.clone()));
                    let _ = conn.flush();
                }
                let done = close(&poll, conn, outcome);
                if cfg.once {
                    return Ok(done);
                }
            }
        }
    }
}

/// Gives connection `key` one turn; closes it if that ended it. `Some(completed)` when it
/// closed.
fn turn(
    poll: &Poll,
    conns: &mut Slab<Conn>,
    key: usize,
    block: &mut Block,
    cfg: &ServerConfig,
) -> Option<bool> {
    let outcome = conns.get_mut(key)?.advance(block, cfg)?;
    Some(close(poll, conns.remove(key), outcome))
}

fn accept_all(listener: &TcpListener, poll: &Poll, conns: &mut Slab<Conn>, cfg: &ServerConfig) {
    loop {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                if conns.len() >= cfg.max_clients {
                    // Best effort: a small frame fits any fresh socket's buffer.
                    let mut out = Outbox::default();
                    let reason = busy(cfg);
                    out.frame(&Frame::Refuse(reason.clone()));
                    let _ = out.flush(&mut stream);
                    print_failed(peer, &Outcome::Refused(reason));
                    continue;
                }
                let entry = conns.vacant_entry();
                let token = Token(entry.key());
                let interest = Interest::READABLE | Interest::WRITABLE;
                if let Err(e) = poll.registry().register(&mut stream, token, interest) {
                    warn!(%peer, "cannot register connection: {e}");
                    continue;
                }
                debug!(%peer, "connection");
                let mark = super::WakeMark::new(&stream);
                entry.insert(Conn {
                    stream,
                    peer,
                    state: State::Hello {
                        buf: Box::new([0; MAX_HELLO + 1]),
                        have: 0,
                    },
                    out: Outbox::default(),
                    deadline: Instant::now() + cfg.hello_timeout,
                    idle: cfg.idle_timeout,
                    hello_timeout: cfg.hello_timeout,
                    wakeups: 0,
                    more: false,
                    mark,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Out of descriptors and the like: the next connection's event retries.
                warn!("accept failed: {e}");
                return;
            }
        }
    }
}

/// Deregisters and drops a finished connection, printing its outcome. True if it completed.
fn close(poll: &Poll, mut conn: Conn, outcome: Outcome) -> bool {
    let _ = poll.registry().deregister(&mut conn.stream);
    print_failed(conn.peer, &outcome);
    matches!(outcome, Outcome::Complete)
}

impl Conn {
    /// Does all the work the socket allows now. `Some(outcome)` when the connection is finished.
    fn advance(&mut self, block: &mut Block, cfg: &ServerConfig) -> Option<Outcome> {
        if let State::Hello { .. } = self.state {
            self.read_hello(cfg);
        }
        if let State::Auth { .. } = self.state {
            self.read_auth(cfg);
        }
        if let State::Data { .. } = self.state {
            self.read_data(block);
        }
        if let State::Trailer { .. } = self.state {
            self.read_trailer(cfg);
        }
        if let State::Latency(_) = self.state {
            self.read_latency();
        }
        let flushed = self.flush();
        if !matches!(self.state, State::Closing(_)) {
            let broken =
                |e: io::Error| Outcome::Incomplete(format!("cannot write to the client: {e}"));
            return flushed.err().map(broken);
        }
        match flushed {
            // More to write: the next WRITABLE event resumes it.
            Ok(false) => None,
            Ok(true) => Some(self.take_outcome()),
            Err(e) => {
                debug!(peer = %self.peer, "could not send the final frame: {e}");
                Some(self.take_outcome())
            }
        }
    }

    fn take_outcome(&mut self) -> Outcome {
        match std::mem::replace(&mut self.state, State::Closing(Outcome::Complete)) {
            State::Closing(outcome) => outcome,
            _ => unreachable!("take_outcome is called only in the closing state"),
        }
    }

    fn read_hello(&mut self, cfg: &ServerConfig) {
        let State::Hello { buf, have } = &mut self.state else {
            return;
        };
        let verdict = loop {
            match decode_hello(&buf[..*have]) {
                Ok(Some((hello, used))) if used == *have => break Ok(hello),
                Ok(Some(_)) => {
                    break Err("data arrived before the server accepted the hello".into());
                }
                Ok(None) => {}
                Err(e) => break Err(e.to_string()),
            }
            match self.stream.read(&mut buf[*have..]) {
                Ok(0) if *have == 0 => break Err("connection closed without a hello".to_owned()),
                Ok(0) => break Err(format!("connection closed after {have} bytes of a hello")),
                Ok(n) => *have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(format!("error reading the hello: {e}")),
            }
        };
        let hello = match verdict {
            Ok(hello) if cfg.auth.is_some() => {
                let challenge = crate::auth::challenge();
                self.queue(&Frame::Challenge(challenge));
                self.state = State::Auth {
                    hello,
                    challenge,
                    buf: [0; crate::auth::LEN],
                    have: 0,
                };
                return;
            }
            other => other,
        };
        self.admit(hello, cfg);
    }

    /// Reads the answer to the challenge and admits the hello if it is right.
    fn read_auth(&mut self, cfg: &ServerConfig) {
        let State::Auth {
            challenge,
            buf,
            have,
            ..
        } = &mut self.state
        else {
            return;
        };
        while *have < buf.len() {
            match self.stream.read(&mut buf[*have..]) {
                Ok(0) => break,
                Ok(n) => *have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let right =
            *have == buf.len() && cfg.auth.as_ref().is_some_and(|k| k.verify(challenge, buf));
        let State::Auth { hello, .. } =
            std::mem::replace(&mut self.state, State::Closing(Outcome::Complete))
        else {
            unreachable!("matched above");
        };
        self.admit(
            if right {
                Ok(hello)
            } else {
                Err(AUTH_FAILED.to_owned())
            },
            cfg,
        );
    }

    /// Accepts an (authenticated) hello the server will serve, or refuses it with the reason.
    fn admit(&mut self, verdict: Result<Hello, String>, cfg: &ServerConfig) {
        let peer = self.peer;
        let admitted = verdict.and_then(|hello| {
            let read_size = admit(&hello, cfg)?;
            let rx = match hello.mode {
                Mode::Stream => Some(Box::new(start_transfer(&hello, read_size, peer, cfg)?)),
                Mode::Latency => None,
            };
            Ok((hello, read_size, rx))
        });
        match admitted {
            Ok((hello, read_size, rx)) => {
                self.queue(&Frame::Accept {
                    read_size,
                    server_io: ServerIo::EventLoop,
                    log: cfg.log,
                });
                self.deadline = Instant::now() + self.idle;
                match rx {
                    Some(rx) => self.state = State::Data { hello, rx },
                    None => {
                        if hello.nodelay {
                            let _ = self.stream.set_nodelay(true);
                        }
                        self.state = State::Latency(Box::new(LatencySession::new(&hello)));
                    }
                }
            }
            Err(reason) => {
                self.queue(&Frame::Refuse(reason.clone()));
                self.state = State::Closing(Outcome::Refused(reason));
            }
        }
    }

    fn read_data(&mut self, block: &mut Block) {
        let State::Data { hello, rx } = &mut self.state else {
            return;
        };
        let before = rx.bytes();
        if before == 0 {
            // The hello and its accept made this look like an interactive exchange to the
            // kernel, which would now hold back ACKs of the stream (see `net::quickack`).
            let _ = net::quickack(&self.stream);
        }
        let end = block.read_turn(&mut self.stream, rx);
        self.mark.follow(&self.stream, rx);
        if rx.bytes() > before {
            self.deadline = Instant::now() + self.idle;
        }
        self.more = matches!(end, ReadEnd::TurnOver);
        let why = match end {
            ReadEnd::WouldBlock | ReadEnd::TurnOver => return,
            ReadEnd::Complete => None,
            ReadEnd::Eof => Some("the client closed the connection".to_owned()),
            ReadEnd::Error(e) => Some(e.to_string()),
            ReadEnd::Sink(e) => {
                let reason = save_failed(hello, &e);
                rx.discard();
                self.out.frame(&Frame::Abort(reason.clone()));
                Some(reason)
            }
        };
        if let Some(why) = why {
            self.state = State::Closing(incomplete(hello, rx, &why));
            return;
        }
        let State::Data { hello, rx } =
            std::mem::replace(&mut self.state, State::Closing(Outcome::Complete))
        else {
            unreachable!("matched above");
        };
        self.state = State::Trailer {
            hello,
            rx,
            buf: [0; TRAILER],
            have: 0,
        };
    }

    /// Reads the client's digest, then finishes the transfer.
    fn read_trailer(&mut self, cfg: &ServerConfig) {
        let State::Trailer {
            hello,
            rx,
            buf,
            have,
        } = &mut self.state
        else {
            return;
        };
        while *have < TRAILER {
            match self.stream.read(&mut buf[*have..]) {
                Ok(0) => {
                    let why = "the client closed before sending its digest";
                    self.state = State::Closing(incomplete(hello, rx, why));
                    return;
                }
                Ok(n) => *have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.state = State::Closing(incomplete(hello, rx, &e.to_string()));
                    return;
                }
            }
        }
        rx.wakeups = self.wakeups;
        let rcvbuf = net::recv_buffer(&self.stream);
        let digest = u64::from_be_bytes(*buf);
        let frame = finish_transfer(
            rx,
            hello,
            self.peer,
            ServerIo::EventLoop,
            cfg,
            rcvbuf,
            digest,
        );
        let outcome = match &frame {
            Frame::Report(_) => Outcome::Complete,
            _ => Outcome::Incomplete(format!("'{}' could not be saved", hello.name)),
        };
        self.out.frame(&frame);
        self.state = State::Closing(outcome);
    }

    /// True while the connection has not begun a transfer or a latency session.
    fn not_started(&self) -> bool {
        matches!(self.state, State::Hello { .. } | State::Auth { .. })
    }

    /// Ends the connection now, telling the client why where the protocol allows, and removing
    /// any partly saved file.
    fn abort(&mut self, why: &str) -> Outcome {
        let outcome = match &mut self.state {
            State::Hello { .. } | State::Auth { .. } => {
                self.out.frame(&Frame::Refuse(why.to_owned()));
                Outcome::Refused(why.to_owned())
            }
            State::Data { hello, rx } | State::Trailer { hello, rx, .. } => {
                self.out.frame(&Frame::Abort(why.to_owned()));
                incomplete(hello, rx, why)
            }
            State::Latency(session) => finish_latency(session, self.peer, Some(why.to_owned())),
            State::Closing(_) => return self.take_outcome(),
        };
        let _ = self.flush();
        self.state = State::Closing(Outcome::Complete);
        outcome
    }

    /// What a connection past its deadline ends as.
    fn timed_out(&mut self) -> Outcome {
        match &mut self.state {
            State::Auth { .. } => Outcome::Refused("no authentication answer in time".into()),
            State::Hello { .. } => Outcome::Refused(format!(
                "no complete hello within {} s",
                self.hello_timeout.as_secs_f64()
            )),
            State::Data { hello, rx, .. } => {
                let why = format!("no data for {} s", self.idle.as_secs_f64());
                incomplete(hello, rx, &why)
            }
            State::Trailer { hello, rx, .. } => {
                let why = format!("no digest after the data for {} s", self.idle.as_secs_f64());
                incomplete(hello, rx, &why)
            }
            State::Latency(session) => {
                let why = format!("no request for {} s", self.idle.as_secs_f64());
                finish_latency(session, self.peer, Some(why))
            }
            State::Closing(_) => Outcome::Incomplete("the client did not take its reply".into()),
        }
    }

    fn queue(&mut self, frame: &Frame) {
        self.out.frame(frame);
    }

    /// Writes queued output until it is gone (`Ok(true)`) or the socket is full (`Ok(false)`).
    fn flush(&mut self) -> io::Result<bool> {
        self.out.flush(&mut self.stream)
    }

    /// Answers clock queries until `WouldBlock`; the client closing ends the session.
    fn read_latency(&mut self) {
        let State::Latency(session) = &mut self.state else {
            return;
        };
        let why = loop {
            match self.stream.read(session.space()) {
                Ok(0) => break None,
                Ok(n) => {
                    self.deadline = Instant::now() + self.idle;
                    if let Err(e) = session.filled(n, &mut self.out) {
                        break Some(format!("bad request: {e}"));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e.to_string()),
            }
        };
        self.state = State::Closing(finish_latency(session, self.peer, why));
    }
}
