//! A `tsserver` started for a measurement, killed (with its tmux session, if any) when dropped.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::{START_TIMEOUT, wrapped};

/// Where the server's stdout goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Discarded.
    Null,
    /// A file (created or truncated).
    File(PathBuf),
    /// A pseudo-terminal read by a terminal emulator: tmux in a detached session of this name
    /// when installed, else `script` (which copies it to /dev/null).
    /// A pseudo-terminal: read by tmux if installed, else by `script`.
    Pty {
        /// The tmux session to read it in, when tmux is there.
        tmux_session: String,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ServerOptions<'a> {
    /// Where `tsserver` is.
    pub bin_dir: &'a Path,
    /// A command prefix (e.g. `ip netns exec NS`), empty for none.
    pub wrap: &'a [String],
    /// The arguments after `tsserver` (its port should be 0, so it picks a free one).
    pub args: Vec<String>,
    /// Where its stdout goes.
    pub stdout: Sink,
    /// A file for its stderr; `None` reads stderr through a pipe (needs no file, not possible
    /// with a pty).
    pub stderr: Option<PathBuf>,
}

/// A running server and the port it listens on.
pub struct ServerProcess {
    child: Option<Child>,
    tmux: Option<String>,
    /// The port it listens on.
    pub port: u16,
    /// Where its stdout went, for a person: `a file`, `a pseudo-terminal read by tmux ...`.
    pub stdout_is: String,
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The port in a `tsserver: listening on ADDR:PORT` line (`ADDR` may be `[v6]`).
pub fn listening_port(line: &str) -> Option<u16> {
    line.trim()
        .strip_prefix("tsserver: listening on ")?
        .rsplit(':')
        .next()?
        .trim()
        .parse()
        .ok()
}

impl ServerProcess {
    /// Starts the server and waits (at most [`START_TIMEOUT`]) for its listening line.
    pub fn start(o: &ServerOptions) -> Result<ServerProcess> {
        let program = o.bin_dir.join("tsserver");
        if let Sink::Pty { tmux_session } = &o.stdout {
            let err = o
                .stderr
                .clone()
                .context("a server on a pty needs a file for its stderr")?;
            return Self::start_on_pty(o, &program, tmux_session, &err);
        }
        let stdout: Stdio = match &o.stdout {
            Sink::File(path) => File::create(path)
                .with_context(|| format!("cannot create '{}'", path.display()))?
                .into(),
            _ => Stdio::null(),
        };
        let stderr: Stdio = match &o.stderr {
            Some(path) => File::create(path)
                .with_context(|| format!("cannot create '{}'", path.display()))?
                .into(),
            None => Stdio::piped(),
        };
        let mut child = wrapped(o.wrap, &program)
            .args(&o.args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let port = match &o.stderr {
            Some(path) => port_from_file(path, Some(&mut child)),
            None => port_from_pipe(&mut child),
        };
        let mut server = ServerProcess {
            child: Some(child),
            tmux: None,
            port: 0,
            stdout_is: match o.stdout {
                Sink::File(_) => "a file".into(),
                _ => "nowhere (discarded)".into(),
            },
        };
        server.port = port?;
        Ok(server)
    }

    fn start_on_pty(
        o: &ServerOptions,
        program: &Path,
        session: &str,
        err: &Path,
    ) -> Result<ServerProcess> {
        let mut words: Vec<String> = o.wrap.iter().map(|w| shell_quote(w)).collect();
        words.push(shell_quote(&program.display().to_string()));
        words.extend(o.args.iter().map(|a| shell_quote(a)));
        let cmd = format!(
            "exec {} 2>{}",
            words.join(" "),
            shell_quote(&err.display().to_string())
        );
        let tmux = Command::new("tmux")
            .args(["new-session", "-d", "-s", session, "-x", "200", "-y", "50"])
            .arg(&cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if tmux.is_ok_and(|s| s.success()) {
            let mut server = ServerProcess {
                child: None,
                tmux: Some(session.to_owned()),
                port: 0,
                stdout_is: "a pseudo-terminal read by tmux (a terminal emulator)".into(),
            };
            server.port = port_from_file(err, None)?;
            return Ok(server);
        }
        let child = Command::new("script")
            .args(["-qfc", &cmd, "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("neither tmux nor script could start the pty server")?;
        let mut server = ServerProcess {
            child: Some(child),
            tmux: None,
            port: 0,
            stdout_is: "a pseudo-terminal read by script (to /dev/null)".into(),
        };
        server.port = port_from_file(err, server.child.as_mut())?;
        Ok(server)
    }

    /// The server's process id, when it is our child (not when tmux started it).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn proc_file(&self, name: &str) -> Result<String> {
        let pid = self.pid().context("the server is not our child")?;
        fs::read_to_string(format!("/proc/{pid}/{name}"))
            .with_context(|| format!("cannot read /proc/{pid}/{name}"))
    }

    /// A `kB` field of `/proc/PID/status`, e.g. `VmRSS:` or `VmHWM:`.
    pub fn status_kib(&self, key: &str) -> Result<u64> {
        self.proc_file("status")?
            .lines()
            .find_map(|l| {
                l.strip_prefix(key)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .with_context(|| format!("no {key} in the server's /proc status"))
    }

    /// User plus system CPU of every thread, live or ended, in seconds.
    pub fn cpu_s(&self) -> Result<f64> {
        super::cpu::process_cpu_s(self.pid().context("the server is not our child")?)
    }

    /// CPU of the server's live threads so far, nanosecond resolution
    /// ([`super::cpu::live_threads_cpu_s`]): a baseline for [`ServerProcess::stop_cpu_s`].
    pub fn live_cpu_s(&self) -> Result<f64> {
        super::cpu::live_threads_cpu_s(self.pid().context("the server is not our child")?)
    }

    /// Stops the server and returns all the CPU it used, from the kernel's account when it is
    /// reaped (`wait4`, microseconds, every thread ended or not).
    pub fn stop_cpu_s(mut self) -> Result<f64> {
        super::cpu::reap(self.child.take().context("the server is not our child")?)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(session) = &self.tmux {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", session])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Waits for the listening line in `err`, giving up early if `child` exits.
fn port_from_file(err: &Path, mut child: Option<&mut Child>) -> Result<u16> {
    let end = Instant::now() + START_TIMEOUT;
    while Instant::now() < end {
        let text = fs::read_to_string(err).unwrap_or_default();
        if let Some(port) = text.lines().find_map(listening_port) {
            return Ok(port);
        }
        if let Some(status) = child
            .as_deref_mut()
            .map(Child::try_wait)
            .transpose()?
            .flatten()
        {
            bail!(
                "tsserver exited ({status}) before listening: {}",
                text.trim()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    bail!(
        "tsserver did not start within {} s: {}",
        START_TIMEOUT.as_secs(),
        fs::read_to_string(err).unwrap_or_default().trim()
    )
}

/// Reads stderr on a thread of its own (drained for the server's life, so it never blocks on
/// a full pipe) and waits for the listening line.
fn port_from_pipe(child: &mut Child) -> Result<u16> {
    let stderr = child.stderr.take().context("no stderr from tsserver")?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("tsserver-stderr".into())
        .spawn(move || {
            let mut found = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !found {
                    found = listening_port(&line).is_some();
                    let _ = tx.send(line);
                }
            }
        })
        .context("cannot start a thread to read tsserver's stderr")?;
    let end = Instant::now() + START_TIMEOUT;
    let mut said = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => match listening_port(&line) {
                Some(port) => return Ok(port),
                None => said.push(line),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait()?;
                bail!(
                    "tsserver exited ({status}) before listening: {}",
                    said.join("\n")
                )
            }
            Err(mpsc::RecvTimeoutError::Timeout) => bail!(
                "tsserver did not start within {} s: {}",
                START_TIMEOUT.as_secs(),
                said.join("\n")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The port comes from the listening line, IPv6 addresses included.
    #[test]
    fn listening_lines() {
        assert_eq!(
            listening_port("tsserver: listening on 127.0.0.1:7433"),
            Some(7433)
        );
        assert_eq!(
            listening_port("tsserver: listening on [::]:41000\n"),
            Some(41000)
        );
        assert_eq!(listening_port("tsserver: warning: something"), None);
    }
}
