//! Ctrl-C (SIGINT) and SIGTERM in tsclient: every mode stops and prints what it measured.
//!
//! The first signal sets a flag ([`requested`]) that the sending loop reads once per file block
//! and the query loop once per query, so a run stops where it is and reports. A run blocked in
//! the kernel (a write into a full window, a read of an answer that does not come) cannot look
//! at the flag, so [`MOMENT`] later every socket the run holds ([`Watch`]) is shut down: the
//! blocked call returns at once, and the run reports too. A run that has still not ended after
//! [`PATIENCE`] (stuck in a connect, say) is ended from the signal thread, exit 130, after
//! `last_words` (which prints what can be said: with `--json`, one object saying so).

use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tsperf_sys::fdtable::{self, Reach};

/// How long a run may take to notice the flag by itself before its sockets are shut down.
pub const MOMENT: Duration = Duration::from_millis(100);
/// How long after the signal the process ends, whatever the run is doing.
pub const PATIENCE: Duration = Duration::from_secs(2);
/// The exit code after an interruption, as shells report a SIGINT death.
pub const EXIT_CODE: i32 = 130;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The run ends itself on a stop (a timed run sends its end and waits for its report): its
/// sockets are shut down only [`GENTLE_WAIT`] after [`MOMENT`], if it is still running then.
static GENTLE: AtomicBool = AtomicBool::new(false);

/// How much longer a run that ends itself ([`ends_itself`]) has before its sockets are shut
/// down: enough to send its end and take its report, well inside [`PATIENCE`].
pub const GENTLE_WAIT: Duration = Duration::from_secs(1);

/// Says the run now ends itself on a stop (a timed run: Ctrl-C ends it as its time does, with
/// its end trailer and the server's report): a stop gives it [`GENTLE_WAIT`] more before its
/// sockets are shut down.
pub fn ends_itself() {
    GENTLE.store(true, Ordering::Relaxed);
}
static WATCHED: Mutex<Vec<(u64, RawFd)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

fn watched() -> MutexGuard<'static, Vec<(u64, RawFd)>> {
    WATCHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// True once a stop was asked for: the run should end now and report what it measured.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// A socket that a stop shuts down, so no call blocked on it outlasts [`MOMENT`]. Keep it no
/// longer than the socket (declare it before the socket in a struct: fields drop in order).
#[derive(Debug)]
pub struct Watch(u64);

impl Watch {
    /// Watches `sock`; if a stop was already asked for, it is shut down at once.
    pub fn new(sock: &impl AsRawFd) -> Watch {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let fd = sock.as_raw_fd();
        let mut all = watched();
        all.push((id, fd));
        if requested() {
            shut(fd);
        }
        Watch(id)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        watched().retain(|(id, _)| *id != self.0);
    }
}

fn shut(fd: RawFd) {
    // SAFETY: shutdown(2) on a descriptor a live Watch holds open (the lock is held, and a
    // Watch unregisters before its socket closes).
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Shuts down the process's descriptor `fd` from a thread with a table of its own, through a
/// duplicate that lives only for the call.
fn shut_from(reach: &Reach, fd: RawFd) {
    if let Ok(dup) = reach.get(fd) {
        shut(dup.as_raw_fd());
    }
}

/// Asks the run to stop: sets the flag, and after [`MOMENT`] shuts down every watched socket.
pub fn request() {
    request_from(None);
}

/// [`request`], from a thread whose descriptor table is its own when `reach` is given.
fn request_from(reach: Option<&Reach>) {
    REQUESTED.store(true, Ordering::Relaxed);
    std::thread::sleep(MOMENT);
    if GENTLE.load(Ordering::Relaxed) {
        std::thread::sleep(GENTLE_WAIT);
    }
    for (_, fd) in watched().iter() {
        match reach {
            Some(reach) => shut_from(reach, *fd),
            None => shut(*fd),
        }
    }
}

/// On the first SIGINT or SIGTERM: clears the progress bar, asks the run to stop
/// ([`request`]), and if the process has not ended by [`PATIENCE`], calls `last_words` and
/// exits [`EXIT_CODE`].
pub fn on_signals(
    progress: crate::progress::Progress,
    last_words: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    on_signal(move |reach| {
        progress.clear();
        request_from(reach);
        std::thread::sleep(PATIENCE.saturating_sub(MOMENT));
        last_words();
        std::process::exit(EXIT_CODE);
    })
}

/// Runs `action` on a helper thread when the first SIGINT or SIGTERM arrives. The helper keeps
/// a descriptor table of its own ([`tsperf_sys::fdtable`]: the sending thread's sockets cost
/// no reference per call) and passes `action` its way back to the process's descriptors; where
/// the kernel cannot, it shares the table as any thread does and passes `None`. It writes only
/// to stdout and stderr, which it keeps.
pub fn on_signal(action: impl FnOnce(Option<&Reach>) + Send + 'static) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::low_level::pipe;
    let (mut woken, wake) = std::io::pipe()?;
    pipe::register(SIGINT, wake.try_clone()?)?;
    pipe::register(SIGTERM, wake)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let reach = fdtable::leave(&[woken.as_raw_fd()]).ok();
            let mut byte = [0u8];
            loop {
                match woken.read(&mut byte) {
                    Ok(1) => return action(reach.as_ref()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    _ => return,
                }
            }
        })?;
    Ok(())
}

/// Held by a test that asks for a stop (which shuts down every watched socket of the process)
/// and by tests that read from watched connections, so the stop cannot cut theirs off.
#[cfg(test)]
pub(crate) static STOP_TESTS: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// A stop shuts down watched sockets, so a read blocked on one returns; a socket no longer
    /// watched is left alone.
    #[test]
    fn a_stop_unblocks_watched_sockets_only() {
        let _alone = STOP_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut blocked = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _peer = l.accept().unwrap();
        let spared = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _peer2 = l.accept().unwrap();
        let watch = Watch::new(&blocked);
        drop(Watch::new(&spared));
        blocked
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = std::thread::spawn(move || blocked.read(&mut [0u8; 8]));
        request();
        let got = reader.join().unwrap();
        assert!(matches!(got, Ok(0)), "{got:?}");
        assert!(requested());
        drop(watch);
        spared.set_nonblocking(true).unwrap();
        let e = (&spared).read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::WouldBlock,
            "shut down unwatched"
        );
        REQUESTED.store(false, Ordering::Relaxed);
    }
}
