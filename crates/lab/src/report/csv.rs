//! `matrix.csv`: every row, stream and latency, in one table with a `kind` column.

use anyhow::Result;

use super::{Exporter, Matrix, StreamRow};

/// One row per cell: `matrix.csv`.
pub struct Csv;

const HEADER: [&str; 24] = [
    "kind",
    "chunk",
    "io",
    "log",
    "codec",
    "framing",
    "nodelay",
    "reconnect",
    "count",
    "reps",
    "median_mib_s",
    "min_mib_s",
    "max_mib_s",
    "client_cpu_s",
    "p50_us",
    "p99_us",
    "verified",
    "limited_by",
    "server_largest",
    "server_largest_pct",
    "under_load",
    "idle_p50_us",
    "streams",
    "direction",
];

impl Exporter for Csv {
    fn file_name(&self) -> &'static str {
        "matrix.csv"
    }

    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        let seed = m.stream.iter().map(|r| (r, 1, false));
        let other = m.sessions.iter().map(|s| (&s.row, s.streams, s.reverse));
        for (r, streams, reverse) in seed.chain(other) {
            stream_record(&mut w, r, streams, reverse)?;
        }
        for r in &m.latency {
            w.write_record([
                "latency",
                "",
                "",
                "",
                &r.codec,
                &r.framing,
                &r.nodelay.to_string(),
                &r.reconnect.to_string(),
                &r.count.to_string(),
                &r.reps.to_string(),
                "",
                "",
                "",
                "",
                &format!("{:.3}", r.p50_us),
                &format!("{:.3}", r.p99_us),
                "",
                r.stream_limited_by.as_deref().unwrap_or(""),
                "",
                "",
                r.under_load.as_deref().unwrap_or(""),
                &r.idle_p50_us.map_or(String::new(), |p| format!("{p:.3}")),
                "",
                "",
            ])?;
        }
        Ok(w.into_inner()?)
    }
}

/// One stream row: the seed's single forward stream, or another direction or stream count.
fn stream_record(
    w: &mut csv::Writer<Vec<u8>>,
    r: &StreamRow,
    streams: u32,
    reverse: bool,
) -> Result<()> {
    w.write_record([
        "stream",
        &r.chunk.to_string(),
        &r.io,
        &r.log,
        "",
        "",
        "",
        "",
        "",
        &r.reps.to_string(),
        &format!("{:.3}", r.median_mib_s),
        &format!("{:.3}", r.min_mib_s),
        &format!("{:.3}", r.max_mib_s),
        &format!("{:.6}", r.client_cpu_s),
        "",
        "",
        &r.verified.to_string(),
        r.limited_by.as_deref().unwrap_or(""),
        r.server_largest.as_deref().unwrap_or(""),
        &r.server_largest_pct
            .map_or(String::new(), |p| format!("{p:.1}")),
        "",
        "",
        &streams.to_string(),
        if reverse { "reverse" } else { "forward" },
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSV for a fixed matrix.
    #[test]
    fn snapshot() {
        let bytes = Csv.serialize(&super::super::fixture::matrix()).unwrap();
        insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
    }
}
