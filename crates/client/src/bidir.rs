//! tsclient `--bidir`: both directions at once, as iperf3 `--bidir`: the file to the server on
//! one connection and the generated stream from it on another, each counted, checksummed and
//! verified on its own, each with its own figures and verdict.

use crate::progress::Progress;
use crate::reverse::{ReverseResult, run_reverse};
use crate::{StreamConfig, StreamFailure, StreamResult, run_stream};

/// Both directions' outcomes.
pub struct Bidir {
    /// The file, to the server.
    pub forward: Result<StreamResult, StreamFailure>,
    /// The generated stream of `bytes` a pass, from the server.
    pub reverse: Result<ReverseResult, StreamFailure>,
}

/// Runs a forward stream of `cfg` and a reverse one of `bytes` a pass at once, each on its own
/// connection and thread (`cfg.time` times both). No progress bar: two would fight over the
/// terminal.
pub fn run_bidir(cfg: &StreamConfig, bytes: u64) -> Bidir {
    let (to, from) = directions(cfg);
    std::thread::scope(|s| {
        let back = s.spawn(|| run_reverse(&from, bytes, "", &mut Progress::new(false)));
        let forward = run_stream(&to, &mut Progress::new(false));
        let reverse = back.join().unwrap_or_else(|_| {
            Err(StreamFailure {
                name: String::new(),
                bytes: Some(bytes),
                sent: 0,
                acked: None,
                elapsed: None,
                intervals: Vec::new(),
                interrupted: crate::interrupt::requested(),
                error: anyhow::anyhow!("the receiving thread panicked"),
            })
        });
        Bidir { forward, reverse }
    })
}

/// Both directions' sessions of `--parallel` streams.
pub struct BidirParallel {
    /// The file striped to the server.
    pub forward: Result<crate::parallel::Parallel, String>,
    /// The generated stream from it, `bytes` a pass shared out over the streams.
    pub reverse: Result<crate::parallel::ParallelReverse, String>,
}

/// `-P n --bidir`: a session of `n` streams each way at once, the file (`file_bytes` long) to
/// the server and the generated stream of `bytes` a pass from it, each stream on its own
/// connection and thread.
pub fn run_bidir_parallel(cfg: &StreamConfig, n: u8, file_bytes: u64, bytes: u64) -> BidirParallel {
    let (to, from) = directions(cfg);
    std::thread::scope(|s| {
        let back = s.spawn(|| crate::parallel::run_parallel_reverse(&from, n, bytes));
        let forward = crate::parallel::run_parallel(&to, n, file_bytes);
        let reverse = back
            .join()
            .unwrap_or_else(|_| Err("the receiving session's thread panicked".to_owned()));
        BidirParallel { forward, reverse }
    })
}

/// The two directions' configurations: their live samples labelled `[TX]` (to the server) and
/// `[RX]` (from it).
fn directions(cfg: &StreamConfig) -> (StreamConfig, StreamConfig) {
    let label = |sending: bool| StreamConfig {
        live: cfg.live.as_ref().map(|l| l.direction(sending)),
        ..cfg.clone()
    };
    (label(true), label(false))
}
