//! The client's side of the conversation around a transfer's data: the hello and its answer,
//! the clock queries, and the report. Every wait is bounded: each answer by its own deadline,
//! the clock queries all together by one.
//!
//! An answer that is not a tsperf frame at all (an HTTP, SSH or iperf3 server on the port) is
//! named for what it is, with the bytes the server sent, as soon as they show it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Accepted, Clock, Transport};
use tsperf_proto::clock::{Offset, TimeRequest, encode_query};
use tsperf_proto::{Frame, Hello, RefuseCode, Report, encode_hello};
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

/// Sends the hello, answers the server's challenge if it sends one (with `key`), and returns
/// the server's accept; a refusal is an error carrying the server's reason. Each answer is due
/// within `timeout`.
pub fn handshake<T: Transport>(
    conn: &mut T,
    hello: &Hello,
    key: Option<&Key>,
    timeout: Duration,
) -> Result<Accepted> {
    let mut msg = Vec::with_capacity(tsperf_proto::MAX_HELLO);
    encode_hello(hello, &mut msg);
    conn.write_all(&msg).context("cannot send the hello")?;
    let secs = timeout.as_secs_f64();
    let late = || {
        format!(
            "no answer to the hello within {secs} s: the server took the connection but said \
             nothing (is it a tsserver?)"
        )
    };
    let mut answer = read_frame_within(conn, "answer to the hello", timeout, late)
        .map_err(|e| not_tsperf(conn, e))?;
    if let Frame::Challenge(challenge) = answer {
        let Some(key) = key else {
            bail!("the server requires authentication: pass --auth-key FILE with its key");
        };
        conn.write_all(&key.answer(&challenge))
            .context("cannot send the authentication answer")?;
        let late = || format!("no answer to the authentication within {secs} s");
        answer = read_frame_within(conn, "answer to the authentication", timeout, late)?;
    }
    match answer {
        Frame::Accept {
            read_size,
            server_io,
            log,
            stdout,
        } => Ok(Accepted {
            read_size,
            server_io,
            log,
            stdout,
        }),
        Frame::Refuse { code, reason } => Err(Refused { code, reason }.into()),
        Frame::Abort(reason) => Err(Refused {
            code: RefuseCode::Other,
            reason,
        }
        .into()),
        Frame::Report(_) | Frame::Challenge(_) | Frame::Time(_) => {
            bail!("the server broke the protocol: {answer:?} instead of an accept")
        }
    }
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

/// Makes `queries` clock queries, one at a time, all of them answered within `timeout` of the
/// first (one phase, one deadline), and returns the estimate of the fastest (`None` for no
/// queries).
pub(crate) fn ask_clock<T: Transport>(
    conn: &mut T,
    queries: u8,
    timeout: Duration,
) -> Result<Option<Clock>> {
    let mut best: Option<Clock> = None;
    let by = Instant::now() + timeout;
    for seq in 0..queries {
        let start = Instant::now();
        let t1 = unix_ns_now();
        let query = encode_query(&TimeRequest {
            seq: seq.into(),
            client_send_unix_ns: t1,
        });
        conn.write_all(&query)
            .with_context(|| format!("cannot send clock query {seq}"))?;
        let late = || {
            format!(
                "{seq} of {queries} clock queries answered within {} s",
                timeout.as_secs_f64()
            )
        };
        let left = by.saturating_duration_since(Instant::now());
        let answer = read_frame_within(conn, "answer to a clock query", left, late)?;
        let t4 = unix_ns_now();
        let rtt_ns = start.elapsed().as_nanos() as u64;
        let t = match answer {
            Frame::Time(t) if t.seq == u64::from(seq) => t,
            Frame::Abort(reason) => bail!("the server aborted the transfer: {}", Peer(&reason)),
            other => {
                bail!("the server sent {other:?} where the answer to clock query {seq} belonged")
            }
        };
        if best.is_none_or(|b| rtt_ns < b.rtt_ns) {
            best = Some(Clock {
                queries,
                offset: Offset::of(t1, t.server_recv_unix_ns, t.server_send_unix_ns, t4),
                rtt_ns,
            });
        }
    }
    Ok(best)
}

/// Waits for the server's report after the last byte and the trailer.
pub(crate) fn await_report<T: Transport>(conn: &mut T, timeout: Duration) -> Result<Report> {
    // Nagle stays on while sending, as in the seed; once the last chunk is written, push the
    // tail out now instead of letting it wait for a delayed ACK (up to 40 ms on Linux).
    let _ = conn.socket().set_tcp_nodelay(true);
    let late = || {
        format!(
            "the server sent no report within {} s of the last byte",
            timeout.as_secs_f64()
        )
    };
    match read_frame_within(conn, "report", timeout, late)? {
        Frame::Report(r) => Ok(r),
        Frame::Abort(reason) => bail!("the server aborted the transfer: {}", Peer(&reason)),
        other => bail!("the server sent {other:?} where its report was expected"),
    }
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
