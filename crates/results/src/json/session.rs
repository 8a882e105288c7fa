//! A session of several streams' JSON (`tsclient --parallel N --json`, forward or reverse).

use serde::{Deserialize, Serialize};

use super::{ReverseJson, StreamJson};
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
    pub streams: Vec<serde_json::Value>,
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
    /// The forward streams that completed, typed (failures left out).
    pub fn forward_streams(&self) -> Vec<StreamJson> {
        self.typed()
    }

    /// The reverse streams that completed, typed (failures left out).
    pub fn reverse_streams(&self) -> Vec<ReverseJson> {
        self.typed()
    }

    fn typed<T: serde::de::DeserializeOwned>(&self) -> Vec<T> {
        self.streams
            .iter()
            .filter_map(|v| {
                let mut v = v.clone();
                // The stream's own tag: the typed object has none.
                v.as_object_mut()?.remove("mode");
                serde_json::from_value(v).ok()
            })
            .collect()
    }
}
