//! The generated text reverse streams send: the seed's 36 MiB ([`tsperf_sys::testdata::text`]),
//! made once per server (its [`Pattern`]) and shared by every stream, so a stream costs no buffer. Making it
//! takes about 140 ms of a CPU: it is made on a thread of its own the first time a stream asks,
//! never on an event loop, which serves its other connections meanwhile and gives the streams
//! that asked a turn when it is there ([`Pattern::ready_or`]). A server that never sends the generated
//! stream never makes it.

use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};

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
