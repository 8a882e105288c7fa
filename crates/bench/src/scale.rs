//! Many clients at once (`scripts/scale.sh`): aggregate throughput, server CPU and the server's
//! peak memory as the number of concurrent clients grows, for both server models.
//!
//! For each server model and client count a fresh `tsserver --log none` is started, so its peak
//! RSS (`VmHWM`) belongs to that count alone. Its RSS once listening is the baseline. The clients
//! are connections of this process's event-driven load generator ([`crate::loadgen`]): they
//! connect and are accepted, then send together. Aggregate throughput is every byte over the
//! time from that start to the last verified report. Server CPU is the kernel's account when the
//! server is reaped less its threads' CPU once listening. Every transfer must verify, or the run
//! fails.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::loadgen::{self, Load};
use tsperf_lab::harness::{ServerOptions, ServerProcess, Sink};
use tsperf_lab::report::Exporter;
use tsperf_results::stats::median;

/// The client counts `scripts/scale.sh` runs by default: 1, 2, 4 … 256.
pub const DEFAULT_COUNTS: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The most clients the thread-per-connection server is measured with: past it, a thread per
/// connection is the cost under study, and the event loop alone goes on (to 10,000).
pub const BLOCKING_MAX: u32 = 1024;

/// The server models, as `server.io` names them, and the tsserver flags that pick them.
pub const MODELS: [(&str, &[&str]); 2] = [("event-loop", &[]), ("blocking", &["--blocking"])];

/// What to run.
pub struct ScaleConfig {
    /// The file every client sends.
    pub file: PathBuf,
    /// Bytes per write of every client.
    pub chunk: u32,
    /// The numbers of clients to run at once, one row each.
    pub counts: Vec<u32>,
    /// Server models by name (see [`MODELS`]).
    pub models: Vec<String>,
    /// Repetitions of each count.
    pub reps: u32,
    /// Where `tsserver` is.
    pub bin_dir: PathBuf,
    /// The longest time without progress on any connection before the clients still going
    /// fail.
    pub timeout: Duration,
    /// The load generator's threads, each its own poll and share of the clients.
    pub generator_threads: u32,
}

/// One server model at one client count: medians over the repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScaleRow {
    /// The server's I/O model.
    pub server: String,
    /// Clients run at once.
    pub clients: u32,
    /// Bytes all of them sent.
    pub bytes: u64,
    /// Their total rate, MiB/s (the median repetition).
    pub mib_per_s: f64,
    /// The server's CPU time, seconds.
    pub server_cpu_s: f64,
    /// The load generator's CPU time (this process: every client thread), seconds. On a machine
    /// of few cores it shares them with the server, so where it is large the generator, not the
    /// server, sets the aggregate.
    #[serde(default)]
    pub generator_cpu_s: f64,
    /// The server's resident memory before the clients, KiB.
    pub base_rss_kib: u64,
    /// Its peak resident memory, KiB.
    pub peak_rss_kib: u64,
}

impl ScaleRow {
    /// Peak RSS growth over the listening baseline, per connection.
    pub fn growth_per_conn_kib(&self) -> f64 {
        self.peak_rss_kib.saturating_sub(self.base_rss_kib) as f64 / self.clients.max(1) as f64
    }

    /// Server CPU per byte received, in nanoseconds.
    pub fn cpu_ns_per_byte(&self) -> f64 {
        self.server_cpu_s * 1e9 / self.bytes.max(1) as f64
    }
}

/// A fresh `tsserver --log none` of one model, with room for `clients` connections.
fn start_server(cfg: &ScaleConfig, flags: &[&str], clients: u32) -> Result<ServerProcess> {
    let mut args: Vec<String> = ["--bind", "127.0.0.1", "--port", "0", "--log", "none"]
        .map(String::from)
        .to_vec();
    args.extend(["--max-clients".to_owned(), clients.max(1024).to_string()]);
    // Thousands of client threads on few cores are scheduled unevenly: one may wait longer
    // than the default 10 s for its first turn after connecting. The measurement is of
    // throughput and memory, not of the server's patience.
    args.extend(["--hello-timeout", "60"].map(String::from));
    args.extend(flags.iter().map(|f| f.to_string()));
    ServerProcess::start(&ServerOptions {
        bin_dir: &cfg.bin_dir,
        wrap: &[],
        args,
        stdout: Sink::Null,
        stderr: None,
    })
}

/// One measurement: `clients` concurrent verified transfers of `data` to a fresh server of
/// `model` (a name and its tsserver flags, from [`MODELS`]), from the event-driven load
/// generator ([`crate::loadgen`]).
fn measure(
    cfg: &ScaleConfig,
    data: &[u8],
    model: (&str, &[&str]),
    clients: u32,
) -> Result<ScaleRow> {
    let (name, flags) = model;
    let server = start_server(cfg, flags, clients)?;
    let base = server.status_kib("VmRSS:")?;
    let cpu0 = server.live_cpu_s()?;
    let gen0 = tsperf_lab::harness::cpu::own_cpu_s();
    let file_name = cfg
        .file
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy());
    let outcome = loadgen::run(&Load {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, server.port)),
        data,
        name: &file_name,
        chunk: cfg.chunk,
        clients,
        threads: cfg.generator_threads,
        timeout: cfg.timeout,
    });
    if let Some(first) = outcome.failures.first() {
        bail!(
            "{} of {} failed against the {name} server; first: {first}",
            outcome.failures.len(),
            tsperf_results::units::count(clients, "client")
        );
    }
    let generator_cpu_s = tsperf_lab::harness::cpu::own_cpu_s() - gen0;
    let peak = server.status_kib("VmHWM:")?;
    Ok(ScaleRow {
        server: name.to_owned(),
        clients,
        bytes: outcome.bytes,
        mib_per_s: tsperf_results::units::mib_per_s(outcome.bytes, outcome.elapsed),
        server_cpu_s: (server.stop_cpu_s()? - cpu0).max(0.0),
        generator_cpu_s,
        base_rss_kib: base,
        peak_rss_kib: peak,
    })
}

fn median_by(rows: &[ScaleRow], key: impl Fn(&ScaleRow) -> f64) -> f64 {
    median(&mut rows.iter().map(key).collect::<Vec<_>>())
}

/// Runs every model at every count, alternating the models within each repetition, and calls
/// `progress` with each row as it is done.
pub fn run(cfg: &ScaleConfig, mut progress: impl FnMut(&ScaleRow)) -> Result<Vec<ScaleRow>> {
    let models: Vec<(&str, &[&str])> = cfg
        .models
        .iter()
        .map(|m| {
            MODELS
                .iter()
                .find(|(name, _)| name == m)
                .copied()
                .ok_or_else(|| {
                    anyhow!("unknown server model '{m}': expected event-loop or blocking")
                })
        })
        .collect::<Result<_>>()?;
    let data = std::fs::read(&cfg.file)
        .with_context(|| format!("cannot read '{}'", cfg.file.display()))?;
    if data.is_empty() {
        bail!(
            "'{}' is empty: every client needs bytes to send",
            cfg.file.display()
        );
    }
    let mut rows = Vec::new();
    for &clients in &cfg.counts {
        let mut samples: Vec<Vec<ScaleRow>> = vec![Vec::new(); models.len()];
        for _ in 0..cfg.reps.max(1) {
            for (i, model) in models.iter().enumerate() {
                if model.0 == "blocking" && clients > BLOCKING_MAX {
                    continue;
                }
                samples[i].push(measure(cfg, &data, *model, clients)?);
            }
        }
        for s in samples.into_iter().filter(|s| !s.is_empty()) {
            let row = ScaleRow {
                server: s[0].server.clone(),
                clients,
                bytes: s[0].bytes,
                mib_per_s: median_by(&s, |r| r.mib_per_s),
                server_cpu_s: median_by(&s, |r| r.server_cpu_s),
                generator_cpu_s: median_by(&s, |r| r.generator_cpu_s),
                base_rss_kib: median_by(&s, |r| r.base_rss_kib as f64) as u64,
                peak_rss_kib: median_by(&s, |r| r.peak_rss_kib as f64) as u64,
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The two bars for one model: throughput at the largest count against the best, and
/// RSS growth per connection at the largest count.
pub fn bars(rows: &[ScaleRow], model: &str) -> Option<(f64, f64)> {
    let mine: Vec<&ScaleRow> = rows.iter().filter(|r| r.server == model).collect();
    let best = mine.iter().map(|r| r.mib_per_s).fold(0.0, f64::max);
    let last = mine.iter().max_by_key(|r| r.clients)?;
    Some((
        last.mib_per_s / best.max(f64::MIN_POSITIVE),
        last.growth_per_conn_kib(),
    ))
}

/// What `scale.md`, `scale.json` and `scale.svg` render.
pub struct ScaleReport {
    /// One row per server model and client count.
    pub rows: Vec<ScaleRow>,
    /// The file every client sent.
    pub file: PathBuf,
    /// Its length in bytes.
    pub file_len: u64,
    /// Bytes per write.
    pub chunk: u32,
    /// Repetitions of each count.
    pub reps: u32,
    /// The load generator's threads.
    pub generator_threads: u32,
    /// The machine they ran on.
    pub machine: tsperf_results::machine::Machine,
}

/// `scale.md`: the table and the bars.
pub struct ScaleMarkdown;

impl Exporter<ScaleReport> for ScaleMarkdown {
    fn file_name(&self) -> &'static str {
        "scale.md"
    }

    fn serialize(&self, r: &ScaleReport) -> Result<Vec<u8>> {
        Ok(markdown(r).into_bytes())
    }
}

/// `scale.json`: the rows.
pub struct ScaleJson;

impl Exporter<ScaleReport> for ScaleJson {
    fn file_name(&self) -> &'static str {
        "scale.json"
    }

    fn serialize(&self, r: &ScaleReport) -> Result<Vec<u8>> {
        Ok((serde_json::to_string_pretty(&r.rows)? + "\n").into_bytes())
    }
}

/// `scale.svg`: aggregate throughput against the client count.
pub struct ScaleSvg;

impl Exporter<ScaleReport> for ScaleSvg {
    fn file_name(&self) -> &'static str {
        "scale.svg"
    }

    fn serialize(&self, r: &ScaleReport) -> Result<Vec<u8>> {
        svg(&r.rows)
    }
}

/// The scale runs' exporters, in the order the files are written.
pub fn exporters() -> Vec<Box<dyn Exporter<ScaleReport>>> {
    vec![
        Box::new(ScaleMarkdown),
        Box::new(ScaleJson),
        Box::new(ScaleSvg),
    ]
}

/// The text of `scale.md`.
fn markdown(r: &ScaleReport) -> String {
    let (rows, m) = (&r.rows, &r.machine);
    let mut o = String::from("# Many clients at once\n\n");
    let _ = writeln!(
        o,
        "Loopback on {m}. Each client sends `{}` ({}) in \
         {}-byte writes, every transfer verified; a fresh `tsserver --log none` per \
         measurement; median of {} (models alternating). The clients are connections of an \
         event-driven load generator ({}, each one `poll` for its share of the connections; \
         `tsscale --generator-threads`), each connection sending through the stream engine's \
         sender, as tsclient does: every connection is opened and accepted first, then all \
         send at once. Aggregate = all bytes / (that start → the last verified report). \
         Load generator CPU: this process's `getrusage` over the measurement. Server CPU: the kernel's account when the server is reaped \
         (`wait4`, microseconds, every thread) less its live threads' `schedstat` once \
         listening; RSS from /proc/PID/status: the baseline is VmRSS once listening, the peak \
         VmHWM. The server asks for no socket buffers of its own (no --rcvbuf), so its RSS is \
         all it adds beyond the kernel's socket buffers. The blocking server (a thread per \
         connection) is measured to {BLOCKING_MAX} clients, the event loop beyond.\n",
        r.file.display(),
        tsperf_results::units::size(r.file_len),
        r.chunk,
        r.reps,
        tsperf_results::units::count(r.generator_threads, "thread"),
    );
    let _ = writeln!(
        o,
        "| server | clients | aggregate MiB/s | Gbit/s | server CPU ms | CPU ns per byte | load generator CPU s | baseline RSS MiB | peak RSS MiB | growth per connection KiB |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {:.1} | {:.2} | {:.1} | {:.3} | {:.2} | {:.1} | {:.1} | {:.1} |",
            r.server,
            r.clients,
            r.mib_per_s,
            r.mib_per_s * 1024.0 * 1024.0 * 8.0 / 1e9,
            r.server_cpu_s * 1e3,
            r.cpu_ns_per_byte(),
            r.generator_cpu_s,
            r.base_rss_kib as f64 / 1024.0,
            r.peak_rss_kib as f64 / 1024.0,
            r.growth_per_conn_kib()
        );
    }
    let _ = writeln!(o);
    for (model, _) in MODELS {
        if let Some((ratio, growth)) = bars(rows, model) {
            let top = rows
                .iter()
                .filter(|r| r.server == model)
                .map(|r| r.clients)
                .max()
                .unwrap_or(0);
            let _ = writeln!(
                o,
                "- {model}: at {top} clients {ratio:.2}× its best aggregate; peak RSS grew {growth:.1} KiB per connection."
            );
        }
    }
    o
}

/// `scale.svg`: aggregate throughput against the client count (log 2 axis), one line per model.
fn svg(rows: &[ScaleRow]) -> Result<Vec<u8>> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Debug| anyhow!("cannot draw the chart: {e:?}");
    let max_clients = rows.iter().map(|r| r.clients).max().unwrap_or(1).max(2);
    let top = rows.iter().map(|r| r.mib_per_s).fold(1.0, f64::max) * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Aggregate throughput vs concurrent clients (MiB/s)",
                ("sans-serif", 22),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((1u32..max_clients).log_scale(), 0f64..top)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("clients")
            .y_desc("MiB/s")
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (model, _)) in MODELS.iter().enumerate() {
            let pts: Vec<(u32, f64)> = rows
                .iter()
                .filter(|r| r.server == *model)
                .map(|r| (r.clients, r.mib_per_s))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(*model)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, clients: u32, mib: f64, peak: u64) -> ScaleRow {
        ScaleRow {
            server: server.into(),
            clients,
            bytes: clients as u64 * (4 << 20),
            mib_per_s: mib,
            server_cpu_s: 0.5,
            generator_cpu_s: 1.0,
            base_rss_kib: 2048,
            peak_rss_kib: peak,
        }
    }

    /// The bars compare the largest count with the best, and divide RSS growth by connections.
    #[test]
    fn bars_and_chart() {
        let rows = vec![
            row("event-loop", 1, 800.0, 2400),
            row("event-loop", 4, 1000.0, 2600),
            row("event-loop", 256, 900.0, 2048 + 256 * 10),
            row("blocking", 1, 700.0, 3000),
        ];
        let (ratio, growth) = bars(&rows, "event-loop").unwrap();
        assert!((ratio - 0.9).abs() < 1e-9, "{ratio}");
        assert!((growth - 10.0).abs() < 1e-9, "{growth}");
        assert!(bars(&rows, "nothing").is_none());
        let labels = tsperf_lab::report::svg::texts(&svg(&rows).unwrap());
        let has = |t: &str| labels.iter().any(|l| l == t);
        assert!(has("event-loop") && has("blocking"), "{labels:?}");
    }
}
