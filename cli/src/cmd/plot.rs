//! `latte plot FILE... -o OUT.svg|OUT.png`: per ID, a row of two panels:
//! the percentile spectrum of every run (HdrHistogram's: x is the
//! percentile on a log scale of 1 / (1 - p), from 0 to 99.999, y the
//! latency, linear or, over a wide span, logarithmic), one curve per run; and the latency over time of one run, a
//! heat map of samples per (time, latency) cell with the switched samples
//! marked. Drawn with `plotters` as SVG or PNG; both measure their text
//! with a TrueType font read at run time (`FONT_FILES`), and PNG text is
//! drawn with it glyph by glyph (`plot_text`).

use crate::exit::{fail, EXIT_OTHER, EXIT_OUTPUT, EXIT_USAGE};
use crate::samples::{self, Source};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::process::ExitCode;

pub struct PlotOpts {
    pub sources: Vec<std::ffi::OsString>,
    pub output: std::path::PathBuf,
    /// Only these IDs (all when empty).
    pub ids: Vec<String>,
    /// Leave out switched samples from the spectra.
    pub clean: bool,
    /// The run (0-based, in the order given) whose heat map is drawn.
    pub heatmap_run: usize,
}

/// Curve colours, one per run, in order: distinct on white and from the
/// heat map's shades (docs/recording.md lists them; the tests count them).
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];
/// Marks of switched samples in the heat map.
const SWITCHED: RGBColor = RGBColor(0xe7, 0x29, 0x8a);
/// The spectrum's x range: log10(1 / (1 - p)) up to p = 99.999 %.
const X_MAX: f64 = 5.0;
/// Points per spectrum curve.
const CURVE_POINTS: usize = 600;
/// Heat map cells: time columns by latency rows.
const CELLS: (usize, usize) = (120, 60);
/// Switched samples marked at most (evenly thinned beyond).
const MAX_MARKS: usize = 4000;
const PANEL: (u32, u32) = (640, 420);
/// IDs drawn at most in one picture (one row of 420 px each).
const MAX_IDS: usize = 24;
const FONT: &str = "sans-serif";

/// Font files tried, in order.
pub const FONT_FILES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The runs' labels: each source's file name without its directory, or,
/// where two runs would share one, the fewest last path components that
/// tell them apart (a source given twice: numbered).
fn labels(sources: &[std::ffi::OsString]) -> Vec<String> {
    let parts: Vec<Vec<String>> = sources
        .iter()
        .map(|s| {
            std::path::Path::new(s)
                .components()
                .map(|c| crate::term::label_text(std::os::unix::ffi::OsStrExt::as_bytes(c.as_os_str())))
                .filter(|c| c != "/" && c != ".")
                .collect()
        })
        .collect();
    let tail = |p: &Vec<String>, n: usize| p[p.len().saturating_sub(n)..].join("/");
    let longest = parts.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let n = (1..=longest).find(|&n| {
        let all: Vec<String> = parts.iter().map(|p| tail(p, n)).collect();
        all.iter().enumerate().all(|(i, a)| !all[..i].contains(a))
    });
    parts
        .iter()
        .enumerate()
        .map(|(k, p)| match n {
            Some(n) => short(&tail(p, n), 32),
            None => format!("{} (#{})", short(&tail(p, 1), 26), k + 1),
        })
        .collect()
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n - 3).collect::<String>())
    }
}

/// Percentile axis labels: 0, 90, 99, 99.9, ... at x = 0, 1, 2, ...
fn percentile_label(x: &f64) -> String {
    let k = x.round() as i32;
    if (x - k as f64).abs() > 1e-6 {
        return String::new();
    }
    match k {
        0 => "0".into(),
        1 => "90".into(),
        k => format!("99.{}", "9".repeat(k as usize - 2)).trim_end_matches('.').to_string(),
    }
}

/// The latency axis: linear, or log10 of ns when the values span more than
/// `LOG_SPAN` times (a tail of preempted samples would flatten the rest).
#[derive(Clone, Copy)]
struct YScale {
    log: bool,
}

/// Span (largest over smallest value) from which the latency axis is logarithmic.
const LOG_SPAN: f64 = 20.0;

impl YScale {
    fn of(values: impl Iterator<Item = f64>) -> YScale {
        let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        YScale { log: hi > LOG_SPAN * lo.max(0.1) }
    }

    /// Axis position of a latency in ns.
    fn to(self, ns: f64) -> f64 {
        if self.log {
            ns.max(0.1).log10()
        } else {
            ns
        }
    }

    /// Latency in ns at an axis position.
    fn from(self, y: f64) -> f64 {
        if self.log {
            10f64.powf(y)
        } else {
            y
        }
    }

    /// The axis range for values from `lo` to `hi` ns.
    fn range(self, lo: f64, hi: f64) -> std::ops::Range<f64> {
        if self.log {
            let (a, b) = (self.to(lo), self.to(hi));
            a - 0.04 * (b - a).max(0.1)..b + 0.04 * (b - a).max(0.1)
        } else {
            0.0..hi.max(1.0) * 1.06
        }
    }

    fn label(self, y: &f64) -> String {
        latte::report::format_time(self.from(*y))
    }

    fn desc(self) -> &'static str {
        if self.log {
            "latency (log scale)"
        } else {
            "latency"
        }
    }
}

/// (x, latency in ns) points of a run's spectrum, up to the percentile its
/// sample count can tell (1 / (1 - p) <= n).
fn spectrum(sorted_ns: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted_ns.len();
    let x_end = (n as f64).log10().min(X_MAX);
    (0..=CURVE_POINTS)
        .map(|k| x_end * k as f64 / CURVE_POINTS as f64)
        .map(|x| {
            let p = 1.0 - 10f64.powf(-x);
            let r = ((p * n as f64).ceil() as usize).clamp(1, n);
            (x, sorted_ns[r - 1])
        })
        .collect()
}

type Err = Box<dyn std::error::Error>;

/// A run's curve: its index (colour), label and points.
type Curve<'a> = (usize, &'a String, Vec<(f64, f64)>);

fn draw_spectrum<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, id: &str, runs: &[(String, Vec<f64>)]) -> Result<(), Err>
where
    DB::ErrorType: 'static,
{
    let curves: Vec<Curve> = runs.iter().enumerate().filter(|(_, (_, v))| !v.is_empty()).map(|(k, (name, v))| (k, name, spectrum(v))).collect();
    let all = || curves.iter().flat_map(|c| c.2.iter().map(|p| p.1));
    let ys = YScale::of(all());
    let (lo, hi) = (all().fold(f64::INFINITY, f64::min), all().fold(0.0, f64::max));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{}: percentile spectrum", short(id, 28)), (FONT, 17))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(0f64..X_MAX, ys.range(lo, hi))?;
    chart
        .configure_mesh()
        .x_labels(6)
        .x_label_formatter(&percentile_label)
        .y_labels(6)
        .y_label_formatter(&|y| ys.label(y))
        .x_desc("percentile (%)")
        .y_desc(ys.desc())
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
        .draw()?;
    for (k, name, pts) in curves {
        let c = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.into_iter().map(|(x, y)| (x, ys.to(y))), c.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 13))
        .background_style(WHITE)
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .draw()?;
    Ok(())
}

/// The heat map's colour of a cell holding `share` (0..=1, log scaled) of the fullest cell.
fn shade(share: f64) -> RGBColor {
    // Light yellow to dark blue-grey (never a palette colour).
    let (a, b) = ((0xff as f64, 0xf7 as f64, 0xbc as f64), (0x25 as f64, 0x34 as f64, 0x5e as f64));
    let t = share.clamp(0.0, 1.0);
    RGBColor((a.0 + (b.0 - a.0) * t) as u8, (a.1 + (b.1 - a.1) * t) as u8, (a.2 + (b.2 - a.2) * t) as u8)
}

/// (seconds since the run's first sample, latency ns, switched) of every sample.
type Point = (f64, f64, bool);

/// Width (px) of the heat map's colour key.
const KEY_WIDTH: u32 = 70;

/// The heat map's colour key, beside it: a cell's shade by the samples it
/// holds, from 1 (bottom) to the fullest cell's count (top), on the log
/// scale the cells use.
fn draw_key<DB: DrawingBackend>(key: &DrawingArea<DB, Shift>, most: u32) -> Result<(), Err>
where
    DB::ErrorType: 'static,
{
    let (_, h) = key.dim_in_pixel();
    let (top, bottom, x0, x1) = (44i32, h as i32 - 76, 6i32, 22i32);
    let steps = 40;
    // The share of the fullest cell's shade a cell of one sample has.
    let low = 2f64.ln() / (1.0 + most.max(1) as f64).ln();
    for k in 0..steps {
        let y_at = |k: i32| bottom - ((bottom - top) as f64 * k as f64 / steps as f64) as i32;
        let share = low + (1.0 - low) * k as f64 / (steps - 1) as f64;
        key.draw(&Rectangle::new([(x0, y_at(k + 1)), (x1, y_at(k))], shade(0.15 + 0.85 * share).filled()))?;
    }
    key.draw(&Rectangle::new([(x0, top), (x1, bottom)], BLACK.stroke_width(1)))?;
    let style = (FONT, 12).into_font().color(&BLACK);
    key.draw(&Text::new(most.max(1).to_string(), (x1 + 3, top - 6), style.clone()))?;
    key.draw(&Text::new("1", (x1 + 3, bottom - 8), style.clone()))?;
    key.draw(&Text::new("samples", (2, bottom + 8), style.clone()))?;
    key.draw(&Text::new("per cell", (2, bottom + 22), style))?;
    Ok(())
}

fn draw_heatmap<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, id: &str, run: &str, pts: &[Point], tracked: bool) -> Result<(), Err>
where
    DB::ErrorType: 'static,
{
    let (main, key) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(KEY_WIDTH));
    let t_end = pts.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-6);
    let ys = YScale::of(pts.iter().map(|p| p.1));
    let (lo, hi) = (pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min), pts.iter().map(|p| p.1).fold(0.0, f64::max));
    let yr = ys.range(lo, hi);
    // The time axis in the unit that gives its ticks distinct labels.
    let (unit, scale) = if t_end < 1e-3 {
        ("us", 1e6)
    } else if t_end < 1.0 {
        ("ms", 1e3)
    } else {
        ("s", 1.0)
    };
    let mut chart = ChartBuilder::on(&main)
        .caption(format!("{}: latency over time, {}", short(id, 20), short(run, 20)), (FONT, 17))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(78)
        .build_cartesian_2d(0f64..t_end, yr.clone())?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|t| format!("{:.1} {unit}", t * scale))
        .y_label_formatter(&|y| ys.label(y))
        .x_desc(if tracked { "time since the first sample (magenta: switched out)" } else { "time since the first sample (switches not tracked)" })
        .y_desc(ys.desc())
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()?;
    let (cx, cy) = CELLS;
    let mut cells = vec![0u32; cx * cy];
    for p in pts {
        let i = ((p.0 / t_end * cx as f64) as usize).min(cx - 1);
        let j = (((ys.to(p.1) - yr.start) / (yr.end - yr.start) * cy as f64).max(0.0) as usize).min(cy - 1);
        cells[j * cx + i] += 1;
    }
    let fullest = cells.iter().copied().max().unwrap_or(1).max(1);
    draw_key(&key, fullest)?;
    let most = fullest as f64;
    let edge = |j: usize| yr.start + (yr.end - yr.start) * j as f64 / cy as f64;
    chart.draw_series(cells.iter().enumerate().filter(|(_, &n)| n > 0).map(|(k, &n)| {
        let (i, j) = (k % cx, k / cx);
        let share = (1.0 + n as f64).ln() / (1.0 + most).ln();
        let x0 = t_end * i as f64 / cx as f64;
        let x1 = t_end * (i + 1) as f64 / cx as f64;
        Rectangle::new([(x0, edge(j)), (x1, edge(j + 1))], shade(0.15 + 0.85 * share).filled())
    }))?;
    let switched: Vec<&Point> = pts.iter().filter(|p| p.2).collect();
    let step = switched.len().div_ceil(MAX_MARKS).max(1);
    chart.draw_series(switched.iter().step_by(step).map(|p| Cross::new((p.0, ys.to(p.1)), 3, SWITCHED.stroke_width(1))))?;
    Ok(())
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, ids: &[String], runs: &[Source], o: &PlotOpts) -> Result<(), Err>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let names = labels(&o.sources);
    let rows = root.split_evenly((ids.len(), 2));
    for (r, id) in ids.iter().enumerate() {
        let mut per_run = Vec::new();
        for (s, name) in runs.iter().zip(&names) {
            let mut v: Vec<f64> = match s.id(id) {
                Some(x) => x.samples.iter().filter(|r| !(o.clean && samples::switched(r))).map(|r| samples::duration(r) as f64 / s.cycles_per_ns).collect(),
                None => Vec::new(),
            };
            v.sort_unstable_by(|a, b| a.total_cmp(b));
            per_run.push((name.clone(), v));
        }
        draw_spectrum(&rows[2 * r], id, &per_run)?;
        let s = &runs[o.heatmap_run];
        let pts: Vec<Point> = match s.id(id) {
            Some(x) => {
                let t0 = x.samples.iter().map(|r| r.start_tsc).min().unwrap_or(0);
                x.samples
                    .iter()
                    .map(|r| ((r.start_tsc - t0) as f64 / s.cycles_per_ns / 1e9, samples::duration(r) as f64 / s.cycles_per_ns, samples::switched(r)))
                    .collect()
            }
            None => Vec::new(),
        };
        if pts.is_empty() {
            rows[2 * r + 1].titled(&format!("{}: no samples in {}", short(id, 20), names[o.heatmap_run]), (FONT, 17))?;
        } else {
            draw_heatmap(&rows[2 * r + 1], id, &names[o.heatmap_run], &pts, s.switches_tracked)?;
        }
    }
    root.present()?;
    Ok(())
}

/// Registers the first TrueType font found as "sans-serif", and returns it.
fn load_font() -> Result<ab_glyph::FontRef<'static>, String> {
    for f in FONT_FILES {
        if let Ok(bytes) = std::fs::read(f) {
            // Leaked once per process: plotters keeps fonts for its lifetime.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if let (Ok(()), Ok(font)) = (plotters::style::register_font(FONT, FontStyle::Normal, bytes), ab_glyph::FontRef::try_from_slice(bytes)) {
                return Ok(font);
            }
        }
    }
    Err(format!("plot needs a TrueType font to place its labels ({}; Debian: fonts-dejavu-core)", FONT_FILES[0]))
}

pub fn run(o: &PlotOpts) -> Result<(), ExitCode> {
    let shown = o.output.display().to_string();
    let ext = o.output.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    if ext != "svg" && ext != "png" {
        return Err(fail(&shown, "the output's name must end in .svg or .png", EXIT_USAGE));
    }
    if o.sources.len() > PALETTE.len() {
        return Err(fail("plot", &format!("{} runs given, at most {} in one picture (a colour each)", o.sources.len(), PALETTE.len()), EXIT_USAGE));
    }
    if o.heatmap_run >= o.sources.len() {
        return Err(fail("plot", &format!("--heatmap-run {} but {} run(s) given", o.heatmap_run + 1, o.sources.len()), EXIT_USAGE));
    }
    let runs: Vec<Source> = o.sources.iter().map(|s| samples::load(s)).collect::<Result<_, _>>()?;
    let mut ids: Vec<String> = Vec::new();
    for s in &runs {
        for i in &s.ids {
            if !ids.contains(&i.name) && (o.ids.is_empty() || o.ids.contains(&i.name)) {
                ids.push(i.name.clone());
            }
        }
    }
    if ids.is_empty() {
        return Err(fail("plot", "no samples to plot (of the IDs asked for)", EXIT_OTHER));
    }
    if ids.len() > MAX_IDS {
        return Err(fail("plot", &format!("{} IDs to draw, at most {MAX_IDS} in one picture: choose with --id", ids.len()), EXIT_USAGE));
    }
    // Created first, so that an unwritable path fails before the drawing.
    let out = crate::output::Output::create(&o.output).map_err(|e| fail(&shown, &crate::exit::output_error(&o.output, &e), EXIT_OUTPUT))?;
    let size = (PANEL.0 * 2, PANEL.1 * ids.len() as u32);
    // Both backends measure text with the font (to place labels).
    let font = load_font().map_err(|e| fail(&shown, &e, EXIT_OTHER))?;
    let r = if ext == "svg" {
        draw(SVGBackend::new(&o.output, size).into_drawing_area(), &ids, &runs, o)
    } else {
        // PNG text is drawn glyph by glyph where the font puts it (plot_text).
        let png = super::plot_text::Glyphs { inner: BitMapBackend::new(&o.output, size), font };
        draw(png.into_drawing_area(), &ids, &runs, o)
    };
    r.map_err(|e| {
        out.discard();
        fail(&shown, &format!("cannot draw: {e}"), EXIT_OUTPUT)
    })
}

#[cfg(test)]
mod tests {
    use super::labels;

    #[test]
    fn labels_tell_runs_apart() {
        let s = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(labels(&s(&["./a.rec", "/tmp/b.rec"])), ["a.rec", "b.rec"]);
        assert_eq!(labels(&s(&["./run1/x.rec", "./run2/x.rec"])), ["run1/x.rec", "run2/x.rec"]);
        assert_eq!(labels(&s(&["/a/b/x.rec", "/c/b/x.rec", "/c/d/y.rec"])), ["a/b/x.rec", "c/b/x.rec", "c/d/y.rec"]);
        assert_eq!(labels(&s(&["./x.rec", "x.rec"])), ["x.rec (#1)", "x.rec (#2)"]);
        assert_eq!(labels(&s(&["/latte-before", "/latte-after"])), ["latte-before", "latte-after"]);
    }
}
