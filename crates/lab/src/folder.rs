//! A results folder as the report tools read and write it, when it may be anyone's: a folder
//! fetched from another machine, or one a hostile user planted things in (issue 51).
//!
//! - **Inputs** are regular files of at most [`MOST_BYTES`]. The open does not wait (a FIFO
//!   with no writer is refused, not waited on), and what was opened is what is checked: a
//!   symlink to `/dev/zero`, a device or a directory is refused with the file's name.
//! - **Figures** past [`MOST`] either way are refused with their field's name: no measurement
//!   is 1.7e308, and such a figure would reach the renderers as an axis of 600 decades.
//! - **Outputs** are written to a temporary in the same folder and renamed over the name, so a
//!   reader never sees half a file and a symlink planted under the name is replaced, never
//!   written through.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;
use serde_json::Value;

use tsperf_results::runs::{Run, Setup};

/// The largest input read: a grid of thousands of cells with their intervals is a few MB.
pub const MOST_BYTES: u64 = 256 << 20;

/// The largest magnitude a figure may have: past every measurement (a microsecond Unix time
/// is 1.8e15), short of what arithmetic on it would overflow.
pub const MOST: f64 = 1e16;

/// Reads the input `path`: a regular file of at most [`MOST_BYTES`], as text.
pub fn read_input(path: &Path) -> Result<String> {
    let shown = path.display();
    let bytes = tsperf_sys::input::read_regular(path, MOST_BYTES)
        .with_context(|| format!("cannot read '{shown}' (a results file was expected)"))?;
    String::from_utf8(bytes).with_context(|| format!("cannot read '{shown}' as UTF-8 text"))
}

/// Parses `text` as a `T`, refusing a figure past [`MOST`] with its field's name.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T> {
    let v: Value = serde_json::from_str(text)?;
    if let Some((field, x)) = too_large(&v, &mut String::new()) {
        bail!("{field} is {x:e}: no measurement is that large (at most {MOST:e} either way)");
    }
    Ok(serde_json::from_value(v)?)
}

/// Reads the JSON-lines file `path`, one `T` (`what`, for its errors) per line.
pub fn read_lines<T: DeserializeOwned>(path: &Path, what: &str) -> Result<Vec<T>> {
    let text = read_input(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse(l).with_context(|| format!("'{}' line {}: not {what}", path.display(), i + 1))
        })
        .collect()
}

/// Reads the JSON file `path`, a `T` (`what`, for its errors).
pub fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    parse(&read_input(path)?).with_context(|| format!("'{}' is not {what}", path.display()))
}

/// Reads `runs.jsonl`, one [`Run`] per line.
pub fn read_runs(path: &Path) -> Result<Vec<Run>> {
    read_lines(path, "a grid run")
}

/// Reads a grid's `DIR/setup.json` and `DIR/runs.jsonl`.
pub fn read_grid(dir: &Path) -> Result<(Setup, Vec<Run>)> {
    let setup = read_json(&dir.join("setup.json"), "a grid setup")?;
    Ok((setup, read_runs(&dir.join("runs.jsonl"))?))
}

/// The first number in `v` past [`MOST`] either way, with its path (`result.rtt_us.p50`).
/// Integers are left to their types (a count past `u64` does not parse).
fn too_large(v: &Value, at: &mut String) -> Option<(String, f64)> {
    match v {
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .filter(|x| x.abs() > MOST)
            .map(|x| (at.clone(), x)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| within(at, &format!("[{i}]"), x)),
        Value::Object(o) => o.iter().find_map(|(k, x)| {
            let key = if at.is_empty() {
                k.clone()
            } else {
                format!(".{k}")
            };
            within(at, &key, x)
        }),
        _ => None,
    }
}

/// [`too_large`] of `x`, found at `at` then `key`.
fn within(at: &mut String, key: &str, x: &Value) -> Option<(String, f64)> {
    let len = at.len();
    at.push_str(key);
    let found = too_large(x, at);
    at.truncate(len);
    found
}

/// Writes `bytes` to `path` through a temporary file in the same directory, so a reader never
/// sees half a file and a symlink at `path` is replaced, not followed. The file gets the mode
/// any new file gets (0666 less the umask).
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
mod tests {
    use super::*;

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

    /// Issue 51 (5): an input that is not a regular file (the cases are
    /// `tsperf_sys::input`'s) is refused, naming the file and what was expected.
    #[test]
    fn an_input_that_is_not_a_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = format!("{:#}", read_input(dir.path()).unwrap_err());
        assert!(e.contains("not a regular file"), "{e}");
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
        assert!(e.contains("a results file was expected"), "{e}");
        // A missing one says why once (the error's source was printed twice).
        let e = format!(
            "{:#}",
            read_input(&dir.path().join("gone.json")).unwrap_err()
        );
        assert_eq!(e.matches("No such file").count(), 1, "{e}");
        let ok = dir.path().join("ok.json");
        std::fs::write(&ok, "{}").unwrap();
        assert_eq!(read_input(&ok).unwrap(), "{}");
    }

    /// Issue 51 (3): a figure past any measurement is refused with its field's path; the
    /// edges of what a measurement can be parse.
    #[test]
    fn figures_past_any_measurement_are_refused_by_name() {
        let e = format!(
            "{:#}",
            parse::<Value>(r#"{"a":{"b":[1.0,{"c":1.7e308}]}}"#).unwrap_err()
        );
        assert!(e.contains("a.b[1].c is 1.7e308"), "{e}");
        let e = format!("{:#}", parse::<Value>(r#"{"x":-2e16}"#).unwrap_err());
        assert!(e.contains("x is -2e16"), "{e}");
        for fine in [
            r#"{"x":5e-324}"#,
            r#"{"x":-1.5}"#,
            r#"{"x":1796350747632436.2}"#,
            r#"{"x":18446744073709551615}"#,
        ] {
            parse::<Value>(fine).unwrap();
        }
    }

    /// A runs file round-trips through its JSON-lines form; a line that is not a run is
    /// named.
    #[test]
    fn runs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let runs = crate::report::fixture::runs();
        let text: String = runs
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        let back = read_runs(&path).unwrap();
        assert_eq!(back.len(), runs.len());
        assert_eq!(back[0].cell, runs[0].cell);
        std::fs::write(&path, "{not json\n").unwrap();
        let e = format!("{:#}", read_runs(&path).unwrap_err());
        assert!(e.contains("line 1: not a grid run"), "{e}");
    }
}
