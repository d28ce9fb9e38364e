//! The model's map (the rustdoc of `model/mod.rs`) is the model: every module is named there,
//! and no import runs against its layer order.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each part of the model and the parts it may import (its own included).
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("inputs", &["inputs"]),
    ("notice", &["inputs", "notice"]),
    ("messages", &["inputs", "notice", "messages"]),
    ("rules", &["inputs", "notice", "messages", "rules"]),
    ("table", &["inputs", "rules", "notice", "messages", "table"]),
    (
        "planning",
        &["inputs", "rules", "notice", "messages", "table", "planning"],
    ),
    (
        "verbs",
        &[
            "inputs", "rules", "notice", "messages", "table", "planning", "verbs",
        ],
    ),
];

/// Imports known to run against the map, each with why it is still there. The test fails when
/// one is no longer needed, so this list only shrinks; it is empty, and a new import against
/// the map fails the test.
const AGAINST_THE_MAP: &[(&str, &str, &str)] = &[];

/// The part a `crate::model::<name>` path lands in: the layers by name, and the names the model
/// re-exports at its root by the layer they come from.
fn part_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "inputs" | "objects" | "membership" | "resources" | "devices" | "pod_group"
        | "quantity" | "tasks" | "terms" | "topology" => "inputs",
        "rules" => "rules",
        "notice" => "notice",
        "messages" => "messages",
        "table" => "table",
        "planning" => "planning",
        "verbs" | "gather" | "enqueue" | "pod_group_status" => "verbs",
        _ => return None,
    })
}

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("reading src/model") {
        let p = entry.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Test code may reach anything: files named `tests.rs` or `fixtures.rs`, files under a
/// `tests/` directory, and everything after a file's `#[cfg(test)]`.
fn is_test_file(rel: &str) -> bool {
    rel.starts_with("tests/")
        || rel.contains("/tests/")
        || rel.ends_with("/tests.rs")
        || rel.ends_with("/fixtures.rs")
}

#[test]
fn every_import_runs_the_way_the_module_map_says() {
    let root = model_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let rules: BTreeMap<&str, &[&str]> = MAY_IMPORT.iter().copied().collect();
    let mut against: BTreeSet<(String, String)> = BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .expect("under src/model")
            .to_string_lossy()
            .to_string();
        if rel == "mod.rs" || is_test_file(&rel) {
            continue;
        }
        let part = rel.split(['/', '.']).next().expect("a first component");
        let Some(allowed) = rules.get(part) else {
            panic!("src/model/{rel} is in no part of the module map ({part})");
        };
        let text = fs::read_to_string(file).expect("reading a model file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, _) in code.match_indices("crate::model::") {
            let name: String = code[i + "crate::model::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let Some(target) = part_of(&name) else {
                continue;
            };
            if !allowed.contains(&target) {
                against.insert((rel.clone(), target.to_string()));
            }
        }
    }
    let known: BTreeSet<(String, String)> = AGAINST_THE_MAP
        .iter()
        .map(|(f, t, _)| (f.to_string(), t.to_string()))
        .collect();
    let new: Vec<_> = against.difference(&known).collect();
    assert!(
        new.is_empty(),
        "imports against the module map (model/mod.rs): {new:?}"
    );
    let gone: Vec<_> = known.difference(&against).collect();
    assert!(
        gone.is_empty(),
        "no longer against the map, remove from AGAINST_THE_MAP: {gone:?}"
    );
}

#[test]
fn every_module_is_named_in_the_module_map() {
    let root = model_dir();
    let map = fs::read_to_string(root.join("mod.rs")).expect("reading model/mod.rs");
    let doc: String = map
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut missing = Vec::new();
    for part in ["inputs", "rules", "table", "planning", "verbs"] {
        for entry in fs::read_dir(root.join(part)).expect("reading a part") {
            let p = entry.expect("a directory entry").path();
            let stem = p
                .file_stem()
                .expect("a file name")
                .to_string_lossy()
                .to_string();
            if stem == "mod" || stem == "tests" {
                continue;
            }
            if !doc.contains(&format!("`{stem}`")) {
                missing.push(format!("{part}/{stem}"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "modules missing from the map in model/mod.rs: {missing:?}"
    );
}

/// One convention for the model's tests (docs/architecture.md): a file's own tests are
/// `x/tests.rs` beside `x.rs`, behaviours across verbs are files of `model/tests/`; none inline.
#[test]
fn no_model_file_holds_its_tests_inline() {
    let root = model_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut inline: Vec<String> = files
        .iter()
        .filter(|f| {
            fs::read_to_string(f)
                .expect("reading a model file")
                .lines()
                .any(|l| l.trim_start().starts_with("mod tests {"))
        })
        .map(|f| {
            f.strip_prefix(&root)
                .expect("under src/model")
                .to_string_lossy()
                .to_string()
        })
        .collect();
    inline.sort();
    assert!(
        inline.is_empty(),
        "tests inline in {inline:?}: move each to x/tests.rs beside x.rs (`#[cfg(test)] mod tests;`)"
    );
}
