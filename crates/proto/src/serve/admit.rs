//! What a server decides about a hello before it answers: its [`Policy`] (the operator's
//! settings the decision needs), whether it serves the hello, with what read size and which
//! log sink ([`admit`]), and the words of its standard refusals.

use std::sync::Arc;
use std::time::Duration;

use crate::{BULK_READ, Call, Hello, LogMode, Mode, RefuseCode, StdoutKind};

/// Default: how long a new connection may take to send its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Default: how long a transfer may go without a byte before the server gives up on it.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default: the longest timed run a client may ask for (`--max-time`).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// A timed run is cut off this long after its duration, counted from its first byte: the
/// client's end and the server's report have that long.
pub const TIMED_GRACE: Duration = Duration::from_secs(10);
/// Default: the smallest read with a log sink (`--log-min-read`), so a client announcing
/// 1-byte chunks does not get a log line per byte.
pub const LOG_MIN_READ: u32 = 64;

/// The reason given to transfers cut off by a shutdown.
pub const SHUTTING_DOWN: &str = "the server is shutting down";
/// The refusal for a wrong authentication answer.
pub const AUTH_FAILED: &str = "authentication failed: the client does not hold this server's key";

/// Checks a client's answer to the server's challenge: the server's key, as a pure function.
/// The driver supplies it (`tsperf_sys::auth::Key`); the conversation only asks.
pub trait Authenticator: Send + Sync + std::fmt::Debug {
    /// True if `answer` is the right answer to `challenge`.
    fn verify(&self, challenge: &[u8; 32], answer: &[u8; 32]) -> bool;
    /// The key's proof of a TLS certificate's fingerprint on a connection
    /// ([`crate::tls::binding`]), distinct from any answer to a challenge.
    fn prove(&self, binding: &[u8; 80]) -> [u8; 32];
}

/// The operator's settings a conversation decides by.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Where per-read lines go, unless the client asks otherwise (and may).
    pub log: LogMode,
    /// Clients may choose the log sink of their transfer (`--allow-client-log`).
    pub allow_client_log: bool,
    /// With a log sink, the smallest read size (`--log-min-read`).
    pub log_min_read: u32,
    /// The operator's read size (`--read-size`); `None`: [`default_read_size`], or with no log
    /// sink `bulk_read`.
    pub read_size: Option<u32>,
    /// Bytes per read with no log sink and no `--read-size`: the server model's ([`BULK_READ`]
    /// by default; an event loop, whose one read block serves all its connections, reads more).
    pub bulk_read: u32,
    /// Largest announced transfer accepted, in bytes (`--max-bytes`).
    pub max_bytes: u64,
    /// Longest timed run accepted (`--max-time`).
    pub max_duration: Duration,
    /// Clients may ask the server to send (`--reverse`); off with `--no-reverse`.
    pub reverse: bool,
    /// The server serves files by name to reverse streams (`--serve DIR`).
    pub serves: bool,
    /// What the server's stdout is, as the Accept tells clients.
    pub stdout: StdoutKind,
    /// How long a connection may take to send its hello, from the accept, and then its first
    /// byte or request from the server's Accept.
    pub hello_timeout: Duration,
    /// How long a connection may go without data or requests.
    pub idle_timeout: Duration,
    /// Clients must prove they hold this key (`--auth-key`).
    pub auth: Option<Arc<dyn Authenticator>>,
    /// The SHA-256 of the certificate the server presents to a stream over TLS; `None`: it
    /// offers no TLS (`--no-tls`).
    pub tls_cert: Option<[u8; 32]>,
    /// The server's TLS records are sealed by the kernel (`--ktls`): its sendfile goes through
    /// TLS.
    pub tls_kernel: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            log: LogMode::None,
            allow_client_log: false,
            log_min_read: LOG_MIN_READ,
            read_size: None,
            bulk_read: BULK_READ,
            max_bytes: u64::MAX,
            max_duration: MAX_DURATION,
            reverse: true,
            serves: false,
            stdout: StdoutKind::Unknown,
            hello_timeout: HELLO_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            auth: None,
            tls_cert: None,
            tls_kernel: false,
        }
    }
}

/// What the server grants an admitted hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// Bytes per read (0 in latency mode, which reads whole messages).
    pub read_size: u32,
    /// Where the transfer's per-read lines go.
    pub log: LogMode,
    /// A reverse stream: the bytes of one pass the server sends; 0 otherwise.
    pub length: u64,
}

/// A refusal: its code and its reason.
pub type Refusal = (RefuseCode, String);

/// The server's read size when `--read-size` is not given. With a log sink, the client's chunk
/// size: one read (and one log line) per chunk, as the seed's server did, but never less than
/// `log_min_read` (a client announcing 1-byte chunks would get a log line per byte) and never
/// more than [`BULK_READ`] (the client does not size the server's buffer). With `--log none`
/// nothing watches individual reads, so the server reads up to [`BULK_READ`] at once: the
/// cheapest receiver, so the server is never the bottleneck it measures.
pub fn default_read_size(chunk: u32, log: LogMode, log_min_read: u32) -> u32 {
    match log {
        LogMode::None => BULK_READ,
        _ => chunk.max(log_min_read).min(BULK_READ),
    }
}

/// Decides whether to serve a hello by the policy (a save directory's say about the name is
/// the driver's, when it begins the transfer). Returns what it gets, or the refusal.
pub fn admit(hello: &Hello, policy: &Policy) -> Result<Admitted, Refusal> {
    offered(hello, policy)?;
    let log = transfer_log(hello, policy)?;
    let read_size = match hello.mode {
        Mode::Stream if hello.reverse => 0,
        Mode::Stream if hello.duration_ms == 0 && hello.length > policy.max_bytes => {
            return Err((
                RefuseCode::Limit,
                format!(
                    "'{}' is {} bytes: this server accepts at most {} (--max-bytes)",
                    hello.name, hello.length, policy.max_bytes
                ),
            ));
        }
        Mode::Stream => policy.read_size.unwrap_or(match log {
            LogMode::None => policy.bulk_read.max(1),
            _ => default_read_size(hello.chunk, log, policy.log_min_read),
        }),
        Mode::Latency => 0,
    };
    let length = if hello.reverse { hello.length } else { 0 };
    Ok(Admitted {
        read_size,
        log,
        length,
    })
}

/// Refuses what this server does not serve: a run longer than `--max-time`, and the modes not
/// offered, each refusal naming the flag.
fn offered(hello: &Hello, policy: &Policy) -> Result<(), Refusal> {
    let asked = Duration::from_millis(u64::from(hello.duration_ms));
    if asked > policy.max_duration {
        return Err((
            RefuseCode::Limit,
            format!(
                "a timed run of {} s was asked for (--time): this server runs at most {} s \
                 (--max-time)",
                asked.as_secs_f64(),
                policy.max_duration.as_secs_f64()
            ),
        ));
    }
    if hello.reverse {
        reverse_offered(hello, policy)?;
    }
    if let Some(cipher) = hello.tls.filter(|_| policy.tls_cert.is_none()) {
        return Err((
            RefuseCode::Unoffered,
            format!(
                "this server offers no TLS (it was started with --no-tls): --tls {} is not offered",
                cipher.name()
            ),
        ));
    }
    if hello.tls.is_some() && hello.call == Some(Call::Sendfile) && !policy.tls_kernel {
        return Err((
            RefuseCode::Unoffered,
            "this server seals its TLS records in its process, so its sendfile cannot send \
             through TLS: start it with --ktls (kernel TLS), or ask -R --io write or writev"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Refuses a reverse stream this server does not send: on a server started with
/// `--no-reverse`, a file by name without `--serve` (the driver then opens it from DIR, and may
/// still refuse it), an empty generated stream, or more bytes than `--max-bytes`.
fn reverse_offered(hello: &Hello, policy: &Policy) -> Result<(), Refusal> {
    if !policy.reverse {
        return Err((
            RefuseCode::Unoffered,
            "this server does not send (it was started with --no-reverse): --reverse is not \
             offered"
                .to_owned(),
        ));
    }
    if !hello.name.is_empty() && !policy.serves {
        return Err((
            RefuseCode::Unoffered,
            format!(
                "'{}' was asked for: this tsserver serves no files (no --serve), only the \
                 generated stream (tsclient --reverse --bytes SIZE)",
                hello.name
            ),
        ));
    }
    if hello.length == 0 && hello.name.is_empty() {
        return Err((
            RefuseCode::Hello,
            "a reverse stream of 0 bytes was asked for: expected at least 1 (--bytes)".to_owned(),
        ));
    }
    if hello.length > policy.max_bytes {
        return Err((
            RefuseCode::Limit,
            format!(
                "{} bytes were asked for (--reverse --bytes): this server sends at most {} \
                 (--max-bytes)",
                hello.length, policy.max_bytes
            ),
        ));
    }
    if hello.log.is_some() {
        return Err((
            RefuseCode::Sink,
            "a reverse stream has no server log sink to choose: the client logs what it \
             receives (tsclient --log)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The log sink of a transfer: the one its client asked for where the server lets it choose (or
/// it asked for the server's own), else the server's. A latency session logs nothing per read.
pub fn transfer_log(hello: &Hello, policy: &Policy) -> Result<LogMode, Refusal> {
    match hello.log {
        _ if hello.mode == Mode::Latency => Ok(policy.log),
        None => Ok(policy.log),
        Some(asked) if asked == policy.log || policy.allow_client_log => Ok(asked),
        Some(asked) => Err((
            RefuseCode::Sink,
            format!(
                "this server logs to {} and does not let clients choose (--server-log {asked} was \
                 asked for): its operator can allow it with tsserver --allow-client-log",
                policy.log
            ),
        )),
    }
}

/// The refusal for a connection past `max_clients` (`--max-clients`).
pub fn busy(max_clients: usize) -> Refusal {
    (
        RefuseCode::Limit,
        format!(
            "server busy: it serves at most {max_clients} {} at once (--max-clients)",
            if max_clients == 1 {
                "connection"
            } else {
                "connections"
            }
        ),
    )
}
