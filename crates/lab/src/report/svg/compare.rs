//! `compare.svg`: two grid runs cell by cell, a row a cell with its whole label, each ratio
//! turned so that right of 1 is better (a stream's rate new over old, a round trip old over
//! new), green where the new run is better and red where worse, faded where the difference is
//! within the runs' own noise.

use anyhow::Result;
use plotters::prelude::*;

use super::{legend, legend_width, log_ticks, plain, plot_err};
use crate::compare::Comparison;

/// How many times better the new run is in a row: above 1 better, below worse.
fn better_by(r: &crate::compare::Row) -> f64 {
    match r.unit {
        "MiB/s" => r.ratio,
        _ => 1.0 / r.ratio,
    }
}

/// A row of the chart: the cell's label, how many times better, beyond the noise.
type Bar = (String, f64, bool);

/// The rows that have a ratio, as bars.
fn bars(c: &Comparison) -> Vec<Bar> {
    c.rows
        .iter()
        .filter(|r| r.ratio.is_finite() && r.ratio > 0.0)
        .map(|r| {
            let what = if r.unit == "MiB/s" { "rate" } else { "p50" };
            (format!("{} ({what})", r.cell), better_by(r), r.differs())
        })
        .collect()
}

/// The chart of `c`: horizontal bars from 1 on a log axis of times better.
pub fn chart(c: &Comparison, old: &str, new: &str) -> Result<Vec<u8>> {
    let rows = bars(c);
    let far = rows
        .iter()
        .map(|r| r.1.max(1.0 / r.1))
        .fold(2.0f64, f64::max)
        .min(1e6)
        * 1.25;
    let (lo, hi) = (1.0 / far, far);
    let label_px =
        24 + (6.0 * rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(8) as f64) as u32;
    let entries = [
        ("better, beyond noise", GREEN_DARK.to_rgba()),
        ("better, within noise", GREEN_DARK.mix(0.35)),
        ("worse, beyond noise", RED_DARK.to_rgba()),
        ("worse, within noise", RED_DARK.mix(0.35)),
    ]
    .map(|(l, c)| (l.to_owned(), c));
    let side = legend_width(entries.iter().map(|e| e.0.chars().count()));
    let plot_w = label_px + 640;
    let height = 110 + 24 * rows.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (plot_w + side, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, key) = root.split_horizontally(plot_w);
        let n = rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("{new} against {old}, cell by cell"),
                ("sans-serif", 20),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(label_px)
            .build_cartesian_2d(
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
                0f64..n,
            )
            .map_err(plot_err)?;
        draw_rows(&mut chart, &rows, (lo, hi))?;
        legend(&key, &entries)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg.into_bytes())
}

/// The mesh (a row's label at its middle), the bars from 1, and the line at 1.
fn draw_rows<DB: DrawingBackend, X>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    rows: &[Bar],
    (lo, hi): (f64, f64),
) -> Result<()>
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let n = rows.len().max(1) as f64;
    {
        let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let label = |y: &f64| {
            let i = y.floor() as usize;
            match (y - y.floor() - 0.5).abs() < 1e-9 && i < names.len() {
                true => names[names.len() - 1 - i].to_owned(),
                false => String::new(),
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len() * 2 + 1)
            .y_label_formatter(&label)
            .x_label_formatter(&|v| format!("{}×", plain(*v)))
            .x_desc("times better (right of 1: the new run is better; a round trip's ratio turned)")
            .draw()
            .map_err(plot_err)?;
        let bars = rows.iter().enumerate().map(|(i, (_, v, differs))| {
            let y = (rows.len() - 1 - i) as f64;
            let hue = if *v >= 1.0 { GREEN_DARK } else { RED_DARK };
            let color = if *differs {
                hue.to_rgba()
            } else {
                hue.mix(0.35)
            };
            Rectangle::new(
                [(1.0, y + 0.15), (v.clamp(lo, hi), y + 0.85)],
                color.filled(),
            )
        });
        chart.draw_series(bars).map_err(plot_err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(1.0, 0.0), (1.0, n)],
                BLACK.stroke_width(1),
            )))
            .map_err(plot_err)?;
    }
    Ok(())
}

const GREEN_DARK: RGBColor = RGBColor(0x2e, 0x7d, 0x32);
const RED_DARK: RGBColor = RGBColor(0xc6, 0x28, 0x28);
