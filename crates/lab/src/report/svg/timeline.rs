//! `timeline.svg`: throughput in time, a panel per log sink and chunk.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::PaletteColor;

use super::{SIZE, TimelineSvg, legend, legend_width, plot_err};
use crate::report::{Exporter, Matrix};

impl Exporter for TimelineSvg {
    fn file_name(&self) -> &'static str {
        "timeline.svg"
    }

    /// A panel per log sink (rows) and chunk (columns), a line per client io: MiB/s in each
    /// interval, drawn as steps, on a linear axis from 0 so a stall shows as a drop to the
    /// floor. Each panel has its own scales (a logged transfer can take a hundred times longer).
    fn serialize(&self, m: &Matrix) -> Result<Vec<u8>> {
        let mut logs: Vec<&str> = Vec::new();
        let mut chunks: Vec<u32> = Vec::new();
        let mut ios: Vec<&str> = Vec::new();
        for t in &m.timeline {
            if !logs.contains(&t.log.as_str()) {
                logs.push(&t.log);
            }
            if !chunks.contains(&t.chunk) {
                chunks.push(t.chunk);
            }
            if !ios.contains(&t.io.as_str()) {
                ios.push(&t.io);
            }
        }
        chunks.sort_unstable();
        let side = legend_width(ios.iter().map(|k| k.chars().count()));
        let panel_h = 260u32;
        let height = 40 + panel_h * logs.len().max(1) as u32;
        let color = |io: &str| Palette99::pick(ios.iter().position(|x| *x == io).unwrap_or(0));
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (SIZE.0 + side, height)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let (title, body) = root.split_vertically(40);
            title
                .draw(&Text::new(
                    format!(
                        "Throughput over time (acknowledged MiB/s per interval), {}",
                        m.setup.network
                    ),
                    (14, 24),
                    ("sans-serif", 20).into_font(),
                ))
                .map_err(plot_err)?;
            let (plots, key) = body.split_horizontally(SIZE.0);
            let panels = plots.split_evenly((logs.len().max(1), chunks.len().max(1)));
            for (i, panel) in panels.iter().enumerate() {
                let (Some(log), Some(chunk)) = (
                    logs.get(i / chunks.len().max(1)),
                    chunks.get(i % chunks.len().max(1)),
                ) else {
                    continue;
                };
                draw_panel(panel, m, log, *chunk, &color)?;
            }
            let entries: Vec<(String, RGBAColor)> = ios
                .iter()
                .map(|io| (io.to_string(), color(io).to_rgba()))
                .collect();
            legend(&key, &entries)?;
            root.present().map_err(plot_err)?;
        }
        Ok(svg.into_bytes())
    }
}

/// One panel: the transfers of sink `log` and `chunk`, a step line per client io.
fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    m: &Matrix,
    log: &str,
    chunk: u32,
    color: &dyn Fn(&str) -> PaletteColor<Palette99>,
) -> Result<()> {
    let lines: Vec<&crate::report::Timeline> = m
        .timeline
        .iter()
        .filter(|t| t.log == log && t.chunk == chunk)
        .collect();
    let x_hi = lines
        .iter()
        .filter_map(|t| t.points.last().map(|p| p.1))
        .fold(0f64, f64::max)
        .max(1e-3);
    let y_hi = lines
        .iter()
        .flat_map(|t| t.points.iter().map(|p| p.2))
        .fold(0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let mut chart = ChartBuilder::on(panel)
        .caption(
            format!("server log {log}, chunk {chunk} B"),
            ("sans-serif", 15),
        )
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_hi, 0f64..y_hi)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(5)
        .x_desc("seconds since the first byte")
        .y_desc("MiB/s")
        .draw()
        .map_err(plot_err)?;
    for t in lines {
        let steps = t
            .points
            .iter()
            .flat_map(|&(a, b, v)| [(a, v), (b, v)])
            .collect::<Vec<_>>();
        chart
            .draw_series(LineSeries::new(steps, color(&t.io).stroke_width(2)))
            .map_err(plot_err)?;
    }
    Ok(())
}
