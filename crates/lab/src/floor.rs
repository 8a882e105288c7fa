//! The floor: a bare `write()`/`read()` loop over loopback, the reference tsperf is held to.
//!
//! Nothing from the rest of tsperf is on its path: std sockets only, a writer thread that
//! `write()`s exactly `chunk` bytes from memory each call (Nagle on, as tsclient), and a reader
//! thread that `read()`s into a buffer of `read_size` bytes until EOF and neither checks nor
//! checksums anything. It is what one write per chunk costs in the kernel and nothing else.

use std::hash::Hasher as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// One run of the loop.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Bytes moved.
    pub bytes: u64,
    /// The reader's first byte to its last.
    pub receiver: Duration,
    /// The writer's first write to the reader's last byte.
    pub wall: Duration,
    /// The writer thread's CPU time over its loop (`CLOCK_THREAD_CPUTIME_ID`; on loopback this
    /// includes the receive path the kernel runs in the writer's context).
    pub writer_cpu: Duration,
    /// The reader thread's CPU time from its accept to EOF (`CLOCK_THREAD_CPUTIME_ID`).
    pub reader_cpu: Duration,
}

/// Moves `total` bytes in `chunk`-byte writes, read `read_size` bytes at a time.
pub fn run(total: u64, chunk: usize, read_size: usize) -> io::Result<Floor> {
    run_with(total, chunk, read_size, None, None)
}

/// [`run`] with tsperf's checksum on both ends (issue 33): the writer hashes each block of at
/// least 128 KiB (whole chunks) before it writes its chunks, the reader every read: the limit a
/// verified stream meets on this machine, the kernel's copies and the hashes and nothing else.
pub fn run_hashed(total: u64, chunk: usize, read_size: usize) -> io::Result<Floor> {
    run_as(total, chunk, read_size, true, None)
}

/// [`run`] (`hashed`: [`run_hashed`]) with the writer sending with the TCP congestion control
/// `congestion` (`TCP_CONGESTION`) instead of the kernel's default.
pub fn run_as(
    total: u64,
    chunk: usize,
    read_size: usize,
    hashed: bool,
    congestion: Option<&str>,
) -> io::Result<Floor> {
    let block = (128usize << 10).div_ceil(chunk.max(1)) * chunk.max(1);
    let source = hashed.then(|| vec![b'x'; block]);
    run_with(total, chunk, read_size, source.as_deref(), congestion)
}

/// [`run_hashed`] writing from `source` in turn, cycled, instead of one cache-resident block:
/// with tsperf's generated stream (36 MiB of text) as the source, the limit of a verified
/// stream whose bytes do not repeat within the caches, as tsperf's do not.
pub fn run_from(total: u64, chunk: usize, read_size: usize, source: &[u8]) -> io::Result<Floor> {
    run_with(total, chunk, read_size, Some(source), None)
}

/// The loop: with `source`, the writer hashes each whole-chunk block of at least 128 KiB of it
/// in turn (cycling) before writing its chunks, and the reader hashes every read.
fn run_with(
    total: u64,
    chunk: usize,
    read_size: usize,
    source: Option<&[u8]>,
    congestion: Option<&str>,
) -> io::Result<Floor> {
    let hash = source.is_some();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || read_all(&listener, read_size, hash));
    let chunk = chunk.max(1);
    let block = (128usize << 10).div_ceil(chunk) * chunk;
    let bare = vec![b'x'; chunk];
    let data = source.unwrap_or(&bare);
    let block = if hash { block.min(data.len()) } else { chunk };
    let mut s = TcpStream::connect(addr)?;
    if let Some(name) = congestion {
        tsperf_sys::congestion::set(&s, name).map_err(io::Error::other)?;
    }
    let (start, cpu) = (Instant::now(), tsperf_sys::timing::thread_cpu_clock());
    let (mut sent, mut at) = (0u64, 0usize);
    let mut hasher = twox_hash::XxHash3_64::new();
    while sent < total {
        if at + block > data.len() {
            at = 0;
        }
        let n = (block as u64).min(total - sent) as usize;
        let piece = &data[at..at + n];
        if hash {
            hasher.write(piece);
        }
        for c in piece.chunks(chunk) {
            s.write_all(c)?;
        }
        sent += n as u64;
        at += n;
    }
    std::hint::black_box(hasher.finish());
    s.shutdown(Shutdown::Write)?;
    let writer_cpu = tsperf_sys::timing::thread_cpu_clock() - cpu;
    let (got, first, last, reader_cpu) = reader
        .join()
        .map_err(|_| io::Error::other("the floor's reader panicked"))??;
    if got != total {
        return Err(io::Error::other(format!(
            "the floor's reader got {got} of {total} bytes"
        )));
    }
    Ok(Floor {
        bytes: got,
        receiver: last.duration_since(first),
        wall: last.duration_since(start),
        writer_cpu,
        reader_cpu,
    })
}

/// The reader's side of the loop: accepts one connection and reads it to EOF into a buffer
/// of `read_size` bytes, hashing each read if `hash`. Returns the bytes, the first and last
/// byte's times, and the thread's CPU from the accept on.
fn read_all(
    listener: &TcpListener,
    read_size: usize,
    hash: bool,
) -> io::Result<(u64, Instant, Instant, Duration)> {
    let (mut s, _) = listener.accept()?;
    let cpu = tsperf_sys::timing::thread_cpu_clock();
    let mut buf = vec![0u8; read_size.max(1)];
    let mut got = 0u64;
    let mut first = None;
    let mut hasher = twox_hash::XxHash3_64::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert_with(Instant::now);
                got += n as u64;
                if hash {
                    hasher.write(&buf[..n]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let last = Instant::now();
    std::hint::black_box(hasher.finish());
    let cpu = tsperf_sys::timing::thread_cpu_clock() - cpu;
    Ok((got, first.unwrap_or(last), last, cpu))
}

#[cfg(test)]
mod tests {
    /// Every byte arrives, at odd chunk and read sizes too.
    #[test]
    fn moves_every_byte() {
        for (chunk, read) in [(102, 262144), (1000, 7), (10240, 10240)] {
            let f = super::run(1_000_003, chunk, read).unwrap();
            assert_eq!(f.bytes, 1_000_003);
            assert!(f.wall >= f.receiver);
            // Both threads ran, and their CPU is counted.
            assert!(f.writer_cpu > std::time::Duration::ZERO, "{f:?}");
            assert!(f.reader_cpu > std::time::Duration::ZERO, "{f:?}");
            let f = super::run_hashed(1_000_003, chunk, read).unwrap();
            assert_eq!(f.bytes, 1_000_003);
            let f = super::run_as(1_000_003, chunk, read, false, Some("reno")).unwrap();
            assert_eq!(f.bytes, 1_000_003);
            let f = super::run_from(1_000_003, chunk, read, &[b'y'; 300_000]).unwrap();
            assert_eq!(f.bytes, 1_000_003);
            let f = super::run_as(1_000_003, chunk, read, true, Some("reno")).unwrap();
            assert_eq!(f.bytes, 1_000_003);
        }
    }
}
