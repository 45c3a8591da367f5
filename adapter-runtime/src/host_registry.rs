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
    ("_adaptive_avg_pool2d", 2, adaptive_avg_pool2d_),
    ("_adaptive_avg_pool2d_backward", 2, adaptive_avg_pool2d_backward_),
    ("_adaptive_avg_pool3d", 2, adaptive_avg_pool3d_),
    ("_cdist_forward", 4, cdist_forward),
    ("_embedding_bag", 9, embedding_bag_),
    ("_local_scalar_dense", 1, local_scalar_dense),
    ("_log_softmax", 3, log_softmax_),
    ("_log_softmax_backward_data", 4, log_softmax_backward_data),
    ("_native_batch_norm_legit", 8, native_batch_norm_legit),
    ("_native_batch_norm_legit.no_stats", 6, native_batch_norm_legit_no_stats),
    ("_native_batch_norm_legit_no_training", 7, native_batch_norm_legit_no_training),
    ("_pdist_forward", 2, pdist_forward),
    ("_softmax", 3, softmax_),
    ("_softmax_backward_data", 4, softmax_backward_data),
    ("_to_copy", 7, to_copy),
    ("_unsafe_view", 2, unsafe_view),
    ("abs", 1, abs),
    ("acos", 1, acos),
    ("acosh", 1, acosh),
    ("adaptive_avg_pool1d", 2, adaptive_avg_pool1d),
    ("add.Scalar", 3, add_scalar),
    ("add.Tensor", 3, add_tensor),
    ("add.out", 4, add_out),
    ("add_.Scalar", 3, add_scalar_),
    ("add_.Tensor", 3, add_tensor_),
    ("addmm", 5, addmm),
    ("alias", 1, alias),
    ("amax", 3, amax),
    ("amin", 3, amin),
    ("any", 1, any),
    ("any.dim", 3, any_dim),
    ("any.dims", 3, any_dims),
    ("arange.start_step", 7, arange_start_step),
    ("argmax", 3, argmax),
    ("argmin", 3, argmin),
    ("as_strided", 4, as_strided),
    ("asin", 1, asin),
    ("asinh", 1, asinh),
    ("atan", 1, atan),
    ("atan2", 2, atan2),
    ("atanh", 1, atanh),
    ("avg_pool1d", 6, avg_pool1d),
    ("avg_pool2d", 7, avg_pool2d),
    ("avg_pool2d_backward", 8, avg_pool2d_backward),
    ("avg_pool3d", 7, avg_pool3d),
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
    ("clamp.Tensor", 3, clamp_tensor),
    ("clone", 2, clone),
    ("col2im", 6, col2im),
    ("constant_pad_nd", 3, constant_pad_nd),
    ("convolution", 9, convolution),
    ("convolution_backward", 11, convolution_backward),
    ("copy", 3, copy),
    ("copy_", 3, copy_),
    ("cos", 1, cos),
    ("cosh", 1, cosh),
    ("cumsum", 3, cumsum),
    ("diagonal", 4, diagonal),
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
    ("empty_strided", 6, empty_strided),
    ("eq.Scalar", 2, eq_scalar),
    ("eq.Tensor", 2, eq_tensor),
    ("erf", 1, erf),
    ("exp", 1, exp),
    ("exp2", 1, exp2),
    ("expand", 3, expand),
    ("fill.Scalar", 2, fill_scalar),
    ("fill_.Scalar", 2, fill_scalar_),
    ("flip", 2, flip),
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
    ("grid_sampler_2d", 5, grid_sampler_2d),
    ("gt.Scalar", 2, gt_scalar),
    ("gt.Tensor", 2, gt_tensor),
    ("hardsigmoid_backward", 2, hardsigmoid_backward),
    ("hardswish_backward", 2, hardswish_backward),
    ("hardtanh_backward", 4, hardtanh_backward),
    ("index.Tensor", 2, index_tensor),
    ("index_put", 4, index_put),
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
    ("masked_scatter", 3, masked_scatter),
    ("max.dim", 3, max_dim),
    ("max_pool2d_with_indices", 6, max_pool2d_with_indices),
    ("max_pool2d_with_indices_backward", 8, max_pool2d_with_indices_backward),
    ("max_pool3d_with_indices", 6, max_pool3d_with_indices),
    ("maximum", 2, maximum),
    ("mean", 2, mean),
    ("mean.dim", 4, mean_dim),
    ("min.dim", 3, min_dim),
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
    ("native_group_norm", 8, native_group_norm),
    ("native_group_norm_backward", 10, native_group_norm_backward),
    ("native_layer_norm", 5, native_layer_norm),
    ("native_layer_norm_backward", 8, native_layer_norm_backward),
    ("ne.Scalar", 2, ne_scalar),
    ("ne.Tensor", 2, ne_tensor),
    ("neg", 1, neg),
    ("nll_loss_backward", 7, nll_loss_backward),
    ("nll_loss_forward", 5, nll_loss_forward),
    ("nonzero", 1, nonzero),
    ("ones_like", 6, ones_like),
    ("permute", 2, permute),
    ("pow.Scalar", 2, pow_scalar),
    ("pow.Tensor_Scalar", 2, pow_tensor_scalar),
    ("pow.Tensor_Tensor", 2, pow_tensor_tensor),
    ("prod", 2, prod),
    ("prod.dim_int", 4, prod_dim_int),
    ("rand", 5, rand),
    ("randn", 5, randn),
    ("randperm", 5, randperm),
    ("reflection_pad1d", 2, reflection_pad1d),
    ("reflection_pad2d", 2, reflection_pad2d),
    ("reflection_pad3d", 2, reflection_pad3d),
    ("relu", 1, relu),
    ("relu_", 1, relu_),
    ("remainder.Scalar", 2, remainder_scalar),
    ("remainder.Tensor", 2, remainder_tensor),
    ("repeat", 2, repeat),
    ("replication_pad2d", 2, replication_pad2d),
    ("replication_pad3d", 2, replication_pad3d),
    ("round", 1, round),
    ("rsqrt", 1, rsqrt),
    ("scalar_tensor", 5, scalar_tensor),
    ("scatter.src", 4, scatter_src),
    ("scatter.value", 4, scatter_value),
    ("scatter_add", 4, scatter_add),
    ("scatter_add_", 4, scatter_add_),
    ("scatter_reduce.two", 6, scatter_reduce_two),
    ("select.int", 3, select_int),
    ("select_backward", 4, select_backward),
    ("select_scatter", 4, select_scatter),
    ("sigmoid", 1, sigmoid),
    ("sigmoid_backward", 2, sigmoid_backward),
    ("sign", 1, sign),
    ("silu", 1, silu),
    ("silu_backward", 2, silu_backward),
    ("sin", 1, sin),
    ("sinh", 1, sinh),
    ("slice.Tensor", 5, slice_tensor),
    ("slice_scatter", 6, slice_scatter),
    ("sort", 3, sort),
    ("split_with_sizes", 3, split_with_sizes),
    ("sqrt", 1, sqrt),
    ("squeeze", 1, squeeze),
    ("squeeze.dim", 2, squeeze_dim),
    ("squeeze.dims", 2, squeeze_dims),
    ("sub.Scalar", 3, sub_scalar),
    ("sub.Tensor", 3, sub_tensor),
    ("sub.out", 4, sub_out),
    ("sub_.Tensor", 3, sub_tensor_),
    ("sum", 2, sum),
    ("sum.IntList_out", 5, sum_intlist_out),
    ("sum.dim_IntList", 4, sum_dim_intlist),
    ("sym_is_contiguous", 2, sym_is_contiguous),
    ("sym_numel", 1, sym_numel),
    ("sym_size.int", 2, sym_size_int),
    ("sym_storage_offset", 1, sym_storage_offset),
    ("sym_stride.int", 2, sym_stride_int),
    ("t", 1, t),
    ("tan", 1, tan),
    ("tanh", 1, tanh),
    ("tanh_backward", 2, tanh_backward),
    ("threshold_backward", 3, threshold_backward),
    ("topk", 5, topk),
    ("transpose.int", 3, transpose_int),
    ("trunc", 1, trunc),
    ("unsqueeze", 2, unsqueeze),
    ("upsample_bilinear2d.vec", 4, upsample_bilinear2d_vec),
    ("upsample_nearest2d.vec", 3, upsample_nearest2d_vec),
    ("var.correction", 4, var_correction),
    ("var.dim", 4, var_dim),
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
    unbox::tensor(op, unbox::position(i), &a[i])
}
fn otn<'a>(op: &str, a: Args<'a>, i: usize) -> Result<Option<&'a Tensor>> {
    unbox::opt_tensor(op, unbox::position(i), &a[i])
}
fn sc(op: &str, a: Args, i: usize) -> Result<Scalar> {
    unbox::scalar(op, unbox::position(i), &a[i])
}
fn int(op: &str, a: Args, i: usize) -> Result<i64> {
    unbox::int(op, unbox::position(i), &a[i])
}
fn oint(op: &str, a: Args, i: usize) -> Result<Option<i64>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::int)
}
fn flt(op: &str, a: Args, i: usize) -> Result<f64> {
    unbox::float(op, unbox::position(i), &a[i])
}
fn bl(op: &str, a: Args, i: usize) -> Result<bool> {
    unbox::bool(op, unbox::position(i), &a[i])
}
fn obl(op: &str, a: Args, i: usize) -> Result<Option<bool>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::bool)
}
fn ints<'a>(op: &str, a: Args<'a>, i: usize) -> Result<&'a [i64]> {
    unbox::int_list(op, unbox::position(i), &a[i])
}
fn oints<'a>(op: &str, a: Args<'a>, i: usize) -> Result<Option<&'a [i64]>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::int_list)
}
fn odt(op: &str, a: Args, i: usize) -> Result<Option<DType>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::dtype)
}
fn odev(op: &str, a: Args, i: usize) -> Result<Option<Device>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::device)
}
fn omf(op: &str, a: Args, i: usize) -> Result<Option<MemoryFormat>> {
    unbox::opt(op, unbox::position(i), &a[i], unbox::memory_format)
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
    exp2, "exp2";
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
/// `scale_grad_by_freq` (#3) and `sparse` (#5) only shape the backward.
fn embedding_bag_(a: Args) -> Out {
    args!("_embedding_bag", a, 9);
    let (w, idx, off) = (tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?);
    bl(OP, a, 3)?;
    bl(OP, a, 5)?;
    let (o, o2b, bag_size, max_indices) =
        ops::embedding_bag(w, idx, off, int(OP, a, 4)?, otn(OP, a, 6)?, bl(OP, a, 7)?, int(OP, a, 8)?)?;
    Ok(vec![o.into(), o2b.into(), bag_size.into(), max_indices.into()])
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
/// `view` without the aliasing bookkeeping: a view here too.
fn unsafe_view(a: Args) -> Out {
    args!("_unsafe_view", a, 2);
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

// ------------------------------------------------------------ Core ATen (`ops::core_aten`)

fn two(a: Tensor, b: Tensor) -> Out {
    Ok(vec![a.into(), b.into()])
}
fn three((a, b, c): (Tensor, Tensor, Tensor)) -> Out {
    Ok(vec![a.into(), b.into(), c.into()])
}
fn usz(op: &str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidArgument(format!("{op}: negative value {v}")))
}
fn local_scalar_dense(a: Args) -> Out {
    args!("_local_scalar_dense", a, 1);
    Ok(vec![IValue::Scalar(tn(OP, a, 0)?.item()?)])
}
fn native_batch_norm_legit(a: Args) -> Out {
    args!("_native_batch_norm_legit", a, 8);
    let running = Some((tn(OP, a, 3)?, tn(OP, a, 4)?));
    three(ops::batch_norm(
        tn(OP, a, 0)?,
        otn(OP, a, 1)?,
        otn(OP, a, 2)?,
        running,
        bl(OP, a, 5)?,
        flt(OP, a, 6)?,
        flt(OP, a, 7)?,
    )?)
}
fn native_batch_norm_legit_no_stats(a: Args) -> Out {
    args!("_native_batch_norm_legit.no_stats", a, 6);
    three(ops::batch_norm(
        tn(OP, a, 0)?,
        otn(OP, a, 1)?,
        otn(OP, a, 2)?,
        None,
        bl(OP, a, 3)?,
        flt(OP, a, 4)?,
        flt(OP, a, 5)?,
    )?)
}
fn native_batch_norm_legit_no_training(a: Args) -> Out {
    args!("_native_batch_norm_legit_no_training", a, 7);
    let running = Some((tn(OP, a, 3)?, tn(OP, a, 4)?));
    three(ops::batch_norm(
        tn(OP, a, 0)?,
        otn(OP, a, 1)?,
        otn(OP, a, 2)?,
        running,
        false,
        flt(OP, a, 5)?,
        flt(OP, a, 6)?,
    )?)
}
fn alias(a: Args) -> Out {
    args!("alias", a, 1);
    one(tn(OP, a, 0)?.clone())
}
fn any(a: Args) -> Out {
    args!("any", a, 1);
    one(ops::any(tn(OP, a, 0)?, None, false)?)
}
fn any_dim(a: Args) -> Out {
    args!("any.dim", a, 3);
    one(ops::any(tn(OP, a, 0)?, Some(&[int(OP, a, 1)?]), bl(OP, a, 2)?)?)
}
fn any_dims(a: Args) -> Out {
    args!("any.dims", a, 3);
    one(ops::any(tn(OP, a, 0)?, oints(OP, a, 1)?, bl(OP, a, 2)?)?)
}
fn arange_start_step(a: Args) -> Out {
    args!("arange.start_step", a, 7);
    let t = ops::arange(sc(OP, a, 0)?, sc(OP, a, 1)?, sc(OP, a, 2)?, odt(OP, a, 3)?)?;
    one(place(t, odev(OP, a, 5)?)?)
}
fn avg_pool2d(a: Args) -> Out {
    args!("avg_pool2d", a, 7);
    one(ops::avg_pool2d(
        tn(OP, a, 0)?,
        ints(OP, a, 1)?,
        ints(OP, a, 2)?,
        ints(OP, a, 3)?,
        bl(OP, a, 4)?,
        bl(OP, a, 5)?,
        oint(OP, a, 6)?,
    )?)
}
fn avg_pool3d(a: Args) -> Out {
    args!("avg_pool3d", a, 7);
    one(ops::avg_pool3d(
        tn(OP, a, 0)?,
        ints(OP, a, 1)?,
        ints(OP, a, 2)?,
        ints(OP, a, 3)?,
        bl(OP, a, 4)?,
        bl(OP, a, 5)?,
        oint(OP, a, 6)?,
    )?)
}
fn clamp_tensor(a: Args) -> Out {
    args!("clamp.Tensor", a, 3);
    one(ops::clamp_tensor(tn(OP, a, 0)?, otn(OP, a, 1)?, otn(OP, a, 2)?)?)
}
fn constant_pad_nd(a: Args) -> Out {
    args!("constant_pad_nd", a, 3);
    one(ops::constant_pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, sc(OP, a, 2)?)?)
}
fn convolution(a: Args) -> Out {
    args!("convolution", a, 9);
    let x = tn(OP, a, 0)?;
    let (stride, padding, dilation) = (ints(OP, a, 3)?, ints(OP, a, 4)?, ints(OP, a, 5)?);
    one(ops::convolution(x, tn(OP, a, 1)?, otn(OP, a, 2)?, stride, padding, dilation, bl(OP, a, 6)?, int(OP, a, 8)?)?)
}
fn copy(a: Args) -> Out {
    args!("copy", a, 3);
    let (x, src) = (tn(OP, a, 0)?, tn(OP, a, 1)?);
    let out = x.clone_contiguous()?;
    out.copy_(src)?;
    one(out)
}
fn cumsum(a: Args) -> Out {
    args!("cumsum", a, 3);
    one(ops::cumsum(tn(OP, a, 0)?, int(OP, a, 1)?, odt(OP, a, 2)?)?)
}
fn diagonal(a: Args) -> Out {
    args!("diagonal", a, 4);
    one(ops::diagonal(tn(OP, a, 0)?, int(OP, a, 1)?, int(OP, a, 2)?, int(OP, a, 3)?)?)
}
fn empty_strided(a: Args) -> Out {
    args!("empty_strided", a, 6);
    let (s, st) = (sizes(OP, ints(OP, a, 0)?)?, sizes(OP, ints(OP, a, 1)?)?);
    let d = odt(OP, a, 2)?.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    let extent = crate::shape::storage_extent(&s, &st, 0);
    let base = Tensor::zeros(&[extent], d).as_strided(&s, &st, 0)?;
    one(place(base, odev(OP, a, 4)?)?)
}
fn fill_scalar(a: Args) -> Out {
    args!("fill.Scalar", a, 2);
    let x = tn(OP, a, 0)?;
    one(place_like(Tensor::full(x.sizes(), sc(OP, a, 1)?, x.dtype()), x)?)
}
fn flip(a: Args) -> Out {
    args!("flip", a, 2);
    one(ops::flip(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn index_tensor(a: Args) -> Out {
    args!("index.Tensor", a, 2);
    one(ops::index(tn(OP, a, 0)?, unbox::opt_tensor_list(OP, "indices", &a[1])?)?)
}
fn index_put(a: Args) -> Out {
    args!("index_put", a, 4);
    let idx = unbox::opt_tensor_list(OP, "indices", &a[1])?;
    one(ops::index_put(tn(OP, a, 0)?, idx, tn(OP, a, 2)?, bl(OP, a, 3)?)?)
}
fn max_dim(a: Args) -> Out {
    args!("max.dim", a, 3);
    let (v, i) = ops::max_min_dim(tn(OP, a, 0)?, int(OP, a, 1)?, bl(OP, a, 2)?, true)?;
    two(v, i)
}
fn min_dim(a: Args) -> Out {
    args!("min.dim", a, 3);
    let (v, i) = ops::max_min_dim(tn(OP, a, 0)?, int(OP, a, 1)?, bl(OP, a, 2)?, false)?;
    two(v, i)
}
fn max_pool2d_with_indices(a: Args) -> Out {
    args!("max_pool2d_with_indices", a, 6);
    let (v, i) = ops::max_pool2d_with_indices(
        tn(OP, a, 0)?,
        ints(OP, a, 1)?,
        ints(OP, a, 2)?,
        ints(OP, a, 3)?,
        ints(OP, a, 4)?,
        bl(OP, a, 5)?,
    )?;
    two(v, i)
}
fn max_pool3d_with_indices(a: Args) -> Out {
    args!("max_pool3d_with_indices", a, 6);
    let (v, i) = ops::max_pool3d_with_indices(
        tn(OP, a, 0)?,
        ints(OP, a, 1)?,
        ints(OP, a, 2)?,
        ints(OP, a, 3)?,
        ints(OP, a, 4)?,
        bl(OP, a, 5)?,
    )?;
    two(v, i)
}
fn native_group_norm(a: Args) -> Out {
    args!("native_group_norm", a, 8);
    let (n, c, hw, g) =
        (usz(OP, int(OP, a, 3)?)?, usz(OP, int(OP, a, 4)?)?, usz(OP, int(OP, a, 5)?)?, usz(OP, int(OP, a, 6)?)?);
    three(ops::group_norm(tn(OP, a, 0)?, otn(OP, a, 1)?, otn(OP, a, 2)?, n, c, hw, g, flt(OP, a, 7)?)?)
}
fn nonzero(a: Args) -> Out {
    args!("nonzero", a, 1);
    one(ops::nonzero(tn(OP, a, 0)?)?)
}
fn repeat(a: Args) -> Out {
    args!("repeat", a, 2);
    one(ops::repeat(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn scatter_src(a: Args) -> Out {
    args!("scatter.src", a, 4);
    one(ops::scatter(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?, ops::Rhs::Tensor(tn(OP, a, 3)?))?)
}
fn scatter_value(a: Args) -> Out {
    args!("scatter.value", a, 4);
    one(ops::scatter(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?, ops::Rhs::Scalar(sc(OP, a, 3)?))?)
}
fn select_scatter(a: Args) -> Out {
    args!("select_scatter", a, 4);
    one(ops::select_scatter(tn(OP, a, 0)?, tn(OP, a, 1)?, int(OP, a, 2)?, int(OP, a, 3)?)?)
}
fn slice_scatter(a: Args) -> Out {
    args!("slice_scatter", a, 6);
    one(ops::slice_scatter(
        tn(OP, a, 0)?,
        tn(OP, a, 1)?,
        int(OP, a, 2)?,
        oint(OP, a, 3)?,
        oint(OP, a, 4)?,
        int(OP, a, 5)?,
    )?)
}
fn sort(a: Args) -> Out {
    args!("sort", a, 3);
    let (v, i) = ops::sort(tn(OP, a, 0)?, int(OP, a, 1)?, bl(OP, a, 2)?)?;
    two(v, i)
}
fn split_with_sizes(a: Args) -> Out {
    args!("split_with_sizes", a, 3);
    let parts = ops::split_with_sizes(tn(OP, a, 0)?, ints(OP, a, 1)?, int(OP, a, 2)?)?;
    Ok(vec![IValue::TensorList(parts)])
}
fn squeeze_dims(a: Args) -> Out {
    args!("squeeze.dims", a, 2);
    one(ops::squeeze_dims(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn topk(a: Args) -> Out {
    args!("topk", a, 5);
    let (v, i) = ops::topk(tn(OP, a, 0)?, int(OP, a, 1)?, int(OP, a, 2)?, bl(OP, a, 3)?)?;
    two(v, i)
}
fn var_correction(a: Args) -> Out {
    args!("var.correction", a, 4);
    let c = unbox::opt(OP, "correction", &a[2], unbox::scalar)?.map_or(1.0, |s| s.to_f64());
    one(ops::var(tn(OP, a, 0)?, oints(OP, a, 1)?, c, bl(OP, a, 3)?)?)
}
fn var_dim(a: Args) -> Out {
    args!("var.dim", a, 4);
    let c = if bl(OP, a, 2)? { 1.0 } else { 0.0 };
    one(ops::var(tn(OP, a, 0)?, oints(OP, a, 1)?, c, bl(OP, a, 3)?)?)
}
fn adaptive_avg_pool2d_(a: Args) -> Out {
    args!("_adaptive_avg_pool2d", a, 2);
    one(ops::adaptive_avg_pool(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn adaptive_avg_pool3d_(a: Args) -> Out {
    args!("_adaptive_avg_pool3d", a, 2);
    one(ops::adaptive_avg_pool(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn adaptive_avg_pool1d(a: Args) -> Out {
    args!("adaptive_avg_pool1d", a, 2);
    one(ops::adaptive_avg_pool(tn(OP, a, 0)?, ints(OP, a, 1)?)?)
}
fn cdist_forward(a: Args) -> Out {
    args!("_cdist_forward", a, 4);
    one(ops::cdist(tn(OP, a, 0)?, tn(OP, a, 1)?, flt(OP, a, 2)?)?)
}
fn pdist_forward(a: Args) -> Out {
    args!("_pdist_forward", a, 2);
    one(ops::pdist(tn(OP, a, 0)?, flt(OP, a, 1)?)?)
}
fn avg_pool1d(a: Args) -> Out {
    args!("avg_pool1d", a, 6);
    one(ops::avg_pool1d(
        tn(OP, a, 0)?,
        ints(OP, a, 1)?,
        ints(OP, a, 2)?,
        ints(OP, a, 3)?,
        bl(OP, a, 4)?,
        bl(OP, a, 5)?,
    )?)
}
fn avg_pool2d_backward(a: Args) -> Out {
    args!("avg_pool2d_backward", a, 8);
    let (k, s, p) = (ints(OP, a, 2)?, ints(OP, a, 3)?, ints(OP, a, 4)?);
    one(ops::avg_pool2d_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, k, s, p, bl(OP, a, 5)?, bl(OP, a, 6)?, oint(OP, a, 7)?)?)
}
fn bool3(op: &str, a: Args, i: usize) -> Result<[bool; 3]> {
    match &a[i] {
        IValue::BoolList(b) if b.len() == 3 => Ok([b[0], b[1], b[2]]),
        other => Err(Error::InvalidArgument(format!("{op}: output_mask must be bool[3], got {}", other.kind()))),
    }
}
fn opt3(r: [Option<Tensor>; 3]) -> Out {
    Ok(r.into_iter().map(|t| t.map_or(IValue::None, IValue::Tensor)).collect())
}
fn convolution_backward(a: Args) -> Out {
    args!("convolution_backward", a, 11);
    let has_bias = oints(OP, a, 3)?.is_some();
    let (stride, padding, dilation) = (ints(OP, a, 4)?, ints(OP, a, 5)?, ints(OP, a, 6)?);
    let (go, x, w) = (tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?);
    opt3(ops::convolution_backward(
        go,
        x,
        w,
        has_bias,
        stride,
        padding,
        dilation,
        bl(OP, a, 7)?,
        int(OP, a, 9)?,
        bool3(OP, a, 10)?,
    )?)
}
fn max_pool2d_with_indices_backward(a: Args) -> Out {
    args!("max_pool2d_with_indices_backward", a, 8);
    one(ops::max_pool2d_with_indices_backward(tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 7)?)?)
}
fn native_group_norm_backward(a: Args) -> Out {
    args!("native_group_norm_backward", a, 10);
    let (n, c, hw, g) =
        (usz(OP, int(OP, a, 5)?)?, usz(OP, int(OP, a, 6)?)?, usz(OP, int(OP, a, 7)?)?, usz(OP, int(OP, a, 8)?)?);
    let (go, x, m, r) = (tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?, tn(OP, a, 3)?);
    opt3(ops::group_norm_backward(go, x, m, r, otn(OP, a, 4)?, n, c, hw, g, bool3(OP, a, 9)?)?)
}
/// `rand` / `randn` from the default generator (`manual_seed`): uniform in [0, 1) or standard
/// normal (Box-Muller), computed in f64 and rounded to the dtype.
fn random(op: &str, a: Args, normal: bool) -> Out {
    let s = sizes(op, ints(op, a, 0)?)?;
    let d = odt(op, a, 1)?.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    if !d.is_floating() {
        return Err(Error::DType(format!("\"{op}\" not implemented for '{}'", d.name())));
    }
    let n: usize = s.iter().product();
    let v: Vec<f64> = with_default_generator(|g| {
        (0..n)
            .map(|_| {
                let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                if normal {
                    let u2 = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
                } else {
                    u
                }
            })
            .collect()
    });
    one(place(Tensor::from_f64(&v, &s, d)?, odev(op, a, 3)?)?)
}
fn rand(a: Args) -> Out {
    args!("rand", a, 5);
    random(OP, a, false)
}
fn randn(a: Args) -> Out {
    args!("randn", a, 5);
    random(OP, a, true)
}
fn randperm(a: Args) -> Out {
    args!("randperm", a, 5);
    let n = usz(OP, int(OP, a, 0)?)?;
    let d = odt(OP, a, 1)?.unwrap_or(DType::I64);
    // Fisher-Yates from the default generator
    let mut p: Vec<i64> = (0..n as i64).collect();
    with_default_generator(|g| {
        for i in (1..n).rev() {
            let j = (g.next_u64() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
    });
    one(place(Tensor::from_i64(&p, &[n], d)?, odev(OP, a, 3)?)?)
}
fn reflection_pad1d(a: Args) -> Out {
    args!("reflection_pad1d", a, 2);
    one(ops::pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, ops::PadMode::Reflect)?)
}
fn reflection_pad2d(a: Args) -> Out {
    args!("reflection_pad2d", a, 2);
    one(ops::pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, ops::PadMode::Reflect)?)
}
fn reflection_pad3d(a: Args) -> Out {
    args!("reflection_pad3d", a, 2);
    one(ops::pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, ops::PadMode::Reflect)?)
}
fn replication_pad2d(a: Args) -> Out {
    args!("replication_pad2d", a, 2);
    one(ops::pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, ops::PadMode::Replicate)?)
}
fn replication_pad3d(a: Args) -> Out {
    args!("replication_pad3d", a, 2);
    one(ops::pad_nd(tn(OP, a, 0)?, ints(OP, a, 1)?, ops::PadMode::Replicate)?)
}
fn scatter_reduce_two(a: Args) -> Out {
    args!("scatter_reduce.two", a, 6);
    let reduce = unbox::str(OP, "reduce", &a[4])?;
    one(ops::scatter_reduce(tn(OP, a, 0)?, int(OP, a, 1)?, tn(OP, a, 2)?, tn(OP, a, 3)?, reduce, bl(OP, a, 5)?)?)
}
fn masked_scatter(a: Args) -> Out {
    args!("masked_scatter", a, 3);
    one(ops::masked_scatter(tn(OP, a, 0)?, tn(OP, a, 1)?, tn(OP, a, 2)?)?)
}
/// `sym_is_contiguous(Tensor self, MemoryFormat memory_format=contiguous_format) -> SymBool` (new
/// in PyTorch 2.15, Core ATen): the runtime's tensors have one memory format, row-major.
fn sym_is_contiguous(a: Args) -> Out {
    args!("sym_is_contiguous", a, 2);
    let x = tn(OP, a, 0)?;
    match &a[1] {
        IValue::None | IValue::MemoryFormat(crate::ivalue::MemoryFormat::Contiguous) => {}
        IValue::MemoryFormat(crate::ivalue::MemoryFormat::Preserve) => {
            return Err(Error::InvalidArgument(format!("{OP}: preserve_format is not a memory format to test")));
        }
        other => {
            return Err(Error::Unsupported(format!(
                "{OP}: memory format {} (the runtime is row-major only)",
                other.kind()
            )));
        }
    }
    Ok(vec![IValue::Bool(x.is_contiguous())])
}
fn sym_numel(a: Args) -> Out {
    args!("sym_numel", a, 1);
    Ok(vec![IValue::Int(tn(OP, a, 0)?.numel() as i64)])
}
fn sym_size_int(a: Args) -> Out {
    args!("sym_size.int", a, 2);
    Ok(vec![IValue::Int(tn(OP, a, 0)?.size(int(OP, a, 1)?)? as i64)])
}
fn sym_storage_offset(a: Args) -> Out {
    args!("sym_storage_offset", a, 1);
    Ok(vec![IValue::Int(tn(OP, a, 0)?.storage_offset() as i64)])
}
fn sym_stride_int(a: Args) -> Out {
    args!("sym_stride.int", a, 2);
    let x = tn(OP, a, 0)?;
    let d = crate::shape::wrap_dim(int(OP, a, 1)?, x.dim())?;
    Ok(vec![IValue::Int(x.strides().get(d).copied().unwrap_or(1) as i64)])
}
fn upsample_nearest2d_vec(a: Args) -> Out {
    args!("upsample_nearest2d.vec", a, 3);
    let scales = match &a[2] {
        IValue::None => None,
        IValue::FloatList(f) => Some(f.as_slice()),
        other => {
            return Err(Error::InvalidArgument(format!("{OP}: scale_factors must be float[]?, got {}", other.kind())));
        }
    };
    one(ops::upsample_nearest2d(tn(OP, a, 0)?, oints(OP, a, 1)?, scales)?)
}
fn col2im(a: Args) -> Out {
    args!("col2im", a, 6);
    let (size, kernel, dilation) = (ints(OP, a, 1)?, ints(OP, a, 2)?, ints(OP, a, 3)?);
    one(ops::col2im(tn(OP, a, 0)?, size, kernel, dilation, ints(OP, a, 4)?, ints(OP, a, 5)?)?)
}
fn grid_sampler_2d(a: Args) -> Out {
    args!("grid_sampler_2d", a, 5);
    one(ops::grid_sampler_2d(tn(OP, a, 0)?, tn(OP, a, 1)?, int(OP, a, 2)?, int(OP, a, 3)?, bl(OP, a, 4)?)?)
}
fn adaptive_avg_pool2d_backward_(a: Args) -> Out {
    args!("_adaptive_avg_pool2d_backward", a, 2);
    one(ops::adaptive_avg_pool2d_backward(tn(OP, a, 0)?, tn(OP, a, 1)?)?)
}
fn upsample_bilinear2d_vec(a: Args) -> Out {
    args!("upsample_bilinear2d.vec", a, 4);
    let scales = match &a[3] {
        IValue::None => None,
        IValue::FloatList(f) => Some(f.as_slice()),
        other => {
            return Err(Error::InvalidArgument(format!("{OP}: scale_factors must be float[]?, got {}", other.kind())));
        }
    };
    one(ops::upsample_bilinear2d(tn(OP, a, 0)?, oints(OP, a, 1)?, bl(OP, a, 2)?, scales)?)
}

#[cfg(test)]
mod tests {
    /// The counts the runtime README states are the code's (the README is checked, not trusted).
    #[test]
    fn readme_counts_are_the_codes() {
        let readme = include_str!("../README.md");
        let native = crate::kernels::operators().len();
        let host = super::operators().len();
        for (needle, n) in [
            ("`kernels::is_native(op)` (", native),
            ("boxed host implementations of ", host),
            ("`host_registry` (", host),
        ] {
            let at = readme.find(needle).unwrap_or_else(|| panic!("README no longer says `{needle}`"));
            let rest = &readme[at + needle.len()..];
            let stated: usize = rest[..rest.find(' ').unwrap()].parse().unwrap();
            assert_eq!(stated, n, "adapter-runtime/README.md says `{needle}{stated}`, the code has {n}");
        }
        // the golden counts: the precision suite's and the autograd suite's index files
        let count = |json: &str| -> usize {
            let at = json.find("\"count\":").expect("count field") + 8;
            json[at..].trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
        };
        let precision = count(include_str!("../goldens/index.json"));
        let autograd = count(include_str!("../goldens/autograd_index.json"));
        assert!(readme.contains(&format!("`goldens/index.json`: {precision} cases")), "precision golden count");
        assert!(readme.contains(&format!("dtype): {autograd} cases")), "autograd golden count");
    }

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
