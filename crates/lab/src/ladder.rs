//! The grid's ladder section (`scripts/matrix.sh --ladder`): `tsclient --ladder FILE` run
//! `reps` times against a server that saves (one of its own with `--save` in the scratch
//! directory, or the `--host` given), written out as `ladder.md` (each rung's median rate,
//! drop, CPU per GiB and verdict; each stage's median cost; the median copy's closing line),
//! `ladder.json` (every run whole) and `ladder.svg` (the rungs as bars, the stages' costs
//! under them).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tsperf_results::json::{ClientJson, LadderJson};

use crate::folder::write_atomic;
use crate::harness::{Client, ServerOptions, ServerProcess, Sink};

/// Where and how the ladder runs.
#[derive(Debug, Clone)]
pub struct LadderConfig {
    /// Where ladder.md, ladder.json and ladder.svg go.
    pub out: PathBuf,
    /// The file the rungs copy.
    pub file: PathBuf,
    /// Runs of the whole ladder (medians are reported).
    pub reps: u32,
    /// Where tsserver and tsclient are.
    pub bin_dir: PathBuf,
    /// A server already running (host, port); `None`: one of its own on `bind`.
    pub host: Option<(String, u16)>,
    /// The address its own server listens on.
    pub bind: String,
    /// Command prefixes for the server and the client (namespaces).
    pub server_wrap: Vec<String>,
    /// The client's.
    pub client_wrap: Vec<String>,
    /// The suite of the encrypted rungs.
    pub cipher: String,
    /// The machine line.
    pub machine: String,
    /// What the network is, in words.
    pub network: String,
    /// Bytes per write of every rung (tsclient's `--chunk`).
    pub chunk: u32,
    /// Real copy tools run beside the rungs, each once after every ladder run.
    pub anchors: Vec<crate::anchors::Anchor>,
}

/// The whole copy's rung, by its name's start.
fn is_copy(rung: &str) -> bool {
    rung.starts_with("cold → TLS")
}

pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The ladder's own server, saving into `save`.
fn own_server(cfg: &LadderConfig, save: &Path) -> Result<ServerProcess> {
    ServerProcess::start(&ServerOptions {
        bin_dir: &cfg.bin_dir,
        wrap: &cfg.server_wrap,
        args: [
            "--bind",
            &cfg.bind,
            "--port",
            "0",
            "--log",
            "none",
            "--save",
            &save.display().to_string(),
            "--overwrite",
        ]
        .map(String::from)
        .to_vec(),
        stdout: Sink::Null,
        stderr: None,
    })
}

/// Writes ladder.md (with the tools' section where tools ran), ladder.json, ladder.svg and
/// ladder-anchors.json; returns ladder.md.
fn write_out(
    cfg: &LadderConfig,
    runs: &[LadderJson],
    anchored: &[crate::anchors::AnchorRun],
    work: &Path,
) -> Result<String> {
    std::fs::create_dir_all(&cfg.out)?;
    let mut md = markdown(runs, cfg);
    if !cfg.anchors.is_empty() {
        let copy = rungs(runs)
            .into_iter()
            .find(|r| is_copy(&r.name))
            .and_then(|r| Some((r.name, r.rate?, r.cpu?.0)));
        md += &crate::anchors::markdown(
            anchored,
            copy.as_ref().map(|(n, r, c)| (n.as_str(), *r, *c)),
            work,
        );
        write_atomic(
            &cfg.out.join("ladder-anchors.json"),
            serde_json::to_string_pretty(anchored)?.as_bytes(),
        )?;
    }
    write_atomic(&cfg.out.join("ladder.md"), md.as_bytes())?;
    write_atomic(
        &cfg.out.join("ladder.json"),
        serde_json::to_string_pretty(runs)?.as_bytes(),
    )?;
    write_atomic(&cfg.out.join("ladder.svg"), svg(runs).as_bytes())?;
    Ok(md)
}

/// Runs the ladder `reps` times and writes its files; returns ladder.md. Its server saves into
/// `work` (a temporary directory of its own without one).
pub fn run(cfg: &LadderConfig, work: Option<&Path>) -> Result<String> {
    let own_work = tempfile::tempdir()?;
    let save = work.unwrap_or(own_work.path()).join("ladder-save");
    std::fs::create_dir_all(&save)?;
    let own = match &cfg.host {
        Some(_) => None,
        None => Some(own_server(cfg, &save)?),
    };
    let (host, port) = match (&cfg.host, &own) {
        (Some((h, p)), _) => (h.clone(), *p),
        (None, Some(s)) => (cfg.bind.clone(), s.port),
        (None, None) => bail!("no server for the ladder"),
    };
    let client = Client {
        bin_dir: &cfg.bin_dir,
        wrap: &cfg.client_wrap,
        host: &host,
        port,
    };
    let mut runs = Vec::new();
    let want = match cfg.anchors.is_empty() {
        true => 0,
        false => crate::anchors::source_digest(&cfg.file)?,
    };
    let mut anchored = Vec::new();
    for rep in 0..cfg.reps {
        let args = [
            "--chunk".to_owned(),
            cfg.chunk.to_string(),
            "--ladder".to_owned(),
            "--tls".to_owned(),
            cfg.cipher.clone(),
            cfg.file.display().to_string(),
        ];
        match client
            .run(&args)
            .with_context(|| format!("ladder run {}", rep + 1))?
        {
            ClientJson::Ladder(l) => runs.push(l),
            other => bail!("tsclient --ladder printed a {} result", other.mode()),
        }
        eprintln!(
            "tsmatrix: ladder run {} of {}: {}",
            rep + 1,
            cfg.reps,
            runs.last()
                .and_then(|l| l.costliest.clone())
                .unwrap_or_default()
        );
        // Alternating with the ladder's runs, so a drift in the machine falls on both.
        anchored.extend(crate::anchors::run_once(
            &cfg.anchors,
            &cfg.file,
            &save,
            want,
        )?);
    }
    write_out(cfg, &runs, &anchored, work.unwrap_or(own_work.path()))
}

/// One rung's medians over the runs, in the first run's order.
struct RungMedian {
    name: String,
    rate: Option<f64>,
    drop_x: Option<f64>,
    cpu: Option<(f64, f64)>,
    limited_by: String,
    skipped: Option<String>,
}

fn rungs(runs: &[LadderJson]) -> Vec<RungMedian> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .rungs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let all: Vec<_> = runs.iter().filter_map(|l| l.rungs.get(i)).collect();
            let col = |f: &dyn Fn(&tsperf_results::json::RungJson) -> Option<f64>| {
                median(all.iter().filter_map(|r| f(r)).collect())
            };
            let client = col(&|r| r.client_cpu_s_per_gib);
            let server = col(&|r| r.server_cpu_s_per_gib);
            RungMedian {
                name: r.rung.clone(),
                rate: col(&|r| r.mib_per_s),
                drop_x: col(&|r| r.drop_x),
                cpu: client.zip(server),
                limited_by: r
                    .limited_by
                    .map_or_else(|| "—".to_owned(), |l| l.to_string()),
                skipped: (r.status == "skipped").then(|| r.reason.clone().unwrap_or_default()),
            }
        })
        .collect()
}

/// Each stage's median cost over the runs, s/GiB, largest first.
fn stages(runs: &[LadderJson]) -> Vec<(String, f64)> {
    let mut stages: Vec<(String, f64)> = Vec::new();
    if let Some(first) = runs.first() {
        for c in &first.costs {
            let all = runs.iter().filter_map(|l| {
                l.costs
                    .iter()
                    .find(|x| x.stage == c.stage)
                    .map(|x| x.s_per_gib)
            });
            if let Some(m) = median(all.collect()) {
                stages.push((c.stage.clone(), m));
            }
        }
    }
    stages.sort_by(|a, b| b.1.total_cmp(&a.1));
    stages
}

/// ladder.md.
pub fn markdown(runs: &[LadderJson], cfg: &LadderConfig) -> String {
    let mut out = format!(
        "# The file-copy ladder\n\nMade by `scripts/matrix.sh --ladder` on {}, {}: `tsclient \
         --ladder --chunk {}` of `{}` ({} bytes) against a `tsserver --save`, {}, medians. Each rung is \
         a verified transfer adding one stage to the rung it stands on; its drop is that rung's \
         rate over its own.\n\n| rung | MiB/s | drop | CPU s/GiB client / server | limited by |\n\
         |---|---:|---:|---:|---|\n",
        cfg.machine,
        cfg.network,
        cfg.chunk,
        cfg.file.display(),
        runs.first().map_or(0, |l| l.bytes),
        tsperf_results::units::count(runs.len() as u64, "run")
    );
    for r in rungs(runs) {
        out += &match &r.skipped {
            Some(why) => format!("| {} | skipped: {why} | | | |\n", r.name),
            None => format!(
                "| {} | {:.1} | {} | {} | {} |\n",
                r.name,
                r.rate.unwrap_or(0.0),
                r.drop_x.map_or("—".into(), |x| format!("{x:.2}×")),
                r.cpu
                    .map_or(String::new(), |(c, s)| format!("{c:.2} / {s:.2}")),
                r.limited_by
            ),
        };
    }
    let stages = stages(runs);
    if !stages.is_empty() {
        let parts: Vec<String> = stages.iter().map(|(s, t)| format!("{s} {t:.2}")).collect();
        out += &format!(
            "\nEach stage's cost (the time per GiB it adds to the rung it stands on; the first \
             stage's, named by what limited the first rung, is that rung's whole time), \
             medians, s/GiB: {}.\n",
            parts.join(", ")
        );
    }
    let mut lines: Vec<(f64, String)> = runs
        .iter()
        .filter_map(|l| {
            let line = l.costliest.clone()?;
            let copy = l.rungs.iter().find(|r| is_copy(&r.rung))?.mib_per_s?;
            Some((copy, line))
        })
        .collect();
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((_, line)) = lines.get(lines.len() / 2) {
        out += &format!("\nThe median run's closing line: **{line}**.\n");
    }
    out
}

/// ladder.svg: a bar per rung (its median rate), skipped rungs named, the stages' costs below.
pub fn svg(runs: &[LadderJson]) -> String {
    let rows = rungs(runs);
    let most = rows.iter().filter_map(|r| r.rate).fold(1.0_f64, f64::max);
    let (left, width, row) = (330.0, 420.0, 26.0);
    let height = 40.0 + row * rows.len() as f64 + 30.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<text x=\"10\" y=\"20\" font-size=\"14\">\
         The file-copy ladder: each rung's rate, MiB/s (median)</text>\n",
        left + width + 90.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 40.0 + row * i as f64;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            left - 8.0,
            y + 15.0,
            escape(&r.name)
        );
        match r.rate {
            Some(rate) => {
                let w = width * rate / most;
                s += &format!(
                    "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"#4878a8\"/>\n\
                     <text x=\"{:.1}\" y=\"{}\">{rate:.0}</text>\n",
                    row - 6.0,
                    left + w + 4.0,
                    y + 15.0
                );
            }
            None => {
                s += &format!(
                    "<text x=\"{left}\" y=\"{}\" fill=\"#888\">skipped</text>\n",
                    y + 15.0
                );
            }
        }
    }
    let parts: Vec<String> = stages(runs)
        .iter()
        .map(|(stage, t)| format!("{stage} {t:.2}"))
        .collect();
    s += &format!(
        "<text x=\"10\" y=\"{}\">each stage's cost, s per GiB: {}</text>\n",
        height - 12.0,
        escape(&parts.join(", "))
    );
    s + "</svg>\n"
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
