//! The checks a run's flags must pass before it is lowered, each a refusal ([`Usage`]) that
//! names the flag and says what was expected.

use super::{Args, LogArg, Usage, refuse};
use tsperf_results::strategy::Strategy;

/// `--cport`: each of the run's connections takes a port of its own from it on (a ladder's
/// rungs are not counted: each is a stream of its own).
pub(super) fn ports(args: &Args) -> Result<(), Usage> {
    let Some(first) = args.cport.filter(|_| !args.ladder) else {
        return Ok(());
    };
    let (n, why) = match (args.latency, args.reconnect) {
        (true, true) => (args.count + args.warmup, " (--reconnect: one a request)"),
        (true, false) => (1 + u64::from(args.under_load.is_some()), ""),
        _ => {
            let ways = if args.bidir { 2 } else { 1 };
            (u64::from(args.parallel.unwrap_or(1)) * ways, "")
        }
    };
    let left = 65536 - u64::from(first);
    refuse(n > left, || match 65536u64.checked_sub(n) {
        Some(max) if max > 0 => format!(
            "--cport {first} leaves {left} ports for this run's {n} connections{why}: give \
             --cport at most {max}"
        ),
        _ => format!("--cport cannot give this run's {n} connections{why} a port each"),
    })
}

/// What only a direction, or a sized stream, can take.
pub(super) fn directions(args: &Args) -> Result<(), Usage> {
    let (two_ways, any_reverse) = (args.bidir, args.reverse || args.bidir);
    refuse(
        args.bytes.is_some() && !any_reverse && args.file.is_some(),
        || {
            "--bytes sizes the generated stream, and a forward run with FILE sends FILE: give \
             FILE or --bytes, not both (with --reverse or --bidir, --bytes is what the server \
             sends)"
                .to_owned()
        },
    )?;
    refuse(
        args.given("min_rate") && (!any_reverse || args.time.is_some()),
        || {
            "--min-rate bounds a sized stream the server sends (--reverse or --bidir, without \
             --time): a timed stream ends by its time"
                .to_owned()
        },
    )?;
    let pace = args
        .bitrate
        .filter(|&r| r > 0 && any_reverse && args.time.is_none());
    refuse(pace.is_some_and(|r| r < args.min_rate), || {
        format!(
            "-b paces the server's sends to {} bytes a second, below --min-rate's {} (a sized \
             stream slower than that is cut off): lower --min-rate, or run for a time (-t)",
            pace.unwrap_or(0),
            args.min_rate
        )
    })?;
    refuse(args.chunk_reverse.is_some() && !two_ways, || {
        "--chunk-reverse sets the server's writes in a --bidir run (with --reverse, --chunk \
         is the server's)"
            .to_owned()
    })?;
    refuse(
        !args.reverse && (args.log.is_some() || args.given("log_file")),
        || {
            "--log and --log-file apply to --reverse (this end receives); the server's sink is \
             --server-log"
                .to_owned()
        },
    )?;
    refuse(args.json() && args.log == Some(LogArg::Stdout), || {
        "--log stdout and --json both write to stdout: use --log file, or leave out --json"
            .to_owned()
    })
}

/// What `--reverse` cannot take: what the client's socket and the server's log are (it
/// receives), a served NAME that is a path or comes with `--bytes` or `--io` (a served file
/// goes by the server's sendfile).
pub(super) fn reverse_takes(args: &Args) -> Result<(), Usage> {
    if !args.reverse {
        return Ok(());
    }
    if let Some(name) = &args.file {
        refuse(args.bytes.is_some(), || {
            "--reverse takes --bytes (the generated stream) or a NAME the server serves, not both"
                .to_owned()
        })?;
        refuse(
            name.components().count() != 1 || name.file_name().is_none(),
            || {
                format!(
                    "--reverse NAME takes the plain name of a file the server serves (--serve), \
                     not a path: '{}'",
                    name.display()
                )
            },
        )?;
        refuse(args.given("strategy"), || {
            "--io with --reverse sets how the server sends the generated stream (--bytes); a \
             file it serves goes by its sendfile"
                .to_owned()
        })?;
    }
    for (given, flag) in [
        (args.sndbuf.is_some(), "--sndbuf"),
        (args.server_log.is_some(), "--server-log"),
    ] {
        refuse(given, || {
            format!(
                "{flag} does not apply to --reverse (the server sends; --chunk and --io set its \
                 writes)"
            )
        })?;
    }
    Ok(())
}

/// What a cold read takes (this client's FILE, once); what a saved stream takes: the receiver's directory (the server's own forward, `--save`
/// in reverse), a sized stream whole on one connection.
pub(super) fn saves(args: &Args) -> Result<(), Usage> {
    refuse(args.cold && (args.file.is_none() || args.reverse), || {
        "--cold reads this client's FILE from its disk: give a FILE, in a run that sends it (not \
         --reverse)"
            .to_owned()
    })?;
    refuse(args.cold && args.time.is_some(), || {
        "--cold reads FILE once: a timed run (--time) reads it again and again, from the cache \
         after its first pass"
            .to_owned()
    })?;
    if args.far_disk.is_none() && args.save.is_none() {
        return Ok(());
    }
    refuse(args.save.is_some() && !args.reverse, || {
        "--save DIR saves what this client receives (--reverse); the server's disk is asked \
         with --far-disk MODE (the server's --save DIR)"
            .to_owned()
    })?;
    refuse(
        args.save.is_some() && args.far_disk.is_some_and(|m| !m.writes()),
        || "--save DIR with --far-disk none would save nothing: leave one out".to_owned(),
    )?;
    refuse(args.reverse && args.save.is_none(), || {
        "--far-disk with --reverse writes to this client's disk: give it --save DIR".to_owned()
    })?;
    for (given, flag) in [
        (args.time.is_some(), "--time (a timed run repeats its data)"),
        (args.parallel.is_some_and(|n| n > 1), "--parallel (stripes)"),
        (args.bidir, "--bidir"),
    ] {
        refuse(given, || {
            format!(
                "a stream saved to disk (--far-disk, --save) is sized and whole on one \
                 connection: not with {flag}"
            )
        })?;
    }
    Ok(())
}

/// How this client writes: sendfile sends a file once; `--batch` is writev's.
pub(super) fn writes(args: &Args) -> Result<(), Usage> {
    // This client's sendfile goes through TLS only when the kernel seals its records; the
    // server's (--reverse) is the server's to grant (tsserver --ktls).
    refuse(
        args.tls.is_some() && args.strategy == Strategy::Sendfile && !args.ktls && !args.reverse,
        || {
            "--io sendfile hands the file to the kernel, which cannot encrypt what the process \
             seals: --tls takes --io write or writev, or --ktls (kernel TLS) for sendfile"
                .to_owned()
        },
    )?;
    refuse(
        args.time.is_some() && args.strategy == Strategy::Sendfile,
        || {
            "--io sendfile sends the file once: a timed run (--time) takes --io write or writev"
                .to_owned()
        },
    )?;
    refuse(
        args.batch.is_some() && args.strategy != Strategy::Writev,
        || {
            format!(
                "--batch applies to --io writev only (this run uses --io {})",
                args.strategy
            )
        },
    )
}
