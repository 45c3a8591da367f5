//! Helpers the generated backward nodes (`generated/autograd.rs`) call: PyTorch's
//! `FunctionsManual.cpp` functions and the engine's `sum_to`, over the operator front-ends
//! (`generated::ops::aten`) and the host reference ops. Real dtypes only: `conj` is the identity.

use super::node::{TensorGeometry, TensorInfo, TensorOptions};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::generated::ops::{AtenOps, aten};
use crate::ivalue::Layout;
use crate::tensor::Tensor;

/// `at::sum_to`: sums `x` down to `sizes` (leading dimensions, and dimensions where `sizes` has 1).
pub fn sum_to<O: AtenOps + ?Sized>(o: &O, x: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    let xs: Vec<i64> = x.sizes().iter().map(|&s| s as i64).collect();
    if xs == sizes {
        return Ok(x.clone());
    }
    if sizes.len() > xs.len() {
        return Err(Error::InvalidArgument(format!("sum_to: cannot reduce {xs:?} to {sizes:?}")));
    }
    let lead = xs.len() - sizes.len();
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in sizes.iter().enumerate() {
        if s == 1 && xs[lead + i] != 1 {
            dims.push((lead + i) as i64);
        } else if s != xs[lead + i] {
            return Err(Error::InvalidArgument(format!("sum_to: cannot reduce {xs:?} to {sizes:?}")));
        }
    }
    let r = aten::sum_dim_intlist(o, x, Some(&dims), true, None)?;
    r.reshape(sizes)
}

/// `maybe_multiply(t, s)`: `t` when `s` is one, else `t * s`.
pub fn maybe_multiply<O: AtenOps + ?Sized>(o: &O, t: &Tensor, s: Scalar) -> Result<Tensor> {
    if s.to_f64() == 1.0 { Ok(t.clone()) } else { aten::mul_scalar(o, t, s) }
}

/// `mul_tensor_backward(grad, other, self_st)`: `grad * other.conj()`.
pub fn mul_tensor_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    other: &Tensor,
    _self_st: DType,
) -> Result<Tensor> {
    aten::mul_tensor(o, grad, other)
}

/// `div_tensor_self_backward(grad, other, self_st)`: `grad / other.conj()`.
pub fn div_tensor_self_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    other: &Tensor,
    _self_st: DType,
) -> Result<Tensor> {
    aten::div_tensor(o, grad, other)
}

/// `div_tensor_other_backward(grad, self, other)`: `-grad * (self / other) / other`.
pub fn div_tensor_other_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
) -> Result<Tensor> {
    let q = aten::div_tensor(o, &aten::div_tensor(o, self_, other)?, other)?;
    aten::neg(o, &aten::mul_tensor(o, grad, &q)?)
}

/// `mm_mat1_backward(grad, mat2, sizes, strides, layout, alpha)`: `grad.mm(mat2.t()) * alpha`.
pub fn mm_mat1_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    mat2: &Tensor,
    _sizes: &[i64],
    _strides: &[i64],
    _layout: Layout,
    alpha: Scalar,
) -> Result<Tensor> {
    maybe_multiply(o, &aten::mm(o, grad, &mat2.t()?)?, alpha)
}

/// `mm_mat2_backward(grad, mat1, sizes, strides, layout, alpha)`: `mat1.t().mm(grad) * alpha`.
pub fn mm_mat2_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    mat1: &Tensor,
    _sizes: &[i64],
    _strides: &[i64],
    _layout: Layout,
    alpha: Scalar,
) -> Result<Tensor> {
    maybe_multiply(o, &aten::mm(o, &mat1.t()?, grad)?, alpha)
}

/// `mul_tensor_backward(grad, other, self_st)` with a Scalar `other` (`mul.Scalar`): `grad * other`.
pub fn mul_tensor_backward_scalar<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    other: Scalar,
    _self_st: DType,
) -> Result<Tensor> {
    aten::mul_scalar(o, grad, other)
}

/// `div_tensor_self_backward(grad, other, self_st)` with a Scalar `other` (`div.Scalar`): `grad / other`.
pub fn div_tensor_self_backward_scalar<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    other: Scalar,
    _self_st: DType,
) -> Result<Tensor> {
    aten::div_scalar(o, grad, other)
}

/// `grad.reshape_symint(sizes)`: a view when the strides allow it, else a contiguous copy
/// (`view`, `_unsafe_view`, `_reshape_alias`).
pub fn reshape<O: AtenOps + ?Sized>(_o: &O, grad: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    grad.reshape(sizes)
}

/// `permute_backwards(grad, fwd_dims)`: `grad.permute(inverse of fwd_dims)`.
pub fn permute_backwards<O: AtenOps + ?Sized>(_o: &O, grad: &Tensor, fwd_dims: &[i64]) -> Result<Tensor> {
    let n = fwd_dims.len();
    if grad.dim() != n {
        return Err(Error::Shape(format!("permute_backwards: {n} dims for a {}-d gradient", grad.dim())));
    }
    let mut inv = vec![0i64; n];
    for (i, &d) in fwd_dims.iter().enumerate() {
        inv[crate::shape::wrap_dim(d, n)?] = i as i64;
    }
    grad.permute(&inv)
}

/// The dims of `dims` wrapped into `[0, ndim)`, as a sorted mask.
fn dim_mask(dims: &[i64], ndim: usize) -> Result<Vec<bool>> {
    let mut mask = vec![false; ndim];
    for &d in dims {
        let w = crate::shape::wrap_dim(d, ndim)?;
        if mask[w] {
            return Err(Error::InvalidArgument(format!("dim {w} appears multiple times in the list of dims")));
        }
        mask[w] = true;
    }
    Ok(mask)
}

/// `unsqueeze_multiple(t, dims, n)`: re-inserts the reduced dims `dims` (of an `n`-d input).
fn unsqueeze_multiple(t: &Tensor, dims: &[i64], n: usize) -> Result<Tensor> {
    let mask = dim_mask(dims, n)?;
    let mut r = t.clone();
    for (d, &m) in mask.iter().enumerate() {
        if m {
            r = r.unsqueeze(d as i64)?;
        }
    }
    Ok(r)
}

/// `sum_backward(grad, sizes, dims, keepdim)`: `grad` (with the reduced dims re-inserted unless
/// `keepdim`) expanded to `sizes`.
pub fn sum_backward<O: AtenOps + ?Sized>(
    _o: &O,
    grad: &Tensor,
    sizes: &[i64],
    dims: Option<&[i64]>,
    keepdim: bool,
) -> Result<Tensor> {
    if !keepdim
        && !sizes.is_empty()
        && let Some(dims) = dims
        && !dims.is_empty()
    {
        return unsqueeze_multiple(grad, dims, sizes.len())?.expand(sizes);
    }
    grad.expand(sizes)
}

/// `mean_backward(grad, sizes, dims, numel, keepdim)`: `sum_backward(...) / n`, `n` the number of
/// elements averaged (`numel` for a full reduction).
pub fn mean_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    sizes: &[i64],
    dims: Option<&[i64]>,
    numel: i64,
    keepdim: bool,
) -> Result<Tensor> {
    let n = match dims {
        Some(d) if !d.is_empty() => {
            let mask = dim_mask(d, sizes.len())?;
            sizes.iter().zip(&mask).filter(|(_, m)| **m).map(|(s, _)| *s).product::<i64>()
        }
        _ => numel,
    };
    aten::div_scalar(o, &sum_backward(o, grad, sizes, dims, keepdim)?, Scalar::Int(n))
}

/// `unsqueeze_to(grad, dim, sizes)` (`squeeze.dim`): `grad.unsqueeze(dim)` when the input had size
/// 1 there, else `grad`.
pub fn unsqueeze_to<O: AtenOps + ?Sized>(_o: &O, grad: &Tensor, dim: i64, sizes: &[i64]) -> Result<Tensor> {
    if sizes.is_empty() {
        return grad.reshape(sizes);
    }
    let d = crate::shape::wrap_dim(dim, sizes.len())?;
    if sizes[d] == 1 { grad.unsqueeze(d as i64) } else { Ok(grad.clone()) }
}

/// `embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse)`:
/// the dense backward (sparse gradients are not supported).
pub fn embedding_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
    sparse: bool,
) -> Result<Tensor> {
    if sparse {
        return Err(Error::Unsupported("embedding_backward: sparse gradients are not supported".into()));
    }
    aten::embedding_dense_backward(o, grad, indices, num_weights, padding_idx, scale_grad_by_freq)
}

/// `native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight, bias,
/// output_mask)`: the gradients of (input, weight, bias); `None` where the mask is off or the
/// affine parameter is absent. The typed operator returns three tensors, so an absent weight is
/// passed as ones (the same input gradient) and an absent bias as zeros (it does not enter the
/// backward), and their gradients are dropped.
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let want = |i: usize| output_mask.get(i).copied().unwrap_or(true);
    let k = normalized_shape.len();
    if k > input.dim() {
        return Err(Error::Shape(format!(
            "native_layer_norm_backward: normalized_shape {normalized_shape:?} for a {}-d input",
            input.dim()
        )));
    }
    let affine: Vec<usize> = input.sizes()[input.dim() - k..].to_vec();
    let filled = |v: Scalar| -> Result<Tensor> {
        let t = Tensor::full(&affine, v, input.dtype());
        match input.device_ctx() {
            Some(ctx) => t.to_ctx(ctx),
            None => Ok(t),
        }
    };
    let w = match weight {
        Some(w) => w.clone(),
        None => filled(Scalar::Int(1))?,
    };
    let b = match bias {
        Some(b) => b.clone(),
        None => filled(Scalar::Int(0))?,
    };
    let (gx, gw, gb) = aten::native_layer_norm_backward(
        o,
        grad,
        input,
        normalized_shape,
        mean,
        rstd,
        Some(&w),
        Some(&b),
        &[true, true, true],
    )?;
    Ok(vec![
        want(0).then_some(gx),
        (want(1) && weight.is_some()).then_some(gw),
        (want(2) && bias.is_some()).then_some(gb),
    ])
}

// ---------------------------------------------------------------------------------------------
// more of `FunctionsManual.cpp` (real dtypes)
// ---------------------------------------------------------------------------------------------

/// A zero-filled tensor of `sizes` and `dtype` on `like`'s device.
fn zeros_on(like: &Tensor, sizes: &[i64], dtype: DType) -> Result<Tensor> {
    let sizes = usizes(sizes)?;
    let t = Tensor::zeros(&sizes, dtype);
    match like.device_ctx() {
        Some(ctx) => t.to_ctx(ctx),
        None => Ok(t),
    }
}

fn usizes(sizes: &[i64]) -> Result<Vec<usize>> {
    sizes
        .iter()
        .map(|&s| usize::try_from(s).map_err(|_| Error::Shape(format!("negative size {s} in {sizes:?}"))))
        .collect()
}

fn i64s(xs: &[usize]) -> Vec<i64> {
    xs.iter().map(|&x| x as i64).collect()
}

/// PyTorch's `not_implemented(msg)` formulas: the gradient is an error upstream too.
pub fn not_implemented<T>(what: &str) -> Result<T> {
    Err(Error::Unsupported(what.to_string()))
}

/// `x.to(dtype)`: `x` itself when it already has the dtype.
pub fn to_dtype<O: AtenOps + ?Sized>(_o: &O, x: &Tensor, dtype: DType) -> Result<Tensor> {
    if x.dtype() == dtype { Ok(x.clone()) } else { x.to_dtype(dtype) }
}

/// `_to_copy_backward(grad, self_options)`: the gradient converted back to the input's dtype
/// and device.
pub fn to_copy_backward<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, options: &TensorOptions) -> Result<Tensor> {
    options.place(to_dtype(o, grad, options.dtype)?)
}

/// `x_info.zeros()`: zeros of the saved input's sizes, dtype and device.
pub fn zeros_info<O: AtenOps + ?Sized>(_o: &O, info: &TensorInfo) -> Result<Tensor> {
    info.options.place(Tensor::zeros(&usizes(&info.sizes)?, info.options.dtype))
}

/// `at::zeros(sizes, options)`.
pub fn zeros_options<O: AtenOps + ?Sized>(_o: &O, sizes: &[i64], options: &TensorOptions) -> Result<Tensor> {
    options.place(Tensor::zeros(&usizes(sizes)?, options.dtype))
}

/// `unsqueeze_to(grad, sizes)` (`squeeze`): re-inserts every dimension of size 1 of `sizes`.
pub fn unsqueeze_to_sizes<O: AtenOps + ?Sized>(_o: &O, grad: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    let mut r = grad.clone();
    for (d, &s) in sizes.iter().enumerate() {
        if s == 1 {
            r = r.unsqueeze(d as i64)?;
        }
    }
    Ok(r)
}

/// `restore_reduced_dims(output, dims, keepdim)`: `output` reshaped with size 1 at the reduced
/// `dims` (an empty `dims` reduced every dimension: the 0-d output broadcasts as it is).
pub fn restore_reduced_dims<O: AtenOps + ?Sized>(
    _o: &O,
    output: &Tensor,
    dims: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    if keepdim {
        return Ok(output.clone());
    }
    let total = output.dim() + dims.len();
    let mut target = vec![0i64; total];
    for &d in dims {
        target[crate::shape::wrap_dim(d, total)?] = 1;
    }
    let mut j = 0;
    for &s in output.sizes() {
        while j < total && target[j] > 0 {
            j += 1;
        }
        if j >= total {
            return Err(Error::Shape(format!("restore_reduced_dims: {:?} with dims {dims:?}", output.sizes())));
        }
        target[j] = s as i64;
        j += 1;
    }
    output.reshape(&target)
}

/// `scale_grad_by_count(grad, mask, dims)`: `(grad / mask.sum(dims, true)) * mask` (ties of
/// `amax`/`amin` share the gradient evenly; empty `dims`: every dimension).
pub fn scale_grad_by_count<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, mask: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let m = to_dtype(o, mask, grad.dtype())?;
    let all: Vec<i64> = (0..m.dim() as i64).collect();
    let dims = if dims.is_empty() { &all[..] } else { dims };
    let count = aten::sum_dim_intlist(o, &m, Some(dims), true, None)?;
    aten::mul_tensor(o, &aten::div_tensor(o, grad, &count)?, &m)
}

/// `atan2_backward(grad, self, other, output_mask)`: `grad * other / (self² + other²)` and
/// `grad * -self / (self² + other²)`.
pub fn atan2_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    output_mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let one = Scalar::Int(1);
    let den = aten::add_tensor(o, &aten::mul_tensor(o, self_, self_)?, &aten::mul_tensor(o, other, other)?, one)?;
    let recip = aten::reciprocal(o, &den)?;
    let want = |i: usize| output_mask.get(i).copied().unwrap_or(true);
    let gs = if want(0) { Some(aten::mul_tensor(o, &aten::mul_tensor(o, grad, other)?, &recip)?) } else { None };
    let go = if want(1) {
        Some(aten::mul_tensor(o, &aten::mul_tensor(o, grad, &aten::neg(o, self_)?)?, &recip)?)
    } else {
        None
    };
    Ok(vec![gs, go])
}

/// `gather_backward(grad, self, dim, index, sparse_grad)`: `zeros_like(self).scatter_add(dim,
/// index, grad)` (dense only).
pub fn gather_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
) -> Result<Tensor> {
    if sparse_grad {
        return Err(Error::Unsupported("gather_backward: sparse gradients are not supported".into()));
    }
    let z = zeros_on(grad, &i64s(self_.sizes()), grad.dtype())?;
    aten::scatter_add(o, &z, dim, index, grad)
}

/// `index_select_backward(grad, sizes, dim, index)`: `zeros(sizes).index_add_(dim, index,
/// grad)`, as a `scatter_add` with the index broadcast along `dim`.
pub fn index_select_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    index: &Tensor,
) -> Result<Tensor> {
    if sizes.is_empty() {
        // a 0-d input: its one element was selected (possibly several times)
        return aten::sum(o, grad, None)?.reshape(&[]);
    }
    let d = crate::shape::wrap_dim(dim, sizes.len())?;
    let mut shape = vec![1i64; grad.dim()];
    shape[d] = index.numel() as i64;
    let idx = index.reshape(&shape)?.expand(&i64s(grad.sizes()))?.contiguous()?;
    let z = zeros_on(grad, sizes, grad.dtype())?;
    aten::scatter_add(o, &z, d as i64, &idx, grad)
}

/// `sgn_backward(self, grad, result)`: zero for real inputs.
pub fn sgn_backward<O: AtenOps + ?Sized>(_o: &O, self_: &Tensor, grad: &Tensor, _result: &Tensor) -> Result<Tensor> {
    zeros_on(grad, &i64s(self_.sizes()), grad.dtype())
}

/// `a.ger(b)` / `outer(a, b)`: `a[:, None] * b[None, :]`.
pub fn outer<O: AtenOps + ?Sized>(o: &O, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    aten::mul_tensor(o, &a.unsqueeze(1)?, &b.unsqueeze(0)?)
}

/// `nll_loss(self, target, weight, reduction, ignore_index)`: `nll_loss_forward`'s output.
pub fn nll_loss<O: AtenOps + ?Sized>(
    o: &O,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    Ok(aten::nll_loss_forward(o, self_, target, weight, reduction, ignore_index)?.0)
}

/// `mse_loss_double_backward(grad, input, reduction)`: `2 * grad`, divided by `input.numel()`
/// under mean reduction.
pub fn mse_loss_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    input: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let g = aten::mul_scalar(o, grad, Scalar::Int(2))?;
    if reduction == 1 { aten::div_scalar(o, &g, Scalar::Int(input.numel() as i64)) } else { Ok(g) }
}

/// `elu_double_backward(grad, grad_output, alpha, scale, input_scale, is_result, self_or_result)`.
#[allow(clippy::too_many_arguments)]
pub fn elu_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    grad_output: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
) -> Result<Tensor> {
    let neg = to_dtype(o, &aten::lt_scalar(o, self_or_result, Scalar::Int(0))?, grad.dtype())?;
    let ggo = aten::mul_scalar(o, &aten::mul_tensor(o, grad, grad_output)?, input_scale)?;
    if is_result {
        aten::mul_tensor(o, &ggo, &neg)
    } else {
        let e = aten::elu_backward(o, &ggo, alpha, scale, input_scale, is_result, self_or_result)?;
        aten::mul_tensor(o, &e, &neg)
    }
}

/// `gelu_double_backward(ggI, gO, input, approximate)`: `ggI * gO * gelu''(input)`.
pub fn gelu_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    ggi: &Tensor,
    go: &Tensor,
    input: &Tensor,
    approximate: &str,
) -> Result<Tensor> {
    let one = Scalar::Int(1);
    let x2 = aten::mul_tensor(o, input, input)?;
    if approximate == "tanh" {
        // PyTorch's expression, operation by operation (each rounds to the tensor's dtype, so
        // f16/bf16 results follow only when the order is the same)
        let b = std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5;
        let k = 0.044715;
        let f = |v: f64| Scalar::Float(v);
        let pow3 = aten::pow_tensor_scalar(o, input, Scalar::Int(3))?;
        let inner = aten::mul_scalar(o, &aten::add_tensor(o, input, &aten::mul_scalar(o, &pow3, f(k))?, one)?, f(b))?;
        let tanh_inner = aten::tanh(o, &inner)?;
        let sech_inner = aten::reciprocal(o, &aten::cosh(o, &inner)?)?;
        let fx = aten::mul_scalar(o, input, f(0.5))?;
        let g = aten::rsub_scalar(o, &aten::mul_tensor(o, &tanh_inner, &tanh_inner)?, one, one)?;
        let h3 = aten::mul_tensor(o, &aten::mul_scalar(o, input, f(3.0 * k))?, input)?;
        let h = aten::mul_scalar(o, &aten::add_scalar(o, &h3, one, one)?, f(b))?;
        let f_prime_gh = aten::mul_tensor(o, &aten::mul_scalar(o, &g, f(0.5))?, &h)?;
        let g_prime = aten::mul_tensor(
            o,
            &aten::mul_tensor(
                o,
                &aten::mul_scalar(o, &sech_inner, Scalar::Int(2))?,
                &aten::mul_tensor(o, &aten::neg(o, &sech_inner)?, &tanh_inner)?,
            )?,
            &h,
        )?;
        let g_prime_fh = aten::mul_tensor(o, &aten::mul_tensor(o, &fx, &h)?, &g_prime)?;
        let h_prime = aten::mul_scalar(o, &aten::mul_scalar(o, input, f(6.0 * k))?, f(b))?;
        let h_prime_fg = aten::mul_tensor(o, &aten::mul_tensor(o, &fx, &g)?, &h_prime)?;
        // left derivative f_prime_gh + right derivative (f_prime_gh + g_prime_fh + h_prime_fg)
        let s = aten::add_tensor(o, &aten::add_tensor(o, &f_prime_gh, &f_prime_gh, one)?, &g_prime_fh, one)?;
        let s = aten::add_tensor(o, &s, &h_prime_fg, one)?;
        return aten::mul_tensor(o, &aten::mul_tensor(o, ggi, go)?, &s);
    }
    let second = {
        // gelu'' = 2 pdf(x) - x² pdf(x), pdf = exp(-x²/2) / sqrt(2 pi)
        let b = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * 0.5;
        let pdf =
            aten::mul_scalar(o, &aten::exp(o, &aten::mul_scalar(o, &x2, Scalar::Float(-0.5))?)?, Scalar::Float(b))?;
        aten::mul_tensor(o, &pdf, &aten::rsub_scalar(o, &x2, Scalar::Int(2), one)?)?
    };
    aten::mul_tensor(o, &aten::mul_tensor(o, ggi, go)?, &second)
}

/// `embedding_dense_double_backward(grad, indices, padding_idx)`: the rows of `grad` the
/// indices select (zero at `padding_idx`), shaped `indices.sizes() + [-1]`.
pub fn embedding_dense_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    indices: &Tensor,
    padding_idx: i64,
) -> Result<Tensor> {
    let flat = indices.reshape(&[-1])?;
    let mut gg = aten::index_select(o, grad, 0, &flat)?;
    if padding_idx >= 0 {
        let pad = aten::eq_scalar(o, &flat, Scalar::Int(padding_idx))?.reshape(&[-1, 1])?;
        gg = aten::masked_fill_scalar(o, &gg, &pad, Scalar::Int(0))?;
    }
    let mut size = i64s(indices.sizes());
    size.push(-1);
    gg.reshape(&size)
}

/// `softmax_double_backward(grad, grad_output, dim, output)`: `gO * grad - sum(output * gO) *
/// grad - gO * sum(output * grad)` (sums over `dim`, kept).
pub fn softmax_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    grad_output: &Tensor,
    dim: i64,
    output: &Tensor,
) -> Result<Tensor> {
    let one = Scalar::Int(1);
    let s1 = aten::sum_dim_intlist(o, &aten::mul_tensor(o, output, grad_output)?, Some(&[dim]), true, None)?;
    let s2 = aten::sum_dim_intlist(o, &aten::mul_tensor(o, output, grad)?, Some(&[dim]), true, None)?;
    let a = aten::mul_tensor(o, grad_output, grad)?;
    let a = aten::sub_tensor(o, &a, &aten::mul_tensor(o, &s1, grad)?, one)?;
    aten::sub_tensor(o, &a, &aten::mul_tensor(o, grad_output, &s2)?, one)
}

/// `clamp_backward(grad, self, min, max)`: the gradient where `min <= self <= max` (the bounds
/// get the subgradient 1).
pub fn clamp_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
) -> Result<Tensor> {
    let mask = match (min, max) {
        (Some(lo), Some(hi)) => {
            Some(aten::logical_and(o, &aten::ge_scalar(o, self_, lo)?, &aten::le_scalar(o, self_, hi)?)?)
        }
        (Some(lo), None) => Some(aten::ge_scalar(o, self_, lo)?),
        (None, Some(hi)) => Some(aten::le_scalar(o, self_, hi)?),
        (None, None) => None,
    };
    match mask {
        Some(m) => aten::mul_tensor(o, grad, &to_dtype(o, &m, grad.dtype())?),
        None => Ok(grad.clone()),
    }
}

/// `pow_backward(grad, self, exponent)`: `grad * exponent * self^(exponent - 1)`; zeros for a
/// zero exponent.
pub fn pow_backward<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, self_: &Tensor, exponent: Scalar) -> Result<Tensor> {
    if exponent.to_f64() == 0.0 {
        return zeros_on(grad, &i64s(self_.sizes()), grad.dtype());
    }
    let e = exponent.to_f64();
    let p = aten::pow_tensor_scalar(o, self_, Scalar::Float(e - 1.0))?;
    aten::mul_tensor(o, grad, &aten::mul_scalar(o, &p, Scalar::Float(e))?)
}

/// `pow_backward_self(grad, self, exponent)`: `where(exponent == 0, 0, grad * exponent *
/// self^(exponent - 1))`.
pub fn pow_backward_self<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    exponent: &Tensor,
) -> Result<Tensor> {
    let one = Scalar::Int(1);
    let p = aten::pow_tensor_tensor(o, self_, &aten::sub_scalar(o, exponent, one, one)?)?;
    let g = aten::mul_tensor(o, grad, &aten::mul_tensor(o, exponent, &p)?)?;
    let zero = aten::eq_scalar(o, exponent, Scalar::Int(0))?;
    aten::masked_fill_scalar(o, &g, &zero, Scalar::Int(0))
}

/// `pow_backward_exponent(grad, self, exponent, result)`: `grad * where(self == 0 && exponent >=
/// 0, 0, result * log(self))`.
pub fn pow_backward_exponent<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    self_: &Tensor,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    let cond = aten::logical_and(
        o,
        &aten::eq_scalar(o, self_, Scalar::Int(0))?,
        &aten::ge_scalar(o, exponent, Scalar::Int(0))?,
    )?;
    let v = aten::mul_tensor(o, result, &aten::log(o, self_)?)?;
    let v = aten::masked_fill_scalar(o, &v, &cond, Scalar::Int(0))?;
    aten::mul_tensor(o, grad, &v)
}

/// `pow_backward_exponent(grad, base, exponent, result)` with a Scalar base (`pow.Scalar`):
/// `grad * result * log(base)`, zero where `base == 0` and `exponent >= 0`.
pub fn pow_backward_exponent_scalar<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    base: Scalar,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    let b = base.to_f64();
    let v = aten::mul_scalar(o, result, Scalar::Float(b.ln()))?;
    let v = if b == 0.0 {
        let cond = aten::ge_scalar(o, exponent, Scalar::Int(0))?;
        aten::masked_fill_scalar(o, &v, &cond, Scalar::Int(0))?
    } else {
        v
    };
    aten::mul_tensor(o, grad, &v)
}

/// `native_dropout_double_backward(ggI, grad, mask, scale)`: `ggI * mask * scale` (in `grad`'s
/// dtype).
pub fn native_dropout_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    ggi: &Tensor,
    grad: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    let m = aten::mul_scalar(o, &to_dtype(o, mask, grad.dtype())?, Scalar::Float(scale))?;
    aten::mul_tensor(o, &to_dtype(o, ggi, grad.dtype())?, &m)
}

/// `masked_fill_backward(grad, mask)`: the sum of the gradient where the mask is set (the
/// gradient of the 0-d fill value).
pub fn masked_fill_backward<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let off = aten::logical_not(o, mask)?;
    let kept = aten::masked_fill_scalar(o, grad, &off, Scalar::Int(0))?;
    aten::sum(o, &kept, None)
}

/// `cat_tensors_backward(grad, sizes, dtypes, dim)`: the gradient split along `dim` by the inputs'
/// sizes, one per input (a legacy empty `[0]` input gets an empty gradient). Real dtypes only:
/// no input takes the real part of a complex gradient, so `dtypes` is not read.
pub fn cat_tensors_backward<O: AtenOps + ?Sized>(
    _o: &O,
    grad: &Tensor,
    sizes: &[Vec<i64>],
    _dtypes: &[DType],
    dim: i64,
) -> Result<Vec<Option<Tensor>>> {
    let legacy_empty = |s: &Vec<i64>| s.as_slice() == [0];
    let ndim = sizes.iter().find(|s| !legacy_empty(s)).map_or(1, Vec::len);
    let dim = crate::shape::wrap_dim(dim, ndim)?;
    let mut at = 0i64;
    let mut out = Vec::with_capacity(sizes.len());
    for s in sizes {
        if legacy_empty(s) {
            out.push(Some(Tensor::zeros(&[0], grad.dtype())));
            continue;
        }
        let n =
            *s.get(dim).ok_or_else(|| Error::InvalidArgument(format!("cat backward: sizes {s:?} lack dim {dim}")))?;
        out.push(Some(grad.narrow(dim as i64, at, n as usize)?));
        at += n;
    }
    Ok(out)
}

/// `log1p_backward(grad, self)`: `grad / (self + 1)`.
pub fn log1p_backward<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let one = Scalar::Int(1);
    aten::div_tensor(o, grad, &aten::add_scalar(o, self_, one, one)?)
}

/// `silu_backward(grad, self)` as FunctionsManual's `infinitely_differentiable_silu_backward`
/// computes it: `grad * s * (1 + self * (1 - s))`, `s = sigmoid(self)`.
pub fn silu_backward<O: AtenOps + ?Sized>(o: &O, grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let one = Scalar::Int(1);
    let s = aten::sigmoid(o, self_)?;
    let u = aten::add_scalar(o, &aten::mul_tensor(o, self_, &aten::rsub_scalar(o, &s, one, one)?)?, one, one)?;
    aten::mul_tensor(o, grad, &aten::mul_tensor(o, &s, &u)?)
}

/// `slice_backward_wrapper(grad, sizes, dim, start, end, step)`: zeros of the input's sizes with
/// `grad` written into the slice.
pub fn slice_backward_wrapper<O: AtenOps + ?Sized>(
    _o: &O,
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    let z = zeros_on(grad, sizes, grad.dtype())?;
    z.slice(dim, start, end, step)?.copy_(grad)?;
    Ok(z)
}

/// `layer_norm_double_backward(input, gamma, ggI, ggG, ggB, gO, save_mean, save_invstd,
/// normalized_shape, output_mask)`: the gradients of `native_layer_norm_backward`'s `input`,
/// `weight` and `grad_out` from the gradients `ggI`, `ggG`, `ggB` of its three results (any of
/// them undefined). PyTorch's `FunctionsManual.cpp`, in the same order of operations; the
/// multiplications by `ones` it uses for a missing `gamma` are left out (they are exact).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_double_backward<O: AtenOps + ?Sized>(
    o: &O,
    input_t: &Tensor,
    gamma: Option<&Tensor>,
    ggi: Option<&Tensor>,
    ggg: Option<&Tensor>,
    ggb: Option<&Tensor>,
    go_t: &Tensor,
    save_mean_t: &Tensor,
    save_invstd_t: &Tensor,
    normalized_shape: &[i64],
    output_mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let k = normalized_shape.len();
    if k > input_t.dim() {
        return Err(Error::Shape(format!(
            "layer_norm_double_backward: normalized_shape {normalized_shape:?} for a {}-d input",
            input_t.dim()
        )));
    }
    let axis = input_t.dim() - k;
    let m = input_t.sizes()[..axis].iter().product::<usize>() as i64;
    let n = input_t.sizes()[axis..].iter().product::<usize>() as i64;
    let one = Scalar::Int(1);
    let (mul, sub, add) = (
        |a: &Tensor, b: &Tensor| aten::mul_tensor(o, a, b),
        |a: &Tensor, b: &Tensor| aten::sub_tensor(o, a, b, one),
        |a: &Tensor, b: &Tensor| aten::add_tensor(o, a, b, one),
    );
    let sum1 = |a: &Tensor| aten::sum_dim_intlist(o, a, Some(&[1]), true, None);
    let div_n = |a: &Tensor| aten::div_scalar(o, a, Scalar::Int(n));
    let shape_of = |t: &Tensor| -> Vec<i64> { t.sizes().iter().map(|&s| s as i64).collect() };

    let input = input_t.reshape(&[m, n])?;
    let go = go_t.reshape(&[m, n])?;
    let save_mean = save_mean_t.reshape(&[m, 1])?;
    let save_invstd = save_invstd_t.reshape(&[m, 1])?;
    // `gamma_expanded` is `ones` without an affine transform: `None` here, and every product
    // with it is skipped
    let affine = gamma.is_some();
    let gamma_expanded = gamma.map(|g| g.reshape(&[1, n])).transpose()?;
    let ggg_expanded = if affine { ggg.map(|g| g.reshape(&[1, n])).transpose()? } else { None };
    let ggb_expanded = if affine { ggb.map(|g| g.reshape(&[1, n])).transpose()? } else { None };
    let ggi_expanded = ggi.map(|g| g.reshape(&[m, n])).transpose()?;
    let times_gamma = |t: Tensor| -> Result<Tensor> {
        match &gamma_expanded {
            Some(g) => mul(&t, g),
            None => Ok(t),
        }
    };

    let mu = to_dtype(o, &save_mean, input.dtype())?;
    let input_sub_mu = sub(&input, &mu)?;
    let sigma2_eps_neg_1_2 = to_dtype(o, &save_invstd, input.dtype())?;
    let sigma2_eps_neg_1 = aten::pow_tensor_scalar(o, &sigma2_eps_neg_1_2, Scalar::Int(2))?;
    let sigma2_eps_neg_3_2 = aten::pow_tensor_scalar(o, &sigma2_eps_neg_1_2, Scalar::Int(3))?;
    let input_mu_sigma2_neg_3_2 = mul(&input_sub_mu, &sigma2_eps_neg_3_2)?;

    let mut gi: Option<Tensor> = None;
    if let Some(ggi_e) = &ggi_expanded {
        let gxhat = times_gamma(go.clone())?;
        let gxhat_mu_sum = sum1(&mul(&gxhat, &input_sub_mu)?)?;
        let gxhat_sum = sum1(&gxhat)?;
        let ggi_sum = sum1(ggi_e)?;
        let ggi_mu_sum = sum1(&mul(ggi_e, &input_sub_mu)?)?;
        let all_sub = div_n(&mul(&ggi_sum, &gxhat_sum)?)?;
        let all_sub = sub(&all_sub, &sum1(&mul(ggi_e, &gxhat)?)?)?;
        let cubic = aten::mul_scalar(
            o,
            &mul(&mul(&sigma2_eps_neg_1, &gxhat_mu_sum)?, &ggi_mu_sum)?,
            Scalar::Float(3.0 / n as f64),
        )?;
        let all_sub = add(&all_sub, &cubic)?;
        let gi_0t = div_n(&mul(&input_mu_sigma2_neg_3_2, &all_sub)?)?;
        let gi_1t = mul(&div_n(&mul(&ggi_mu_sum, &sigma2_eps_neg_3_2)?)?, &sub(&div_n(&gxhat_sum)?, &gxhat)?)?;
        let gi_2t = mul(&div_n(&mul(&gxhat_mu_sum, &sigma2_eps_neg_3_2)?)?, &sub(&div_n(&ggi_sum)?, ggi_e)?)?;
        gi = Some(add(&add(&gi_0t, &gi_1t)?, &gi_2t)?);
    }
    if let Some(ggg_e) = &ggg_expanded {
        let neg_n = Scalar::Int(-n);
        let go_ggg = mul(&go, ggg_e)?;
        let t0 = mul(&go_ggg, &sigma2_eps_neg_1_2)?;
        let t1 = aten::div_scalar(o, &mul(&sigma2_eps_neg_1_2, &sum1(&go_ggg)?)?, neg_n)?;
        let t2 = aten::div_scalar(o, &mul(&input_mu_sigma2_neg_3_2, &sum1(&mul(&go_ggg, &input_sub_mu)?)?)?, neg_n)?;
        let term = add(&add(&t0, &t1)?, &t2)?;
        gi = Some(match gi {
            Some(g) => add(&g, &term)?,
            None => term,
        });
    }
    let gi = gi.map(|g| g.reshape(&shape_of(input_t))).transpose()?;

    // the first backward's grad_input: (gamma * sigma^-1/2 / N) * (N gO - sum(gO) - (x - mu)
    // sigma^-1 sum(gO (x - mu)))
    let first_bwd_grad_input = |go_local: &Tensor, with_gamma: bool| -> Result<Tensor> {
        let h0 = if with_gamma { times_gamma(sigma2_eps_neg_1_2.clone())? } else { sigma2_eps_neg_1_2.clone() };
        let h0 = div_n(&h0)?;
        let h1 = sub(&aten::mul_scalar(o, go_local, Scalar::Int(n))?, &sum1(go_local)?)?;
        let h1 = sub(&h1, &mul(&mul(&input_sub_mu, &sigma2_eps_neg_1)?, &sum1(&mul(go_local, &input_sub_mu)?)?)?)?;
        mul(&h0, &h1)
    };

    let mut gg = None;
    if let (Some(g), Some(ggi_e)) = (gamma, &ggi_expanded) {
        let t = first_bwd_grad_input(ggi_e, false)?;
        let t = aten::sum_dim_intlist(o, &mul(&go, &t)?, Some(&[0]), false, None)?;
        gg = Some(t.reshape(&shape_of(g))?);
    }
    if output_mask.get(1).copied().unwrap_or(false) && gg.is_none() && !affine {
        return Err(Error::InvalidArgument(
            "layer_norm_double_backward: the weight's gradient was asked for without a weight".into(),
        ));
    }

    let mut ggo: Option<Tensor> = None;
    if let Some(ggi_e) = &ggi_expanded {
        ggo = Some(first_bwd_grad_input(ggi_e, true)?);
    }
    if let Some(ggg_e) = &ggg_expanded {
        let term = mul(&mul(ggg_e, &input_sub_mu)?, &sigma2_eps_neg_1_2)?;
        ggo = Some(match ggo {
            Some(g) => add(&g, &term)?,
            None => term,
        });
    }
    if let Some(ggb_e) = ggb_expanded {
        ggo = Some(match ggo {
            Some(g) => add(&g, &ggb_e)?,
            None => ggb_e,
        });
    }
    let ggo =
        ggo.map(|g| -> Result<Tensor> { g.expand(&[m, n])?.contiguous()?.reshape(&shape_of(input_t)) }).transpose()?;
    Ok(vec![gi, gg, ggo])
}

/// The storage positions (relative to `base`) of the elements of a strided geometry, in
/// row-major element order.
fn strided_positions(sizes: &[i64], strides: &[i64], offset: i64, base: i64) -> Result<Vec<i64>> {
    if sizes.len() != strides.len() {
        return Err(Error::Shape(format!(
            "as_strided_backward: sizes {sizes:?} and strides {strides:?} differ in length"
        )));
    }
    if sizes.iter().chain(strides).any(|&x| x < 0) || offset < base {
        return Err(Error::Shape(format!(
            "as_strided_backward: negative size, stride or offset (sizes {sizes:?}, strides {strides:?}, offset {offset})"
        )));
    }
    let n: i64 = sizes.iter().product();
    let mut out = Vec::with_capacity(n as usize);
    let mut idx = vec![0i64; sizes.len()];
    for _ in 0..n {
        out.push(offset - base + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>());
        for d in (0..sizes.len()).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// `as_strided_backward(grad, TensorGeometry(self), size, stride, storage_offset)`: the gradient
/// of `as_strided` with respect to its input, through the shared storage (PyTorch's
/// FunctionsManual algorithm without its fast paths): the output gradient is summed into a
/// zero storage at the positions the output reads (an output that reads a position several times
/// sums there), then each input element takes its position's value; where several input
/// elements share a position (an overlapping input such as an expanded one), the value is
/// divided among them.
pub fn as_strided_backward<O: AtenOps + ?Sized>(
    o: &O,
    grad: &Tensor,
    input_geometry: &TensorGeometry,
    sizes: &[i64],
    strides: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    let g = input_geometry;
    if g.sizes.contains(&0) {
        return zeros_on(grad, &g.sizes, grad.dtype());
    }
    let out_offset = storage_offset.unwrap_or(g.storage_offset);
    let base = g.storage_offset.min(out_offset);
    let inp = strided_positions(&g.sizes, &g.strides, g.storage_offset, base)?;
    let out = strided_positions(sizes, strides, out_offset, base)?;
    if out.len() != grad.numel() {
        return Err(Error::Shape(format!(
            "as_strided_backward: gradient of shape {:?} for an output of sizes {sizes:?}",
            grad.sizes()
        )));
    }
    let extent = inp.iter().chain(&out).copied().max().unwrap_or(0) + 1;
    let index = |v: &[i64]| -> Result<Tensor> {
        let t = Tensor::from_i64(v, &[v.len()], DType::I64)?;
        match grad.device_ctx() {
            Some(ctx) => t.to_ctx(ctx),
            None => Ok(t),
        }
    };
    let storage = zeros_on(grad, &[extent], grad.dtype())?;
    let storage = if out.is_empty() {
        storage
    } else {
        let flat = grad.contiguous()?.reshape(&[out.len() as i64])?;
        aten::scatter_add(o, &storage, 0, &index(&out)?, &flat)?
    };
    let inp_index = index(&inp)?;
    let mut seen = vec![false; extent as usize];
    let overlaps = inp.iter().any(|&p| std::mem::replace(&mut seen[p as usize], true));
    let storage = if overlaps {
        let ones = zeros_on(grad, &[inp.len() as i64], grad.dtype())?;
        let ones = aten::add_scalar(o, &ones, Scalar::Int(1), Scalar::Int(1))?;
        let count = aten::scatter_add(o, &zeros_on(grad, &[extent], grad.dtype())?, 0, &inp_index, &ones)?;
        aten::div_tensor(o, &storage, &count)?
    } else {
        storage
    };
    aten::index_select(o, &storage, 0, &inp_index)?.reshape(&g.sizes)
}
