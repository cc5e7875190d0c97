//! Dev-only support for the crates' `tests/layers.rs`: reads a crate's `src/` as text and checks
//! that its top-level modules form the layers ARCHITECTURE.md states. A module may use
//! (`crate::NAME`, outside its tests and comments) only modules of lower layers, or its own
//! submodules, so there are no import cycles. Text, not a parser: `use crate::{a, b::{c}}` groups,
//! paths in expressions and `#[cfg(test)]` tails are understood; that is all the crates write.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Layers, top first: a module may use the modules of the layers after its own.
pub type Layers<'a> = &'a [&'a [&'a str]];

/// The layer index of `module`, or `None` when it is in no layer.
pub fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
}

/// The top-level modules a source file names as `crate::NAME` (its tests and comments left out).
pub fn uses(source: &str) -> BTreeSet<String> {
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

/// Every `.rs` file below `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in entries {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// The files of one top-level module: `src/NAME.rs` and everything below `src/NAME/`.
pub fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        files.push(file);
    }
    let dir = src.join(module);
    if dir.is_dir() {
        files.extend(rust_files(&dir));
    }
    files
}

/// What [`check`] found: how many files it checked and every breach, one line each.
pub struct Report {
    pub checked: usize,
    pub problems: Vec<String>,
}

/// Checks every file of `src` (but the crate roots `lib.rs` and `main.rs`, which declare and
/// dispatch to every module) against `layers`.
pub fn check(src: &Path, layers: Layers) -> Report {
    let mut report = Report {
        checked: 0,
        problems: Vec::new(),
    };
    for f in rust_files(src) {
        let rel = f.strip_prefix(src).expect("below src");
        let top = rel
            .components()
            .next()
            .expect("a path below src")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(mine) = layer_of(layers, &top) else {
            report
                .problems
                .push(format!("{}: module {top} is in no layer", rel.display()));
            continue;
        };
        report.checked += 1;
        let source = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for used in uses(&source) {
            if used == top || ["self", "super"].contains(&used.as_str()) {
                continue;
            }
            match layer_of(layers, &used) {
                Some(l) if l > mine => {}
                Some(_) => report.problems.push(format!(
                    "{}: {top} uses {used}, which is not below it",
                    rel.display()
                )),
                None => report.problems.push(format!(
                    "{}: uses crate::{used}, which is in no layer",
                    rel.display()
                )),
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scanner_sees_grouped_and_nested_uses() {
        let u = uses(
            "use crate::{store, admission::{a, b}, pool::X};\nfn f() { crate::cli::x() }\n// crate::server\n#[cfg(test)]\nuse crate::tls;",
        );
        let v: Vec<&str> = u.iter().map(String::as_str).collect();
        assert_eq!(v, ["admission", "cli", "pool", "store"]);
    }

    #[test]
    fn an_upward_use_and_an_unlayered_module_are_reported() {
        let dir = std::env::temp_dir().join(format!("layer-check-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("low")).unwrap();
        std::fs::write(dir.join("lib.rs"), "mod high; mod low;").unwrap();
        std::fs::write(dir.join("high.rs"), "use crate::low::X;").unwrap();
        std::fs::write(dir.join("low").join("mod.rs"), "use crate::{high, stray};").unwrap();
        let report = check(&dir, &[&["high"], &["low"]]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(report.checked, 2);
        assert_eq!(
            report.problems,
            [
                format!(
                    "{}: low uses high, which is not below it",
                    Path::new("low/mod.rs").display()
                ),
                format!(
                    "{}: uses crate::stray, which is in no layer",
                    Path::new("low/mod.rs").display()
                ),
            ]
        );
    }
}
