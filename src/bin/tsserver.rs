//! tsserver: receive tsclient transfers, verify every byte, and report back.

use std::net::IpAddr;
use std::process::ExitCode;

use clap::Parser;
use tsperf::server::{self, ServerConfig};
use tsperf::{DEFAULT_PORT, cli, units};

/// Receive files from tsclient, count and checksum every byte, and send back a report.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on (all interfaces by default: this is a LAN server).
    #[arg(long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// Port to listen on; 0 takes a free one (the real port is printed on stderr).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Exit after one transfer: 0 if it completed, 1 if not.
    #[arg(long)]
    once: bool,
    /// Bytes per read; by default the client's chunk size, as the seed's server read.
    #[arg(long, value_parser = units::parse_chunk, value_name = "BYTES")]
    read_size: Option<u32>,
    /// Serve each connection on its own thread with blocking reads, instead of the default
    /// single-threaded mio event loop.
    #[arg(long)]
    blocking: bool,
    /// Receive buffer (SO_RCVBUF) to ask the kernel for; by default the kernel's own.
    #[arg(long, value_parser = units::parse_chunk, value_name = "BYTES")]
    rcvbuf: Option<u32>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::init_diagnostics();
    let cfg = ServerConfig {
        bind: args.bind,
        port: args.port,
        once: args.once,
        read_size: args.read_size,
        rcvbuf: args.rcvbuf,
        blocking: args.blocking,
    };
    let listener = match server::bind(&cfg) {
        Ok(l) => l,
        Err(e) => return cli::fail("tsserver", &e),
    };
    match listener.local_addr() {
        Ok(addr) => eprintln!("tsserver: listening on {addr}"),
        Err(e) => return cli::fail("tsserver", &e.into()),
    }
    match server::serve(listener, &cfg) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(cli::FAILURE),
        Err(e) => cli::fail("tsserver", &e),
    }
}
