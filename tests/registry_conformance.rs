//! Conformance of the operator registry with each PyTorch version's own torchgen, for every
//! version folder in `../shared/corpus/pytorch` (no sampling).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use xirang_scan::SourceFile;
use xirang_scan::registry::{self, TorchgenVersion};
use xirang_scan::version::Version;
use xirang_tests::corpus;

fn versions() -> Vec<(Version, std::path::PathBuf)> {
    let dir = corpus().join("pytorch");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .collect();
    v.sort();
    v
}

fn reference_ops(dir: &std::path::Path) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(dir.join("torchgen-reference.jsonl")).expect("reference");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let d: Value = serde_json::from_str(line).expect("reference json");
        if d["kind"] != "op" {
            continue;
        }
        let name = d["name"].as_str().unwrap_or_default();
        let ov = d["overload"].as_str().unwrap_or_default();
        let q = if ov.is_empty() { name.to_string() } else { format!("{name}.{ov}") };
        out.insert(q, d);
    }
    out
}

#[test]
fn every_version_matches_torchgen_reference() {
    let all = versions();
    assert_eq!(all.len(), 25, "expected the 25 PyTorch version folders of the corpus");
    let mut report = Vec::new();
    for (v, dir) in &all {
        let read = |n: &str| SourceFile::new(n, std::fs::read_to_string(dir.join(n)).expect(n));
        let tags = registry::load_tags(&read("tags.yaml")).unwrap_or_else(|e| panic!("{v}: {e}"));
        let (ma, mi) = v.major_minor();
        let reg = registry::load_native_functions_as(
            &read("native_functions.yaml"),
            tags,
            TorchgenVersion::new(ma as u32, mi as u32),
        )
        .unwrap_or_else(|e| panic!("{v}: {e}"));
        let refs = reference_ops(dir);
        let mut mismatches = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for f in &reg.functions {
            let q = f.func.name.to_string();
            assert!(seen.insert(q.clone()), "{v}: duplicate operator {q}");
            let Some(r) = refs.get(&q) else {
                mismatches.push(format!("extra operator {q}"));
                continue;
            };
            let mine = json!({
                "schema": f.func.to_string(),
                "dispatch": f.dispatch_keys(),
                "tags": f.tags,
                "autogen": f.generated,
                "structured": f.structured,
                "structured_delegate": f.structured_delegate.as_ref().map(|d| d.to_string()),
                "variants": f.variants,
            });
            for k in ["schema", "dispatch", "tags", "autogen", "structured", "structured_delegate", "variants"] {
                if mine[k] != r[k] {
                    mismatches.push(format!("{q}.{k}: ours {} torchgen {}", mine[k], r[k]));
                }
            }
            // the canonical text parses back to the same schema
            let again = xirang_scan::schema::FunctionSchema::parse(&f.func.to_string()).expect("reparse");
            assert_eq!(again, f.func);
        }
        for q in refs.keys() {
            if !seen.contains(q) {
                mismatches.push(format!("missing operator {q}"));
            }
        }
        assert!(mismatches.is_empty(), "{v}: {} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
        let generated = reg.functions.iter().filter(|f| f.generated).count();
        report.push(format!("{v}: {} operators ({generated} autogen) = torchgen", reg.functions.len()));
    }
    println!("{}", report.join("\n"));
}

#[test]
fn schema_text_round_trips_for_every_yaml_entry() {
    for (v, dir) in versions() {
        let text = std::fs::read_to_string(dir.join("native_functions.yaml")).expect("yaml");
        let mut n = 0;
        for line in text.lines() {
            let Some(s) = line.strip_prefix("- func: ") else {
                continue;
            };
            let s = s.split(" #").next().unwrap_or(s).trim_end();
            let p = xirang_scan::schema::FunctionSchema::parse(s).unwrap_or_else(|e| panic!("{v}: {s}: {e}"));
            assert_eq!(p.to_string(), s, "{v}");
            n += 1;
        }
        assert!(n > 2000, "{v}: only {n} schemas");
    }
}
