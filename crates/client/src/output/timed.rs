//! A timed run's line in the report for people.

use crate::StreamResult;
use tsperf_results::units;

/// A timed run's line: its time, its passes of the file, its omitted start, a stop.
pub(super) fn timed_human(r: &StreamResult) -> String {
    let Some(t) = r.timed else {
        return String::new();
    };
    let omitted = match t.omitted {
        Some((bytes, time)) => format!(
            "; the first {} ({} in {}) left out of the rate (--omit)",
            units::duration(t.omit),
            units::size(bytes),
            units::duration(time)
        ),
        None => String::new(),
    };
    format!(
        "  timed: {} asked for, {:.2} passes of the {} file{omitted}{}\n",
        units::duration(t.time),
        t.passes,
        units::size(t.file_bytes),
        if t.interrupted {
            "; stopped early by an interrupt, every byte sent until then verified"
        } else {
            ""
        }
    )
}
