//! The data stream over TLS 1.3 (version 14): the cipher suite a hello asks for, the server
//! certificate's fingerprint its Accept names, and the proof that binds that fingerprint to the
//! pre-shared key (`--auth-key`), so a client pins the certificate it will meet in the TLS
//! handshake. The hello, its answer and the clock queries stay in the clear; the TLS handshake
//! starts where the data would (a forward stream: the client's first data byte; a reverse
//! stream: the server's), and the data, its trailer and the report go through TLS.

/// The TLS 1.3 cipher suites a stream may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// `TLS13_AES_128_GCM_SHA256`.
    Aes128Gcm,
    /// `TLS13_AES_256_GCM_SHA384`.
    Aes256Gcm,
    /// `TLS13_CHACHA20_POLY1305_SHA256`.
    Chacha20Poly1305,
}

impl Cipher {
    /// Every suite, in wire order (the hello's code is the index plus one).
    pub const ALL: [Cipher; 3] = [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Chacha20Poly1305,
    ];

    /// Its short name, as the flag takes it and the JSON shows it.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes128gcm",
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::Chacha20Poly1305 => "chacha20poly1305",
        }
    }

    /// The suite's IANA name.
    pub fn suite(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "TLS13_AES_128_GCM_SHA256",
            Cipher::Aes256Gcm => "TLS13_AES_256_GCM_SHA384",
            Cipher::Chacha20Poly1305 => "TLS13_CHACHA20_POLY1305_SHA256",
        }
    }

    /// The suite of a short name.
    pub fn named(name: &str) -> Option<Cipher> {
        Cipher::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The wire code: 0 = clear text, 1-3 the suites in [`Cipher::ALL`]'s order.
    pub(crate) fn code(tls: Option<Cipher>) -> u8 {
        tls.map_or(0, |c| c as u8 + 1)
    }

    /// The suite of a wire code; `None` for an unknown code.
    pub(crate) fn of(code: u8) -> Option<Option<Cipher>> {
        match code {
            0 => Some(None),
            _ => Cipher::ALL.get(usize::from(code) - 1).copied().map(Some),
        }
    }
}

/// The server's TLS identity, as its Accept names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The SHA-256 of the certificate (DER) the server will present.
    pub cert_sha256: [u8; 32],
    /// The key's proof over [`binding`] of this connection's challenge and the fingerprint, from
    /// a server that authenticates its clients (`--auth-key`); `None` from one that does not:
    /// then nothing vouches for the certificate.
    pub proof: Option<[u8; 32]>,
}

/// The label a proof starts with, so no other use of the key (a client's answer to a
/// challenge) can stand for one.
const LABEL: &[u8; 16] = b"tsperf tls cert\0";

/// What a proof of `cert_sha256` on the connection challenged with `challenge` is taken over.
pub fn binding(challenge: &[u8; 32], cert_sha256: &[u8; 32]) -> [u8; 80] {
    let mut b = [0u8; 80];
    b[..16].copy_from_slice(LABEL);
    b[16..48].copy_from_slice(challenge);
    b[48..].copy_from_slice(cert_sha256);
    b
}
