#![doc = include_str!("../PROTOCOL.md")]
#![forbid(unsafe_code)]

mod call;
pub mod client;
pub mod clock;
pub mod end;
mod error;
mod frame;
mod hello;
#[cfg(test)]
mod pair;
mod report;
mod save;
pub mod sent;
pub mod serve;
pub mod tcp;
pub mod tls;

pub use error::ProtocolError;
pub use report::{Report, TimePhase, TimeSplit};

pub use call::{Call, MAX_BATCH};
pub use frame::{decode_frame, encode_frame};
pub use hello::{Hello, Session, decode_hello, encode_hello, stripes};
pub use save::SaveMode;

use std::fmt;

/// The port both ends use unless told otherwise (iperf3 has 5201).
pub const DEFAULT_PORT: u16 = 7433;

/// The bytes a server reads at once when no log watches single reads (and no `--read-size`
/// says otherwise): the Accept's `read_size` then.
pub const BULK_READ: u32 = 256 * 1024;

/// The bytes the server's event loop reads at once with `--log none` and no `--read-size`
/// (its `bulk_read`): one read block serves all its connections, so a larger one costs a
/// loop, not a connection (tsperf-server's `LOOP_READ`, where it was measured).
pub const LOOP_READ: u32 = 1 << 20;

/// The four magic bytes every hello starts with.
pub const MAGIC: [u8; 4] = *b"TSPF";
/// The protocol version this build speaks.
pub const VERSION: u16 = 15;
/// Longest file name, in bytes, as on Linux.
pub const MAX_NAME: usize = 255;
/// Largest chunk (write size) a client may announce: 16 MiB.
pub const MAX_CHUNK: u32 = 16 * 1024 * 1024;
/// Largest frame body the decoder accepts.
pub const MAX_FRAME_BODY: usize = 4096;
/// Longest refusal or abort reason.
pub const MAX_REASON: usize = 1024;
/// Size of the fixed part of a hello.
pub const HELLO_FIXED: usize = 62;
/// Most streams in one session (`--parallel`).
pub const MAX_STREAMS: u8 = 128;
/// The end of a closed stream, after its data: `length: u64` (the data bytes sent) and the
/// xxh3-64 of them, both big-endian; then the sender closes its direction.
pub const END_TRAILER: usize = 16;
/// Most clock queries a stream's hello may ask for.
pub const MAX_CLOCK_QUERIES: u8 = 64;
/// Size of a stream's clock query: `seq: u64`, `client_send_unix_ns: u64`.
pub const CLOCK_QUERY: usize = 16;
/// Size of a frame header (tag and body length).
pub const FRAME_HEADER: usize = 3;
/// The client's digest trailer after the data: xxh3-64, big-endian.
pub const TRAILER: usize = 8;
/// Longest possible hello on the wire.
pub const MAX_HELLO: usize = HELLO_FIXED + MAX_NAME + tcp::MAX_CONGESTION;

const REPORT_FIXED: usize = 255;
const ACCEPT_BODY: usize = 80;
const TIME_BODY: usize = 24;
const FLAG_NODELAY: u8 = 1;
const FLAG_REVERSE: u8 = 2;
const FLAG_ONE_BUFFER: u8 = 4;
const FLAG_TWO_WAY: u8 = 8;
const FLAG_MEASURE_SAVE: u8 = 16;

const TAG_ACCEPT: u8 = 1;
const TAG_REFUSE: u8 = 2;
const TAG_REPORT: u8 = 3;
const TAG_ABORT: u8 = 4;
const TAG_CHALLENGE: u8 = 5;
const TAG_TIME: u8 = 6;
const TAG_REFUSED: u8 = 7;
const TAG_SENT: u8 = 8;

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
    /// No per-read lines.
    None,
    /// One line per read to the server's stdout, one write each.
    Stdout,
    /// One line per read to the server's `--log-file`, buffered per transfer.
    File,
}

/// Why a server refused a hello: the code a client acts on, beside the reason's words. Sent in
/// the Refused frame (tag 7); the version refusal keeps the Refuse frame (tag 2) that every
/// version reads, and decodes as [`RefuseCode::Version`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefuseCode {
    /// The hello is of another protocol version.
    Version,
    /// The hello is malformed, incomplete in time, or followed by data before the answer.
    Hello,
    /// Authentication is required, or the answer was wrong.
    Auth,
    /// The client asked for a log sink the server does not let it choose.
    Sink,
    /// A limit of the server's: the size announced (`--max-bytes`), the connections it serves
    /// (`--max-clients`), its descriptors.
    Limit,
    /// The file cannot be saved under its name (`--save`).
    Save,
    /// The server is shutting down.
    Shutdown,
    /// Anything else.
    Other,
    /// The hello asks for something this server does not offer (`--reverse` on a server
    /// started with `--no-reverse`, say); the reason names the flag.
    Unoffered,
}

impl RefuseCode {
    /// Every code, in wire order (the byte is the index).
    pub const ALL: [RefuseCode; 9] = [
        RefuseCode::Version,
        RefuseCode::Hello,
        RefuseCode::Auth,
        RefuseCode::Sink,
        RefuseCode::Limit,
        RefuseCode::Save,
        RefuseCode::Shutdown,
        RefuseCode::Other,
        RefuseCode::Unoffered,
    ];

    /// The byte on the wire.
    pub fn code(self) -> u8 {
        RefuseCode::ALL.iter().position(|c| *c == self).unwrap_or(7) as u8
    }

    /// The code of a byte, if it is one.
    pub fn from_code(v: u8) -> Option<RefuseCode> {
        RefuseCode::ALL.get(usize::from(v)).copied()
    }
}

/// What the server's standard output is, as the server sees it (the Accept's `stdout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StdoutKind {
    /// Something fstat did not tell apart.
    #[default]
    Unknown,
    /// A terminal (isatty).
    Terminal,
    /// A pipe or FIFO.
    Pipe,
    /// A regular file.
    File,
    /// The null device.
    Null,
    /// Another character device.
    CharDevice,
    /// A socket.
    Socket,
    /// Closed: fstat failed.
    Closed,
}

impl StdoutKind {
    /// Where the output goes, for a sentence: "a terminal", "a pipe".
    pub fn describe(self) -> &'static str {
        match self {
            StdoutKind::Unknown => "an unknown kind of output",
            StdoutKind::Terminal => "a terminal",
            StdoutKind::Pipe => "a pipe",
            StdoutKind::File => "a regular file",
            StdoutKind::Null => "the null device",
            StdoutKind::CharDevice => "a character device",
            StdoutKind::Socket => "a socket",
            StdoutKind::Closed => "nowhere (closed)",
        }
    }
}

/// A server-to-client message.
#[derive(Debug, Clone, PartialEq, Eq)]
// A report is one frame per transfer, never on a hot path: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Frame {
    /// The server serves the hello.
    Accept {
        /// The most bytes one server read asks for.
        read_size: u32,
        /// How the server does its I/O.
        server_io: ServerIo,
        /// Where the transfer's per-read lines go.
        log: LogMode,
        /// What the server's stdout is, as it sees it.
        stdout: StdoutKind,
        /// A reverse stream: the bytes of one pass the server will send (the asked bytes, or
        /// the served file's size); 0 otherwise.
        length: u64,
        /// A stream that asked for TLS: the certificate the server will present, and the
        /// key's proof of it where the server authenticates (version 14).
        tls: Option<tls::Identity>,
    },
    /// The server does not serve the hello, and says why; it closes.
    Refuse {
        /// What kind of refusal: a program acts on this, never on the reason's words.
        code: RefuseCode,
        /// Why, for people.
        reason: String,
    },
    /// Every byte and the trailer arrived: the server's measurements.
    Report(Report),
    /// The server gave up mid-transfer, and says why; it closes.
    Abort(String),
    /// Prove you hold the key: the bytes to answer ([`Challenge`](Frame::Challenge) is 32 random
    /// bytes).
    Challenge([u8; 32]),
    /// The answer to a stream's clock query.
    Time(clock::TimeResponse),
    /// A reverse stream's sender report, after its data and before its end trailer.
    Sent(sent::Sent),
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

#[cfg(test)]
mod tests;
