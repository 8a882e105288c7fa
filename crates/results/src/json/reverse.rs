//! A reverse stream's JSON (`tsclient --reverse --json`).

use serde::{Deserialize, Serialize};

use super::{ClockJson, Cpu, TimedJson};
use crate::strategy::{ClientIo, Strategy};
use crate::verdict::{LimitedBy, Limits};
use tsperf_proto::ServerIo;
use tsperf_proto::tcp::{Flight, ReceiverTcp, SenderTcp};

/// A reverse stream's result (`tsclient --reverse --json`, `mode: "reverse"`): the server sent,
/// the client received and verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReverseJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// What the server sent: `generated` (the tsgen text).
    pub source: String,
    /// The bytes received: every pass of a timed run.
    pub bytes: u64,
    /// Bytes a pass, as asked (`--bytes`).
    pub asked_bytes: u64,
    /// The server's write size (`--chunk`).
    pub chunk: u32,
    /// How the server was asked to hand its chunks to the kernel (`--io`); absent: its own way
    /// (a `write` a chunk, a two-piece `writev` across the text's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Chunks per call, with `writev` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// The client's I/O model.
    pub io: ClientIo,
    /// The server's address.
    pub peer: String,
    /// From the first byte received to the end of the stream, in seconds.
    pub elapsed_s: f64,
    /// The first byte received, wall clock, µs since the epoch.
    pub begin_unix_us: u64,
    /// The end of the stream, wall clock.
    pub end_unix_us: u64,
    /// `bytes` over `elapsed_s`, in MiB/s.
    pub mib_per_s: f64,
    /// The same in Gbit/s.
    pub gbit_per_s: f64,
    /// True when the server's end trailer counts what arrived (a sized run: what was asked)
    /// and its digest equals the client's.
    pub verified: bool,
    /// The client's xxh3-64 of what it received.
    pub digest: String,
    /// Ctrl-C or SIGTERM stopped it early: the client asked the server to end the stream, and
    /// every byte until then is verified (exit 130).
    pub interrupted: bool,
    /// The receiving thread's CPU time while it received (its own, not the process's).
    pub cpu: Cpu,
    /// The client's side: the receiver's.
    pub client: ReceiverSide,
    /// The server's Sent report: the sender's side.
    pub server: SenderSide,
    /// Both ends' `TCP_INFO` and the server's readings while it sent.
    pub tcp: ReverseTcpJson,
    /// The server's clock against the client's.
    #[serde(default)]
    pub clock: ClockJson,
    /// A timed run: its time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed: Option<TimedJson>,
    /// With `--interval`: what arrived in each interval (a receiver's samples: bytes, rate and
    /// round trip; nothing acknowledged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<crate::intervals::Interval>,
    /// The data went over TLS (`--tls`); absent in the clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<super::TlsJson>,
    /// What limited the stream, the sender being the server.
    pub limited_by: Option<LimitedBy>,
    /// The shares the verdict was judged on (the sender's figures are the server's).
    pub limits: Limits,
    /// What failed, when the stream is not verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A reverse stream that failed, or was stopped before its end (`mode: "reverse"`, with
/// `error`): what arrived until then, none of it verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReverseFailureJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// Always `"reverse"`.
    pub mode: String,
    /// Bytes a pass, as asked (`--bytes`; 0 for a served file by name).
    pub asked_bytes: Option<u64>,
    /// Bytes received and checksummed before the failure.
    pub received_bytes: u64,
    /// From the first byte received to the failure (`null`: before any data).
    pub elapsed_s: Option<f64>,
    /// `received_bytes` over `elapsed_s`, MiB/s.
    pub mib_per_s: Option<f64>,
    /// Always false: the server's end trailer never came.
    pub verified: bool,
    /// Stopped by Ctrl-C or SIGTERM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// What failed, with its causes.
    pub error: String,
}

/// What the receiving client counted (a reverse stream's `client`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiverSide {
    /// The receiver's figures (its reads, log, receive buffer, scheduler figures).
    #[serde(flatten)]
    pub receiver: super::ReceiverJson,
    /// Time spent writing its log lines, in seconds.
    pub log_s: f64,
    /// The receive low-water mark it read with at the end (`SO_RCVLOWAT`), bytes: 262144 once
    /// raised on a path of large segments (loopback; 65536 from earlier tsclients), else 1 (0:
    /// from a tsclient before it).
    #[serde(default)]
    pub wake_mark: u32,
}

/// What the sending server measured (a reverse stream's `server`: its Sent frame).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SenderSide {
    /// Data bytes it sent.
    pub bytes: u64,
    /// Its end trailer's xxh3-64, hex.
    pub digest: String,
    /// The sender's figures (its congestion control: the client's `--congestion`, else its
    /// kernel's default, where it said: protocol 10).
    #[serde(flatten)]
    pub sender: super::SenderJson,
    /// Its I/O model.
    pub io: ServerIo,
    /// The sending thread's CPU time.
    pub cpu: Cpu,
    /// From its first write to its last, in seconds.
    pub elapsed_s: f64,
    /// Its first write, its wall clock, µs since the epoch.
    pub first_write_unix_us: u64,
    /// Both ends on one machine.
    pub same_host: bool,
}

/// A reverse stream's `TCP_INFO`: the sender's view (the server's), the receiver's (the
/// client's), and the server's readings while it sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReverseTcpJson {
    /// The server's socket: the sender's view.
    pub server: SenderTcp,
    /// The client's socket at the end: the receiver's view.
    pub client: ReceiverTcp,
    /// The server's readings while it sent.
    pub flight: Flight,
}
