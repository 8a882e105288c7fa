//! `tsclient --ladder [FILE]`: a file copy taken apart into rungs, from memory to the far disk,
//! each a verified transfer against one server, each adding one stage to the rung before: the
//! network alone (memory to memory), the source file from the page cache, the source disk
//! (cold), the far disk (buffered, durable, direct), the cipher (TLS; kernel TLS where the
//! kernel offers it), and the whole copy (cold file, TLS, durable far disk). A rung the
//! server or the machine cannot run is skipped with the reason; a rung that fails is kept with
//! its error, and the others still run.
//!
//! What each stage costs is the time per byte it adds to the rung it stands on; the closing
//! line names the stage that costs the whole copy the most ([`Ladder::costliest`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tsperf_proto::SaveMode;
use tsperf_proto::client::ClientError;
use tsperf_proto::tls::Cipher;
use tsperf_results::verdict::LimitedBy;
use tsperf_sys::auth::Key;

use crate::outcome::StreamOutcome;
use crate::progress::Progress;
use crate::spec::{Source, StreamSpec};
use crate::{StreamConfig, StreamFailure, run_stream};

/// The far disk's stage, as the costs name it.
const FAR_DISK: &str = "the far disk";
/// The first rung's stage where the network limited it.
const NETWORK: &str = "the network";
/// The first rung's stage where nothing said what limited it (too short to judge, say).
const UNJUDGED: &str = "the network and both ends";

/// One rung of the ladder: what the transfer adds to the rung before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// The generated stream from memory, as long as the file: the network and both ends' CPU.
    Memory,
    /// The file from the page cache.
    File,
    /// The file from its disk (`--cold`).
    Cold,
    /// The file written by the server to its disk so (`--far-disk`).
    FarDisk(SaveMode),
    /// The file over TLS with this suite (`--tls`).
    Tls(Cipher),
    /// The file over kernel TLS with this suite, where the kernel offers it.
    KernelTls(Cipher),
    /// The whole copy: the file cold, over TLS, written durably by the server.
    Copy(Cipher),
}

impl Rung {
    /// The rungs in order, the encrypted ones with `cipher`. The buffered far disk comes last:
    /// it leaves the server's disk with dirty pages the kernel writes back while later rungs
    /// run (measured: a durable rung after it ran at a third of its rate alone).
    pub fn all(cipher: Cipher) -> Vec<Rung> {
        vec![
            Rung::Memory,
            Rung::File,
            Rung::Cold,
            Rung::FarDisk(SaveMode::Direct),
            Rung::FarDisk(SaveMode::Durable),
            Rung::Tls(cipher),
            Rung::KernelTls(cipher),
            Rung::Copy(cipher),
            Rung::FarDisk(SaveMode::Buffered),
        ]
    }

    /// Its name in the table and the JSON.
    pub fn name(self) -> String {
        match self {
            Rung::Memory => "memory → memory".into(),
            Rung::File => "file → memory".into(),
            Rung::Cold => "cold file → memory".into(),
            Rung::FarDisk(mode) => format!("file → far disk ({})", mode.name()),
            Rung::Tls(c) => format!("file → TLS {} → memory", c.name()),
            Rung::KernelTls(c) => format!("file → kernel TLS {} → memory", c.name()),
            Rung::Copy(c) => format!("cold → TLS {} → durable far disk", c.name()),
        }
    }

    /// The rung it adds a stage to (the drop is measured from it); `None` for the first.
    pub fn base(self) -> Option<Rung> {
        match self {
            Rung::Memory => None,
            Rung::File => Some(Rung::Memory),
            Rung::Cold | Rung::FarDisk(_) | Rung::Tls(_) | Rung::KernelTls(_) => Some(Rung::File),
            Rung::Copy(_) => Some(Rung::Memory),
        }
    }

    /// It can run for a time (`-t`): its file is read again and again. A cold read and a save
    /// are one pass of the file each, so those rungs are sized by it.
    pub fn timed(self) -> bool {
        matches!(
            self,
            Rung::Memory | Rung::File | Rung::Tls(_) | Rung::KernelTls(_)
        )
    }

    /// The stream this rung runs: `base` with its source and its stages.
    fn spec(self, base: &StreamSpec, file: &std::path::Path, len: u64) -> StreamSpec {
        // Written by the server only where the rung asks (a server with `--save` writes every
        // sized file by default; a timed stream is never saved, and asks nothing); timed
        // where the rung can be.
        let (time, omit) = match self.timed() {
            true => (base.time, base.omit),
            false => (None, Duration::ZERO),
        };
        let base = &StreamSpec {
            save: time.is_none().then_some(SaveMode::Discard),
            time,
            omit,
            ..base.clone()
        };
        let on_file = StreamSpec {
            source: Source::File(file.to_owned()),
            ..base.clone()
        };
        match self {
            Rung::Memory => StreamSpec {
                source: Source::Generated(len),
                ..base.clone()
            },
            Rung::File => on_file,
            // The same writes as the TLS rung's, the records sealed by the kernel.
            Rung::KernelTls(c) => StreamSpec {
                tls: Some(c),
                kernel_tls: true,
                ..on_file
            },
            Rung::Cold => StreamSpec {
                cold: true,
                ..on_file
            },
            // Measured and not kept: the server takes no name and keeps no copy.
            Rung::FarDisk(mode) => StreamSpec {
                save: Some(mode),
                measure_save: true,
                ..on_file
            },
            Rung::Tls(c) => StreamSpec {
                tls: Some(c),
                ..on_file
            },
            Rung::Copy(c) => StreamSpec {
                cold: true,
                tls: Some(c),
                save: Some(SaveMode::Durable),
                measure_save: true,
                ..on_file
            },
        }
    }
}

/// What became of a rung.
#[derive(Debug, Clone)]
pub enum Step {
    /// It ran and was verified.
    Ran(Box<StreamOutcome>),
    /// It could not run here, and why (the server does not offer it, the machine cannot).
    Skipped(String),
    /// It ran and failed: not verified, or cut off.
    Failed(Arc<StreamFailure>),
}

/// The ladder's rungs, in order, and what came of each.
#[derive(Debug)]
pub struct Ladder {
    /// The file the rungs copy (its path as given, or the generated one's).
    pub file: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Each rung and its step: with several runs, the run of median rate (a failure where
    /// any run failed).
    pub rungs: Vec<(Rung, Step)>,
    /// Every run's rungs, in the order they ran (the rungs alternating: run 1's, then run
    /// 2's, ...); empty for a single run.
    pub runs: Vec<Vec<(Rung, Step)>>,
    /// The time each rung that can repeat its file ran for (`-t`); `None`: one pass each.
    pub time: Option<Duration>,
}

/// What to run: the streams' settings, the file (a temporary of `--bytes` generated text when
/// none was given), the suite of the encrypted rungs.
#[derive(Debug, Clone, PartialEq)]
pub struct LadderSpec {
    /// The settings every rung starts from (host, port, chunk, I/O model, ...).
    pub base: StreamSpec,
    /// The file to copy; `None`: the generated text of `bytes`, written to a temporary file.
    pub file: Option<PathBuf>,
    /// The size of the generated file.
    pub bytes: u64,
    /// The suite of the encrypted rungs.
    pub cipher: Cipher,
    /// Runs of the whole ladder, one after another, so that the rungs alternate; each rung's
    /// median is reported (`--runs`).
    pub runs: u32,
}

/// Runs every rung in order against one server.
pub fn run_ladder(
    spec: &LadderSpec,
    auth: Option<Arc<Key>>,
    progress: &mut Progress,
) -> anyhow::Result<Ladder> {
    // A generated file lives on the disk the temporary directory is on, and goes at the end.
    let made = match &spec.file {
        Some(_) => None,
        None => {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join("tsperf-ladder.bin");
            tsperf_sys::testdata::generate(&path, spec.bytes)?;
            Some((dir, path))
        }
    };
    let file = match (&spec.file, &made) {
        (Some(f), _) => f.clone(),
        (None, Some((_, p))) => p.clone(),
        (None, None) => unreachable!("a file was given or made"),
    };
    let bytes = std::fs::metadata(&file)
        .map_err(|e| anyhow::anyhow!("cannot read '{}': {e}", file.display()))?
        .len();
    let mut runs = Vec::new();
    'runs: for _ in 0..spec.runs.max(1) {
        let mut rungs = Vec::new();
        for rung in Rung::all(spec.cipher) {
            let step = match rung {
                Rung::KernelTls(_) if tsperf_sys::ktls::offered().is_err() => {
                    Step::Skipped(tsperf_sys::ktls::offered().unwrap_err())
                }
                _ => run_rung(rung, spec, &file, bytes, auth.clone(), progress),
            };
            rungs.push((rung, step));
            if crate::interrupt::requested() {
                runs.push(rungs);
                break 'runs;
            }
        }
        runs.push(rungs);
    }
    let rungs = median_steps(&runs);
    if runs.len() == 1 {
        runs.clear();
    }
    Ok(Ladder {
        file,
        bytes,
        rungs,
        runs,
        time: spec.base.time,
    })
}

/// Each rung's step over the runs: a failure where any run failed, else the run of median
/// rate, else (skipped in every run) the first run's reason.
fn median_steps(runs: &[Vec<(Rung, Step)>]) -> Vec<(Rung, Step)> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let rate = |s: &Step| match s {
        Step::Ran(o) => {
            let (bytes, time) = o.measured.rated();
            Some(bytes as f64 / time.as_secs_f64().max(1e-9))
        }
        _ => None,
    };
    first
        .iter()
        .enumerate()
        .map(|(i, (rung, skipped))| {
            let steps: Vec<&Step> = runs.iter().filter_map(|r| r.get(i).map(|s| &s.1)).collect();
            if let Some(failed) = steps.iter().find(|s| matches!(s, Step::Failed(_))) {
                return (*rung, (*failed).clone());
            }
            let mut ran: Vec<(f64, &Step)> =
                steps.iter().filter_map(|s| Some((rate(s)?, *s))).collect();
            ran.sort_by(|a, b| a.0.total_cmp(&b.0));
            match ran.get(ran.len() / 2) {
                Some((_, step)) => (*rung, (*step).clone()),
                None => (*rung, skipped.clone()),
            }
        })
        .collect()
}

/// Runs one rung: its outcome, or why it could not run here.
fn run_rung(
    rung: Rung,
    spec: &LadderSpec,
    file: &std::path::Path,
    bytes: u64,
    auth: Option<Arc<Key>>,
    progress: &mut Progress,
) -> Step {
    let stream = rung.spec(&spec.base, file, bytes);
    let cfg = match StreamConfig::prepare(&stream, auth) {
        Ok((cfg, _)) => cfg,
        Err(e) => return Step::Skipped(format!("{e:#}")),
    };
    if matches!(
        rung,
        Rung::File | Rung::Tls(_) | Rung::KernelTls(_) | Rung::FarDisk(_)
    ) {
        // From the page cache: read once, so a cold rung before leaves nothing to the disk
        // (through a small buffer: the file may be larger than memory).
        if let Ok(mut f) = std::fs::File::open(file) {
            let _ = std::io::copy(&mut f, &mut std::io::sink());
        }
    }
    match run_stream(&cfg, progress) {
        Ok(o) if o.verified() => Step::Ran(Box::new(o)),
        Ok(o) => Step::Failed(Arc::new(StreamFailure {
            name: o.name.clone(),
            bytes: Some(o.measured.bytes),
            sent: o.measured.bytes,
            acked: None,
            elapsed: Some(o.measured.elapsed),
            intervals: Vec::new(),
            interrupted: o.interrupted,
            error: anyhow::anyhow!("not verified: the digests or the byte counts differ"),
        })),
        Err(f) => match not_here(&f) {
            Some(why) => Step::Skipped(why),
            None => Step::Failed(Arc::new(f)),
        },
    }
}

/// Why a rung that failed could not run here at all: the server does not offer what it asks
/// (no `--save`, `--no-tls`), or the machine cannot (a file in memory read cold, a directory
/// that takes no `O_DIRECT`).
fn not_here(f: &StreamFailure) -> Option<String> {
    let refused = f.error.chain().find_map(|c| {
        c.downcast_ref::<crate::session::Refused>()
            .map(|r| (r.code, r.reason.clone()))
            .or_else(|| match c.downcast_ref() {
                Some(ClientError::Refused { code, reason }) => Some((*code, reason.clone())),
                _ => None,
            })
    });
    match refused {
        Some((tsperf_proto::RefuseCode::Unoffered | tsperf_proto::RefuseCode::Save, why)) => {
            Some(format!("the server: {why}"))
        }
        _ => f
            .error
            .chain()
            .find_map(|c| c.downcast_ref::<tsperf_sys::cold::NotCold>())
            .map(|why| why.0.clone()),
    }
}

impl Ladder {
    /// The outcome of `rung`, where it ran.
    pub fn ran(&self, rung: Rung) -> Option<&StreamOutcome> {
        self.rungs.iter().find_map(|(r, s)| match s {
            Step::Ran(o) if *r == rung => Some(&**o),
            _ => None,
        })
    }

    /// A rung's time per MiB, where it ran.
    fn per_mib(&self, rung: Rung) -> Option<f64> {
        let o = self.ran(rung)?;
        let (bytes, time) = o.measured.rated();
        (bytes > 0).then(|| time.as_secs_f64() / (bytes as f64 / (1 << 20) as f64))
    }

    /// Its rate, MiB/s.
    pub fn rate(&self, rung: Rung) -> Option<f64> {
        self.per_mib(rung).map(|t| 1.0 / t)
    }

    /// Every rung verified or skipped: none failed.
    pub fn verified(&self) -> bool {
        self.rungs
            .iter()
            .all(|(_, s)| !matches!(s, Step::Failed(_)))
    }

    /// The stages' costs to the whole copy ([`stage_costs`] of the rungs that ran).
    pub fn costs(&self) -> Vec<(String, f64)> {
        let cipher = self.rungs.iter().find_map(|(r, _)| match r {
            Rung::Tls(c) => Some(*c),
            _ => None,
        });
        let first = self.ran(Rung::Memory).map(|o| o.verdict().limited_by);
        stage_costs(|r| self.per_mib(r), cipher, first)
    }

    /// The closing line: the copy's rate, the stage that costs it most and its share, what the
    /// network carries.
    pub fn costliest(&self) -> Option<String> {
        let cipher = self.rungs.iter().find_map(|(r, _)| match r {
            Rung::Copy(c) => Some(*c),
            _ => None,
        })?;
        let copy = self.rate(Rung::Copy(cipher))?;
        let net = self.rate(Rung::Memory)?;
        let first = self.ran(Rung::Memory).map(|o| o.verdict().limited_by);
        let costs = self.costs();
        let all: f64 = costs.iter().map(|(_, t)| t).sum();
        let (mut stage, t) = costs.into_iter().next().filter(|_| all > 0.0)?;
        if stage == FAR_DISK
            && let Some(o) = self.ran(Rung::FarDisk(SaveMode::Durable))
        {
            let split = o.receiver.split;
            let disk = split.save_ns + split.fsync_ns;
            if disk > 0 {
                let pct = 100.0 * split.fsync_ns as f64 / disk as f64;
                stage = format!("{FAR_DISK} (its fsync {pct:.0}% of its time there)");
            }
        }
        let carries = match first_stage(first) {
            NETWORK => format!("the network carries {net:.0} MiB/s"),
            UNJUDGED => format!("memory to memory runs at {net:.0} MiB/s"),
            other => format!("memory to memory runs at {net:.0} MiB/s, limited by {other}"),
        };
        // The stages overlap in a copy (the disk reads while the network sends), so a stage's
        // share is of what the stages cost together, not of the copy's time.
        Some(format!(
            "the copy runs at {copy:.0} MiB/s: {stage} costs it most ({:.2} s per GiB, {:.0}% of \
             what the stages cost together); {carries}",
            t * 1024.0,
            100.0 * t / all
        ))
    }
}

/// The first rung's stage, named by what limited it: the network, or, where a transfer from
/// memory to memory waits on something else (a CPU on one machine or under a quota, a log),
/// that; where nothing said (a rung too short to judge), the network and both ends together.
pub fn first_stage(limited_by: Option<LimitedBy>) -> &'static str {
    match limited_by {
        Some(LimitedBy::Network) => NETWORK,
        Some(LimitedBy::SenderCpu) => "the sender's CPU",
        Some(LimitedBy::ReceiverCpu) => "the receiver's CPU",
        Some(LimitedBy::SharedCpu) => "the CPU both ends share",
        Some(LimitedBy::ReceiverLog) => "the server's log",
        Some(LimitedBy::SenderBuffer) => "the sender's socket buffer",
        _ => UNJUDGED,
    }
}

/// The stages' costs to the whole copy, each its time per MiB over the rung it stands on,
/// largest first, from each rung's time per MiB (`None`: it did not run), the suite of the TLS
/// rung and what limited the first rung: the first rung's whole time (the network, or the CPU
/// that limited it: [`first_stage`]), the source (file and disk, over the first rung), the
/// cipher and the far disk (writes and fsync, durably; each over the file rung). Stages whose
/// rungs did not run are left out.
pub fn stage_costs(
    per_mib: impl Fn(Rung) -> Option<f64>,
    cipher: Option<Cipher>,
    first: Option<LimitedBy>,
) -> Vec<(String, f64)> {
    let file = per_mib(Rung::File);
    let extra = |rung: Rung| Some((per_mib(rung)? - file?).max(0.0));
    let mut costs = Vec::new();
    if let Some(net) = per_mib(Rung::Memory) {
        costs.push((first_stage(first).to_owned(), net));
        let source = per_mib(Rung::Cold).or(file).map(|t| (t - net).max(0.0));
        if let Some(t) = source {
            costs.push(("the source disk".to_owned(), t));
        }
    }
    if let Some(t) = cipher.and_then(|c| extra(Rung::Tls(c))) {
        costs.push(("the cipher".to_owned(), t));
    }
    if let Some(t) = extra(Rung::FarDisk(SaveMode::Durable)) {
        costs.push((FAR_DISK.to_owned(), t));
    }
    costs.sort_by(|a, b| b.1.total_cmp(&a.1));
    costs
}

#[cfg(test)]
mod tests;

/// CPU seconds per GiB moved, from a CPU time and the bytes.
pub fn cpu_per_gib(cpu: Duration, bytes: u64) -> f64 {
    cpu.as_secs_f64() / (bytes.max(1) as f64 / (1u64 << 30) as f64)
}
