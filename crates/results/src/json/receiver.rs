//! The receiving end's figures in the JSON, one object for both directions.

use serde::{Deserialize, Serialize};

use tsperf_proto::{LogMode, Report};

/// What the receiving end measured, whichever end it was: the same fields in a forward stream's
/// `server` and a reverse stream's `client` (flattened into each), made from the one figures
/// type both ends fill ([`Report`], the Report frame's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiverJson {
    /// Read calls that returned data.
    pub reads: u64,
    /// The most bytes one read asked for.
    pub read_size: u32,
    /// Where its per-read lines went (`--log`; `null`: a server that did not say).
    pub log: Option<LogMode>,
    /// Per-read log lines written (for a server's stdout: handed to its queue).
    pub log_lines: u32,
    /// Log lines that could not be written (a full disk, a closed stdout). Added with protocol
    /// version 5.
    #[serde(default)]
    pub log_lines_lost: u32,
    /// The receive buffer its socket had (`SO_RCVBUF`), in bytes.
    pub rcvbuf: u32,
    /// The receiving thread on a CPU from its first byte to its last, s (Linux schedstat; a
    /// server's from protocol version 13).
    #[serde(default)]
    pub on_cpu_s: Option<f64>,
    /// The receiving thread runnable but waiting for a CPU, s (Linux schedstat; a server's from
    /// protocol version 6).
    #[serde(default)]
    pub run_queue_s: Option<f64>,
    /// Where it saved the stream (a server's `--save`, a reverse client's), when it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub saved_to: String,
    /// How it wrote it there: `buffered`, `durable` or `direct` (`--far-disk`); absent when
    /// not saved. Added with protocol version 14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_mode: Option<String>,
}

impl From<&Report> for ReceiverJson {
    fn from(r: &Report) -> ReceiverJson {
        let secs = |ns: Option<u64>| ns.map(|ns| ns as f64 / 1e9);
        ReceiverJson {
            reads: r.reads,
            read_size: r.read_size,
            log: r.log,
            log_lines: r.log_lines,
            log_lines_lost: r.log_lines_lost,
            rcvbuf: r.rcvbuf,
            on_cpu_s: secs(r.on_cpu_ns),
            run_queue_s: secs(r.run_queue_ns),
            saved_to: r.saved_to.clone(),
            save_mode: r.save.map(|m| m.name().to_owned()),
        }
    }
}
