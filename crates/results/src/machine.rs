//! The machine a result came from: enough to tell whether two results can be compared.
//!
//! CPU model and cores, kernel and OS, tsperf's version and commit, and the TCP settings in
//! force (`tcp_rmem`, `tcp_wmem`, `rmem_max`, `wmem_max`, congestion control). iperf3 records only
//! the OS string and its buffer sizes; a loopback number means little without the rest.

use serde::{Deserialize, Serialize};

/// What a result names about where it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub os: String,
    pub tsperf: String,
    pub commit: String,
    pub tcp_rmem: String,
    pub tcp_wmem: String,
    pub rmem_max: String,
    pub wmem_max: String,
    pub congestion_control: String,
}

impl std::fmt::Display for Machine {
    /// The line a report opens with: `AMD EPYC (2 cores), kernel 6.1; tsperf 0.1.0 (commit abc)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} cores), kernel {}; tsperf {} (commit {})",
            self.cpu, self.cores, self.kernel, self.tsperf, self.commit
        )
    }
}
