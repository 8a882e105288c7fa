//! A source sent again and again: a timed run's passes of the file, and the digest of a run
//! that stopped inside a block.

use std::hash::Hasher as _;

use anyhow::{Context, Result};
use twox_hash::XxHash3_64;

use super::{Blocks, Source};

impl Source {
    /// Makes the source repeatable, for a timed run: [`Source::rewind`] starts the file again
    /// (the checksum goes on over every pass), and [`Source::digest_sent`] gives the digest of
    /// a run that stopped inside a block. Costs a copy of the checksum's state per block.
    pub fn repeat(&mut self) {
        self.before_last.get_or_insert_with(XxHash3_64::new);
    }

    /// Starts the file again from its first byte, once every byte of it has been read (a timed
    /// run's next pass); the checksum goes on.
    pub fn rewind(&mut self) -> Result<()> {
        use std::io::Seek;
        if let Blocks::Read(_) = self.blocks {
            self.file
                .rewind()
                .with_context(|| format!("cannot read file '{}' again", self.path.display()))?;
        }
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
