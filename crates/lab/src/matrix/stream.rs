//! The stream grid: chunk × client column × log sink, for each direction and stream count.

use std::path::Path;

use anyhow::Result;
use indicatif::ProgressBar;

use super::cells::{self, REVERSE_SINKS, StreamCell, Target};
use super::{GridConfig, Recorder, SINKS};
use crate::report::{Run, logged_to};
use tsperf_proto::LogMode;
use tsperf_results::json::ClientJson;
use tsperf_results::strategy::{ClientIo, Strategy};

/// The directions and stream counts the grid runs, in order: forward for every count, then
/// (with `--reverse`) reverse for every count. The default is the seed's: forward, one stream.
fn dimensions(cfg: &GridConfig) -> Vec<(bool, u32)> {
    let counts = if cfg.streams.is_empty() {
        &[1][..]
    } else {
        &cfg.streams[..]
    };
    let directions: &[bool] = if cfg.reverse {
        &[false, true]
    } else {
        &[false]
    };
    directions
        .iter()
        .flat_map(|&r| counts.iter().map(move |&n| (r, n)))
        .collect()
}

/// The log sinks a direction alternates: the server's forward, the client's in reverse.
fn sinks(reverse: bool) -> &'static [LogMode] {
    if reverse { &REVERSE_SINKS } else { &SINKS }
}

/// How many runs the stream grid makes, for the progress bar.
pub(super) fn runs(cfg: &GridConfig, columns: usize) -> usize {
    dimensions(cfg)
        .iter()
        .map(|&(r, _)| {
            let columns = if r {
                cells::client_columns(&[]).len()
            } else {
                columns
            };
            cfg.chunks.len() * columns * sinks(r).len() * cfg.reps as usize
        })
        .sum()
}

/// Every stream cell: per direction, stream count, chunk and client column, the log sinks
/// alternate within each repetition, so drift hits every sink alike; the tables are written
/// after each column.
pub(super) fn grid(
    rec: &mut Recorder,
    port: u16,
    columns: &[(ClientIo, Strategy)],
    bar: &ProgressBar,
    tmp: &Path,
) -> Result<()> {
    let cfg = rec.cfg;
    let target = Target {
        file: cfg.file.display().to_string(),
        bytes: std::fs::metadata(&cfg.file)?.len(),
        client_log_file: tmp.join("client-file.log").display().to_string(),
    };
    for (reverse, streams) in dimensions(cfg) {
        for &chunk in &cfg.chunks {
            // A reverse cell's writes are the server's: the client strategies do not apply.
            let plain = cells::client_columns(&[]);
            for &(io, strategy) in if reverse { &plain[..] } else { columns } {
                // One forward stream of the smallest and largest chunk is sampled in time,
                // for the timeline.
                let extreme = cfg.chunks.iter().min() == Some(&chunk)
                    || cfg.chunks.iter().max() == Some(&chunk);
                let timeline = extreme && streams == 1 && !reverse;
                let cells: Vec<StreamCell> = sinks(reverse)
                    .iter()
                    .map(|&log| StreamCell {
                        chunk,
                        io,
                        strategy,
                        log,
                        interval_us: timeline.then(|| cells::timeline_interval_us(None)),
                        streams,
                        reverse,
                    })
                    .collect();
                column(rec, port, &cells, &target, bar)?;
            }
        }
    }
    Ok(())
}

/// One client column's cells, every repetition, then its rows printed.
fn column(
    rec: &mut Recorder,
    port: u16,
    cells: &[StreamCell],
    target: &Target,
    bar: &ProgressBar,
) -> Result<()> {
    let cfg = rec.cfg;
    let first = cells[0];
    let label = first.label();
    let dims = match (first.reverse, first.streams) {
        (false, 1) => String::new(),
        (false, n) => format!(" -P {n}"),
        (true, 1) => " reverse".to_owned(),
        (true, n) => format!(" reverse -P {n}"),
    };
    // Each cell's last duration: a sampled cell's next timeline interval follows it.
    let mut expected: Vec<Option<f64>> = vec![None; cells.len()];
    for rep in 1..=cfg.reps {
        for (cell, expected) in cells.iter().zip(&mut expected) {
            let cell = &StreamCell {
                interval_us: cell
                    .interval_us
                    .map(|_| cells::timeline_interval_us(*expected)),
                ..*cell
            };
            bar.set_message(format!(
                "stream{dims} chunk {} {label} log {} rep {rep}/{}",
                cell.chunk, cell.log, cfg.reps
            ));
            let mut args = cell.args(target);
            if let Some(t) = cfg.time {
                args.extend(["--time".to_owned(), t.to_string()]);
            }
            let result = rec.measure(port, &args)?;
            if let ClientJson::Stream(s) = &result {
                *expected = Some(s.elapsed_s);
            }
            let reported = logged_to(&result, cell.reverse);
            anyhow::ensure!(
                reported == Some(cell.log.to_string()),
                "the {} logged to {} when {} {} was asked for",
                if cell.reverse { "client" } else { "server" },
                reported.as_deref().unwrap_or("?"),
                if cell.reverse {
                    "--log"
                } else {
                    "--server-log"
                },
                cell.log
            );
            rec.record(Run {
                cell: cell.cell(),
                rep,
                result,
            })?;
            bar.inc(1);
        }
    }
    print_rows(&rec.export()?, &first, &label, &dims, bar);
    Ok(())
}

/// The rows of a column just measured, printed above the progress bar.
fn print_rows(
    m: &crate::report::Matrix,
    first: &StreamCell,
    label: &str,
    dims: &str,
    bar: &ProgressBar,
) {
    let rows = m.stream.iter().filter(|_| dims.is_empty()).chain(
        m.sessions
            .iter()
            .filter(|s| s.streams == first.streams && s.reverse == first.reverse)
            .map(|s| &s.row),
    );
    for row in rows.filter(|r| r.chunk == first.chunk && r.io == label) {
        bar.suspend(|| {
            println!(
                "stream{dims}  chunk {:>5}  {:<20}  log {:<6}  median {:>8.1} MiB/s  (min {:.1}, max {:.1})  {}",
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
}
