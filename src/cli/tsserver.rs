//! tsserver's front end: its flags, their checks, and the run that binds, serves until stopped,
//! and flushes what it has to say.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser};
use tsperf_proto::{DEFAULT_PORT, LogMode};
use tsperf_results::units;
use tsperf_server::{self as server, ServerConfig};

use crate::cli;
use crate::cli::values::LogArg;

/// Receive files from tsclient, count and checksum every byte, and send back a report.
#[derive(Parser)]
#[command(name = "tsserver", version = crate::cli::VERSION)]
struct Args {
    /// Address or host name to listen on, optionally with :PORT; IPv6 addresses with or without
    /// brackets ([::1]:7433 with a port). By default
    /// every interface, IPv6 and IPv4 at once: this is a LAN server.
    #[arg(long, value_parser = tsperf_sys::net::parse_bind, value_name = "ADDR")]
    bind: Option<tsperf_sys::net::Bind>,
    /// Port to listen on; 0 takes a free one (the real port is printed on stderr).
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Serve one client's run, whole, then exit: 0 if each of its connections completed, 1 if
    /// not. A run is every stream of a -P session and both directions of a --bidir (all carry
    /// one session id); any other connection meanwhile is refused, naming --once.
    #[arg(long)]
    once: bool,
    /// Bytes per read. By default, with a log sink, the client's chunk size (one read and one
    /// line per chunk, as the field report's server), at least --log-min-read and at most 256 KiB; with
    /// --log none, 1 MiB (--blocking: 256 KiB). The client's chunk never sizes the server's buffer.
    #[arg(long, value_parser = units::parse_read_size, value_name = "BYTES")]
    read_size: Option<u32>,
    /// Serve each connection on its own thread with blocking reads, instead of the default
    /// single-threaded mio event loop.
    #[arg(long)]
    blocking: bool,
    /// Receive buffer (SO_RCVBUF) to ask the kernel for; by default the kernel's own.
    #[arg(long, value_parser = units::parse_buffer, value_name = "BYTES")]
    rcvbuf: Option<u32>,
    /// Where to write one line per read: stdout (one write per line, like printf to a screen),
    /// file (buffered, see --log-file), or none.
    #[arg(long, value_enum, default_value_t = LogArg::None)]
    log: LogArg,
    /// Let each client choose its transfer's log sink (tsclient --server-log): none, stdout, or
    /// the --log-file named here (never a path of the client's). --log stays the sink of
    /// clients that do not ask. The log file is opened at start.
    #[arg(long)]
    allow_client_log: bool,
    /// Event loops, each on its own thread, taking connections from the one listening socket,
    /// so many clients (and one --parallel session's streams) spread over the cores; default:
    /// the CPUs this server may run on. --max-clients and every bound hold across them.
    /// --blocking (a thread per connection) and --once use one.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    threads: Option<u16>,
    /// How several event loops take connections: shared (one listening socket that every loop
    /// polls; whichever is free accepts) or reuseport (a listening socket per loop on the port,
    /// SO_REUSEPORT: the kernel picks one by a hash of each connection's addresses).
    #[arg(long, value_enum, default_value_t = AcceptArg::Shared, value_name = "HOW")]
    accept: AcceptArg,
    /// Serve Prometheus metrics at http://ADDR/metrics (HOST:PORT, or :PORT for every
    /// interface): transfers by direction and result, bytes each way, refusals by code,
    /// connections open, lines dropped, the send-buffer budget in use, a histogram of rates.
    /// Off unless given; never on the data port.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Refuse reverse streams (tsclient --reverse): this server then only receives.
    #[arg(long, conflicts_with = "serve")]
    no_reverse: bool,
    /// Offer no TLS: a client's --tls is refused, naming this flag. By default the server makes
    /// a certificate when it starts (self-signed; its SHA-256 goes to each client that asks for
    /// TLS, proved by the --auth-key key where there is one) and serves streams over TLS 1.3.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    no_tls: bool,
    /// Present this certificate to streams over TLS instead of one made at start: a PEM file,
    /// the chain with the server's own certificate first. Clients pin it as they pin a made
    /// one (its SHA-256 in the Accept, proved by the --auth-key key where there is one).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert: a PEM file (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seal and open the server's TLS records in the kernel (kernel TLS): each handshake is
    /// made in the process, then its keys are handed to the kernel, and a reverse stream asked
    /// with --io sendfile goes through TLS. Refused at start where the kernel has no kernel TLS
    /// (CONFIG_TLS; modprobe tls).
    #[arg(long, conflicts_with = "no_tls")]
    ktls: bool,
    /// Serve the files in DIR to reverse streams that name one (tsclient --reverse NAME): plain
    /// names only, opened from a handle on DIR, never through a symlink, regular files only.
    #[arg(long, value_name = "DIR")]
    serve: Option<PathBuf>,
    /// The log file for --log file (and --allow-client-log); lines are appended.
    #[arg(long, default_value = "tsserver.log", value_name = "PATH")]
    log_file: PathBuf,
    /// With --log stdout or file, the smallest read size: a client announcing smaller chunks is
    /// read at least this many bytes at a time, not one log line per byte.
    #[arg(long, default_value_t = server::LOG_MIN_READ, value_parser = units::parse_read_size, value_name = "BYTES")]
    log_min_read: u32,
    /// Largest transfer a client may announce; larger ones are refused before any data flows.
    /// Suffixes k/m/g (binary).
    #[arg(long, default_value = server::MAX_BYTES, value_parser = parse_bytes, value_name = "BYTES")]
    max_bytes: u64,
    /// Kernel memory all reverse streams' send buffers may pin together: a stream keeps the
    /// kernel's autotuning while half of it is free, then gets a fixed 256 KiB buffer, and is
    /// refused when that does not fit. By default a quarter of the kernel's TCP memory pressure
    /// threshold (tcp_mem), at most 256MiB. Suffixes k/m/g (binary).
    #[arg(long, value_parser = parse_send_buffers, value_name = "BYTES")]
    send_buffers: Option<u64>,
    /// Longest timed run (tsclient --time) a client may ask for, in seconds; longer ones are
    /// refused at the hello. A timed run still going this long plus 10 s after its first byte
    /// is cut off.
    #[arg(long, default_value_t = server::MAX_DURATION.as_secs_f64(), value_parser = cli::parse_secs, value_name = "SECS")]
    max_time: f64,
    /// Connections served at once; more are refused with a reason. Lowered (with a warning) to
    /// what fits in the descriptor limit.
    #[arg(long, default_value_t = server::MAX_CLIENTS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_clients: u64,
    /// Seconds a new connection has to send its hello (and answer the authentication
    /// challenge), counted from the accept, and then to send its first byte or request.
    #[arg(long, default_value_t = server::HELLO_TIMEOUT.as_secs_f64(), value_parser = cli::parse_secs, value_name = "SECS")]
    hello_timeout: f64,
    /// Save each received file into DIR under its announced name: written to a hidden temporary,
    /// renamed into place only when every byte arrived and the digests match.
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Require clients to prove they hold the key in FILE (HMAC-SHA256 challenge and response;
    /// the key never crosses the network).
    #[arg(long, value_name = "FILE")]
    auth_key: Option<PathBuf>,
    /// With --save, replace a file of the same name (refused by default).
    #[arg(long, requires = "save")]
    overwrite: bool,
    /// Seconds that transfers in flight get to finish after SIGINT or SIGTERM; the rest are then
    /// aborted with a reason (and any partial file removed).
    #[arg(long, default_value_t = server::GRACE.as_secs_f64(), value_parser = cli::parse_secs, value_name = "SECS")]
    grace: f64,
    /// Seconds a connection may go without data or requests, or without taking its answers,
    /// before it is closed and logged as incomplete.
    #[arg(long, default_value_t = server::IDLE_TIMEOUT.as_secs_f64(), value_parser = cli::parse_secs, value_name = "SECS")]
    idle_timeout: f64,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    match units::parse_size(s) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid size '{s}': expected bytes such as 1048576 or 64GiB, at least 1"
        )),
    }
}

fn parse_send_buffers(s: &str) -> Result<u64, String> {
    use server::budget::MIN_BUDGET;
    match units::parse_size(s) {
        Some(n) if n >= MIN_BUDGET => Ok(n),
        _ => Err(format!(
            "invalid size '{s}': expected bytes such as 256MiB, at least {MIN_BUDGET} (one \
             fixed send buffer)"
        )),
    }
}

/// Refuses (exit 2) a log flag given for a sink it does not apply to; returns the sink.
fn check(matches: &clap::ArgMatches, args: &Args) -> LogMode {
    let log = LogMode::from(args.log);
    let given = |id| cli::given(matches, id);
    if given("log_file") && log != LogMode::File && !args.allow_client_log {
        cli::usage_error::<Args>(format!(
            "--log-file applies to --log file or --allow-client-log only (this server logs to \
             {log})"
        ));
    }
    if args.blocking {
        for flag in ["threads", "accept"] {
            if given(flag) {
                cli::usage_error::<Args>(format!(
                    "--{flag} sets the event loops, and --blocking serves with a thread per \
                     connection instead: give one or the other"
                ));
            }
        }
    }
    if given("log_min_read") && log == LogMode::None && !args.allow_client_log {
        cli::usage_error::<Args>(
            "--log-min-read applies to --log stdout, --log file or --allow-client-log only \
             (this server logs nothing)",
        );
    }
    log
}

/// The address and port to listen on: `--bind`'s port if it named one (refusing, exit 2, a
/// `--port` that disagrees), else `--port`.
fn bind_and_port(matches: &clap::ArgMatches, args: &Args) -> (Option<std::net::IpAddr>, u16) {
    let Some(b) = args.bind else {
        return (None, args.port);
    };
    match b.port {
        Some(p) if cli::given(matches, "port") && p != args.port => {
            cli::usage_error::<Args>(format!(
                "--bind names port {p} but --port says {}: give the port once",
                args.port
            ))
        }
        Some(p) => (Some(b.ip), p),
        None => (Some(b.ip), args.port),
    }
}

/// Binds `--metrics` (if given), then says where the server listens (always stderr's first
/// line), where its metrics are, and the warnings.
fn announce(
    listener: &std::net::TcpListener,
    metrics: Option<&str>,
    warnings: &[String],
) -> anyhow::Result<Option<std::net::TcpListener>> {
    let metrics = metrics
        .map(tsperf_metrics::http::bind)
        .transpose()
        .context("--metrics")?;
    eprintln!("tsserver: listening on {}", listener.local_addr()?);
    if let Some(m) = &metrics {
        eprintln!("tsserver: metrics at http://{}/metrics", m.local_addr()?);
    }
    for w in warnings {
        eprintln!("tsserver: {w}");
    }
    Ok(metrics)
}

/// `--accept`: how several event loops take connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AcceptArg {
    /// One listening socket every loop polls.
    Shared,
    /// A listening socket per loop (SO_REUSEPORT).
    Reuseport,
}

impl From<AcceptArg> for server::Accept {
    fn from(a: AcceptArg) -> Self {
        match a {
            AcceptArg::Shared => server::Accept::Shared,
            AcceptArg::Reuseport => server::Accept::ReusePort,
        }
    }
}

/// tsserver's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    Args::command()
}

/// tsserver's `main`.
pub fn main() -> ExitCode {
    cli::main("tsserver", run)
}

/// The `--save` and `--serve` directories, opened.
#[allow(clippy::type_complexity)]
fn dirs(
    args: &Args,
) -> anyhow::Result<(
    Option<std::sync::Arc<server::save::SaveDir>>,
    Option<std::sync::Arc<server::serve_dir::ServeDir>>,
)> {
    let save = match &args.save {
        Some(dir) => Some(std::sync::Arc::new(server::save::SaveDir::open(
            dir,
            args.overwrite,
        )?)),
        None => None,
    };
    let serve = match &args.serve {
        Some(dir) => Some(std::sync::Arc::new(server::serve_dir::ServeDir::open(dir)?)),
        None => None,
    };
    Ok((save, serve))
}

/// What a conversation decides by, from the flags.
fn policy(
    args: &Args,
    log: LogMode,
    serves: bool,
    auth: Option<std::sync::Arc<tsperf_sys::auth::Key>>,
    tls_cert: Option<[u8; 32]>,
) -> server::Policy {
    server::Policy {
        log,
        allow_client_log: args.allow_client_log,
        log_min_read: args.log_min_read,
        read_size: args.read_size,
        bulk_read: if args.blocking {
            server::BULK_READ
        } else {
            server::LOOP_READ
        },
        max_bytes: args.max_bytes,
        max_duration: std::time::Duration::from_secs_f64(args.max_time),
        reverse: !args.no_reverse,
        serves,
        stdout: tsperf_sys::term::stdout_kind(),
        hello_timeout: std::time::Duration::from_secs_f64(args.hello_timeout),
        idle_timeout: std::time::Duration::from_secs_f64(args.idle_timeout),
        auth: auth.map(|k| k as std::sync::Arc<dyn tsperf_proto::serve::Authenticator>),
        tls_cert,
        tls_kernel: args.ktls,
    }
}

/// The certificate streams over TLS are served with: the operator's (`--tls-cert`), else
/// made now; none with `--no-tls`.
fn tls(args: &Args) -> anyhow::Result<Option<std::sync::Arc<server::ServerTls>>> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        _ if args.no_tls => return Ok(None),
        (Some(cert), Some(key)) => server::ServerTls::from_pem(cert, key)?,
        _ => server::ServerTls::ephemeral()?,
    };
    let tls = match args.ktls {
        true => {
            tsperf_sys::ktls::offered().map_err(|why| anyhow::anyhow!("--ktls: {why}"))?;
            tls.sealed_by(server::Records::Kernel)
        }
        false => tls,
    };
    Ok(Some(std::sync::Arc::new(tls)))
}

fn run() -> anyhow::Result<ExitCode> {
    let matches = Args::command().get_matches();
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let log = check(&matches, &args);
    let (bind, port) = bind_and_port(&matches, &args);
    let log_file = tsperf_server::readlog::needs_file(log, args.allow_client_log)
        .then(|| tsperf_server::readlog::open_log_file(&args.log_file))
        .transpose()?
        .map(std::sync::Arc::new);
    let console = server::console::Console::start();
    cli::init_server_diagnostics(&console)?;
    // On SIGINT or SIGTERM: stop accepting, give transfers in flight --grace to finish, then
    // serve() returns and the log is flushed. A second signal cuts the grace short. Caught from
    // here; acted on once the server is made.
    let grace = std::time::Duration::from_secs_f64(args.grace);
    let signals = server::catch_stop_signals()?;
    let (save, serve) = dirs(&args)?;
    // Warnings wait until after the listening line, which is always stderr's first.
    let mut warnings = Vec::new();
    let auth = match args.auth_key.as_deref().map(cli::load_key).transpose()? {
        Some((key, warning)) => {
            warnings.extend(warning);
            Some(key)
        }
        None => None,
    };
    if save.is_some() && auth.is_none() && !bind.is_some_and(|ip| ip.is_loopback()) {
        let dir = args
            .save
            .as_ref()
            .map_or(String::new(), |d| d.display().to_string());
        warnings.push(format!(
            "warning: --save on {} lets anyone who can reach this port write files into {dir} (use --auth-key)",
            bind.map_or("every interface".to_owned(), |ip| ip.to_string())
        ));
    }
    let tls = tls(&args)?;
    let tls_cert = tls.as_ref().map(|t| t.cert_sha256());
    let policy = policy(&args, log, serve.is_some(), auth, tls_cert);
    let mut cfg = ServerConfig {
        bind,
        port,
        once: args.once,
        rcvbuf: args.rcvbuf,
        blocking: args.blocking,
        max_clients: args.max_clients as usize,
        save,
        threads: args
            .threads
            .map_or(tsperf_sys::host::cpus() as usize, usize::from),
        accept: args.accept.into(),
        serve,
        grace,
        policy,
        send_budget: server::budget::SendBudget::new(
            args.send_buffers
                .unwrap_or_else(server::budget::SendBudget::default_limit),
        ),
        log_file,
        tls,
    };
    warnings.extend(server::fit_descriptors(&mut cfg)?);
    let listener = server::bind(&cfg)?;
    let metrics = announce(&listener, args.metrics.as_deref(), &warnings)?;
    let server = server::Server::with_console(cfg, console);
    server.stop_on_signals(signals, grace)?;
    if let Some(m) = metrics {
        server.serve_metrics(m)?;
    }
    // Every transfer writes out its own log lines when it ends, cut off or not.
    let served = server.serve(listener);
    // What stdout and stderr still hold, while they take it; a stream nobody reads is given up.
    server.console().finish();
    Ok(if served? {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(cli::FAILURE)
    })
}
