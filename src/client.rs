//! tsclient's stream mode: send a file in chunks of exactly `chunk` bytes and get the server's
//! verdict.
//!
//! The clock starts when the server has accepted the hello and stops when the server's report
//! arrives, after the server has read and checksummed every byte. A transfer whose byte count or
//! digest disagrees with the server's is returned with `verified() == false`; the caller treats
//! that as a failure.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::net;
use crate::protocol::{Frame, Hello, Mode, Report, encode_hello};
use crate::source::Source;
use crate::timing::{CpuTime, unix_us_now};

/// What to send, where, and how.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    pub host: String,
    pub port: u16,
    pub chunk: u32,
    pub file: PathBuf,
    /// Longest wait for the connection, and for the server to take data or answer.
    pub timeout: Duration,
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

/// Runs one stream transfer over a blocking socket.
pub fn run_stream(cfg: &StreamConfig) -> Result<StreamResult> {
    let mut source = Source::open(&cfg.file, cfg.chunk)?;
    let mut stream = net::connect(&cfg.host, cfg.port, cfg.timeout)?;
    let peer = stream
        .peer_addr()
        .context("cannot read the server's address")?;
    stream.set_read_timeout(Some(cfg.timeout))?;
    stream.set_write_timeout(Some(cfg.timeout))?;

    let hello = Hello {
        mode: Mode::Stream,
        nodelay: false,
        codec: 0,
        framing: 0,
        length: source.len(),
        chunk: cfg.chunk,
        name: source.name().to_owned(),
    };
    let mut msg = Vec::with_capacity(crate::protocol::MAX_HELLO);
    encode_hello(&hello, &mut msg);
    stream
        .write_all(&msg)
        .with_context(|| format!("cannot send the hello to {peer}"))?;
    let read_size = match net::read_frame(&mut stream, "answer to the hello")? {
        Frame::Accept { read_size, .. } => read_size,
        Frame::Refuse(reason) | Frame::Abort(reason) => {
            bail!("the server at {peer} refused the transfer: {reason}")
        }
        Frame::Report(_) => bail!("the server at {peer} sent a report before any data"),
    };

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
            if let Err(e) = write_chunk(&mut stream, piece, &mut writes) {
                return Err(lost(&mut stream, e, sent, source.len(), cfg.timeout));
            }
            sent += piece.len() as u64;
        }
    }
    let server = match net::read_frame(&mut stream, "report")? {
        Frame::Report(r) => r,
        Frame::Abort(reason) => bail!("the server aborted the transfer: {reason}"),
        other => bail!("the server sent {other:?} where its report was expected"),
    };
    let elapsed = begin.elapsed();
    let end_unix_us = unix_us_now();
    let cpu = CpuTime::process().since(cpu_start);

    Ok(StreamResult {
        name: source.name().to_owned(),
        bytes: source.len(),
        chunk: cfg.chunk,
        io: "blocking",
        peer,
        begin_unix_us,
        end_unix_us,
        elapsed,
        digest: source.digest(),
        writes,
        cpu,
        sndbuf: net::send_buffer(&stream),
        read_size,
        server,
    })
}

/// Writes one chunk on a blocking socket, finishing it if a write comes back short.
#[inline]
fn write_chunk(stream: &mut TcpStream, mut piece: &[u8], stats: &mut WriteStats) -> io::Result<()> {
    loop {
        match stream.write(piece) {
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

/// Explains a failed write. The server may have said why it stopped (an abort frame); if so,
/// that reason is the error. Otherwise the error says how far the transfer got.
fn lost(
    stream: &mut TcpStream,
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
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if let Ok(Frame::Abort(reason) | Frame::Refuse(reason)) = net::read_frame(stream, "reason") {
        return anyhow::anyhow!(
            "the server aborted the transfer after {sent} of {total} bytes: {reason}"
        );
    }
    anyhow::Error::new(e).context(format!(
        "connection lost after sending {sent} of {total} bytes"
    ))
}
