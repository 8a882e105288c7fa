//! Kernel TLS: a finished handshake's keys handed to the kernel, and the records it opens
//! read back by type (data, the peer's close_notify, a ticket passed over).

use std::io::{self, Read};
use std::os::fd::AsFd;

use super::cut_off;

/// Hands the kernel one direction's keys.
pub(super) fn install(
    sock: &impl AsFd,
    direction: tsperf_sys::ktls::Direction,
    seq: u64,
    secret: &rustls::ConnectionTrafficSecrets,
) -> io::Result<()> {
    use rustls::ConnectionTrafficSecrets as T;
    use tsperf_sys::ktls::Suite;
    let (suite, key, iv) = match secret {
        T::Aes128Gcm { key, iv } => (Suite::Aes128Gcm, key, iv),
        T::Aes256Gcm { key, iv } => (Suite::Aes256Gcm, key, iv),
        T::Chacha20Poly1305 { key, iv } => (Suite::Chacha20Poly1305, key, iv),
        _ => return Err(io::Error::other("a TLS suite kernel TLS does not take")),
    };
    let iv: &[u8; 12] = iv
        .as_ref()
        .try_into()
        .map_err(|_| io::Error::other("a TLS IV not of 12 bytes"))?;
    let secrets = tsperf_sys::ktls::Secrets {
        suite,
        key: key.as_ref(),
        iv,
        seq,
    };
    tsperf_sys::ktls::install(sock, direction, &secrets)
}

/// Reads plain bytes from a socket whose records the kernel opens: data, or `Ok(0)` once the
/// peer's close_notify is read; a ticket is passed over. Data is read through the socket's own
/// `read` (its waits and deadlines kept); a record of another type fails that read with `EIO`,
/// and is then read with its type.
pub(super) fn read<S: Read + AsFd>(
    sock: &mut S,
    buf: &mut [u8],
    client: bool,
    ended: &mut bool,
) -> io::Result<usize> {
    use tsperf_sys::ktls::{ALERT, HANDSHAKE};
    while !*ended {
        match sock.read(buf) {
            Ok(0) => return Err(cut_off(client)),
            Err(e) if tsperf_sys::ktls::is_other_record(&e) => {}
            other => return other,
        }
        let mut record = [0u8; 1024];
        match tsperf_sys::ktls::recv(sock, &mut record)? {
            (n, ALERT) if n >= 2 && record[1] == 0 => *ended = true,
            (n, ALERT) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS: the peer sent alert {}", record[n.min(2) - 1]),
                ));
            }
            // A session ticket (type 4) means nothing here; a key update (24) changes keys
            // the kernel holds and cannot follow.
            (n, HANDSHAKE) if n >= 1 && record[0] == 4 => {}
            (_, kind) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "TLS: a record of type {kind} after the handshake, which kernel TLS does \
                         not follow"
                    ),
                ));
            }
        }
    }
    Ok(0)
}
