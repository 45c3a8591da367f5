//! The crate map the build enforces: ARCHITECTURE.md's crate table gives each workspace crate a layer
//! and the workspace crates it may use; every crate's manifest must keep to it (no dependency on a
//! crate of its own or a higher layer, none outside its row), and every workspace member has a row.

use std::collections::{BTreeMap, BTreeSet};

use xirang_tests::repo_root;

struct Row {
    path: String,
    layer: u32,
    may_use: BTreeSet<String>,
}

/// The rows of the `| crate | path | layer | may use | what |` table.
fn table() -> BTreeMap<String, Row> {
    let text = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let head = text.find("| crate | path | layer | may use | what |").expect("ARCHITECTURE.md: the crate table");
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`').enumerate().filter(|(i, _)| i % 2 == 1).map(|(_, s)| s.to_string()).collect()
    };
    let mut rows = BTreeMap::new();
    for line in text[head..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (name, path) = (ticked(cells[1]), ticked(cells[2]));
        let layer = cells[3].parse().unwrap_or_else(|_| panic!("layer of {line}"));
        let row = Row {
            path: path[0].trim_end_matches('/').to_string(),
            layer,
            may_use: ticked(cells[4]).into_iter().collect(),
        };
        rows.insert(name[0].clone(), row);
    }
    rows
}

/// The workspace crates a manifest depends on (any dependency table), by package name.
fn workspace_deps(manifest: &toml::Table, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(t) = manifest.get(key).and_then(|v| v.as_table()) {
            for (dep, spec) in t {
                let package = spec.get("package").and_then(|p| p.as_str()).unwrap_or(dep);
                if names.contains(package) || spec.get("path").is_some() {
                    out.insert(package.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn crates_depend_only_on_lower_layers_as_architecture_md_says() {
    let root = repo_root();
    let rows = table();
    assert!(rows.len() >= 6, "{} rows", rows.len());
    let names: BTreeSet<String> = rows.keys().cloned().collect();
    // every workspace member has a row
    let ws: toml::Table = toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    let members: BTreeSet<String> = ws["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().trim_end_matches('/').to_string())
        .collect();
    let paths: BTreeSet<String> = rows.values().map(|r| r.path.clone()).collect();
    assert_eq!(members, paths, "workspace members vs ARCHITECTURE.md's crate table");
    let mut bad = Vec::new();
    for (name, row) in &rows {
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(root.join(&row.path).join("Cargo.toml")).unwrap()).unwrap();
        assert_eq!(manifest["package"]["name"].as_str(), Some(name.as_str()), "{}", row.path);
        for dep in workspace_deps(&manifest, &names) {
            let Some(d) = rows.get(&dep) else {
                bad.push(format!("{name} depends on {dep}, which has no row"));
                continue;
            };
            if d.layer >= row.layer {
                bad.push(format!(
                    "{name} (layer {}) depends on {dep} (layer {}): not a lower layer",
                    row.layer, d.layer
                ));
            }
            if !row.may_use.contains(&dep) {
                bad.push(format!("{name} depends on {dep}, which its row does not list"));
            }
        }
    }
    assert!(bad.is_empty(), "the crate map is broken:\n{}", bad.join("\n"));
}

#[test]
fn a_dependency_on_a_higher_layer_is_caught() {
    // the check itself: a runtime that used the scanner
    let rows = table();
    let names: BTreeSet<String> = rows.keys().cloned().collect();
    let manifest: toml::Table = toml::from_str("[dependencies]\nxirang-scan = { path = \"../scanner\" }\n").unwrap();
    let deps = workspace_deps(&manifest, &names);
    let runtime = &rows["xirang-runtime"];
    assert!(deps.iter().any(|d| rows[d].layer >= runtime.layer || !runtime.may_use.contains(d)));
}

/// The rows of ARCHITECTURE.md's `| runtime module | may use | what |` table: module -> allowed modules.
fn module_table() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let head = text.find("| runtime module | may use | what |").expect("ARCHITECTURE.md: the runtime module table");
    let mut rows = BTreeMap::new();
    for line in text[head..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let ticked = |cell: &str| -> Vec<String> {
            cell.split('`').enumerate().filter(|(i, _)| i % 2 == 1).map(|(_, s)| s.to_string()).collect()
        };
        let name = ticked(cells[1]).into_iter().next().unwrap_or_else(|| panic!("module of {line}"));
        rows.insert(name, ticked(cells[2]).into_iter().collect());
    }
    rows
}

/// The runtime modules a source text uses: `crate::<module>` paths (and `crate::{a, b}` groups)
/// outside `//` comments (doc links to higher modules are not uses).
fn module_uses(src: &str) -> BTreeSet<String> {
    let code: String = src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            for item in group[..group.find('}').unwrap_or(group.len())].split(',') {
                let m = ident(item.trim());
                if !m.is_empty() {
                    out.insert(m);
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

/// The two crates a runtime module may live in: the core (`xirang-core`) and the runtime above it.
const CORE_SRC: &str = "adapter-runtime/core/src";
const RUNTIME_SRC: &str = "adapter-runtime/src";

/// The crate folder (`CORE_SRC` or `RUNTIME_SRC`) that holds module `m` (`<m>.rs` or `<m>/`).
fn module_home(m: &str) -> &'static str {
    let root = repo_root();
    let here = |src: &str| root.join(src).join(format!("{m}.rs")).is_file() || root.join(src).join(m).is_dir();
    match (here(CORE_SRC), here(RUNTIME_SRC)) {
        (true, false) => CORE_SRC,
        (false, true) => RUNTIME_SRC,
        (a, b) => panic!("runtime module `{m}`: in the core: {a}, in the runtime: {b} (want exactly one)"),
    }
}

/// A module's source: `<crate>/src/<m>.rs`, or every file under `<crate>/src/<m>/`.
fn module_source(m: &str) -> String {
    let src = repo_root().join(module_home(m));
    let file = src.join(format!("{m}.rs"));
    if file.is_file() {
        return std::fs::read_to_string(file).unwrap();
    }
    let mut text = String::new();
    let mut dirs = vec![src.join(m)];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<_> =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                text.push_str(&std::fs::read_to_string(p).unwrap());
            }
        }
    }
    text
}

#[test]
fn runtime_modules_use_only_what_architecture_md_allows() {
    let rows = module_table();
    assert!(rows.len() >= 10, "{} rows", rows.len());
    let mut bad = Vec::new();
    for (m, may_use) in &rows {
        let home = module_home(m);
        for used in module_uses(&module_source(m)) {
            if used != *m && !may_use.contains(&used) {
                bad.push(format!("{home}/{m}: uses crate::{used}, which its row does not list"));
            }
        }
        // a core row may list only core modules (the compiler enforces the rest)
        if home == CORE_SRC {
            for used in may_use.iter().filter(|u| rows.contains_key(*u) && module_home(u) != CORE_SRC) {
                bad.push(format!("{home}/{m}: its row lists `{used}`, a module of the runtime above the core"));
            }
        }
    }
    assert!(bad.is_empty(), "the runtime's module map is broken (ARCHITECTURE.md):\n{}", bad.join("\n"));
}

/// Every module of the core crate has a row (what it may use is written down), and the core's
/// `lib.rs` declares exactly those modules.
#[test]
fn every_core_module_has_a_row() {
    let rows = module_table();
    let root = repo_root().join(CORE_SRC);
    let mut on_disk: BTreeSet<String> = BTreeSet::new();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if name != "lib" && (p.is_dir() || p.extension().is_some_and(|x| x == "rs")) {
            on_disk.insert(name);
        }
    }
    let in_table: BTreeSet<String> = rows.keys().filter(|m| module_home(m) == CORE_SRC).cloned().collect();
    assert_eq!(on_disk, in_table, "the core's modules vs their rows in ARCHITECTURE.md");
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").map(|m| m.trim_end_matches(';').to_string()))
        .collect();
    assert_eq!(declared, on_disk, "core/src/lib.rs's modules vs its files");
    // the runtime re-exports every one of them under its old path
    let runtime_lib = std::fs::read_to_string(repo_root().join(RUNTIME_SRC).join("lib.rs")).unwrap();
    for m in &on_disk {
        assert!(runtime_lib.contains(&format!("{m},")) || runtime_lib.contains(&format!("{m}}}")), "{m}");
    }
}

/// ARCHITECTURE.md's `| autograd file | may use | what |` table: file -> files it may use.
fn autograd_table() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let head = text.find("| autograd file | may use | what |").expect("ARCHITECTURE.md: the autograd table");
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`').enumerate().filter(|(i, _)| i % 2 == 1).map(|(_, s)| s.to_string()).collect()
    };
    let mut rows = BTreeMap::new();
    for line in text[head..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = ticked(cells[1]).into_iter().next().unwrap_or_else(|| panic!("file of {line}"));
        rows.insert(name, ticked(cells[2]).into_iter().collect());
    }
    rows
}

/// What an autograd file names of its folder: `super::<x>` and `crate::autograd::<x>` paths (and
/// `{a, b}` groups after them), outside `//` comments.
fn autograd_uses(src: &str) -> BTreeSet<String> {
    let code: String = src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for prefix in ["super::", "crate::autograd::"] {
        for (at, _) in code.match_indices(prefix) {
            // `crate::autograd::` inside `super::` would double count nothing: distinct prefixes
            let rest = &code[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                for item in group[..group.find('}').unwrap_or(group.len())].split(',') {
                    let m = ident(item.trim());
                    if !m.is_empty() {
                        out.insert(m);
                    }
                }
            } else {
                out.insert(ident(rest));
            }
        }
    }
    out
}

#[test]
fn autograd_files_depend_one_way_as_architecture_md_says() {
    let rows = autograd_table();
    let dir = repo_root().join(RUNTIME_SRC).join("autograd");
    let mut files: BTreeSet<String> = BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "rs") && p.file_stem().is_some_and(|s| s != "mod") {
            files.insert(p.file_stem().unwrap().to_string_lossy().to_string());
        }
    }
    assert_eq!(files, rows.keys().cloned().collect::<BTreeSet<_>>(), "src/autograd/ files vs the autograd table");
    // one way: a file's row lists only files above it in the table
    let order: Vec<&String> = rows.keys().collect();
    let text = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let pos = |f: &str| text.find(&format!("| `{f}` |  |")).or_else(|| text.find(&format!("| `{f}` | `")));
    let mut bad = Vec::new();
    for f in &order {
        for u in &rows[*f] {
            if !rows.contains_key(u) {
                bad.push(format!("{f}: its row lists `{u}`, which is not a file of src/autograd/"));
            } else if pos(u) > pos(f) {
                bad.push(format!("{f}: its row lists `{u}`, a file below it in the table"));
            }
        }
        let src = std::fs::read_to_string(dir.join(format!("{f}.rs"))).unwrap();
        for used in autograd_uses(&src) {
            if !rows.contains_key(&used) {
                bad.push(format!("src/autograd/{f}.rs: names `{used}` through the folder; name its file instead"));
            } else if used != **f && !rows[*f].contains(&used) {
                bad.push(format!("src/autograd/{f}.rs: uses `{used}`, which its row does not list"));
            }
        }
    }
    assert!(bad.is_empty(), "autograd's file map is broken (ARCHITECTURE.md):\n{}", bad.join("\n"));
}

#[test]
fn an_autograd_use_through_the_folder_is_caught() {
    let uses =
        autograd_uses("use super::node::{NodeInfo, Ops};\nlet x = crate::autograd::no_grad(); // super::engine\n");
    assert_eq!(uses, ["no_grad", "node"].into_iter().map(String::from).collect());
}

#[test]
fn a_module_use_outside_the_row_is_caught() {
    // the check itself: the tensor naming autograd's type, as it did before the untyped slot
    let uses = module_uses(
        "/// see [`crate::profile`]\npub(crate) autograd: Option<Arc<crate::autograd::AutogradMeta>>,\nuse crate::{shape, dtype::DType};",
    );
    assert_eq!(uses, ["autograd", "dtype", "shape"].into_iter().map(String::from).collect());
    assert!(!module_table()["tensor"].contains("autograd"));
}

/// What the bridge's shared library links: the closure of `xirang-bridge`'s dependencies in
/// Cargo.lock (normal and build dependencies alike: the lock file does not tell them apart, so
/// this over-approximates). The profiler's tools (`xirang-prof`: inferno, clap, toml) are not in it.
#[test]
fn the_bridge_links_none_of_the_profiler_tools() {
    let lock: toml::Table = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap().parse().unwrap();
    let packages = lock["package"].as_array().unwrap();
    let deps: BTreeMap<&str, Vec<&str>> = packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap();
            let d = p.get("dependencies").and_then(|d| d.as_array()).map_or(Vec::new(), |a| {
                // "name" or "name version" (when several versions are locked)
                a.iter().filter_map(|v| v.as_str()).map(|s| s.split(' ').next().unwrap_or(s)).collect()
            });
            (name, d)
        })
        .collect();
    let mut seen = BTreeSet::new();
    let mut todo = vec!["xirang-bridge"];
    while let Some(n) = todo.pop() {
        if seen.insert(n) {
            todo.extend(deps.get(n).into_iter().flatten().copied());
        }
    }
    assert!(seen.contains("xirang-runtime") && seen.len() > 10, "{seen:?}");
    for tool in ["xirang-prof", "inferno", "clap", "toml"] {
        assert!(!seen.contains(tool), "the bridge links {tool}: {seen:?}");
    }
}
