//! The charts: well-formed, labelled, legible.

use super::*;

fn well_formed(bytes: &[u8]) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(std::str::from_utf8(bytes).unwrap()).expect("well-formed SVG")
}

/// The throughput chart is well-formed SVG with a bar per cell and a legend per io × log.
#[test]
fn throughput_chart() {
    let m = super::super::fixture::matrix();
    let bytes = ThroughputSvg.serialize(&m).unwrap();
    let doc = well_formed(&bytes);
    let text = texts(&bytes);
    let has = |t: &str| text.iter().any(|x| x == t);
    assert!(has("chunk 102 B") && has("chunk 10240 B"), "{text:?}");
    assert!(has("nonblocking, log stdout"), "{text:?}");
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects >= m.stream.len(), "{rects} rects");
}

/// The latency chart is well-formed SVG naming every cell.
#[test]
fn latency_chart() {
    let bytes = LatencySvg
        .serialize(&super::super::fixture::matrix())
        .unwrap();
    let text = texts(&bytes);
    let has = |t: &str| text.iter().any(|x| x == t);
    assert!(
        has("binary split") && has("binary single nodelay"),
        "{text:?}"
    );
}

/// Boxes of an SVG's elements: `(x0, y0, x1, y1)` of each filled bar, and the anchor of each
/// text that is one of `labels`.
fn bars_and_label_anchors(bytes: &[u8], labels: &[String]) -> (Vec<[f64; 4]>, Vec<(f64, f64)>) {
    let doc = well_formed(bytes);
    let num = |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
    let mut bars = Vec::new();
    let mut anchors = Vec::new();
    for n in doc.descendants() {
        if n.has_tag_name("rect") && n.attribute("fill") != Some("#FFFFFF") {
            let (x, y) = (num(&n, "x").unwrap(), num(&n, "y").unwrap());
            let (w, h) = (num(&n, "width").unwrap(), num(&n, "height").unwrap());
            // Legend swatches are 12 px wide; bars are wider.
            if w > 13.0 {
                bars.push([x, y, x + w, y + h]);
            }
        }
        if n.has_tag_name("text")
            && labels
                .iter()
                .any(|l| n.text().is_some_and(|t| t.trim() == l))
        {
            anchors.push((num(&n, "x").unwrap(), num(&n, "y").unwrap()));
        }
    }
    (bars, anchors)
}

/// Issue 15: with `--io` columns (18 series) the legend's labels sit clear of every bar.
#[test]
fn legend_clear_of_bars_with_io_columns() {
    let mut m = super::super::fixture::matrix();
    let base = m.stream.clone();
    for strategy in ["writev", "sendfile"] {
        m.stream
            .extend(base.iter().map(|r| StreamRowLike::with_io(r, strategy)));
    }
    let bytes = ThroughputSvg.serialize(&m).unwrap();
    let labels: Vec<String> = m
        .stream
        .iter()
        .map(|r| format!("{}, log {}", r.io, r.log))
        .collect();
    let (bars, anchors) = bars_and_label_anchors(&bytes, &labels);
    assert!(bars.len() >= m.stream.len(), "{} bars", bars.len());
    assert_eq!(anchors.len(), 12, "one legend entry per io x log");
    for (x, y) in anchors {
        // A label's text runs right of its anchor, about 7 px a character, 12 px high.
        for b in &bars {
            let clear = x + 150.0 < b[0] || x > b[2] || y + 12.0 < b[1] || y - 12.0 > b[3];
            assert!(clear, "legend label at ({x}, {y}) over the bar {b:?}");
        }
    }
}

struct StreamRowLike;
impl StreamRowLike {
    fn with_io(r: &super::super::StreamRow, strategy: &str) -> super::super::StreamRow {
        super::super::StreamRow {
            io: format!("{} {strategy}", r.io),
            ..r.clone()
        }
    }
}

/// The numbers printed on a chart's value axis (texts that start with a digit).
fn tick_labels(bytes: &[u8]) -> Vec<String> {
    texts(bytes)
        .into_iter()
        .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// Issue 15: the latency axis names its unit per tick (`100 ms`, not `100000.0`) and labels
/// more than one tick per decade.
#[test]
fn latency_axis_ticks_carry_units() {
    let ticks = tick_labels(
        &LatencySvg
            .serialize(&super::super::fixture::matrix())
            .unwrap(),
    );
    assert!(ticks.len() >= 8, "too few ticks: {ticks:?}");
    for t in &ticks {
        let (n, unit) = t.split_once(' ').unwrap_or((t, ""));
        assert!(
            ["µs", "ms", "s"].contains(&unit),
            "no unit in '{t}': {ticks:?}"
        );
        assert!(
            !n.contains('.') && n.len() <= 3,
            "'{t}' is not a short number: {ticks:?}"
        );
    }
    assert!(ticks.iter().any(|t| t == "100 ms"), "{ticks:?}");
    assert!(ticks.iter().any(|t| t == "100 µs"), "{ticks:?}");
}

/// Issue 15: the throughput axis labels more than its decades, without `.0`.
#[test]
fn throughput_axis_ticks() {
    let ticks = tick_labels(
        &ThroughputSvg
            .serialize(&super::super::fixture::matrix())
            .unwrap(),
    );
    assert!(ticks.len() >= 5, "too few ticks: {ticks:?}");
    assert!(ticks.iter().all(|t| !t.ends_with(".0")), "{ticks:?}");
    assert!(
        ticks.iter().any(|t| t == "1000" || t == "1 000"),
        "{ticks:?}"
    );
}

/// An empty matrix still draws (no rows is not a crash).
#[test]
fn empty_matrix_draws() {
    let m = Matrix {
        setup: Default::default(),
        stream: vec![],
        sessions: vec![],
        latency: vec![],
        clock: None,
        timeline: vec![],
    };
    well_formed(&ThroughputSvg.serialize(&m).unwrap());
    well_formed(&LatencySvg.serialize(&m).unwrap());
    well_formed(&TimelineSvg.serialize(&m).unwrap());
}

/// The timeline has a panel per log sink and chunk, and a legend entry per client io.
#[test]
fn timeline_panels_and_legend() {
    let svg = TimelineSvg
        .serialize(&super::super::fixture::matrix())
        .unwrap();
    let t = texts(&svg);
    for want in [
        "server log none, chunk 102 B",
        "server log stdout, chunk 10240 B",
        "blocking",
        "nonblocking",
        "seconds since the first byte",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
    }
}
