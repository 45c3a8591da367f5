//! `NpuOps`: this adapter's implementation of the generated `AtenOps` trait.
//!
//! Each method below is a native kernel of the simulated device, reached through the boxed
//! kernel registry ([`super::registry`]); when a kernel declines the arguments (host tensors,
//! a dtype it does not take) the call goes to the CPU fallback of the same operator, and the
//! dispatch counters record which tier served it. Every other operator uses the trait's
//! generated default body (recipe, out=/in-place wrapper, or CPU fallback). The drift engine
//! indexes these methods (`impl AtenOps for NpuOps`), so an upstream schema change to one of
//! them is reported at its line here, and the compiler fails here after `xirang-scan generate`.

use crate::dispatch::{self, Tier};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::generated::ops::AtenOps;
use crate::ivalue::{FromIValue, IValue, MemoryFormat, results};
use crate::tensor::Tensor;

/// The simulated NPU's kernels.
#[derive(Debug, Clone, Copy, Default)]
pub struct NpuOps;

/// Native kernel of `op` when it takes the arguments, else the CPU fallback.
fn native(op: &'static str, args: Vec<IValue>) -> Result<Vec<IValue>> {
    if let Some(k) = super::registry::native(op)
        && let Some(r) = k(&args)?
    {
        return Ok(r);
    }
    dispatch::mark(Tier::Fallback);
    dispatch::fallback(op, args, &[])
}

fn one(op: &'static str, args: Vec<IValue>) -> Result<Tensor> {
    let [r] = results::<1>(op, native(op, args)?)?;
    Tensor::from_ivalue(op, r)
}

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

impl AtenOps for NpuOps {
    fn mm(&self, self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
        one("mm", vec![self_.into(), mat2.into()])
    }
    fn addmm(&self, self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
        one("addmm", vec![self_.into(), mat1.into(), mat2.into(), beta.into(), alpha.into()])
    }
    fn add_tensor(&self, self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
        one("add.Tensor", vec![self_.into(), other.into(), alpha.into()])
    }
    fn mul_tensor(&self, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
        one("mul.Tensor", vec![self_.into(), other.into()])
    }
    fn relu(&self, self_: &Tensor) -> Result<Tensor> {
        one("relu", vec![self_.into()])
    }
    fn threshold_backward(&self, grad_output: &Tensor, self_: &Tensor, threshold: Scalar) -> Result<Tensor> {
        one("threshold_backward", vec![grad_output.into(), self_.into(), threshold.into()])
    }
    fn _log_softmax(&self, self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
        one("_log_softmax", vec![self_.into(), dim.into(), half_to_float.into()])
    }
    fn _log_softmax_backward_data(
        &self,
        grad_output: &Tensor,
        output: &Tensor,
        dim: i64,
        input_dtype: DType,
    ) -> Result<Tensor> {
        one("_log_softmax_backward_data", vec![grad_output.into(), output.into(), dim.into(), input_dtype.into()])
    }
    fn sum_dim_intlist(
        &self,
        self_: &Tensor,
        dim: Option<&[i64]>,
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        one("sum.dim_IntList", vec![self_.into(), dim.map(<[i64]>::to_vec).into(), keepdim.into(), dtype.into()])
    }
    fn nll_loss_backward(
        &self,
        grad_output: &Tensor,
        self_: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: i64,
        ignore_index: i64,
        total_weight: &Tensor,
    ) -> Result<Tensor> {
        let args = vec![
            grad_output.into(),
            self_.into(),
            target.into(),
            weight.cloned().into(),
            reduction.into(),
            ignore_index.into(),
            total_weight.into(),
        ];
        one("nll_loss_backward", args)
    }
    /// A view: no kernel, no copy.
    fn t(&self, self_: &Tensor) -> Result<Tensor> {
        self_.t()
    }
    /// A view: no kernel, no copy.
    fn view(&self, self_: &Tensor, size: &[i64]) -> Result<Tensor> {
        self_.view(size)
    }
    /// `_unsafe_view` is `view` without the aliasing bookkeeping (`reshape` uses it after a
    /// contiguous copy): a view here too.
    fn _unsafe_view(&self, self_: &Tensor, size: &[i64]) -> Result<Tensor> {
        self_.view(size)
    }
    /// A view: no kernel, no copy.
    fn permute(&self, self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
        self_.permute(dims)
    }
    /// A view: no kernel, no copy.
    fn transpose_int(&self, self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
        self_.transpose(dim0, dim1)
    }
    /// A view: no kernel, no copy.
    fn expand(&self, self_: &Tensor, size: &[i64], _implicit: bool) -> Result<Tensor> {
        self_.expand(size)
    }
    /// A view: no kernel, no copy.
    fn unsqueeze(&self, self_: &Tensor, dim: i64) -> Result<Tensor> {
        self_.unsqueeze(dim)
    }
    /// A device copy (the strided-copy kernel). The result is always contiguous: with
    /// `memory_format` None / preserve, PyTorch would keep a dense input's strides (same values,
    /// other strides); channels-last formats take the fallback.
    fn clone(&self, self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
        let plain = matches!(memory_format, None | Some(MemoryFormat::Contiguous | MemoryFormat::Preserve));
        if plain && !self_.is_cpu() {
            return super::index::strided_copy(self_);
        }
        dispatch::mark(Tier::Fallback);
        dispatch::fallback("clone", vec![self_.into(), memory_format.into()], &[]).and_then(|r| {
            let [r] = results::<1>("clone", r)?;
            Tensor::from_ivalue("clone", r)
        })
    }
    // Operators whose generated default body is a composition recipe but which have a device
    // kernel: the kernel rounds once (a recipe such as `reciprocal(sqrt(x))` for `rsqrt` rounds
    // each step in f16/bf16, which the backward goldens caught) and launches once.
    fn abs(&self, self_: &Tensor) -> Result<Tensor> {
        one("abs", vec![self_.into()])
    }
    fn neg(&self, self_: &Tensor) -> Result<Tensor> {
        one("neg", vec![self_.into()])
    }
    fn rsqrt(&self, self_: &Tensor) -> Result<Tensor> {
        one("rsqrt", vec![self_.into()])
    }
    fn exp2(&self, self_: &Tensor) -> Result<Tensor> {
        one("exp2", vec![self_.into()])
    }
    fn sigmoid(&self, self_: &Tensor) -> Result<Tensor> {
        one("sigmoid", vec![self_.into()])
    }
    fn sigmoid_backward(&self, grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
        one("sigmoid_backward", vec![grad_output.into(), output.into()])
    }
    fn silu(&self, self_: &Tensor) -> Result<Tensor> {
        one("silu", vec![self_.into()])
    }
    fn sub_tensor(&self, self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
        one("sub.Tensor", vec![self_.into(), other.into(), alpha.into()])
    }
    fn tanh_backward(&self, grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
        one("tanh_backward", vec![grad_output.into(), output.into()])
    }
    fn masked_fill_scalar(&self, self_: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
        one("masked_fill.Scalar", vec![self_.into(), mask.into(), value.into()])
    }
    fn bmm(&self, self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
        one("bmm", vec![self_.into(), mat2.into()])
    }
    fn mul_scalar(&self, self_: &Tensor, other: Scalar) -> Result<Tensor> {
        one("mul.Scalar", vec![self_.into(), other.into()])
    }
    fn div_scalar(&self, self_: &Tensor, other: Scalar) -> Result<Tensor> {
        one("div.Scalar", vec![self_.into(), other.into()])
    }
    fn _softmax(&self, self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
        one("_softmax", vec![self_.into(), dim.into(), half_to_float.into()])
    }
    fn _softmax_backward_data(
        &self,
        grad_output: &Tensor,
        output: &Tensor,
        dim: i64,
        input_dtype: DType,
    ) -> Result<Tensor> {
        one("_softmax_backward_data", vec![grad_output.into(), output.into(), dim.into(), input_dtype.into()])
    }
    fn gelu(&self, self_: &Tensor, approximate: &str) -> Result<Tensor> {
        one("gelu", vec![self_.into(), approximate.into()])
    }
    fn gelu_backward(&self, grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Result<Tensor> {
        one("gelu_backward", vec![grad_output.into(), self_.into(), approximate.into()])
    }
    fn mean_dim(&self, self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        one("mean.dim", vec![self_.into(), dim.map(<[i64]>::to_vec).into(), keepdim.into(), dtype.into()])
    }
    fn native_layer_norm(
        &self,
        input: &Tensor,
        normalized_shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        const OP: &str = "native_layer_norm";
        let args = vec![
            input.into(),
            normalized_shape.to_vec().into(),
            weight.cloned().into(),
            bias.cloned().into(),
            eps.into(),
        ];
        let [a, b, c] = results::<3>(OP, native(OP, args)?)?;
        Ok((Tensor::from_ivalue(OP, a)?, Tensor::from_ivalue(OP, b)?, Tensor::from_ivalue(OP, c)?))
    }
    /// Returns three tensors: callers that do not want a gradient still get one (the autograd
    /// helper passes the full mask).
    fn native_layer_norm_backward(
        &self,
        grad_out: &Tensor,
        input: &Tensor,
        normalized_shape: &[i64],
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        output_mask: &[bool],
    ) -> Result<(Tensor, Tensor, Tensor)> {
        const OP: &str = "native_layer_norm_backward";
        let args = vec![
            grad_out.into(),
            input.into(),
            normalized_shape.to_vec().into(),
            mean.into(),
            rstd.into(),
            weight.cloned().into(),
            bias.cloned().into(),
            output_mask.to_vec().into(),
        ];
        let [a, b, c] = results::<3>(OP, native(OP, args)?)?;
        Ok((Tensor::from_ivalue(OP, a)?, Tensor::from_ivalue(OP, b)?, Tensor::from_ivalue(OP, c)?))
    }
    fn embedding(
        &self,
        weight: &Tensor,
        indices: &Tensor,
        padding_idx: i64,
        scale_grad_by_freq: bool,
        sparse: bool,
    ) -> Result<Tensor> {
        one(
            "embedding",
            vec![weight.into(), indices.into(), padding_idx.into(), scale_grad_by_freq.into(), sparse.into()],
        )
    }
    fn embedding_dense_backward(
        &self,
        grad_output: &Tensor,
        indices: &Tensor,
        num_weights: i64,
        padding_idx: i64,
        scale_grad_by_freq: bool,
    ) -> Result<Tensor> {
        one(
            "embedding_dense_backward",
            vec![grad_output.into(), indices.into(), num_weights.into(), padding_idx.into(), scale_grad_by_freq.into()],
        )
    }
    fn nll_loss_forward(
        &self,
        self_: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: i64,
        ignore_index: i64,
    ) -> Result<(Tensor, Tensor)> {
        const OP: &str = "nll_loss_forward";
        let args = vec![self_.into(), target.into(), weight.cloned().into(), reduction.into(), ignore_index.into()];
        let [a, b] = results::<2>(OP, native(OP, args)?)?;
        Ok((Tensor::from_ivalue(OP, a)?, Tensor::from_ivalue(OP, b)?))
    }
}
