//! `NpuOps`: this adapter's operator set, its hand-written backward hooks and the operators it
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

use crate::dtype::Scalar;
use crate::error::Result;
use crate::ivalue::MemoryFormat;
use crate::tensor::Tensor;

/// The simulated NPU's kernels.
#[derive(Debug, Clone, Copy, Default)]
pub struct NpuOps;

/// The hand-written backward formulas this adapter supplies (the other generated hooks return
/// `Error::Unsupported`, naming the formula to write). The drift report lists these methods as
/// places to edit when upstream changes the operator's derivative.
impl crate::generated::autograd::BackwardHooks for NpuOps {
    /// `silu: self: "GradMode::is_enabled() ? infinitely_differentiable_silu_backward(grad, self)
    /// : silu_backward(grad, self)"`: the translator takes the no-grad branch, but `silu_backward`
    /// is not in the generated operator selection.
    fn hook_silu_self(
        &self,
        node: &crate::generated::autograd::SiluBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        // d silu(x) / dx = s(x) * (1 + x * (1 - s(x))), s = sigmoid
        let x = &node.self_;
        let s = aten::sigmoid(self, x)?;
        let one = Scalar::Int(1);
        let u = aten::add_scalar(self, &aten::mul_tensor(self, x, &aten::rsub_scalar(self, &s, one, one)?)?, one, one)?;
        aten::mul_tensor(self, g, &aten::mul_tensor(self, &s, &u)?).map(Some)
    }

    /// `where.self: self: where(condition, grad, 0)`: the gradient where the condition holds.
    fn hook_where_self_self(
        &self,
        node: &crate::generated::autograd::WhereSelfBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        let off = aten::logical_not(self, &node.condition)?;
        aten::masked_fill_scalar(self, g, &off, Scalar::Int(0)).map(Some)
    }

    /// `where.self: other: where(condition, 0, grad)`.
    fn hook_where_self_other(
        &self,
        node: &crate::generated::autograd::WhereSelfBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        aten::masked_fill_scalar(self, g, &node.condition, Scalar::Int(0)).map(Some)
    }

    /// `maximum: self: at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)`.
    fn hook_maximum_self(
        &self,
        node: &crate::generated::autograd::MaximumBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        extremum_grad(self, g, &node.self_, &node.other, Side::SelfLess).map(Some)
    }

    /// `maximum: other: at::where(self == other, grad / 2, grad).masked_fill_(self > other, 0)`.
    fn hook_maximum_other(
        &self,
        node: &crate::generated::autograd::MaximumBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        extremum_grad(self, g, &node.self_, &node.other, Side::SelfGreater).map(Some)
    }

    /// `minimum: self: at::where(self == other, grad / 2, grad).masked_fill_(self > other, 0)`.
    fn hook_minimum_self(
        &self,
        node: &crate::generated::autograd::MinimumBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        extremum_grad(self, g, &node.self_, &node.other, Side::SelfGreater).map(Some)
    }

    /// `minimum: other: at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)`.
    fn hook_minimum_other(
        &self,
        node: &crate::generated::autograd::MinimumBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        extremum_grad(self, g, &node.self_, &node.other, Side::SelfLess).map(Some)
    }

    /// `log1p: self: log1p_backward(grad, self)` = `grad / (self + 1)`.
    fn hook_log1p_self(
        &self,
        node: &crate::generated::autograd::Log1pBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        let one = Scalar::Int(1);
        aten::div_tensor(self, g, &aten::add_scalar(self, &node.self_, one, one)?).map(Some)
    }

    /// `clamp_min: self: where(self > min, grad, 0)` (PyTorch 2.15; 2.3 had `>=`, so at `self == min`
    /// the gradient is now 0). NaN inputs get 0, as `>` is false.
    fn hook_clamp_min_self(
        &self,
        node: &crate::generated::autograd::ClampMinBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        let off = aten::logical_not(self, &aten::gt_scalar(self, &node.self_, node.min)?)?;
        aten::masked_fill_scalar(self, g, &off, Scalar::Int(0)).map(Some)
    }

    /// `cat: tensors: cat_tensors_backward(grad, to_args_sizes_symint(tensors), ..., dim)`: the
    /// gradient split along `dim` by the inputs' sizes (a legacy empty `[0]` input gets an empty
    /// gradient). A list input, so the translator leaves it to a hook.
    fn hook_cat_tensors(
        &self,
        node: &crate::generated::autograd::CatBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let sizes = &node.tensors_args_sizes_symint;
        let Some(Some(g)) = grads.first() else { return Ok(vec![None; sizes.len()]) };
        let legacy_empty = |s: &Vec<i64>| s.as_slice() == [0];
        let ndim = sizes.iter().find(|s| !legacy_empty(s)).map_or(1, Vec::len);
        let dim = crate::shape::wrap_dim(node.dim, ndim)?;
        let mut at = 0i64;
        let mut out = Vec::with_capacity(sizes.len());
        for s in sizes {
            if legacy_empty(s) {
                out.push(Some(Tensor::zeros(&[0], g.dtype())));
                continue;
            }
            let n = s[dim];
            out.push(Some(g.narrow(dim as i64, at, n as usize)?));
            at += n;
        }
        Ok(out)
    }

    /// `native_dropout: input: native_dropout_backward(grad, result1, scale)`, scale `1` when not
    /// training, else `1 / (1 - p)` (`0` for `p == 1`); the translator does not take the
    /// `!train.has_value() || !train.value()` condition.
    fn hook_native_dropout_input(
        &self,
        node: &crate::generated::autograd::NativeDropoutBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        let scale = match node.train {
            Some(true) if node.p == 1.0 => 0.0,
            Some(true) => 1.0 / (1.0 - node.p),
            _ => 1.0,
        };
        aten::native_dropout_backward(self, g, &node.result1, scale).map(Some)
    }

    /// `clamp_max: self: where(self < max, grad, 0)` (PyTorch 2.15; 2.3 had `<=`, so at `self == max`
    /// the gradient is now 0).
    fn hook_clamp_max_self(
        &self,
        node: &crate::generated::autograd::ClampMaxBackward,
        grads: &[Option<Tensor>],
    ) -> Result<Option<Tensor>> {
        use crate::generated::ops::aten;
        let Some(Some(g)) = grads.first() else { return Ok(None) };
        let off = aten::logical_not(self, &aten::lt_scalar(self, &node.self_, node.max)?)?;
        aten::masked_fill_scalar(self, g, &off, Scalar::Int(0)).map(Some)
    }
}

/// Which elements lose the gradient in `maximum`/`minimum`'s backward.
#[derive(Clone, Copy)]
enum Side {
    SelfLess,
    SelfGreater,
}

/// `at::where(self == other, grad / 2, grad).masked_fill_(<side>, 0)`: ties split the gradient.
fn extremum_grad(o: &NpuOps, g: &Tensor, a: &Tensor, b: &Tensor, side: Side) -> Result<Tensor> {
    use crate::generated::ops::aten;
    let tie = aten::eq_tensor(o, a, b)?;
    let split = aten::where_self(o, &tie, &aten::div_scalar(o, g, Scalar::Int(2))?, g)?;
    let off = match side {
        Side::SelfLess => aten::lt_tensor(o, a, b)?,
        Side::SelfGreater => aten::gt_tensor(o, a, b)?,
    };
    aten::masked_fill_scalar(o, &split, &off, Scalar::Int(0))
}

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
