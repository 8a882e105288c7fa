//! tsclient `--parallel N` (`-P`), as iperf3 `-P`: one session of N connections, either way. The file is
//! striped into N contiguous ranges, each sent on its own connection from its own thread and
//! verified by its own digest; the whole is verified when every stripe is and the stripes
//! cover the file exactly (with `--time`, each stream repeats its stripe). The hellos carry one
//! random session id and each stream's place, so the server groups them (reverse sessions,
//! `-R -P N`, too).
//!
//! A thread per stream: each stream is the single-stream transfer unchanged, with its own
//! socket, clock and figures; the session's time runs from the first stream's first byte to the
//! last stream's report. Measured against one event loop writing every socket (`cargo bench
//! --bench fanout`, docs/performance.md): one loop is one CPU and held at one stream's rate,
//! 0.52-0.71× the threads' from two streams on, so the threads stay.

use crate::StreamConfig;
use crate::StreamFailure;
use crate::run::{Outcome, Session, Side};
use tsperf_proto::Session as Place;

pub use tsperf_proto::stripes;

/// A random id for a session's hellos, so the server groups its streams.
pub(crate) fn session_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    id.copy_from_slice(&tsperf_sys::auth::challenge()[..16]);
    id
}

/// Stream `i` of a session: its stripe and place, and its samples labelled with its number and
/// added to the session's `sums`.
fn member(
    cfg: &StreamConfig,
    sums: Option<&std::sync::Arc<crate::live::Sums>>,
    i: usize,
    stripe: (u64, u64, Place),
) -> StreamConfig {
    StreamConfig {
        stripe: Some(stripe),
        live: cfg
            .live
            .as_ref()
            .zip(sums)
            .map(|(l, sums)| l.stream(i, sums)),
        ..cfg.clone()
    }
}

/// Runs one session of a stream per stripe (offset and length) of `whole` bytes (the file
/// sent, or the bytes asked of the server), each stream `one(its config, its stripe's
/// length)` on a thread of its own.
pub(crate) fn session(
    cfg: &StreamConfig,
    stripes: &[(u64, u64)],
    whole: u64,
    side: Side,
    one: impl Fn(&StreamConfig, u64) -> Outcome + Sync,
) -> Session {
    let n = u8::try_from(stripes.len()).unwrap_or(u8::MAX);
    // Both directions of a two-way run carry its one id.
    let id = cfg.two_way.unwrap_or_else(session_id);
    let sums = cfg.live.as_ref().map(|l| l.session(stripes.len()));
    let streams = std::thread::scope(|s| {
        let handles: Vec<_> = stripes
            .iter()
            .enumerate()
            .map(|(i, &(offset, len))| {
                let cfg = member(cfg, sums.as_ref(), i, (offset, len, Place::of(id, i, n)));
                let one = &one;
                s.spawn(move || one(&cfg, len))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(StreamFailure::before(
                        cfg,
                        None,
                        anyhow::anyhow!("a stream's thread panicked"),
                    ))
                })
            })
            .collect()
    });
    if let Some(sums) = sums {
        sums.finish();
    }
    Session {
        side,
        streams,
        whole,
        striped: true,
        timed: cfg.spec.time.is_some(),
    }
}
