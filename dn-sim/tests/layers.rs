//! dn-sim's module layers (ARCHITECTURE.md) hold: each module of `dn-sim/src` uses (`crate::…`,
//! outside its tests) only modules of lower layers, or its own submodules, so there are no import
//! cycles; and the DataNode's own parts (dispatcher → keyvalue → store, and what they use) know
//! nothing of the simulation around them (admission: limits, pool, delays, faults, disk,
//! budgets, connection limits, TLS).

use std::collections::BTreeSet;
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
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level modules a source file names as `crate::NAME` (its tests and comments left out).
fn uses(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first segment of each item at depth 0.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(first_segment(&item));
        } else {
            out.insert(first_segment(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn first_segment(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn modules_use_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue; // the crate root declares and dispatches to every module
        }
        let Some(mine) = layer_of(&top) else {
            problems.push(format!("{}: module {top} is in no layer", rel.display()));
            continue;
        };
        checked += 1;
        for used in uses(&std::fs::read_to_string(f).unwrap()) {
            if used == top || ["self", "super"].contains(&used.as_str()) {
                continue;
            }
            match layer_of(&used) {
                Some(l) if l > mine => {}
                Some(_) => problems.push(format!(
                    "{}: {top} uses {used}, which is not below it",
                    rel.display()
                )),
                None => problems.push(format!(
                    "{}: uses crate::{used}, which is in no layer",
                    rel.display()
                )),
            }
        }
    }
    assert!(checked > 30, "only {checked} files checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_and_nested_uses() {
    let u = uses(
        "use crate::{store, admission::{a, b}, pool::X};\nfn f() { crate::cli::x() }\n// crate::server\n#[cfg(test)]\nuse crate::tls;",
    );
    let v: Vec<&str> = u.iter().map(String::as_str).collect();
    assert_eq!(v, ["admission", "cli", "pool", "store"]);
}

#[test]
fn the_datanode_knows_nothing_of_the_simulation_around_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for module in DATANODE {
        let file = src.join(format!("{module}.rs"));
        let files = if file.exists() {
            vec![file]
        } else {
            std::fs::read_dir(src.join(module))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect()
        };
        for f in files {
            for used in uses(&std::fs::read_to_string(&f).unwrap()) {
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
