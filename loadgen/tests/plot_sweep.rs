//! `loadgen plot` and `loadgen sweep`: charts are valid SVG with their title and axis labels; a
//! sweep's dn-sim parameters really change the embedded dn-sim; bad flags exit 2 on one line.

mod support;

use clap::Parser;
use loadgen::cli::Cli;
use loadgen::plot::Table;

fn tool(args: &[&str]) -> Result<loadgen::ToolOutput, loadgen::Error> {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run_tool(&Cli::try_parse_from(argv).expect("valid flags")).expect("a tool command")
}

fn assert_svg(path: &std::path::Path, texts: &[&str]) {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    for t in texts {
        assert!(svg.contains(t), "'{t}' missing from {}", path.display());
    }
}

#[test]
fn plot_draws_csv_columns_with_title_axis_labels_and_legend() {
    let dir = tempdir("plot");
    let csv = dir.join("t.csv");
    std::fs::write(
        &csv,
        "handlers,delay,calls,predicted\n1,1,950,1000\n2,1,1900,2000\n4,1,3500,4000\n1,2,490,500\n2,2,980,1000\n4,2,1800,2000\n",
    )
    .unwrap();
    let svg = dir.join("t.svg");
    tool(&[
        "plot",
        "--csv",
        csv.to_str().unwrap(),
        "--x",
        "handlers",
        "--y",
        "calls,predicted",
        "--series",
        "delay",
        "--dashed",
        "predicted",
        "--title",
        "Chart title here",
        "--x-label",
        "handlers (count)",
        "--y-label",
        "throughput (calls/s)",
        "--log-x",
        "-o",
        svg.to_str().unwrap(),
    ])
    .unwrap();
    assert_svg(
        &svg,
        &[
            "Chart title here",
            "handlers (count)",
            "throughput (calls/s)",
            "calls, delay=2",
            "predicted, delay=1",
        ],
    );
    // An unknown column names the columns there are.
    let e = tool(&[
        "plot",
        "--csv",
        csv.to_str().unwrap(),
        "--x",
        "nope",
        "--y",
        "calls",
    ])
    .err()
    .unwrap();
    let text = e.to_string();
    assert!(
        text.contains("no column 'nope'") && text.contains("handlers"),
        "{text}"
    );
    assert_eq!(e.exit_code(), 2, "a bad flag: {text}");
}

#[test]
fn plot_of_a_json_result_shows_the_percentile_spectrum_and_the_series() {
    let dir = tempdir("plot-json");
    let json = dir.join("r.json");
    let mut argv = vec!["loadgen"];
    argv.extend([
        "echo",
        "--duration",
        "600ms",
        "--report-interval",
        "100ms",
        "-t",
        "2",
        "--format",
        "json",
        "--output",
        json.to_str().unwrap(),
    ]);
    loadgen::run(Cli::try_parse_from(argv).unwrap()).unwrap();
    tool(&["plot", json.to_str().unwrap()]).unwrap();
    assert_svg(
        &dir.join("r.svg"),
        &[
            "latency by percentile",
            "percentile (%)",
            "latency (ms)",
            "throughput (calls/s)",
            "99.9",
        ],
    );
}

#[test]
fn sweep_sets_dn_sim_parameters_and_writes_a_row_per_cell() {
    let dir = tempdir("sweep");
    let prefix = dir.join("s");
    let out = tool(&[
        "sweep",
        "--param",
        "delay=20ms",
        "--param",
        "handler_count=1,4",
        "--out",
        prefix.to_str().unwrap(),
        "--",
        "echo",
        "-t",
        "8",
        "--clients",
        "2",
        "--duration",
        "300ms",
    ])
    .unwrap();
    let table =
        Table::parse(&std::fs::read_to_string(prefix.with_extension("csv")).unwrap()).unwrap();
    assert_eq!(table.rows.len(), 2, "{table:?}");
    let col = |row: usize, name: &str| -> f64 {
        table.rows[row][table.column(name).unwrap()]
            .parse()
            .unwrap()
    };
    assert_eq!(
        (col(0, "handler_count"), col(1, "handler_count")),
        (1.0, 4.0)
    );
    // 1 handler holding each echo 20 ms serves ~50/s; 4 handlers ~200/s (8 outstanding).
    let (one, four) = (
        col(0, "throughput_calls_per_s"),
        col(1, "throughput_calls_per_s"),
    );
    assert!(four > 2.0 * one, "1 handler: {one}/s, 4 handlers: {four}/s");
    assert_eq!(col(1, "littles_law_calls_per_s"), 200.0);
    assert!(
        out.stdout
            .starts_with("| echo delay (ms) | handlers | throughput (calls/s) |")
    );
    assert_eq!(out.stdout.lines().count(), 4, "{}", out.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(prefix.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(json["cells"].as_array().unwrap().len(), 2);
    assert_svg(
        &prefix.with_extension("svg"),
        &["handlers", "throughput (calls/s)", "Little&apos;s law"],
    );
}

#[test]
fn a_sweep_over_ratis_runs_its_cells_on_the_embedded_dn_sim_s_ratis_port() {
    let dir = tempdir("sweep-ratis");
    let prefix = dir.join("s");
    tool(&[
        "sweep",
        "--param",
        "delay=20ms",
        "--param",
        "handler_count=1,4",
        "--out",
        prefix.to_str().unwrap(),
        "--",
        "echo",
        "--ratis",
        "-t",
        "8",
        "--clients",
        "2",
        "--duration",
        "300ms",
    ])
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(prefix.with_extension("json")).unwrap())
            .unwrap();
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let mut rates = Vec::new();
    for cell in cells {
        let result = &cell["result"];
        assert_eq!(result["config"]["stream_mode"], "ratis", "{result}");
        assert_eq!(result["errors"], serde_json::json!([]), "{result}");
        let measured = &cell["measured"];
        assert_eq!(measured["errors"], "0", "{measured}");
        assert!(
            measured["requests"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > 0
        );
        rates.push(
            measured["throughput_calls_per_s"]
                .as_str()
                .unwrap()
                .parse::<f64>()
                .unwrap(),
        );
    }
    // Raft writes to one container are applied one at a time, whatever the gRPC handler pool:
    // 20 ms echoes answer at most 50/s in both cells, where the gRPC port's 4 handlers serve
    // ~200/s (the test above).
    let (one, four) = (rates[0], rates[1]);
    assert!(
        one <= 55.0 && four <= 55.0,
        "1 handler: {one}/s, 4: {four}/s"
    );
    assert!(four < 2.0 * one, "1 handler: {one}/s, 4 handlers: {four}/s");
}

#[test]
fn bad_plot_and_sweep_flags_exit_2_with_one_line() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["plot"], "RESULT.json"),
        (vec!["plot", "--csv", "x.csv"], "--x"),
        (
            vec![
                "plot",
                "--csv",
                "/nonexistent/x.csv",
                "--x",
                "a",
                "--y",
                "b",
            ],
            "x.csv",
        ),
        (vec!["plot", "r.json", "--size", "big"], "--size"),
        (vec!["sweep", "--", "echo"], "--param"),
        (
            vec!["sweep", "--param", "handlers=1,2", "--", "echo"],
            "unknown parameter",
        ),
        (
            vec!["sweep", "--param", "threads=0", "--", "echo"],
            "threads",
        ),
        (
            vec!["sweep", "--param", "delay=soon", "--", "echo"],
            "delay",
        ),
        (
            vec!["sweep", "--param", "threads=1", "--", "echo", "--bogus"],
            "--bogus",
        ),
        (
            vec![
                "sweep",
                "--target",
                "127.0.0.1:1",
                "--param",
                "handler_count=1",
                "--",
                "echo",
            ],
            "--admin",
        ),
        (
            vec![
                "sweep",
                "--param",
                "threads=1",
                "--y",
                "speed",
                "--",
                "echo",
            ],
            "speed",
        ),
    ];
    for (args, needle) in cases {
        support::assert_usage_error(&args, needle);
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("loadgen-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
