//! The generated text reverse streams send: the seed's 36 MiB ([`tsperf_sys::testdata::text`]),
//! made once per server (its [`Pattern`], held in memory asked for huge pages as tsclient holds
//! its period, [`Held`]) and shared by every stream, so a stream costs no buffer. Making it
//! takes ~25 ms of a CPU (a fresh server's first `-R --bytes 1M`, two sittings of 9 and 5 runs:
//! 30 and 20 ms of server CPU, median; in a Vec copied into an `Arc<[u8]>` it took 50 and
//! 70): it is made on a thread of its own the first time a stream asks,
//! never on an event loop, which serves its other connections meanwhile and gives the streams
//! that asked a turn when it is there ([`Pattern::ready_or`]). A server that never sends the
//! generated stream never makes it. `send` hands a write's worth of it to the socket,
//! checksummed a step ahead (the sender's `ahead` module).

use std::hash::Hasher as _;
use std::io::{self, IoSlice, Write};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};

use tsperf_sys::source::Held;
use twox_hash::XxHash3_64;

use super::ahead::{Ahead, TEXT_STEP};

/// One server's generated text: made at most once, on the first stream's asking.
pub struct Pattern {
    text: OnceLock<Arc<Held>>,
    started: Once,
    /// Who to tell when the text is there.
    waiting: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Default for Pattern {
    fn default() -> Pattern {
        Pattern {
            text: OnceLock::new(),
            started: Once::new(),
            waiting: Mutex::new(Vec::new()),
        }
    }
}

fn make() -> Arc<Held> {
    Held::seed()
}

impl Pattern {
    /// The text, if it is made; otherwise starts making it (once, on a thread of its own) and
    /// calls `wake` when it is there.
    pub fn ready_or(self: &Arc<Self>, wake: impl FnOnce() + Send + 'static) -> Option<Arc<Held>> {
        if let Some(t) = self.text.get() {
            return Some(t.clone());
        }
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            // Checked again under the lock: the maker sets the text before it takes the lock.
            if let Some(t) = self.text.get() {
                return Some(t.clone());
            }
            waiting.push(Box::new(wake));
        }
        self.started.call_once(|| {
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("generated-text".into())
                .spawn(move || me.make_and_wake());
            // No thread: made here, the one stall left.
            if spawned.is_err() {
                self.make_and_wake();
            }
        });
        self.text.get().cloned()
    }

    /// Makes the text and tells everyone waiting for it.
    fn make_and_wake(&self) {
        self.text.get_or_init(make);
        let woken =
            std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner));
        for wake in woken {
            wake();
        }
    }

    /// The text, waiting for it if it is being made, or made here (a thread of the blocking
    /// model serves one connection: waiting stalls nobody else).
    pub fn wait(&self) -> Arc<Held> {
        self.text.get_or_init(make).clone()
    }
}

/// The generated text's period: the whole text, or with the hello's one buffer its first chunk
/// (every write then starts at its start, but after a short write, and its bytes stay in the
/// CPU's cache).
pub(super) fn period(text: &[u8], one_buffer: bool, chunk: u64) -> &[u8] {
    if one_buffer {
        &text[..(chunk as usize).min(text.len())]
    } else {
        text
    }
}

/// One write of `want` bytes of `text` (the period), cycled, from `at` in a pass of `length`
/// bytes, checksummed a step ahead first ([`Ahead`]). Returns the bytes the socket took.
#[inline]
pub(super) fn send<W: Write>(
    w: &mut W,
    text: &[u8],
    sum: &mut Ahead,
    (at, length): (u64, u64),
    want: usize,
) -> io::Result<usize> {
    // Hashing the text cannot fail.
    let _ = sum.cover(
        at,
        at + want as u64,
        length,
        TEXT_STEP,
        &mut |h, from, n| {
            hash_text(h, text, from, n);
            Ok(())
        },
    );
    write_text(w, text, at, want)
}

/// The digest of everything sent, `at` bytes into the pass.
pub(super) fn digest(sum: &Ahead, text: &[u8], at: u64) -> u64 {
    sum.digest_sent(at, TEXT_STEP, &mut |h, from, n| {
        hash_text(h, text, from, n);
        Ok(())
    })
    .unwrap_or_else(|never: String| unreachable!("{never}"))
}

/// One write of `want` bytes of the generated text from `at` in its pass (a write across the
/// end of the text is one `writev` of two pieces). Returns the bytes taken.
#[inline]
fn write_text<W: Write>(w: &mut W, text: &[u8], at: u64, want: usize) -> io::Result<usize> {
    let from = (at % text.len() as u64) as usize;
    let first = &text[from..text.len().min(from + want)];
    if first.len() == want {
        w.write(first)
    } else {
        let rest = &text[..want - first.len()];
        w.write_vectored(&[IoSlice::new(first), IoSlice::new(rest)])
    }
}

/// Hashes `n` bytes of the generated text from `at` in its pass (the text cycled).
fn hash_text(h: &mut XxHash3_64, text: &[u8], at: u64, n: usize) {
    let (mut from, mut left) = ((at % text.len() as u64) as usize, n);
    while left > 0 {
        let piece = &text[from..text.len().min(from + left)];
        h.write(piece);
        left -= piece.len();
        from = 0;
    }
}
