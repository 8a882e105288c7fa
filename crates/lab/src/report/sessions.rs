//! The table of the stream grid's other dimensions (`matrix.sh --streams LIST --reverse`):
//! every direction and stream count, beside the seed's single forward stream.

use std::fmt::Write as _;

use super::{Matrix, StreamRow};
use tsperf_results::units;

/// One row of the table: its direction, streams and figures.
struct Line<'a> {
    reverse: bool,
    streams: u32,
    row: &'a StreamRow,
}

/// Every row of the table, forward single streams first (the seed's cells), in grid order.
fn lines(m: &Matrix) -> Vec<Line<'_>> {
    let seed = m.stream.iter().map(|row| Line {
        reverse: false,
        streams: 1,
        row,
    });
    let other = m.sessions.iter().map(|s| Line {
        reverse: s.reverse,
        streams: s.streams,
        row: &s.row,
    });
    seed.chain(other).collect()
}

/// The streams table, when the grid ran any other dimension.
pub(super) fn table(m: &Matrix, o: &mut String) {
    if m.sessions.is_empty() {
        return;
    }
    let lines = lines(m);
    let _ = writeln!(o, "\n## Streams and directions\n");
    let _ = writeln!(
        o,
        "`forward`: the client sends the file (`-P N`: striped over N connections, each stripe \
         verified by its digest, the whole by covering the file). `reverse`: the server sends \
         the generated text of the file's size (`-R --bytes`), the client receives, logs to its \
         sink and verifies; *log* is the receiving end's sink (reverse: the client's; its \
         stdout carries the JSON the grid reads, so reverse has no stdout cells), *client io* \
         the receiving client's reads. A session's rate is its SUM; *vs 1 stream*: against the \
         same direction, chunk, io and log with one stream.\n"
    );
    let (line_head, line_rule) = super::markdown::line_columns(m.setup.line_gbit);
    let _ = writeln!(
        o,
        "| direction | streams | chunk | client io | log | median MiB/s | min | max | Gbit/s |{line_head} client CPU | vs 1 stream | limited by | verified |"
    );
    let _ = writeln!(
        o,
        "|---|---:|---:|---|---|---:|---:|---:|---:|{line_rule}---:|---:|---|---|"
    );
    for l in &lines {
        let r = l.row;
        let single = lines.iter().find(|o| {
            o.streams == 1
                && o.reverse == l.reverse
                && (o.row.chunk, &o.row.io, &o.row.log) == (r.chunk, &r.io, &r.log)
        });
        let vs = single
            .filter(|s| s.row.median_mib_s > 0.0)
            .map_or("—".to_owned(), |s| {
                format!("{:.2}×", r.median_mib_s / s.row.median_mib_s)
            });
        let line = super::markdown::line_cell(m.setup.line_gbit, r.median_gbit_s);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} |{line} {} | {vs} | {} | {} |",
            if l.reverse { "reverse" } else { "forward" },
            l.streams,
            r.chunk,
            r.io,
            r.log,
            r.median_mib_s,
            r.min_mib_s,
            r.max_mib_s,
            r.median_gbit_s,
            units::seconds(r.client_cpu_s),
            r.limited_by.as_deref().unwrap_or("—"),
            if r.verified { "yes" } else { "**NO**" }
        );
    }
}
