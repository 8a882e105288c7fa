//! What the kernel knows about a TCP connection (Linux `TCP_INFO`), as values: the sender's view
//! ([`SenderTcp`]: how long it had data to send and what held it back) and the receiver's
//! ([`ReceiverTcp`]: its window and round trip, carried in the report). Reading them from a
//! socket is `tsperf_sys::tcpinfo`'s job; this module only holds and orders them.

/// The sender's `TCP_INFO` at the end of a transfer (the client's socket). `None`: the kernel
/// did not say. Times in µs, as the kernel keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SenderTcp {
    /// Time the connection had data to send (`tcpi_busy_time`), the limited times included.
    pub busy_time_us: Option<u64>,
    /// Of that, time the receiver's window was full (`tcpi_rwnd_limited`).
    pub rwnd_limited_us: Option<u64>,
    /// Of that, time the send buffer was what held data back (`tcpi_sndbuf_limited`).
    pub sndbuf_limited_us: Option<u64>,
    /// Segments retransmitted (`tcpi_total_retrans`).
    pub total_retrans: Option<u64>,
    /// Bytes retransmitted.
    pub bytes_retrans: Option<u64>,
    /// The smoothed round trip, µs.
    pub rtt_us: Option<u64>,
    /// Its variation, µs.
    pub rttvar_us: Option<u64>,
    /// The fastest round trip seen, µs.
    pub min_rtt_us: Option<u64>,
    /// Congestion window, in segments.
    pub snd_cwnd: Option<u64>,
    /// The largest segment it sends, bytes.
    pub snd_mss: Option<u64>,
    /// The receiver's window as the sender last saw it, in bytes.
    pub snd_wnd: Option<u64>,
    /// The kernel's estimate of the delivery rate, in bytes per second.
    pub delivery_rate: Option<u64>,
    /// Segments sent.
    pub segs_out: Option<u64>,
    /// Segments sent that carried data.
    pub data_segs_out: Option<u64>,
    /// Bytes the peer acknowledged.
    pub bytes_acked: Option<u64>,
    /// The last delivery-rate sample was taken while the application, not the network, left
    /// the connection short of data (`tcpi_delivery_rate_app_limited`).
    #[serde(default)]
    pub delivery_rate_app_limited: Option<bool>,
    /// Bytes in the send buffer not yet sent, at the end (`tcpi_notsent_bytes`).
    #[serde(default)]
    pub notsent_bytes: Option<u64>,
    /// The slow-start threshold, in segments (`tcpi_snd_ssthresh`; a huge value: never left
    /// slow start).
    #[serde(default)]
    pub snd_ssthresh: Option<u64>,
}

impl SenderTcp {
    /// True when the kernel said anything at all.
    pub fn available(&self) -> bool {
        self.busy_time_us.is_some() || self.rtt_us.is_some()
    }
}

/// One reading of the sender's connection taken during a transfer: what was in flight and what
/// waited in the send buffer. The end-of-transfer reading cannot say this: by then everything
/// is acknowledged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlightSample {
    /// Segments sent and not yet acknowledged, less those SACKed or lost, plus retransmitted
    /// ones: what the kernel counts against the congestion window.
    pub in_flight: u64,
    /// The congestion window, in segments.
    pub snd_cwnd: u64,
    /// Bytes per segment.
    pub snd_mss: u64,
    /// Bytes in the send buffer not yet sent (`tcpi_notsent_bytes`).
    pub notsent_bytes: u64,
    /// The smoothed round trip then, µs.
    pub rtt_us: u64,
    /// The send buffer's size then, bytes (`SO_SNDBUF`; autotuning grows it).
    pub sndbuf: u64,
}

/// The sender's connection sampled during a transfer (a [`FlightSample`] about every MiB
/// sent), summed: the means say what held data back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Flight {
    /// Readings taken.
    pub samples: u64,
    /// Readings with as many segments in flight as the congestion window allows.
    pub cwnd_full: u64,
    /// Readings with bytes waiting unsent in the send buffer.
    pub notsent: u64,
    /// Sum of the bytes in flight (segments × MSS).
    pub in_flight_bytes_sum: u64,
    /// Sum of the unsent bytes.
    pub notsent_bytes_sum: u64,
    /// Sum of the round trips, µs.
    pub rtt_us_sum: u64,
    /// Sum of the send buffer's sizes, bytes.
    pub sndbuf_sum: u64,
}

impl Flight {
    /// Adds one reading.
    pub fn add(&mut self, s: FlightSample) {
        self.samples += 1;
        self.cwnd_full += u64::from(s.snd_cwnd > 0 && s.in_flight >= s.snd_cwnd);
        self.notsent += u64::from(s.notsent_bytes > 0);
        self.in_flight_bytes_sum += s.in_flight.saturating_mul(s.snd_mss);
        self.notsent_bytes_sum += s.notsent_bytes;
        self.rtt_us_sum += s.rtt_us;
        self.sndbuf_sum += s.sndbuf;
    }

    /// The mean of a sum over the readings; `None` without readings.
    pub fn mean(&self, sum: u64) -> Option<u64> {
        (self.samples > 0).then(|| sum / self.samples)
    }

    /// The share of readings, in %, `count` is; `None` without readings.
    pub fn share(&self, count: u64) -> Option<f64> {
        (self.samples > 0).then(|| 100.0 * count as f64 / self.samples as f64)
    }
}

/// The receiver's `TCP_INFO` at the end of a transfer (the server's socket), as the report
/// carries it. `None`: the kernel (or an older server) did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReceiverTcp {
    /// The receive window the kernel's autotuning settled on, in bytes (`tcpi_rcv_space`).
    pub rcv_space: Option<u64>,
    /// The receiver's estimate of the round trip, µs (`tcpi_rcv_rtt`).
    pub rcv_rtt_us: Option<u64>,
    /// The kernel's estimate of the segments it receives, bytes.
    pub rcv_mss: Option<u64>,
    /// The largest segment it told the peer to send, bytes.
    pub advmss: Option<u64>,
    /// The window's slow-start threshold, bytes.
    pub rcv_ssthresh: Option<u64>,
    /// The window it advertised last, in bytes (Linux 6.2 and later).
    pub rcv_wnd: Option<u64>,
    /// Segments received.
    pub segs_in: Option<u64>,
    /// Segments received that carried data.
    pub data_segs_in: Option<u64>,
    /// Segments that arrived out of order.
    pub rcv_ooopack: Option<u64>,
    /// Bytes received.
    pub bytes_received: Option<u64>,
}

impl ReceiverTcp {
    /// The fields in wire order (the report's table in [`crate`]).
    pub fn to_array(&self) -> [Option<u64>; RECEIVER_FIELDS] {
        [
            self.rcv_space,
            self.rcv_rtt_us,
            self.rcv_mss,
            self.advmss,
            self.rcv_ssthresh,
            self.rcv_wnd,
            self.segs_in,
            self.data_segs_in,
            self.rcv_ooopack,
            self.bytes_received,
        ]
    }

    /// The fields from wire order.
    pub fn from_array(a: [Option<u64>; RECEIVER_FIELDS]) -> ReceiverTcp {
        let [
            rcv_space,
            rcv_rtt_us,
            rcv_mss,
            advmss,
            rcv_ssthresh,
            rcv_wnd,
            segs_in,
            data_segs_in,
            rcv_ooopack,
            bytes_received,
        ] = a;
        ReceiverTcp {
            rcv_space,
            rcv_rtt_us,
            rcv_mss,
            advmss,
            rcv_ssthresh,
            rcv_wnd,
            segs_in,
            data_segs_in,
            rcv_ooopack,
            bytes_received,
        }
    }

    /// True when the kernel said anything at all.
    pub fn available(&self) -> bool {
        self.to_array().iter().any(Option::is_some)
    }
}

/// Fields of [`ReceiverTcp`] on the wire.
pub const RECEIVER_FIELDS: usize = 10;

/// The longest TCP congestion control name (the kernel's `TCP_CA_NAME_MAX`, 16, less its NUL).
pub const MAX_CONGESTION: usize = 15;

/// A TCP congestion control's name as the wire carries it (the hello's, the Sent frame's): 1 to
/// [`MAX_CONGESTION`] ASCII letters, digits, `_` or `-`, as the kernel names its algorithms
/// (`cubic`, `bbr`). Held inline, so the reports that carry it stay `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Congestion {
    len: u8,
    bytes: [u8; MAX_CONGESTION],
}

impl Congestion {
    /// `name`, if it is one.
    pub fn new(name: &str) -> Option<Congestion> {
        Congestion::from_bytes(name.as_bytes())
    }

    /// `bytes` as a name, if they are one.
    pub(crate) fn from_bytes(b: &[u8]) -> Option<Congestion> {
        let fits = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-';
        if b.is_empty() || b.len() > MAX_CONGESTION || !b.iter().all(fits) {
            return None;
        }
        let mut bytes = [0; MAX_CONGESTION];
        bytes[..b.len()].copy_from_slice(b);
        Some(Congestion {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Only ASCII goes in.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Congestion({:?})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_round_trips_through_the_array() {
        let r = ReceiverTcp {
            rcv_space: Some(1),
            rcv_wnd: None,
            bytes_received: Some(10),
            ..ReceiverTcp::default()
        };
        assert_eq!(ReceiverTcp::from_array(r.to_array()), r);
    }
}
