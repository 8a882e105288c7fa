//! Socket plumbing shared by both ends: connecting with a deadline, reading one protocol frame
//! from a blocking socket, asking the kernel what buffer sizes a socket got, and `sendfile`.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::protocol::{Frame, decode_frame};

/// The addresses `host:port` resolves to; an error names the host.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    Ok((host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host '{host}'"))?
        .collect())
}

/// Resolves `host:port` and connects to the first address that answers within `timeout`.
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream> {
    let addrs = resolve(host, port)?;
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, timeout) {
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

/// Reads exactly one frame from a socket with blocking meaning, keeping nothing past it. `what` names the
/// frame the caller waits for, for the error message.
pub fn read_frame<R: Read>(stream: &mut R, what: &str) -> Result<Frame> {
    let mut buf = [0u8; crate::protocol::FRAME_HEADER + crate::protocol::MAX_FRAME_BODY];
    let mut have = 0;
    loop {
        match decode_frame(&buf[..have]) {
            Ok(Some((frame, _))) => return Ok(frame),
            Ok(None) => {}
            Err(e) => return Err(e).with_context(|| format!("bad {what} from the server")),
        }
        // Read only what the frame still needs, so no byte after it is consumed.
        let need = if have < crate::protocol::FRAME_HEADER {
            crate::protocol::FRAME_HEADER - have
        } else {
            let body = u16::from_be_bytes([buf[1], buf[2]]) as usize;
            crate::protocol::FRAME_HEADER + body - have
        };
        match stream.read(&mut buf[have..have + need]) {
            Ok(0) => bail!("the server closed the connection before its {what}"),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => bail!("timed out waiting for the server's {what}"),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("lost the connection waiting for the server's {what}")
                });
            }
        }
    }
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
