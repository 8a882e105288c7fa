//! The generated stream's period held in the process's own memory, for the ways of sending
//! that copy from memory (`--io write`, `writev`; a server's generated reverse stream,
//! [`Held::seed`]): no file behind it.
//!
//! Made in an anonymous mapping asked for transparent huge pages: 36 MiB is 18 pages of 2 MiB
//! instead of 9,216 of 4 KiB. The in-memory file (`memfd`) the period was written into before
//! paid for every small page: allocating and charging it, filling a mapping's page table for
//! it, freeing it at exit (perf of a 36 MiB run: 25% of the client's samples writing the memfd,
//! 7% freeing it, 7% populating the mapping; making the text itself 28%). Issue 33, old and new
//! tsclient alternating, 15 runs each: a 36 MiB run's whole process 64.8 ms of CPU before,
//! 44.0 ms held (median; 2 of the 15 took 131-153 ms, huge pages the VM's host had taken back
//! and had to fault in again). Where the kernel gives no huge pages the mapping is of small
//! pages, about what the memfd cost. `sendfile` sends from a file, and keeps the memfd
//! ([`crate::testdata::stream_file_of`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use twox_hash::XxHash3_64;

use super::{Blocks, Source};

/// A period of the generated stream in memory, read-only once made; shared by every stream of
/// a process that sends it.
pub struct Held {
    bytes: Bytes,
}

/// Where a [`Held`] period's bytes are: an anonymous mapping, or where none could be made, the
/// heap.
enum Bytes {
    Mapped(memmap2::Mmap),
    Heap(Box<[u8]>),
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({} bytes)", self.bytes().len())
    }
}

impl std::ops::Deref for Held {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Held {
    /// The first `len` bytes of the seed's text ([`crate::testdata::text`]), in memory.
    pub fn text(len: usize) -> Result<Arc<Held>> {
        anyhow::ensure!(
            len > 0,
            "a generated stream of 0 bytes: expected at least 1 (there is nothing to measure)"
        );
        Ok(Arc::new(Held::made(len)))
    }

    /// The whole seed's text ([`crate::testdata::SEED_FILE_LEN`] bytes): a server's generated
    /// reverse stream.
    pub fn seed() -> Arc<Held> {
        Arc::new(Held::made(crate::testdata::SEED_FILE_LEN as usize))
    }

    /// A period of these bytes (a test's own text), on the heap.
    pub fn of(bytes: &[u8]) -> Arc<Held> {
        Arc::new(Held {
            bytes: Bytes::Heap(bytes.into()),
        })
    }

    /// The first `len` (> 0) bytes of the text in a mapping asked for huge pages, or on the
    /// heap where no mapping can be made.
    fn made(len: usize) -> Held {
        let mapped = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .ok()
            .and_then(|mut map| {
                // Advice only: a kernel without transparent huge pages gives small ones.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                crate::testdata::text_into(&mut map);
                map.make_read_only().ok()
            });
        let bytes = match mapped {
            Some(map) => Bytes::Mapped(map),
            None => Bytes::Heap(crate::testdata::text(len).into_boxed_slice()),
        };
        Held { bytes }
    }

    /// The period's bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(map) => map,
            Bytes::Heap(heap) => heap,
        }
    }
}

impl Source {
    /// A source of `period`, handed out in blocks of whole `chunk`s (at least `batch` per
    /// block); `path` names it in errors and its basename is announced, as a file's is
    /// ([`Source::named`] announces another). It has no file: `sendfile` and the background
    /// checksum refuse it ([`Source::file`]).
    pub fn held(period: Arc<Held>, path: &Path, chunk: u32, batch: u32) -> Result<Source> {
        let len = period.bytes().len() as u64;
        let block_len = super::block_len(chunk, batch)?;
        Ok(Source {
            path: path.to_owned(),
            name: super::basename(path)?,
            len,
            read: 0,
            blocks: Blocks::Held { period, block_len },
            hasher: XxHash3_64::new(),
            modified: None,
            waited: std::time::Duration::ZERO,
            last_len: 0,
            offset: 0,
            size: len,
            file_len: len,
            before_last: None,
            cycle: None,
            last_at: 0,
            hash_inline: true,
        })
    }
}
