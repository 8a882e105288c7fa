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
        let (snd, rcv) = roles(l);
        let mut s = match self.limited_by {
            LimitedBy::Paced => format!(
                "limited by the pace asked of {snd} (-b {:.1} Mbit/s): the rate reached {} of it",
                l.pace_bytes_per_s.unwrap_or(0) as f64 * 8.0 / 1e6,
                p(l.of_pace_pct)
            ),
            LimitedBy::ReceiverLog => format!(
                "limited by the receiver's log: {rcv} spent {} of its time writing a line \
                 per read (try --log file or none)",
                p(l.server_log_pct)
            ),
            LimitedBy::ReceiverDisk => format!(
                "limited by the receiver's disk: {rcv} spent {} of its time saving the file",
                p(l.server_disk_pct)
            ),
            LimitedBy::SharedCpu => {
                return format!(
                    "limited by this machine's {}CPUs, which both ends share: {snd} was \
                     on a CPU {} of its time and waited for one {}, {rcv} {} and {}",
                    l.cpus.map_or(String::new(), |n| format!("{n} ")),
                    p(l.sender_on_cpu_pct.or(Some(l.client_cpu_pct))),
                    p(l.client_run_queue_pct),
                    p(l.server_cpu_pct),
                    p(l.server_run_queue_pct),
                );
            }
            LimitedBy::ReceiverCpu => format!(
                "limited by the receiver's CPU: {rcv} was on a CPU {} of its time and \
                 waited for one {}{}",
                p(l.server_cpu_pct),
                p(l.server_run_queue_pct),
                quota_hint(l.server_run_queue_pct)
            ),
            LimitedBy::Receiver => format!(
                "limited by the receiver: {rcv}'s window was full {} of the time, though \
                 {rcv} was busy only {} (its receive buffer?)",
                p(l.rwnd_limited_pct),
                p(Some(rest_of(l.server_waiting_pct)))
            ),
            LimitedBy::SenderSource => format!(
                "limited by the sender's file: {snd} spent {} of its time waiting to read \
                 it",
                p(l.client_source_pct)
            ),
            LimitedBy::SenderCpu => format!(
                "limited by the sender's CPU: {snd} was on a CPU {} of its time and waited \
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
                format!("limited by: unknown (neither TCP_INFO nor {rcv}'s times are available)")
            }
            LimitedBy::Unknown => unknown_sentence(l),
            LimitedBy::TooShort => format!(
                "limited by: too short to tell ({:.0} ms; a verdict needs {} ms or more: send \
                 more, or run for a time with -t)",
                f(l.elapsed_ms),
                super::MIN_JUDGED.as_millis()
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
        let (snd, rcv) = if l.reverse {
            ("server (sending)", "client (receiving)")
        } else {
            ("client", "server")
        };
        let retrans = l.retransmits.map_or("? retransmits".to_owned(), |n| {
            units::count(n, "retransmit")
        });
        // A sender with no file (the generated stream) has no wait for one to show.
        let file = l
            .client_source_pct
            .map_or(String::new(), |v| format!(", for its file {}", p(Some(v))));
        let mut s = format!(
            "{snd}: on CPU {}, waiting for a CPU {}{file}, on its socket {}; \
             {rcv}: on CPU {}, waiting for a CPU {}, log {}, disk {}, waiting for data {}; \
             TCP: busy {}, window full {}, send buffer full {}, {retrans}",
            p(l.sender_on_cpu_pct.or(Some(l.client_cpu_pct))),
            p(l.client_run_queue_pct),
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

/// No rule was met: how near each end came to the rules' thresholds, and what the path showed.
fn unknown_sentence(l: &Limits) -> String {
    let (snd, rcv) = roles(l);
    let add = |a: Option<f64>, b: Option<f64>| a.map(|a| a + b.unwrap_or(0.0));
    let sender = add(
        l.sender_on_cpu_pct.or(Some(l.client_cpu_pct)),
        l.client_run_queue_pct,
    );
    let receiver = add(l.server_cpu_pct, l.server_run_queue_pct);
    let path = if super::path_shows(l) {
        format!(
            "; the path: bytes waited unsent in {} of the readings, at the congestion window in \
             {}, {}",
            p(l.notsent_pct),
            p(l.cwnd_full_pct),
            l.retransmits
                .map_or("? retransmits".to_owned(), |n| units::count(
                    n,
                    "retransmit"
                ))
        )
    } else {
        "; nothing shows the path".to_owned()
    };
    format!(
        "limited by: unknown, no rule met: {snd} was on a CPU or waiting for one {} (the rule: \
         {:.0}%) and waited on its socket {} ({:.0}%); {rcv} was busy {} and waited for data \
         {}{path}",
        p(sender),
        super::CPU_SHARE,
        p(l.client_waiting_pct),
        super::WAITING_SHARE,
        p(receiver),
        p(l.server_waiting_pct),
    )
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

/// The sending end and the receiving end, as the sentence names them.
fn roles(l: &Limits) -> (&'static str, &'static str) {
    if l.reverse {
        ("the server", "the client")
    } else {
        ("the client", "the server")
    }
}

fn buffer_sentence(l: &Limits) -> String {
    let (snd, _) = roles(l);
    // The client sets its send buffer; in reverse the server's is the kernel's to size.
    let hint = if l.reverse {
        ""
    } else {
        "; try a larger --sndbuf"
    };
    let buf = l.sndbuf.map_or("?".to_owned(), units::size);
    match (l.sndbuf, l.write_size) {
        (Some(b), Some(w)) if b < w => format!(
            "limited by the sender's buffer: the send buffer ({buf}) is smaller than one write \
             ({}){hint}",
            units::size(w)
        ),
        _ if l
            .sndbuf_limited_pct
            .is_some_and(|s| s >= super::SNDBUF_SHARE) =>
        {
            format!(
                "limited by the sender's buffer: the kernel says it held data back {} of the busy \
             time{hint}",
                p(l.sndbuf_limited_pct)
            )
        }
        _ => format!(
            "limited by the sender's buffer: {snd} waited on its socket {} while nothing \
             waited unsent in its {buf} send buffer ({} of the readings): it was all in \
             flight{hint}",
            p(l.client_waiting_pct),
            p(Some(100.0 - f(l.notsent_pct)))
        ),
    }
}

fn network_sentence(l: &Limits) -> String {
    let (snd, rcv) = roles(l);
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
        "limited by the network: {snd} waited on its socket {} and {rcv} for data {} \
         with the window open; {}",
        p(l.client_waiting_pct),
        p(l.server_waiting_pct),
        why.join(", ")
    )
}

impl LimitedBy {
    /// The verdict in plain words, for a report's line: `the receiver's CPU`.
    pub fn words(self) -> &'static str {
        match self {
            LimitedBy::Paced => "the pace asked of the sender (-b)",
            LimitedBy::ReceiverLog => "the receiver's per-read log",
            LimitedBy::ReceiverDisk => "the receiver's disk",
            LimitedBy::SharedCpu => "this machine's CPUs, which both ends share",
            LimitedBy::ReceiverCpu => "the receiver's CPU",
            LimitedBy::Receiver => "the receiver (its window was full)",
            LimitedBy::SenderSource => "the sender's reads of its file",
            LimitedBy::SenderCpu => "the sender's CPU",
            LimitedBy::SenderBuffer => "the sender's send buffer",
            LimitedBy::Sender => "the sender (it had nothing to send)",
            LimitedBy::Network => "the network",
            LimitedBy::Unknown => "nothing that shows (unknown)",
            LimitedBy::TooShort => "nothing yet: too short to tell (100 ms or more needed)",
        }
    }
}
