//! Turning raw grid runs into tables and charts.
//!
//! The grid writes every repetition's full client JSON as one line of `runs.jsonl` (a [`Run`]),
//! with the cell it belongs to. [`aggregate`] groups runs into rows (medians, min, max), and one
//! [`Exporter`] per format renders the [`Matrix`]: Markdown, CSV, and SVG charts. Rendering is
//! pure: the same runs give the same bytes.

pub mod csv;
pub mod markdown;
pub mod svg;

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use tsperf_results::json::{ClientJson, LatencyJson, StreamJson};
pub use tsperf_results::stats::median;

pub use tsperf_results::runs::{Cell, Run, Setup, read_runs};

/// A stream row: one cell's repetitions summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamRow {
    /// The cell's chunk size.
    pub chunk: u32,
    /// The cell's client I/O, with its strategy when it is not `write`.
    pub io: String,
    /// The server's log sink.
    pub log: String,
    /// The median rate of the repetitions, MiB/s.
    pub median_mib_s: f64,
    /// The slowest repetition's rate.
    pub min_mib_s: f64,
    /// The fastest repetition's rate.
    pub max_mib_s: f64,
    /// The median rate in Gbit/s.
    pub median_gbit_s: f64,
    /// The median CPU time of the client, seconds.
    pub client_cpu_s: f64,
    /// Repetitions measured.
    pub reps: usize,
    /// True when every repetition was verified.
    pub verified: bool,
    /// The send buffer the client's socket got.
    pub sndbuf: u64,
    /// The receive buffer the server's socket got.
    pub rcvbuf: u64,
    /// The verdict most repetitions gave (`None` for results from before verdicts), and how
    /// many of the repetitions gave it.
    pub limited_by: Option<String>,
    /// How many repetitions gave the majority verdict.
    pub limited_by_reps: usize,
    /// The phase the server spent most of its time in, in most repetitions, and its median
    /// share over those (`None` before the time split).
    pub server_largest: Option<String>,
    /// The median share of the server's largest phase, in %.
    pub server_largest_pct: Option<f64>,
}

/// A latency row: one cell's repetitions summarised (medians of each statistic).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// The cell's codec.
    pub codec: String,
    /// The cell's framing.
    pub framing: String,
    /// TCP_NODELAY on both ends.
    pub nodelay: bool,
    /// A new connection for every query.
    pub reconnect: bool,
    /// Queries counted.
    pub count: u64,
    /// The median round trip, µs.
    pub p50_us: f64,
    /// The 99th percentile, µs.
    pub p99_us: f64,
    /// Repetitions measured.
    pub reps: usize,
    /// The client's hint, when it gave one.
    pub hint: bool,
    /// Under load: the stream's server log sink; `p50_us` and `p99_us` are then the loaded
    /// figures, these the idle ones, and `stream_limited_by` the stream's verdict.
    pub under_load: Option<String>,
    /// Under load: the idle median beside it, µs.
    pub idle_p50_us: Option<f64>,
    /// Under load: the idle 99th percentile, µs.
    pub idle_p99_us: Option<f64>,
    /// Under load: the stream's verdict.
    pub stream_limited_by: Option<String>,
}

/// Everything the exporters render.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// What every row shares.
    pub setup: Setup,
    /// The stream rows, in grid order.
    pub stream: Vec<StreamRow>,
    /// The latency rows, in grid order.
    pub latency: Vec<LatencyRow>,
    /// The clock offsets the stream transfers measured, when they did (protocol version 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSummary>,
    /// Throughput over time of the smallest and largest chunk, per log sink and client io
    /// (from the runs' `intervals`; empty for results without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Timeline>,
}

/// One transfer's throughput over time: the repetition whose rate was the cell's median.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// The panel's log sink.
    pub log: String,
    /// The panel's chunk size.
    pub chunk: u32,
    /// The client I/O of this line.
    pub io: String,
    /// `(start_s, end_s, MiB/s)` per interval: the rate the receiver acknowledged, where the
    /// kernel said (exact in time), else the rate handed to the socket.
    pub points: Vec<(f64, f64, f64)>,
}

/// The timelines of the smallest and largest chunk's cells that have intervals.
fn timelines(runs: &[Run]) -> Vec<Timeline> {
    let sampled = |r: &&Run| matches!(&r.result, ClientJson::Stream(s) if !s.intervals.is_empty());
    let chunks: Vec<u32> = runs
        .iter()
        .filter(sampled)
        .filter_map(|r| match &r.cell {
            Cell::Stream { chunk, .. } => Some(*chunk),
            Cell::Latency { .. } => None,
        })
        .collect();
    let (Some(&lo), Some(&hi)) = (chunks.iter().min(), chunks.iter().max()) else {
        return Vec::new();
    };
    let mut cells: Vec<&Cell> = Vec::new();
    for r in runs.iter().filter(sampled) {
        if matches!(&r.cell, Cell::Stream { chunk, .. } if *chunk == lo || *chunk == hi)
            && !cells.contains(&&r.cell)
        {
            cells.push(&r.cell);
        }
    }
    cells
        .into_iter()
        .filter_map(|cell| {
            let Cell::Stream { chunk, io, log } = cell else {
                return None;
            };
            let mut reps: Vec<&StreamJson> = runs
                .iter()
                .filter(|r| &r.cell == cell)
                .filter_map(|r| match &r.result {
                    ClientJson::Stream(s) if !s.intervals.is_empty() => Some(s),
                    _ => None,
                })
                .collect();
            reps.sort_by(|a, b| a.mib_per_s.total_cmp(&b.mib_per_s));
            let s = reps.get(reps.len() / 2)?;
            Some(Timeline {
                log: log.clone(),
                chunk: *chunk,
                io: io.clone(),
                points: s
                    .intervals
                    .iter()
                    .map(|i| (i.start_s, i.end_s, i.acked_mib_per_s.unwrap_or(i.mib_per_s)))
                    .collect(),
            })
        })
        .collect()
}

/// The server's clock against the client's, over the grid's stream transfers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockSummary {
    /// Transfers that measured an offset.
    pub transfers: usize,
    /// The median clock offset over the transfers, µs.
    pub median_offset_us: f64,
    /// The smallest offset, µs.
    pub min_offset_us: f64,
    /// The largest offset, µs.
    pub max_offset_us: f64,
    /// The median error bound, µs.
    pub median_err_us: f64,
    /// The largest error bound, µs.
    pub max_err_us: f64,
}

/// The offsets of the stream runs that measured one; `None` if none did.
fn clock_summary(runs: &[Run]) -> Option<ClockSummary> {
    let (mut offsets, mut errs): (Vec<f64>, Vec<f64>) = runs
        .iter()
        .filter_map(|r| match &r.result {
            ClientJson::Stream(s) => s.clock.offset_us.zip(s.clock.offset_err_us),
            ClientJson::Latency(_) => None,
        })
        .unzip();
    if offsets.is_empty() {
        return None;
    }
    let (min_offset_us, max_offset_us) = tsperf_results::stats::min_max(&offsets);
    let (_, max_err_us) = tsperf_results::stats::min_max(&errs);
    Some(ClockSummary {
        transfers: offsets.len(),
        median_offset_us: median(&mut offsets),
        min_offset_us,
        max_offset_us,
        median_err_us: median(&mut errs),
        max_err_us,
    })
}

impl Matrix {
    /// The slowest stream median (for speed-ups); 0 if there are no stream rows.
    pub fn slowest_stream(&self) -> f64 {
        self.stream
            .iter()
            .map(|r| r.median_mib_s)
            .reduce(f64::min)
            .unwrap_or(0.0)
    }

    /// The slowest latency p50 (for speed-ups).
    pub fn slowest_latency(&self) -> f64 {
        self.latency.iter().map(|r| r.p50_us).fold(0.0, f64::max)
    }
}

/// A rendering of the matrix in one format.
pub trait Exporter {
    /// The file name it writes under the output directory.
    fn file_name(&self) -> &'static str;
    /// The file's bytes, for the matrix `m`.
    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>>;
}

/// Every exporter, in the order the files are written.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(markdown::Markdown),
        Box::new(csv::Csv),
        Box::new(svg::ThroughputSvg),
        Box::new(svg::LatencySvg),
        Box::new(svg::TimelineSvg),
    ]
}

/// Groups runs by cell, in the order cells first appear, and summarises each.
pub fn aggregate(setup: Setup, runs: &[Run]) -> Matrix {
    let mut cells: Vec<&Cell> = Vec::new();
    for r in runs {
        if !cells.contains(&&r.cell) {
            cells.push(&r.cell);
        }
    }
    let mut stream = Vec::new();
    let mut latency = Vec::new();
    for cell in cells {
        let of_cell = runs.iter().filter(|r| &r.cell == cell).map(|r| &r.result);
        match cell {
            Cell::Stream { chunk, io, log } => {
                let reps: Vec<&StreamJson> = of_cell
                    .filter_map(|r| match r {
                        ClientJson::Stream(s) => Some(s),
                        ClientJson::Latency(_) => None,
                    })
                    .collect();
                stream.push(stream_row(*chunk, io, log, &reps));
            }
            Cell::Latency {
                codec,
                framing,
                nodelay,
                reconnect,
                count,
                under_load,
            } => {
                let reps: Vec<&LatencyJson> = of_cell
                    .filter_map(|r| match r {
                        ClientJson::Latency(l) => Some(l),
                        ClientJson::Stream(_) => None,
                    })
                    .collect();
                let idle = |f: fn(&tsperf_results::json::Rtt) -> f64| {
                    median(
                        &mut reps
                            .iter()
                            .map(|l| l.rtt_us.as_ref().map_or(0.0, f))
                            .collect::<Vec<_>>(),
                    )
                };
                let loaded = |f: fn(&tsperf_results::json::Rtt) -> f64| {
                    median(
                        &mut reps
                            .iter()
                            .map(|l| {
                                l.under_load
                                    .as_ref()
                                    .and_then(|u| u.rtt_us.as_ref())
                                    .map_or(0.0, f)
                            })
                            .collect::<Vec<_>>(),
                    )
                };
                let p = |f| {
                    if under_load.is_some() {
                        loaded(f)
                    } else {
                        idle(f)
                    }
                };
                latency.push(LatencyRow {
                    codec: codec.clone(),
                    framing: framing.clone(),
                    nodelay: *nodelay,
                    reconnect: *reconnect,
                    // Under load, the queries answered while the stream ran (it may end first).
                    count: match under_load {
                        Some(_) => median(
                            &mut reps
                                .iter()
                                .map(|l| l.under_load.as_ref().map_or(0, |u| u.count) as f64)
                                .collect::<Vec<_>>(),
                        ) as u64,
                        None => *count,
                    },
                    p50_us: p(|r| r.p50),
                    p99_us: p(|r| r.p99),
                    reps: reps.len(),
                    hint: reps.iter().any(|l| l.hint.is_some()),
                    under_load: under_load.clone(),
                    idle_p50_us: under_load.is_some().then(|| idle(|r| r.p50)),
                    idle_p99_us: under_load.is_some().then(|| idle(|r| r.p99)),
                    stream_limited_by: most_common(reps.iter().filter_map(|l| {
                        l.under_load
                            .as_ref()
                            .and_then(|u| u.stream_limited_by)
                            .map(|v| v.to_string())
                    })),
                });
            }
        }
    }
    Matrix {
        setup,
        stream,
        latency,
        clock: clock_summary(runs),
        timeline: timelines(runs),
    }
}

/// One stream cell's repetitions summarised.
fn stream_row(chunk: u32, io: &str, log: &str, reps: &[&StreamJson]) -> StreamRow {
    let of = |f: fn(&StreamJson) -> f64| -> Vec<f64> { reps.iter().map(|s| f(s)).collect() };
    let mut mib = of(|s| s.mib_per_s);
    let (min, max) = tsperf_results::stats::min_max(&mib);
    let limited_by = most_common(
        reps.iter()
            .filter_map(|s| s.limited_by.map(|l| l.to_string())),
    );
    let largest = most_common(
        reps.iter()
            .filter_map(|s| s.server.time_split.largest.clone()),
    );
    StreamRow {
        chunk,
        io: io.to_owned(),
        log: log.to_owned(),
        median_mib_s: median(&mut mib),
        min_mib_s: min,
        max_mib_s: max,
        median_gbit_s: median(&mut of(|s| s.gbit_per_s)),
        client_cpu_s: median(&mut of(|s| s.cpu.user_s + s.cpu.sys_s)),
        reps: reps.len(),
        verified: reps.iter().all(|s| s.verified),
        sndbuf: median(&mut of(|s| s.client.sndbuf as f64)) as u64,
        rcvbuf: median(&mut of(|s| s.server.rcvbuf as f64)) as u64,
        limited_by: limited_by.clone(),
        limited_by_reps: reps
            .iter()
            .filter(|s| s.limited_by.map(|l| l.to_string()) == limited_by && limited_by.is_some())
            .count(),
        server_largest_pct: largest.as_ref().map(|top| {
            median(
                &mut reps
                    .iter()
                    .filter(|s| s.server.time_split.largest.as_ref() == Some(top))
                    .filter_map(|s| s.server.time_split.largest_pct)
                    .collect::<Vec<_>>(),
            )
        }),
        server_largest: largest,
    }
}

/// The value most often seen (the first of those tied), if any.
pub fn most_common<T: PartialEq>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(k, _)| *k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let top = counts.iter().map(|(_, n)| *n).max()?;
    counts.into_iter().find(|(_, n)| *n == top).map(|(k, _)| k)
}

/// Writes every exporter's file into `dir`, each atomically (temporary name, then rename).
pub fn export_all(m: &Matrix, dir: &Path) -> Result<()> {
    for e in exporters() {
        let bytes = e
            .serialize(m)
            .with_context(|| format!("cannot render {}", e.file_name()))?;
        write_atomic(&dir.join(e.file_name()), &bytes)?;
    }
    write_atomic(
        &dir.join("setup.json"),
        serde_json::to_string_pretty(&m.setup)?.as_bytes(),
    )
}

/// Writes `bytes` to `path` through a temporary file in the same directory, so a reader never
/// sees half a file. The file gets the mode any new file gets (0666 less the umask).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in '{}'", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write '{}'", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot write '{}'", path.display()))?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A fixed matrix input for the exporters' snapshot tests.
    use super::*;
    use tsperf_results::intervals::Interval;
    use tsperf_results::json::{Cpu, Rtt, UnderLoadJson};
    use tsperf_results::machine::Machine;
    use tsperf_results::verdict::LimitedBy;

    pub(crate) fn runs() -> Vec<Run> {
        let mut runs = Vec::new();
        for (chunk, base) in [(102u32, 80.0), (10240, 900.0)] {
            for (io, f) in [("blocking", 1.0), ("nonblocking", 0.95)] {
                for (log, g) in [("none", 1.0), ("stdout", 0.1)] {
                    for rep in 1..=3 {
                        let mib = base * f * g + rep as f64;
                        let mut s = StreamJson {
                            mib_per_s: mib,
                            gbit_per_s: mib * 0.008388608,
                            verified: true,
                            cpu: Cpu {
                                user_s: 0.01,
                                sys_s: 0.1,
                            },
                            ..Default::default()
                        };
                        s.client.sndbuf = 2626560;
                        s.server.rcvbuf = 131072;
                        // Stdout cells are the receiver's doing; one 102-byte none rep is
                        // called another way than the others.
                        s.limited_by = Some(match (log, chunk, rep) {
                            ("stdout", ..) => LimitedBy::Receiver,
                            (_, 102, 3) => LimitedBy::Network,
                            _ => LimitedBy::SenderCpu,
                        });
                        s.server.time_split.largest =
                            Some(if log == "stdout" { "log" } else { "wait" }.into());
                        s.server.time_split.largest_pct = Some(90.0 + rep as f64);
                        if rep == 2 {
                            let secs = if log == "stdout" { 2.0 } else { 0.2 };
                            s.intervals = (0..4)
                                .map(|i| Interval {
                                    start_s: secs * i as f64 / 4.0,
                                    end_s: secs * (i + 1) as f64 / 4.0,
                                    mib_per_s: if i == 2 { mib / 4.0 } else { mib },
                                    ..Interval::default()
                                })
                                .collect();
                        }
                        runs.push(Run {
                            cell: Cell::Stream {
                                chunk,
                                io: io.into(),
                                log: log.into(),
                            },
                            rep,
                            result: ClientJson::Stream(s),
                        });
                    }
                }
            }
        }
        for (framing, nodelay, p50) in [("single", true, 110.0), ("split", false, 88000.0)] {
            runs.push(Run {
                cell: Cell::Latency {
                    codec: "binary".into(),
                    framing: framing.into(),
                    nodelay,
                    reconnect: false,
                    count: 20,
                    under_load: None,
                },
                rep: 1,
                result: ClientJson::Latency(LatencyJson {
                    rtt_us: Some(Rtt {
                        p50,
                        p99: p50 * 1.5,
                        ..Default::default()
                    }),
                    hint: (!nodelay).then(|| "Nagle".to_owned()),
                    ..Default::default()
                }),
            });
        }
        runs.push(Run {
            cell: Cell::Latency {
                codec: "binary".into(),
                framing: "single".into(),
                nodelay: true,
                reconnect: false,
                count: 20,
                under_load: Some("stdout".into()),
            },
            rep: 1,
            result: ClientJson::Latency(LatencyJson {
                rtt_us: Some(Rtt {
                    p50: 100.0,
                    p99: 150.0,
                    ..Default::default()
                }),
                under_load: Some(UnderLoadJson {
                    count: 17,
                    rtt_us: Some(Rtt {
                        p50: 400.0,
                        p99: 2000.0,
                        ..Default::default()
                    }),
                    stream_limited_by: Some(LimitedBy::Receiver),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        });
        runs
    }

    pub(crate) fn matrix() -> Matrix {
        let setup = Setup {
            machine: Machine {
                cpu: "Test CPU".into(),
                cores: 2,
                kernel: "6.1.0".into(),
                os: "Debian GNU/Linux 12 (bookworm)".into(),
                tsperf: "0.1.0".into(),
                commit: "0123abc".into(),
                tcp_rmem: "4096 131072 6291456".into(),
                tcp_wmem: "4096 16384 4194304".into(),
                rmem_max: "212992".into(),
                wmem_max: "212992".into(),
                congestion_control: "cubic".into(),
            },
            file: "tsl.txt".into(),
            bytes: 37748736,
            digest: "ec40a45bcc9c239d".into(),
            server_stdout: None,
            reps: 3,
            network: "loopback".into(),
            stdout_to: "a pty read by tmux".into(),
            date: "2026-11-29T00:00:00Z".into(),
            line_gbit: None,
        };
        aggregate(setup, &runs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows come out in grid order with medians, extremes and verification summarised.
    #[test]
    fn aggregation() {
        let m = fixture::matrix();
        assert_eq!(m.stream.len(), 8);
        let r = &m.stream[0];
        assert_eq!(
            (r.chunk, r.io.as_str(), r.log.as_str()),
            (102, "blocking", "none")
        );
        assert_eq!(
            (r.min_mib_s, r.median_mib_s, r.max_mib_s),
            (81.0, 82.0, 83.0)
        );
        assert!(r.verified && r.reps == 3);
        assert_eq!(
            (r.limited_by.as_deref(), r.limited_by_reps),
            (Some("sender-cpu"), 2)
        );
        assert_eq!(
            (r.server_largest.as_deref(), r.server_largest_pct),
            (Some("wait"), Some(92.0))
        );
        assert_eq!(m.stream[1].limited_by.as_deref(), Some("receiver"));
        assert_eq!(m.latency.len(), 3);
        assert!(m.latency[1].hint && !m.latency[0].hint);
        assert_eq!(m.slowest_latency(), 88000.0);
        let loaded = &m.latency[2];
        assert_eq!(loaded.under_load.as_deref(), Some("stdout"));
        assert_eq!((loaded.p50_us, loaded.idle_p50_us), (400.0, Some(100.0)));
        assert_eq!(loaded.count, 17, "the queries answered under load");
        assert_eq!(loaded.stream_limited_by.as_deref(), Some("receiver"));
    }

    /// The timeline keeps the smallest and largest chunk's cells, each from its median
    /// repetition.
    #[test]
    fn timeline_of_the_extreme_chunks() {
        let m = fixture::matrix();
        assert_eq!(m.timeline.len(), 8);
        let t = &m.timeline[0];
        assert_eq!(
            (t.chunk, t.io.as_str(), t.log.as_str()),
            (102, "blocking", "none")
        );
        assert_eq!(t.points.len(), 4);
        assert_eq!((t.points[2].0, t.points[2].2), (0.1, 82.0 / 4.0));
    }

    /// One unverified repetition marks the whole cell unverified.
    #[test]
    fn one_bad_rep_taints_the_cell() {
        let mut runs = fixture::runs();
        if let ClientJson::Stream(s) = &mut runs[1].result {
            s.verified = false;
        }
        let m = aggregate(Setup::default(), &runs);
        assert!(!m.stream[0].verified);
        assert!(m.stream[1].verified);
    }

    /// Issue 15: results files get the mode any new file gets (0666 less the umask), not the
    /// temporary file's 0600, so a shared results directory stays readable.
    #[test]
    fn results_files_follow_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let umask = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("matrix.md");
        write_atomic(&path, b"table\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask, "mode {mode:o} with umask {umask:o}");
        assert_eq!(std::fs::read(&path).unwrap(), b"table\n");
    }

    /// Runs round-trip through their JSON-lines form.
    #[test]
    fn runs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let text: String = fixture::runs()
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        let back = read_runs(&path).unwrap();
        assert_eq!(back.len(), fixture::runs().len());
        assert_eq!(back[0].cell, fixture::runs()[0].cell);
        std::fs::write(&path, "{not json\n").unwrap();
        let e = format!("{:#}", read_runs(&path).unwrap_err());
        assert!(e.contains("line 1: not a grid run"), "{e}");
    }
}
