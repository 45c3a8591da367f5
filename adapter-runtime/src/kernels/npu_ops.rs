//! `NpuOps`: this adapter's operator set, its hand-written backward hooks (none today) and the operators it
//! serves without a kernel launch (views, `clone`).
//!
//! `NpuOps`'s `AtenOps` impl is generated (`generated/native.rs`): every function marked
//! `/// xirang-kernel: <op>` under `adapter-runtime/src/` is the method of that operator, typed as
//! the schema says. When a kernel declines the arguments (host tensors, a dtype it does not take:
//! `Error::Unsupported`) the generated front-end runs the CPU fallback of the same operator, and
//! the dispatch counters record which tier served it. Every other operator uses the trait's
//! generated default body (recipe, out=/in-place wrapper, or CPU fallback). The drift engine
//! indexes the marked functions, so an upstream schema change to one of them is reported at its
//! line, and the compiler fails in `generated/native.rs` after `xirang-scan generate`.

use crate::error::Result;
use crate::ivalue::MemoryFormat;
use crate::tensor::Tensor;

/// The simulated NPU's kernels.
#[derive(Debug, Clone, Copy, Default)]
pub struct NpuOps;

/// The hand-written backward formulas this adapter supplies: none today, as the translator handles
/// every formula of the operators it serves (the generated hooks return `Error::Unsupported`,
/// naming the formula to write). A hook written here is listed by the drift report as a place to
/// edit when upstream changes the operator's derivative.
impl crate::generated::autograd::BackwardHooks for NpuOps {}

// Operators served without a kernel launch: views (no copy) and the device copy of `clone`.
// Marked like every kernel: `generated/native.rs` makes them `NpuOps`'s `AtenOps` methods.

/// A view: no kernel, no copy.
/// xirang-kernel: t
pub fn t(self_: &Tensor) -> Result<Tensor> {
    self_.t()
}

/// A view: no kernel, no copy.
/// xirang-kernel: view
pub fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    self_.view(size)
}

/// `_unsafe_view` is `view` without the aliasing bookkeeping (`reshape` uses it after a
/// contiguous copy): a view here too.
/// xirang-kernel: _unsafe_view
pub fn unsafe_view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    self_.view(size)
}

/// A view: no kernel, no copy.
/// xirang-kernel: permute
pub fn permute(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    self_.permute(dims)
}

/// A view: no kernel, no copy.
/// xirang-kernel: transpose.int
pub fn transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    self_.transpose(dim0, dim1)
}

/// A view: no kernel, no copy.
/// xirang-kernel: expand
pub fn expand(self_: &Tensor, size: &[i64], _implicit: bool) -> Result<Tensor> {
    self_.expand(size)
}

/// A view: no kernel, no copy.
/// xirang-kernel: unsqueeze
pub fn unsqueeze(self_: &Tensor, dim: i64) -> Result<Tensor> {
    self_.unsqueeze(dim)
}

/// A device copy (the strided-copy kernel). The result is always contiguous: with
/// `memory_format` None / preserve, PyTorch would keep a dense input's strides (same values,
/// other strides); channels-last formats are declined (the fallback serves them).
/// xirang-kernel: clone
pub fn clone(self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
    let plain = matches!(memory_format, None | Some(MemoryFormat::Contiguous | MemoryFormat::Preserve));
    if !plain {
        return super::unsupported("clone", "a channels-last memory format");
    }
    super::index::strided_copy(self_)
}
