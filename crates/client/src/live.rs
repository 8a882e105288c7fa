//! `--interval` samples printed as they are taken, in a human run (or, with `--json-stream`,
//! as one JSON line each, [`tsperf_results::json::Event`]): each line labelled with its stream (`[  2]` in a `-P` session, `[TX]` and `[RX]` for the two directions of `--bidir`),
//! and a session's `[SUM]` line for each interval once every stream has reported it, as iperf3
//! prints them.
//!
//! The streams of a session run on threads of their own, each sampled from its own first
//! byte; the SUM of interval k adds up every stream's k-th sample (their times differ by the
//! streams' start, a connect apart). A lock is taken once per sample, never per chunk.

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::intervals::{Interval, line, received_line};
use crate::progress::Progress;
use tsperf_results::json::{Event, IntervalEvent, SumEvent};
use tsperf_results::units;

/// How a stream's samples are printed as they are taken.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Printed before each line: empty for a lone stream.
    pub label: String,
    /// The session's SUM lines, and this stream's place in it.
    pub sum: Option<(Arc<Sums>, usize)>,
    /// One JSON line per sample (`--json-stream`) instead of a line for people.
    pub json: bool,
}

impl Live {
    /// Each direction of `--bidir`: `[TX]` for the data this client sends, `[RX]` for what it
    /// receives, as iperf3 labels them.
    pub fn direction(&self, sending: bool) -> Live {
        Live {
            label: format!("{}{}", self.label, if sending { "[TX]" } else { "[RX]" }),
            sum: None,
            json: self.json,
        }
    }

    /// Stream `index` of a session whose SUM lines are `sums`.
    pub fn stream(&self, index: usize, sums: &Arc<Sums>) -> Live {
        Live {
            label: format!("[{index:>3}]{}", self.label),
            sum: Some((sums.clone(), index)),
            json: self.json,
        }
    }

    /// A session of `streams` streams: its SUM lines, labelled like this.
    pub fn session(&self, streams: usize) -> Arc<Sums> {
        Arc::new(Sums {
            label: format!("[SUM]{}", self.label),
            streams,
            rows: Mutex::new(Vec::new()),
            json: self.json,
        })
    }

    /// A printer for one stream's samples (a sender's lines, or a receiver's), above the
    /// stream's progress bar if it shows one, counting them so the session knows which
    /// interval each is.
    pub fn printer(&self, receiving: bool, bar: &Progress) -> impl Fn(&Interval) + Sync + use<> {
        let (live, bar) = (self.clone(), bar.clone());
        let taken = AtomicUsize::new(0);
        move |i: &Interval| {
            if live.json {
                bar.println(&crate::output::json_line(&Event::Interval(IntervalEvent {
                    stream: live.label.clone(),
                    received: receiving,
                    interval: i.clone(),
                })));
            } else {
                let text = if receiving { received_line(i) } else { line(i) };
                bar.println(&format!("{}{text}", live.label));
            }
            if let Some((sums, _)) = &live.sum {
                sums.add(taken.fetch_add(1, Ordering::Relaxed), i);
            }
        }
    }
}

/// One line on stdout, whole (the lock keeps streams' lines apart); a closed stdout is
/// ignored: the run's result is what matters.
fn print_line(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// One interval of a session: what its streams reported so far.
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    reported: usize,
    start_s: f64,
    end_s: f64,
    bytes: u64,
}

/// A session's SUM lines: each interval's, printed when the last stream reports it.
#[derive(Debug)]
pub struct Sums {
    label: String,
    streams: usize,
    rows: Mutex<Vec<Row>>,
    json: bool,
}

impl Sums {
    /// Stream sample number `k` (from 0); prints the interval's SUM line when it completes it.
    fn add(&self, k: usize, i: &Interval) {
        let done = {
            let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
            if rows.len() <= k {
                rows.resize(k + 1, Row::default());
            }
            let row = &mut rows[k];
            if row.reported == 0 {
                (row.start_s, row.end_s) = (i.start_s, i.end_s);
            }
            row.reported += 1;
            row.start_s = row.start_s.min(i.start_s);
            row.end_s = row.end_s.max(i.end_s);
            row.bytes += i.bytes;
            (row.reported == self.streams).then_some(*row)
        };
        if let Some(row) = done {
            print_line(&self.line(&row, ""));
        }
    }

    /// The intervals not every stream reported (streams that ended early, or failed): printed
    /// once the session is over, each saying how many streams it holds.
    pub fn finish(&self) {
        let rows = std::mem::take(&mut *self.rows.lock().unwrap_or_else(PoisonError::into_inner));
        for row in rows
            .iter()
            .filter(|r| r.reported > 0 && r.reported < self.streams)
        {
            print_line(&self.line(
                row,
                &format!(" ({} of {} streams)", row.reported, self.streams),
            ));
        }
    }

    fn line(&self, row: &Row, note: &str) -> String {
        if self.json {
            return crate::output::json_line(&Event::Sum(SumEvent {
                stream: self.label.clone(),
                start_s: row.start_s,
                end_s: row.end_s,
                bytes: row.bytes,
                streams: row.reported,
            }));
        }
        let secs = (row.end_s - row.start_s).max(1e-9);
        format!(
            "{}  [{:7.3}-{:7.3} s] {:>10} {:9.1} MiB/s{note}",
            self.label,
            row.start_s,
            row.end_s,
            units::size(row.bytes),
            row.bytes as f64 / (1024.0 * 1024.0) / secs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start: f64, end: f64, bytes: u64) -> Interval {
        Interval {
            start_s: start,
            end_s: end,
            bytes,
            ..Interval::default()
        }
    }

    /// A session's interval sums every stream's sample of it, spans them all, and is complete
    /// only when the last stream has reported it; the rest wait for `finish`.
    #[test]
    fn an_interval_is_summed_when_every_stream_has_reported_it() {
        let s = Live::default().session(2);
        s.add(0, &sample(0.0, 0.5, 100));
        assert_eq!(s.rows.lock().unwrap()[0].reported, 1);
        s.add(0, &sample(0.01, 0.51, 50));
        s.add(1, &sample(0.5, 1.0, 7));
        let rows = s.rows.lock().unwrap().clone();
        assert_eq!((rows[0].reported, rows[0].bytes), (2, 150));
        assert_eq!((rows[0].start_s, rows[0].end_s), (0.0, 0.51));
        assert_eq!(rows[1].reported, 1);
        assert_eq!(
            s.line(&rows[0], ""),
            "[SUM]  [  0.000-  0.510 s]      150 B       0.0 MiB/s"
        );
        s.finish();
        assert!(s.rows.lock().unwrap().is_empty());
    }

    /// Labels nest as iperf3's do: a stream of a `--bidir` session is `[  1][TX]`, its sum
    /// `[SUM][TX]`.
    #[test]
    fn labels_nest() {
        let tx = Live::default().direction(true);
        let sums = tx.session(2);
        assert_eq!(tx.stream(1, &sums).label, "[  1][TX]");
        assert_eq!(sums.label, "[SUM][TX]");
        assert_eq!(Live::default().direction(false).label, "[RX]");
    }
}
