//! The grid's raw results as `runs.jsonl` holds them: one [`Run`] per line (a [`Cell`], its
//! repetition and the client's whole JSON), under the [`Setup`] they share. The lab reads them
//! (`tsperf_lab::folder`), from a folder that may be anyone's.

use serde::{Deserialize, Serialize};

use crate::json::ClientJson;
use crate::machine::Machine;

/// One cell of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Cell {
    /// A stream cell.
    Stream {
        /// Its chunk size.
        chunk: u32,
        /// Its client I/O label.
        io: String,
        /// Its server log sink.
        log: String,
    },
    /// A stream cell of the other dimensions (`matrix.sh --streams N --reverse`): a session of
    /// `streams` parallel streams (`tsclient -P`), or a reverse one (`tsclient -R`, the server
    /// sends). The plain stream cell is one forward stream.
    Streams {
        /// Its chunk size (the sender's writes).
        chunk: u32,
        /// Its client I/O label.
        io: String,
        /// The receiving end's log sink: the server's forward, the client's in reverse.
        log: String,
        /// Streams in the session.
        streams: u32,
        /// The server sent.
        reverse: bool,
    },
    /// A latency cell.
    Latency {
        /// Its codec.
        codec: String,
        /// Its framing.
        framing: String,
        /// TCP_NODELAY on both ends.
        nodelay: bool,
        /// A new connection for every query.
        reconnect: bool,
        /// Queries asked for.
        count: u64,
        /// The server log sink of the stream the queries ran beside (`--under-load`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        under_load: Option<String>,
    },
}

/// One repetition of one cell: the client's whole JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The cell run.
    pub cell: Cell,
    /// The repetition, from 1.
    pub rep: u32,
    /// The client's whole JSON.
    pub result: ClientJson,
}

/// How the grid was run: what every row shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The machine the grid ran on.
    pub machine: Machine,
    /// The file sent, its size and digest.
    pub file: String,
    /// The file's size.
    pub bytes: u64,
    /// The file's xxh3-64.
    pub digest: String,
    /// Repetitions of every stream cell.
    pub reps: u32,
    /// Where the server ran: `loopback`, `emulated LAN (...)`, or a host.
    pub network: String,
    /// Where `--log stdout` cells sent stdout (a file, or a pty and its reader).
    pub stdout_to: String,
    /// What the server said its stdout was (protocol version 3 on).
    #[serde(default)]
    pub server_stdout: Option<tsperf_proto::StdoutKind>,
    /// When the run started, UTC.
    pub date: String,
    /// The link's rate in Gbit/s when it is known (the emulated LAN's); tables then give each
    /// cell's fraction of it.
    #[serde(default)]
    pub line_gbit: Option<f64>,
}
