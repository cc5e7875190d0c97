//! `loadgen plot`: SVG charts drawn by loadgen itself, with plotters' SVG backend (text is written
//! as SVG `<text>`, so no fonts, no Python, no browser). Two inputs:
//! - a JSON result of one run (`loadgen echo --format json --output FILE`): the latency
//!   percentile spectrum, throughput per interval and latency per interval;
//! - any CSV with a header (a `loadgen sweep`'s, an experiment script's): `--x` a column,
//!   `--y` one or more columns, `--series` columns whose values split the rows into lines.
//!
//! [`Panel`] and [`draw`] are also what `loadgen sweep` draws its chart with.

pub use crate::cli::plot::PlotArgs;
use crate::cli::sweep::heading;
use crate::error::Error;
use crate::run::ToolOutput;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// How the x axis is labelled.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    Numbers,
    /// Positions 0, 1, 2 … named by these labels.
    Categories(Vec<String>),
    /// x is the number of nines of a percentile: 1 = p90, 2 = p99, 3 = p99.9.
    Nines,
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Index into the palette.
    pub color: usize,
}

/// One chart: axes with their labels, lines and a legend.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_axis: XAxis,
    pub log_x: bool,
    pub log_y: bool,
    pub lines: Vec<Line>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// A number as an axis label: at most 3 significant digits, no trailing zeros.
pub fn format_number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (2.0 - a.log10().floor()) as usize
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn nines_to_percentile(x: f64) -> f64 {
    100.0 - 100.0 * 10f64.powf(-x)
}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// Draws the panels one above the other into one SVG file.
pub fn draw(path: &Path, size: (u32, u32), panels: &[Panel]) -> Result<(), String> {
    if panels.is_empty() {
        return Err("nothing to plot".into());
    }
    let height = size.1 * panels.len() as u32;
    let root = SVGBackend::new(path, (size.0, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let areas = root.split_evenly((panels.len(), 1));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, panel)?;
    }
    root.present().map_err(draw_err)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    // Logarithmic x is base 2 (ticks at 1, 2, 4, 8 …: thread and handler counts), y base 10.
    let (tx, ty) = (
        |v: f64| if panel.log_x { v.log2() } else { v },
        |v: f64| if panel.log_y { v.log10() } else { v },
    );
    let lines: Vec<(&Line, Vec<(f64, f64)>)> = panel
        .lines
        .iter()
        .map(|l| {
            let pts = l
                .points
                .iter()
                .filter(|(x, y)| {
                    x.is_finite()
                        && y.is_finite()
                        && (!panel.log_x || *x > 0.0)
                        && (!panel.log_y || *y > 0.0)
                })
                .map(|&(x, y)| (tx(x), ty(y)))
                .collect();
            (l, pts)
        })
        .filter(|(_, p): &(&Line, Vec<(f64, f64)>)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return Err(format!("'{}': no points to plot", panel.title));
    }
    let all = || lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y0, mut y1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    match &panel.x_axis {
        XAxis::Categories(c) => {
            x0 = -0.5;
            x1 = c.len().max(1) as f64 - 0.5;
        }
        XAxis::Nines => {
            x0 = 0.0;
            x1 = x1.ceil().max(1.0);
        }
        XAxis::Numbers => {
            if x1 - x0 < 1e-9 {
                x0 -= 1.0;
                x1 += 1.0;
            }
            let pad = (x1 - x0) * 0.03;
            x0 -= pad;
            x1 += pad;
        }
    }
    if panel.log_y {
        y0 = y0.floor();
        y1 = (y1 + 0.35).ceil(); // room for the legend
    } else {
        if y0 >= 0.0 {
            y0 = 0.0;
        }
        if y1 - y0 < 1e-9 {
            y1 = y0 + 1.0;
        }
        y1 += (y1 - y0) * 0.12; // room for the legend
    }
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    let (log_x, log_y) = (panel.log_x, panel.log_y);
    let x_format = |v: &f64| match &panel.x_axis {
        XAxis::Categories(c) => {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < c.len() {
                c[i as usize].clone()
            } else {
                String::new()
            }
        }
        XAxis::Nines => format_number_precise(nines_to_percentile(*v)),
        XAxis::Numbers if log_x => power_label(2.0, *v),
        XAxis::Numbers => format_number(*v),
    };
    let y_format = |v: &f64| {
        if log_y {
            power_label(10.0, *v)
        } else {
            format_number(*v)
        }
    };
    let x_labels = match &panel.x_axis {
        XAxis::Categories(c) => 2 * c.len() + 2,
        XAxis::Nines => x1 as usize + 1,
        // Logarithmic axes: a tick per power (of 2 for x, of 10 for y).
        XAxis::Numbers if log_x => (x1 - x0).ceil() as usize + 1,
        XAxis::Numbers => 10,
    };
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .x_labels(x_labels)
        .y_labels(if log_y {
            (y1 - y0) as usize * 2 + 1
        } else {
            10
        })
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(draw_err)?;
    for (line, pts) in &lines {
        let color = PALETTE[line.color % PALETTE.len()];
        let style = color.stroke_width(2);
        if line.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 7, 5, style))
                .map_err(draw_err)?
                .label(&line.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], style));
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(draw_err)?
                .label(&line.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            if pts.len() <= 60 {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(draw_err)?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(draw_err)?;
    Ok(())
}

/// A logarithmic axis' tick: labelled at whole powers of `base` only.
fn power_label(base: f64, v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format_number(base.powf(v.round()))
    } else {
        String::new()
    }
}

/// A percentile as a label: 50, 90, 99, 99.9, 99.99 (no rounding up to 100).
fn format_number_precise(p: f64) -> String {
    for decimals in 0..6 {
        let s = format!("{p:.decimals$}");
        if (s.parse::<f64>().unwrap_or(0.0) - p).abs() < 1e-6 * 100.0 {
            return s;
        }
    }
    format!("{p:.5}")
}

/// A CSV table: header and rows of cells, all as text.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = split_csv_line(lines.next().ok_or("the file is empty")?);
        let rows = lines.map(split_csv_line).collect();
        Ok(Table { header, rows })
    }

    pub fn column(&self, name: &str) -> Result<usize, String> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no column '{name}' (columns: {})", self.header.join(", ")))
    }

    pub fn to_csv(&self) -> String {
        let mut out = self.header.join(",");
        out.push('\n');
        for r in &self.rows {
            out.push_str(&r.join(","));
            out.push('\n');
        }
        out
    }
}

/// Splits one CSV line; double-quoted fields may hold commas and doubled quotes.
fn split_csv_line(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// What to draw from a table.
pub struct Selection<'a> {
    pub x: &'a str,
    pub y: &'a [String],
    pub series: &'a [String],
    pub dashed: &'a [String],
}

/// The lines of a table: one per value of the series columns and per y column. Colors follow the
/// series (and the solid y columns); a dashed column takes its series' color.
pub fn lines_from_table(t: &Table, sel: &Selection) -> Result<(XAxis, Vec<Line>), String> {
    let xi = t.column(sel.x)?;
    let yi: Vec<usize> = sel
        .y
        .iter()
        .map(|c| t.column(c))
        .collect::<Result<_, _>>()?;
    let si: Vec<usize> = sel
        .series
        .iter()
        .map(|c| t.column(c))
        .collect::<Result<_, _>>()?;
    for d in sel.dashed {
        if !sel.y.contains(d) {
            return Err(format!("--dashed {d} is not one of the y columns"));
        }
    }
    let cell = |r: &Vec<String>, i: usize| r.get(i).cloned().unwrap_or_default();
    let numeric = t.rows.iter().all(|r| cell(r, xi).parse::<f64>().is_ok());
    let mut categories: Vec<String> = Vec::new();
    if !numeric {
        for r in &t.rows {
            let v = cell(r, xi);
            if !categories.contains(&v) {
                categories.push(v);
            }
        }
    }
    let x_of = |r: &Vec<String>| -> f64 {
        let v = cell(r, xi);
        if numeric {
            v.parse().unwrap_or(f64::NAN)
        } else {
            categories.iter().position(|c| *c == v).unwrap_or(0) as f64
        }
    };
    let mut groups: Vec<(String, Vec<&Vec<String>>)> = Vec::new();
    for r in &t.rows {
        let key = si
            .iter()
            .zip(sel.series)
            .map(|(&i, name)| format!("{}={}", heading(name), cell(r, i)))
            .collect::<Vec<_>>()
            .join(", ");
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let solid: Vec<&String> = sel.y.iter().filter(|y| !sel.dashed.contains(y)).collect();
    let mut lines = Vec::new();
    for (g, (key, rows)) in groups.iter().enumerate() {
        for (col, &i) in sel.y.iter().zip(&yi) {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| cell(r, i).parse::<f64>().ok().map(|y| (x_of(r), y)))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let dashed = sel.dashed.contains(col);
            let solid_index = solid.iter().position(|s| *s == col).unwrap_or(0);
            let name = match (key.is_empty(), sel.y.len() > 1) {
                (true, _) => heading(col),
                (false, true) => format!("{}, {key}", heading(col)),
                (false, false) => key.clone(),
            };
            lines.push(Line {
                name,
                points,
                dashed,
                color: g * solid.len().max(1) + solid_index,
            });
        }
    }
    let axis = if numeric {
        XAxis::Numbers
    } else {
        XAxis::Categories(categories)
    };
    Ok((axis, lines))
}

fn default_output(input: &Path, output: &Option<PathBuf>) -> PathBuf {
    output
        .clone()
        .unwrap_or_else(|| input.with_extension("svg"))
}

fn file_title(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn run(args: &PlotArgs) -> Result<ToolOutput, Error> {
    let (output, panels) = match (&args.csv, &args.result) {
        (Some(csv), _) => (default_output(csv, &args.output), csv_panels(csv, args)?),
        (None, Some(json)) => (
            default_output(json, &args.output),
            result_panels(json, args)?,
        ),
        (None, None) => return Err(Error::Usage("plot: give RESULT.json or --csv FILE".into())),
    };
    // The inputs were read: a chart that cannot be written is an I/O failure (exit 1).
    draw(&output, args.size, &panels)
        .map_err(|e| Error::Io(format!("plot: {}: {e}", output.display())))?;
    eprintln!("loadgen: chart written to {}", output.display());
    Ok(ToolOutput {
        stdout: String::new(),
    })
}

fn csv_panels(path: &Path, args: &PlotArgs) -> Result<Vec<Panel>, Error> {
    let err = |e: String| Error::Usage(format!("plot: {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut table = Table::parse(&text).map_err(err)?;
    for (col, value) in &args.filter {
        let i = table.column(col).map_err(err)?;
        table.rows.retain(|r| r.get(i) == Some(value));
    }
    let x = args.x.as_deref().unwrap_or_default();
    let sel = Selection {
        x,
        y: &args.y,
        series: &args.series,
        dashed: &args.dashed,
    };
    let (x_axis, lines) = lines_from_table(&table, &sel).map_err(err)?;
    if lines.is_empty() {
        return Err(err("no numeric y values to plot".into()));
    }
    Ok(vec![Panel {
        title: args.title.clone().unwrap_or_else(|| file_title(path)),
        x_label: args.x_label.clone().unwrap_or_else(|| x.to_string()),
        y_label: args.y_label.clone().unwrap_or_else(|| args.y.join(", ")),
        x_axis,
        log_x: args.log_x,
        log_y: args.log_y,
        lines,
    }])
}

/// The three panels of one run: latency by percentile, throughput per interval, latency per
/// interval.
fn result_panels(path: &Path, args: &PlotArgs) -> Result<Vec<Panel>, Error> {
    let err = |e: String| Error::Usage(format!("plot: {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let r = crate::report::json::parse(&text)
        .map_err(|e| err(format!("not a loadgen JSON result: {e}")))?;
    let title = args.title.clone().unwrap_or_else(|| file_title(path));
    let d = &r.description;
    let what = format!(
        "{} {} thread(s), {} client(s), {} loop",
        d.workload, d.threads, d.clients, d.load
    );
    let spectrum = |h: &common::stats::LatencyHistogram| -> Vec<(f64, f64)> {
        // Up to the percentile the number of samples can tell apart.
        let max_nines = (h.count().max(1) as f64).log10().min(6.0);
        (0..=60)
            .map(|i| i as f64 / 10.0)
            .filter(|&n| n <= max_nines)
            .map(|n| (n, h.percentile_ms(nines_to_percentile(n))))
            .collect()
    };
    let mut spectrum_lines = vec![Line {
        name: if d.open_loop() {
            "corrected (from the intended send)".into()
        } else {
            "successes (from each send)".into()
        },
        points: spectrum(&r.corrected),
        dashed: false,
        color: 0,
    }];
    if d.open_loop() {
        spectrum_lines.push(Line {
            name: "uncorrected (service time)".into(),
            points: spectrum(&r.uncorrected),
            dashed: true,
            color: 1,
        });
    }
    if r.failed.count() > 0 {
        spectrum_lines.push(Line {
            name: "failures".into(),
            points: spectrum(&r.failed),
            dashed: false,
            color: 2,
        });
    }
    let mut panels = vec![Panel {
        title: format!("{title}: latency by percentile ({what})"),
        x_label: "percentile (%)".into(),
        y_label: "latency (ms)".into(),
        x_axis: XAxis::Nines,
        log_x: false,
        log_y: args.log_y,
        lines: spectrum_lines,
    }];
    if !r.series.is_empty() {
        // The run's last interval can be a sliver (a few ms): its rate says nothing.
        let longest = r.series.iter().map(|p| p.duration_s).fold(0.0, f64::max);
        let series = |f: &dyn Fn(&crate::engine::live::IntervalPoint) -> f64| {
            r.series
                .iter()
                .filter(|p| p.duration_s >= 0.2 * longest)
                .map(|p| (p.t_s, f(p)))
                .collect::<Vec<_>>()
        };
        let mut rate_lines = vec![Line {
            name: "successes/s".into(),
            points: series(&|p| p.successes as f64 / p.duration_s.max(1e-9)),
            dashed: false,
            color: 0,
        }];
        if r.failures() > 0 {
            rate_lines.push(Line {
                name: "failures/s".into(),
                points: series(&|p| p.failures as f64 / p.duration_s.max(1e-9)),
                dashed: false,
                color: 1,
            });
        }
        panels.push(Panel {
            title: format!("{title}: throughput per interval"),
            x_label: "time since the start of measurement (s)".into(),
            y_label: "throughput (calls/s)".into(),
            x_axis: XAxis::Numbers,
            log_x: false,
            log_y: false,
            lines: rate_lines,
        });
        panels.push(Panel {
            title: format!("{title}: latency per interval"),
            x_label: "time since the start of measurement (s)".into(),
            y_label: "latency (ms)".into(),
            x_axis: XAxis::Numbers,
            log_x: false,
            log_y: args.log_y,
            lines: vec![
                Line {
                    name: "p50".into(),
                    points: series(&|p| p.p50_ms),
                    dashed: false,
                    color: 0,
                },
                Line {
                    name: "p99".into(),
                    points: series(&|p| p.p99_ms),
                    dashed: false,
                    color: 1,
                },
                Line {
                    name: "max".into(),
                    points: series(&|p| p.max_ms),
                    dashed: true,
                    color: 2,
                },
            ],
        });
    }
    Ok(panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_percentiles_label_cleanly() {
        assert_eq!(format_number(30000.0), "30000");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(0.0123), "0.0123");
        assert_eq!(format_number_precise(nines_to_percentile(3.0)), "99.9");
        assert_eq!(format_number_precise(nines_to_percentile(1.0)), "90");
    }

    #[test]
    fn csv_lines_group_by_series_and_keep_colors_for_dashed_columns() {
        let t = Table::parse(
            "h,delay,x,pred\n1,1,100,\"1,000\"\n2,1,190,2000\n1,2,50,500\n2,2,99,1000\n",
        )
        .unwrap();
        assert_eq!(t.rows[0][3], "1,000");
        let y = vec!["x".to_string(), "pred".to_string()];
        let sel = Selection {
            x: "h",
            y: &y,
            series: &["delay".to_string()],
            dashed: &["pred".to_string()],
        };
        let (axis, lines) = lines_from_table(&t, &sel).unwrap();
        assert_eq!(axis, XAxis::Numbers);
        // "1,000" is not a number: series delay=1 has one predicted point.
        let names: Vec<_> = lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["x, delay=1", "pred, delay=1", "x, delay=2", "pred, delay=2"]
        );
        assert_eq!(lines[1].points, vec![(2.0, 2000.0)]);
        assert_eq!((lines[0].color, lines[1].color, lines[2].color), (0, 0, 1));
        assert!(lines[1].dashed && !lines[0].dashed);
    }
}
