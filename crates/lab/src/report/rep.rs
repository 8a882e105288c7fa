//! One repetition of a stream cell, whatever ran it (one stream, a reverse stream, a session of
//! parallel streams), as the stream tables summarise it.

use super::aggregate::most_common;
use tsperf_results::json::{ClientJson, ReverseJson, StreamJson};
use tsperf_results::stats::median;

/// What a stream table takes from one repetition.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rep {
    /// The rate, MiB/s (a session's: its sum).
    pub mib_per_s: f64,
    /// The same in Gbit/s.
    pub gbit_per_s: f64,
    /// The client's CPU time, seconds (a session's: the process's, its largest figure).
    pub client_cpu_s: f64,
    /// Verified (a session's: every stream, and the whole).
    pub verified: bool,
    /// The sender's send buffer.
    pub sndbuf: u64,
    /// The receiver's receive buffer.
    pub rcvbuf: u64,
    /// The verdict (a session's: most streams').
    pub limited_by: Option<String>,
    /// The server's largest receiving phase and its share, when the server received.
    pub largest: Option<(String, Option<f64>)>,
    /// The server's log sink when it received, as the server said (the grid checks it).
    pub server_log: Option<String>,
    /// The client's log sink when it received, as the client said.
    pub client_log: Option<String>,
}

impl Rep {
    /// The repetition of a stream-like result; `None` for a latency one.
    pub(super) fn of(result: &ClientJson) -> Option<Rep> {
        match result {
            ClientJson::Stream(s) => Some(forward(s)),
            ClientJson::Reverse(r) => Some(reverse(r)),
            ClientJson::Parallel(p) => {
                let streams: Vec<Rep> = p.forward_streams().into_iter().map(forward).collect();
                Some(session(&p.sum, &streams))
            }
            ClientJson::ParallelReverse(p) => {
                let streams: Vec<Rep> = p.reverse_streams().into_iter().map(reverse).collect();
                let mut rep = session(&p.sum, &streams);
                // A reverse stream's CPU time is its receiving thread's: the session's is their sum.
                rep.client_cpu_s = streams.iter().map(|r| r.client_cpu_s).sum();
                Some(rep)
            }
            // Neither is a cell of the grid.
            ClientJson::Latency(_) | ClientJson::Bidir(_) | ClientJson::Ladder(_) => None,
        }
    }
}

fn forward(s: &StreamJson) -> Rep {
    Rep {
        mib_per_s: s.mib_per_s,
        gbit_per_s: s.gbit_per_s,
        client_cpu_s: s.cpu.user_s + s.cpu.sys_s,
        verified: s.verified,
        sndbuf: u64::from(s.client.sender.sndbuf),
        rcvbuf: u64::from(s.server.receiver.rcvbuf),
        limited_by: s.limited_by.map(|l| l.to_string()),
        largest: s
            .server
            .time_split
            .largest
            .clone()
            .map(|top| (top, s.server.time_split.largest_pct)),
        server_log: s.server.receiver.log.map(|l| l.to_string()),
        client_log: None,
    }
}

fn reverse(r: &ReverseJson) -> Rep {
    Rep {
        mib_per_s: r.mib_per_s,
        gbit_per_s: r.gbit_per_s,
        client_cpu_s: r.cpu.user_s + r.cpu.sys_s,
        verified: r.verified,
        sndbuf: u64::from(r.server.sender.sndbuf),
        rcvbuf: u64::from(r.client.receiver.rcvbuf),
        limited_by: r.limited_by.map(|l| l.to_string()),
        largest: None,
        server_log: None,
        client_log: r.client.receiver.log.map(|l| l.to_string()),
    }
}

/// A session: the sum's rate, verdict and verification; its streams' buffers and sinks.
fn session(sum: &tsperf_results::json::SumJson, streams: &[Rep]) -> Rep {
    let first = streams.first();
    let agreed = |f: fn(&Rep) -> Option<String>| {
        let seen: Vec<_> = streams.iter().map(f).collect();
        seen.windows(2)
            .all(|w| w[0] == w[1])
            .then(|| seen.first().cloned().flatten())
            .flatten()
    };
    Rep {
        mib_per_s: sum.mib_per_s,
        gbit_per_s: sum.gbit_per_s,
        // A forward stream's figure is the whole process's over its own span (reverse: see of).
        client_cpu_s: streams.iter().map(|r| r.client_cpu_s).fold(0.0, f64::max),
        verified: sum.verified && streams.len() == sum.streams,
        sndbuf: first.map_or(0, |r| r.sndbuf),
        rcvbuf: first.map_or(0, |r| r.rcvbuf),
        limited_by: sum.limited_by.map(|l| l.to_string()),
        largest: largest_of(streams),
        server_log: agreed(|r| r.server_log.clone()),
        client_log: agreed(|r| r.client_log.clone()),
    }
}

/// The largest phase most of `reps` name, and its median share over those.
pub(super) fn largest_of(reps: &[Rep]) -> Option<(String, Option<f64>)> {
    let top = most_common(reps.iter().filter_map(|r| r.largest.as_ref().map(|l| &l.0)))?;
    let mut pcts: Vec<f64> = reps
        .iter()
        .filter_map(|r| r.largest.as_ref())
        .filter(|l| &l.0 == top)
        .filter_map(|l| l.1)
        .collect();
    Some((top.clone(), (!pcts.is_empty()).then(|| median(&mut pcts))))
}

/// The receiving end's log sink as it said: the server's, or in `reverse` the client's (a
/// session's when all its streams agree); `None` for a latency result.
pub fn logged_to(result: &ClientJson, reverse: bool) -> Option<String> {
    let rep = Rep::of(result)?;
    if reverse {
        rep.client_log
    } else {
        rep.server_log
    }
}
