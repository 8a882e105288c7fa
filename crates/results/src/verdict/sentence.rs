//! The verdict in words: a sentence naming the end and the cause with the share that shows
//! it, and a line of every share.

use super::{LimitedBy, Limits, Verdict};
use crate::units;

/// A share as `37%`, `<1%` or `?`.
fn p(v: Option<f64>) -> String {
    match v {
        None => "?".into(),
        Some(v) if v > 0.0 && v < 0.5 => "<1%".into(),
        Some(v) => format!("{v:.0}%"),
    }
}

fn f(v: Option<f64>) -> f64 {
    v.unwrap_or(0.0)
}

impl Verdict {
    /// The sentence for the summary: `limited by the receiver's CPU: the server was on a CPU
    /// 12% of its time and waited for one 85%`.
    pub fn sentence(&self) -> String {
        let l = &self.limits;
        let mut s = match self.limited_by {
            LimitedBy::ReceiverLog => format!(
                "limited by the receiver's log: the server spent {} of its time writing a line \
                 per read (try --log file or none)",
                p(l.server_log_pct)
            ),
            LimitedBy::ReceiverDisk => format!(
                "limited by the receiver's disk: the server spent {} of its time saving the file",
                p(l.server_disk_pct)
            ),
            LimitedBy::SharedCpu => {
                return format!(
                    "limited by this machine's {}CPUs, which both ends share: the client was \
                     on a CPU {} of its time and waited for one {}, the server {} and {}",
                    l.cpus.map_or(String::new(), |n| format!("{n} ")),
                    p(l.sender_on_cpu_pct.or(Some(l.client_cpu_pct))),
                    p(l.client_run_queue_pct),
                    p(l.server_cpu_pct),
                    p(l.server_run_queue_pct),
                );
            }
            LimitedBy::ReceiverCpu => format!(
                "limited by the receiver's CPU: the server was on a CPU {} of its time and \
                 waited for one {}{}",
                p(l.server_cpu_pct),
                p(l.server_run_queue_pct),
                quota_hint(l.server_run_queue_pct)
            ),
            LimitedBy::Receiver => format!(
                "limited by the receiver: the server's window was full {} of the time, though \
                 the server was busy only {} (its receive buffer?)",
                p(l.rwnd_limited_pct),
                p(Some(rest_of(l.server_waiting_pct)))
            ),
            LimitedBy::SenderSource => format!(
                "limited by the sender's file: the client spent {} of its time waiting to read \
                 it",
                p(l.client_source_pct)
            ),
            LimitedBy::SenderCpu => format!(
                "limited by the sender's CPU: the client was on a CPU {} of its time and waited \
                 for one {}{}",
                p(l.sender_on_cpu_pct.or(Some(l.client_cpu_pct))),
                p(l.client_run_queue_pct),
                quota_hint(l.client_run_queue_pct)
            ),
            LimitedBy::SenderBuffer => buffer_sentence(l),
            LimitedBy::Sender => format!(
                "limited by the sender: the connection had nothing to send {:.0}% of the time",
                100.0 - f(l.busy_pct)
            ),
            LimitedBy::Network => network_sentence(l),
            LimitedBy::Unknown if l.busy_pct.is_none() && l.server_cpu_pct.is_none() => {
                "limited by: unknown (neither TCP_INFO nor the server's times are available)".into()
            }
            LimitedBy::Unknown => format!(
                "limited by: unknown (no end was busy and nothing shows the path: the client \
                 waited on its socket {}, the server for data {})",
                p(l.client_waiting_pct),
                p(l.server_waiting_pct)
            ),
        };
        if l.same_host {
            s += &match l.cpus {
                Some(n) => format!("; both ends run on this machine and share its {n} CPUs"),
                None => "; both ends run on this machine and share its CPUs".into(),
            };
        }
        s
    }

    /// Every share, for the line under the sentence.
    pub fn shares(&self) -> String {
        let l = &self.limits;
        let retrans = l.retransmits.map_or("? retransmits".to_owned(), |n| {
            units::count(n, "retransmit")
        });
        let mut s = format!(
            "client: on CPU {}, waiting for a CPU {}, for its file {}, on its socket {}; \
             server: on CPU {}, waiting for a CPU {}, log {}, disk {}, waiting for data {}; \
             TCP: busy {}, window full {}, send buffer full {}, {retrans}",
            p(l.sender_on_cpu_pct.or(Some(l.client_cpu_pct))),
            p(l.client_run_queue_pct),
            p(l.client_source_pct),
            p(l.client_waiting_pct),
            p(l.server_cpu_pct),
            p(l.server_run_queue_pct),
            p(l.server_log_pct),
            p(l.server_disk_pct),
            p(l.server_waiting_pct),
            p(l.busy_pct),
            p(l.rwnd_limited_pct),
            p(l.sndbuf_limited_pct),
        );
        if l.notsent_pct.is_some() {
            s += &format!(
                "; readings: unsent bytes {}, at the congestion window {}",
                p(l.notsent_pct),
                p(l.cwnd_full_pct)
            );
        }
        if let (Some(share), Some(mbit)) = (l.line_pct, l.line_mbit) {
            s += &format!("; {share:.0}% of the interface's {mbit} Mbit/s");
        }
        if let (Some(b), Some(w)) = (l.sndbuf, l.write_size) {
            s += &format!(
                "; send buffer {} against one write of {}{}",
                units::size(b),
                units::size(w),
                l.bdp_bytes.map_or(String::new(), |d| format!(
                    " and the path's bandwidth × delay of {}",
                    units::size(d)
                ))
            );
        }
        s
    }
}

fn rest_of(waiting: Option<f64>) -> f64 {
    100.0 - waiting.unwrap_or(100.0)
}

/// A note when waiting for a CPU is most of it: a quota, or other work on the same CPUs.
fn quota_hint(run_queue: Option<f64>) -> &'static str {
    if run_queue.is_some_and(|q| q >= 50.0) {
        " (a CPU quota, or other threads on its CPUs)"
    } else {
        ""
    }
}

fn buffer_sentence(l: &Limits) -> String {
    let buf = l.sndbuf.map_or("?".to_owned(), units::size);
    match (l.sndbuf, l.write_size) {
        (Some(b), Some(w)) if b < w => format!(
            "limited by the sender's buffer: the send buffer ({buf}) is smaller than one write \
             ({}); try a larger --sndbuf",
            units::size(w)
        ),
        _ if l
            .sndbuf_limited_pct
            .is_some_and(|s| s >= super::SNDBUF_SHARE) =>
        {
            format!(
                "limited by the sender's buffer: the kernel says it held data back {} of the busy \
             time; try a larger --sndbuf",
                p(l.sndbuf_limited_pct)
            )
        }
        _ => format!(
            "limited by the sender's buffer: the client waited on its socket {} while nothing \
             waited unsent in its {buf} send buffer ({} of the readings): it was all in flight; \
             try a larger --sndbuf",
            p(l.client_waiting_pct),
            p(Some(100.0 - f(l.notsent_pct)))
        ),
    }
}

fn network_sentence(l: &Limits) -> String {
    let mut why = Vec::new();
    if let (Some(share), Some(mbit)) = (l.line_pct, l.line_mbit)
        && share >= super::LINE_SHARE
    {
        why.push(format!("{share:.0}% of the interface's {mbit} Mbit/s"));
    }
    if l.notsent_pct.is_some_and(|s| s >= super::NOTSENT_SHARE) {
        why.push(format!(
            "bytes waited unsent in the send buffer in {} of the readings",
            p(l.notsent_pct)
        ));
    }
    if l.cwnd_full_pct.is_some_and(|s| s >= super::CWND_SHARE) {
        why.push(format!("{} at the congestion window", p(l.cwnd_full_pct)));
    }
    if let Some(r) = l.rtt_over_min.filter(|r| *r >= 2.0) {
        why.push(format!("round trip {r:.0}× its minimum (a queue)"));
    }
    if let Some(n) = l.retransmits.filter(|n| *n > 0) {
        why.push(units::count(n, "segment") + " retransmitted");
    }
    format!(
        "limited by the network: the client waited on its socket {} and the server for data {} \
         with the window open; {}",
        p(l.client_waiting_pct),
        p(l.server_waiting_pct),
        why.join(", ")
    )
}
