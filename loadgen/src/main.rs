use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match loadgen::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line: clap's first, joined with the next when it ends in a colon
            // ("required arguments were not provided: <FILE>...").
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut line = lines.next().unwrap_or("invalid arguments").to_string();
            if line.ends_with(':')
                && let Some(next) = lines.next()
            {
                line = format!("{line} {next}");
            }
            eprintln!("loadgen: {line}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Some(outcome) = loadgen::run_tool(&cli) {
        return match outcome {
            Ok(out) => {
                let _ = write!(std::io::stdout().lock(), "{}", out.stdout);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }
    match loadgen::run(cli) {
        Ok(summary) => print(&summary),
        Err(e) => fail(e),
    }
}

/// Prints a finished run's report and notes, then one line per output it could not write
/// (`loadgen: could not write the report to PATH: …`); exit code 0 when every request succeeded
/// and every output was written, else 1.
fn print(summary: &loadgen::Summary) -> ExitCode {
    let mut out = std::io::stdout().lock();
    // A closed pipe (loadgen … | head) is not an error worth a message.
    let _ = write!(out, "{}", summary.stdout());
    if let Some(path) = &summary.written_to {
        eprintln!("loadgen: report written to {}", path.display());
    }
    let integrity = summary.results.integrity_errors();
    if integrity > 0 {
        eprintln!(
            "loadgen: {integrity} data-integrity error(s): data read back does not match its checksums"
        );
    }
    for f in &summary.unwritten {
        eprintln!("loadgen: {f}");
    }
    ExitCode::from(summary.exit_code())
}

/// One line on stderr (`loadgen: error: …`) and the error's exit code (docs/loadgen.md).
fn fail(e: loadgen::Error) -> ExitCode {
    eprintln!("loadgen: error: {e}");
    ExitCode::from(e.exit_code())
}
