//! One stream's outcome, whichever end sent it ([`StreamOutcome`]): what the stream measured
//! ([`Measured`]), the sending end's figures ([`Sent`], the Sent frame's: the engine's sender
//! makes them at either end) and the receiving end's ([`Report`], the Report frame's: the
//! engine's receiver makes them at either end) under one set of names, and the little only
//! one direction has ([`Detail`]). A forward stream's sender figures are the client's own (its
//! process's CPU, its driver's clocks) and its receiver figures the server's report; a reverse
//! stream's are the server's Sent frame and the client's own report. The verdict's evidence, the check, the report's sender and receiver lines and
//! the JSON's sender object are each written once, from these.

use std::net::SocketAddr;
use std::time::Duration;

use crate::{ClientIo, Clock, Measured, Strategy};
use tsperf_proto::end::End;
use tsperf_proto::sent::Sent;
use tsperf_proto::{Report, StdoutKind};
use tsperf_results::verdict::{Evidence, ServerTime, Verdict};

/// Which end of a stream sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This client sent; the server counted and checksummed.
    Sent,
    /// The server sent; this client counted and checksummed.
    Received,
}

/// What only one direction has.
#[derive(Debug, Clone)]
pub enum Detail {
    /// The client sent.
    Sent(Box<Forward>),
    /// The server sent.
    Received(Reverse),
}

/// What only a forward stream has: how the client sent, what the server's stdout is.
#[derive(Debug, Clone)]
pub struct Forward {
    /// How chunks reached the kernel.
    pub strategy: Strategy,
    /// Chunks per call with `writev`.
    pub batch: Option<u32>,
    /// What the server's stdout is, as it said in its Accept.
    pub server_stdout: StdoutKind,
    /// Waiting for the file's bytes before the first byte went (its first block).
    pub source_read_before: Duration,
    /// Wake-ups from poll (non-blocking only).
    pub polls: u64,
    /// The interface the connection leaves by and its speed in Mbit/s, where known.
    pub interface: Option<(String, Option<u64>)>,
    /// The file changed while it was sent (looked at only when the digests disagree).
    pub source_changed: bool,
    /// The file was read cold (`--cold`): what putting it out of the page cache did.
    pub cold: Option<tsperf_sys::cold::Evicted>,
}

/// What only a reverse stream has: what was asked, the server's I/O and first write.
#[derive(Debug, Clone)]
pub struct Reverse {
    /// Bytes of one pass: asked for, or the served file's size.
    pub asked: u64,
    /// The generated stream was one buffer, the text's first chunk again and again.
    pub one_buffer: bool,
    /// How the server was asked to hand its chunks to the kernel (`--io`); `None`: its own
    /// way.
    pub strategy: Option<Strategy>,
    /// Chunks per call with `writev`.
    pub batch: Option<u32>,
    /// The receive low-water mark it read with at the end.
    pub wake_mark: u32,
}

/// Everything measured about one stream, by both ends.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    /// The file's name, as sent; a served file's; empty for the generated stream.
    pub name: String,
    /// The bytes, the time, the client's digest, a timed run's passes.
    pub measured: Measured,
    /// The sending end's figures: the client's own (forward), the server's Sent frame
    /// (reverse).
    pub sender: Sent,
    /// The receiving end's figures: the server's report (forward), the client's own (reverse:
    /// its engine's, made as a server's are).
    pub receiver: Report,
    /// What the far end says was sent: a forward stream's report (its count and digest), a
    /// reverse stream's end trailer.
    pub far: End,
    /// Bytes per write.
    pub chunk: u32,
    /// The client's I/O model.
    pub io: ClientIo,
    /// The server's address.
    pub peer: SocketAddr,
    /// The server kernel's boot id, where it said.
    pub boot_id: Option<[u8; 16]>,
    /// The clock offset, when clock queries were made.
    pub clock: Option<Clock>,
    /// Stopped early by Ctrl-C or SIGTERM, every byte until then verified.
    pub interrupted: bool,
    /// The data went over TLS (`--tls`): its suite, and whether the key vouched for the server.
    pub tls: Option<TlsUsed>,
    /// The pace asked of the sender (`-b`), bytes a second; `None`: unpaced.
    pub pace: Option<u64>,
    /// What only its direction has.
    pub detail: Detail,
}

/// A stream's TLS, as its handshake settled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsUsed {
    /// The cipher suite negotiated.
    pub cipher: tsperf_proto::tls::Cipher,
    /// The server's certificate was proved by the pre-shared key (`--auth-key`); false: it was
    /// pinned from the Accept alone, so the stream was encrypted but its peer not
    /// authenticated.
    pub authenticated: bool,
    /// The SHA-256 of the certificate the server presented (pinned from its Accept).
    pub cert_sha256: [u8; 32],
    /// This end's records were sealed and opened by the kernel (`--ktls`).
    pub kernel: bool,
}

impl TlsUsed {
    /// What a transport's TLS settled on, with the Accept's word on the certificate.
    pub fn of(
        tls: Option<&tsperf_stream::tls::Tls>,
        pin: Option<tsperf_proto::client::TlsPin>,
    ) -> Option<TlsUsed> {
        let pin = pin?;
        let tls = tls?;
        Some(TlsUsed {
            kernel: tls.records() == tsperf_stream::tls::Records::Kernel,
            cipher: tls.cipher()?,
            authenticated: pin.authenticated,
            cert_sha256: pin.cert_sha256,
        })
    }
}

impl StreamOutcome {
    /// Which end sent.
    pub fn side(&self) -> Side {
        match self.detail {
            Detail::Sent(_) => Side::Sent,
            Detail::Received(_) => Side::Received,
        }
    }

    /// The far end counted what this end did and its digest is this end's; a sized reverse
    /// stream also got the bytes it asked for.
    pub fn verified(&self) -> bool {
        let m = &self.measured;
        let whole = match &self.detail {
            Detail::Received(d) => m.timed.is_some() || self.interrupted || m.bytes == d.asked,
            Detail::Sent(_) => true,
        };
        self.far
            == (End {
                length: m.bytes,
                digest: m.digest,
            })
            && self.sender.bytes == m.bytes
            && whole
    }

    /// Both ends run on one machine: a loopback address, or the server's boot id is ours.
    pub fn same_host(&self) -> bool {
        tsperf_sys::host::same_host(self.peer.ip(), self.boot_id)
    }

    /// What the report calls the source: the file's name, or the generated stream's.
    pub fn source(&self) -> &str {
        match (self.name.is_empty(), &self.detail) {
            (false, _) => &self.name,
            (true, Detail::Received(d)) if d.one_buffer => "generated-one-buffer",
            (true, _) => "generated",
        }
    }

    /// Chunks per call the sender made: writev's batch, else 1.
    pub fn batch(&self) -> u32 {
        match &self.detail {
            Detail::Sent(d) => d.batch,
            Detail::Received(d) => d.batch,
        }
        .unwrap_or(1)
    }

    /// Everything the verdict is judged on: the sender's figures and the receiver's time,
    /// whichever end each was. The sender's wait for its data is the client's file's (not
    /// sendfile's, which waits in the kernel); its own span, where it is not the stream's
    /// elapsed time, the server's.
    pub fn evidence(&self) -> Evidence {
        let (s, r) = (&self.sender, &self.receiver);
        let (line_mbit, source_read, span) = match &self.detail {
            Detail::Sent(d) => (
                d.interface.as_ref().and_then(|(_, speed)| *speed),
                (d.strategy != Strategy::Sendfile).then(|| Duration::from_nanos(s.source_read_ns)),
                None,
            ),
            Detail::Received(_) => (None, None, Some(Duration::from_nanos(s.elapsed_ns))),
        };
        Evidence {
            tcp: s.tcp,
            flight: s.flight,
            elapsed: self.measured.elapsed,
            client_cpu: Duration::from_micros(s.cpu_user_us + s.cpu_sys_us),
            sender_on_cpu: s.on_cpu_ns.map(Duration::from_nanos),
            sender_run_queue: s.run_queue_ns.map(Duration::from_nanos),
            source_read,
            sndbuf: u64::from(s.sndbuf),
            write_size: s.chunk * u64::from(self.batch()),
            bytes: self.measured.bytes,
            line_mbit,
            same_host: self.same_host(),
            cpus: tsperf_sys::host::cpus(),
            server: (r.split.total_ns() > 0).then(|| ServerTime {
                total: Duration::from_nanos(r.split.total_ns()),
                cpu: Duration::from_micros(r.cpu_user_us + r.cpu_sys_us),
                run_queue: r.run_queue_ns.map(Duration::from_nanos),
                log: Duration::from_nanos(r.split.log_ns),
                disk: Duration::from_nanos(r.split.save_ns + r.split.fsync_ns),
            }),
            sender_span: span,
            reverse: self.side() == Side::Received,
            pace: self.pace,
        }
    }

    /// What limited the stream.
    pub fn verdict(&self) -> Verdict {
        tsperf_results::verdict::judge(&self.evidence())
    }
}
