//! One connection of the event loop: its socket, its [`Conversation`], the output it has yet
//! to send, and the bookkeeping that keeps edge-triggered readiness honest ([`Conn::more`]).

use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use tracing::debug;

use super::super::conversation::{Conversation, Phase, Step};
use super::super::outbox::{LATENCY_CAP, Outbox};
use super::super::{Outcome, ServerConfig};
use crate::console;
use crate::receiver::{Block, ReadEnd, TURN_READS};
use tsperf_proto::{Frame, TimePhase};
use tsperf_sys::net;

pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) conv: Conversation,
    pub(super) out: Outbox,
    /// The outcome, once the conversation is over; its last frame may still be flushing.
    pub(super) closing: Option<Outcome>,
    /// A logged transfer left unread until stdout has room for its lines.
    pub(super) log_wait: bool,
    pub(super) wakeups: u64,
    /// Its last turn stopped with work it could still do (its read budget used up, a clock
    /// answer just queued): it is in the ready list and gets another turn without waiting for
    /// an event (edge-triggered epoll sends no new one). Every turn starts by clearing it, so a
    /// turn that ends waiting for the socket leaves the connection off the list.
    pub(super) more: bool,
    /// The socket's receive low-water mark.
    pub(super) mark: crate::WakeMark,
}

impl Conn {
    /// Does all the work the socket allows now. `Some(outcome)` when the connection is finished.
    pub(super) fn advance(&mut self, block: &mut Block, cfg: &ServerConfig) -> Option<Outcome> {
        self.more = false;
        if self.closing.is_none() {
            let step = self.converse(block, cfg);
            self.apply(step);
        }
        let flushed = self.flush(cfg);
        if self.closing.is_none() {
            let broken =
                |e: io::Error| Outcome::Incomplete(format!("cannot write to the client: {e}"));
            return flushed.err().map(broken);
        }
        match flushed {
            // More to write: the next WRITABLE event resumes it.
            Ok(false) => None,
            Ok(true) => self.closing.take(),
            Err(e) => {
                debug!(peer = %self.peer, "could not send the final frame: {e}");
                self.closing.take()
            }
        }
    }

    /// Queues a step's frame; keeps its outcome for when the frame is sent.
    fn apply(&mut self, step: Step) {
        if let Some(frame) = &step.send {
            self.out.frame(frame);
        }
        if step.end.is_some() {
            self.closing = step.end;
        }
    }

    /// Reads what the socket has for the conversation, phase after phase, until it waits.
    fn converse(&mut self, block: &mut Block, cfg: &ServerConfig) -> Step {
        loop {
            let step = match self.conv.phase() {
                Phase::Hello | Phase::Auth | Phase::Clock | Phase::Trailer => {
                    if self.conv.phase() == Phase::Trailer {
                        self.conv.set_wakeups(self.wakeups);
                    }
                    match self.stream.read(self.conv.space()) {
                        Ok(n) => self.conv.received(n, cfg, Instant::now(), &self.stream),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::default(),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => self.conv.read_failed(&e),
                    }
                }
                Phase::Data => {
                    // A logged transfer is read only while stdout has room for a turn's lines.
                    let was_waiting = self.log_wait;
                    self.log_wait = self.conv.logs_to_stdout()
                        && !console::room(crate::receiver::LOG_TURN_RESERVE);
                    if let Some(rx) = self.conv.receiver() {
                        // Time left unread for stdout's room is the log's, not a wait for data.
                        match (was_waiting, self.log_wait) {
                            (false, true) => rx.lap(TimePhase::Wait),
                            (true, false) => rx.lap(TimePhase::Log),
                            _ => {}
                        }
                    }
                    if self.log_wait {
                        return Step::default();
                    }
                    let step = self.read_data(block, cfg);
                    if step.end.is_none() && self.conv.phase() == Phase::Data {
                        return step;
                    }
                    step
                }
                Phase::Latency => return self.serve_latency(cfg),
                Phase::Done => return Step::default(),
            };
            if step.end.is_some() {
                return step;
            }
            if let Some(frame) = &step.send {
                self.out.frame(frame);
                if let (Frame::Accept { .. }, Some(session)) = (frame, self.conv.latency()) {
                    crate::latency_socket(&self.stream, session.nodelay);
                }
                // A clock answer goes out now, not after another read: its send time is
                // stamped. The turn that follows reads on.
                if matches!(frame, Frame::Time(_)) {
                    self.more = true;
                    return Step::default();
                }
            }
        }
    }

    fn read_data(&mut self, block: &mut Block, cfg: &ServerConfig) -> Step {
        let Some(rx) = self.conv.receiver() else {
            return Step::default();
        };
        let before = rx.bytes();
        if before == 0 {
            // The hello and its accept made this look like an interactive exchange to the
            // kernel, which would now hold back ACKs of the stream (see `net::quickack`).
            let _ = net::quickack(&self.stream);
            rx.large_segments = self.mark.usable();
        }
        let end = block.read_turn(&mut self.stream, rx);
        self.mark.follow(&self.stream, rx);
        let got = rx.bytes() - before;
        self.more = matches!(end, ReadEnd::TurnOver);
        self.conv.data_turn(end, got, cfg, Instant::now())
    }

    /// Answers first (what the client took makes room for reading its next requests), then
    /// reads requests.
    fn serve_latency(&mut self, cfg: &ServerConfig) -> Step {
        if let Err(e) = self.flush(cfg) {
            return Step {
                send: None,
                end: Some(self.conv.cannot_answer(&e)),
            };
        }
        self.read_latency(cfg)
    }

    /// Ends the connection now, telling the client why where the protocol allows, and removing
    /// any partly saved file.
    pub(super) fn abort(&mut self, why: &str, cfg: &ServerConfig) -> Outcome {
        if let Some(outcome) = self.closing.take() {
            return outcome;
        }
        let step = self.conv.abort(why);
        self.apply(step);
        let _ = self.flush(cfg);
        self.closing
            .take()
            .unwrap_or_else(|| Outcome::Incomplete(why.to_owned()))
    }

    /// What a connection past its deadline ends as, having told its client why where the
    /// protocol allows.
    pub(super) fn timed_out(&mut self, cfg: &ServerConfig) -> Outcome {
        if self.closing.is_some() {
            return Outcome::Incomplete("the client did not take its reply".into());
        }
        let step = self
            .conv
            .timed_out(cfg, self.log_wait, !self.out.is_empty());
        self.apply(step);
        let _ = self.flush(cfg);
        self.closing
            .take()
            .unwrap_or_else(|| Outcome::Incomplete("timed out".into()))
    }

    /// Writes queued output until it is gone (`Ok(true)`) or the socket is full (`Ok(false)`).
    /// A latency client that takes answers is not idle, however few requests it sends.
    pub(super) fn flush(&mut self, cfg: &ServerConfig) -> io::Result<bool> {
        let before = self.out.pending();
        let done = self.out.flush(&mut self.stream);
        if self.out.pending() < before {
            self.conv.busy_at(cfg, Instant::now());
        }
        done
    }

    /// Answers clock queries until `WouldBlock`, for at most a turn ([`TURN_READS`] reads), and
    /// only while the client takes its answers: with [`LATENCY_CAP`] unsent it reads no more
    /// until a WRITABLE event says the client took some. The client closing ends the session.
    fn read_latency(&mut self, cfg: &ServerConfig) -> Step {
        let mut reads = 0;
        let end = loop {
            if self.out.pending() >= LATENCY_CAP {
                return Step::default();
            }
            if reads == TURN_READS {
                self.more = true;
                return Step::default();
            }
            let Some(session) = self.conv.latency() else {
                return Step::default();
            };
            match self.stream.read(session.space()) {
                Ok(0) => break self.conv.end_latency(None),
                Ok(n) => {
                    reads += 1;
                    if let Err(e) = session.filled(n, &mut self.out) {
                        break self.conv.bad_request(&e);
                    }
                    self.conv.request_at(cfg, Instant::now());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::default(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break self.conv.end_latency(Some(e.to_string())),
            }
        };
        Step {
            send: None,
            end: Some(end),
        }
    }
}
