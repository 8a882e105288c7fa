//! The charts, as SVG: throughput per stream cell and round trip per latency cell.
//!
//! Throughput is drawn on a linear axis from 0, so a bar's length is its rate (the stdout cells
//! short beside the rest: that is their cost). Latency uses a log scale: a Nagle stall is a
//! thousand times an answer, and on a linear axis it would hide everything else.
//! plotters' SVG backend writes text as SVG text, so no font files are needed.

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Exporter, Matrix, StreamRow};

/// The stream cells' rates as bars: `throughput.svg`.
pub struct ThroughputSvg;
/// The latency cells' round trips as bars: `latency.svg`.
pub struct LatencySvg;
/// `timeline.svg`: throughput over time, one panel per log sink.
pub struct TimelineSvg;

const SIZE: (u32, u32) = (1000, 560);

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}

/// The most decades a log axis spans: a value further below the highest is drawn at the
/// axis's foot (its bar as short as the axis allows), so a results file holding 5e-324 beside
/// 1.7e308 gets a chart, not an axis of 600 decades (issue 51).
const MOST_DECADES: f64 = 12.0;

/// Log-axis bounds with some room around the values' (the positive, finite ones) `lo..hi`, at
/// most [`MOST_DECADES`] apart.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    if hi == 0.0 {
        return (0.1, 10.0);
    }
    // Never 0 at the foot (the log of a subnormal halved), never infinite at the top.
    let hi = (hi * 2.0).clamp(1e-290, f64::MAX);
    let lo = (lo / 2.0).max(hi / 10f64.powf(MOST_DECADES));
    (lo, hi)
}

/// Tick values for a log axis over `lo..hi`: 1, 2 and 5 in every decade, or the decades alone
/// when that would be more than 24 ticks.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi.is_finite() && lo < hi) {
        return Vec::new();
    }
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let steps: &[f64] = if (last - first) * 3 > 24 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    (first..=last)
        .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|v| *v >= lo && *v <= hi)
        .collect()
}

/// A tick value as the axis prints it: `5`, `200`, `0.5`, never `200.0`.
fn plain(v: f64) -> String {
    // Ticks are 1, 2 or 5 times a power of ten; round off the float noise of powi.
    let r = format!("{v:.6}");
    r.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A microsecond tick in the unit that keeps it short: `200 µs`, `5 ms`, `1 s`.
fn micros(v: f64) -> String {
    if v >= 1e6 {
        format!("{} s", plain(v / 1e6))
    } else if v >= 1e3 {
        format!("{} ms", plain(v / 1e3))
    } else {
        format!("{} µs", plain(v))
    }
}

/// The legend drawn beside the plot (never over it): a swatch and a label per series.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, RGBAColor)],
) -> Result<()> {
    let font =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, color)) in entries.iter().enumerate() {
        let y = 60 + 22 * i as i32;
        area.draw(&Rectangle::new([(8, y - 5), (20, y + 5)], color.filled()))
            .map_err(plot_err)?;
        area.draw(&Text::new(label.clone(), (26, y), font.clone()))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Width of the legend column for these labels (about 7 px a character at 13 px).
fn legend_width(labels: impl Iterator<Item = usize>) -> u32 {
    36 + 7 * labels.max().unwrap_or(0) as u32
}

/// One series of a [`grouped_bars`] chart: its legend and a value per group (`None`: no bar).
pub struct Series {
    /// The legend's name for it.
    pub label: String,
    /// One value per group.
    pub values: Vec<Option<f64>>,
    /// Per group, the lowest and highest value measured, drawn as a whisker over the bar
    /// (empty: no whiskers).
    pub spread: Vec<Option<(f64, f64)>>,
    /// Its colour (`None`: the next of a stock palette).
    pub color: Option<RGBAColor>,
}

impl Series {
    /// A series of `values` in the palette's next colour, without whiskers.
    pub fn new(label: impl Into<String>, values: Vec<Option<f64>>) -> Series {
        Series {
            label: label.into(),
            values,
            spread: Vec::new(),
            color: None,
        }
    }
}

/// The colours of a matrix's charts: a hue per server log sink (none green, file blue, stdout
/// red-orange: the slow one stands out) and a shade of it per client io, the same in every
/// chart, so a sink's cost reads without the legend.
pub struct Colors {
    /// The client ios, in the order they get their shades.
    ios: Vec<String>,
}

impl Colors {
    /// The colours for `m`: its client ios in the order the stream table, then the timeline,
    /// first names them.
    pub fn of(m: &Matrix) -> Colors {
        let mut ios: Vec<String> = Vec::new();
        for io in m
            .stream
            .iter()
            .map(|r| &r.io)
            .chain(m.timeline.iter().map(|t| &t.io))
        {
            if !ios.contains(io) {
                ios.push(io.clone());
            }
        }
        Colors { ios }
    }

    /// The colour of client `io` with server log `log`: the sink's hue, in the io's shade (the
    /// first io as is, the next lighter, then darker, ...).
    pub fn get(&self, io: &str, log: &str) -> RGBAColor {
        let (r, g, b) = match log {
            "none" => (0x2e, 0x7d, 0x32),
            "file" => (0x15, 0x65, 0xc0),
            "stdout" => (0xd8, 0x43, 0x15),
            _ => (0x61, 0x61, 0x61),
        };
        // Toward white (positive) or black (negative) by this fraction, io by io.
        const SHADES: [f64; 6] = [0.0, 0.5, -0.4, 0.75, -0.65, 0.25];
        let rank = self.ios.iter().position(|x| x == io).unwrap_or(0);
        let t = SHADES[rank % SHADES.len()];
        let mix = |c: u8| {
            let c = f64::from(c);
            (if t >= 0.0 {
                c + (255.0 - c) * t
            } else {
                c * (1.0 + t)
            })
            .round() as u8
        };
        RGBColor(mix(r), mix(g), mix(b)).to_rgba()
    }
}

/// The whiskers' colour: near black, over any bar.
const WHISKER: RGBColor = RGBColor(0x21, 0x21, 0x21);

/// A value axis: logarithmic (a value a hundred times the others' beside them), or linear
/// from 0 (a bar's length proportional to its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Log scale, ticks 1, 2, 5 a decade.
    Log,
    /// From 0, bars proportional.
    Linear,
}

/// A bar chart: one group of bars per `groups` label, one bar per series in each group, side
/// by side in series order, on `axis`; the legend in a column on the right.
pub fn grouped_bars(
    caption: &str,
    y_desc: &str,
    groups: &[String],
    series: &[Series],
    axis: Axis,
) -> Result<Vec<u8>> {
    let values = || {
        series.iter().flat_map(|s| {
            let spread = s.spread.iter().flatten().flat_map(|&(a, b)| [a, b]);
            s.values.iter().flatten().copied().chain(spread)
        })
    };
    let side = legend_width(series.iter().map(|s| s.label.chars().count()));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0 + side, SIZE.1)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, key) = root.split_horizontally(SIZE.0);
        let mut builder = ChartBuilder::on(&plot);
        builder
            .caption(caption, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70);
        let x = 0f64..groups.len().max(1) as f64;
        let entries = match axis {
            Axis::Log => {
                let (lo, hi) = bounds(values());
                let y = (lo..hi).log_scale().with_key_points(log_ticks(lo, hi));
                let mut chart = builder.build_cartesian_2d(x, y).map_err(plot_err)?;
                draw_groups(&mut chart, groups, series, y_desc, lo)?
            }
            Axis::Linear => {
                let hi = values().filter(|v| v.is_finite()).fold(0f64, f64::max);
                let hi = if hi > 0.0 {
                    (hi * 1.1).min(f64::MAX / 2.0)
                } else {
                    1.0
                };
                let mut chart = builder.build_cartesian_2d(x, 0f64..hi).map_err(plot_err)?;
                draw_groups(&mut chart, groups, series, y_desc, 0.0)?
            }
        };
        legend(&key, &entries)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg.into_bytes())
}

/// The mesh, the bars and the whiskers of a [`grouped_bars`] chart whose value axis starts at
/// `foot`; the legend's entries.
fn draw_groups<DB: DrawingBackend, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    groups: &[String],
    series: &[Series],
    y_desc: &str,
    foot: f64,
) -> Result<Vec<(String, RGBAColor)>>
where
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
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
        .y_label_formatter(&|v| plain(*v))
        .y_desc(y_desc)
        .draw()
        .map_err(plot_err)?;
    let width = 0.8 / series.len().max(1) as f64;
    let mut entries = Vec::new();
    for (si, s) in series.iter().enumerate() {
        let color = s.color.unwrap_or_else(|| Palette99::pick(si).to_rgba());
        let x0 = |g: usize| g as f64 + 0.1 + si as f64 * width;
        let bars = s.values.iter().enumerate().filter_map(|(g, v)| {
            Some(Rectangle::new(
                [(x0(g), foot), (x0(g) + width * 0.9, v.as_ref()?.max(foot))],
                color.filled(),
            ))
        });
        chart.draw_series(bars).map_err(plot_err)?;
        // A whisker from the lowest to the highest value, capped at both ends.
        let whiskers = s.spread.iter().enumerate().flat_map(|(g, w)| {
            let (mid, cap) = (x0(g) + width * 0.45, width * 0.2);
            w.iter().flat_map(move |&(a, b)| {
                let (a, b) = (a.max(foot), b.max(foot));
                [
                    vec![(mid, a), (mid, b)],
                    vec![(mid - cap, a), (mid + cap, a)],
                    vec![(mid - cap, b), (mid + cap, b)],
                ]
            })
        });
        chart
            .draw_series(whiskers.map(|p| PathElement::new(p, WHISKER.stroke_width(2))))
            .map_err(plot_err)?;
        entries.push((s.label.clone(), color));
    }
    Ok(entries)
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
        let colors = Colors::of(m);
        let series: Vec<Series> = keys
            .iter()
            .map(|&(io, log)| {
                let rows: Vec<Option<&StreamRow>> = chunks
                    .iter()
                    .map(|c| {
                        m.stream
                            .iter()
                            .find(|r| r.chunk == *c && r.io == io && r.log == log)
                    })
                    .collect();
                Series {
                    label: format!("{io}, log {log}"),
                    values: rows.iter().map(|r| r.map(|r| r.median_mib_s)).collect(),
                    spread: rows
                        .iter()
                        .map(|r| r.map(|r| (r.min_mib_s, r.max_mib_s)))
                        .collect(),
                    color: Some(colors.get(io, log)),
                }
            })
            .collect();
        let groups: Vec<String> = chunks.iter().map(|c| format!("chunk {c} B")).collect();
        grouped_bars(
            &format!(
                "Stream throughput, median MiB/s, whiskers slowest to fastest repetition, {}",
                m.setup.network
            ),
            "MiB/s",
            &groups,
            &series,
            Axis::Linear,
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
                    "{} {}{}{}{}",
                    r.codec,
                    r.framing,
                    if r.nodelay { " nodelay" } else { "" },
                    if r.reconnect { " reconnect" } else { "" },
                    r.under_load
                        .as_ref()
                        .map_or(String::new(), |l| format!(" under load (log {l})"))
                )
            })
            .collect();
        let side = legend_width([3].into_iter());
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (SIZE.0 + side, SIZE.1)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let (plot, key) = root.split_horizontally(SIZE.0);
            let mut chart = ChartBuilder::on(&plot)
                .caption(
                    "Clock query round trip, p50 and p99 (log scale)",
                    ("sans-serif", 22),
                )
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(230)
                .build_cartesian_2d(
                    (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
                    0f64..n,
                )
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
                .x_label_formatter(&|v| micros(*v))
                .x_desc("round trip")
                .draw()
                .map_err(plot_err)?;
            let mut entries = Vec::new();
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
                chart.draw_series(bars).map_err(plot_err)?;
                entries.push((which.to_owned(), color.mix(shade)));
            }
            legend(&key, &entries)?;
            root.present().map_err(plot_err)?;
        }
        Ok(svg.into_bytes())
    }
}

/// The text of an SVG's nodes, trimmed, after checking that it is well-formed XML: what the
/// chart tests look for.
#[cfg(any(test, feature = "testing"))]
pub fn texts(bytes: &[u8]) -> Vec<String> {
    roxmltree::Document::parse(std::str::from_utf8(bytes).expect("UTF-8 SVG"))
        .expect("well-formed SVG")
        .descendants()
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .collect()
}

pub mod compare;
#[cfg(any(test, feature = "testing"))]
pub mod extents;
mod timeline;
pub use timeline::{Scale, scales};

#[cfg(test)]
mod tests;
