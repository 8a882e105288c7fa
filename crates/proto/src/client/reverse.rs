//! The receiving client's end of a reverse stream, without I/O: what the held-back tail says
//! ([`ending`]), and whether the server's report agrees with the stream as the client saw it
//! ([`check`]). The driver renders the typed answers in its own words.

use std::time::Duration;

use crate::end::{End, Tail};
use crate::sent::{Closing, REVERSE_TAIL, Sent, decode_closing};
use crate::{END_TRAILER, ProtocolError};

/// Why the held-back tail is not a report and an end trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The stream ended with fewer bytes than a report and a trailer.
    Short {
        /// The bytes it held.
        held: usize,
    },
    /// The bytes where the report belongs are not one.
    NotReport(ProtocolError),
    /// The server could not go on and said why in its report's place, after `bytes`.
    Stopped {
        /// Data bytes its end trailer counts.
        bytes: u64,
        /// Its reason, as sent (untrusted text).
        why: String,
    },
}

/// The end of a reverse stream, held back by `tail`: the server's Sent report and its end
/// trailer, or why they are not there.
pub fn ending(tail: &Tail<REVERSE_TAIL>) -> Result<(Sent, End), Ending> {
    let held = tail.bytes();
    let end = match tail.end() {
        Some(end) if held.len() >= REVERSE_TAIL => end,
        _ => return Err(Ending::Short { held: held.len() }),
    };
    match decode_closing(&held[..REVERSE_TAIL - END_TRAILER]) {
        Ok(Closing::Sent(sent)) => Ok((*sent, end)),
        Ok(Closing::Failed(why)) => Err(Ending::Stopped {
            bytes: end.length,
            why,
        }),
        Err(e) => Err(Ending::NotReport(e)),
    }
}

/// A figure of the server's report the stream contradicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contradiction {
    /// One of its times is longer than the whole stream took at the client, from the hello to
    /// the end (with a clock-rate tolerance).
    Time {
        /// Which time, in words ("its CPU time").
        what: &'static str,
        /// How long the report says it took.
        took: Duration,
        /// How long the whole stream took at the client.
        span: Duration,
    },
    /// Its write size is not the one asked for.
    Chunk {
        /// The report's.
        sent: u64,
        /// The hello's.
        asked: u32,
    },
    /// Its byte count is not its end trailer's.
    Bytes {
        /// The report's.
        sent: u64,
        /// The trailer's.
        trailer: u64,
    },
}

/// Checks the server's report `s` against the stream, as a stream's Report is checked: its
/// times lie inside the client's `span` from the hello to the end (0.1% and 1 ms of clock-rate
/// tolerance), its write size is the `chunk` asked for, its byte count is the `end` trailer's.
pub fn check(s: &Sent, end: End, chunk: u32, span: Duration) -> Result<(), Contradiction> {
    let bound = span.mul_f64(1.001) + Duration::from_millis(1);
    let d = Duration::from_nanos;
    let us = |us: u64| Duration::from_nanos(us.saturating_mul(1000));
    let times = [
        ("its first to last write", d(s.elapsed_ns)),
        (
            "its CPU time",
            us(s.cpu_user_us).saturating_add(us(s.cpu_sys_us)),
        ),
        ("its time on a CPU", d(s.on_cpu_ns.unwrap_or(0))),
        ("its wait for a CPU", d(s.run_queue_ns.unwrap_or(0))),
        ("its wait for its file", d(s.source_read_ns)),
    ];
    if let Some((what, took)) = times.into_iter().find(|(_, took)| *took > bound) {
        return Err(Contradiction::Time { what, took, span });
    }
    if s.chunk != u64::from(chunk) {
        return Err(Contradiction::Chunk {
            sent: s.chunk,
            asked: chunk,
        });
    }
    if s.bytes != end.length {
        return Err(Contradiction::Bytes {
            sent: s.bytes,
            trailer: end.length,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sent::failed_end;

    fn sent(bytes: u64) -> Sent {
        Sent {
            bytes,
            writes: 10,
            partial_writes: 0,
            would_block: 0,
            first_write_unix_us: 1_796_000_000_000_000,
            elapsed_ns: 2_000_000,
            cpu_user_us: 5,
            cpu_sys_us: 6,
            on_cpu_ns: Some(7),
            run_queue_ns: None,
            source_read_ns: 8,
            chunk: 100,
            sndbuf: 4 << 20,
            server_io: crate::ServerIo::EventLoop,
            boot_id: None,
            tcp: crate::tcp::SenderTcp::default(),
            flight: crate::tcp::Flight::default(),
            congestion: None,
        }
    }

    fn tail_of(bytes: &[u8]) -> Tail<REVERSE_TAIL> {
        let mut tail = Tail::default();
        tail.feed(bytes, |_| {});
        tail
    }

    /// A whole report and trailer come back typed; a short tail, bytes that are not a report,
    /// and the server's reason in its place each say which.
    #[test]
    fn the_tail_is_a_report_a_reason_or_neither() {
        let s = sent(1000);
        let end = End {
            length: 1000,
            digest: 7,
        };
        let mut wire = Vec::new();
        crate::encode_frame(&crate::Frame::Sent(s), &mut wire);
        wire.extend_from_slice(&end.encode());
        assert_eq!(ending(&tail_of(&wire)), Ok((s, end)));
        assert_eq!(
            ending(&tail_of(&wire[..10])),
            Err(Ending::Short { held: 10 })
        );
        let why = failed_end("the served file shrank", end);
        assert_eq!(
            ending(&tail_of(&why)),
            Err(Ending::Stopped {
                bytes: 1000,
                why: "the served file shrank".into()
            })
        );
        let mut garbage = vec![0xEE; REVERSE_TAIL - END_TRAILER];
        garbage.extend_from_slice(&end.encode());
        assert!(matches!(
            ending(&tail_of(&garbage)),
            Err(Ending::NotReport(_))
        ));
    }

    /// Each figure the stream contradicts is named; a report inside the tolerance passes.
    #[test]
    fn a_report_the_stream_contradicts_is_named() {
        let mut s = sent(1000);
        s.chunk = 10240;
        (s.elapsed_ns, s.cpu_user_us, s.cpu_sys_us) = (1_000_000_000, 10, 10);
        (s.on_cpu_ns, s.run_queue_ns, s.source_read_ns) = (None, None, 0);
        let end = End {
            length: 1000,
            digest: 0,
        };
        let span = Duration::from_secs(1);
        assert_eq!(check(&s, end, 10240, span), Ok(()));
        let late = Sent {
            elapsed_ns: 1_003_000_000,
            ..s
        };
        assert_eq!(
            check(&late, end, 10240, span),
            Err(Contradiction::Time {
                what: "its first to last write",
                took: Duration::from_nanos(1_003_000_000),
                span
            })
        );
        assert_eq!(
            check(&s, end, 1024, span),
            Err(Contradiction::Chunk {
                sent: 10240,
                asked: 1024
            })
        );
        let short = End { length: 999, ..end };
        assert_eq!(
            check(&s, short, 10240, span),
            Err(Contradiction::Bytes {
                sent: 1000,
                trailer: 999
            })
        );
    }
}
