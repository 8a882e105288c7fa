//! The flag reference, made from the clap definitions themselves so it cannot drift from the
//! flags: a man page per program (clap_mangen) and its completions for bash, zsh and fish
//! (clap_complete). `tsdocs` writes them under `docs/` ([`write()`]); `tsdocs --check` (and a
//! test) fails when the committed ones differ from what the flags make now ([`stale`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Parser;
use clap_complete::Shell;

use crate::cli;

/// The shells completions are made for.
pub const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Every program's command-line definition, the order the man pages list them in.
pub fn commands() -> Vec<clap::Command> {
    vec![
        cli::tsclient::command(),
        cli::tsserver::command(),
        cli::tsgen::command(),
        cli::tsmatrix::command(),
        cli::tsreport::command(),
        cli::tsprobe::command(),
        <Args as clap::CommandFactory>::command(),
    ]
    .into_iter()
    // The pages name the release, not the commit: they change when the flags do, not with
    // every commit.
    .map(|c| c.version(env!("CARGO_PKG_VERSION")))
    .collect()
}

/// Every generated file: its path under the docs directory (`man/NAME.1`,
/// `completions/NAME.bash`, `completions/_NAME`, `completions/NAME.fish`) and its bytes.
pub fn files() -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut out = Vec::new();
    for cmd in commands() {
        let name = cmd.get_name().to_owned();
        let page =
            man_page(&cmd).with_context(|| format!("cannot render the man page of {name}"))?;
        out.push((PathBuf::from("man").join(format!("{name}.1")), page));
        for shell in SHELLS {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), &name, &mut script);
            let file = clap_complete::Generator::file_name(&shell, &name);
            out.push((PathBuf::from("completions").join(file), script));
        }
    }
    Ok(out)
}

/// Examples per program: the command and what it does.
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "tsclient",
        &[
            (
                "tsclient --chunk 10240 --nonblocking file.txt",
                "Stream file.txt to a tsserver on this host in 10240-byte writes over a mio non-blocking socket; the clock stops when the server has checksummed every byte.",
            ),
            (
                "tsclient --host 198.18.0.1 --chunk 102 testdata/tsl.txt",
                "The field report's smallest chunk, to a server on another host.",
            ),
            (
                "tsclient --latency --count 1000 --framing split",
                "Ask the server for its clock 1000 times, the length prefix and body in two writes: with Nagle's algorithm on, each round trip waits for a delayed ACK each way (at least 40 ms each on Linux: a round trip of about 88 ms on loopback), and the summary says so.",
            ),
            (
                "tsclient --json --chunk 1024 file.txt",
                "One JSON object on stdout instead of the human report.",
            ),
        ],
    ),
    (
        "tsserver",
        &[
            (
                "tsserver --log none",
                "Listen on every interface, port 7433, and log nothing per read.",
            ),
            (
                "tsserver --log stdout",
                "One line per read to the screen, as the field report's server printed: slow on purpose.",
            ),
            (
                "tsserver --log file --log-file /tmp/tsserver.log",
                "The same lines, buffered into a file.",
            ),
            (
                "tsserver --allow-client-log",
                "Let each client pick its transfer's log sink (how the grid runs against a server on another host).",
            ),
        ],
    ),
    (
        "tsgen",
        &[
            (
                "tsgen testdata/tsl.txt",
                "The field report's 36 MiB test file.",
            ),
            (
                "tsgen --size 4MiB testdata/tsl-quick.txt",
                "The quick grid's file.",
            ),
        ],
    ),
    (
        "tsmatrix",
        &[(
            "scripts/matrix.sh --quick",
            "The grid is run through scripts/matrix.sh, which builds the binaries, makes the test file and starts the servers.",
        )],
    ),
    (
        "tsreport",
        &[(
            "tsreport results",
            "Render results/matrix.md, matrix.csv and the charts again from results/runs.jsonl.",
        )],
    ),
    (
        "tsprobe",
        &[
            (
                "tsprobe --listen :9874",
                "Serve Prometheus's scrapes; its scrape job is in /usr/share/doc/tsperf/examples/prometheus.yml.",
            ),
            (
                "curl 'http://localhost:9874/probe?target=far-host&bytes=64MiB'",
                "One verified 64 MiB transfer to far-host's tsserver, answered as metrics.",
            ),
            (
                "curl 'http://localhost:9874/probe?target=far-host&latency=1000'",
                "A latency run of 1000 clock queries: tsperf_latency_p50_seconds and p99.",
            ),
        ],
    ),
    (
        "tsdocs",
        &[
            (
                "tsdocs",
                "Write docs/man and docs/completions from the flags.",
            ),
            ("tsdocs --check", "Fail if the committed ones are stale."),
        ],
    ),
];

/// Each program's exit codes: the code and when.
const EXIT_STATUS: &[(&str, &[(&str, &str)])] = &[
    (
        "tsclient",
        &[
            (
                "0",
                "Every stream verified (the server counted and checksummed every byte and the digests agree), the latency run answered, or every ladder rung ran or was skipped with its reason.",
            ),
            (
                "1",
                "A failure: a stream not verified (the digests or the byte counts differ), the connection lost, the server refused, a ladder rung failed. What was measured is printed first.",
            ),
            (
                "2",
                "A usage error: a flag or value not understood, or flags that do not go together; nothing was sent.",
            ),
            (
                "130",
                "Interrupted by Ctrl-C or SIGTERM: every byte until then verified, and printed.",
            ),
        ],
    ),
    (
        "tsserver",
        &[
            (
                "0",
                "Stopped by SIGINT or SIGTERM (transfers in flight given --grace), or with --once, the client's run served whole.",
            ),
            (
                "1",
                "It could not start (the address in use, a certificate or key that does not load, --ktls on a kernel without kernel TLS), or with --once, a connection of the run did not complete.",
            ),
            ("2", "A usage error."),
        ],
    ),
    (
        "tsgen",
        &[
            ("0", "The file was written whole."),
            (
                "1",
                "It could not be (its folder missing, the disk full); nothing half-written is left.",
            ),
            ("2", "A usage error."),
        ],
    ),
    (
        "tsmatrix",
        &[
            ("0", "Every cell ran and was verified."),
            (
                "1",
                "A cell failed or a server could not be reached; the cells run so far are kept.",
            ),
            ("2", "A usage error."),
            (
                "130",
                "Interrupted: the cells run so far are kept and rendered.",
            ),
        ],
    ),
    (
        "tsprobe",
        &[
            ("0", "Never, while it serves: it stops on a signal."),
            (
                "1",
                "It could not listen on --listen's address, or find its tsclient (the error names which).",
            ),
            ("2", "A usage error."),
        ],
    ),
    (
        "tsreport",
        &[
            ("0", "The reports were written (or the comparison printed)."),
            (
                "1",
                "An input could not be read or is not a tsperf result; nothing is written through a link or half-written.",
            ),
            ("2", "A usage error."),
        ],
    ),
    (
        "tsdocs",
        &[
            ("0", "The pages were written, or (--check) are up to date."),
            ("1", "(--check) A page is missing or stale."),
            ("2", "A usage error."),
        ],
    ),
];

/// Text for a roff line: backslashes and hyphens escaped, no line opening with a control
/// character.
fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with(['.', '\'']) {
        format!("\\&{t}")
    } else {
        t
    }
}

/// One program's man page: clap_mangen's sections, then EXAMPLES and SEE ALSO.
fn man_page(cmd: &clap::Command) -> std::io::Result<Vec<u8>> {
    use std::io::Write as _;
    let man = clap_mangen::Man::new(cmd.clone())
        .manual("tsperf")
        .source(format!("tsperf {}", env!("CARGO_PKG_VERSION")));
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    let name = cmd.get_name();
    if let Some((_, examples)) = EXAMPLES.iter().find(|(n, _)| *n == name) {
        writeln!(page, ".SH EXAMPLES")?;
        for (command, what) in *examples {
            writeln!(
                page,
                ".TP\n\\fB{}\\fR\n{}",
                roff_text(command),
                roff_text(what)
            )?;
        }
    }
    if let Some((_, codes)) = EXIT_STATUS.iter().find(|(n, _)| *n == name) {
        writeln!(page, ".SH \"EXIT STATUS\"")?;
        for (code, when) in *codes {
            writeln!(page, ".TP\n\\fB{code}\\fR\n{}", roff_text(when))?;
        }
    }
    // The installed pages only: tsdocs writes this tree's pages and is not installed.
    let others: Vec<String> = commands()
        .iter()
        .map(|c| c.get_name().to_owned())
        .filter(|n| n != name && n != "tsdocs")
        .map(|n| format!("\\fB{n}\\fR(1)"))
        .collect();
    writeln!(page, ".SH \"SEE ALSO\"\n{}.", others.join(", "))?;
    writeln!(
        page,
        ".PP\n/usr/share/doc/tsperf/README.md and /usr/share/doc/tsperf/docs/ (installed with the \
         package), or the README and docs/ of the tsperf source tree."
    )?;
    man.render_version_section(&mut page)?;
    Ok(page)
}

/// Writes every generated file under `dir` (each atomically); returns their paths.
pub fn write(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (rel, bytes) in files()? {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create '{}'", parent.display()))?;
        }
        tsperf_lab::report::write_atomic(&path, &bytes)?;
        written.push(path);
    }
    Ok(written)
}

/// The generated files under `dir` that are missing or differ from what the flags make now.
pub fn stale(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(files()?
        .into_iter()
        .map(|(rel, bytes)| (dir.join(rel), bytes))
        .filter(|(path, bytes)| std::fs::read(path).ok().as_ref() != Some(bytes))
        .map(|(path, _)| path)
        .collect())
}

/// Write the man pages (DIR/man/NAME.1) and shell completions (DIR/completions/) of every
/// tsperf program, made from their flag definitions; with --check, write nothing and fail if
/// the files in DIR differ from what the flags make now.
#[derive(Parser)]
#[command(name = "tsdocs", version = crate::cli::VERSION)]
struct Args {
    /// Only compare: exit 1 naming every missing or stale file.
    #[arg(long)]
    check: bool,
    /// The docs directory.
    #[arg(default_value = "docs")]
    dir: PathBuf,
}

/// tsdocs's `main`.
pub fn main() -> ExitCode {
    cli::main("tsdocs", || {
        let args = Args::parse();
        if !args.check {
            let n = write(&args.dir)?.len();
            println!("tsdocs: wrote {n} files under {}", args.dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        let stale = stale(&args.dir)?;
        if stale.is_empty() {
            println!(
                "tsdocs: the man pages and completions under {} are up to date",
                args.dir.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        let list: Vec<String> = stale.iter().map(|p| format!("'{}'", p.display())).collect();
        anyhow::bail!(
            "{} of the generated docs are missing or stale: {}; run `cargo run --release --bin tsdocs` and commit them",
            stale.len(),
            list.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example that runs a program parses with that program's flags, so an example
    /// cannot name a flag that is gone; every program has examples.
    #[test]
    fn examples_use_real_flags() {
        for cmd in commands() {
            let name = cmd.get_name().to_owned();
            let (_, examples) = EXAMPLES
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("{name} has no examples"));
            for (example, _) in *examples {
                let words: Vec<&str> = example.split_whitespace().collect();
                if words[0] != name {
                    // A script of the grid, or a scrape of tsprobe.
                    assert!(
                        words[0].starts_with("scripts/") || words[0] == "curl",
                        "{example}"
                    );
                    continue;
                }
                if let Err(e) = cmd.clone().try_get_matches_from(&words) {
                    panic!("{example}: {e}");
                }
            }
        }
    }

    /// A page names its program, lists every long flag, and escapes its hyphens.
    #[test]
    fn pages_list_every_flag() {
        for (path, bytes) in files().unwrap() {
            let Some(name) = path.to_str().unwrap().strip_prefix("man/") else {
                continue;
            };
            let name = name.trim_end_matches(".1");
            let page = String::from_utf8(bytes).unwrap();
            let cmd = commands()
                .into_iter()
                .find(|c| c.get_name() == name)
                .unwrap();
            for arg in cmd.get_arguments() {
                if let Some(long) = arg.get_long() {
                    let roff = format!("\\-\\-{}", long.replace('-', "\\-"));
                    assert!(page.contains(&roff), "{name}: no {long} in\n{page}");
                }
            }
            assert!(page.contains(".SH EXAMPLES"), "{name}");
            assert!(page.contains(".SH \"EXIT STATUS\""), "{name}");
            let see_also = &page[page.find("SEE ALSO").unwrap()..];
            assert!(
                !see_also.contains("tsdocs"),
                "{name}: tsdocs is not installed"
            );
        }
    }

    /// roff control characters at a line's start are neutralised.
    #[test]
    fn roff_text_escapes() {
        assert_eq!(roff_text("a-b"), "a\\-b");
        assert_eq!(roff_text(".x"), "\\&.x");
        assert_eq!(roff_text("c:\\d"), "c:\\ed");
    }
}
