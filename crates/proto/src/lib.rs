//! The tsperf wire protocol, version 7. This module doc is the specification.
//!
//! Version 2 added `output_dropped` to the report. Version 3 added the hello's `log` (the client
//! asks for the server's log sink) and `clock_queries` (clock queries before a stream's data),
//! the Accept's `stdout`, and the [`Frame::Time`] answer. Version 4 added the report's time
//! split (where the server's time went) and the server's `TCP_INFO`. Version 5 added the
//! report's `log_lines_lost` (lines of the transfer's log that could not be written). Version 6
//! added the report's `run_queue_ns` (the serving thread's wait for a CPU, so its `wait` splits
//! into waiting for data and for a CPU) and `boot_id` (both ends on one machine), and latency
//! framing 3, `split-request`. Version 7 added the hello's `duration_ms` (a timed run, ended by
//! the client's half-close after an end trailer: [`END_TRAILER`]), its reverse flag and its
//! session (id, stream index and count), the refusal code `unoffered`, for every mode of
//! iperf3's that a server may not offer (`--reverse`, `--parallel`). Peers of
//! different versions refuse each other at the hello, with a reason naming both versions: a server reads the version as
//! soon as the first 6 bytes are in, so an older, shorter hello is refused at once rather than
//! left waiting for bytes that never come.
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
//! 3. Stream mode: first, if the hello asked for `clock_queries` K > 0, K clock queries, one at
//!    a time: the client sends a 16-byte query (`seq: u64` from 0 to K − 1,
//!    `client_send_unix_ns: u64`) and waits for its [`Frame::Time`] before the next. A query
//!    out of sequence gets [`Frame::Abort`]. The queries share the first byte's deadline (below).
//!    Then the client sends exactly `length` bytes of file data, with no framing, then
//!    a trailer: its xxh3-64 of those bytes, 8 bytes big-endian ([`TRAILER`]). A server that
//!    saves files renames one into place only when the trailer equals its own digest.
//!
//!    A **timed** stream (`duration_ms` > 0) cannot say its length ahead: the client sends the
//!    file's `length` bytes again and again, with no framing, for `duration_ms` from its first
//!    byte (the last pass may be partial), then the **end trailer** ([`END_TRAILER`], 16
//!    bytes: the data bytes it sent, `u64`, and their xxh3-64, `u64`, big-endian), then closes
//!    its direction (`shutdown(SHUT_WR)`). The data ends where the stream does: the server holds
//!    the last 16 bytes back from its count and checksum ([`end::Tail`]) until it reads the end
//!    of the stream, and they are the trailer. Its length must equal the bytes before it (else
//!    [`Frame::Abort`]); the digest is compared by the client, as for a sized stream. A timed
//!    stream is never saved. The server refuses a `duration_ms` above its `--max-time`
//!    (`limit`), and cuts off a timed stream still open [`serve::TIMED_GRACE`] (10 s) after its
//!    `duration_ms` from its first byte, whatever still arrives.
//!
//!    A **reverse** stream (the hello's reverse flag) turns the data round: after the Accept
//!    (whose `length` says the bytes of one pass) and the clock queries, the server sends. Its
//!    data is, with an empty name, the generated stream, the tsgen text (the seed's 36 MiB
//!    repeated; a pass of 36 MiB is `tsl.txt` byte for byte) of `length` bytes a pass; with a
//!    name (and `length` 0), the file of that name a server started with `--serve DIR` offers,
//!    its size a pass (a name it does not serve is refused, `unoffered`, with the reason). One
//!    pass, or passes for `duration_ms` from its first write. `chunk` is the server's write size. Then the server
//!    sends [`Frame::Sent`] (what it measured while sending, [`sent::SENT_BODY`] bytes of body)
//!    and the end trailer, and closes. After its clock queries the client sends nothing but, to
//!    stop the stream early (its Ctrl-C), one byte of any value: the server looks once per turn
//!    of writes and then ends the data where it is, as at its time (its end trailer counts
//!    what it sent; the client closing is the end of it). The client reads to the end of the
//!    stream holding back the last [`sent::REVERSE_TAIL`] bytes, which
//!    are then the frame and the trailer. The stream is verified when the trailer's length is
//!    what arrived (a sized stream: `length`) and its digest the client's. A server that cannot
//!    go on (a served file that shrank or cannot be read, its own shutdown) ends the stream in
//!    the same place with [`Frame::Abort`] and its reason (at most
//!    [`sent::MAX_FAILED_REASON`] bytes), zero bytes up to the Sent frame's size, then the end
//!    trailer of what it sent ([`sent::failed_end`], [`sent::decode_closing`]): the client
//!    reads why, and can still check the bytes it got. A client stops reading, and fails the
//!    stream, once a sized stream has brought more than `length` and the tail, or a timed one
//!    goes on [`serve::TIMED_GRACE`] past its `duration_ms` from its first byte. A reverse hello's
//!    `log` must be 0 (the client logs what it receives), and a pass is at least 1 byte and at
//!    most the server's `--max-bytes`; a server started with `--no-reverse`, or asked for a
//!    file by name without `--serve`, refuses it (`unoffered`).
//!    A client that takes no bytes for the server's idle timeout is cut off.
//! 4. The server sends [`Frame::Report`] once it has read and checksummed all `length` bytes and
//!    the trailer, or [`Frame::Abort`] with a reason if it cannot go on (disk full, say; then it
//!    closes). The client's clock stops when the report arrives, not when its last write
//!    returned.
//! 5. The client closes. The server closes after the report.
//!
//! Deadlines are the server's: the hello (and an authentication answer) must be whole within
//! its hello timeout of the connection, the clock queries and the first data byte (or, in
//! latency mode, the first request) within that timeout of the accept, and then no wait for data may last longer than its idle timeout. A stream that
//! misses one gets [`Frame::Abort`] with the reason; a hello, [`Frame::Refuse`].
//!
//! Strings from the peer (reasons, `saved_to`, the file name) are text for a person and may hold
//! anything UTF-8 allows: an end that prints them escapes control, format and bidi characters.
//!
//! Latency mode replaces steps 3 and 4 with clock queries (below); the client closes the
//! connection when it has made its requests.
//!
//! # Hello (client to server), 48 bytes + name
//!
//! | offset | size | field    | value and limit                                                   |
//! |-------:|-----:|----------|-------------------------------------------------------------------|
//! | 0      | 4    | magic    | `TSPF` (`54 53 50 46`); anything else: refused, `BadMagic`          |
//! | 4      | 2    | version  | [`VERSION`] (7); anything else: refused, `UnsupportedVersion`       |
//! | 6      | 1    | mode     | 1 = stream, 2 = latency; anything else: refused, `BadMode`           |
//! | 7      | 1    | flags    | bit 0 = TCP_NODELAY wanted; bit 1 (stream only) = reverse: the server sends; other bits must be 0, else `BadFlags` |
//! | 8      | 1    | codec    | stream: 0; latency: 1 = binary, 2 = object; else `BadCodec`         |
//! | 9      | 1    | framing  | stream: 0; latency: 1 = single, 2 = split (both ends), 3 = split-request (the request split, the response whole); else `BadFraming` |
//! | 10     | 1    | log      | stream: the server log sink asked for: 0 = the server's own `--log`, 1 = none, 2 = stdout, 3 = file; latency: 0; else `BadLog` |
//! | 11     | 1    | clock_queries | stream: 0 to [`MAX_CLOCK_QUERIES`] (64); latency: 0; else `BadClockQueries` |
//! | 12     | 2    | name_len | 0 to [`MAX_NAME`] (255); more: `NameTooLong`                        |
//! | 14     | 8    | length   | bytes the client will send (stream), request count (latency)      |
//! | 22     | 4    | chunk    | the client's write size, 1 to [`MAX_CHUNK`] (16 MiB), else `BadChunk`; latency: 1, else `LatencyChunk` |
//! | 26     | 4    | duration_ms | stream: 0 = sized by `length`; else a timed run of this many ms (and `length` is one pass); latency: 0, else `LatencyDuration` |
//! | 30     | 16   | session  | the client's random id of the session its streams share (`--parallel`); all zero: a stream of its own |
//! | 46     | 1    | index    | this stream's place in its session, below `count`, else `BadStreams` |
//! | 47     | 1    | count    | streams in the session, 1 to [`MAX_STREAMS`] (128), else `BadStreams` |
//! | 48     | n    | name     | file basename, UTF-8, else `NameNotUtf8`; latency: empty, else `LatencyName` |
//!
//! The name is a basename: the decoder refuses a `/`, a NUL byte or any other control character
//! (`BadName`). With the nodelay flag the server sets TCP_NODELAY on its end of the connection.
//!
//! A server that does not offer what a hello asks for refuses it with the code `unoffered` and a
//! reason naming the flag: this version's tsserver sends only when not started with
//! `--no-reverse`, and named files only with `--serve`. The streams of a session are each
//! served as a stream of their own; the server groups them by `session` (and the peer's
//! address) for a summary once the last has ended.
//!
//! A `log` other than 0 or the server's own sink is served only by a server started with
//! `--allow-client-log`; any other server refuses the hello with a reason naming that flag. The
//! file sink is always the file the server's operator named (`--log-file`): the client chooses
//! whether the server logs, never where.
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
//! | 1   | Accept | `read_size: u32`, `server_io: u8`, `log: u8`, `stdout: u8`, `length: u64` (a reverse stream's bytes a pass; 0 otherwise) (15 bytes) |
//! | 2   | Refuse | `reason: string` (at most [`MAX_REASON`] bytes): the refusal of a hello of another version, in the one layout every version reads (code [`RefuseCode::Version`]) |
//! | 3   | Report | 242 fixed bytes (below), then `saved_to: string` (empty when not saved)    |
//! | 4   | Abort  | `reason: string`: the server gave up mid-transfer and closes               |
//! | 5   | Challenge | 32 random bytes to authenticate against (32 bytes)                     |
//! | 6   | Time   | the answer to a stream's clock query: `seq: u64`, `server_recv_unix_ns: u64`, `server_send_unix_ns: u64` (24 bytes) |
//! | 7   | Refused | `code: u8` ([`RefuseCode`]; unknown values are refused, `BadEnum`), `reason: string`: every other refusal, with a code a program acts on and the reason for people |
//! | 8   | Sent   | a reverse stream's sender report, inside the stream before its end trailer ([`sent::Sent`], [`sent::SENT_BODY`] bytes): 12 × u64 (`bytes`, `writes`, `partial_writes`, `would_block`, `first_write_unix_us`, `elapsed_ns`, `cpu_user_us`, `cpu_sys_us`, `on_cpu_ns`, `run_queue_ns`, `source_read_ns`, `chunk`; `u64::MAX` = not known), `sndbuf: u32`, `server_io: u8`, `boot_id` (16), the sender's `TCP_INFO` (16 × u64) and its in-flight readings (7 × u64); `writes` above `bytes` or `partial_writes` above `writes` is refused (`BadReport`) |
//!
//! `server_io`: 0 = blocking (thread per connection), 1 = event loop. `log`: the transfer's
//! sink, 0 = none, 1 = stdout, 2 = file. `stdout`: what the server's standard output is, as
//! the server sees it (`fstat`, `isatty`): 0 = unknown, 1 = a terminal, 2 = a pipe, 3 = a
//! regular file, 4 = the null device, 5 = another character device, 6 = a socket, 7 = closed.
//! Other values are refused (`BadEnum`).
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
//! | 72     | 4    | log_lines          | per-read log lines written for this transfer (stdout: handed to its queue) |
//! | 76     | 4    | rcvbuf             | the receive buffer (SO_RCVBUF) the server's socket got  |
//! | 80     | 1    | server_io          | as in Accept                                            |
//! | 81     | 1    | log                | as in Accept                                            |
//! | 82     | 4    | output_dropped     | lines of the server's own output (summaries, failures) it could not print since it started, because its stdout or stderr was not being read; per-read log lines are never dropped |
//!
//! | 86     | 8    | read_ns            | the time split, from the first data byte to the report (monotonic ns): in read calls (in the blocking model, their waits for data too) |
//! | 94     | 8    | hash_ns            | checksumming                                            |
//! | 102    | 8    | log_ns             | writing per-read log lines, and waiting for room on stdout for them |
//! | 110    | 8    | save_ns            | writing received bytes to the `--save` file             |
//! | 118    | 8    | fsync_ns           | syncing and renaming the saved file into place          |
//! | 126    | 8    | wait_ns            | the rest: waiting for data or the trailer (event loop), for the CPU, for other connections |
//! | 134    | 80   | tcp                | the server socket's `TCP_INFO` at the end, 10 × u64, `u64::MAX` = not known: `rcv_space`, `rcv_rtt` (µs), `rcv_mss`, `advmss`, `rcv_ssthresh`, `rcv_wnd`, `segs_in`, `data_segs_in`, `rcv_ooopack`, `bytes_received` |
//! | 214    | 4    | log_lines_lost     | per-read log lines of this transfer that could not be written (the log file's disk was full, stdout was closed) |
//! | 218    | 8    | run_queue_ns       | the serving thread's time runnable but waiting for a CPU, first data byte to the report (Linux schedstat; a CPU quota's throttling counts here); `u64::MAX` = not known |
//! | 226    | 16   | boot_id            | the server kernel's boot id (`/proc/sys/kernel/random/boot_id`); all zero = not known. Equal to the client's: both ends on one machine |
//!
//! Any value may be 0 where the server cannot measure it; `bytes` and `digest` always hold. The
//! values must agree with one another ([`Report::check`]; else `BadReport`, naming the field):
//! the six times fit in a u64 together, `reads` is between 1 and `bytes` (0 for no bytes),
//! `first_byte_unix_us` ≤ `last_byte_unix_us`, `elapsed_ns` is no longer than the six times
//! together, `run_queue_ns` no longer than them plus 10 ms (the scheduler's counts lag by up to
//! a tick), and `log_lines` + `log_lines_lost` is 0 without a log, else at most `reads` + 2.
//! The six times add up to the time from the first data byte until the report was ready, so
//! they cover `elapsed_ns` (first to last data byte) and what came after it (the last
//! checksum, the trailer, the save's sync).
//!
//! # Latency mode: clock queries ([`clock`])
//!
//! After `Accept`, the client sends requests and the server answers each one, in order. Every
//! message is `len: u32` (1 to [`clock::MAX_MESSAGE`], 4096; else `BadMessageLength`) then
//! `len` bytes of body. With framing `single` a message (prefix and body) goes out in one
//! `write()`; with `split` the prefix goes in one `write()` and the body in another, on both
//! ends; with `split-request` (version 6) only the client's requests are split, and the server
//! answers in one write. That second small write is what Nagle's algorithm holds back until the peer ACKs the
//! first, and the peer delays that ACK (at least 40 ms on Linux).
//!
//! | codec  | request body                                  | response body                                                   |
//! |--------|-----------------------------------------------|-----------------------------------------------------------------|
//! | binary | `seq: u64`, `client_send_unix_ns: u64` (16 B)  | `seq: u64`, `server_recv_unix_ns: u64`, `server_send_unix_ns: u64` (24 B) |
//! | object | JSON `{"type":"TimeRequest","seq":..,"client_send_unix_ns":..}` | JSON `{"type":"TimeResponse","seq":..,"server_recv_unix_ns":..,"server_send_unix_ns":..}` |
//!
//! A stream's clock queries (step 3) use the binary request body, without its length prefix,
//! and are answered with [`Frame::Time`], the binary response body in a frame.
//!
//! Times are wall-clock nanoseconds since the Unix epoch. The response echoes the request's
//! `seq`. A body that does not decode (wrong size, wrong type, unknown field) is `BadMessage`;
//! the server closes the connection on any bad message, and the client fails with the reason.

#![forbid(unsafe_code)]

pub mod client;
pub mod clock;
pub mod end;
mod error;
mod frame;
mod hello;
#[cfg(test)]
mod pair;
mod report;
pub mod sent;
pub mod serve;
pub mod tcp;

pub use error::ProtocolError;
pub use report::{Report, TimePhase, TimeSplit};

pub use frame::{decode_frame, encode_frame};
pub use hello::{Hello, Session, decode_hello, encode_hello};

use std::fmt;

/// The port both ends use unless told otherwise (iperf3 has 5201).
pub const DEFAULT_PORT: u16 = 7433;

/// The bytes a server reads at once when no log watches single reads (and no `--read-size`
/// says otherwise): the Accept's `read_size` then.
pub const BULK_READ: u32 = 256 * 1024;

/// The four magic bytes every hello starts with.
pub const MAGIC: [u8; 4] = *b"TSPF";
/// The protocol version this build speaks.
pub const VERSION: u16 = 7;
/// Longest file name, in bytes, as on Linux.
pub const MAX_NAME: usize = 255;
/// Largest chunk (write size) a client may announce: 16 MiB.
pub const MAX_CHUNK: u32 = 16 * 1024 * 1024;
/// Largest frame body the decoder accepts.
pub const MAX_FRAME_BODY: usize = 4096;
/// Longest refusal or abort reason.
pub const MAX_REASON: usize = 1024;
/// Size of the fixed part of a hello.
pub const HELLO_FIXED: usize = 48;
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
pub const MAX_HELLO: usize = HELLO_FIXED + MAX_NAME;

const REPORT_FIXED: usize = 242;
const ACCEPT_BODY: usize = 15;
const TIME_BODY: usize = 24;
const FLAG_NODELAY: u8 = 1;
const FLAG_REVERSE: u8 = 2;

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
