//! The model's map (the rustdoc of `model/mod.rs`) is the model: every module is named there,
//! and no import runs against its layer order. Beside it, the crate's own layers
//! (docs/architecture.md): no import between `src/`'s top-level modules runs upwards.

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

/// The crate's top-level modules, bottom first, and the ones each may import (its own included):
/// the model imports nothing of the crate; the shared state only the model and the metrics; the
/// tasks that act on the state (`cluster`, `binding`, `http`) import it, never the other way.
/// `lib.rs` (which wires them together), `main.rs` and `bin/` (other crates) are above them all.
const CRATE_MAY_IMPORT: &[(&str, &[&str])] = &[
    ("model", &["model"]),
    ("testkit", &["testkit", "model"]),
    ("wire", &["wire"]),
    ("pki", &["pki"]),
    ("tls", &["tls", "pki"]),
    ("metrics", &["metrics", "model"]),
    ("state", &["state", "model", "metrics"]),
    (
        "cluster",
        &["cluster", "model", "metrics", "pki", "tls", "state"],
    ),
    ("binding", &["binding", "model", "state", "cluster"]),
    (
        "http",
        &[
            "http", "model", "metrics", "state", "cluster", "binding", "wire",
        ],
    ),
    ("config", &["config", "model", "tls", "cluster", "http"]),
];

/// The checkout whose sources are read: `MUSTER_REPO_ROOT` (tests/run sets it) before the
/// path compiled in. A test binary reused from a cargo target dir shared between clones
/// (tests/run keeps one) was compiled in another clone, which may be gone.
fn repo_root() -> PathBuf {
    std::env::var_os("MUSTER_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn src_dir() -> PathBuf {
    repo_root().join("src")
}

fn model_dir() -> PathBuf {
    repo_root().join("src/model")
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

/// A `crate::<module>` path in code (comments left out: a doc link is no import) outside tests
/// names a module the importing one may use.
#[test]
fn every_import_between_the_crates_modules_runs_down_its_layers() {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let rules: BTreeMap<&str, &[&str]> = CRATE_MAY_IMPORT.iter().copied().collect();
    let mut against: BTreeSet<(String, String)> = BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .to_string();
        if rel == "lib.rs" || rel == "main.rs" || rel.starts_with("bin/") || is_test_file(&rel) {
            continue;
        }
        let module = rel.split(['/', '.']).next().expect("a first component");
        let Some(allowed) = rules.get(module) else {
            panic!("src/{rel} is in no layer of CRATE_MAY_IMPORT ({module})");
        };
        let text = fs::read_to_string(file).expect("reading a source file");
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if rules.contains_key(name.as_str()) && !allowed.contains(&name.as_str()) {
                against.insert((rel.clone(), name));
            }
        }
    }
    assert!(
        against.is_empty(),
        "imports against the crate's layers (docs/architecture.md), file and module: {against:?}"
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
