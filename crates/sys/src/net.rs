//! Socket plumbing shared by both ends: connecting with a deadline, reading one protocol frame
//! from a blocking socket, asking the kernel what buffer sizes a socket got, and `sendfile`.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use tsperf_proto::{Frame, decode_frame};

/// The addresses `host:port` resolves to; an error names the host.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let addrs = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host '{host}'"))?
        .collect();
    crate::client_net::of_family(host, addrs)
}

/// Splits what a user typed for `--host` into a host and, if it named one, a port: `name`,
/// `192.0.2.1`, `::1`, `[::1]`, and each of those but the bare IPv6 form with `:PORT`. An IPv6
/// address may carry its zone (`fe80::1%eth0`, `[fe80::1%eth0]:7433`).
pub fn split_host(text: &str) -> Result<(String, Option<u16>), String> {
    let bad = || {
        format!(
            "invalid host '{text}': expected a name or an address, optionally with :PORT (IPv6 in brackets: [::1]:7433)"
        )
    };
    let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        // An address, with its zone after a '%' (`fe80::1%eth0`) if it has one.
        let addr = match host.split_once('%') {
            Some((addr, zone)) if !zone.is_empty() => addr,
            Some(_) => return Err(bad()),
            None => host,
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad());
        }
        return match after {
            "" => Ok((host.to_owned(), None)),
            p => Ok((
                host.to_owned(),
                Some(port(p.strip_prefix(':').ok_or_else(bad)?)?),
            )),
        };
    }
    match text.split_once(':') {
        _ if text.is_empty() => Err(bad()),
        Some(("", p)) if !p.contains(':') => Err(bad()),
        // One colon: HOST:PORT. More: a bare IPv6 address.
        Some((host, p)) if !p.contains(':') && !host.is_empty() => {
            Ok((host.to_owned(), Some(port(p)?)))
        }
        _ => match port_typed_on(text) {
            Some((addr, p)) => Err(format!(
                "ambiguous host '{text}': an IPv6 address with a port takes brackets: did you \
                 mean [{addr}]:{p}? (for the address {text} itself, write [{text}])"
            )),
            None => Ok((text.to_owned(), None)),
        },
    }
}

/// A bare IPv6 address whose last group reads as a port typed after it (4 or 5 decimal digits,
/// up to 65535, the rest an address of its own): `::1:7433`.
fn port_typed_on(text: &str) -> Option<(&str, u16)> {
    let (addr, last) = text.rsplit_once(':')?;
    let port: u16 = last.parse().ok()?;
    let looks = (4..=5).contains(&last.len()) && last.bytes().all(|b| b.is_ascii_digit());
    (looks && addr.parse::<std::net::Ipv6Addr>().is_ok()).then_some((addr, port))
}

/// What `--bind` names: an address, and a port if it was given as `HOST:PORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind {
    /// The address.
    pub ip: std::net::IpAddr,
    /// The port, when it named one.
    pub port: Option<u16>,
}

/// Parses `--bind` as [`split_host`] reads `--host` (a name, an address, IPv6 bare or in
/// brackets, optionally with `:PORT`); a name is resolved to its first address.
pub fn parse_bind(text: &str) -> Result<Bind, String> {
    let bad = || {
        format!(
            "invalid address '{text}': expected an IP address or a host name that resolves, \
             optionally with :PORT (IPv6 in brackets: [::1]:7433)"
        )
    };
    let (host, port) = split_host(text).map_err(|_| bad())?;
    if let Ok(ip) = host.parse() {
        return Ok(Bind { ip, port });
    }
    match (host.as_str(), 0).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(addr)) => Ok(Bind {
            ip: addr.ip(),
            port,
        }),
        _ => Err(bad()),
    }
}

/// Resolves `host:port` and connects to the first address that answers, all within `timeout`
/// (a deadline for the whole attempt, however many addresses the name has). An address that
/// has not answered after [`CONNECT_NOTICE`] is passed to `silent` with the time still left.
pub fn connect(
    host: &str,
    port: u16,
    timeout: Duration,
    silent: &mut dyn FnMut(&SocketAddr, Duration),
) -> Result<TcpStream> {
    let addrs = resolve(host, port)?;
    let by = std::time::Instant::now() + timeout;
    let mut last = None;
    for addr in &addrs {
        let left = by.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            last = Some((addr, io::ErrorKind::TimedOut.into()));
            break;
        }
        let tried = match crate::client_net::local_for(addr) {
            // Bound to a local address (-B, --cport): one try of the whole time.
            Some(local) => crate::client_net::connect_from(addr, local, left),
            // A first try of CONNECT_NOTICE; then, said, the rest of the time.
            None => match TcpStream::connect_timeout(addr, left.min(CONNECT_NOTICE)) {
                Err(e) if e.kind() == io::ErrorKind::TimedOut && left > CONNECT_NOTICE => {
                    silent(addr, left - CONNECT_NOTICE);
                    TcpStream::connect_timeout(addr, left - CONNECT_NOTICE)
                }
                other => other,
            },
        };
        match tried {
            Ok(s) => return Ok(s),
            Err(e) => last = Some((addr, e)),
        }
    }
    match last {
        Some((addr, e)) if e.kind() == io::ErrorKind::TimedOut => Err(anyhow!(
            "could not connect to {addr}: no answer within {} s",
            timeout.as_secs_f64()
        )),
        Some((addr, e)) => Err(e).with_context(|| format!("could not connect to {addr}")),
        None => bail!("host '{host}' resolved to no address"),
    }
}

/// How long a connect may go unanswered before the caller is told (`silent`): a host that
/// drops the SYNs (down, or a firewall) is otherwise the whole timeout of silence.
pub const CONNECT_NOTICE: Duration = Duration::from_secs(2);

/// A read of a frame that timed out (the socket's timeout, or the caller's deadline).
#[derive(Debug, thiserror::Error)]
#[error("timed out waiting for the server's {0}")]
pub struct TimedOut(pub String);

/// The server closed the connection before the frame awaited (named).
#[derive(Debug, thiserror::Error)]
#[error("the server closed the connection before its {0}")]
pub struct Closed(pub String);

/// The server's bytes do not decode as a frame: what was awaited, what the decoder said, and
/// the bytes it was given.
#[derive(Debug, thiserror::Error)]
#[error("bad {what} from the server: {error}")]
pub struct BadFrame {
    /// The frame that was awaited.
    pub what: String,
    /// What the decoder said.
    pub error: tsperf_proto::ProtocolError,
    /// The bytes it was given.
    pub bytes: Vec<u8>,
}

/// Reads exactly one frame from a socket with blocking meaning, keeping nothing past it. `what`
/// names the frame the caller waits for, for the error message; a timeout is [`TimedOut`].
pub fn read_frame<R: Read>(stream: &mut R, what: &str) -> Result<Frame> {
    let mut buf = [0u8; tsperf_proto::FRAME_HEADER + tsperf_proto::MAX_FRAME_BODY];
    let mut have = 0;
    loop {
        match decode_frame(&buf[..have]) {
            Ok(Some((frame, _))) => return Ok(frame),
            Ok(None) => {}
            Err(error) => {
                return Err(BadFrame {
                    what: what.to_owned(),
                    error,
                    bytes: buf[..have].to_vec(),
                }
                .into());
            }
        }
        // Read only what the frame still needs, so no byte after it is consumed.
        let need = if have < tsperf_proto::FRAME_HEADER {
            tsperf_proto::FRAME_HEADER - have
        } else {
            let body = u16::from_be_bytes([buf[1], buf[2]]) as usize;
            tsperf_proto::FRAME_HEADER + body - have
        };
        match stream.read(&mut buf[have..have + need]) {
            Ok(0) => return Err(Closed(what.to_owned()).into()),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(TimedOut(what.to_owned()).into()),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("lost the connection waiting for the server's {what}")
                });
            }
        }
    }
}

/// Waits up to `wait` for `sock` to have something to read (data, or its peer's close); true
/// if it has. One `poll(2)`: it takes nothing from the socket, and an edge-triggered event loop
/// watching it loses no event. An interrupted or failed poll reads as not readable.
pub fn readable_within<S: std::os::fd::AsFd>(sock: &S, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: sock.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = wait.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one live pollfd, count 1.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents != 0
}

/// True for the errors a socket timeout produces (`SO_RCVTIMEO`/`SO_SNDTIMEO` give EAGAIN).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The receive buffer size the kernel gave the socket (0 if it will not say).
pub fn recv_buffer<S: std::os::fd::AsFd>(stream: &S) -> u32 {
    socket2::SockRef::from(stream)
        .recv_buffer_size()
        .map_or(0, |n| n as u32)
}

/// One `sendfile(2)`: up to `len` bytes of `file` from `offset` straight to the socket `sock`,
/// without copying them through this process. Returns the bytes sent; 0 means the file ended
/// at `offset`.
pub fn sendfile<S: std::os::fd::AsFd>(
    sock: &S,
    file: &std::fs::File,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: both descriptors are open for the duration of the call (borrowed), and `off` is
    // a live local the kernel updates.
    let n = unsafe { libc::sendfile(sock.as_fd().as_raw_fd(), file.as_raw_fd(), &mut off, len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Leaves delayed-ACK "ping-pong" mode on `sock` (Linux `TCP_QUICKACK`), so data it receives is
/// acknowledged promptly again.
///
/// Linux treats a socket that sends data soon after receiving some as interactive and from
/// then on delays its ACKs, expecting to piggyback them on the next reply. A stream's hello
/// answered with an accept is exactly that, but no reply follows for the whole file: the server
/// held back ACKs, the client (Nagle on, as in the seed) held back its partial segments waiting
/// for them, and about a third of 36 MiB transfers at 10240-byte chunks ran at 500 MiB/s instead
/// of 1300 on loopback. The same trap as the seed's 40 ms clock queries, on the other side.
/// The mode is left until the socket sends data again, so once after the accept is enough.
/// A no-op elsewhere.
#[cfg(target_os = "linux")]
pub fn quickack<S: std::os::fd::AsFd>(sock: &S) -> io::Result<()> {
    set_int(sock, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
}

/// Linux only: elsewhere there is nothing to leave.
#[cfg(not(target_os = "linux"))]
pub fn quickack<S: std::os::fd::AsFd>(_sock: &S) -> io::Result<()> {
    Ok(())
}

/// Sets an integer socket option (`setsockopt` of a C `int`).
pub fn set_int<S: std::os::fd::AsFd>(
    sock: &S,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `value` is a live c_int and its size is passed; the descriptor is borrowed open.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads an integer socket option (`getsockopt` of a C `int`).
pub fn get_int<S: std::os::fd::AsFd>(
    sock: &S,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    use std::os::fd::AsRawFd;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals of the sizes passed; the descriptor is
    // borrowed open.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

#[cfg(test)]
mod host_tests {
    use super::*;

    /// Every form a user types for --host, and the malformed ones refused with the input named.
    #[test]
    fn host_forms() {
        let ok =
            |t: &str, h: &str, p: Option<u16>| assert_eq!(split_host(t), Ok((h.into(), p)), "{t}");
        ok("localhost", "localhost", None);
        ok("192.0.2.1", "192.0.2.1", None);
        ok("::1", "::1", None);
        ok("[::1]", "::1", None);
        ok("[::1]:7433", "::1", Some(7433));
        ok("host:80", "host", Some(80));
        ok("192.0.2.1:5201", "192.0.2.1", Some(5201));
        // Issue 23 (13): a link-local address with its zone, bare or in brackets.
        ok("fe80::1%lo", "fe80::1%lo", None);
        ok("[fe80::1%lo]", "fe80::1%lo", None);
        ok("[fe80::1%lo]:7433", "fe80::1%lo", Some(7433));
        for bad in [
            "",
            "[::1",
            "[::1]x",
            "[nothost]:1",
            "[fe80::1%]:1",
            "[192.0.2.1%lo]:1",
            "host:",
            "host:99999",
            ":80",
        ] {
            let e = split_host(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
        // A bare IPv6 address whose last group reads as a port: the user meant brackets.
        let e = split_host("::1:7433").unwrap_err();
        assert!(e.contains("did you mean [::1]:7433?"), "{e}");
        assert!(e.contains("[::1:7433]"), "{e}");
        ok("[::1:7433]", "::1:7433", None);
        ok("fe80::1:2", "fe80::1:2", None);
        let bind = |ip: &str, port| {
            Ok(Bind {
                ip: ip.parse().unwrap(),
                port,
            })
        };
        assert_eq!(parse_bind("[::]"), bind("::", None));
        assert_eq!(parse_bind("::1"), bind("::1", None));
        assert_eq!(parse_bind("[::1]:7433"), bind("::1", Some(7433)));
        assert_eq!(parse_bind("127.0.0.1"), bind("127.0.0.1", None));
        assert_eq!(parse_bind("127.0.0.1:0"), bind("127.0.0.1", Some(0)));
        assert!(parse_bind("localhost:9").is_ok_and(|b| b.ip.is_loopback() && b.port == Some(9)));
        assert!(
            parse_bind("no such host.invalid")
                .unwrap_err()
                .contains("'no such host.invalid'")
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// Linux's `TCP_QUICKACK` reads 0 while a socket is in ping-pong mode.
    fn quick(s: &TcpStream) -> libc::c_int {
        super::get_int(s, libc::IPPROTO_TCP, libc::TCP_QUICKACK).unwrap()
    }

    /// A request answered at once puts the answering socket in ping-pong mode (delayed ACKs);
    /// `quickack` takes it out.
    #[test]
    fn quickack_leaves_ping_pong_mode() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        // A reply counts as prompt within the delayed-ACK timeout (40 ms or more); a test
        // machine under load may miss that once, so a few exchanges are allowed.
        let mut buf = [0u8; 6];
        for _ in 0..5 {
            c.write_all(b"hello").unwrap();
            s.read_exact(&mut buf[..5]).unwrap();
            s.write_all(b"accept").unwrap();
            c.read_exact(&mut buf).unwrap();
            if quick(&s) == 0 {
                break;
            }
        }
        assert_eq!(quick(&s), 0, "a prompt reply should enter ping-pong mode");
        super::quickack(&s).unwrap();
        assert_eq!(quick(&s), 1);
    }
}

/// What a socket has to read now, without waiting: `Ok(Some(n))` bytes taken (0: the peer
/// closed), `Ok(None)`: nothing yet. Reads at most `buf.len()` bytes (`MSG_DONTWAIT`), whatever
/// the socket's mode.
pub fn read_now<S: std::os::fd::AsFd>(sock: &S, buf: &mut [u8]) -> io::Result<Option<usize>> {
    use std::os::fd::AsRawFd;
    let fd = sock.as_fd().as_raw_fd();
    loop {
        // SAFETY: recv(2) writes at most `buf.len()` bytes into `buf`, a live slice.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
}

/// Spins until `sock` has a byte to read (or the peer closed it, or it failed), peeking without
/// blocking, or until `deadline`: busy polling, which keeps the calling CPU out of its sleep
/// states while it waits. Returns `TimedOut` at the deadline; the data stays queued.
pub fn spin_until_readable<S: std::os::fd::AsFd>(
    sock: &S,
    deadline: std::time::Instant,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = sock.as_fd().as_raw_fd();
    let mut byte = 0u8;
    let mut spins = 0u32;
    loop {
        // SAFETY: recv(2) writes at most one byte into `byte`, a live local.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {}
            _ => return Ok(()),
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) && std::time::Instant::now() >= deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        std::hint::spin_loop();
    }
}
