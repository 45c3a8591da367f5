//! Helpers the generated backward nodes (`generated/autograd.rs`) call: PyTorch's
//! `FunctionsManual.cpp` functions and the engine's `sum_to`, over the operator front-ends
//! (`generated::ops::aten`) and the host reference ops. Real dtypes only: `conj` is the identity.

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
