//! What the kernel knows about a TCP connection (Linux `TCP_INFO`), read at the end of a
//! transfer on both ends: the sender's view ([`SenderTcp`]: how long it had data to send and
//! what held it back) and the receiver's ([`ReceiverTcp`]: its window and round trip).
//!
//! `libc`'s `tcp_info` stops before the fields this module is for (`busy_time` and the
//! limits came in Linux 4.10, the windows in 5.x), so [`RawTcpInfo`] is the kernel's layout
//! (`include/uapi/linux/tcp.h`) up to `tcpi_rcv_wnd`. The kernel copies at most the length it is
//! given and says how much it wrote: a field is read only when that length covers it, and an
//! older kernel's missing fields are `None`, not zero. Elsewhere than Linux nothing is available
//! and every field is `None`.

use std::os::fd::AsFd;

pub use tsperf_proto::tcp::{FlightSample, RECEIVER_FIELDS, ReceiverTcp, SenderTcp};

/// The kernel's `struct tcp_info`, as far as `tcpi_rcv_wnd` (Linux 6.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(dead_code)] // Fields are read through `field!` by offset.
pub struct RawTcpInfo {
    tcpi_state: u8,
    tcpi_ca_state: u8,
    tcpi_retransmits: u8,
    tcpi_probes: u8,
    tcpi_backoff: u8,
    tcpi_options: u8,
    tcpi_wscale: u8,
    tcpi_flags: u8,
    tcpi_rto: u32,
    tcpi_ato: u32,
    tcpi_snd_mss: u32,
    tcpi_rcv_mss: u32,
    tcpi_unacked: u32,
    tcpi_sacked: u32,
    tcpi_lost: u32,
    tcpi_retrans: u32,
    tcpi_fackets: u32,
    tcpi_last_data_sent: u32,
    tcpi_last_ack_sent: u32,
    tcpi_last_data_recv: u32,
    tcpi_last_ack_recv: u32,
    tcpi_pmtu: u32,
    tcpi_rcv_ssthresh: u32,
    tcpi_rtt: u32,
    tcpi_rttvar: u32,
    tcpi_snd_ssthresh: u32,
    tcpi_snd_cwnd: u32,
    tcpi_advmss: u32,
    tcpi_reordering: u32,
    tcpi_rcv_rtt: u32,
    tcpi_rcv_space: u32,
    tcpi_total_retrans: u32,
    tcpi_pacing_rate: u64,
    tcpi_max_pacing_rate: u64,
    tcpi_bytes_acked: u64,
    tcpi_bytes_received: u64,
    tcpi_segs_out: u32,
    tcpi_segs_in: u32,
    tcpi_notsent_bytes: u32,
    tcpi_min_rtt: u32,
    tcpi_data_segs_in: u32,
    tcpi_data_segs_out: u32,
    tcpi_delivery_rate: u64,
    tcpi_busy_time: u64,
    tcpi_rwnd_limited: u64,
    tcpi_sndbuf_limited: u64,
    tcpi_delivered: u32,
    tcpi_delivered_ce: u32,
    tcpi_bytes_sent: u64,
    tcpi_bytes_retrans: u64,
    tcpi_dsack_dups: u32,
    tcpi_reord_seen: u32,
    tcpi_rcv_ooopack: u32,
    tcpi_snd_wnd: u32,
    tcpi_rcv_wnd: u32,
}

/// One reading of `TCP_INFO`: the struct and how many bytes of it the kernel filled.
#[derive(Debug, Clone, Copy)]
pub struct TcpInfo {
    raw: RawTcpInfo,
    len: usize,
}

/// A field of `info`, if the kernel's length covers it.
macro_rules! field {
    ($info:expr, $f:ident) => {{
        let info: &TcpInfo = &$info;
        let end = std::mem::offset_of!(RawTcpInfo, $f) + std::mem::size_of_val(&info.raw.$f);
        (info.len >= end).then(|| u64::from(info.raw.$f))
    }};
}

impl TcpInfo {
    /// Reads `sock`'s `TCP_INFO`; `None` if the kernel will not say (not Linux, not TCP).
    #[cfg(target_os = "linux")]
    pub fn of<S: AsFd>(sock: &S) -> Option<TcpInfo> {
        use std::os::fd::AsRawFd;
        let mut raw = RawTcpInfo::default();
        let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
        // SAFETY: `raw` and `len` are live locals; the kernel writes at most `len` bytes into
        // `raw` (a plain-integer struct) and stores in `len` how many it wrote.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_fd().as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                &mut raw as *mut RawTcpInfo as *mut libc::c_void,
                &mut len,
            )
        };
        (rc == 0).then_some(TcpInfo {
            raw,
            len: (len as usize).min(std::mem::size_of::<RawTcpInfo>()),
        })
    }

    /// Not Linux: nothing.
    #[cfg(not(target_os = "linux"))]
    pub fn of<S: AsFd>(_sock: &S) -> Option<TcpInfo> {
        None
    }

    /// A reading from a struct and a length, as the kernel would return them (for tests).
    pub fn from_raw(raw: RawTcpInfo, len: usize) -> TcpInfo {
        TcpInfo {
            raw,
            len: len.min(std::mem::size_of::<RawTcpInfo>()),
        }
    }

    /// The sender's side: what it sent and what limited it.
    pub fn sender(&self) -> SenderTcp {
        SenderTcp {
            busy_time_us: field!(self, tcpi_busy_time),
            rwnd_limited_us: field!(self, tcpi_rwnd_limited),
            sndbuf_limited_us: field!(self, tcpi_sndbuf_limited),
            total_retrans: field!(self, tcpi_total_retrans),
            bytes_retrans: field!(self, tcpi_bytes_retrans),
            rtt_us: field!(self, tcpi_rtt),
            rttvar_us: field!(self, tcpi_rttvar),
            min_rtt_us: field!(self, tcpi_min_rtt),
            snd_cwnd: field!(self, tcpi_snd_cwnd),
            snd_mss: field!(self, tcpi_snd_mss),
            snd_wnd: field!(self, tcpi_snd_wnd),
            delivery_rate: field!(self, tcpi_delivery_rate),
            segs_out: field!(self, tcpi_segs_out),
            data_segs_out: field!(self, tcpi_data_segs_out),
            bytes_acked: field!(self, tcpi_bytes_acked),
            // Bit 0 of the byte after tcpi_wscale (a bit field in uapi/linux/tcp.h).
            delivery_rate_app_limited: field!(self, tcpi_delivery_rate)
                .map(|_| self.raw.tcpi_flags & 1 == 1),
            notsent_bytes: field!(self, tcpi_notsent_bytes),
            snd_ssthresh: field!(self, tcpi_snd_ssthresh),
        }
    }

    /// What is in flight and what waits unsent now, for a reading during a transfer;
    /// `sndbuf` is the socket's send buffer size. `None` if the kernel's struct is too short.
    pub fn flight(&self, sndbuf: u64) -> Option<FlightSample> {
        let r = &self.raw;
        let in_flight = (u64::from(r.tcpi_unacked) + u64::from(r.tcpi_retrans))
            .saturating_sub(u64::from(r.tcpi_sacked) + u64::from(r.tcpi_lost));
        Some(FlightSample {
            in_flight,
            snd_cwnd: field!(self, tcpi_snd_cwnd)?,
            snd_mss: field!(self, tcpi_snd_mss)?,
            notsent_bytes: field!(self, tcpi_notsent_bytes)?,
            rtt_us: field!(self, tcpi_rtt)?,
            sndbuf,
        })
    }

    /// The receiver's side: its window, its estimate of the round trip, what arrived.
    pub fn receiver(&self) -> ReceiverTcp {
        ReceiverTcp {
            rcv_space: field!(self, tcpi_rcv_space),
            rcv_rtt_us: field!(self, tcpi_rcv_rtt),
            rcv_mss: field!(self, tcpi_rcv_mss),
            advmss: field!(self, tcpi_advmss),
            rcv_ssthresh: field!(self, tcpi_rcv_ssthresh),
            rcv_wnd: field!(self, tcpi_rcv_wnd),
            segs_in: field!(self, tcpi_segs_in),
            data_segs_in: field!(self, tcpi_data_segs_in),
            rcv_ooopack: field!(self, tcpi_rcv_ooopack),
            bytes_received: field!(self, tcpi_bytes_received),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// The struct is the kernel's layout: the offsets uapi/linux/tcp.h gives.
    #[test]
    fn layout_is_the_kernels() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(RawTcpInfo, tcpi_rto), 8);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_rtt), 68);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_total_retrans), 100);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_pacing_rate), 104);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_min_rtt), 148);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_delivery_rate), 160);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_busy_time), 168);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_sndbuf_limited), 184);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_rcv_ooopack), 224);
        assert_eq!(offset_of!(RawTcpInfo, tcpi_rcv_wnd), 232);
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 240);
    }

    /// A field past the kernel's length is unknown, not zero.
    #[test]
    fn fields_past_the_length_are_none() {
        let raw = RawTcpInfo {
            tcpi_rtt: 120,
            tcpi_total_retrans: 3,
            tcpi_busy_time: 5000,
            tcpi_rcv_wnd: 65535,
            ..RawTcpInfo::default()
        };
        // A 4.9 kernel's struct ended after tcpi_delivery_rate (168 bytes).
        let old = TcpInfo::from_raw(raw, 168);
        assert_eq!(old.sender().rtt_us, Some(120));
        assert_eq!(old.sender().total_retrans, Some(3));
        assert_eq!(old.sender().busy_time_us, None);
        assert_eq!(old.receiver().rcv_wnd, None);
        let whole = TcpInfo::from_raw(raw, 240);
        assert_eq!(whole.sender().busy_time_us, Some(5000));
        assert_eq!(whole.receiver().rcv_wnd, Some(65535));
        let none = TcpInfo::from_raw(raw, 0);
        assert!(!none.sender().available() && !none.receiver().available());
    }

    /// Both ends of a real connection report what moved over it.
    #[test]
    fn a_real_connection_reports_both_sides() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let data = vec![7u8; 1 << 20];
        let writer = std::thread::spawn(move || {
            c.write_all(&data).unwrap();
            c
        });
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        while got < 1 << 20 {
            got += s.read(&mut buf).unwrap();
        }
        let c = writer.join().unwrap();
        let rx = TcpInfo::of(&s).unwrap().receiver();
        assert_eq!(rx.bytes_received, Some(1 << 20));
        assert!(rx.rcv_space.unwrap() > 0);
        let tx = TcpInfo::of(&c).unwrap().sender();
        assert!(tx.available());
        assert!(tx.data_segs_out.unwrap() > 0);
        assert!(tx.busy_time_us.is_some(), "kernel older than 4.10?");
        assert_eq!(tx.notsent_bytes, Some(0), "all sent and read");
        let f = TcpInfo::of(&c).unwrap().flight(1 << 20).unwrap();
        assert_eq!(f.in_flight, 0, "all acknowledged: {f:?}");
        assert!(f.snd_cwnd > 0 && f.snd_mss > 0, "{f:?}");
    }
}
