//! tsclient's flags: their definitions (the man page and the completions are made from them),
//! the iperf3 spellings they take, and the checks of single values.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser};
use tsperf_client::{self as client, latency};
use tsperf_proto::DEFAULT_PORT;
use tsperf_results::units;

use crate::cli;
use crate::cli::values::{self, CodecArg, FramingArg, LogArg};

/// Stream FILE to a tsserver in chunks of exactly --chunk bytes; the clock stops when the server
/// has checksummed every byte. With --latency, ask the server for its clock instead and report
/// the round trips.
#[derive(Parser)]
#[command(name = "tsclient", version = crate::cli::VERSION, disable_version_flag = true)]
pub(super) struct Args {
    /// Server host name or address (IPv6 with or without brackets), optionally with :PORT
    /// (iperf3's `-c HOST`).
    #[arg(short = 'c', long, default_value = "127.0.0.1")]
    pub(super) host: String,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub(super) port: u16,
    /// Bytes per write: 1 to 16 MiB; suffixes k/KiB/m/MiB (k = 1024), as iperf3's `-l 128K`.
    #[arg(short = 'l', long, default_value = "10240", value_parser = units::parse_chunk, value_name = "BYTES")]
    pub(super) chunk: u32,
    /// With --bidir, the size of the server's writes, as --chunk sets this client's: each
    /// direction is then verified at a chunk size of its own. By default the two are equal.
    #[arg(long, value_parser = units::parse_chunk, value_name = "BYTES")]
    pub(super) chunk_reverse: Option<u32>,
    /// Print one JSON object on stdout instead of the human report.
    #[arg(short = 'J', long)]
    pub(super) json: bool,
    /// Print JSON lines on stdout as things happen, as iperf3 does with this flag: a `start`
    /// event, each interval's sample (`interval`, and a session's `sum`), and last, always,
    /// the `end` event holding the one object of a JSON run, on a failure and Ctrl-C too.
    #[arg(long)]
    pub(super) json_stream: bool,
    /// The report's full detail, as iperf3's -V: each end's counts and CPU split, the clock,
    /// every share the verdict was judged on, where the receiver's time went, and every TCP
    /// figure on the interval lines. The JSON always has all of it.
    #[arg(short = 'V', long)]
    pub(super) verbose: bool,
    /// Print the version, as iperf3's -v.
    #[arg(short = 'v', long, action = clap::ArgAction::Version)]
    pub(super) version: Option<bool>,
    /// Do not show the progress bar (it is shown on stderr only when stderr is a terminal).
    #[arg(long)]
    pub(super) no_progress: bool,
    /// Seconds for each phase, as a deadline: connecting, the server's answer to the hello, and
    /// its report after the last byte (in latency mode: each answer). Also the longest the
    /// server may take no data before the transfer fails.
    #[arg(long, default_value_t = 30.0, value_parser = cli::parse_secs, value_name = "SECS")]
    pub(super) timeout: f64,
    /// The slowest a sized reverse stream (--reverse, the reverse half of --bidir) may arrive,
    /// in bytes a second (suffixes k/KiB/m/MiB/g, binary): it is cut off, with what came, when
    /// it has not ended --timeout plus its size at this rate after its first byte, so a server
    /// that trickles cannot hold the client. A timed stream ends by its time instead.
    #[arg(long, default_value = "128KiB", value_parser = values::rate, value_name = "BYTES")]
    pub(super) min_rate: u64,
    /// Use a mio non-blocking socket (waits in poll, handles short writes) instead of blocking I/O.
    #[arg(long)]
    pub(super) nonblocking: bool,
    /// How chunks reach the kernel: one write per chunk (the field report's way), --batch chunks per
    /// writev, or sendfile of one chunk per call from the page cache (zero-copy). With --reverse
    /// or --bidir, asked of the server for the generated stream it sends (sendfile from an
    /// in-memory file of it); without, the server's own way.
    #[arg(long = "io", value_parser = values::strategy(), default_value = "write", value_name = "STRATEGY")]
    pub(super) strategy: client::Strategy,
    /// Chunks per writev call with --io writev (1 to 1024).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=client::MAX_BATCH as i64), value_name = "K")]
    pub(super) batch: Option<u32>,
    /// Send buffer (SO_SNDBUF) to ask the kernel for; by default the kernel's own.
    #[arg(long, value_parser = units::parse_buffer, value_name = "BYTES")]
    pub(super) sndbuf: Option<u32>,
    /// TCP congestion control to send with (TCP_CONGESTION), as iperf3 -C: cubic, reno, bbr or
    /// any other the sender's kernel has (/proc/sys/net/ipv4/tcp_available_congestion_control);
    /// by default the kernel's. With --reverse the server sends with it, with --bidir both
    /// ends do. The report names the one each sender used.
    #[arg(short = 'C', long, value_parser = tsperf_sys::congestion::parse_name, value_name = "ALGO")]
    pub(super) congestion: Option<String>,
    /// The server log sink for this transfer: none, stdout or file (the server's --log-file).
    /// Served by a server started with --allow-client-log (others refuse a sink other than
    /// their own); by default the server's own --log.
    #[arg(long, value_enum, value_name = "SINK")]
    pub(super) server_log: Option<LogArg>,
    /// Clock queries before the data (0 to 64): they estimate the server's clock offset, so its
    /// first and last byte times can be read on this clock.
    #[arg(long, default_value_t = client::DEFAULT_CLOCK_QUERIES,
          value_parser = clap::value_parser!(u8).range(0..=tsperf_proto::MAX_CLOCK_QUERIES as i64),
          value_name = "N")]
    pub(super) clock_queries: u8,
    /// Report the transfer every SECS seconds (0.0001 to 3600), as iperf3 -i does: bytes, rate
    /// and what the kernel's TCP_INFO says changed; printed as they happen, or in the JSON's
    /// `intervals`. Off by default.
    #[arg(short = 'i', long, value_parser = parse_interval, value_name = "SECS", allow_negative_numbers = true)]
    pub(super) interval: Option<f64>,
    /// A timed run, as iperf3 -t: send the file again and again for SECS seconds (0.001 to
    /// 86400); the last pass may be partial. Every byte is counted and checksummed by the
    /// server, and the whole run verified. Ctrl-C ends it as its time does.
    #[arg(short = 't', long, value_parser = parse_run_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub(super) time: Option<f64>,
    /// With --time, leave the first SECS seconds (slow start) out of the rate, as iperf3 -O:
    /// the run lasts --omit plus --time.
    #[arg(short = 'O', long, requires = "time", value_parser = parse_omit, value_name = "SECS",
          allow_negative_numbers = true)]
    pub(super) omit: Option<f64>,
    /// With --reverse, where this client's per-read lines go, as the server's --log: none,
    /// stdout (one write per line) or file (--log-file, buffered). Not with --json on stdout.
    #[arg(long, value_enum, value_name = "SINK")]
    pub(super) log: Option<LogArg>,
    /// The file the file sink appends to.
    #[arg(long, default_value = "tsclient.log", value_name = "PATH")]
    pub(super) log_file: PathBuf,
    /// The server sends and this client receives, counts and checksums (as iperf3 -R): the
    /// generated stream (the tsgen text; 36MiB is the seed's tsl.txt byte for byte) of --bytes,
    /// or, given a NAME for FILE, that file from a server started with --serve DIR; for --time
    /// again and again; in writes of --chunk bytes. Verified by the server's end trailer.
    #[arg(short = 'R', long)]
    pub(super) reverse: bool,
    /// Both directions at once, as iperf3 --bidir: FILE to the server on one connection and the
    /// generated stream from it on another (--bytes a pass, by default FILE's size), each
    /// verified, each with its own figures and verdict; --time times both.
    #[arg(long, conflicts_with_all = ["reverse", "latency"])]
    pub(super) bidir: bool,
    /// One session of N streams (1 to 128), as iperf3 -P: FILE striped into N contiguous
    /// ranges, each sent on its own connection and verified by its own digest; the whole is
    /// verified when every stripe is. A line per stream and a SUM line. With --reverse, N
    /// streams from the server: each a share of --bytes, or a stripe of the served file NAME;
    /// with --bidir, N each way.
    #[arg(short = 'P', long, value_parser = clap::value_parser!(u8).range(1..=128),
          conflicts_with = "latency", value_name = "N")]
    pub(super) parallel: Option<u8>,
    /// The generated stream's size: what a run without FILE sends (the seed's text again and
    /// again; 36 MiB of it held in memory, whatever the size), and with --reverse or --bidir what it asks the server for; one pass, repeated
    /// in a timed run. Suffixes k/KiB/m/MiB/g (binary). Default 36MiB, the seed's file.
    #[arg(short = 'n', long, value_parser = values::size, value_name = "SIZE")]
    pub(super) bytes: Option<u64>,
    /// Send N writes of --chunk bytes, as iperf3's -k (blocks): the generated stream of N times
    /// the chunk (with --reverse, asked of the server). Suffixes K/M/G (binary).
    #[arg(short = 'k', long, value_parser = values::size, value_name = "N",
          conflicts_with_all = ["bytes", "time", "file", "file_flag", "latency"])]
    pub(super) blockcount: Option<u64>,
    /// FILE given as iperf3 gives it (`-F FILE`): the same as FILE.
    #[arg(
        short = 'F',
        long = "file",
        value_name = "FILE",
        conflicts_with = "file"
    )]
    pub(super) file_flag: Option<PathBuf>,
    /// Send FILE with sendfile(), as iperf3's -Z (zero copy): the same as --io sendfile.
    #[arg(short = 'Z', long, conflicts_with = "strategy")]
    pub(super) zerocopy: bool,
    /// iperf3's UDP mode: refused, saying so (tsperf measures TCP only; iperf3 -u measures
    /// UDP).
    #[arg(short = 'u', long)]
    pub(super) udp: bool,
    /// Send one --chunk of the generated stream again and again (its bytes stay in the CPU's
    /// cache), as iperf3's memory mode sends one -l buffer, instead of 36 MiB of text that
    /// does not repeat: the network without the sender's memory traffic. Every byte is still
    /// checksummed on both ends. With --reverse (or --bidir) the server sends it so (protocol
    /// 9). Not with FILE or a served NAME.
    #[arg(long, conflicts_with_all = ["latency", "file"])]
    pub(super) one_buffer: bool,
    /// Take a file copy apart: run FILE (or the generated text of --bytes, written to a
    /// temporary file) rung by rung against one server, from memory to memory up to a cold
    /// read sent over TLS and written durably by the server (tsserver --save DIR), each rung
    /// verified, and print one table: each rung's rate, its drop from the rung it stands on,
    /// CPU per GiB on each end, what limited it, and the stage that costs the copy most. A rung
    /// the server or the machine cannot run is skipped with the reason. --tls picks the
    /// encrypted rungs' suite; -t SECS runs the rungs that can repeat FILE for that long (the
    /// cold read and the far-disk rungs are one pass of it).
    #[arg(long)]
    pub(super) ladder: bool,
    /// With --ladder: run the whole ladder N times, one run after another so that the rungs
    /// alternate (a drift of the machine falls on every rung alike), and report each rung's
    /// median; --json keeps every run
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(super) runs: Option<u32>,
    /// Carry the data over TLS 1.3 with this cipher suite (aes128gcm, aes256gcm or
    /// chacha20poly1305), either way, after the hello and the clock queries in the clear: the
    /// cost of the cipher, against the same run without it. The server's certificate is pinned
    /// from its Accept, proved by the --auth-key key where there is one (else the report says
    /// the server is not authenticated). Not with --io sendfile (but see --ktls).
    #[arg(long, value_parser = values::cipher(), value_name = "SUITE")]
    pub(super) tls: Option<tsperf_proto::tls::Cipher>,
    /// Seal and open this end's TLS records in the kernel (kernel TLS): the handshake is made
    /// in the process, then its keys are handed to the kernel, and --io sendfile sends FILE
    /// through TLS. Implies --tls aes128gcm where --tls is not given. Refused where the kernel
    /// has no kernel TLS (CONFIG_TLS; modprobe tls); the server seals its end in its process.
    #[arg(long)]
    pub(super) ktls: bool,
    /// Read FILE from its disk, not the page cache: its pages are put out of the cache first
    /// (posix_fadvise DONTNEED, checked with mincore; refused where they stay, or on tmpfs),
    /// so the sender's reads are the disk's. A forward run's FILE, read once (not --time).
    #[arg(long)]
    pub(super) cold: bool,
    /// Have the receiving end write the stream to its disk, verified and timed apart: buffered
    /// (into the page cache, renamed into place, not synced), durable (synced before the end
    /// is reported) or direct (O_DIRECT writes past the page cache, then synced). Forward, the
    /// server writes into its --save DIR (a server without one refuses); with --reverse, this
    /// client writes into --save DIR. A sized stream only: not with --time, --parallel or
    /// --bidir.
    #[arg(long, value_parser = values::save_mode(), value_name = "MODE")]
    pub(super) far_disk: Option<tsperf_proto::SaveMode>,
    /// With --reverse, save the stream received into DIR under its name (a served NAME, else
    /// `generated`), whole or not at all: a temporary renamed into place once verified;
    /// durably unless --far-disk says otherwise.
    #[arg(long, value_name = "DIR")]
    pub(super) save: Option<PathBuf>,
    /// The key shared with a server started with --auth-key.
    #[arg(long, value_name = "FILE")]
    pub(super) auth_key: Option<PathBuf>,
    /// Latency mode: clock queries, request and response, instead of a file.
    #[arg(long)]
    pub(super) latency: bool,
    /// Latency: requests to measure.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub(super) count: u64,
    /// Latency: requests sent first and not counted.
    #[arg(long, default_value_t = latency::DEFAULT_WARMUP, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(super) warmup: u64,
    /// Latency: message body encoding.
    #[arg(long, value_enum, default_value_t = CodecArg::Binary)]
    pub(super) codec: CodecArg,
    /// Latency: one write per message, or the length prefix and body in two writes.
    #[arg(long, value_enum, default_value_t = FramingArg::Single)]
    pub(super) framing: FramingArg,
    /// TCP_NODELAY (no Nagle), as iperf3's -N: on this client's data sockets for a stream; in
    /// latency mode on both ends (by default Nagle's algorithm stays on, as in most programs).
    #[arg(short = 'N', long)]
    pub(super) nodelay: bool,
    /// Socket buffers of this client's data sockets (SO_SNDBUF and SO_RCVBUF), as iperf3's -w
    /// sets its end's; suffixes k/KiB/m/MiB. The server's are its own (tsserver --rcvbuf,
    /// --send-buffers).
    #[arg(short = 'w', long, value_parser = units::parse_buffer, value_name = "BYTES",
          conflicts_with = "sndbuf")]
    pub(super) window: Option<u32>,
    /// Pace each stream's sender to RATE bits a second (SO_MAX_PACING_RATE; the fq qdisc paces
    /// where it is the interface's, TCP's own pacing where not), as iperf3's -b: 100M, 2.5G
    /// (K, M, G: powers of 1000); 0 is unlimited. With --reverse or --bidir the server paces
    /// its sends. What waits unsent is held near 50 ms of the pace (the kernel keeps at least
    /// one buffer of up to 64 KiB), so a timed run ends near its time from 1M up. Every
    /// byte still verified.
    #[arg(short = 'b', long, value_parser = values::bitrate, value_name = "RATE",
          allow_hyphen_values = true)]
    pub(super) bitrate: Option<u64>,
    /// Rates in this unit, as iperf3's -f: k, m, g, t (Kbit/s ... Tbit/s) or K, M, G, T
    /// (KiB/s ... TiB/s), one column; by default MiB/s and Gbit/s side by side.
    #[arg(short = 'f', long, value_parser = values::rate_unit, value_name = "UNIT")]
    pub(super) format: Option<tsperf_results::intervals::RateUnit>,
    /// Begin every line of the report with TITLE, as iperf3's -T.
    #[arg(short = 'T', long, value_name = "TITLE")]
    pub(super) title: Option<String>,
    /// Write the report to FILE (appended) instead of stdout, as iperf3's --logfile; errors
    /// stay on stderr.
    #[arg(long, value_name = "FILE")]
    pub(super) logfile: Option<PathBuf>,
    /// Also write the run's figures as Prometheus metrics to PATH, for node_exporter's
    /// textfile collector (a temporary file renamed over PATH, so it is never read half
    /// written): the metrics tsprobe answers a scrape with.
    #[arg(long, value_name = "PATH", conflicts_with = "ladder")]
    pub(super) prom_file: Option<PathBuf>,
    /// Connect from this local address, as iperf3's -B (an address of this host).
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub(super) bind: Option<std::net::IpAddr>,
    /// Connect from this local port, as iperf3's --cport: a session's later connections (-P,
    /// --bidir, --reconnect's) from the ports after it; a run with more connections than
    /// ports from PORT on is refused.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(super) cport: Option<u16>,
    /// Connect over IPv4 only, as iperf3's -4.
    #[arg(short = '4', long = "version4", conflicts_with = "ipv6")]
    pub(super) ipv4: bool,
    /// Connect over IPv6 only, as iperf3's -6.
    #[arg(short = '6', long = "version6")]
    pub(super) ipv6: bool,
    /// The server's own figures in the report, as iperf3's --get-server-output asks: the same
    /// as --verbose (tsperf's report always holds what the server measured; -V prints it all).
    #[arg(long)]
    pub(super) get_server_output: bool,
    /// Latency: a new TCP connection for every request (like netperf TCP_CRR).
    #[arg(long)]
    pub(super) reconnect: bool,
    /// Latency: wait for each answer by spinning on a non-blocking peek (as sockperf's busy
    /// polling does) instead of sleeping in a read: the client's CPU stays awake, so an idle
    /// machine's deep sleep states do not add to the round trip. Costs a whole CPU meanwhile.
    #[arg(long)]
    pub(super) busy_poll: bool,
    /// Latency: after the idle queries, make them again on a second connection while FILE
    /// streams to the same server, and compare. The stream takes the chunk size and the server
    /// log sink given for it with the stream flags.
    #[arg(long, value_name = "FILE", conflicts_with = "reconnect")]
    pub(super) under_load: Option<PathBuf>,
    /// The file to send (not with --latency); without it, the generated stream of --bytes (the
    /// tsgen text: 36MiB is the seed's tsl.txt byte for byte), as iperf3 sends from memory
    /// without -F. With --reverse, the plain name of a file the server serves (--serve), never
    /// a path.
    #[arg(conflicts_with = "latency")]
    pub(super) file: Option<PathBuf>,
    /// The ids of the flags given on the command line, not taken from their defaults: what
    /// the lowering's checks look at.
    #[arg(skip)]
    pub(super) given: std::collections::BTreeSet<String>,
}

impl Args {
    /// The flags of the command line `m`.
    pub(super) fn from_matches(m: &clap::ArgMatches) -> Result<Args, clap::Error> {
        let mut args = Args::from_arg_matches(m)?;
        args.given = m
            .ids()
            .filter(|id| cli::given(m, id.as_str()))
            .map(|id| id.as_str().to_owned())
            .collect();
        // iperf3's spellings, as the flags they stand for.
        if let Some(file) = args.file_flag.take() {
            args.file = Some(file);
            args.given.insert("file".to_owned());
        }
        if args.zerocopy {
            args.strategy = client::Strategy::Sendfile;
            args.given.insert("strategy".to_owned());
        }
        if let Some(blocks) = args.blockcount {
            let bytes = blocks.checked_mul(u64::from(args.chunk)).ok_or_else(|| {
                Args::command().error(
                    clap::error::ErrorKind::ValueValidation,
                    format!(
                        "-k {blocks} writes of {} bytes is more than tsperf counts",
                        args.chunk
                    ),
                )
            })?;
            args.bytes = Some(bytes);
            args.given.insert("bytes".to_owned());
        }
        Ok(args)
    }
}

fn parse_run_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.001..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid time '{s}': expected seconds from 0.001 to 86400"
        )),
    }
}

fn parse_omit(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid omit '{s}': expected seconds from 0 to 3600"
        )),
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    use client::intervals::{MAX_INTERVAL_S, MIN_INTERVAL_S};
    match s.parse::<f64>() {
        Ok(v) if (MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid interval '{s}': expected seconds from {MIN_INTERVAL_S} to {MAX_INTERVAL_S}"
        )),
    }
}
