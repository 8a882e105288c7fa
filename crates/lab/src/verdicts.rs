//! The verdict's truth table (`scripts/verdicts.sh`): limits made on purpose beside what tsperf
//! said limited each run. The script records one line per run in `verdicts.jsonl`
//! (`{"case", "where", "made", "expect", "rep", "result"}`, `result` being tsclient's `--json`
//! object); [`render`] turns them into `verdicts.md`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;

use tsperf_results::machine::Machine;
use tsperf_results::stats;

/// One run of one case, as the script recorded it.
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    /// The case's name: `server-quota`.
    pub case: String,
    /// Where it ran: `loopback` or `namespaces`.
    #[serde(rename = "where")]
    pub place: String,
    /// What was made on purpose, in words.
    pub made: String,
    /// The verdicts that name it rightly, `|`-separated.
    pub expect: String,
    /// The run's number within its case, from 1.
    pub rep: u32,
    /// tsclient's JSON object (`null` for a case skipped here).
    pub result: Value,
    /// Why the case could not be made on this machine (a missing tool), when it was skipped.
    #[serde(default)]
    pub skipped: Option<String>,
}

impl Run {
    /// The verdict tsperf gave, or `failed`.
    pub fn verdict(&self) -> &str {
        self.result["limited_by"].as_str().unwrap_or("failed")
    }

    /// True when the verdict is one the case expects.
    pub fn right(&self) -> bool {
        self.expect.split('|').any(|e| e == self.verdict())
    }

    fn rate(&self) -> Option<f64> {
        self.result["mib_per_s"].as_f64()
    }
}

/// Reads `verdicts.jsonl`, naming the line that does not parse.
pub fn read(path: &Path) -> Result<Vec<Run>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                format!("'{}' line {}: not a verdicts.sh run", path.display(), i + 1)
            })
        })
        .collect()
}

/// The cases in the order they first appear, each with its runs.
fn cases(runs: &[Run]) -> Vec<(&str, Vec<&Run>)> {
    let mut out: Vec<(&str, Vec<&Run>)> = Vec::new();
    for r in runs {
        match out.iter_mut().find(|(c, _)| *c == r.case) {
            Some((_, v)) => v.push(r),
            None => out.push((&r.case, vec![r])),
        }
    }
    out
}

fn median_rate(runs: &[&Run]) -> Option<f64> {
    let mut rates: Vec<f64> = runs.iter().filter_map(|r| r.rate()).collect();
    (!rates.is_empty()).then(|| stats::median(&mut rates))
}

/// The unlimited case each place is compared with.
fn baseline(place: &str) -> &'static str {
    if place == "loopback" {
        "loopback"
    } else {
        "lan-unshaped"
    }
}

/// The verdicts of a case's runs: `receiver-cpu ×3`, or `network ×2, unknown ×1`.
fn tally(runs: &[&Run]) -> String {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for r in runs {
        match seen.iter_mut().find(|(v, _)| *v == r.verdict()) {
            Some((_, n)) => *n += 1,
            None => seen.push((r.verdict(), 1)),
        }
    }
    let parts: Vec<String> = seen.iter().map(|(v, n)| format!("{v} ×{n}")).collect();
    parts.join(", ")
}

/// The sentence the first run printed, rebuilt from its shares.
fn evidence(run: &Run) -> String {
    let limits = serde_json::from_value(run.result["limits"].clone())
        .ok()
        .map(|mut l: tsperf_results::verdict::Limits| {
            // A reverse run from before its limits said so: the server sent.
            l.reverse |= run.result["mode"] == "reverse";
            l
        });
    let by = serde_json::from_value(run.result["limited_by"].clone()).ok();
    match (by, limits) {
        (Some(limited_by), Some(limits)) => tsperf_results::verdict::Verdict { limited_by, limits }
            .sentence()
            .replace('|', "\\|"),
        _ => run.result["error"]
            .as_str()
            .unwrap_or("no result")
            .replace('|', "\\|"),
    }
}

/// `verdicts.md`: the table, then each case's evidence, then the cases not made here.
pub fn render(runs: &[Run], machine: &Machine) -> String {
    let (skipped, made): (Vec<Run>, Vec<Run>) =
        runs.iter().cloned().partition(|r| r.skipped.is_some());
    let all = cases(&made);
    let right = all
        .iter()
        .filter(|(_, rs)| rs.iter().all(|r| r.right()))
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The verdict against limits made on purpose\n\n\
         Written by `scripts/verdicts.sh` (rendered by `tsreport --verdicts`) on {machine}.\n\
         Each case makes one limit and runs tsclient against it; a case is right when every \
         run's `limited_by` is one it expects. The rules are in docs/usage.md (\"Why it was \
         slow\").\n\n**{right} of {} cases named rightly in every run.**\n",
        all.len()
    );
    out += "| case | where | made on purpose | expected | tsperf said | MiB/s (median) | of the unlimited run | right |\n";
    out += "|---|---|---|---|---|---:|---:|:-:|\n";
    for (case, rs) in &all {
        let first = rs[0];
        let rate = median_rate(rs);
        let base = all
            .iter()
            .find(|(c, _)| *c == baseline(&first.place))
            .and_then(|(_, b)| median_rate(b));
        let share = match (rate, base) {
            (Some(r), Some(b)) if b > 0.0 && r < b / 100.0 => "<1%".into(),
            (Some(r), Some(b)) if b > 0.0 => format!("{:.0}%", 100.0 * r / b),
            _ => "?".into(),
        };
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {} | {} | {share} | {} |",
            first.place,
            first.made.replace('|', "\\|"),
            first.expect.replace('|', " or "),
            tally(rs),
            rate.map_or("?".into(), |r| format!("{r:.1}")),
            if rs.iter().all(|r| r.right()) {
                "yes"
            } else {
                "**no**"
            }
        );
    }
    out += "\n## What each verdict rested on (the first run)\n\n";
    for (case, rs) in &all {
        let _ = writeln!(out, "- **{case}**: {}", evidence(rs[0]));
    }
    if !skipped.is_empty() {
        out += "\n## Not made on this machine\n\n";
        for r in &skipped {
            let _ = writeln!(
                out,
                "- **{}**: {}",
                r.case,
                r.skipped.as_deref().unwrap_or("")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(case: &str, place: &str, expect: &str, by: &str, rate: f64) -> Run {
        Run {
            case: case.into(),
            place: place.into(),
            made: "made | so".into(),
            expect: expect.into(),
            rep: 1,
            skipped: None,
            result: serde_json::json!({"limited_by": by, "mib_per_s": rate,
                "limits": {"rwnd_limited_pct": 0.0, "sndbuf_limited_pct": 0.0,
                    "busy_pct": 99.0, "client_cpu_pct": 98.0, "retransmits": 0}}),
        }
    }

    #[test]
    fn the_table_says_which_cases_were_right() {
        let runs = vec![
            run(
                "loopback",
                "loopback",
                "sender-cpu|shared-cpu",
                "sender-cpu",
                2000.0,
            ),
            run(
                "loopback",
                "loopback",
                "sender-cpu|shared-cpu",
                "shared-cpu",
                1800.0,
            ),
            run(
                "server-quota",
                "loopback",
                "receiver-cpu",
                "receiver-cpu",
                300.0,
            ),
            run("server-quota", "loopback", "receiver-cpu", "unknown", 280.0),
        ];
        let mut runs = runs;
        runs.push(Run {
            skipped: Some("needs netem".into()),
            result: Value::Null,
            ..run("lan-sndbuf-bdp", "", "", "", 0.0)
        });
        let md = render(&runs, &Machine::default());
        assert!(md.contains("**1 of 2 cases named rightly"), "{md}");
        assert!(
            md.ends_with("## Not made on this machine\n\n- **lan-sndbuf-bdp**: needs netem\n"),
            "{md}"
        );
        assert!(
            md.contains("| loopback | loopback | made \\| so | sender-cpu or shared-cpu | sender-cpu ×1, shared-cpu ×1 | 1900.0 | 100% | yes |"),
            "{md}"
        );
        assert!(
            md.contains("receiver-cpu ×1, unknown ×1 | 290.0 | 15% | **no** |"),
            "{md}"
        );
        assert!(
            md.contains("- **loopback**: limited by the sender's CPU"),
            "{md}"
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let dir = std::env::temp_dir().join(format!("tsperf-verdicts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("verdicts.jsonl");
        std::fs::write(&path, "{\"case\":\"a\"}\n").unwrap();
        let e = format!("{:#}", read(&path).unwrap_err());
        assert!(e.contains("line 1: not a verdicts.sh run"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
