//! `--interval` samples printed as they are taken, in a human run (or, with `--json-stream`,
//! as one JSON line each, [`tsperf_results::json::Event`]): each line labelled with its stream (`[  2]` in a `-P` session, `[TX]` and `[RX]` for the two directions of `--bidir`),
//! and a session's `[SUM]` line for each interval once every stream has reported it, as iperf3
//! prints them.
//!
//! The streams of a session run on threads of their own, each sampled from its own first
//! byte; the SUM of interval k adds up every stream's k-th sample (their times differ by the
//! streams' start, a connect apart). A lock is taken once per sample, never per chunk.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::intervals::{Interval, line, received_line};
use crate::progress::Progress;
use tsperf_results::intervals::{header, row as row_of};
use tsperf_results::json::{Event, IntervalEvent, SumEvent};

/// How a stream's samples are printed as they are taken.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Printed before each line: empty for a lone stream.
    pub label: String,
    /// The session's SUM lines, and this stream's place in it.
    pub sum: Option<(Arc<Sums>, usize)>,
    /// One JSON line per sample (`--json-stream`) instead of a line for people.
    pub json: bool,
    /// A timed run's omitted start (`--omit`), seconds: samples that end within it are marked
    /// `(omitted)`, as iperf3 marks them.
    pub omit_s: f64,
    /// Every TCP figure on each line (`--verbose`).
    pub verbose: bool,
}

impl Live {
    /// Each direction of `--bidir`: `[TX]` for the data this client sends, `[RX]` for what it
    /// receives, as iperf3 labels them.
    pub fn direction(&self, sending: bool) -> Live {
        Live {
            label: format!("{}{}", self.label, if sending { "[TX]" } else { "[RX]" }),
            sum: None,
            ..self.clone()
        }
    }

    /// Stream `index` of a session whose SUM lines are `sums`.
    pub fn stream(&self, index: usize, sums: &Arc<Sums>) -> Live {
        Live {
            label: format!("[{index:>3}]{}", self.label),
            sum: Some((sums.clone(), index)),
            ..self.clone()
        }
    }

    /// A session of `streams` streams: its SUM lines, labelled like this.
    pub fn session(&self, streams: usize) -> Arc<Sums> {
        Arc::new(Sums {
            label: format!("[SUM]{}", self.label),
            streams,
            rows: Mutex::new(Vec::new()),
            json: self.json,
            omit_s: self.omit_s,
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
                let label = id(&live.label);
                let text = match receiving {
                    true => received_line(&label, i, live.verbose),
                    false => line(&label, i, live.verbose),
                };
                if !HEADED.swap(true, Ordering::Relaxed) {
                    bar.println(titled(&header()).trim_end());
                }
                bar.println(titled(&(text + omitted(i.end_s, live.omit_s))).trim_end());
            }
            if let Some((sums, _)) = &live.sum {
                sums.add(taken.fetch_add(1, Ordering::Relaxed), i);
            }
        }
    }
}

static TITLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Begins every later line for people with `title` (iperf3's `-T`), set once, at start.
pub fn set_title(title: &str) {
    let _ = TITLE.set(format!("{}:  ", tsperf_sys::text::Peer(title)));
}

/// `text`'s lines, each begun with the title where one is set.
pub fn titled(text: &str) -> String {
    match TITLE.get() {
        None => text.to_owned(),
        Some(t) => text.lines().map(|l| format!("{t}{l}\n")).collect(),
    }
}

/// The table's header is printed once, above the first line of the run.
static HEADED: AtomicBool = AtomicBool::new(false);

/// A line's label as the table shows it: a lone stream's (unlabelled, or only `[TX]` or
/// `[RX]`) is stream 0's, as iperf3 numbers every stream.
fn id(label: &str) -> String {
    match label.starts_with("[ ") || label.starts_with("[SUM") {
        true => label.to_owned(),
        false => format!("[  0]{label}"),
    }
}

/// ` (omitted)` for a sample that ends within the omitted start, as iperf3 marks it.
fn omitted(end_s: f64, omit_s: f64) -> &'static str {
    // A sample ends on the omitted start's end give or take the sampler's wake-up.
    match omit_s > 0.0 && end_s <= omit_s + 0.01 {
        true => "  (omitted)",
        false => "",
    }
}

/// One line on stdout, whole (the lock keeps streams' lines apart); a closed stdout is
/// ignored: the run's result is what matters.
fn print_line(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{}", titled(text).trim_end());
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
    omit_s: f64,
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
        let text = row_of(&self.label, (row.start_s, row.end_s), row.bytes, None)
            + omitted(row.end_s, self.omit_s)
            + note;
        text.trim_end().to_owned()
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
            "[SUM]   0.00-0.51   sec      150 B       0.0 MiB/s   0.00 Gbit/s"
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
