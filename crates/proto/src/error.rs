//! Everything a decoder can refuse, each naming the field and the value it saw.

use crate::{
    MAX_BATCH, MAX_CHUNK, MAX_CLOCK_QUERIES, MAX_FRAME_BODY, MAX_NAME, MAX_REASON, MAX_STREAMS,
    VERSION, clock, tcp::MAX_CONGESTION,
};

/// What a hello that does not start with `TSPF` is: the bytes seen, and what sent them where
/// that shows (an iperf3 client opens with a cookie of characters from `a-z` and `2-7`).
fn bad_magic(seen: &[u8; 4]) -> String {
    let cookie = seen
        .iter()
        .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(b));
    if cookie {
        format!(
            "bad magic {seen:02x?}: an iperf3 client, it seems (its cookie starts \"{}\"): this \
             is a tsperf server; use tsclient, or point iperf3 at an iperf3 server (iperf3 -s)",
            String::from_utf8_lossy(seen)
        )
    } else {
        format!("bad magic {seen:02x?}: expected \"TSPF\" (not a tsperf peer?)")
    }
}

/// Everything a decoder can refuse. Each names the field and the value it saw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The hello does not start with `TSPF`.
    #[error("{}", bad_magic(.0))]
    BadMagic([u8; 4]),
    #[error(
        "the client speaks protocol version {0}, this tsserver version {VERSION}: use a tsclient \
         and a tsserver of the same release"
    )]
    /// The hello is of another protocol version.
    UnsupportedVersion(u16),
    /// The hello's mode is neither stream nor latency.
    #[error("bad mode {0}: expected 1 (stream) or 2 (latency)")]
    BadMode(u8),
    /// The hello sets flags this version does not define.
    #[error(
        "bad flags {0:#04x}: only bit 0 (nodelay) and, in stream mode, bit 1 (reverse), \
         bit 2 (one buffer, with bit 1 and no name) and bit 3 (two-way) are defined"
    )]
    BadFlags(u8),
    /// The hello's codec does not fit its mode.
    #[error("bad codec {0} for this mode")]
    BadCodec(u8),
    /// The hello's framing does not fit its mode.
    #[error("bad framing {0} for this mode")]
    BadFraming(u8),
    /// The hello asks for a log sink that does not exist or does not fit its mode.
    #[error("bad log sink {0} for this mode: expected 0 to 3 (stream), 0 (latency)")]
    BadLog(u8),
    /// The hello asks for more clock queries than allowed, or any in latency mode.
    #[error("bad clock query count {0}: expected 0 to {MAX_CLOCK_QUERIES} (stream), 0 (latency)")]
    BadClockQueries(u8),
    /// The file name is longer than [`MAX_NAME`].
    #[error("file name of {0} bytes is too long: at most {MAX_NAME}")]
    NameTooLong(usize),
    /// The congestion control's name is longer than the kernel's names
    /// ([`crate::tcp::MAX_CONGESTION`]).
    #[error("congestion control name of {0} bytes is too long: at most {MAX_CONGESTION}")]
    CongestionTooLong(usize),
    /// The congestion control's name is not one, or the hello does not ask the server to send.
    #[error(
        "bad congestion control {0:?}: expected ASCII letters, digits, '_' or '-', in the hello \
         of a stream the server sends (reverse) only"
    )]
    BadCongestion(String),
    /// The send call is not one, its batch is out of range, or the hello does not ask the
    /// server to send the generated text, or asks sendfile of a timed stream.
    #[error(
        "bad send call {0} (batch {1}): expected 0 (the server's own), 1 (write), 2 (writev of \
         1 to {MAX_BATCH} chunks) or 3 (sendfile, not for a timed stream), in the hello of a \
         generated stream the server sends (reverse) only"
    )]
    BadCall(u8, u16),
    /// The save mode is not one, or the hello is not of a sized forward stream of a named file.
    #[error(
        "bad save mode {0}: expected 0 (the server's own), 1 (buffered), 2 (durable), 3 \
         (direct) or 4 (not written), in the hello of a sized stream of a named file the client \
         sends only"
    )]
    BadSave(u8),
    /// The cipher suite is not one, or the hello is not a stream's.
    #[error(
        "bad TLS cipher suite {0}: expected 0 (clear text), 1 (aes128gcm), 2 (aes256gcm) or 3 \
         (chacha20poly1305), in the hello of a stream"
    )]
    BadTls(u8),
    /// A pace in the hello of a stream the server does not send.
    #[error(
        "bad pace {0} bytes a second: expected 0 (unpaced), or any rate in the hello of a \
         stream the server sends (reverse) only"
    )]
    BadPace(u64),
    /// The file name is not UTF-8.
    #[error("file name is not valid UTF-8")]
    NameNotUtf8,
    /// The file name is not a plain basename.
    #[error("bad file name {0:?}: expected a basename without '/', NUL or control characters")]
    BadName(String),
    /// The chunk size is 0 or above [`MAX_CHUNK`].
    #[error("bad chunk size {0}: expected 1 to {MAX_CHUNK} bytes")]
    BadChunk(u32),
    /// A latency hello's chunk is not 1.
    #[error("bad chunk size {0} for latency mode: expected 1")]
    LatencyChunk(u32),
    /// A latency hello asks for a duration.
    #[error("latency hello with a duration ({0} ms): expected 0")]
    LatencyDuration(u32),
    /// The hello's stream index and count do not fit.
    #[error(
        "bad stream {index} of {count}: expected 1 to {MAX_STREAMS} streams, the index below the count"
    )]
    BadStreams {
        /// The stream's index.
        index: u8,
        /// The streams in its session.
        count: u8,
    },
    /// A latency hello names a file.
    #[error("latency hello with a name ({0} bytes): expected none")]
    LatencyName(usize),
    /// A frame's body is longer than [`MAX_FRAME_BODY`].
    #[error("frame body of {0} bytes is too long: at most {MAX_FRAME_BODY}")]
    FrameTooLong(usize),
    /// A frame's tag is unknown.
    #[error("unknown frame tag {0}")]
    BadTag(u8),
    /// A frame's body is not the size its tag (or the string in it) needs.
    #[error("frame tag {tag} with a body of {len} bytes: expected {expected}")]
    BadBodyLength {
        /// The frame's tag.
        tag: u8,
        /// The body's length.
        len: usize,
        /// The length it should have had.
        expected: usize,
    },
    /// A field holds a value its enumeration does not have.
    #[error("bad {field} value {value}")]
    BadEnum {
        /// The field.
        field: &'static str,
        /// The value it held.
        value: u8,
    },
    /// A string is longer than [`MAX_REASON`].
    #[error("string of {0} bytes is too long: at most {MAX_REASON}")]
    StringTooLong(usize),
    /// A string is not UTF-8.
    #[error("string is not valid UTF-8")]
    StringNotUtf8,
    /// A latency message's length prefix is 0 or above the largest message.
    #[error("bad message length {0}: expected 1 to {max} bytes", max = clock::MAX_MESSAGE)]
    BadMessageLength(u32),
    /// A latency message's body does not decode.
    #[error("bad message: {0}")]
    BadMessage(String),
    /// A report's numbers contradict each other ([`Report::check`](crate::Report::check)).
    #[error("the report's {field} contradicts the rest of it: {why}")]
    BadReport {
        /// The first field found at odds with the rest.
        field: &'static str,
        /// How.
        why: String,
    },
}
