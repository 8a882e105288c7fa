//! The client's side of the conversation around a transfer's data: the hello and its answer,
//! the clock queries, and the report. Every wait is bounded: each answer by its own deadline,
//! the clock queries all together by one.
//!
//! An answer that is not a tsperf frame at all (an HTTP, SSH or iperf3 server on the port) is
//! named for what it is, with the bytes the server sent, as soon as they show it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::Transport;
use tsperf_proto::client::{Accepted, ClientError, ClientStep, Clock, StreamConversation};
use tsperf_proto::{Frame, Hello, RefuseCode, Report};
use tsperf_sys::auth::Key;
use tsperf_sys::net;
use tsperf_sys::text::Peer;
use tsperf_sys::timing::unix_ns_now;

/// Reads one frame from `conn`, all of it by `within` from now. `what` names it for errors;
/// `late` is the error when the deadline passes.
pub fn read_frame_within<T: Transport>(
    conn: &mut T,
    what: &str,
    within: Duration,
    late: impl FnOnce() -> String,
) -> Result<Frame> {
    conn.read_by(Some(Instant::now() + within));
    let frame = net::read_frame(conn, what);
    conn.read_by(None);
    match frame {
        Err(e) if e.downcast_ref::<net::TimedOut>().is_some() => Err(anyhow::anyhow!(late())),
        other => other,
    }
}

/// Sends the hello of `conv`, answers the server's challenge if it sends one (with `key`), and
/// returns the server's accept; a refusal is an error carrying the server's code and reason.
/// Each answer is due within the conversation's timeout.
pub fn handshake<T: Transport>(
    conn: &mut T,
    conv: &mut StreamConversation,
    key: Option<&Key>,
) -> Result<Accepted> {
    conn.write_all(&conv.hello_bytes())
        .context("cannot send the hello")?;
    let mut first = true;
    loop {
        if first {
            say_if_silent(conn, conv);
        }
        let frame = next_frame(conn, conv);
        let frame = if std::mem::take(&mut first) {
            frame.map_err(|e| not_tsperf(conn, e))?
        } else {
            frame?
        };
        match step(conv, frame, key)? {
            ClientStep::Send(answer) => conn
                .write_all(&answer)
                .context("cannot send the authentication answer")?,
            ClientStep::Accepted(a) => return Ok(a),
            other => bail!("the server broke the protocol: {other:?} instead of an accept"),
        }
    }
}

/// How long the first answer may take before the client says it is waiting for it.
const ANSWER_NOTICE: Duration = Duration::from_secs(2);

/// A listener that accepts and never answers is said out loud (on stderr) once
/// [`ANSWER_NOTICE`] passes, not only when the deadline does. One `poll(2)` before the first
/// read: a measured `--reconnect` handshake pays a system call, not a thread.
fn say_if_silent<T: Transport>(conn: &T, conv: &StreamConversation) {
    let wait = conv
        .deadline(Instant::now())
        .saturating_duration_since(Instant::now());
    if wait <= ANSWER_NOTICE || net::readable_within(&*conn.socket(), ANSWER_NOTICE) {
        return;
    }
    let peer = conn
        .peer()
        .map_or_else(|_| "the server".to_owned(), |a| a.to_string());
    eprintln!(
        "tsclient: connected to {peer}, waiting for the server's answer to the hello (up to \
         {:.0} s more; is a tsserver listening there?)",
        wait.saturating_sub(ANSWER_NOTICE).as_secs_f64()
    );
}

/// Reads the frame `conv` awaits, by its deadline.
fn next_frame<T: Transport>(conn: &mut T, conv: &StreamConversation) -> Result<Frame> {
    let now = Instant::now();
    let left = conv.deadline(now).saturating_duration_since(now);
    read_frame_within(conn, conv.awaiting(), left, || conv.late())
}

/// What `frame` means to `conv`, at the moment it arrived; the conversation's errors in the
/// client's words (a refusal as [`Refused`]).
fn step(conv: &mut StreamConversation, frame: Frame, key: Option<&Key>) -> Result<ClientStep> {
    let prover = key.map(|k| k as &dyn tsperf_proto::client::Prover);
    conv.on_frame(frame, prover, Instant::now(), unix_ns_now())
        .map_err(|e| match e {
            ClientError::Refused { code, reason } => Refused { code, reason }.into(),
            ClientError::Aborted(reason) => {
                anyhow::anyhow!("the server aborted the transfer: {}", Peer(&reason))
            }
            e => anyhow::Error::new(e),
        })
}

/// The server refused the hello: its code (what a program acts on) and its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refused {
    /// What kind of refusal.
    pub code: RefuseCode,
    /// Why, in the server's words.
    pub reason: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {}", Peer(&self.reason))?;
        // An older or newer server names its own version only.
        if self.code == RefuseCode::Version {
            write!(
                f,
                " (this tsclient speaks protocol version {})",
                tsperf_proto::VERSION
            )?;
        }
        Ok(())
    }
}

/// The first answer did not decode as a frame: the peer is not a tsperf server. Says so with
/// what it sent (a few more bytes read if they come at once, to show more of it).
fn not_tsperf<T: Transport>(conn: &mut T, e: anyhow::Error) -> anyhow::Error {
    let Some(bad) = e.downcast_ref::<net::BadFrame>() else {
        return match e.downcast_ref::<net::Closed>() {
            Some(_) => anyhow::anyhow!(
                "the server closed the connection without answering the hello (is it a \
                 tsserver?)"
            ),
            None => e,
        };
    };
    let mut bytes = bad.bytes.clone();
    conn.read_by(Some(Instant::now() + Duration::from_millis(200)));
    let mut more = [0u8; 61];
    if let Ok(n) = conn.read(&mut more) {
        bytes.extend_from_slice(&more[..n]);
    }
    conn.read_by(None);
    anyhow::anyhow!(
        "the server does not speak the tsperf protocol (it sent {})",
        describe_bytes(&bytes)
    )
}

/// Bytes a peer sent, for a person: as text in quotes when they read as text (escaped, the
/// first line), else as hex; the one byte an iperf3 server answers with is named as such.
pub fn describe_bytes(bytes: &[u8]) -> String {
    /// iperf3's server asks for the test's parameters with this state byte (`PARAM_EXCHANGE`).
    const IPERF3_PARAM_EXCHANGE: u8 = 9;
    if bytes == [IPERF3_PARAM_EXCHANGE] {
        return "bytes 09, as an iperf3 server does to ask for its parameters".into();
    }
    let printable = bytes
        .iter()
        .filter(|b| b.is_ascii_graphic() || b" \r\n\t".contains(b))
        .count();
    let texty = bytes.len() >= 4
        && printable * 10 >= bytes.len() * 9
        && bytes.iter().any(u8::is_ascii_alphanumeric);
    if texty {
        let text = String::from_utf8_lossy(bytes);
        let line = text.lines().next().unwrap_or_default();
        return format!("{line:?}");
    }
    let hex: Vec<String> = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "bytes {}{}",
        hex.join(" "),
        if bytes.len() > 16 { " ..." } else { "" }
    )
}

/// The hello of a stream of `length` bytes a pass named `name`, with what either direction
/// asks: the clock queries, a timed run's length, its session and two-way flag.
pub(crate) fn stream_hello(cfg: &crate::StreamConfig, length: u64, name: &str) -> Hello {
    let duration_ms = cfg.spec.time.map_or(0, |t| {
        u32::try_from((t + cfg.spec.omit).as_millis().max(1)).unwrap_or(u32::MAX)
    });
    Hello {
        clock_queries: cfg.spec.clock_queries,
        duration_ms,
        session: cfg.session(),
        two_way: cfg.two_way.is_some(),
        ..Hello::stream(length, cfg.spec.chunk, name)
    }
}

/// Sets what the spec asks of this client's data socket before the hello: its buffers, no
/// Nagle, and (`sending`) its congestion control and pacing.
pub(crate) fn tune<T: Transport>(
    conn: &T,
    spec: &crate::spec::StreamSpec,
    sending: bool,
) -> Result<()> {
    let sock = conn.socket();
    if let Some(n) = spec.sndbuf.filter(|_| sending) {
        sock.set_send_buffer_size(n as usize)
            .with_context(|| format!("cannot set the send buffer to {n} bytes"))?;
    }
    if let Some(n) = spec.rcvbuf {
        sock.set_recv_buffer_size(n as usize)
            .with_context(|| format!("cannot set the receive buffer to {n} bytes"))?;
    }
    if spec.nodelay {
        sock.set_tcp_nodelay(true)
            .context("cannot set TCP_NODELAY (-N)")?;
    }
    if let Some(name) = spec.congestion.as_ref().filter(|_| sending) {
        tsperf_sys::congestion::set(&*sock, name)
            .with_context(|| format!("--congestion {name}"))?;
    }
    if let Some(rate) = spec.pacing.filter(|_| sending) {
        tsperf_sys::client_net::set_pacing(&*sock, rate)
            .with_context(|| format!("cannot pace the socket to {rate} bytes a second (-b)"))?;
    }
    Ok(())
}

/// Opens a stream with `hello` (`what`: what the server is asked to accept): its timeout set,
/// the hello answered, the clock queries made; the server's address, its Accept, the clock
/// and the conversation, which goes on after the data.
pub(crate) fn open_stream<T: Transport>(
    conn: &mut T,
    cfg: &crate::StreamConfig,
    hello: Hello,
    what: &str,
) -> Result<(
    std::net::SocketAddr,
    Accepted,
    Option<Clock>,
    StreamConversation,
)> {
    let peer = conn.peer().context("cannot read the server's address")?;
    conn.set_timeout(cfg.spec.timeout)?;
    let mut conv = StreamConversation::new(hello, cfg.spec.timeout);
    let accepted = handshake(conn, &mut conv, cfg.auth.as_deref())
        .with_context(|| format!("the server at {peer} did not accept {what}"))?;
    let clock = ask_clock(conn, &mut conv)
        .with_context(|| format!("the server at {peer} did not answer its clock queries"))?;
    Ok((peer, accepted, clock, conv))
}

/// Makes the clock queries `conv` asks for, one at a time, all of them answered within its
/// timeout of the first (one phase, one deadline), and returns the estimate of the fastest
/// (`None` for no queries).
pub(crate) fn ask_clock<T: Transport>(
    conn: &mut T,
    conv: &mut StreamConversation,
) -> Result<Option<Clock>> {
    if conv.awaiting() != "answer to a clock query" {
        return Ok(None);
    }
    loop {
        let query = conv.query(Instant::now(), unix_ns_now());
        conn.write_all(&query)
            .context("cannot send a clock query")?;
        let frame = next_frame(conn, conv)?;
        match step(conv, frame, None)? {
            ClientStep::Queried => {}
            ClientStep::Data(clock) => return Ok(clock),
            other => bail!("the server broke the protocol: {other:?} during the clock queries"),
        }
    }
}

/// Waits for the server's report, once the trailer ([`StreamConversation::trailer`]) is sent.
pub(crate) fn await_report<T: Transport>(
    conn: &mut T,
    conv: &mut StreamConversation,
) -> Result<Report> {
    // Nagle stays on while sending, as in the seed; once the last chunk is written, push the
    // tail out now instead of letting it wait for a delayed ACK (up to 40 ms on Linux).
    let _ = conn.socket().set_tcp_nodelay(true);
    let frame = next_frame(conn, conv)?;
    match step(conv, frame, None)? {
        ClientStep::Report(r) => Ok(*r),
        other => bail!("the server broke the protocol: {other:?} where its report was expected"),
    }
}

/// Begins a stream's TLS where its hello asked for it, taking only the certificate the
/// Accept named (the protocol checked the key's proof of it).
pub(crate) fn start_tls<T: Transport>(
    conn: &mut T,
    cfg: &crate::StreamConfig,
    accepted: &Accepted,
) -> Result<()> {
    let (Some(cipher), Some(pin)) = (cfg.spec.tls, accepted.tls) else {
        return Ok(());
    };
    let records = match cfg.spec.kernel_tls {
        true => tsperf_stream::tls::Records::Kernel,
        false => tsperf_stream::tls::Records::Process,
    };
    conn.start_tls(tsperf_stream::tls::client(
        cipher,
        pin.cert_sha256,
        records,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a wrong server sent reads as its first line of text, or as hex.
    #[test]
    fn bytes_described_as_text_or_hex() {
        assert_eq!(
            describe_bytes(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"),
            "\"HTTP/1.1 400 Bad Request\""
        );
        assert_eq!(
            describe_bytes(&[9]),
            "bytes 09, as an iperf3 server does to ask for its parameters"
        );
        assert_eq!(describe_bytes(&[9, 0, 2]), "bytes 09 00 02");
        assert_eq!(
            describe_bytes(&[0; 20]),
            format!("bytes {} ...", ["00"; 16].join(" "))
        );
        assert_eq!(
            describe_bytes(b"SSH-2.0-x\x1b[2J"),
            "\"SSH-2.0-x\\u{1b}[2J\""
        );
    }
}
