//! tsclient's stream mode: send a file in chunks of exactly `chunk` bytes and get the server's
//! verdict.
//!
//! The clock starts when the server has accepted the hello and stops when the server's report
//! arrives, after the server has read and checksummed every byte. A transfer whose byte count or
//! digest disagrees with the server's is returned with `verified() == false`; the caller treats
//! that as a failure.
//!
//! The same transfer code runs over a blocking `TcpStream` or a mio non-blocking socket
//! ([`nonblocking`]); the two differ only in how they wait.

pub mod nonblocking;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::auth::Key;
use crate::net;
use crate::progress::Progress;
use crate::protocol::{Frame, Hello, Mode, Report, encode_hello};
use crate::source::Source;
use crate::timing::{CpuTime, unix_us_now};
use nonblocking::MioConn;

/// What to send, where, and how.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    pub host: String,
    pub port: u16,
    pub chunk: u32,
    pub file: PathBuf,
    /// Longest wait for the connection, and for the server to take data or answer.
    pub timeout: Duration,
    /// Use a mio non-blocking socket instead of a blocking one.
    pub nonblocking: bool,
    /// Ask the kernel for this send buffer size (SO_SNDBUF).
    pub sndbuf: Option<u32>,
    /// The pre-shared key, for a server that asks for one.
    pub auth: Option<std::sync::Arc<Key>>,
}

/// Counts of what the client's writes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Write calls that moved at least one byte.
    pub writes: u64,
    /// Writes that took fewer bytes than offered.
    pub partial_writes: u64,
    /// Writes that found the socket full (non-blocking only).
    pub would_block: u64,
    /// Wake-ups from poll (non-blocking only).
    pub polls: u64,
}

/// Everything measured about one transfer, by both ends.
#[derive(Debug, Clone)]
pub struct StreamResult {
    pub name: String,
    pub bytes: u64,
    pub chunk: u32,
    pub io: &'static str,
    pub peer: SocketAddr,
    pub begin_unix_us: u64,
    pub end_unix_us: u64,
    pub elapsed: Duration,
    pub digest: u64,
    pub writes: WriteStats,
    pub cpu: CpuTime,
    pub sndbuf: u32,
    pub read_size: u32,
    pub server: Report,
}

impl StreamResult {
    /// True when the server counted every byte and its digest equals ours.
    pub fn verified(&self) -> bool {
        self.server.bytes == self.bytes && self.server.digest == self.digest
    }
}

/// A connected socket the transfer runs over. `Read` and `Write` have blocking meaning: the
/// non-blocking transport waits in poll inside them and counts what it waited for.
pub trait Transport: Read + Write + Sized {
    /// The JSON's `io` value.
    const IO: &'static str;
    /// Connects to `host:port` within `timeout`.
    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self>;
    fn peer(&self) -> io::Result<SocketAddr>;
    fn socket(&self) -> socket2::SockRef<'_>;
    /// Longest wait for the peer to take data or answer.
    fn set_idle_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    /// Writes that found the socket full, and wake-ups from poll.
    fn waits(&self) -> (u64, u64);
}

impl Transport for TcpStream {
    const IO: &'static str = "blocking";

    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self> {
        net::connect(host, port, timeout)
    }

    fn peer(&self) -> io::Result<SocketAddr> {
        self.peer_addr()
    }

    fn socket(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(self)
    }

    fn set_idle_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }

    fn waits(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// Runs one stream transfer over the transport the configuration asks for, showing `progress`.
pub fn run_stream(cfg: &StreamConfig, progress: &mut Progress) -> Result<StreamResult> {
    let source = Source::open(&cfg.file, cfg.chunk)?;
    let result = if cfg.nonblocking {
        let conn = MioConn::connect(&cfg.host, cfg.port, cfg.timeout)?;
        transfer(conn, source, cfg, progress)
    } else {
        let conn = <TcpStream as Transport>::connect(&cfg.host, cfg.port, cfg.timeout)?;
        transfer(conn, source, cfg, progress)
    };
    progress.clear();
    result
}

fn transfer<T: Transport>(
    mut conn: T,
    mut source: Source,
    cfg: &StreamConfig,
    progress: &mut Progress,
) -> Result<StreamResult> {
    let peer = conn.peer().context("cannot read the server's address")?;
    conn.set_idle_timeout(cfg.timeout)?;
    if let Some(n) = cfg.sndbuf {
        conn.socket()
            .set_send_buffer_size(n as usize)
            .with_context(|| format!("cannot set the send buffer to {n} bytes"))?;
    }

    let hello = Hello {
        mode: Mode::Stream,
        nodelay: false,
        codec: 0,
        framing: 0,
        length: source.len(),
        chunk: cfg.chunk,
        name: source.name().to_owned(),
    };
    let read_size = handshake(&mut conn, &hello, cfg.auth.as_deref())
        .with_context(|| format!("the server at {peer} did not accept the transfer"))?;

    progress.start(source.len());
    let cpu_start = CpuTime::process();
    let begin = Instant::now();
    let begin_unix_us = unix_us_now();
    let mut writes = WriteStats::default();
    let chunk = cfg.chunk as usize;
    let mut sent = 0u64;
    loop {
        let block = source.next_block()?;
        if block.is_empty() {
            break;
        }
        for piece in block.chunks(chunk) {
            if let Err(e) = write_chunk(&mut conn, piece, &mut writes) {
                return Err(lost(&mut conn, e, sent, source.len(), cfg.timeout));
            }
            sent += piece.len() as u64;
        }
        progress.update(sent);
    }
    if let Err(e) = conn.write_all(&source.digest().to_be_bytes()) {
        return Err(lost(&mut conn, e, sent, source.len(), cfg.timeout));
    }
    // Nagle stays on while sending, as in the seed; once the last chunk is written, push the
    // tail out now instead of letting it wait for a delayed ACK (up to 40 ms on Linux).
    let _ = conn.socket().set_tcp_nodelay(true);
    let server = match net::read_frame(&mut conn, "report")? {
        Frame::Report(r) => r,
        Frame::Abort(reason) => bail!("the server aborted the transfer: {reason}"),
        other => bail!("the server sent {other:?} where its report was expected"),
    };
    let elapsed = begin.elapsed();
    let end_unix_us = unix_us_now();
    let cpu = CpuTime::process().since(cpu_start);
    (writes.would_block, writes.polls) = conn.waits();

    Ok(StreamResult {
        name: source.name().to_owned(),
        bytes: source.len(),
        chunk: cfg.chunk,
        io: T::IO,
        peer,
        begin_unix_us,
        end_unix_us,
        elapsed,
        digest: source.digest(),
        writes,
        cpu,
        sndbuf: conn.socket().send_buffer_size().map_or(0, |n| n as u32),
        read_size,
        server,
    })
}

/// Sends the hello, answers the server's challenge if it sends one (with `key`), and returns the
/// read size of the server's accept; a refusal is an error carrying the server's reason.
pub fn handshake<T: Transport>(conn: &mut T, hello: &Hello, key: Option<&Key>) -> Result<u32> {
    let mut msg = Vec::with_capacity(crate::protocol::MAX_HELLO);
    encode_hello(hello, &mut msg);
    conn.write_all(&msg).context("cannot send the hello")?;
    let mut answer = net::read_frame(conn, "answer to the hello")?;
    if let Frame::Challenge(challenge) = answer {
        let Some(key) = key else {
            bail!("the server requires authentication: pass --auth-key FILE with its key");
        };
        conn.write_all(&key.answer(&challenge))
            .context("cannot send the authentication answer")?;
        answer = net::read_frame(conn, "answer to the authentication")?;
    }
    match answer {
        Frame::Accept { read_size, .. } => Ok(read_size),
        Frame::Refuse(reason) | Frame::Abort(reason) => bail!("refused: {reason}"),
        Frame::Report(_) | Frame::Challenge(_) => {
            bail!("the server broke the protocol: {answer:?} instead of an accept")
        }
    }
}

/// Writes one chunk, finishing it from where a short write stopped.
#[inline]
fn write_chunk<T: Transport>(
    conn: &mut T,
    mut piece: &[u8],
    stats: &mut WriteStats,
) -> io::Result<()> {
    loop {
        match conn.write(piece) {
            Ok(n) if n == piece.len() => {
                stats.writes += 1;
                return Ok(());
            }
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                stats.writes += 1;
                stats.partial_writes += 1;
                piece = &piece[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Bytes written to the socket that the peer has not acknowledged yet (Linux `TIOCOUTQ`).
fn unacknowledged<T: Transport>(conn: &T) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int into `n`, which we own.
    let rc = unsafe { libc::ioctl(conn.socket().as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    (rc == 0 && n >= 0).then_some(n as u64)
}

/// Explains a failed write. The server may have said why it stopped (an abort frame); if so,
/// that reason is the error. Otherwise the error says how far the transfer got.
fn lost<T: Transport>(
    conn: &mut T,
    e: io::Error,
    sent: u64,
    total: u64,
    timeout: Duration,
) -> anyhow::Error {
    if net::is_timeout(&e) {
        return anyhow::anyhow!(
            "the server took no data for {} s after {sent} of {total} bytes",
            timeout.as_secs_f64()
        );
    }
    let _ = conn.set_idle_timeout(Duration::from_millis(500));
    if let Ok(Frame::Abort(reason) | Frame::Refuse(reason)) = net::read_frame(conn, "reason") {
        return anyhow::anyhow!(
            "the server aborted the transfer after {sent} of {total} bytes: {reason}"
        );
    }
    let acked = unacknowledged(conn).map_or(String::new(), |q| {
        format!(
            " (the server's TCP acknowledged {})",
            sent.saturating_sub(q)
        )
    });
    anyhow::Error::new(e).context(format!(
        "connection lost after sending {sent} of {total} bytes{acked}"
    ))
}
