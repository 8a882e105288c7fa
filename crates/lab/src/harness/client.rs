//! One `tsclient --json` run, its result read as the typed JSON it prints.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result, bail};

use super::wrapped;
use tsperf_results::json::ClientJson;

/// Runs tsclient against one server.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    /// Where `tsclient` is.
    pub bin_dir: &'a Path,
    /// A command prefix (e.g. `ip netns exec NS`), empty for none.
    pub wrap: &'a [String],
    /// The server's host.
    pub host: &'a str,
    /// The server's port.
    pub port: u16,
}

impl Client<'_> {
    /// Runs `tsclient --host H --port P --json --no-progress ARGS` and returns its result. A
    /// non-zero exit (a refused, failed or unverified transfer) is an error quoting its stderr.
    pub fn run(&self, args: &[String]) -> Result<ClientJson> {
        let out = wrapped(self.wrap, &self.bin_dir.join("tsclient"))
            .args(["--host", self.host, "--port", &self.port.to_string()])
            .args(["--json", "--no-progress"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.bin_dir.join("tsclient").display()))?;
        if !out.status.success() {
            bail!(
                "tsclient {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "tsclient {} printed no result JSON: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout).trim()
            )
        })
    }
}
