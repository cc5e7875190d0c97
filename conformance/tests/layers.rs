//! The runner's modules import no cycle (ARCHITECTURE.md): the runner makes outcomes, the report
//! prints them, and the report knows nothing of the runner. Read from whole files with their
//! test modules (`layer-check`).

use std::path::Path;

#[test]
fn modules_import_no_cycle() {
    let uses = layer_check::crate_uses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(uses.len() > 30, "only {} paths found", uses.len());
    let cycles = layer_check::cycles(&uses, 1);
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn the_report_does_not_use_the_runner() {
    let uses = layer_check::crate_uses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let upward: Vec<String> = uses
        .iter()
        .filter(|u| u.from.first().is_some_and(|m| m == "report"))
        .filter(|u| u.to.first().is_some_and(|m| m == "runner" || m == "cli"))
        .map(|u| format!("{}: {}", u.file.display(), u.to.join("::")))
        .collect();
    assert!(upward.is_empty(), "{}", upward.join("\n"));
}
