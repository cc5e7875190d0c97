//! The module layers of ARCHITECTURE.md hold: each module of `loadgen/src` uses (`crate::…` and
//! `super::` paths, in its tests too) only modules of lower layers, or its own submodules. So there are no import
//! cycles, and the domain and the workloads know no flags.

use std::path::Path;

/// Layers, top first: a module may use the modules of the layers after its own.
const LAYERS: &[&[&str]] = &[
    &["calibrate"],
    &["merge", "sweep"],
    &["plot"],
    &["run"],
    &["report", "embedded"],
    &["results"],
    &["engine"],
    &["config"],
    &["cli"],
    &["manifest"],
    &["workload"],
    &["connection"],
    &["outcome"],
    &["retry", "throttle", "schedule", "shard", "cpu", "error"],
];

#[test]
fn modules_use_only_lower_layers() {
    let report = layer_check::check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LAYERS);
    assert!(report.checked > 30, "only {} files checked", report.checked);
    assert!(report.problems.is_empty(), "{}", report.problems.join("\n"));
}

#[test]
fn submodules_import_no_cycle() {
    let uses = layer_check::crate_uses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let cycles = layer_check::cycles(&uses, 2);
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}
