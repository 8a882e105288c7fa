//! Encoding and decoding the client's [`Hello`] (the table "Hello" in [`super`]).

use super::frame::{be16, be32, be64};
use super::*;

/// Appends the encoded hello to `out`. The caller has validated the name and chunk; an invalid
/// hello still encodes, so tests can send one.
pub fn encode_hello(h: &Hello, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.push(match h.mode {
        Mode::Stream => 1,
        Mode::Latency => 2,
    });
    out.push(if h.nodelay { FLAG_NODELAY } else { 0 });
    out.push(h.codec);
    out.push(h.framing);
    out.push(hello_log_code(h.log));
    out.push(h.clock_queries);
    out.extend_from_slice(&(h.name.len() as u16).to_be_bytes());
    out.extend_from_slice(&h.length.to_be_bytes());
    out.extend_from_slice(&h.chunk.to_be_bytes());
    out.extend_from_slice(h.name.as_bytes());
}

/// Decodes a hello from the front of `buf`. `Ok(None)`: not enough bytes yet. `Ok(Some((hello,
/// used)))`: the hello took the first `used` bytes. Fails as early as a prefix shows a bad field,
/// so a garbage sender is refused after its first few bytes.
pub fn decode_hello(buf: &[u8]) -> Result<Option<(Hello, usize)>, ProtocolError> {
    let magic_len = buf.len().min(4);
    if buf[..magic_len] != MAGIC[..magic_len] {
        let mut seen = [0u8; 4];
        seen[..magic_len].copy_from_slice(&buf[..magic_len]);
        return Err(ProtocolError::BadMagic(seen));
    }
    // The version first, as soon as it is in: an older hello is shorter than this one.
    if buf.len() < 6 {
        return Ok(None);
    }
    let version = be16(&buf[4..6]);
    if version != VERSION {
        return Err(ProtocolError::UnsupportedVersion(version));
    }
    if buf.len() < HELLO_FIXED {
        return Ok(None);
    }
    let Header {
        mode,
        flags,
        codec,
        framing,
        log,
        clock_queries,
    } = header(buf)?;
    let name_len = usize::from(be16(&buf[12..14]));
    if name_len > MAX_NAME {
        return Err(ProtocolError::NameTooLong(name_len));
    }
    let length = be64(&buf[14..22]);
    let chunk = be32(&buf[22..26]);
    if chunk == 0 || chunk > MAX_CHUNK {
        return Err(ProtocolError::BadChunk(chunk));
    }
    if mode == Mode::Latency && chunk != 1 {
        return Err(ProtocolError::LatencyChunk(chunk));
    }
    if mode == Mode::Latency && name_len != 0 {
        return Err(ProtocolError::LatencyName(name_len));
    }
    let Some(name_bytes) = buf.get(HELLO_FIXED..HELLO_FIXED + name_len) else {
        return Ok(None);
    };
    let name = std::str::from_utf8(name_bytes).map_err(|_| ProtocolError::NameNotUtf8)?;
    if name.chars().any(|c| c == '/' || c.is_control()) {
        return Err(ProtocolError::BadName(name.to_owned()));
    }
    let hello = Hello {
        mode,
        nodelay: flags & FLAG_NODELAY != 0,
        codec,
        framing,
        length,
        chunk,
        name: name.to_owned(),
        log,
        clock_queries,
    };
    Ok(Some((hello, HELLO_FIXED + name_len)))
}

/// The fields of the fixed part that say what the connection is for.
struct Header {
    mode: Mode,
    flags: u8,
    codec: u8,
    framing: u8,
    log: Option<LogMode>,
    clock_queries: u8,
}

/// Decodes and checks the mode, flags, codec, framing, log and clock-query bytes of a whole
/// fixed part.
fn header(buf: &[u8]) -> Result<Header, ProtocolError> {
    let mode = match buf[6] {
        1 => Mode::Stream,
        2 => Mode::Latency,
        other => return Err(ProtocolError::BadMode(other)),
    };
    let flags = buf[7];
    if flags & !FLAG_NODELAY != 0 {
        return Err(ProtocolError::BadFlags(flags));
    }
    let (codec, framing) = (buf[8], buf[9]);
    let (codec_ok, framing_ok) = match mode {
        Mode::Stream => (codec == 0, framing == 0),
        Mode::Latency => (
            clock::Codec::from_code(codec).is_some(),
            clock::Framing::from_code(framing).is_some(),
        ),
    };
    if !codec_ok {
        return Err(ProtocolError::BadCodec(codec));
    }
    if !framing_ok {
        return Err(ProtocolError::BadFraming(framing));
    }
    let log = match (mode, buf[10]) {
        (_, 0) => None,
        (Mode::Stream, 1) => Some(LogMode::None),
        (Mode::Stream, 2) => Some(LogMode::Stdout),
        (Mode::Stream, 3) => Some(LogMode::File),
        (_, other) => return Err(ProtocolError::BadLog(other)),
    };
    let clock_queries = buf[11];
    if clock_queries > MAX_CLOCK_QUERIES || (mode == Mode::Latency && clock_queries != 0) {
        return Err(ProtocolError::BadClockQueries(clock_queries));
    }
    Ok(Header {
        mode,
        flags,
        codec,
        framing,
        log,
        clock_queries,
    })
}

/// The hello's `log` byte: 0 for the server's own sink.
fn hello_log_code(log: Option<LogMode>) -> u8 {
    match log {
        None => 0,
        Some(LogMode::None) => 1,
        Some(LogMode::Stdout) => 2,
        Some(LogMode::File) => 3,
    }
}
