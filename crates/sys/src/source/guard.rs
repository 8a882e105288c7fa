//! Makes a mapped file that shrinks under us a clean error instead of a crash.
//!
//! Touching a page of a mapped file past its end raises SIGBUS, which by default kills the
//! process with no word of why. While a [`Registration`] lives, its address range and message
//! sit in a fixed table that the SIGBUS handler searches: a fault inside a registered mapping
//! writes that mapping's message, with the offset of the lost page in the middle, to stderr and
//! exits with status 1, like any other error. A
//! fault anywhere else goes to the handler that was installed before ours (std's, for example),
//! or, if there was none, the default disposition is restored and the fault recurs as usual.
//!
//! The handler only loads atomics, calls `write(2)` and `_exit(2)` or `sigaction(2)`: all
//! async-signal-safe. The table has [`SLOTS`] entries; when all are taken, [`register`] says so
//! and the caller reads the file instead of mapping it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Mappings guarded at once (tsscale runs up to 256 clients in one process).
pub(super) const SLOTS: usize = 1024;

struct Slot {
    taken: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    msg: AtomicPtr<u8>,
    msg_len: AtomicUsize,
    /// Where the offset goes in the message.
    split: AtomicUsize,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            taken: AtomicBool::new(false),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            msg: AtomicPtr::new(std::ptr::null_mut()),
            msg_len: AtomicUsize::new(0),
            split: AtomicUsize::new(0),
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// The disposition SIGBUS had before ours, or None if installing ours failed.
static PREVIOUS: OnceLock<Option<Previous>> = OnceLock::new();

struct Previous(libc::sigaction);
// SAFETY: a plain C struct of a handler address, flags and a signal mask, only ever read.
unsafe impl Send for Previous {}
// SAFETY: as for Send: never written after it is stored, so shared reads cannot race.
unsafe impl Sync for Previous {}

/// A guarded range; dropping it takes the range out of the table.
pub(super) struct Registration {
    slot: &'static Slot,
    // Owns the bytes the slot points at; the slot is cleared before they are freed.
    _msg: Box<[u8]>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.slot.start.store(0, Ordering::Release);
        self.slot.taken.store(false, Ordering::Release);
    }
}

/// Guards `len` bytes from `start`: a SIGBUS there prints `head`, the offset of the faulting
/// page from `start`, and `tail`, then exits 1. None when the handler cannot be installed or
/// every slot is taken.
pub(super) fn register(
    start: *const u8,
    len: usize,
    head: &str,
    tail: &str,
) -> Option<Registration> {
    if len == 0 || !install() {
        return None;
    }
    let slot = TABLE.iter().find(|s| {
        s.taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    let mut msg = [head, tail].concat().into_bytes().into_boxed_slice();
    slot.end.store(start as usize + len, Ordering::Relaxed);
    slot.split.store(head.len(), Ordering::Relaxed);
    slot.msg_len.store(msg.len(), Ordering::Relaxed);
    slot.msg.store(msg.as_mut_ptr(), Ordering::Relaxed);
    // Published last: the handler reads `start` first, with Acquire.
    slot.start.store(start as usize, Ordering::Release);
    Some(Registration { slot, _msg: msg })
}

/// Installs the handler once; false if that failed.
fn install() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: sigaction with a zeroed, then filled struct; `old` receives the previous
            // disposition. The handler is async-signal-safe (see the module docs).
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_sigbus as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                (libc::sigaction(libc::SIGBUS, &new, &mut old) == 0).then_some(Previous(old))
            }
        })
        .is_some()
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for slot in &TABLE {
        let start = slot.start.load(Ordering::Acquire);
        if start != 0 && addr >= start && addr < slot.end.load(Ordering::Relaxed) {
            let msg = slot.msg.load(Ordering::Relaxed);
            let len = slot.msg_len.load(Ordering::Relaxed);
            let split = slot.split.load(Ordering::Relaxed);
            let mut digits = [0u8; 20];
            let at = decimal(addr - start, &mut digits);
            // SAFETY: the registration that owns `msg` is alive: its thread is the one that
            // faulted on its mapping. write(2) and _exit(2) are async-signal-safe.
            unsafe {
                libc::write(2, msg as *const libc::c_void, split);
                libc::write(2, at.as_ptr() as *const libc::c_void, at.len());
                libc::write(2, msg.add(split) as *const libc::c_void, len - split);
                libc::_exit(1);
            }
        }
    }
    // Not ours: hand it on.
    let Some(Some(Previous(prev))) = PREVIOUS.get() else {
        return;
    };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: restores the previous disposition; returning re-runs the faulting access,
        // which now gets it.
        unsafe { libc::sigaction(libc::SIGBUS, prev, std::ptr::null_mut()) };
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes the signal number only.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

/// `n` in decimal, in the end of `buf`; no allocation (for the signal handler).
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots are found by address, given back on drop, and reused.
    #[test]
    fn registrations_come_and_go() {
        let data = [0u8; 64];
        let a = register(data.as_ptr(), data.len(), "a ", "\n").unwrap();
        let start = a.slot.start.load(Ordering::Acquire);
        assert_eq!(start, data.as_ptr() as usize);
        assert_eq!(a.slot.end.load(Ordering::Acquire), start + 64);
        assert_eq!(a.slot.split.load(Ordering::Acquire), 2);
        assert!(register(data.as_ptr(), 0, "empty", "\n").is_none());
        let slot = a.slot as *const Slot;
        drop(a);
        // SAFETY: `slot` points into the static TABLE, which lives for the whole program.
        assert_eq!(unsafe { &*slot }.start.load(Ordering::Acquire), 0);
        // SAFETY: as above.
        assert!(!unsafe { &*slot }.taken.load(Ordering::Acquire));
    }

    #[test]
    fn decimal_digits() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(1_075_200, &mut buf), b"1075200");
        assert_eq!(
            decimal(usize::MAX, &mut buf),
            usize::MAX.to_string().as_bytes()
        );
    }
}
