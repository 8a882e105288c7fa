//! What a stream's stages add to its object: its TLS (`--tls`) and a cold read of its file
//! (`--cold`).

use serde::{Deserialize, Serialize};

/// A stream's TLS, as its handshake settled it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsJson {
    /// The cipher suite's IANA name (`TLS13_AES_128_GCM_SHA256`).
    pub suite: String,
    /// Its short name, as `--tls` takes it.
    pub cipher: String,
    /// The server's certificate was proved by the pre-shared key (`--auth-key`); false: pinned
    /// from the server's word alone (encrypted, its peer not authenticated).
    pub authenticated: bool,
    /// The SHA-256 of the certificate the server presented, in hex (empty in a record from
    /// before it was kept).
    #[serde(default)]
    pub cert_sha256: String,
    /// This client's records were sealed and opened by the kernel (kernel TLS, `--ktls`): the
    /// handshake made in the process, its keys then handed over. False: by rustls.
    #[serde(default)]
    pub kernel: bool,
}

impl TlsJson {
    /// The JSON of a suite, whether the key vouched for the server, its certificate's
    /// SHA-256, and whether the kernel sealed this end's records.
    pub fn of(
        cipher: tsperf_proto::tls::Cipher,
        authenticated: bool,
        cert_sha256: &[u8; 32],
        kernel: bool,
    ) -> TlsJson {
        TlsJson {
            suite: cipher.suite().to_owned(),
            cipher: cipher.name().to_owned(),
            authenticated,
            cert_sha256: cert_sha256.iter().map(|b| format!("{b:02x}")).collect(),
            kernel,
        }
    }
}

/// How a file read cold was put out of the page cache before it was sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColdJson {
    /// The way (`posix_fadvise(DONTNEED)`).
    pub method: String,
    /// Pages of the file (of a stream's stripe).
    pub pages: u64,
    /// Of them, in the page cache before.
    pub cached_before: u64,
    /// Of them, in the page cache after: 0 (else the run is refused).
    pub cached_after: u64,
}
