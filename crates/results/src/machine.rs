//! The machine a result came from: enough to tell whether two results can be compared.
//!
//! CPU model and cores, kernel and OS, tsperf's version and commit, and the TCP settings in
//! force (`tcp_rmem`, `tcp_wmem`, `rmem_max`, `wmem_max`, congestion control). iperf3 records only
//! the OS string and its buffer sizes; a loopback number means little without the rest.

use serde::{Deserialize, Serialize};

/// What a result names about where it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU's model name.
    pub cpu: String,
    /// The cores the process may run on.
    pub cores: usize,
    /// The kernel's release.
    pub kernel: String,
    /// The OS's pretty name.
    pub os: String,
    /// tsperf's version.
    pub tsperf: String,
    /// tsperf's git commit, as the caller knew it.
    pub commit: String,
    /// `net.ipv4.tcp_rmem`: min, default, max receive buffer.
    pub tcp_rmem: String,
    /// `net.ipv4.tcp_wmem`: min, default, max send buffer.
    pub tcp_wmem: String,
    /// `net.core.rmem_max`: the most SO_RCVBUF may ask for.
    pub rmem_max: String,
    /// `net.core.wmem_max`: the most SO_SNDBUF may ask for.
    pub wmem_max: String,
    /// `net.ipv4.tcp_congestion_control`.
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
