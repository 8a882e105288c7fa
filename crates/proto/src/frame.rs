//! Encoding and decoding the server's [`Frame`]s (the tables "Frames" in [`super`]).

use super::*;

/// Appends the encoded frame to `out`. Strings longer than [`MAX_REASON`] bytes are cut at a
/// character boundary, so every encoded frame decodes.
pub fn encode_frame(frame: &Frame, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0]);
    let tag = match frame {
        Frame::Accept {
            read_size,
            server_io,
            log,
            stdout,
            length,
            tls,
        } => {
            out.extend_from_slice(&read_size.to_be_bytes());
            out.push(server_io_code(Some(*server_io)));
            out.push(log_code(Some(*log)));
            out.push(stdout_code(*stdout));
            out.extend_from_slice(&length.to_be_bytes());
            let (kind, cert, proof) = match tls {
                None => (0, [0; 32], [0; 32]),
                Some(id) => match id.proof {
                    None => (1, id.cert_sha256, [0; 32]),
                    Some(proof) => (2, id.cert_sha256, proof),
                },
            };
            out.push(kind);
            out.extend_from_slice(&cert);
            out.extend_from_slice(&proof);
            TAG_ACCEPT
        }
        Frame::Sent(s) => {
            s.encode(out);
            TAG_SENT
        }
        Frame::Time(t) => {
            for v in [t.seq, t.server_recv_unix_ns, t.server_send_unix_ns] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            TAG_TIME
        }
        Frame::Refuse {
            code: RefuseCode::Version,
            reason,
        } => {
            put_string(out, reason);
            TAG_REFUSE
        }
        Frame::Refuse { code, reason } => {
            out.push(code.code());
            put_string(out, reason);
            TAG_REFUSED
        }
        Frame::Abort(reason) => {
            put_string(out, reason);
            TAG_ABORT
        }
        Frame::Challenge(c) => {
            out.extend_from_slice(c);
            TAG_CHALLENGE
        }
        Frame::Report(r) => {
            r.encode(out);
            TAG_REPORT
        }
    };
    let body_len = (out.len() - start - FRAME_HEADER) as u16;
    out[start] = tag;
    out[start + 1..start + 3].copy_from_slice(&body_len.to_be_bytes());
}

/// Decodes one frame from the front of `buf`, with the same contract as [`decode_hello`].
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let Some(&tag) = buf.first() else {
        return Ok(None);
    };
    if !(TAG_ACCEPT..=TAG_SENT).contains(&tag) {
        return Err(ProtocolError::BadTag(tag));
    }
    if buf.len() < FRAME_HEADER {
        return Ok(None);
    }
    let len = usize::from(be16(&buf[1..3]));
    if len > MAX_FRAME_BODY {
        return Err(ProtocolError::FrameTooLong(len));
    }
    let Some(body) = buf.get(FRAME_HEADER..FRAME_HEADER + len) else {
        return Ok(None);
    };
    let bad_len = |expected| ProtocolError::BadBodyLength { tag, len, expected };
    let frame = match tag {
        TAG_ACCEPT if len != ACCEPT_BODY => return Err(bad_len(ACCEPT_BODY)),
        TAG_ACCEPT => decode_accept(body)?,
        TAG_TIME => {
            if len != TIME_BODY {
                return Err(bad_len(TIME_BODY));
            }
            Frame::Time(clock::TimeResponse {
                seq: be64(&body[0..8]),
                server_recv_unix_ns: be64(&body[8..16]),
                server_send_unix_ns: be64(&body[16..24]),
            })
        }
        TAG_REFUSE => Frame::Refuse {
            code: RefuseCode::Version,
            reason: whole_string(body).map_err(|e| e.or_len(bad_len))?,
        },
        TAG_REFUSED => {
            let (&byte, rest) = body.split_first().ok_or_else(|| bad_len(3))?;
            let code = RefuseCode::from_code(byte).ok_or(ProtocolError::BadEnum {
                field: "refusal code",
                value: byte,
            })?;
            let reason = whole_string(rest).map_err(|e| e.or_len(|n| bad_len(1 + n)))?;
            Frame::Refuse { code, reason }
        }
        TAG_ABORT => Frame::Abort(whole_string(body).map_err(|e| e.or_len(bad_len))?),
        TAG_CHALLENGE => Frame::Challenge(body.try_into().map_err(|_| bad_len(32))?),
        TAG_SENT if len != crate::sent::SENT_BODY => return Err(bad_len(crate::sent::SENT_BODY)),
        TAG_SENT => Frame::Sent(crate::sent::Sent::decode(body)?),
        _ if len < REPORT_FIXED + 2 => return Err(bad_len(REPORT_FIXED + 2)),
        _ => {
            let saved_to = whole_string(&body[REPORT_FIXED..])
                .map_err(|e| e.or_len(|n| bad_len(REPORT_FIXED + n)))?;
            Frame::Report(Report::decode(body, saved_to)?)
        }
    };
    Ok(Some((frame, FRAME_HEADER + len)))
}

/// The body of an Accept, its size checked.
fn decode_accept(body: &[u8]) -> Result<Frame, ProtocolError> {
    Ok(Frame::Accept {
        read_size: be32(&body[0..4]),
        server_io: server_io_from(body[4])?.ok_or(ProtocolError::BadEnum {
            field: "server_io",
            value: body[4],
        })?,
        log: log_from(body[5])?.ok_or(ProtocolError::BadEnum {
            field: "log",
            value: body[5],
        })?,
        stdout: stdout_from(body[6])?,
        length: be64(&body[7..15]),
        tls: {
            let cert_sha256 = body[16..48].try_into().expect("32 bytes");
            let proof = body[48..80].try_into().expect("32 bytes");
            match body[15] {
                0 => None,
                1 => Some(crate::tls::Identity {
                    cert_sha256,
                    proof: None,
                }),
                2 => Some(crate::tls::Identity {
                    cert_sha256,
                    proof: Some(proof),
                }),
                value => {
                    return Err(ProtocolError::BadEnum {
                        field: "tls",
                        value,
                    });
                }
            }
        },
    })
}

pub(super) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(super) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(super) fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_REASON);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// Why a string body did not decode: a protocol error, or a body of the wrong size.
enum StringError {
    Bad(ProtocolError),
    /// The body's size does not fit the string it holds: it should have been this many bytes.
    Len(usize),
}

impl StringError {
    /// The protocol error, a wrong size made into one by `bad_len` (given the size expected).
    fn or_len(self, bad_len: impl FnOnce(usize) -> ProtocolError) -> ProtocolError {
        match self {
            StringError::Bad(e) => e,
            StringError::Len(n) => bad_len(n),
        }
    }
}

/// Decodes a string that must fill `body` exactly.
fn whole_string(body: &[u8]) -> Result<String, StringError> {
    if body.len() < 2 {
        return Err(StringError::Len(2));
    }
    let n = usize::from(be16(&body[0..2]));
    if n > MAX_REASON {
        return Err(StringError::Bad(ProtocolError::StringTooLong(n)));
    }
    if body.len() != 2 + n {
        return Err(StringError::Len(2 + n));
    }
    std::str::from_utf8(&body[2..])
        .map(str::to_owned)
        .map_err(|_| StringError::Bad(ProtocolError::StringNotUtf8))
}

pub(crate) fn server_io_code(io: Option<ServerIo>) -> u8 {
    match io {
        Some(ServerIo::Blocking) | None => 0,
        Some(ServerIo::EventLoop) => 1,
    }
}

pub(crate) fn server_io_from(v: u8) -> Result<Option<ServerIo>, ProtocolError> {
    match v {
        0 => Ok(Some(ServerIo::Blocking)),
        1 => Ok(Some(ServerIo::EventLoop)),
        value => Err(ProtocolError::BadEnum {
            field: "server_io",
            value,
        }),
    }
}

const STDOUT_KINDS: [StdoutKind; 8] = [
    StdoutKind::Unknown,
    StdoutKind::Terminal,
    StdoutKind::Pipe,
    StdoutKind::File,
    StdoutKind::Null,
    StdoutKind::CharDevice,
    StdoutKind::Socket,
    StdoutKind::Closed,
];

fn stdout_code(kind: StdoutKind) -> u8 {
    STDOUT_KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u8
}

fn stdout_from(value: u8) -> Result<StdoutKind, ProtocolError> {
    STDOUT_KINDS
        .get(usize::from(value))
        .copied()
        .ok_or(ProtocolError::BadEnum {
            field: "stdout",
            value,
        })
}

pub(crate) fn log_code(log: Option<LogMode>) -> u8 {
    match log {
        Some(LogMode::None) | None => 0,
        Some(LogMode::Stdout) => 1,
        Some(LogMode::File) => 2,
    }
}

pub(crate) fn log_from(v: u8) -> Result<Option<LogMode>, ProtocolError> {
    match v {
        0 => Ok(Some(LogMode::None)),
        1 => Ok(Some(LogMode::Stdout)),
        2 => Ok(Some(LogMode::File)),
        value => Err(ProtocolError::BadEnum {
            field: "log",
            value,
        }),
    }
}
