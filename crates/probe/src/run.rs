//! One probe run: tsclient as a child process, cut off at the scrape's deadline.
//!
//! A child and not a thread: a run that goes wrong cannot take the exporter with it, and
//! tsclient's own handling of SIGINT is what keeps a cut-off run's figures: at the deadline it
//! gets SIGINT and prints the JSON of what it measured so far (exit 130); a child that has not
//! ended a moment later is killed.

use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tsperf_metrics::probe::{Failure, Figures, Probe};
use tsperf_results::json::ClientOutput;

use crate::params::Spec;

/// How long a child has, after its SIGINT, to print what it measured.
pub const AFTER_INTERRUPT: Duration = Duration::from_millis(400);

/// Runs `spec` with the tsclient at `tsclient`, answered by `deadline`: the child is
/// interrupted [`AFTER_INTERRUPT`] before it, so that what it prints still comes in time.
pub fn run(tsclient: &Path, spec: &Spec, deadline: Instant) -> Probe {
    let started = Instant::now();
    let mut probe = match spawn(tsclient, spec) {
        Ok(child) => finish(child, deadline),
        Err(e) => Probe {
            failure: Some(Failure {
                kind: "internal",
                reason: format!("cannot run {}: {e}", tsclient.display()),
            }),
            ..Probe::default()
        },
    };
    probe.duration = started.elapsed();
    probe
}

fn spawn(tsclient: &Path, spec: &Spec) -> std::io::Result<Child> {
    Command::new(tsclient)
        .args(spec.args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// What one of the child's pipes held when it closed.
fn drain(mut pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        // At most a few MiB: a probe's JSON is kilobytes, its intervals off.
        let _ = (&mut pipe).take(8 << 20).read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

fn finish(mut child: Child, deadline: Instant) -> Probe {
    let out = drain(child.stdout.take().expect("piped"));
    let err = drain(child.stderr.take().expect("piped"));
    let left = deadline
        .saturating_duration_since(Instant::now())
        .saturating_sub(AFTER_INTERRUPT);
    let (stdout, cut) = match out.recv_timeout(left) {
        Ok(text) => (text, false),
        Err(_) => {
            interrupt(&child);
            let text = out.recv_timeout(AFTER_INTERRUPT).unwrap_or_default();
            (text, true)
        }
    };
    let _ = child.kill();
    let status = child.wait().ok();
    // Killed, its stderr has closed: this is at once.
    let stderr = err.recv_timeout(AFTER_INTERRUPT).unwrap_or_default();
    judge(&stdout, &stderr, status.and_then(|s| s.code()), cut)
}

/// SIGINT to the child: tsclient prints what it measured and exits 130.
fn interrupt(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on our own child's pid (not yet reaped: we wait for it after), with
        // a valid signal number; it touches no memory.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
    }
}

/// The probe of what the child printed and how it ended.
pub fn judge(stdout: &str, stderr: &str, code: Option<i32>, cut: bool) -> Probe {
    let parsed = ClientOutput::parse(stdout.trim());
    let figures = parsed.as_ref().ok().map(Figures::of);
    let error = figures.as_ref().and_then(|f| f.error.clone());
    let failure = match (&figures, code) {
        _ if cut => Some(Failure {
            kind: "timeout",
            reason: "cut off at the scrape's deadline: what it measured until then is below \
                     (raise scrape_timeout, or ask for fewer bytes or a shorter time)"
                .into(),
        }),
        (Some(f), Some(0)) if f.verified => None,
        (Some(f), Some(0)) => Some(Failure {
            kind: "not-verified",
            reason: error.unwrap_or_else(|| format!("the {} run was not verified", f.mode)),
        }),
        (_, Some(2)) => Some(Failure {
            kind: "bad-request",
            reason: error.unwrap_or_else(|| first_line(stderr)),
        }),
        (Some(f), _) if !f.verified && f.bytes.is_some() && error.is_none() => Some(Failure {
            kind: "not-verified",
            reason: first_line(stderr),
        }),
        _ => Some(Failure {
            kind: "failed",
            reason: error.unwrap_or_else(|| match first_line(stderr) {
                l if l.is_empty() => format!("tsclient ended with {code:?} and printed nothing"),
                l => l,
            }),
        }),
    };
    Probe {
        figures,
        duration: Duration::ZERO,
        failure,
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit code and the JSON together decide the kind of failure.
    #[test]
    fn how_a_run_ended_is_judged() {
        let failed = r#"{"tsperf":"0","mode":"stream","error":"cannot connect to h:1: refused"}"#;
        let p = judge(failed, "", Some(1), false);
        let f = p.failure.unwrap();
        assert_eq!(
            (f.kind, f.reason.as_str()),
            ("failed", "cannot connect to h:1: refused")
        );
        let usage = r#"{"tsperf":"0","mode":"stream","error":"--io 'x': no","usage":true}"#;
        assert_eq!(
            judge(usage, "", Some(2), false).failure.unwrap().kind,
            "bad-request"
        );
        let f = judge("", "tsclient: boom\n", Some(101), false)
            .failure
            .unwrap();
        assert_eq!((f.kind, f.reason.as_str()), ("failed", "tsclient: boom"));
        let f = judge("", "", None, true).failure.unwrap();
        assert_eq!(f.kind, "timeout");
        let f = judge("", "", Some(9), false).failure.unwrap();
        assert!(f.reason.contains("printed nothing"), "{f:?}");
    }

    /// A child that never ends is cut off at the deadline, and the probe keeps to it.
    #[test]
    fn a_child_that_hangs_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("tsclient");
        std::fs::write(&fake, "#!/bin/sh\nexec sleep 3600\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let spec = Spec::parse(&[("target".into(), "h".into())]).unwrap();
        // It would sleep an hour: the probe returning at all is the cut.
        let p = run(&fake, &spec, Instant::now() + Duration::from_millis(300));
        assert_eq!(p.failure.unwrap().kind, "timeout");
        let p = run(&dir.path().join("missing"), &spec, Instant::now());
        assert_eq!(p.failure.unwrap().kind, "internal");
    }
}
