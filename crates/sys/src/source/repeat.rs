//! A source sent again and again: a timed run's passes of the file, and the digest of a run
//! that stopped inside a block.

use std::hash::Hasher as _;

use anyhow::Result;
use twox_hash::XxHash3_64;

use super::{Blocks, Source};

impl Source {
    /// Where byte `at` of what this source hands out is in the file, and how many bytes from
    /// there are contiguous in the file and still to be handed out (a cycled source wraps at
    /// the file's end).
    pub fn file_span(&self, at: u64) -> (u64, u64) {
        file_span(self.cycle, self.file_len, self.offset, at, self.len - at)
    }

    /// Narrows a source just opened to the stripe `len` bytes long from `offset` (one stream
    /// of a `--parallel` session): it hands out, counts and checksums those bytes only.
    pub fn stripe(mut self, offset: u64, len: u64) -> Result<Source> {
        if let Some(start) = &mut self.cycle {
            // A stripe of the endless repetition: the same mapping, read from further on.
            anyhow::ensure!(
                len > 0 && offset.checked_add(len).is_some_and(|end| end <= self.len),
                "a stripe of {len} bytes from {offset} does not fit in a stream of {} bytes",
                self.len
            );
            *start = offset;
            self.len = len;
            return Ok(self);
        }
        anyhow::ensure!(
            len > 0
                && offset
                    .checked_add(len)
                    .is_some_and(|end| end <= self.file_len),
            "a stripe of {len} bytes from {offset} does not fit in '{}' ({} bytes)",
            self.path.display(),
            self.file_len
        );
        let (block_len, file) = match &self.blocks {
            Blocks::Mapped {
                block_len, file, ..
            } => (*block_len, file.clone()),
            Blocks::Read { buf, file } => (buf.len(), file.clone()),
            // A period held in memory is held whole: its stripe is read from further on.
            Blocks::Held { .. } => {
                self.offset = offset;
                self.len = len;
                return Ok(self);
            }
        };
        // A new mapping of the stripe (the old one, the whole file's, is dropped), or reads
        // from its start.
        self.blocks =
            super::map(&file, &self.path, offset, len, block_len).unwrap_or_else(|| Blocks::Read {
                buf: vec![0; block_len],
                file,
            });
        self.offset = offset;
        self.len = len;
        Ok(self)
    }

    /// Takes only the first `period` bytes (at least one) as what [`Source::cycled`] repeats:
    /// one buffer sent again and again (`--one-buffer`).
    pub fn within(mut self, period: u64) -> Source {
        self.file_len = self.file_len.min(period.max(1));
        self.len = self.len.min(self.file_len);
        self
    }

    /// The file again and again, `len` bytes in all: the generated stream of any length from
    /// one period of it in memory. Blocks end at the file's end, so each pass but the last ends
    /// with a chunk shorter than the others, as a timed run's passes do. The checksum runs over
    /// every byte handed out.
    pub fn cycled(mut self, len: u64) -> Source {
        self.cycle = Some(0);
        self.len = len;
        self
    }

    /// Makes the source repeatable, for a timed run: [`Source::rewind`] starts the file again
    /// (the checksum goes on over every pass), and [`Source::digest_sent`] gives the digest of
    /// a run that stopped inside a block. Costs a copy of the checksum's state per block.
    pub fn repeat(&mut self) {
        self.before_last.get_or_insert_with(XxHash3_64::new);
    }

    /// Starts the file again from its first byte, once every byte of it has been read (a timed
    /// run's next pass); the checksum goes on.
    pub fn rewind(&mut self) -> Result<()> {
        self.read = 0;
        self.last_len = 0;
        Ok(())
    }

    /// The xxh3-64 of every byte read before the last block and the first `sent` bytes of it:
    /// the digest of a run that stopped `sent` bytes into its last block ([`Source::repeat`]).
    pub fn digest_sent(&self, sent: usize) -> u64 {
        match &self.before_last {
            Some(before) if sent < self.last_len => {
                let mut h = before.clone();
                h.write(&self.last_block()[..sent]);
                h.finish()
            }
            _ => self.digest(),
        }
    }
}

/// [`Source::file_span`] from the source's parts (borrowed apart from its blocks).
pub(super) fn file_span(
    cycle: Option<u64>,
    file_len: u64,
    offset: u64,
    at: u64,
    left: u64,
) -> (u64, u64) {
    match cycle {
        Some(start) => {
            let pos = (start + at) % file_len;
            (pos, (file_len - pos).min(left))
        }
        None => (offset + at, left),
    }
}
