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
//!
//! What one connection can hold, whatever its client does (docs/security.md): a hello buffer
//! ([`MAX_HELLO`](tsperf_proto::MAX_HELLO) bytes), a latency session's request buffer (4 KiB)
//! and at most [`LATENCY_CAP`](crate::outbox::LATENCY_CAP) of unsent answers plus one read's
//! worth (the loop stops reading a connection whose client does not take its answers), or a
//! transfer's accounting (over TLS, its TLS state, [`TLS_READ`](tsperf_stream::tls::TLS_READ)
//! read ahead and at most [`TLS_BUFFER`](tsperf_stream::tls::TLS_BUFFER) unsent). Each turn is bounded
//! ([`TURN_READS`](crate::receiver::TURN_READS) reads), for streams and latency sessions alike. Deadlines count from a start:
//! the hello and the authentication answer from the accept, the first byte (or request) from
//! the server's accept, and then each wait for data from the last byte.
//!
//! With `--log stdout`, a transfer is read only while stdout has room for a turn's log lines
//! ([`Console::room`](crate::console::Console::room)); otherwise it waits, unread, until the
//! console's writer wakes the loop. Nothing else waits for stdout.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;
use tracing::{debug, warn};

use super::fds::{self, Backoff, Spare};
use super::outbox::Outbox;
use super::{Outcome, Server, print_failed};
use crate::receiver::{Block, HASH_BLOCK};
use tsperf_proto::RefuseCode;
use tsperf_proto::serve::{Conversation, Refusal, busy};
use tsperf_proto::{Frame, ServerIo};

const LISTENER: Token = Token(usize::MAX);
const WAKE: Token = Token(usize::MAX - 1);
const TICKER: Token = Token(usize::MAX - 2);
/// How often deadlines are checked when nothing else wakes the loop.
const TICK: Duration = Duration::from_millis(500);

mod conn;
mod stop;
mod wait;

use stop::Stop;

use conn::Conn;

/// The loop's state beside its connections.
struct Loop<'a> {
    poll: Poll,
    listener: Option<TcpListener>,
    conns: Slab<Conn>,
    /// What the loop lends the connection it serves.
    lent: conn::Lent,
    /// The server it is a loop of: its settings, its stop and its count of open connections.
    srv: &'a Server,
    /// Connections whose last turn ended with data maybe still waiting, served again after each
    /// poll (which then does not wait), so no connection keeps the loop to itself.
    ready: Vec<usize>,
    /// Logged transfers waiting for room on stdout.
    log_waiters: Vec<usize>,
    /// Reverse streams waiting for the generated text to be made ([`tsperf_stream::send::pattern`]).
    text_waiters: Vec<usize>,
    /// A descriptor kept to tell a connection why, when `accept` runs out of them.
    spare: Spare,
    /// `accept` failed and the backlog may still hold connections: try again when a connection
    /// closes or at the next tick.
    accept_stalled: bool,
    /// Logs failed accepts at most once a second.
    backoff: Backoff,
    /// Wakes the loop every [`TICK`], so a wait needs no timeout of its own (a timeout arms a
    /// kernel timer on every wait: `tsperf_sys::tick`); None where it cannot be made, and the
    /// waits time out at [`TICK`] instead.
    ticker: Option<tsperf_sys::tick::Ticker>,
}

/// Serves with `cfg.threads` event loops, each on its own thread, all taking connections from
/// the one listening socket (each loop's poll watches it; the loop whose `accept` wins serves
/// the connection), until the process ends or every loop has stopped; or, with `--once`, one
/// loop and one client's run. `--max-clients` and every per-connection bound hold across them.
pub fn serve_all(listener: StdListener, srv: &Server) -> Result<bool> {
    let cfg = &srv.cfg;
    let threads = if cfg.once { 1 } else { cfg.threads.max(1) };
    if threads == 1 {
        return serve(listener, srv);
    }
    let listeners = (1..threads)
        .map(|_| match cfg.accept {
            crate::Accept::Shared => listener
                .try_clone()
                .context("cannot share the listening socket between event loops"),
            crate::Accept::ReusePort => crate::listen_again(&listener, cfg),
        })
        .collect::<Result<Vec<_>>>()?;
    std::thread::scope(|s| {
        let others: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                std::thread::Builder::new()
                    .name(format!("event-loop-{}", i + 1))
                    .spawn_scoped(s, move || serve(l, srv))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let mine = serve(listener, srv);
        let mut all = mine;
        for h in others {
            let theirs = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("an event loop panicked")));
            all = match (all, theirs) {
                (Ok(a), Ok(b)) => Ok(a && b),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
        }
        all
    })
}

/// Serves until the process ends, or one client's run with `--once`; then the
/// result says whether each of its connections completed.
pub fn serve(listener: StdListener, srv: &Server) -> Result<bool> {
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let mut listener = TcpListener::from_std(listener);
    let poll = Poll::new().context("cannot create the event loop")?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .context("cannot register the listener")?;
    let waker = std::sync::Arc::new(
        mio::Waker::new(poll.registry(), WAKE).context("cannot create a waker")?,
    );
    let stop_waker = waker.clone();
    srv.on_stop(move || {
        let _ = stop_waker.wake();
    });
    let room_waker = waker.clone();
    srv.console().on_room(move || {
        let _ = room_waker.wake();
    });
    let ticker = wait::ticker(&poll, TICKER, TICK);
    let mut lp = Loop {
        poll,
        listener: Some(listener),
        conns: Slab::new(),
        lent: conn::Lent {
            block: Block::new(HASH_BLOCK.max(srv.cfg.policy.bulk_read as usize), u64::MAX)
                .nonblocking(),
            scratch: vec![0; tsperf_stream::send::SCRATCH],
            waker,
        },
        srv,
        ready: Vec::new(),
        log_waiters: Vec::new(),
        text_waiters: Vec::new(),
        spare: Spare::new(),
        accept_stalled: false,
        backoff: Backoff::default(),
        ticker,
    };
    lp.run()
}

impl Loop<'_> {
    fn run(&mut self) -> Result<bool> {
        let mut events = Events::with_capacity(1024);
        let mut stop = Stop::default();
        let mut next_sweep = Instant::now() + TICK;
        loop {
            let wait = wait::next(
                !self.ready.is_empty(),
                stop.next(),
                self.ticker.is_some(),
                TICK,
            );
            let mut ticked = false;
            match self.poll.poll(&mut events, wait) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("event loop poll failed"),
            }
            for event in events.iter() {
                let done = match event.token() {
                    // A stop request, room on stdout for logged transfers, or the generated
                    // text made for the streams waiting for it.
                    WAKE => self
                        .serve_log_waiters()
                        .or_else(|| self.serve_text_waiters()),
                    LISTENER => {
                        self.accept_all();
                        None
                    }
                    TICKER => {
                        ticked = self.ticker.as_ref().is_some_and(|t| t.clear() > 0);
                        None
                    }
                    Token(key) => self.serve_event(key, event.is_read_closed()),
                };
                if let Some(done) = done {
                    return Ok(done);
                }
            }
            for key in std::mem::take(&mut self.ready) {
                // Served by an event since, closed, or the key reused by a new connection: skip.
                if !self.conns.get(key).is_some_and(|c| c.more) {
                    continue;
                }
                if let Some(done) = self.turn_and_requeue(key, true) {
                    return Ok(done);
                }
            }
            if self.srv.stopping() && self.stopping(&mut stop) {
                return Ok(true);
            }
            let now = Instant::now();
            if ticked || now >= next_sweep {
                next_sweep = now + TICK;
                if self.accept_stalled {
                    self.accept_all();
                }
                if let Some(done) = self.serve_log_waiters() {
                    return Ok(done);
                }
                if let Some(done) = self.sweep(now) {
                    return Ok(done);
                }
            }
        }
    }

    /// One event for connection `key`.
    fn serve_event(&mut self, key: usize, read_closed: bool) -> Option<bool> {
        // A token we no longer know: its connection closed earlier in this batch.
        let conn = self.conns.get_mut(key)?;
        conn.wakeups += 1;
        // The client closed its direction: no edge will come after the bytes still queued.
        if read_closed && let Some(rx) = conn.rx.as_deref_mut() {
            rx.peer_closed = true;
        }
        self.turn_and_requeue(key, false)
    }

    /// Gives `key` a turn, then queues it for another if its turn ended with data waiting (and
    /// it is not queued yet: `from_ready` says it was just taken from the queue), or for room on
    /// stdout if it waits for that. `Some` when `--once` is done.
    fn turn_and_requeue(&mut self, key: usize, from_ready: bool) -> Option<bool> {
        let (was_ready, was_waiting) = self
            .conns
            .get(key)
            .map_or((false, false), |c| (c.more && !from_ready, c.log_wait));
        if self.turn(key).is_some()
            && let Some(done) = self.srv.once_over()
        {
            return Some(done);
        }
        if let Some(c) = self.conns.get_mut(key) {
            if c.more && !was_ready {
                self.ready.push(key);
            }
            if c.log_wait && !was_waiting {
                self.log_waiters.push(key);
            }
            if std::mem::take(&mut c.text_wait) {
                self.text_waiters.push(key);
            }
        }
        None
    }

    /// Gives every logged transfer waiting for stdout a turn (it waits again if there is still
    /// no room).
    fn serve_log_waiters(&mut self) -> Option<bool> {
        for key in std::mem::take(&mut self.log_waiters) {
            let Some(c) = self.conns.get_mut(key) else {
                continue;
            };
            if !c.log_wait {
                continue;
            }
            c.log_wait = false;
            // Its time unread since it found no room was the log's.
            if let Some(rx) = c.rx.as_deref_mut() {
                rx.lap(tsperf_proto::TimePhase::Log);
            }
            if let Some(done) = self.turn_and_requeue(key, false) {
                return Some(done);
            }
        }
        None
    }

    /// Gives every reverse stream that waited for the generated text a turn (the text is made:
    /// the maker woke the loop).
    fn serve_text_waiters(&mut self) -> Option<bool> {
        for key in std::mem::take(&mut self.text_waiters) {
            if let Some(done) = self.turn_and_requeue(key, false) {
                return Some(done);
            }
        }
        None
    }

    /// Gives connection `key` one turn; closes it if that ended it. `Some(completed)` when it
    /// closed.
    fn turn(&mut self, key: usize) -> Option<bool> {
        let outcome = self.conns.get_mut(key)?.advance(&mut self.lent, self.srv)?;
        Some(self.close(key, outcome))
    }

    /// Removes connection `key` and closes it with `outcome`. True if it completed.
    fn close(&mut self, key: usize, outcome: Outcome) -> bool {
        let conn = self.conns.remove(key);
        self.srv
            .open()
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        let peer = conn.peer;
        let done = conn.close(&self.poll, outcome, self.srv);
        self.srv.once_ended(peer, done);
        // A descriptor is free again: connections the backlog held may be accepted now.
        if self.accept_stalled {
            self.accept_all();
        }
        done
    }

    /// Closes connections past their deadline. `Some` when the `--once` run is over.
    fn sweep(&mut self, now: Instant) -> Option<bool> {
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| now >= c.conv.deadline())
            .map(|(k, _)| k)
            .collect();
        for key in expired {
            // Below its low-water mark a slow stream raises no event: read what is waiting
            // before calling it idle.
            if self.conns[key].mark.raised() {
                if let Some(done) = self.turn_and_requeue(key, false) {
                    return Some(done);
                }
                if self.conns.get(key).is_none_or(|c| now < c.conv.deadline()) {
                    continue;
                }
            }
            let outcome = self.conns[key].timed_out(self.srv);
            self.close(key, outcome);
        }
        // With --once: the run is over (a connection closed, or the patience for one that
        // never came ran out).
        self.srv.once_over()
    }

    /// Accepts every waiting connection (or refuses it with a reason past `--max-clients`).
    fn accept_all(&mut self) {
        self.accept_stalled = false;
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            let (mut stream, peer) = match listener.accept() {
                Ok((stream, peer)) => (stream, super::canonical(peer)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.backoff.ok();
                    return;
                }
                // Gone before it was accepted: the next one may be fine.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue;
                }
                Err(e) if fds::exhausted(&e) => {
                    // Tell the waiting connection why rather than leave it unanswered; if even
                    // that fails, try again when a connection closes or at the next tick.
                    let lent = self.spare.lend(|| match listener.accept() {
                        Ok((mut stream, peer)) => {
                            refuse_now(
                                &mut stream,
                                super::canonical(peer),
                                (RefuseCode::Limit, fds::OUT_OF_DESCRIPTORS.to_owned()),
                                self.srv,
                            );
                            true
                        }
                        Err(_) => false,
                    });
                    if lent != Some(true) {
                        let _ = self.backoff.failed(&e);
                        self.accept_stalled = true;
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    let _ = self.backoff.failed(&e);
                    self.accept_stalled = true;
                    return;
                }
            };
            // Counted before it is served, so loops accepting at once cannot pass the limit.
            if self
                .srv
                .open()
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
                >= self.srv.cfg.max_clients
            {
                self.srv
                    .open()
                    .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                refuse_now(&mut stream, peer, busy(self.srv.cfg.max_clients), self.srv);
                continue;
            }
            self.register(stream, peer);
        }
    }

    /// Registers an accepted connection with the poll and gives it its conversation.
    fn register(&mut self, mut stream: mio::net::TcpStream, peer: std::net::SocketAddr) {
        let entry = self.conns.vacant_entry();
        let token = Token(entry.key());
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut stream, token, interest) {
            warn!(%peer, "cannot register connection: {e}");
            self.srv
                .open()
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            return;
        }
        debug!(%peer, "connection");
        let mark = super::WakeMark::new(&stream);
        entry.insert(Conn {
            stream,
            peer,
            conv: Conversation::new(
                ServerIo::EventLoop,
                &self.srv.cfg.policy,
                crate::drive::challenge(&self.srv.cfg),
                Instant::now(),
            ),
            rx: None,
            tx: None,
            tls: None,
            out: Outbox::default(),
            closing: None,
            log_wait: false,
            wakeups: 0,
            more: false,
            mark,
            text_wait: false,
        });
    }
}

/// Refuses a connection the loop will not serve. Best effort: a small frame fits any fresh
/// socket's buffer.
fn refuse_now(stream: &mut TcpStream, peer: SocketAddr, (code, reason): Refusal, srv: &Server) {
    let mut out = Outbox::default();
    out.frame(&Frame::Refuse {
        code,
        reason: reason.clone(),
    });
    let _ = out.flush(stream);
    print_failed(srv, peer, &Outcome::Refused(code, reason), None);
}
