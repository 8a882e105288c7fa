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

/// A figure of the server's report the stream contradicts, or one no sender can have.
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
    /// Its write calls cannot have moved its bytes: each moves at least 1 byte and at most a
    /// chunk (a batch of them with writev), and no more of them were partial than there
    /// were.
    Writes {
        /// The report's writes.
        writes: u64,
        /// Of those, partial.
        partial: u64,
        /// Its bytes.
        bytes: u64,
        /// Its chunk.
        chunk: u64,
    },
    /// A figure past what a Linux sender can have: `what` is `value`, at most `most`.
    Beyond {
        /// Which figure, in words.
        what: &'static str,
        /// The report's.
        value: u64,
        /// The most it can be.
        most: u64,
    },
    /// Its first write is not between the hello and the end, on the server's clock as the
    /// clock queries put it.
    FirstWrite {
        /// The report's, µs since the epoch.
        at_us: u64,
        /// The hello and the end, on the server's clock, µs since the epoch.
        window_us: (u64, u64),
    },
}

/// What the client saw of a reverse stream, to hold the server's report to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The end trailer.
    pub end: End,
    /// The write size asked for.
    pub chunk: u32,
    /// Chunks per call asked for (`writev`'s batch; 1 for the others).
    pub batch: u32,
    /// From the hello to the end, at the client.
    pub span: Duration,
    /// The hello and the end on the server's clock (µs since the epoch), widened by the clock
    /// queries' error: its first write is between them. `None` without clock queries.
    pub window_us: Option<(u64, u64)>,
}

/// How often, at most, a byte (or a SYN or FIN) is sent again before Linux gives up on the
/// connection: `tcp_retries2` (15) retries and the first sending.
pub const MOST_SENDINGS: u64 = 16;
/// The largest send buffer a Linux socket has: its `int` size.
pub const MOST_SNDBUF: u64 = i32::MAX as u64;
/// The largest window TCP can offer: 65535 scaled by 2^14.
pub const MOST_WINDOW: u64 = 65_535 << 14;

/// Checks the server's report `s` against the stream as the client saw it, as a stream's
/// Report is checked: its times lie inside the client's span from the hello to the end (0.1%
/// and 1 ms of clock-rate tolerance; the kernel's TCP clocks, which tick in jiffies, 20 ms;
/// the fastest round trip 1 s, as the connection's first may come before the hello), its
/// write size is the chunk asked for, its byte count is the end trailer's, its writes (of a
/// chunk, or of a batch of them) can have moved its bytes, its retransmissions, send buffer and window are ones a Linux sender can
/// have, and its first write falls between the hello and the end on its own clock.
pub fn check(s: &Sent, seen: &Seen) -> Result<(), Contradiction> {
    times(s, seen.span)?;
    if s.chunk != u64::from(seen.chunk) {
        return Err(Contradiction::Chunk {
            sent: s.chunk,
            asked: seen.chunk,
        });
    }
    if s.bytes != seen.end.length {
        return Err(Contradiction::Bytes {
            sent: s.bytes,
            trailer: seen.end.length,
        });
    }
    let fewest = s
        .bytes
        .div_ceil(s.chunk.max(1) * u64::from(seen.batch.max(1)));
    if s.writes < fewest || s.writes > s.bytes || s.partial_writes > s.writes {
        return Err(Contradiction::Writes {
            writes: s.writes,
            partial: s.partial_writes,
            bytes: s.bytes,
            chunk: s.chunk,
        });
    }
    beyond(s)?;
    if let Some((lo, hi)) = seen.window_us
        && s.bytes > 0
        && !(lo..=hi).contains(&s.first_write_unix_us)
    {
        return Err(Contradiction::FirstWrite {
            at_us: s.first_write_unix_us,
            window_us: (lo, hi),
        });
    }
    Ok(())
}

/// The report's times against the client's `span` ([`check`]).
fn times(s: &Sent, span: Duration) -> Result<(), Contradiction> {
    let bound = span.mul_f64(1.001) + Duration::from_millis(1);
    let d = Duration::from_nanos;
    let us = |us: u64| Duration::from_nanos(us.saturating_mul(1000));
    let tcp = |v: Option<u64>, slack: u64| {
        us(v.unwrap_or(0)).saturating_sub(Duration::from_millis(slack))
    };
    let times = [
        ("its first to last write", d(s.elapsed_ns)),
        (
            "its CPU time",
            us(s.cpu_user_us).saturating_add(us(s.cpu_sys_us)),
        ),
        ("its time on a CPU", d(s.on_cpu_ns.unwrap_or(0))),
        ("its wait for a CPU", d(s.run_queue_ns.unwrap_or(0))),
        ("its wait for its file", d(s.source_read_ns)),
        ("its TCP's busy time", tcp(s.tcp.busy_time_us, 20)),
        (
            "its TCP's time at the receiver's window",
            tcp(s.tcp.rwnd_limited_us, 20),
        ),
        (
            "its TCP's time at its send buffer",
            tcp(s.tcp.sndbuf_limited_us, 20),
        ),
        ("its fastest round trip", tcp(s.tcp.min_rtt_us, 1000)),
    ];
    match times.into_iter().find(|(_, took)| *took > bound) {
        Some((what, took)) => Err(Contradiction::Time { what, took, span }),
        None => Ok(()),
    }
}

/// The report's figures against what a Linux sender can have ([`check`]).
fn beyond(s: &Sent) -> Result<(), Contradiction> {
    let limits = [
        (
            "retransmitted segments",
            s.tcp.total_retrans,
            MOST_SENDINGS.saturating_mul(s.bytes.saturating_add(2)),
        ),
        (
            "retransmitted bytes",
            s.tcp.bytes_retrans,
            MOST_SENDINGS.saturating_mul(s.bytes),
        ),
        ("its send buffer", Some(u64::from(s.sndbuf)), MOST_SNDBUF),
        ("the receiver's window", s.tcp.snd_wnd, MOST_WINDOW),
        ("its unsent bytes", s.tcp.notsent_bytes, MOST_SNDBUF),
    ];
    match limits
        .into_iter()
        .find_map(|(what, v, most)| v.filter(|v| *v > most).map(|v| (what, v, most)))
    {
        Some((what, value, most)) => Err(Contradiction::Beyond { what, value, most }),
        None => Ok(()),
    }
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
        s.writes = 1;
        (s.elapsed_ns, s.cpu_user_us, s.cpu_sys_us) = (1_000_000_000, 10, 10);
        (s.on_cpu_ns, s.run_queue_ns, s.source_read_ns) = (None, None, 0);
        let end = End {
            length: 1000,
            digest: 0,
        };
        let span = Duration::from_secs(1);
        let seen = |chunk, end| Seen {
            end,
            chunk,
            batch: 1,
            span,
            window_us: None,
        };
        assert_eq!(check(&s, &seen(10240, end)), Ok(()));
        let late = Sent {
            elapsed_ns: 1_003_000_000,
            ..s
        };
        assert_eq!(
            check(&late, &seen(10240, end)),
            Err(Contradiction::Time {
                what: "its first to last write",
                took: Duration::from_nanos(1_003_000_000),
                span
            })
        );
        assert_eq!(
            check(&s, &seen(1024, end)),
            Err(Contradiction::Chunk {
                sent: 10240,
                asked: 1024
            })
        );
        let short = End { length: 999, ..end };
        assert_eq!(
            check(&s, &seen(10240, short)),
            Err(Contradiction::Bytes {
                sent: 1000,
                trailer: 999
            })
        );
    }

    /// A 64 MiB stream of 10240-byte writes over 2 s, as the client saw it, and a report of it
    /// whose every figure is at its edge.
    fn edges() -> (Sent, Seen) {
        let bytes = 64 << 20;
        let seen = Seen {
            end: End {
                length: bytes,
                digest: 0,
            },
            chunk: 10240,
            batch: 1,
            span: Duration::from_secs(2),
            window_us: Some((1_796_000_000_000_000, 1_796_000_002_000_000)),
        };
        let fine = Sent {
            chunk: 10240,
            writes: bytes.div_ceil(10240),
            first_write_unix_us: 1_796_000_000_500_000,
            elapsed_ns: 1_000_000_000,
            tcp: crate::tcp::SenderTcp {
                total_retrans: Some(MOST_SENDINGS * (bytes + 2)),
                busy_time_us: Some(2_010_000),
                min_rtt_us: Some(20),
                ..Default::default()
            },
            sndbuf: i32::MAX as u32,
            ..sent(bytes)
        };
        (fine, seen)
    }

    /// Issue 51 (11): writes that cannot have moved the bytes are named (one write of 10240
    /// bytes for 64 MiB, more writes than bytes, more partial writes than writes); figures at
    /// their edges pass.
    #[test]
    fn writes_that_cannot_move_the_bytes_are_named() {
        let (fine, seen) = edges();
        let bytes = fine.bytes;
        assert_eq!(check(&fine, &seen), Ok(()));
        let writes = |writes, partial| {
            Err(Contradiction::Writes {
                writes,
                partial,
                bytes,
                chunk: 10240,
            })
        };
        assert_eq!(check(&Sent { writes: 1, ..fine }, &seen), writes(1, 0));
        assert_eq!(
            check(
                &Sent {
                    writes: bytes + 1,
                    ..fine
                },
                &seen
            ),
            writes(bytes + 1, 0)
        );
        let n = fine.writes;
        assert_eq!(
            check(
                &Sent {
                    partial_writes: n + 1,
                    ..fine
                },
                &seen
            ),
            writes(n, n + 1)
        );
        // A server asked for writev of 8 chunks moves up to 8 chunks a call.
        let batched = Seen { batch: 8, ..seen };
        let fewest = bytes.div_ceil(8 * 10240);
        let by = |writes| Sent { writes, ..fine };
        assert_eq!(check(&by(fewest), &batched), Ok(()));
        assert_eq!(check(&by(fewest - 1), &batched), writes(fewest - 1, 0));
        assert_eq!(check(&by(fewest), &seen), writes(fewest, 0), "unbatched");
    }

    /// Issue 51 (11): figures no Linux sender can have are named: 10^12 retransmissions, a
    /// 4 GiB send buffer, a busy time longer than the stream, a first write in 2100 (but not
    /// without clock queries to place it).
    #[test]
    fn figures_no_sender_has_are_named() {
        let (fine, seen) = edges();
        let tcp = |t: crate::tcp::SenderTcp| Sent { tcp: t, ..fine };
        let retransmits = crate::tcp::SenderTcp {
            total_retrans: Some(1_000_000_000_000),
            ..fine.tcp
        };
        assert!(matches!(
            check(&tcp(retransmits), &seen),
            Err(Contradiction::Beyond {
                what: "retransmitted segments",
                ..
            })
        ));
        assert!(matches!(
            check(
                &Sent {
                    sndbuf: u32::MAX,
                    ..fine
                },
                &seen
            ),
            Err(Contradiction::Beyond {
                what: "its send buffer",
                ..
            })
        ));
        let busy = crate::tcp::SenderTcp {
            busy_time_us: Some(2_100_000),
            ..fine.tcp
        };
        assert!(matches!(
            check(&tcp(busy), &seen),
            Err(Contradiction::Time {
                what: "its TCP's busy time",
                ..
            })
        ));
        let in_2100 = Sent {
            first_write_unix_us: 4_102_444_800_000_000,
            ..fine
        };
        assert_eq!(
            check(&in_2100, &seen),
            Err(Contradiction::FirstWrite {
                at_us: in_2100.first_write_unix_us,
                window_us: seen.window_us.unwrap()
            })
        );
        let unseen = Seen {
            window_us: None,
            ..seen
        };
        assert_eq!(check(&in_2100, &unseen), Ok(()));
    }
}
