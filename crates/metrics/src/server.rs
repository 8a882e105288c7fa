//! A tsserver's counters, for `tsserver --metrics ADDR`.
//!
//! The server counts a transfer when it ends (one call, never per chunk); what is true at any
//! moment (connections open, the send-buffer budget reserved, lines dropped) it reads when
//! scraped ([`Live`]). Every label has a closed set of values, each present from the start at 0,
//! so `rate()` and `increase()` see the first transfer.

use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};
use tsperf_proto::RefuseCode;

/// Which way a transfer went, as the server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The server received (a client's forward stream).
    Receive,
    /// The server sent (a reverse stream).
    Send,
}

impl Direction {
    fn label(self) -> &'static str {
        match self {
            Direction::Receive => "receive",
            Direction::Send => "send",
        }
    }
}

/// What the server reads of itself when scraped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live {
    /// Connections open now.
    pub open: u64,
    /// Lines its output dropped since it started (a stalled stdout).
    pub lines_dropped: u64,
    /// Bytes of the send-buffer budget reserved now.
    pub send_buffers_reserved: u64,
    /// The budget (`--send-buffers`).
    pub send_buffers_budget: u64,
}

/// The server's metrics, shared by its loops and threads.
#[derive(Debug)]
pub struct ServerMetrics {
    registry: Registry,
    transfers: IntCounterVec,
    bytes: IntCounterVec,
    refusals: IntCounterVec,
    rates: HistogramVec,
    open: IntGauge,
    dropped: IntCounter,
    reserved: IntGauge,
    budget: IntGauge,
}

/// Transfer rates from 1 MB/s to about 69 GB/s, by factors of 2 (bytes a second).
fn rate_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(1e6, 2.0, 17).unwrap_or_default()
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics::new()
    }
}

impl ServerMetrics {
    /// Every metric at zero, each label value present.
    pub fn new() -> ServerMetrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid name");
            registry.register(Box::new(c.clone())).expect("a new name");
            c
        };
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("a valid name");
            registry.register(Box::new(g.clone())).expect("a new name");
            g
        };
        let transfers = counter(
            "tsperf_server_transfers_total",
            "Transfers that ended, by direction (receive: a client sent; send: a reverse \
             stream) and result (complete: every byte counted and reported; incomplete).",
            &["direction", "result"],
        );
        let bytes = counter(
            "tsperf_server_bytes_total",
            "Data bytes of completed transfers, by direction.",
            &["direction"],
        );
        let refusals = counter(
            "tsperf_server_refusals_total",
            "Connections refused, by the code sent to the client.",
            &["code"],
        );
        let rates = HistogramVec::new(
            HistogramOpts::new(
                "tsperf_server_transfer_rate_bytes_per_second",
                "Completed transfers' rates (first to last byte), by direction.",
            )
            .buckets(rate_buckets()),
            &["direction"],
        )
        .expect("a valid histogram");
        registry
            .register(Box::new(rates.clone()))
            .expect("a new name");
        let dropped = IntCounter::new(
            "tsperf_server_output_lines_dropped_total",
            "Lines the server's output dropped because its stdout was stalled.",
        )
        .expect("a valid name");
        registry
            .register(Box::new(dropped.clone()))
            .expect("a new name");
        let m = ServerMetrics {
            open: gauge("tsperf_server_connections_open", "Connections open."),
            reserved: gauge(
                "tsperf_server_send_buffers_reserved_bytes",
                "Send-buffer bytes reverse streams have reserved from the budget.",
            ),
            budget: gauge(
                "tsperf_server_send_buffers_budget_bytes",
                "The send-buffer budget of all reverse streams together (--send-buffers).",
            ),
            registry,
            transfers,
            bytes,
            refusals,
            rates,
            dropped,
        };
        for d in [Direction::Receive, Direction::Send] {
            for r in ["complete", "incomplete"] {
                m.transfers.with_label_values(&[d.label(), r]);
            }
            m.bytes.with_label_values(&[d.label()]);
            m.rates.with_label_values(&[d.label()]);
        }
        for code in RefuseCode::ALL {
            m.refusals.with_label_values(&[code_label(code)]);
        }
        m
    }

    /// A transfer that completed: `bytes` from its first to its last byte in `elapsed`.
    pub fn completed(&self, d: Direction, bytes: u64, elapsed: Duration) {
        self.transfers
            .with_label_values(&[d.label(), "complete"])
            .inc();
        self.bytes.with_label_values(&[d.label()]).inc_by(bytes);
        if bytes > 0 && !elapsed.is_zero() {
            let h: Histogram = self.rates.with_label_values(&[d.label()]);
            h.observe(bytes as f64 / elapsed.as_secs_f64());
        }
    }

    /// A transfer that stopped short.
    pub fn incomplete(&self, d: Direction) {
        self.transfers
            .with_label_values(&[d.label(), "incomplete"])
            .inc();
    }

    /// A connection refused with `code`.
    pub fn refused(&self, code: RefuseCode) {
        self.refusals.with_label_values(&[code_label(code)]).inc();
    }

    /// The page a scrape gets: the counters, and `live` as it is now.
    pub fn render(&self, live: Live) -> String {
        self.open.set(saturate(live.open));
        self.reserved.set(saturate(live.send_buffers_reserved));
        self.budget.set(saturate(live.send_buffers_budget));
        // A counter only rises: raise it to the server's own count.
        self.dropped
            .inc_by(live.lines_dropped.saturating_sub(self.dropped.get()));
        crate::encode(&self.registry)
    }
}

fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A refusal code as its label: its name in the protocol's JSON (`limit`, `hello`, ...).
pub fn code_label(code: RefuseCode) -> &'static str {
    match code {
        RefuseCode::Version => "version",
        RefuseCode::Hello => "hello",
        RefuseCode::Auth => "auth",
        RefuseCode::Sink => "sink",
        RefuseCode::Limit => "limit",
        RefuseCode::Save => "save",
        RefuseCode::Shutdown => "shutdown",
        RefuseCode::Other => "other",
        RefuseCode::Unoffered => "unoffered",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every label value is on the page from the start, and a transfer moves exactly its
    /// counters.
    #[test]
    fn counters_start_at_zero_and_move_by_what_happened() {
        let m = ServerMetrics::new();
        let page = m.render(Live::default());
        for line in [
            "tsperf_server_transfers_total{direction=\"send\",result=\"incomplete\"} 0",
            "tsperf_server_refusals_total{code=\"unoffered\"} 0",
            "tsperf_server_connections_open 0",
        ] {
            assert!(page.contains(line), "{line} missing from\n{page}");
        }
        m.completed(Direction::Receive, 4 << 20, Duration::from_millis(500));
        m.refused(RefuseCode::Hello);
        let page = m.render(Live {
            open: 3,
            lines_dropped: 7,
            send_buffers_reserved: 1024,
            send_buffers_budget: 4096,
        });
        for line in [
            "tsperf_server_transfers_total{direction=\"receive\",result=\"complete\"} 1",
            "tsperf_server_bytes_total{direction=\"receive\"} 4194304",
            "tsperf_server_refusals_total{code=\"hello\"} 1",
            "tsperf_server_connections_open 3",
            "tsperf_server_output_lines_dropped_total 7",
            "tsperf_server_send_buffers_reserved_bytes 1024",
            "tsperf_server_transfer_rate_bytes_per_second_bucket{direction=\"receive\",le=\"16000000\"} 1",
            "tsperf_server_transfer_rate_bytes_per_second_bucket{direction=\"receive\",le=\"8000000\"} 0",
        ] {
            assert!(page.contains(line), "{line} missing from\n{page}");
        }
        // Read twice, the dropped lines count once.
        let page = m.render(Live {
            lines_dropped: 7,
            ..Live::default()
        });
        assert!(
            page.contains("tsperf_server_output_lines_dropped_total 7\n"),
            "{page}"
        );
    }
}
