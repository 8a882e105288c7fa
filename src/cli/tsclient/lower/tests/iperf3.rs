//! iperf3's flags as an iperf3 user types them, each lowered to what iperf3's does (or refused
//! naming what does it).

use super::*;

/// `-w BYTES` sizes both of this client's socket buffers, each way; `--sndbuf` keeps its own
/// meaning and is not given with it.
#[test]
fn window_sizes_this_ends_buffers() {
    let f = streams(&["-w", "256K", "f.bin"]).forward.unwrap();
    assert_eq!((f.sndbuf, f.rcvbuf), (Some(256 << 10), Some(256 << 10)));
    let r = streams(&["-R", "-w", "1M"]).reverse.unwrap();
    assert_eq!(r.rcvbuf, Some(1 << 20));
    let f = streams(&["f.bin"]).forward.unwrap();
    assert_eq!((f.sndbuf, f.rcvbuf), (None, None));
    let argv = ["tsclient", "-w", "64k", "--sndbuf", "64k", "f.bin"];
    assert!(Args::command().try_get_matches_from(argv).is_err());
}

/// `-N` turns Nagle off on a stream's socket as iperf3's does (and still both ends' in a
/// latency run).
#[test]
fn no_delay_reaches_a_stream() {
    assert!(streams(&["-N", "f.bin"]).forward.unwrap().nodelay);
    assert!(!streams(&["f.bin"]).forward.unwrap().nodelay);
    assert!(streams(&["-N", "--bidir"]).reverse.unwrap().nodelay);
    assert!(matches!(lower(&["--latency", "-N"]).unwrap().mode, Mode::Latency(l) if l.nodelay));
}

/// `-b RATE` paces each stream's sender in bytes a second (iperf3's bits, decimal suffixes):
/// this client's sends, and in reverse the server's (its hello asks it), both ways with
/// --bidir, as iperf3's; 0 is unlimited. A sized reverse stream paced below --min-rate would
/// be cut off by it, so that is refused naming both.
#[test]
fn bitrate_paces_each_streams_sender() {
    let f = streams(&["-b", "100M", "f.bin"]).forward.unwrap();
    assert_eq!(f.pacing, Some(12_500_000));
    assert_eq!(streams(&["-b", "0", "f.bin"]).forward.unwrap().pacing, None);
    let both = streams(&["-b", "2.5G", "--bidir"]);
    assert_eq!(both.forward.unwrap().pacing, Some(312_500_000));
    assert_eq!(both.reverse.unwrap().pacing, Some(312_500_000));
    let r = streams(&["-R", "-b", "10M"]).reverse.unwrap();
    assert_eq!(r.pacing, Some(1_250_000));
    assert_eq!(streams(&["-R", "-b", "0"]).reverse.unwrap().pacing, None);
    refused(&["-R", "-b", "1M"], "--min-rate");
    refused(&["--bidir", "-b", "1M"], "--min-rate");
    let slow = ["-R", "-b", "1M", "--min-rate", "64K"];
    assert_eq!(streams(&slow).reverse.unwrap().pacing, Some(125_000));
    let timed = ["-R", "-b", "1M", "-t", "2"];
    assert_eq!(streams(&timed).reverse.unwrap().pacing, Some(125_000));
    for bad in ["10Q", "-5M", "fast", "1"] {
        let argv = ["tsclient", "-b", bad, "f.bin"];
        let e = Args::command().try_get_matches_from(argv).unwrap_err();
        assert!(e.to_string().contains("invalid bitrate"), "{bad}: {e}");
    }
}

/// `--get-server-output` prints the server's figures: the verbose report.
#[test]
fn get_server_output_is_the_verbose_report() {
    assert!(
        streams(&["--get-server-output", "f.bin"])
            .forward
            .unwrap()
            .verbose
    );
    assert!(streams(&["-V", "f.bin"]).forward.unwrap().verbose);
    assert!(!streams(&["f.bin"]).forward.unwrap().verbose);
}

/// `-f` takes iperf3's units and refuses others by name; `-4` and `-6` exclude each other;
/// `-v` is the version and `-V` the verbose report, as iperf3's.
#[test]
fn format_family_and_version_read_as_iperf3s() {
    let parse = |argv: &[&str]| Args::command().try_get_matches_from(argv);
    for unit in ["k", "m", "g", "t", "K", "M", "G", "T"] {
        assert!(parse(&["tsclient", "-f", unit]).is_ok(), "{unit}");
    }
    let e = parse(&["tsclient", "-f", "x"]).unwrap_err();
    assert!(e.to_string().contains("invalid format 'x'"), "{e}");
    assert!(parse(&["tsclient", "-4", "-6"]).is_err());
    let e = parse(&["tsclient", "-v"]).unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
}

/// A negative number where a time is asked is refused for what it is, not read as a flag.
#[test]
fn a_negative_time_is_refused_as_a_time() {
    for (flag, words) in [("-t", "invalid time '-1'"), ("-i", "invalid interval '-1'")] {
        let e = Args::command()
            .try_get_matches_from(["tsclient", flag, "-1"])
            .unwrap_err();
        assert!(e.to_string().contains(words), "{flag}: {e}");
        assert!(!e.to_string().contains("'-- -1'"), "{flag}: {e}");
    }
}

/// A timed run for people samples each second unless told otherwise, as iperf3's prints a line
/// a second; `--json` and the ladder's table take no samples unasked.
#[test]
fn a_timed_run_samples_each_second_by_default() {
    let second = Some(std::time::Duration::from_secs(1));
    assert_eq!(streams(&["-t", "3"]).forward.unwrap().interval, second);
    assert_eq!(
        streams(&["-t", "3", "--json-stream"])
            .forward
            .unwrap()
            .interval,
        second
    );
    assert_eq!(streams(&["-t", "3", "-J"]).forward.unwrap().interval, None);
    assert_eq!(streams(&["-n", "1M"]).forward.unwrap().interval, None);
    let half = Some(std::time::Duration::from_millis(500));
    assert_eq!(
        streams(&["-t", "3", "-i", "0.5", "-J"])
            .forward
            .unwrap()
            .interval,
        half
    );
    match lower(&["--ladder", "-t", "1"]).unwrap().mode {
        Mode::Ladder(l) => assert_eq!(l.base.interval, None),
        other => panic!("{other:?}"),
    }
}

/// `--cport PORT` gives a run's connections the ports from PORT on, one each: a run with more
/// connections than ports are left above it (`--reconnect`'s one a request and warm-up, `-P`,
/// both ways of `--bidir`) is refused naming the highest PORT that fits, rather than taking
/// 65535 again and again and failing on the ports its own closed connections still hold.
#[test]
fn cport_leaves_a_port_for_each_connection() {
    let reconnect = [
        "--latency",
        "--reconnect",
        "--count",
        "1000",
        "--warmup",
        "0",
    ];
    fn with<'a>(port: &'a str, line: &[&'a str]) -> Vec<&'a str> {
        [line, &["--cport", port]].concat()
    }
    refused(&with("65000", &reconnect), "--cport 65000 leaves 536 ports");
    refused(&with("65000", &reconnect), "at most 64536");
    assert!(lower(&with("64536", &reconnect)).is_ok());
    refused(
        &with("65529", &["-P", "4", "--bidir"]),
        "7 ports for this run's 8 connections",
    );
    assert!(lower(&with("65528", &["-P", "4", "--bidir"])).is_ok());
    assert!(lower(&with("65535", &["f.bin"])).is_ok());
}
