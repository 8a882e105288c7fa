//! One renderer for every stream run: any direction, any stream count. A lone stream prints
//! its full report (the seed's lines, both ends' figures, the verdict); a session a line per
//! stream and a SUM line; `--bidir` each direction under its heading. The JSON is one typed
//! [`ClientOutput`], and [`finish`] judges every run the same way.

use super::human::{mismatch, stream_human};
use super::reverse::{reverse_failure_object, reverse_object};
use super::session::{session_human, session_json};
use super::{VERSION, forward_object, sections, stream_failure_object};
use crate::StreamFailure;
use crate::outcome::Detail;
use crate::run::{Outcome, Session, Side, Streams};
use tsperf_results::json::{
    BidirJson, ClientJson, ClientOutput, Direction, FailureJson, Measured, SessionEntry,
    StreamEntry,
};
use tsperf_results::units;

/// One stream's entry: its object, or its failure's, as it prints alone.
pub(super) fn entry(side: Side, s: &Outcome) -> StreamEntry {
    match (s, side) {
        (Ok(o), _) => StreamEntry::Done(match &o.detail {
            Detail::Sent(d) => Measured::Stream(forward_object(o, d)),
            Detail::Received(d) => Measured::Reverse(reverse_object(o, d)),
        }),
        (Err(f), Side::Sent) => StreamEntry::SendFailed(stream_failure_object(f)),
        (Err(f), Side::Received) => StreamEntry::ReceiveFailed(reverse_failure_object(f)),
    }
}

/// One direction's object: a lone stream's, a session's, or why the session could not start.
fn direction(d: &Result<Session, String>) -> Direction {
    match d {
        Ok(s) if !s.striped => Direction::Stream(entry(s.side, &s.streams[0])),
        Ok(s) => Direction::Session(match s.side {
            Side::Sent => SessionEntry::Sent(session_json(s)),
            Side::Received => SessionEntry::Received(session_json(s)),
        }),
        Err(e) => Direction::Failed(FailureJson {
            tsperf: VERSION.into(),
            mode: "stream".into(),
            error: e.clone(),
            usage: false,
            interrupted: crate::interrupt::requested(),
        }),
    }
}

/// The one object `tsclient --json` prints for a stream run.
pub fn json(o: &Streams) -> ClientOutput {
    let d = match (&o.forward, &o.reverse) {
        (Some(f), Some(r)) => {
            return ClientOutput::Result(ClientJson::Bidir(BidirJson {
                tsperf: VERSION.into(),
                forward: Box::new(direction(f)),
                reverse: Box::new(direction(r)),
            }));
        }
        (Some(d), None) | (None, Some(d)) => direction(d),
        // Every direction runs at least one way; a run that went none says so, not a panic.
        (None, None) => direction(&Err("the run went neither way".to_owned())),
    };
    match d {
        Direction::Stream(StreamEntry::Done(Measured::Stream(s))) => {
            ClientOutput::Result(ClientJson::Stream(s))
        }
        Direction::Stream(StreamEntry::Done(Measured::Reverse(r))) => {
            ClientOutput::Result(ClientJson::Reverse(r))
        }
        Direction::Stream(failed) => ClientOutput::StreamFailed(failed),
        Direction::Session(SessionEntry::Sent(p)) => ClientOutput::Result(ClientJson::Parallel(p)),
        Direction::Session(SessionEntry::Received(p)) => {
            ClientOutput::Result(ClientJson::ParallelReverse(p))
        }
        Direction::Failed(f) => ClientOutput::Failed(f),
    }
}

/// The report for people: at a glance (iperf3's table and a few sentences), or with `verbose`
/// every figure. A
/// run that failed outright prints nothing here: its error says it all (an interrupted
/// stream says what it had done).
pub fn human(o: &Streams, verbose: bool) -> String {
    if !verbose {
        return super::brief::report(o);
    }
    match (&o.forward, &o.reverse) {
        (Some(f), Some(r)) => format!(
            "to the server:\n{}\nfrom the server:\n{}",
            direction_human(f, true),
            direction_human(r, true)
        ),
        (Some(d), None) | (None, Some(d)) => direction_human(d, false),
        (None, None) => String::new(),
    }
}

/// One direction for people; `headed`: under a `--bidir` heading, where a failure is a line.
fn direction_human(d: &Result<Session, String>, headed: bool) -> String {
    let s = match d {
        Err(e) if headed => return format!("  failed: {e}\n"),
        Err(_) => return String::new(),
        Ok(s) if s.striped => return session_human(s),
        Ok(s) => s,
    };
    match &s.streams[0] {
        Ok(o) => stream_human(o),
        Err(f) if headed => format!("  failed: {:#}\n", f.error),
        Err(f) if f.interrupted => sections::interrupted(f, s.side, s.timed),
        Err(_) => String::new(),
    }
}

/// How a run ends.
#[derive(Debug)]
pub enum Exit {
    /// Every stream verified.
    Success,
    /// Ctrl-C or SIGTERM stopped it (exit 130): what to say on stderr.
    Interrupted(Vec<String>),
    /// It failed (exit 1): why.
    Failed(String),
}

/// How one direction stands.
enum Standing {
    Verified,
    /// Stopped early: what to say, and the error of a stream the stop cut off.
    Interrupted(String, Option<String>),
    Failed(String),
}

/// Judges a run: a stream not verified, or failed, is a failure; an interrupted run whose
/// streams verified up to the stop exits as interrupted.
pub fn finish(o: &Streams) -> Exit {
    let both = o.forward.is_some() && o.reverse.is_some();
    let sides = [
        ("to the server", &o.forward),
        ("from the server", &o.reverse),
    ];
    let standings: Vec<_> = sides
        .iter()
        .filter_map(|(name, d)| d.as_ref().map(|d| (*name, standing(d))))
        .collect();
    let failures: Vec<String> = standings
        .iter()
        .filter_map(|(name, s)| match s {
            Standing::Failed(why) if both => Some(format!("{name}: {why}")),
            Standing::Failed(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        return Exit::Failed(failures.join("; "));
    }
    let stops: Vec<_> = standings
        .iter()
        .filter_map(|(name, s)| match s {
            Standing::Interrupted(note, cut) => Some((name, note, cut)),
            _ => None,
        })
        .collect();
    match stops.as_slice() {
        [] => Exit::Success,
        [(_, note, _)] if !both => Exit::Interrupted(vec![(*note).clone()]),
        stops if stops.iter().all(|(_, _, cut)| cut.is_none()) => Exit::Interrupted(vec![
            "interrupted, both directions verified up to the stop".to_owned(),
        ]),
        stops => Exit::Interrupted(
            stops
                .iter()
                .filter_map(|(name, _, cut)| {
                    cut.as_ref().map(|e| format!("interrupted; {name}: {e}"))
                })
                .collect(),
        ),
    }
}

/// How one direction stands, with the words for it.
fn standing(d: &Result<Session, String>) -> Standing {
    let s = match d {
        Err(e) => return Standing::Failed(e.clone()),
        Ok(s) if s.striped => return session_standing(s),
        Ok(s) => s,
    };
    match &s.streams[0] {
        Ok(o) if !o.verified() => Standing::Failed(mismatch(o)),
        Ok(o) if o.interrupted => Standing::Interrupted(
            match o.side() {
                Side::Sent => format!(
                    "interrupted after {} of the timed run, every byte verified",
                    units::duration(o.measured.elapsed)
                ),
                Side::Received => format!(
                    "interrupted after receiving {}, every one verified",
                    units::bytes(o.measured.bytes)
                ),
            },
            None,
        ),
        Ok(_) => Standing::Verified,
        Err(f) if f.interrupted => {
            Standing::Interrupted(cut_off(s, f), Some(format!("{:#}", f.error)))
        }
        Err(f) => Standing::Failed(format!("{:#}", f.error)),
    }
}

/// What a lone stream cut off by a stop had done.
fn cut_off(s: &Session, f: &StreamFailure) -> String {
    match s.side {
        Side::Received => format!("interrupted after receiving {}", units::bytes(f.sent)),
        Side::Sent => match (s.timed, f.bytes) {
            (true, _) => format!(
                "interrupted after sending {} of a timed run",
                units::bytes(f.sent)
            ),
            (false, Some(b)) => format!("interrupted after sending {}", units::bytes_of(f.sent, b)),
            (false, None) => format!("interrupted after sending {}", units::bytes(f.sent)),
        },
    }
}

/// How a session stands: a failed stream fails it, a stop cuts it off.
fn session_standing(s: &Session) -> Standing {
    if let Some(f) = s.failure() {
        let error = format!("{:#}", f.error);
        return if f.interrupted {
            Standing::Interrupted(format!("interrupted: {error}"), Some(error))
        } else {
            Standing::Failed(format!("a stream of the session failed: {error}"))
        };
    }
    if !s.verified() {
        return Standing::Failed(
            match s.side {
                Side::Sent => {
                    "NOT VERIFIED: the session's stripes do not all agree with the server"
                }
                Side::Received => {
                    "NOT VERIFIED: the session's streams do not all agree with the server"
                }
            }
            .to_owned(),
        );
    }
    if s.interrupted() {
        return Standing::Interrupted(
            "interrupted, every stream verified up to the stop".to_owned(),
            None,
        );
    }
    Standing::Verified
}
