//! tsserver: accepts transfers, counts and checksums every byte, and reports back.
//!
//! This module holds what every server I/O model shares: configuration, the admission decision
//! for a hello, and the per-transfer output. The I/O models live in submodules and differ only in
//! how they wait for bytes.
//!
//! A report's CPU time is the serving thread's during the transfer. For the event loop that
//! thread serves every connection, so with concurrent transfers each report includes the others'
//! share; with one transfer at a time it is that transfer's cost.

pub mod blocking;
pub mod budget;
pub mod console;
mod drive;
pub mod event_loop;
pub mod fds;
mod instance;
pub mod latency;
pub mod mark;
mod once;
pub mod outbox;
pub mod readlog;
pub mod receiver;
pub use tsperf_stream::tls::{Records, ServerTls};
pub use tsperf_sys::save;
pub mod serve_dir;
pub mod sessions;
mod turn;

pub use instance::{Server, catch_stop_signals};
pub use mark::WakeMark;
pub use tsperf_proto::serve::{
    AUTH_FAILED, HELLO_TIMEOUT, IDLE_TIMEOUT, LOG_MIN_READ, MAX_DURATION, Outcome, Policy,
    SHUTTING_DOWN, default_read_size,
};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

use anyhow::{Context, Result};
use std::time::Duration;

use crate::console::Stream;
use std::sync::Arc;
use tsperf_metrics::server::Direction;
use tsperf_proto::Report;
use tsperf_results::units;
use tsperf_sys::save::SaveDir;
use tsperf_sys::text::Peer;
use tsperf_sys::timing::{Stamp, unix_us_now};

/// Default: the largest transfer a client may announce, as `--max-bytes` reads it.
pub const MAX_BYTES: &str = "64GiB";
/// Default: how long transfers in flight get to finish after SIGINT or SIGTERM.
pub const GRACE: Duration = Duration::from_secs(5);
/// Bytes per read with `--log none` and no `--read-size` (see [`default_read_size`]), and the
/// most a log sink's per-chunk reads take: whatever chunk a client announces, the server's read
/// buffer is its own size, not the client's.
pub const BULK_READ: u32 = tsperf_proto::BULK_READ;
/// Bytes per read of the event loop with `--log none` and no `--read-size`: its one read block
/// serves all its connections, so a larger one costs a loop, not a connection (the blocking
/// model, a block per connection, reads [`BULK_READ`]). Measured (issue 33, `-P 2` and `-P 4`
/// at 128 KiB and `-P 2` at 10240 B, 5-7 alternating pairs of 1 GiB on loopback): the server's
/// CPU per GiB 0.6-0.8x that of 256 KiB reads, both ends together 0.92-1.0x, the rate 1.0-1.12x;
/// one stream alike either way.
pub const LOOP_READ: u32 = tsperf_proto::LOOP_READ;
/// Default: connections served at once; more are refused with a reason.
pub const MAX_CLIENTS: usize = 1024;

/// Validated server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address to listen on; `None` listens on every IPv6 and IPv4 address at once.
    pub bind: Option<IpAddr>,
    /// The port to listen on (0: any free one).
    pub port: u16,
    /// Serve one client's run (every connection of it), then exit.
    pub once: bool,
    /// Ask the kernel for this receive buffer (SO_RCVBUF) on every connection.
    pub rcvbuf: Option<u32>,
    /// Serve with a thread per connection instead of the event loop.
    pub blocking: bool,
    /// Connections served at once.
    pub max_clients: usize,
    /// Save received files here (`--save`), whole or not at all.
    pub save: Option<Arc<SaveDir>>,
    /// Event loops (`--threads`), each on its own thread; `--blocking` ignores it.
    pub threads: usize,
    /// How the event loops take connections (`--accept`).
    pub accept: Accept,
    /// Where reverse streams' named files are served from (`--serve`).
    pub serve: Option<Arc<serve_dir::ServeDir>>,
    /// What a conversation decides by: the log sinks, read sizes, limits, deadlines and key.
    pub policy: Policy,
    /// How long transfers in flight may take to finish after a stop is requested.
    pub grace: Duration,
    /// The kernel memory reverse streams' send buffers may pin together (`--send-buffers`).
    pub send_budget: Arc<budget::SendBudget>,
    /// The per-read log's file (`--log-file`), opened at start when a transfer may log to it
    /// ([`readlog::needs_file`], [`readlog::open_log_file`]).
    pub log_file: Option<Arc<std::fs::File>>,
    /// The certificate and configuration streams over TLS are served with; `None`: no TLS
    /// (`--no-tls`).
    pub tls: Option<Arc<tsperf_stream::tls::ServerTls>>,
}

/// How several event loops take connections (`tsserver --accept`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Accept {
    /// One listening socket that every loop polls: whichever loop is free accepts.
    #[default]
    Shared,
    /// A listening socket per loop on the same port (`SO_REUSEPORT`): the kernel hands each
    /// connection to one of them by a hash of its addresses, busy or not.
    ReusePort,
}

/// Binds the listening socket: on `cfg.bind`, or with none on `[::]` taking IPv4 too (a
/// dual-stack socket, so `--host ::1` and `--host 127.0.0.1` both reach a default server),
/// falling back to `0.0.0.0` where IPv6 is not available. A requested receive buffer is set on
/// the listener, before any connection arrives, so accepted sockets inherit it and the window
/// scale matches it. The accept backlog is raised from std's 128 to `--max-clients` (the kernel
/// caps it at `net.core.somaxconn`), so a burst of clients connecting at once is not made to
/// retry a SYN a second later.
pub fn bind(cfg: &ServerConfig) -> Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let open = |ip: IpAddr, dual: bool| -> std::io::Result<Socket> {
        let addr = SocketAddr::new(ip, cfg.port);
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        if dual {
            sock.set_only_v6(false)?;
        }
        sock.set_reuse_address(true)?;
        if reuse_port(cfg) {
            sock.set_reuse_port(true)?;
        }
        sock.bind(&addr.into())?;
        Ok(sock)
    };
    let (sock, addr) = match cfg.bind {
        Some(ip) => (open(ip, false), SocketAddr::new(ip, cfg.port)),
        None => match open(IpAddr::V6(Ipv6Addr::UNSPECIFIED), true) {
            Ok(s) => (
                Ok(s),
                SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), cfg.port),
            ),
            // A port in use or not allowed is the answer; only a machine without IPv6 falls back.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::AddrInUse | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                (
                    Err(e),
                    SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), cfg.port),
                )
            }
            Err(_) => (
                open(IpAddr::V4(Ipv4Addr::UNSPECIFIED), false),
                SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), cfg.port),
            ),
        },
    };
    let sock = sock.with_context(|| format!("cannot listen on {addr}"))?;
    listen(sock, cfg, addr)
}

/// True when the event loops each listen on the port (`--accept reuseport` with several).
fn reuse_port(cfg: &ServerConfig) -> bool {
    cfg.accept == Accept::ReusePort && !cfg.blocking && !cfg.once && cfg.threads > 1
}

/// Sets the receive buffer connections inherit, and listens with a backlog of `--max-clients`.
fn listen(sock: socket2::Socket, cfg: &ServerConfig, addr: SocketAddr) -> Result<TcpListener> {
    if let Some(n) = cfg.rcvbuf {
        sock.set_recv_buffer_size(n as usize)
            .with_context(|| format!("cannot set the receive buffer to {n} bytes"))?;
    }
    let backlog = cfg.max_clients.clamp(128, 65535) as i32;
    sock.listen(backlog)
        .with_context(|| format!("cannot listen on {addr} with a backlog of {backlog}"))?;
    Ok(sock.into())
}

/// Another listening socket on `first`'s address and port, for one more event loop
/// (`--accept reuseport`: `first` was bound with `SO_REUSEPORT` too).
pub(crate) fn listen_again(first: &TcpListener, cfg: &ServerConfig) -> Result<TcpListener> {
    use socket2::{Domain, SockRef, Socket, Type};
    let addr = first.local_addr()?;
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if addr.is_ipv6() {
        sock.set_only_v6(SockRef::from(first).only_v6()?)?;
    }
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())
        .with_context(|| format!("cannot listen on {addr} again (SO_REUSEPORT)"))?;
    listen(sock, cfg, addr)
}

/// Fits the server to its descriptors: raises the soft limit to the hard one and lowers
/// `--max-clients` to what fits ([`fds`]). Returns a warning to print if it lowered it.
pub fn fit_descriptors(cfg: &mut ServerConfig) -> Result<Option<String>> {
    let limit = fds::raise_limit();
    let fits = fds::fitting(limit, fds::per_connection(cfg.blocking, cfg.save.is_some()));
    if fits == 0 {
        anyhow::bail!(
            "the descriptor limit is {limit} (ulimit -n): too few to serve any connection \
             (at least {} needed)",
            fds::RESERVE + 1
        );
    }
    if cfg.max_clients <= fits {
        return Ok(None);
    }
    let warning = format!(
        "warning: --max-clients lowered from {} to {fits}: that is what fits in the descriptor \
         limit of {limit} (ulimit -n)",
        cfg.max_clients
    );
    cfg.max_clients = fits;
    Ok(Some(warning))
}

/// A peer's address as people write it: an IPv4 client of a dual-stack socket shows as
/// `127.0.0.1:5000`, not `[::ffff:127.0.0.1]:5000`.
pub fn canonical(peer: SocketAddr) -> SocketAddr {
    SocketAddr::new(peer.ip().to_canonical(), peer.port())
}

/// The send and receive buffers a latency session's socket gets: messages are small and go one
/// at a time, and fixed buffers keep a client that pipelines requests and never reads from
/// holding megabytes of kernel memory (autotuning would grow them to `tcp_wmem`'s and
/// `tcp_rmem`'s maxima, 4 and 6 MiB by default).
pub const LATENCY_BUFFERS: usize = 64 << 10;

/// Sets up the socket of an accepted latency session: TCP_NODELAY if the client asked, and the
/// fixed [`LATENCY_BUFFERS`].
pub fn latency_socket<S: std::os::fd::AsFd>(sock: &S, nodelay: bool) {
    let sock = socket2::SockRef::from(sock);
    if nodelay {
        let _ = sock.set_tcp_nodelay(true);
    }
    let _ = sock.set_send_buffer_size(LATENCY_BUFFERS);
    let _ = sock.set_recv_buffer_size(LATENCY_BUFFERS);
}

/// Prints a completed transfer the way the seed's server did (begin, read over, end), then one
/// summary line. One write, so lines of concurrent transfers never interleave.
pub fn print_complete(srv: &Server, name: &str, peer: SocketAddr, read_size: u32, r: &Report) {
    let (begin, end) = if r.bytes == 0 {
        let now = unix_us_now();
        (now, now)
    } else {
        (r.first_byte_unix_us, r.last_byte_unix_us)
    };
    let elapsed = Duration::from_nanos(r.elapsed_ns);
    srv.metrics()
        .completed(Direction::Receive, r.bytes, elapsed);
    let text = format!(
        "{}\nfile[{}] read over .\n{}\n\
         tsserver: received {} from {peer} in {} (first to last byte): {:.1} MiB/s ({:.2} Gbit/s), \
         {} of up to {read_size} B, cpu {}, io {}, xxh3 {:016x}\n",
        Stamp {
            label: "begin",
            unix_us: begin
        },
        Peer(name),
        Stamp {
            label: "end",
            unix_us: end
        },
        units::size(r.bytes),
        units::duration(elapsed),
        units::mib_per_s(r.bytes, elapsed),
        units::gbit_per_s(r.bytes, elapsed),
        tsperf_results::units::count(r.reads, "read"),
        units::cpu(r.cpu_user_us, r.cpu_sys_us, false),
        r.server_io.map_or("?".to_owned(), |io| io.to_string()),
        r.digest,
    );
    // A stuck or closed stdout must not stop the server from serving.
    srv.console().message(Stream::Out, &text);
}

/// Prints the summary of a reverse stream the server sent: the seed's begin and end lines (its
/// first and last write) and what it sent; and, for the last stream of a `-R -P` session (of
/// the server's sessions), the session's line.
pub fn print_sent(
    srv: &Server,
    peer: SocketAddr,
    hello: Option<&tsperf_proto::Hello>,
    closing: &[u8],
) {
    let Ok(Some((tsperf_proto::Frame::Sent(s), _))) = tsperf_proto::decode_frame(closing) else {
        return;
    };
    let (out, sessions) = (srv.console(), srv.sessions());
    let name = hello.map_or("", |h| h.name.as_str());
    let elapsed = Duration::from_nanos(s.elapsed_ns);
    srv.metrics().completed(Direction::Send, s.bytes, elapsed);
    let end_us = s.first_write_unix_us + elapsed.as_micros() as u64;
    let text = format!(
        "{}\nfile[{}] sent over .\n{}\n\
         tsserver: sent {} to {peer} in {} (first to last write): {:.1} MiB/s ({:.2} Gbit/s), \
         {} of {} B, cpu {}, io {}\n",
        Stamp {
            label: "begin",
            unix_us: s.first_write_unix_us
        },
        if name.is_empty() {
            "generated".to_owned()
        } else {
            Peer(name).to_string()
        },
        Stamp {
            label: "end",
            unix_us: end_us
        },
        units::size(s.bytes),
        units::duration(elapsed),
        units::mib_per_s(s.bytes, elapsed),
        units::gbit_per_s(s.bytes, elapsed),
        tsperf_results::units::count(s.writes, "write"),
        s.chunk,
        units::cpu(s.cpu_user_us, s.cpu_sys_us, false),
        s.server_io,
    );
    out.message(Stream::Out, &text);
    let moved = sessions::Moved {
        bytes: s.bytes,
        first_us: s.first_write_unix_us,
        last_us: end_us,
    };
    if let Some(line) =
        hello.and_then(|h| sessions::ended(sessions, (h.session, h.reverse), peer, Some(moved)))
    {
        out.message(Stream::Out, &line);
    }
}

/// Reports a connection that did not complete, on stderr, and counts it (`hello`: what the
/// client asked for, where it got that far).
pub fn print_failed(
    srv: &Server,
    peer: SocketAddr,
    outcome: &Outcome,
    hello: Option<&tsperf_proto::Hello>,
) {
    let out = srv.console();
    match outcome {
        Outcome::Refused(code, _) => srv.metrics().refused(*code),
        Outcome::Incomplete(_) => srv.metrics().incomplete(match hello {
            Some(h) if h.reverse => Direction::Send,
            _ => Direction::Receive,
        }),
        Outcome::Complete => {}
    }
    match outcome {
        Outcome::Complete => {}
        Outcome::Refused(_, reason) => out.message(
            Stream::Err,
            &format!("tsserver: refused {peer}: {}\n", Peer(reason)),
        ),
        Outcome::Incomplete(reason) => out.message(
            Stream::Err,
            &format!(
                "tsserver: incomplete transfer from {peer}: {}\n",
                Peer(reason)
            ),
        ),
    }
}
