//! The blocking transport: a `TcpStream` whose waits are bounded the way `--timeout` promises.
//!
//! - **Writes** give up once the server has taken no byte for the timeout. The kernel's send
//!   timeout (`SO_SNDTIMEO`) is set to a slice of it ([`slice()`]); a call that waits a whole
//!   slice without moving a byte starts (or continues) a stall, and a stall of the timeout is
//!   an error. A call that moves some bytes and then waits returns them short; that is
//!   progress, and the caller carries on from there. With the send timeout set to the whole
//!   timeout instead, a short write would restart the wait: a stall was noticed only after
//!   two or three timeouts. Fast writes pay nothing for this: no clock is read unless a slice
//!   runs out.
//! - **Reads** can be given a deadline ([`Transport::read_by`]): the wait for the hello's
//!   answer, the report after the last byte, a clock query's answer. However the bytes
//!   trickle in, the read fails at the deadline. The receive timeout (`SO_RCVTIMEO`) is reset
//!   only when it is off by more than a hundredth of the timeout, so a clock query's read
//!   usually costs no extra system call.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::Transport;
use tsperf_sys::net;

/// A connected blocking socket with bounded waits.
pub struct Blocking {
    /// Before `stream`: it stops watching before the socket closes.
    _watch: super::interrupt::Watch,
    stream: TcpStream,
    timeout: Duration,
    /// The receive timeout the socket has now.
    rcvtimeo: Duration,
    /// Reads fail at this instant.
    deadline: Option<Instant>,
    /// When the current stall began: the start of the first send slice that moved nothing.
    stalled_since: Option<Instant>,
}

/// The send timeout for a stall timeout of `timeout`: an eighth of it, at most a second (so a
/// stall is noticed within the timeout plus that much).
pub fn slice(timeout: Duration) -> Duration {
    (timeout / 8).clamp(Duration::from_millis(1), Duration::from_secs(1))
}

impl Blocking {
    fn new(stream: TcpStream, timeout: Duration) -> io::Result<Blocking> {
        let mut b = Blocking {
            _watch: super::interrupt::Watch::new(&stream),
            stream,
            timeout,
            rcvtimeo: Duration::ZERO,
            deadline: None,
            stalled_since: None,
        };
        b.set_timeout(timeout)?;
        Ok(b)
    }

    /// Runs one sending call until it moves data, the stall reaches the timeout, or it fails.
    #[inline]
    fn send_with(
        &mut self,
        mut call: impl FnMut(&mut TcpStream) -> io::Result<usize>,
    ) -> io::Result<usize> {
        loop {
            match call(&mut self.stream) {
                Ok(n) => {
                    self.stalled_since = None;
                    return Ok(n);
                }
                Err(e) if net::is_timeout(&e) => {
                    let now = Instant::now();
                    let began = now.checked_sub(slice(self.timeout)).unwrap_or(now);
                    let since = *self.stalled_since.get_or_insert(began);
                    if now.duration_since(since) >= self.timeout {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Sets the receive timeout to what is left before the deadline, or the timeout if that is
    /// sooner, when it is off by much. True when the deadline is the nearer: a receive timeout
    /// then only means the read was woken early.
    fn aim_read(&mut self) -> io::Result<bool> {
        let Some(by) = self.deadline else {
            // No deadline: the plain timeout again, if a deadline had aimed it elsewhere.
            if self.rcvtimeo != self.timeout {
                self.stream.set_read_timeout(Some(self.timeout))?;
                self.rcvtimeo = self.timeout;
            }
            return Ok(false);
        };
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let aim = left.min(self.timeout);
        let tolerance = (self.timeout / 100).max(Duration::from_millis(1));
        if self.rcvtimeo.abs_diff(aim) > tolerance {
            self.stream.set_read_timeout(Some(aim))?;
            self.rcvtimeo = aim;
        }
        Ok(left <= self.timeout)
    }
}

impl Read for Blocking {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let deadline_nearer = self.aim_read()?;
            match self.stream.read(buf) {
                // Woken early by a receive timeout shorter than the deadline: aim again.
                Err(e) if net::is_timeout(&e) && deadline_nearer => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

impl Write for Blocking {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_with(|s| tsperf_sys::direct::send(s, buf))
    }

    #[inline]
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.send_with(|s| s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for Blocking {
    const IO: super::ClientIo = super::ClientIo::Blocking;

    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self> {
        let stream = net::connect(host, port, timeout, &mut super::say_unanswered)?;
        Ok(Blocking::new(stream, timeout)?)
    }

    fn peer(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    fn socket(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.stream)
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.timeout = timeout;
        self.stream.set_write_timeout(Some(slice(timeout)))?;
        self.stream.set_read_timeout(Some(timeout))?;
        self.rcvtimeo = timeout;
        Ok(())
    }

    fn read_by(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    fn waits(&self) -> (u64, u64) {
        (0, 0)
    }
}

impl std::os::fd::AsFd for Blocking {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl tsperf_stream::send::Sink for Blocking {
    fn sendfile(&mut self, file: &File, offset: u64, len: usize) -> io::Result<usize> {
        self.send_with(|s| net::sendfile(s, file, offset, len))
    }
}
