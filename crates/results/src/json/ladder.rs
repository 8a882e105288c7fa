//! `tsclient --ladder --json`: each rung of a file copy with the same fields as a single run,
//! the drop from the rung it stands on, and the stage that costs the copy most.

use serde::{Deserialize, Serialize};

use super::StreamEntry;
use crate::verdict::LimitedBy;

/// The ladder's one object (`mode: "ladder"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LadderJson {
    /// The version of the tsclient that wrote this.
    pub tsperf: String,
    /// The file the rungs copied (a temporary of generated text when none was given).
    pub file: String,
    /// Its size.
    pub bytes: u64,
    /// Each rung, in order.
    pub rungs: Vec<RungJson>,
    /// Each stage's cost, seconds per GiB it adds to the rung it stands on, largest first.
    pub costs: Vec<StageCost>,
    /// The closing line: the copy's rate and the stage that costs it most (`null` where the
    /// rungs it needs did not run).
    pub costliest: Option<String>,
    /// Every rung ran verified or was skipped with its reason: none failed.
    pub verified: bool,
    /// With `--runs N` (N > 1): every run's rungs, in the order they ran; `rungs` then holds
    /// each rung's run of median rate (a failure where any run failed). Absent for one run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Vec<RungJson>>,
}

/// One rung.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungJson {
    /// What it runs (`memory → memory`, `cold file → memory`, ...).
    pub rung: String,
    /// The rung it stands on, its drop measured from it.
    pub base: Option<String>,
    /// `ran`, `skipped` or `failed`.
    pub status: String,
    /// Why it was skipped, or how it failed.
    pub reason: Option<String>,
    /// Its rate, MiB/s.
    pub mib_per_s: Option<f64>,
    /// The base rung's rate over this one's (× slower).
    pub drop_x: Option<f64>,
    /// The base rung's rate less this one's, MiB/s.
    pub drop_mib_per_s: Option<f64>,
    /// The client's CPU per GiB, s.
    pub client_cpu_s_per_gib: Option<f64>,
    /// The server's CPU per GiB, s.
    pub server_cpu_s_per_gib: Option<f64>,
    /// What limited it.
    pub limited_by: Option<LimitedBy>,
    /// The run, as a single run prints it (where it ran or failed).
    pub run: Option<StreamEntry>,
}

/// A stage's cost to the copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageCost {
    /// The stage (`the network`, `the source disk`, `the cipher`, `the far disk's fsync`).
    pub stage: String,
    /// Seconds per GiB it adds.
    pub s_per_gib: f64,
}
