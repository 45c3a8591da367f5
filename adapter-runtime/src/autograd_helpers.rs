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
