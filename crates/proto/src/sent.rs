//! The sender's report of a reverse stream ([`Frame::Sent`](crate::Frame::Sent), tag 8): what the server measured
//! while it sent, the client's figures for the sending end. Fixed size ([`SENT_BODY`]), so a
//! receiver can hold the end of a reverse stream back whole ([`REVERSE_TAIL`]).

use crate::frame::{be32, be64};
use crate::tcp::{Congestion, Flight, SenderTcp};
use crate::{END_TRAILER, FRAME_HEADER, ProtocolError, ServerIo};

/// The Sent frame's body: 12 `u64`s, the send buffer (`u32`), the server's I/O model (`u8`), its
/// boot id (16 bytes), its `TCP_INFO` (16 `u64`s), its in-flight readings (7 `u64`s) and its
/// congestion control's name (16 bytes, NUL-padded; version 10).
pub const SENT_BODY: usize =
    12 * 8 + 4 + 1 + 16 + SENDER_FIELDS * 8 + FLIGHT_FIELDS * 8 + CONGESTION_FIELD;
/// The congestion control's place in the Sent frame: the name, then NULs to 16 bytes (the
/// kernel's `TCP_CA_NAME_MAX`); all NUL: not known.
pub const CONGESTION_FIELD: usize = 16;
/// What a reverse stream's receiver holds back until the stream ends: the Sent frame and the end
/// trailer.
pub const REVERSE_TAIL: usize = FRAME_HEADER + SENT_BODY + END_TRAILER;

const SENDER_FIELDS: usize = 16;
const FLIGHT_FIELDS: usize = 7;

/// What the sending end of a reverse stream measured. `None`: not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Data bytes sent.
    pub bytes: u64,
    /// Write calls that moved bytes.
    pub writes: u64,
    /// Of those, calls that took fewer bytes than offered.
    pub partial_writes: u64,
    /// Writes that found the socket full (the event loop).
    pub would_block: u64,
    /// The first data write, wall clock, µs since the epoch.
    pub first_write_unix_us: u64,
    /// From the first data write to the last, monotonic ns.
    pub elapsed_ns: u64,
    /// The server's CPU in user mode while it sent, µs.
    pub cpu_user_us: u64,
    /// In kernel mode, µs.
    pub cpu_sys_us: u64,
    /// The sending thread's time on a CPU, ns (schedstat).
    pub on_cpu_ns: Option<u64>,
    /// Its time runnable but waiting for a CPU, ns.
    pub run_queue_ns: Option<u64>,
    /// Time waiting for the data to send (a served file's reads), ns.
    pub source_read_ns: u64,
    /// Bytes per write (the hello's chunk).
    pub chunk: u64,
    /// The send buffer the socket got.
    pub sndbuf: u32,
    /// How the server does its I/O.
    pub server_io: ServerIo,
    /// The server kernel's boot id.
    pub boot_id: Option<[u8; 16]>,
    /// The server socket's `TCP_INFO` at the end: the sender's view.
    pub tcp: SenderTcp,
    /// Its readings about every MiB while it sent.
    pub flight: Flight,
    /// The TCP congestion control it sent with; `None`: not known.
    pub congestion: Option<Congestion>,
}

fn opt(v: Option<u64>) -> u64 {
    v.unwrap_or(u64::MAX)
}

fn known(v: u64) -> Option<u64> {
    (v != u64::MAX).then_some(v)
}

fn tcp_array(t: &SenderTcp) -> [u64; SENDER_FIELDS] {
    [
        opt(t.busy_time_us),
        opt(t.rwnd_limited_us),
        opt(t.sndbuf_limited_us),
        opt(t.total_retrans),
        opt(t.bytes_retrans),
        opt(t.rtt_us),
        opt(t.rttvar_us),
        opt(t.min_rtt_us),
        opt(t.snd_cwnd),
        opt(t.snd_mss),
        opt(t.snd_wnd),
        opt(t.delivery_rate),
        opt(t.bytes_acked),
        opt(t.delivery_rate_app_limited.map(u64::from)),
        opt(t.notsent_bytes),
        opt(t.snd_ssthresh),
    ]
}

fn tcp_from(a: [u64; SENDER_FIELDS]) -> SenderTcp {
    SenderTcp {
        busy_time_us: known(a[0]),
        rwnd_limited_us: known(a[1]),
        sndbuf_limited_us: known(a[2]),
        total_retrans: known(a[3]),
        bytes_retrans: known(a[4]),
        rtt_us: known(a[5]),
        rttvar_us: known(a[6]),
        min_rtt_us: known(a[7]),
        snd_cwnd: known(a[8]),
        snd_mss: known(a[9]),
        snd_wnd: known(a[10]),
        delivery_rate: known(a[11]),
        bytes_acked: known(a[12]),
        delivery_rate_app_limited: known(a[13]).map(|v| v != 0),
        notsent_bytes: known(a[14]),
        snd_ssthresh: known(a[15]),
        segs_out: None,
        data_segs_out: None,
    }
}

impl Sent {
    /// Appends the body.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        for v in [
            self.bytes,
            self.writes,
            self.partial_writes,
            self.would_block,
            self.first_write_unix_us,
            self.elapsed_ns,
            self.cpu_user_us,
            self.cpu_sys_us,
            opt(self.on_cpu_ns),
            opt(self.run_queue_ns),
            self.source_read_ns,
            self.chunk,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.sndbuf.to_be_bytes());
        out.push(match self.server_io {
            ServerIo::Blocking => 0,
            ServerIo::EventLoop => 1,
        });
        out.extend_from_slice(&self.boot_id.unwrap_or([0; 16]));
        for v in tcp_array(&self.tcp) {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let f = &self.flight;
        for v in [
            f.samples,
            f.cwnd_full,
            f.notsent,
            f.in_flight_bytes_sum,
            f.notsent_bytes_sum,
            f.rtt_us_sum,
            f.sndbuf_sum,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let mut name = [0u8; CONGESTION_FIELD];
        if let Some(c) = &self.congestion {
            name[..c.as_str().len()].copy_from_slice(c.as_str().as_bytes());
        }
        out.extend_from_slice(&name);
    }

    /// Decodes a body of [`SENT_BODY`] bytes (the caller checked its size).
    pub(crate) fn decode(b: &[u8]) -> Result<Sent, ProtocolError> {
        let u = |i: usize| be64(&b[i * 8..]);
        let server_io = match b[100] {
            0 => ServerIo::Blocking,
            1 => ServerIo::EventLoop,
            value => {
                return Err(ProtocolError::BadEnum {
                    field: "server_io",
                    value,
                });
            }
        };
        let at = 101 + 16;
        let tcp = tcp_from(std::array::from_fn(|i| be64(&b[at + 8 * i..])));
        let at = at + 8 * SENDER_FIELDS;
        let f = |i: usize| be64(&b[at + 8 * i..]);
        let sent = Sent {
            bytes: u(0),
            writes: u(1),
            partial_writes: u(2),
            would_block: u(3),
            first_write_unix_us: u(4),
            elapsed_ns: u(5),
            cpu_user_us: u(6),
            cpu_sys_us: u(7),
            on_cpu_ns: known(u(8)),
            run_queue_ns: known(u(9)),
            source_read_ns: u(10),
            chunk: u(11),
            sndbuf: be32(&b[96..100]),
            server_io,
            boot_id: Some(<[u8; 16]>::try_from(&b[101..117]).expect("16 bytes"))
                .filter(|id| *id != [0; 16]),
            tcp,
            flight: Flight {
                samples: f(0),
                cwnd_full: f(1),
                notsent: f(2),
                in_flight_bytes_sum: f(3),
                notsent_bytes_sum: f(4),
                rtt_us_sum: f(5),
                sndbuf_sum: f(6),
            },
            congestion: congestion_of(&b[SENT_BODY - CONGESTION_FIELD..SENT_BODY])?,
        };
        if sent.writes > sent.bytes || sent.partial_writes > sent.writes {
            return Err(ProtocolError::BadReport {
                field: "writes",
                why: format!(
                    "{} writes ({} short) for {} bytes",
                    sent.writes, sent.partial_writes, sent.bytes
                ),
            });
        }
        Ok(sent)
    }
}

/// The congestion control field: a name and NULs after it, or all NUL (not known).
fn congestion_of(field: &[u8]) -> Result<Option<Congestion>, ProtocolError> {
    let len = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    if len == 0 && field.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    match Congestion::from_bytes(&field[..len]) {
        Some(c) if field[len..].iter().all(|b| *b == 0) => Ok(Some(c)),
        _ => Err(ProtocolError::BadReport {
            field: "congestion",
            why: format!(
                "{:?} is not a congestion control's name and NULs",
                String::from_utf8_lossy(field)
            ),
        }),
    }
}

/// How a reverse stream ended, read from the frame its receiver held back (the first
/// [`REVERSE_TAIL`] − [`END_TRAILER`] bytes of the tail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// The data is all sent: the sender's report.
    Sent(Box<Sent>),
    /// The sender could not go on (its served file shrank, it is shutting down): why.
    Failed(String),
}

/// The longest reason [`failed_end`] carries: the Sent frame's body less the string's length.
pub const MAX_FAILED_REASON: usize = SENT_BODY - 2;

/// The end of a reverse stream its sender could not finish, in the place of the Sent frame and
/// the end trailer: [`crate::Frame::Abort`] with `why` (cut to [`MAX_FAILED_REASON`] bytes at a
/// character boundary), zero bytes to the Sent frame's size, then the end trailer of what was
/// sent. A receiver holds it back as it would the report, and reads the reason instead.
pub fn failed_end(why: &str, end: crate::end::End) -> Vec<u8> {
    let mut cut = why.len().min(MAX_FAILED_REASON);
    while !why.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = Vec::with_capacity(REVERSE_TAIL);
    crate::encode_frame(&crate::Frame::Abort(why[..cut].to_owned()), &mut out);
    out.resize(REVERSE_TAIL - END_TRAILER, 0);
    out.extend_from_slice(&end.encode());
    out
}

/// The frame a reverse stream's receiver held back: the Sent frame, exactly, or an Abort
/// followed by zero bytes ([`failed_end`]). Anything else is an error.
pub fn decode_closing(frame: &[u8]) -> Result<Closing, ProtocolError> {
    let bad = |what: String| ProtocolError::BadReport {
        field: "closing",
        why: what,
    };
    match crate::decode_frame(frame)? {
        Some((crate::Frame::Sent(s), used)) if used == frame.len() => {
            Ok(Closing::Sent(Box::new(s)))
        }
        Some((crate::Frame::Abort(why), used)) if frame[used..].iter().all(|b| *b == 0) => {
            Ok(Closing::Failed(why))
        }
        Some((other, _)) => {
            let shown: String = format!("{other:?}").chars().take(60).collect();
            Err(bad(format!("{shown} where the Sent frame belongs")))
        }
        None => Err(bad(format!("{} bytes, not a whole frame", frame.len()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, decode_frame, encode_frame};

    /// A failed end is the Sent frame's size, carries its reason (cut at a character
    /// boundary) and the trailer; the Sent frame reads as itself; other frames are refused.
    #[test]
    fn a_failed_end_is_read_in_the_place_of_the_report() {
        let end = crate::end::End {
            length: 1234,
            digest: 99,
        };
        let tail = failed_end("'big.bin' shrank while it was sent", end);
        assert_eq!(tail.len(), REVERSE_TAIL);
        let frame = &tail[..REVERSE_TAIL - END_TRAILER];
        assert_eq!(
            decode_closing(frame),
            Ok(Closing::Failed("'big.bin' shrank while it was sent".into()))
        );
        let last: [u8; END_TRAILER] = tail[REVERSE_TAIL - END_TRAILER..].try_into().unwrap();
        assert_eq!(crate::end::End::decode(&last), end);
        let long = "é".repeat(400);
        let tail = failed_end(&long, end);
        assert_eq!(tail.len(), REVERSE_TAIL);
        let Ok(Closing::Failed(why)) = decode_closing(&tail[..REVERSE_TAIL - END_TRAILER]) else {
            panic!("not read back");
        };
        assert!(why.len() <= MAX_FAILED_REASON && why.chars().all(|c| c == 'é'));
        let mut refused = Vec::new();
        encode_frame(&Frame::Challenge([1; 32]), &mut refused);
        refused.resize(REVERSE_TAIL - END_TRAILER, 0);
        assert!(decode_closing(&refused).is_err());
        let mut junk = tail[..REVERSE_TAIL - END_TRAILER].to_vec();
        *junk.last_mut().unwrap() = 1;
        assert!(decode_closing(&junk).is_err());
    }

    fn sent() -> Sent {
        Sent {
            bytes: 1 << 30,
            writes: 1000,
            partial_writes: 3,
            would_block: 9,
            first_write_unix_us: 1_796_000_000_000_000,
            elapsed_ns: 2_000_000_000,
            cpu_user_us: 5,
            cpu_sys_us: 6,
            on_cpu_ns: Some(7),
            run_queue_ns: None,
            source_read_ns: 8,
            chunk: 10240,
            sndbuf: 4 << 20,
            server_io: ServerIo::EventLoop,
            boot_id: Some([3; 16]),
            tcp: SenderTcp {
                busy_time_us: Some(11),
                delivery_rate_app_limited: Some(true),
                notsent_bytes: Some(0),
                ..SenderTcp::default()
            },
            flight: Flight {
                samples: 4,
                cwnd_full: 1,
                ..Flight::default()
            },
            congestion: crate::tcp::Congestion::new("cubic"),
        }
    }

    /// A Sent frame decodes to itself, is exactly its fixed size, and a sender's numbers that
    /// cannot be are refused.
    #[test]
    fn round_trip_and_checks() {
        let sent = sent();
        let mut out = Vec::new();
        encode_frame(&Frame::Sent(sent), &mut out);
        assert_eq!(out.len(), FRAME_HEADER + SENT_BODY);
        assert_eq!(decode_frame(&out), Ok(Some((Frame::Sent(sent), out.len()))));
        let bad = Sent {
            writes: 5,
            bytes: 4,
            ..sent
        };
        let mut out = Vec::new();
        encode_frame(&Frame::Sent(bad), &mut out);
        assert!(matches!(
            decode_frame(&out),
            Err(ProtocolError::BadReport {
                field: "writes",
                ..
            })
        ));
    }

    /// The sender's congestion control (version 10): its name, NUL-padded, or all NUL (not
    /// known); anything else is refused, naming the field.
    #[test]
    fn the_congestion_control_is_a_name_and_nuls() {
        let sent = sent();
        let mut out = Vec::new();
        encode_frame(&Frame::Sent(sent), &mut out);
        assert_eq!(
            &out[out.len() - CONGESTION_FIELD..],
            b"cubic\0\0\0\0\0\0\0\0\0\0\0"
        );
        let unknown = Sent {
            congestion: None,
            ..sent
        };
        let mut out = Vec::new();
        encode_frame(&Frame::Sent(unknown), &mut out);
        assert_eq!(out.len(), FRAME_HEADER + SENT_BODY);
        assert_eq!(
            decode_frame(&out),
            Ok(Some((Frame::Sent(unknown), out.len())))
        );
        for junk in [
            &b"cu bic\0\0\0\0\0\0\0\0\0\0"[..],
            b"cubic\0x\0\0\0\0\0\0\0\0\0",
        ] {
            let n = out.len();
            out[n - CONGESTION_FIELD..].copy_from_slice(junk);
            assert!(
                matches!(
                    decode_frame(&out),
                    Err(ProtocolError::BadReport {
                        field: "congestion",
                        ..
                    })
                ),
                "{junk:?}"
            );
        }
    }
}
