//! A session of several streams' JSON (`tsclient --parallel N --json`, forward or reverse).

use serde::{Deserialize, Serialize};

use super::{FailureJson, ReverseFailureJson, ReverseJson, StreamFailureJson, StreamJson};
use crate::verdict::LimitedBy;

/// A session of `--parallel` streams (`mode: "parallel"`, the client sent; or
/// `mode: "parallel-reverse"`, the server sent): each stream's own object and their sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// Forward: the size of the file striped over the streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<u64>,
    /// Reverse: the bytes asked for a pass, shared out over the streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_bytes: Option<u64>,
    /// Each stream's object, in stream order: the one `tsclient --json` prints for a stream
    /// (`mode: "stream"` forward, `"reverse"` reverse), or its failure object.
    pub streams: Vec<StreamEntry>,
    /// The whole session.
    pub sum: SumJson,
}

/// What a session's streams did together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SumJson {
    /// How many streams.
    pub streams: usize,
    /// Every stream's verified bytes.
    pub bytes: u64,
    /// From the first stream's first byte to the last stream's end, in seconds.
    pub elapsed_s: f64,
    /// `bytes` over `elapsed_s`, in MiB/s (a timed session with `--omit`: of what came after
    /// each stream's omitted start).
    pub mib_per_s: f64,
    /// The same in Gbit/s.
    pub gbit_per_s: f64,
    /// Every stream verified (forward: and the stripes cover the file).
    pub verified: bool,
    /// The verdict most of the streams got.
    #[serde(default)]
    pub limited_by: Option<LimitedBy>,
}

impl SessionJson {
    /// The forward streams that completed (failures left out).
    pub fn forward_streams(&self) -> Vec<&StreamJson> {
        self.streams
            .iter()
            .filter_map(|s| match s {
                StreamEntry::Done(Measured::Stream(s)) => Some(s),
                _ => None,
            })
            .collect()
    }

    /// The reverse streams that completed (failures left out).
    pub fn reverse_streams(&self) -> Vec<&ReverseJson> {
        self.streams
            .iter()
            .filter_map(|s| match s {
                StreamEntry::Done(Measured::Reverse(r)) => Some(r),
                _ => None,
            })
            .collect()
    }
}

/// One stream's result, told apart by its `mode`: the object `tsclient --json` prints for a
/// lone stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)]
pub enum Measured {
    /// The client sent (`mode: "stream"`).
    Stream(StreamJson),
    /// The server sent (`mode: "reverse"`).
    Reverse(ReverseJson),
}

/// One stream of a session: its result, or the failure object it prints alone. A stream's
/// result and a failure share their `mode`; a failure is told by its `error` with no result's
/// fields (`sent` forward, `received_bytes` reverse).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
// One value per stream, never on a hot path: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum StreamEntry {
    /// The stream ended with a result, verified or not.
    Done(Measured),
    /// A stream the client sent failed or was interrupted.
    SendFailed(StreamFailureJson),
    /// A stream the server sent failed or was interrupted.
    ReceiveFailed(ReverseFailureJson),
}

/// A `--bidir` run (`mode: "bidir"`): each direction's object, the one it prints alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BidirJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// To the server: a stream, a session, or their failure.
    pub forward: Box<Direction>,
    /// From the server: a stream, a session, or their failure.
    pub reverse: Box<Direction>,
}

/// One direction of a `--bidir` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum Direction {
    /// One stream, or its failure.
    Stream(StreamEntry),
    /// A session of `--parallel` streams (`mode: "parallel"` or `"parallel-reverse"`).
    Session(SessionEntry),
    /// A session that could not start (`error`, with its `mode`).
    Failed(FailureJson),
}

/// A session, told apart by its `mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode")]
pub enum SessionEntry {
    /// The client sent (`mode: "parallel"`).
    #[serde(rename = "parallel")]
    Sent(SessionJson),
    /// The server sent (`mode: "parallel-reverse"`).
    #[serde(rename = "parallel-reverse")]
    Received(SessionJson),
}
