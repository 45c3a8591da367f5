//! The host reference tier: every operator's reference implementation on the host, which the
//! CPU-fallback tier runs, the precision suite compares device kernels with, and recipes and
//! backward formulas may call.
//!
//! A function whose arguments are its operator's schema arguments (`mm(self, mat2)`,
//! `add(self, other, alpha)`) carries the operator's marker itself, `/// xirang-fallback: <op>`,
//! and `xirang-scan generate` attaches it as that operator's fallback
//! (`generated/ops_fallback.rs`, by its path: `crate::reference::linalg::mm`). [`schema`] holds
//! the entry points of the operators whose schema arguments differ from the reference function's
//! (reduction enums, rounding-mode strings, sizes as `i64`, in-place and out= forms, factories
//! placed on a device): only those that adapt something.
//!
//! Every public op accepts host or device tensors. Device inputs are copied
//! to the host, the reference implementation runs, and results are copied
//! back to the inputs' device ([`fallback_counts`] counts these per op).
//! Mixing devices is an error, except that zero-dim host tensors may be
//! combined with device tensors (as in PyTorch).
//!
//! Numerics: floating computation is done in f64 and rounded once to the
//! result dtype, which is bit-identical to PyTorch for `+ - * /` and `sqrt`
//! (and within an ulp elsewhere); reductions accumulate in f64 (PyTorch
//! accumulates f16/bf16 in f32 and f32 in f32 with cascade summation), so
//! golden comparisons use tolerances. Integer arithmetic wraps like C++.

pub mod activation_bwd;
pub mod core_aten;
pub mod core_aten_more;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod nn;
pub mod reduce;
pub mod rnn;
pub mod schema;

pub use activation_bwd::*;
pub use core_aten::*;
pub use core_aten_more::*;
pub use elementwise::*;
pub use index::*;
pub use linalg::*;
pub use nn::*;
pub use reduce::*;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::device::DeviceContext;
use crate::dtype::{DType, Operand, Scalar};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Elements above which host kernels run on rayon's pool.
pub const PARALLEL_THRESHOLD: usize = 1 << 15;

/// The right-hand side of a binary op: a tensor or a Python number.
#[derive(Debug, Clone, Copy)]
pub enum Rhs<'a> {
    Tensor(&'a Tensor),
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Rhs<'a> {
    fn from(t: &'a Tensor) -> Self {
        Rhs::Tensor(t)
    }
}
impl From<Scalar> for Rhs<'_> {
    fn from(s: Scalar) -> Self {
        Rhs::Scalar(s)
    }
}
impl From<f64> for Rhs<'_> {
    fn from(s: f64) -> Self {
        Rhs::Scalar(Scalar::Float(s))
    }
}
impl From<i64> for Rhs<'_> {
    fn from(s: i64) -> Self {
        Rhs::Scalar(Scalar::Int(s))
    }
}
impl From<bool> for Rhs<'_> {
    fn from(s: bool) -> Self {
        Rhs::Scalar(Scalar::Bool(s))
    }
}

impl Rhs<'_> {
    pub(crate) fn operand(&self) -> Operand {
        match self {
            Rhs::Tensor(t) => operand(t),
            Rhs::Scalar(s) => Operand::Scalar(*s),
        }
    }
    /// As a tensor (a scalar becomes a zero-dim host tensor of its wrapped dtype).
    pub(crate) fn tensor(&self) -> Tensor {
        match self {
            Rhs::Tensor(t) => (*t).clone(),
            Rhs::Scalar(s) => Tensor::scalar_of(*s, s.wrapped_dtype()),
        }
    }
}

/// Loss reduction (`reduction=` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    None,
    Mean,
    Sum,
}

/// `result_type` category of a tensor.
pub(crate) fn operand(t: &Tensor) -> Operand {
    if t.dim() == 0 { Operand::ZeroDim(t.dtype()) } else { Operand::Tensor(t.dtype()) }
}

static FALLBACKS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// How many times each op ran on the host for device inputs.
pub fn fallback_counts() -> BTreeMap<&'static str, u64> {
    FALLBACKS.lock().map(|g| g.clone()).unwrap_or_default()
}

/// Run a host implementation on `inputs`, moving device inputs to the host
/// and the outputs back to the common device.
pub(crate) fn on_host<const N: usize>(
    name: &'static str,
    inputs: &[&Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<[Tensor; N]>,
) -> Result<[Tensor; N]> {
    let mut ctx: Option<&Arc<DeviceContext>> = None;
    for t in inputs {
        if let Some(c) = t.device_ctx() {
            match ctx {
                Some(prev) if !Arc::ptr_eq(prev, c) => {
                    return Err(Error::DeviceMismatch(format!(
                        "{name}: expected all tensors to be on the same device, but found at least two devices, {} and {}",
                        prev.device(),
                        c.device()
                    )));
                }
                _ => ctx = Some(c),
            }
        }
    }
    let Some(ctx) = ctx else {
        let host: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        return f(&host);
    };
    for t in inputs {
        if t.is_cpu() && t.dim() > 0 {
            return Err(Error::DeviceMismatch(format!(
                "{name}: expected all tensors to be on the same device, but found at least two devices, {} and cpu",
                ctx.device()
            )));
        }
    }
    if let Ok(mut g) = FALLBACKS.lock() {
        *g.entry(name).or_default() += 1;
    }
    let host = inputs.iter().map(|t| t.to_cpu()).collect::<Result<Vec<_>>>()?;
    let out = f(&host)?;
    let mut moved = Vec::with_capacity(N);
    for t in out {
        moved.push(t.to_ctx(ctx)?);
    }
    moved.try_into().map_err(|_| Error::Unsupported("output count mismatch".into()))
}

/// `on_host` for single-output ops.
pub(crate) fn on_host1(
    name: &'static str,
    inputs: &[&Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
) -> Result<Tensor> {
    let [t] = on_host(name, inputs, |h| Ok([f(h)?]))?;
    Ok(t)
}

pub(crate) fn pmap<T: Send + Sync, U: Send>(v: &[T], f: impl Fn(&T) -> U + Send + Sync) -> Vec<U> {
    if v.len() >= PARALLEL_THRESHOLD { v.par_iter().map(f).collect() } else { v.iter().map(f).collect() }
}

pub(crate) fn pmap2<T: Send + Sync + Copy, U: Send>(a: &[T], b: &[T], f: impl Fn(T, T) -> U + Send + Sync) -> Vec<U> {
    if a.len() >= PARALLEL_THRESHOLD {
        a.par_iter().zip(b.par_iter()).map(|(x, y)| f(*x, *y)).collect()
    } else {
        a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect()
    }
}

/// Values of `t` broadcast to `shape`, as f64.
pub(crate) fn f64s(t: &Tensor, shape: &[usize]) -> Result<Vec<f64>> {
    t.broadcast_to(shape)?.to_f64_vec()
}

/// Values of `t` broadcast to `shape`, as i64.
pub(crate) fn i64s(t: &Tensor, shape: &[usize]) -> Result<Vec<i64>> {
    t.broadcast_to(shape)?.to_i64_vec()
}

pub(crate) fn require_float(name: &str, d: DType) -> Result<()> {
    if d.is_floating() { Ok(()) } else { Err(Error::DType(format!("\"{name}\" not implemented for '{}'", d.name()))) }
}

/// A fresh host tensor moved to `like`'s device (a no-op for host `like`).
pub(crate) fn on_device_of(t: Tensor, like: &Tensor) -> Result<Tensor> {
    match like.device_ctx() {
        Some(ctx) => t.to_ctx(ctx),
        None => Ok(t),
    }
}
