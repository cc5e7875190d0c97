//! dn-sim's module layers (ARCHITECTURE.md) hold: each module of `dn-sim/src` uses (`crate::…`,
//! outside its tests) only modules of lower layers, or its own submodules, so there are no import
//! cycles; and the DataNode's own parts (dispatcher → keyvalue → store, and what they use) know
//! nothing of the simulation around them (admission: limits, pool, delays, faults, disk,
//! budgets, connection limits, TLS).

use std::path::Path;

/// Layers, top first: a module may use the modules of the layers after its own.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["server"],
    &["admin", "health"],
    &["service"],
    &["admission"],
    &["inflight", "settings"],
    &["dispatcher"],
    &["keyvalue"],
    &["metrics", "service_limits", "disk"],
    &["store", "payload", "envelope", "timer"],
    &[
        "fault",
        "containers",
        "pool",
        "connections",
        "tls",
        "reset",
        "rng",
        "limits",
    ],
    &["delay"],
    &["target", "version"],
];

/// The DataNode's own parts, below the service.
const DATANODE: &[&str] = &[
    "dispatcher",
    "keyvalue",
    "envelope",
    "payload",
    "store",
    "containers",
    "version",
];

/// The simulation around the DataNode (`metrics` and `timer` are shared by both sides: the
/// DataNode's own metrics and the handler's clock).
const ADMISSION: &[&str] = &[
    "admission",
    "inflight",
    "settings",
    "service_limits",
    "limits",
    "pool",
    "delay",
    "fault",
    "disk",
    "connections",
    "tls",
    "reset",
    "rng",
    "target",
];

fn layer_of(module: &str) -> Option<usize> {
    layer_check::layer_of(LAYERS, module)
}

#[test]
fn modules_use_only_lower_layers() {
    let report = layer_check::check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LAYERS);
    assert!(report.checked > 30, "only {} files checked", report.checked);
    assert!(report.problems.is_empty(), "{}", report.problems.join("\n"));
}

#[test]
fn the_datanode_knows_nothing_of_the_simulation_around_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for module in DATANODE {
        let files = layer_check::module_files(&src, module);
        assert!(!files.is_empty(), "no source for {module}");
        for f in files {
            for used in layer_check::uses(&std::fs::read_to_string(&f).unwrap()) {
                if ADMISSION.contains(&used.as_str()) {
                    problems.push(format!("{}: {module} uses {used}", f.display()));
                }
            }
        }
    }
    for m in DATANODE.iter().chain(ADMISSION) {
        assert!(layer_of(m).is_some(), "{m} is in no layer");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
