//! The server's receiving end of a stream: the engine's [`tsperf_stream::receive`] with the
//! server's per-read log ([`TransferLog`]: its `--log` sinks) and its saving (`--save`:
//! [`Partial`]).

use tsperf_proto::{Hello, LogMode};

use crate::readlog::TransferLog;
use tsperf_sys::save::Partial;

pub use tsperf_stream::receive::{
    Block, HASH_BLOCK, LOG_TURN_RESERVE, ReadEnd, SPLIT_SAMPLE, TURN_BYTES, TURN_READS,
};

/// A transfer the server receives.
pub type Receiver = tsperf_stream::receive::Receiver<TransferLog, Partial>;

/// Starts receiving `hello`'s transfer, read `read_size` bytes at a time. With a `log` sink,
/// every read writes a line tagged with connection number `conn` to it.
pub fn new(hello: &Hello, read_size: u32, conn: u64, log: LogMode) -> Receiver {
    let expected = (!hello.closed_end()).then_some(hello.length);
    Receiver::new(expected, read_size, TransferLog::new(log, conn))
}
