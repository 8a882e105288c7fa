//! tsperf's data path, written once for both ends and both directions. [`receive`]: a stream
//! received (reads landing in a block, the checksum over whole blocks with the end held back,
//! the per-read log, the time split, saving), driven by the server's event loop, its threads
//! and the client's reverse streams alike through `std::io::Read`.
//!
//! Below the client and the server, above the protocol and the system crates; it knows no
//! clap and no published JSON.

pub mod receive;
