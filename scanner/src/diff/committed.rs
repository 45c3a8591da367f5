//! The standard pipeline (two snapshots -> report) and the committed reports under `diffs/`.
//!
//! `diffs/` holds one markdown report per consecutive pair of PyTorch snapshots in the store
//! (`diffs/pytorch/v2.3.1..v2.4.0.md`), per consecutive pair of driver header snapshots
//! (`diffs/ascend/...`, `diffs/cuda/...`, see [`HEADER_UPSTREAMS`]), plus the quick-start pair `v2.1..v2.3`, and an index
//! `diffs/README.md`. `xirang-scan diffs` rewrites them; `xirang-scan diffs --check` fails when any is
//! stale (CI). Reports include the impact on the hand-written kernels of `adapter-runtime/` and on
//! the custom operators of `xirang.toml` (formulas resolved against each pair's old version), so a
//! new kernel marker or custom operator makes them stale too: regenerate and commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::adapter_index::{self, AdapterIndex};
use super::custom::{CustomOperators, CustomUses};
use super::impact::{Backend, GeneratedIndex};
use super::{
    AdapterStates, Change, Impact, Report, ReportInput, RuleSet, allow::AllowList, build_report, pytorch,
    report_markdown,
};
use crate::error::Error;
use crate::schema::OperatorName;
use crate::snapshot::{PytorchPair, PytorchSnapshot, Store, Version};

/// Extra pairs committed besides the consecutive ones: (old spec, new spec).
/// `v2.3..v2.15` is the plan of this adapter's own upgrade (docs/upgrades/v2.3-to-v2.15.md).
pub const EXTRA_PAIRS: &[(&str, &str)] = &[("v2.1", "v2.3"), ("v2.3", "v2.15")];

/// Extra header pairs: (vendor, old, new); the vendor header move of the upgrade to 2.15.
pub const HEADER_EXTRA_PAIRS: &[(&str, &str, &str)] = &[("ascend", "v2.3.1.post6", "v2.14.0")];

/// Driver upstreams whose header snapshots (`schemas/ascend/<ver>/`, `schemas/cuda/<ver>/`) get a
/// committed report per consecutive pair (`diffs/ascend/v2.13.0..v2.14.0.md`).
pub const HEADER_UPSTREAMS: &[&str] = &["ascend", "cuda"];

/// Diffs two header snapshots of `vendor` and builds the report (impact: uses of the changed symbols
/// in `adapter-runtime/`, and the generated bindings).
pub fn header_report(
    vendor: &str,
    old: &crate::snapshot::HeaderSnapshot,
    new: &crate::snapshot::HeaderSnapshot,
    uses: &super::header::SymbolUses,
    allow: Option<&AllowList>,
    today: &str,
    rules: &RuleSet,
) -> Report {
    let changes = super::header::diff(old, new, rules);
    let (changes, suppressed, allow_notes) = match allow {
        Some(a) => a.apply(changes, today),
        None => (changes, Vec::new(), Vec::new()),
    };
    let impact = super::header::impacts(&changes, uses, vendor);
    let mut r = Report {
        title: format!("{vendor} headers {} -> {}", old.meta.version, new.meta.version),
        old: old.meta.version.clone(),
        new: new.meta.version.clone(),
        changes,
        impact,
        suppressed,
        allow_notes,
        kernels_indexed: 0,
        backend_files: Vec::new(),
        adapter_summary: String::new(),
    };
    super::sort_report(&mut r);
    r
}

/// Diffs two C++ interface snapshots and builds the report (impact: the adapter's C++ subclasses,
/// overrides and registration calls found by `index`, and the generated autocast registration).
pub fn cxx_report(
    old: &crate::cxx_snapshot::CxxSnapshot,
    new: &crate::cxx_snapshot::CxxSnapshot,
    index: &xirang_cxx::index::CxxIndex,
    autocast_generated: bool,
    allow: Option<&AllowList>,
    today: &str,
    rules: &RuleSet,
) -> Report {
    let changes = super::cxx::diff(old, new, rules);
    let (changes, suppressed, allow_notes) = match allow {
        Some(a) => a.apply(changes, today),
        None => (changes, Vec::new(), Vec::new()),
    };
    let impact = super::cxx::impacts(&changes, index, autocast_generated);
    let mut r = Report {
        title: format!("pytorch C++ interface {} -> {}", old.meta.version, new.meta.version),
        old: old.meta.version.clone(),
        new: new.meta.version.clone(),
        changes,
        impact,
        suppressed,
        allow_notes,
        kernels_indexed: index.kernels.len(),
        backend_files: Vec::new(),
        adapter_summary: format!(
            "{} C++ files indexed: {} classes deriving from PyTorch's, {} overrides, {} registrations, {} C++ kernels",
            index.files,
            index.classes.len(),
            index.classes.iter().map(|c| c.methods.len()).sum::<usize>(),
            index.registrations.len(),
            index.kernels.len()
        ),
    };
    super::sort_report(&mut r);
    r
}

/// The generated autocast registration (relative to the repository root).
pub fn cxx_autocast_file() -> &'static str {
    super::cxx::AUTOCAST_FILE
}

/// Indexes the C++ sources of the adapter (`dir`, default `adapter-runtime/`), paths relative to `root`.
pub fn index_cxx(dir: &Path, root: &Path) -> Result<xirang_cxx::index::CxxIndex, Error> {
    if !dir.is_dir() {
        return Ok(xirang_cxx::index::CxxIndex::default());
    }
    xirang_cxx::index::index_dir(dir, root).map_err(|e| Error::Invalid(e.to_string()))
}

/// Where the adapter lives relative to the repository root.
pub const ADAPTER_DIR: &str = "adapter-runtime";

/// The repository root of a store (`schemas/..`).
pub fn repo_root(store: &Store) -> PathBuf {
    let root = store.root.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    if root.as_os_str().is_empty() { PathBuf::from(".") } else { root }
}

/// Indexes the adapter's hand-written kernels, naming methods by the operators of both snapshots.
pub fn index_adapter(root: &Path, snaps: &[&PytorchSnapshot]) -> Result<AdapterIndex, Error> {
    let dir = root.join(ADAPTER_DIR);
    if !dir.is_dir() {
        return Ok(AdapterIndex::default());
    }
    adapter_index::index_dir_with(&dir, root, || {
        adapter_index::method_map(snaps.iter().flat_map(|s| s.registry.functions.iter().map(|f| &f.func.name)))
    })
}

/// [`index_adapter`] for a pair read with [`Store::load_pytorch_pair`] (methods named by the operators
/// of both versions).
pub fn index_adapter_pair(root: &Path, pair: &PytorchPair) -> Result<AdapterIndex, Error> {
    let dir = root.join(ADAPTER_DIR);
    if !dir.is_dir() {
        return Ok(AdapterIndex::default());
    }
    adapter_index::index_dir_with(&dir, root, || pair_method_map(pair))
}

/// [`adapter_index::method_map`] over the operators of both versions of a pair.
pub fn pair_method_map(pair: &PytorchPair) -> std::collections::HashMap<String, String> {
    let names: Vec<OperatorName> = pair.operator_names().filter_map(|n| OperatorName::parse(n).ok()).collect();
    adapter_index::method_map(&names)
}

/// Diffs a pair read with [`Store::load_pytorch_pair`] and builds the report: the same report as
/// [`pytorch_report`] over the two full snapshots.
pub fn pytorch_pair_report(pair: &PytorchPair, d: PairDiff<'_>, rules: &RuleSet) -> Report {
    let (changes, custom) = with_custom(pytorch::diff_pair(pair, rules), d.custom, rules);
    build_report(ReportInput {
        title: d.title,
        old: pair.old.meta.version.clone(),
        new: pair.new.meta.version.clone(),
        changes,
        kernels: d.kernels,
        backends: d.backends,
        generated: d.generated,
        allow: d.allow,
        today: d.today,
        states: d.states,
        rules,
        custom,
    })
}

/// Joins the changes with the custom operators (when given): their collision changes are added,
/// the impacts returned for [`ReportInput::custom`].
fn with_custom(mut changes: Vec<Change>, custom: Option<&CustomUses>, rules: &RuleSet) -> (Vec<Change>, Vec<Impact>) {
    let Some(custom) = custom else { return (changes, Vec::new()) };
    let (impacts, added) = super::custom::impacts(custom, &changes, rules);
    changes.extend(added);
    (changes, impacts)
}

/// Options of a comparison of a [`PytorchPair`] (as [`PytorchDiff`], the snapshots in the pair).
pub struct PairDiff<'a> {
    pub title: String,
    pub kernels: &'a AdapterIndex,
    pub backends: &'a [Backend<'a>],
    pub generated: &'a GeneratedIndex,
    pub allow: Option<&'a AllowList>,
    pub today: &'a str,
    /// The adapter's coverage in both versions (`crate::compare::adapter_states`), when known.
    pub states: Option<&'a AdapterStates>,
    /// The adapter's custom operators, resolved against the old version
    /// ([`CustomOperators::resolve_in`]).
    pub custom: Option<&'a CustomUses>,
}

/// Options of one PyTorch comparison.
pub struct PytorchDiff<'a> {
    pub old: &'a PytorchSnapshot,
    pub new: &'a PytorchSnapshot,
    pub title: String,
    pub kernels: &'a AdapterIndex,
    pub backends: &'a [Backend<'a>],
    pub generated: &'a GeneratedIndex,
    pub allow: Option<&'a AllowList>,
    pub today: &'a str,
    pub states: Option<&'a AdapterStates>,
    /// The adapter's custom operators, resolved against `old` ([`CustomOperators::resolve`]).
    pub custom: Option<&'a CustomUses>,
}

/// Diffs two PyTorch snapshots and builds the report.
pub fn pytorch_report(d: PytorchDiff<'_>, rules: &RuleSet) -> Report {
    let (changes, custom) = with_custom(pytorch::diff(d.old, d.new, rules), d.custom, rules);
    build_report(ReportInput {
        title: d.title,
        old: d.old.meta.version.clone(),
        new: d.new.meta.version.clone(),
        changes,
        kernels: d.kernels,
        backends: d.backends,
        generated: d.generated,
        allow: d.allow,
        today: d.today,
        states: d.states,
        rules,
        custom,
    })
}

/// Every committed report: path relative to the repository root -> content.
pub fn expected_reports(store: &Store, rules: &RuleSet) -> Result<BTreeMap<PathBuf, String>, Error> {
    let root = repo_root(store);
    let versions = store.versions("pytorch");
    let mut snaps: BTreeMap<Version, PytorchSnapshot> = BTreeMap::new();
    for v in &versions {
        snaps.insert(v.clone(), store.load_pytorch(v)?);
    }
    let all: Vec<&PytorchSnapshot> = snaps.values().collect();
    let kernels = index_adapter(&root, &all)?;
    let cfg = crate::compare::config_at(&root)?;
    let generated = match &cfg {
        Some(c) => GeneratedIndex::load_from(&root, &c.config.adapter.generated),
        None => GeneratedIndex::load(&root),
    };
    let custom = CustomOperators::load(&root)?;
    // the adapter's coverage of every version (a report joins two of them)
    let mut coverage: BTreeMap<Version, BTreeMap<String, super::OpState>> = BTreeMap::new();
    if let Some(c) = &cfg {
        for (v, snap) in &snaps {
            coverage.insert(v.clone(), crate::compare::states_of(c, store, snap)?);
        }
    }
    let kernel_file = crate::compare::kernel_file(&kernels);
    let mut out = BTreeMap::new();
    let mut index_rows = Vec::new();
    let mut pairs: Vec<(String, Version, Version)> =
        versions.windows(2).map(|w| (format!("{}..{}", w[0], w[1]), w[0].clone(), w[1].clone())).collect();
    for (a, b) in EXTRA_PAIRS {
        let (va, vb) = (store.resolve("pytorch", a)?, store.resolve("pytorch", b)?);
        pairs.push((format!("{a}..{b}"), va, vb));
    }
    for (name, va, vb) in pairs {
        let (Some(old), Some(new)) = (snaps.get(&va), snaps.get(&vb)) else { continue };
        let states = match (coverage.get(&va), coverage.get(&vb)) {
            (Some(o), Some(n)) => {
                Some(AdapterStates { old: o.clone(), new: n.clone(), kernel_file: kernel_file.clone() })
            }
            _ => None,
        };
        let uses = custom.as_ref().map(|c| c.resolve(&old.registry.functions));
        let r = pytorch_report(
            PytorchDiff {
                old,
                new,
                title: format!("pytorch {va} -> {vb}"),
                kernels: &kernels,
                backends: &[],
                generated: &generated,
                allow: None,
                today: "",
                states: states.as_ref(),
                custom: uses.as_ref(),
            },
            rules,
        );
        let file = PathBuf::from("diffs").join("pytorch").join(format!("{name}.md"));
        let [(_, b), (_, a), (_, i)] = r.counts();
        index_rows
            .push(format!("| [{name}](pytorch/{name}.md) | {va} | {vb} | {b} | {a} | {i} | {} |", r.to_edit().count()));
        out.insert(file, report_markdown::render(&r, rules));
    }
    let mut readme = String::from(
        "# Committed drift reports\n\nGenerated by `xirang-scan diffs` (checked by `xirang-scan diffs --check` in CI); \
         do not edit by hand.\nOne report per consecutive pair of snapshots in `schemas/`, plus the quick-start pair.\n\n\
         | report | old | new | breaking | action | info | to edit |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    for row in index_rows {
        readme.push_str(&row);
        readme.push('\n');
    }
    let uses = super::header::SymbolUses::index_dir(&root.join(ADAPTER_DIR), &root)?;
    for vendor in HEADER_UPSTREAMS {
        let vs = store.versions(vendor);
        if vs.len() < 2 {
            continue;
        }
        readme.push_str(&format!(
            "\n## {vendor} driver headers\n\n| report | old | new | breaking | action | info | to edit |\n\
             | --- | --- | --- | ---: | ---: | ---: | ---: |\n"
        ));
        let mut prev = store.load_headers(vendor, &vs[0])?;
        let mut prev_v = &vs[0];
        for v in &vs[1..] {
            let next = store.load_headers(vendor, v)?;
            let r = header_report(vendor, &prev, &next, &uses, None, "", rules);
            let name = format!("{prev_v}..{v}");
            let [(_, b), (_, a), (_, i)] = r.counts();
            readme.push_str(&format!(
                "| [{name}]({vendor}/{name}.md) | {prev_v} | {v} | {b} | {a} | {i} | {} |\n",
                r.to_edit().count()
            ));
            out.insert(
                PathBuf::from("diffs").join(vendor).join(format!("{name}.md")),
                report_markdown::render(&r, rules),
            );
            prev = next;
            prev_v = v;
        }
        for (_, a, b) in HEADER_EXTRA_PAIRS.iter().filter(|(x, _, _)| x == vendor) {
            let (va, vb) = (store.resolve(vendor, a)?, store.resolve(vendor, b)?);
            let r = header_report(
                vendor,
                &store.load_headers(vendor, &va)?,
                &store.load_headers(vendor, &vb)?,
                &uses,
                None,
                "",
                rules,
            );
            let name = format!("{a}..{b}");
            let [(_, b_), (_, a_), (_, i)] = r.counts();
            readme.push_str(&format!(
                "| [{name}]({vendor}/{name}.md) | {va} | {vb} | {b_} | {a_} | {i} | {} |\n",
                r.to_edit().count()
            ));
            out.insert(
                PathBuf::from("diffs").join(vendor).join(format!("{name}.md")),
                report_markdown::render(&r, rules),
            );
        }
    }
    let cvs = store.versions(crate::cxx_snapshot::CXX_UPSTREAM);
    if cvs.len() >= 2 {
        let up = crate::cxx_snapshot::CXX_UPSTREAM;
        let index = index_cxx(&root.join(ADAPTER_DIR), &root)?;
        let autocast_generated = root.join(super::cxx::AUTOCAST_FILE).is_file();
        readme.push_str(
            "\n## PyTorch C++ extension interface\n\n| report | old | new | breaking | action | info | to edit |\n\
             | --- | --- | --- | ---: | ---: | ---: | ---: |\n",
        );
        let mut prev = store.load_cxx(&cvs[0])?;
        for v in &cvs[1..] {
            let next = store.load_cxx(v)?;
            let r = cxx_report(&prev, &next, &index, autocast_generated, None, "", rules);
            let name = format!("{}..{v}", prev.meta.version);
            let [(_, b), (_, a), (_, i)] = r.counts();
            readme.push_str(&format!(
                "| [{name}]({up}/{name}.md) | {} | {v} | {b} | {a} | {i} | {} |\n",
                prev.meta.version,
                r.to_edit().count()
            ));
            out.insert(PathBuf::from("diffs").join(up).join(format!("{name}.md")), report_markdown::render(&r, rules));
            prev = next;
        }
    }
    out.insert(PathBuf::from("diffs").join("README.md"), readme);
    Ok(out)
}

/// Writes the committed reports (removing stale `.md` files under `diffs/pytorch/`); returns the
/// files written.
pub fn write_reports(store: &Store, rules: &RuleSet) -> Result<Vec<PathBuf>, Error> {
    let root = repo_root(store);
    let want = expected_reports(store, rules)?;
    let files: Vec<(PathBuf, String)> = want.iter().map(|(p, t)| (p.clone(), t.clone())).collect();
    // all reports or none (a full disk or a kill leaves the previous ones)
    crate::fsio::write_changed(&root, "diffs", &files, &stale_extra(&root, &want))
}

/// Files that differ from what `diffs` would write, or should not be there.
pub fn check_reports(store: &Store, rules: &RuleSet) -> Result<Vec<PathBuf>, Error> {
    let root = repo_root(store);
    let want = expected_reports(store, rules)?;
    let mut stale = Vec::new();
    for (rel, text) in &want {
        match std::fs::read(root.join(rel)) {
            Ok(b) if b == text.as_bytes() => {}
            _ => stale.push(rel.clone()),
        }
    }
    stale.extend(stale_extra(&root, &want));
    Ok(stale)
}

fn stale_extra(root: &Path, want: &BTreeMap<PathBuf, String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for up in std::iter::once("pytorch")
        .chain(HEADER_UPSTREAMS.iter().copied())
        .chain(std::iter::once(crate::cxx_snapshot::CXX_UPSTREAM))
    {
        let dir = root.join("diffs").join(up);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let rel = PathBuf::from("diffs").join(up).join(e.file_name());
            if rel.extension().is_some_and(|x| x == "md") && !want.contains_key(&rel) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}
