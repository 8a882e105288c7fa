//! The JSON contract of `tsclient --json`, as types: [`super`] writes them and everything that
//! reads a client's result back (the grid, its reports, tspeers, the benches) reads these same
//! types, so a renamed field is a compile error or a parse error, never a silent zero.
//!
//! Field names carry their unit and, once published, are never renamed. A field added after
//! results were first committed has `#[serde(default)]`, so older `runs.jsonl` files still read.

use serde::{Deserialize, Serialize};

use crate::strategy::{ClientIo, Strategy};
use crate::verdict::{LimitedBy, Limits};
use tsperf_proto::tcp::{ReceiverTcp, SenderTcp};
use tsperf_proto::{ServerIo, StdoutKind};

mod events;
mod ladder;
mod latency;
mod output;

pub use events::{Event, IntervalEvent, StartJson, SumEvent};
pub use latency::{LatencyJson, Rtt, UnderLoadJson};
pub use output::ClientOutput;
mod receiver;
mod reverse;
mod sender;
mod session;
mod stages;
pub use ladder::{LadderJson, RungJson, StageCost};
pub use receiver::ReceiverJson;
pub use reverse::{ReceiverSide, ReverseFailureJson, ReverseJson, ReverseTcpJson, SenderSide};
pub use sender::SenderJson;
pub use session::{
    BidirJson, Direction, Measured, SessionEntry, SessionJson, StreamEntry, SumJson,
};
pub use stages::{ColdJson, TlsJson};

/// One object printed by `tsclient --json` for a run that measured something, told apart by its
/// `mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
// One value per run, never on a hot path: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ClientJson {
    /// A stream transfer's result (`mode: "stream"`).
    Stream(StreamJson),
    /// A latency run's result (`mode: "latency"`).
    Latency(LatencyJson),
    /// A reverse stream's result (`mode: "reverse"`): the server sent.
    Reverse(ReverseJson),
    /// A session of parallel streams the client sent (`mode: "parallel"`).
    Parallel(SessionJson),
    /// A session of parallel streams the server sent (`mode: "parallel-reverse"`).
    #[serde(rename = "parallel-reverse")]
    ParallelReverse(SessionJson),
    /// Both directions at once (`mode: "bidir"`).
    Bidir(BidirJson),
    /// A file copy's rungs (`mode: "ladder"`).
    Ladder(LadderJson),
}

impl ClientJson {
    /// The stream result, or an error naming what it was instead.
    pub fn stream(self) -> anyhow::Result<StreamJson> {
        match self {
            ClientJson::Stream(s) => Ok(s),
            other => anyhow::bail!("expected a stream result, got a {} one", other.mode()),
        }
    }

    /// The latency result, or an error naming what it was instead.
    pub fn latency(self) -> anyhow::Result<LatencyJson> {
        match self {
            ClientJson::Latency(l) => Ok(l),
            other => anyhow::bail!("expected a latency result, got a {} one", other.mode()),
        }
    }

    /// Its `mode`, as the JSON names it.
    pub fn mode(&self) -> &'static str {
        match self {
            ClientJson::Stream(_) => "stream",
            ClientJson::Latency(_) => "latency",
            ClientJson::Reverse(_) => "reverse",
            ClientJson::Parallel(_) => "parallel",
            ClientJson::ParallelReverse(_) => "parallel-reverse",
            ClientJson::Bidir(_) => "bidir",
            ClientJson::Ladder(_) => "ladder",
        }
    }
}

/// CPU time of one process, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    /// CPU time in user mode, in seconds.
    pub user_s: f64,
    /// CPU time in kernel mode, in seconds.
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
    /// The sender's figures (`polls`: the client's wake-ups from poll, non-blocking only).
    #[serde(flatten)]
    pub sender: SenderJson,
    /// Waiting for the file's bytes during the transfer, s.
    #[serde(default)]
    pub source_read_s: f64,
    /// Waiting for the file's first block, before the first byte went (outside `elapsed_s`), s.
    #[serde(default)]
    pub source_read_before_s: f64,
    /// The interface the connection left by, and its speed (Mbit/s) where the driver says.
    #[serde(default)]
    pub interface: Option<String>,
    /// That interface's speed, Mbit/s.
    #[serde(default)]
    pub line_mbit: Option<u64>,
    /// The file was read cold (`--cold`): how its pages were put out of the page cache first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold: Option<ColdJson>,
}

/// The server's report of one transfer, as the client received it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSide {
    /// Data bytes the server read.
    pub bytes: u64,
    /// The xxh3-64 of those bytes, as 16 hex digits.
    pub digest: String,
    /// The receiver's figures (its reads, log, receive buffer, scheduler figures).
    #[serde(flatten)]
    pub receiver: ReceiverJson,
    /// How the server did its I/O: `blocking` or `event-loop`.
    pub io: Option<ServerIo>,
    /// Added with protocol version 2.
    #[serde(default)]
    pub output_dropped: u32,
    /// The server's wall clock at its first data byte, µs since the epoch (`null`: no data).
    pub first_byte_unix_us: Option<u64>,
    /// The server's wall clock at its last data byte.
    pub last_byte_unix_us: Option<u64>,
    /// The same two times on the client's clock (the clock offset applied); `null` without
    /// clock queries. Added with protocol version 3, as are `stdout`, `clock` and `one_way`.
    #[serde(default)]
    pub first_byte_client_unix_us: Option<f64>,
    /// The last byte's time on the client's clock.
    #[serde(default)]
    pub last_byte_client_unix_us: Option<f64>,
    /// What the server's stdout is, as the server sees it.
    #[serde(default)]
    pub stdout: StdoutKind,
    /// The server's monotonic time from its first to its last data byte, in seconds.
    pub elapsed_s: f64,
    /// Event-loop wake-ups for this connection (0 when blocking).
    pub wakeups: u64,
    /// The server's CPU time during the transfer.
    pub cpu: Cpu,
    /// Where the server's time went, from its first data byte to its report.
    #[serde(default)]
    pub time_split: TimeSplitJson,
    /// The server runs on this machine (a loopback peer, or its boot id is the client's).
    #[serde(default)]
    pub same_host: bool,
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
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// The name of the file sent (its basename).
    pub file: String,
    /// The bytes sent: the file's size, or every pass of a timed run.
    pub bytes: u64,
    /// Bytes per write (`--chunk`).
    pub chunk: u32,
    /// The client's I/O model.
    pub io: ClientIo,
    /// How chunks reached the kernel (`--io`).
    pub strategy: Strategy,
    /// Chunks per call, with `writev` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// The server's address.
    pub peer: String,
    /// From the first data write to the arrival of the server's report, in seconds.
    pub elapsed_s: f64,
    /// The first data write, wall clock, µs since the epoch.
    pub begin_unix_us: u64,
    /// The report's arrival, wall clock, µs since the epoch.
    pub end_unix_us: u64,
    /// `bytes` over `elapsed_s`, in MiB/s (a timed run with `--omit`: without its omitted
    /// start, `timed.omitted_bytes` in `timed.omitted_s`).
    pub mib_per_s: f64,
    /// The same in Gbit/s.
    pub gbit_per_s: f64,
    /// True when the server counted every byte and its digest equals the client's.
    pub verified: bool,
    /// The client's xxh3-64 of the file, as 16 hex digits.
    pub digest: String,
    /// The client's CPU time during the transfer.
    pub cpu: Cpu,
    /// What the client counted about its own writes.
    pub client: ClientSide,
    /// The server's report.
    pub server: ServerSide,
    /// The server's clock against the client's, from the clock queries.
    #[serde(default)]
    pub clock: ClockJson,
    /// One-way times from the client's first byte, where the clock offset allows.
    #[serde(default)]
    pub one_way: OneWayJson,
    /// Both sockets' `TCP_INFO` at the end. Added with protocol version 4, as are `limited_by`,
    /// `limits` and `server.time_split`.
    #[serde(default)]
    pub tcp: TcpJson,
    /// What limited the transfer ([`crate::verdict`]); `null` in results from before it.
    #[serde(default)]
    pub limited_by: Option<LimitedBy>,
    /// The shares the verdict was judged on.
    #[serde(default)]
    pub limits: Limits,
    /// Samples in time, with `--interval` (empty without).
    #[serde(default)]
    pub intervals: Vec<crate::intervals::Interval>,
    /// The data went over TLS (`--tls`); absent in the clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsJson>,
    /// A timed run (`--time`): its time, passes and omitted start; absent for a run sized by
    /// its file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed: Option<TimedJson>,
    /// What failed, when the transfer is not verified (the report stays beside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A timed run beside its figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimedJson {
    /// The time asked for (`--time`), after the omitted start, in seconds.
    pub time_s: f64,
    /// The start left out of the rate (`--omit`), in seconds.
    pub omit_s: f64,
    /// The file's size: one pass.
    pub file_bytes: u64,
    /// Passes of the file sent, the last one's part as a fraction.
    pub passes: f64,
    /// Bytes the server's TCP had acknowledged when the omitted start ended (0 without
    /// `--omit`).
    pub omitted_bytes: u64,
    /// The omitted start's length as measured, from the first byte, in seconds.
    pub omitted_s: f64,
    /// Ended by Ctrl-C or SIGTERM before its time (every byte sent until then is verified).
    pub interrupted: bool,
}

/// `TCP_INFO` of both ends; `available` is false where the client's kernel did not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpJson {
    /// False where the client's kernel did not say (not Linux).
    pub available: bool,
    /// The client socket's `TCP_INFO`: the sender's view.
    pub client: SenderTcp,
    /// The server socket's `TCP_INFO`: the receiver's view.
    pub server: ReceiverTcp,
    /// The client socket read about every MiB during the transfer (version 6 on).
    #[serde(default)]
    pub flight: tsperf_proto::tcp::Flight,
}

/// Where the server's time went, in µs, from its first data byte to its report: the phases
/// add up to `total_us`; `largest` names the phase with the most, `largest_pct` its share.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSplitJson {
    /// In read calls (in the blocking model, their waits for data too).
    pub read_us: f64,
    /// Checksumming.
    pub hash_us: f64,
    /// Writing per-read log lines, and waiting for room on stdout for them.
    pub log_us: f64,
    /// Writing received bytes to the `--save` file.
    pub save_us: f64,
    /// Syncing and renaming the saved file into place.
    pub fsync_us: f64,
    /// The rest: waiting for data or the trailer, for the CPU, for other connections.
    pub wait_us: f64,
    /// All six together: from the first data byte to the report.
    pub total_us: f64,
    /// The phase with the most time (`null` when nothing was timed).
    pub largest: Option<String>,
    /// Its share of `total_us`, in %.
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
    /// Clock queries made before the data.
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
    /// From the client's first byte sent to the server's first read of data, µs (`null`: unknown).
    pub first_byte_us: Option<f64>,
    /// To the server's last read, µs (`null`: unknown).
    pub last_byte_us: Option<f64>,
    /// The error bound of both: the clock offset's, plus the µs the server's stamps are rounded to.
    pub err_us: Option<f64>,
}

/// A run that failed before it measured anything (a bad key file, a usage error, Ctrl-C
/// during the connect): `mode` and `error`; `usage` for a usage error (exit 2), `interrupted`
/// for a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Only these fields: a result whose own fields do not parse is never read as a failure.
#[serde(deny_unknown_fields)]
pub struct FailureJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// `stream` or `latency`.
    pub mode: String,
    /// What failed, with its causes.
    pub error: String,
    /// A usage error (exit 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage: bool,
    /// Stopped by Ctrl-C or SIGTERM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// A stream transfer that failed or was interrupted: the file, its size if known, the bytes
/// handed to the socket, those the server's TCP acknowledged and their rate since the first
/// byte, the samples so far, and the error with its causes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamFailureJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// Always `stream`.
    pub mode: String,
    /// The name of the file.
    pub file: String,
    /// Its size, once it was opened.
    pub bytes: Option<u64>,
    /// Bytes of it handed to the socket.
    pub sent: u64,
    /// Of `sent`, what the server's TCP acknowledged (`null` where the kernel did not say).
    #[serde(default)]
    pub acked_bytes: Option<u64>,
    /// From the first byte handed over to the stop (`null` if it stopped before the data).
    #[serde(default)]
    pub elapsed_s: Option<f64>,
    /// `acked_bytes` over `elapsed_s`, in MiB/s.
    #[serde(default)]
    pub acked_mib_per_s: Option<f64>,
    /// Always false.
    pub verified: bool,
    /// Stopped by Ctrl-C or SIGTERM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// With `--interval`, the samples so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::intervals::Interval>,
    /// What failed, with its causes (`interrupted` after Ctrl-C).
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15: every run in the committed results reads as a typed result.
    #[test]
    fn committed_runs_read_typed() {
        for dir in ["results", "results/lan", "results/streams-grid"] {
            // The workspace's top, two levels above this crate.
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(dir)
                .join("runs.jsonl");
            let text = std::fs::read_to_string(&path).unwrap();
            let runs: Vec<crate::runs::Run> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
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
