//! `loadgen plot`'s flags.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// A JSON result (`loadgen echo --format json --output FILE`): latency by percentile,
    /// throughput and latency per interval.
    #[arg(
        value_name = "RESULT.json",
        required_unless_present = "csv",
        conflicts_with = "csv"
    )]
    pub result: Option<PathBuf>,

    /// Plot columns of a CSV file (with a header line) instead; needs --x and --y.
    #[arg(long, value_name = "FILE", requires_all = ["x", "y"])]
    pub csv: Option<PathBuf>,

    /// CSV: the x column (numbers, or else categories in order of appearance).
    #[arg(long, value_name = "COL")]
    pub x: Option<String>,

    /// CSV: the y column(s), comma separated; empty cells are skipped.
    #[arg(long, value_name = "COL[,COL]", value_delimiter = ',')]
    pub y: Vec<String>,

    /// CSV: column(s) whose values split the rows into lines (one line per value, per y column).
    #[arg(long, value_name = "COL[,COL]", value_delimiter = ',')]
    pub series: Vec<String>,

    /// CSV: y column(s) drawn dashed, in the color of their series (e.g. a prediction).
    #[arg(long, value_name = "COL[,COL]", value_delimiter = ',')]
    pub dashed: Vec<String>,

    /// CSV: only the rows where COL has VALUE (repeatable).
    #[arg(long = "where", value_name = "COL=VALUE", value_parser = parse_filter)]
    pub filter: Vec<(String, String)>,

    /// Chart title [default: the file name].
    #[arg(long)]
    pub title: Option<String>,

    /// x axis label, with its unit [default: the column name].
    #[arg(long)]
    pub x_label: Option<String>,

    /// y axis label, with its unit [default: the column name(s)].
    #[arg(long)]
    pub y_label: Option<String>,

    /// Logarithmic x axis (base 2: ticks at 1, 2, 4, 8 …).
    #[arg(long)]
    pub log_x: bool,

    /// Logarithmic y axis.
    #[arg(long)]
    pub log_y: bool,

    /// The SVG file to write [default: the input's name with .svg].
    #[arg(short = 'o', long, value_name = "FILE.svg")]
    pub output: Option<PathBuf>,

    /// Size of one chart panel in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "900x520", value_parser = parse_size)]
    pub size: (u32, u32),
}

fn parse_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((c, v)) if !c.is_empty() => Ok((c.to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not COL=VALUE")),
    }
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not WIDTHxHEIGHT (e.g. 900x520)");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h): (u32, u32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if !(200..=10_000).contains(&w) || !(150..=10_000).contains(&h) {
        return Err(format!("{s}: width 200–10000, height 150–10000"));
    }
    Ok((w, h))
}
