//! The thread-per-connection server: each connection gets a thread and blocking reads.
//!
//! What one connection can hold (README, "Security and limits"): its thread's stack (the pages
//! it touches), one read block of at most [`super::BULK_READ`] bytes (or `--read-size`, the
//! operator's choice; never the client's chunk), and one read's worth of latency answers, since
//! it writes them before it reads again. Reads and writes time out after `--idle-timeout`, so a
//! client that stops reading its answers is cut off like one that stops sending. The hello and
//! the authentication answer must arrive within `--hello-timeout` of the accept (a deadline,
//! not a wait that restarts on every byte), and so must the first byte or request after the
//! server's accept.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Result;
use tracing::{debug, warn};

use super::conversation::{Conversation, Phase, Step};
use super::fds::{self, Backoff, Spare};
use super::outbox::Outbox;
use super::{Outcome, SHUTTING_DOWN, ServerConfig, busy, print_failed};
use crate::console;
use crate::receiver::{Block, ReadEnd};
use tsperf_proto::{Frame, ServerIo, TimePhase, encode_frame};
use tsperf_sys::net;

/// Serves until the process ends, or one connection with `--once`. With `--once` the result
/// says whether that transfer completed.
pub fn serve(listener: TcpListener, cfg: &ServerConfig) -> Result<bool> {
    let active = Arc::new(AtomicUsize::new(0));
    let open: Open = Arc::new(Mutex::new(HashMap::new()));
    wake_accept_on_stop(&listener);
    console::set_line_wait(cfg.idle_timeout);
    let mut next_id = 0u64;
    let (mut spare, mut backoff) = (Spare::new(), Backoff::default());
    loop {
        let (mut stream, peer) = match listener.accept() {
            Ok((stream, peer)) => {
                backoff.ok();
                (stream, super::canonical(peer))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors: tell the waiting connection why with the spare one.
                if fds::exhausted(&e)
                    && spare.lend(|| refuse_next(&listener)) == Some(true)
                    && !super::stopping()
                {
                    continue;
                }
                // Otherwise pause, longer each time, so as not to spin or flood the log.
                std::thread::sleep(backoff.failed(&e));
                if super::stopping() {
                    break;
                }
                continue;
            }
        };
        if super::stopping() {
            drop(stream);
            break;
        }
        if cfg.once {
            return Ok(matches!(handle(stream, peer, cfg), Outcome::Complete));
        }
        if active.load(Ordering::Acquire) >= cfg.max_clients {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let outcome = refuse(&mut stream, busy(cfg));
            print_failed(peer, &outcome);
            continue;
        }
        next_id += 1;
        if let Ok(clone) = stream.try_clone() {
            open.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(next_id, clone);
        }
        active.fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            active: active.clone(),
            open: open.clone(),
            id: next_id,
        };
        let cfg = cfg.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("conn {peer}"))
            .spawn(move || {
                let _slot = slot;
                handle(stream, peer, &cfg)
            });
        if let Err(e) = spawned {
            warn!("cannot start a thread for {peer}: {e}");
        }
    }
    drain(&active, &open, cfg);
    Ok(true)
}

/// A stop request wakes the blocking accept with a connection to ourselves.
fn wake_accept_on_stop(listener: &TcpListener) {
    if let Ok(addr) = listener.local_addr() {
        // A dual-stack `[::]` takes IPv4 too, and IPv6 loopback may be missing: try both.
        let ips: Vec<IpAddr> = match addr.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => vec![Ipv4Addr::LOCALHOST.into()],
            IpAddr::V6(v6) if v6.is_unspecified() => {
                vec![Ipv6Addr::LOCALHOST.into(), Ipv4Addr::LOCALHOST.into()]
            }
            ip => vec![ip],
        };
        super::on_stop(move || {
            for ip in &ips {
                let to = SocketAddr::new(*ip, addr.port());
                if TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok() {
                    break;
                }
            }
        });
    }
}

/// Stopping: lets transfers in flight finish within the grace period, then cuts off the rest
/// with a reason; their threads see the closed socket, log the end and remove any partial file.
fn drain(active: &AtomicUsize, open: &Open, cfg: &ServerConfig) {
    let wait_until = |until: Instant, cut_short: bool| {
        while active.load(Ordering::Acquire) > 0
            && Instant::now() < until
            && !(cut_short && super::stopping_now())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // The grace period, which a second signal ends.
    wait_until(Instant::now() + cfg.grace, true);
    // Threads waiting for room on a stuck stdout must get to their socket and clean up.
    crate::console::release();
    for (_, mut stream) in open.lock().unwrap_or_else(PoisonError::into_inner).drain() {
        let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
        let _ = send(&mut stream, &Frame::Abort(SHUTTING_DOWN.to_owned()));
        // Close with a reset, as the event loop's close does with unread data: a plain FIN can
        // leave a client that is blocked on a zero window waiting for its own timeout.
        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
        let _ = stream.shutdown(Shutdown::Both);
    }
    wait_until(Instant::now() + Duration::from_secs(2), false);
}

/// Accepts one waiting connection and refuses it for want of descriptors. True if it did.
fn refuse_next(listener: &TcpListener) -> bool {
    match listener.accept() {
        Ok((mut stream, peer)) => {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let outcome = refuse(&mut stream, fds::OUT_OF_DESCRIPTORS.to_owned());
            print_failed(super::canonical(peer), &outcome);
            true
        }
        Err(_) => false,
    }
}

/// Clones of the open connections' sockets, so a shutdown can cut them off.
type Open = Arc<Mutex<HashMap<u64, TcpStream>>>;

/// One of the `--max-clients` places, given back when the connection's thread ends.
struct Slot {
    active: Arc<AtomicUsize>,
    open: Open,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        self.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs one connection to its end and prints its outcome.
fn handle(mut stream: TcpStream, peer: SocketAddr, cfg: &ServerConfig) -> Outcome {
    debug!(%peer, "connection");
    let outcome = converse(&mut stream, peer, cfg);
    print_failed(peer, &outcome);
    outcome
}

fn converse(stream: &mut TcpStream, peer: SocketAddr, cfg: &ServerConfig) -> Outcome {
    // Every write, the answers of a latency session included, gives up after the idle timeout.
    let _ = stream.set_write_timeout(Some(cfg.idle_timeout));
    let mut conv = Conversation::new(peer, ServerIo::Blocking, cfg, Instant::now());
    loop {
        let step = match conv.phase() {
            Phase::Hello | Phase::Auth | Phase::Clock | Phase::Trailer => {
                read_small(stream, &mut conv, cfg)
            }
            Phase::Data => serve_data(stream, &mut conv, cfg),
            Phase::Latency => return serve_latency(stream, &mut conv, cfg),
            Phase::Done => return Outcome::Incomplete("the conversation ended".into()),
        };
        if let Some(frame) = &step.send {
            // A latency session's socket is set up before its Accept goes out, as the event
            // loop does.
            if let (Frame::Accept { .. }, Some(session)) = (frame, conv.latency()) {
                super::latency_socket(stream, session.nodelay);
            }
            if let Err(e) = send(stream, frame) {
                let why = format!("cannot write to the client: {e}");
                match &step.end {
                    None => return conv.abort(&why).end.unwrap_or(Outcome::Incomplete(why)),
                    Some(Outcome::Complete) => warn!(%peer, "could not send the report: {e}"),
                    Some(_) => {}
                }
            }
        }
        if let Some(outcome) = step.end {
            return outcome;
        }
    }
}

/// Sets the read timeout to what is left before the conversation's deadline; false if none is.
fn until_deadline(stream: &TcpStream, conv: &Conversation) -> bool {
    let left = conv.deadline().saturating_duration_since(Instant::now());
    !left.is_zero() && stream.set_read_timeout(Some(left)).is_ok()
}

/// One read of the hello, the authentication answer or the trailer, by the deadline.
fn read_small(stream: &mut TcpStream, conv: &mut Conversation, cfg: &ServerConfig) -> Step {
    if !until_deadline(stream, conv) {
        return conv.timed_out(cfg, false, false);
    }
    match stream.read(conv.space()) {
        Ok(n) => conv.received(n, cfg, Instant::now(), stream),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Step::default(),
        Err(e) if net::is_timeout(&e) => conv.timed_out(cfg, false, false),
        Err(e) => conv.read_failed(&e),
    }
}

/// Reads the transfer's data to its end (or its failure).
fn serve_data(stream: &mut TcpStream, conv: &mut Conversation, cfg: &ServerConfig) -> Step {
    // The hello and its accept made this look like an interactive exchange to the kernel,
    // which would now hold back ACKs of the stream (see `net::quickack`).
    let _ = net::quickack(stream);
    let Some(rx) = conv.receiver() else {
        return Step::default();
    };
    let mut block = Block::new(rx.read_size(), rx.expected());
    let mut mark = super::WakeMark::new(stream);
    rx.large_segments = mark.usable();
    // The first byte is due by the conversation's deadline; after it, each read waits at most
    // the idle timeout (set once: no system call per turn).
    if !until_deadline(stream, conv) {
        return conv.timed_out(cfg, false, false);
    }
    loop {
        // A logged transfer reads only while stdout takes its lines (back-pressure), and gives
        // up if stdout takes nothing for the idle timeout.
        if conv.logs_to_stdout() {
            if let Some(rx) = conv.receiver() {
                rx.lap(TimePhase::Wait);
            }
            let room = console::wait_room(
                crate::receiver::LOG_TURN_RESERVE,
                Instant::now() + cfg.idle_timeout,
            );
            if !room {
                return conv.timed_out(cfg, true, false);
            }
            // The wait for stdout's room is the log's.
            if let Some(rx) = conv.receiver() {
                rx.lap(TimePhase::Log);
            }
        }
        let Some(rx) = conv.receiver() else {
            return Step::default();
        };
        let before = rx.bytes();
        // The first read alone, so the idle timeout replaces the first byte's as soon as it
        // arrives.
        let end = if before == 0 {
            block.read_once(stream, rx)
        } else {
            block.read_turn(stream, rx)
        };
        if before == 0 && rx.bytes() > 0 {
            let _ = stream.set_read_timeout(Some(cfg.idle_timeout));
        }
        mark.follow(stream, rx);
        let got = rx.bytes() - before;
        let step = match end {
            // A blocking socket says WouldBlock only when its read timeout expires.
            ReadEnd::WouldBlock => conv.timed_out(cfg, false, false),
            ReadEnd::Error(e) if net::is_timeout(&e) => conv.timed_out(cfg, false, false),
            end => conv.data_turn(end, got, cfg, Instant::now()),
        };
        if step.send.is_some() || step.end.is_some() || conv.phase() != Phase::Data {
            return step;
        }
    }
}

/// Answers clock queries until the client closes. The first request is due within the hello
/// timeout of the accept; then each within the idle timeout, and each answer must be taken
/// within it too (the write timeout).
fn serve_latency(stream: &mut TcpStream, conv: &mut Conversation, cfg: &ServerConfig) -> Outcome {
    let mut out = Outbox::default();
    // The first request is due by the conversation's deadline; after it, each read waits at
    // most the idle timeout (set once: no system call per request).
    if !until_deadline(stream, conv) {
        return timed_out_answering(conv, cfg, false);
    }
    let mut first = true;
    loop {
        let Some(session) = conv.latency() else {
            return Outcome::Incomplete("no latency session".into());
        };
        match stream.read(session.space()) {
            Ok(0) => return conv.end_latency(None),
            Ok(n) => {
                if std::mem::take(&mut first) {
                    let _ = stream.set_read_timeout(Some(cfg.idle_timeout));
                }
                conv.request_at(cfg, Instant::now());
                let Some(session) = conv.latency() else {
                    return Outcome::Incomplete("no latency session".into());
                };
                if let Err(e) = session.filled(n, &mut out) {
                    let _ = out.flush(stream);
                    return conv.bad_request(&e);
                }
                // A blocking socket says WouldBlock only when its write timeout expires.
                match out.flush(stream) {
                    Ok(true) => {}
                    Ok(false) => return timed_out_answering(conv, cfg, true),
                    Err(e) if net::is_timeout(&e) => return timed_out_answering(conv, cfg, true),
                    Err(e) => return conv.cannot_answer(&e),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if net::is_timeout(&e) => return timed_out_answering(conv, cfg, false),
            Err(e) => return conv.read_failed(&e).end.unwrap_or(Outcome::Complete),
        }
    }
}

/// A latency session past its deadline; `unsent`: waiting for the client to take answers.
fn timed_out_answering(conv: &mut Conversation, cfg: &ServerConfig, unsent: bool) -> Outcome {
    conv.timed_out(cfg, false, unsent)
        .end
        .unwrap_or(Outcome::Complete)
}

fn refuse(stream: &mut TcpStream, reason: String) -> Outcome {
    let _ = send(stream, &Frame::Refuse(reason.clone()));
    Outcome::Refused(reason)
}

fn send(stream: &mut TcpStream, frame: &Frame) -> io::Result<()> {
    let mut out = Vec::with_capacity(128);
    encode_frame(frame, &mut out);
    stream.write_all(&out)
}
