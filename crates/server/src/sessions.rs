//! The server's view of a `--parallel` session: its streams (one connection each) grouped by the
//! session id of their hellos, and a summary line once the last of them has ended.
//!
//! A session is one run: its streams' bytes are bounded together (`--max-bytes`), and the
//! streams of a served file's session read one file ([`FileId`]), or the later ones are refused.
//!
//! Bounded: at most [`MAX_OPEN`] sessions are followed at once; past that the oldest is dropped
//! (its streams are still served and reported one by one; only the summary is lost).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tsperf_proto::serve::Refusal;
use tsperf_proto::{RefuseCode, Report, Session};
use tsperf_results::units;

/// Sessions followed at once.
pub const MAX_OPEN: usize = 1024;

struct Open {
    id: [u8; 16],
    peer: IpAddr,
    /// The server sends its streams: the two directions of a two-way run share an id.
    reverse: bool,
    count: u8,
    /// The places of the streams that began (bit `index`).
    joined: u128,
    /// The bytes they announced together.
    announced: u64,
    /// The served file its streams read (a reverse session of a named file).
    file: Option<FileId>,
    ended: u8,
    complete: u8,
    bytes: u64,
    first_us: u64,
    last_us: u64,
}

/// The sessions a server follows (one per [`crate::Server`]).
#[derive(Default)]
pub struct Sessions {
    open: Mutex<Vec<Open>>,
}

/// What a stream that completed moved: its bytes and its first and last byte (µs since the
/// epoch, the server's clock): a received stream's report, or a sent one's.
#[derive(Debug, Clone, Copy)]
pub struct Moved {
    /// Bytes.
    pub bytes: u64,
    /// The first byte read or written.
    pub first_us: u64,
    /// The last.
    pub last_us: u64,
}

impl From<&Report> for Moved {
    fn from(r: &Report) -> Moved {
        Moved {
            bytes: r.bytes,
            first_us: r.first_byte_unix_us,
            last_us: r.last_byte_unix_us,
        }
    }
}

pub use tsperf_stream::send::FileId;

/// What a stream that begins asks of its session.
#[derive(Debug, Clone, Copy)]
pub struct Joining<'a> {
    /// The server sends it (a reverse stream).
    pub reverse: bool,
    /// The bytes it announces: a sized stream's length, a reverse stream's pass; 0 for a timed
    /// stream the client sends (bounded by `--max-time`).
    pub bytes: u64,
    /// The served file it reads, by name, when it reads one.
    pub file: Option<(&'a str, FileId)>,
}

/// Where session `s` from `peer`, in direction `reverse`, is in `open`, followed from now if it
/// was not.
fn entry(open: &mut Vec<Open>, s: Session, reverse: bool, peer: SocketAddr) -> usize {
    if let Some(i) = open
        .iter()
        .position(|o| o.id == s.id && o.peer == peer.ip() && o.reverse == reverse)
    {
        return i;
    }
    if open.len() == MAX_OPEN {
        open.remove(0);
    }
    open.push(Open {
        id: s.id,
        peer: peer.ip(),
        reverse,
        count: s.count,
        joined: 0,
        announced: 0,
        file: None,
        ended: 0,
        complete: 0,
        bytes: 0,
        first_us: u64::MAX,
        last_us: 0,
    });
    open.len() - 1
}

/// True for a stream of a session (not one of its own).
fn in_session(s: Session) -> bool {
    s.count > 1 && s.id != [0; 16]
}

/// A stream of session `s` from `peer` begins (`joining`): refused, with the reason, if its
/// place in the session is taken, if the session's streams would announce more than
/// `max_bytes` (`--max-bytes`) together, or if it reads another file than the session's
/// streams before it. A stream refused for the bytes or the file counts as ended, so the
/// session's summary still comes.
pub fn join(
    sessions: &Sessions,
    s: Session,
    peer: SocketAddr,
    joining: Joining<'_>,
    max_bytes: u64,
) -> Result<(), Refusal> {
    if !in_session(s) {
        return Ok(());
    }
    let mut open = sessions.open.lock().unwrap_or_else(PoisonError::into_inner);
    let at = entry(&mut open, s, joining.reverse, peer);
    let o = &mut open[at];
    let bit = 1u128 << u32::from(s.index.min(127));
    if o.joined & bit != 0 {
        return Err((
            RefuseCode::Hello,
            format!(
                "stream {} of this session ({} streams) has already begun: each place is taken \
                 once",
                s.index, o.count
            ),
        ));
    }
    let together = o.announced.saturating_add(joining.bytes);
    if together > max_bytes {
        o.ended = o.ended.saturating_add(1);
        return Err((
            RefuseCode::Limit,
            format!(
                "the session's streams would move {together} bytes together: this server moves \
                 at most {max_bytes} a session, as a stream (--max-bytes)"
            ),
        ));
    }
    if let Some((name, id)) = joining.file {
        match o.file {
            Some(first) if first != id => {
                o.ended = o.ended.saturating_add(1);
                return Err((
                    RefuseCode::Unoffered,
                    format!(
                        "\"{}\" changed while the session's streams opened it (another file by \
                         that name, or another size): a session's streams read one file; run \
                         it again",
                        tsperf_sys::text::Peer(name)
                    ),
                ));
            }
            _ => o.file = Some(id),
        }
    }
    o.joined |= bit;
    o.announced = together;
    Ok(())
}

/// A stream of session `s` from `peer` (sent by the server: `reverse`) ended, with what it
/// moved if it completed. The session's summary line, once it was its last stream.
pub fn ended(
    sessions: &Sessions,
    (s, reverse): (Session, bool),
    peer: SocketAddr,
    done: Option<Moved>,
) -> Option<String> {
    if !in_session(s) {
        return None;
    }
    let mut open = sessions.open.lock().unwrap_or_else(PoisonError::into_inner);
    let at = entry(&mut open, s, reverse, peer);
    let o = &mut open[at];
    o.ended = o.ended.saturating_add(1);
    if let Some(r) = done.filter(|r| r.bytes > 0) {
        o.complete += 1;
        o.bytes += r.bytes;
        o.first_us = o.first_us.min(r.first_us);
        o.last_us = o.last_us.max(r.last_us);
    }
    if o.ended < o.count {
        return None;
    }
    let o = open.remove(at);
    let span = Duration::from_micros(o.last_us.saturating_sub(o.first_us.min(o.last_us)));
    Some(format!(
        "tsserver: session of {} streams from {}: {} of them complete, {} in {} (first to last \
         byte of any): {:.1} MiB/s ({:.2} Gbit/s)\n",
        o.count,
        o.peer,
        o.complete,
        units::size(o.bytes),
        units::duration(span),
        units::mib_per_s(o.bytes, span),
        units::gbit_per_s(o.bytes, span),
    ))
}
