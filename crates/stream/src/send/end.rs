//! The end of a stream sent: the digest of what went, and the bytes that close it (the Sent
//! frame and the end trailer, or a reason in the frame's place).

use std::hash::Hasher as _;
use std::time::Instant;

use twox_hash::XxHash3_64;

use tsperf_proto::sent::Sent;
use tsperf_proto::{Frame, ServerIo, encode_frame};
use tsperf_sys::timing::{CpuTime, SchedStat};

use super::{Data, Sender, pattern};

impl Sender {
    /// The xxh3-64 of everything sent (a served file's last read-ahead may be read again;
    /// sendfile's checksum thread is waited for, once).
    pub fn digest(&mut self, scratch: &mut [u8]) -> anyhow::Result<u64> {
        match &mut self.data {
            Data::Generated {
                text: Some(text),
                sum,
                one_buffer,
                ..
            } => {
                let text = pattern::period(text, *one_buffer, self.chunk);
                Ok(pattern::digest(sum, text, self.at))
            }
            // Nothing was sent.
            Data::Generated { text: None, .. } => Ok(XxHash3_64::new().finish()),
            Data::Served(served) => served
                .digest_sent(self.at, scratch)
                .map_err(|why| anyhow::anyhow!(why)),
            Data::Local(local) => local.digest(self.at),
        }
    }

    /// True if the file sent was written to while it was sent (its size or modification time
    /// is not what it was): what went may mix old and new bytes.
    pub fn changed(&self) -> bool {
        match &self.data {
            Data::Served(served) => served.changed().is_some(),
            Data::Local(local) => local.changed(),
            Data::Generated { .. } => false,
        }
    }

    /// The bytes that end a stream that could not go on for `why` ([`super::SendEnd::Source`], a
    /// shutdown): the reason in the Sent frame's place, then the end trailer of what was sent,
    /// so the client reads why and can still check the bytes it got.
    pub fn failing(&mut self, why: &str, scratch: &mut [u8]) -> Vec<u8> {
        tsperf_proto::sent::failed_end(
            why,
            tsperf_proto::end::End {
                length: self.sent,
                digest: self.digest(scratch).unwrap_or(0),
            },
        )
    }

    /// What the sending end measured, as the Sent frame carries it: its counts, its thread's
    /// CPU and scheduler figures since [`Sender::begin`], its socket's `TCP_INFO`, send buffer
    /// and congestion control now, its readings. A server sends it to its client; a client
    /// sending its own stream takes it for its result (its CPU is its process's: its driver's
    /// clocks). `server_io` is the server's model; the boot id is this machine's.
    pub fn figures<S: std::os::fd::AsFd>(&self, sock: &S, server_io: ServerIo) -> Sent {
        let cpu = CpuTime::thread().since(self.cpu_start);
        let sched = self
            .sched_start
            .zip(SchedStat::thread())
            .map(|(a, b)| b.since(a));
        let (first_at, first_us) = self.first.unwrap_or((Instant::now(), 0));
        Sent {
            bytes: self.sent,
            writes: self.writes,
            partial_writes: self.partial_writes,
            would_block: self.would_block,
            first_write_unix_us: first_us,
            elapsed_ns: self.last.map_or(0, |l| {
                l.saturating_duration_since(first_at).as_nanos() as u64
            }),
            cpu_user_us: cpu.user.as_micros() as u64,
            cpu_sys_us: cpu.sys.as_micros() as u64,
            on_cpu_ns: sched.map(|s| s.on_cpu.as_nanos() as u64),
            run_queue_ns: sched.map(|s| s.run_queue.as_nanos() as u64),
            source_read_ns: self.waited().as_nanos() as u64,
            chunk: self.chunk,
            sndbuf: socket2::SockRef::from(sock)
                .send_buffer_size()
                .map_or(0, |n| n as u32),
            server_io,
            boot_id: tsperf_sys::host::boot_id(),
            tcp: tsperf_sys::tcpinfo::TcpInfo::of(sock)
                .map_or_else(Default::default, |i| i.sender()),
            flight: self.flight,
            congestion: tsperf_sys::congestion::of(sock)
                .and_then(|name| tsperf_proto::tcp::Congestion::new(&name)),
        }
    }

    /// The bytes that end the stream, once the data is done: the Sent frame (what was
    /// measured) and the end trailer (the bytes sent and their digest). `Err(why)` if it
    /// cannot end as sent (a served file written to meanwhile): end it with
    /// [`Sender::failing`].
    pub fn closing<S: std::os::fd::AsFd>(
        &mut self,
        sock: &S,
        server_io: ServerIo,
        scratch: &mut [u8],
    ) -> Result<Vec<u8>, String> {
        match &self.data {
            Data::Served(served) => served.changed().map_or(Ok(()), Err)?,
            Data::Local(local) if local.changed() => {
                return Err("the file was written to while it was sent".into());
            }
            _ => {}
        }
        let digest = self.digest(scratch).map_err(|e| format!("{e:#}"))?;
        let sent = self.figures(sock, server_io);
        let mut out = Vec::with_capacity(tsperf_proto::sent::REVERSE_TAIL);
        encode_frame(&Frame::Sent(sent), &mut out);
        out.extend_from_slice(
            &tsperf_proto::end::End {
                length: self.sent,
                digest,
            }
            .encode(),
        );
        Ok(out)
    }
}
