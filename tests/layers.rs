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

/// A module's source: `src/<m>.rs`, or every file under `src/<m>/`.
fn module_source(m: &str) -> String {
    let src = repo_root().join("adapter-runtime/src");
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
        for used in module_uses(&module_source(m)) {
            if used != *m && !may_use.contains(&used) {
                bad.push(format!("adapter-runtime/src/{m}: uses crate::{used}, which its row does not list"));
            }
        }
    }
    assert!(bad.is_empty(), "the runtime's module map is broken (ARCHITECTURE.md):\n{}", bad.join("\n"));
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
