//! The JSON contract of `tsclient --json`, as types: [`super`] writes them and everything that
//! reads a client's result back (the grid, its reports, tspeers, the benches) reads these same
//! types, so a renamed field is a compile error or a parse error, never a silent zero.
//!
//! Field names carry their unit and, once published, are never renamed. A field added after
//! results were first committed has `#[serde(default)]`, so older `runs.jsonl` files still read.

use serde::{Deserialize, Serialize};

use crate::strategy::{ClientIo, Strategy};
use crate::verdict::{LimitedBy, Limits};
use tsperf_proto::clock::{Codec, Framing};
use tsperf_proto::tcp::{ReceiverTcp, SenderTcp};
use tsperf_proto::{LogMode, ServerIo, StdoutKind};

/// One object printed by `tsclient --json` for a run that measured something, told apart by its
/// `mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
// One value per run, never on a hot path: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ClientJson {
    Stream(StreamJson),
    Latency(LatencyJson),
}

impl ClientJson {
    /// The stream result, or an error naming what it was instead.
    pub fn stream(self) -> anyhow::Result<StreamJson> {
        match self {
            ClientJson::Stream(s) => Ok(s),
            ClientJson::Latency(_) => anyhow::bail!("expected a stream result, got a latency one"),
        }
    }

    /// The latency result, or an error naming what it was instead.
    pub fn latency(self) -> anyhow::Result<LatencyJson> {
        match self {
            ClientJson::Latency(l) => Ok(l),
            ClientJson::Stream(_) => anyhow::bail!("expected a latency result, got a stream one"),
        }
    }
}

/// CPU time of one process, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub user_s: f64,
    pub sys_s: f64,
}

impl Cpu {
    /// User plus system time.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

impl Cpu {
    /// The CPU time spent in user and in kernel mode.
    pub fn of(user: std::time::Duration, sys: std::time::Duration) -> Cpu {
        Cpu {
            user_s: user.as_secs_f64(),
            sys_s: sys.as_secs_f64(),
        }
    }
}

/// What the client counted about its own writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSide {
    pub writes: u64,
    pub partial_writes: u64,
    pub would_block: u64,
    pub polls: u64,
    pub sndbuf: u32,
}

/// The server's report of one transfer, as the client received it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSide {
    pub bytes: u64,
    pub digest: String,
    pub reads: u64,
    pub read_size: u32,
    pub io: Option<ServerIo>,
    pub log: Option<LogMode>,
    pub log_lines: u32,
    /// Log lines that could not be written (a full disk, a closed stdout). Added with protocol
    /// version 5.
    #[serde(default)]
    pub log_lines_lost: u32,
    /// Added with protocol version 2.
    #[serde(default)]
    pub output_dropped: u32,
    pub first_byte_unix_us: Option<u64>,
    pub last_byte_unix_us: Option<u64>,
    /// The same two times on the client's clock (the clock offset applied); `null` without
    /// clock queries. Added with protocol version 3, as are `stdout`, `clock` and `one_way`.
    #[serde(default)]
    pub first_byte_client_unix_us: Option<f64>,
    #[serde(default)]
    pub last_byte_client_unix_us: Option<f64>,
    /// What the server's stdout is, as the server sees it.
    #[serde(default)]
    pub stdout: StdoutKind,
    pub elapsed_s: f64,
    pub wakeups: u64,
    pub rcvbuf: u32,
    pub cpu: Cpu,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub saved_to: String,
    #[serde(default)]
    pub time_split: TimeSplitJson,
}

impl ServerSide {
    /// The receiver's rate: its bytes over its first to last byte, in MiB/s.
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1024.0 * 1024.0) / self.elapsed_s.max(1e-9)
    }
}

/// A stream transfer (`mode: "stream"`), with `error` when the digests disagree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamJson {
    pub tsperf: String,
    pub file: String,
    pub bytes: u64,
    pub chunk: u32,
    pub io: ClientIo,
    pub strategy: Strategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    pub peer: String,
    pub elapsed_s: f64,
    pub begin_unix_us: u64,
    pub end_unix_us: u64,
    pub mib_per_s: f64,
    pub gbit_per_s: f64,
    pub verified: bool,
    pub digest: String,
    pub cpu: Cpu,
    pub client: ClientSide,
    pub server: ServerSide,
    #[serde(default)]
    pub clock: ClockJson,
    #[serde(default)]
    pub one_way: OneWayJson,
    /// Both sockets' `TCP_INFO` at the end. Added with protocol version 4, as are `limited_by`,
    /// `limits` and `server.time_split`.
    #[serde(default)]
    pub tcp: TcpJson,
    /// What limited the transfer ([`crate::verdict`]); `null` in results from before it.
    #[serde(default)]
    pub limited_by: Option<LimitedBy>,
    #[serde(default)]
    pub limits: Limits,
    /// Samples in time, with `--interval` (empty without).
    #[serde(default)]
    pub intervals: Vec<crate::intervals::Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `TCP_INFO` of both ends; `available` is false where the client's kernel did not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpJson {
    pub available: bool,
    pub client: SenderTcp,
    pub server: ReceiverTcp,
}

/// Where the server's time went, in µs, from its first data byte to its report: the phases
/// add up to `total_us`; `largest` names the phase with the most, `largest_pct` its share.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSplitJson {
    pub read_us: f64,
    pub hash_us: f64,
    pub log_us: f64,
    pub save_us: f64,
    pub fsync_us: f64,
    pub wait_us: f64,
    pub total_us: f64,
    pub largest: Option<String>,
    pub largest_pct: Option<f64>,
}

impl TimeSplitJson {
    /// The JSON of a report's split.
    pub fn of(s: &tsperf_proto::TimeSplit) -> TimeSplitJson {
        let us = |ns: u64| ns as f64 / 1e3;
        let top = s.largest();
        TimeSplitJson {
            read_us: us(s.read_ns),
            hash_us: us(s.hash_ns),
            log_us: us(s.log_ns),
            save_us: us(s.save_ns),
            fsync_us: us(s.fsync_ns),
            wait_us: us(s.wait_ns),
            total_us: us(s.total_ns()),
            largest: top.map(|(p, _)| p.name().to_owned()),
            largest_pct: top.map(|(_, pct)| pct),
        }
    }
}

/// The server's clock against the client's, from the clock queries before the data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockJson {
    pub queries: u8,
    /// Server clock minus client clock, from the fastest query.
    pub offset_us: Option<f64>,
    /// The true offset lies within this of `offset_us`.
    pub offset_err_us: Option<f64>,
    /// The fastest query's round trip.
    pub rtt_us: Option<f64>,
}

/// One-way times on the client's clock, from its first byte sent (`begin_unix_us`): to the
/// server's first read of data (stamped when read, not when it arrived), and to its last.
/// `null` ("unknown") when the error bound `err_us` is more than a tenth of the figure, or
/// without clock queries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayJson {
    pub first_byte_us: Option<f64>,
    pub last_byte_us: Option<f64>,
    pub err_us: Option<f64>,
}

/// Round-trip statistics in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
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
    pub tsperf: String,
    pub peer: String,
    pub count: u64,
    pub warmup: u64,
    pub codec: Codec,
    pub framing: Framing,
    pub nodelay: bool,
    pub reconnect: bool,
    pub io: ClientIo,
    pub rtt_us: Option<Rtt>,
    pub offset_us: Option<f64>,
    pub offset_err_us: Option<f64>,
    pub hint: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `--under-load`: the same queries while a file streamed (`rtt_us` above is idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_load: Option<UnderLoadJson>,
}

/// Clock queries made while a file streamed to the same server, and that stream's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnderLoadJson {
    pub file: String,
    pub chunk: u32,
    /// The log sink the server used for the stream.
    pub server_log: Option<LogMode>,
    /// Queries answered while the stream ran.
    pub count: u64,
    pub rtt_us: Option<Rtt>,
    /// Loaded p50 over idle p50.
    pub p50_ratio: Option<f64>,
    /// Times the file was sent (again until the queries were done), their median rate, whether
    /// all verified, and the verdict most of them got.
    #[serde(default)]
    pub streams: u32,
    pub stream_mib_per_s: Option<f64>,
    pub stream_verified: bool,
    pub stream_limited_by: Option<LimitedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<String>,
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

/// A run that failed before it measured anything (a bad key file, a usage error, Ctrl-C
/// during the connect): `mode` and `error`; `usage` for a usage error (exit 2), `interrupted`
/// for a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureJson {
    pub tsperf: String,
    pub mode: String,
    pub error: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// A stream transfer that failed or was interrupted: the file, its size if known, the bytes
/// handed to the socket, those the server's TCP acknowledged and their rate since the first
/// byte, the samples so far, and the error with its causes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamFailureJson {
    pub tsperf: String,
    pub mode: String,
    pub file: String,
    pub bytes: Option<u64>,
    pub sent: u64,
    /// Of `sent`, what the server's TCP acknowledged (`null` where the kernel did not say).
    #[serde(default)]
    pub acked_bytes: Option<u64>,
    /// From the first byte handed over to the stop (`null` if it stopped before the data).
    #[serde(default)]
    pub elapsed_s: Option<f64>,
    #[serde(default)]
    pub acked_mib_per_s: Option<f64>,
    pub verified: bool,
    /// Stopped by Ctrl-C or SIGTERM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::intervals::Interval>,
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15: every run in the committed results reads as a typed result.
    #[test]
    fn committed_runs_read_typed() {
        for dir in ["results", "results/lan"] {
            // The workspace's top, two levels above this crate.
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(dir)
                .join("runs.jsonl");
            let runs = crate::runs::read_runs(&path).unwrap();
            assert!(runs.len() > 20, "{dir}: {} runs", runs.len());
            for r in &runs {
                if let ClientJson::Stream(s) = &r.result {
                    assert!(
                        s.verified && s.bytes > 0 && s.server.elapsed_s > 0.0,
                        "{dir}"
                    );
                }
            }
        }
    }

    /// A renamed or missing field is a parse error that names it, not a zero.
    #[test]
    fn missing_field_is_an_error() {
        let e = serde_json::from_str::<ClientJson>(r#"{"mode":"stream","tsperf":"0.1.0"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field"), "{e}");
        let e = serde_json::from_str::<ClientJson>(r#"{"mode":"sideways"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sideways"), "{e}");
    }
}
