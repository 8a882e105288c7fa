//! The file a client sends: opened and checked up front, then handed out in large blocks.
//!
//! Blocks are a whole number of chunks of at least [`BLOCK_TARGET`] bytes, so every chunk written
//! to the socket is a slice of one block and the checksum runs over large blocks, never per
//! chunk. The file is never held whole in memory.
//!
//! The file is mapped read-only and blocks are slices of the mapping: the chunks go from the page
//! cache to the socket with one copy, the kernel's, where reading into a buffer first would add a
//! second (28% of the client's CPU at 10240-byte chunks, `perf record`). Each block is
//! checksummed just before it is written, so it is in cache for the socket copy. A file that
//! shrinks while mapped would raise SIGBUS; `guard` turns that into the same "shrank" error a
//! read would give, and a write that meets a vanished page fails with `EFAULT`, which the client
//! reports the same way ([`is_fault`]).
//!
//! Page faults on the mapping would cost the client ~15% of its CPU at 10240-byte chunks, so the
//! page table is filled ahead with `madvise(MADV_POPULATE_READ)` instead: the first
//! [`POPULATE_FIRST`] bytes when the file is opened, before any clock starts (like the buffer
//! iperf3 fills before its test), but only if they are already in the page cache (`mincore`), so
//! a file that must come from disk is read inside the measurement as before, not ahead of it;
//! then [`POPULATE_STEP`] bytes at a time, half a step ahead of the sender.
//!
//! Where mapping is not possible (a file system without mmap, every guard slot taken), blocks
//! are read into a buffer instead. An empty file is refused: there is nothing to measure.
//!
//! The generated stream's period, held in the process's own memory ([`Held`]), is handed out
//! the same way, in slices: a source of it has no file.
//!
//! For `sendfile`, which never copies the data into the process, [`Source::digest_in_background`]
//! checksums the file from the page cache on a thread of its own, off the socket path.

mod background;
mod guard;
mod held;
mod mapped;
mod repeat;

pub use background::{CHECKSUM_LEAD, Checksum};
pub use held::Held;

use mapped::{map, populate};
use repeat::file_span;

use std::fs::File;
use std::hash::Hasher as _;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use twox_hash::XxHash3_64;

use tsperf_proto::MAX_NAME;

/// The smallest block handed out at once. Small enough that a block, once checksummed, is still
/// in the CPU's L2 cache when its chunks are copied to the socket: 1 MiB blocks cost ~4 ms more
/// client CPU per 36 MiB at 10240-byte chunks on the 2-core test VM (`perf stat -e task-clock`,
/// median of 9, alternating; measured when blocks were read into a buffer).
pub const BLOCK_TARGET: usize = 128 << 10;

/// The mapped bytes whose page table is filled when the file is opened, if they are cached.
pub const POPULATE_FIRST: usize = 64 << 20;

/// The mapped bytes whose page table is filled at once during the transfer.
pub const POPULATE_STEP: usize = 4 << 20;

/// The largest block: `--chunk` × `--batch` must fit in it.
pub const MAX_BLOCK: usize = 256 << 20;

/// Takes `O_NONBLOCK` off a file opened with it (for a regular file it changes nothing, but the
/// descriptor is then what a plain open gives).
fn clear_nonblocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl(2) F_GETFL on a descriptor `file` keeps open; it touches no memory of ours.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: F_SETFL on the same descriptor, with flags it just gave.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How blocks are taken from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Slices of a read-only mapping (falls back to `Read` where mapping is not possible).
    Map,
    /// `read()` into a buffer of one block.
    Read,
}

/// Where blocks come from.
enum Blocks {
    Mapped {
        // Declared first so it is unmapped before the guard slot is given back.
        map: memmap2::Mmap,
        _guard: guard::Registration,
        block_len: usize,
        /// Bytes from the start whose page table has been filled.
        populated: usize,
        /// The file mapped, for `sendfile` and the background checksum.
        file: std::sync::Arc<File>,
    },
    /// Blocks read from the file into one buffer.
    Read {
        buf: Vec<u8>,
        /// Shared with the background checksum: reads take explicit offsets, never the
        /// file's position.
        file: std::sync::Arc<File>,
    },
    /// A period held in memory ([`Held`]): slices of it.
    Held {
        period: std::sync::Arc<Held>,
        block_len: usize,
    },
}

/// An open file, its announced length, and the running checksum of what was handed out.
pub struct Source {
    path: PathBuf,
    name: String,
    len: u64,
    read: u64,
    blocks: Blocks,
    hasher: XxHash3_64,
    /// The modification time when opened, to tell later whether the file changed meanwhile.
    modified: Option<std::time::SystemTime>,
    /// Time spent waiting for the file's bytes: off the CPU while filling the mapping's page
    /// table (a cold cache reads the disk there) or reading into the buffer.
    waited: std::time::Duration,
    /// The length of the block handed out last.
    last_len: usize,
    /// Where the bytes sent start in the file: 0, or a stripe's start ([`Source::stripe`]).
    offset: u64,
    /// The file's size when opened (a stripe's `len` is less).
    size: u64,
    /// What a cycled source repeats: the file's size, or less ([`Source::within`]).
    file_len: u64,
    /// With [`Source::repeat`]: the checksum as it was before the last block, so a run that
    /// stops inside a block can have the digest of exactly what it sent.
    before_last: Option<XxHash3_64>,
    /// A cycled source ([`Source::cycled`]): where its bytes start in the endless repetition of
    /// the file (a stripe's start; the file is never remapped).
    cycle: Option<u64>,
    /// Where the last block handed out starts in the mapping.
    last_at: usize,
    /// Blocks are hashed as they are handed out (not after [`Source::hash_elsewhere`]).
    hash_inline: bool,
}

impl Source {
    /// Opens `path` for sending in chunks of `chunk` bytes, at least `batch` chunks per block,
    /// mapped where possible. Refuses what cannot be sent whole: a missing or unreadable file, a
    /// directory or other non-regular file, or a name the protocol cannot carry.
    pub fn open(path: &Path, chunk: u32, batch: u32) -> Result<Source> {
        Source::open_with(path, chunk, batch, Access::Map)
    }

    /// [`Source::open`] with the access chosen.
    pub fn open_with(path: &Path, chunk: u32, batch: u32, access: Access) -> Result<Source> {
        use std::os::unix::fs::OpenOptionsExt;
        let shown = path.display();
        // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; what is not a
        // regular file is refused below, before anything reads from it.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .with_context(|| format!("cannot open file '{shown}'"))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat file '{shown}'"))?;
        if meta.is_dir() {
            bail!("'{shown}' is a directory: expected a regular file");
        }
        if !meta.is_file() {
            bail!("'{shown}' is not a regular file: expected a file of known length");
        }
        if meta.len() == 0 {
            bail!("'{shown}' is empty: there is nothing to measure (expected at least 1 byte)");
        }
        clear_nonblocking(&file).with_context(|| format!("cannot read file '{shown}'"))?;
        let name = basename(path)?;
        Source::from_file(file, path, name, chunk, batch, access)
    }

    /// A source of `file`, already open (a server's served file, opened from its directory's
    /// handle) and checked to be a regular file of at least one byte; `path` names it in
    /// errors, `name` is what is announced.
    pub fn from_file(
        file: File,
        path: &Path,
        name: String,
        chunk: u32,
        batch: u32,
        access: Access,
    ) -> Result<Source> {
        let file = std::sync::Arc::new(file);
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat file '{}'", path.display()))?;
        let block_len = block_len(chunk, batch)?;
        let blocks = match access {
            Access::Map => map(&file, path, 0, meta.len(), block_len),
            Access::Read => None,
        }
        .unwrap_or_else(|| Blocks::Read {
            buf: vec![0; block_len],
            file,
        });
        Ok(Source {
            path: path.to_owned(),
            name,
            len: meta.len(),
            read: 0,
            blocks,
            hasher: XxHash3_64::new(),
            modified: meta.modified().ok(),
            waited: std::time::Duration::ZERO,
            last_len: 0,
            offset: 0,
            size: meta.len(),
            file_len: meta.len(),
            before_last: None,
            cycle: None,
            last_at: 0,
            hash_inline: true,
        })
    }

    /// How blocks are taken: `Map` only if the file is mapped (or the bytes are held in
    /// memory).
    pub fn access(&self) -> Access {
        match self.blocks {
            Blocks::Mapped { .. } | Blocks::Held { .. } => Access::Map,
            Blocks::Read { .. } => Access::Read,
        }
    }

    /// The same source, announced as `name` instead of its basename (an in-memory file's).
    pub fn named(mut self, name: String) -> Source {
        self.name = name;
        self
    }

    /// The basename announced to the server.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The length announced to the server: the file's size when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// [`Source::next_block`] and [`Source::read_time`] after it, together (the block borrows
    /// the source).
    pub fn next_block_waited(&mut self) -> Result<(&[u8], std::time::Duration)> {
        self.next_block()?;
        let block = self.last_block();
        Ok((block, self.waited))
    }

    /// The block the last [`Source::next_block`] handed out.
    pub fn last_block(&self) -> &[u8] {
        let len = self.last_len;
        match &self.blocks {
            Blocks::Mapped { map, .. } => &map[self.last_at..self.last_at + len],
            Blocks::Read { buf, .. } => &buf[..len],
            Blocks::Held { period, .. } => &period.bytes()[self.last_at..self.last_at + len],
        }
    }

    /// The next block, checksummed; empty once the announced length has been read. A file that
    /// shrinks while it is read is an error: the announced length can no longer be sent.
    pub fn next_block(&mut self) -> Result<&[u8]> {
        let left = self.len - self.read;
        let mut last_at = 0;
        let block = match &mut self.blocks {
            Blocks::Mapped {
                map,
                block_len,
                populated,
                ..
            } => {
                let (at, run) = file_span(self.cycle, self.file_len, self.offset, self.read, left);
                // A mapping starts at the source's offset (a stripe's), unless it is cycled.
                let at = (at - self.offset) as usize;
                let end = at + run.min(*block_len as u64) as usize;
                if *populated < map.len() && end + POPULATE_STEP / 2 > *populated {
                    let t = crate::timing::OffCpu::start();
                    *populated = populate(map, *populated, POPULATE_STEP);
                    self.waited += t.stop();
                }
                last_at = at;
                &map[at..end]
            }
            Blocks::Held { period, block_len } => {
                // The whole period is held: `at` is where the bytes are in it.
                let (at, run) = file_span(self.cycle, self.file_len, self.offset, self.read, left);
                let at = at as usize;
                last_at = at;
                &period.bytes()[at..at + run.min(*block_len as u64) as usize]
            }
            Blocks::Read { buf, file } => {
                let (at, run) = file_span(self.cycle, self.file_len, self.offset, self.read, left);
                let want = run.min(buf.len() as u64) as usize;
                let t = crate::timing::OffCpu::start();
                let got = read_full(file, &mut buf[..want], at);
                self.waited += t.stop();
                match got {
                    Ok(n) if n == want => &buf[..want],
                    Ok(n) => return Err(shrank(&self.path, self.read + n as u64, self.len)),
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("cannot read file '{}'", self.path.display())
                        });
                    }
                }
            }
        };
        self.last_at = last_at;
        self.read += block.len() as u64;
        self.last_len = block.len();
        if self.hash_inline {
            if let Some(before) = &mut self.before_last {
                before.clone_from(&self.hasher);
            }
            self.hasher.write(block);
        }
        Ok(block)
    }

    /// Time spent so far waiting for the file's bytes: the wall time of the calls that fetch
    /// them less the CPU time they took (copying from a cached file is work, not waiting; a
    /// slow disk makes this large). Checksumming is not in it.
    pub fn read_time(&self) -> std::time::Duration {
        self.waited
    }

    /// The xxh3-64 of every byte read so far.
    pub fn digest(&self) -> u64 {
        self.hasher.finish()
    }

    /// Where the bytes this source hands out start in the file (a stripe's start), for
    /// `sendfile`.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The open file, for `sendfile`: none for a period held in memory ([`Source::held`]).
    pub fn file(&self) -> Option<&File> {
        self.shared_file().map(|f| &**f)
    }

    /// The open file, shared: none for a period held in memory.
    fn shared_file(&self) -> Option<&std::sync::Arc<File>> {
        match &self.blocks {
            Blocks::Mapped { file, .. } | Blocks::Read { file, .. } => Some(file),
            Blocks::Held { .. } => None,
        }
    }

    /// True if the open file's size or modification time is not what it was when opened:
    /// something wrote to it meanwhile, so what was read may be a mix of old and new bytes.
    /// Memory held by the process never changes.
    pub fn changed(&self) -> bool {
        match self.file().map(File::metadata) {
            Some(Ok(m)) => m.len() != self.size || m.modified().ok() != self.modified,
            _ => false,
        }
    }

    /// The error for a file that ended at `at` bytes, before its announced length.
    pub fn shrank(&self, at: u64) -> anyhow::Error {
        shrank(&self.path, at, self.len)
    }
}

/// The length of a block of whole `chunk`s, at least [`BLOCK_TARGET`] and a whole number of
/// batches of `batch` chunks, so every writev but the file's last takes `batch` chunks.
fn block_len(chunk: u32, batch: u32) -> Result<usize> {
    let chunk = chunk as usize;
    let chunks = BLOCK_TARGET
        .div_ceil(chunk)
        .next_multiple_of(batch.max(1) as usize);
    let block_len = chunk.saturating_mul(chunks);
    if block_len > MAX_BLOCK.max(chunk) {
        bail!(
            "{batch} chunks of {chunk} bytes per call need {block_len} bytes in memory at once: \
             expected at most {MAX_BLOCK} (lower --batch or --chunk)"
        );
    }
    Ok(block_len)
}

/// The error for a file at `path` that ended at `at` bytes, before its announced `len`.
fn shrank(path: &Path, at: u64, len: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "file '{}' shrank while it was read: {at} of {len} bytes",
        path.display()
    )
}

/// Reads from `at` until `buf` is full or the file ends (a call cut short by a signal is
/// made again); the count read.
pub fn read_full(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// True for the error a write returns when its buffer, a slice of the mapping, lost its pages
/// because the file shrank.
pub fn is_fault(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EFAULT)
}

/// The file's basename as the protocol carries it: UTF-8, at most 255 bytes, no control
/// characters.
fn basename(path: &Path) -> Result<String> {
    let shown = path.display();
    let os = path
        .file_name()
        .with_context(|| format!("'{shown}' has no file name"))?;
    let name = os
        .to_str()
        .with_context(|| format!("file name of '{shown}' is not valid UTF-8"))?;
    if name.len() > MAX_NAME || name.chars().any(char::is_control) {
        bail!(
            "file name of '{shown}' cannot be sent: expected at most {MAX_NAME} bytes without control characters"
        );
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests;
