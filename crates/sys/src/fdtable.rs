//! A helper thread's descriptor table of its own.
//!
//! While two threads of a process share one descriptor table, every `send`, `recv` and `write`
//! on a socket takes a reference on its file and drops it again (an atomic pair the kernel
//! skips for a table only one thread uses): at 1024-byte sends `fdget` and `fput` were 4.2% of
//! tsclient's samples with its signal thread sharing the table, `fdget` 1.6% without (perf,
//! docs/performance.md). A helper that only waits (for a signal, for the end of a timed run)
//! calls [`leave`]: it then has a copy of the table with every descriptor closed but the ones it
//! keeps, and the sending thread has the process's table to itself again. The helper reaches a
//! descriptor of the process's table through [`Reach`] (`pidfd_getfd(2)`), which duplicates it
//! into its own only for as long as it needs it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
use rustix::thread::{UnshareFlags, unshare_unsafe};

/// A thread's way back to the process's descriptor table after [`leave`].
#[derive(Debug)]
pub struct Reach(OwnedFd);

impl Reach {
    /// A duplicate, in the calling thread's table, of the process's descriptor `fd`: the same
    /// open file, kept open until the duplicate is dropped.
    pub fn get(&self, fd: RawFd) -> io::Result<OwnedFd> {
        Ok(pidfd_getfd(&self.0, fd, PidfdGetfdFlags::empty())?)
    }
}

/// Gives the calling thread a descriptor table of its own, holding only stdin, stdout, stderr
/// and `keep` (descriptors of the process's table, open now), and returns its [`Reach`] back to
/// the process's table. Every signal is blocked on the calling thread first: a handler run here
/// would write to descriptor numbers of the process's table into this one.
///
/// On an error the thread still shares the process's table (a kernel without `pidfd_getfd`,
/// 5.6, or `close_range`, 5.9, is found out before the table is left), with its signals blocked;
/// once it has left, `leave` returns its `Reach`.
pub fn leave(keep: &[RawFd]) -> io::Result<Reach> {
    block_signals()?;
    let reach = Reach(pidfd_open(getpid(), PidfdFlags::empty())?);
    drop(reach.get(reach.0.as_raw_fd())?);
    // Closes a descriptor no process has: 0 where the call exists.
    close_range(u32::MAX, u32::MAX)?;
    // SAFETY: after this the thread uses only the descriptors it keeps, its pidfd, and the
    // duplicates `Reach::get` makes in its own table; no descriptor number crosses to another
    // thread.
    unsafe { unshare_unsafe(UnshareFlags::FILES)? };
    let mut kept: Vec<u32> = keep
        .iter()
        .chain([&reach.0.as_raw_fd()])
        .filter_map(|&fd| u32::try_from(fd).ok())
        .collect();
    kept.sort_unstable();
    // From here the thread has left, whatever follows: close_range(2) without flags fails only
    // on a range whose first is past its last, which these are not.
    let mut from = 3u32;
    for k in kept {
        if k > from {
            let _ = close_range(from, k - 1);
        }
        from = from.max(k.saturating_add(1));
    }
    let _ = close_range(from, u32::MAX);
    Ok(reach)
}

/// Blocks every signal on the calling thread (the process's other threads take them).
fn block_signals() -> io::Result<()> {
    // SAFETY: a zeroed sigset_t filled by sigfillset, passed by pointer to pthread_sigmask.
    let e = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut())
    };
    match e {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Closes descriptors `first..=last` of the calling thread's table.
fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: close_range(2) with no flags; the caller closes only descriptors this thread no
    // longer uses (its copies of the process's, after unshare).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// True if `fd` is open in the calling thread's table.
    fn open(fd: RawFd) -> bool {
        // SAFETY: F_GETFD reads a descriptor's flags and changes nothing.
        unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
    }

    /// A thread that left holds only what it kept: its copy of a socket opened before is
    /// closed (closing the process's copy ends the connection while the thread lives), yet
    /// [`Reach`] reaches a socket of the process's table, even one opened after.
    #[test]
    fn a_thread_that_left_holds_only_what_it_kept() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let before = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        let kept = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_kept_peer, _) = l.accept().unwrap();
        let (b, k) = (before.as_raw_fd(), kept.as_raw_fd());
        let (tx, rx) = std::sync::mpsc::channel::<RawFd>();
        let (back, done) = std::sync::mpsc::channel::<(bool, bool)>();
        let helper = std::thread::spawn(move || {
            let reach = leave(&[k]).expect("leave");
            back.send((open(b), open(k))).unwrap();
            let later = rx.recv().unwrap();
            let mut dup = TcpStream::from(reach.get(later).unwrap());
            dup.write_all(b"via reach").unwrap();
        });
        assert_eq!(done.recv().unwrap(), (false, true), "(earlier, kept) open");
        // The helper lives on: only the process's copy held `before`.
        drop(before);
        peer.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert_eq!(
            peer.read(&mut [0u8; 1]).unwrap(),
            0,
            "the peer sees the end"
        );
        let later = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut later_peer, _) = l.accept().unwrap();
        tx.send(later.as_raw_fd()).unwrap();
        helper.join().unwrap();
        later_peer
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut got = [0u8; 9];
        later_peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"via reach");
        drop(later);
    }
}
