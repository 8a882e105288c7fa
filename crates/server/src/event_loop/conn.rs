//! One connection of the event loop: its socket, its [`Conversation`] and the transfer beside it,
//! the output it has yet to send, and the bookkeeping that keeps edge-triggered readiness honest
//! ([`Conn::more`]).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use tracing::debug;
use tsperf_proto::serve::{Conversation, Phase, Step};
use tsperf_proto::{Frame, LogMode, ServerIo, TimePhase};
use tsperf_sys::direct::Direct;
use tsperf_sys::net;
use tsperf_sys::timing::unix_ns_now;

use crate::drive::{Where, data_end, perform};
use crate::outbox::{LATENCY_CAP, Outbox};
use crate::receiver::{Block, ReadEnd, Receiver, TURN_READS};
use crate::turn::{self, Turned};
use crate::{Outcome, Server, print_failed};
use tsperf_stream::send::Sender;
use tsperf_stream::tls::{Tls, Wire};

/// What the loop lends the connection it serves: the read block, the read-ahead buffer of a
/// served file, and the loop's waker (for the generated text being made).
pub(super) struct Lent {
    pub(super) block: Block,
    pub(super) scratch: Vec<u8>,
    pub(super) waker: std::sync::Arc<mio::Waker>,
}

pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) conv: Conversation,
    /// The transfer's accounting, once the conversation has begun one.
    pub(super) rx: Option<Box<Receiver>>,
    /// A reverse stream's sending, once it has begun.
    pub(super) tx: Option<Box<Sender>>,
    /// A stream over TLS, once its data phase has begun.
    pub(super) tls: Option<Box<Tls>>,
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
    /// A reverse stream waiting for the generated text: the loop gives it a turn when the
    /// text's maker wakes it.
    pub(super) text_wait: bool,
}

impl Conn {
    /// The connection's bytes: through TLS once a stream over it has begun.
    pub(super) fn wire(&mut self) -> Wire<'_, TcpStream> {
        Wire::new(&mut self.stream, self.tls.as_deref_mut())
    }

    /// Begins a stream's TLS as its data phase begins, once what went before it in the clear
    /// (the Accept, a clock answer) is out: false while that waits.
    fn tls_ready(&mut self, srv: &Server) -> bool {
        if self.tls.is_some() || self.conv.hello().is_none_or(|h| h.tls.is_none()) {
            return true;
        }
        if !self.out.is_empty() {
            return false;
        }
        self.tls = crate::drive::start_tls(None, &self.conv, srv);
        true
    }

    /// Deregisters and drops a finished connection (a stream over TLS after its close_notify),
    /// printing its outcome. True if it completed.
    pub(super) fn close(mut self, poll: &mio::Poll, outcome: Outcome, srv: &Server) -> bool {
        let _ = self.wire().close();
        let _ = poll.registry().deregister(&mut self.stream);
        // A reverse stream's client's last bytes, unread, would make the close a reset.
        if let Some(tx) = self.tx.as_deref_mut() {
            let _ = tx.listen(&self.stream);
        }
        print_failed(srv, self.peer, &outcome, self.conv.hello());
        matches!(outcome, Outcome::Complete)
    }

    /// Does all the work the socket allows now. `Some(outcome)` when the connection is finished.
    pub(super) fn advance(&mut self, lent: &mut Lent, srv: &Server) -> Option<Outcome> {
        self.more = false;
        if self.closing.is_none() {
            let step = self.converse(lent, srv);
            self.apply(step, srv);
        }
        let flushed = self.flush();
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

    /// Performs a step's effect, queues its frame, and keeps its outcome for when the frame is
    /// sent.
    fn apply(&mut self, step: Step, srv: &Server) {
        let step = self.perform(step, srv);
        if step.send.is_some() {
            self.out.step(&step);
        }
        if step.end.is_some() {
            self.closing = step.end;
        }
    }

    fn perform(&mut self, step: Step, srv: &Server) -> Step {
        let at = Where {
            peer: self.peer,
            socket: &self.stream,
            srv,
            server_io: ServerIo::EventLoop,
        };
        perform(step, &mut self.conv, &mut self.rx, &mut self.tx, at)
    }

    /// Reads what the socket has for the conversation, phase after phase, until it waits.
    fn converse(&mut self, lent: &mut Lent, srv: &Server) -> Step {
        loop {
            let phase = self.conv.phase();
            if matches!(phase, Phase::Data | Phase::Send | Phase::Trailer) && !self.tls_ready(srv) {
                return Step::default();
            }
            let step = match phase {
                Phase::Hello | Phase::Auth | Phase::Clock | Phase::Trailer => {
                    if let Some(rx) = self.rx.as_deref_mut() {
                        rx.wakeups = self.wakeups;
                    }
                    let read = Wire::new(&mut self.stream, self.tls.as_deref_mut())
                        .read(self.conv.space());
                    match read {
                        Ok(n) => self.conv.received(n, Instant::now(), &mut unix_ns_now),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::default(),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => self.conv.read_failed(&e),
                    }
                }
                Phase::Data => {
                    if self.wait_for_stdout(srv) {
                        return Step::default();
                    }
                    let step = self.read_data(&mut lent.block, srv.stopping());
                    if step.end.is_none() && self.conv.phase() == Phase::Data {
                        return step;
                    }
                    step
                }
                Phase::Send => {
                    let step = self.send_data(lent, srv);
                    if step.end.is_none() && self.conv.phase() == Phase::Send {
                        return step;
                    }
                    step
                }
                Phase::Latency => return self.serve_latency(),
                Phase::Begin | Phase::Finish | Phase::Done => return Step::default(),
            };
            let step = self.perform(step, srv);
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

    /// A logged transfer is read only while stdout has room for a turn's lines: true while it
    /// waits (its time unread for that room is the log's, not a wait for data).
    fn wait_for_stdout(&mut self, srv: &Server) -> bool {
        let was_waiting = self.log_wait;
        let logs_to_stdout = self.rx.as_ref().is_some_and(|r| r.log() == LogMode::Stdout);
        self.log_wait = logs_to_stdout && !srv.console().room(crate::receiver::LOG_TURN_RESERVE);
        if let Some(rx) = self.rx.as_deref_mut() {
            match (was_waiting, self.log_wait) {
                (false, true) => rx.lap(TimePhase::Wait),
                (true, false) => rx.lap(TimePhase::Log),
                _ => {}
            }
        }
        self.log_wait
    }

    fn read_data(&mut self, block: &mut Block, stopping: bool) -> Step {
        let Some(rx) = self.rx.as_deref_mut() else {
            return Step::default();
        };
        let before = rx.bytes();
        if before == 0 {
            // The hello and its accept made this look like an interactive exchange to the
            // kernel, which would now hold back ACKs of the stream (see `net::quickack`).
            let _ = net::quickack(&self.stream);
            rx.large_segments = self.mark.usable();
        }
        let end = block.read_turn(
            &mut Wire::new(&mut self.stream, self.tls.as_deref_mut()),
            rx,
        );
        self.mark.follow(&self.stream, rx.wake_at());
        rx.wakeups = self.wakeups;
        let got = rx.bytes() - before;
        self.more = matches!(end, ReadEnd::TurnOver);
        let end = data_end(end, self.conv.hello(), stopping);
        self.conv.data_turn(end, got, Instant::now())
    }

    /// A turn of a reverse stream's writes; once the data is done, its end (the Sent frame and
    /// the trailer) is queued and the conversation is over: the connection closes once that is
    /// written. A stream that cannot go on ends with its reason in the Sent frame's place.
    fn send_data(&mut self, lent: &mut Lent, srv: &Server) -> Step {
        // The sender was made when the stream began (drive::perform); without one there is
        // nothing this connection can send.
        let Some(tx) = self.tx.as_deref_mut() else {
            return self.conv.send_failed("no reverse stream was begun");
        };
        if let Some(wants) = tx.wants() {
            let waker = lent.waker.clone();
            match srv.text().ready_or(wants, move || {
                let _ = waker.wake();
            }) {
                Some(made) => tx.give(made),
                None => {
                    self.text_wait = true;
                    return Step::default();
                }
            }
        }
        // Issue 32 (2): what is queued (the Accept, when no clock query came between) goes
        // before the data; until it is out, the WRITABLE event resumes this.
        match self.flush() {
            Ok(true) => {}
            Ok(false) => return Step::default(),
            Err(e) => {
                return self
                    .conv
                    .send_failed(&format!("cannot write to the client: {e}"));
            }
        }
        // A stream over TLS shakes hands before its first byte (what the client sends during
        // the data is a stop, and must not be its handshake).
        match self.wire().flush() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::default(),
            Err(e) => {
                return self
                    .conv
                    .send_failed(&format!("TLS with the client failed: {e}"));
            }
        }
        let Some(tx) = self.tx.as_deref_mut() else {
            return Step::default();
        };
        let turned = match self.tls.as_deref_mut() {
            None => turn::send_turn(
                tx,
                &mut self.conv,
                &mut Direct(&mut self.stream),
                ServerIo::EventLoop,
                &mut lent.scratch,
            ),
            tls => turn::send_turn(
                tx,
                &mut self.conv,
                &mut Wire::new(&mut self.stream, tls),
                ServerIo::EventLoop,
                &mut lent.scratch,
            ),
        };
        match turned {
            Turned::On { more, .. } => {
                self.more = more;
                Step::default()
            }
            Turned::Closing(closing) => {
                self.out.bytes(&closing);
                crate::print_sent(srv, self.peer, self.conv.hello(), &closing);
                self.conv.sent_all()
            }
            Turned::Over(reason, step) => {
                if let Some(reason) = reason {
                    self.out.bytes(&reason);
                }
                *step
            }
        }
    }

    /// Answers first (what the client took makes room for reading its next requests), then
    /// reads requests.
    fn serve_latency(&mut self) -> Step {
        if let Err(e) = self.flush() {
            return self.conv.cannot_answer(&e);
        }
        self.read_latency()
    }

    /// Cuts a reverse stream off for `why`: its next turn ends it with the reason in its
    /// report's place ([`Conn::fail_sending`]). True if this connection is one.
    pub(super) fn cut_sending(&mut self, why: &str) -> bool {
        match self.tx.as_deref_mut() {
            Some(tx) if self.closing.is_none() && self.conv.phase() == Phase::Send => {
                tx.cut(why);
                true
            }
            _ => false,
        }
    }

    /// True for a reverse stream cut off ([`Conn::cut_sending`]) that is still sending its
    /// reason.
    pub(super) fn cut(&self) -> bool {
        self.tx.as_deref().is_some_and(Sender::is_cut)
    }

    /// Ends the connection now, telling the client why where the protocol allows, and removing
    /// any partly saved file.
    pub(super) fn abort(&mut self, why: &str, srv: &Server) -> Outcome {
        if let Some(outcome) = self.closing.take() {
            return outcome;
        }
        let step = self.conv.abort(why);
        self.apply(step, srv);
        let _ = self.flush();
        self.closing
            .take()
            .unwrap_or_else(|| Outcome::Incomplete(why.to_owned()))
    }

    /// What a connection past its deadline ends as, having told its client why where the
    /// protocol allows.
    pub(super) fn timed_out(&mut self, srv: &Server) -> Outcome {
        if self.closing.is_some() {
            return Outcome::Incomplete("the client did not take its reply".into());
        }
        let step = self.conv.timed_out(self.log_wait, !self.out.is_empty());
        self.apply(step, srv);
        let _ = self.flush();
        self.closing
            .take()
            .unwrap_or_else(|| Outcome::Incomplete("timed out".into()))
    }

    /// Writes queued output until it is gone (`Ok(true)`) or the socket is full (`Ok(false)`).
    /// A latency client that takes answers is not idle, however few requests it sends.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        let before = self.out.pending();
        let mut wire = Wire::new(&mut self.stream, self.tls.as_deref_mut());
        let done = self
            .out
            .flush(&mut wire)
            .and_then(|done| match wire.flush() {
                Ok(()) => Ok(done),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(e),
            });
        if self.out.pending() < before {
            self.conv.busy_at(Instant::now());
        }
        done
    }

    /// Answers clock queries until `WouldBlock`, for at most a turn ([`TURN_READS`] reads), and
    /// only while the client takes its answers: with [`LATENCY_CAP`] unsent it reads no more
    /// until a WRITABLE event says the client took some. The client closing ends the session.
    fn read_latency(&mut self) -> Step {
        let mut reads = 0;
        loop {
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
                Ok(0) => return self.conv.end_latency(None),
                Ok(n) => {
                    reads += 1;
                    if let Err(e) = session.filled(n, &mut unix_ns_now, &mut self.out) {
                        return self.conv.bad_request(&e);
                    }
                    self.conv.request_at(Instant::now());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::default(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.conv.end_latency(Some(e.to_string())),
            }
        }
    }
}
