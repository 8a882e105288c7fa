//! The data stream over TLS 1.3 (rustls): the server's ephemeral certificate, the client's pin
//! of it, and [`Wire`], a connection's bytes in the clear or through TLS behind `Read` and
//! `Write`, on a blocking socket or a non-blocking one alike.
//!
//! A [`Wire`] with TLS keeps the blocking or non-blocking meaning of its socket: a read returns
//! plain bytes, or `WouldBlock` when TLS has none and the socket has nothing more; a write takes
//! plain bytes into TLS's buffer (at most [`TLS_BUFFER`] of records waiting), sends what the
//! socket takes, and says `WouldBlock` only when it could take nothing. A pending handshake is
//! driven by whichever comes first. `flush` sends every record waiting; [`Wire::close`] ends
//! the TLS (close_notify) where the clear stream would close or half-close.
//!
//! With kernel TLS ([`Records::Kernel`]) the handshake is made by rustls as ever, then its keys
//! are handed to the kernel (`tls/kernel.rs`), and the socket's reads, writes and `sendfile` carry
//! plain bytes.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

pub use tsperf_proto::tls::Cipher;

mod config;
mod kernel;

pub use config::{ServerTls, TLS_BUFFER, cipher_of, client};

/// Where a stream's records are sealed and opened once its handshake is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// In this process (rustls).
    Process,
    /// In the kernel (kernel TLS): the keys are handed to it after the handshake, and the
    /// socket's writes, `sendfile` and reads carry plain bytes.
    Kernel,
}

/// The most bytes one read from the socket takes for TLS: records are then handed to rustls
/// from memory, so a stream costs a system call per this much, not per record (16 KiB).
pub const TLS_READ: usize = 256 << 10;

/// One end's TLS state for a stream.
pub struct Tls(State);

// Each driver holds its `Tls` boxed, once per connection over TLS: the small variant saves
// nothing worth an indirection on every record.
#[allow(clippy::large_enum_variant)]
enum State {
    /// Records sealed and opened by rustls; `kernel`: handed to the kernel once the
    /// handshake is done (the socket is then read a record at a time until it is, so no
    /// record after the handshake is read into this process).
    User {
        tls: rustls::Connection,
        raw: Raw,
        kernel: bool,
    },
    /// Records sealed and opened by the kernel; `ended` once the peer's close_notify is read.
    Kernel {
        cipher: Cipher,
        client: bool,
        ended: bool,
    },
    /// The handover to the kernel failed: the keys are gone from the process.
    Lost,
}

/// Records read from the socket ahead of rustls ([`TLS_READ`] at once; allocated at the first
/// read), or, while a handshake whose keys go to the kernel runs, no further than the end of
/// the record being read.
#[derive(Default)]
struct Raw {
    buf: Vec<u8>,
    at: usize,
    len: usize,
    /// Reading record by record: the current record's header bytes read (0-5), and then its
    /// body's bytes still to read.
    exact: Option<(usize, [u8; 5], usize)>,
}

impl Raw {
    /// The most the next read from the socket may take.
    fn room(&self) -> usize {
        match self.exact {
            None => TLS_READ,
            Some((got, _, _)) if got < 5 => 5 - got,
            Some((_, _, body)) => body,
        }
    }

    /// Follows the record boundaries over `bytes`, just read (no more than [`Raw::room`]).
    fn saw(&mut self, bytes: &[u8]) {
        let Some((got, head, body)) = self.exact.as_mut() else {
            return;
        };
        if *got < 5 {
            head[*got..*got + bytes.len()].copy_from_slice(bytes);
            *got += bytes.len();
            if *got == 5 {
                *body = usize::from(u16::from_be_bytes([head[3], head[4]]));
            }
        } else {
            *body -= bytes.len();
        }
        if *got == 5 && *body == 0 {
            *got = 0;
        }
    }

    /// Hands rustls what is held, reading the socket first when nothing is: the bytes handed
    /// (`Ok(0)` at the socket's end).
    fn feed(&mut self, sock: &mut impl Read, tls: &mut rustls::Connection) -> io::Result<usize> {
        if self.at == self.len {
            if self.buf.is_empty() {
                self.buf = vec![0; TLS_READ];
            }
            let room = self.room();
            self.len = sock.read(&mut self.buf[..room])?;
            self.at = 0;
            if self.len == 0 {
                // rustls learns of the end as it does from a socket: a read of nothing.
                return tls.read_tls(&mut io::empty());
            }
            let (buf, len) = (std::mem::take(&mut self.buf), self.len);
            self.saw(&buf[..len]);
            self.buf = buf;
        }
        let n = tls.read_tls(&mut &self.buf[self.at..self.len])?;
        self.at += n;
        Ok(n)
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("records", &self.records())
            .field("cipher", &self.cipher())
            .finish()
    }
}

impl Tls {
    /// rustls's connection, its records handed to the kernel after the handshake if `kernel`.
    fn user(tls: rustls::Connection, kernel: bool) -> Tls {
        let raw = Raw {
            exact: kernel.then_some((0, [0; 5], 0)),
            ..Raw::default()
        };
        Tls(State::User { tls, raw, kernel })
    }

    /// The suite the handshake settled on, once it has.
    pub fn cipher(&self) -> Option<Cipher> {
        match &self.0 {
            State::User { tls, .. } => tls.negotiated_cipher_suite().and_then(cipher_of),
            State::Kernel { cipher, .. } => Some(*cipher),
            State::Lost => None,
        }
    }

    /// Where its records are sealed and opened (kernel TLS only once the keys were handed
    /// over, after the handshake).
    pub fn records(&self) -> Records {
        match self.0 {
            State::Kernel { .. } => Records::Kernel,
            _ => Records::Process,
        }
    }

    /// Hands the keys to the kernel where that is asked and the handshake is done, after
    /// sending what rustls has waiting (`WouldBlock` where the socket takes none of it).
    fn settle<S: Write + AsFd>(&mut self, sock: &mut S) -> io::Result<()> {
        let State::User { tls, kernel, .. } = &mut self.0 else {
            return Ok(());
        };
        if !*kernel || tls.is_handshaking() {
            return Ok(());
        }
        push(sock, tls)?;
        let State::User { tls, .. } = std::mem::replace(&mut self.0, State::Lost) else {
            unreachable!("matched above")
        };
        let client = matches!(tls, rustls::Connection::Client(_));
        let cipher = tls.negotiated_cipher_suite().and_then(cipher_of);
        let secrets = tls.dangerous_extract_secrets().map_err(|e| {
            io::Error::other(format!("cannot take the TLS keys for the kernel: {e}"))
        })?;
        let cipher = cipher.ok_or_else(|| io::Error::other("TLS settled on no known suite"))?;
        tsperf_sys::ktls::attach(sock)?;
        for (direction, (seq, secret)) in [
            (tsperf_sys::ktls::Direction::Send, secrets.tx),
            (tsperf_sys::ktls::Direction::Receive, secrets.rx),
        ] {
            kernel::install(sock, direction, seq, &secret)?;
        }
        self.0 = State::Kernel {
            cipher,
            client,
            ended: false,
        };
        Ok(())
    }
}

/// Sends what TLS has waiting until it has none (`Ok`), or the socket takes no more
/// (`WouldBlock`).
fn push(sock: &mut impl Write, tls: &mut rustls::Connection) -> io::Result<()> {
    while tls.wants_write() {
        if tls.write_tls(sock)? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// A connection's bytes: in the clear on `sock`, or through `tls` once a stream over TLS has
/// begun ([`Wire::new`] borrows both, so a driver keeps its socket and its TLS state apart).
pub struct Wire<'a, S> {
    sock: &'a mut S,
    tls: Option<&'a mut Tls>,
}

impl<'a, S: Read + Write + AsFd> Wire<'a, S> {
    /// The bytes of `sock`, through `tls` where there is one.
    pub fn new(sock: &'a mut S, tls: Option<&'a mut Tls>) -> Wire<'a, S> {
        Wire { sock, tls }
    }

    /// Takes what the socket has into TLS and processes it: `Ok(false)` at the socket's end.
    fn pull(sock: &mut S, tls: &mut rustls::Connection, raw: &mut Raw) -> io::Result<bool> {
        let n = raw.feed(sock, tls)?;
        if let Err(e) = tls.process_new_packets() {
            // An alert for the peer, where the socket takes it.
            let _ = push(sock, tls);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS: {e}"),
            ));
        }
        Ok(n != 0)
    }

    /// Drives a handshake not yet done, as far as the socket allows (`WouldBlock` where it
    /// waits), then hands the keys to the kernel where that is asked.
    fn handshake(sock: &mut S, t: &mut Tls) -> io::Result<()> {
        if let State::User { tls, raw, .. } = &mut t.0 {
            while tls.is_handshaking() {
                push(sock, tls)?;
                if !tls.is_handshaking() {
                    break;
                }
                if tls.wants_read() && !Self::pull(sock, tls, raw)? {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection closed during the TLS handshake",
                    ));
                }
            }
            push(sock, tls)?;
        }
        t.settle(sock)
    }

    /// Ends this end's TLS (its close_notify) and sends what is waiting; nothing in the clear.
    pub fn close(&mut self) -> io::Result<()> {
        let Some(t) = self.tls.as_deref_mut() else {
            return Ok(());
        };
        t.settle(self.sock)?;
        match &mut t.0 {
            State::User { tls, .. } => {
                tls.send_close_notify();
                push(self.sock, tls)
            }
            State::Kernel { .. } => tsperf_sys::ktls::close_notify(self.sock),
            State::Lost => Err(lost()),
        }
    }

    /// The suite a stream over TLS settled on; `None` in the clear or before its handshake.
    pub fn cipher(&self) -> Option<Cipher> {
        self.tls.as_deref().and_then(Tls::cipher)
    }

    /// True while the stream is over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// A stream whose keys could not be handed to the kernel.
fn lost() -> io::Error {
    io::Error::other("the stream's TLS keys were lost in their handover to the kernel")
}

/// A peer's TLS stream that ended without its close_notify: cut off (a peer gone, a relay
/// dropped), not ended.
fn cut_off(client: bool) -> io::Error {
    let peer = match client {
        true => "the server's",
        false => "the client's",
    };
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "{peer} TLS stream was cut off mid-stream (its connection closed without a \
             close_notify)"
        ),
    )
}

impl<S: Read + Write + AsFd> Read for Wire<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(t) = self.tls.as_deref_mut() else {
            return self.sock.read(buf);
        };
        loop {
            t.settle(self.sock)?;
            let (tls, raw) = match &mut t.0 {
                State::User { tls, raw, .. } => (tls, raw),
                State::Kernel { client, ended, .. } => {
                    return kernel::read(self.sock, buf, *client, ended);
                }
                State::Lost => return Err(lost()),
            };
            match tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            // Handshake records (or a key update's) go out first: the peer may wait for them.
            push(self.sock, tls)?;
            if !Self::pull(self.sock, tls, raw)? {
                // The socket's end: what TLS held is read above; then a clean end (the peer's
                // close_notify) reads as 0, a cut one as an error, said in our words.
                let client = matches!(tls, rustls::Connection::Client(_));
                return tls.reader().read(buf).map_err(|e| match e.kind() {
                    io::ErrorKind::UnexpectedEof => cut_off(client),
                    _ => e,
                });
            }
        }
    }
}

impl<S: Read + Write + AsFd> Write for Wire<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let Some(t) = self.tls.as_deref_mut() else {
            return self.sock.write_vectored(bufs);
        };
        Self::handshake(self.sock, t)?;
        let tls = match &mut t.0 {
            State::User { tls, .. } => tls,
            State::Kernel { .. } => return self.sock.write_vectored(bufs),
            State::Lost => return Err(lost()),
        };
        let n = tls.writer().write_vectored(bufs)?;
        // What the socket takes now; the rest waits in TLS for the next write or flush.
        match push(self.sock, tls) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => other?,
        }
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            // TLS holds its most, and the socket took none of it.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.tls.as_deref_mut() {
            Some(t) => Self::handshake(self.sock, t),
            None => self.sock.flush(),
        }
    }
}

impl<S: AsFd> AsFd for Wire<'_, S> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl<S: Read + Write + AsFd> crate::send::Sink for Wire<'_, S> {
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        if let Some(t) = self.tls.as_deref_mut() {
            Self::handshake(self.sock, t)?;
            if t.records() != Records::Kernel {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "sendfile cannot send through TLS sealed in this process (only through \
                     kernel TLS: --ktls)",
                ));
            }
        }
        tsperf_sys::net::sendfile(&self.sock.as_fd(), file, offset, len)
    }
}

#[cfg(test)]
mod tests;
