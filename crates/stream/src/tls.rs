//! The data stream over TLS 1.3 (rustls): the server's ephemeral certificate, the client's pin
//! of it, and [`Wire`], a connection's bytes in the clear or through TLS behind `Read` and
//! `Write`, on a blocking socket or a non-blocking one alike.
//!
//! A [`Wire`] with TLS keeps the blocking or non-blocking meaning of its socket: a read returns
//! plain bytes, or `WouldBlock` when TLS has none and the socket has nothing more; a write takes
//! plain bytes into TLS's buffer (at most [`TLS_BUFFER`] of records waiting), sends what the
//! socket takes, and says `WouldBlock` only when it could take nothing. A pending handshake is
//! driven by whichever comes first. `flush` sends every record waiting; [`Wire::close`] ends
//! the TLS (close_notify) where the clear stream would close or half-close.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::Digest;

pub use tsperf_proto::tls::Cipher;

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
        Ok(Tls::user(rustls::Connection::Server(c), false))
    }
}

/// Where a stream's records are sealed and opened once its handshake is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// In this process (rustls).
    Process,
    /// In the kernel (kernel TLS): the keys are handed to it after the handshake, and the
    /// socket's writes, `sendfile` and reads carry plain bytes.
    Kernel,
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

/// The most bytes one read from the socket takes for TLS: records are then handed to rustls
/// from memory, so a stream costs a system call per this much, not per record (16 KiB).
pub const TLS_READ: usize = 256 << 10;

/// One end's TLS state for a stream.
pub struct Tls(State);

// Each driver holds its `Tls` boxed, once per connection over TLS: the small variant saves
// nothing worth an indirection on every record.
#[allow(clippy::large_enum_variant)]
enum State {
    /// Records sealed and opened by rustls; `kernel`: handed to the kernel once the
    /// handshake is done (the socket is then read a record at a time until it is, so no
    /// record after the handshake is read into this process).
    User {
        tls: rustls::Connection,
        raw: Raw,
        kernel: bool,
    },
    /// Records sealed and opened by the kernel; `ended` once the peer's close_notify is read.
    Kernel {
        cipher: Cipher,
        client: bool,
        ended: bool,
    },
    /// The handover to the kernel failed: the keys are gone from the process.
    Lost,
}

/// Records read from the socket ahead of rustls ([`TLS_READ`] at once; allocated at the first
/// read), or, while a handshake whose keys go to the kernel runs, no further than the end of
/// the record being read.
#[derive(Default)]
struct Raw {
    buf: Vec<u8>,
    at: usize,
    len: usize,
    /// Reading record by record: the current record's header bytes read (0-5), and then its
    /// body's bytes still to read.
    exact: Option<(usize, [u8; 5], usize)>,
}

impl Raw {
    /// The most the next read from the socket may take.
    fn room(&self) -> usize {
        match self.exact {
            None => TLS_READ,
            Some((got, _, _)) if got < 5 => 5 - got,
            Some((_, _, body)) => body,
        }
    }

    /// Follows the record boundaries over `bytes`, just read (no more than [`Raw::room`]).
    fn saw(&mut self, bytes: &[u8]) {
        let Some((got, head, body)) = self.exact.as_mut() else {
            return;
        };
        if *got < 5 {
            head[*got..*got + bytes.len()].copy_from_slice(bytes);
            *got += bytes.len();
            if *got == 5 {
                *body = usize::from(u16::from_be_bytes([head[3], head[4]]));
            }
        } else {
            *body -= bytes.len();
        }
        if *got == 5 && *body == 0 {
            *got = 0;
        }
    }

    /// Hands rustls what is held, reading the socket first when nothing is: the bytes handed
    /// (`Ok(0)` at the socket's end).
    fn feed(&mut self, sock: &mut impl Read, tls: &mut rustls::Connection) -> io::Result<usize> {
        if self.at == self.len {
            if self.buf.is_empty() {
                self.buf = vec![0; TLS_READ];
            }
            let room = self.room();
            self.len = sock.read(&mut self.buf[..room])?;
            self.at = 0;
            if self.len == 0 {
                // rustls learns of the end as it does from a socket: a read of nothing.
                return tls.read_tls(&mut io::empty());
            }
            let (buf, len) = (std::mem::take(&mut self.buf), self.len);
            self.saw(&buf[..len]);
            self.buf = buf;
        }
        let n = tls.read_tls(&mut &self.buf[self.at..self.len])?;
        self.at += n;
        Ok(n)
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("records", &self.records())
            .field("cipher", &self.cipher())
            .finish()
    }
}

impl Tls {
    /// rustls's connection, its records handed to the kernel after the handshake if `kernel`.
    fn user(tls: rustls::Connection, kernel: bool) -> Tls {
        let raw = Raw {
            exact: kernel.then_some((0, [0; 5], 0)),
            ..Raw::default()
        };
        Tls(State::User { tls, raw, kernel })
    }

    /// The suite the handshake settled on, once it has.
    pub fn cipher(&self) -> Option<Cipher> {
        match &self.0 {
            State::User { tls, .. } => tls.negotiated_cipher_suite().and_then(cipher_of),
            State::Kernel { cipher, .. } => Some(*cipher),
            State::Lost => None,
        }
    }

    /// Where its records are sealed and opened (kernel TLS only once the keys were handed
    /// over, after the handshake).
    pub fn records(&self) -> Records {
        match self.0 {
            State::Kernel { .. } => Records::Kernel,
            _ => Records::Process,
        }
    }

    /// Hands the keys to the kernel where that is asked and the handshake is done, after
    /// sending what rustls has waiting (`WouldBlock` where the socket takes none of it).
    fn settle<S: Write + AsFd>(&mut self, sock: &mut S) -> io::Result<()> {
        let State::User { tls, kernel, .. } = &mut self.0 else {
            return Ok(());
        };
        if !*kernel || tls.is_handshaking() {
            return Ok(());
        }
        push(sock, tls)?;
        let State::User { tls, .. } = std::mem::replace(&mut self.0, State::Lost) else {
            unreachable!("matched above")
        };
        let client = matches!(tls, rustls::Connection::Client(_));
        let cipher = tls.negotiated_cipher_suite().and_then(cipher_of);
        let secrets = tls.dangerous_extract_secrets().map_err(|e| {
            io::Error::other(format!("cannot take the TLS keys for the kernel: {e}"))
        })?;
        let cipher = cipher.ok_or_else(|| io::Error::other("TLS settled on no known suite"))?;
        tsperf_sys::ktls::attach(sock)?;
        for (direction, (seq, secret)) in [
            (tsperf_sys::ktls::Direction::Send, secrets.tx),
            (tsperf_sys::ktls::Direction::Receive, secrets.rx),
        ] {
            install(sock, direction, seq, &secret)?;
        }
        self.0 = State::Kernel {
            cipher,
            client,
            ended: false,
        };
        Ok(())
    }
}

/// Hands the kernel one direction's keys.
fn install(
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

/// Sends what TLS has waiting until it has none (`Ok`), or the socket takes no more
/// (`WouldBlock`).
fn push(sock: &mut impl Write, tls: &mut rustls::Connection) -> io::Result<()> {
    while tls.wants_write() {
        if tls.write_tls(sock)? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// A connection's bytes: in the clear on `sock`, or through `tls` once a stream over TLS has
/// begun ([`Wire::new`] borrows both, so a driver keeps its socket and its TLS state apart).
pub struct Wire<'a, S> {
    sock: &'a mut S,
    tls: Option<&'a mut Tls>,
}

impl<'a, S: Read + Write + AsFd> Wire<'a, S> {
    /// The bytes of `sock`, through `tls` where there is one.
    pub fn new(sock: &'a mut S, tls: Option<&'a mut Tls>) -> Wire<'a, S> {
        Wire { sock, tls }
    }

    /// Takes what the socket has into TLS and processes it: `Ok(false)` at the socket's end.
    fn pull(sock: &mut S, tls: &mut rustls::Connection, raw: &mut Raw) -> io::Result<bool> {
        let n = raw.feed(sock, tls)?;
        if let Err(e) = tls.process_new_packets() {
            // An alert for the peer, where the socket takes it.
            let _ = push(sock, tls);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS: {e}"),
            ));
        }
        Ok(n != 0)
    }

    /// Drives a handshake not yet done, as far as the socket allows (`WouldBlock` where it
    /// waits), then hands the keys to the kernel where that is asked.
    fn handshake(sock: &mut S, t: &mut Tls) -> io::Result<()> {
        if let State::User { tls, raw, .. } = &mut t.0 {
            while tls.is_handshaking() {
                push(sock, tls)?;
                if !tls.is_handshaking() {
                    break;
                }
                if tls.wants_read() && !Self::pull(sock, tls, raw)? {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection closed during the TLS handshake",
                    ));
                }
            }
            push(sock, tls)?;
        }
        t.settle(sock)
    }

    /// Ends this end's TLS (its close_notify) and sends what is waiting; nothing in the clear.
    pub fn close(&mut self) -> io::Result<()> {
        let Some(t) = self.tls.as_deref_mut() else {
            return Ok(());
        };
        t.settle(self.sock)?;
        match &mut t.0 {
            State::User { tls, .. } => {
                tls.send_close_notify();
                push(self.sock, tls)
            }
            State::Kernel { .. } => tsperf_sys::ktls::close_notify(self.sock),
            State::Lost => Err(lost()),
        }
    }

    /// The suite a stream over TLS settled on; `None` in the clear or before its handshake.
    pub fn cipher(&self) -> Option<Cipher> {
        self.tls.as_deref().and_then(Tls::cipher)
    }

    /// True while the stream is over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// A stream whose keys could not be handed to the kernel.
fn lost() -> io::Error {
    io::Error::other("the stream's TLS keys were lost in their handover to the kernel")
}

/// A peer's TLS stream that ended without its close_notify: cut off (a peer gone, a relay
/// dropped), not ended.
fn cut_off(client: bool) -> io::Error {
    let peer = match client {
        true => "the server's",
        false => "the client's",
    };
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "{peer} TLS stream was cut off mid-stream (its connection closed without a \
             close_notify)"
        ),
    )
}

/// Reads plain bytes from a socket whose records the kernel opens: data, or `Ok(0)` once the
/// peer's close_notify is read; a ticket is passed over. Data is read through the socket's own
/// `read` (its waits and deadlines kept); a record of another type fails that read with `EIO`,
/// and is then read with its type.
fn kernel_read<S: Read + AsFd>(
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

impl<S: Read + Write + AsFd> Read for Wire<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(t) = self.tls.as_deref_mut() else {
            return self.sock.read(buf);
        };
        loop {
            t.settle(self.sock)?;
            let (tls, raw) = match &mut t.0 {
                State::User { tls, raw, .. } => (tls, raw),
                State::Kernel { client, ended, .. } => {
                    return kernel_read(self.sock, buf, *client, ended);
                }
                State::Lost => return Err(lost()),
            };
            match tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            // Handshake records (or a key update's) go out first: the peer may wait for them.
            push(self.sock, tls)?;
            if !Self::pull(self.sock, tls, raw)? {
                // The socket's end: what TLS held is read above; then a clean end (the peer's
                // close_notify) reads as 0, a cut one as an error, said in our words.
                let client = matches!(tls, rustls::Connection::Client(_));
                return tls.reader().read(buf).map_err(|e| match e.kind() {
                    io::ErrorKind::UnexpectedEof => cut_off(client),
                    _ => e,
                });
            }
        }
    }
}

impl<S: Read + Write + AsFd> Write for Wire<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let Some(t) = self.tls.as_deref_mut() else {
            return self.sock.write_vectored(bufs);
        };
        Self::handshake(self.sock, t)?;
        let tls = match &mut t.0 {
            State::User { tls, .. } => tls,
            State::Kernel { .. } => return self.sock.write_vectored(bufs),
            State::Lost => return Err(lost()),
        };
        let n = tls.writer().write_vectored(bufs)?;
        // What the socket takes now; the rest waits in TLS for the next write or flush.
        match push(self.sock, tls) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => other?,
        }
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            // TLS holds its most, and the socket took none of it.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.tls.as_deref_mut() {
            Some(t) => Self::handshake(self.sock, t),
            None => self.sock.flush(),
        }
    }
}

impl<S: AsFd> AsFd for Wire<'_, S> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl<S: Read + Write + AsFd> crate::send::Sink for Wire<'_, S> {
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        if let Some(t) = self.tls.as_deref_mut() {
            Self::handshake(self.sock, t)?;
            if t.records() != Records::Kernel {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "sendfile cannot send through TLS sealed in this process (only through \
                     kernel TLS: --ktls)",
                ));
            }
        }
        tsperf_sys::net::sendfile(&self.sock.as_fd(), file, offset, len)
    }
}

#[cfg(test)]
mod tests;
