//! Encoding and decoding the client's [`Hello`] (the table "Hello" in [`super`]).

use super::frame::{be16, be32, be64};
use super::*;
use crate::SaveMode;

mod check;
use check::{Header, congestion_of, header, latency_fields, name_of, pace_of, session_of, ways};

/// The client's opening message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// What the connection is for.
    pub mode: Mode,
    /// The client wants TCP_NODELAY on the server's end too (latency mode).
    pub nodelay: bool,
    /// Latency mode: the message body encoding ([`clock::Codec::code`]); stream: 0.
    pub codec: u8,
    /// Latency mode: one write per message or two ([`clock::Framing::code`]); stream: 0.
    pub framing: u8,
    /// Bytes to send (stream mode) or requests to make (latency mode).
    pub length: u64,
    /// The client's write size (stream); 1 (latency).
    pub chunk: u32,
    /// The file's basename (stream); empty (latency).
    pub name: String,
    /// The server log sink asked for (stream mode); `None`: the server's own.
    pub log: Option<LogMode>,
    /// Clock queries before the data (stream mode), at most [`MAX_CLOCK_QUERIES`].
    pub clock_queries: u8,
    /// Stream mode: how long the run lasts, in ms (`--time`); 0: sized by `length`. A timed
    /// stream repeats its `length` bytes and ends as a closed stream does ([`END_TRAILER`]).
    pub duration_ms: u32,
    /// Stream mode: the server sends and the client receives (`--reverse`).
    pub reverse: bool,
    /// A reverse stream of the generated text (an empty name): its period is one `chunk`, the
    /// text's first `chunk` bytes sent again and again (`--one-buffer`), as iperf3 sends one
    /// buffer; else the seed's 36 MiB. Version 9.
    pub one_buffer: bool,
    /// The session the connection belongs to, and its place in it (`--parallel`).
    pub session: Session,
    /// Half of a two-way run (`--bidir`): the streams of both directions carry one session
    /// id, so a server that serves one client's run (`--once`) knows them all. Version 11.
    pub two_way: bool,
    /// A stream the server sends (reverse): the TCP congestion control it sends with
    /// (`tsclient -R -C ALGO`); `None`: its kernel's default. Version 10.
    pub congestion: Option<crate::tcp::Congestion>,
    /// A generated stream the server sends (reverse): how it hands its chunks to the kernel
    /// (`tsclient -R --io`); `None`: the server's own way. Version 12.
    pub call: Option<Call>,
    /// A sized forward stream of a named file: how the server writes it to its disk
    /// (`tsclient --far-disk`); `None`: the server's own way (with `--save`, durably). Version 14.
    pub save: Option<SaveMode>,
    /// The save is measured and not kept (flag bit 4): written and synced as `save` says, then
    /// removed, taking no name (`tsclient --ladder`). Only with a `save` that writes. Version 14.
    pub measure_save: bool,
    /// A stream: its data over TLS 1.3 with this cipher suite, after the clear-text hello, its
    /// answer and the clock queries (`tsclient --tls`); `None`: clear text. Version 14.
    pub tls: Option<crate::tls::Cipher>,
    /// A stream the server sends (reverse): its sends paced to at most this many bytes a
    /// second (`SO_MAX_PACING_RATE`, `tsclient -R -b`); `None`: unpaced. Version 15.
    pub pace: Option<u64>,
}

/// The session a stream belongs to: the streams of one `--parallel` run share its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Session {
    /// The client's random id for the session; all zero: a stream of its own.
    pub id: [u8; 16],
    /// This stream's place, 0 to `count` − 1.
    pub index: u8,
    /// Streams in the session, 1 to [`MAX_STREAMS`]; 0 is read as 1 (a stream of its own).
    pub count: u8,
}

impl Session {
    /// A stream of its own.
    pub const ALONE: Session = Session {
        id: [0; 16],
        index: 0,
        count: 1,
    };

    /// Stream `index` of the `count` streams of session `id`.
    pub fn of(id: [u8; 16], index: usize, count: u8) -> Session {
        Session {
            id,
            index: u8::try_from(index).unwrap_or(u8::MAX),
            count,
        }
    }

    /// This stream's stripe of `len` bytes, as its offset and length: of the `count` stripes
    /// ([`stripes`]) the `index`th; all of it for a stream of its own. `None` if a stripe would
    /// be empty or the place is past the count.
    pub fn stripe(&self, len: u64) -> Option<(u64, u64)> {
        if self.count <= 1 || self.id == [0; 16] {
            return (len > 0).then_some((0, len));
        }
        stripes(len, self.count)?
            .get(usize::from(self.index))
            .copied()
    }
}

/// The stripes of `len` bytes for `n` streams: contiguous, in order, covering them exactly,
/// their lengths differing by at most one byte (stripe `i` runs from `len·i/n` to
/// `len·(i+1)/n`). `None` if a stripe would be empty. A forward session's client stripes its
/// file so; a served file's reverse session is striped so by the server.
pub fn stripes(len: u64, n: u8) -> Option<Vec<(u64, u64)>> {
    let n = u128::from(n.max(1));
    if u128::from(len) < n {
        return None;
    }
    let at = |i: u128| (u128::from(len) * i / n) as u64;
    Some((0..n).map(|i| (at(i), at(i + 1) - at(i))).collect())
}

impl Hello {
    /// The hello of a stream transfer of `length` bytes in `chunk`-byte writes of file `name`,
    /// with the server's own log sink and no clock queries.
    pub fn stream(length: u64, chunk: u32, name: &str) -> Hello {
        Hello {
            mode: Mode::Stream,
            nodelay: false,
            codec: 0,
            framing: 0,
            length,
            chunk,
            name: name.to_owned(),
            log: None,
            clock_queries: 0,
            duration_ms: 0,
            reverse: false,
            one_buffer: false,
            session: Session::ALONE,
            two_way: false,
            congestion: None,
            call: None,
            save: None,
            measure_save: false,
            tls: None,
            pace: None,
        }
    }

    /// The connections of the client's run this stream is one of: its session's streams, in
    /// both directions when it is half of a two-way run; 1 for a stream of its own (an id of
    /// zeros).
    pub fn run_connections(&self) -> u16 {
        if self.session.id == [0; 16] {
            return 1;
        }
        u16::from(self.session.count.max(1)) * if self.two_way { 2 } else { 1 }
    }

    /// True when the stream ends where its sender closes its direction, with an
    /// [`END_TRAILER`] (a timed run, or any run the server sends): else it is sized by `length`
    /// and ends with a [`TRAILER`].
    pub fn closed_end(&self) -> bool {
        self.mode == Mode::Stream && (self.duration_ms > 0 || self.reverse)
    }

    /// The hello of a latency session of `count` requests.
    pub fn latency(
        count: u64,
        codec: clock::Codec,
        framing: clock::Framing,
        nodelay: bool,
    ) -> Hello {
        Hello {
            mode: Mode::Latency,
            nodelay,
            codec: codec.code(),
            framing: framing.code(),
            length: count,
            chunk: 1,
            name: String::new(),
            log: None,
            clock_queries: 0,
            duration_ms: 0,
            reverse: false,
            one_buffer: false,
            session: Session::ALONE,
            two_way: false,
            congestion: None,
            call: None,
            save: None,
            measure_save: false,
            tls: None,
            pace: None,
        }
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
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    out.push(
        flag(h.nodelay, FLAG_NODELAY)
            | flag(h.reverse, FLAG_REVERSE)
            | flag(h.one_buffer, FLAG_ONE_BUFFER)
            | flag(h.two_way, FLAG_TWO_WAY)
            | flag(h.measure_save, FLAG_MEASURE_SAVE),
    );
    out.push(h.codec);
    out.push(h.framing);
    out.push(hello_log_code(h.log));
    out.push(h.clock_queries);
    out.extend_from_slice(&(h.name.len() as u16).to_be_bytes());
    out.extend_from_slice(&h.length.to_be_bytes());
    out.extend_from_slice(&h.chunk.to_be_bytes());
    out.extend_from_slice(&h.duration_ms.to_be_bytes());
    out.extend_from_slice(&h.session.id);
    out.push(h.session.index);
    out.push(h.session.count);
    let congestion = h.congestion.as_ref().map_or("", |c| c.as_str());
    out.push(congestion.len() as u8);
    let (call, batch) = Call::code(h.call);
    out.push(call);
    out.extend_from_slice(&batch.to_be_bytes());
    out.push(SaveMode::code(h.save));
    out.push(crate::tls::Cipher::code(h.tls));
    out.extend_from_slice(&h.pace.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(h.name.as_bytes());
    out.extend_from_slice(congestion.as_bytes());
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
    let duration_ms = be32(&buf[26..30]);
    if mode == Mode::Latency {
        latency_fields(chunk, name_len, duration_ms)?;
    }
    let session = session_of(buf)?;
    let congestion_len = usize::from(buf[48]);
    if congestion_len > crate::tcp::MAX_CONGESTION {
        return Err(ProtocolError::CongestionTooLong(congestion_len));
    }
    let Some(name_bytes) = buf.get(HELLO_FIXED..HELLO_FIXED + name_len) else {
        return Ok(None);
    };
    let name = name_of(name_bytes, flags)?;
    let at = HELLO_FIXED + name_len;
    let Some(congestion_bytes) = buf.get(at..at + congestion_len) else {
        return Ok(None);
    };
    let congestion = congestion_of(congestion_bytes, mode, flags)?;
    let (call, save, tls) = ways(buf, mode, flags, name, duration_ms)?;
    let pace = pace_of(be64(&buf[54..62]), mode, flags)?;
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
        duration_ms,
        reverse: flags & FLAG_REVERSE != 0,
        one_buffer: flags & FLAG_ONE_BUFFER != 0,
        session,
        two_way: flags & FLAG_TWO_WAY != 0,
        measure_save: flags & FLAG_MEASURE_SAVE != 0,
        congestion,
        call,
        save,
        tls,
        pace,
    };
    Ok(Some((hello, at + congestion_len)))
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
