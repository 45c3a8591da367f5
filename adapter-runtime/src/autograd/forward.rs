//! Forward-mode autograd (`torch.autograd.forward_ad`) over the generated jvps
//! (`generated::forward`).
//!
//! ```ignore
//! use xirang_runtime::autograd::forward;
//! let _level = forward_ad::dual_level(&NpuOps)?;           // `with fwAD.dual_level():`
//! let x = forward_ad::make_dual(&x, &v)?;                   // primal x, tangent v
//! let y = ag::exp(&NpuOps, &ag::mul_tensor(&NpuOps, &x, &x)?)?;
//! let (y, jvp) = forward_ad::unpack_dual(&y);               // jvp = J(x) · v
//! ```
//!
//! * **Levels.** One dual level at a time per thread (PyTorch does not support nesting either).
//!   [`dual_level`] registers the ops object the jvps run with; when its guard drops, every
//!   tangent made at that level is gone (`unpack_dual` gives `None`), as in PyTorch.
//! * **Propagation.** The autograd front-ends (`generated::ops::ag::<op>`, `autograd::call`)
//!   treat a dual differentiable input like one that requires grad and call `autograd::record`,
//!   which computes the outputs' tangents with the operator's generated jvp ([`propagate`]); a
//!   backward node is recorded only if an input also requires grad. A differentiable input
//!   without a tangent contributes zeros. Like reverse mode, nothing propagates while
//!   `autograd::no_grad()` is on (the front-ends skip recording).
//! * **Coverage.** An operator whose forward formula was not translated, or that has none in
//!   `derivatives.yaml`, fails at the call with `Error::Unsupported` naming the operator and the
//!   formula: a dual input never yields a silently missing or wrong tangent.
//!   `generated::forward::FORWARD_COVERAGE` lists the status of every recordable operator.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::mode::no_grad;
use super::node::{NodeInfo, Ops};
use crate::error::{Error, Result};
use crate::generated::forward::JVPS;
use crate::ivalue::IValue;
use crate::tensor::Tensor;

/// A tensor's tangent at a dual level.
pub struct Tangent {
    level: u64,
    tangent: Tensor,
}

impl std::fmt::Debug for Tangent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tangent(level={}, {:?})", self.level, self.tangent)
    }
}

/// A generated jvp: (ops, boxed arguments, boxed results) -> one tangent per result.
pub type Jvp = fn(&dyn Ops, &[IValue], &[IValue]) -> Result<Vec<Option<Tensor>>>;

/// One row of `generated::forward::JVPS`.
pub struct JvpInfo {
    pub op: &'static str,
    /// Whether the forward formulas were translated (otherwise `jvp` returns the error).
    pub translated: bool,
    pub jvp: Jvp,
}

/// The jvp row of `op`, if it has forward formulas.
pub fn jvp_info(op: &str) -> Option<&'static JvpInfo> {
    JVPS.binary_search_by(|j| j.op.cmp(op)).ok().map(|i| &JVPS[i])
}

// ------------------------------------------------------------------------------------------
// levels
// ------------------------------------------------------------------------------------------

static LEVELS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static LEVEL: Cell<Option<(u64, &'static dyn Ops)>> = const { Cell::new(None) };
}

/// An active dual level (`fwAD.dual_level()`); exiting it (drop) clears its tangents.
#[must_use = "the dual level is active only while the guard lives"]
pub struct DualLevel {
    level: u64,
}

impl DualLevel {
    pub fn level(&self) -> u64 {
        self.level
    }
}

impl Drop for DualLevel {
    fn drop(&mut self) {
        LEVEL.with(|l| l.set(None));
    }
}

/// Enters a dual level on this thread; `o` is the ops object the jvps run with (a unit struct
/// such as `&NpuOps` is `'static`). Nested levels are an error, as in PyTorch.
pub fn dual_level(o: &'static dyn Ops) -> Result<DualLevel> {
    LEVEL.with(|l| {
        if l.get().is_some() {
            return Err(Error::InvalidArgument("Nested forward mode AD is not supported at the moment".into()));
        }
        let level = LEVELS.fetch_add(1, Ordering::Relaxed);
        l.set(Some((level, o)));
        Ok(DualLevel { level })
    })
}

fn active() -> Option<(u64, &'static dyn Ops)> {
    LEVEL.with(Cell::get)
}

// ------------------------------------------------------------------------------------------
// dual tensors
// ------------------------------------------------------------------------------------------

/// `fwAD.make_dual(primal, tangent)`: a handle of `primal` (same storage, same autograd state)
/// that carries `tangent` at the active level. The tangent must have the primal's sizes, dtype
/// and device, and both must be floating point.
pub fn make_dual(primal: &Tensor, tangent: &Tensor) -> Result<Tensor> {
    let Some((level, _)) = active() else {
        return Err(Error::InvalidArgument(
            "make_dual: no dual level is active (enter one with forward_ad::dual_level(o))".into(),
        ));
    };
    if !primal.dtype().is_floating() {
        return Err(Error::InvalidArgument(format!(
            "Expected primal to be floating point or complex, but got: {}",
            primal.dtype()
        )));
    }
    if !tangent.dtype().is_floating() {
        return Err(Error::InvalidArgument(format!(
            "Expected tangent to be floating point or complex, but got: {}",
            tangent.dtype()
        )));
    }
    if tangent.sizes() != primal.sizes() {
        return Err(Error::InvalidArgument(format!(
            "Trying to set a forward gradient that has a different size than that of the original Tensor, this is not supported. Tensor is of size {:?} while the given forward gradient is of size {:?}.",
            primal.sizes(),
            tangent.sizes()
        )));
    }
    if tangent.dtype() != primal.dtype() {
        return Err(Error::InvalidArgument(format!(
            "Expected tangent to have the dtype of the primal ({}), but got: {}",
            primal.dtype(),
            tangent.dtype()
        )));
    }
    if tangent.device() != primal.device() {
        return Err(Error::InvalidArgument(format!(
            "Expected tangent to be on the device of the primal ({:?}), but got: {:?}",
            primal.device(),
            tangent.device()
        )));
    }
    if tangent_of(primal).is_some() {
        return Err(Error::InvalidArgument(format!(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the same level {level} is not supported."
        )));
    }
    let mut t = primal.clone();
    t.set_tangent_slot(Some(Arc::new(Tangent { level, tangent: tangent.detach() })));
    Ok(t)
}

/// `fwAD.unpack_dual(t)`: the primal (without tangent, same autograd state) and the tangent at
/// the active level (`None` outside a level, or when `t` is not dual).
pub fn unpack_dual(t: &Tensor) -> (Tensor, Option<Tensor>) {
    let tangent = tangent_of(t);
    let mut p = t.clone();
    p.set_tangent_slot(None);
    (p, tangent)
}

/// The tangent of `t` at the active level.
pub fn tangent_of(t: &Tensor) -> Option<Tensor> {
    let (level, _) = active()?;
    let x: &Tangent = t.tangent_slot().as_deref()?.downcast_ref()?;
    (x.level == level).then(|| x.tangent.clone())
}

/// Whether `t` carries a tangent at the active level.
pub fn is_dual(t: &Tensor) -> bool {
    tangent_of(t).is_some()
}

/// Whether a differentiable input (`info.inputs`) of a call is dual.
pub(crate) fn any_dual(info: &NodeInfo, args: &[IValue]) -> bool {
    if active().is_none() {
        return false;
    }
    info.inputs.iter().any(|&(i, _)| match args.get(i) {
        Some(IValue::Tensor(t)) => is_dual(t),
        Some(IValue::TensorList(ts)) => ts.iter().any(is_dual),
        Some(IValue::OptTensorList(ts)) => ts.iter().flatten().any(is_dual),
        _ => false,
    })
}

/// Gives the floating outputs of a call of `op` their tangents when a differentiable input is
/// dual; an operator without a translated jvp is an error.
pub(crate) fn propagate(info: &NodeInfo, args: &[IValue], outs: &mut [IValue]) -> Result<()> {
    if !any_dual(info, args) {
        return Ok(());
    }
    let Some((level, o)) = active() else { return Ok(()) };
    let op = info.op;
    let Some(j) = jvp_info(op) else {
        return Err(Error::Unsupported(format!(
            "forward-mode AD: `{op}` has no forward formula in derivatives.yaml (PyTorch does not support forward mode for it either)"
        )));
    };
    let tangents = {
        let _g = no_grad();
        (j.jvp)(o, args, outs)?
    };
    for (k, (v, tan)) in outs.iter_mut().zip(tangents).enumerate() {
        let (IValue::Tensor(t), Some(tan)) = (v, tan) else { continue };
        if !t.dtype().is_floating() {
            continue;
        }
        if tan.sizes() != t.sizes() {
            return Err(Error::InvalidArgument(format!(
                "forward-mode AD: the jvp of `{op}` gave a tangent of size {:?} for output {k} of size {:?}",
                tan.sizes(),
                t.sizes()
            )));
        }
        let tan = if tan.dtype() == t.dtype() { tan.detach() } else { tan.to_dtype(t.dtype())?.detach() };
        t.set_tangent_slot(Some(Arc::new(Tangent { level, tangent: tan })));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// helpers for the generated jvps
// ------------------------------------------------------------------------------------------

fn zeros_like(t: &Tensor) -> Result<Tensor> {
    let z = Tensor::zeros(t.sizes(), t.dtype());
    match t.device_ctx() {
        Some(ctx) => z.to_ctx(ctx),
        None => Ok(z),
    }
}

/// The tangent of a differentiable tensor argument: its tangent at the active level, or zeros of
/// its sizes (PyTorch materializes undefined tangents as zeros in formulas).
pub fn tangent(op: &str, what: &str, v: &IValue) -> Result<Tensor> {
    match v {
        IValue::Tensor(t) => match tangent_of(t) {
            Some(x) => Ok(x),
            None => zeros_like(t),
        },
        other => Err(Error::InvalidArgument(format!("{op}: `{what}` is {}, not a Tensor", other.kind()))),
    }
}

/// Replaces boxed argument `i` by its tangent (a tensor, an optional tensor or a tensor list;
/// zeros for elements without one): the arguments of an `auto_linear` jvp.
pub fn set_tangent(op: &str, what: &str, b: &mut [IValue], i: usize) -> Result<()> {
    let Some(v) = b.get_mut(i) else {
        return Err(Error::InvalidArgument(format!("{op}: no argument {i} (`{what}`) in the recorded call")));
    };
    let of = |t: &Tensor| match tangent_of(t) {
        Some(x) => Ok(x),
        None => zeros_like(t),
    };
    *v = match &*v {
        IValue::None => IValue::None,
        IValue::Tensor(t) => IValue::Tensor(of(t)?),
        IValue::TensorList(ts) => IValue::TensorList(ts.iter().map(of).collect::<Result<_>>()?),
        IValue::OptTensorList(ts) => {
            IValue::OptTensorList(ts.iter().map(|t| t.as_ref().map(of).transpose()).collect::<Result<_>>()?)
        }
        other => {
            return Err(Error::InvalidArgument(format!("{op}: `{what}` is {}, not a Tensor", other.kind())));
        }
    };
    Ok(())
}

/// Result `j` of a boxed call, as a tensor.
pub fn output(op: &str, outs: Vec<IValue>, j: usize) -> Result<Tensor> {
    match outs.into_iter().nth(j) {
        Some(IValue::Tensor(t)) => Ok(t),
        Some(other) => Err(Error::InvalidArgument(format!("{op}: result {j} is {}, not a Tensor", other.kind()))),
        None => Err(Error::InvalidArgument(format!("{op}: no result {j}"))),
    }
}

/// The tangent of an optional tensor argument (`None` when the argument is `None`).
pub fn opt_tangent(op: &str, what: &str, v: &IValue) -> Result<Option<Tensor>> {
    match v {
        IValue::None => Ok(None),
        v => tangent(op, what, v).map(Some),
    }
}

/// A tensor's sizes as `i64` (`x.sym_sizes()` in formulas).
pub fn sizes(t: &Tensor) -> Vec<i64> {
    t.sizes().iter().map(|&s| s as i64).collect()
}

/// The generated jvps' readers of the recorded call's boxed arguments and results (forward-mode
/// propagation runs inside [`crate::autograd::record`], which sees the call boxed).
pub mod unbox {
    use crate::error::{Error, Result};
    use crate::ivalue::{FromIValue, IValue};
    use crate::tensor::Tensor;

    fn want<'a>(op: &str, what: &str, v: &'a IValue) -> Result<&'a Tensor> {
        match v {
            IValue::Tensor(t) => Ok(t),
            other => Err(Error::InvalidArgument(format!("{op}: `{what}` is {}, not a Tensor", other.kind()))),
        }
    }

    /// Boxed value `i` (an argument or a result); a call recorded with fewer values than the
    /// schema has (trailing defaults omitted) is an error, not a panic.
    pub fn arg<'a>(op: &str, v: &'a [IValue], i: usize) -> Result<&'a IValue> {
        v.get(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "autograd: `{op}` was recorded with {} values; pass every argument (schema defaults included)",
                v.len()
            ))
        })
    }

    /// A tensor argument or result, detached.
    pub fn tensor(op: &str, what: &str, v: &IValue) -> Result<Tensor> {
        Ok(want(op, what, v)?.detach())
    }

    /// An optional tensor argument, detached.
    pub fn opt_tensor(op: &str, what: &str, v: &IValue) -> Result<Option<Tensor>> {
        match v {
            IValue::None => Ok(None),
            v => tensor(op, what, v).map(Some),
        }
    }

    /// A non-tensor argument.
    pub fn value<T: FromIValue>(op: &str, v: &IValue) -> Result<T> {
        T::from_ivalue(op, v.clone())
    }
}
