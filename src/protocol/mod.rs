//! The tsperf wire protocol, version 2. This module doc is the specification.
//!
//! Version 2 added `output_dropped` to the report. Peers of different versions refuse each
//! other at the hello, with a reason naming both versions.
//!
//! Encoding and decoding are pure functions over byte slices: no sockets, no clocks. Decoders
//! validate every field, never panic on any input, and never allocate more than
//! [`MAX_FRAME_BODY`] bytes whatever length they are sent. They are incremental: given a prefix
//! of a message they answer `Ok(None)` ("need more bytes"), so the blocking and the event-loop
//! server share them unchanged.
//!
//! All integers are big-endian (network order), as Java's `DataOutputStream` writes them.
//!
//! # Conversation
//!
//! One TCP connection carries one transfer:
//!
//! 1. The client sends a [`Hello`].
//! 2. The server answers with one frame: [`Frame::Accept`] or [`Frame::Refuse`]. After a refusal
//!    the server closes the connection. The client sends no data before it has read `Accept`; a
//!    server that finds bytes after the hello before it has answered refuses the connection.
//! 3. Stream mode: the client sends exactly `length` bytes of file data, with no framing, then
//!    a trailer: its xxh3-64 of those bytes, 8 bytes big-endian ([`TRAILER`]). A server that
//!    saves files renames one into place only when the trailer equals its own digest.
//! 4. The server sends [`Frame::Report`] once it has read and checksummed all `length` bytes and
//!    the trailer, or [`Frame::Abort`] with a reason if it cannot go on (disk full, say; then it
//!    closes). The client's clock stops when the report arrives, not when its last write
//!    returned.
//! 5. The client closes. The server closes after the report.
//!
//! Deadlines are the server's: the hello (and an authentication answer) must be whole within
//! its hello timeout of the connection, the first data byte or request within that timeout of
//! the accept, and then no wait for data may last longer than its idle timeout. A stream that
//! misses one gets [`Frame::Abort`] with the reason; a hello, [`Frame::Refuse`].
//!
//! Strings from the peer (reasons, `saved_to`, the file name) are text for a person and may hold
//! anything UTF-8 allows: an end that prints them escapes control, format and bidi characters.
//!
//! Latency mode replaces steps 3 and 4 with clock queries (below); the client closes the
//! connection when it has made its requests.
//!
//! # Hello (client to server), 24 bytes + name
//!
//! | offset | size | field    | value and limit                                                   |
//! |-------:|-----:|----------|-------------------------------------------------------------------|
//! | 0      | 4    | magic    | `TSPF` (`54 53 50 46`); anything else: refused, `BadMagic`          |
//! | 4      | 2    | version  | [`VERSION`] (2); anything else: refused, `UnsupportedVersion`       |
//! | 6      | 1    | mode     | 1 = stream, 2 = latency; anything else: refused, `BadMode`           |
//! | 7      | 1    | flags    | bit 0 = TCP_NODELAY wanted; other bits must be 0, else `BadFlags`   |
//! | 8      | 1    | codec    | stream: 0; latency: 1 = binary, 2 = object; else `BadCodec`         |
//! | 9      | 1    | framing  | stream: 0; latency: 1 = single, 2 = split; else `BadFraming`        |
//! | 10     | 2    | name_len | 0 to [`MAX_NAME`] (255); more: `NameTooLong`                        |
//! | 12     | 8    | length   | bytes the client will send (stream), request count (latency)      |
//! | 20     | 4    | chunk    | the client's write size, 1 to [`MAX_CHUNK`] (16 MiB), else `BadChunk`; latency: 1, else `LatencyChunk` |
//! | 24     | n    | name     | file basename, UTF-8, else `NameNotUtf8`; latency: empty, else `LatencyName` |
//!
//! The name is a basename: the decoder refuses a `/`, a NUL byte or any other control character
//! (`BadName`). With the nodelay flag the server sets TCP_NODELAY on its end of the connection.
//!
//! # Frames (server to client)
//!
//! Every server message is a frame: `tag: u8`, `body_len: u16`, then `body_len` bytes of body.
//! `body_len` above [`MAX_FRAME_BODY`] (4096) is refused (`FrameTooLong`), as is an unknown tag
//! (`BadTag`) or a body whose size does not match its tag (`BadBodyLength`). Strings inside bodies
//! are `len: u16` then UTF-8 bytes.
//!
//! | tag | frame  | body                                                                      |
//! |----:|--------|---------------------------------------------------------------------------|
//! | 1   | Accept | `read_size: u32`, `server_io: u8`, `log: u8`  (6 bytes)                   |
//! | 2   | Refuse | `reason: string` (at most [`MAX_REASON`] bytes)                           |
//! | 3   | Report | 86 fixed bytes (below), then `saved_to: string` (empty when not saved)    |
//! | 4   | Abort  | `reason: string`: the server gave up mid-transfer and closes               |
//! | 5   | Challenge | 32 random bytes to authenticate against (32 bytes)                     |
//!
//! `server_io`: 0 = blocking (thread per connection), 1 = event loop. `log`: 0 = none,
//! 1 = stdout, 2 = file. Other values are refused (`BadEnum`).
//!
//! Report body, fixed part:
//!
//! | offset | size | field              | meaning                                                 |
//! |-------:|-----:|--------------------|---------------------------------------------------------|
//! | 0      | 8    | bytes              | data bytes the server read                              |
//! | 8      | 8    | digest             | xxh3-64 of those bytes                                  |
//! | 16     | 8    | first_byte_unix_us | wall clock of the first data byte, µs since the epoch; 0 = no data |
//! | 24     | 8    | last_byte_unix_us  | wall clock of the last data byte; 0 = no data           |
//! | 32     | 8    | elapsed_ns         | server's monotonic time from first to last data byte    |
//! | 40     | 8    | reads              | read calls that returned data                           |
//! | 48     | 8    | wakeups            | event-loop wake-ups for this connection (0 if blocking) |
//! | 56     | 8    | cpu_user_us        | server CPU in user mode during the transfer             |
//! | 64     | 8    | cpu_sys_us         | server CPU in kernel mode during the transfer           |
//! | 72     | 4    | log_lines          | per-read log lines written for this transfer            |
//! | 76     | 4    | rcvbuf             | the receive buffer (SO_RCVBUF) the server's socket got  |
//! | 80     | 1    | server_io          | as in Accept                                            |
//! | 81     | 1    | log                | as in Accept                                            |
//! | 82     | 4    | output_dropped     | lines of the server's own output (summaries, failures) it could not print since it started, because its stdout or stderr was not being read; per-read log lines are never dropped |
//!
//! Any value may be 0 where the server cannot measure it; `bytes` and `digest` always hold.
//!
//! # Latency mode: clock queries ([`clock`])
//!
//! After `Accept`, the client sends requests and the server answers each one, in order. Every
//! message is `len: u32` (1 to [`clock::MAX_MESSAGE`], 4096; else `BadMessageLength`) then
//! `len` bytes of body. With framing `single` a message (prefix and body) goes out in one
//! `write()`; with `split` the prefix goes in one `write()` and the body in another, on both
//! ends. That second small write is what Nagle's algorithm holds back until the peer ACKs the
//! first, and the peer delays that ACK (at least 40 ms on Linux).
//!
//! | codec  | request body                                  | response body                                                   |
//! |--------|-----------------------------------------------|-----------------------------------------------------------------|
//! | binary | `seq: u64`, `client_send_unix_ns: u64` (16 B)  | `seq: u64`, `server_recv_unix_ns: u64`, `server_send_unix_ns: u64` (24 B) |
//! | object | JSON `{"type":"TimeRequest","seq":..,"client_send_unix_ns":..}` | JSON `{"type":"TimeResponse","seq":..,"server_recv_unix_ns":..,"server_send_unix_ns":..}` |
//!
//! Times are wall-clock nanoseconds since the Unix epoch. The response echoes the request's
//! `seq`. A body that does not decode (wrong size, wrong type, unknown field) is `BadMessage`;
//! the server closes the connection on any bad message, and the client fails with the reason.

pub mod clock;

use std::fmt;

/// The four magic bytes every hello starts with.
pub const MAGIC: [u8; 4] = *b"TSPF";
/// The protocol version this build speaks.
pub const VERSION: u16 = 2;
/// Longest file name, in bytes, as on Linux.
pub const MAX_NAME: usize = 255;
/// Largest chunk (write size) a client may announce: 16 MiB.
pub const MAX_CHUNK: u32 = 16 * 1024 * 1024;
/// Largest frame body the decoder accepts.
pub const MAX_FRAME_BODY: usize = 4096;
/// Longest refusal or abort reason.
pub const MAX_REASON: usize = 1024;
/// Size of the fixed part of a hello.
pub const HELLO_FIXED: usize = 24;
/// Size of a frame header (tag and body length).
pub const FRAME_HEADER: usize = 3;
/// The client's digest trailer after the data: xxh3-64, big-endian.
pub const TRAILER: usize = 8;
/// Longest possible hello on the wire.
pub const MAX_HELLO: usize = HELLO_FIXED + MAX_NAME;

const REPORT_FIXED: usize = 86;
const ACCEPT_BODY: usize = 6;
const FLAG_NODELAY: u8 = 1;

const TAG_ACCEPT: u8 = 1;
const TAG_REFUSE: u8 = 2;
const TAG_REPORT: u8 = 3;
const TAG_ABORT: u8 = 4;
const TAG_CHALLENGE: u8 = 5;

/// Everything a decoder can refuse. Each names the field and the value it saw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("bad magic {0:02x?}: expected \"TSPF\" (not a tsperf peer?)")]
    BadMagic([u8; 4]),
    #[error(
        "unsupported protocol version {0}: this build speaks version {VERSION} (use a tsclient and \
         a tsserver of the same release)"
    )]
    UnsupportedVersion(u16),
    #[error("bad mode {0}: expected 1 (stream) or 2 (latency)")]
    BadMode(u8),
    #[error("bad flags {0:#04x}: only bit 0 (nodelay) is defined")]
    BadFlags(u8),
    #[error("bad codec {0} for this mode")]
    BadCodec(u8),
    #[error("bad framing {0} for this mode")]
    BadFraming(u8),
    #[error("file name of {0} bytes is too long: at most {MAX_NAME}")]
    NameTooLong(usize),
    #[error("file name is not valid UTF-8")]
    NameNotUtf8,
    #[error("bad file name {0:?}: expected a basename without '/', NUL or control characters")]
    BadName(String),
    #[error("bad chunk size {0}: expected 1 to {MAX_CHUNK} bytes")]
    BadChunk(u32),
    #[error("bad chunk size {0} for latency mode: expected 1")]
    LatencyChunk(u32),
    #[error("latency hello with a name ({0} bytes): expected none")]
    LatencyName(usize),
    #[error("frame body of {0} bytes is too long: at most {MAX_FRAME_BODY}")]
    FrameTooLong(usize),
    #[error("unknown frame tag {0}")]
    BadTag(u8),
    #[error("frame tag {tag} with a body of {len} bytes: expected {expected}")]
    BadBodyLength {
        tag: u8,
        len: usize,
        expected: usize,
    },
    #[error("bad {field} value {value}")]
    BadEnum { field: &'static str, value: u8 },
    #[error("string of {0} bytes is too long: at most {MAX_REASON}")]
    StringTooLong(usize),
    #[error("string is not valid UTF-8")]
    StringNotUtf8,
    #[error("bad message length {0}: expected 1 to {max} bytes", max = clock::MAX_MESSAGE)]
    BadMessageLength(u32),
    #[error("bad message: {0}")]
    BadMessage(String),
}

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Send `length` bytes of a file, get a report back.
    Stream,
    /// Clock queries, request and response.
    Latency,
}

/// How the server does its I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerIo {
    /// One blocking thread per connection.
    Blocking,
    /// One mio event loop for all connections.
    EventLoop,
}

/// Where the server's per-read log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogMode {
    None,
    Stdout,
    File,
}

/// The client's opening message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub mode: Mode,
    pub nodelay: bool,
    pub codec: u8,
    pub framing: u8,
    /// Bytes to send (stream mode) or requests to make (latency mode).
    pub length: u64,
    pub chunk: u32,
    pub name: String,
}

/// The server's measurements of one transfer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub bytes: u64,
    pub digest: u64,
    pub first_byte_unix_us: u64,
    pub last_byte_unix_us: u64,
    pub elapsed_ns: u64,
    pub reads: u64,
    pub wakeups: u64,
    pub cpu_user_us: u64,
    pub cpu_sys_us: u64,
    pub log_lines: u32,
    pub rcvbuf: u32,
    /// Lines of the server's own output it could not print since it started (stuck stdout or
    /// stderr).
    pub output_dropped: u32,
    pub server_io: Option<ServerIo>,
    pub log: Option<LogMode>,
    pub saved_to: String,
}

/// A server-to-client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Accept {
        read_size: u32,
        server_io: ServerIo,
        log: LogMode,
    },
    Refuse(String),
    Report(Report),
    Abort(String),
    Challenge([u8; 32]),
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Stream => "stream",
            Mode::Latency => "latency",
        })
    }
}

impl fmt::Display for ServerIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerIo::Blocking => "blocking",
            ServerIo::EventLoop => "event-loop",
        })
    }
}

impl fmt::Display for LogMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogMode::None => "none",
            LogMode::Stdout => "stdout",
            LogMode::File => "file",
        })
    }
}

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
    if buf.len() < HELLO_FIXED {
        return Ok(None);
    }
    let version = be16(&buf[4..6]);
    if version != VERSION {
        return Err(ProtocolError::UnsupportedVersion(version));
    }
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
    let name_len = usize::from(be16(&buf[10..12]));
    if name_len > MAX_NAME {
        return Err(ProtocolError::NameTooLong(name_len));
    }
    let length = be64(&buf[12..20]);
    let chunk = be32(&buf[20..24]);
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
    };
    Ok(Some((hello, HELLO_FIXED + name_len)))
}

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
        } => {
            out.extend_from_slice(&read_size.to_be_bytes());
            out.push(server_io_code(Some(*server_io)));
            out.push(log_code(Some(*log)));
            TAG_ACCEPT
        }
        Frame::Refuse(reason) => {
            put_string(out, reason);
            TAG_REFUSE
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
            for v in [
                r.bytes,
                r.digest,
                r.first_byte_unix_us,
                r.last_byte_unix_us,
                r.elapsed_ns,
                r.reads,
                r.wakeups,
                r.cpu_user_us,
                r.cpu_sys_us,
            ] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&r.log_lines.to_be_bytes());
            out.extend_from_slice(&r.rcvbuf.to_be_bytes());
            out.push(server_io_code(r.server_io));
            out.push(log_code(r.log));
            out.extend_from_slice(&r.output_dropped.to_be_bytes());
            put_string(out, &r.saved_to);
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
    if !(TAG_ACCEPT..=TAG_CHALLENGE).contains(&tag) {
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
        TAG_ACCEPT => {
            if len != ACCEPT_BODY {
                return Err(bad_len(ACCEPT_BODY));
            }
            Frame::Accept {
                read_size: be32(&body[0..4]),
                server_io: server_io_from(body[4])?.ok_or(ProtocolError::BadEnum {
                    field: "server_io",
                    value: body[4],
                })?,
                log: log_from(body[5])?.ok_or(ProtocolError::BadEnum {
                    field: "log",
                    value: body[5],
                })?,
            }
        }
        TAG_REFUSE => Frame::Refuse(whole_string(body).map_err(|e| e.unwrap_or(bad_len(len)))?),
        TAG_ABORT => Frame::Abort(whole_string(body).map_err(|e| e.unwrap_or(bad_len(len)))?),
        TAG_CHALLENGE => Frame::Challenge(body.try_into().map_err(|_| bad_len(32))?),
        _ => {
            if len < REPORT_FIXED + 2 {
                return Err(bad_len(REPORT_FIXED + 2));
            }
            let u = |i: usize| be64(&body[i * 8..i * 8 + 8]);
            let saved_to =
                whole_string(&body[REPORT_FIXED..]).map_err(|e| e.unwrap_or(bad_len(len)))?;
            Frame::Report(Report {
                bytes: u(0),
                digest: u(1),
                first_byte_unix_us: u(2),
                last_byte_unix_us: u(3),
                elapsed_ns: u(4),
                reads: u(5),
                wakeups: u(6),
                cpu_user_us: u(7),
                cpu_sys_us: u(8),
                log_lines: be32(&body[72..76]),
                rcvbuf: be32(&body[76..80]),
                server_io: server_io_from(body[80])?,
                log: log_from(body[81])?,
                output_dropped: be32(&body[82..86]),
                saved_to,
            })
        }
    };
    Ok(Some((frame, FRAME_HEADER + len)))
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_REASON);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// Decodes a string that must fill `body` exactly. `Err(None)` means the sizes disagree.
fn whole_string(body: &[u8]) -> Result<String, Option<ProtocolError>> {
    if body.len() < 2 {
        return Err(None);
    }
    let n = usize::from(be16(&body[0..2]));
    if n > MAX_REASON {
        return Err(Some(ProtocolError::StringTooLong(n)));
    }
    if body.len() != 2 + n {
        return Err(None);
    }
    std::str::from_utf8(&body[2..])
        .map(str::to_owned)
        .map_err(|_| Some(ProtocolError::StringNotUtf8))
}

fn server_io_code(io: Option<ServerIo>) -> u8 {
    match io {
        Some(ServerIo::Blocking) | None => 0,
        Some(ServerIo::EventLoop) => 1,
    }
}

fn server_io_from(v: u8) -> Result<Option<ServerIo>, ProtocolError> {
    match v {
        0 => Ok(Some(ServerIo::Blocking)),
        1 => Ok(Some(ServerIo::EventLoop)),
        value => Err(ProtocolError::BadEnum {
            field: "server_io",
            value,
        }),
    }
}

fn log_code(log: Option<LogMode>) -> u8 {
    match log {
        Some(LogMode::None) | None => 0,
        Some(LogMode::Stdout) => 1,
        Some(LogMode::File) => 2,
    }
}

fn log_from(v: u8) -> Result<Option<LogMode>, ProtocolError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hello() -> Hello {
        Hello {
            mode: Mode::Stream,
            nodelay: false,
            codec: 0,
            framing: 0,
            length: 36 * 1024 * 1024,
            chunk: 10240,
            name: "tsl.txt".into(),
        }
    }

    fn encoded(h: &Hello) -> Vec<u8> {
        let mut v = Vec::new();
        encode_hello(h, &mut v);
        v
    }

    fn report() -> Report {
        Report {
            bytes: 1,
            digest: 2,
            first_byte_unix_us: 3,
            last_byte_unix_us: 4,
            elapsed_ns: 5,
            reads: 6,
            wakeups: 7,
            cpu_user_us: 8,
            cpu_sys_us: 9,
            log_lines: 10,
            rcvbuf: 11,
            output_dropped: 12,
            server_io: Some(ServerIo::EventLoop),
            log: Some(LogMode::File),
            saved_to: "/srv/ünïcode".into(),
        }
    }

    /// A hello decodes to itself, and every proper prefix asks for more bytes.
    #[test]
    fn hello_round_trip_and_prefixes() {
        let h = hello();
        let bytes = encoded(&h);
        assert_eq!(bytes.len(), HELLO_FIXED + 7);
        assert_eq!(decode_hello(&bytes), Ok(Some((h, bytes.len()))));
        for n in 0..bytes.len() {
            assert_eq!(decode_hello(&bytes[..n]), Ok(None), "prefix {n}");
        }
    }

    /// Trailing bytes are left for the caller: `used` says where the hello ended.
    #[test]
    fn hello_reports_bytes_used() {
        let mut bytes = encoded(&hello());
        let n = bytes.len();
        bytes.extend_from_slice(b"extra");
        assert_eq!(decode_hello(&bytes).unwrap().unwrap().1, n);
    }

    fn refused(mut edit: impl FnMut(&mut Vec<u8>)) -> ProtocolError {
        let mut b = encoded(&hello());
        edit(&mut b);
        decode_hello(&b).expect_err("should be refused")
    }

    /// Every hello field with a bad value is refused with the error that names it.
    #[test]
    fn hello_refusals() {
        assert!(matches!(
            refused(|b| b[0] = b'G'),
            ProtocolError::BadMagic(_)
        ));
        assert_eq!(
            decode_hello(b"GET / HTTP/1.1\r\n"),
            Err(ProtocolError::BadMagic(*b"GET "))
        );
        assert_eq!(
            decode_hello(b"TX"),
            Err(ProtocolError::BadMagic(*b"TX\0\0"))
        );
        assert_eq!(refused(|b| b[5] = 1), ProtocolError::UnsupportedVersion(1));
        assert_eq!(refused(|b| b[5] = 3), ProtocolError::UnsupportedVersion(3));
        assert_eq!(refused(|b| b[6] = 0), ProtocolError::BadMode(0));
        assert_eq!(refused(|b| b[6] = 3), ProtocolError::BadMode(3));
        assert_eq!(refused(|b| b[7] = 2), ProtocolError::BadFlags(2));
        assert_eq!(refused(|b| b[8] = 1), ProtocolError::BadCodec(1));
        assert_eq!(refused(|b| b[9] = 1), ProtocolError::BadFraming(1));
        let latency = |codec, framing| {
            refused(|b| {
                b[6] = 2;
                b[8] = codec;
                b[9] = framing;
            })
        };
        assert_eq!(latency(0, 1), ProtocolError::BadCodec(0));
        assert_eq!(latency(3, 1), ProtocolError::BadCodec(3));
        assert_eq!(latency(1, 0), ProtocolError::BadFraming(0));
        assert_eq!(latency(2, 3), ProtocolError::BadFraming(3));
        assert_eq!(
            refused(|b| b[10..12].copy_from_slice(&256u16.to_be_bytes())),
            ProtocolError::NameTooLong(256)
        );
        assert_eq!(
            refused(|b| b[20..24].copy_from_slice(&0u32.to_be_bytes())),
            ProtocolError::BadChunk(0)
        );
        assert_eq!(
            refused(|b| b[20..24].copy_from_slice(&(MAX_CHUNK + 1).to_be_bytes())),
            ProtocolError::BadChunk(MAX_CHUNK + 1)
        );
        assert_eq!(refused(|b| b[24] = 0xff), ProtocolError::NameNotUtf8);
        assert!(matches!(
            refused(|b| b[25] = b'/'),
            ProtocolError::BadName(_)
        ));
        assert!(matches!(refused(|b| b[25] = 0), ProtocolError::BadName(_)));
        assert!(matches!(
            refused(|b| b[25] = b'\n'),
            ProtocolError::BadName(_)
        ));
        // Latency mode carries no name and a chunk of 1.
        let latency = |edit: &dyn Fn(&mut Vec<u8>)| {
            refused(|b| {
                b[6] = 2;
                b[8] = 1;
                b[9] = 1;
                b[20..24].copy_from_slice(&1u32.to_be_bytes());
                edit(b);
            })
        };
        assert_eq!(latency(&|_| {}), ProtocolError::LatencyName(7));
        assert_eq!(
            latency(&|b| {
                b.truncate(HELLO_FIXED);
                b[10..12].copy_from_slice(&0u16.to_be_bytes());
                b[20..24].copy_from_slice(&2u32.to_be_bytes());
            }),
            ProtocolError::LatencyChunk(2)
        );
    }

    /// Limits are inclusive: a 255-byte name and a 16 MiB chunk are accepted.
    #[test]
    fn hello_limits_inclusive() {
        let mut h = hello();
        h.name = "n".repeat(MAX_NAME);
        h.chunk = MAX_CHUNK;
        let b = encoded(&h);
        assert_eq!(decode_hello(&b), Ok(Some((h.clone(), b.len()))));
        h.name.clear();
        h.chunk = 1;
        h.mode = Mode::Latency;
        h.nodelay = true;
        h.codec = 2;
        h.framing = 2;
        let b = encoded(&h);
        assert_eq!(decode_hello(&b), Ok(Some((h, b.len()))));
    }

    /// Every frame kind decodes to itself, and every proper prefix asks for more bytes.
    #[test]
    fn frame_round_trips() {
        for f in [
            Frame::Accept {
                read_size: 102,
                server_io: ServerIo::Blocking,
                log: LogMode::Stdout,
            },
            Frame::Refuse("no thanks".into()),
            Frame::Abort(String::new()),
            Frame::Report(report()),
            Frame::Report(Report::default()),
            Frame::Challenge([9; 32]),
        ] {
            let mut b = Vec::new();
            encode_frame(&f, &mut b);
            for n in 0..b.len() {
                assert_eq!(decode_frame(&b[..n]), Ok(None), "prefix {n} of {f:?}");
            }
            let expect = match f {
                // An absent enum travels as its first value.
                Frame::Report(r) if r.server_io.is_none() => Frame::Report(Report {
                    server_io: Some(ServerIo::Blocking),
                    log: Some(LogMode::None),
                    ..r
                }),
                f => f,
            };
            assert_eq!(decode_frame(&b), Ok(Some((expect, b.len()))));
        }
    }

    /// An over-long reason is cut at a character boundary and still decodes.
    #[test]
    fn long_reason_is_cut_to_limit() {
        let mut b = Vec::new();
        encode_frame(&Frame::Refuse("é".repeat(MAX_REASON)), &mut b);
        let Ok(Some((Frame::Refuse(s), _))) = decode_frame(&b) else {
            panic!("did not decode");
        };
        assert!(s.len() <= MAX_REASON && s.len() >= MAX_REASON - 1);
    }

    /// Every frame refusal: unknown tag, oversized body, wrong body sizes, bad enums and strings.
    #[test]
    fn frame_refusals() {
        assert_eq!(decode_frame(&[0]), Err(ProtocolError::BadTag(0)));
        assert_eq!(decode_frame(&[9, 0, 0]), Err(ProtocolError::BadTag(9)));
        assert!(matches!(
            decode_frame(&[5, 0, 2, 1, 2]),
            Err(ProtocolError::BadBodyLength { tag: 5, .. })
        ));
        assert_eq!(
            decode_frame(&[2, 0x10, 0x01]),
            Err(ProtocolError::FrameTooLong(4097))
        );
        assert!(matches!(
            decode_frame(&[1, 0, 1, 0]),
            Err(ProtocolError::BadBodyLength { tag: 1, .. })
        ));
        assert_eq!(
            decode_frame(&[1, 0, 6, 0, 0, 0, 1, 7, 0]),
            Err(ProtocolError::BadEnum {
                field: "server_io",
                value: 7
            })
        );
        assert_eq!(
            decode_frame(&[1, 0, 6, 0, 0, 0, 1, 0, 3]),
            Err(ProtocolError::BadEnum {
                field: "log",
                value: 3
            })
        );
        // A string length that disagrees with the body length.
        assert!(matches!(
            decode_frame(&[2, 0, 3, 0, 5, b'x']),
            Err(ProtocolError::BadBodyLength { tag: 2, .. })
        ));
        assert_eq!(
            decode_frame(&[2, 0, 4, 0, 2, 0xff, 0xfe]),
            Err(ProtocolError::StringNotUtf8)
        );
        let mut too_long = vec![4, 0x04, 0x02, 0x04, 0x01];
        too_long.resize(3 + 1026, b'a');
        assert_eq!(
            decode_frame(&too_long),
            Err(ProtocolError::StringTooLong(1025))
        );
        assert!(matches!(
            decode_frame(&[3, 0, 2, 0, 0]),
            Err(ProtocolError::BadBodyLength { tag: 3, .. })
        ));
    }

    proptest! {
        /// The decoders never panic on arbitrary bytes, and what they accept they accept whole.
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(Some((_, used))) = decode_hello(&bytes) {
                prop_assert!(used <= bytes.len());
            }
            if let Ok(Some((_, used))) = decode_frame(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }

        /// Random bytes behind a valid magic and version still never panic the hello decoder.
        #[test]
        fn hello_decoder_total_after_magic(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&VERSION.to_be_bytes());
            b.extend_from_slice(&tail);
            let _ = decode_hello(&b);
        }

        /// Any valid hello round-trips.
        #[test]
        fn hello_round_trip_any(length: u64, chunk in 1..=MAX_CHUNK, name in "[a-zA-Z0-9._ é-]{0,60}") {
            let h = Hello { mode: Mode::Stream, nodelay: false, codec: 0, framing: 0, length, chunk, name };
            let b = encoded(&h);
            prop_assert_eq!(decode_hello(&b), Ok(Some((h, b.len()))));
        }
    }
}
