//! Charts drawn with plotters as SVG text: a roofline (each kernel a point at its
//! arithmetic intensity and FLOP/s under the device's memory and compute roofs,
//! coloured by kind) and the e-graph's growth per saturation iteration.
//!
//! The inputs are plain data so that the compile report (the cost model's predictions)
//! and `bench --profile` (measurements) draw the same picture. The output is a function
//! of the input alone, byte for byte, because the artifact that holds it is hashed.
//! Log axes cannot show 0, NaN or infinity: such points are drawn hollow at the axis
//! edge and counted under the chart, never dropped.

use plotters::chart::ChartContext;
use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::types::RangedCoordf64;
use plotters::element::{Circle, EmptyElement, PathElement, Rectangle, Text};
use plotters::prelude::{
    ChartBuilder, Color, IntoDrawingArea, IntoFont, LineSeries, RGBColor, SVGBackend,
    SeriesLabelPosition, ShapeStyle, BLACK, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Roofline chart size in pixels.
const ROOFLINE_SIZE: (u32, u32) = (960, 640);
/// Growth chart size in pixels.
const GROWTH_SIZE: (u32, u32) = (720, 420);
/// Height of the note line under a chart, pixels.
const FOOTER: u32 = 28;
/// Most decades an axis spans; points beyond are drawn at the edge.
const MAX_DECADES: f64 = 12.0;
/// How many of the longest-running kernels get their name beside the point.
const LABELLED: usize = 5;
/// Marker radius, pixels.
const RADIUS: u32 = 4;
const FONT: &str = "sans-serif";

/// Kind colours, in legend order; kinds not listed take [`OTHER_COLORS`] in name order.
const KIND_COLORS: [(&str, RGBColor); 10] = [
    ("gemm", RGBColor(0x1F, 0x77, 0xB4)),
    ("conv", RGBColor(0x2C, 0xA0, 0x2C)),
    ("attention", RGBColor(0x94, 0x67, 0xBD)),
    ("norm", RGBColor(0xFF, 0x7F, 0x0E)),
    ("softmax", RGBColor(0xE3, 0x77, 0xC2)),
    ("reduce", RGBColor(0x8C, 0x56, 0x4B)),
    ("pool", RGBColor(0x17, 0xBE, 0xCF)),
    ("elementwise", RGBColor(0xD6, 0x27, 0x28)),
    ("movement", RGBColor(0xBC, 0xBD, 0x22)),
    ("other", RGBColor(0x7F, 0x7F, 0x7F)),
];
/// Colours for kinds [`KIND_COLORS`] does not name, reused in turn.
const OTHER_COLORS: [RGBColor; 4] = [
    RGBColor(0x39, 0x3B, 0x79),
    RGBColor(0x63, 0x79, 0x39),
    RGBColor(0x84, 0x3C, 0x39),
    RGBColor(0x7B, 0x41, 0x73),
];
/// Roof line colour.
const ROOF_COLOR: RGBColor = RGBColor(0x30, 0x30, 0x30);

/// Errors of the charts.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// A roof that is not a positive, finite rate.
    #[error("{chart}: {what} is {value}; expected a positive, finite number")]
    BadRoof {
        /// The chart's title.
        chart: String,
        /// Which roof.
        what: String,
        /// The value given.
        value: f64,
    },
    /// plotters could not draw the chart.
    #[error("{chart}: cannot draw: {msg}")]
    Draw {
        /// The chart's title.
        chart: String,
        /// plotters' message.
        msg: String,
    },
}

/// A roofline chart: the device's roofs and one point per kernel.
#[derive(Clone, Debug)]
pub struct Roofline {
    /// The chart's title, e.g. `ResNet-50 batch=1 on NVIDIA H200 (measured)`.
    pub title: String,
    /// The memory roof: bytes per second.
    pub bandwidth: f64,
    /// The compute ceilings.
    pub roofs: Vec<Roof>,
    /// The kernels.
    pub points: Vec<RoofPoint>,
}

/// A compute ceiling of a roofline.
#[derive(Clone, Debug)]
pub struct Roof {
    /// What it is, e.g. `bf16 tensor cores 824 TFLOP/s`.
    pub label: String,
    /// Its rate, FLOP per second.
    pub flops_per_s: f64,
}

/// One kernel on a roofline.
#[derive(Clone, Debug)]
pub struct RoofPoint {
    /// The kernel's (node's) name.
    pub label: String,
    /// Its kind (`gemm`, `attention`, `conv`, `norm`, `elementwise`, `movement`, ...):
    /// picks the colour.
    pub kind: String,
    /// Operations it performs.
    pub flops: f64,
    /// Bytes it moves.
    pub bytes: f64,
    /// Its time, seconds.
    pub seconds: f64,
}

/// The growth of an e-graph over saturation.
#[derive(Clone, Debug)]
pub struct Growth {
    /// The chart's title.
    pub title: String,
    /// E-nodes and e-classes after each iteration, in order.
    pub iterations: Vec<(usize, usize)>,
}

/// Each kind among `points` with its colour as SVG writes it (`#1F77B4`), in legend
/// order: the known kinds in a fixed order, then the others by name.
pub fn kind_colors(points: &[RoofPoint]) -> Vec<(String, String)> {
    palette(points)
        .into_iter()
        .map(|(k, c)| (k, hex(c)))
        .collect()
}

/// Draws `r` as an SVG document: log-log axes of arithmetic intensity (FLOP/byte) and
/// FLOP/s, the memory roof up to each compute roof, one circle per point coloured by
/// kind with a legend, and the longest-running kernels named. Points that log axes
/// cannot place (a 0, negative, NaN or infinite coordinate, or one more than 12 decades
/// from the rest) are drawn hollow at the axis edge and counted under the chart.
pub fn roofline_svg(r: &Roofline) -> Result<String, ChartError> {
    check_roof(&r.title, "the memory bandwidth", r.bandwidth)?;
    for roof in &r.roofs {
        check_roof(
            &r.title,
            &format!("roof `{}`", roof.label),
            roof.flops_per_s,
        )?;
    }
    let axes = Axes::of(r);
    let placed: Vec<Placed> = r.points.iter().map(|p| axes.place(p)).collect();
    let mut svg = String::new();
    draw_roofline(&mut svg, r, &axes, &placed).map_err(|msg| ChartError::Draw {
        chart: r.title.clone(),
        msg,
    })?;
    Ok(svg)
}

/// Draws `g` as an SVG document: e-nodes and e-classes (two series with a legend)
/// against the iteration; a note says so when saturation did not run.
pub fn growth_svg(g: &Growth) -> Result<String, ChartError> {
    let mut svg = String::new();
    draw_growth(&mut svg, g).map_err(|msg| ChartError::Draw {
        chart: g.title.clone(),
        msg,
    })?;
    Ok(svg)
}

fn check_roof(chart: &str, what: &str, value: f64) -> Result<(), ChartError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ChartError::BadRoof {
            chart: chart.to_string(),
            what: what.to_string(),
            value,
        })
    }
}

/// A point in chart coordinates (log10 of intensity and of FLOP/s).
struct Placed {
    x: f64,
    y: f64,
    /// Drawn at the edge: its true place is off the axes.
    clamped: bool,
}

/// The axes' ranges, in decades (log10), and the roofs in the same units.
struct Axes {
    x: (f64, f64),
    y: (f64, f64),
    /// log10 of the bandwidth.
    bw: f64,
    /// log10 of each roof's rate, in the order given.
    roofs: Vec<f64>,
}

impl Axes {
    /// Whole decades covering the points that log axes can place, the roofs, and a
    /// decade either side of each ridge (where a roof meets the memory roof).
    fn of(r: &Roofline) -> Axes {
        let bw = r.bandwidth.log10();
        let roofs: Vec<f64> = r.roofs.iter().map(|f| f.flops_per_s.log10()).collect();
        let ridges = roofs.iter().map(|f| f - bw);
        let xs: Vec<f64> = r
            .points
            .iter()
            .filter_map(|p| log(p.flops / p.bytes))
            .collect();
        let ys: Vec<f64> = r
            .points
            .iter()
            .filter_map(|p| log(p.flops / p.seconds))
            .collect();
        let (lo, hi) = bounds(ridges.clone().map(|v| v - 1.0).chain(xs.iter().copied()));
        let (_, hi2) = bounds(ridges.map(|v| v + 1.0));
        let x = decades(
            lo.unwrap_or(-1.0),
            hi.into_iter().chain(hi2).reduce(f64::max).unwrap_or(3.0),
        );
        let top = bounds(roofs.iter().copied().chain(ys.iter().copied())).1;
        let top = top.unwrap_or(bw + x.1) + 0.15;
        let bottom = bounds(ys.iter().copied().chain([bw + x.0])).0;
        let y = decades(bottom.unwrap_or(top - 4.0), top);
        Axes { x, y, bw, roofs }
    }

    fn place(&self, p: &RoofPoint) -> Placed {
        let (x, cx) = clamp(p.flops / p.bytes, self.x);
        let (y, cy) = clamp(p.flops / p.seconds, self.y);
        Placed {
            x,
            y,
            clamped: cx || cy,
        }
    }
}

/// log10 of a positive, finite value.
fn log(v: f64) -> Option<f64> {
    (v.is_finite() && v > 0.0).then(|| v.log10())
}

/// The smallest and largest of `vs`.
fn bounds(vs: impl Iterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    vs.fold((None, None), |(lo, hi), v| {
        (
            Some(lo.map_or(v, |l: f64| l.min(v))),
            Some(hi.map_or(v, |h: f64| h.max(v))),
        )
    })
}

/// Whole decades around `lo..hi`, at least two and at most [`MAX_DECADES`] (cut from
/// below: the roofs are at the top).
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let hi = hi.ceil();
    let lo = lo.floor().min(hi - 2.0).max(hi - MAX_DECADES);
    (lo, hi)
}

/// `v`'s place on an axis spanning `range` decades, and whether it had to be moved to
/// the edge: 0, negative and NaN to the low end, infinity to the high end.
fn clamp(v: f64, range: (f64, f64)) -> (f64, bool) {
    match log(v) {
        Some(l) if l >= range.0 && l <= range.1 => (l, false),
        Some(l) => (l.clamp(range.0, range.1), true),
        None if v == f64::INFINITY => (range.1, true),
        None => (range.0, true),
    }
}

/// Each kind present with its colour, in legend order.
fn palette(points: &[RoofPoint]) -> Vec<(String, RGBColor)> {
    let present: std::collections::BTreeSet<&str> =
        points.iter().map(|p| p.kind.as_str()).collect();
    let known = KIND_COLORS
        .iter()
        .filter(|(k, _)| present.contains(k))
        .map(|(k, c)| (k.to_string(), *c));
    let others = present
        .iter()
        .filter(|k| !KIND_COLORS.iter().any(|(known, _)| known == *k))
        .zip(OTHER_COLORS.iter().cycle())
        .map(|(k, c)| (k.to_string(), *c));
    known.chain(others).collect()
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// A plotters error as text.
fn msg<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn draw_roofline(
    svg: &mut String,
    r: &Roofline,
    axes: &Axes,
    placed: &[Placed],
) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, ROOFLINE_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(msg)?;
    let (area, footer) = root.split_vertically(ROOFLINE_SIZE.1 - FOOTER);
    let mut chart = ChartBuilder::on(&area)
        .caption(&r.title, (FONT, 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(axes.x.0..axes.x.1, axes.y.0..axes.y.1)
        .map_err(msg)?;
    let x_label = |v: &f64| decade_label(*v, plain_decade);
    let y_label = |v: &f64| decade_label(*v, si_decade);
    chart
        .configure_mesh()
        .x_labels((axes.x.1 - axes.x.0) as usize + 1)
        .y_labels((axes.y.1 - axes.y.0) as usize + 1)
        .max_light_lines(0)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("FLOP/s")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .draw()
        .map_err(msg)?;
    draw_roofs(&mut chart, r, axes)?;
    draw_points(&mut chart, r, placed)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .margin(12)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(msg)?;
    let note = roofline_note(r, placed);
    let font = (FONT, 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    footer
        .draw(&Text::new(note, (16, (FOOTER / 2) as i32), font))
        .map_err(msg)?;
    root.present().map_err(msg)
}

/// A chart on log10 axes, drawn into an SVG string.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The memory roof and the compute roofs, each with its label.
fn draw_roofs(chart: &mut Chart, r: &Roofline, axes: &Axes) -> Result<(), String> {
    let style = ShapeStyle::from(&ROOF_COLOR).stroke_width(2);
    for (path, label) in roof_lines(r, axes) {
        chart
            .draw_series(LineSeries::new(path.clone(), style))
            .map_err(msg)?;
        let (at, anchor) = label_place(&path);
        let font = (FONT, 13).into_font().color(&ROOF_COLOR).pos(anchor);
        chart
            .draw_series([Text::new(label, at, font)])
            .map_err(msg)?;
    }
    Ok(())
}

/// One circle per point, a series (legend entry) per kind, hollow where clamped; the
/// longest-running named.
fn draw_points(chart: &mut Chart, r: &Roofline, placed: &[Placed]) -> Result<(), String> {
    for (kind, color) in palette(&r.points) {
        let mine: Vec<&Placed> = r
            .points
            .iter()
            .zip(placed)
            .filter(|(p, _)| p.kind == kind)
            .map(|(_, q)| q)
            .collect();
        let circles = mine.iter().map(|q| {
            let style = if q.clamped {
                color.stroke_width(2)
            } else {
                color.filled()
            };
            Circle::new((q.x, q.y), RADIUS, style)
        });
        chart
            .draw_series(circles)
            .map_err(msg)?
            .label(format!("{kind} ({})", mine.len()))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    for i in longest(&r.points) {
        let font = (FONT, 11)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let at = (placed[i].x, placed[i].y);
        let name = r.points[i].label.clone();
        let offset = (RADIUS as i32 + 3, 0);
        let label = EmptyElement::at(at) + Text::new(name, offset, font);
        chart.draw_series([label]).map_err(msg)?;
    }
    Ok(())
}

/// The memory roof (to the highest ridge) and each compute roof (flat from its
/// ridge), as paths in chart coordinates, with their labels.
fn roof_lines(r: &Roofline, axes: &Axes) -> Vec<(Vec<(f64, f64)>, String)> {
    let (x0, x1) = axes.x;
    let top = axes.roofs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let end = if top.is_finite() { top - axes.bw } else { x1 };
    // The memory roof enters the chart where it crosses the bottom or the left edge.
    let start = x0.max(axes.y.0 - axes.bw);
    let mut lines = Vec::new();
    if start < end.min(x1) {
        let end = end.min(x1);
        let path = vec![(start, axes.bw + start), (end, axes.bw + end)];
        lines.push((path, format!("memory {}", rate(r.bandwidth, "B/s"))));
    }
    for (roof, y) in r.roofs.iter().zip(&axes.roofs) {
        let ridge = (y - axes.bw).max(x0);
        if ridge < x1 {
            lines.push((vec![(ridge, *y), (x1, *y)], roof.label.clone()));
        }
    }
    lines
}

/// Where a roof's label goes: above the right end of a flat roof, above the start
/// of the sloped one.
fn label_place(path: &[(f64, f64)]) -> ((f64, f64), Pos) {
    match (path.first(), path.last()) {
        (Some(a), Some(b)) if a.1 == b.1 => (*b, Pos::new(HPos::Right, VPos::Bottom)),
        (Some(a), _) => ((a.0 + 0.1, a.1 + 0.1), Pos::new(HPos::Left, VPos::Bottom)),
        (None, _) => ((0.0, 0.0), Pos::new(HPos::Left, VPos::Bottom)),
    }
}

/// Indices of the [`LABELLED`] longest-running points (ties: first given first).
fn longest(points: &[RoofPoint]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].seconds.is_finite() && points[i].seconds > 0.0)
        .collect();
    order.sort_by(|&a, &b| {
        points[b]
            .seconds
            .total_cmp(&points[a].seconds)
            .then(a.cmp(&b))
    });
    order.truncate(LABELLED);
    order
}

/// The line under a roofline: the points, which are named, and the hollow ones.
fn roofline_note(r: &Roofline, placed: &[Placed]) -> String {
    let n = r.points.len();
    let named = longest(&r.points).len();
    let mut note = format!("{n} kernel(s); the {named} longest-running named");
    let hollow = placed.iter().filter(|p| p.clamped).count();
    if hollow > 0 {
        note += &format!(
            "; {hollow} hollow: 0, NaN, infinite or off-scale FLOPs, bytes or time, \
             drawn at the axis edge"
        );
    }
    note
}

/// A mesh label at whole decades only (plotters may ask for others).
fn decade_label(v: f64, show: fn(i32) -> String) -> String {
    if (v - v.round()).abs() < 1e-6 {
        show(v.round() as i32)
    } else {
        String::new()
    }
}

/// `0.01`, `1`, `1000`; `1e6` beyond.
fn plain_decade(k: i32) -> String {
    match k {
        -4..=-1 => format!("0.{}1", "0".repeat((-k - 1) as usize)),
        0..=4 => format!("1{}", "0".repeat(k as usize)),
        _ => format!("1e{k}"),
    }
}

/// `100 G`, `1 T`: SI prefixes from 1 to 100 E; `1e-3` outside.
fn si_decade(k: i32) -> String {
    const PREFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    match usize::try_from(k.div_euclid(3))
        .ok()
        .and_then(|i| PREFIXES.get(i))
    {
        Some(prefix) => format!("{} {prefix}", 10u32.pow(k.rem_euclid(3) as u32))
            .trim_end()
            .to_string(),
        None => format!("1e{k}"),
    }
}

/// `3.7 TB/s`.
fn rate(v: f64, unit: &str) -> String {
    const PREFIXES: [(f64, &str); 5] =
        [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    match PREFIXES.iter().find(|(s, _)| v >= *s) {
        Some((s, p)) => format!("{} {p}{unit}", round3(v / s)),
        None => format!("{} {unit}", round3(v)),
    }
}

/// Three significant digits, without trailing zeros.
fn round3(v: f64) -> String {
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Picks one count (e-nodes or e-classes) from an iteration's pair.
type Pick = fn(&(usize, usize)) -> usize;

fn draw_growth(svg: &mut String, g: &Growth) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, GROWTH_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(msg)?;
    let (area, footer) = root.split_vertically(GROWTH_SIZE.1 - FOOTER);
    let n = g.iterations.len();
    let most = g
        .iterations
        .iter()
        .map(|&(a, b)| a.max(b))
        .max()
        .unwrap_or(0);
    let top = (most as f64 * 1.1).max(1.0);
    let mut chart = ChartBuilder::on(&area)
        .caption(&g.title, (FONT, 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        // f64, not usize: plotters' integer key points never end when asked for no
        // light lines.
        .build_cartesian_2d(0.0..n.max(1) as f64, 0.0..top)
        .map_err(msg)?;
    let x_label = |v: &f64| whole(*v);
    let y_label = |v: &f64| count(*v);
    chart
        .configure_mesh()
        .max_light_lines(0)
        .x_labels((n + 1).min(12))
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc("iteration")
        .y_desc("count")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .draw()
        .map_err(msg)?;
    let series: [(&str, RGBColor, Pick); 2] = [
        ("e-nodes", KIND_COLORS[0].1, |s| s.0),
        ("e-classes", KIND_COLORS[3].1, |s| s.1),
    ];
    for (name, color, pick) in series {
        let pts: Vec<(f64, f64)> = g
            .iterations
            .iter()
            .enumerate()
            .map(|(i, s)| ((i + 1) as f64, pick(s) as f64))
            .collect();
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(pts.clone(), style).point_size(3))
            .map_err(msg)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(msg)?;
    let note = match g.iterations.last() {
        Some((nodes, classes)) => format!(
            "{n} iteration(s); {} e-nodes in {} e-classes at the end",
            count(*nodes as f64),
            count(*classes as f64)
        ),
        None => "saturation did not run: no iterations".to_string(),
    };
    let font = (FONT, 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    footer
        .draw(&Text::new(note, (16, (FOOTER / 2) as i32), font))
        .map_err(msg)?;
    root.present().map_err(msg)
}

/// An iteration label: whole numbers only (plotters may ask for halves).
fn whole(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round())
    } else {
        String::new()
    }
}

/// `950`, `12.5k`, `3.2M`.
fn count(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", round3(v / 1e6)),
        v if v >= 1e3 => format!("{}k", round3(v / 1e3)),
        v => round3(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(plain_decade(-2), "0.01");
        assert_eq!(plain_decade(3), "1000");
        assert_eq!(plain_decade(7), "1e7");
        assert_eq!(si_decade(13), "10 T");
        assert_eq!(si_decade(0), "1");
        assert_eq!(si_decade(-1), "1e-1");
        assert_eq!(rate(3.7e12, "B/s"), "3.7 TB/s");
        assert_eq!(count(12_500.0), "12.5k");
        assert_eq!(decade_label(2.5, si_decade), "");
    }

    #[test]
    fn clamps_what_log_axes_cannot_show() {
        assert_eq!(clamp(0.0, (-1.0, 3.0)), (-1.0, true));
        assert_eq!(clamp(f64::NAN, (-1.0, 3.0)), (-1.0, true));
        assert_eq!(clamp(f64::INFINITY, (-1.0, 3.0)), (3.0, true));
        assert_eq!(clamp(1e6, (-1.0, 3.0)), (3.0, true));
        assert_eq!(clamp(100.0, (-1.0, 3.0)), (2.0, false));
    }
}
