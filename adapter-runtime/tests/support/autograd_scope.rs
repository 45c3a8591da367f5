//! The operators the autograd tests must cover, shared by `tests/autograd_gradcheck.rs` (f64 finite
//! differences) and `tests/autograd_goldens.rs` (PyTorch's gradients in f32, f16 and bf16).

use std::collections::BTreeSet;

use xirang_runtime::generated::autograd::{BACKWARD_COVERAGE, NODES};
use xirang_runtime::generated::recipes::RECIPES;

/// Operators with a backward node whose formulas are all translated and a kernel or recipe.
pub fn in_scope() -> BTreeSet<&'static str> {
    let fast: BTreeSet<&str> =
        xirang_runtime::kernels::registry::operators().into_iter().chain(RECIPES.iter().map(|r| r.0)).collect();
    NODES
        .iter()
        .map(|n| n.op)
        .filter(|op| fast.contains(op))
        .filter(|op| {
            let rows: Vec<_> = BACKWARD_COVERAGE.iter().filter(|r| r.0 == *op).collect();
            !rows.is_empty() && rows.iter().all(|r| r.2 == "translated")
        })
        .collect()
}
