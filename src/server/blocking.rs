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

use super::fds::{self, Backoff, Spare};
use super::latency::LatencySession;
use super::outbox::Outbox;
use super::{
    AUTH_FAILED, Outcome, SHUTTING_DOWN, ServerConfig, admit, busy, finish_latency,
    finish_transfer, incomplete, print_failed, save_failed, start_transfer,
};
use crate::console;
use crate::net;
use crate::protocol::{
    Frame, Hello, LogMode, MAX_HELLO, Mode, ServerIo, TRAILER, decode_hello, encode_frame,
};
use crate::receiver::{Block, ReadEnd};

/// Serves until the process ends, or one connection with `--once`. With `--once` the result
/// says whether that transfer completed.
pub fn serve(listener: TcpListener, cfg: &ServerConfig) -> Result<bool> {
    let active = Arc::new(AtomicUsize::new(0));
    let open: Open = Arc::new(Mutex::new(HashMap::new()));
    // A stop request wakes the blocking accept with a connection to ourselves.
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
    // Stopping: let transfers in flight finish within the grace period, then cut off the rest
    // with a reason; their threads see the closed socket, log the end and remove any partial file.
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
    Ok(true)
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
    let by = Instant::now() + cfg.hello_timeout;
    let hello = match read_hello(stream, by, cfg) {
        Ok(h) => h,
        Err(reason) => return refuse(stream, reason),
    };
    if let Some(key) = &cfg.auth {
        let challenge = crate::auth::challenge();
        if let Err(e) = send(stream, &Frame::Challenge(challenge)) {
            return Outcome::Incomplete(format!("cannot send the challenge: {e}"));
        }
        let mut answer = [0u8; crate::auth::LEN];
        if let Err(e) = read_exact_by(stream, &mut answer, by) {
            let why = if net::is_timeout(&e) {
                format!(
                    "no authentication answer within {} s of the connection",
                    cfg.hello_timeout.as_secs_f64()
                )
            } else {
                format!("no authentication answer ({e})")
            };
            return refuse(stream, why);
        }
        if !key.verify(&challenge, &answer) {
            return refuse(stream, AUTH_FAILED.to_owned());
        }
    }
    let read_size = match admit(&hello, cfg) {
        Ok(n) => n,
        Err(reason) => return refuse(stream, reason),
    };
    let accept = Frame::Accept {
        read_size,
        server_io: ServerIo::Blocking,
        log: cfg.log,
    };
    if hello.mode == Mode::Latency {
        super::latency_socket(stream, &hello);
    }
    let rx = match hello.mode {
        Mode::Stream => match start_transfer(&hello, read_size, peer, cfg) {
            Ok(rx) => Some(rx),
            Err(reason) => return refuse(stream, reason),
        },
        Mode::Latency => None,
    };
    if let Err(e) = send(stream, &accept) {
        return Outcome::Incomplete(format!(
            "cannot accept '{}': {e}",
            crate::text::Peer(&hello.name)
        ));
    }
    // The first byte (or request) is due within the hello timeout of the accept.
    let _ = stream.set_read_timeout(Some(cfg.hello_timeout));
    let Some(mut rx) = rx else {
        return serve_latency(stream, peer, &hello, cfg);
    };
    // The hello and its accept made this look like an interactive exchange to the kernel,
    // which would now hold back ACKs of the stream (see `net::quickack`).
    let _ = net::quickack(stream);
    let mut block = Block::new(rx.read_size(), hello.length);
    let mut mark = super::WakeMark::new(stream);
    let idle = cfg.idle_timeout.as_secs_f64();
    let why = loop {
        let first = rx.bytes() == 0;
        // A logged transfer reads only while stdout takes its lines (back-pressure), and gives
        // up if stdout takes nothing for the idle timeout.
        if cfg.log == LogMode::Stdout
            && !console::wait_room(console::TURN_RESERVE, Instant::now() + cfg.idle_timeout)
        {
            break Some(format!(
                "its log output (stdout) was not taken for {idle} s"
            ));
        }
        // The first read alone, so the idle timeout replaces the first byte's as soon as it
        // arrives.
        let end = if first {
            block.read_once(stream, &mut rx)
        } else {
            block.read_turn(stream, &mut rx)
        };
        if first && rx.bytes() > 0 {
            let _ = stream.set_read_timeout(Some(cfg.idle_timeout));
        }
        mark.follow(stream, &rx);
        let timed_out = || {
            if rx.bytes() == 0 {
                format!(
                    "no data within {} s of the accept",
                    cfg.hello_timeout.as_secs_f64()
                )
            } else {
                format!("no data for {idle} s")
            }
        };
        break match end {
            ReadEnd::Complete => None,
            // Turns only let the low-water mark follow the transfer.
            ReadEnd::TurnOver => continue,
            // Nobody left to tell.
            ReadEnd::Eof => {
                let why = if super::stopping() {
                    SHUTTING_DOWN
                } else {
                    "the client closed the connection"
                };
                return incomplete(&hello, &mut rx, why);
            }
            // A blocking socket says WouldBlock only when its read timeout expires.
            ReadEnd::WouldBlock => Some(timed_out()),
            ReadEnd::Error(e) if net::is_timeout(&e) => Some(timed_out()),
            ReadEnd::Error(e) => Some(e.to_string()),
            ReadEnd::Sink(e) => {
                rx.discard();
                Some(save_failed(&hello, &e))
            }
        };
    };
    if let Some(why) = why {
        let _ = send(stream, &Frame::Abort(why.clone()));
        return incomplete(&hello, &mut rx, &why);
    }
    let mut trailer = [0u8; TRAILER];
    if let Err(e) = stream.read_exact(&mut trailer) {
        let why = if net::is_timeout(&e) {
            format!("no digest after the data for {idle} s")
        } else {
            "the client closed before sending its digest".to_owned()
        };
        let _ = send(stream, &Frame::Abort(why.clone()));
        return incomplete(&hello, &mut rx, &why);
    }
    let rcvbuf = net::recv_buffer(stream);
    let digest = u64::from_be_bytes(trailer);
    let frame = finish_transfer(
        &mut rx,
        &hello,
        peer,
        ServerIo::Blocking,
        cfg,
        rcvbuf,
        digest,
    );
    let saved = matches!(frame, Frame::Report(_));
    if let Err(e) = send(stream, &frame) {
        warn!(%peer, "could not send the report: {e}");
    }
    if saved {
        Outcome::Complete
    } else {
        Outcome::Incomplete(format!(
            "'{}' could not be saved",
            crate::text::Peer(&hello.name)
        ))
    }
}

/// `read_exact` that gives up at `by` (a deadline, however the bytes trickle in).
fn read_exact_by(stream: &mut TcpStream, mut buf: &mut [u8], by: Instant) -> io::Result<()> {
    while !buf.is_empty() {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Answers clock queries until the client closes. The first request is due within the hello
/// timeout (the read timeout the caller set); then each within the idle timeout, and each
/// answer must be taken within it too.
fn serve_latency(
    stream: &mut TcpStream,
    peer: SocketAddr,
    hello: &Hello,
    cfg: &ServerConfig,
) -> Outcome {
    let mut session = LatencySession::new(hello);
    let mut out = Outbox::default();
    let idle = cfg.idle_timeout.as_secs_f64();
    let mut first = true;
    let why = loop {
        match stream.read(session.space()) {
            Ok(0) => break None,
            Ok(n) => {
                if std::mem::take(&mut first) {
                    let _ = stream.set_read_timeout(Some(cfg.idle_timeout));
                }
                if let Err(e) = session.filled(n, &mut out) {
                    let _ = out.flush(stream);
                    break Some(format!("bad request: {e}"));
                }
                // A blocking socket says WouldBlock only when its write timeout expires.
                match out.flush(stream) {
                    Ok(true) => {}
                    Ok(false) => break Some(format!("the client took no answer for {idle} s")),
                    Err(e) if net::is_timeout(&e) => {
                        break Some(format!("the client took no answer for {idle} s"));
                    }
                    Err(e) => break Some(format!("cannot answer: {e}")),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if net::is_timeout(&e) && first => {
                break Some(format!(
                    "no request within {} s of the accept",
                    cfg.hello_timeout.as_secs_f64()
                ));
            }
            Err(e) if net::is_timeout(&e) => break Some(format!("no request for {idle} s")),
            Err(e) => break Some(e.to_string()),
        }
    };
    finish_latency(&session, peer, why)
}

/// Reads the hello, one read at a time, refusing as soon as the bytes show it is bad, or once
/// `by` has passed.
fn read_hello(stream: &mut TcpStream, by: Instant, cfg: &ServerConfig) -> Result<Hello, String> {
    let mut buf = [0u8; MAX_HELLO + 1];
    let mut have = 0;
    let late = || {
        format!(
            "no complete hello within {} s",
            cfg.hello_timeout.as_secs_f64()
        )
    };
    loop {
        match decode_hello(&buf[..have]) {
            Ok(Some((hello, used))) if used == have => return Ok(hello),
            Ok(Some(_)) => return Err("data arrived before the server accepted the hello".into()),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(late());
        }
        match stream.read(&mut buf[have..]) {
            Ok(0) if have == 0 => return Err("connection closed without a hello".into()),
            Ok(0) => return Err(format!("connection closed after {have} bytes of a hello")),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if net::is_timeout(&e) => return Err(late()),
            Err(e) => return Err(format!("error reading the hello: {e}")),
        }
    }
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
