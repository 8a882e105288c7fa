//! The checksum of a source on a thread of its own, for `sendfile` (which never copies the data
//! into the process; [`Source::hash_elsewhere`]).
//!
//! The thread reads at explicit offsets into a buffer of one block, which stays in the CPU's
//! cache while it is hashed, and hashes the bytes the source hands out, in order: a stripe's, a
//! cycled source's again and again. A server's runs at most [`CHECKSUM_LEAD`] bytes ahead of
//! what it says went ([`Checksum::sent`]), so a client that takes its stream slowly costs the
//! server no more hashing than the bytes it took (a reverse stream of 64 GiB to a client that
//! reads a trickle would otherwise be hashed whole at once, on a thread of its own). A client's
//! own runs ahead freely: kept in step, it shared the two CPUs with the sending thread for the
//! whole transfer (1 GiB at 128 KiB, 15 alternating pairs on loopback: 0.94x the rate, 1.12x
//! the client's CPU). Hashing from a mapping of its own instead was measured
//! (issue 33, 1 GiB at 128 KiB, 7 alternating pairs): no faster, and no less client CPU (0.45
//! against 0.42 s per GiB: the mapping's page tables cost what the copy saves).

use std::hash::Hasher as _;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use twox_hash::XxHash3_64;

use super::{BLOCK_TARGET, Source};

/// How far the checksum thread may run ahead of the bytes sent ([`Checksum::sent`]).
pub const CHECKSUM_LEAD: u64 = 16 << 20;

/// The room a waiting checksum thread waits for before it goes on: a quarter of its lead, so the
/// sender wakes it once per 4 MiB sent, not at every call.
const RESUME: u64 = CHECKSUM_LEAD / 4;

/// What the sender and the checksum thread share.
struct Pace {
    /// How far the thread may run ahead of the bytes sent.
    lead: u64,
    /// The thread may hash up to here.
    allowed: AtomicU64,
    /// Where a waiting thread waits to be allowed to; `u64::MAX`: it is not waiting.
    wake_at: AtomicU64,
    /// Bytes hashed so far.
    hashed: AtomicU64,
    stop: AtomicBool,
}

impl Pace {
    /// Waits until the thread may hash up to `need` (`at` hashed, `len` in all); false if it was
    /// told to stop.
    fn wait_for(&self, at: u64, need: u64, len: u64) -> bool {
        while need > self.allowed.load(Ordering::SeqCst) {
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            let wake = need.max(at.saturating_add(RESUME).min(len));
            self.wake_at.store(wake, Ordering::SeqCst);
            // Looked at again after saying where it waits: a sender that moved `allowed` in
            // between has seen `wake_at` (both sequentially consistent) and woken it, or this
            // sees its move. The timeout only looks at `stop` again.
            if need > self.allowed.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
        self.wake_at.store(u64::MAX, Ordering::SeqCst);
        true
    }
}

/// The checksum thread of [`Source::digest_in_background`]. Dropped before it is joined (the
/// transfer failed), it tells the thread to stop at its next block.
pub struct Checksum {
    handle: Option<std::thread::JoinHandle<Result<u64>>>,
    pace: Arc<Pace>,
}

impl Checksum {
    /// Says `bytes` of the stream have gone: the thread may hash up to its lead past them. Two
    /// atomic operations, and a wake-up once per 4 MiB while the thread waits.
    #[inline]
    pub fn sent(&self, bytes: u64) {
        if self.pace.lead == u64::MAX {
            return;
        }
        let allowed = bytes.saturating_add(self.pace.lead);
        self.pace.allowed.fetch_max(allowed, Ordering::SeqCst);
        let waits_for = self.pace.wake_at.load(Ordering::SeqCst);
        if waits_for != u64::MAX && allowed >= waits_for {
            self.wake();
        }
    }

    /// Bytes hashed so far.
    pub fn hashed(&self) -> u64 {
        self.pace.hashed.load(Ordering::Relaxed)
    }

    /// True while the thread waits for more to be sent.
    pub fn waiting(&self) -> bool {
        self.pace.wake_at.load(Ordering::SeqCst) != u64::MAX
    }

    /// True once the thread has ended.
    pub fn finished(&self) -> bool {
        self.handle
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
    }

    fn wake(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// Waits for the thread, letting it hash the rest: the xxh3-64 of every byte, or why it
    /// could not read them.
    pub fn join(mut self) -> Result<u64> {
        self.pace.allowed.store(u64::MAX, Ordering::SeqCst);
        self.wake();
        match self.handle.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => bail!("the checksum thread panicked"),
        }
    }
}

impl Drop for Checksum {
    fn drop(&mut self) {
        self.pace.stop.store(true, Ordering::Relaxed);
        self.wake();
    }
}

impl Source {
    /// Leaves the checksum to [`Source::digest_in_background`]: blocks handed out are no
    /// longer hashed as they go, and [`Source::digest`] means nothing.
    pub fn hash_elsewhere(&mut self) {
        self.hash_inline = false;
    }

    /// Checksums the announced length of the file on a thread of its own, reading it at
    /// explicit offsets (the file's position is left alone). The thread's answer is the
    /// xxh3-64, or the reason it could not read the whole length. Dropping the `Checksum`
    /// unjoined stops it.
    pub fn digest_in_background(&self) -> Result<Checksum> {
        self.digest_in_background_within(u64::MAX)
    }

    /// [`Source::digest_in_background`], the thread kept within `lead` bytes of what the
    /// sender says went ([`Checksum::sent`]; [`CHECKSUM_LEAD`]): a sender whose reader is
    /// someone else's (a server's) hashes no more than its reader takes.
    pub fn digest_in_background_within(&self, lead: u64) -> Result<Checksum> {
        let pace = Arc::new(Pace {
            lead,
            allowed: AtomicU64::new(lead),
            wake_at: AtomicU64::new(u64::MAX),
            hashed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let paced = pace.clone();
        let file = self.shared_file().cloned().with_context(|| {
            format!(
                "'{}' is held in memory: there is no file to checksum beside the transfer",
                self.path.display()
            )
        })?;
        let (path, len) = (self.path.clone(), self.len);
        // Where each byte is in the file, computed here from a copy of what it needs.
        let span = {
            let (cycle, file_len, offset) = (self.cycle, self.file_len, self.offset);
            move |at: u64| super::file_span(cycle, file_len, offset, at, len - at)
        };
        let work = move || -> Result<u64> {
            let mut hasher = XxHash3_64::new();
            read_all(&file, &path, len, &span, &paced, &mut hasher)?;
            Ok(hasher.finish())
        };
        let handle = std::thread::Builder::new()
            .name("checksum".into())
            .spawn(work)
            .context("cannot start the checksum thread")?;
        Ok(Checksum {
            handle: Some(handle),
            pace,
        })
    }
}

/// Hashes the `len` bytes `span` places in `file`, read at explicit offsets, as far as `pace`
/// allows.
fn read_all(
    file: &std::fs::File,
    path: &std::path::Path,
    len: u64,
    span: &dyn Fn(u64) -> (u64, u64),
    pace: &Pace,
    hasher: &mut XxHash3_64,
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; BLOCK_TARGET];
    let mut at = 0u64;
    while at < len {
        let (pos, run) = span(at);
        let want = run.min(buf.len() as u64) as usize;
        if pace.stop.load(Ordering::Relaxed) || !pace.wait_for(at, at + want as u64, len) {
            bail!("the checksum was stopped: the transfer ended");
        }
        match file.read_at(&mut buf[..want], pos) {
            Ok(0) => bail!(
                "file '{}' shrank while it was read: {at} of {len} bytes",
                path.display()
            ),
            Ok(n) => {
                hasher.write(&buf[..n]);
                at += n as u64;
                pace.hashed.store(at, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read file '{}'", path.display()));
            }
        }
    }
    Ok(())
}
