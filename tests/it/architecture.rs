//! The import direction of docs/architecture.md, enforced: every top-level module of `src/` sits
//! in a layer and may import only from layers below its own. Two modules in one layer never
//! import each other (the roles stay independent), so the module graph can have no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top. A new top-level module must be placed here, which is the point: deciding where
/// it sits is deciding what it may know.
const LAYERS: &[(&str, &[&str])] = &[
    ("core: clock and redaction", &["time", "redact"]),
    (
        "core: signatures, destinations",
        &["signature", "destination"],
    ),
    ("core: the CRD", &["crd"]),
    ("core: compiled routes", &["route"]),
    ("storage", &["inbox", "tls"]),
    (
        "configuration, metrics and logs",
        &["manifest", "metrics", "logs"],
    ),
    ("HTTP plumbing", &["http"]),
    ("roles", &["receiver", "worker", "controller", "catch_up"]),
    ("entry points", &["run"]),
    ("command line", &["cli"]),
    ("kubectl plugin", &["plugin"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// The top-level modules each file refers to through `crate::`, keyed by the file's own
/// top-level module. Comments are skipped; `use crate::{a, b::c}` counts `a` and `b`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for file in rust_files(src) {
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if matches!(top.as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for target in crate_refs(&text) {
            if target != top {
                out.entry(top.clone())
                    .or_default()
                    .insert((target, rel.clone()));
            }
        }
    }
    out
}

fn crate_refs(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut refs = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                refs.insert(ident(item.trim()));
            }
        } else {
            refs.insert(ident(rest));
        }
    }
    refs.retain(|r| !r.is_empty());
    refs
}

/// The comma-separated items of a `{...}` group up to its closing brace, nested groups whole.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `pub mod x;` / `mod x;` lines of src/lib.rs.
fn top_level_modules() -> Vec<String> {
    std::fs::read_to_string(src().join("lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn every_top_level_module_has_a_layer() {
    let unplaced: Vec<_> = top_level_modules()
        .into_iter()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "place {unplaced:?} in a layer of tests/it/architecture.rs and docs/architecture.md"
    );
}

#[test]
fn imports_only_run_downwards() {
    let mut wrong = Vec::new();
    for (from, targets) in imports(&src()) {
        let Some(own) = layer_of(&from) else { continue };
        for (to, file) in targets {
            // `crate::Error`-style items of the root and unknown names are not modules.
            let Some(theirs) = layer_of(&to) else {
                continue;
            };
            if theirs >= own {
                wrong.push(format!(
                    "src/{file}: `{from}` ({}) imports `{to}` ({})",
                    LAYERS[own].0, LAYERS[theirs].0
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the direction of docs/architecture.md:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_groups_and_skips_comments() {
    let text = "use crate::inbox::Inbox;\nuse crate::{route::{self, X}, signature};\n\
                // crate::cli is only mentioned\nlet t = crate::time::after(a, b);";
    let refs: Vec<_> = crate_refs(text).into_iter().collect();
    assert_eq!(refs, ["inbox", "route", "signature", "time"]);
    // Nested groups belong to their parent item.
    let nested: Vec<_> = crate_refs("crate::{a::{b, c}, d}").into_iter().collect();
    assert_eq!(nested, ["a", "d"]);
}

#[test]
fn a_backwards_import_is_reported() {
    // The check itself, on a made-up pair: a role importing the command line is refused.
    let (own, theirs) = (layer_of("worker").unwrap(), layer_of("cli").unwrap());
    assert!(theirs >= own);
    let (own, theirs) = (layer_of("receiver").unwrap(), layer_of("worker").unwrap());
    assert!(
        theirs >= own,
        "two roles share a layer and may not import each other"
    );
}

/// docs/architecture.md is the map for a newcomer: every `src/...` or `tests/...` path it names
/// must exist (`{a,b}` expands), so a move that forgets the map fails here.
#[test]
fn the_architecture_doc_names_only_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    let mut named = 0;
    for (i, span) in doc.split('`').enumerate() {
        if i % 2 == 0 || !(span.starts_with("src/") || span.starts_with("tests/")) {
            continue;
        }
        for path in expand(span.trim_end_matches('*')) {
            named += 1;
            // `src/signature/<scheme>.rs`, `src/signature/*.rs`: the directory must exist.
            let path = match path.rfind(['*', '<']) {
                Some(i) => path[..i].to_string(),
                None => path,
            };
            if !root.join(&path).exists() {
                missing.push(path);
            }
        }
    }
    assert!(named > 30, "the scan found only {named} paths");
    assert!(
        missing.is_empty(),
        "docs/architecture.md names missing files: {missing:?}"
    );
}

fn expand(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(a), Some(b)) if a < b => path[a + 1..b]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &path[..a], &path[b + 1..])))
            .collect(),
        _ => vec![path.to_string()],
    }
}
