//! Conformance of the `derivatives.yaml` loader with each PyTorch version's own torchgen
//! (`torchgen.packaged.autograd.load_derivatives`), for every version folder of
//! `shared/corpus/pytorch` that ships a derivatives.yaml (all of them but v2.0.1), no sampling.
//!
//! For each version, every `kind: "derivative"` line of `torchgen-reference.jsonl` must be
//! produced with the same op, dispatch key, backward formulas (text and inputs, in torchgen's
//! order), forward formulas (final text, outputs, in order), output_differentiability, and the
//! same saved inputs / outputs; and nothing else may be produced. The reference lists saved
//! variables sorted (torchgen's own order is the dedup order of the formulas), so those are
//! compared as sorted lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use xirang_scan::SourceFile;
use xirang_scan::derivatives::{Derivative, load_derivatives_as};
use xirang_scan::registry::{self, TorchgenVersion};

fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus/pytorch"))
}

/// Version folders `vMAJOR.MINOR.PATCH`, sorted numerically.
fn versions() -> Vec<((u32, u32, u32), PathBuf)> {
    let dir = corpus();
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let mut it = name.strip_prefix('v')?.split('.').map(|p| p.parse().ok());
            let v = (it.next()??, it.next()??, it.next()??);
            Some((v, e.path()))
        })
        .collect();
    out.sort();
    out
}

fn read(dir: &Path, name: &str) -> SourceFile {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    SourceFile::new(path.display().to_string(), text)
}

/// The comparable view of a derivative: what the reference records.
fn comparable(d: &Derivative) -> Value {
    let mut si = d.saved_inputs.clone();
    si.sort();
    let mut so = d.saved_outputs.clone();
    so.sort();
    json!({
        "op": d.op.to_string(),
        "dispatch_key": d.dispatch_key,
        "formulas": d.formulas.iter().map(|f| json!({"formula": f.formula, "inputs": f.inputs})).collect::<Vec<_>>(),
        "forward": d.forward.iter().map(|f| json!({"formula": f.formula, "outputs": f.outputs})).collect::<Vec<_>>(),
        "output_differentiability": d.output_differentiability,
        "saved_inputs": si,
        "saved_outputs": so,
    })
}

fn reference(dir: &Path) -> BTreeMap<(String, String), Value> {
    let path = dir.join("torchgen-reference.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut d: Value = serde_json::from_str(line).expect("reference json");
        if d["kind"] != "derivative" {
            continue;
        }
        if let Some(o) = d.as_object_mut() {
            o.remove("kind");
            for k in ["saved_inputs", "saved_outputs"] {
                if let Some(Value::Array(xs)) = o.get_mut(k) {
                    xs.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
            }
        }
        let key = (
            d["op"].as_str().unwrap_or_default().to_string(),
            d["dispatch_key"].as_str().unwrap_or_default().to_string(),
        );
        assert!(out.insert(key.clone(), d).is_none(), "{}: duplicate reference entry {key:?}", dir.display());
    }
    out
}

/// Documented, principled mismatches: (version folder, op, dispatch key, why). None so far.
const KNOWN_MISMATCHES: &[(&str, &str, &str, &str)] = &[];

#[test]
fn every_version_matches_torchgen_reference() {
    let all = versions();
    assert_eq!(all.len(), 25, "expected the 25 PyTorch version folders");
    let mut report = Vec::new();
    let mut total_ref = 0usize;
    let mut total_ok = 0usize;
    let mut failures = Vec::new();
    let mut checked = 0;
    for ((ma, mi, pa), dir) in &all {
        let vname = format!("v{ma}.{mi}.{pa}");
        if !dir.join("derivatives.yaml").exists() {
            assert_eq!(vname, "v2.0.1", "only v2.0.1 ships no derivatives.yaml");
            continue;
        }
        checked += 1;
        let tags = registry::load_tags(&read(dir, "tags.yaml")).unwrap_or_else(|e| panic!("{e}"));
        let reg = registry::load_native_functions_as(
            &read(dir, "native_functions.yaml"),
            tags,
            TorchgenVersion::new(*ma, *mi),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let src = read(dir, "derivatives.yaml");
        let t = Instant::now();
        let _ = xirang_scan::yaml::parse(&src);
        let yaml_time = t.elapsed();
        let t = Instant::now();
        let mine = load_derivatives_as(&src, &reg, TorchgenVersion::new(*ma, *mi)).unwrap_or_else(|e| panic!("{e}"));
        let elapsed = t.elapsed();
        let refs = reference(dir);

        let mut produced: BTreeMap<(String, String), Value> = BTreeMap::new();
        for d in &mine {
            let key = (d.op.to_string(), d.dispatch_key.clone());
            assert!(produced.insert(key.clone(), comparable(d)).is_none(), "{vname}: produced {key:?} twice");
        }
        let mut matched = 0;
        let mut mismatched = Vec::new();
        for (key, r) in &refs {
            match produced.get(key) {
                Some(m) if m == r => matched += 1,
                Some(m) => mismatched.push(format!("{key:?}\n    reference: {r}\n    produced:  {m}")),
                None => mismatched.push(format!("{key:?} missing\n    reference: {r}")),
            }
        }
        for key in produced.keys() {
            if !refs.contains_key(key) {
                mismatched.push(format!("{key:?} extra (not in the reference)"));
            }
        }
        mismatched.retain(|m| {
            !KNOWN_MISMATCHES
                .iter()
                .any(|(v, op, k, _)| *v == vname && m.starts_with(&format!("{:?}", (op.to_string(), k.to_string()))))
        });
        report.push(format!(
            "{vname}: reference {} / produced {} / matched {matched} ({} entries in yaml; loaded in {elapsed:?}, of which YAML ~{yaml_time:?})",
            refs.len(),
            mine.len(),
            mine.iter().filter(|d| d.view_copy_of.is_none()).count()
        ));
        total_ref += refs.len();
        total_ok += matched;
        if !mismatched.is_empty() {
            failures.push(format!("{vname}: {} mismatches\n  {}", mismatched.len(), mismatched.join("\n  ")));
        }
    }
    println!("{}", report.join("\n"));
    println!("total: {total_ok} / {total_ref} reference derivative entries matched");
    assert_eq!(checked, 24, "expected 24 versions with a derivatives.yaml");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(total_ok, total_ref);
}

/// Load time of the newest version (run with `--ignored --nocapture`, ideally `--release`).
#[test]
#[ignore = "timing only"]
fn load_time() {
    let (_, dir) = versions().pop().expect("a version");
    let tags = registry::load_tags(&read(&dir, "tags.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let reg =
        registry::load_native_functions(&read(&dir, "native_functions.yaml"), tags).unwrap_or_else(|e| panic!("{e}"));
    let src = read(&dir, "derivatives.yaml");
    let n = 50;
    let t = Instant::now();
    for _ in 0..n {
        let _ = xirang_scan::yaml::parse(&src);
    }
    let yaml = t.elapsed() / n;
    let t = Instant::now();
    for _ in 0..n {
        let d = xirang_scan::derivatives::load_derivatives(&src, &reg).unwrap_or_else(|e| panic!("{e}"));
        assert!(!d.is_empty());
    }
    println!("{}: load_derivatives {:?} per load (YAML parse alone {yaml:?})", dir.display(), t.elapsed() / n);
}
