//! What iperf3's client flags ask of the kernel beyond a plain connect: the address family a
//! host name resolves to (`-4`, `-6`), the local address and port a connection binds to (`-B`,
//! `--cport`), the pacing of a sending socket (`-b`, `SO_MAX_PACING_RATE`), and stdout sent to
//! a file (`--logfile`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::OnceLock;

/// An address family the connections are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only (`-4`).
    V4,
    /// IPv6 only (`-6`).
    V6,
}

static FAMILY: OnceLock<Family> = OnceLock::new();

/// Holds every later [`crate::net::resolve`] of this process to `family` (set once, at start).
pub fn hold_to(family: Family) {
    let _ = FAMILY.set(family);
}

/// `addrs` kept to the family held to, if any; an error names the host and the flag when none
/// is left.
pub fn of_family(host: &str, addrs: Vec<SocketAddr>) -> anyhow::Result<Vec<SocketAddr>> {
    let Some(family) = FAMILY.get() else {
        return Ok(addrs);
    };
    let kept: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| a.is_ipv4() == (*family == Family::V4))
        .collect();
    if kept.is_empty() {
        let (name, flag) = match family {
            Family::V4 => ("IPv4", "-4"),
            Family::V6 => ("IPv6", "-6"),
        };
        anyhow::bail!("host '{host}' has no {name} address ({flag} asks for one)");
    }
    Ok(kept)
}

/// Where this client's connections come from: an address (`-B`), a first port (`--cport`).
#[derive(Debug, Clone, Copy)]
struct Local {
    addr: Option<std::net::IpAddr>,
    port: Option<u16>,
}

static LOCAL: OnceLock<Local> = OnceLock::new();
static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// Binds every later connection of this process to `addr` (`-B`) and, from `port` on, one
/// port a connection (`--cport`: a session's streams take the ports after it, as iperf3's do);
/// set once, at start.
pub fn bind_from(addr: Option<std::net::IpAddr>, port: Option<u16>) {
    let _ = LOCAL.set(Local { addr, port });
}

/// The local address the next connection to `peer` is to bind to, where one was asked.
pub fn local_for(peer: &SocketAddr) -> Option<SocketAddr> {
    let l = LOCAL.get()?;
    let any = match peer {
        SocketAddr::V4(_) => std::net::IpAddr::from([0u8; 4]),
        SocketAddr::V6(_) => std::net::IpAddr::from([0u16; 8]),
    };
    let n = NEXT_PORT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let port = l.port.map_or(0, |p| p.saturating_add(n));
    Some(SocketAddr::new(l.addr.unwrap_or(any), port))
}

/// A socket for `peer`, bound to `local`; non-blocking if asked (its connect then returns at
/// once). The error names the address it could not take.
pub fn bound(
    peer: &SocketAddr,
    local: SocketAddr,
    nonblocking: bool,
) -> anyhow::Result<socket2::Socket> {
    use anyhow::Context as _;
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(*peer),
        socket2::Type::STREAM,
        None,
    )?;
    sock.set_nonblocking(nonblocking)?;
    // A port a run before left in TIME_WAIT may be bound again, as iperf3's --cport allows.
    sock.set_reuse_address(true)?;
    sock.bind(&local.into()).with_context(|| {
        format!("cannot bind this end to {local} (-B, --cport) to reach {peer}")
    })?;
    Ok(sock)
}

/// A blocking connection to `peer` from `local`, within `timeout`; a failed bind says which
/// address it could not take.
pub fn connect_from(
    peer: &SocketAddr,
    local: SocketAddr,
    timeout: std::time::Duration,
) -> io::Result<std::net::TcpStream> {
    let sock = bound(peer, local, false)
        .map_err(|e| io::Error::new(io::ErrorKind::AddrNotAvailable, format!("{e:#}")))?;
    sock.connect_timeout(&(*peer).into(), timeout)?;
    Ok(sock.into())
}

/// Paces what `sock` sends to at most `bytes_per_s` (`SO_MAX_PACING_RATE`): the fq qdisc
/// paces it where it is the interface's, TCP's own pacing where it is not (Linux 4.13 on).
/// The bytes waiting unsent are held to [`paced_unsent`] (`TCP_NOTSENT_LOWAT`): a paced
/// socket's send buffer would otherwise queue seconds of data (its autotuned megabytes at the
/// pace), which a timed run's end waits for.
pub fn set_pacing<S: AsFd>(sock: &S, bytes_per_s: u64) -> io::Result<()> {
    // SAFETY: `rate` is a live u64 and its size is passed; the descriptor is borrowed open.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &bytes_per_s as *const u64 as *const libc::c_void,
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let unsent = i32::try_from(paced_unsent(bytes_per_s)).unwrap_or(i32::MAX);
    crate::net::set_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, unsent)
}

/// The unsent bytes past which a socket paced to `bytes_per_s` takes no new buffer: 50 ms of its
/// pace, at least 4 KiB (a write's wake-up is then a small share of each wait). The kernel
/// looks at the mark only when a write needs a new buffer, and one grows to the size goal (up to
/// 64 KiB, or half the peer's window) first: what waits is at least about that much.
pub fn paced_unsent(bytes_per_s: u64) -> u64 {
    (bytes_per_s / 20).max(4 << 10)
}

/// Sends this process's stdout to `path` from now on, appended to what it holds (iperf3's
/// `--logfile`); stderr stays where it was.
pub fn stdout_to(path: &Path) -> io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    // SAFETY: both descriptors are open; dup2 replaces fd 1 atomically.
    match unsafe { libc::dup2(file.as_raw_fd(), libc::STDOUT_FILENO) } {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pacing rate is taken by a TCP socket and read back as set, and what it holds unsent
    /// is 50 ms of it (at least 4 KiB).
    #[test]
    fn a_socket_takes_a_pacing_rate() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        set_pacing(&sock, 1_250_000).unwrap();
        let got = crate::net::get_int(&sock, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).unwrap();
        assert_eq!(got, 1_250_000);
        let unsent = crate::net::get_int(&sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT);
        assert_eq!(unsent.unwrap(), 62_500);
        assert_eq!(paced_unsent(10_000), 4096);
    }
}
