//! The generated stream's period held in the process's own memory, for the ways of sending
//! that copy from memory (`--io write`, `writev`): no file behind it.
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

use anyhow::{Context, Result};
use twox_hash::XxHash3_64;

use super::{Blocks, Source};

/// A period of the generated stream in memory, read-only once made; shared by every stream of
/// a process that sends it.
pub struct Held {
    map: memmap2::Mmap,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({} bytes)", self.map.len())
    }
}

impl Held {
    /// The first `len` bytes of the seed's text ([`crate::testdata::text`]), in memory.
    pub fn text(len: usize) -> Result<Arc<Held>> {
        anyhow::ensure!(
            len > 0,
            "a generated stream of 0 bytes: expected at least 1 (there is nothing to measure)"
        );
        let mut map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .with_context(|| {
                format!("cannot hold {len} bytes of the generated stream in memory")
            })?;
        // Advice only: a kernel without transparent huge pages gives small ones.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        crate::testdata::text_into(&mut map);
        let map = map
            .make_read_only()
            .context("cannot make the generated stream's memory read-only")?;
        Ok(Arc::new(Held { map }))
    }

    /// The period's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
}

impl Source {
    /// A source of `period`, announced as `name`, handed out in blocks of whole `chunk`s (at
    /// least `batch` per block); `path` names it in errors. It has no file: `sendfile` and the
    /// background checksum refuse it ([`Source::file`]).
    pub fn held(
        period: Arc<Held>,
        path: &Path,
        name: String,
        chunk: u32,
        batch: u32,
    ) -> Result<Source> {
        let len = period.bytes().len() as u64;
        let block_len = super::block_len(chunk, batch)?;
        Ok(Source {
            path: path.to_owned(),
            file: None,
            name,
            len,
            read: 0,
            blocks: Blocks::Held { period, block_len },
            hasher: XxHash3_64::new(),
            modified: None,
            waited: std::time::Duration::ZERO,
            last_len: 0,
            offset: 0,
            file_len: len,
            before_last: None,
            cycle: None,
            last_at: 0,
            hash_inline: true,
        })
    }
}
