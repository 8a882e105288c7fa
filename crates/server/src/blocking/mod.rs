//! The thread-per-connection server: each connection gets a thread and blocking reads.
//!
//! What one connection can hold (docs/security.md): its thread's stack (the pages
//! it touches), one read block of at most [`super::BULK_READ`] bytes (or `--read-size`, the
//! operator's choice; never the client's chunk), and one read's worth of latency answers, since
//! it writes them before it reads again. Reads and writes time out after `--idle-timeout`, so a
//! client that stops reading its answers is cut off like one that stops sending. The hello and
//! the authentication answer must arrive within `--hello-timeout` of the accept (a deadline,
//! not a wait that restarts on every byte), and so must the first byte or request after the
//! server's accept.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Result;
use tracing::warn;

use super::fds::{self, Backoff, Spare};
use super::{Outcome, SHUTTING_DOWN, Server, print_failed};
use tsperf_proto::serve::{Refusal, busy};
use tsperf_proto::{Frame, RefuseCode};

mod conn;

use conn::handle;

/// Serves until the process ends, or one client's run with `--once`, each of
/// its connections on a thread of its own as any other; then the result says whether each of
/// them completed.
pub fn serve(listener: TcpListener, srv: &Server) -> Result<bool> {
    let cfg = &srv.cfg;
    let open: Open = Arc::new(Mutex::new(HashMap::new()));
    wake_accept_on_stop(&listener, srv);
    srv.console().set_line_wait(cfg.policy.idle_timeout);
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
                    && spare.lend(|| refuse_next(&listener, srv)) == Some(true)
                    && !srv.stopping()
                {
                    continue;
                }
                // Otherwise pause, longer each time, so as not to spin or flood the log.
                std::thread::sleep(backoff.failed(&e));
                if srv.stopping() {
                    break;
                }
                continue;
            }
        };
        // A stop, or a --once run that is over, wakes the accept with a connection to
        // ourselves.
        if srv.stopping() || srv.once_over().is_some() {
            drop(stream);
            break;
        }
        if srv.open().load(Ordering::Acquire) >= cfg.max_clients {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let outcome = refuse(&mut stream, busy(cfg.max_clients));
            print_failed(srv, peer, &outcome, None);
            continue;
        }
        next_id += 1;
        if let Ok(clone) = stream.try_clone() {
            open.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(next_id, clone);
        }
        srv.open().fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            open: open.clone(),
            id: next_id,
            srv: srv.clone(),
        };
        let srv = srv.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("conn {peer}"))
            .spawn(move || {
                let _slot = slot;
                let outcome = handle(stream, peer, &srv);
                once_ended(&srv, peer, &outcome);
                outcome
            });
        if let Err(e) = spawned {
            warn!("cannot start a thread for {peer}: {e}");
        }
    }
    drain(&open, srv);
    Ok(srv.once_over().unwrap_or(true))
}

/// With `--once`: the connection from `peer` ended with `outcome`; the accept is woken once the
/// run is over, now or (a connection of it that never came) after the patience, which a thread
/// of its own waits out only then (never for a connection refused: a peer that connects again
/// and again starts no threads).
fn once_ended(srv: &Server, peer: SocketAddr, outcome: &Outcome) {
    let Some(once) = srv.once() else {
        return;
    };
    if srv
        .once_ended(peer, matches!(outcome, Outcome::Complete))
        .is_some()
    {
        srv.wake();
        return;
    }
    if !once.waiting() {
        return;
    }
    let (srv, patience) = (srv.clone(), srv.cfg.policy.hello_timeout);
    let _ = std::thread::Builder::new()
        .name("once patience".into())
        .spawn(move || {
            std::thread::sleep(patience + Duration::from_millis(50));
            if srv.once_over().is_some() {
                srv.wake();
            }
        });
}

/// A stop request wakes the blocking accept with a connection to ourselves.
fn wake_accept_on_stop(listener: &TcpListener, srv: &Server) {
    if let Ok(addr) = listener.local_addr() {
        // A dual-stack `[::]` takes IPv4 too, and IPv6 loopback may be missing: try both.
        let ips: Vec<IpAddr> = match addr.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => vec![Ipv4Addr::LOCALHOST.into()],
            IpAddr::V6(v6) if v6.is_unspecified() => {
                vec![Ipv6Addr::LOCALHOST.into(), Ipv4Addr::LOCALHOST.into()]
            }
            ip => vec![ip],
        };
        srv.on_stop(move || {
            for ip in &ips {
                let to = SocketAddr::new(*ip, addr.port());
                if TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok() {
                    break;
                }
            }
        });
    }
}

/// How long reverse streams have, once cut off, to end themselves with the reason.
const CUT_PATIENCE: Duration = Duration::from_millis(1500);

/// Stopping: lets transfers in flight finish within the grace period, then cuts off the rest
/// with a reason; their threads see the closed socket, log the end and remove any partial file.
fn drain(open: &Open, srv: &Server) {
    let active = srv.open();
    let wait_until = |until: Instant, cut_short: bool| {
        while active.load(Ordering::Acquire) > 0
            && Instant::now() < until
            && !(cut_short && srv.stopping_now())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // The grace period, which a second signal ends.
    wait_until(Instant::now() + srv.cfg.grace, true);
    // Then transfers still going are cut off: reverse streams end themselves within a write
    // slice, with the reason in their report's place (conn::serve_send); the rest get an
    // Abort frame and their socket shut down.
    srv.cut_off();
    // Threads waiting to read are woken (their read ends) to tell their clients why in their
    // own protocol: a transfer's Abort frame, a latency session's end of answers.
    for stream in open.lock().unwrap_or_else(PoisonError::into_inner).values() {
        let _ = stream.shutdown(Shutdown::Read);
    }
    wait_until(Instant::now() + CUT_PATIENCE, false);
    // Threads waiting for room on a stuck stdout must get to their socket and clean up.
    srv.console().release();
    for (_, mut stream) in open.lock().unwrap_or_else(PoisonError::into_inner).drain() {
        let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
        let _ = conn::send(&mut stream, &Frame::Abort(SHUTTING_DOWN.to_owned()));
        // Close with a reset, as the event loop's close does with unread data: a plain FIN can
        // leave a client that is blocked on a zero window waiting for its own timeout.
        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
        let _ = stream.shutdown(Shutdown::Both);
    }
    wait_until(Instant::now() + Duration::from_secs(2), false);
}

/// Accepts one waiting connection and refuses it for want of descriptors. True if it did.
fn refuse_next(listener: &TcpListener, srv: &Server) -> bool {
    match listener.accept() {
        Ok((mut stream, peer)) => {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let outcome = refuse(
                &mut stream,
                (RefuseCode::Limit, fds::OUT_OF_DESCRIPTORS.to_owned()),
            );
            print_failed(srv, super::canonical(peer), &outcome, None);
            true
        }
        Err(_) => false,
    }
}

/// Clones of the open connections' sockets, so a shutdown can cut them off.
type Open = Arc<Mutex<HashMap<u64, TcpStream>>>;

/// One of the `--max-clients` places, given back when the connection's thread ends.
struct Slot {
    open: Open,
    id: u64,
    srv: Server,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        self.srv.open().fetch_sub(1, Ordering::AcqRel);
    }
}

fn refuse(stream: &mut TcpStream, (code, reason): Refusal) -> Outcome {
    let _ = conn::send(
        stream,
        &Frame::Refuse {
            code,
            reason: reason.clone(),
        },
    );
    Outcome::Refused(code, reason)
}
