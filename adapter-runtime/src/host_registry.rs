//! Boxed host reference implementations by operator name: what the
//! CPU-fallback tier ([`crate::dispatch::fallback`]) runs.
//!
//! Each entry unboxes the schema's arguments (in schema order: positional,
//! then kwarg-only, then out= tensors), calls the host reference op in
//! [`crate::ops`] and boxes the results. The host ops accept device
//! tensors: they copy them to the host, compute, and copy the results back
//! to the inputs' device. In-place entries (`add_.Tensor`) write through
//! the `self` handle and return it; out= entries write into `out` (replaced
//! by a fresh tensor of the right shape when it has another shape) and
//! return it.
//!
//! `tests/host_registry_schemas.rs` checks every name against the PyTorch
//! v2.3 operator snapshot and every entry's argument count against its
//! schema ([`arity`]).

use std::sync::Mutex;

use crate::device::Device;
use crate::dispatch::HostFn;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::ivalue::{IValue, MemoryFormat, unbox};
use crate::ops::{self, Reduction, RoundingMode};
use crate::tensor::Tensor;

type Args<'a> = &'a [IValue];
type Out = Result<Vec<IValue>>;

/// (operator, argument count, implementation), sorted by operator name.
static TABLE: &[(&str, usize, HostFn)] = &[
    ("_log_softmax", 3, log_softmax_),
    ("_log_softmax_backward_data", 4, log_softmax_backward_data),
    ("_softmax", 3, softmax_),
    ("_softmax_backward_data", 4, softmax_backward_data),
    ("_to_copy", 7, to_copy),
    ("abs", 1, abs),
    ("acos", 1, acos),
    ("acosh", 1, acosh),
    ("add.Scalar", 3, add_scalar),
    ("add.Tensor", 3, add_tensor),
    ("add.out", 4, add_out),
    ("add_.Scalar", 3, add_scalar_),
    ("add_.Tensor", 3, add_tensor_),
    ("addmm", 5, addmm),
    ("amax", 3, amax),
    ("amin", 3, amin),
    ("argmax", 3, argmax),
    ("argmin", 3, argmin),
    ("as_strided", 4, as_strided),
    ("asin", 1, asin),
    ("asinh", 1, asinh),
    ("atan", 1, atan),
    ("atan2", 2, atan2),
    ("atanh", 1, atanh),
    ("bitwise_and.Scalar", 2, bitwise_and_scalar),
    ("bitwise_and.Tensor", 2, bitwise_and_tensor),
    ("bitwise_not", 1, bitwise_not),
    ("bitwise_or.Scalar", 2, bitwise_or_scalar),
    ("bitwise_or.Tensor", 2, bitwise_or_tensor),
    ("bitwise_xor.Scalar", 2, bitwise_xor_scalar),
    ("bitwise_xor.Tensor", 2, bitwise_xor_tensor),
    ("bmm", 2, bmm),
    ("cat", 2, cat),
    ("ceil", 1, ceil),
    ("clamp", 3, clamp),
    ("clone", 2, clone),
    ("copy_", 3, copy_),
    ("cos", 1, cos),
    ("cosh", 1, cosh),
    ("div.Scalar", 2, div_scalar),
    ("div.Scalar_mode", 3, div_scalar_mode),
    ("div.Tensor", 2, div_tensor),
    ("div.Tensor_mode", 3, div_tensor_mode),
    ("div.out", 3, div_out),
    ("div_.Scalar", 2, div_scalar_),
    ("div_.Tensor", 2, div_tensor_),
    ("elu_backward", 6, elu_backward),
    ("embedding", 5, embedding),
    ("embedding_dense_backward", 5, embedding_dense_backward),
    ("empty.memory_format", 6, empty_memory_format),
    ("eq.Scalar", 2, eq_scalar),
    ("eq.Tensor", 2, eq_tensor),
    ("erf", 1, erf),
    ("exp", 1, exp),
    ("expand", 3, expand),
    ("fill_.Scalar", 2, fill_scalar_),
    ("floor", 1, floor),
    ("fmod.Scalar", 2, fmod_scalar),
    ("fmod.Tensor", 2, fmod_tensor),
    ("full", 6, full),
    ("full_like", 7, full_like),
    ("gather", 4, gather),
    ("ge.Scalar", 2, ge_scalar),
    ("ge.Tensor", 2, ge_tensor),
    ("gelu", 2, gelu),
    ("gelu_backward", 3, gelu_backward),
    ("gt.Scalar", 2, gt_scalar),
    ("gt.Tensor", 2, gt_tensor),
    ("hardsigmoid_backward", 2, hardsigmoid_backward),
    ("hardswish_backward", 2, hardswish_backward),
    ("hardtanh_backward", 4, hardtanh_backward),
    ("index_select", 3, index_select),
    ("isinf", 1, isinf),
    ("isnan", 1, isnan),
    ("le.Scalar", 2, le_scalar),
    ("le.Tensor", 2, le_tensor),
    ("leaky_relu_backward", 4, leaky_relu_backward),
    ("log", 1, log),
    ("logical_and", 2, logical_and),
    ("logical_not", 1, logical_not),
    ("logical_or", 2, logical_or),
    ("logical_xor", 2, logical_xor),
    ("lt.Scalar", 2, lt_scalar),
    ("lt.Tensor", 2, lt_tensor),
    ("masked_fill.Scalar", 3, masked_fill_scalar),
    ("masked_fill.Tensor", 3, masked_fill_tensor),
    ("masked_fill_.Scalar", 3, masked_fill_scalar_),
    ("maximum", 2, maximum),
    ("mean", 2, mean),
    ("mean.dim", 4, mean_dim),
    ("minimum", 2, minimum),
    ("mm", 2, mm),
    ("mm.out", 3, mm_out),
    ("mse_loss", 3, mse_loss),
    ("mse_loss_backward", 4, mse_loss_backward),
    ("mul.Scalar", 2, mul_scalar),
    ("mul.Tensor", 2, mul_tensor),
    ("mul.out", 3, mul_out),
    ("mul_.Scalar", 2, mul_scalar_),
    ("mul_.Tensor", 2, mul_tensor_),
    ("native_dropout", 3, native_dropout),
    ("native_dropout_backward", 3, native_dropout_backward),
    ("native_layer_norm", 5, native_layer_norm),
    ("native_layer_norm_backward", 8, native_layer_norm_backward),
    ("ne.Scalar", 2, ne_scalar),
    ("ne.Tensor", 2, ne_tensor),
    ("neg", 1, neg),
    ("nll_loss_backward", 7, nll_loss_backward),
    ("nll_loss_forward", 5, nll_loss_forward),
    ("ones_like", 6, ones_like),
    ("permute", 2, permute),
    ("pow.Scalar", 2, pow_scalar),
    ("pow.Tensor_Scalar", 2, pow_tensor_scalar),
    ("pow.Tensor_Tensor", 2, pow_tensor_tensor),
    ("prod", 2, prod),
    ("prod.dim_int", 4, prod_dim_int),
    ("relu", 1, relu),
    ("relu_", 1, relu_),
    ("remainder.Scalar", 2, remainder_scalar),
    ("remainder.Tensor", 2, remainder_tensor),
    ("round", 1, round),
    ("rsqrt", 1, rsqrt),
    ("scalar_tensor", 5, scalar_tensor),
    ("scatter_add", 4, scatter_add),
    ("scatter_add_", 4, scatter_add_),
    ("select.int", 3, select_int),
    ("select_backward", 4, select_backward),
    ("sigmoid", 1, sigmoid),
    ("sigmoid_backward", 2, sigmoid_backward),
    ("sign", 1, sign),
    ("silu", 1, silu),
    ("silu_backward", 2, silu_backward),
    ("sin", 1, sin),
    ("sinh", 1, sinh),
    ("slice.Tensor", 5, slice_tensor),
    ("sqrt", 1, sqrt),
    ("squeeze", 1, squeeze),
    ("squeeze.dim", 2, squeeze_dim),
    ("sub.Scalar", 3, sub_scalar),
    ("sub.Tensor", 3, sub_tensor),
    ("sub.out", 4, sub_out),
    ("sub_.Tensor", 3, sub_tensor_),
    ("sum", 2, sum),
    ("sum.IntList_out", 5, sum_intlist_out),
    ("sum.dim_IntList", 4, sum_dim_intlist),
    ("t", 1, t),
    ("tan", 1, tan),
    ("tanh", 1, tanh),
    ("tanh_backward", 2, tanh_backward),
    ("threshold_backward", 3, threshold_backward),
    ("transpose.int", 3, transpose_int),
    ("trunc", 1, trunc),
    ("unsqueeze", 2, unsqueeze),
    ("view", 2, view),
    ("where.self", 3, where_self),
    ("zero_", 1, zero_),
    ("zeros_like", 6, zeros_like),
];

fn find(op: &str) -> Option<&'static (&'static str, usize, HostFn)> {
    TABLE.binary_search_by(|(n, _, _)| (*n).cmp(op)).ok().map(|i| &TABLE[i])
}

/// The host implementation of `op` (qualified name such as `add.Tensor`).
pub fn lookup(op: &str) -> Option<HostFn> {
    find(op).map(|e| e.2)
}

/// The number of boxed arguments the entry for `op` takes (the schema's
/// argument count: positional + kwarg-only + out=).
pub fn arity(op: &str) -> Option<usize> {
    find(op).map(|e| e.1)
}

/// The registry's own `&'static` spelling of `op` (dispatch counters key
/// on `&'static str`).
pub fn intern(op: &str) -> Option<&'static str> {
    find(op).map(|e| e.0)
}

/// Operators that have a host implementation, sorted.
pub fn operators() -> Vec<&'static str> {
    TABLE.iter().map(|e| e.0).collect()
}

fn check(op: &str, want: usize, a: Args) -> Result<()> {
    if a.len() == want {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{op}: expected {want} arguments, got {}", a.len())))
    }
}

macro_rules! args {
    ($op:literal, $a:ident, $n:literal) => {
        const OP: &str = $op;
        check(OP, $n, $a)?;
    };
}

fn one(t: Tensor) -> Out {
    Ok(vec![t.into()])
}

fn tn<'a>(op: &str, a: Args<'a>, i: usize) -> Result<&'a Tensor> {
    unbox::tensor(op, &format!("#{i}"), &a[i])
}
fn otn<'a>(op: &str, a: Args<'a>, i: usize) -> Result<Option<&'a Tensor>> {
    unbox::opt_tensor(op, &format!("#{i}"), &a[i])
}
fn sc(op: &str, a: Args, i: usize) -> Result<Scalar> {
    unbox::scalar(op, &format!("#{i}"), &a[i])
}
fn int(op: &str, a: Args, i: usize) -> Result<i64> {
    unbox::int(op, &format!("#{i}"), &a[i])
}
fn oint(op: &str, a: Args, i: usize) -> Result<Option<i64>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::int)
}
fn flt(op: &str, a: Args, i: usize) -> Result<f64> {
    unbox::float(op, &format!("#{i}"), &a[i])
}
fn bl(op: &str, a: Args, i: usize) -> Result<bool> {
    unbox::bool(op, &format!("#{i}"), &a[i])
}
fn obl(op: &str, a: Args, i: usize) -> Result<Option<bool>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::bool)
}
fn ints<'a>(op: &str, a: Args<'a>, i: usize) -> Result<&'a [i64]> {
    unbox::int_list(op, &format!("#{i}"), &a[i])
}
fn oints<'a>(op: &str, a: Args<'a>, i: usize) -> Result<Option<&'a [i64]>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::int_list)
}
fn odt(op: &str, a: Args, i: usize) -> Result<Option<DType>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::dtype)
}
fn odev(op: &str, a: Args, i: usize) -> Result<Option<Device>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::device)
}
fn omf(op: &str, a: Args, i: usize) -> Result<Option<MemoryFormat>> {
    unbox::opt(op, &format!("#{i}"), &a[i], unbox::memory_format)
}
fn sizes(op: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&s| usize::try_from(s).map_err(|_| Error::InvalidArgument(format!("{op}: negative size {s}"))))
        .collect()
}
fn reduction(op: &str, r: i64) -> Result<Reduction> {
    match r {
        0 => Ok(Reduction::None),
        1 => Ok(Reduction::Mean),
        2 => Ok(Reduction::Sum),
        _ => Err(Error::InvalidArgument(format!("{op}: {r} is not a valid value for reduction"))),
    }
}
fn rounding(op: &str, a: Args, i: usize) -> Result<Option<RoundingMode>> {
    match unbox::opt(op, "rounding_mode", &a[i], unbox::str)? {
        None => Ok(None),
        Some("trunc") => Ok(Some(RoundingMode::Trunc)),
        Some("floor") => Ok(Some(RoundingMode::Floor)),
        Some(other) => Err(Error::InvalidArgument(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
        ))),
    }
}
fn out_into(op: &str, a: Args, i: usize, r: &Tensor) -> Out {
    let mut out = tn(op, a, i)?.clone();
    ops::write_out(r, &mut out)?;
    one(out)
}
fn memory_format_ok(op: &str, m: Option<MemoryFormat>) -> Result<()> {
    match m {
        None | Some(MemoryFormat::Contiguous) | Some(MemoryFormat::Preserve) => Ok(()),
        Some(other) => Err(Error::Unsupported(format!("{op}: memory_format {other:?} is not supported"))),
    }
}
/// Moves a fresh host tensor to `device` (the simulator's contexts).
fn place(t: Tensor, device: Option<Device>) -> Result<Tensor> {
    match device {
        None | Some(Device::Cpu) => Ok(t),
        Some(d) => {
            let rt = crate::runtime::Runtime::simulator()?;
            t.to_device(&rt, d)
        }
    }
}
/// Moves a fresh host tensor to `like`'s device.
fn place_like(t: Tensor, like: &Tensor) -> Result<Tensor> {
    match like.device_ctx() {
        Some(ctx) => t.to_ctx(ctx),
        None => Ok(t),
    }
}

// ------------------------------------------------------------ arithmetic

fn add_tensor(a: Args) -> Out {
    args!("add.Tensor", a, 3);
    one(ops::add(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn add_scalar(a: Args) -> Out {
    args!("add.Scalar", a, 3);
    one(ops::add(tn(OP, a, 0)?, sc(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn add_tensor_(a: Args) -> Out {
    args!("add_.Tensor", a, 3);
    let x = tn(OP, a, 0)?;
    ops::add_(x, tn(OP, a, 1)?, sc(OP, a, 2)?)?;
    one(x.clone())
}
fn add_scalar_(a: Args) -> Out {
    args!("add_.Scalar", a, 3);
    let x = tn(OP, a, 0)?;
    ops::add_(x, sc(OP, a, 1)?, sc(OP, a, 2)?)?;
    one(x.clone())
}
fn add_out(a: Args) -> Out {
    args!("add.out", a, 4);
    let r = ops::add(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?;
    out_into(OP, a, 3, &r)
}
fn sub_tensor(a: Args) -> Out {
    args!("sub.Tensor", a, 3);
    one(ops::sub(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn sub_scalar(a: Args) -> Out {
    args!("sub.Scalar", a, 3);
    one(ops::sub(tn(OP, a, 0)?, sc(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn sub_tensor_(a: Args) -> Out {
    args!("sub_.Tensor", a, 3);
    let x = tn(OP, a, 0)?;
    ops::sub_(x, tn(OP, a, 1)?, sc(OP, a, 2)?)?;
    one(x.clone())
}
fn sub_out(a: Args) -> Out {
    args!("sub.out", a, 4);
    let r = ops::sub(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?;
    out_into(OP, a, 3, &r)
}
fn mul_tensor(a: Args) -> Out {
    args!("mul.Tensor", a, 2);
    one(ops::mul(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn mul_scalar(a: Args) -> Out {
    args!("mul.Scalar", a, 2);
    one(ops::mul(tn(OP, a, 0)?, sc(OP, a, 1)?)?)
}
fn mul_tensor_(a: Args) -> Out {
    args!("mul_.Tensor", a, 2);
    let x = tn(OP, a, 0)?;
    ops::mul_(x, tn(OP, a, 1)?)?;
    one(x.clone())
}
fn mul_scalar_(a: Args) -> Out {
    args!("mul_.Scalar", a, 2);
    let x = tn(OP, a, 0)?;
    ops::mul_(x, sc(OP, a, 1)?)?;
    one(x.clone())
}
fn mul_out(a: Args) -> Out {
    args!("mul.out", a, 3);
    let r = ops::mul(tn(OP, a, 0)?, tn(OP, a, 1)?)?;
    out_into(OP, a, 2, &r)
}
fn div_tensor(a: Args) -> Out {
    args!("div.Tensor", a, 2);
    one(ops::div(tn(OP, a, 0)?, tn(OP, a, 1)?, None)?)
}
fn div_scalar(a: Args) -> Out {
    args!("div.Scalar", a, 2);
    one(ops::div(tn(OP, a, 0)?, sc(OP, a, 1)?, None)?)
}
fn div_tensor_mode(a: Args) -> Out {
    args!("div.Tensor_mode", a, 3);
    one(ops::div(tn(OP, a, 0)?, tn(OP, a, 1)?, rounding(OP, a, 2)?)?)
}
fn div_scalar_mode(a: Args) -> Out {
    args!("div.Scalar_mode", a, 3);
    one(ops::div(tn(OP, a, 0)?, sc(OP, a, 1)?, rounding(OP, a, 2)?)?)
}
fn div_tensor_(a: Args) -> Out {
    args!("div_.Tensor", a, 2);
    let x = tn(OP, a, 0)?;
    ops::div_(x, tn(OP, a, 1)?, None)?;
    one(x.clone())
}
fn div_scalar_(a: Args) -> Out {
    args!("div_.Scalar", a, 2);
    let x = tn(OP, a, 0)?;
    ops::div_(x, sc(OP, a, 1)?, None)?;
    one(x.clone())
}
fn div_out(a: Args) -> Out {
    args!("div.out", a, 3);
    let r = ops::div(tn(OP, a, 0)?, tn(OP, a, 1)?, None)?;
    out_into(OP, a, 2, &r)
}
fn pow_tensor_tensor(a: Args) -> Out {
    args!("pow.Tensor_Tensor", a, 2);
    one(ops::pow(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn pow_tensor_scalar(a: Args) -> Out {
    args!("pow.Tensor_Scalar", a, 2);
    one(ops::pow(tn(OP, a, 0)?, sc(OP, a, 1)?)?)
}
fn pow_scalar(a: Args) -> Out {
    args!("pow.Scalar", a, 2);
    let base = sc(OP, a, 0)?;
    let e = tn(OP, a, 1)?;
    // A Python-number base behaves as a wrapped zero-dim tensor.
    let b = place_like(Tensor::scalar_of(base, base.wrapped_dtype()), e)?;
    let d = crate::dtype::result_type(&[crate::dtype::Operand::Scalar(base), ops_operand(e)])
        .ok_or_else(|| Error::DType("pow: no result type".into()))?;
    one(ops::pow(&b.to_dtype(d)?, e)?)
}
fn ops_operand(t: &Tensor) -> crate::dtype::Operand {
    if t.dim() == 0 { crate::dtype::Operand::ZeroDim(t.dtype()) } else { crate::dtype::Operand::Tensor(t.dtype()) }
}
fn maximum(a: Args) -> Out {
    args!("maximum", a, 2);
    one(ops::maximum(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn minimum(a: Args) -> Out {
    args!("minimum", a, 2);
    one(ops::minimum(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}

macro_rules! compare {
    ($($t:ident, $s:ident, $f:path, $nt:literal, $ns:literal;)*) => {$(
        fn $t(a: Args) -> Out {
            args!($nt, a, 2);
            one($f(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
        }
        fn $s(a: Args) -> Out {
            args!($ns, a, 2);
            one($f(tn(OP, a, 0)?, sc(OP, a, 1)?)?)
        }
    )*};
}
compare! {
    eq_tensor, eq_scalar, ops::eq, "eq.Tensor", "eq.Scalar";
    ne_tensor, ne_scalar, ops::ne, "ne.Tensor", "ne.Scalar";
    lt_tensor, lt_scalar, ops::lt, "lt.Tensor", "lt.Scalar";
    le_tensor, le_scalar, ops::le, "le.Tensor", "le.Scalar";
    gt_tensor, gt_scalar, ops::gt, "gt.Tensor", "gt.Scalar";
    ge_tensor, ge_scalar, ops::ge, "ge.Tensor", "ge.Scalar";
}

macro_rules! unary_entries {
    ($($f:ident, $name:literal;)*) => {$(
        fn $f(a: Args) -> Out {
            args!($name, a, 1);
            one(ops::$f(tn(OP, a, 0)?)?)
        }
    )*};
}
unary_entries! {
    neg, "neg"; abs, "abs"; exp, "exp"; log, "log"; sqrt, "sqrt"; rsqrt, "rsqrt";
    sigmoid, "sigmoid"; tanh, "tanh"; relu, "relu"; silu, "silu";
}

unary_entries! {
    sin, "sin";
    cos, "cos";
    tan, "tan";
    asin, "asin";
    acos, "acos";
    atan, "atan";
    sinh, "sinh";
    cosh, "cosh";
    asinh, "asinh";
    acosh, "acosh";
    atanh, "atanh";
    erf, "erf";
    ceil, "ceil";
    floor, "floor";
    round, "round";
    trunc, "trunc";
    isnan, "isnan";
    isinf, "isinf";
    logical_not, "logical_not";
    bitwise_not, "bitwise_not";
    sign, "sign";
}

fn logical_and(a: Args) -> Out {
    args!("logical_and", a, 2);
    one(ops::logical_and(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn logical_or(a: Args) -> Out {
    args!("logical_or", a, 2);
    one(ops::logical_or(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn logical_xor(a: Args) -> Out {
    args!("logical_xor", a, 2);
    one(ops::logical_xor(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn atan2(a: Args) -> Out {
    args!("atan2", a, 2);
    one(ops::atan2(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
compare! {
    bitwise_and_tensor, bitwise_and_scalar, ops::bitwise_and, "bitwise_and.Tensor", "bitwise_and.Scalar";
    bitwise_or_tensor, bitwise_or_scalar, ops::bitwise_or, "bitwise_or.Tensor", "bitwise_or.Scalar";
    bitwise_xor_tensor, bitwise_xor_scalar, ops::bitwise_xor, "bitwise_xor.Tensor", "bitwise_xor.Scalar";
    fmod_tensor, fmod_scalar, ops::fmod, "fmod.Tensor", "fmod.Scalar";
    remainder_tensor, remainder_scalar, ops::remainder, "remainder.Tensor", "remainder.Scalar";
}
fn elu_backward(a: Args) -> Out {
    args!("elu_backward", a, 6);
    one(ops::elu_backward(tn(OP, a, 0)?, sc(OP, a, 1)?, sc(OP, a, 2)?, sc(OP, a, 3)?, bl(OP, a, 4)?, tn(OP, a, 5)?)?)
}
fn hardsigmoid_backward(a: Args) -> Out {
    args!("hardsigmoid_backward", a, 2);
    one(ops::hardsigmoid_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn hardswish_backward(a: Args) -> Out {
    args!("hardswish_backward", a, 2);
    one(ops::hardswish_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn hardtanh_backward(a: Args) -> Out {
    args!("hardtanh_backward", a, 4);
    one(ops::hardtanh_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?, sc(OP, a, 3)?)?)
}
fn leaky_relu_backward(a: Args) -> Out {
    args!("leaky_relu_backward", a, 4);
    one(ops::leaky_relu_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?, bl(OP, a, 3)?)?)
}

fn relu_(a: Args) -> Out {
    args!("relu_", a, 1);
    let x = tn(OP, a, 0)?;
    ops::assign_inplace(x, &ops::relu(x)?)?;
    one(x.clone())
}
fn gelu(a: Args) -> Out {
    args!("gelu", a, 2);
    one(ops::gelu(tn(OP, a, 0)?, unbox::str(OP, "approximate", &a[1])?)?)
}
fn threshold_backward(a: Args) -> Out {
    args!("threshold_backward", a, 3);
    one(ops::threshold_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn gelu_backward(a: Args) -> Out {
    args!("gelu_backward", a, 3);
    one(ops::gelu_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, unbox::str(OP, "approximate", &a[2])?)?)
}
fn silu_backward(a: Args) -> Out {
    args!("silu_backward", a, 2);
    one(ops::silu_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn sigmoid_backward(a: Args) -> Out {
    args!("sigmoid_backward", a, 2);
    one(ops::sigmoid_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn tanh_backward(a: Args) -> Out {
    args!("tanh_backward", a, 2);
    one(ops::tanh_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn clamp(a: Args) -> Out {
    args!("clamp", a, 3);
    let lo = unbox::opt(OP, "min", &a[1], unbox::scalar)?;
    let hi = unbox::opt(OP, "max", &a[2], unbox::scalar)?;
    one(ops::clamp(tn(OP, a, 0)?, lo, hi)?)
}
fn where_self(a: Args) -> Out {
    args!("where.self", a, 3);
    one(ops::where_(tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?)?)
}
fn masked_fill_scalar(a: Args) -> Out {
    args!("masked_fill.Scalar", a, 3);
    one(ops::masked_fill(tn(OP, a, 0)?, tn(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn masked_fill_tensor(a: Args) -> Out {
    args!("masked_fill.Tensor", a, 3);
    let v = tn(OP, a, 2)?;
    if v.dim() != 0 {
        return Err(Error::InvalidArgument(format!(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
            v.dim()
        )));
    }
    one(ops::masked_fill(tn(OP, a, 0)?, tn(OP, a, 1)?, v.item()?)?)
}
fn masked_fill_scalar_(a: Args) -> Out {
    args!("masked_fill_.Scalar", a, 3);
    let x = tn(OP, a, 0)?;
    ops::masked_fill_(x, tn(OP, a, 1)?, sc(OP, a, 2)?)?;
    one(x.clone())
}

// ------------------------------------------------------------ index ops

fn cat(a: Args) -> Out {
    args!("cat", a, 2);
    let ts = unbox::tensor_list(OP, "tensors", &a[0])?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    one(ops::cat(&refs, int(OP, a, 1)?)?)
}
fn index_select(a: Args) -> Out {
    args!("index_select", a, 3);
    one(ops::index_select(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?)?)
}
fn gather(a: Args) -> Out {
    args!("gather", a, 4);
    one(ops::gather(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?)?)
}
fn scatter_add(a: Args) -> Out {
    args!("scatter_add", a, 4);
    one(ops::scatter_add(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?, tn(OP, a, 3)?)?)
}
fn scatter_add_(a: Args) -> Out {
    args!("scatter_add_", a, 4);
    let x = tn(OP, a, 0)?;
    ops::scatter_add_(x, int(OP, a, 1)?, tn(OP, a, 2)?, tn(OP, a, 3)?)?;
    one(x.clone())
}

// ------------------------------------------------------------ matmul

fn mm(a: Args) -> Out {
    args!("mm", a, 2);
    one(ops::mm(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn mm_out(a: Args) -> Out {
    args!("mm.out", a, 3);
    let r = ops::mm(tn(OP, a, 0)?, tn(OP, a, 1)?)?;
    out_into(OP, a, 2, &r)
}
fn bmm(a: Args) -> Out {
    args!("bmm", a, 2);
    one(ops::bmm(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn addmm(a: Args) -> Out {
    args!("addmm", a, 5);
    one(ops::addmm(tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?, sc(OP, a, 3)?, sc(OP, a, 4)?)?)
}

// ------------------------------------------------------------ reductions

fn sum(a: Args) -> Out {
    args!("sum", a, 2);
    one(ops::sum(tn(OP, a, 0)?, None, false, odt(OP, a, 1)?)?)
}
fn sum_dim_intlist(a: Args) -> Out {
    args!("sum.dim_IntList", a, 4);
    one(ops::sum(tn(OP, a, 0)?, oints(OP, a, 1)?, bl(OP, a, 2)?, odt(OP, a, 3)?)?)
}
fn sum_intlist_out(a: Args) -> Out {
    args!("sum.IntList_out", a, 5);
    let r = ops::sum(tn(OP, a, 0)?, oints(OP, a, 1)?, bl(OP, a, 2)?, odt(OP, a, 3)?)?;
    out_into(OP, a, 4, &r)
}
fn mean(a: Args) -> Out {
    args!("mean", a, 2);
    one(ops::mean(tn(OP, a, 0)?, None, false, odt(OP, a, 1)?)?)
}
fn mean_dim(a: Args) -> Out {
    args!("mean.dim", a, 4);
    one(ops::mean(tn(OP, a, 0)?, oints(OP, a, 1)?, bl(OP, a, 2)?, odt(OP, a, 3)?)?)
}
fn prod(a: Args) -> Out {
    args!("prod", a, 2);
    one(ops::prod(tn(OP, a, 0)?, None, false, odt(OP, a, 1)?)?)
}
fn prod_dim_int(a: Args) -> Out {
    args!("prod.dim_int", a, 4);
    let d = int(OP, a, 1)?;
    one(ops::prod(tn(OP, a, 0)?, Some(&[d]), bl(OP, a, 2)?, odt(OP, a, 3)?)?)
}
fn amax(a: Args) -> Out {
    args!("amax", a, 3);
    one(ops::amax(tn(OP, a, 0)?, Some(ints(OP, a, 1)?), bl(OP, a, 2)?)?)
}
fn amin(a: Args) -> Out {
    args!("amin", a, 3);
    one(ops::amin(tn(OP, a, 0)?, Some(ints(OP, a, 1)?), bl(OP, a, 2)?)?)
}
fn argmax(a: Args) -> Out {
    args!("argmax", a, 3);
    one(ops::argmax(tn(OP, a, 0)?, oint(OP, a, 1)?, bl(OP, a, 2)?)?)
}
fn argmin(a: Args) -> Out {
    args!("argmin", a, 3);
    one(ops::argmin(tn(OP, a, 0)?, oint(OP, a, 1)?, bl(OP, a, 2)?)?)
}

// ------------------------------------------------------------ nn

fn half_to_float(op: &str, x: &Tensor, h: bool) -> Result<Option<DType>> {
    if !h {
        return Ok(None);
    }
    if x.dtype() != DType::F16 {
        return Err(Error::Unsupported(format!("{op}: conversion from {} to Float is not supported", x.dtype())));
    }
    Ok(Some(DType::F32))
}
fn softmax_(a: Args) -> Out {
    args!("_softmax", a, 3);
    let x = tn(OP, a, 0)?;
    one(ops::softmax(x, int(OP, a, 1)?, half_to_float(OP, x, bl(OP, a, 2)?)?)?)
}
fn log_softmax_(a: Args) -> Out {
    args!("_log_softmax", a, 3);
    let x = tn(OP, a, 0)?;
    one(ops::log_softmax(x, int(OP, a, 1)?, half_to_float(OP, x, bl(OP, a, 2)?)?)?)
}
fn softmax_backward_data(a: Args) -> Out {
    args!("_softmax_backward_data", a, 4);
    let d = unbox::dtype(OP, "input_dtype", &a[3])?;
    one(ops::softmax_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, int(OP, a, 2)?)?.to_dtype(d)?)
}
fn log_softmax_backward_data(a: Args) -> Out {
    args!("_log_softmax_backward_data", a, 4);
    let d = unbox::dtype(OP, "input_dtype", &a[3])?;
    one(ops::log_softmax_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, int(OP, a, 2)?)?.to_dtype(d)?)
}
fn native_layer_norm(a: Args) -> Out {
    args!("native_layer_norm", a, 5);
    let ns = sizes(OP, ints(OP, a, 1)?)?;
    let (o, m, r) = ops::layer_norm(tn(OP, a, 0)?, &ns, otn(OP, a, 2)?, otn(OP, a, 3)?, flt(OP, a, 4)?)?;
    Ok(vec![o.into(), m.into(), r.into()])
}
fn native_layer_norm_backward(a: Args) -> Out {
    args!("native_layer_norm_backward", a, 8);
    let ns = sizes(OP, ints(OP, a, 2)?)?;
    let mask = unbox::bool_list(OP, "output_mask", &a[7])?;
    let (gx, gw, gb) =
        ops::layer_norm_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, &ns, tn(OP, a, 3)?, tn(OP, a, 4)?, otn(OP, a, 5)?)?;
    let bias = otn(OP, a, 6)?;
    let want = |i: usize| mask.get(i).copied().unwrap_or(true);
    Ok(vec![
        if want(0) { gx.into() } else { IValue::None },
        if want(1) { gw.into() } else { IValue::None },
        if want(2) && bias.is_some() { gb.into() } else { IValue::None },
    ])
}
fn embedding(a: Args) -> Out {
    args!("embedding", a, 5);
    one(ops::embedding(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn embedding_dense_backward(a: Args) -> Out {
    args!("embedding_dense_backward", a, 5);
    let n =
        usize::try_from(int(OP, a, 2)?).map_err(|_| Error::InvalidArgument(format!("{OP}: negative num_weights")))?;
    let pad = int(OP, a, 3)?;
    one(ops::embedding_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, n, (pad >= 0).then_some(pad), bl(OP, a, 4)?)?)
}

/// The default generator of `native_dropout` (the schema has no generator
/// argument); seed it with [`manual_seed`].
static DEFAULT_GENERATOR: Mutex<Option<ops::Generator>> = Mutex::new(None);

/// Seeds the default generator (`torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    let mut g = DEFAULT_GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    *g = Some(ops::Generator::new(seed));
}

/// Runs `f` with the default generator (seed 0 unless [`manual_seed`] was called).
pub fn with_default_generator<R>(f: impl FnOnce(&mut ops::Generator) -> R) -> R {
    let mut g = DEFAULT_GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(|| ops::Generator::new(0)))
}

fn native_dropout(a: Args) -> Out {
    args!("native_dropout", a, 3);
    let train = obl(OP, a, 2)?.unwrap_or(true);
    let (x, p) = (tn(OP, a, 0)?, flt(OP, a, 1)?);
    let (o, m) = with_default_generator(|g| ops::dropout(x, p, train, g))?;
    Ok(vec![o.into(), m.into()])
}
fn native_dropout_backward(a: Args) -> Out {
    args!("native_dropout_backward", a, 3);
    one(ops::dropout_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, flt(OP, a, 2)?)?)
}
fn nll_loss_forward(a: Args) -> Out {
    args!("nll_loss_forward", a, 5);
    let r = reduction(OP, int(OP, a, 3)?)?;
    let (o, w) = ops::nll_loss(tn(OP, a, 0)?, tn(OP, a, 1)?, otn(OP, a, 2)?, r, int(OP, a, 4)?)?;
    Ok(vec![o.into(), w.into()])
}
fn nll_loss_backward(a: Args) -> Out {
    args!("nll_loss_backward", a, 7);
    let r = reduction(OP, int(OP, a, 4)?)?;
    one(ops::nll_loss_backward(
        tn(OP, a, 0)?,
        tn(OP, a, 1)?,
        tn(OP, a, 2)?,
        otn(OP, a, 3)?,
        r,
        int(OP, a, 5)?,
        tn(OP, a, 6)?,
    )?)
}
fn mse_loss(a: Args) -> Out {
    args!("mse_loss", a, 3);
    let r = reduction(OP, int(OP, a, 2)?)?;
    one(ops::mse_loss(tn(OP, a, 0)?, tn(OP, a, 1)?, r)?)
}
fn mse_loss_backward(a: Args) -> Out {
    args!("mse_loss_backward", a, 4);
    let r = reduction(OP, int(OP, a, 3)?)?;
    one(ops::mse_loss_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?, r)?)
}

// ------------------------------------------------------------ views

fn t(a: Args) -> Out {
    args!("t", a, 1);
    one(tn(OP, a, 0)?.t()?)
}
fn transpose_int(a: Args) -> Out {
    args!("transpose.int", a, 3);
    one(tn(OP, a, 0)?.transpose(int(OP, a, 1)?, int(OP, a, 2)?)?)
}
fn view(a: Args) -> Out {
    args!("view", a, 2);
    one(tn(OP, a, 0)?.view(ints(OP, a, 1)?)?)
}
fn permute(a: Args) -> Out {
    args!("permute", a, 2);
    one(tn(OP, a, 0)?.permute(ints(OP, a, 1)?)?)
}
fn expand(a: Args) -> Out {
    args!("expand", a, 3);
    one(tn(OP, a, 0)?.expand(ints(OP, a, 1)?)?)
}
fn select_int(a: Args) -> Out {
    args!("select.int", a, 3);
    one(tn(OP, a, 0)?.select(int(OP, a, 1)?, int(OP, a, 2)?)?)
}
fn select_backward(a: Args) -> Out {
    args!("select_backward", a, 4);
    let g = tn(OP, a, 0)?;
    let z = Tensor::zeros(&sizes(OP, ints(OP, a, 1)?)?, g.dtype());
    z.select(int(OP, a, 2)?, int(OP, a, 3)?)?.copy_(g)?;
    one(place_like(z, g)?)
}
fn scalar_tensor(a: Args) -> Out {
    args!("scalar_tensor", a, 5);
    let d = odt(OP, a, 1)?.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    one(place(Tensor::full(&[], sc(OP, a, 0)?, d), odev(OP, a, 3)?)?)
}
fn slice_tensor(a: Args) -> Out {
    args!("slice.Tensor", a, 5);
    one(tn(OP, a, 0)?.slice(int(OP, a, 1)?, oint(OP, a, 2)?, oint(OP, a, 3)?, int(OP, a, 4)?)?)
}
fn squeeze(a: Args) -> Out {
    args!("squeeze", a, 1);
    one(tn(OP, a, 0)?.squeeze())
}
fn squeeze_dim(a: Args) -> Out {
    args!("squeeze.dim", a, 2);
    one(tn(OP, a, 0)?.squeeze_dim(int(OP, a, 1)?)?)
}
fn unsqueeze(a: Args) -> Out {
    args!("unsqueeze", a, 2);
    one(tn(OP, a, 0)?.unsqueeze(int(OP, a, 1)?)?)
}
fn as_strided(a: Args) -> Out {
    args!("as_strided", a, 4);
    let x = tn(OP, a, 0)?;
    let size = sizes(OP, ints(OP, a, 1)?)?;
    let stride = sizes(OP, ints(OP, a, 2)?)?;
    let off = match oint(OP, a, 3)? {
        None => x.storage_offset(),
        Some(o) => usize::try_from(o).map_err(|_| Error::InvalidArgument(format!("{OP}: negative storage offset")))?,
    };
    one(x.as_strided(&size, &stride, off)?)
}

// ------------------------------------------------------------ copies and factories

fn clone(a: Args) -> Out {
    args!("clone", a, 2);
    memory_format_ok(OP, omf(OP, a, 1)?)?;
    one(tn(OP, a, 0)?.clone_contiguous()?)
}
fn copy_(a: Args) -> Out {
    args!("copy_", a, 3);
    let x = tn(OP, a, 0)?;
    x.copy_(tn(OP, a, 1)?)?;
    one(x.clone())
}
fn fill_scalar_(a: Args) -> Out {
    args!("fill_.Scalar", a, 2);
    let x = tn(OP, a, 0)?;
    x.fill_(sc(OP, a, 1)?)?;
    one(x.clone())
}
fn zero_(a: Args) -> Out {
    args!("zero_", a, 1);
    let x = tn(OP, a, 0)?;
    x.fill_(Scalar::Int(0))?;
    one(x.clone())
}
fn to_copy(a: Args) -> Out {
    args!("_to_copy", a, 7);
    let x = tn(OP, a, 0)?;
    memory_format_ok(OP, omf(OP, a, 6)?)?;
    let d = odt(OP, a, 1)?.unwrap_or(x.dtype());
    let r = x.to_dtype(d)?;
    let r = if r.shares_storage(x) { r.clone_contiguous()? } else { r };
    match odev(OP, a, 3)? {
        None => one(r),
        Some(dev) if dev == x.device() => one(r),
        Some(dev) => one(place(r.to_cpu()?, Some(dev))?),
    }
}
fn empty_memory_format(a: Args) -> Out {
    args!("empty.memory_format", a, 6);
    memory_format_ok(OP, omf(OP, a, 5)?)?;
    let s = sizes(OP, ints(OP, a, 0)?)?;
    let d = odt(OP, a, 1)?.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    one(place(Tensor::zeros(&s, d), odev(OP, a, 3)?)?)
}
fn full(a: Args) -> Out {
    args!("full", a, 6);
    let s = sizes(OP, ints(OP, a, 0)?)?;
    let v = sc(OP, a, 1)?;
    let d = match odt(OP, a, 2)? {
        Some(d) => d,
        None => match v {
            Scalar::Float(_) => crate::dtype::DEFAULT_FLOAT,
            other => other.wrapped_dtype(),
        },
    };
    one(place(Tensor::full(&s, v, d), odev(OP, a, 4)?)?)
}
fn like(op: &str, a: Args, dtype_at: usize, device_at: usize, value: Scalar) -> Out {
    let x = tn(op, a, 0)?;
    let d = odt(op, a, dtype_at)?.unwrap_or(x.dtype());
    let t = Tensor::full(x.sizes(), value, d);
    match odev(op, a, device_at)? {
        None => one(place_like(t, x)?),
        Some(dev) => one(place(t, Some(dev))?),
    }
}
fn zeros_like(a: Args) -> Out {
    args!("zeros_like", a, 6);
    like(OP, a, 1, 3, Scalar::Int(0))
}
fn ones_like(a: Args) -> Out {
    args!("ones_like", a, 6);
    like(OP, a, 1, 3, Scalar::Int(1))
}
fn full_like(a: Args) -> Out {
    args!("full_like", a, 7);
    let v = sc(OP, a, 1)?;
    like(OP, a, 2, 4, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for w in TABLE.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
    }

    #[test]
    fn wrong_arity_is_an_error_not_a_panic() {
        for (name, n, f) in TABLE {
            let args = vec![IValue::None; n.saturating_sub(1)];
            assert!(f(&args).is_err(), "{name}");
            let args = vec![IValue::None; *n];
            assert!(f(&args).is_err(), "{name} with None arguments");
        }
    }
}
