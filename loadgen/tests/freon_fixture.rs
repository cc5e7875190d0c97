//! loadgen's text report against the real freon's: `interop/ozone/fixtures/freon-dn-echo-2.2.0.txt`
//! is the console output of Ozone 2.2.0's `ozone freon dn-echo`, captured under a pseudo-terminal
//! (freon prints Dropwizard's ConsoleReporter only when it has a console) by
//! `scripts/bench-vs-freon.sh --save-freon-report`. From its date banner to `Successful
//! executions:`, loadgen's report must have the same lines in the same order, with the same
//! labels, spacing and units; only the numbers (and the banner's date) may differ.

use std::process::Command;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../interop/ozone/fixtures/freon-dn-echo-2.2.0.txt"
);

/// The lines from the ConsoleReporter's date banner through `Successful executions: N`, with
/// terminal line endings and the progress bar's carriage-return redraws taken off.
fn freon_report(text: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        // A progress-bar redraw is `\r …|` pieces on one line; the report never has a `\r`.
        .filter(|l| !l.contains('\r'))
        .map(str::to_owned)
        .collect();
    let start = lines
        .iter()
        .position(|l| is_banner(l))
        .unwrap_or_else(|| panic!("no date banner in:\n{text}"));
    let end = lines
        .iter()
        .position(|l| l.starts_with("Successful executions: "))
        .unwrap_or_else(|| panic!("no `Successful executions:` line in:\n{text}"));
    assert!(start < end, "banner after the totals in:\n{text}");
    lines[start..=end].to_vec()
}

/// Dropwizard's banner: `M/D/YY, H:MM:SS AM ====…`, padded with `=` to 80 columns.
fn is_banner(line: &str) -> bool {
    line.ends_with("==========") && line.contains(", ") && line.contains('/')
}

/// Numbers become `#`; the banner keeps only its shape (its `=` run depends on the date's length,
/// its AM/PM on the hour).
fn mask(line: &str) -> String {
    if is_banner(line) {
        assert_eq!(
            line.chars().count(),
            80,
            "banner not 80 columns wide: {line:?}"
        );
        return "#/#/#, #:#:# ## ====".into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_fixture_is_a_real_freon_capture() {
    let text = std::fs::read_to_string(FIXTURE).expect("the freon fixture is in the repository");
    let report = freon_report(&text);
    // What makes it a real capture: the terminal's CRLF line endings, the progress bar, and
    // freon's own totals.
    assert!(text.contains("\r\n"), "not captured on a terminal");
    assert!(text.contains("Time: "), "no progress bar");
    assert!(report.iter().any(|l| l == "rpc-payload"));
    assert!(
        report
            .iter()
            .any(|l| l.starts_with("Total execution time (sec): "))
    );
}

#[test]
fn loadgen_echo_prints_freons_report_line_for_line() {
    let freon = freon_report(&std::fs::read_to_string(FIXTURE).unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["echo", "-n", "2000", "-t", "4"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ours = freon_report(&stdout);
    let freon_masked: Vec<String> = freon.iter().map(|l| mask(l)).collect();
    let ours_masked: Vec<String> = ours.iter().map(|l| mask(l)).collect();
    for (i, (f, o)) in freon_masked.iter().zip(&ours_masked).enumerate() {
        assert_eq!(
            o,
            f,
            "line {} of the report differs from freon's\nfreon:   {:?}\nloadgen: {:?}",
            i + 1,
            freon[i],
            ours[i]
        );
    }
    assert_eq!(
        ours_masked.len(),
        freon_masked.len(),
        "loadgen's report has {} lines from banner to totals, freon's {}:\n{}",
        ours.len(),
        freon.len(),
        ours.join("\n")
    );
    // The label column: every `name = value` line puts its `=` in the same column as freon's.
    for (f, o) in freon.iter().zip(&ours) {
        assert_eq!(f.find(" = "), o.find(" = "), "{f:?} vs {o:?}");
        assert_eq!(f.find(" <= "), o.find(" <= "), "{f:?} vs {o:?}");
    }
}

#[test]
fn masking_keeps_labels_and_units() {
    assert_eq!(
        mask("         mean rate = 1225.24 calls/second"),
        "         mean rate = # calls/second"
    );
    assert_eq!(
        mask("            99.9% <= 155.38 milliseconds"),
        "            #% <= # milliseconds"
    );
    assert_eq!(
        mask(&format!("12/1/26, 10:54:30 AM {}", "=".repeat(59))),
        "#/#/#, #:#:# ## ===="
    );
}
