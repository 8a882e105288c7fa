//! The generated text reverse streams send: the seed's 36 MiB ([`tsperf_sys::testdata::text`]),
//! made once per server (its [`Pattern`], held in memory asked for huge pages as tsclient holds
//! its period, [`Held`]) and shared by every stream, so a stream costs no buffer. Making it
//! takes ~25 ms of a CPU (a fresh server's first `-R --bytes 1M`, two sittings of 9 and 5 runs:
//! 30 and 20 ms of server CPU, median; in a Vec copied into an `Arc<[u8]>` it took 50 and
//! 70): it is made on a thread of its own the first time a stream asks,
//! never on an event loop, which serves its other connections meanwhile and gives the streams
//! that asked a turn when it is there ([`Pattern::ready_or`]). A server that never sends the
//! generated stream never makes it. A stream asked to go by sendfile (`tsclient -R --io
//! sendfile`) is sent from an in-memory file of the text, made the same way, once, when the
//! first such stream asks. `send` hands a write's worth of it to the socket,
//! checksummed a step ahead (the sender's `ahead` module).

use std::hash::Hasher as _;
use std::io::{self, IoSlice, Write};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};

use tsperf_sys::source::Held;
use twox_hash::XxHash3_64;

use super::ahead::{Ahead, TEXT_STEP};
use super::{Call, Data, Sender, local};

/// One server's generated text: made at most once, on the first stream's asking; and for
/// streams sent by sendfile, an in-memory file of it, made (from the text) at most once, on the
/// first such stream's asking.
#[derive(Default)]
pub struct Pattern {
    text: Made<Arc<Held>>,
    file: Made<Result<Arc<std::fs::File>, String>>,
}

/// What a stream wants of the [`Pattern`] before its first turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wants {
    /// The text, held in memory (written by write or writev).
    Text,
    /// Its in-memory file (sent by sendfile).
    File,
}

/// What a [`Pattern`] hands a stream: what it [`Wants`].
#[derive(Debug, Clone)]
pub enum Generated {
    /// The text.
    Text(Arc<Held>),
    /// The text's in-memory file.
    File(Result<Arc<std::fs::File>, String>),
}

/// A thing made at most once, on a thread of its own, and who waits for it.
struct Made<T> {
    value: OnceLock<T>,
    started: Once,
    /// Who to tell when it is there.
    waiting: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl<T> Default for Made<T> {
    fn default() -> Made<T> {
        Made {
            value: OnceLock::new(),
            started: Once::new(),
            waiting: Mutex::new(Vec::new()),
        }
    }
}

fn make_text(_: &Pattern) -> Arc<Held> {
    Held::seed()
}

/// The text in an in-memory file (sendfile's source), from the text.
fn make_file(p: &Pattern) -> Result<Arc<std::fs::File>, String> {
    let text = p.text.value.get_or_init(|| make_text(p)).clone();
    tsperf_sys::testdata::file_of(&text)
        .map(Arc::new)
        .map_err(|e| format!("{e:#}"))
}

impl Pattern {
    /// What `wants` asks for, if it is made; otherwise starts making it (once, on a thread of
    /// its own) and calls `wake` when it is there.
    pub fn ready_or(
        self: &Arc<Self>,
        wants: Wants,
        wake: impl FnOnce() + Send + 'static,
    ) -> Option<Generated> {
        match wants {
            Wants::Text => self
                .made_or(|p| &p.text, make_text, wake)
                .map(Generated::Text),
            Wants::File => self
                .made_or(|p| &p.file, make_file, wake)
                .map(Generated::File),
        }
    }

    fn made_or<T: Clone + Send + Sync + 'static>(
        self: &Arc<Self>,
        pick: fn(&Pattern) -> &Made<T>,
        make: fn(&Pattern) -> T,
        wake: impl FnOnce() + Send + 'static,
    ) -> Option<T> {
        let made = pick(self);
        if let Some(t) = made.value.get() {
            return Some(t.clone());
        }
        {
            let mut waiting = made.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            // Checked again under the lock: the maker sets the value before it takes the lock.
            if let Some(t) = made.value.get() {
                return Some(t.clone());
            }
            waiting.push(Box::new(wake));
        }
        made.started.call_once(|| {
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("generated-text".into())
                .spawn(move || me.make_and_wake(pick, make));
            // No thread: made here, the one stall left.
            if spawned.is_err() {
                self.make_and_wake(pick, make);
            }
        });
        made.value.get().cloned()
    }

    /// Makes the value and tells everyone waiting for it.
    fn make_and_wake<T>(&self, pick: fn(&Pattern) -> &Made<T>, make: fn(&Pattern) -> T) {
        let made = pick(self);
        made.value.get_or_init(|| make(self));
        let woken =
            std::mem::take(&mut *made.waiting.lock().unwrap_or_else(PoisonError::into_inner));
        for wake in woken {
            wake();
        }
    }

    /// What `wants` asks for, waiting for it if it is being made, or made here (a thread of
    /// the blocking model serves one connection: waiting stalls nobody else).
    pub fn wait(&self, wants: Wants) -> Generated {
        match wants {
            Wants::Text => Generated::Text(self.text.value.get_or_init(|| make_text(self)).clone()),
            Wants::File => Generated::File(self.file.value.get_or_init(|| make_file(self)).clone()),
        }
    }
}

impl Sender {
    /// What the generated stream still wants handed over ([`Sender::give`]) before its first
    /// turn: the text, or for sendfile its in-memory file.
    pub fn wants(&self) -> Option<Wants> {
        match self.data {
            Data::Generated {
                text: None,
                call: Some(Call::Sendfile),
                ..
            } => Some(Wants::File),
            Data::Generated { text: None, .. } => Some(Wants::Text),
            _ => None,
        }
    }

    /// Hands over what the stream [`Sender::wants`] of the [`Pattern`], before the first
    /// turn. A call the hello asked for makes the text a held source sent by it (one buffer:
    /// its first `chunk` bytes cycled); one that cannot be made cuts the stream off.
    pub fn give(&mut self, made: Generated) {
        let Data::Generated {
            text,
            call,
            one_buffer,
            ..
        } = &mut self.data
        else {
            return;
        };
        let (call, one_buffer, made) = match (*call, made) {
            (None, Generated::Text(t)) => return *text = Some(t),
            (None, Generated::File(_)) => return,
            (Some(call), made) => (call, *one_buffer, made),
        };
        match local::of_text(
            made,
            call,
            one_buffer,
            (self.chunk, self.length),
            self.repeats,
        ) {
            Ok(local) => self.data = Data::Local(Box::new(local)),
            Err(e) => self.cut(&format!("{e:#}")),
        }
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
