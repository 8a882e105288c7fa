//! The sending end's figures in the JSON, one object for both directions.

use serde::{Deserialize, Serialize};

use tsperf_proto::sent::Sent;

/// What the sending end measured, whichever end it was: the same fields in a forward stream's
/// `client` and a reverse stream's `server` (flattened into each), made from the one figures
/// type both ends fill ([`Sent`], the Sent frame's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenderJson {
    /// Calls of the strategy's system call (write, writev or sendfile) that moved at least one
    /// byte.
    pub writes: u64,
    /// Calls that took fewer bytes than they were offered.
    pub partial_writes: u64,
    /// Writes that found the socket full (non-blocking only).
    pub would_block: u64,
    /// Wake-ups from poll (the client's non-blocking transport; absent for a server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polls: Option<u64>,
    /// The send buffer the sender's socket got (`SO_SNDBUF`), in bytes.
    pub sndbuf: u32,
    /// The TCP congestion control it sent with (`TCP_CONGESTION`: `--congestion`, else the
    /// kernel's default), where the kernel says.
    #[serde(default)]
    pub congestion: Option<String>,
    /// The sending thread on a CPU during the transfer, s (schedstat; version 6 on, as below).
    #[serde(default)]
    pub on_cpu_s: Option<f64>,
    /// The sending thread runnable but waiting for a CPU (a quota's throttling included), s.
    #[serde(default)]
    pub run_queue_s: Option<f64>,
}

impl From<&Sent> for SenderJson {
    fn from(s: &Sent) -> SenderJson {
        let secs = |ns: Option<u64>| ns.map(|ns| ns as f64 / 1e9);
        SenderJson {
            writes: s.writes,
            partial_writes: s.partial_writes,
            would_block: s.would_block,
            polls: None,
            sndbuf: s.sndbuf,
            congestion: s.congestion.map(|c| c.to_string()),
            on_cpu_s: secs(s.on_cpu_ns),
            run_queue_s: secs(s.run_queue_ns),
        }
    }
}
