//! Each field of a hello's fixed part checked against what the hello is for: the decoder's
//! refusals ([`ProtocolError`]), one function a field or group of fields.

use super::*;
use crate::SaveMode;
use crate::frame::be16;

/// How the stream is to go (bytes 49-53): the server's send call, the save mode, the suite.
pub(super) type Ways = (Option<Call>, Option<SaveMode>, Option<crate::tls::Cipher>);

/// The hello's [`Ways`], checked against what the hello is for.
pub(super) fn ways(
    buf: &[u8],
    mode: Mode,
    flags: u8,
    name: &str,
    duration_ms: u32,
) -> Result<Ways, ProtocolError> {
    let stream = mode == Mode::Stream;
    let generated = stream && flags & FLAG_REVERSE != 0 && name.is_empty();
    let call = call_of(buf, generated, duration_ms)?;
    let sized_file = stream && flags & FLAG_REVERSE == 0 && duration_ms == 0;
    let save = save_of(buf[52], sized_file && !name.is_empty())?;
    if flags & FLAG_MEASURE_SAVE != 0 && !save.is_some_and(SaveMode::writes) {
        return Err(ProtocolError::BadFlags(flags));
    }
    Ok((call, save, tls_of(buf[53], mode)?))
}

/// A latency hello's stream fields: a chunk of 1, no name, no duration.
pub(super) fn latency_fields(
    chunk: u32,
    name_len: usize,
    duration_ms: u32,
) -> Result<(), ProtocolError> {
    if chunk != 1 {
        return Err(ProtocolError::LatencyChunk(chunk));
    }
    if name_len != 0 {
        return Err(ProtocolError::LatencyName(name_len));
    }
    if duration_ms != 0 {
        return Err(ProtocolError::LatencyDuration(duration_ms));
    }
    Ok(())
}

/// The send call at bytes 49-51, checked: one only for the generated stream the server sends
/// (`generated`), and sendfile only for a stream sized by its length.
pub(super) fn call_of(
    buf: &[u8],
    generated: bool,
    duration_ms: u32,
) -> Result<Option<Call>, ProtocolError> {
    let (code, batch) = (buf[49], be16(&buf[50..52]));
    let call = Call::of(code, batch)?;
    if call.is_some() && !generated || call == Some(Call::Sendfile) && duration_ms > 0 {
        return Err(ProtocolError::BadCall(code, batch));
    }
    Ok(call)
}

/// The save mode at byte 52, checked: one only for a sized forward stream of a named file
/// (`sized_file`).
pub(super) fn save_of(code: u8, sized_file: bool) -> Result<Option<SaveMode>, ProtocolError> {
    match SaveMode::of(code) {
        Some(None) => Ok(None),
        Some(mode) if sized_file => Ok(mode),
        _ => Err(ProtocolError::BadSave(code)),
    }
}

/// The cipher suite at byte 53, checked: one only for a stream. With sendfile it is the
/// server's to grant (its records sealed by the kernel: `--ktls`).
pub(super) fn tls_of(code: u8, mode: Mode) -> Result<Option<crate::tls::Cipher>, ProtocolError> {
    match crate::tls::Cipher::of(code) {
        Some(None) => Ok(None),
        Some(Some(c)) if mode == Mode::Stream => Ok(Some(c)),
        _ => Err(ProtocolError::BadTls(code)),
    }
}

/// The pace at bytes 54-61, checked: 0 (none), or a rate in the hello of a stream the server
/// sends.
pub(super) fn pace_of(rate: u64, mode: Mode, flags: u8) -> Result<Option<u64>, ProtocolError> {
    match rate {
        0 => Ok(None),
        _ if mode == Mode::Stream && flags & FLAG_REVERSE != 0 => Ok(Some(rate)),
        _ => Err(ProtocolError::BadPace(rate)),
    }
}

/// The congestion control's name, checked: none, or one in the hello of a stream the server
/// sends.
pub(super) fn congestion_of(
    bytes: &[u8],
    mode: Mode,
    flags: u8,
) -> Result<Option<crate::tcp::Congestion>, ProtocolError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let bad = || ProtocolError::BadCongestion(String::from_utf8_lossy(bytes).into_owned());
    if mode != Mode::Stream || flags & FLAG_REVERSE == 0 {
        return Err(bad());
    }
    crate::tcp::Congestion::from_bytes(bytes)
        .map(Some)
        .ok_or_else(bad)
}

/// The session bytes of a whole fixed part, checked.
pub(super) fn session_of(buf: &[u8]) -> Result<Session, ProtocolError> {
    let session = Session {
        id: buf[30..46].try_into().expect("16 bytes"),
        index: buf[46],
        count: buf[47],
    };
    if session.count == 0 || session.count > MAX_STREAMS || session.index >= session.count {
        return Err(ProtocolError::BadStreams {
            index: session.index,
            count: session.count,
        });
    }
    Ok(session)
}

/// The name, checked: a UTF-8 basename, and empty where `flags` ask for one buffer (the
/// generated text's, and only a reverse stream's: the server sends it).
pub(super) fn name_of(bytes: &[u8], flags: u8) -> Result<&str, ProtocolError> {
    let name = std::str::from_utf8(bytes).map_err(|_| ProtocolError::NameNotUtf8)?;
    if name.chars().any(|c| c == '/' || c.is_control()) {
        return Err(ProtocolError::BadName(name.to_owned()));
    }
    if flags & FLAG_ONE_BUFFER != 0 && (flags & FLAG_REVERSE == 0 || !name.is_empty()) {
        return Err(ProtocolError::BadFlags(flags));
    }
    Ok(name)
}

/// The fields of the fixed part that say what the connection is for.
pub(super) struct Header {
    pub(super) mode: Mode,
    pub(super) flags: u8,
    pub(super) codec: u8,
    pub(super) framing: u8,
    pub(super) log: Option<LogMode>,
    pub(super) clock_queries: u8,
}

/// Decodes and checks the mode, flags, codec, framing, log and clock-query bytes of a whole
/// fixed part.
pub(super) fn header(buf: &[u8]) -> Result<Header, ProtocolError> {
    let mode = match buf[6] {
        1 => Mode::Stream,
        2 => Mode::Latency,
        other => return Err(ProtocolError::BadMode(other)),
    };
    let flags = buf[7];
    let defined = match mode {
        Mode::Stream => {
            FLAG_NODELAY | FLAG_REVERSE | FLAG_ONE_BUFFER | FLAG_TWO_WAY | FLAG_MEASURE_SAVE
        }
        Mode::Latency => FLAG_NODELAY,
    };
    if flags & !defined != 0 {
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
