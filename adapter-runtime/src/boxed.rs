//! Calling an operator by name with boxed arguments, through two tiers: the native kernel when
//! the device has one ([`crate::kernels::is_native`]: the generated `call_boxed` and operator
//! front-end, which fall back to the host implementation when the kernel declines the
//! arguments), else the operator's host implementation ([`crate::reference::schema`]) directly, without
//! composition recipes ([`crate::dispatch::with_host_only`]). The call is counted per
//! operator and tier, and the force-fallback list is honoured.
//!
//! This is the runtime's own boxed entry, used by the precision suite, the training examples and
//! the benches: it measures the native kernels against the host reference. PyTorch's boxed calls
//! (the bridge) use the generated `generated::ops::call_boxed`, recipes included.

use crate::dispatch::{self, Tier};
use crate::error::{Error, Result};
use crate::generated::ops::fallback::HOST_OPERATORS;
use crate::ivalue::IValue;

/// Runs `op` (a qualified name such as `add.Tensor`) on `args` (schema order:
/// positional, kwarg-only, out=). Returns the boxed results.
pub fn call(op: &str, args: Vec<IValue>) -> Result<Vec<IValue>> {
    Ok(call_with_tier(op, args)?.0)
}

/// [`call`], also saying which tier served the call.
pub fn call_with_tier(op: &str, args: Vec<IValue>) -> Result<(Vec<IValue>, Tier)> {
    if crate::kernels::is_native(op) {
        let out = crate::generated::ops::call_boxed(&crate::kernels::NpuOps, op, &args)?;
        return Ok((out, dispatch::last_tier()));
    }
    if HOST_OPERATORS.binary_search(&op).is_err() {
        return Err(Error::Unsupported(format!("{op}: unknown operator (no native kernel, no host implementation)")));
    }
    // the same generated entry, every operator forced onto its host implementation
    let out = dispatch::with_host_only(|| crate::generated::ops::call_boxed(&crate::kernels::NpuOps, op, &args))?;
    Ok((out, Tier::Fallback))
}

/// Every operator the runtime can run, with the best tier it has on the
/// simulated device: `native` (a kernel, with the host implementation as
/// fallback for arguments the kernel declines) or `fallback` (host only).
pub fn coverage() -> Vec<(&'static str, Tier)> {
    let mut v: Vec<(&'static str, Tier)> = HOST_OPERATORS
        .iter()
        .map(|&op| (op, if crate::kernels::is_native(op) { Tier::Native } else { Tier::Fallback }))
        .collect();
    for op in crate::kernels::operators() {
        if HOST_OPERATORS.binary_search(&op).is_err() {
            v.push((op, Tier::Native));
        }
    }
    v.sort();
    v
}
