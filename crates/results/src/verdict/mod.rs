//! Why a transfer went as fast as it did: the verdict `limited_by`, from both ends' evidence.
//!
//! A transfer is a pipeline: the client reads its file and writes it to its socket, the path
//! carries it, the server reads, checksums, logs and saves it. The slowest stage is busy all
//! the time and every other stage waits for it. So each end says where its time went, as the
//! scheduler counts it (on a CPU, runnable but waiting for one, asleep) and as tsperf times it
//! (the client waiting for its file; the server writing its log, saving): the client for its
//! sending thread from the first byte into the socket to the report, the server for its serving
//! thread from its first byte to its report. The sender's `TCP_INFO`, at the end and read about
//! every MiB during the transfer, says what the kernel held back. The rules, first match wins:
//!
//! | verdict | the evidence it needs |
//! |---|---|
//! | `paced` | the sender was paced (`-b`) and the rate reached ≥ [`PACE_SHARE`] % of the pace: the limit was asked for |
//! | `receiver-log` | the server spent ≥ [`LOG_SHARE`] % of its time writing per-read log lines |
//! | `receiver-disk` | the server spent ≥ [`DISK_SHARE`] % saving the file (writes, sync) |
//! | `sender-source` | the client spent ≥ [`SOURCE_SHARE`] % waiting for its file's bytes |
//! | `sender-buffer` | the send buffer is smaller than one write: every write waits for room |
//! | `shared-cpu` | both ends run on one machine, each was on a CPU or waiting for one ≥ [`SHARED_SHARE`] % of its time, and one of them ≥ [`CPU_SHARE`] % or their waits for a CPU together ≥ [`RUN_QUEUE_SHARE`] %: they compete for its CPUs (loopback), with each other or with other work |
//! | `receiver-cpu` | the serving thread was on a CPU or waiting for one ≥ [`CPU_SHARE`] % of its time, or waiting for one ≥ [`RUN_QUEUE_SHARE`] % (`receiver-log` or `receiver-disk` instead when that took ≥ [`CAUSE_SHARE`] % of it) |
//! | `sender-cpu` | the sending thread was on a CPU or waiting for one ≥ [`CPU_SHARE`] % of its time, or waiting for one ≥ [`RUN_QUEUE_SHARE`] % |
//! | `receiver-log`, `-disk`, `-cpu`, or `receiver` | the server's window was full ≥ [`RECEIVER_SHARE`] % of the busy time: the server did not keep up, and the first of its log, disk and CPU shares that is ≥ [`CAUSE_SHARE`] % names why; `receiver` when none is |
//! | `receiver-log`, `-disk`, `-cpu` | the client waited on its socket ≥ [`WAITING_SHARE`] % while the server, busy ≥ [`SHARED_SHARE`] % of its time, was kept waiting for a CPU ≥ [`STARVED_SHARE`] % of it (a throttled server whose window had room) |
//! | `sender-buffer` | the client waited on its socket ≥ [`WAITING_SHARE`] % and the kernel's `sndbuf_limited` is ≥ [`SNDBUF_SHARE`] % of busy, or the readings found nothing unsent in the buffer (it was all in flight) |
//! | `network` | the client waited on its socket ≥ [`WAITING_SHARE`] % with the server's window open (the server kept up: no rule above named it), and the path shows it: bytes waited unsent in the send buffer in ≥ [`NOTSENT_SHARE`] % of the readings, or segments in flight reached the congestion window in ≥ [`CWND_SHARE`] %, or the rate reached [`LINE_SHARE`] % of the interface's speed, or retransmits |
//! | `unknown` | none of these: the shares are given, no cause is guessed |
//!
//! A CPU quota (cgroup) shows as waiting for a CPU: the throttled thread stays runnable. When
//! both ends run on one machine (loopback, or the server's boot id equals the client's, as it
//! does across network namespaces) the sentence says they share its CPUs, and what each used.
//!
//! Values before protocol version 6: `receiver` also covered what is now `receiver-log`,
//! `receiver-disk` and `receiver-cpu`; `sender` (the connection idle half the time) is now
//! `sender-source` when the file is the cause and `unknown` otherwise; `network` was the
//! verdict by elimination, and is now `unknown` unless the path shows it.

mod sentence;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tsperf_proto::tcp::{Flight, SenderTcp};

/// A server share of its time writing per-read log lines that makes its log the limit, in %.
pub const LOG_SHARE: f64 = 50.0;
/// A server share of its time saving (write and sync) that makes its disk the limit, in %.
pub const DISK_SHARE: f64 = 50.0;
/// A client share of its time waiting for its file that makes the file the limit, in %.
pub const SOURCE_SHARE: f64 = 50.0;
/// A thread on a CPU or waiting for one this share of its time is CPU-bound, in %.
pub const CPU_SHARE: f64 = 80.0;
/// A thread kept waiting for a CPU this share of its time is CPU-bound whatever else it did
/// (a quota throttles it, or other threads hold the CPUs), in %.
pub const RUN_QUEUE_SHARE: f64 = 50.0;
/// A server kept waiting for a CPU this share of its time, busy half of it, while the client
/// waits on its socket, is the limit rather than the path, in %.
pub const STARVED_SHARE: f64 = 30.0;
/// On one machine, both ends busy this share of their time (one of them CPU-bound) compete
/// for its CPUs, in %.
pub const SHARED_SHARE: f64 = 50.0;
/// Share of the busy time with a full receive window that makes the receiver the limit, in %.
pub const RECEIVER_SHARE: f64 = 50.0;
/// With the window full, a server share (log, disk or CPU) this large names the cause, in %.
pub const CAUSE_SHARE: f64 = 25.0;
/// Share of the busy time the kernel says the send buffer held data back, in %.
pub const SNDBUF_SHARE: f64 = 50.0;
/// An end asleep on the other this share of its time is waiting, not working, in %.
pub const WAITING_SHARE: f64 = 50.0;
/// Share of the readings with unsent bytes in the send buffer that shows the path held them, %.
pub const NOTSENT_SHARE: f64 = 50.0;
/// Share of the readings at the congestion window that shows the path held data back, in %.
pub const CWND_SHARE: f64 = 50.0;
/// A rate this share of the pace asked of the sender (`-b`) has reached it, in %.
pub const PACE_SHARE: f64 = 90.0;
/// A rate this share of the interface's speed has reached the line, in %.
pub const LINE_SHARE: f64 = 80.0;
/// The shortest transfer whose time shares are judged: below it they are a few scheduler
/// slices and kernel ticks (`TCP_INFO`'s times are jiffies, 4 ms here), and the verdict is
/// [`LimitedBy::TooShort`] unless a rule that needs no time share names the limit. 36 MiB on
/// loopback in 17 ms named the receiver's CPU in one run of three and the CPUs both ends share
/// in the others (issue 33, results/verdicts.md).
pub const MIN_JUDGED: Duration = Duration::from_millis(100);

/// What limited a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitedBy {
    /// The pace asked of the sender (`-b`): the rate reached it.
    Paced,
    /// The server's per-read log lines.
    ReceiverLog,
    /// The server's saving of the file.
    ReceiverDisk,
    /// Both ends on one machine, competing for its CPUs.
    SharedCpu,
    /// The server's CPU (or its quota).
    ReceiverCpu,
    /// The server's window was full, and the server shows no cause (before version 6: any
    /// receiver cause).
    Receiver,
    /// The client's source file.
    SenderSource,
    /// The client's CPU (or its quota).
    SenderCpu,
    /// The client's send buffer.
    SenderBuffer,
    /// Before version 6 only: the connection had nothing to send half the time.
    Sender,
    /// The path between the ends, with evidence.
    Network,
    /// Nothing shows the cause (or there is nothing to judge on).
    Unknown,
    /// Shorter than [`MIN_JUDGED`], and nothing that needs no time share names the limit.
    TooShort,
}

impl LimitedBy {
    /// The JSON's and the table's value: `receiver-cpu`, `sender-buffer`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            LimitedBy::Paced => "paced",
            LimitedBy::ReceiverLog => "receiver-log",
            LimitedBy::ReceiverDisk => "receiver-disk",
            LimitedBy::SharedCpu => "shared-cpu",
            LimitedBy::ReceiverCpu => "receiver-cpu",
            LimitedBy::Receiver => "receiver",
            LimitedBy::SenderSource => "sender-source",
            LimitedBy::SenderCpu => "sender-cpu",
            LimitedBy::SenderBuffer => "sender-buffer",
            LimitedBy::Sender => "sender",
            LimitedBy::Network => "network",
            LimitedBy::Unknown => "unknown",
            LimitedBy::TooShort => "too-short",
        }
    }
}

impl fmt::Display for LimitedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the server said about its time (its report), for the verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerTime {
    /// From its first data byte to its report (the time split's total).
    pub total: Duration,
    /// Its serving thread's CPU time (user + system).
    pub cpu: Duration,
    /// Its serving thread's wait for a CPU; `None` from a server before version 6.
    pub run_queue: Option<Duration>,
    /// Writing per-read log lines.
    pub log: Duration,
    /// Saving the file: writes and the sync.
    pub disk: Duration,
}

/// Everything a verdict is judged on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Evidence {
    /// The sender's `TCP_INFO` at the end.
    pub tcp: SenderTcp,
    /// The sender's `TCP_INFO` read during the transfer.
    pub flight: Flight,
    /// The client's time from its first byte into the socket to the report.
    pub elapsed: Duration,
    /// The client's CPU time (all its threads).
    pub client_cpu: Duration,
    /// The sending thread's time on a CPU (schedstat); `None` where not known.
    pub sender_on_cpu: Option<Duration>,
    /// The sending thread's wait for a CPU.
    pub sender_run_queue: Option<Duration>,
    /// The client's wait for its file's bytes during the transfer.
    pub source_read: Option<Duration>,
    /// The send buffer the socket had at the end, bytes.
    pub sndbuf: u64,
    /// Bytes the client hands the socket per call (chunk × batch).
    pub write_size: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// The local interface's speed, Mbit/s, where its driver says.
    pub line_mbit: Option<u64>,
    /// Both ends run on one machine.
    pub same_host: bool,
    /// CPUs this machine lets the client run on.
    pub cpus: u32,
    /// The server's time; `None` where there is no report.
    pub server: Option<ServerTime>,
    /// The sender's own span, first to last write, when it is not the client's `elapsed` (a
    /// reverse stream: the server sends, and its figures are over its own writes, which end
    /// while the receiver still reads the send buffer's worth). The sender's shares are of it.
    pub sender_span: Option<Duration>,
    /// A reverse stream: the server sent, the client received (the sentence names them so).
    pub reverse: bool,
    /// The pace asked of the sender (`-b`), bytes a second; `None`: unpaced.
    pub pace: Option<u64>,
}

/// The shares a verdict rests on, in % unless named otherwise. `None` where not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Busy time with the receiver's window full, of the busy time.
    pub rwnd_limited_pct: Option<f64>,
    /// Busy time held back by the send buffer, of the busy time.
    pub sndbuf_limited_pct: Option<f64>,
    /// Busy time, of the client's elapsed time.
    pub busy_pct: Option<f64>,
    /// The sender's CPU time (user + system, all threads), of its elapsed time (of its own span
    /// in reverse, `Evidence::sender_span`, as every sender share).
    pub client_cpu_pct: f64,
    /// The sending thread waiting for a CPU, of the client's elapsed time.
    #[serde(default)]
    pub client_run_queue_pct: Option<f64>,
    /// Segments the sender retransmitted.
    pub retransmits: Option<u64>,
    /// The sending thread on a CPU, of the elapsed time (version 6 on, as all below).
    #[serde(default)]
    pub sender_on_cpu_pct: Option<f64>,
    /// The client waiting for its file's bytes.
    #[serde(default)]
    pub client_source_pct: Option<f64>,
    /// The sending thread asleep on its socket (writes, poll, the report).
    #[serde(default)]
    pub client_waiting_pct: Option<f64>,
    /// The serving thread on a CPU, of the server's time.
    #[serde(default)]
    pub server_cpu_pct: Option<f64>,
    /// The serving thread waiting for a CPU.
    #[serde(default)]
    pub server_run_queue_pct: Option<f64>,
    /// The server writing per-read log lines.
    #[serde(default)]
    pub server_log_pct: Option<f64>,
    /// The server saving the file.
    #[serde(default)]
    pub server_disk_pct: Option<f64>,
    /// The server waiting for data: the rest of its time.
    #[serde(default)]
    pub server_waiting_pct: Option<f64>,
    /// Readings during the transfer with bytes unsent in the send buffer, of the readings.
    #[serde(default)]
    pub notsent_pct: Option<f64>,
    /// Readings with segments in flight at the congestion window.
    #[serde(default)]
    pub cwnd_full_pct: Option<f64>,
    /// Mean bytes in flight, of the mean send buffer.
    #[serde(default)]
    pub in_flight_of_sndbuf_pct: Option<f64>,
    /// The readings' mean round trip over the fastest one seen (2: a queue as long as the path).
    #[serde(default)]
    pub rtt_over_min: Option<f64>,
    /// The rate, of the local interface's speed.
    #[serde(default)]
    pub line_pct: Option<f64>,
    /// The local interface's speed, Mbit/s.
    #[serde(default)]
    pub line_mbit: Option<u64>,
    /// The send buffer, bytes, and one write, bytes.
    #[serde(default)]
    pub sndbuf: Option<u64>,
    /// Bytes per write call.
    #[serde(default)]
    pub write_size: Option<u64>,
    /// The path's bandwidth × delay, bytes: the interface's speed (or, where not known, the
    /// rate reached) times the fastest round trip. A send buffer below it cannot keep the path
    /// full.
    #[serde(default)]
    pub bdp_bytes: Option<u64>,
    /// Both ends on one machine.
    #[serde(default)]
    pub same_host: bool,
    /// CPUs the client may run on.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// A reverse stream (issue 26): the sender is the server, the receiver the client. The
    /// `client_*` shares are then the sending server's, the `server_*` ones the receiving
    /// client's; the sentence names each end by its role.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// The transfer's time the shares are of, ms (the client's elapsed time).
    #[serde(default)]
    pub elapsed_ms: Option<f64>,
    /// The pace asked of the sender (`-b`), bytes a second; absent when unpaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_bytes_per_s: Option<u64>,
    /// The rate, of the pace asked; absent when unpaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_pace_pct: Option<f64>,
}

/// A transfer's verdict and the shares behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// What limited the transfer.
    pub limited_by: LimitedBy,
    /// The shares it was judged on.
    pub limits: Limits,
}

fn pct(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| (100.0 * part as f64 / whole as f64).min(100.0))
}

fn share(part: Duration, whole: Duration) -> Option<f64> {
    pct(part.as_nanos() as u64, whole.as_nanos() as u64)
}

/// The rest of 100 % once `parts` are taken, never below 0.
fn rest(parts: &[Option<f64>]) -> f64 {
    (100.0 - parts.iter().map(|p| p.unwrap_or(0.0)).sum::<f64>()).max(0.0)
}

/// The shares of `e`.
pub fn limits(e: &Evidence) -> Limits {
    let busy = e.tcp.busy_time_us;
    let elapsed_us = e.elapsed.as_micros() as u64;
    let span = e.sender_span.filter(|d| !d.is_zero()).unwrap_or(e.elapsed);
    let on_cpu = e.sender_on_cpu.and_then(|d| share(d, span));
    let run_queue = e.sender_run_queue.and_then(|d| share(d, span));
    let source = e.source_read.and_then(|d| share(d, span));
    let server = e.server.filter(|s| !s.total.is_zero());
    let srv = |f: fn(&ServerTime) -> Duration| server.and_then(|s| share(f(&s), s.total));
    let (s_cpu, s_log, s_disk) = (srv(|s| s.cpu), srv(|s| s.log), srv(|s| s.disk));
    let s_queue = server.and_then(|s| s.run_queue.and_then(|q| share(q, s.total)));
    let f = &e.flight;
    let rate = e.bytes as f64 * 8.0 / e.elapsed.as_secs_f64().max(1e-9) / 1e6;
    Limits {
        rwnd_limited_pct: busy.zip(e.tcp.rwnd_limited_us).and_then(|(b, r)| pct(r, b)),
        sndbuf_limited_pct: busy
            .zip(e.tcp.sndbuf_limited_us)
            .and_then(|(b, s)| pct(s, b)),
        busy_pct: busy.and_then(|b| pct(b, elapsed_us)),
        client_cpu_pct: share(e.client_cpu, span).unwrap_or(0.0),
        client_run_queue_pct: run_queue,
        retransmits: e.tcp.total_retrans,
        sender_on_cpu_pct: on_cpu,
        client_source_pct: source,
        client_waiting_pct: on_cpu.map(|_| rest(&[on_cpu, run_queue, source])),
        server_cpu_pct: s_cpu,
        server_run_queue_pct: s_queue,
        server_log_pct: s_log,
        server_disk_pct: s_disk,
        server_waiting_pct: s_cpu.map(|_| rest(&[s_cpu, s_queue, s_log, s_disk])),
        notsent_pct: f.share(f.notsent),
        cwnd_full_pct: f.share(f.cwnd_full),
        in_flight_of_sndbuf_pct: f
            .mean(f.in_flight_bytes_sum)
            .zip(f.mean(f.sndbuf_sum))
            .and_then(|(i, s)| pct(i, s)),
        rtt_over_min: f
            .mean(f.rtt_us_sum)
            .zip(e.tcp.min_rtt_us.filter(|m| *m > 0))
            .map(|(r, m)| r as f64 / m as f64),
        line_pct: e.line_mbit.map(|l| (100.0 * rate / l as f64).min(100.0)),
        line_mbit: e.line_mbit,
        sndbuf: (e.sndbuf > 0).then_some(e.sndbuf),
        write_size: (e.write_size > 0).then_some(e.write_size),
        bdp_bytes: e.tcp.min_rtt_us.filter(|m| *m > 0).map(|m| {
            let mbit = e.line_mbit.map_or(rate, |l| l as f64);
            (mbit * 1e6 / 8.0 * m as f64 / 1e6) as u64
        }),
        same_host: e.same_host,
        cpus: (e.cpus > 0).then_some(e.cpus),
        reverse: e.reverse,
        elapsed_ms: (!e.elapsed.is_zero()).then_some(e.elapsed.as_secs_f64() * 1e3),
        pace_bytes_per_s: e.pace,
        of_pace_pct: e.pace.map(|b| 100.0 * rate * 1e6 / 8.0 / b.max(1) as f64),
    }
}

/// The verdict on the transfer `e` describes.
pub fn judge(e: &Evidence) -> Verdict {
    let l = limits(e);
    Verdict {
        limited_by: rule(e, &l),
        limits: l,
    }
}

fn over(share: Option<f64>, at: f64) -> bool {
    share.is_some_and(|s| s >= at)
}

/// The first rule the shares meet.
fn rule(e: &Evidence, l: &Limits) -> LimitedBy {
    if e.elapsed.is_zero() || (!e.tcp.available() && e.server.is_none()) {
        return LimitedBy::Unknown;
    }
    let sum = |a: Option<f64>, b: Option<f64>| a.map(|a| a + b.unwrap_or(0.0));
    let sender_busy = sum(l.sender_on_cpu_pct, l.client_run_queue_pct).or(Some(
        l.client_cpu_pct + l.client_run_queue_pct.unwrap_or(0.0),
    ));
    let receiver_busy = sum(l.server_cpu_pct, l.server_run_queue_pct);
    // CPU-bound: on a CPU or waiting for one most of the time, or kept waiting for one at
    // least half of it (a quota's throttling, or CPUs others hold).
    let receiver_cpu =
        over(receiver_busy, CPU_SHARE) || over(l.server_run_queue_pct, RUN_QUEUE_SHARE);
    let sender_cpu = over(sender_busy, CPU_SHARE) || over(l.client_run_queue_pct, RUN_QUEUE_SHARE);
    if over(l.of_pace_pct, PACE_SHARE) {
        // The limit was asked for: whatever else was busy, the rate is the pace's.
        LimitedBy::Paced
    } else if over(l.server_log_pct, LOG_SHARE) {
        LimitedBy::ReceiverLog
    } else if over(l.server_disk_pct, DISK_SHARE) {
        LimitedBy::ReceiverDisk
    } else if over(l.client_source_pct, SOURCE_SHARE) {
        LimitedBy::SenderSource
    } else if e.sndbuf > 0 && e.sndbuf < e.write_size {
        // Every write waits for room, whatever else is busy: the cure is known.
        LimitedBy::SenderBuffer
    } else if e.elapsed < MIN_JUDGED {
        LimitedBy::TooShort
    } else if e.same_host
        && over(sender_busy, SHARED_SHARE)
        && over(receiver_busy, SHARED_SHARE)
        && (over(sender_busy, CPU_SHARE)
            || over(receiver_busy, CPU_SHARE)
            || over(
                sum(l.client_run_queue_pct, l.server_run_queue_pct),
                RUN_QUEUE_SHARE,
            ))
    {
        LimitedBy::SharedCpu
    } else if receiver_cpu && (!sender_cpu || receiver_busy >= sender_busy) {
        // A busy server whose log or disk took a large share was busy with them.
        full_window(l, Some(100.0))
    } else if sender_cpu {
        LimitedBy::SenderCpu
    } else if over(l.rwnd_limited_pct, RECEIVER_SHARE) {
        full_window(l, receiver_busy)
    } else if over(l.client_waiting_pct, WAITING_SHARE)
        && over(receiver_busy, SHARED_SHARE)
        && over(l.server_run_queue_pct, STARVED_SHARE)
    {
        // The client waited on a server that was itself kept waiting for a CPU.
        full_window(l, Some(100.0))
    } else if over(l.client_waiting_pct, WAITING_SHARE) && buffer_bound(l) {
        LimitedBy::SenderBuffer
    } else if over(l.client_waiting_pct, WAITING_SHARE) && path_shows(l) {
        LimitedBy::Network
    } else {
        LimitedBy::Unknown
    }
}

/// The server's window was full: the server did not keep up. The cause is the first of its
/// log, its disk and its CPU (on one or waiting for one) that took at least [`CAUSE_SHARE`] %
/// of its time (a slow sink's reader can itself take the server's CPUs); `receiver` when none
/// did.
fn full_window(l: &Limits, receiver_busy: Option<f64>) -> LimitedBy {
    [
        (l.server_log_pct, LimitedBy::ReceiverLog),
        (l.server_disk_pct, LimitedBy::ReceiverDisk),
        (receiver_busy, LimitedBy::ReceiverCpu),
    ]
    .into_iter()
    .find(|(share, _)| over(*share, CAUSE_SHARE))
    .map_or(LimitedBy::Receiver, |(_, by)| by)
}

/// The send buffer, not the path, bounded what was in flight.
fn buffer_bound(l: &Limits) -> bool {
    over(l.sndbuf_limited_pct, SNDBUF_SHARE)
        || (l.notsent_pct.is_some() && !over(l.notsent_pct, NOTSENT_SHARE) && !path_full(l))
}

/// The path held data back: bytes waited unsent, the congestion window was full, or the line.
fn path_full(l: &Limits) -> bool {
    over(l.cwnd_full_pct, CWND_SHARE) || over(l.line_pct, LINE_SHARE)
}

/// Evidence that the path set the pace.
fn path_shows(l: &Limits) -> bool {
    over(l.notsent_pct, NOTSENT_SHARE) || path_full(l) || l.retransmits.is_some_and(|n| n > 0)
}
