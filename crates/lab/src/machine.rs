//! Probes the machine a result comes from ([`probe`]): its CPU, kernel, OS and TCP settings.

use std::fs;

pub use tsperf_results::machine::Machine;

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
        let m = probe("abc");
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
        assert_eq!(m.tcp_rmem.split(' ').count(), 3, "{m:?}");
        assert_eq!(m.commit, "abc");
    }
}
