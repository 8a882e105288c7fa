//! The verdict's truth table (`tsverdicts`, run by `scripts/verdicts.sh`): limits made on
//! purpose ([`cases`], made by [`make`]) beside what tsperf said limited each run. One line per
//! run in `verdicts.jsonl` (`{"case", "where", "made", "expect", "rep", "result"}`, `result`
//! being tsclient's typed `--json` object); [`render`] turns them into `verdicts.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use tsperf_results::json::{ClientJson, ClientOutput, Direction, LadderJson, StreamEntry};
use tsperf_results::machine::Machine;
use tsperf_results::stats;
use tsperf_results::verdict::{LimitedBy, Limits};

pub mod cases;
pub mod cgroup;
pub mod make;
mod root;

/// One run of one case, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Why the case could not be made on this machine (a missing tool), when it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// tsclient's object (`null` for a case skipped here, or a client that printed none).
    pub result: Option<ClientOutput>,
    /// Why there is no result, when the client printed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a run's stream result says, whichever way it went.
struct Said {
    limited_by: Option<LimitedBy>,
    limits: Limits,
    mib_per_s: f64,
    verified: bool,
}

impl Run {
    /// A run of `case` that gave `result` (or why it gave none).
    pub fn made(case: &cases::Case, rep: u32, result: Result<ClientOutput, String>) -> Run {
        let expect = case.expect.names();
        let (result, error) = match result {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        Run {
            case: case.name.into(),
            place: case.place.name().into(),
            made: case.made.into(),
            expect: expect.join("|"),
            rep,
            skipped: None,
            result,
            error,
        }
    }

    /// A case that cannot be made here, and why.
    pub fn skipped(case: &str, why: &str) -> Run {
        Run {
            case: case.into(),
            place: String::new(),
            made: String::new(),
            expect: String::new(),
            rep: 0,
            skipped: Some(why.into()),
            result: None,
            error: None,
        }
    }

    fn said(&self) -> Option<Said> {
        match self.result.as_ref()? {
            ClientOutput::Result(ClientJson::Stream(s)) => Some(Said {
                limited_by: s.limited_by,
                limits: s.limits,
                mib_per_s: s.mib_per_s,
                verified: s.verified,
            }),
            ClientOutput::Result(ClientJson::Reverse(r)) => Some(Said {
                limited_by: r.limited_by,
                // A reverse run from before its limits said so: the server sent.
                limits: Limits {
                    reverse: true,
                    ..r.limits
                },
                mib_per_s: r.mib_per_s,
                verified: r.verified,
            }),
            _ => None,
        }
    }

    /// A ladder's object, where the run was one.
    fn ladder(&self) -> Option<&LadderJson> {
        match self.result.as_ref()? {
            ClientOutput::Result(ClientJson::Ladder(l)) => Some(l),
            _ => None,
        }
    }

    /// The verdict tsperf gave (a ladder's: the stage that costs its copy most), or `failed`.
    pub fn verdict(&self) -> String {
        if let Some(l) = self.ladder() {
            return match (l.costliest.is_some(), l.costs.first()) {
                (true, Some(c)) => c.stage.clone(),
                _ => "failed".to_owned(),
            };
        }
        self.said()
            .and_then(|s| s.limited_by)
            .map_or("failed".to_owned(), |v| v.to_string())
    }

    /// True when the verdict is one the case expects.
    pub fn right(&self) -> bool {
        let v = self.verdict();
        self.expect.split('|').any(|e| e == v)
    }

    /// True when the run's stream verified (a ladder's every rung that ran).
    pub fn verified(&self) -> bool {
        match self.ladder() {
            Some(l) => l.verified,
            None => self.said().is_some_and(|s| s.verified),
        }
    }

    /// The shares the verdict was judged on.
    pub fn limits(&self) -> Option<Limits> {
        self.said().map(|s| s.limits)
    }

    /// Its rate, MiB/s: a ladder's whole copy's.
    fn rate(&self) -> Option<f64> {
        match self.ladder() {
            Some(l) => l
                .rungs
                .iter()
                .find(|r| r.rung.starts_with("cold → TLS"))
                .and_then(|r| r.mib_per_s),
            None => self.said().map(|s| s.mib_per_s),
        }
    }

    /// Why the run has no verdict: the client's error, or that it printed nothing.
    fn error(&self) -> String {
        let failed = |e: &StreamEntry| match e {
            StreamEntry::SendFailed(f) => Some(f.error.clone()),
            StreamEntry::ReceiveFailed(f) => Some(f.error.clone()),
            StreamEntry::Done(_) => None,
        };
        match &self.result {
            Some(ClientOutput::Failed(f)) => Some(f.error.clone()),
            Some(ClientOutput::StreamFailed(e)) => failed(e),
            Some(ClientOutput::Result(ClientJson::Bidir(b))) => match &*b.forward {
                Direction::Stream(e) => failed(e),
                _ => None,
            },
            _ => self.error.clone(),
        }
        .unwrap_or_else(|| "no result".to_owned())
    }
}

/// Writes `runs` to `path` (`verdicts.jsonl`), one line each, by way of a temporary file.
pub fn write(path: &Path, runs: &[Run]) -> Result<()> {
    let mut text = String::new();
    for r in runs {
        text += &serde_json::to_string(r)?;
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make '{}'", dir.display()))?;
    }
    tsperf_lab::folder::write_atomic(path, text.as_bytes())
}

/// Reads `DIR/verdicts.jsonl` and writes `DIR/verdicts.md`, with the machine from
/// `DIR/verdicts-machine.json` (probed now, for `commit`, when missing); returns the table.
pub fn write_report(dir: &Path, commit: &str) -> Result<(PathBuf, String)> {
    let runs = read(&dir.join("verdicts.jsonl"))?;
    let machine_path = dir.join("verdicts-machine.json");
    // Probed only where there is no file: one there that cannot be read is an error.
    let machine = if std::fs::symlink_metadata(&machine_path).is_ok() {
        tsperf_lab::folder::read_json(&machine_path, "a machine")?
    } else {
        let m = tsperf_lab::machine::probe(commit);
        let text = serde_json::to_string_pretty(&m)? + "\n";
        tsperf_lab::folder::write_atomic(&machine_path, text.as_bytes())?;
        m
    };
    let md = render(&runs, &machine);
    let out = dir.join("verdicts.md");
    tsperf_lab::folder::write_atomic(&out, md.as_bytes())?;
    Ok((out, md))
}

/// Reads `verdicts.jsonl`, naming the line that does not parse.
pub fn read(path: &Path) -> Result<Vec<Run>> {
    tsperf_lab::folder::read_lines(path, "a verdicts.sh run")
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
    let mut seen: Vec<(String, usize)> = Vec::new();
    for r in runs {
        let v = r.verdict();
        match seen.iter_mut().find(|(w, _)| *w == v) {
            Some((_, n)) => *n += 1,
            None => seen.push((v, 1)),
        }
    }
    let parts: Vec<String> = seen.iter().map(|(v, n)| format!("{v} ×{n}")).collect();
    parts.join(", ")
}

/// The sentence the first run printed, rebuilt from its shares.
fn evidence(run: &Run) -> String {
    match run.said() {
        Some(Said {
            limited_by: Some(limited_by),
            limits,
            ..
        }) => tsperf_results::verdict::Verdict { limited_by, limits }
            .sentence()
            .replace('|', "\\|"),
        _ => run.error().replace('|', "\\|"),
    }
}

/// `verdicts.md`: the table, then each case's evidence, then the cases not made here.
pub fn render(runs: &[Run], machine: &Machine) -> String {
    let (skipped, made): (Vec<Run>, Vec<Run>) =
        runs.iter().cloned().partition(|r| r.skipped.is_some());
    let (ladders, made): (Vec<Run>, Vec<Run>) = made
        .into_iter()
        .partition(|r| cases::case(&r.case).is_some_and(|c| c.ladder()));
    let all = cases(&made);
    let right = all.iter().filter(|(_, rs)| all_right(rs)).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The verdict against limits made on purpose\n\n\
         Written by `scripts/verdicts.sh` (the typed cases of `tsverdicts`; rendered again by `tsverdicts --render`) on {machine}.\n\
         Each case makes one limit and runs tsclient against it; a case is right when every \
         run's `limited_by` is one it expects. The rules are in docs/usage.md (\"Why it was \
         slow\"). The cases judged on time shares (CPUs, quotas, a 1 Gbit link) run for a \
         time (`-t 1`; `-t 0.3` with --quick), whatever this machine's speed: a transfer \
         shorter than 100 ms is `too-short`.\n\n**{right} of {} cases named rightly in every run.**\n",
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
            right_mark(rs)
        );
    }
    out += "\n## What each verdict rested on (the first run)\n\n";
    for (case, rs) in &all {
        let _ = writeln!(out, "- **{case}**: {}", evidence(rs[0]));
    }
    out += &ladder_table(&ladders);
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

/// Every run of a case named rightly.
fn all_right(runs: &[&Run]) -> bool {
    runs.iter().all(|r| r.right())
}

/// The table's mark for a case: `yes` when every run was named rightly.
fn right_mark(runs: &[&Run]) -> &'static str {
    if all_right(runs) { "yes" } else { "**no**" }
}

/// The ladder's cases: each makes one stage of a copy slow; right when the stage the closing
/// line names (the costliest) is the one made slow.
fn ladder_table(runs: &[Run]) -> String {
    let all = cases(runs);
    if all.is_empty() {
        return String::new();
    }
    let right = all.iter().filter(|(_, rs)| all_right(rs)).count();
    let mut out = format!(
        "\n## The ladder's closing line against stages made slow\n\n\
         Each case makes one stage of a file copy slow and runs `tsclient --ladder FILE` against \
         a `tsserver --save DIR`; a case is right when the stage its closing line names (the \
         one that costs the copy most) is the one made slow in every run. The rules are in \
         docs/usage.md (\"The file-copy ladder\").\n\n**{right} of {} ladder cases named \
         rightly in every run.**\n\n\
         | case | where | made slow | expected | costliest stage said | the copy MiB/s (median) | right |\n\
         |---|---|---|---|---|---:|:-:|\n",
        all.len()
    );
    for (case, rs) in &all {
        let first = rs[0];
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {} | {} | {} |",
            first.place,
            first.made.replace('|', "\\|"),
            first.expect.replace('|', " or "),
            tally(rs),
            median_rate(rs).map_or("?".into(), |r| format!("{r:.1}")),
            right_mark(rs)
        );
    }
    out += "\nThe closing line of each case's first run:\n\n";
    for (case, rs) in &all {
        let said = match rs[0].ladder().and_then(|l| l.costliest.as_deref()) {
            Some(line) => line.to_owned(),
            None => rs[0].error(),
        };
        let _ = writeln!(out, "- **{case}**: {}", said.replace('|', "\\|"));
    }
    out
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;
    use tsperf_lab::report::hostile::{committed, committed_lines, figure, mutated};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// The verdicts' truth table renders any figure the committed runs could hold, or
        /// fails with an error, and never panics.
        #[test]
        fn the_verdicts_table_takes_any_figure(
            picks in proptest::collection::vec((any::<usize>(), figure()), 1..40),
        ) {
            let lines = committed_lines("verdicts.jsonl");
            let runs: Vec<super::Run> = mutated(&lines, &picks);
            let _ = super::render(&runs, &committed().0.machine);
        }
    }
}
