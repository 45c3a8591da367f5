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
