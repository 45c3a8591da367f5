//! Calling an operator by name with boxed arguments, through the three
//! tiers: the native kernel when the device has one for these arguments
//! ([`crate::kernels::native`]), else the CPU fallback
//! ([`crate::dispatch::fallback`] over [`crate::host_registry`]). The call
//! is counted per operator and tier by [`crate::dispatch::call`], and the
//! force-fallback list is honoured.
//!
//! This is the runtime's own boxed entry, used by the precision suite and
//! the examples; the generated `generated::ops::call_boxed` reaches the same
//! kernels through the typed `AtenOps` trait.

use crate::dispatch::{self, Tier};
use crate::error::{Error, Result};
use crate::ivalue::IValue;

/// Runs `op` (a qualified name such as `add.Tensor`) on `args` (schema order:
/// positional, kwarg-only, out=). Returns the boxed results.
pub fn call(op: &str, args: Vec<IValue>) -> Result<Vec<IValue>> {
    Ok(call_with_tier(op, args)?.0)
}

/// [`call`], also saying which tier served the call.
pub fn call_with_tier(op: &str, args: Vec<IValue>) -> Result<(Vec<IValue>, Tier)> {
    let &(name, native) = operator(op).ok_or_else(|| {
        Error::Unsupported(format!("{op}: unknown operator (no native kernel, no host implementation)"))
    })?;
    let mut tier = Tier::Native;
    let out = dispatch::call(name, || {
        if let Some(native) = native
            && !dispatch::forced_fallback(name)
            && let Some(r) = native(&args)?
        {
            return Ok(r);
        }
        tier = Tier::Fallback;
        dispatch::fallback(name, args, &[])
    })?;
    Ok((out, tier))
}

/// The interned name and native entry of every operator the runtime can run, by name: one hash
/// lookup per boxed call instead of binary searches over both tables.
fn operator(op: &str) -> Option<&'static (&'static str, Option<crate::kernels::NativeFn>)> {
    type Table = std::collections::HashMap<&'static str, (&'static str, Option<crate::kernels::NativeFn>)>;
    static OPS: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    OPS.get_or_init(|| {
        let host = crate::host_registry::operators().into_iter();
        host.chain(crate::kernels::operators()).map(|n| (n, (n, crate::kernels::native(n)))).collect()
    })
    .get(op)
}

/// Every operator the runtime can run, with the best tier it has on the
/// simulated device: `native` (a kernel, with the host implementation as
/// fallback for arguments the kernel declines) or `fallback` (host only).
pub fn coverage() -> Vec<(&'static str, Tier)> {
    let mut v: Vec<(&'static str, Tier)> = crate::host_registry::operators()
        .into_iter()
        .map(|op| (op, if crate::kernels::native(op).is_some() { Tier::Native } else { Tier::Fallback }))
        .collect();
    for op in crate::kernels::operators() {
        if crate::host_registry::lookup(op).is_none() {
            v.push((op, Tier::Native));
        }
    }
    v.sort();
    v
}
