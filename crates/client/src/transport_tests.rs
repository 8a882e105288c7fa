//! Both transports keep the same promises about reads: each test runs over each.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::Transport;
use crate::blocking::Blocking;
use crate::nonblocking::MioConn;

/// A transport connected to a listener of its own, and the accepted peer.
fn pair<T: Transport>() -> (T, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conn = T::connect("127.0.0.1", port, Duration::from_millis(500)).unwrap();
    let (peer, _) = l.accept().unwrap();
    (conn, peer)
}

/// A stop asked for by another test would shut these connections down.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    crate::interrupt::STOP_TESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Below a raised receive low-water mark a read returns what came when its timeout ends (a
/// blocking read: the kernel copies it and waits for the rest; a non-blocking one: poll says
/// nothing of it, and the wait's timeout reads it), so a slow sender is not called silent (the
/// reverse receiver raises its mark to 64 KiB on loopback). Nothing waiting is still a timeout.
fn a_read_below_the_mark_returns_what_is_there_at_the_timeout<T: Transport>() {
    let _alone = alone();
    let (mut conn, mut peer) = pair::<T>();
    tsperf_sys::mark::recv_lowat(&*conn.socket(), 64 << 10).unwrap();
    // The bytes come while the read waits.
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        peer.write_all(&[7u8; 1000]).unwrap();
        peer
    });
    let mut buf = [0u8; 4096];
    assert_eq!(conn.read(&mut buf).unwrap(), 1000);
    let _peer = late.join().unwrap();
    let e = conn.read(&mut buf).unwrap_err();
    assert!(tsperf_sys::net::is_timeout(&e), "{e}");
}

/// A read deadline holds even while bytes are waiting: a reader slower than its sender never
/// finds the socket empty, and a reverse stream that never ends must still be cut off.
fn a_read_deadline_holds_while_bytes_keep_coming<T: Transport>() {
    let _alone = alone();
    let (mut conn, mut peer) = pair::<T>();
    peer.write_all(&[7u8; 256 << 10]).unwrap();
    let mut buf = [0u8; 4096];
    assert_eq!(conn.read(&mut buf).unwrap(), buf.len(), "bytes are waiting");
    conn.read_by(Some(Instant::now()));
    let e = conn.read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
}

#[test]
fn blocking_reads_below_the_mark() {
    a_read_below_the_mark_returns_what_is_there_at_the_timeout::<Blocking>();
}

#[test]
fn nonblocking_reads_below_the_mark() {
    a_read_below_the_mark_returns_what_is_there_at_the_timeout::<MioConn>();
}

#[test]
fn blocking_read_deadline_holds_while_bytes_keep_coming() {
    a_read_deadline_holds_while_bytes_keep_coming::<Blocking>();
}

#[test]
fn nonblocking_read_deadline_holds_while_bytes_keep_coming() {
    a_read_deadline_holds_while_bytes_keep_coming::<MioConn>();
}
