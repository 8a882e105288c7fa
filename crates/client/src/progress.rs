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

/// A progress bar, possibly hidden. Clones share the bar (for the Ctrl-C handler).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    sent: Arc<AtomicU64>,
    last: Option<Instant>,
}

impl Progress {
    /// A bar of bytes sent on stderr when `wanted` and stderr is a terminal; otherwise a
    /// hidden one.
    pub fn new(wanted: bool) -> Progress {
        Progress::with_template(
            wanted,
            "{spinner} {sent}/{total} [{wide_bar}] {rate}, ETA {eta}",
        )
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
        let style = ProgressStyle::with_template(template)
            .expect("the template is valid")
            .progress_chars("=> ")
            .with_key("sent", |s: &ProgressState, w: &mut dyn fmt::Write| {
                let _ = w.write_str(&units::size(s.pos()));
            })
            .with_key("total", |s: &ProgressState, w: &mut dyn fmt::Write| {
                let _ = w.write_str(&units::size(s.len().unwrap_or(0)));
            })
            .with_key("rate", |s: &ProgressState, w: &mut dyn fmt::Write| {
                let _ = write!(w, "{:.1} MiB/s", s.per_sec() / (1024.0 * 1024.0));
            });
        bar.set_style(style);
        Progress {
            bar,
            sent: Arc::new(AtomicU64::new(0)),
            last: None,
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
            self.bar.set_position(sent);
        }
    }

    /// Bytes sent at the last update, whether or not the bar is shown.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The total set by [`Progress::start`] (0 before).
    pub fn total(&self) -> u64 {
        self.bar.length().unwrap_or(0)
    }

    /// Removes the bar from the terminal, leaving no trace.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}
