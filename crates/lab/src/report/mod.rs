//! Turning raw grid runs into tables and charts.
//!
//! The grid writes every repetition's full client JSON as one line of `runs.jsonl` (a [`Run`]),
//! with the cell it belongs to. [`aggregate`] groups runs into rows (medians, min, max), and one
//! [`Exporter`] per format renders the [`Matrix`]: Markdown, CSV, and SVG charts. Rendering is
//! pure: the same runs give the same bytes.

pub mod csv;
pub mod markdown;
mod summary;
pub use summary::summary;
mod seed;
pub mod svg;

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

pub use tsperf_results::stats::median;

pub use crate::folder::{read_runs, write_atomic};
pub use tsperf_results::runs::{Cell, Run, Setup};

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

/// A row of the other stream dimensions: parallel streams, or the server sending.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRow {
    /// Streams in the session (`tsclient -P`).
    pub streams: u32,
    /// The server sent (`tsclient -R`): `row.log` is then the client's sink, `row.sndbuf` the
    /// server's, `row.rcvbuf` the client's.
    pub reverse: bool,
    /// The repetitions summarised as a stream row (a session's rate is its SUM).
    #[serde(flatten)]
    pub row: StreamRow,
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
    /// The fastest and slowest repetition's p50, µs: the spread between runs.
    pub p50_range_us: (f64, f64),
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
    /// The rows of the other stream dimensions (`--streams`, `--reverse`), in grid order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionRow>,
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

/// A rendering of a report in one format: the grid's [`Matrix`] by default, and the same for
/// the reports of `tsperf-bench` (the peers', the scale runs').
pub trait Exporter<T: ?Sized = Matrix> {
    /// The file name it writes under the output directory.
    fn file_name(&self) -> &'static str;
    /// The file's bytes, for the report `m`.
    fn serialize(&self, m: &T) -> Result<Vec<u8>>;
}

/// Every exporter of the grid, in the order the files are written.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(markdown::Markdown),
        Box::new(csv::Csv),
        Box::new(svg::ThroughputSvg),
        Box::new(svg::LatencySvg),
        Box::new(svg::TimelineSvg),
        Box::new(SetupJson),
    ]
}

/// `setup.json`: what every row of the grid shares.
pub struct SetupJson;

impl Exporter for SetupJson {
    fn file_name(&self) -> &'static str {
        "setup.json"
    }

    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        Ok(serde_json::to_string_pretty(&m.setup)?.into_bytes())
    }
}

mod aggregate;
mod rep;
mod sessions;
pub use rep::logged_to;

pub use aggregate::{aggregate, most_common};

/// Writes every file of the grid's report into `dir`, each atomically.
pub fn export_all(m: &Matrix, dir: &Path) -> Result<()> {
    export(m, &exporters(), dir)
}

/// Writes each exporter's file for `report` into `dir`, each atomically (temporary name, then
/// rename): the grid and `tsperf-bench`'s reports are all written this way.
pub fn export<T: ?Sized>(report: &T, exporters: &[Box<dyn Exporter<T>>], dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    for e in exporters {
        let bytes = e
            .serialize(report)
            .with_context(|| format!("cannot render {}", e.file_name()))?;
        write_atomic(&dir.join(e.file_name()), &bytes)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod fixture;
#[cfg(any(test, feature = "testing"))]
pub mod hostile;

#[cfg(test)]
mod tests {
    use super::*;
    use tsperf_results::json::ClientJson;

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
}
