//! A reverse stream's checksum, made ahead of the socket a step at a time.
//!
//! A served file is read ahead in buffer-sized steps (the bytes `sendfile` sends never enter
//! the process); the generated text is hashed a [`TEXT_STEP`] ahead of the writes that send it,
//! so the kernel copies each write from the CPU's cache instead of from memory (issue 33:
//! hashing each 1 KiB write after it, the text cost the server about 0.1 s of CPU per GiB more
//! than one buffer sent again and again). Either way the digest of a stream that stopped
//! anywhere (a timed run's end, a stop, a short write) is that of exactly the bytes sent: a
//! mark at or before them keeps the checksum's state there, and the stop hashes the bytes from
//! it again.

use std::hash::Hasher as _;

use twox_hash::XxHash3_64;

/// How far ahead of its writes the generated text is hashed: small enough to stay in the CPU's
/// cache until the writes copy it, large enough that a step's bookkeeping is nothing.
pub(super) const TEXT_STEP: u64 = 128 << 10;

/// Hashes `n` bytes of the pass from `from` into the hasher, or says why it cannot.
pub(super) type HashRange<'a> = dyn FnMut(&mut XxHash3_64, u64, usize) -> Result<(), String> + 'a;

/// The checksum of a stream's passes, ahead of the bytes sent.
pub(super) struct Ahead {
    /// Every byte checksummed: the passes before, and this pass up to `ahead`.
    hasher: XxHash3_64,
    /// Where this pass's checksum has got to: at least as far as the bytes sent.
    ahead: u64,
    /// A place in the pass at or before the bytes sent, and the checksum's state there: the
    /// digest of a stream that stopped is that state and the bytes from it to the stop.
    mark: u64,
    marked: XxHash3_64,
    /// Where the latest step started, and the checksum's state there: the next mark, once the
    /// bytes sent reach it.
    read_from: u64,
    read_state: XxHash3_64,
}

impl Ahead {
    pub(super) fn new() -> Ahead {
        Ahead {
            hasher: XxHash3_64::new(),
            ahead: 0,
            mark: 0,
            marked: XxHash3_64::new(),
            read_from: 0,
            read_state: XxHash3_64::new(),
        }
    }

    /// Checksums the pass (`len` bytes) up to at least `to`, `step` bytes at a time (the last
    /// of a pass less); `at` bytes of the pass are sent.
    pub(super) fn cover(
        &mut self,
        at: u64,
        to: u64,
        len: u64,
        step: u64,
        hash: &mut HashRange<'_>,
    ) -> Result<(), String> {
        if self.ahead >= to {
            return Ok(());
        }
        // The mark moves as far as the bytes sent allow: to here if all that was hashed is
        // sent, else to the previous step's start if they have passed it. A short write leaves
        // hashed bytes unsent, and a stop may come before any more go.
        if self.ahead <= at {
            self.mark = self.ahead;
            self.marked.clone_from(&self.hasher);
        } else if self.read_from <= at && self.read_from > self.mark {
            self.mark = self.read_from;
            self.marked.clone_from(&self.read_state);
        }
        self.read_from = self.ahead;
        self.read_state.clone_from(&self.hasher);
        while self.ahead < to {
            let n = (len - self.ahead).min(step.max(1)) as usize;
            hash(&mut self.hasher, self.ahead, n)?;
            self.ahead += n as u64;
        }
        Ok(())
    }

    /// The next pass of a timed stream, once this one is all sent.
    pub(super) fn next_pass(&mut self) {
        self.ahead = 0;
        (self.mark, self.read_from) = (0, 0);
        self.marked.clone_from(&self.hasher);
        self.read_state.clone_from(&self.hasher);
    }

    /// The xxh3-64 of everything sent, the stream stopped `at` bytes into its pass: the bytes
    /// from the mark to the stop are hashed again, `step` at a time (within two steps when a
    /// step is at least a write).
    pub(super) fn digest_sent(
        &self,
        at: u64,
        step: u64,
        hash: &mut HashRange<'_>,
    ) -> Result<u64, String> {
        if at >= self.ahead {
            return Ok(self.hasher.finish());
        }
        debug_assert!(
            self.mark <= at,
            "the mark {} is past the stop {at}",
            self.mark
        );
        let mut h = self.marked.clone();
        let mut pos = self.mark;
        while pos < at {
            let n = (at - pos).min(step.max(1)) as usize;
            hash(&mut h, pos, n)?;
            pos += n as u64;
        }
        Ok(h.finish())
    }

    /// Where this pass's checksum has got to.
    #[cfg(test)]
    pub(super) fn ahead(&self) -> u64 {
        self.ahead
    }

    /// The mark: the bytes a stop there hashes again start here.
    #[cfg(test)]
    pub(super) fn mark(&self) -> u64 {
        self.mark
    }
}
