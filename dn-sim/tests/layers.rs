//! dn-sim's folders are its layers (ARCHITECTURE.md): `net/` (what serves the DataNode) uses
//! `sim/` and `datanode/`; `sim/` (the simulation around the DataNode) uses `datanode/`;
//! `datanode/` (the DataNode's own parts) uses neither. Only the binary's front (`cli`, and the
//! crate roots) sits above them. Read from whole files, test modules and `super::` paths
//! included; and no two modules import each other, directly or around a cycle.

use std::path::Path;

const ROOMS: &[&str] = &["net", "sim", "datanode"];
const ROOTS: &[&str] = &["cli"];

fn uses() -> Vec<layer_check::Use> {
    layer_check::crate_uses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn each_folder_uses_only_the_folders_below_it() {
    let uses = uses();
    assert!(uses.len() > 200, "only {} paths found", uses.len());
    for room in ROOMS {
        assert!(
            uses.iter()
                .any(|u| u.from.first().map(String::as_str) == Some(room)),
            "nothing found in {room}/"
        );
    }
    let problems = layer_check::check_rooms(&uses, ROOMS, ROOTS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn modules_import_no_cycle() {
    let uses = uses();
    let mut problems = layer_check::cycles(&uses, 1);
    problems.extend(layer_check::cycles(&uses, 2));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
