//! The TLS configurations: the suites offered, the server's certificate (made at start, or the
//! operator's), and the client's pin of it.

use std::sync::Arc;

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::Digest;

use super::{Cipher, Records, Tls};

/// The most encrypted bytes a connection holds waiting for its socket: a write takes no more
/// plain bytes while this much is unsent.
pub const TLS_BUFFER: usize = 256 << 10;

/// The name the server's certificate is made for and the client asks for (never looked up).
const SERVER_NAME: &str = "tsperf";

/// The cipher suite of `cipher`, as rustls has it.
fn suite(cipher: Cipher) -> rustls::SupportedCipherSuite {
    use rustls::crypto::ring::cipher_suite as s;
    match cipher {
        Cipher::Aes128Gcm => s::TLS13_AES_128_GCM_SHA256,
        Cipher::Aes256Gcm => s::TLS13_AES_256_GCM_SHA384,
        Cipher::Chacha20Poly1305 => s::TLS13_CHACHA20_POLY1305_SHA256,
    }
}

/// The cipher of a negotiated suite.
pub fn cipher_of(suite: rustls::SupportedCipherSuite) -> Option<Cipher> {
    Cipher::ALL
        .into_iter()
        .find(|c| self::suite(*c).suite() == suite.suite())
}

/// The crypto provider with only TLS 1.3's suites, or one of them.
fn provider(only: Option<Cipher>) -> Arc<CryptoProvider> {
    // ring's provider has no post-quantum key exchange, which rustls now marks deprecated; a
    // stream's one key exchange is not what is measured here, its record cipher is (ring's
    // AES-GCM and ChaCha20-Poly1305), and ring builds with no toolchain beyond a C compiler.
    #[allow(deprecated)]
    let base = rustls::crypto::ring::default_provider();
    let cipher_suites = match only {
        Some(c) => vec![suite(c)],
        None => Cipher::ALL.into_iter().map(suite).collect(),
    };
    Arc::new(CryptoProvider {
        cipher_suites,
        ..base
    })
}

/// A server's TLS: a certificate made when it starts (self-signed, its key never leaves the
/// process), and the configuration every stream over TLS is served with.
#[derive(Debug)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    cert_sha256: [u8; 32],
    records: Records,
}

impl ServerTls {
    /// A fresh certificate and key (ECDSA P-256), and the TLS 1.3 configuration that presents
    /// it, offering the three suites (the client asks for one).
    pub fn ephemeral() -> Result<ServerTls> {
        let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])
            .context("cannot make the server's TLS certificate")?;
        let cert: CertificateDer<'static> = made.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
        ServerTls::presenting(vec![cert], key).context("the server's TLS certificate")
    }

    /// The operator's certificate (a PEM file, the chain with its own certificate first:
    /// `--tls-cert`) and its private key (a PEM file, PKCS#8, PKCS#1 or SEC1: `--tls-key`).
    /// The client pins it as it pins a certificate made at start: from the Accept, proved by
    /// the key where there is one.
    pub fn from_pem(cert: &std::path::Path, key: &std::path::Path) -> Result<ServerTls> {
        use rustls::pki_types::pem::{self, PemObject};
        let read = |flag: &str, path: &std::path::Path| {
            std::fs::read(path).with_context(|| format!("cannot read {flag} '{}'", path.display()))
        };
        let (cert_pem, key_pem) = (read("--tls-cert", cert)?, read("--tls-key", key)?);
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--tls-cert '{}': {e}", cert.display()))?;
        anyhow::ensure!(
            !chain.is_empty(),
            "--tls-cert '{}' holds no certificate: expected PEM (-----BEGIN CERTIFICATE-----)",
            cert.display()
        );
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
            pem::Error::NoItemsFound => anyhow::anyhow!(
                "--tls-key '{}' holds no private key: expected PEM (PKCS#8, PKCS#1 or SEC1)",
                key.display()
            ),
            other => anyhow::anyhow!("--tls-key '{}': {other}", key.display()),
        })?;
        ServerTls::presenting(chain, private).map_err(|e| match e.downcast_ref::<rustls::Error>() {
            Some(rustls::Error::InconsistentKeys(_)) => anyhow::anyhow!(
                "--tls-key '{}' is not the key of --tls-cert '{}'",
                key.display(),
                cert.display()
            ),
            _ => e.context(format!("--tls-cert '{}'", cert.display())),
        })
    }

    /// The TLS 1.3 configuration that presents `chain` (its own certificate first) with `key`,
    /// offering the three suites (the client asks for one).
    fn presenting(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<ServerTls> {
        let cert_sha256 = sha2::Sha256::digest(chain[0].as_ref()).into();
        let mut config = rustls::ServerConfig::builder_with_provider(provider(None))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3")?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        // No session is resumed, so no ticket is sent: nothing but the stream's records
        // follows the handshake (a client with kernel TLS reads them in the kernel).
        config.send_tls13_tickets = 0;
        config.enable_secret_extraction = true;
        Ok(ServerTls {
            config: Arc::new(config),
            cert_sha256,
            records: Records::Process,
        })
    }

    /// The SHA-256 of the certificate it presents (what the Accept names).
    pub fn cert_sha256(&self) -> [u8; 32] {
        self.cert_sha256
    }

    /// The server's end of a new stream over TLS.
    pub fn connection(&self) -> Result<Tls> {
        let mut c = rustls::ServerConnection::new(self.config.clone())
            .context("cannot start the server's TLS")?;
        c.set_buffer_limit(Some(TLS_BUFFER));
        Ok(Tls::user(
            rustls::Connection::Server(c),
            self.records == Records::Kernel,
        ))
    }

    /// The same, its streams' records sealed and opened where `records` says (`tsserver
    /// --ktls`: by the kernel, after each handshake).
    pub fn sealed_by(self, records: Records) -> ServerTls {
        ServerTls { records, ..self }
    }

    /// Where its streams' records are sealed and opened.
    pub fn records(&self) -> Records {
        self.records
    }
}

/// The client's end of a stream over TLS with `cipher`, taking only the certificate whose
/// SHA-256 is `pin`, its records sealed and opened where `records` says.
pub fn client(cipher: Cipher, pin: [u8; 32], records: Records) -> Result<Tls> {
    let provider = provider(Some(cipher));
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { pin, provider }))
        .with_no_client_auth();
    config.enable_secret_extraction = records == Records::Kernel;
    let name = ServerName::try_from(SERVER_NAME).context("the server's name")?;
    let mut c = rustls::ClientConnection::new(Arc::new(config), name)
        .context("cannot start the client's TLS")?;
    c.set_buffer_limit(Some(TLS_BUFFER));
    Ok(Tls::user(
        rustls::Connection::Client(c),
        records == Records::Kernel,
    ))
}

/// Takes the one certificate the Accept named (by its SHA-256), and its signatures as TLS 1.3
/// checks them; no certificate authority is asked.
#[derive(Debug)]
struct Pinned {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got: [u8; 32] = sha2::Sha256::digest(end_entity.as_ref()).into();
        if got == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the server presented another certificate than its Accept named".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not offered".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
