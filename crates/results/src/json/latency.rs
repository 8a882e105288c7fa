//! A latency run's object (`mode: "latency"`): its round trips, its clock offset, and the same
//! queries under load.

use serde::{Deserialize, Serialize};

use crate::strategy::ClientIo;
use crate::verdict::LimitedBy;
use tsperf_proto::LogMode;
use tsperf_proto::clock::{Codec, Framing};

/// Round-trip statistics in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    /// The fastest round trip, µs.
    pub min: f64,
    /// The mean, µs.
    pub mean: f64,
    /// The median, µs.
    pub p50: f64,
    /// The 90th percentile, µs.
    pub p90: f64,
    /// The 99th percentile, µs.
    pub p99: f64,
    /// The 99.9th percentile, µs.
    pub p999: f64,
    /// The slowest round trip, µs.
    pub max: f64,
}

impl Rtt {
    /// The statistics of a histogram of nanoseconds.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Rtt {
        let us = |ns: u64| ns as f64 / 1e3;
        Rtt {
            min: us(h.min()),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// A latency run (`mode: "latency"`). Statistics are `null` when nothing was measured;
/// `interrupted` and `error` appear only when the run ended early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// The server's host and port.
    pub peer: String,
    /// Queries answered and counted (`--count`, or fewer when the run ended early).
    pub count: u64,
    /// Queries made first and not counted (`--warmup`).
    pub warmup: u64,
    /// How message bodies were encoded.
    pub codec: Codec,
    /// One write per message, or two.
    pub framing: Framing,
    /// TCP_NODELAY on both ends.
    pub nodelay: bool,
    /// A new connection for every query.
    pub reconnect: bool,
    /// Each answer was waited for by spinning (`--busy-poll`).
    #[serde(default)]
    pub busy_poll: bool,
    /// The client's I/O model.
    pub io: ClientIo,
    /// The round trips' statistics (`null` when none was measured).
    pub rtt_us: Option<Rtt>,
    /// The server's clock minus the client's, from the fastest query.
    pub offset_us: Option<f64>,
    /// The true offset is within this of `offset_us`.
    pub offset_err_us: Option<f64>,
    /// Why the result looks as it does, when a known trap (Nagle meeting delayed ACK) shows.
    pub hint: Option<String>,
    /// The run was stopped by Ctrl-C or SIGTERM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// What failed, when the run ended early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `--under-load`: the same queries while a file streamed (`rtt_us` above is idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_load: Option<UnderLoadJson>,
}

/// Clock queries made while a file streamed to the same server, and that stream's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnderLoadJson {
    /// The file that streamed.
    pub file: String,
    /// Its chunk size.
    pub chunk: u32,
    /// The log sink the server used for the stream.
    pub server_log: Option<LogMode>,
    /// Queries answered while the stream ran.
    pub count: u64,
    /// The loaded round trips' statistics.
    pub rtt_us: Option<Rtt>,
    /// Loaded p50 over idle p50.
    pub p50_ratio: Option<f64>,
    /// Times the file was sent (again until the queries were done), their median rate, whether
    /// all verified, and the verdict most of them got.
    #[serde(default)]
    pub streams: u32,
    /// The median rate of the streams, MiB/s.
    pub stream_mib_per_s: Option<f64>,
    /// True when there were streams and every one was verified.
    pub stream_verified: bool,
    /// The verdict most streams got.
    pub stream_limited_by: Option<LimitedBy>,
    /// The first stream's failure, if one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<String>,
    /// When the idle p50 was slower than the loaded one: the line saying why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_slower: Option<String>,
}

impl Default for LatencyJson {
    fn default() -> LatencyJson {
        LatencyJson {
            tsperf: String::new(),
            peer: String::new(),
            count: 0,
            warmup: 0,
            codec: Codec::Binary,
            framing: Framing::Single,
            nodelay: false,
            reconnect: false,
            busy_poll: false,
            io: ClientIo::Blocking,
            rtt_us: None,
            offset_us: None,
            offset_err_us: None,
            hint: None,
            interrupted: false,
            error: None,
            under_load: None,
        }
    }
}
