//! tsperf's data path, written once for both ends and both directions. [`receive`]: a stream
//! received (reads landing in a block, the checksum over whole blocks with the end held back,
//! the per-read log, the time split, saving), driven by the server's event loop, its threads
//! and the client's reverse streams alike through `std::io::Read`. [`send`]: a stream sent in
//! turns (the generated text, a served file or a source the sending end holds, by `write`,
//! `writev` or `sendfile`; the checksum, counters, CPU and scheduler figures, the Sent frame that
//! ends a reverse stream), driven by either of the server's models, the client and tsscale's
//! load generator through one small trait (`send::Sink`).
//!
//! Below the client and the server, above the protocol and the system crates; it knows no
//! clap and no published JSON.

pub mod receive;
pub mod send;
pub mod tls;
