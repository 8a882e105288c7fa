//! Latency mode's messages: clock requests and responses, in two codecs and two framings.
//! The wire format is specified in the [parent module's doc](super).

use serde::{Deserialize, Serialize};

use super::ProtocolError;

/// Largest message body either end accepts.
pub const MAX_MESSAGE: usize = 4096;
/// The length prefix in front of every message body.
pub const PREFIX: usize = 4;
/// A length prefix of 0 in the server's answers: no answer follows but an Abort frame, the
/// reason the server ends the session (it is shutting down), and then the server closes.
/// Version 11.
pub const END_OF_ANSWERS: [u8; PREFIX] = [0; PREFIX];

/// Appends the server's end of a latency session to `out`: [`END_OF_ANSWERS`], then an Abort
/// frame with `why`.
pub fn encode_end_of_answers(why: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&END_OF_ANSWERS);
    crate::encode_frame(&crate::Frame::Abort(why.to_owned()), out);
}

/// How a message body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Fixed-width big-endian fields, as Java's `DataOutputStream` writes them.
    Binary,
    /// A self-describing object naming its type and fields, as Java serialization does (JSON).
    Object,
}

/// How a message goes onto the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// Length prefix and body in one write.
    Single,
    /// Length prefix in one write, body in another, on both ends: what a fresh
    /// `ObjectOutputStream` per message does, and what meets Nagle's algorithm in both
    /// directions (two delayed ACKs a round trip).
    Split,
    /// The request in two writes, the response in one: one direction meets Nagle's algorithm
    /// (one delayed ACK a round trip, about 40 ms), as one persistent `ObjectOutputStream`
    /// whose writes are flushed in pieces does.
    #[serde(rename = "split-request")]
    SplitRequest,
}

impl Codec {
    /// The name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Binary => "binary",
            Codec::Object => "object",
        }
    }

    /// The hello's code for it.
    pub fn code(self) -> u8 {
        match self {
            Codec::Binary => 1,
            Codec::Object => 2,
        }
    }

    /// The codec of a hello's code, if it is one.
    pub fn from_code(v: u8) -> Option<Codec> {
        match v {
            1 => Some(Codec::Binary),
            2 => Some(Codec::Object),
            _ => None,
        }
    }
}

impl Framing {
    /// True when the client writes its request's prefix and body apart.
    pub fn splits_request(self) -> bool {
        matches!(self, Framing::Split | Framing::SplitRequest)
    }

    /// True when the server writes its response's prefix and body apart.
    pub fn splits_response(self) -> bool {
        self == Framing::Split
    }

    /// The name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Framing::Single => "single",
            Framing::Split => "split",
            Framing::SplitRequest => "split-request",
        }
    }

    /// The hello's code for it.
    pub fn code(self) -> u8 {
        match self {
            Framing::Single => 1,
            Framing::Split => 2,
            Framing::SplitRequest => 3,
        }
    }

    /// The framing of a hello's code, if it is one.
    pub fn from_code(v: u8) -> Option<Framing> {
        match v {
            1 => Some(Framing::Single),
            2 => Some(Framing::Split),
            3 => Some(Framing::SplitRequest),
            _ => None,
        }
    }
}

/// "What time is it?", stamped with the client's wall clock when sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRequest {
    /// The request's number, echoed by its answer.
    pub seq: u64,
    /// The client's wall clock as it sent it, ns since the epoch.
    pub client_send_unix_ns: u64,
}

/// The server's answer: its wall clock when the request arrived and when the answer left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeResponse {
    /// The number of the request it answers.
    pub seq: u64,
    /// The server's wall clock when the request arrived, ns since the epoch.
    pub server_recv_unix_ns: u64,
    /// The server's wall clock as it sent the answer.
    pub server_send_unix_ns: u64,
}

/// The object codec's self-describing form.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum Object {
    TimeRequest {
        seq: u64,
        client_send_unix_ns: u64,
    },
    TimeResponse {
        seq: u64,
        server_recv_unix_ns: u64,
        server_send_unix_ns: u64,
    },
}

/// Appends `prefix + body` for a request to `out`.
pub fn encode_request(r: &TimeRequest, codec: Codec, out: &mut Vec<u8>) {
    encode(out, codec, &[r.seq, r.client_send_unix_ns], || {
        Object::TimeRequest {
            seq: r.seq,
            client_send_unix_ns: r.client_send_unix_ns,
        }
    });
}

/// Appends `prefix + body` for a response to `out`.
pub fn encode_response(r: &TimeResponse, codec: Codec, out: &mut Vec<u8>) {
    encode(
        out,
        codec,
        &[r.seq, r.server_recv_unix_ns, r.server_send_unix_ns],
        || Object::TimeResponse {
            seq: r.seq,
            server_recv_unix_ns: r.server_recv_unix_ns,
            server_send_unix_ns: r.server_send_unix_ns,
        },
    );
}

fn encode(out: &mut Vec<u8>, codec: Codec, fields: &[u64], object: impl FnOnce() -> Object) {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX]);
    match codec {
        Codec::Binary => fields
            .iter()
            .for_each(|f| out.extend_from_slice(&f.to_be_bytes())),
        Codec::Object => {
            serde_json::to_writer(&mut *out, &object()).expect("writing to a Vec cannot fail")
        }
    }
    let len = (out.len() - start - PREFIX) as u32;
    out[start..start + PREFIX].copy_from_slice(&len.to_be_bytes());
}

/// Finds one whole message at the front of `buf`: `Ok(Some((body, used)))`, `Ok(None)` when more
/// bytes are needed, or an error for a length of 0 or above [`MAX_MESSAGE`].
pub fn split_message(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let Some(prefix) = buf.get(..PREFIX) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len == 0 || len as usize > MAX_MESSAGE {
        return Err(ProtocolError::BadMessageLength(len));
    }
    let end = PREFIX + len as usize;
    Ok(buf.get(PREFIX..end).map(|body| (body, end)))
}

/// Decodes a request body.
pub fn decode_request(body: &[u8], codec: Codec) -> Result<TimeRequest, ProtocolError> {
    match codec {
        Codec::Binary => {
            let [seq, client_send_unix_ns] = fixed::<2>(body)?;
            Ok(TimeRequest {
                seq,
                client_send_unix_ns,
            })
        }
        Codec::Object => match object(body)? {
            Object::TimeRequest {
                seq,
                client_send_unix_ns,
            } => Ok(TimeRequest {
                seq,
                client_send_unix_ns,
            }),
            Object::TimeResponse { .. } => Err(ProtocolError::BadMessage(
                "a TimeResponse where a TimeRequest belongs".into(),
            )),
        },
    }
}

/// Decodes a response body.
pub fn decode_response(body: &[u8], codec: Codec) -> Result<TimeResponse, ProtocolError> {
    match codec {
        Codec::Binary => {
            let [seq, server_recv_unix_ns, server_send_unix_ns] = fixed::<3>(body)?;
            Ok(TimeResponse {
                seq,
                server_recv_unix_ns,
                server_send_unix_ns,
            })
        }
        Codec::Object => match object(body)? {
            Object::TimeResponse {
                seq,
                server_recv_unix_ns,
                server_send_unix_ns,
            } => Ok(TimeResponse {
                seq,
                server_recv_unix_ns,
                server_send_unix_ns,
            }),
            Object::TimeRequest { .. } => Err(ProtocolError::BadMessage(
                "a TimeRequest where a TimeResponse belongs".into(),
            )),
        },
    }
}

fn fixed<const N: usize>(body: &[u8]) -> Result<[u64; N], ProtocolError> {
    if body.len() != N * 8 {
        return Err(ProtocolError::BadMessage(format!(
            "binary body of {} bytes: expected {}",
            body.len(),
            N * 8
        )));
    }
    let mut out = [0u64; N];
    for (i, v) in out.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[i * 8..i * 8 + 8]);
        *v = u64::from_be_bytes(b);
    }
    Ok(out)
}

fn object(body: &[u8]) -> Result<Object, ProtocolError> {
    serde_json::from_slice(body).map_err(|e| ProtocolError::BadMessage(format!("object body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn whole(buf: &[u8]) -> &[u8] {
        let (body, used) = split_message(buf).unwrap().unwrap();
        assert_eq!(used, buf.len());
        body
    }

    /// Binary bodies have the DataOutputStream sizes; object bodies name their type and fields.
    #[test]
    fn codec_shapes() {
        let mut b = Vec::new();
        encode_request(
            &TimeRequest {
                seq: 1,
                client_send_unix_ns: 2,
            },
            Codec::Binary,
            &mut b,
        );
        assert_eq!(b.len(), PREFIX + 16);
        let mut o = Vec::new();
        encode_response(
            &TimeResponse {
                seq: 1,
                server_recv_unix_ns: 2,
                server_send_unix_ns: 3,
            },
            Codec::Object,
            &mut o,
        );
        let text = std::str::from_utf8(whole(&o)).unwrap();
        assert_eq!(
            text,
            r#"{"type":"TimeResponse","seq":1,"server_recv_unix_ns":2,"server_send_unix_ns":3}"#
        );
    }

    /// Lengths of 0 and above the limit are refused; prefixes ask for more.
    #[test]
    fn message_lengths() {
        assert_eq!(split_message(&[0, 0, 0]), Ok(None));
        assert_eq!(
            split_message(&[0, 0, 0, 0]),
            Err(ProtocolError::BadMessageLength(0))
        );
        assert_eq!(
            split_message(&[0, 0, 0x10, 1]),
            Err(ProtocolError::BadMessageLength(4097))
        );
        assert_eq!(split_message(&[0, 0, 0, 2, 9]), Ok(None));
    }

    /// Garbled, truncated and mistyped bodies are refused with a reason.
    #[test]
    fn garbage_refused() {
        assert!(matches!(
            decode_response(b"short", Codec::Binary),
            Err(ProtocolError::BadMessage(_))
        ));
        assert!(matches!(
            decode_response(b"{\"type\":\"Nope\"}", Codec::Object),
            Err(ProtocolError::BadMessage(_))
        ));
        assert!(matches!(
            decode_response(
                br#"{"type":"TimeRequest","seq":1,"client_send_unix_ns":2}"#,
                Codec::Object
            ),
            Err(ProtocolError::BadMessage(_))
        ));
        assert!(matches!(
            decode_request(
                br#"{"type":"TimeRequest","seq":1,"client_send_unix_ns":2,"x":1}"#,
                Codec::Object
            ),
            Err(ProtocolError::BadMessage(_))
        ));
    }

    proptest! {
        /// Both codecs round-trip any request and response.
        #[test]
        fn round_trips(seq: u64, a: u64, b: u64, object: bool) {
            let codec = if object { Codec::Object } else { Codec::Binary };
            let req = TimeRequest { seq, client_send_unix_ns: a };
            let mut buf = Vec::new();
            encode_request(&req, codec, &mut buf);
            prop_assert_eq!(decode_request(whole(&buf), codec), Ok(req));
            let resp = TimeResponse { seq, server_recv_unix_ns: a, server_send_unix_ns: b };
            buf.clear();
            encode_response(&resp, codec, &mut buf);
            prop_assert_eq!(decode_response(whole(&buf), codec), Ok(resp));
        }

        /// The message decoders never panic on arbitrary bytes.
        #[test]
        fn never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = split_message(&bytes);
            for codec in [Codec::Binary, Codec::Object] {
                let _ = decode_request(&bytes, codec);
                let _ = decode_response(&bytes, codec);
            }
        }
    }
}

/// A clock offset estimate: the server's clock minus the client's, and its error bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offset {
    /// The server's clock minus the client's, ns.
    pub offset_ns: i64,
    /// The true offset lies within this of `offset_ns` (half the round trip less the server's
    /// own time), whatever the two directions' delays were.
    pub err_ns: u64,
}

impl Offset {
    /// NTP's estimate from one exchange: the client sent at `t1` and got the answer at `t4` on
    /// its clock; the server received at `t2` and answered at `t3` on its own. The offset is
    /// ((t2 − t1) + (t3 − t4)) / 2, good to ± ((t4 − t1) − (t3 − t2)) / 2.
    pub fn of(t1: u64, t2: u64, t3: u64, t4: u64) -> Offset {
        let (t1, t2, t3, t4) = (
            i128::from(t1),
            i128::from(t2),
            i128::from(t3),
            i128::from(t4),
        );
        let offset = ((t2 - t1) + (t3 - t4)) / 2;
        let err = ((t4 - t1) - (t3 - t2)).max(0) / 2;
        Offset {
            offset_ns: offset.clamp(i64::MIN.into(), i64::MAX.into()) as i64,
            err_ns: u64::try_from(err).unwrap_or(u64::MAX),
        }
    }

    /// A time on the server's clock (ns since the epoch) on the client's clock.
    pub fn to_client(&self, server_unix_ns: u64) -> u64 {
        (i128::from(server_unix_ns) - i128::from(self.offset_ns)).clamp(0, u64::MAX.into()) as u64
    }
}

/// The request body of a stream's clock query ([`super::CLOCK_QUERY`] bytes).
pub fn encode_query(r: &TimeRequest) -> [u8; super::CLOCK_QUERY] {
    let mut out = [0u8; super::CLOCK_QUERY];
    out[..8].copy_from_slice(&r.seq.to_be_bytes());
    out[8..].copy_from_slice(&r.client_send_unix_ns.to_be_bytes());
    out
}
