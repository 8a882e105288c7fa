//! The floor: a bare `write()`/`read()` loop over loopback, the reference tsperf is held to.
//!
//! Nothing from the rest of tsperf is on its path: std sockets only, a writer thread that
//! `write()`s exactly `chunk` bytes from memory each call (Nagle on, as tsclient), and a reader
//! thread that `read()`s into a buffer of `read_size` bytes until EOF and neither checks nor
//! checksums anything. It is what one write per chunk costs in the kernel and nothing else.
//! The reader is woken as tsserver's is: on a path of large segments (loopback), once its
//! receive buffer has room, only when a quarter of its read (64 to 256 KiB,
//! `tsperf_sys::mark::bulk_mark`) is waiting, not on every segment.
//! Its checksummed variants ([`run_hashed`], [`run_as`], [`run_from`], [`run_generated`],
//! [`run_from_file`], [`run_sendfile`]) add xxh3 on both ends and write from one block, a
//! buffer cycled (the generated stream's period, made as tsclient makes it), or a file read
//! block by block (or sent with `sendfile` and read to be hashed): the limit of a stream that
//! verifies its bytes, for each of steady.md's cells.

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
    /// The reader's receive low-water mark at EOF, bytes (1: the kernel's default).
    pub wake_mark: u32,
    /// The writer thread's CPU time making its source before the loop ([`run_generated`]'s
    /// period; zero for the others), not in `writer_cpu`.
    pub making: Duration,
}

/// Moves `total` bytes in `chunk`-byte writes, read `read_size` bytes at a time.
pub fn run(total: u64, chunk: usize, read_size: usize) -> io::Result<Floor> {
    run_with(total, chunk, read_size, Feed::Bare, None)
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
    let feed = if hashed { Feed::Block } else { Feed::Bare };
    run_with(total, chunk, read_size, feed, congestion)
}

/// [`run_hashed`] writing from `source` in turn, cycled, instead of one cache-resident block:
/// with tsperf's generated stream (36 MiB of text) as the source, the limit of a verified
/// stream whose bytes do not repeat within the caches, as tsperf's do not.
pub fn run_from(total: u64, chunk: usize, read_size: usize, source: &[u8]) -> io::Result<Floor> {
    run_with(total, chunk, read_size, Feed::Memory(source), None)
}

/// [`run_from`] from tsperf's generated stream made as tsclient makes it, by the writer
/// before its loop: the first `total` bytes of the seed's text (at most its 36 MiB, at least a
/// block), held in memory (`Held::text`: huge pages, the text written in place). What the
/// making cost the writer's thread is [`Floor::making`]: a client pays it once a run, a server
/// once for all its runs.
pub fn run_generated(total: u64, chunk: usize, read_size: usize) -> io::Result<Floor> {
    let cpu = tsperf_sys::timing::thread_cpu_clock();
    let len = total
        .max(block(chunk) as u64)
        .min(tsperf_sys::testdata::SEED_FILE_LEN);
    let held = tsperf_sys::source::Held::text(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(io::Error::other)?;
    let making = tsperf_sys::timing::thread_cpu_clock() - cpu;
    let mut f = run_from(total, chunk, read_size, &held)?;
    f.making = making;
    Ok(f)
}

/// [`run_hashed`] writing the file at `path` (from its start again at its end): each block is
/// `read()` into one buffer, as iperf3 -F reads its file, hashed and written. The limit of a
/// verified stream of a file, the page cache's copy included.
pub fn run_from_file(
    total: u64,
    chunk: usize,
    read_size: usize,
    path: &std::path::Path,
) -> io::Result<Floor> {
    let (file, _) = open_file(path)?;
    run_with(total, chunk, read_size, Feed::File(file), None)
}

/// The file at `path` opened for a loop, and its length; an error naming it if it cannot be
/// opened or is empty.
fn open_file(path: &std::path::Path) -> io::Result<(std::fs::File, u64)> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("'{}': {e}", path.display()));
    let file = std::fs::File::open(path).map_err(named)?;
    let len = file.metadata().map_err(named)?.len();
    if len == 0 {
        return Err(named(io::Error::other("the floor's file is empty")));
    }
    Ok((file, len))
}

/// [`run_from_file`] sending the file with `sendfile(2)`, `chunk` bytes a call (each stopping
/// at the file's end, the next starting it again), as `tsclient --io sendfile` sends, and
/// hashing it as tsclient does, on a thread of its own that reads it block by block into one
/// buffer; the writer's CPU is both threads'. The limit of a verified stream sent from the
/// page cache.
pub fn run_sendfile(
    total: u64,
    chunk: usize,
    read_size: usize,
    path: &std::path::Path,
) -> io::Result<Floor> {
    let (file, len) = open_file(path)?;
    let (sender, _) = open_file(path)?;
    let block = block(chunk.max(1));
    let hashing = std::thread::spawn(move || hash_file(file, total, block));
    run_with(
        total,
        chunk,
        read_size,
        Feed::Sendfile(sender, len, hashing),
        None,
    )
}

/// The xxh3 of `total` bytes of `file` (from its start again at its end), read `block` bytes
/// at a time into one buffer, and this thread's CPU time.
fn hash_file(mut file: std::fs::File, total: u64, block: usize) -> io::Result<(u64, Duration)> {
    let cpu = tsperf_sys::timing::thread_cpu_clock();
    let (mut buf, mut done) = (vec![0u8; block], 0u64);
    let mut hasher = twox_hash::XxHash3_64::new();
    while done < total {
        let n = (block as u64).min(total - done) as usize;
        fill(&mut file, &mut buf[..n])?;
        hasher.write(&buf[..n]);
        done += n as u64;
    }
    Ok((
        hasher.finish(),
        tsperf_sys::timing::thread_cpu_clock() - cpu,
    ))
}

/// The block the checksummed loops hash and write at a time for `chunk`-byte writes: whole
/// chunks, at least 128 KiB. [`run_from`]'s source must hold one.
pub fn block(chunk: usize) -> usize {
    let chunk = chunk.max(1);
    (128usize << 10).div_ceil(chunk) * chunk
}

/// Where the loop's writer takes its bytes from.
enum Feed<'a> {
    /// One chunk of `x`, written again and again, not hashed.
    Bare,
    /// One block, written again and again, hashed.
    Block,
    /// This, cycled, hashed.
    Memory(&'a [u8]),
    /// This file, read block by block into one buffer, from its start again at its end,
    /// hashed.
    File(std::fs::File),
    /// This file of this length sent with `sendfile`, from its start again at its end, hashed
    /// by this thread ([`hash_file`]).
    Sendfile(
        std::fs::File,
        u64,
        std::thread::JoinHandle<io::Result<(u64, Duration)>>,
    ),
}

/// Sends `n` bytes of `file` (`len` bytes long) from `*pos`, from its start again at its end, in
/// `sendfile` calls of at most `chunk` bytes, each stopping at the file's end.
fn send_file(
    s: &TcpStream,
    file: &std::fs::File,
    len: u64,
    pos: &mut u64,
    mut n: usize,
    chunk: usize,
) -> io::Result<()> {
    while n > 0 {
        if *pos >= len {
            *pos = 0;
        }
        let want = chunk.min(n).min((len - *pos) as usize);
        match tsperf_sys::net::sendfile(s, file, *pos, want) {
            Ok(0) => return Err(io::Error::other("the floor's file shrank")),
            Ok(k) => (*pos, n) = (*pos + k as u64, n - k),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills `buf` from `file`, from its start again at its end.
fn fill(file: &mut std::fs::File, buf: &mut [u8]) -> io::Result<()> {
    use std::io::Seek as _;
    let (mut got, mut rewound) = (0, false);
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) if rewound => return Err(io::Error::other("the floor's file is empty")),
            Ok(0) => {
                file.rewind()?;
                rewound = true;
            }
            Ok(n) => (got, rewound) = (got + n, false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The loop: but for [`Feed::Bare`], the writer hashes each whole-chunk block of at least
/// 128 KiB in turn before writing its chunks, and the reader hashes every read.
fn run_with(
    total: u64,
    chunk: usize,
    read_size: usize,
    mut feed: Feed,
    congestion: Option<&str>,
) -> io::Result<Floor> {
    let hash = !matches!(feed, Feed::Bare);
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || read_all(&listener, read_size, hash));
    let chunk = chunk.max(1);
    let block = if hash { block(chunk) } else { chunk };
    let mut buf = vec![b'x'; block];
    if let Feed::Memory(data) = feed
        && data.len() < block
    {
        return Err(io::Error::other(
            "the floor's source is shorter than a block",
        ));
    }
    let mut s = TcpStream::connect(addr)?;
    if let Some(name) = congestion {
        tsperf_sys::congestion::set(&s, name).map_err(io::Error::other)?;
    }
    let (start, cpu) = (Instant::now(), tsperf_sys::timing::thread_cpu_clock());
    let (mut sent, mut at, mut pos) = (0u64, 0usize, 0u64);
    let mut hasher = twox_hash::XxHash3_64::new();
    while sent < total {
        let n = (block as u64).min(total - sent) as usize;
        let piece: &[u8] = match &mut feed {
            Feed::Sendfile(file, len, _) => {
                send_file(&s, file, *len, &mut pos, n, chunk)?;
                sent += n as u64;
                continue;
            }
            Feed::Bare | Feed::Block => &buf[..n],
            Feed::Memory(data) => {
                let data: &[u8] = data;
                if at + block > data.len() {
                    at = 0;
                }
                at += n;
                &data[at - n..at]
            }
            Feed::File(file) => {
                fill(file, &mut buf[..n])?;
                &buf[..n]
            }
        };
        if hash {
            hasher.write(piece);
        }
        for c in piece.chunks(chunk) {
            s.write_all(c)?;
        }
        sent += n as u64;
    }
    let mut written = hash.then(|| hasher.finish());
    s.shutdown(Shutdown::Write)?;
    let mut writer_cpu = tsperf_sys::timing::thread_cpu_clock() - cpu;
    if let Feed::Sendfile(.., hashing) = feed {
        let (digest, hash_cpu) = hashing
            .join()
            .map_err(|_| io::Error::other("the floor's hashing thread panicked"))??;
        (written, writer_cpu) = (Some(digest), writer_cpu + hash_cpu);
    }
    let got = reader
        .join()
        .map_err(|_| io::Error::other("the floor's reader panicked"))??;
    checked(got, total, written, start, writer_cpu)
}

/// The run from what the reader got (`read_all`'s answer), checked against what the writer
/// sent: `total` bytes and, if hashed, the xxh3 `written`; the writer started at `start` and
/// spent `writer_cpu`.
fn checked(
    (got, digest, first, last, reader_cpu, wake_mark): (u64, u64, Instant, Instant, Duration, u32),
    total: u64,
    written: Option<u64>,
    start: Instant,
    writer_cpu: Duration,
) -> io::Result<Floor> {
    if got != total {
        return Err(io::Error::other(format!(
            "the floor's reader got {got} of {total} bytes"
        )));
    }
    // A checksummed loop moves the bytes its writer hashed, or it measured something else.
    if let Some(written) = written.filter(|&w| w != digest) {
        return Err(io::Error::other(format!(
            "the floor's reader hashed {digest:016x}, its writer {written:016x}"
        )));
    }
    Ok(Floor {
        bytes: got,
        receiver: last.duration_since(first),
        wall: last.duration_since(start),
        writer_cpu,
        reader_cpu,
        wake_mark,
        making: Duration::ZERO,
    })
}

/// The reader's side of the loop: accepts one connection and reads it to EOF into a buffer
/// of `read_size` bytes, hashing each read if `hash`, with the server's wake mark for that
/// read ([`tsperf_sys::mark::bulk_mark`]) once the socket can take it. Returns the bytes, their
/// xxh3 (if hashed), the first and last byte's times, the thread's CPU from the accept on and
/// the mark at EOF. The
/// writer ends with a shutdown, which wakes the reader whatever the mark.
fn read_all(
    listener: &TcpListener,
    read_size: usize,
    hash: bool,
) -> io::Result<(u64, u64, Instant, Instant, Duration, u32)> {
    let (mut s, _) = listener.accept()?;
    let want = tsperf_sys::mark::bulk_mark(read_size);
    let mut mark = tsperf_sys::mark::WakeMark::new(&s);
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
                if let Some(want) = want.filter(|_| mark.usable() && !mark.raised()) {
                    mark.follow(&s, want);
                }
                if hash {
                    hasher.write(&buf[..n]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let last = Instant::now();
    let digest = hasher.finish();
    let cpu = tsperf_sys::timing::thread_cpu_clock() - cpu;
    Ok((got, digest, first.unwrap_or(last), last, cpu, mark.get()))
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

    /// The generated loop makes its period on the writer's thread and counts it apart from the
    /// loop; a run shorter than a block still has a block of text to send.
    #[test]
    fn the_generated_loop_makes_its_period_and_counts_the_making() {
        for (total, chunk) in [(3 << 20, 10240), (1000, 102)] {
            let f = super::run_generated(total, chunk, 1 << 20).unwrap();
            assert_eq!(f.bytes, total);
            assert!(f.making > std::time::Duration::ZERO, "{f:?}");
        }
        // The loops that are given their source make nothing.
        let f = super::run_from(1 << 20, 10240, 1 << 20, &[b'y'; 300_000]).unwrap();
        assert_eq!(f.making, std::time::Duration::ZERO);
    }

    /// The reader is woken as tsserver's event loop is: on loopback, once its receive buffer
    /// has room, only when a quarter of its read (64 KiB to 256 KiB) is waiting; every loop.
    #[test]
    fn the_reader_raises_its_wake_mark_as_the_server_does() {
        let len = 64 << 20;
        for (read, mark) in [(1 << 20, 256 << 10), (256 << 10, 64 << 10)] {
            let f = super::run(len, 131072, read).unwrap();
            assert_eq!((f.bytes, f.wake_mark), (len, mark), "{f:?}");
            let f = super::run_hashed(len, 10240, read).unwrap();
            assert_eq!((f.bytes, f.wake_mark), (len, mark), "{f:?}");
        }
        // A read too small for a mark keeps the kernel's 1.
        let f = super::run(len, 10240, 65536).unwrap();
        assert_eq!((f.bytes, f.wake_mark), (len, 1), "{f:?}");
    }

    /// The file loop reads its file from the start again at its end, and refuses an empty
    /// file or one that is not there, naming it.
    #[test]
    fn the_file_loop_moves_every_byte_and_names_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'z'; 300_007]).unwrap();
        for (chunk, read) in [(102, 262144), (1000, 7), (131072, 262144)] {
            let f = super::run_from_file(1_000_003, chunk, read, &path).unwrap();
            assert_eq!(f.bytes, 1_000_003);
        }
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        for bad in [empty, dir.path().join("absent")] {
            let e = super::run_from_file(1000, 100, 100, &bad).unwrap_err();
            assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        }
    }

    /// The sendfile loop sends its file from the start again at its end, at chunks that do and
    /// do not divide it, and refuses an empty file or one that is not there, naming it.
    #[test]
    fn the_sendfile_loop_moves_every_byte_and_names_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Bytes that differ with their place: a byte sent from the wrong offset is caught by
        // the loop's own comparison of the two ends' digests.
        let data: Vec<u8> = (0..300_007u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, data).unwrap();
        for (chunk, read) in [(102, 262144), (1000, 7), (131072, 262144)] {
            let f = super::run_sendfile(1_000_003, chunk, read, &path).unwrap();
            assert_eq!(f.bytes, 1_000_003);
            assert!(f.writer_cpu > std::time::Duration::ZERO, "{f:?}");
        }
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        for bad in [empty, dir.path().join("absent")] {
            let e = super::run_sendfile(1000, 100, 100, &bad).unwrap_err();
            assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        }
    }
}
