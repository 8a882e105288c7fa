//! The measuring programs' front ends ([`tscipher`], [`tspeers`], [`tsscale`], [`tsverdicts`]): each a module
//! with its `main` and its clap command. Every binary is `fn main() -> ExitCode {
//! cli::NAME::main() }`.

pub mod tscipher;
pub mod tspeers;
pub mod tsscale;
pub mod tsverdicts;

pub use tsperf_sys::program::{bin_dir, file_len, main, print};

/// The exit code of a run stopped by Ctrl-C, as tsclient's.
pub const INTERRUPTED: i32 = tsperf_client::interrupt::EXIT_CODE;

/// What `--version` prints after the program's name: the release and the commit it was built
/// from (`unknown` outside a repository).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TSPERF_COMMIT"),
    ")"
);
