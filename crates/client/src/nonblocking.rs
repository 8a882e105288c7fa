//! The mio transport: a non-blocking socket that waits in `poll`, never in a spin or a sleep.
//!
//! It follows mio's rules: connect returns before the connection exists, so wait for WRITABLE,
//! then check `take_error()` and `peer_addr()`; after `WouldBlock`, wait for the next event and
//! try again; a short write keeps its place (the caller's slice offset) and never restarts.
//! It offers `Read` and `Write` with blocking meaning, so the transfer code is shared with the
//! blocking transport, and it counts every `WouldBlock` and every wake-up.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::Transport;

const CONN: Token = Token(0);

/// A connected non-blocking socket and the poll it waits in.
pub struct MioConn {
    /// Before `stream`: it stops watching before the socket closes.
    _watch: super::interrupt::Watch,
    stream: TcpStream,
    poll: Poll,
    events: Events,
    timeout: Duration,
    /// Reads fail at this instant.
    deadline: Option<Instant>,
    would_block: u64,
    polls: u64,
}

impl MioConn {
    /// Connects to `host:port`, trying each address until one answers, all within `timeout`.
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<MioConn> {
        let addrs = tsperf_sys::net::resolve(host, port)?;
        let by = Instant::now() + timeout;
        let mut last = None;
        for addr in addrs {
            match MioConn::connect_one(addr, by, timeout) {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("host '{host}' resolved to no address")))
    }

    fn connect_one(addr: SocketAddr, deadline: Instant, timeout: Duration) -> Result<MioConn> {
        let fail = || format!("could not connect to {addr}");
        let mut stream = match tsperf_sys::client_net::local_for(&addr) {
            None => TcpStream::connect(addr).with_context(fail)?,
            Some(local) => {
                let sock = tsperf_sys::client_net::bound(&addr, local, true)?;
                match sock.connect(&addr.into()) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                    Err(e) => return Err(e).with_context(fail),
                }
                TcpStream::from_std(sock.into())
            }
        };
        let poll = Poll::new().context("cannot create a poll")?;
        poll.registry()
            .register(&mut stream, CONN, Interest::READABLE | Interest::WRITABLE)
            .context("cannot register the socket")?;
        let mut conn = MioConn {
            _watch: super::interrupt::Watch::new(&stream),
            stream,
            poll,
            events: Events::with_capacity(8),
            timeout,
            deadline: None,
            would_block: 0,
            polls: 0,
        };
        let notice = Instant::now() + tsperf_sys::net::CONNECT_NOTICE;
        let mut said = false;
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                bail!(
                    "could not connect to {addr}: no answer within {} s",
                    timeout.as_secs_f64()
                );
            }
            if !said && now >= notice {
                super::say_unanswered(&addr, left);
                said = true;
            }
            let wait = match said {
                true => left,
                false => left.min(notice.saturating_duration_since(now)),
            };
            conn.poll
                .poll(&mut conn.events, Some(wait))
                .or_else(ignore_eintr)
                .with_context(fail)?;
            if conn.events.is_empty() {
                continue;
            }
            if let Some(e) = conn.stream.take_error().with_context(fail)? {
                return Err(e).with_context(fail);
            }
            match conn.stream.peer_addr() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => continue,
                Err(e) => return Err(e).with_context(fail),
            }
        }
        // The connect itself is not part of the transfer's accounting.
        conn.polls = 0;
        Ok(conn)
    }

    /// Waits for the socket's next event, or fails with `TimedOut` after the timeout (or at
    /// the deadline, for reads).
    fn wait(&mut self, reading: bool) -> io::Result<()> {
        let mut wait = self.timeout;
        if let Some(by) = self.deadline.filter(|_| reading) {
            wait = wait.min(by.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
        loop {
            match self.poll.poll(&mut self.events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            self.polls += 1;
            return if self.events.is_empty() {
                Err(io::ErrorKind::TimedOut.into())
            } else {
                Ok(())
            };
        }
    }
}

impl MioConn {
    /// Runs one sending call (`write`, `writev`, `sendfile`) until it moves data or fails:
    /// after `WouldBlock` it counts the wait and waits in poll; after `EINTR` it simply retries.
    #[inline]
    fn send_with(
        &mut self,
        mut call: impl FnMut(&mut TcpStream) -> io::Result<usize>,
    ) -> io::Result<usize> {
        loop {
            match call(&mut self.stream) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.would_block += 1;
                    self.wait(false)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

fn ignore_eintr(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::Interrupted {
        Ok(())
    } else {
        Err(e)
    }
}

impl Read for MioConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A deadline holds even while the bytes never stop coming (a reader slower than its
        // sender never finds the socket empty, so never waits where the deadline is looked at).
        if self.deadline.is_some_and(|by| Instant::now() >= by) {
            return Err(io::ErrorKind::TimedOut.into());
        }
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => match self.wait(true) {
                    // Below a raised receive low-water mark poll says nothing of bytes that
                    // are there: at the timeout they are read, as a blocking read returns
                    // them, and only nothing at all is a timeout. A read deadline
                    // (`read_by`) that has passed ends reading whatever is there.
                    Err(e)
                        if e.kind() == io::ErrorKind::TimedOut
                            && self.deadline.is_none_or(|by| Instant::now() < by) =>
                    {
                        return match self.stream.read(buf) {
                            Err(w) if w.kind() == io::ErrorKind::WouldBlock => Err(e),
                            other => other,
                        };
                    }
                    other => other?,
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

impl Write for MioConn {
    /// Writes as much of `buf` as the socket takes now, waiting in poll only when it takes none.
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_with(|s| tsperf_sys::direct::send(s, buf))
    }

    /// `writev` with the same waiting as `write`.
    #[inline]
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.send_with(|s| s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for MioConn {
    const IO: super::ClientIo = super::ClientIo::Nonblocking;

    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self> {
        MioConn::connect(host, port, timeout)
    }

    fn peer(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    fn socket(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.stream)
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.timeout = timeout;
        Ok(())
    }

    fn read_by(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    fn waits(&self) -> (u64, u64) {
        (self.would_block, self.polls)
    }
}

impl std::os::fd::AsFd for MioConn {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl tsperf_stream::send::Sink for MioConn {
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        self.send_with(|s| tsperf_sys::net::sendfile(s, file, offset, len))
    }
}
