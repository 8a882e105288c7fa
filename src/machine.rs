//! The machine a result came from: enough to tell whether two results can be compared.
//!
//! CPU model and cores, kernel and OS, tsperf's version and commit, and the TCP settings in
//! force (`tcp_rmem`, `tcp_wmem`, `rmem_max`, `wmem_max`, congestion control). iperf3 records only
//! the OS string and its buffer sizes; a loopback number means little without the rest.

use std::fs;

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

impl Machine {
    /// Reads this machine's description; `commit` is the tsperf git commit the caller knows.
    pub fn probe(commit: &str) -> Machine {
        let read = |p: &str| {
            fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        let sysctl = |name: &str| read(&format!("/proc/sys/{}", name.replace('.', "/")));
        let cpuinfo = read("/proc/cpuinfo");
        let os_release = read("/etc/os-release");
        Machine {
            cpu: field(&cpuinfo, "model name")
                .unwrap_or("unknown")
                .to_owned(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
            os: field_eq(&os_release, "PRETTY_NAME")
                .unwrap_or("unknown")
                .to_owned(),
            tsperf: env!("CARGO_PKG_VERSION").to_owned(),
            commit: commit.to_owned(),
            tcp_rmem: squeeze(&sysctl("net.ipv4.tcp_rmem")),
            tcp_wmem: squeeze(&sysctl("net.ipv4.tcp_wmem")),
            rmem_max: sysctl("net.core.rmem_max"),
            wmem_max: sysctl("net.core.wmem_max"),
            congestion_control: sysctl("net.ipv4.tcp_congestion_control"),
        }
    }
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

/// `key : value` lines, as /proc/cpuinfo has them.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
}

/// `KEY="value"` lines, as /etc/os-release has them.
fn field_eq<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim_matches('"'))
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parsers find their keys in the formats /proc and /etc use.
    #[test]
    fn parsers() {
        assert_eq!(
            field(
                "processor\t: 0\nmodel name\t: Fast CPU @ 3GHz\n",
                "model name"
            ),
            Some("Fast CPU @ 3GHz")
        );
        assert_eq!(
            field_eq("NAME=x\nPRETTY_NAME=\"Debian 12\"\n", "PRETTY_NAME"),
            Some("Debian 12")
        );
        assert_eq!(squeeze("4096\t131072  6291456"), "4096 131072 6291456");
    }

    /// On Linux the probe finds a kernel, cores and TCP settings.
    #[test]
    fn probe_reads_this_machine() {
        let m = Machine::probe("abc");
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
        assert_eq!(m.tcp_rmem.split(' ').count(), 3, "{m:?}");
        assert_eq!(m.commit, "abc");
    }
}
