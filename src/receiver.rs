//! The server's side of one stream transfer: counting, checksumming and timing what arrives.
//!
//! Both server I/O models drive a [`Receiver`] the same way: read into [`Receiver::buf`], then
//! [`Receiver::commit`] the bytes the read returned. Reads land one after another in a large
//! block that is checksummed when it fills, so the checksum costs nothing per read. The receiver
//! never asks for more bytes than the client announced, so a read never swallows what follows.

use std::time::Instant;

use xxhash_rust::xxh3::Xxh3;

use crate::protocol::{Hello, LogMode, Report, ServerIo};
use crate::timing::{CpuTime, unix_us_now};

/// Bytes gathered before they are checksummed (rounded up to a whole number of reads).
const HASH_BLOCK: usize = 256 * 1024;

/// The accounting of one transfer in progress.
pub struct Receiver {
    expected: u64,
    read_size: usize,
    buf: Vec<u8>,
    pos: usize,
    hasher: Xxh3,
    bytes: u64,
    reads: u64,
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
    cpu_start: CpuTime,
    /// Event-loop wake-ups for this connection, counted by the event loop.
    pub wakeups: u64,
}

impl Receiver {
    /// Starts a transfer of `hello.length` bytes, read `read_size` bytes at a time.
    pub fn new(hello: &Hello, read_size: u32) -> Receiver {
        let read_size = read_size.max(1) as usize;
        let cap = read_size * HASH_BLOCK.div_ceil(read_size);
        // Never allocate more than the transfer needs: a tiny file gets a tiny buffer.
        let cap = cap.min(usize::try_from(hello.length.max(1)).unwrap_or(usize::MAX));
        Receiver {
            expected: hello.length,
            read_size,
            buf: vec![0; cap],
            pos: 0,
            hasher: Xxh3::new(),
            bytes: 0,
            reads: 0,
            first: None,
            last: None,
            cpu_start: CpuTime::thread(),
            wakeups: 0,
        }
    }

    /// Where the next read goes: at most `read_size` bytes, and never past the announced end.
    pub fn buf(&mut self) -> &mut [u8] {
        let remaining = self.expected - self.bytes;
        let n = (self.read_size as u64)
            .min(remaining)
            .min((self.buf.len() - self.pos) as u64) as usize;
        &mut self.buf[self.pos..self.pos + n]
    }

    /// Accounts for a read that put `n` (> 0) bytes into [`Receiver::buf`].
    #[inline]
    pub fn commit(&mut self, n: usize) {
        if self.first.is_none() {
            self.first = Some((Instant::now(), unix_us_now()));
        }
        self.pos += n;
        self.bytes += n as u64;
        self.reads += 1;
        let done = self.bytes == self.expected;
        if self.pos == self.buf.len() || done {
            self.hasher.update(&self.buf[..self.pos]);
            self.pos = 0;
        }
        if done {
            self.last = Some((Instant::now(), unix_us_now()));
        }
    }

    /// True once every announced byte has arrived.
    pub fn is_complete(&self) -> bool {
        self.bytes == self.expected
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes announced in the hello.
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// The report as it stands: complete or not, everything measured so far.
    pub fn report(&self, server_io: ServerIo, log: LogMode, log_lines: u32, rcvbuf: u32) -> Report {
        let mut hasher = self.hasher.clone();
        hasher.update(&self.buf[..self.pos]);
        let cpu = CpuTime::thread().since(self.cpu_start);
        let (first_i, first_us) = self.first.unwrap_or((Instant::now(), 0));
        let (last_i, last_us) = self.last.unwrap_or((first_i, first_us));
        Report {
            bytes: self.bytes,
            digest: hasher.digest(),
            first_byte_unix_us: first_us,
            last_byte_unix_us: last_us,
            elapsed_ns: last_i.duration_since(first_i).as_nanos() as u64,
            reads: self.reads,
            wakeups: self.wakeups,
            cpu_user_us: cpu.user.as_micros() as u64,
            cpu_sys_us: cpu.sys.as_micros() as u64,
            log_lines,
            rcvbuf,
            server_io: Some(server_io),
            log: Some(log),
            saved_to: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Mode;

    fn hello(length: u64) -> Hello {
        Hello {
            mode: Mode::Stream,
            nodelay: false,
            codec: 0,
            framing: 0,
            length,
            chunk: 102,
            name: "x".into(),
        }
    }

    fn feed(r: &mut Receiver, data: &[u8]) {
        let mut off = 0;
        while !r.is_complete() {
            let b = r.buf();
            let n = b.len().min(data.len() - off);
            assert!(n > 0, "receiver asked for nothing before completion");
            b[..n].copy_from_slice(&data[off..off + n]);
            off += n;
            r.commit(n);
        }
        assert_eq!(off, data.len());
    }

    /// The digest over many read-sized pieces equals a one-shot hash, whatever the read size.
    #[test]
    fn digest_matches_one_shot() {
        let data: Vec<u8> = (0..700_001u32).map(|i| (i * 7 % 256) as u8).collect();
        for rs in [1u32, 102, 1024, 10240, 300_000] {
            let mut r = Receiver::new(&hello(data.len() as u64), rs);
            feed(&mut r, &data);
            let rep = r.report(ServerIo::Blocking, LogMode::None, 0, 0);
            assert_eq!(rep.bytes, data.len() as u64);
            assert_eq!(
                rep.digest,
                xxhash_rust::xxh3::xxh3_64(&data),
                "read size {rs}"
            );
            assert!(rep.first_byte_unix_us > 0 && rep.last_byte_unix_us >= rep.first_byte_unix_us);
        }
    }

    /// The receiver never offers more room than the bytes still announced.
    #[test]
    fn never_reads_past_announced_length() {
        let mut r = Receiver::new(&hello(150), 102);
        assert_eq!(r.buf().len(), 102);
        r.commit(100);
        assert_eq!(r.buf().len(), 50);
        r.commit(50);
        assert!(r.is_complete());
        assert_eq!(r.buf().len(), 0);
    }

    /// An empty transfer is complete at once and reports zero bytes and no timestamps.
    #[test]
    fn empty_transfer() {
        let r = Receiver::new(&hello(0), 1024);
        assert!(r.is_complete());
        let rep = r.report(ServerIo::Blocking, LogMode::None, 0, 0);
        assert_eq!((rep.bytes, rep.reads, rep.first_byte_unix_us), (0, 0, 0));
        assert_eq!(rep.digest, xxhash_rust::xxh3::xxh3_64(&[]));
    }

    /// A partial transfer reports what arrived, with the digest of exactly those bytes.
    #[test]
    fn partial_report() {
        let mut r = Receiver::new(&hello(1000), 64);
        r.buf()[..10].copy_from_slice(b"0123456789");
        r.commit(10);
        let rep = r.report(ServerIo::Blocking, LogMode::None, 0, 0);
        assert_eq!(rep.bytes, 10);
        assert_eq!(rep.digest, xxhash_rust::xxh3::xxh3_64(b"0123456789"));
        assert_eq!(rep.last_byte_unix_us, rep.first_byte_unix_us);
    }
}
