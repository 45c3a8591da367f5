//! The operators the autograd tests must cover, shared by `tests/serial/autograd_gradcheck.rs` (f64 finite
//! differences) and `tests/serial/autograd_goldens.rs` (PyTorch's gradients in f32, f16 and bf16).

use std::collections::BTreeSet;

use xirang_runtime::generated::autograd::{BACKWARD_COVERAGE, NODES};
use xirang_runtime::generated::recipes::RECIPES;

/// Operators whose backward needs a hand-written hook and has one (`impl BackwardHooks for NpuOps`),
/// every other input translated: from the committed coverage report (`diffs/coverage.json`, kept
/// current by `xirang-scan coverage --check` in CI), which indexes the hooks.
fn hand_written() -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../diffs/coverage.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let report: serde_json::Value = serde_json::from_str(&text).expect("coverage.json");
    let mut out = BTreeSet::new();
    for o in report["operators"].as_array().expect("operators") {
        let Some(inputs) = o["inputs"].as_array() else { continue };
        let status: Vec<&str> = inputs.iter().filter_map(|i| i["status"].as_str()).collect();
        let complete = status.iter().all(|s| matches!(*s, "translated" | "hand_written" | "not_differentiable"));
        if complete && status.contains(&"hand_written") {
            out.insert(o["op"].as_str().expect("op").to_string());
        }
    }
    out
}

/// Operators with a kernel or recipe and a backward node whose formulas are all translated (or
/// `not_implemented` upstream, for inputs the cases hold fixed), or whose untranslated formulas
/// have hand-written hooks.
pub fn in_scope() -> BTreeSet<&'static str> {
    let fast: BTreeSet<&str> =
        xirang_runtime::kernels::operators().into_iter().chain(RECIPES.iter().map(|r| r.0)).collect();
    let hand = hand_written();
    NODES
        .iter()
        .map(|n| n.op)
        .filter(|op| fast.contains(op))
        .filter(|op| {
            let rows: Vec<_> = BACKWARD_COVERAGE.iter().filter(|r| r.0 == *op).collect();
            // inputs PyTorch itself leaves `not_implemented` (`native_dropout_backward`'s mask)
            // are held fixed, as PyTorch's gradcheck must
            let translated = rows.iter().any(|r| r.2 == "translated");
            (translated && rows.iter().all(|r| r.2 == "translated" || r.2 == "not_implemented")) || hand.contains(*op)
        })
        .collect()
}
