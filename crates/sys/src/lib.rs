//! tsperf's contact with the operating system, one concern a module: sockets and the names
//! and addresses of hosts ([`net`]), the kernel's view of a TCP connection ([`tcpinfo`]) and its congestion control
//! ([`congestion`]),
//! clocks and CPU time ([`timing`]), files a user names that may be anything ([`input`]), the
//! file a client sends ([`source`]) and the one `tsgen`
//! writes ([`testdata`]), a helper thread's descriptor table of its own ([`fdtable`]), the
//! pre-shared key ([`auth`]), the machine's boot id and interfaces ([`host`]), what a descriptor is ([`term`]),
//! peer text made safe for a terminal ([`text`]), and a program's edges: its output, its
//! errors and exit code ([`program`]).

pub mod auth;
pub mod client_net;
pub mod cold;
pub mod congestion;
pub mod direct;
pub mod fdtable;
pub mod host;
pub mod input;
pub mod ktls;
pub mod mark;
pub mod net;
pub mod program;
pub mod save;
pub mod source;
pub mod tcpinfo;
pub mod term;
pub mod testdata;
pub mod text;
pub mod tick;
pub mod timing;

/// Helpers shared by this crate's tests.
#[cfg(test)]
mod test_util {
    use std::os::fd::AsRawFd;

    /// True if `fd` polls readable within `ms` milliseconds.
    pub(crate) fn readable(fd: &impl AsRawFd, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, count 1.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        assert!(n >= 0, "poll failed");
        n == 1 && p.revents & libc::POLLIN != 0
    }
}
