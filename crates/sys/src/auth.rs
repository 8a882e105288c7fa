//! Pre-shared-key authentication: challenge and response with HMAC-SHA256.
//!
//! A server started with `--auth-key FILE` answers every valid hello with a challenge: 32 random
//! bytes. The client answers with HMAC-SHA256(key, "tsperf-auth-v1" ‖ challenge), 32 bytes. The
//! server compares in constant time and refuses on any difference. The key never crosses the
//! wire, and each connection gets a fresh challenge, so a recorded answer is useless later.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Size of a challenge and of an answer.
pub const LEN: usize = 32;
/// The shortest key accepted.
pub const MIN_KEY: usize = 16;
/// The largest key file read: a secret, not a document (a device or a huge file is refused).
pub const MAX_KEY_FILE: u64 = 64 << 10;
const LABEL: &[u8] = b"tsperf-auth-v1";

/// A pre-shared key. Its bytes are never printed.
pub struct Key(Vec<u8>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Reads a key file (its bytes, with a trailing newline removed). Returns the key and, for a
    /// file others may read, a warning to print.
    pub fn load(path: &Path) -> Result<(Key, Option<String>)> {
        let shown = path.display();
        let mut bytes = crate::input::read_regular(path, MAX_KEY_FILE)
            .with_context(|| format!("cannot read key file '{shown}'"))?;
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read key file '{shown}'"))?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        if bytes.len() < MIN_KEY {
            bail!(
                "key file '{shown}' holds {} bytes: expected at least {MIN_KEY}",
                bytes.len()
            );
        }
        if bytes.iter().all(|b| b.is_ascii_whitespace() || *b == 0) {
            bail!(
                "key file '{shown}' holds only whitespace or NUL bytes: expected a secret of at \
                 least {MIN_KEY} bytes"
            );
        }
        let mode = meta.permissions().mode();
        let readers = if mode & 0o004 != 0 {
            Some("every user")
        } else if mode & 0o040 != 0 {
            Some("its group")
        } else {
            None
        };
        let warning = readers
            .map(|who| format!("warning: key file '{shown}' is readable by {who}; chmod 600 it"));
        Ok((Key(bytes), warning))
    }

    /// A key from bytes (tests and callers that have one in memory).
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }

    fn mac(&self, challenge: &[u8; LEN]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(LABEL);
        mac.update(challenge);
        mac
    }

    /// The answer to `challenge`.
    pub fn answer(&self, challenge: &[u8; LEN]) -> [u8; LEN] {
        self.mac(challenge).finalize().into_bytes().into()
    }

    /// The key's proof of a TLS certificate on a connection: the HMAC of its binding
    /// ([`tsperf_proto::tls::binding`], which starts with a label of its own, so it never
    /// equals an answer to a challenge).
    pub fn prove(&self, binding: &[u8; 80]) -> [u8; LEN] {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(binding);
        mac.finalize().into_bytes().into()
    }

    /// True when `answer` is right for `challenge`, compared in constant time.
    pub fn verify(&self, challenge: &[u8; LEN], answer: &[u8]) -> bool {
        self.mac(challenge).verify_slice(answer).is_ok()
    }
}

impl tsperf_proto::client::Prover for Key {
    fn answer(&self, challenge: &[u8; LEN]) -> [u8; LEN] {
        Key::answer(self, challenge)
    }

    fn prove(&self, binding: &[u8; 80]) -> [u8; LEN] {
        Key::prove(self, binding)
    }
}

impl tsperf_proto::serve::Authenticator for Key {
    fn verify(&self, challenge: &[u8; LEN], answer: &[u8; LEN]) -> bool {
        Key::verify(self, challenge, answer)
    }

    fn prove(&self, binding: &[u8; 80]) -> [u8; LEN] {
        Key::prove(self, binding)
    }
}

/// A fresh random challenge from the kernel.
pub fn challenge() -> [u8; LEN] {
    let mut c = [0u8; LEN];
    let mut got = 0;
    while got < LEN {
        // SAFETY: getrandom(2) writes at most the given length into our buffer.
        let n = unsafe { libc::getrandom(c[got..].as_mut_ptr().cast(), LEN - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!(
                "the kernel's random source failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The right key's answer verifies; another key's, another challenge's, or a cut answer do not.
    #[test]
    fn answers() {
        let key = Key::from_bytes(b"0123456789abcdef");
        let other = Key::from_bytes(b"0123456789abcdeF");
        let (c1, c2) = (challenge(), challenge());
        assert_ne!(c1, c2);
        let a = key.answer(&c1);
        assert!(key.verify(&c1, &a));
        assert!(!other.verify(&c1, &a));
        assert!(!key.verify(&c2, &a), "a replayed answer must fail");
        assert!(!key.verify(&c1, &a[..31]));
    }

    /// Key files: short ones refused, a trailing newline ignored, world-readable ones warned about.
    #[test]
    fn key_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k");
        std::fs::write(&p, b"short\n").unwrap();
        assert!(
            Key::load(&p)
                .unwrap_err()
                .to_string()
                .contains("expected at least 16")
        );
        std::fs::write(&p, b"0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (k, warn) = Key::load(&p).unwrap();
        assert!(warn.is_none());
        assert!(k.verify(
            &[7; LEN],
            &Key::from_bytes(b"0123456789abcdef").answer(&[7; LEN])
        ));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            Key::load(&p)
                .unwrap()
                .1
                .unwrap()
                .contains("readable by every user")
        );
        assert_eq!(format!("{k:?}"), "Key(..)");
    }
}
