//! The generated text reverse streams send: the seed's 36 MiB ([`tsperf_sys::testdata::text`]),
//! made once per server (its [`Pattern`]) and shared by every stream, so a stream costs no buffer. Making it
//! takes about 140 ms of a CPU: it is made on a thread of its own the first time a stream asks,
//! never on an event loop, which serves its other connections meanwhile and gives the streams
//! that asked a turn when it is there ([`Pattern::ready_or`]). A server that never sends the generated
//! stream never makes it. `write_text` hands a write's worth of it to the socket.

use std::hash::Hasher as _;
use std::io::{self, IoSlice, Write};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};

use twox_hash::XxHash3_64;

/// One server's generated text: made at most once, on the first stream's asking.
pub struct Pattern {
    text: OnceLock<Arc<[u8]>>,
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

fn make() -> Arc<[u8]> {
    tsperf_sys::testdata::text(tsperf_sys::testdata::SEED_FILE_LEN as usize).into()
}

impl Pattern {
    /// The text, if it is made; otherwise starts making it (once, on a thread of its own) and
    /// calls `wake` when it is there.
    pub fn ready_or(self: &Arc<Self>, wake: impl FnOnce() + Send + 'static) -> Option<Arc<[u8]>> {
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
    pub fn wait(&self) -> Arc<[u8]> {
        self.text.get_or_init(make).clone()
    }
}

/// One write of `want` bytes of the generated text from `at` (a write across the end of the
/// text is one `writev` of two pieces); what it took is checksummed. Returns the bytes taken.
#[inline]
pub(super) fn write_text<W: Write>(
    w: &mut W,
    text: &[u8],
    hasher: &mut XxHash3_64,
    at: u64,
    want: usize,
) -> io::Result<usize> {
    let from = (at % text.len() as u64) as usize;
    let first = &text[from..text.len().min(from + want)];
    let n = if first.len() == want {
        w.write(first)?
    } else {
        let rest = &text[..want - first.len()];
        w.write_vectored(&[IoSlice::new(first), IoSlice::new(rest)])?
    };
    let took = n.min(first.len());
    hasher.write(&first[..took]);
    if n > took {
        hasher.write(&text[..n - took]);
    }
    Ok(n)
}
