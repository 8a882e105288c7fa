//! The grid's cells, typed: what each measures and the tsclient arguments that measure it.

use tsperf_client::{ClientIo, Strategy};
use tsperf_proto::LogMode;
use tsperf_proto::clock::{Codec, Framing};
use tsperf_results::runs::Cell;

/// One stream cell: chunk × client I/O model × write strategy × server log sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCell {
    /// Bytes per write.
    pub chunk: u32,
    /// The client's I/O model.
    pub io: ClientIo,
    /// How chunks reach the kernel.
    pub strategy: Strategy,
    /// The server log sink the client asks for (`tsclient --server-log`).
    pub log: LogMode,
    /// Samples every this many µs (`tsclient --interval`), for the timeline.
    pub interval_us: Option<u32>,
    /// Streams in the session (`tsclient -P`; 1 is the plain transfer).
    pub streams: u32,
    /// The server sends (`tsclient -R --bytes`): `log` is the client's sink, `io` its reads.
    pub reverse: bool,
}

/// What a stream cell sends: the grid's file, its size (what a reverse cell asks the server
/// for), and where a reverse cell's client writes its `--log file` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The file a forward cell sends.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The client's log file in reverse.
    pub client_log_file: String,
}

/// The receiving client's log sinks of a reverse cell: its stdout carries the JSON the grid
/// reads, so `stdout` is left out (run `tsclient -R --log stdout` by hand for it).
pub(super) const REVERSE_SINKS: [LogMode; 2] = [LogMode::None, LogMode::File];

/// About this many samples make a timeline line: enough for a 40 ms transfer to show its
/// shape, few enough to read.
const TIMELINE_SAMPLES: f64 = 64.0;

/// The timeline's sampling interval for one of the smallest or largest chunk's cells, in µs,
/// chosen from how long the transfer is expected to take (`expected_s`, its previous
/// repetition): about [`TIMELINE_SAMPLES`] samples, never under tsclient's 0.1 ms, so even a
/// 2 ms transfer shows its shape in 16 or more. With nothing to expect (the first repetition)
/// it samples every 1 ms, and [`TIMELINE_MAX_SAMPLES`] bounds what is kept.
pub(super) fn timeline_interval_us(expected_s: Option<f64>) -> u32 {
    expected_s.map_or(1000, |s| {
        (s * 1e6 / TIMELINE_SAMPLES).round().clamp(100.0, 1e6) as u32
    })
}
/// At most this many samples of a run are kept in `runs.jsonl` (neighbours merged in pairs,
/// the interval doubled, until they fit), so the committed results stay small.
pub const TIMELINE_MAX_SAMPLES: usize = 128;

impl StreamCell {
    /// The io column: `blocking`, or `blocking writev` for a strategy other than `write`.
    pub fn label(&self) -> String {
        match self.strategy {
            Strategy::Write => self.io.to_string(),
            s => format!("{} {s}", self.io),
        }
    }

    /// The tsclient arguments that measure this cell.
    pub fn args(&self, t: &Target) -> Vec<String> {
        let mut a = vec!["--chunk".to_owned(), self.chunk.to_string()];
        if self.reverse {
            a.extend(["-R", "--bytes"].map(String::from));
            a.push(t.bytes.to_string());
        } else {
            a.push(t.file.clone());
        }
        if self.io == ClientIo::Nonblocking {
            a.push("--nonblocking".into());
        }
        if self.strategy != Strategy::Write {
            a.extend(["--io".to_owned(), self.strategy.to_string()]);
        }
        if self.reverse {
            a.extend(["--log".to_owned(), self.log.to_string()]);
            if self.log == LogMode::File {
                a.extend(["--log-file".to_owned(), t.client_log_file.clone()]);
            }
        } else {
            a.extend(["--server-log".to_owned(), self.log.to_string()]);
        }
        if self.streams > 1 {
            a.extend(["-P".to_owned(), self.streams.to_string()]);
        }
        if let Some(us) = self.interval_us {
            a.extend(["--interval".to_owned(), format!("{}", f64::from(us) / 1e6)]);
        }
        a
    }

    /// The cell as `runs.jsonl` records it: one forward stream is the seed's cell.
    pub fn cell(&self) -> Cell {
        if self.streams == 1 && !self.reverse {
            return Cell::Stream {
                chunk: self.chunk,
                io: self.label(),
                log: self.log.to_string(),
            };
        }
        Cell::Streams {
            chunk: self.chunk,
            io: self.label(),
            log: self.log.to_string(),
            streams: self.streams,
            reverse: self.reverse,
        }
    }
}

/// The client side of the stream grid for one chunk size: every strategy with both I/O models,
/// in the order the tables list them.
pub fn client_columns(strategies: &[Strategy]) -> Vec<(ClientIo, Strategy)> {
    let strategies = if strategies.is_empty() {
        &[Strategy::Write][..]
    } else {
        strategies
    };
    strategies
        .iter()
        .flat_map(|s| [ClientIo::Blocking, ClientIo::Nonblocking].map(|io| (io, *s)))
        .collect()
}

/// One latency cell of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyCell {
    /// The message body encoding.
    pub codec: Codec,
    /// One write per message or two.
    pub framing: Framing,
    /// TCP_NODELAY on both ends.
    pub nodelay: bool,
    /// A new connection for every query.
    pub reconnect: bool,
    /// Measured again while the grid's file streams with this server log sink
    /// (`tsclient --under-load`).
    pub under_load: Option<LogMode>,
}

/// What a cell under load streams: the grid's file, in its largest chunk (the one that fills
/// the path, as a load should).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// The file that streams.
    pub file: String,
    /// Its chunk size.
    pub chunk: u32,
}

impl LatencyCell {
    /// True for the cells that wait on Nagle and delayed ACK (about 88 ms a request), which get
    /// a smaller count.
    pub fn stalls(&self) -> bool {
        self.framing.splits_request() && !self.nodelay
    }

    /// The tsclient arguments that measure this cell with `count` requests (a cell under load
    /// streams `load`).
    pub fn args(&self, count: u64, load: &Load) -> Vec<String> {
        let mut a: Vec<String> = ["--latency", "--codec", self.codec.as_str()]
            .into_iter()
            .chain(["--framing", self.framing.as_str(), "--count"])
            .map(String::from)
            .collect();
        a.push(count.to_string());
        if self.nodelay {
            a.push("--nodelay".into());
        }
        if self.reconnect {
            a.push("--reconnect".into());
        }
        if let Some(log) = self.under_load {
            a.extend([
                "--under-load".to_owned(),
                load.file.clone(),
                "--chunk".to_owned(),
                load.chunk.to_string(),
                "--server-log".to_owned(),
                log.to_string(),
            ]);
        }
        a
    }

    /// The cell as `runs.jsonl` records it.
    pub fn cell(&self, count: u64) -> Cell {
        Cell::Latency {
            codec: self.codec.as_str().into(),
            framing: self.framing.as_str().into(),
            nodelay: self.nodelay,
            reconnect: self.reconnect,
            count,
            under_load: self.under_load.map(|l| l.to_string()),
        }
    }
}

/// The latency grid: codec × framing (single, split, split-request) × nodelay, then reconnect
/// with single and split framing (Nagle on), then binary single-write queries (nodelay on)
/// under the load of a stream the server logs nowhere, and one it logs to stdout.
pub fn latency_cells() -> Vec<LatencyCell> {
    let mut cells = Vec::new();
    for codec in [Codec::Binary, Codec::Object] {
        for framing in [Framing::Single, Framing::Split, Framing::SplitRequest] {
            for nodelay in [false, true] {
                cells.push(LatencyCell {
                    codec,
                    framing,
                    nodelay,
                    reconnect: false,
                    under_load: None,
                });
            }
        }
    }
    for framing in [Framing::Single, Framing::Split] {
        cells.push(LatencyCell {
            codec: Codec::Binary,
            framing,
            nodelay: false,
            reconnect: true,
            under_load: None,
        });
    }
    for log in [LogMode::None, LogMode::Stdout] {
        cells.push(LatencyCell {
            codec: Codec::Binary,
            framing: Framing::Single,
            nodelay: true,
            reconnect: false,
            under_load: Some(log),
        });
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timeline samples about 64 times a transfer whose length it expects, never under
    /// 1 ms, and at 1 ms when it expects nothing: a 40 ms transfer gets 40 samples, not 8.
    #[test]
    fn timeline_interval_follows_the_expected_duration() {
        assert_eq!(timeline_interval_us(None), 1000);
        assert_eq!(timeline_interval_us(Some(0.002)), 100);
        assert_eq!(timeline_interval_us(Some(0.04)), 625);
        assert_eq!(timeline_interval_us(Some(0.37)), 5781);
        assert_eq!(timeline_interval_us(Some(2.3)), 35938);
        assert_eq!(timeline_interval_us(Some(3600.0)), 1_000_000);
    }

    /// Stream cells give the arguments and labels the grid has always used.
    #[test]
    fn stream_cell_arguments_and_labels() {
        let c = StreamCell {
            chunk: 1024,
            io: ClientIo::Nonblocking,
            strategy: Strategy::Writev,
            log: LogMode::Stdout,
            interval_us: None,
            streams: 1,
            reverse: false,
        };
        let t = Target {
            file: "f.txt".into(),
            bytes: 4096,
            client_log_file: "/w/client.log".into(),
        };
        assert_eq!(
            c.args(&t),
            [
                "--chunk",
                "1024",
                "f.txt",
                "--nonblocking",
                "--io",
                "writev",
                "--server-log",
                "stdout"
            ]
        );
        assert_eq!(
            c.cell(),
            Cell::Stream {
                chunk: 1024,
                io: "nonblocking writev".into(),
                log: "stdout".into()
            }
        );
        let plain = StreamCell {
            log: LogMode::File,
            strategy: Strategy::Write,
            interval_us: Some(timeline_interval_us(Some(0.32))),
            ..c
        };
        assert_eq!(plain.label(), "nonblocking");
        assert_eq!(plain.args(&t)[6..], ["--interval", "0.005"]);
        assert!(matches!(plain.cell(), Cell::Stream { log, .. } if log == "file"));
        assert_eq!(
            client_columns(&[]),
            [
                (ClientIo::Blocking, Strategy::Write),
                (ClientIo::Nonblocking, Strategy::Write)
            ]
        );
    }

    /// A cell of the other dimensions asks for its streams and direction, and records both;
    /// in reverse the log sink is the client's and the server is asked for the file's size.
    #[test]
    fn streams_and_reverse_cells() {
        let t = Target {
            file: "f.txt".into(),
            bytes: 4096,
            client_log_file: "/w/client.log".into(),
        };
        let fwd = StreamCell {
            chunk: 10240,
            io: ClientIo::Blocking,
            strategy: Strategy::Write,
            log: LogMode::None,
            interval_us: None,
            streams: 4,
            reverse: false,
        };
        assert_eq!(
            fwd.args(&t),
            [
                "--chunk",
                "10240",
                "f.txt",
                "--server-log",
                "none",
                "-P",
                "4"
            ]
        );
        let rev = StreamCell {
            reverse: true,
            log: LogMode::File,
            io: ClientIo::Nonblocking,
            ..fwd
        };
        assert_eq!(
            rev.args(&t),
            [
                "--chunk",
                "10240",
                "-R",
                "--bytes",
                "4096",
                "--nonblocking",
                "--log",
                "file",
                "--log-file",
                "/w/client.log",
                "-P",
                "4"
            ]
        );
        assert_eq!(
            rev.cell(),
            Cell::Streams {
                chunk: 10240,
                io: "nonblocking".into(),
                log: "file".into(),
                streams: 4,
                reverse: true
            }
        );
        let one_back = StreamCell { streams: 1, ..rev };
        assert!(matches!(
            one_back.cell(),
            Cell::Streams {
                streams: 1,
                reverse: true,
                ..
            }
        ));
    }

    /// Latency cells give the arguments and labels the grid has always used, under load too.
    #[test]
    fn latency_cell_arguments_and_labels() {
        let l = latency_cells();
        assert_eq!(l.len(), 16);
        let load = Load {
            file: "f.txt".into(),
            chunk: 102,
        };
        assert_eq!(
            l[15].args(20, &load)[7..],
            [
                "--nodelay",
                "--under-load",
                "f.txt",
                "--chunk",
                "102",
                "--server-log",
                "stdout"
            ]
        );
        assert!(
            matches!(&l[14].cell(20), Cell::Latency { under_load: Some(u), .. } if u == "none")
        );
        assert_eq!(
            l[3].args(20, &load),
            [
                "--latency",
                "--codec",
                "binary",
                "--framing",
                "split",
                "--count",
                "20",
                "--nodelay"
            ]
        );
        assert!(l[2].stalls() && !l[3].stalls());
        assert_eq!(l[4].framing, Framing::SplitRequest);
        assert!(
            l[4].stalls() && !l[5].stalls(),
            "one stall a round trip is a stall too"
        );
    }
}
