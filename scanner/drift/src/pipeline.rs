//! The drift engine's standard pipeline pieces: header and C++ interface reports, and the adapter
//! indexes a PyTorch comparison joins (hand-written Rust kernels, C++ sources). The PyTorch report
//! with the adapter's coverage and custom operators is built by `xirang-compare`.

use std::path::{Path, PathBuf};

use crate::adapter_index::{self, AdapterIndex};
use crate::allow::AllowList;
use crate::error::Error;
use crate::schema::OperatorName;
use crate::snapshot::{PytorchPair, PytorchSnapshot, Store};
use crate::{Report, RuleSet};

/// Diffs two header snapshots of `vendor` and builds the report (impact: uses of the changed symbols
/// in `adapter-runtime/`, and the generated bindings).
pub fn header_report(
    vendor: &str,
    old: &crate::snapshot::HeaderSnapshot,
    new: &crate::snapshot::HeaderSnapshot,
    uses: &crate::header::SymbolUses,
    allow: Option<&AllowList>,
    today: &str,
    rules: &RuleSet,
) -> Report {
    let changes = crate::header::diff(old, new, rules);
    let (changes, suppressed, allow_notes) = match allow {
        Some(a) => a.apply(changes, today),
        None => (changes, Vec::new(), Vec::new()),
    };
    let impact = crate::header::impacts(&changes, uses, vendor);
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
    crate::sort_report(&mut r);
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
    let changes = crate::cxx::diff(old, new, rules);
    let (changes, suppressed, allow_notes) = match allow {
        Some(a) => a.apply(changes, today),
        None => (changes, Vec::new(), Vec::new()),
    };
    let impact = crate::cxx::impacts(&changes, index, autocast_generated);
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
    crate::sort_report(&mut r);
    r
}

/// The generated autocast registration (relative to the repository root).
pub fn cxx_autocast_file() -> &'static str {
    crate::cxx::AUTOCAST_FILE
}

/// Indexes the C++ sources of the adapter (`dir`, default `adapter-runtime/`), paths relative to `root`.
pub fn index_cxx(dir: &Path, root: &Path) -> Result<xirang_cxx::index::CxxIndex, Error> {
    if !dir.is_dir() {
        return Ok(xirang_cxx::index::CxxIndex::default());
    }
    Ok(xirang_cxx::index::index_dir(dir, root)?)
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
    Ok(adapter_index::index_dir_with(&dir, root, || {
        adapter_index::method_map(snaps.iter().flat_map(|s| s.registry.functions.iter().map(|f| &f.func.name)))
    })?)
}

/// [`index_adapter`] for a pair read with [`Store::load_pytorch_pair`] (methods named by the operators
/// of both versions).
pub fn index_adapter_pair(root: &Path, pair: &PytorchPair) -> Result<AdapterIndex, Error> {
    let dir = root.join(ADAPTER_DIR);
    if !dir.is_dir() {
        return Ok(AdapterIndex::default());
    }
    Ok(adapter_index::index_dir_with(&dir, root, || pair_method_map(pair))?)
}

/// [`adapter_index::method_map`] over the operators of both versions of a pair.
pub fn pair_method_map(pair: &PytorchPair) -> std::collections::HashMap<String, String> {
    let names: Vec<OperatorName> = pair.operator_names().filter_map(|n| OperatorName::parse(n).ok()).collect();
    adapter_index::method_map(&names)
}
