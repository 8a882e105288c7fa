//! The file a client sends: opened and checked up front, then read in large blocks.
//!
//! Blocks are a whole number of chunks of at least [`BLOCK_TARGET`] bytes, so every chunk written
//! to the socket is a slice of one block and the checksum runs over large blocks, never per
//! chunk. The file is never held whole in memory.
//!
//! For `sendfile`, which never copies the data into the process, [`Source::digest_in_background`]
//! checksums the file from the page cache on a thread of its own, off the socket path.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xxhash_rust::xxh3::Xxh3;

use crate::protocol::MAX_NAME;

/// The smallest block read from the file at once. Small enough that a block read, checksummed
/// and then written to the socket is still in the CPU's L2 cache for the second and third pass:
/// 1 MiB blocks cost ~4 ms more client CPU per 36 MiB at 10240-byte chunks on the 2-core test VM
/// (`perf stat -e task-clock`, median of 9, alternating).
pub const BLOCK_TARGET: usize = 128 << 10;

/// The largest block: `--chunk` × `--batch` must fit in it.
pub const MAX_BLOCK: usize = 256 << 20;

/// An open file, its announced length, and the running checksum of what was read.
pub struct Source {
    path: PathBuf,
    file: File,
    name: String,
    len: u64,
    read: u64,
    block: Vec<u8>,
    hasher: Xxh3,
}

impl Source {
    /// Opens `path` for sending in chunks of `chunk` bytes, at least `batch` chunks per block.
    /// Refuses what cannot be sent whole: a missing or unreadable file, a directory or other
    /// non-regular file, or a name the protocol cannot carry.
    pub fn open(path: &Path, chunk: u32, batch: u32) -> Result<Source> {
        let shown = path.display();
        let file = File::open(path).with_context(|| format!("cannot open file '{shown}'"))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat file '{shown}'"))?;
        if meta.is_dir() {
            bail!("'{shown}' is a directory: expected a regular file");
        }
        if !meta.is_file() {
            bail!("'{shown}' is not a regular file: expected a file of known length");
        }
        let name = basename(path)?;
        let chunk = chunk as usize;
        // A whole number of batches, so every writev but the file's last takes `batch` chunks.
        let chunks = BLOCK_TARGET
            .div_ceil(chunk)
            .next_multiple_of(batch.max(1) as usize);
        let block_len = chunk.saturating_mul(chunks);
        if block_len > MAX_BLOCK.max(chunk) {
            bail!(
                "{batch} chunks of {chunk} bytes per call need {block_len} bytes in memory at \
                 once: expected at most {MAX_BLOCK} (lower --batch or --chunk)"
            );
        }
        Ok(Source {
            path: path.to_owned(),
            file,
            name,
            len: meta.len(),
            read: 0,
            block: vec![0; block_len],
            hasher: Xxh3::new(),
        })
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

    /// The next block, checksummed; empty once the announced length has been read. A file that
    /// shrinks while it is read is an error: the announced length can no longer be sent.
    pub fn next_block(&mut self) -> Result<&[u8]> {
        let want = (self.len - self.read).min(self.block.len() as u64) as usize;
        let mut got = 0;
        while got < want {
            match self.file.read(&mut self.block[got..want]) {
                Ok(0) => return Err(self.shrank(self.read + got as u64)),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot read file '{}'", self.path.display()));
                }
            }
        }
        self.read += got as u64;
        self.hasher.update(&self.block[..got]);
        Ok(&self.block[..got])
    }

    /// The xxh3-64 of every byte read so far.
    pub fn digest(&self) -> u64 {
        self.hasher.digest()
    }

    /// The open file, for `sendfile`.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The error for a file that ended at `at` bytes, before its announced length.
    pub fn shrank(&self, at: u64) -> anyhow::Error {
        anyhow::anyhow!(
            "file '{}' shrank while it was read: {at} of {} bytes",
            self.path.display(),
            self.len
        )
    }

    /// Checksums the announced length of the file on a thread of its own, reading it in
    /// [`BLOCK_TARGET`] pieces at explicit offsets (the file's position is left alone). The
    /// thread's answer is the xxh3-64, or the reason it could not read the whole length.
    pub fn digest_in_background(&self) -> Result<std::thread::JoinHandle<Result<u64>>> {
        use std::os::unix::fs::FileExt;
        let file = self
            .file
            .try_clone()
            .context("cannot reopen the file to checksum it")?;
        let (path, len) = (self.path.clone(), self.len);
        let work = move || -> Result<u64> {
            let mut buf = vec![0u8; BLOCK_TARGET];
            let mut hasher = Xxh3::new();
            let mut at = 0u64;
            while at < len {
                let want = (len - at).min(buf.len() as u64) as usize;
                match file.read_at(&mut buf[..want], at) {
                    Ok(0) => bail!(
                        "file '{}' shrank while it was read: {at} of {len} bytes",
                        path.display()
                    ),
                    Ok(n) => {
                        hasher.update(&buf[..n]);
                        at += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("cannot read file '{}'", path.display()));
                    }
                }
            }
            Ok(hasher.digest())
        };
        std::thread::Builder::new()
            .name("checksum".into())
            .spawn(work)
            .context("cannot start the checksum thread")
    }
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
mod tests {
    use super::*;
    use std::io::Write;

    /// Blocks are whole chunks, cover the file exactly, and the digest matches a one-shot hash.
    #[test]
    fn blocks_cover_file_in_whole_chunks() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..3_000_001u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let mut s = Source::open(f.path(), 102, 1).unwrap();
        assert_eq!(s.len(), data.len() as u64);
        let mut seen = Vec::new();
        loop {
            let b = s.next_block().unwrap();
            if b.is_empty() {
                break;
            }
            seen.push(b.len());
        }
        assert_eq!(seen.iter().sum::<usize>(), data.len());
        assert!(
            seen[..seen.len() - 1]
                .iter()
                .all(|n| n % 102 == 0 && *n >= BLOCK_TARGET)
        );
        assert_eq!(s.digest(), xxhash_rust::xxh3::xxh3_64(&data));
    }

    /// The background checksum equals the one-shot hash; a batch widens the block to hold it.
    #[test]
    fn background_digest_and_batch_blocks() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 253) as u8).collect();
        f.write_all(&data).unwrap();
        let mut s = Source::open(f.path(), 10240, 64).unwrap();
        let bg = s.digest_in_background().unwrap().join().unwrap().unwrap();
        assert_eq!(bg, xxhash_rust::xxh3::xxh3_64(&data));
        assert_eq!(s.next_block().unwrap().len(), 64 * 10240);
        let e = Source::open(f.path(), 16 << 20, 1024)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("lower --batch or --chunk"), "{e}");
    }

    /// A directory is refused by name.
    #[test]
    fn directory_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = Source::open(d.path(), 1024, 1).err().unwrap().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }
}
