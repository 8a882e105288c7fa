//! Writing to stdout or stderr without waiting: how each kind of stream can be written to by a
//! thread that must not block (a regular file as it is, a socket with `MSG_DONTWAIT`, anything
//! else through a non-blocking description of its own).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How a thread writes to a stream without waiting.
pub(super) enum Direct {
    /// A regular file: a write never waits for a reader.
    File,
    /// A description of the stream of our own, non-blocking (pipes, terminals, devices); the
    /// original description, shared with the parent, is left as it is.
    Own(OwnedFd),
    /// A socket: `send` with `MSG_DONTWAIT`.
    Socket,
    /// Nothing usable: everything goes through the queue.
    Queue,
}

impl Direct {
    pub(super) fn open(fd: i32) -> Direct {
        // SAFETY: an all-zero stat is a valid value for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat(2) writes into the struct we own; a bad `fd` is an error return.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Direct::Queue;
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Direct::File,
            libc::S_IFSOCK => Direct::Socket,
            _ => {
                let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}"))
                    .expect("no NUL in a path of digits");
                let flags = libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
                // SAFETY: open(2) of a NUL-terminated path; the fd is owned below.
                let own = unsafe { libc::open(path.as_ptr(), flags) };
                if own < 0 {
                    return Direct::Queue;
                }
                // SAFETY: `own` was just returned by open(2) and is owned by nothing else.
                Direct::Own(unsafe { OwnedFd::from_raw_fd(own) })
            }
        }
    }

    /// Writes what the stream takes of `bytes` now: all of it to a file, what fits otherwise
    /// (0 when it is full). An error means the stream is gone.
    pub(super) fn write(&self, fd: i32, mut bytes: &[u8]) -> io::Result<usize> {
        let len = bytes.len();
        while !bytes.is_empty() {
            let p = bytes.as_ptr().cast();
            // SAFETY: write(2)/send(2) of a live slice to an open descriptor.
            let n = unsafe {
                match self {
                    Direct::File => libc::write(fd, p, bytes.len()),
                    Direct::Own(own) => libc::write(own.as_raw_fd(), p, bytes.len()),
                    Direct::Socket => {
                        libc::send(fd, p, bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    }
                    Direct::Queue => return Ok(0),
                }
            };
            if n >= 0 {
                bytes = &bytes[n as usize..];
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => break,
                _ => return Err(e),
            }
        }
        Ok(len - bytes.len())
    }
}
