//! The field report's latency table beside tsperf's: one row per client the report tried,
//! with its figure, the grid cell that writes what that client wrote, and why they differ.

use std::fmt::Write as _;

use super::{LatencyRow, Matrix};
use tsperf_results::units;

/// One client of the field report (`shared/seeds`): what it did, what it measured, the grid
/// cell (codec, framing, nodelay) that does the same on the wire, and why the figures differ.
struct SeedRow {
    client: &'static str,
    figure: &'static str,
    codec: &'static str,
    framing: &'static str,
    why: &'static str,
}

const SEED: [SeedRow; 3] = [
    SeedRow {
        client: "a fresh Java object stream per message",
        figure: "about 50 ms",
        codec: "object",
        framing: "split",
        why: "a new object stream writes its header, then the object: two small writes. tsperf \
              splits both directions, so both meet Nagle and a delayed ACK: two stalls of \
              40 ms. The report's 50 ms fits one stall plus the cost of building a stream per \
              message; which of its directions stalled it does not say",
    },
    SeedRow {
        client: "one persistent Java object stream",
        figure: "about 40 ms",
        codec: "object",
        framing: "split-request",
        why: "one direction writes in two parts, the other in one: one delayed ACK a round \
              trip, Linux's 40 ms minimum (TCP_DELACK_MIN). The figures agree",
    },
    SeedRow {
        client: "raw primitives over a data stream",
        figure: "1-2 ms",
        codec: "binary",
        framing: "single",
        why: "one write a message: no stall. The report's 1-2 ms is a phone's Wi-Fi round \
              trip; here the path is the grid's, without radio",
    },
];

/// The idle row (no reconnect, no load) with this codec, framing and nodelay.
fn find<'a>(m: &'a Matrix, r: &SeedRow, nodelay: bool) -> Option<&'a LatencyRow> {
    m.latency.iter().find(|l| {
        l.codec == r.codec
            && l.framing == r.framing
            && l.nodelay == nodelay
            && !l.reconnect
            && l.under_load.is_none()
    })
}

/// The section, when the grid has the cells.
pub(super) fn seed_table(m: &Matrix, o: &mut String) {
    if SEED.iter().all(|r| find(m, r, false).is_none()) {
        return;
    }
    let us = units::micros;
    let _ = writeln!(
        o,
        "\n## The field report's latency, side by side\n\n\
         Its clients asked a PC for the time 1000 times over one socket, Nagle's algorithm on \
         (Java's default). tsperf's cell writes what each client wrote; with `--nodelay` the \
         stall goes.\n\n\
         | the report's client | its figure | tsperf's cell (nodelay off) | tsperf p50 | with --nodelay | why they differ |\n\
         |---|---|---|---:|---:|---|"
    );
    for r in &SEED {
        let p50 = |nodelay| find(m, r, nodelay).map_or("?".to_owned(), |l| us(l.p50_us));
        let _ = writeln!(
            o,
            "| {} | {} | {} {} | {} | {} | {} |",
            r.client,
            r.figure,
            r.codec,
            r.framing,
            p50(false),
            p50(true),
            r.why
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_seed_client_has_its_cell() {
        let mut m = super::super::fixture::matrix();
        let mut md = String::new();
        seed_table(&m, &mut md);
        assert!(md.is_empty(), "none of the seed's cells: no section");
        let base = m.latency[0].clone();
        m.latency.push(LatencyRow {
            codec: "object".into(),
            framing: "split-request".into(),
            nodelay: false,
            p50_us: 44_010.0,
            ..base
        });
        seed_table(&m, &mut md);
        assert!(
            md.contains("| one persistent Java object stream | about 40 ms | object split-request | 44.01 ms | ? |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| raw primitives over a data stream | 1-2 ms | binary single | ? | 110.0 µs |"
            ),
            "{md}"
        );
    }
}
