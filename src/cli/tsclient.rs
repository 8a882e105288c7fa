//! tsclient's front end: its flags, their checks, and the run that sends a file (or makes clock
//! queries) and prints what both ends measured.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory;
use tsperf_client::progress::Progress;
use tsperf_client::spec::{Ready, RunSpec, StreamsSpec};
use tsperf_client::{self as client, latency, output};

use crate::cli;
use crate::cli::values::LogArg;
use args::Args;

mod args;
mod lower;

/// tsclient's command-line definition (its man page and completions are made from it).
pub fn command() -> clap::Command {
    Args::command()
}

/// tsclient's `main`.
pub fn main() -> ExitCode {
    cli::main("tsclient", run)
}

fn run() -> anyhow::Result<ExitCode> {
    // With --json every exit prints exactly one object on stdout, a usage error's included, so
    // the mode is known before the arguments are parsed.
    if cli::json_asked(&Args::command()) {
        let latency = std::env::args_os().any(|a| a == "--latency");
        cli::set_json_mode(if latency { "latency" } else { "stream" });
    }
    if cli::flag_given("--json-stream") {
        cli::set_json_stream();
    }
    let matches = Args::command()
        .try_get_matches()
        .unwrap_or_else(|e| cli::clap_exit(e));
    let args = Args::from_matches(&matches).unwrap_or_else(|e| cli::clap_exit(e));
    let spec = RunSpec::try_from(&args).unwrap_or_else(|u| cli::usage_error::<Args>(u));
    cli::init_diagnostics();
    report_settings(&args)?;
    // The stop handler comes before anything that takes time or may block (the generated
    // text, a key file): a Ctrl-C from here on prints what there is to print.
    let mut progress = if args.latency {
        Progress::queries(!args.no_progress)
    } else {
        Progress::new(!args.no_progress)
    };
    on_interrupt(&progress)?;
    let ran = spec.prepare().and_then(|prepared| {
        for w in &prepared.warnings {
            eprintln!("tsclient: {w}");
        }
        match prepared.run {
            Ready::Streams(run) => stream_run(&args, &run, &mut progress),
            Ready::Latency(cfg) => latency_run(&args, &cfg, &mut progress),
            Ready::Ladder(spec, auth) => ladder_run(&args, &spec, auth, &mut progress),
        }
    });
    // A failure with nothing printed yet still prints its object.
    ran.inspect_err(cli::print_failure_json)
}

/// What iperf3's output and address flags set for the whole run: the rows' unit (-f), the
/// title (-T), the local end (-B, --cport), the family (-4, -6), and where the report goes
/// (--logfile).
fn report_settings(args: &Args) -> anyhow::Result<()> {
    use tsperf_sys::client_net::{self, Family};
    if let Some(unit) = args.format {
        tsperf_results::intervals::set_rate_unit(unit);
    }
    if let Some(title) = &args.title {
        client::live::set_title(title);
    }
    if args.bind.is_some() || args.cport.is_some() {
        client_net::bind_from(args.bind, args.cport);
    }
    match (args.ipv4, args.ipv6) {
        (true, _) => client_net::hold_to(Family::V4),
        (_, true) => client_net::hold_to(Family::V6),
        _ => {}
    }
    if let Some(path) = &args.logfile {
        client_net::stdout_to(path)
            .with_context(|| format!("cannot write --logfile '{}'", path.display()))?;
    }
    // Known before the run, not after it: the directory --prom-file writes into.
    if let Some(path) = &args.prom_file {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            anyhow::bail!(
                "cannot write --prom-file '{}': '{}' is not a directory",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// On Ctrl-C or SIGTERM the run stops and prints what it measured ([`client::interrupt`]); if it
/// cannot within the patience, this says so (with --json, in the one object) and exits 130.
fn on_interrupt(progress: &Progress) -> anyhow::Result<()> {
    client::interrupt::on_signals(progress.clone(), || {
        cli::print_failure_json(&anyhow::anyhow!("interrupted"));
        eprintln!("tsclient: interrupted");
    })
    .context("cannot watch for Ctrl-C")
}

impl Args {
    /// The run's result is JSON (`--json` or `--json-stream`).
    fn json(&self) -> bool {
        self.json || self.json_stream
    }
}

/// The `start` line of `--json-stream`: what the run is.
fn start_line(args: &Args, spec: Option<&StreamsSpec>) -> String {
    use client::run::Direction;
    use tsperf_results::json::{Event, StartJson};
    let first = spec.map(StreamsSpec::first);
    let (host, port) = first.map_or((args.host.clone(), args.port), |s| (s.host.clone(), s.port));
    let start = StartJson {
        tsperf: env!("CARGO_PKG_VERSION").into(),
        mode: if spec.is_some() { "stream" } else { "latency" }.into(),
        host,
        port,
        direction: spec.map(|s| {
            match s.direction() {
                Direction::Send => "send",
                Direction::Receive => "receive",
                Direction::Both => "both",
            }
            .into()
        }),
        streams: spec.map(|s| s.streams.get()),
        chunk: first.map(|s| s.chunk),
        time_s: args.time,
        interval_s: args.interval,
    };
    output::json_line(&Event::Start(start)) + "\n"
}

fn stream_run(
    args: &Args,
    run: &client::spec::Run,
    progress: &mut Progress,
) -> anyhow::Result<ExitCode> {
    if args.json_stream {
        cli::print(&start_line(args, Some(&run.spec)))?;
    }
    let started = std::time::Instant::now();
    let outcome = client::run::run(run, progress);
    let ended = output::finish(&outcome);
    let text = if args.json() {
        cli::json_text(&output::json(&outcome))
    } else {
        client::live::titled(&output::human(
            &outcome,
            args.verbose || args.get_server_output,
        ))
    };
    cli::print_result(&text)?;
    let why = match &ended {
        output::Exit::Success => None,
        output::Exit::Interrupted(_) => Some("interrupted".to_owned()),
        output::Exit::Failed(why) => Some(why.clone()),
    };
    prom_file(args, &output::json(&outcome), started, why)?;
    match ended {
        output::Exit::Success => Ok(ExitCode::SUCCESS),
        output::Exit::Interrupted(notes) => {
            for note in notes {
                eprintln!("tsclient: {note}");
            }
            Ok(ExitCode::from(cli::INTERRUPTED as u8))
        }
        output::Exit::Failed(why) => Err(anyhow::anyhow!(why)),
    }
}

/// `--prom-file`: the run's figures as tsprobe's metrics, for node_exporter's textfile
/// collector (`why`: why the run did not succeed).
fn prom_file(
    args: &Args,
    out: &tsperf_results::json::ClientOutput,
    started: std::time::Instant,
    why: Option<String>,
) -> anyhow::Result<()> {
    use tsperf_metrics::probe::{Failure, Figures, Probe};
    let Some(path) = &args.prom_file else {
        return Ok(());
    };
    let figures = Figures::of(out);
    let failure = why.map(|reason| Failure {
        kind: match reason.as_str() {
            "interrupted" => "interrupted",
            _ if figures.bytes.is_some() && !figures.verified => "not-verified",
            _ => "failed",
        },
        reason,
    });
    let page = tsperf_metrics::probe::render(&Probe {
        figures: Some(figures),
        duration: started.elapsed(),
        failure,
    });
    tsperf_metrics::textfile::write(path, &page).context("--prom-file")
}

fn ladder_run(
    args: &Args,
    spec: &client::ladder::LadderSpec,
    auth: Option<std::sync::Arc<tsperf_sys::auth::Key>>,
    progress: &mut Progress,
) -> anyhow::Result<ExitCode> {
    let ladder = client::ladder::run_ladder(spec, auth, progress)?;
    let text = if args.json() {
        use tsperf_results::json::{ClientJson, ClientOutput};
        let object = ClientJson::Ladder(output::ladder_json(&ladder));
        cli::json_text(&ClientOutput::Result(object))
    } else {
        client::live::titled(&output::ladder_human(&ladder))
    };
    cli::print_result(&text)?;
    if client::interrupt::requested() {
        return Ok(ExitCode::from(cli::INTERRUPTED as u8));
    }
    if !ladder.verified() {
        anyhow::bail!("a rung of the ladder failed (its line says how)");
    }
    Ok(ExitCode::SUCCESS)
}

fn latency_run(
    args: &Args,
    cfg: &latency::LatencyConfig,
    progress: &mut Progress,
) -> anyhow::Result<ExitCode> {
    if args.json_stream {
        cli::print(&start_line(args, None))?;
    }
    let started = std::time::Instant::now();
    let mut result = latency::run_latency(cfg, progress);
    // A run that failed before its first answer has no statistics to show people: its error
    // says it all (the JSON object still comes, with `error`).
    let failed_at_once = matches!(result.stopped, Some(latency::Stopped::Failed(_)))
        && result.rtt.is_empty()
        && result.loaded.is_none();
    if args.json() {
        cli::print_result(&cli::json_text(&output::latency_json(&result)))?;
    } else if !failed_at_once {
        cli::print_result(&client::live::titled(&output::latency_human(&result)))?;
    }
    let why = match &result.stopped {
        None => None,
        Some(latency::Stopped::Interrupted) => Some("interrupted".to_owned()),
        Some(latency::Stopped::Failed(e)) => Some(format!("{e:#}")),
    };
    prom_file(args, &output::latency_json(&result), started, why)?;
    match result.stopped.take() {
        None => Ok(ExitCode::SUCCESS),
        Some(latency::Stopped::Interrupted) => {
            eprintln!(
                "tsclient: interrupted after {} of {}",
                result.rtt.len(),
                tsperf_results::units::count(cfg.spec.count, "clock query")
            );
            Ok(ExitCode::from(cli::INTERRUPTED as u8))
        }
        Some(latency::Stopped::Failed(e)) => Err(e),
    }
}
