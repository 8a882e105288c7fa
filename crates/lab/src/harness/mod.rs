//! Running the real binaries to measure them: a `tsserver` process ([`ServerProcess`]), a
//! `tsclient` run that returns its typed result ([`Client`]), and the statistics
//! ([`tsperf_results::stats`]). The grid (`tsmatrix`), `tspeers`, `tsscale` and the benches all measure
//! through here, so they start servers, wait for them and read results the same way.
//!
//! Every wait is bounded: a server that does not print its `listening on` line within
//! [`START_TIMEOUT`] is an error that quotes what it printed instead.

mod client;
pub mod cpu;
pub mod fds;
mod server;

pub use client::Client;
pub use server::{ServerOptions, ServerProcess, Sink, listening_port};

/// How long a server may take to print its `listening on` line.
pub const START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `program` run under a command prefix such as `ip netns exec NS` (none when `wrap` is empty).
pub fn wrapped(wrap: &[String], program: &std::path::Path) -> std::process::Command {
    match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = std::process::Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => std::process::Command::new(program),
    }
}
