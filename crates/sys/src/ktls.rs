//! Kernel TLS (the `tls` module: `CONFIG_TLS`): whether this kernel offers it, and handing it a
//! TLS 1.3 stream's keys after the handshake (done in the process), so that the socket's
//! writes, `sendfile` and reads carry records the kernel seals and opens.
//!
//! Once a direction's keys are installed ([`install`]), plain bytes written to the socket leave
//! as application-data records; a read ([`recv`]) returns one record type's plain bytes at a
//! time and says which type it was (an alert, a handshake message, or data); [`close_notify`]
//! sends the alert that ends a TLS stream cleanly.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

/// Why this kernel offers no kernel TLS; `Ok` where it does (`/proc/net/tls_stat` exists once
/// the `tls` module is loaded).
pub fn offered() -> Result<(), String> {
    offered_at(
        Path::new("/proc/net/tls_stat"),
        Path::new("/sys/module/tls"),
    )
}

fn offered_at(stat: &Path, module: &Path) -> Result<(), String> {
    if stat.exists() {
        return Ok(());
    }
    Err(if module.exists() {
        format!(
            "{} is missing though the tls module is loaded",
            stat.display()
        )
    } else {
        format!(
            "this kernel has no kernel TLS ({} is missing: CONFIG_TLS unset, or the tls module not \
             loaded: modprobe tls)",
            stat.display()
        )
    })
}

/// A TLS 1.3 suite the kernel can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// `TLS13_AES_128_GCM_SHA256`.
    Aes128Gcm,
    /// `TLS13_AES_256_GCM_SHA384`.
    Aes256Gcm,
    /// `TLS13_CHACHA20_POLY1305_SHA256`.
    Chacha20Poly1305,
}

/// One direction's traffic secrets, as the handshake left them: the suite, the key, the
/// 12-byte IV, and the sequence number of the next record.
pub struct Secrets<'a> {
    /// The suite.
    pub suite: Suite,
    /// The key (16 bytes for AES-128-GCM, else 32).
    pub key: &'a [u8],
    /// The IV (the nonce before the sequence number is mixed in).
    pub iv: &'a [u8; 12],
    /// The next record's sequence number.
    pub seq: u64,
}

/// Which of a socket's directions the keys are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// What this end writes (`TLS_TX`).
    Send,
    /// What this end reads (`TLS_RX`).
    Receive,
}

/// A TLS record's content type: application data.
pub const DATA: u8 = 23;
/// A TLS record's content type: an alert.
pub const ALERT: u8 = 21;
/// A TLS record's content type: a handshake message (after the handshake: a ticket, a key
/// update).
pub const HANDSHAKE: u8 = 22;

/// A plain read's error that says the next record is not data (`EIO`): read it with [`recv`].
pub fn is_other_record(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EIO)
}

/// Turns `sock` into a kernel TLS socket (`TCP_ULP` "tls"), before its keys are installed.
pub fn attach(sock: &impl AsFd) -> io::Result<()> {
    const ULP: &[u8] = b"tls";
    // SAFETY: the descriptor is borrowed open; the option value is a live slice of its length.
    let r = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            ULP.as_ptr().cast(),
            ULP.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOENT) => io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel has no kernel TLS (TCP_ULP \"tls\" is unknown: CONFIG_TLS unset, or \
             the tls module not loaded: modprobe tls)",
        ),
        _ => io::Error::new(e.kind(), format!("cannot make the socket kernel TLS: {e}")),
    })
}

/// Installs one direction's `secrets` on `sock` (attached first: [`attach`]).
pub fn install(sock: &impl AsFd, direction: Direction, secrets: &Secrets) -> io::Result<()> {
    let info = |cipher_type| libc::tls_crypto_info {
        version: libc::TLS_1_3_VERSION,
        cipher_type,
    };
    let seq = secrets.seq.to_be_bytes();
    let (iv, salt) = (&secrets.iv[4..], &secrets.iv[..4]);
    let wrong = || io::Error::new(io::ErrorKind::InvalidInput, "a TLS key of the wrong length");
    match secrets.suite {
        Suite::Aes128Gcm => set(
            sock,
            direction,
            &libc::tls12_crypto_info_aes_gcm_128 {
                info: info(libc::TLS_CIPHER_AES_GCM_128),
                iv: iv.try_into().map_err(|_| wrong())?,
                key: secrets.key.try_into().map_err(|_| wrong())?,
                salt: salt.try_into().map_err(|_| wrong())?,
                rec_seq: seq,
            },
        ),
        Suite::Aes256Gcm => set(
            sock,
            direction,
            &libc::tls12_crypto_info_aes_gcm_256 {
                info: info(libc::TLS_CIPHER_AES_GCM_256),
                iv: iv.try_into().map_err(|_| wrong())?,
                key: secrets.key.try_into().map_err(|_| wrong())?,
                salt: salt.try_into().map_err(|_| wrong())?,
                rec_seq: seq,
            },
        ),
        Suite::Chacha20Poly1305 => set(
            sock,
            direction,
            &libc::tls12_crypto_info_chacha20_poly1305 {
                info: info(libc::TLS_CIPHER_CHACHA20_POLY1305),
                iv: *secrets.iv,
                key: secrets.key.try_into().map_err(|_| wrong())?,
                salt: [],
                rec_seq: seq,
            },
        ),
    }
}

/// `setsockopt(SOL_TLS, TLS_TX or TLS_RX)` with one suite's crypto info.
fn set<T>(sock: &impl AsFd, direction: Direction, info: &T) -> io::Result<()> {
    let name = match direction {
        Direction::Send => libc::TLS_TX,
        Direction::Receive => libc::TLS_RX,
    };
    // SAFETY: the descriptor is borrowed open; `info` is a live `repr(C)` struct of its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_TLS,
            name,
            (info as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("the kernel refused the TLS keys: {e}"),
        ))
    }
}

/// The control buffer of one record-type message (`CMSG_SPACE(1)`, aligned).
#[repr(C, align(8))]
struct Control([u8; 24]);

/// Reads plain bytes of one record type from a socket whose receiving keys are installed:
/// the bytes read and the records' content type ([`DATA`], [`ALERT`], [`HANDSHAKE`]).
pub fn recv(sock: &impl AsFd, buf: &mut [u8]) -> io::Result<(usize, u8)> {
    let mut control = Control([0; 24]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr is a valid empty message; its pointers are set to live locals
    // below, which outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: the descriptor is borrowed open; `msg` points at live buffers of their lengths.
    let n = unsafe { libc::recvmsg(sock.as_fd().as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut kind = DATA;
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_TLS && (*c).cmsg_type == libc::TLS_GET_RECORD_TYPE {
                kind = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, kind))
}

/// Sends the close_notify alert on a socket whose sending keys are installed: the TLS stream
/// ends cleanly there.
pub fn close_notify(sock: &impl AsFd) -> io::Result<()> {
    let mut control = Control([0; 24]);
    let mut alert = [1u8, 0]; // warning, close_notify
    let mut iov = libc::iovec {
        iov_base: alert.as_mut_ptr().cast(),
        iov_len: alert.len(),
    };
    // SAFETY: as in `recv`; the one control message is written inside the buffer's length.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_TLS;
        (*c).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(c) = ALERT;
        libc::sendmsg(sock.as_fd().as_raw_fd(), &msg, 0)
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel TLS is offered where its statistics file is, and its absence says why.
    #[test]
    fn offered_where_its_statistics_are() {
        let d = tempfile::tempdir().unwrap();
        let stat = d.path().join("tls_stat");
        let module = d.path().join("tls");
        let e = offered_at(&stat, &module).unwrap_err();
        assert!(
            e.contains("no kernel TLS") && e.contains("CONFIG_TLS"),
            "{e}"
        );
        std::fs::write(&stat, "TlsCurrTxSw 0\n").unwrap();
        assert_eq!(offered_at(&stat, &module), Ok(()));
    }
}
