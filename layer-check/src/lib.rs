//! Dev-only support for the crates' `tests/layers.rs`: reads a crate's `src/` as text, whole files
//! (test modules included), and finds every module path the code names through `crate::`,
//! `super::` or `self::`, resolved to a path from the crate root (`super::` counts from the
//! module it is written in, inline `mod NAME { … }` blocks included). On those the tests check
//! path rules ([`check_rooms`]: a folder uses only the folders below it), layer tables
//! ([`check`]) and that modules form no import cycle ([`cycles`]).
//!
//! Text, not a parser: comments, string and character literals are skipped, `use` trees with
//! groups are expanded; that is all the crates write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, top first: a module may use the modules of the layers after its own.
pub type Layers<'a> = &'a [&'a [&'a str]];

/// One path named in the code: where (the file, the module the text is in) and what it resolves
/// to, from the crate root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    /// The file, relative to `src/`.
    pub file: PathBuf,
    /// The module path of the code that names it (`[]` is the crate root).
    pub from: Vec<String>,
    /// The path named, from the crate root.
    pub to: Vec<String>,
}

/// The layer index of `module`, or `None` when it is in no layer.
pub fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
}

/// The module path of a file below `src`: `a/b.rs` → `[a, b]`, `a/mod.rs` → `[a]`, `lib.rs` and
/// `main.rs` → `[]`.
pub fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
            parts.push(stem.to_string());
        }
    }
    parts
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

/// Every path every file of `src` names (see [`source_uses`]).
pub fn crate_uses(src: &Path) -> Vec<Use> {
    let mut out = Vec::new();
    for f in rust_files(src) {
        let rel = f.strip_prefix(src).expect("below src").to_path_buf();
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (from, to) in source_uses(&module_path(&rel), &text) {
            out.push(Use {
                file: rel.clone(),
                from,
                to,
            });
        }
    }
    out
}

/// The paths a file of module `module` names, each as (the module the text is in, the path from
/// the crate root). Paths through `super::` past the crate root are dropped (the compiler
/// rejects them anyway).
pub fn source_uses(module: &[String], text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let code = strip(text);
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    // Inline modules open at a brace depth: (name, depth inside its braces).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == b'}' {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
            continue;
        }
        if !is_ident_start(c) || (i > 0 && is_ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let word_end = ident_end(bytes, i);
        let word = &code[i..word_end];
        if word == "mod" {
            let name_start = skip_ws(bytes, word_end);
            let name_end = ident_end(bytes, name_start);
            let after = skip_ws(bytes, name_end);
            if name_end > name_start && bytes.get(after) == Some(&b'{') {
                inline.push((code[name_start..name_end].to_string(), depth + 1));
                depth += 1;
                i = after + 1;
                continue;
            }
        }
        if matches!(word, "crate" | "super" | "self") && code[word_end..].starts_with("::") {
            let here: Vec<String> = module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(n, _)| n.clone()))
                .collect();
            let (paths, end) = parse_tree(&code, i);
            for p in paths {
                if let Some(abs) = resolve(&here, &p) {
                    out.push((here.clone(), abs));
                }
            }
            i = end.max(word_end);
            continue;
        }
        i = word_end;
    }
    out
}

/// `crate::a`, `super::super::b`, `self::c` → a path from the crate root.
fn resolve(here: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") | Some("super") => here.to_vec(),
        _ => return None,
    };
    let mut rest = path;
    if rest.first().is_some_and(|s| s == "crate" || s == "self") {
        rest = &rest[1..];
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Parses a path or `use` tree starting at `start` (`a::b::{c, d::{e}}`, `a::*`): every full path,
/// and where it ends.
fn parse_tree(code: &str, start: usize) -> (Vec<Vec<String>>, usize) {
    let bytes = code.as_bytes();
    let mut prefix = Vec::new();
    let mut i = skip_ws(bytes, start);
    loop {
        let end = ident_end(bytes, i);
        if end == i {
            break;
        }
        prefix.push(code[i..end].to_string());
        let j = skip_ws(bytes, end);
        if !code[j..].starts_with("::") {
            return (vec![prefix], end);
        }
        i = skip_ws(bytes, j + 2);
        match bytes.get(i) {
            Some(b'*') => return (vec![prefix], i + 1),
            Some(b'{') => {
                let mut out = Vec::new();
                i += 1;
                loop {
                    i = skip_ws(bytes, i);
                    match bytes.get(i) {
                        Some(b'}') | None => return (out, i + 1),
                        Some(b',') => i += 1,
                        _ => {
                            let (inner, end) = parse_tree(code, i);
                            if end <= i {
                                return (out, i + 1);
                            }
                            for p in inner {
                                out.push(prefix.iter().cloned().chain(p).collect());
                            }
                            i = end;
                            // `name as alias`
                            let j = skip_ws(bytes, i);
                            if code[j..].starts_with("as ") {
                                i = ident_end(bytes, skip_ws(bytes, j + 3));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    (vec![prefix], i)
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn ident_end(bytes: &[u8], mut i: usize) -> usize {
    if i < bytes.len() && is_ident_start(bytes[i]) {
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
    }
    i
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The code with comments, string literals and character literals blanked (braces and paths in
/// them are not code).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut nest = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        nest += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        nest -= 1;
                        i += 2;
                        if nest == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(b' ');
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !is_ident(b[i - 1])) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                j += 1;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.extend_from_slice(b"\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.extend_from_slice(b"\"\"");
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{7b}') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    let mut j = i + 2;
                    while j < b.len() && b[j] != b'\'' {
                        j += 1;
                    }
                    i = j + 1;
                    out.extend_from_slice(b"' '");
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                    out.extend_from_slice(b"' '");
                } else {
                    let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    if b.get(i + 1 + ch_len) == Some(&b'\'') {
                        i += 2 + ch_len;
                        out.extend_from_slice(b"' '");
                    } else {
                        out.push(b'\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Path rules between folders: `rooms`, top first, may each use only themselves and the rooms
/// after them; `roots` are the top-level modules above every room (the binary's front: they may
/// use anything). Every top-level module must be a room or a root, and every path a room names
/// must lead into a room (not around the rules through a re-export at the crate root). One line
/// per breach.
pub fn check_rooms(uses: &[Use], rooms: &[&str], roots: &[&str]) -> Vec<String> {
    let rank = |m: &str| rooms.iter().position(|r| *r == m);
    let mut problems = BTreeSet::new();
    for u in uses {
        let Some(top) = u.from.first() else { continue };
        if roots.contains(&top.as_str()) {
            continue;
        }
        let Some(mine) = rank(top) else {
            problems.insert(format!("{}: module {top} is in no room", u.file.display()));
            continue;
        };
        let Some(target) = u.to.first() else { continue };
        match rank(target) {
            Some(r) if r >= mine => {}
            Some(_) => {
                problems.insert(format!(
                    "{}: {top}/ uses {}, which is above it",
                    u.file.display(),
                    u.to.join("::")
                ));
            }
            None => {
                problems.insert(format!(
                    "{}: {top}/ uses crate::{}, which is in no room",
                    u.file.display(),
                    u.to.join("::")
                ));
            }
        }
    }
    problems.into_iter().collect()
}

/// The module of `path` at `depth` segments (shorter paths as they are).
fn unit(path: &[String], depth: usize) -> Vec<String> {
    path.iter().take(depth).cloned().collect()
}

/// Import cycles between the modules `depth` segments deep (`1`: top-level modules; `2`:
/// `room::module`): each cycle once, as `a -> b -> a`. A module using its own submodules or its
/// parent is no cycle; a module only names an item of a module's own file or of one of its
/// children, so depth-`depth` units are what the layering is about.
pub fn cycles(uses: &[Use], depth: usize) -> Vec<String> {
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for u in uses {
        let (a, b) = (unit(&u.from, depth), unit(&u.to, depth));
        if a.is_empty() || b.is_empty() || a == b || a.starts_with(&b) || b.starts_with(&a) {
            continue;
        }
        graph.entry(a).or_default().insert(b);
    }
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        // Depth-first search for a path back to `start` through nodes greater than it, so each
        // cycle is reported once, from its smallest node.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if next == start {
                    let names: Vec<String> = path
                        .iter()
                        .chain(std::iter::once(start))
                        .map(|p| p.join("::"))
                        .collect();
                    found.insert(names.join(" -> "));
                } else if next > start && seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// What [`check`] found: how many files it checked and every breach, one line each.
pub struct Report {
    pub checked: usize,
    pub problems: Vec<String>,
}

/// Checks every file of `src` (but the crate roots `lib.rs` and `main.rs`, which declare and
/// dispatch to every module) against `layers`: a top-level module may use only itself and the
/// modules of lower layers, in its tests too.
pub fn check(src: &Path, layers: Layers) -> Report {
    let uses = crate_uses(src);
    let mut checked = BTreeSet::new();
    let mut problems = BTreeSet::new();
    for u in &uses {
        let Some(top) = u.from.first() else { continue };
        let Some(mine) = layer_of(layers, top) else {
            problems.insert(format!("{}: module {top} is in no layer", u.file.display()));
            continue;
        };
        checked.insert(u.file.clone());
        let Some(used) = u.to.first() else { continue };
        if used == top {
            continue;
        }
        match layer_of(layers, used) {
            Some(l) if l > mine => {}
            Some(_) => {
                problems.insert(format!(
                    "{}: {top} uses {used}, which is not below it",
                    u.file.display()
                ));
            }
            None => {
                problems.insert(format!(
                    "{}: uses crate::{used}, which is in no layer",
                    u.file.display()
                ));
            }
        }
    }
    // A file that names nothing of the crate is checked too (it cannot breach a layer), but it
    // must still be in a layer.
    for f in rust_files(src) {
        let rel = f.strip_prefix(src).expect("below src").to_path_buf();
        let module = module_path(&rel);
        if let Some(top) = module.first() {
            if layer_of(layers, top).is_some() {
                checked.insert(rel);
            } else {
                problems.insert(format!("{}: module {top} is in no layer", rel.display()));
            }
        }
    }
    Report {
        checked: checked.len(),
        problems: problems.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(module: &[&str], text: &str) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        source_uses(&module, text)
            .into_iter()
            .map(|(_, to)| to.join("::"))
            .collect()
    }

    #[test]
    fn the_scanner_sees_groups_super_and_test_modules() {
        let text = r#"
use crate::{store, admission::{a, b as c}, pool::X};
fn f() { crate::cli::x(); let s = "crate::fake"; let c = '{'; }
// crate::commented
/* crate::blocked */
#[cfg(test)]
mod tests {
    use super::*;
    use super::super::net::tls;
}
use self::inner::Y;
"#;
        assert_eq!(
            paths(&["datanode", "keyvalue"], text),
            [
                "store",
                "admission::a",
                "admission::b",
                "pool::X",
                "cli::x",
                "datanode::keyvalue",
                "datanode::net::tls",
                "datanode::keyvalue::inner::Y",
            ]
        );
    }

    #[test]
    fn module_paths_of_files() {
        assert_eq!(module_path(Path::new("lib.rs")), Vec::<String>::new());
        assert_eq!(module_path(Path::new("a/mod.rs")), ["a"]);
        assert_eq!(module_path(Path::new("a/b.rs")), ["a", "b"]);
    }

    #[test]
    fn rooms_breached_upwards_and_around_are_reported() {
        let u = |file: &str, text: &str| -> Vec<Use> {
            let rel = PathBuf::from(file);
            source_uses(&module_path(&rel), text)
                .into_iter()
                .map(|(from, to)| Use {
                    file: rel.clone(),
                    from,
                    to,
                })
                .collect()
        };
        let mut uses = u(
            "low/a.rs",
            "use crate::low::b; mod tests { use super::super::super::high::X; }",
        );
        uses.extend(u("high/mod.rs", "use crate::low::a;"));
        uses.extend(u("low/c.rs", "use crate::Config;"));
        uses.extend(u("cli.rs", "use crate::high::Y;"));
        let problems = check_rooms(&uses, &["high", "low"], &["cli"]);
        assert_eq!(
            problems,
            [
                format!(
                    "{}: low/ uses high::X, which is above it",
                    Path::new("low/a.rs").display()
                ),
                format!(
                    "{}: low/ uses crate::Config, which is in no room",
                    Path::new("low/c.rs").display()
                ),
            ]
        );
    }

    #[test]
    fn a_cycle_is_found_once() {
        let mk = |from: &str, to: &str| Use {
            file: PathBuf::from("x.rs"),
            from: from.split("::").map(String::from).collect(),
            to: to.split("::").map(String::from).collect(),
        };
        let uses = [
            mk("r::a", "r::b::X"),
            mk("r::b", "r::c::Y"),
            mk("r::c::inner", "r::a::Z"),
            mk("r::a", "r::a::own"),
            mk("r::d", "r::a"),
        ];
        assert_eq!(cycles(&uses, 2), ["r::a -> r::b -> r::c -> r::a"]);
        assert!(cycles(&uses[..2], 2).is_empty());
    }

    #[test]
    fn an_upward_use_and_an_unlayered_module_are_reported() {
        let dir = std::env::temp_dir().join(format!("layer-check-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("low")).unwrap();
        std::fs::write(dir.join("lib.rs"), "mod high; mod low;").unwrap();
        std::fs::write(dir.join("high.rs"), "use crate::low::X;").unwrap();
        std::fs::write(
            dir.join("low").join("mod.rs"),
            "use crate::stray;\n#[cfg(test)]\nmod tests { use crate::high; }",
        )
        .unwrap();
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
