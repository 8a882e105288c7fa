//! The charts: well-formed, labelled, legible.

use super::*;
use std::collections::BTreeSet;

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

/// The throughput axis is linear from 0 (a bar's length is its rate), its ticks without `.0`.
#[test]
fn throughput_axis_ticks() {
    let ticks = tick_labels(
        &ThroughputSvg
            .serialize(&super::super::fixture::matrix())
            .unwrap(),
    );
    assert!(ticks.len() >= 5, "too few ticks: {ticks:?}");
    assert!(ticks.iter().all(|t| !t.ends_with(".0")), "{ticks:?}");
    assert!(ticks.iter().any(|t| t == "0"), "from 0: {ticks:?}");
    let values: Vec<f64> = ticks.iter().filter_map(|t| t.parse().ok()).collect();
    let steps: BTreeSet<u64> = values
        .windows(2)
        .map(|w| (w[1] - w[0]) as u64)
        .filter(|d| *d > 0)
        .collect();
    assert_eq!(steps.len(), 1, "evenly spaced: {ticks:?}");
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

/// The timeline has a panel per log sink and chunk, each with a legend of its own lines.
#[test]
fn timeline_panels_and_legend() {
    let svg = TimelineSvg
        .serialize(&super::super::fixture::matrix())
        .unwrap();
    let t = texts(&svg);
    for want in [
        "server log none, chunk 102 B",
        "server log stdout, chunk 10240 B",
        "time since the first byte",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
    }
    // Each panel names its own lines: two client ios in each of the fixture's four panels.
    let boxes = extents::text_boxes(&svg);
    let count = |w: &str| boxes.iter().filter(|(x, _)| x == w).count();
    assert_eq!((count("blocking"), count("nonblocking")), (4, 4), "{t:?}");
}

/// `#RRGGBB` as plotters' SVG writes a colour.
fn hex(c: RGBAColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The fill of each legend swatch (a 12 px square) and the label beside it, in order.
fn legend_entries(bytes: &[u8]) -> Vec<(String, String)> {
    let doc = well_formed(bytes);
    let swatches: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("width") == Some("12"))
        .collect();
    let labels: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("x") == Some(&*swatch_label_x(&swatches)))
        .filter_map(|n| n.text().map(|t| t.trim().to_owned()))
        .collect();
    swatches
        .iter()
        .map(|n| n.attribute("fill").unwrap_or("").to_owned())
        .zip(labels)
        .map(|(fill, label)| (label, fill))
        .collect()
}

/// The x of the legend's labels: 18 px right of its swatches'.
fn swatch_label_x(swatches: &[roxmltree::Node]) -> String {
    let x: f64 = swatches
        .first()
        .and_then(|n| n.attribute("x")?.parse().ok())
        .unwrap_or(0.0);
    format!("{}", x + 18.0)
}

/// Each whisker's stem: a vertical line of two points in the whisker colour, as `(x, top,
/// bottom)`.
fn whisker_stems(doc: &roxmltree::Document) -> Vec<(f64, f64, f64)> {
    let point = |p: &str| -> (f64, f64) {
        let (x, y) = p.split_once(',').unwrap();
        (x.parse().unwrap(), y.parse().unwrap())
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some("#212121"))
        .filter_map(|n| {
            let pts: Vec<(f64, f64)> = n
                .attribute("points")?
                .split_whitespace()
                .map(point)
                .collect();
            match pts[..] {
                [(x0, y0), (x1, y1)] if x0 == x1 => Some((x0, y0.min(y1), y0.max(y1))),
                _ => None,
            }
        })
        .collect()
}

/// Each bar (any rect but a legend swatch) as `(left, right, fill)`.
fn bar_fills(doc: &roxmltree::Document) -> Vec<(f64, f64, String)> {
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("width") != Some("12"))
        .filter_map(|n| {
            let x: f64 = n.attribute("x")?.parse().ok()?;
            let w: f64 = n.attribute("width")?.parse().ok()?;
            Some((x, x + w, n.attribute("fill")?.to_owned()))
        })
        .collect()
}

/// Issue 35 (4): the throughput chart's bars have min-max whiskers, one per cell, spanning
/// exactly the slowest to the fastest repetition; its legend names every io and sink, in a
/// colour per sink (a shade per io) that the timeline's legend gives the same pair.
#[test]
fn throughput_whiskers_and_one_colour_per_sink() {
    let m = super::super::fixture::matrix();
    let bytes = ThroughputSvg.serialize(&m).unwrap();
    let doc = well_formed(&bytes);
    let stems = whisker_stems(&doc);
    assert_eq!(
        stems.len(),
        m.stream.len(),
        "one whisker per cell: {stems:?}"
    );
    let spread: Vec<&StreamRow> = m
        .stream
        .iter()
        .filter(|r| r.max_mib_s > r.min_mib_s * 1.05)
        .collect();
    assert!(!spread.is_empty(), "the fixture has cells with a spread");
    assert!(
        stems
            .iter()
            .filter(|(_, top, bottom)| bottom - top >= 1.0)
            .count()
            >= spread.len(),
        "whiskers of cells with a spread have a length: {stems:?}"
    );
    // Each whisker stands on a bar: its x within a bar of the cell's colour.
    let colors = Colors::of(&m);
    let bars = bar_fills(&doc);
    for (x, _, _) in &stems {
        assert!(
            bars.iter().any(|(a, b, _)| a < x && x < b),
            "a whisker at {x} on no bar"
        );
    }

    let legend = legend_entries(&bytes);
    let timeline = String::from_utf8(TimelineSvg.serialize(&m).unwrap()).unwrap();
    for r in &m.stream {
        let label = format!("{}, log {}", r.io, r.log);
        let fill = hex(colors.get(&r.io, &r.log));
        assert!(
            legend.contains(&(label.clone(), fill.clone())),
            "{label} {fill}: {legend:?}"
        );
        assert!(
            bars.iter().any(|(_, _, f)| *f == fill),
            "no bar of {label} in {fill}"
        );
    }
    // The timeline draws each io and sink in the same colour as the bars.
    for t in &m.timeline {
        let fill = hex(colors.get(&t.io, &t.log));
        assert!(
            timeline.contains(&fill),
            "{} {}: no line in {fill}",
            t.io,
            t.log
        );
    }
    // A hue per sink: the sinks' colours differ for one io, and one sink's shades differ by io.
    let sinks: BTreeSet<String> = ["none", "file", "stdout"]
        .map(|l| hex(colors.get("blocking", l)))
        .into();
    assert_eq!(sinks.len(), 3);
    assert_ne!(
        hex(colors.get("blocking", "none")),
        hex(colors.get("nonblocking", "none"))
    );
}

/// Issue 35 (4): the panels of one chunk size share their scales: the time axis runs to the
/// longest transfer of any sink, the rate axis a quarter above the 95th percentile of every
/// sink's samples (a lone burst is drawn at the top, not the scale).
#[test]
fn timeline_panels_of_a_chunk_share_a_scale() {
    let mut m = super::super::fixture::matrix();
    let line = |log: &str, chunk: u32, end: f64, rate: f64| super::super::Timeline {
        log: log.into(),
        chunk,
        io: "blocking".into(),
        points: vec![(0.0, end / 2.0, rate), (end / 2.0, end, rate / 2.0)],
    };
    m.timeline = vec![
        line("none", 102, 0.4, 100.0),
        line("stdout", 102, 2.4, 15.0),
        line("none", 10240, 0.02, 2000.0),
        line("stdout", 10240, 0.04, 900.0),
    ];
    let s = scales(&m);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!((s[0].chunk, s[0].seconds), (102, 2.4));
    assert!((s[0].mib_s - 125.0).abs() < 1e-9, "{s:?}");
    assert_eq!((s[1].chunk, s[1].seconds), (10240, 0.04));
    assert!((s[1].mib_s - 2500.0).abs() < 1e-9, "{s:?}");
    // Drawn: the stdout panel of 10240 B (900 MiB/s at most) has the none panel's 2000 tick,
    // as often as both have the 1000 one.
    let t = texts(&TimelineSvg.serialize(&m).unwrap());
    let count = |tick: &str| t.iter().filter(|x| *x == tick).count();
    assert!(count("2000") > 0 && count("2000") == count("1000"), "{t:?}");
    // One burst among many steady samples does not set the scale.
    let mut burst = line("none", 1024, 1.0, 100.0);
    burst.points = (0..40)
        .map(|i| (f64::from(i) * 0.025, f64::from(i + 1) * 0.025, 100.0))
        .collect();
    burst.points[7].2 = 5000.0;
    m.timeline = vec![burst];
    assert!(
        (scales(&m)[0].mib_s - 125.0).abs() < 1e-9,
        "{:?}",
        scales(&m)
    );
}

/// A sample past the axes (a hostile runs.jsonl: times and rates of 1.8e19, or below zero) is
/// drawn at the axis' edge: plotters maps a point to a pixel in an `i32`, and one far past the
/// axis overflowed it (a panic in a debug build; proptest found it with every number u64::MAX).
#[test]
fn timeline_samples_past_the_axes_are_drawn_at_the_edge() {
    let mut m = super::super::fixture::matrix();
    let huge = u64::MAX as f64;
    m.timeline = vec![super::super::Timeline {
        log: "none".into(),
        chunk: 1024,
        io: "blocking".into(),
        points: vec![(0.0, 1.0, 10.0), (huge, huge, huge), (-huge, -1.0, -huge)],
    }];
    let bytes = TimelineSvg.serialize(&m).unwrap();
    well_formed(&bytes);
}

/// No two texts of any chart overlap (their boxes estimated from the SVG's attributes): the
/// throughput, latency and timeline charts of the fixture, and the compare chart of two runs
/// with many cells, each label readable whole.
#[test]
fn no_chart_has_overlapping_labels() {
    let m = super::super::fixture::matrix();
    let charts = [
        ("throughput", ThroughputSvg.serialize(&m).unwrap()),
        ("latency", LatencySvg.serialize(&m).unwrap()),
        ("timeline", TimelineSvg.serialize(&m).unwrap()),
        (
            "compare",
            crate::compare::chart(&crate::compare::fixture(34), "old", "new").unwrap(),
        ),
    ];
    for (name, svg) in charts {
        let clash = extents::overlapping(&svg);
        assert!(
            clash.is_empty(),
            "{name}: {} overlaps, first {:?}",
            clash.len(),
            clash.first()
        );
    }
}

/// The estimate itself: two labels on one spot overlap, apart they do not, a rotated one turns.
#[test]
fn text_boxes_follow_anchor_and_rotation() {
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg">
<text x="100" y="50" font-size="10" text-anchor="middle">abcdefghij</text>
<text x="100" y="52" font-size="10" text-anchor="start">klm</text>
<text x="300" y="50" font-size="10" text-anchor="end">far</text>
<text x="14" y="271" font-size="10" dy="0.76em" text-anchor="middle" transform="rotate(270, 14, 271)">MiB/s</text>
</svg>"#;
    let boxes = extents::text_boxes(svg);
    assert_eq!(boxes.len(), 4);
    let [x0, _, x1, _] = boxes[0].1;
    assert!(
        (x0 - 72.5).abs() < 0.01 && (x1 - 127.5).abs() < 0.01,
        "{boxes:?}"
    );
    let [x0, y0, x1, y1] = boxes[3].1;
    assert!(y1 - y0 > x1 - x0, "turned upright: {boxes:?}");
    assert_eq!(
        extents::overlapping(svg),
        vec![("abcdefghij".to_owned(), "klm".to_owned())]
    );
}

/// Writes the charts of the fixture to `TSPERF_CHARTS_DIR` for a person to look at (nothing
/// without it).
#[test]
fn charts_for_a_look() {
    let Some(dir) = std::env::var_os("TSPERF_CHARTS_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let m = super::super::fixture::matrix();
    std::fs::write(
        dir.join("throughput.svg"),
        ThroughputSvg.serialize(&m).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("timeline.svg"), TimelineSvg.serialize(&m).unwrap()).unwrap();
    let c = crate::compare::fixture(34);
    std::fs::write(
        dir.join("compare.svg"),
        crate::compare::chart(&c, "old", "new").unwrap(),
    )
    .unwrap();
}
