//! The lowering's checks, one test per refusal, and what a command line lowers to.

use std::path::PathBuf;

use clap::CommandFactory;
use tsperf_client::run::{Direction, Side};
use tsperf_client::spec::{Mode, RunSpec, Source, StreamsSpec};
use tsperf_proto::LogMode;
use tsperf_results::strategy::Strategy;
use tsperf_sys::testdata::SEED_FILE_LEN;

use super::super::Args;
use super::Usage;

/// `tsclient LINE...` lowered.
fn lower(line: &[&str]) -> Result<RunSpec, Usage> {
    let argv = std::iter::once("tsclient").chain(line.iter().copied());
    let m = Args::command()
        .try_get_matches_from(argv)
        .unwrap_or_else(|e| panic!("{line:?} does not parse: {e}"));
    RunSpec::try_from(&Args::from_matches(&m).unwrap())
}

/// `line` is refused, the error saying `words`.
fn refused(line: &[&str], words: &str) {
    match lower(line) {
        Err(Usage(msg)) => assert!(msg.contains(words), "{line:?}: {msg}"),
        Ok(spec) => panic!("{line:?} was taken: {spec:?}"),
    }
}

/// `line`'s stream run.
fn streams(line: &[&str]) -> StreamsSpec {
    match lower(line).unwrap_or_else(|e| panic!("{line:?}: {e}")).mode {
        Mode::Streams(s) => s,
        Mode::Latency(l) => panic!("{line:?} is a latency run: {l:?}"),
        Mode::Ladder(l) => panic!("{line:?} is a ladder: {l:?}"),
    }
}

#[test]
fn a_stream_flag_is_refused_in_a_latency_run() {
    for (flag, value) in [
        ("--parallel", Some("2")),
        ("--min-rate", Some("1MiB")),
        ("--bidir", None),
        ("--reverse", None),
        ("--bytes", Some("1MiB")),
        ("--time", Some("1")),
        ("--chunk", Some("1024")),
        ("--chunk-reverse", Some("1024")),
        ("--sndbuf", Some("64k")),
        ("--congestion", Some("cubic")),
        ("--io", Some("writev")),
        ("--batch", Some("4")),
        ("--server-log", Some("file")),
        ("--clock-queries", Some("2")),
        ("--interval", Some("1")),
        ("--window", Some("64k")),
        ("--bitrate", Some("10M")),
    ] {
        let mut line = vec!["--latency", flag];
        line.extend(value);
        // --bidir and --reverse conflict with --latency in clap itself.
        if Args::command()
            .try_get_matches_from(std::iter::once("tsclient").chain(line.iter().copied()))
            .is_err()
        {
            continue;
        }
        refused(&line, &format!("{flag} applies to stream transfers only"));
    }
}

#[test]
fn a_latency_flag_is_refused_in_a_stream_run() {
    for (flag, value) in [
        ("--count", Some("5")),
        ("--warmup", Some("1")),
        ("--codec", Some("object")),
        ("--framing", Some("split")),
        ("--reconnect", None),
        ("--busy-poll", None),
        ("--under-load", Some("f.txt")),
    ] {
        let mut line = vec![flag];
        line.extend(value);
        line.push("u.txt");
        refused(&line, &format!("{flag} applies to --latency only"));
    }
}

#[test]
fn the_loading_stream_takes_its_chunk_and_sink() {
    let spec = lower(&[
        "--latency",
        "--under-load",
        "f.txt",
        "--chunk",
        "1024",
        "--server-log",
        "file",
    ])
    .unwrap();
    let Mode::Latency(l) = spec.mode else {
        panic!("not a latency run")
    };
    let load = l.under_load.unwrap();
    assert_eq!(load.chunk, 1024);
    assert_eq!(load.server_log, Some(LogMode::File));
    assert_eq!(load.source, Source::File(PathBuf::from("f.txt")));
    assert_eq!(load.clock_queries, 0);
}

#[test]
fn a_port_named_twice_must_agree() {
    refused(
        &["--host", "h:7000", "--port", "7001"],
        "names port 7000 but --port says 7001",
    );
    let s = streams(&["--host", "h:7000", "--port", "7000"]);
    assert_eq!(s.first().port, 7000);
    let s = streams(&["--host", "[::1]:7002"]);
    assert_eq!((s.first().host.as_str(), s.first().port), ("::1", 7002));
}

#[test]
fn a_host_that_is_no_host_is_refused() {
    refused(&["--host", "a b:x"], "invalid host 'a b:x'");
}

#[test]
fn bytes_and_a_file_forward_are_refused() {
    refused(
        &["--bytes", "1MiB", "f.txt"],
        "give FILE or --bytes, not both",
    );
}

#[test]
fn min_rate_needs_a_sized_stream_the_server_sends() {
    let words = "--min-rate bounds a sized stream the server sends";
    refused(&["--min-rate", "1MiB"], words);
    refused(&["-R", "-t", "1", "--min-rate", "1MiB"], words);
    let s = streams(&["-R", "--min-rate", "1MiB"]);
    assert_eq!(s.reverse.unwrap().min_rate, 1 << 20);
}

#[test]
fn chunk_reverse_needs_bidir() {
    refused(
        &["-R", "--chunk-reverse", "4096"],
        "--chunk-reverse sets the server's writes in a --bidir run",
    );
    refused(&["--chunk-reverse", "4096"], "--chunk-reverse");
}

#[test]
fn this_ends_log_needs_reverse() {
    let words = "--log and --log-file apply to --reverse";
    refused(&["--log", "file"], words);
    refused(&["--log-file", "x.log"], words);
}

#[test]
fn a_log_on_stdout_and_json_are_refused() {
    refused(
        &["-R", "--log", "stdout", "--json"],
        "--log stdout and --json both write to stdout",
    );
    refused(&["-R", "--log", "stdout", "--json-stream"], "--log stdout");
}

#[test]
fn reverse_takes_bytes_or_a_name_not_both() {
    refused(
        &["-R", "--bytes", "1MiB", "f.bin"],
        "--reverse takes --bytes (the generated stream) or a NAME",
    );
}

#[test]
fn reverse_takes_a_name_not_a_path() {
    refused(&["-R", "dir/f.bin"], "not a path: 'dir/f.bin'");
    refused(&["-R", "/f.bin"], "not a path");
    refused(&["-R", ".."], "not a path");
}

#[test]
fn what_the_client_writes_does_not_apply_to_reverse() {
    for (flag, value) in [("--sndbuf", "64k"), ("--server-log", "file")] {
        refused(
            &["-R", flag, value],
            &format!("{flag} does not apply to --reverse"),
        );
    }
}

/// `-R --io` asks the server to send the generated stream that way (its own way without it);
/// a file it serves goes by its sendfile, and a timed stream cannot go by sendfile.
#[test]
fn reverse_io_is_asked_of_the_server() {
    let r = streams(&["-R", "--io", "writev", "--batch", "8"])
        .reverse
        .unwrap();
    assert_eq!((r.strategy, r.batch), (Some(Strategy::Writev), 8));
    assert_eq!(r.call(), Some(tsperf_proto::Call::Writev(8)));
    let r = streams(&["-R"]).reverse.unwrap();
    assert_eq!((r.strategy, r.call()), (None, None));
    let f = streams(&["f.txt"]).forward.unwrap();
    assert_eq!((f.strategy, f.strategy()), (None, Strategy::Write));
    refused(
        &["-R", "--io", "write", "f.bin"],
        "a file it serves goes by its sendfile",
    );
    refused(
        &["-R", "--batch", "4"],
        "--batch applies to --io writev only",
    );
    refused(
        &["-R", "-t", "1", "--io", "sendfile"],
        "--io sendfile sends the file once",
    );
}

#[test]
fn sendfile_is_refused_in_a_timed_run() {
    refused(
        &["-t", "1", "--io", "sendfile", "f.txt"],
        "--io sendfile sends the file once",
    );
}

#[test]
fn batch_needs_writev() {
    refused(
        &["--batch", "4", "f.txt"],
        "--batch applies to --io writev only",
    );
    let s = streams(&["--io", "writev", "--batch", "4", "f.txt"]);
    assert_eq!(s.forward.unwrap().batch, 4);
}

#[test]
fn a_forward_run_sends_its_file_or_the_generated_stream() {
    let s = streams(&["--chunk", "102", "--nonblocking", "f.txt"]);
    assert_eq!(s.direction(), Direction::Send);
    let f = s.forward.unwrap();
    assert_eq!((f.side, f.chunk, f.nonblocking), (Side::Sent, 102, true));
    assert_eq!(f.source, Source::File(PathBuf::from("f.txt")));
    let s = streams(&["--bytes", "5MiB"]);
    assert_eq!(s.forward.unwrap().source, Source::Generated(5 << 20));
    let s = streams(&[]);
    assert_eq!(s.forward.unwrap().source, Source::Generated(SEED_FILE_LEN));
}

#[test]
fn a_reverse_run_asks_for_bytes_or_a_served_file() {
    let s = streams(&["-R", "-P", "3", "--bytes", "1MiB"]);
    assert_eq!(s.direction(), Direction::Receive);
    assert_eq!(s.streams.get(), 3);
    let r = s.reverse.unwrap();
    assert_eq!(
        (r.side, r.source),
        (Side::Received, Source::Generated(1 << 20))
    );
    let s = streams(&["-R", "f.bin"]);
    assert_eq!(s.reverse.unwrap().source, Source::Served("f.bin".into()));
}

#[test]
fn bidir_has_a_chunk_each_way() {
    let s = streams(&[
        "--bidir",
        "--chunk",
        "1024",
        "--chunk-reverse",
        "128K",
        "f.txt",
    ]);
    assert_eq!(s.direction(), Direction::Both);
    let (f, r) = (s.forward.unwrap(), s.reverse.unwrap());
    assert_eq!((f.chunk, r.chunk), (1024, 128 << 10));
    assert_eq!(f.source, Source::File(PathBuf::from("f.txt")));
    assert_eq!(r.source, Source::GeneratedAsLong(PathBuf::from("f.txt")));
    let s = streams(&["--bidir", "--chunk", "1024", "--bytes", "2MiB"]);
    let (f, r) = (s.forward.unwrap(), s.reverse.unwrap());
    assert_eq!((f.chunk, r.chunk), (1024, 1024));
    assert_eq!(f.source, Source::Generated(2 << 20));
    assert_eq!(r.source, Source::Generated(2 << 20));
}

#[test]
fn samples_go_where_the_output_does() {
    let f = streams(&["f.txt"]).forward.unwrap();
    assert!(f.live && !f.json_lines);
    let f = streams(&["--json", "f.txt"]).forward.unwrap();
    assert!(!f.live);
    let f = streams(&["--json-stream", "f.txt"]).forward.unwrap();
    assert!(f.live && f.json_lines);
    let f = streams(&["--io", "sendfile", "f.txt"]).forward.unwrap();
    assert_eq!(f.strategy, Some(Strategy::Sendfile));
}

#[test]
fn the_key_file_is_named_not_read() {
    let spec = lower(&["--auth-key", "/nonexistent/key", "f.txt"]).unwrap();
    assert_eq!(spec.auth_key, Some(PathBuf::from("/nonexistent/key")));
}

/// `--far-disk` asks the receiving end's disk: the server's (`--save DIR` there) in a forward
/// run, this client's `--save DIR` in reverse; `--save` alone in reverse saves durably.
#[test]
fn far_disk_asks_the_receivers_disk() {
    use tsperf_proto::SaveMode;
    let s = streams(&["--far-disk", "direct", "f.bin"]);
    let fwd = s.forward.unwrap();
    assert_eq!((fwd.save, fwd.save_dir), (Some(SaveMode::Direct), None));
    let s = streams(&[
        "-R",
        "--bytes",
        "1MiB",
        "--save",
        "/d",
        "--far-disk",
        "buffered",
    ]);
    let rev = s.reverse.unwrap();
    assert_eq!(
        (rev.save, rev.save_dir),
        (Some(SaveMode::Buffered), Some(PathBuf::from("/d")))
    );
    let rev = streams(&["-R", "--save", "/d"]).reverse.unwrap();
    assert_eq!(rev.save, Some(SaveMode::Durable));
    assert_eq!(streams(&["f.bin"]).forward.unwrap().save, None);
}

#[test]
fn far_disk_in_reverse_needs_a_save_directory() {
    refused(&["-R", "--far-disk", "durable"], "--save DIR");
    refused(
        &["-R", "--save", "/d", "--far-disk", "none"],
        "save nothing",
    );
}

#[test]
fn save_is_a_reverse_runs() {
    refused(&["--save", "/d", "f.bin"], "--far-disk");
    refused(&["--save", "/d", "f.bin"], "--reverse");
}

#[test]
fn a_saved_stream_is_sized_and_whole() {
    refused(&["--far-disk", "durable", "-t", "2", "f.bin"], "--time");
    refused(&["-R", "--save", "/d", "-t", "2"], "--time");
    refused(&["--far-disk", "durable", "-P", "2", "f.bin"], "--parallel");
    refused(&["--far-disk", "durable", "--bidir", "f.bin"], "--bidir");
    refused(&["--save", "/d", "--bidir"], "--reverse");
}

/// `--cold` reads FILE from the disk: a forward run's file, read once.
#[test]
fn cold_reads_a_file_once() {
    assert!(streams(&["--cold", "f.bin"]).forward.unwrap().cold);
    assert!(!streams(&["f.bin"]).forward.unwrap().cold);
    refused(&["--cold"], "FILE");
    refused(&["--cold", "-R", "--bytes", "1MiB"], "FILE");
    refused(&["--cold", "-t", "2", "f.bin"], "--time");
    refused(&["--cold", "--one-buffer"], "FILE");
}

/// iperf3's spellings: `-n` sizes the stream as `--bytes`, `-F FILE` sends FILE, `-Z` sends
/// with sendfile (`--io sendfile`); `-u` is refused naming iperf3 for UDP.
#[test]
fn iperf3s_flags_lower_as_their_equivalents() {
    let s = streams(&["-n", "4MiB"]);
    assert_eq!(s.forward.unwrap().source, Source::Generated(4 << 20));
    let s = streams(&["-F", "f.bin"]);
    assert_eq!(
        s.forward.unwrap().source,
        Source::File(PathBuf::from("f.bin"))
    );
    let s = streams(&["-Z", "f.bin"]);
    assert_eq!(s.forward.unwrap().strategy, Some(Strategy::Sendfile));
    // -k N: N writes of the chunk (iperf3's blocks), the generated stream sized so.
    let s = streams(&["-k", "100", "-l", "1K"]);
    assert_eq!(s.forward.unwrap().source, Source::Generated(100 << 10));
    let s = streams(&["-k", "2K", "-l", "100"]);
    assert_eq!(s.forward.unwrap().source, Source::Generated(2048 * 100));
    let s = streams(&["-R", "--blockcount", "8", "-l", "4K"]);
    assert_eq!(s.reverse.unwrap().source, Source::Generated(32 << 10));
    refused(&["-u"], "tsperf measures TCP only");
    refused(&["-u"], "iperf3 -u");
    for line in [
        &["-Z", "--io", "write"][..],
        &["-F", "a.bin", "b.bin"],
        &["-k", "5", "-n", "1M"],
        &["-k", "5", "-t", "3"],
        &["-k", "5", "f.bin"],
        &["-k", "0"],
    ] {
        let argv = std::iter::once("tsclient").chain(line.iter().copied());
        assert!(
            Args::command().try_get_matches_from(argv).is_err(),
            "{line:?}"
        );
    }
}

mod iperf3;
mod stages;
