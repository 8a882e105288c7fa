//! The ladder's table for people and its JSON: a line per rung (its rate, its drop from the
//! rung it stands on, CPU per GiB on each end, what limited it, or why it did not run), then
//! the stages' costs and the closing line.

use tsperf_results::json::{LadderJson, RungJson, StageCost, StreamEntry};

use super::VERSION;
use super::render::entry;
use crate::ladder::{Ladder, Rung, Step, cpu_per_gib};
use crate::run::Side;

/// What a table line and a JSON rung share.
struct Figures {
    rate: Option<f64>,
    drop: Option<(f64, f64)>,
    cpu: Option<(f64, f64)>,
}

fn figures(l: &Ladder, rung: Rung) -> Figures {
    let rate = l.rate(rung);
    let drop = rung
        .base()
        .and_then(|b| l.rate(b))
        .zip(rate)
        .map(|(b, r)| (b / r, b - r));
    let cpu = l.ran(rung).map(|o| {
        let (s, r) = (&o.sender, &o.receiver);
        let client = std::time::Duration::from_micros(s.cpu_user_us + s.cpu_sys_us);
        let server = std::time::Duration::from_micros(r.cpu_user_us + r.cpu_sys_us);
        (
            cpu_per_gib(client, o.measured.bytes),
            cpu_per_gib(server, o.measured.bytes),
        )
    });
    Figures { rate, drop, cpu }
}

/// The table.
pub fn ladder_human(l: &Ladder) -> String {
    let runs = match l.runs.len() {
        0 | 1 => String::new(),
        n => format!(", the median of {n} runs (the rungs alternating)"),
    };
    let timed = l.time.map_or(String::new(), |t| {
        format!(
            ", those that can repeat it for {} s each (cold and far disk: one pass)",
            t.as_secs_f64()
        )
    });
    let mut out = format!(
        "ladder of '{}' ({}): each rung a verified transfer{timed}{runs}\n  {:<40} {:>9}  {:>17}  {:>13}  {}\n",
        l.file.display(),
        tsperf_results::units::size(l.bytes),
        "rung",
        "MiB/s",
        "drop",
        "CPU s/GiB c/s",
        "limited by"
    );
    for (rung, step) in &l.rungs {
        let f = figures(l, *rung);
        let line = match step {
            Step::Ran(o) => format!(
                "{:>9.1}  {:>17}  {:>13}  {}",
                f.rate.unwrap_or(0.0),
                f.drop.map_or("—".into(), |(x, d)| match d >= 0.0 {
                    true => format!("{x:.2}× −{d:.0}"),
                    false => format!("{x:.2}× +{:.0}", -d),
                }),
                f.cpu
                    .map_or(String::new(), |(c, s)| format!("{c:.2} / {s:.2}")),
                o.verdict().limited_by
            ),
            Step::Skipped(why) => format!("skipped: {why}"),
            Step::Failed(f) => format!("FAILED: {:#}", f.error),
        };
        out += &format!("  {:<40} {line}\n", rung.name());
    }
    let costs = l.costs();
    if !costs.is_empty() {
        let parts: Vec<String> = costs
            .iter()
            .map(|(stage, t)| format!("{stage} {:.2}", t * 1024.0))
            .collect();
        out += &format!("  each stage's cost, s per GiB: {}\n", parts.join(", "));
    }
    if let Some(line) = l.costliest() {
        out += &format!("{line}\n");
    }
    out
}

/// The one object `--ladder --json` prints.
pub fn ladder_json(l: &Ladder) -> LadderJson {
    let runs = l
        .runs
        .iter()
        .map(|run| {
            rungs_json(&Ladder {
                file: l.file.clone(),
                bytes: l.bytes,
                rungs: run.clone(),
                runs: Vec::new(),
                time: l.time,
            })
        })
        .collect();
    LadderJson {
        tsperf: VERSION.into(),
        file: l.file.display().to_string(),
        bytes: l.bytes,
        rungs: rungs_json(l),
        costs: l
            .costs()
            .into_iter()
            .map(|(stage, t)| StageCost {
                stage,
                s_per_gib: t * 1024.0,
            })
            .collect(),
        costliest: l.costliest(),
        verified: l.verified(),
        runs,
    }
}

/// Each rung of `l`, for the JSON.
fn rungs_json(l: &Ladder) -> Vec<RungJson> {
    l.rungs
        .iter()
        .map(|(rung, step)| {
            let f = figures(l, *rung);
            let (status, reason, run) = match step {
                Step::Ran(o) => ("ran", None, Some(entry(Side::Sent, &Ok((**o).clone())))),
                Step::Skipped(why) => ("skipped", Some(why.clone()), None),
                Step::Failed(e) => (
                    "failed",
                    Some(format!("{:#}", e.error)),
                    Some(StreamEntry::SendFailed(super::stream_failure_object(e))),
                ),
            };
            RungJson {
                rung: rung.name(),
                base: rung.base().map(Rung::name),
                status: status.into(),
                reason,
                mib_per_s: f.rate,
                drop_x: f.drop.map(|d| d.0),
                drop_mib_per_s: f.drop.map(|d| d.1),
                client_cpu_s_per_gib: f.cpu.map(|c| c.0),
                server_cpu_s_per_gib: f.cpu.map(|c| c.1),
                limited_by: l.ran(*rung).map(|o| o.verdict().limited_by),
                run,
            }
        })
        .collect()
}
