//! Where an SVG's texts fall, from their attributes alone (no font files): each text's box,
//! estimated from its position, anchor, baseline shift, font size and rotation, so a test can
//! say no two labels of a chart overlap.

/// A text of a chart and the box it is drawn in: `[x0, y0, x1, y1]`.
pub type TextBox = (String, [f64; 4]);

/// The box of every non-empty text in `svg`. The width is 0.55 em a character (a sans-serif
/// font's average), the height 0.95 em from ascent to descent.
pub fn text_boxes(svg: &[u8]) -> Vec<TextBox> {
    let text = std::str::from_utf8(svg).expect("UTF-8 SVG");
    let doc = roxmltree::Document::parse(text).expect("well-formed SVG");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| {
            let words = n.text()?.trim();
            if words.is_empty() {
                return None;
            }
            let num = |a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
            let (x, y, size) = (num("x")?, num("y")?, num("font-size").unwrap_or(12.0));
            let width = 0.55 * size * words.chars().count() as f64;
            let x0 = match n.attribute("text-anchor") {
                Some("middle") => x - width / 2.0,
                Some("end") => x - width,
                _ => x,
            };
            // The baseline: `dy` moves it down from y (0.76em: the text hangs below y; 0.5ex:
            // it is centred on y); without one, y is the baseline.
            let baseline = match n.attribute("dy") {
                Some(d) if d.ends_with("em") => y + em(d, "em") * size,
                Some(d) if d.ends_with("ex") => y + em(d, "ex") * size * 0.5,
                _ => y,
            };
            let b = [
                x0,
                baseline - 0.75 * size,
                x0 + width,
                baseline + 0.2 * size,
            ];
            Some((words.to_owned(), rotated(b, n.attribute("transform"))))
        })
        .collect()
}

fn em(d: &str, unit: &str) -> f64 {
    d.trim_end_matches(unit).parse().unwrap_or(0.0)
}

/// `b` turned by a `rotate(A, CX, CY)` transform (a right angle's multiple), as its bounding
/// box.
fn rotated(b: [f64; 4], transform: Option<&str>) -> [f64; 4] {
    let Some(args) = transform.and_then(|t| t.strip_prefix("rotate(")?.strip_suffix(')')) else {
        return b;
    };
    let v: Vec<f64> = args
        .split([',', ' '])
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let [a, cx, cy] = v[..] else { return b };
    let (s, c) = a.to_radians().sin_cos();
    let turn = |x: f64, y: f64| {
        (
            cx + (x - cx) * c - (y - cy) * s,
            cy + (x - cx) * s + (y - cy) * c,
        )
    };
    let corners = [
        turn(b[0], b[1]),
        turn(b[2], b[1]),
        turn(b[0], b[3]),
        turn(b[2], b[3]),
    ];
    let xs = corners.map(|p| p.0);
    let ys = corners.map(|p| p.1);
    let min = |v: [f64; 4]| v.into_iter().fold(f64::INFINITY, f64::min);
    let max = |v: [f64; 4]| v.into_iter().fold(f64::NEG_INFINITY, f64::max);
    [min(xs), min(ys), max(xs), max(ys)]
}

/// Every pair of texts in `svg` whose boxes overlap by more than a pixel each way.
pub fn overlapping(svg: &[u8]) -> Vec<(String, String)> {
    let boxes = text_boxes(svg);
    let mut out = Vec::new();
    for (i, (a, p)) in boxes.iter().enumerate() {
        for (b, q) in &boxes[i + 1..] {
            let dx = p[2].min(q[2]) - p[0].max(q[0]);
            let dy = p[3].min(q[3]) - p[1].max(q[1]);
            if dx > 1.0 && dy > 1.0 {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}
