//! Prometheus for tsperf: what a fleet's monitoring scrapes.
//!
//! - [`server::ServerMetrics`]: a tsserver's counters (`tsserver --metrics ADDR`): transfers by
//!   direction and result, bytes each way, refusals by code, connections open, lines its output
//!   dropped, the send-buffer budget in use, and a histogram of transfer rates.
//! - [`probe`]: one run's result as gauges, the page `tsprobe` answers a `/probe` scrape with
//!   and `tsclient --prom-file` writes for node_exporter's textfile collector
//!   ([`textfile::write`]: a temporary file renamed over the old one).
//! - [`http`]: the small HTTP/1.1 endpoint both serve from: a bounded number of connections,
//!   each with a deadline, so a scraper (or anything else) that connects and stalls holds one
//!   slot for a few seconds and never the server.
//!
//! Everything is written in the Prometheus text format 0.0.4 (`promtool check metrics`
//! passes on it) from registries of our own: nothing here is process-wide.

pub mod http;
pub mod probe;
pub mod server;
pub mod textfile;

/// The content type of every page here.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// Encodes a registry's metrics in the text format.
pub(crate) fn encode(registry: &prometheus::Registry) -> String {
    prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        // Only a metric family without metrics fails to encode; ours always have some.
        .unwrap_or_default()
}
