//! Why a transfer went as fast as it did: the verdict `limited_by`, from the sender's
//! `TCP_INFO` ([`tsperf_proto::tcp::SenderTcp`]) and the client's CPU time.
//!
//! The kernel keeps, per connection, how long it had data to send (`busy_time`) and, of that,
//! how long the receiver's advertised window was full (`rwnd_limited`) and how long the send
//! buffer was too small to keep the path full (`sndbuf_limited`). The verdict, first match wins:
//!
//! 1. **receiver**: the window was full for at least [`RECEIVER_SHARE`] % of the busy time. The
//!    server did not read as fast as the data came (a slow log sink, a slow disk).
//! 2. **sender-buffer**: the send buffer held data back for at least [`SNDBUF_SHARE`] %
//!    (`--sndbuf` too small for the path's bandwidth × delay).
//! 3. **sender-cpu**: the client's CPU time (user + system) and its sending thread's wait for
//!    a CPU (the run queue, Linux's schedstat) were together at least [`CPU_SHARE`] % of its
//!    elapsed time: it could not write faster (small chunks, one system call each), or had to
//!    share its CPU (on loopback the receiver and the kernel's packet work run beside it).
//! 4. **sender**: the connection had data to send for less than [`IDLE_SHARE`] % of the elapsed
//!    time, with the CPU to spare: the client itself left it idle (reading its file, say).
//! 5. **network**: the rest. The window had room and the sender kept it busy: the congestion
//!    window, loss (`total_retrans`) or the line's rate set the pace.
//!
//! Without `TCP_INFO` (not Linux) the verdict is `unknown`, and so it is when the kernel counted
//! no busy time at all: it keeps these times in jiffies (4 ms at 250 Hz), so a transfer over
//! before the clock ticked is too short to tell.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tsperf_proto::tcp::SenderTcp;

/// Share of the busy time with a full receive window, in %, that makes the receiver the limit.
pub const RECEIVER_SHARE: f64 = 50.0;
/// Share of the busy time held back by the send buffer that makes it the limit, in %.
pub const SNDBUF_SHARE: f64 = 50.0;
/// The client's CPU time as a share of its elapsed time that makes its CPU the limit, in %.
pub const CPU_SHARE: f64 = 90.0;
/// Below this share of the elapsed time busy, the sender left the connection idle, in %.
pub const IDLE_SHARE: f64 = 50.0;

/// What limited a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitedBy {
    /// The receiver's window was full most of the time.
    Receiver,
    /// The sender's buffer held data back most of the time.
    SenderBuffer,
    /// The sender was on (or waiting for) a CPU nearly all the time.
    SenderCpu,
    /// The sender had nothing to send much of the time.
    Sender,
    /// None of the above.
    Network,
    /// Nothing to judge on (no TCP_INFO, or too short to tell).
    Unknown,
}

impl LimitedBy {
    /// The JSON's and the table's value: `receiver`, `sender-cpu`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            LimitedBy::Receiver => "receiver",
            LimitedBy::SenderBuffer => "sender-buffer",
            LimitedBy::SenderCpu => "sender-cpu",
            LimitedBy::Sender => "sender",
            LimitedBy::Network => "network",
            LimitedBy::Unknown => "unknown",
        }
    }
}

impl fmt::Display for LimitedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The shares a verdict rests on, in %. `None` where the kernel did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Busy time with the receiver's window full, of the busy time.
    pub rwnd_limited_pct: Option<f64>,
    /// Busy time held back by the send buffer, of the busy time.
    pub sndbuf_limited_pct: Option<f64>,
    /// Busy time, of the client's elapsed time.
    pub busy_pct: Option<f64>,
    /// The client's CPU time (user + system), of its elapsed time.
    pub client_cpu_pct: f64,
    /// The client's sending thread waiting for a CPU, of its elapsed time.
    #[serde(default)]
    pub client_run_queue_pct: Option<f64>,
    /// Segments the sender retransmitted.
    pub retransmits: Option<u64>,
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
    (whole > 0).then(|| 100.0 * part as f64 / whole as f64)
}

/// The verdict on a transfer whose sender saw `tcp`, spent `cpu`, waited `run_queue` for a CPU
/// and took `elapsed`.
pub fn judge(
    tcp: &SenderTcp,
    cpu: Duration,
    run_queue: Option<Duration>,
    elapsed: Duration,
) -> Verdict {
    let elapsed_us = elapsed.as_micros() as u64;
    let busy = tcp.busy_time_us;
    let limits = Limits {
        rwnd_limited_pct: busy.zip(tcp.rwnd_limited_us).and_then(|(b, r)| pct(r, b)),
        sndbuf_limited_pct: busy.zip(tcp.sndbuf_limited_us).and_then(|(b, s)| pct(s, b)),
        busy_pct: busy.and_then(|b| pct(b, elapsed_us)),
        client_cpu_pct: pct(cpu.as_micros() as u64, elapsed_us).unwrap_or(0.0),
        client_run_queue_pct: run_queue.and_then(|q| pct(q.as_micros() as u64, elapsed_us)),
        retransmits: tcp.total_retrans,
    };
    let cpu_bound = limits.client_cpu_pct + limits.client_run_queue_pct.unwrap_or(0.0);
    let over = |share: Option<f64>, at: f64| share.is_some_and(|s| s >= at);
    let limited_by = if busy.is_none_or(|b| b == 0) {
        LimitedBy::Unknown
    } else if over(limits.rwnd_limited_pct, RECEIVER_SHARE) {
        LimitedBy::Receiver
    } else if over(limits.sndbuf_limited_pct, SNDBUF_SHARE) {
        LimitedBy::SenderBuffer
    } else if cpu_bound >= CPU_SHARE {
        LimitedBy::SenderCpu
    } else if limits.busy_pct.is_some_and(|b| b < IDLE_SHARE) {
        LimitedBy::Sender
    } else {
        LimitedBy::Network
    };
    Verdict { limited_by, limits }
}

impl Verdict {
    /// The sentence for the summary: `limited by the receiver: 99% of the time the server's
    /// window was full`.
    pub fn sentence(&self) -> String {
        let l = &self.limits;
        let f = |v: Option<f64>| v.unwrap_or(0.0);
        match self.limited_by {
            LimitedBy::Receiver => format!(
                "limited by the receiver: {:.0}% of the time the server's window was full",
                f(l.rwnd_limited_pct)
            ),
            LimitedBy::SenderBuffer => format!(
                "limited by the sender's buffer: {:.0}% of the time the send buffer held data \
                 back (try a larger --sndbuf)",
                f(l.sndbuf_limited_pct)
            ),
            LimitedBy::SenderCpu => match l.client_run_queue_pct {
                Some(q) if q >= 1.0 => format!(
                    "limited by the sender's CPU: the client was on the CPU {:.0}% of the time \
                     and waited for one {q:.0}%",
                    l.client_cpu_pct
                ),
                _ => format!(
                    "limited by the sender's CPU: the client was on the CPU {:.0}% of the time",
                    l.client_cpu_pct
                ),
            },
            LimitedBy::Sender => format!(
                "limited by the sender: the connection had nothing to send {:.0}% of the time",
                100.0 - f(l.busy_pct)
            ),
            LimitedBy::Network => format!(
                "limited by the network: the window had room {:.0}% of the time{}",
                100.0 - f(l.rwnd_limited_pct) - f(l.sndbuf_limited_pct),
                match l.retransmits {
                    Some(0) | None => String::new(),
                    Some(n) => format!(", {n} segments retransmitted"),
                }
            ),
            LimitedBy::Unknown if l.busy_pct.is_some() => "limited by: unknown (the transfer \
                 was over before the kernel's clock ticked: too short to tell)"
                .into(),
            LimitedBy::Unknown => "limited by: unknown (TCP_INFO is not available here)".into(),
        }
    }

    /// The shares, for the line under the sentence.
    pub fn shares(&self) -> String {
        let l = &self.limits;
        let p = |v: Option<f64>| v.map_or("?".to_owned(), |v| format!("{v:.0}%"));
        format!(
            "window full {}, send buffer full {} of busy time; busy {}, client on CPU {:.0}% and \
             waiting for one {} of elapsed; {}",
            p(l.rwnd_limited_pct),
            p(l.sndbuf_limited_pct),
            p(l.busy_pct),
            l.client_cpu_pct,
            p(l.client_run_queue_pct),
            l.retransmits
                .map_or("? retransmits".to_owned(), |n| crate::units::count(
                    n,
                    "retransmit"
                ))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(busy: u64, rwnd: u64, sndbuf: u64) -> SenderTcp {
        SenderTcp {
            busy_time_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            sndbuf_limited_us: Some(sndbuf),
            total_retrans: Some(0),
            ..SenderTcp::default()
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// The quick check: a reader that sleeps gave rwnd_limited 828 of busy 832 ms.
    #[test]
    fn each_verdict() {
        let v = |t: SenderTcp, cpu_ms: u32, elapsed_ms: u32| {
            judge(&t, MS * cpu_ms, None, MS * elapsed_ms).limited_by
        };
        assert_eq!(v(tcp(832_000, 828_000, 0), 100, 900), LimitedBy::Receiver);
        assert_eq!(v(tcp(32_000, 4_000, 0), 31, 32), LimitedBy::SenderCpu);
        assert_eq!(
            v(tcp(1_000_000, 0, 700_000), 100, 1000),
            LimitedBy::SenderBuffer
        );
        assert_eq!(v(tcp(100_000, 0, 0), 100, 1000), LimitedBy::Sender);
        assert_eq!(v(tcp(900_000, 10_000, 0), 100, 1000), LimitedBy::Network);
        assert_eq!(
            v(SenderTcp::default(), 100, 1000),
            LimitedBy::Unknown,
            "no TCP_INFO"
        );
        let short = judge(&tcp(0, 0, 0), MS, None, MS * 2);
        assert_eq!(short.limited_by, LimitedBy::Unknown, "no tick of busy time");
        assert!(
            short.sentence().contains("too short to tell"),
            "{}",
            short.sentence()
        );
        assert!(
            judge(&SenderTcp::default(), MS, None, MS)
                .sentence()
                .contains("not available")
        );
        // A full window outranks a busy CPU: the sender waited on the receiver.
        assert_eq!(
            v(tcp(1_000_000, 600_000, 0), 950, 1000),
            LimitedBy::Receiver
        );
        // On the CPU 70% and waiting for one 25%: the CPU is the limit.
        let shared = judge(&tcp(900_000, 0, 0), MS * 700, Some(MS * 250), MS * 1000);
        assert_eq!(shared.limited_by, LimitedBy::SenderCpu);
        assert!(
            shared.sentence().contains("waited for one 25%"),
            "{}",
            shared.sentence()
        );
    }

    #[test]
    fn sentence_names_the_share() {
        let v = judge(&tcp(1_000_000, 990_000, 0), MS * 10, None, MS * 1000);
        assert_eq!(
            v.sentence(),
            "limited by the receiver: 99% of the time the server's window was full"
        );
        assert_eq!(v.limits.busy_pct, Some(100.0));
        let n = judge(
            &SenderTcp {
                total_retrans: Some(7),
                ..tcp(1_000_000, 0, 0)
            },
            MS * 10,
            None,
            MS * 1000,
        );
        assert!(
            n.sentence().contains("7 segments retransmitted"),
            "{}",
            n.sentence()
        );
    }
}
