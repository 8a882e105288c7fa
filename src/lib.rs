//! tsperf: a LAN file-transfer throughput and latency tester.
//!
//! `tsclient` streams a file to `tsserver` in chunks of a chosen size; the transfer ends only
//! when the server has counted and checksummed every byte and said so. All logic lives here, one
//! module per concern; the binaries in `src/bin` parse arguments and call in.

pub mod auth;
pub mod cli;
pub mod client;
pub mod console;
pub mod floor;
pub mod harness;
pub mod latency;
pub mod machine;
pub mod matrix;
pub mod net;
pub mod output;
pub mod peers;
pub mod progress;
pub mod protocol;
pub mod report;
pub mod scale;
pub mod server;
pub mod source;
pub mod stats;
pub mod tcpinfo;
pub mod testdata;
pub mod text;
pub mod timing;
pub mod units;
pub mod verdict;

/// The port both binaries use unless told otherwise (iperf3 has 5201).
pub const DEFAULT_PORT: u16 = 7433;
