//! One connection of the thread-per-connection server: blocking reads under the
//! conversation's deadlines, the transfer beside the conversation, and its effects performed
//! as the event loop performs them ([`crate::drive`]).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tracing::{debug, warn};
use tsperf_proto::serve::{Conversation, DataEnd, Phase, Step};
use tsperf_proto::{Frame, LogMode, ServerIo, TimePhase, encode_frame};
use tsperf_sys::direct::Direct;
use tsperf_sys::net;
use tsperf_sys::timing::unix_ns_now;

use crate::drive::{Where, challenge, data_end, perform};
use crate::outbox::Outbox;
use crate::receiver::{Block, ReadEnd, Receiver};
use crate::turn::{self, Turned};
use crate::{Outcome, SHUTTING_DOWN, Server, print_failed};
use tsperf_stream::send::Sender;
use tsperf_stream::tls::{Tls, Wire};

/// Runs one connection to its end and prints its outcome.
pub(super) fn handle(mut stream: TcpStream, peer: SocketAddr, srv: &Server) -> Outcome {
    let cfg = &srv.cfg;
    debug!(%peer, "connection");
    let mut c = Conn {
        conv: Conversation::new(
            ServerIo::Blocking,
            &cfg.policy,
            challenge(cfg),
            Instant::now(),
        ),
        rx: None,
        tx: None,
        tls: None,
        stream: &mut stream,
        peer,
        srv,
    };
    let outcome = c.converse();
    // A stream over TLS ends with its close_notify, where the clear one would just close.
    let _ = c.wire().close();
    print_failed(srv, peer, &outcome, c.conv.hello());
    outcome
}

struct Conn<'a> {
    stream: &'a mut TcpStream,
    peer: SocketAddr,
    /// The server: its settings and its stop.
    srv: &'a Server,
    conv: Conversation,
    /// The transfer's accounting, once the conversation has begun one.
    rx: Option<Box<Receiver>>,
    /// A reverse stream's sending, once begun.
    tx: Option<Box<Sender>>,
    /// A stream over TLS, once its data phase has begun.
    tls: Option<Box<Tls>>,
}

impl Conn<'_> {
    /// The connection's bytes: through TLS once a stream over it has begun.
    fn wire(&mut self) -> Wire<'_, TcpStream> {
        Wire::new(&mut *self.stream, self.tls.as_deref_mut())
    }

    fn perform(&mut self, step: Step) -> Step {
        let at = Where {
            peer: self.peer,
            socket: &*self.stream,
            srv: self.srv,
            server_io: ServerIo::Blocking,
        };
        perform(step, &mut self.conv, &mut self.rx, &mut self.tx, at)
    }

    fn converse(&mut self) -> Outcome {
        // Every write, the answers of a latency session included, gives up after the idle
        // timeout.
        let _ = self
            .stream
            .set_write_timeout(Some(self.srv.cfg.policy.idle_timeout));
        loop {
            let phase = self.conv.phase();
            if matches!(phase, Phase::Data | Phase::Send | Phase::Trailer) {
                self.tls = crate::drive::start_tls(self.tls.take(), &self.conv, self.srv);
            }
            let step = match phase {
                Phase::Hello | Phase::Auth | Phase::Clock | Phase::Trailer => self.read_small(),
                Phase::Data => self.serve_data(),
                Phase::Send => self.serve_send(),
                Phase::Latency => return self.serve_latency(),
                Phase::Begin | Phase::Finish | Phase::Done => {
                    return Outcome::Incomplete("the conversation ended".into());
                }
            };
            let step = self.perform(step);
            if let Some(frame) = &step.send {
                // A latency session's socket is set up before its Accept goes out, as the
                // event loop does.
                if let (Frame::Accept { .. }, Some(session)) = (frame, self.conv.latency()) {
                    crate::latency_socket(self.stream, session.nodelay);
                }
                if let Err(e) = send_step(&mut self.wire(), &step) {
                    let why = format!("cannot write to the client: {e}");
                    match &step.end {
                        None => {
                            let abort = self.conv.abort(&why);
                            let abort = self.perform(abort);
                            return abort.end.unwrap_or(Outcome::Incomplete(why));
                        }
                        Some(Outcome::Complete) => {
                            warn!(peer = %self.peer, "could not send the report: {e}");
                        }
                        Some(_) => {}
                    }
                }
            }
            if let Some(outcome) = step.end {
                return outcome;
            }
        }
    }

    /// Sets the read timeout to what is left before the conversation's deadline; false if none
    /// is.
    fn until_deadline(&self) -> bool {
        let left = self
            .conv
            .deadline()
            .saturating_duration_since(Instant::now());
        !left.is_zero() && self.stream.set_read_timeout(Some(left)).is_ok()
    }

    /// One read of the hello, the authentication answer, a clock query or the trailer, by the
    /// deadline.
    fn read_small(&mut self) -> Step {
        if !self.until_deadline() {
            return self.conv.timed_out(false, false);
        }
        let read = Wire::new(&mut *self.stream, self.tls.as_deref_mut()).read(self.conv.space());
        match read {
            Ok(n) => self.conv.received(n, Instant::now(), &mut unix_ns_now),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Step::default(),
            Err(e) if net::is_timeout(&e) => self.conv.timed_out(false, false),
            Err(e) => self.conv.read_failed(&e),
        }
    }

    /// Sends a reverse stream's data, then its end (the Sent frame and the trailer); the
    /// connection closes after. A write that waits the idle timeout for the client to take
    /// bytes is the end of it.
    fn serve_send(&mut self) -> Step {
        // Made when the stream began (drive::perform); without one nothing can be sent (and a
        // default step would serve this phase again for ever).
        let Some(mut tx) = self.tx.take() else {
            return self.conv.send_failed("no reverse stream was begun");
        };
        if let Some(wants) = tx.wants() {
            tx.give(self.srv.text().wait(wants));
        }
        let mut scratch = vec![0; tsperf_stream::send::SCRATCH];
        // Issue 32 (4): writes wait a slice of the idle timeout, and the client is idle for as
        // long as its turns keep stalling (a write that waited its slice, or came back with
        // part of a chunk, and less than STALL_BYTES moved: the few bytes a client's kernel
        // squeezes in while its application reads nothing are not progress).
        let idle = self.srv.cfg.policy.idle_timeout;
        // A stream over TLS shakes hands before its first byte (what the client sends during
        // the data is a stop, and must not be its handshake).
        if let Err(e) = self.wire().flush() {
            return self
                .conv
                .send_failed(&format!("TLS with the client failed: {e}"));
        }
        let _ = self.stream.set_write_timeout(Some(write_slice(idle)));
        let mut stalled_since: Option<Instant> = None;
        loop {
            let stalls = tx.stalls();
            let turned = if self.srv.stopping_now() {
                turn::fail_sending(&mut tx, &mut self.conv, SHUTTING_DOWN, &mut scratch)
            } else {
                let io = ServerIo::Blocking;
                match self.tls.as_deref_mut() {
                    None => turn::send_turn(
                        &mut tx,
                        &mut self.conv,
                        &mut Direct(self.stream),
                        io,
                        &mut scratch,
                    ),
                    tls => turn::send_turn(
                        &mut tx,
                        &mut self.conv,
                        &mut Wire::new(&mut *self.stream, tls),
                        io,
                        &mut scratch,
                    ),
                }
            };
            let (moved, timed_out) = match turned {
                Turned::On {
                    moved, timed_out, ..
                } => (moved, timed_out),
                Turned::Closing(closing) => return self.sent_all(&mut tx, &closing),
                Turned::Over(reason, step) => {
                    if let Some(reason) = reason {
                        let mut wire = self.wire();
                        let _ = wire.write_all(&reason).and_then(|()| wire.flush());
                    }
                    return *step;
                }
            };
            let now = Instant::now();
            if (tx.stalls() > stalls || timed_out) && moved < STALL_BYTES {
                let since = *stalled_since.get_or_insert(now);
                if now.duration_since(since) >= idle {
                    return self.conv.timed_out(false, false);
                }
            } else {
                stalled_since = None;
            }
        }
    }

    /// Writes a reverse stream's end (`closing`: the Sent frame and the trailer).
    fn sent_all(&mut self, tx: &mut Sender, closing: &[u8]) -> Step {
        let mut wire = self.wire();
        if let Err(e) = wire
            .write_all(closing)
            .and_then(|()| wire.flush())
            .and_then(|()| wire.close())
        {
            return self
                .conv
                .send_failed(&format!("cannot write to the client: {e}"));
        }
        crate::print_sent(self.srv, self.peer, self.conv.hello(), closing);
        // Unread, what the client sent last would make the close a reset.
        let _ = tx.listen(&*self.stream);
        self.conv.sent_all()
    }

    /// Reads the transfer's data to its end (or its failure).
    fn serve_data(&mut self) -> Step {
        // The hello and its accept made this look like an interactive exchange to the kernel,
        // which would now hold back ACKs of the stream (see `net::quickack`).
        let _ = net::quickack(&*self.stream);
        let Some(rx) = self.rx.as_deref_mut() else {
            return Step::default();
        };
        let mut block = Block::new(rx.read_size(), rx.expected());
        let mut mark = crate::WakeMark::new(&*self.stream);
        rx.large_segments = mark.usable();
        // The first byte is due by the conversation's deadline; after it, each read waits at
        // most the idle timeout (set once: no system call per turn).
        if !self.until_deadline() {
            return self.conv.timed_out(false, false);
        }
        let mut rcvtimeo = self.srv.cfg.policy.idle_timeout;
        loop {
            if let Some(timed_out) = self.wait_for_stdout() {
                return timed_out;
            }
            // Issue 32 (4): a timed run's end, nearer than the idle timeout, bounds each read
            // and each turn (a trickle cannot stretch a turn of 64 reads past it).
            let deadline = self.conv.deadline();
            block.until(Some(deadline));
            let left = deadline.saturating_duration_since(Instant::now());
            if rx_started(&self.rx) && left + Duration::from_millis(5) < rcvtimeo {
                rcvtimeo = left.max(Duration::from_millis(1));
                let _ = self.stream.set_read_timeout(Some(rcvtimeo));
            }
            let Some(rx) = self.rx.as_deref_mut() else {
                return Step::default();
            };
            let before = rx.bytes();
            // The first read alone, so the idle timeout replaces the first byte's as soon as
            // it arrives.
            let mut wire = Wire::new(&mut *self.stream, self.tls.as_deref_mut());
            let end = if before == 0 {
                block.read_once(&mut wire, rx)
            } else {
                block.read_turn(&mut wire, rx)
            };
            if before == 0 && rx.bytes() > 0 {
                let _ = self
                    .stream
                    .set_read_timeout(Some(self.srv.cfg.policy.idle_timeout));
            }
            mark.follow(&*self.stream, rx.wake_at());
            let got = rx.bytes() - before;
            // A blocking socket says WouldBlock only when its read timeout expires: what the
            // turn read counts first, then the wait is over.
            let timed_out = match &end {
                ReadEnd::WouldBlock => true,
                ReadEnd::Error(e) => net::is_timeout(e),
                _ => false,
            };
            let step = if self.srv.stopping_now() {
                // The shutdown cut the socket off: say so, not that the client went.
                let _ = self.conv.data_turn(DataEnd::More, got, Instant::now());
                self.conv.abort(SHUTTING_DOWN)
            } else if timed_out {
                let _ = self.conv.data_turn(DataEnd::More, got, Instant::now());
                self.conv.timed_out(false, false)
            } else {
                let end = data_end(end, self.conv.hello(), self.srv.stopping());
                self.conv.data_turn(end, got, Instant::now())
            };
            let ended = step.send.is_some() || step.end.is_some() || step.effect.is_some();
            if ended || self.conv.phase() != Phase::Data {
                return step;
            }
            // Data that keeps coming does not move every deadline: a timed run's end is one.
            if Instant::now() >= self.conv.deadline() {
                return self.conv.timed_out(false, false);
            }
        }
    }

    /// A logged transfer reads only while stdout takes its lines (back-pressure), and gives up
    /// if stdout takes nothing for the idle timeout: then the step that ends it.
    fn wait_for_stdout(&mut self) -> Option<Step> {
        let rx = self.rx.as_deref_mut()?;
        if rx.log() != LogMode::Stdout {
            return None;
        }
        rx.lap(TimePhase::Wait);
        let room = self.srv.console().wait_room(
            crate::receiver::LOG_TURN_RESERVE,
            Instant::now() + self.srv.cfg.policy.idle_timeout,
        );
        if !room {
            return Some(self.conv.timed_out(true, false));
        }
        // The wait for stdout's room is the log's.
        rx.lap(TimePhase::Log);
        None
    }

    /// Answers clock queries until the client closes. The first request is due within the hello
    /// timeout of the accept; then each within the idle timeout, and each answer must be taken
    /// within it too (the write timeout).
    fn serve_latency(&mut self) -> Outcome {
        let mut out = Outbox::default();
        // The first request is due by the conversation's deadline; after it, each read waits
        // at most the idle timeout (set once: no system call per request).
        if !self.until_deadline() {
            return self.ended(|c| c.timed_out(false, false));
        }
        let mut first = true;
        loop {
            let Some(session) = self.conv.latency() else {
                return Outcome::Incomplete("no latency session".into());
            };
            match self.stream.read(session.space()) {
                // A stop shuts the reading down to wake this thread: it tells the client why.
                Ok(0) if self.srv.stopping_now() => {
                    return self.ended(|c| c.abort(SHUTTING_DOWN));
                }
                Ok(0) => return self.ended(|c| c.end_latency(None)),
                Ok(n) => {
                    if std::mem::take(&mut first) {
                        let _ = self
                            .stream
                            .set_read_timeout(Some(self.srv.cfg.policy.idle_timeout));
                    }
                    self.conv.request_at(Instant::now());
                    let Some(session) = self.conv.latency() else {
                        return Outcome::Incomplete("no latency session".into());
                    };
                    if let Err(e) = session.filled(n, &mut unix_ns_now, &mut out) {
                        let _ = out.flush(self.stream);
                        return self.ended(|c| c.bad_request(&e));
                    }
                    // A blocking socket says WouldBlock only when its write timeout expires.
                    match out.flush(self.stream) {
                        Ok(true) => {}
                        Ok(false) => return self.ended(|c| c.timed_out(false, true)),
                        Err(e) if net::is_timeout(&e) => {
                            return self.ended(|c| c.timed_out(false, true));
                        }
                        Err(e) => return self.ended(|c| c.cannot_answer(&e)),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if net::is_timeout(&e) => return self.ended(|c| c.timed_out(false, false)),
                Err(e) => return self.ended(|c| c.read_failed(&e)),
            }
        }
    }

    /// The outcome of a latency session that `end` ends, its effect performed and what it says
    /// sent (a stop's reason, in the answers' stream).
    fn ended(&mut self, end: impl FnOnce(&mut Conversation) -> Step) -> Outcome {
        let step = end(&mut self.conv);
        let step = self.perform(step);
        let _ = send_step(self.stream, &step);
        step.end.unwrap_or(Outcome::Complete)
    }
}

/// Less than this in a turn that stalled is no progress (a client that reads nothing still
/// takes about 6 KB/s as its kernel compacts its receive buffer, measured on loopback).
const STALL_BYTES: u64 = 16 << 10;

/// A blocking reverse stream's write timeout: an eighth of the idle timeout, at most a second,
/// so a stall is noticed within the idle timeout and that much.
fn write_slice(idle: Duration) -> Duration {
    (idle / 8).clamp(Duration::from_millis(1), Duration::from_secs(1))
}

/// True once a transfer's first byte has come (its reads then wait under the idle timeout).
fn rx_started(rx: &Option<Box<Receiver>>) -> bool {
    rx.as_ref().is_some_and(|r| r.bytes() > 0)
}

/// Writes one frame.
pub(super) fn send(stream: &mut TcpStream, frame: &Frame) -> io::Result<()> {
    let mut out = Vec::with_capacity(128);
    encode_frame(frame, &mut out);
    stream.write_all(&out)
}

/// Writes what a conversation's step sends, if anything ([`Step::encode_send`]).
fn send_step(stream: &mut impl Write, step: &Step) -> io::Result<()> {
    let mut out = Vec::with_capacity(128);
    step.encode_send(&mut out);
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(&out)?;
    stream.flush()
}
