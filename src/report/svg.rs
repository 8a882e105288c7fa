//! The charts, as SVG: throughput per stream cell and round trip per latency cell.
//!
//! Both use a log scale: a stdout-to-terminal cell can be a hundred times slower than the rest,
//! and a Nagle stall a thousand times longer; on a linear axis they would hide everything else.
//! plotters' SVG backend writes text as SVG text, so no font files are needed.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::{Exporter, Matrix};

pub struct ThroughputSvg;
pub struct LatencySvg;

const SIZE: (u32, u32) = (1000, 560);

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}

/// Log-axis bounds with some room around `lo..hi`.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    if hi == 0.0 {
        (0.1, 10.0)
    } else {
        (lo / 2.0, hi * 2.0)
    }
}

/// One series of a [`grouped_bars`] chart: its legend and a value per group (`None`: no bar).
pub struct Series {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// A bar chart on a log axis: one group of bars per `groups` label, one bar per series in each
/// group, side by side in series order.
pub fn grouped_bars(
    caption: &str,
    y_desc: &str,
    groups: &[String],
    series: &[Series],
) -> Result<Vec<u8>> {
    let (lo, hi) = bounds(
        series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied()),
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..groups.len().max(1) as f64, (lo..hi).log_scale())
            .map_err(plot_err)?;
        let label = |x: &f64| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-9 && i < groups.len() {
                groups[i].clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(groups.len() * 2 + 1)
            .x_label_formatter(&label)
            .y_desc(y_desc)
            .draw()
            .map_err(plot_err)?;
        let width = 0.8 / series.len().max(1) as f64;
        for (si, s) in series.iter().enumerate() {
            let color = Palette99::pick(si).to_rgba();
            let bars = s.values.iter().enumerate().filter_map(|(g, v)| {
                let x0 = g as f64 + 0.1 + si as f64 * width;
                Some(Rectangle::new(
                    [(x0, lo), (x0 + width * 0.9, v.as_ref()?.max(lo))],
                    color.filled(),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(plot_err)?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg.into_bytes())
}

impl Exporter for ThroughputSvg {
    fn file_name(&self) -> &'static str {
        "throughput.svg"
    }

    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        let mut chunks: Vec<u32> = Vec::new();
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for r in &m.stream {
            if !chunks.contains(&r.chunk) {
                chunks.push(r.chunk);
            }
            if !keys.contains(&(r.io.as_str(), r.log.as_str())) {
                keys.push((&r.io, &r.log));
            }
        }
        let series: Vec<Series> = keys
            .iter()
            .map(|(io, log)| Series {
                label: format!("{io}, log {log}"),
                values: chunks
                    .iter()
                    .map(|c| {
                        m.stream
                            .iter()
                            .find(|r| r.chunk == *c && r.io == *io && r.log == *log)
                            .map(|r| r.median_mib_s)
                    })
                    .collect(),
            })
            .collect();
        let groups: Vec<String> = chunks.iter().map(|c| format!("chunk {c} B")).collect();
        grouped_bars(
            &format!(
                "Stream throughput, median MiB/s (log scale), {}",
                m.setup.network
            ),
            "MiB/s",
            &groups,
            &series,
        )
    }
}

impl Exporter for LatencySvg {
    fn file_name(&self) -> &'static str {
        "latency.svg"
    }

    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        let (lo, hi) = bounds(m.latency.iter().flat_map(|r| [r.p50_us, r.p99_us]));
        let n = m.latency.len().max(1) as f64;
        let names: Vec<String> = m
            .latency
            .iter()
            .map(|r| {
                format!(
                    "{} {}{}{}",
                    r.codec,
                    r.framing,
                    if r.nodelay { " nodelay" } else { "" },
                    if r.reconnect { " reconnect" } else { "" }
                )
            })
            .collect();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    "Clock query round trip, p50 and p99 (µs, log scale)",
                    ("sans-serif", 22),
                )
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(230)
                .build_cartesian_2d((lo..hi).log_scale(), 0f64..n)
                .map_err(plot_err)?;
            let label = |y: &f64| {
                let i = y.floor() as usize;
                if (y - y.floor() - 0.5).abs() < 1e-9 && i < names.len() {
                    names[i].clone()
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(names.len() * 2 + 1)
                .y_label_formatter(&label)
                .x_desc("round trip, µs")
                .draw()
                .map_err(plot_err)?;
            for (which, color, shade) in [("p50", BLUE, 0.9), ("p99", RED, 0.35)] {
                let bars = m.latency.iter().enumerate().map(|(i, r)| {
                    let v = if which == "p50" { r.p50_us } else { r.p99_us };
                    let (y0, y1) = if which == "p50" {
                        (i as f64 + 0.15, i as f64 + 0.55)
                    } else {
                        (i as f64 + 0.55, i as f64 + 0.85)
                    };
                    Rectangle::new([(lo, y0), (v.max(lo), y1)], color.mix(shade).filled())
                });
                chart
                    .draw_series(bars)
                    .map_err(plot_err)?
                    .label(which)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(shade).filled())
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(plot_err)?;
            root.present().map_err(plot_err)?;
        }
        Ok(svg.into_bytes())
    }
}

/// The text of an SVG's nodes, trimmed, after checking that it is well-formed XML: what the
/// chart tests look for.
#[cfg(test)]
pub fn texts(bytes: &[u8]) -> Vec<String> {
    roxmltree::Document::parse(std::str::from_utf8(bytes).expect("UTF-8 SVG"))
        .expect("well-formed SVG")
        .descendants()
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
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

    /// An empty matrix still draws (no rows is not a crash).
    #[test]
    fn empty_matrix_draws() {
        let m = Matrix {
            setup: Default::default(),
            stream: vec![],
            latency: vec![],
        };
        well_formed(&ThroughputSvg.serialize(&m).unwrap());
        well_formed(&LatencySvg.serialize(&m).unwrap());
    }
}
