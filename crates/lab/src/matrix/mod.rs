//! The comparison grid behind `scripts/matrix.sh`: the seed's experiments, every cell, repeated.
//!
//! Stream cells are chunk × client io × server log (× client I/O strategy, when asked: a cell
//! whose strategy is not the default `write` has it in its io label, e.g. `blocking writev`);
//! latency cells are codec × framing × nodelay,
//! plus reconnect. Every cell runs against one server started with `--allow-client-log`, each
//! transfer asking for its log sink (`tsclient --server-log`): the grid starts that server
//! itself (its stdout on a pseudo-terminal, or a file), or uses one already running elsewhere
//! (`--host`), so a real two-host run is the same grid as the loopback one. Every repetition's
//! client JSON is appended to `runs.jsonl` as soon as it exists, and the tables and charts are
//! written again after every cell, so a failure late in a grid loses nothing already measured.

mod cells;
mod stream;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use cells::{
    LatencyCell, Load, StreamCell, TIMELINE_MAX_SAMPLES, client_columns, latency_cells,
};

use crate::harness::{Client, ServerOptions, ServerProcess, Sink};
use crate::report::{self, Run, Setup};
use tsperf_proto::LogMode;
use tsperf_results::json::ClientJson;
use tsperf_results::strategy::Strategy;

/// Where the `--log stdout` server's stdout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutTo {
    /// A pseudo-terminal read by a terminal emulator (tmux) if installed, else by `script`.
    Pty,
    /// A file.
    File,
}

/// Validated grid settings.
#[derive(Debug, Clone)]
pub struct GridConfig {
    /// Where the results go.
    pub out: PathBuf,
    /// The file every stream cell sends.
    pub file: PathBuf,
    /// Repetitions of every stream cell.
    pub reps: u32,
    /// The chunk sizes.
    pub chunks: Vec<u32>,
    /// tsclient `--io` strategies (`write` alone by default).
    pub strategies: Vec<Strategy>,
    /// Requests per latency cell, and per cell that stalls on Nagle.
    pub latency_count: u64,
    /// Requests per latency cell that stalls on Nagle (each takes 40 ms or more).
    pub stall_count: u64,
    /// A server already running elsewhere: only the client side of the grid runs.
    pub host: Option<(String, u16)>,
    /// Address our own servers bind and clients connect to.
    pub bind: String,
    /// Command prefixes (e.g. `ip netns exec NS`) for our servers and for the clients.
    pub server_wrap: Vec<String>,
    /// Command prefix for the clients.
    pub client_wrap: Vec<String>,
    /// Where our --log stdout server's stdout goes.
    pub stdout_to: StdoutTo,
    /// The tmux session name for the pty server.
    pub tmux_session: String,
    /// Where the server ran, as the results name it.
    pub network: String,
    /// tsperf's git commit, for the results.
    pub commit: String,
    /// Where the tsperf binaries are.
    pub bin_dir: PathBuf,
    /// Scratch space (server logs and ports); a fresh temporary directory when `None`.
    pub work: Option<PathBuf>,
    /// The link's rate, when known (the emulated LAN's), in Gbit/s.
    pub line_gbit: Option<f64>,
    /// Stream cells are timed runs of this many seconds (`tsclient --time`) instead of one pass
    /// of the file: on a fast link a pass is too short to measure well.
    pub time: Option<f64>,
    /// Stream counts of the stream grid (`tsclient -P`; `[1]`, the seed's, by default).
    pub streams: Vec<u32>,
    /// The stream grid runs in reverse too (`tsclient -R`, the server sending).
    pub reverse: bool,
}

/// The grid was stopped by Ctrl-C or SIGTERM (tsmatrix exits 130).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// The server log sinks of the stream grid, in the order each repetition runs them.
pub const SINKS: [LogMode; 3] = [LogMode::None, LogMode::File, LogMode::Stdout];

/// The grid's server: ours (killed when dropped), or the remote one.
struct GridServer {
    _own: Option<ServerProcess>,
    port: u16,
}

impl GridConfig {
    /// Starts our server: `--allow-client-log`, its log file in `tmp`, its stdout per
    /// `stdout_to`.
    fn start_server(&self, tmp: &Path) -> Result<ServerProcess> {
        let log_file = tmp.join("server-file.log").display().to_string();
        let args = [
            "--bind",
            &self.bind,
            "--port",
            "0",
            "--log",
            "none",
            "--allow-client-log",
            "--log-file",
            &log_file,
        ]
        .map(String::from)
        .to_vec();
        let stdout = match self.stdout_to {
            StdoutTo::Pty => Sink::Pty {
                tmux_session: self.tmux_session.clone(),
            },
            StdoutTo::File => Sink::File(tmp.join("server-stdout.txt")),
        };
        ServerProcess::start(&ServerOptions {
            bin_dir: &self.bin_dir,
            wrap: &self.server_wrap,
            args,
            stdout,
            stderr: Some(tmp.join("server.err")),
        })
    }

    /// Our server, or the one given; and where its stdout goes, as far as the grid knows.
    fn server(&self, tmp: &Path) -> Result<(GridServer, String)> {
        if let Some((_, port)) = &self.host {
            let remote = GridServer {
                _own: None,
                port: *port,
            };
            return Ok((remote, "the remote server's stdout".into()));
        }
        let server = self.start_server(tmp)?;
        let stdout_is = server.stdout_is.clone();
        Ok((
            GridServer {
                port: server.port,
                _own: Some(server),
            },
            stdout_is,
        ))
    }
}

/// The runs so far, appended to `runs.jsonl` as they come, and the tables written from them.
struct Recorder<'a> {
    cfg: &'a GridConfig,
    file: File,
    setup: Setup,
    runs: Vec<Run>,
    stop: Arc<AtomicBool>,
}

impl Recorder<'_> {
    /// Runs tsclient with `args` against `port`; [`Interrupted`] once a signal came.
    fn measure(&self, port: u16, args: &[String]) -> Result<ClientJson> {
        let interrupted = || self.stop.load(Ordering::Relaxed);
        if interrupted() {
            return Err(Interrupted.into());
        }
        let host = match &self.cfg.host {
            Some((h, _)) => h.as_str(),
            None => self.cfg.bind.as_str(),
        };
        let client = Client {
            bin_dir: &self.cfg.bin_dir,
            wrap: &self.cfg.client_wrap,
            host,
            port,
        };
        let result = client.run(args);
        if interrupted() {
            return Err(Interrupted.into());
        }
        result
    }

    fn record(&mut self, mut run: Run) -> Result<()> {
        if let ClientJson::Stream(s) = &mut run.result {
            self.setup.digest = s.digest.clone();
            self.setup.server_stdout = Some(s.server.stdout);
            // A chart needs no more: a 2-second transfer sampled every 5 ms is 400 samples.
            while s.intervals.len() > cells::TIMELINE_MAX_SAMPLES {
                s.intervals =
                    tsperf_results::intervals::merge_pairs(std::mem::take(&mut s.intervals));
            }
        }
        writeln!(self.file, "{}", serde_json::to_string(&run)?)?;
        self.file.flush()?;
        self.runs.push(run);
        Ok(())
    }

    /// The tables of everything so far, written to the output directory.
    fn export(&self) -> Result<report::Matrix> {
        let m = report::aggregate(self.setup.clone(), &self.runs);
        report::export_all(&m, &self.cfg.out)?;
        Ok(m)
    }
}

fn progress_bar(total: usize) -> ProgressBar {
    let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr_with_hz(10))
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("[{pos}/{len}] {elapsed} {msg}").expect("valid template"),
    );
    bar
}

/// Runs the whole grid and writes the results; returns a few lines of what it found.
pub fn run(cfg: &GridConfig) -> Result<String> {
    fs::create_dir_all(&cfg.out)
        .with_context(|| format!("cannot create '{}'", cfg.out.display()))?;
    let meta = fs::metadata(&cfg.file)
        .with_context(|| format!("cannot read file '{}'", cfg.file.display()))?;
    // Ctrl-C or SIGTERM ends the grid between two runs (a client interrupted by the same Ctrl-C
    // ends the one running), so every drop below runs: servers killed, scratch removed.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    // Scratch space: the caller's (matrix.sh removes it), or a temporary directory of our own.
    let own_tmp;
    let tmp = match &cfg.work {
        Some(dir) => {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create '{}'", dir.display()))?;
            dir.clone()
        }
        None => {
            own_tmp = tempfile::Builder::new()
                .prefix("tsperf-matrix-")
                .tempdir()?;
            own_tmp.path().to_owned()
        }
    };
    let runs_path = cfg.out.join("runs.jsonl");
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&runs_path)
        .with_context(|| format!("cannot write '{}'", runs_path.display()))?;
    let (server, stdout_to) = cfg.server(&tmp)?;
    let setup = Setup {
        machine: crate::machine::probe(&cfg.commit),
        file: cfg
            .file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
        bytes: meta.len(),
        digest: String::new(),
        reps: cfg.reps,
        network: cfg.network.clone(),
        stdout_to,
        server_stdout: None,
        date: tsperf_sys::timing::utc_now_rfc3339(),
        line_gbit: cfg.line_gbit,
    };
    let mut rec = Recorder {
        cfg,
        file,
        setup,
        runs: Vec::new(),
        stop,
    };
    if let Some((host, port)) = &cfg.host {
        preflight(&rec, host, *port, &tmp)?;
    }
    let latency = latency_cells();
    let columns = client_columns(&cfg.strategies);
    let bar = progress_bar(
        stream::runs(cfg, columns.len())
            + latency
                .iter()
                .map(|c| latency_reps(c, cfg.reps) as usize)
                .sum::<usize>(),
    );
    stream::grid(&mut rec, server.port, &columns, &bar, &tmp)?;
    latency_grid(&mut rec, server.port, &latency, &bar)?;
    bar.finish_and_clear();
    drop(server);
    let m = rec.export()?;
    Ok(report::summary(&m))
}

/// Before any cell, a server given with `--host` must serve the grid: a small transfer to each
/// of its log sinks, so one that does not let clients choose (started without
/// `--allow-client-log`) stops the grid now, with how to start it, not at its first file cell.
fn preflight(rec: &Recorder, host: &str, port: u16, tmp: &Path) -> Result<()> {
    let probe = tmp.join("preflight.txt");
    tsperf_sys::testdata::generate(&probe, 4096)?;
    let probe = probe.display().to_string();
    for sink in [LogMode::File, LogMode::Stdout] {
        let args = [
            "--server-log",
            &sink.to_string(),
            "--clock-queries",
            "0",
            &probe,
        ];
        rec.measure(port, &args.map(String::from)).with_context(|| {
            format!(
                "the server at {host}:{port} did not serve a transfer asking for its {sink} log \
                 sink, as every grid cell does: start it with `tsserver --allow-client-log \
                 --port {port}` (and --log-file PATH for the file sink)"
            )
        })?;
    }
    Ok(())
}

/// Repetitions of a latency cell: the grid's, except for a cell that stalls on Nagle and
/// delayed ACK, whose round trip the kernel's timer sets (one run of it is enough).
fn latency_reps(cell: &LatencyCell, reps: u32) -> u32 {
    if cell.stalls() { 1 } else { reps.max(1) }
}

/// Every latency cell, repeated (a latency session logs nothing per read).
fn latency_grid(
    rec: &mut Recorder,
    port: u16,
    cells: &[LatencyCell],
    bar: &ProgressBar,
) -> Result<()> {
    let load = Load {
        file: rec.cfg.file.display().to_string(),
        chunk: rec.cfg.chunks.iter().copied().max().unwrap_or(10240),
    };
    for lc in cells {
        let count = if lc.stalls() {
            rec.cfg.stall_count
        } else {
            rec.cfg.latency_count
        };
        let (codec, framing) = (lc.codec.as_str(), lc.framing.as_str());
        let loaded = lc
            .under_load
            .map_or(String::new(), |l| format!(" under load (log {l})"));
        bar.set_message(format!(
            "latency {codec} {framing} nodelay {} reconnect {}{loaded}",
            lc.nodelay, lc.reconnect
        ));
        for rep in 1..=latency_reps(lc, rec.cfg.reps) {
            let result = rec.measure(port, &lc.args(count, &load))?;
            let rtt = match &result {
                ClientJson::Latency(l) => match &l.under_load {
                    Some(u) => u.rtt_us.clone().unwrap_or_default(),
                    None => l.rtt_us.clone().unwrap_or_default(),
                },
                _ => Default::default(),
            };
            rec.record(Run {
                cell: lc.cell(count),
                rep,
                result,
            })?;
            bar.inc(1);
            bar.suspend(|| {
                println!(
                    "latency {codec:<6} {framing:<13}  nodelay {:<3}  reconnect {:<3}  p50 {:>10.1} µs  p99 {:>10.1} µs{loaded}",
                    if lc.nodelay { "on" } else { "off" },
                    if lc.reconnect { "yes" } else { "no" },
                    rtt.p50,
                    rtt.p99,
                )
            });
        }
        rec.export()?;
    }
    Ok(())
}
