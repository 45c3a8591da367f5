//! Boxed native kernel entries by operator name: the native tier of
//! [`crate::boxed`]. An entry returns `Ok(None)` when its kernel does not
//! take these arguments (host tensors, other dtypes, mixed dtypes,
//! layouts it leaves to the reference implementation), and the caller
//! falls back; kernels signal that with [`Error::Unsupported`].

use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::ivalue::{IValue, unbox};
use crate::tensor::Tensor;

/// A boxed native kernel entry.
pub type NativeFn = fn(&[IValue]) -> Result<Option<Vec<IValue>>>;

type Args<'a> = &'a [IValue];
type Out = Result<Option<Vec<IValue>>>;

/// Every tensor argument is on one device (else the fallback serves the call).
fn all_on_device(a: Args) -> bool {
    let mut first: Option<&std::sync::Arc<crate::device::DeviceContext>> = None;
    let tensors = a.iter().flat_map(|v| match v {
        IValue::Tensor(t) => std::slice::from_ref(t),
        IValue::TensorList(l) => l.as_slice(),
        _ => &[],
    });
    for t in tensors {
        let Some(c) = t.device_ctx() else { return false };
        match first {
            None => first = Some(c),
            Some(f) if std::sync::Arc::ptr_eq(f, c) => {}
            Some(_) => return false,
        }
    }
    first.is_some()
}

/// Runs a kernel; `Unsupported` becomes "not native".
fn run(a: Args, f: impl FnOnce() -> Result<Vec<IValue>>) -> Out {
    if !all_on_device(a) {
        crate::dispatch::note_declined("its tensor arguments are not all on one device".into());
        return Ok(None);
    }
    match f() {
        Ok(v) => Ok(Some(v)),
        Err(Error::Unsupported(why)) => {
            crate::dispatch::note_declined(why);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn n(op: &str, a: Args, want: usize) -> Result<()> {
    if a.len() == want {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{op}: expected {want} arguments, got {}", a.len())))
    }
}
fn t<'a>(op: &str, a: Args<'a>, i: usize) -> Result<&'a Tensor> {
    unbox::tensor(op, unbox::position(i), &a[i])
}
fn ot<'a>(op: &str, a: Args<'a>, i: usize) -> Result<Option<&'a Tensor>> {
    unbox::opt_tensor(op, unbox::position(i), &a[i])
}
fn s(op: &str, a: Args, i: usize) -> Result<Scalar> {
    unbox::scalar(op, unbox::position(i), &a[i])
}
fn i(op: &str, a: Args, k: usize) -> Result<i64> {
    unbox::int(op, unbox::position(k), &a[k])
}
fn b(op: &str, a: Args, k: usize) -> Result<bool> {
    unbox::bool(op, unbox::position(k), &a[k])
}
fn one(t: Tensor) -> Result<Vec<IValue>> {
    Ok(vec![t.into()])
}

macro_rules! entries {
    ($($name:literal, $arity:literal, $fn:ident, |$op:ident, $a:ident| $body:expr;)*) => {
        $(fn $fn($a: Args) -> Out {
            const $op: &str = $name;
            n($op, $a, $arity)?;
            run($a, || $body)
        })*
        /// (operator, argument count, entry), sorted by operator name.
        static TABLE: &[(&str, usize, NativeFn)] = &[$(($name, $arity, $fn)),*];
    };
}

entries! {
    "_log_softmax", 3, log_softmax_, |OP, a| one(super::log_softmax(t(OP, a, 0)?, i(OP, a, 1)?, b(OP, a, 2)?)?);
    "_log_softmax_backward_data", 4, log_softmax_backward_data, |OP, a| one(super::log_softmax_backward_data(
        t(OP, a, 0)?, t(OP, a, 1)?, i(OP, a, 2)?, unbox::dtype(OP, "input_dtype", &a[3])?)?);
    "_softmax", 3, softmax_, |OP, a| one(super::softmax(t(OP, a, 0)?, i(OP, a, 1)?, b(OP, a, 2)?)?);
    "_softmax_backward_data", 4, softmax_backward_data, |OP, a| one(super::softmax_backward_data(
        t(OP, a, 0)?, t(OP, a, 1)?, i(OP, a, 2)?, unbox::dtype(OP, "input_dtype", &a[3])?)?);
    "abs", 1, abs, |OP, a| one(super::abs(t(OP, a, 0)?)?);
    "acos", 1, acos, |OP, a| one(super::acos(t(OP, a, 0)?)?);
    "acosh", 1, acosh, |OP, a| one(super::acosh(t(OP, a, 0)?)?);
    "add.Scalar", 3, add_scalar, |OP, a| one(super::add_scalar(t(OP, a, 0)?, s(OP, a, 1)?, s(OP, a, 2)?)?);
    "add.Tensor", 3, add_tensor, |OP, a| one(super::add_tensor(t(OP, a, 0)?, t(OP, a, 1)?, s(OP, a, 2)?)?);
    "add_.Tensor", 3, add_tensor_, |OP, a| {
        let x = t(OP, a, 0)?;
        super::add_tensor_(x, t(OP, a, 1)?, s(OP, a, 2)?)?;
        one(x.clone())
    };
    "addmm", 5, addmm, |OP, a| one(super::addmm(t(OP, a, 0)?, t(OP, a, 1)?, t(OP, a, 2)?, s(OP, a, 3)?, s(OP, a, 4)?)?);
    "amax", 3, amax, |OP, a| one(super::amax(t(OP, a, 0)?, unbox::int_list(OP, "dim", &a[1])?, b(OP, a, 2)?)?);
    "asin", 1, asin, |OP, a| one(super::asin(t(OP, a, 0)?)?);
    "asinh", 1, asinh, |OP, a| one(super::asinh(t(OP, a, 0)?)?);
    "atan", 1, atan, |OP, a| one(super::atan(t(OP, a, 0)?)?);
    "atan2", 2, atan2, |OP, a| one(super::atan2(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "atanh", 1, atanh, |OP, a| one(super::atanh(t(OP, a, 0)?)?);
    "bitwise_and.Scalar", 2, bitwise_and_scalar, |OP, a| one(super::bitwise_and_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "bitwise_and.Tensor", 2, bitwise_and_tensor, |OP, a| one(super::bitwise_and_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "bitwise_not", 1, bitwise_not, |OP, a| one(super::bitwise_not(t(OP, a, 0)?)?);
    "bitwise_or.Scalar", 2, bitwise_or_scalar, |OP, a| one(super::bitwise_or_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "bitwise_or.Tensor", 2, bitwise_or_tensor, |OP, a| one(super::bitwise_or_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "bitwise_xor.Scalar", 2, bitwise_xor_scalar, |OP, a| one(super::bitwise_xor_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "bitwise_xor.Tensor", 2, bitwise_xor_tensor, |OP, a| one(super::bitwise_xor_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "bmm", 2, bmm, |OP, a| one(super::bmm(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "cat", 2, cat, |OP, a| one(super::cat(unbox::tensor_list(OP, "tensors", &a[0])?, i(OP, a, 1)?)?);
    "ceil", 1, ceil, |OP, a| one(super::ceil(t(OP, a, 0)?)?);
    "cos", 1, cos, |OP, a| one(super::cos(t(OP, a, 0)?)?);
    "cosh", 1, cosh, |OP, a| one(super::cosh(t(OP, a, 0)?)?);
    "div.Scalar", 2, div_scalar, |OP, a| one(super::div_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "div.Tensor", 2, div_tensor, |OP, a| one(super::div_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "elu_backward", 6, elu_backward, |OP, a| one(super::elu_backward(t(OP, a, 0)?, s(OP, a, 1)?, s(OP, a, 2)?,
        s(OP, a, 3)?, b(OP, a, 4)?, t(OP, a, 5)?)?);
    "embedding", 5, embedding, |OP, a| one(super::embedding(t(OP, a, 0)?, t(OP, a, 1)?, i(OP, a, 2)?, b(OP, a, 3)?, b(OP, a, 4)?)?);
    "embedding_dense_backward", 5, embedding_dense_backward, |OP, a| one(super::embedding_dense_backward(
        t(OP, a, 0)?, t(OP, a, 1)?, i(OP, a, 2)?, i(OP, a, 3)?, b(OP, a, 4)?)?);
    "eq.Scalar", 2, eq_scalar, |OP, a| one(super::eq_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "eq.Tensor", 2, eq_tensor, |OP, a| one(super::eq_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "erf", 1, erf, |OP, a| one(super::erf(t(OP, a, 0)?)?);
    "exp", 1, exp, |OP, a| one(super::exp(t(OP, a, 0)?)?);
    "exp2", 1, exp2, |OP, a| one(super::exp2(t(OP, a, 0)?)?);
    "floor", 1, floor, |OP, a| one(super::floor(t(OP, a, 0)?)?);
    "fmod.Scalar", 2, fmod_scalar, |OP, a| one(super::fmod_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "fmod.Tensor", 2, fmod_tensor, |OP, a| one(super::fmod_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "gather", 4, gather, |OP, a| one(super::gather(t(OP, a, 0)?, i(OP, a, 1)?, t(OP, a, 2)?, b(OP, a, 3)?)?);
    "ge.Scalar", 2, ge_scalar, |OP, a| one(super::ge_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "ge.Tensor", 2, ge_tensor, |OP, a| one(super::ge_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "gelu", 2, gelu, |OP, a| one(super::gelu(t(OP, a, 0)?, unbox::str(OP, "approximate", &a[1])?)?);
    "gelu_backward", 3, gelu_backward, |OP, a| one(super::gelu_backward(t(OP, a, 0)?, t(OP, a, 1)?, unbox::str(OP, "approximate", &a[2])?)?);
    "gt.Scalar", 2, gt_scalar, |OP, a| one(super::gt_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "gt.Tensor", 2, gt_tensor, |OP, a| one(super::gt_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "hardsigmoid_backward", 2, hardsigmoid_backward, |OP, a| one(super::hardsigmoid_backward(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "hardswish_backward", 2, hardswish_backward, |OP, a| one(super::hardswish_backward(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "hardtanh_backward", 4, hardtanh_backward, |OP, a| one(super::hardtanh_backward(t(OP, a, 0)?, t(OP, a, 1)?,
        s(OP, a, 2)?, s(OP, a, 3)?)?);
    "index_select", 3, index_select, |OP, a| one(super::index_select(t(OP, a, 0)?, i(OP, a, 1)?, t(OP, a, 2)?)?);
    "isinf", 1, isinf, |OP, a| one(super::isinf(t(OP, a, 0)?)?);
    "isnan", 1, isnan, |OP, a| one(super::isnan(t(OP, a, 0)?)?);
    "le.Scalar", 2, le_scalar, |OP, a| one(super::le_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "le.Tensor", 2, le_tensor, |OP, a| one(super::le_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "leaky_relu_backward", 4, leaky_relu_backward, |OP, a| one(super::leaky_relu_backward(t(OP, a, 0)?, t(OP, a, 1)?,
        s(OP, a, 2)?, b(OP, a, 3)?)?);
    "log", 1, log, |OP, a| one(super::log(t(OP, a, 0)?)?);
    "logical_and", 2, logical_and, |OP, a| one(super::logical_and(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "logical_not", 1, logical_not, |OP, a| one(super::logical_not(t(OP, a, 0)?)?);
    "logical_or", 2, logical_or, |OP, a| one(super::logical_or(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "logical_xor", 2, logical_xor, |OP, a| one(super::logical_xor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "lt.Scalar", 2, lt_scalar, |OP, a| one(super::lt_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "lt.Tensor", 2, lt_tensor, |OP, a| one(super::lt_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "masked_fill.Scalar", 3, masked_fill_scalar, |OP, a| one(super::masked_fill_scalar(t(OP, a, 0)?, t(OP, a, 1)?, s(OP, a, 2)?)?);
    "maximum", 2, maximum, |OP, a| one(super::maximum(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "mean", 2, mean, |OP, a| one(super::mean(t(OP, a, 0)?, unbox::opt(OP, "dtype", &a[1], unbox::dtype)?)?);
    "mean.dim", 4, mean_dim, |OP, a| one(super::mean_dim(t(OP, a, 0)?, unbox::opt(OP, "dim", &a[1], unbox::int_list)?,
        b(OP, a, 2)?, unbox::opt(OP, "dtype", &a[3], unbox::dtype)?)?);
    "minimum", 2, minimum, |OP, a| one(super::minimum(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "mm", 2, mm, |OP, a| one(super::mm(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "mse_loss", 3, mse_loss, |OP, a| one(super::mse_loss(t(OP, a, 0)?, t(OP, a, 1)?, i(OP, a, 2)?)?);
    "mse_loss_backward", 4, mse_loss_backward, |OP, a| one(super::mse_loss_backward(t(OP, a, 0)?, t(OP, a, 1)?, t(OP, a, 2)?, i(OP, a, 3)?)?);
    "mul.Scalar", 2, mul_scalar, |OP, a| one(super::mul_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "mul.Tensor", 2, mul_tensor, |OP, a| one(super::mul_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "native_dropout", 3, native_dropout, |OP, a| {
        let (o, m) = super::native_dropout(t(OP, a, 0)?, unbox::float(OP, "p", &a[1])?, unbox::opt(OP, "train", &a[2], unbox::bool)?)?;
        Ok(vec![o.into(), m.into()])
    };
    "native_dropout_backward", 3, native_dropout_backward, |OP, a| one(super::native_dropout_backward(
        t(OP, a, 0)?, t(OP, a, 1)?, unbox::float(OP, "scale", &a[2])?)?);
    "native_layer_norm", 5, native_layer_norm, |OP, a| {
        let (o, m, r) = super::native_layer_norm(t(OP, a, 0)?, unbox::int_list(OP, "normalized_shape", &a[1])?,
            ot(OP, a, 2)?, ot(OP, a, 3)?, unbox::float(OP, "eps", &a[4])?)?;
        Ok(vec![o.into(), m.into(), r.into()])
    };
    "native_layer_norm_backward", 8, native_layer_norm_backward, |OP, a| {
        let (x, w, bb) = super::native_layer_norm_backward(t(OP, a, 0)?, t(OP, a, 1)?,
            unbox::int_list(OP, "normalized_shape", &a[2])?, t(OP, a, 3)?, t(OP, a, 4)?, ot(OP, a, 5)?, ot(OP, a, 6)?,
            unbox::bool_list(OP, "output_mask", &a[7])?)?;
        Ok(vec![x.into(), w.into(), bb.into()])
    };
    "ne.Scalar", 2, ne_scalar, |OP, a| one(super::ne_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "ne.Tensor", 2, ne_tensor, |OP, a| one(super::ne_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "neg", 1, neg, |OP, a| one(super::neg(t(OP, a, 0)?)?);
    "nll_loss_backward", 7, nll_loss_backward, |OP, a| one(super::nll_loss_backward(t(OP, a, 0)?, t(OP, a, 1)?,
        t(OP, a, 2)?, ot(OP, a, 3)?, i(OP, a, 4)?, i(OP, a, 5)?, t(OP, a, 6)?)?);
    "nll_loss_forward", 5, nll_loss_forward, |OP, a| {
        let (o, w) = super::nll_loss_forward(t(OP, a, 0)?, t(OP, a, 1)?, ot(OP, a, 2)?, i(OP, a, 3)?, i(OP, a, 4)?)?;
        Ok(vec![o.into(), w.into()])
    };
    "relu", 1, relu, |OP, a| one(super::relu(t(OP, a, 0)?)?);
    "remainder.Scalar", 2, remainder_scalar, |OP, a| one(super::remainder_scalar(t(OP, a, 0)?, s(OP, a, 1)?)?);
    "remainder.Tensor", 2, remainder_tensor, |OP, a| one(super::remainder_tensor(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "round", 1, round, |OP, a| one(super::round(t(OP, a, 0)?)?);
    "rsqrt", 1, rsqrt, |OP, a| one(super::rsqrt(t(OP, a, 0)?)?);
    "sigmoid", 1, sigmoid, |OP, a| one(super::sigmoid(t(OP, a, 0)?)?);
    "sigmoid_backward", 2, sigmoid_backward, |OP, a| one(super::sigmoid_backward(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "sign", 1, sign, |OP, a| one(super::sign(t(OP, a, 0)?)?);
    "silu", 1, silu, |OP, a| one(super::silu(t(OP, a, 0)?)?);
    "silu_backward", 2, silu_backward, |OP, a| one(super::silu_backward(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "sin", 1, sin, |OP, a| one(super::sin(t(OP, a, 0)?)?);
    "sinh", 1, sinh, |OP, a| one(super::sinh(t(OP, a, 0)?)?);
    "sqrt", 1, sqrt, |OP, a| one(super::sqrt(t(OP, a, 0)?)?);
    "sub.Scalar", 3, sub_scalar, |OP, a| one(super::sub_scalar(t(OP, a, 0)?, s(OP, a, 1)?, s(OP, a, 2)?)?);
    "sub.Tensor", 3, sub_tensor, |OP, a| one(super::sub_tensor(t(OP, a, 0)?, t(OP, a, 1)?, s(OP, a, 2)?)?);
    "sum", 2, sum, |OP, a| one(super::sum(t(OP, a, 0)?, unbox::opt(OP, "dtype", &a[1], unbox::dtype)?)?);
    "sum.dim_IntList", 4, sum_dim_intlist, |OP, a| one(super::sum_dim_intlist(t(OP, a, 0)?,
        unbox::opt(OP, "dim", &a[1], unbox::int_list)?, b(OP, a, 2)?, unbox::opt(OP, "dtype", &a[3], unbox::dtype)?)?);
    "tan", 1, tan, |OP, a| one(super::tan(t(OP, a, 0)?)?);
    "tanh", 1, tanh, |OP, a| one(super::tanh(t(OP, a, 0)?)?);
    "tanh_backward", 2, tanh_backward, |OP, a| one(super::tanh_backward(t(OP, a, 0)?, t(OP, a, 1)?)?);
    "threshold_backward", 3, threshold_backward, |OP, a| one(super::threshold_backward(t(OP, a, 0)?, t(OP, a, 1)?, s(OP, a, 2)?)?);
    "trunc", 1, trunc, |OP, a| one(super::trunc(t(OP, a, 0)?)?);
    "where.self", 3, where_self, |OP, a| one(super::where_self(t(OP, a, 0)?, t(OP, a, 1)?, t(OP, a, 2)?)?);
}

fn find(op: &str) -> Option<&'static (&'static str, usize, NativeFn)> {
    TABLE.binary_search_by(|e| e.0.cmp(op)).ok().map(|k| &TABLE[k])
}

/// The native kernel entry of `op`, if the device has one.
pub fn native(op: &str) -> Option<NativeFn> {
    find(op).map(|e| e.2)
}

/// The `&'static` name of a natively implemented operator.
pub fn intern(op: &str) -> Option<&'static str> {
    find(op).map(|e| e.0)
}

/// Operators with a native kernel, sorted.
pub fn operators() -> Vec<&'static str> {
    TABLE.iter().map(|e| e.0).collect()
}

/// The argument count of `op`'s native entry.
pub fn arity(op: &str) -> Option<usize> {
    find(op).map(|e| e.1)
}

#[cfg(test)]
mod tests {
    use crate::ivalue::IValue;

    #[test]
    fn bad_arguments_are_errors_or_declines_not_panics() {
        for (name, n, f) in super::TABLE {
            assert!(f(&vec![IValue::None; n.saturating_sub(1)]).is_err(), "{name}: wrong arity");
            // host tensors are declined (the fallback serves them)
            let host = vec![IValue::Tensor(crate::Tensor::zeros(&[2], crate::DType::F32)); *n];
            assert!(matches!(f(&host), Ok(None) | Err(_)), "{name}");
        }
    }

    #[test]
    fn table_is_sorted_and_unique() {
        for w in super::TABLE.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
    }
}
