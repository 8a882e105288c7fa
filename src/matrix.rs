//! The comparison grid behind `scripts/matrix.sh`: the seed's experiments, every cell, repeated.
//!
//! Stream cells are chunk × client io × server log (× client I/O strategy, when asked: a cell
//! whose strategy is not the default `write` has it in its io label, e.g. `blocking writev`);
//! latency cells are codec × framing × nodelay,
//! plus reconnect. The grid starts its own servers (one per log sink; `stdout` on a pseudo-
//! terminal), or uses a server already running elsewhere (`--host`). Every repetition's client
//! JSON is appended to `runs.jsonl` as soon as it exists, and the tables and charts are written
//! again after every cell, so a failure late in a grid loses nothing already measured.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{self, Cell, Run, Setup};

/// Where the `--log stdout` server's stdout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StdoutTo {
    /// A pseudo-terminal read by a terminal emulator (tmux) if installed, else by `script`.
    Pty,
    /// A file.
    File,
}

/// Validated grid settings.
#[derive(Debug, Clone)]
pub struct GridConfig {
    pub out: PathBuf,
    pub file: PathBuf,
    pub reps: u32,
    pub chunks: Vec<u32>,
    /// tsclient `--io` strategies (`write` alone by default).
    pub strategies: Vec<String>,
    /// Requests per latency cell, and per cell that stalls on Nagle.
    pub latency_count: u64,
    pub stall_count: u64,
    /// A server already running elsewhere: only the client side of the grid runs.
    pub host: Option<(String, u16)>,
    /// Address our own servers bind and clients connect to.
    pub bind: String,
    /// Command prefixes (e.g. `ip netns exec NS`) for our servers and for the clients.
    pub server_wrap: Vec<String>,
    pub client_wrap: Vec<String>,
    pub stdout_to: StdoutTo,
    /// The tmux session name for the pty server (the caller kills it on exit).
    pub tmux_session: String,
    pub network: String,
    pub commit: String,
    pub bin_dir: PathBuf,
    /// Scratch space (server logs and ports); a fresh temporary directory when `None`.
    pub work: Option<PathBuf>,
    /// The link's rate, when known (the emulated LAN's), in Gbit/s.
    pub line_gbit: Option<f64>,
}

/// The grid was stopped by Ctrl-C or SIGTERM (tsmatrix exits 130).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// A server this grid started; killed when dropped (with its tmux session, if it has one).
struct OwnServer {
    child: Option<Child>,
    tmux: Option<String>,
    port: u16,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(session) = &self.tmux {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", session])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn wrapped(wrap: &[String], program: &Path) -> Command {
    match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Waits up to 10 s for `tsserver: listening on ADDR:PORT` in `err` and returns the port.
fn port_from(err: &Path, child: Option<&mut Child>) -> Result<u16> {
    let end = Instant::now() + Duration::from_secs(10);
    let mut child = child;
    while Instant::now() < end {
        let text = fs::read_to_string(err).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .find_map(|l| l.strip_prefix("tsserver: listening on "))
        {
            return addr
                .rsplit(':')
                .next()
                .and_then(|p| p.trim().parse().ok())
                .context("bad listening line");
        }
        if let Some(status) = child
            .as_deref_mut()
            .map(Child::try_wait)
            .transpose()?
            .flatten()
        {
            bail!(
                "tsserver exited ({status}) before listening: {}",
                text.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!(
        "tsserver did not start within 10 s: {}",
        fs::read_to_string(err).unwrap_or_default().trim()
    )
}

impl GridConfig {
    fn tsserver(&self) -> PathBuf {
        self.bin_dir.join("tsserver")
    }

    /// Starts a server with `--log log`; stdout goes per `stdout_to` for the stdout sink.
    fn start_server(&self, log: &str, tmp: &Path) -> Result<(OwnServer, String)> {
        let err = tmp.join(format!("server-{log}.err"));
        let logfile = tmp.join(format!("server-{log}.log"));
        let mut args = vec![
            "--bind".to_owned(),
            self.bind.clone(),
            "--port".into(),
            "0".into(),
            "--log".into(),
            log.into(),
        ];
        if log == "file" {
            args.extend(["--log-file".into(), logfile.display().to_string()]);
        }
        if log == "stdout" && self.stdout_to == StdoutTo::Pty {
            let mut words: Vec<String> = self.server_wrap.iter().map(|w| shell_quote(w)).collect();
            words.push(shell_quote(&self.tsserver().display().to_string()));
            words.extend(args.iter().map(|a| shell_quote(a)));
            let cmd = format!(
                "exec {} 2>{}",
                words.join(" "),
                shell_quote(&err.display().to_string())
            );
            let tmux = Command::new("tmux")
                .args([
                    "new-session",
                    "-d",
                    "-s",
                    &self.tmux_session,
                    "-x",
                    "200",
                    "-y",
                    "50",
                    &cmd,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if tmux.is_ok_and(|s| s.success()) {
                let port = port_from(&err, None)?;
                return Ok((
                    OwnServer {
                        child: None,
                        tmux: Some(self.tmux_session.clone()),
                        port,
                    },
                    "a pseudo-terminal read by tmux (a terminal emulator)".into(),
                ));
            }
            let mut child = Command::new("script")
                .args(["-qfc", &cmd, "/dev/null"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("neither tmux nor script could start the pty server")?;
            let port = port_from(&err, Some(&mut child))?;
            return Ok((
                OwnServer {
                    child: Some(child),
                    tmux: None,
                    port,
                },
                "a pseudo-terminal read by script (to /dev/null)".into(),
            ));
        }
        let stdout: Stdio = if log == "stdout" {
            File::create(tmp.join("server-stdout.txt"))?.into()
        } else {
            Stdio::null()
        };
        let mut child = wrapped(&self.server_wrap, &self.tsserver())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(File::create(&err)?)
            .spawn()
            .context("cannot start tsserver")?;
        let port = port_from(&err, Some(&mut child))?;
        Ok((
            OwnServer {
                child: Some(child),
                tmux: None,
                port,
            },
            "a file".into(),
        ))
    }

    /// Runs one client and returns its JSON; [`Interrupted`] once `stop` is set.
    fn client(
        &self,
        stop: &AtomicBool,
        host: &str,
        port: u16,
        args: &[String],
    ) -> Result<serde_json::Value> {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        let out = wrapped(&self.client_wrap, &self.bin_dir.join("tsclient"))
            .args([
                "--host",
                host,
                "--port",
                &port.to_string(),
                "--json",
                "--no-progress",
            ])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("cannot run tsclient")?;
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        if !out.status.success() {
            bail!(
                "tsclient {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        serde_json::from_slice(&out.stdout).context("tsclient printed no JSON")
    }
}

/// One latency cell of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyCell {
    pub codec: &'static str,
    pub framing: &'static str,
    pub nodelay: bool,
    pub reconnect: bool,
}

impl LatencyCell {
    /// True for the cells that wait on Nagle and delayed ACK (about 88 ms a request), which get
    /// a smaller count.
    pub fn stalls(&self) -> bool {
        self.framing == "split" && !self.nodelay
    }

    /// The tsclient arguments that measure this cell with `count` requests.
    pub fn args(&self, count: u64) -> Vec<String> {
        let mut a: Vec<String> = [
            "--latency",
            "--codec",
            self.codec,
            "--framing",
            self.framing,
            "--count",
        ]
        .map(String::from)
        .to_vec();
        a.push(count.to_string());
        if self.nodelay {
            a.push("--nodelay".into());
        }
        if self.reconnect {
            a.push("--reconnect".into());
        }
        a
    }
}

/// The latency grid: codec × framing × nodelay, then reconnect with single and split framing
/// (Nagle on).
pub fn latency_cells() -> Vec<LatencyCell> {
    let mut cells = Vec::new();
    for codec in ["binary", "object"] {
        for framing in ["single", "split"] {
            for nodelay in [false, true] {
                cells.push(LatencyCell {
                    codec,
                    framing,
                    nodelay,
                    reconnect: false,
                });
            }
        }
    }
    for framing in ["single", "split"] {
        cells.push(LatencyCell {
            codec: "binary",
            framing,
            nodelay: false,
            reconnect: true,
        });
    }
    cells
}

/// Runs the whole grid and writes the results; returns the rendered Markdown tables.
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
    let mut runs_file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&runs_path)?;

    // Servers: ours, one per log sink, or the one given.
    let logs: Vec<&str> = if cfg.host.is_some() {
        vec!["remote"]
    } else {
        vec!["none", "file", "stdout"]
    };
    let mut servers = Vec::new();
    let mut stdout_to = "not measured (the server is remote)".to_owned();
    let host = match &cfg.host {
        Some((h, _)) => h.clone(),
        None => cfg.bind.clone(),
    };
    for log in &logs {
        match &cfg.host {
            Some((_, port)) => servers.push((*log, None, *port)),
            None => {
                let (server, target) = cfg.start_server(log, &tmp)?;
                if *log == "stdout" {
                    stdout_to = target;
                }
                let port = server.port;
                servers.push((*log, Some(server), port));
            }
        }
    }

    let latency_cells = latency_cells();

    let total = cfg.chunks.len() * 2 * cfg.strategies.len().max(1) * logs.len() * cfg.reps as usize
        + latency_cells.len();
    let strategies: Vec<&str> = if cfg.strategies.is_empty() {
        vec!["write"]
    } else {
        cfg.strategies.iter().map(String::as_str).collect()
    };
    let ios: Vec<(String, &str, &str)> = strategies
        .iter()
        .flat_map(|s| {
            ["blocking", "nonblocking"].map(|io| {
                let label = if *s == "write" {
                    io.to_owned()
                } else {
                    format!("{io} {s}")
                };
                (label, io, *s)
            })
        })
        .collect();
    let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr_with_hz(10))
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("[{pos}/{len}] {elapsed} {msg}").expect("valid template"),
    );

    let setup = Setup {
        machine: crate::machine::Machine::probe(&cfg.commit),
        file: cfg
            .file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
        bytes: meta.len(),
        digest: String::new(),
        reps: cfg.reps,
        network: cfg.network.clone(),
        stdout_to,
        date: crate::timing::utc_now_rfc3339(),
        line_gbit: cfg.line_gbit,
    };
    let mut all: Vec<Run> = Vec::new();
    let mut record = |run: Run, all: &mut Vec<Run>| -> Result<()> {
        writeln!(runs_file, "{}", serde_json::to_string(&run)?)?;
        runs_file.flush()?;
        all.push(run);
        Ok(())
    };
    let mut digest = String::new();
    let file = cfg.file.display().to_string();

    for &chunk in &cfg.chunks {
        for (label, io, strategy) in &ios {
            let (label, io, strategy) = (label.as_str(), *io, *strategy);
            // Alternate the log sinks within each repetition, so drift hits every sink alike.
            let cells: Vec<Cell> = servers
                .iter()
                .map(|(log, _, _)| Cell::Stream {
                    chunk,
                    io: label.into(),
                    log: (*log).into(),
                })
                .collect();
            for rep in 1..=cfg.reps {
                for (cell, (log, _, port)) in cells.iter().zip(&servers) {
                    bar.set_message(format!(
                        "stream chunk {chunk} {label} log {log} rep {rep}/{}",
                        cfg.reps
                    ));
                    let mut args = vec!["--chunk".to_owned(), chunk.to_string(), file.clone()];
                    if io == "nonblocking" {
                        args.push("--nonblocking".into());
                    }
                    if strategy != "write" {
                        args.extend(["--io".to_owned(), strategy.to_owned()]);
                    }
                    let v = cfg.client(&stop, &host, *port, &args)?;
                    digest = v["digest"].as_str().unwrap_or_default().to_owned();
                    let mut cell = cell.clone();
                    // Against a remote server, the cell's log is what that server reports.
                    if let (Cell::Stream { log, .. }, Some(remote)) =
                        (&mut cell, v["server"]["log"].as_str())
                        && log == "remote"
                    {
                        *log = remote.to_owned();
                    }
                    record(
                        Run {
                            cell,
                            rep,
                            result: v,
                        },
                        &mut all,
                    )?;
                    bar.inc(1);
                }
            }
            let m = report::aggregate(
                Setup {
                    digest: digest.clone(),
                    ..setup.clone()
                },
                &all,
            );
            for row in m
                .stream
                .iter()
                .filter(|r| r.chunk == chunk && r.io == label)
            {
                bar.suspend(|| {
                    println!(
                        "stream  chunk {:>5}  {:<20}  log {:<6}  median {:>8.1} MiB/s  (min {:.1}, max {:.1})  {}",
                        row.chunk,
                        row.io,
                        row.log,
                        row.median_mib_s,
                        row.min_mib_s,
                        row.max_mib_s,
                        if row.verified { "verified" } else { "NOT VERIFIED" }
                    )
                });
            }
            report::export_all(&m, &cfg.out)?;
        }
    }

    let (_, _, latency_port) = servers[0];
    for lc in latency_cells {
        let LatencyCell {
            codec,
            framing,
            nodelay,
            reconnect,
        } = lc;
        let count = if lc.stalls() {
            cfg.stall_count
        } else {
            cfg.latency_count
        };
        bar.set_message(format!(
            "latency {codec} {framing} nodelay {nodelay} reconnect {reconnect}"
        ));
        let args = lc.args(count);
        let v = cfg.client(&stop, &host, latency_port, &args)?;
        let cell = Cell::Latency {
            codec: codec.into(),
            framing: framing.into(),
            nodelay,
            reconnect,
            count,
        };
        record(
            Run {
                cell,
                rep: 1,
                result: v.clone(),
            },
            &mut all,
        )?;
        bar.inc(1);
        bar.suspend(|| {
            println!(
                "latency {codec:<6} {framing:<6}  nodelay {:<3}  reconnect {:<3}  p50 {:>10.1} µs  p99 {:>10.1} µs",
                if nodelay { "on" } else { "off" },
                if reconnect { "yes" } else { "no" },
                v["rtt_us"]["p50"].as_f64().unwrap_or(0.0),
                v["rtt_us"]["p99"].as_f64().unwrap_or(0.0),
            )
        });
        let m = report::aggregate(
            Setup {
                digest: digest.clone(),
                ..setup.clone()
            },
            &all,
        );
        report::export_all(&m, &cfg.out)?;
    }
    bar.finish_and_clear();
    drop(servers);
    let m = report::aggregate(Setup { digest, ..setup }, &all);
    report::export_all(&m, &cfg.out)?;
    Ok(report::markdown::render(&m))
}
