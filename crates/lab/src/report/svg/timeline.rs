//! `timeline.svg`: throughput in time, a panel per log sink and chunk, one scale per chunk.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Colors, SIZE, TimelineSvg, plain, plot_err};
use crate::report::{Exporter, Matrix};

impl Exporter for TimelineSvg {
    fn file_name(&self) -> &'static str {
        "timeline.svg"
    }

    /// A panel per log sink (rows) and chunk (columns), a line per client io in the sink's
    /// colour and the io's shade ([`Colors`]): MiB/s in each interval, drawn as steps, on a
    /// linear axis from 0 so a stall shows as a drop to the floor. The panels of one chunk
    /// share their scales ([`scales`]), so a slow sink's line sits as low, and runs as long,
    /// as it is against the others.
    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        let mut logs: Vec<&str> = Vec::new();
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for t in &m.timeline {
            if !logs.contains(&t.log.as_str()) {
                logs.push(&t.log);
            }
            if !keys.contains(&(t.io.as_str(), t.log.as_str())) {
                keys.push((&t.io, &t.log));
            }
        }
        let scales = scales(m);
        let colors = Colors::of(m);
        let side = 160;
        let panel_h = 260u32;
        let height = 40 + panel_h * logs.len().max(1) as u32;
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (SIZE.0 + side, height)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let (title, body) = root.split_vertically(40);
            title
                .draw(&Text::new(
                    format!(
                        "Throughput over time (acknowledged MiB/s per interval), {}; one scale \
                         per chunk size; ▲ a sample above the axis",
                        m.setup.network
                    ),
                    (14, 24),
                    ("sans-serif", 20).into_font(),
                ))
                .map_err(plot_err)?;
            let cols = scales.len().max(1);
            let panels = body.split_evenly((logs.len().max(1), cols));
            for (i, panel) in panels.iter().enumerate() {
                let (Some(log), Some(scale)) = (logs.get(i / cols), scales.get(i % cols)) else {
                    continue;
                };
                draw_panel(panel, m, log, scale, &colors)?;
            }
            root.present().map_err(plot_err)?;
        }
        Ok(svg.into_bytes())
    }
}

/// The scale of one chunk size's panels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// The chunk size.
    pub chunk: u32,
    /// The time axis' end: the longest sampled transfer of the chunk, any sink, seconds.
    pub seconds: f64,
    /// The rate axis' end, MiB/s: a quarter above the 95th percentile of the chunk's samples,
    /// any sink, so that a lone burst (a millisecond in which a backlog of ACKs came in) does
    /// not flatten every line; a sample above it is drawn at the top.
    pub mib_s: f64,
}

/// The farthest a timeline's axis reaches, seconds or MiB/s: past any transfer, and short
/// enough that plotters can place its ticks (issue 51).
const AXIS_MOST: f64 = 1e12;

/// One [`Scale`] per chunk size of the timeline, smallest first: every sink's panel of a chunk
/// is drawn on it.
pub fn scales(m: &Matrix) -> Vec<Scale> {
    let mut chunks: Vec<u32> = m.timeline.iter().map(|t| t.chunk).collect();
    chunks.sort_unstable();
    chunks.dedup();
    chunks
        .into_iter()
        .map(|chunk| {
            let lines = m.timeline.iter().filter(|t| t.chunk == chunk);
            let seconds = lines
                .clone()
                .filter_map(|t| t.points.last().map(|p| p.1))
                .fold(0f64, f64::max)
                .clamp(1e-3, AXIS_MOST);
            let mut rates: Vec<f64> = lines.flat_map(|t| t.points.iter().map(|p| p.2)).collect();
            rates.sort_by(f64::total_cmp);
            let p95 = rates
                .get((rates.len() * 95).div_ceil(100).saturating_sub(1))
                .copied()
                .unwrap_or(0.0);
            let mib_s = (p95.max(1e-3) * 1.25).min(AXIS_MOST);
            Scale {
                chunk,
                seconds,
                mib_s,
            }
        })
        .collect()
}

/// One panel: the transfers of sink `log` and the scale's chunk, a step line per client io.
fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    m: &Matrix,
    log: &str,
    scale: &Scale,
    colors: &Colors,
) -> Result<()> {
    let mut chart = ChartBuilder::on(panel)
        .caption(
            format!("server log {log}, chunk {} B", scale.chunk),
            ("sans-serif", 15),
        )
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..scale.seconds, 0f64..scale.mib_s)
        .map_err(plot_err)?;
    // Milliseconds for a panel under two seconds long: `5 ms`, not `0.005`.
    let ms = scale.seconds < 2.0;
    let time = |v: &f64| match ms {
        true => format!("{} ms", plain((v * 1e4).round() / 10.0)),
        false => format!("{} s", plain(*v)),
    };
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(5)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_label_formatter(&time)
        .x_desc("time since the first byte")
        .y_desc("MiB/s")
        .draw()
        .map_err(plot_err)?;
    for t in m
        .timeline
        .iter()
        .filter(|t| t.log == log && t.chunk == scale.chunk)
    {
        // A sample past the axes is drawn at their edge: plotters maps a point to an `i32`
        // pixel, and one far past the axis overflows it.
        let at = |s: f64| s.clamp(0.0, scale.seconds);
        let rate = |v: f64| v.clamp(0.0, scale.mib_s);
        let steps = t
            .points
            .iter()
            .flat_map(|&(a, b, v)| [(at(a), rate(v)), (at(b), rate(v))])
            .collect::<Vec<_>>();
        let color = colors.get(&t.io, log);
        chart
            .draw_series(LineSeries::new(steps, color.stroke_width(2)))
            .map_err(plot_err)?
            .label(t.io.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(3))
            });
        // A sample above the axis, at the axis's top: a triangle over its interval.
        let above = t
            .points
            .iter()
            .filter(|p| p.2 > scale.mib_s)
            .map(|&(a, b, _)| {
                TriangleMarker::new((at((a + b) / 2.0), scale.mib_s), 5, color.filled())
            });
        chart.draw_series(above).map_err(plot_err)?;
    }
    // The panel's own legend: the lines it draws, named by client io (the caption names the
    // sink).
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}
