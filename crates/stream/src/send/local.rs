//! A stream of a [`Source`] the sending end holds: the client's FILE, its stripe of one, or its
//! generated text, handed to the socket the way its [`Call`] says. The strategy is chosen here,
//! once per write: one `write` a chunk, one `writev` of `batch` chunks (each its own iovec), or
//! one `sendfile` a chunk straight from the page cache.
//!
//! write and writev checksum each block of the source as it is fetched, just before its chunks
//! go, while it is in the CPU's cache. Hashing on a thread of its own instead (as sendfile does)
//! was measured (1 GiB at 128 KiB, 7 alternating pairs): no faster (1832 against 1820 MiB/s) and
//! 0.07 s more CPU per GiB (the second mapping's page tables). sendfile never copies the bytes
//! into the process, so its checksum is made on a thread of its own from the page cache (a
//! server's kept within [`tsperf_sys::source::CHECKSUM_LEAD`] of the bytes its client took).
//!
//! Chunks are cut from the start of each block (a cycled source's blocks end at the file's end,
//! so a pass ends with a shorter chunk), and a short call is continued from where it stopped.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::time::Duration;

use std::path::Path;

use anyhow::{Result, anyhow};
use tsperf_sys::source::{Access, Checksum, Source};

use super::{Failure, Generated, Sink};
use tsperf_proto::{Call, MAX_BATCH};

/// A server's generated stream sent by the `call` its hello asked for: the text it was handed
/// ([`pattern`](super::pattern): held in memory, or its in-memory file for sendfile) cycled
/// to `length` bytes a pass of `chunk`-byte writes, its period the first `chunk` bytes with
/// one buffer.
pub(super) fn of_text(
    made: Generated,
    call: Call,
    one_buffer: bool,
    (chunk, length): (u64, u64),
    repeats: bool,
) -> Result<Local> {
    let name = Path::new("generated");
    let (chunk32, batch) = (
        u32::try_from(chunk).unwrap_or(u32::MAX),
        match call {
            Call::Writev(batch) => batch,
            _ => 1,
        },
    );
    let source = match made {
        Generated::Text(text) => Source::held(text, name, chunk32, batch)?,
        Generated::File(file) => {
            let file = file.map_err(anyhow::Error::msg)?.try_clone()?;
            Source::from_file(file, name, String::new(), chunk32, batch, Access::Map)?
        }
    };
    let period = if one_buffer { chunk } else { u64::MAX };
    let mut local = Local::new(source.within(period).cycled(length), call, chunk32, repeats)?;
    // A server's sendfile checksum keeps within its lead of what its client took.
    local.lead = tsperf_sys::source::CHECKSUM_LEAD;
    Ok(local)
}

/// A held source being sent.
pub(super) struct Local {
    source: Source,
    call: Call,
    /// Bytes a chunk.
    chunk: u64,
    /// Bytes one call is given: a chunk, or writev's batch of them.
    unit: u64,
    /// Where the block the source handed out last starts in the pass, and where it ends.
    block: (u64, u64),
    /// Where the current call's chunk (or batch) ends in the pass.
    cut: u64,
    /// sendfile's checksum, made on a thread of its own.
    checksum: Option<Checksum>,
    /// How far that checksum may run ahead of the bytes sent (`u64::MAX`: as far as it goes).
    lead: u64,
    /// Passes repeat (a timed stream): the digest can stop inside a block.
    repeats: bool,
    /// The pass's digest, known beforehand ([`Local::known`]): nothing is hashed.
    known: Option<u64>,
}

impl Local {
    /// `source` sent by `call`; `repeats` for a timed stream (not with sendfile, which sends
    /// the file once).
    pub(super) fn new(mut source: Source, call: Call, chunk: u32, repeats: bool) -> Result<Local> {
        if repeats {
            anyhow::ensure!(
                call != Call::Sendfile,
                "sendfile sends the file once: a timed stream takes write or writev"
            );
            source.repeat();
        }
        let chunk = u64::from(chunk.max(1));
        let (call, unit) = match call {
            Call::Writev(batch) => {
                let batch = batch.clamp(1, MAX_BATCH);
                (Call::Writev(batch), chunk * u64::from(batch))
            }
            other => (other, chunk),
        };
        Ok(Local {
            source,
            call,
            chunk,
            unit,
            block: (0, 0),
            cut: 0,
            checksum: None,
            lead: u64::MAX,
            repeats,
            known: None,
        })
    }

    /// Says the pass's digest is `digest`, known beforehand (a load generator's one buffer,
    /// sent by every stream): the bytes are not hashed again. Only a stream of one pass by
    /// write or writev takes it; false otherwise.
    pub(super) fn known(&mut self, digest: u64) -> bool {
        if self.repeats || self.call == Call::Sendfile {
            return false;
        }
        self.source.hash_elsewhere();
        self.known = Some(digest);
        true
    }

    pub(super) fn len(&self) -> u64 {
        self.source.len()
    }

    /// Time spent so far waiting for the source's bytes.
    pub(super) fn waited(&self) -> Duration {
        self.source.read_time()
    }

    /// Readies the first byte: sendfile's checksum starts on its thread; the others fetch (and
    /// checksum) the first block. Returns the time spent waiting for the source so far.
    pub(super) fn begin(&mut self) -> Result<Duration> {
        if self.call == Call::Sendfile {
            if self.source.file().is_none() {
                return Err(anyhow!(
                    "'{}' is held in memory: sendfile needs a file",
                    self.source.name()
                ));
            }
            self.checksum = Some(self.source.digest_in_background_within(self.lead)?);
            self.source.hash_elsewhere();
        } else {
            self.fetch(0)?;
        }
        Ok(self.source.read_time())
    }

    /// The next block, from `at` in the pass.
    fn fetch(&mut self, at: u64) -> Result<()> {
        let len = self.source.next_block()?.len() as u64;
        if len == 0 {
            // The pass is not over: a source hands out its announced length.
            return Err(self.source.shrank(at));
        }
        self.block = (at, at + len);
        self.cut = (at + self.unit).min(at + len);
        Ok(())
    }

    /// A timed stream's next pass, from the source's first byte.
    pub(super) fn next_pass(&mut self) -> Result<()> {
        self.source.rewind()?;
        self.block = (0, 0);
        self.cut = 0;
        Ok(())
    }

    /// One call of the rest of the chunk (or batch of chunks) at `at` in the pass, `sent`
    /// bytes into the stream: the bytes the socket took, and those the call was given.
    #[inline]
    pub(super) fn send<S: Sink>(
        &mut self,
        sink: &mut S,
        at: u64,
        sent: u64,
    ) -> Result<(usize, usize), Failure> {
        if self.call == Call::Sendfile {
            return self.send_file(sink, at);
        }
        if at == self.cut {
            if at == self.block.1 {
                self.fetch(at).map_err(Failure::Source)?;
            } else {
                self.cut = (at + self.unit).min(self.block.1);
            }
        }
        let block = self.source.last_block();
        let (off, end) = (
            (at - self.block.0) as usize,
            (self.cut - self.block.0) as usize,
        );
        let result = match self.call {
            Call::Writev(_) => {
                let chunk = self.chunk as usize;
                writev(sink, &block[off..end], chunk - off % chunk, chunk)
            }
            _ => sink.write(&block[off..end]),
        };
        match result {
            Ok(n) => Ok((n, end - off)),
            // A write met pages of the mapped file that are gone: the file shrank.
            Err(e) if tsperf_sys::source::is_fault(&e) => {
                Err(Failure::Source(self.source.shrank(sent)))
            }
            Err(e) => Err(Failure::Io(e)),
        }
    }

    /// One `sendfile` of the rest of the chunk at `at` (a cycled source's call stops at the
    /// file's end, the next starts it again).
    fn send_file<S: Sink>(&mut self, sink: &mut S, at: u64) -> Result<(usize, usize), Failure> {
        let chunk = self.chunk;
        let chunk_end = ((at / chunk + 1) * chunk).min(self.source.len());
        let (pos, run) = self.source.file_span(at);
        let want = (chunk_end - at).min(run) as usize;
        let Some(file) = self.source.file() else {
            // `begin` refuses a source held in memory; a driver that skipped it meets this.
            return Err(Failure::Source(anyhow!(
                "'{}' is held in memory: sendfile needs a file",
                self.source.name()
            )));
        };
        match sink.sendfile(file, pos, want) {
            Ok(0) => Err(Failure::Source(self.source.shrank(at))),
            Ok(n) => {
                // The checksum thread may run its lead past what went, no further.
                if let Some(sum) = &self.checksum {
                    sum.sent(at + n as u64);
                }
                Ok((n, want))
            }
            Err(e) => Err(Failure::Io(e)),
        }
    }

    /// The xxh3-64 of everything sent, `at` bytes into the pass. sendfile's waits for its
    /// thread (once: a second call is an error).
    pub(super) fn digest(&mut self, at: u64) -> Result<u64> {
        if let Some(digest) = self.known {
            anyhow::ensure!(
                at == self.source.len(),
                "the digest known is of a whole pass"
            );
            return Ok(digest);
        }
        if self.call == Call::Sendfile {
            let sum = self
                .checksum
                .take()
                .ok_or_else(|| anyhow!("no checksum was begun"))?;
            return sum.join();
        }
        Ok(if self.repeats {
            self.source
                .digest_sent(at.saturating_sub(self.block.0) as usize)
        } else {
            self.source.digest()
        })
    }

    /// sendfile's checksum, while it runs.
    #[cfg(test)]
    pub(super) fn checksum(&self) -> Option<&Checksum> {
        self.checksum.as_ref()
    }

    /// True if the source's file changed while it was sent.
    pub(super) fn changed(&self) -> bool {
        self.source.changed()
    }
}

/// One `writev` of `group`: its first iovec `first` bytes (the rest of a chunk a short call
/// left), then whole chunks of `chunk` bytes, the last maybe shorter. The iovecs live on the
/// stack, only those used written.
#[inline]
fn writev<S: Sink>(sink: &mut S, group: &[u8], first: usize, chunk: usize) -> io::Result<usize> {
    let mut slots = [const { MaybeUninit::<IoSlice<'_>>::uninit() }; MAX_BATCH as usize + 1];
    let (head, rest) = group.split_at(first.min(group.len()));
    let mut used = 0;
    for piece in std::iter::once(head)
        .filter(|h| !h.is_empty())
        .chain(rest.chunks(chunk))
    {
        slots[used].write(IoSlice::new(piece));
        used += 1;
    }
    // SAFETY: the first `used` slots were written just above; IoSlice has no drop.
    let bufs = unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<IoSlice<'_>>(), used) };
    sink.write_vectored(bufs)
}
