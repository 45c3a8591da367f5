//! Against reality: for each consecutive pair of torch_npu releases in the corpus, the drift engine
//! runs the matching PyTorch upgrade on the older release's backend lists; its backend impacts
//! (breaking or action) are the prediction. The truth is what torch_npu changed in its next release
//! for upstream operators: entries it dropped from every list, or re-declared (a different schema
//! text, or a move between lists such as into `symint`). Prints precision and recall per pair and
//! classifies every miss:
//! - missed, `unchanged upstream`: PyTorch did not change the operator between the two versions at
//!   all; torch_npu dropped or re-declared it for its own reasons (kernel rewrites, list clean-ups),
//!   which no upstream diff can predict.
//! - missed, `info-only upstream`: PyTorch changed only things ranked info (tags, dispatch keys,
//!   formulas).
//! - false alarm, by rule: PyTorch changed the operator but torch_npu kept its entry as it was (most
//!   often because its codegen absorbs the change, e.g. `int -> SymInt` or a trailing default).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use xirang_scan::SourceFile;
use xirang_scan::backend::{BackendYaml, load_backend_yaml};
use xirang_scan::compare::{PytorchDiff, pytorch_report};
use xirang_scan::diff::adapter_index::AdapterIndex;
use xirang_scan::diff::impact::{Backend, GeneratedIndex};
use xirang_scan::diff::{ImpactSource, RuleSet, Severity};
use xirang_scan::snapshot::{Store, Version};

fn load_backends(dir: &Path) -> Vec<(String, BackendYaml)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("backend dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let y = load_backend_yaml(&SourceFile::new(name.clone(), text)).expect("backend yaml parses");
            (name, y)
        })
        .collect()
}

/// op -> (set of lists, schema texts) over the non-custom lists of a release.
fn declarations(ys: &[(String, BackendYaml)]) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut m: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (_, y) in ys {
        for (list, e) in y.entries() {
            if list == "custom" {
                continue;
            }
            let slot = m.entry(e.op.to_string()).or_default();
            slot.0.insert(list.to_string());
            if let Some(s) = &e.schema {
                slot.1.insert(s.clone());
            }
        }
    }
    m
}

#[derive(Default)]
struct Tally {
    tp: usize,
    fp: usize,
    fn_: usize,
}

#[test]
fn torch_npu_precision_recall() {
    let corpus = xirang_tests::corpus().join("ascend");
    let store = Store::new(xirang_tests::repo_root().join("schemas"));
    let rules = RuleSet::builtin();
    let mut releases: Vec<(Version, PathBuf)> = std::fs::read_dir(&corpus)
        .expect("corpus/ascend")
        .flatten()
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .filter(|(_, p)| p.join("backend").is_dir())
        .collect();
    releases.sort();
    assert!(releases.len() >= 13, "expected the 13 torch_npu releases");
    let kernels = AdapterIndex::default();
    let generated = GeneratedIndex::default();
    let mut total = Tally::default();
    let mut fn_reasons: BTreeMap<&str, usize> = BTreeMap::new();
    let mut fp_rules: BTreeMap<String, usize> = BTreeMap::new();
    println!("| torch_npu pair | pytorch | predicted | actual | hits | precision | recall |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for w in releases.windows(2) {
        let ((va, pa), (vb, pb)) = (&w[0], &w[1]);
        let torch = |v: &Version| {
            let spec = format!("v{}", v.parts.iter().take(3).map(|p| p.to_string()).collect::<Vec<_>>().join("."));
            store.resolve("pytorch", &spec).expect("matching pytorch snapshot")
        };
        let (ta, tb) = (torch(va), torch(vb));
        let (sa, sb) = (store.load_pytorch(&ta).unwrap(), store.load_pytorch(&tb).unwrap());
        let ya = load_backends(&pa.join("backend"));
        let yb = load_backends(&pb.join("backend"));
        let backends: Vec<Backend<'_>> = ya.iter().map(|(n, y)| Backend { path: n.clone(), yaml: y }).collect();
        let report = pytorch_report(
            PytorchDiff {
                old: &sa,
                new: &sb,
                title: String::new(),
                kernels: &kernels,
                backends: &backends,
                generated: &generated,
                allow: None,
                today: "2026-01-01",
                states: None,
                custom: None,
            },
            &rules,
        );
        let predicted: BTreeSet<&str> = report
            .impact
            .iter()
            .filter(|i| i.source == ImpactSource::Backend && i.severity <= Severity::Action)
            .map(|i| i.subject.as_str())
            .collect();
        let (da, db) = (declarations(&ya), declarations(&yb));
        let upstream_a: BTreeSet<String> = sa.registry.functions.iter().map(|f| f.func.name.to_string()).collect();
        let actual: BTreeSet<&str> = da
            .iter()
            .filter(|(op, _)| upstream_a.contains(*op))
            .filter(|(op, decl)| match db.get(*op) {
                None => true,                                                                              // dropped
                Some(nb) => nb.0 != decl.0 || (nb.1 != decl.1 && !(nb.1.is_empty() && decl.1.is_empty())), // re-declared
            })
            .map(|(op, _)| op.as_str())
            .collect();
        let hits = predicted.intersection(&actual).count();
        let (p, r) = (
            if predicted.is_empty() { 1.0 } else { hits as f64 / predicted.len() as f64 },
            if actual.is_empty() { 1.0 } else { hits as f64 / actual.len() as f64 },
        );
        println!("| {va}..{vb} | {ta}..{tb} | {} | {} | {hits} | {p:.2} | {r:.2} |", predicted.len(), actual.len());
        total.tp += hits;
        total.fp += predicted.len() - hits;
        total.fn_ += actual.len() - hits;
        let changed: BTreeMap<&str, Vec<&str>> = report.changes.iter().fold(BTreeMap::new(), |mut m, c| {
            m.entry(c.subject.as_str()).or_insert_with(Vec::new).push(c.rule.as_str());
            m
        });
        for op in actual.difference(&predicted) {
            let why = match changed.get(op) {
                None => "unchanged upstream",
                Some(_) => "info-only upstream",
            };
            *fn_reasons.entry(why).or_default() += 1;
            let how = if db.contains_key(*op) { "re-declared" } else { "dropped" };
            println!("    missed {op} ({how}): {why}");
        }
        for op in predicted.difference(&actual) {
            let rs: BTreeSet<String> = report
                .changes
                .iter()
                .filter(|c| c.subject == *op && c.severity <= Severity::Action)
                .map(|c| c.rule.clone())
                .collect();
            for r in &rs {
                *fp_rules.entry(r.clone()).or_default() += 1;
            }
            println!(
                "    false alarm {op}: {} (torch_npu kept the entry as it was)",
                rs.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    let precision = total.tp as f64 / (total.tp + total.fp).max(1) as f64;
    let recall = total.tp as f64 / (total.tp + total.fn_).max(1) as f64;
    println!(
        "\noverall: hits {} false alarms {} misses {}; precision {precision:.3} recall {recall:.3}",
        total.tp, total.fp, total.fn_
    );
    println!("misses by reason: {fn_reasons:?}");
    println!("false alarms by rule: {fp_rules:?}");
    // every miss is explained by one of the two reasons above (the engine never stays silent on an
    // operator that PyTorch changed at breaking/action level and torch_npu then changed)
    assert!(fn_reasons.keys().all(|k| *k == "unchanged upstream" || *k == "info-only upstream"));
    assert!(total.tp > 0, "the engine predicts at least some of torch_npu's real changes");
}
