//! `tsclient --json-stream`: one JSON object per line as things happen, as iperf3's
//! `--json-stream` writes them: the run's start, each interval's sample (and a session's sum of
//! it), and at the end the very object `--json` prints. The last line is always the end, on a
//! failure or Ctrl-C too.

use serde::{Deserialize, Serialize};

use super::ClientOutput;
use crate::intervals::Interval;

/// One line, told apart by its `event`; what it says is its `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "lowercase")]
// One value per line, never on a hot path: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// The run begins: what it is.
    Start(StartJson),
    /// One stream's sample, as it is taken.
    Interval(IntervalEvent),
    /// A session's sample: every stream's k-th summed, once the last has reported it.
    Sum(SumEvent),
    /// The run's result: the object `--json` prints.
    End(ClientOutput),
}

/// What a run is, as it begins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// `stream` or `latency`.
    pub mode: String,
    /// The server asked for.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// A stream run: `send`, `receive` or `both`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// A stream run: streams each way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u8>,
    /// A stream run: bytes per write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u32>,
    /// A timed run's time (`--time`), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// The sample interval (`--interval`), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
}

/// One stream's sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalEvent {
    /// The stream, as the human lines label it: empty for a lone stream, `[  1]` in a
    /// session, `[TX]`/`[RX]` for the directions of `--bidir`.
    pub stream: String,
    /// Received by this client (the server sent), or sent.
    pub received: bool,
    /// The sample.
    pub interval: Interval,
}

/// A session's sample: what its streams moved in their k-th interval together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SumEvent {
    /// `[SUM]`, with the direction's label in `--bidir`.
    pub stream: String,
    /// The earliest stream's start of the interval, seconds after its first byte.
    pub start_s: f64,
    /// The latest stream's end of it.
    pub end_s: f64,
    /// Bytes every stream moved in it.
    pub bytes: u64,
    /// Streams that reported it (fewer than the session's for an interval some did not
    /// reach: they ended early or failed).
    pub streams: usize,
}
