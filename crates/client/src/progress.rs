//! The client's progress bar: bytes sent, rate and ETA on stderr.
//!
//! It is hidden when stderr is not a terminal or the user asked for none, so it never reaches a
//! pipe, a file or the JSON on stdout. The transfer reports progress once per file block, and the
//! bar redraws at most every [`MIN_REDRAW`]: its cost is nothing per chunk.

use std::fmt;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use tsperf_results::units;

/// The shortest time between two updates of the bar.
pub const MIN_REDRAW: Duration = Duration::from_millis(50);

/// A sized run's bar: bytes against the total, with an ETA.
const BYTES: &str = "{spinner} {sent}/{total} [{wide_bar}] {rate}, ETA {eta}";
/// A timed run's bar: the run's time against its length, and the bytes so far.
const TIMED: &str = "{spinner} {secs} of {run} [{wide_bar}] {sent}, {rate}";

/// A progress bar, possibly hidden. Clones share the bar (for the Ctrl-C handler).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    sent: Arc<AtomicU64>,
    last: Option<Instant>,
    /// A timed run's bar: its position is the time since the first byte, in ms.
    timed: bool,
}

impl Progress {
    /// A bar of bytes sent on stderr when `wanted` and stderr is a terminal; otherwise a
    /// hidden one.
    pub fn new(wanted: bool) -> Progress {
        Progress::with_template(wanted, BYTES)
    }

    /// A bar of clock queries answered, for latency mode, shown as [`Progress::new`] is.
    pub fn queries(wanted: bool) -> Progress {
        Progress::with_template(
            wanted,
            "{spinner} {pos}/{len} clock queries [{wide_bar}] ETA {eta}",
        )
    }

    fn with_template(wanted: bool, template: &str) -> Progress {
        let target = if wanted && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr_with_hz(20)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        let sent = Arc::new(AtomicU64::new(0));
        bar.set_style(style(template, &sent));
        Progress {
            bar,
            sent,
            last: None,
            timed: false,
        }
    }

    /// Prints `line` on stdout, above the bar if it is shown. Output that cannot be written (a
    /// closed pipe) is dropped: the run's result is what matters.
    pub fn println(&self, line: &str) {
        use std::io::Write;
        self.bar.suspend(|| {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        });
    }

    /// Sets the total once the file's size is known.
    pub fn start(&mut self, total: u64) {
        self.bar.set_length(total);
        self.bar.reset();
    }

    /// Makes it a timed run's bar: the time since the first byte against `run` (its omitted
    /// start and its time), and the bytes so far beside it.
    pub fn start_timed(&mut self, run: Duration) {
        self.timed = true;
        self.bar.set_style(style(TIMED, &self.sent));
        self.bar.set_length(run.as_millis() as u64);
        self.bar.reset();
    }

    /// Starts the bar's clock again (the total stays): the rate and ETA count from here.
    pub fn restart(&mut self) {
        self.bar.reset();
    }

    /// Reports `sent` bytes so far; redraws only if [`MIN_REDRAW`] has passed.
    #[inline]
    pub fn update(&mut self, sent: u64) {
        self.sent.store(sent, Ordering::Relaxed);
        if self.bar.is_hidden() {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_none_or(|t| now.duration_since(t) >= MIN_REDRAW)
        {
            self.last = Some(now);
            let at = if self.timed {
                self.bar.elapsed().as_millis() as u64
            } else {
                sent
            };
            self.bar.set_position(at);
        }
    }

    /// Bytes sent at the last update, whether or not the bar is shown.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Removes the bar from the terminal, leaving no trace.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The bar's look: `template`, its own keys reading the bytes so far from `sent` (the position
/// is the time in a timed run), so both kinds of bar show bytes and rate the same way.
fn style(template: &str, sent: &Arc<AtomicU64>) -> ProgressStyle {
    let bytes = |s: &Arc<AtomicU64>| s.load(Ordering::Relaxed);
    let (for_sent, for_rate) = (sent.clone(), sent.clone());
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    ProgressStyle::with_template(template)
        .expect("the template is valid")
        .progress_chars("=> ")
        .with_key("sent", move |_: &ProgressState, w: &mut dyn fmt::Write| {
            let _ = w.write_str(&units::size(bytes(&for_sent)));
        })
        .with_key("total", |s: &ProgressState, w: &mut dyn fmt::Write| {
            let _ = w.write_str(&units::size(s.len().unwrap_or(0)));
        })
        .with_key("rate", move |s: &ProgressState, w: &mut dyn fmt::Write| {
            let mib = bytes(&for_rate) as f64 / (1024.0 * 1024.0);
            let _ = write!(w, "{:.1} MiB/s", mib / s.elapsed().as_secs_f64().max(1e-3));
        })
        .with_key("secs", move |s: &ProgressState, w: &mut dyn fmt::Write| {
            let _ = w.write_str(&secs(s.pos()));
        })
        .with_key("run", move |s: &ProgressState, w: &mut dyn fmt::Write| {
            let _ = w.write_str(&secs(s.len().unwrap_or(0)));
        })
}
