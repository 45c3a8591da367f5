//! Entry points of the host reference tier with an operator's schema arguments in schema order
//! (positional, kwarg-only, out=), as the generated `AtenOps` method declares them, for the
//! operators whose reference function takes other arguments: reduction enums, rounding modes,
//! sizes as `usize`, in-place and out= forms, factories placed on a device. A reference function
//! that already takes its operator's schema arguments is marked itself (see [`crate::reference`]);
//! there is no forwarder here for it.
//!
//! A function marked `/// xirang-fallback: <op>` is attached by `xirang-scan generate` as that
//! operator's CPU fallback (`generated/ops_fallback.rs`), the way `/// xirang-kernel:` attaches a
//! native kernel: there is no table to edit and nothing to unbox, and a signature that does not
//! match the operator's fails to compile there, naming the function. An operator without a marked
//! function has no host implementation (its fallback reports `Unsupported`).
//!
//! In-place functions (`add_.Tensor`) write through the `self` handle and return it; out=
//! functions write into `out` (resized when it has another shape) and return it.
// The functions take their operators' schema arguments as they are: names (`N`, `C`, `HxW`) and
// counts (`convolution` has nine) are PyTorch's.
#![allow(non_snake_case, clippy::too_many_arguments)]

use crate::device::Device;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::ivalue::{Layout, MemoryFormat};
use crate::reference::{self, Reduction, RoundingMode};
use crate::rng::with_default_generator;
use crate::tensor::Tensor;

fn sizes(op: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&s| usize::try_from(s).map_err(|_| Error::InvalidArgument(format!("{op}: negative size {s}"))))
        .collect()
}
fn reduction_of(op: &str, r: i64) -> Result<Reduction> {
    match r {
        0 => Ok(Reduction::None),
        1 => Ok(Reduction::Mean),
        2 => Ok(Reduction::Sum),
        _ => Err(Error::InvalidArgument(format!("{op}: {r} is not a valid value for reduction"))),
    }
}
fn rounding(mode: Option<&str>) -> Result<Option<RoundingMode>> {
    match mode {
        None => Ok(None),
        Some("trunc") => Ok(Some(RoundingMode::Trunc)),
        Some("floor") => Ok(Some(RoundingMode::Floor)),
        Some(other) => Err(Error::InvalidArgument(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
        ))),
    }
}
/// Stores `r` into `out` (PyTorch's out= rules) and returns `out`.
fn out_into(out: &mut Tensor, r: &Tensor) -> Result<Tensor> {
    reference::write_out(r, out)?;
    Ok(out.clone())
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

/// xirang-fallback: add_.Tensor
pub fn add_tensor_(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::add_(x, other, alpha)?;
    Ok(x.clone())
}
/// xirang-fallback: add_.Scalar
pub fn add_scalar_(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::add_(x, other, alpha)?;
    Ok(x.clone())
}
/// xirang-fallback: add.out
pub fn add_out(self_: &Tensor, other: &Tensor, alpha: Scalar, out: &mut Tensor) -> Result<Tensor> {
    let r = reference::add(self_, other, alpha)?;
    out_into(out, &r)
}
/// xirang-fallback: sub_.Tensor
pub fn sub_tensor_(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::sub_(x, other, alpha)?;
    Ok(x.clone())
}
/// xirang-fallback: sub.out
pub fn sub_out(self_: &Tensor, other: &Tensor, alpha: Scalar, out: &mut Tensor) -> Result<Tensor> {
    let r = reference::sub(self_, other, alpha)?;
    out_into(out, &r)
}
/// xirang-fallback: mul_.Tensor
pub fn mul_tensor_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let x = self_;
    reference::mul_(x, other)?;
    Ok(x.clone())
}
/// xirang-fallback: mul_.Scalar
pub fn mul_scalar_(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::mul_(x, other)?;
    Ok(x.clone())
}
/// xirang-fallback: mul.out
pub fn mul_out(self_: &Tensor, other: &Tensor, out: &mut Tensor) -> Result<Tensor> {
    let r = reference::mul(self_, other)?;
    out_into(out, &r)
}
/// xirang-fallback: div.Tensor
pub fn div_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    reference::div(self_, other, None)
}
/// xirang-fallback: div.Scalar
pub fn div_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    reference::div(self_, other, None)
}
/// xirang-fallback: div.Tensor_mode
pub fn div_tensor_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Result<Tensor> {
    reference::div(self_, other, rounding(rounding_mode)?)
}
/// xirang-fallback: div.Scalar_mode
pub fn div_scalar_mode(self_: &Tensor, other: Scalar, rounding_mode: Option<&str>) -> Result<Tensor> {
    reference::div(self_, other, rounding(rounding_mode)?)
}
/// xirang-fallback: div_.Tensor
pub fn div_tensor_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let x = self_;
    reference::div_(x, other, None)?;
    Ok(x.clone())
}
/// xirang-fallback: div_.Scalar
pub fn div_scalar_(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::div_(x, other, None)?;
    Ok(x.clone())
}
/// xirang-fallback: div.out
pub fn div_out(self_: &Tensor, other: &Tensor, out: &mut Tensor) -> Result<Tensor> {
    let r = reference::div(self_, other, None)?;
    out_into(out, &r)
}
/// xirang-fallback: pow.Scalar
pub fn pow_scalar(self_: Scalar, exponent: &Tensor) -> Result<Tensor> {
    let base = self_;
    let e = exponent;
    // A Python-number base behaves as a wrapped zero-dim tensor.
    let b = place_like(Tensor::scalar_of(base, base.wrapped_dtype()), e)?;
    let d = crate::dtype::result_type(&[crate::dtype::Operand::Scalar(base), ops_operand(e)])
        .ok_or_else(|| Error::DType("pow: no result type".into()))?;
    reference::pow(&b.to_dtype(d)?, e)
}
fn ops_operand(t: &Tensor) -> crate::dtype::Operand {
    if t.dim() == 0 { crate::dtype::Operand::ZeroDim(t.dtype()) } else { crate::dtype::Operand::Tensor(t.dtype()) }
}

/// xirang-fallback: relu_
pub fn relu_(self_: &Tensor) -> Result<Tensor> {
    let x = self_;
    reference::assign_inplace(x, &reference::relu(x)?)?;
    Ok(x.clone())
}
/// xirang-fallback: clamp
pub fn clamp(self_: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    let lo = min;
    let hi = max;
    reference::clamp(self_, lo, hi)
}
/// xirang-fallback: masked_fill.Tensor
pub fn masked_fill_tensor(self_: &Tensor, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
    let v = value;
    if v.dim() != 0 {
        return Err(Error::InvalidArgument(format!(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
            v.dim()
        )));
    }
    reference::masked_fill(self_, mask, v.item()?)
}
/// xirang-fallback: masked_fill_.Scalar
pub fn masked_fill_scalar_(self_: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    let x = self_;
    reference::masked_fill_(x, mask, value)?;
    Ok(x.clone())
}

// ------------------------------------------------------------ index ops

/// xirang-fallback: cat
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let ts = tensors;
    let refs: Vec<&Tensor> = ts.iter().collect();
    reference::cat(&refs, dim)
}
/// xirang-fallback: tril
pub fn tril(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    reference::triangle(self_, diagonal, true)
}
/// xirang-fallback: triu
pub fn triu(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    reference::triangle(self_, diagonal, false)
}
/// xirang-fallback: gather
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, _sparse_grad: bool) -> Result<Tensor> {
    reference::gather(self_, dim, index)
}
/// xirang-fallback: scatter_add_
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let x = self_;
    reference::scatter_add_(x, dim, index, src)?;
    Ok(x.clone())
}

// ------------------------------------------------------------ matmul

/// xirang-fallback: mm.out
pub fn mm_out(self_: &Tensor, mat2: &Tensor, out: &mut Tensor) -> Result<Tensor> {
    let r = reference::mm(self_, mat2)?;
    out_into(out, &r)
}

// ------------------------------------------------------------ reductions

/// xirang-fallback: sum
pub fn sum(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reference::sum(self_, None, false, dtype)
}
/// xirang-fallback: sum.IntList_out
pub fn sum_intlist_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    out: &mut Tensor,
) -> Result<Tensor> {
    let r = reference::sum(self_, dim, keepdim, dtype)?;
    out_into(out, &r)
}
/// xirang-fallback: mean
pub fn mean(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reference::mean(self_, None, false, dtype)
}
/// xirang-fallback: prod
pub fn prod(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reference::prod(self_, None, false, dtype)
}
/// xirang-fallback: prod.dim_int
pub fn prod_dim_int(self_: &Tensor, dim: i64, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let d = dim;
    reference::prod(self_, Some(&[d]), keepdim, dtype)
}
/// xirang-fallback: amax
pub fn amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reference::amax(self_, Some(dim), keepdim)
}
/// xirang-fallback: amin
pub fn amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reference::amin(self_, Some(dim), keepdim)
}

// ------------------------------------------------------------ nn

fn half_to_float_dtype(op: &str, x: &Tensor, h: bool) -> Result<Option<DType>> {
    if !h {
        return Ok(None);
    }
    if x.dtype() != DType::F16 {
        return Err(Error::Unsupported(format!("{op}: conversion from {} to Float is not supported", x.dtype())));
    }
    Ok(Some(DType::F32))
}
/// xirang-fallback: _softmax
pub fn _softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    const OP: &str = "_softmax";
    let x = self_;
    reference::softmax(x, dim, half_to_float_dtype(OP, x, half_to_float)?)
}
/// xirang-fallback: _log_softmax
pub fn _log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    const OP: &str = "_log_softmax";
    let x = self_;
    reference::log_softmax(x, dim, half_to_float_dtype(OP, x, half_to_float)?)
}
/// xirang-fallback: _softmax_backward_data
pub fn _softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Result<Tensor> {
    let d = input_dtype;
    reference::softmax_backward(grad_output, output, dim)?.to_dtype(d)
}
/// xirang-fallback: _log_softmax_backward_data
pub fn _log_softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<Tensor> {
    let d = input_dtype;
    reference::log_softmax_backward(grad_output, output, dim)?.to_dtype(d)
}
/// xirang-fallback: native_layer_norm
pub fn native_layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_layer_norm";
    let ns = sizes(OP, normalized_shape)?;
    let (o, m, r) = reference::layer_norm(input, &ns, weight, bias, eps)?;
    Ok((o, m, r))
}
/// xirang-fallback: native_layer_norm_backward
pub fn native_layer_norm_backward(
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
    let ns = sizes(OP, normalized_shape)?;
    let mask = output_mask;
    let (gx, gw, gb) = reference::layer_norm_backward(grad_out, input, &ns, mean, rstd, weight)?;
    let want = |i: usize| mask.get(i).copied().unwrap_or(true);
    let undefined_unless = |keep: bool, t: Option<Tensor>| t.filter(|_| keep).unwrap_or_else(Tensor::undefined);
    Ok((
        undefined_unless(want(0), Some(gx)),
        undefined_unless(want(1), gw),
        undefined_unless(want(2) && bias.is_some(), gb),
    ))
}
/// xirang-fallback: embedding
pub fn embedding(
    weight: &Tensor,
    indices: &Tensor,
    _padding_idx: i64,
    _scale_grad_by_freq: bool,
    _sparse: bool,
) -> Result<Tensor> {
    reference::embedding(weight, indices)
}
/// `scale_grad_by_freq` and `sparse` only shape the backward.
///
/// xirang-fallback: _embedding_bag
pub fn _embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    _scale_grad_by_freq: bool,
    mode: i64,
    _sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let (w, idx, off) = (weight, indices, offsets);
    let (o, o2b, bag_size, max_indices) =
        reference::embedding_bag(w, idx, off, mode, per_sample_weights, include_last_offset, padding_idx)?;
    Ok((o, o2b, bag_size, max_indices))
}
/// xirang-fallback: embedding_dense_backward
pub fn embedding_dense_backward(
    grad_output: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    const OP: &str = "embedding_dense_backward";
    let n = usize::try_from(num_weights).map_err(|_| Error::InvalidArgument(format!("{OP}: negative num_weights")))?;
    let pad = padding_idx;
    reference::embedding_backward(grad_output, indices, n, (pad >= 0).then_some(pad), scale_grad_by_freq)
}

/// xirang-fallback: native_dropout
pub fn native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> Result<(Tensor, Tensor)> {
    let train = train.unwrap_or(true);
    let (x, p) = (input, p);
    let (o, m) = with_default_generator(|g| reference::dropout(x, p, train, g))?;
    Ok((o, m))
}
/// xirang-fallback: nll_loss_forward
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    const OP: &str = "nll_loss_forward";
    let r = reduction_of(OP, reduction)?;
    let (o, w) = reference::nll_loss(self_, target, weight, r, ignore_index)?;
    Ok((o, w))
}
/// xirang-fallback: nll_loss_backward
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "nll_loss_backward";
    let r = reduction_of(OP, reduction)?;
    reference::nll_loss_backward(grad_output, self_, target, weight, r, ignore_index, total_weight)
}
/// xirang-fallback: mse_loss
pub fn mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    const OP: &str = "mse_loss";
    let r = reduction_of(OP, reduction)?;
    reference::mse_loss(self_, target, r)
}
/// xirang-fallback: mse_loss_backward
pub fn mse_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    const OP: &str = "mse_loss_backward";
    let r = reduction_of(OP, reduction)?;
    reference::mse_loss_backward(grad_output, self_, target, r)
}

// ------------------------------------------------------------ views

/// xirang-fallback: t
pub fn t(self_: &Tensor) -> Result<Tensor> {
    self_.t()
}
/// xirang-fallback: transpose.int
pub fn transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    self_.transpose(dim0, dim1)
}
/// xirang-fallback: view
pub fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    self_.view(size)
}
/// `view` without the aliasing bookkeeping: a view here too.
///
/// xirang-fallback: _unsafe_view
pub fn _unsafe_view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    self_.view(size)
}
/// xirang-fallback: permute
pub fn permute(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    self_.permute(dims)
}
/// xirang-fallback: expand
pub fn expand(self_: &Tensor, size: &[i64], _implicit: bool) -> Result<Tensor> {
    self_.expand(size)
}
/// xirang-fallback: select.int
pub fn select_int(self_: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    self_.select(dim, index)
}
/// xirang-fallback: select_backward
pub fn select_backward(grad_output: &Tensor, input_sizes: &[i64], dim: i64, index: i64) -> Result<Tensor> {
    const OP: &str = "select_backward";
    let g = grad_output;
    let z = Tensor::zeros(&sizes(OP, input_sizes)?, g.dtype());
    z.select(dim, index)?.copy_(g)?;
    place_like(z, g)
}
/// xirang-fallback: scalar_tensor
pub fn scalar_tensor(
    s: Scalar,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    let d = dtype.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    place(Tensor::full(&[], s, d), device)
}
/// xirang-fallback: slice.Tensor
pub fn slice_tensor(self_: &Tensor, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
    self_.slice(dim, start, end, step)
}
/// xirang-fallback: squeeze
pub fn squeeze(self_: &Tensor) -> Result<Tensor> {
    Ok(self_.squeeze())
}
/// xirang-fallback: squeeze.dim
pub fn squeeze_dim(self_: &Tensor, dim: i64) -> Result<Tensor> {
    self_.squeeze_dim(dim)
}
/// xirang-fallback: unsqueeze
pub fn unsqueeze(self_: &Tensor, dim: i64) -> Result<Tensor> {
    self_.unsqueeze(dim)
}
/// xirang-fallback: as_strided
pub fn as_strided(self_: &Tensor, size: &[i64], stride: &[i64], storage_offset: Option<i64>) -> Result<Tensor> {
    const OP: &str = "as_strided";
    let x = self_;
    let size = sizes(OP, size)?;
    let stride = sizes(OP, stride)?;
    let off = match storage_offset {
        None => x.storage_offset(),
        Some(o) => usize::try_from(o).map_err(|_| Error::InvalidArgument(format!("{OP}: negative storage offset")))?,
    };
    x.as_strided(&size, &stride, off)
}

// ------------------------------------------------------------ copies and factories

/// xirang-fallback: clone
pub fn clone(self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
    const OP: &str = "clone";
    memory_format_ok(OP, memory_format)?;
    self_.clone_contiguous()
}
/// xirang-fallback: copy_
pub fn copy_(self_: &Tensor, src: &Tensor, _non_blocking: bool) -> Result<Tensor> {
    let x = self_;
    x.copy_(src)?;
    Ok(x.clone())
}
/// xirang-fallback: fill_.Scalar
pub fn fill_scalar_(self_: &Tensor, value: Scalar) -> Result<Tensor> {
    let x = self_;
    x.fill_(value)?;
    Ok(x.clone())
}
/// xirang-fallback: zero_
pub fn zero_(self_: &Tensor) -> Result<Tensor> {
    let x = self_;
    x.fill_(Scalar::Int(0))?;
    Ok(x.clone())
}
/// xirang-fallback: _to_copy
pub fn _to_copy(
    self_: &Tensor,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    _non_blocking: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    const OP: &str = "_to_copy";
    let x = self_;
    memory_format_ok(OP, memory_format)?;
    let d = dtype.unwrap_or(x.dtype());
    let r = x.to_dtype(d)?;
    let r = if r.shares_storage(x) { r.clone_contiguous()? } else { r };
    match device {
        None => Ok(r),
        Some(dev) if dev == x.device() => Ok(r),
        Some(dev) => place(r.to_cpu()?, Some(dev)),
    }
}
/// xirang-fallback: empty.memory_format
pub fn empty_memory_format(
    size: &[i64],
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    const OP: &str = "empty.memory_format";
    memory_format_ok(OP, memory_format)?;
    let s = sizes(OP, size)?;
    let d = dtype.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    place(Tensor::zeros(&s, d), device)
}
/// xirang-fallback: full
pub fn full(
    size: &[i64],
    fill_value: Scalar,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "full";
    let s = sizes(OP, size)?;
    let v = fill_value;
    let d = match dtype {
        Some(d) => d,
        None => match v {
            Scalar::Float(_) => crate::dtype::DEFAULT_FLOAT,
            other => other.wrapped_dtype(),
        },
    };
    place(Tensor::full(&s, v, d), device)
}
fn like(x: &Tensor, dtype: Option<DType>, device: Option<Device>, value: Scalar) -> Result<Tensor> {
    let d = dtype.unwrap_or(x.dtype());
    let t = Tensor::full(x.sizes(), value, d);
    match device {
        None => place_like(t, x),
        Some(dev) => place(t, Some(dev)),
    }
}
/// xirang-fallback: zeros_like
pub fn zeros_like(
    self_: &Tensor,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    _memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like(self_, dtype, device, Scalar::Int(0))
}
/// xirang-fallback: ones_like
pub fn ones_like(
    self_: &Tensor,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    _memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like(self_, dtype, device, Scalar::Int(1))
}
/// xirang-fallback: full_like
pub fn full_like(
    self_: &Tensor,
    fill_value: Scalar,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    _memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like(self_, dtype, device, fill_value)
}

// ------------------------------------------------------------ Core ATen (`reference::core_aten`)

fn usz(op: &str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidArgument(format!("{op}: negative value {v}")))
}
/// xirang-fallback: _local_scalar_dense
pub fn _local_scalar_dense(self_: &Tensor) -> Result<Scalar> {
    self_.item()
}
/// Both running statistics or neither.
fn running_pair<'a>(
    op: &str,
    m: Option<&'a Tensor>,
    v: Option<&'a Tensor>,
) -> Result<Option<(&'a Tensor, &'a Tensor)>> {
    match (m, v) {
        (Some(m), Some(v)) => Ok(Some((m, v))),
        (None, None) => Ok(None),
        _ => Err(Error::InvalidArgument(format!("{op}: running_mean and running_var must be given together"))),
    }
}
/// xirang-fallback: native_batch_norm
#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let running = running_pair("native_batch_norm", running_mean, running_var)?;
    reference::batch_norm(input, weight, bias, running, training, momentum, eps)
}
/// xirang-fallback: native_batch_norm_backward
#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    weight: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    save_mean: Option<&Tensor>,
    save_invstd: Option<&Tensor>,
    train: bool,
    eps: f64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_batch_norm_backward";
    let running = running_pair(OP, running_mean, running_var)?;
    let saved = match (save_mean, save_invstd) {
        (Some(m), Some(v)) => Some((m, v)),
        _ => None,
    };
    let mask = bool3(OP, output_mask)?;
    Ok(opt3(reference::batch_norm_backward(grad_out, input, weight, running, saved, train, eps, mask)?))
}
/// xirang-fallback: _native_batch_norm_legit
pub fn _native_batch_norm_legit(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let running = Some((running_mean, running_var));
    reference::batch_norm(input, weight, bias, running, training, momentum, eps)
}
/// xirang-fallback: _native_batch_norm_legit.no_stats
pub fn _native_batch_norm_legit_no_stats(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    reference::batch_norm(input, weight, bias, None, training, momentum, eps)
}
/// xirang-fallback: _native_batch_norm_legit_no_training
pub fn _native_batch_norm_legit_no_training(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let running = Some((running_mean, running_var));
    reference::batch_norm(input, weight, bias, running, false, momentum, eps)
}
/// xirang-fallback: alias
pub fn alias(self_: &Tensor) -> Result<Tensor> {
    Ok(self_.clone())
}
/// xirang-fallback: all
pub fn all(self_: &Tensor) -> Result<Tensor> {
    reference::all(self_, None, false)
}
/// xirang-fallback: all.dim
pub fn all_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    reference::all(self_, Some(&[dim]), keepdim)
}
/// xirang-fallback: any
pub fn any(self_: &Tensor) -> Result<Tensor> {
    reference::any(self_, None, false)
}
/// xirang-fallback: any.dim
pub fn any_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    reference::any(self_, Some(&[dim]), keepdim)
}
/// xirang-fallback: arange.start_step
pub fn arange_start_step(
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    let t = reference::arange(start, end, step, dtype)?;
    place(t, device)
}
/// xirang-fallback: convolution, convolution_overrideable
pub fn convolution(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    if !transposed {
        return reference::convolution(input, weight, bias, stride, padding, dilation, false, groups);
    }
    // a transposed convolution is the adjoint of the regular one from its output's space:
    // `y = conv_t(x, w)` is the input gradient of `conv(y, w)` at `dy = x`
    let shape = transposed_output(input, weight, stride, padding, dilation, output_padding, groups)?;
    let like = Tensor::zeros(&shape, input.dtype());
    let like = place_like(like, input)?;
    // An output_padding of at least the stride (allowed while below the dilation) makes the regular
    // convolution of `like` longer than `input`: its extra positions get no gradient, so `input`
    // is `dy` padded with zeros at their end.
    let sp = shape.len() - 2;
    let at = |v: &[i64], i: usize, default: i64| v.get(if v.len() == 1 { 0 } else { i }).copied().unwrap_or(default);
    let mut pad = Vec::with_capacity(2 * sp);
    for i in (0..sp).rev() {
        let (s, p, d) = (at(stride, i, 1), at(padding, i, 0), at(dilation, i, 1));
        let k = weight.sizes()[2 + i] as i64;
        let regular = (shape[2 + i] as i64 + 2 * p - d * (k - 1) - 1) / s + 1;
        pad.extend([0, (regular - input.sizes()[2 + i] as i64).max(0)]);
    }
    let padded;
    let input = if pad.iter().any(|&v| v > 0) {
        padded = reference::constant_pad_nd(input, &pad, Scalar::Int(0))?;
        &padded
    } else {
        input
    };
    let [y, _, _] = reference::convolution_backward(
        input,
        &like,
        weight,
        false,
        stride,
        padding,
        dilation,
        false,
        groups,
        [true, false, false],
    )?;
    let y = y.ok_or_else(|| Error::InvalidArgument("convolution: the transposed form computed no result".into()))?;
    match bias {
        Some(b) => {
            let mut bs = vec![1usize; shape.len()];
            bs[1] = b.numel();
            reference::add(&y, &b.reshape(&bs.iter().map(|&v| v as i64).collect::<Vec<_>>())?, Scalar::Int(1))
        }
        None => Ok(y),
    }
}
/// The output sizes of a transposed convolution: `(in - 1) * stride - 2 * padding + dilation *
/// (kernel - 1) + output_padding + 1` per spatial dimension.
fn transposed_output(
    input: &Tensor,
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    output_padding: &[i64],
    groups: i64,
) -> Result<Vec<usize>> {
    let sp = weight.dim().saturating_sub(2);
    if input.dim() != sp + 2 || sp == 0 || groups <= 0 {
        return Err(Error::Shape(format!(
            "convolution: expected a {}-d input for a {}-d weight, got input {:?}",
            weight.dim(),
            weight.dim(),
            input.sizes()
        )));
    }
    let at = |v: &[i64], i: usize, default: i64| v.get(if v.len() == 1 { 0 } else { i }).copied().unwrap_or(default);
    let mut shape = vec![input.sizes()[0], weight.sizes()[1] * groups as usize];
    for i in 0..sp {
        let (s, p, d, o) = (at(stride, i, 1), at(padding, i, 0), at(dilation, i, 1), at(output_padding, i, 0));
        let k = weight.sizes()[2 + i] as i64;
        let len = (input.sizes()[2 + i] as i64 - 1) * s - 2 * p + d * (k - 1) + o + 1;
        if len <= 0 {
            return Err(Error::Shape(format!(
                "Calculated output size is too small: input {:?}, kernel {:?}",
                input.sizes(),
                weight.sizes()
            )));
        }
        shape.push(len as usize);
    }
    Ok(shape)
}
/// xirang-fallback: copy
pub fn copy(self_: &Tensor, src: &Tensor, _non_blocking: bool) -> Result<Tensor> {
    let (x, src) = (self_, src);
    let out = x.clone_contiguous()?;
    out.copy_(src)?;
    Ok(out)
}
/// xirang-fallback: empty_strided
pub fn empty_strided(
    size: &[i64],
    stride: &[i64],
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "empty_strided";
    let (s, st) = (sizes(OP, size)?, sizes(OP, stride)?);
    let d = dtype.unwrap_or(crate::dtype::DEFAULT_FLOAT);
    let extent = crate::shape::storage_extent(&s, &st, 0);
    let base = Tensor::zeros(&[extent], d).as_strided(&s, &st, 0)?;
    place(base, device)
}
/// xirang-fallback: fill.Scalar
pub fn fill_scalar(self_: &Tensor, value: Scalar) -> Result<Tensor> {
    let x = self_;
    place_like(Tensor::full(x.sizes(), value, x.dtype()), x)
}
/// xirang-fallback: index_put
pub fn index_put(self_: &Tensor, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
    let idx = indices;
    reference::index_put(self_, idx, values, accumulate)
}
/// xirang-fallback: max.dim
pub fn max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::max_min_dim(self_, dim, keepdim, true)?;
    Ok((v, i))
}
/// xirang-fallback: min.dim
pub fn min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::max_min_dim(self_, dim, keepdim, false)?;
    Ok((v, i))
}
/// xirang-fallback: max_pool2d_with_indices
pub fn max_pool2d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::max_pool2d_with_indices(self_, kernel_size, stride, padding, dilation, ceil_mode)?;
    Ok((v, i))
}
/// xirang-fallback: max_pool3d_with_indices
pub fn max_pool3d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::max_pool3d_with_indices(self_, kernel_size, stride, padding, dilation, ceil_mode)?;
    Ok((v, i))
}
/// xirang-fallback: native_group_norm
pub fn native_group_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    N: i64,
    C: i64,
    HxW: i64,
    group: i64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_group_norm";
    let (n, c, hw, g) = (usz(OP, N)?, usz(OP, C)?, usz(OP, HxW)?, usz(OP, group)?);
    reference::group_norm(input, weight, bias, n, c, hw, g, eps)
}
/// xirang-fallback: scatter.src
pub fn scatter_src(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    reference::scatter(self_, dim, index, reference::Rhs::Tensor(src))
}
/// xirang-fallback: scatter.value
pub fn scatter_value(self_: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    reference::scatter(self_, dim, index, reference::Rhs::Scalar(value))
}
/// xirang-fallback: sort
pub fn sort(self_: &Tensor, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::sort(self_, dim, descending)?;
    Ok((v, i))
}
/// xirang-fallback: split_with_sizes
pub fn split_with_sizes(self_: &Tensor, split_sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
    let parts = reference::split_with_sizes(self_, split_sizes, dim)?;
    Ok(parts)
}
/// xirang-fallback: topk
pub fn topk(self_: &Tensor, k: i64, dim: i64, largest: bool, _sorted: bool) -> Result<(Tensor, Tensor)> {
    let (v, i) = reference::topk(self_, k, dim, largest)?;
    Ok((v, i))
}
/// xirang-fallback: var.correction
pub fn var_correction(
    self_: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let c = correction.map_or(1.0, |s| s.to_f64());
    reference::var(self_, dim, c, keepdim)
}
/// xirang-fallback: var.dim
pub fn var_dim(self_: &Tensor, dim: Option<&[i64]>, unbiased: bool, keepdim: bool) -> Result<Tensor> {
    let c = if unbiased { 1.0 } else { 0.0 };
    reference::var(self_, dim, c, keepdim)
}
/// xirang-fallback: _cdist_forward
pub fn _cdist_forward(x1: &Tensor, x2: &Tensor, p: f64, _compute_mode: Option<i64>) -> Result<Tensor> {
    reference::cdist(x1, x2, p)
}
/// xirang-fallback: avg_pool2d_backward
pub fn avg_pool2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let (k, s, p) = (kernel_size, stride, padding);
    reference::avg_pool2d_backward(grad_output, self_, k, s, p, ceil_mode, count_include_pad, divisor_override)
}
fn bool3(op: &str, b: &[bool]) -> Result<[bool; 3]> {
    match b {
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(Error::InvalidArgument(format!("{op}: output_mask must be bool[3], got {} values", b.len()))),
    }
}
/// Masked-off gradients are PyTorch's undefined tensor.
fn opt3([a, b, c]: [Option<Tensor>; 3]) -> (Tensor, Tensor, Tensor) {
    let d = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    (d(a), d(b), d(c))
}
/// xirang-fallback: convolution_backward
pub fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "convolution_backward";
    let mut mask = bool3(OP, output_mask)?;
    mask[2] &= bias_sizes.is_some();
    conv_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, mask)
}
/// xirang-fallback: convolution_backward_overrideable
pub fn convolution_backward_overrideable(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let mask = bool3("convolution_backward_overrideable", output_mask)?;
    conv_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, mask)
}
/// The gradients of a regular or transposed convolution. A transposed one by its adjoint:
/// `y = conv_t(x, w)` has `dx = conv(dy, w)` and `dw` the weight gradient of `conv(dy, w)` at
/// output gradient `x`.
#[allow(clippy::too_many_arguments)]
fn conv_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    mask: [bool; 3],
) -> Result<(Tensor, Tensor, Tensor)> {
    let (go, x, w) = (grad_output, input, weight);
    if !transposed {
        return Ok(opt3(reference::convolution_backward(
            go, x, w, mask[2], stride, padding, dilation, false, groups, mask,
        )?));
    }
    let shape = transposed_output(x, w, stride, padding, dilation, output_padding, groups)?;
    if go.sizes() != shape.as_slice() {
        return Err(Error::Shape(format!(
            "convolution_backward: grad_output {:?} for an output {shape:?}",
            go.sizes()
        )));
    }
    let gi = if mask[0] {
        Some(reference::convolution(go, w, None, stride, padding, dilation, false, groups)?)
    } else {
        None
    };
    let gw = if mask[1] {
        let [_, gw, _] = reference::convolution_backward(
            x,
            go,
            w,
            false,
            stride,
            padding,
            dilation,
            false,
            groups,
            [false, true, false],
        )?;
        gw
    } else {
        None
    };
    let gb = if mask[2] {
        let dims: Vec<i64> = (0..go.dim() as i64).filter(|&d| d != 1).collect();
        Some(reference::sum(go, Some(&dims), false, None)?)
    } else {
        None
    };
    Ok(opt3([gi, gw, gb]))
}
/// xirang-fallback: max_pool2d_with_indices_backward
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    _kernel_size: &[i64],
    _stride: &[i64],
    _padding: &[i64],
    _dilation: &[i64],
    _ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    reference::max_pool2d_with_indices_backward(grad_output, self_, indices)
}
/// xirang-fallback: native_group_norm_backward
pub fn native_group_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    N: i64,
    C: i64,
    HxW: i64,
    group: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_group_norm_backward";
    let (n, c, hw, g) = (usz(OP, N)?, usz(OP, C)?, usz(OP, HxW)?, usz(OP, group)?);
    let (go, x, m, r) = (grad_out, input, mean, rstd);
    Ok(opt3(reference::group_norm_backward(go, x, m, r, weight, n, c, hw, g, bool3(OP, output_mask)?)?))
}
/// `rand` / `randn` from the default generator (`manual_seed`): uniform in [0, 1) or standard
/// normal (Box-Muller), computed in f64 and rounded to the dtype.
fn random(op: &str, size: &[i64], dtype: Option<DType>, device: Option<Device>, normal: bool) -> Result<Tensor> {
    let s = sizes(op, size)?;
    let d = dtype.unwrap_or(crate::dtype::DEFAULT_FLOAT);
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
    place(Tensor::from_f64(&v, &s, d)?, device)
}
/// xirang-fallback: rand
pub fn rand(
    size: &[i64],
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    random("rand", size, dtype, device, false)
}
/// xirang-fallback: randn
pub fn randn(
    size: &[i64],
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    random("randn", size, dtype, device, true)
}
/// xirang-fallback: randperm
pub fn randperm(
    n: i64,
    dtype: Option<DType>,
    _layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "randperm";
    let n = usz(OP, n)?;
    let d = dtype.unwrap_or(DType::I64);
    // Fisher-Yates from the default generator
    let mut p: Vec<i64> = (0..n as i64).collect();
    with_default_generator(|g| {
        for i in (1..n).rev() {
            let j = (g.next_u64() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
    });
    place(Tensor::from_i64(&p, &[n], d)?, device)
}
/// xirang-fallback: reflection_pad1d
pub fn reflection_pad1d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    reference::pad_nd(self_, padding, reference::PadMode::Reflect)
}
/// xirang-fallback: reflection_pad2d
pub fn reflection_pad2d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    reference::pad_nd(self_, padding, reference::PadMode::Reflect)
}
/// xirang-fallback: reflection_pad3d
pub fn reflection_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    reference::pad_nd(self_, padding, reference::PadMode::Reflect)
}
/// xirang-fallback: replication_pad2d
pub fn replication_pad2d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    reference::pad_nd(self_, padding, reference::PadMode::Replicate)
}
/// xirang-fallback: replication_pad3d
pub fn replication_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    reference::pad_nd(self_, padding, reference::PadMode::Replicate)
}
/// `sym_is_contiguous(Tensor self, MemoryFormat memory_format=contiguous_format) -> SymBool` (new
/// in PyTorch 2.15, Core ATen): the runtime's tensors have one memory format, row-major.
///
/// xirang-fallback: sym_is_contiguous
pub fn sym_is_contiguous(self_: &Tensor, memory_format: MemoryFormat) -> Result<bool> {
    const OP: &str = "sym_is_contiguous";
    match memory_format {
        MemoryFormat::Contiguous => Ok(self_.is_contiguous()),
        MemoryFormat::Preserve => {
            Err(Error::InvalidArgument(format!("{OP}: preserve_format is not a memory format to test")))
        }
        other => Err(Error::Unsupported(format!("{OP}: memory format {other:?} (the runtime is row-major only)"))),
    }
}
/// xirang-fallback: sym_numel
pub fn sym_numel(self_: &Tensor) -> Result<i64> {
    Ok(self_.numel() as i64)
}
/// xirang-fallback: sym_size.int
pub fn sym_size_int(self_: &Tensor, dim: i64) -> Result<i64> {
    Ok(self_.size(dim)? as i64)
}
/// xirang-fallback: sym_storage_offset
pub fn sym_storage_offset(self_: &Tensor) -> Result<i64> {
    Ok(self_.storage_offset() as i64)
}
/// xirang-fallback: sym_stride.int
pub fn sym_stride_int(self_: &Tensor, dim: i64) -> Result<i64> {
    let x = self_;
    let d = crate::shape::wrap_dim(dim, x.dim())?;
    Ok(x.strides().get(d).copied().unwrap_or(1) as i64)
}
/// xirang-fallback: upsample_nearest2d.vec
pub fn upsample_nearest2d_vec(
    input: &Tensor,
    output_size: Option<&[i64]>,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let scales = scale_factors;
    reference::upsample_nearest2d(input, output_size, scales)
}
/// xirang-fallback: col2im
pub fn col2im(
    self_: &Tensor,
    output_size: &[i64],
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    let (size, kernel, dilation) = (output_size, kernel_size, dilation);
    reference::col2im(self_, size, kernel, dilation, padding, stride)
}
/// xirang-fallback: upsample_bilinear2d.vec
pub fn upsample_bilinear2d_vec(
    input: &Tensor,
    output_size: Option<&[i64]>,
    align_corners: bool,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let scales = scale_factors;
    reference::upsample_bilinear2d(input, output_size, align_corners, scales)
}

// The fused recurrent cells: PyTorch has no CPU kernel for them, so this tier is what serves
// them for operands the device kernels decline (mixed dtypes, host tensors).
/// Runs `f` on the f64 values of `inputs` copied to the host (absent or undefined ones `None`),
/// its results placed on the inputs' device.
fn rnn_cell<const N: usize>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    f: impl FnOnce(&[Option<Vec<f64>>]) -> Result<[Tensor; N]>,
) -> Result<[Tensor; N]> {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.filter(|t| !t.is_undefined())).collect();
    let present: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    reference::on_host(name, &present, |h| {
        let mut h = h.iter();
        let vals = inputs
            .iter()
            .map(|t| t.map(|_| h.next().map(Tensor::to_f64_vec).transpose()).transpose().map(Option::flatten))
            .collect::<Result<Vec<_>>>()?;
        f(&vals)
    })
}

fn v(x: &Option<Vec<f64>>) -> &[f64] {
    x.as_deref().unwrap_or(&[])
}

/// xirang-fallback: _thnn_fused_lstm_cell
pub fn _thnn_fused_lstm_cell(
    input_gates: &Tensor,
    hidden_gates: &Tensor,
    cx: &Tensor,
    input_bias: Option<&Tensor>,
    hidden_bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_lstm_cell";
    let (b, h) = reference::rnn::cell_dims(
        name,
        4,
        input_gates.sizes(),
        hidden_gates.sizes(),
        cx.sizes(),
        &[input_bias.map(Tensor::sizes), hidden_bias.map(Tensor::sizes)],
    )?;
    let d = input_gates.dtype();
    reference::require_float(name, d)?;
    let [hy, cy, ws] =
        rnn_cell(name, &[Some(input_gates), Some(hidden_gates), Some(cx), input_bias, hidden_bias], |x| {
            let (hy, cy, ws) =
                reference::rnn::lstm_cell(b, h, v(&x[0]), v(&x[1]), v(&x[2]), x[3].as_deref(), x[4].as_deref());
            Ok([
                Tensor::from_f64(&hy, &[b, h], d)?,
                Tensor::from_f64(&cy, &[b, h], d)?,
                Tensor::from_f64(&ws, &[b, 4 * h], d)?,
            ])
        })?;
    Ok((hy, cy, ws))
}

/// xirang-fallback: _thnn_fused_lstm_cell_backward_impl
pub fn _thnn_fused_lstm_cell_backward_impl(
    grad_hy: Option<&Tensor>,
    grad_cy: Option<&Tensor>,
    cx: &Tensor,
    cy: &Tensor,
    workspace: &Tensor,
    has_bias: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_lstm_cell_backward_impl";
    let (ghy, gcy) = (grad_hy.filter(|t| !t.is_undefined()), grad_cy.filter(|t| !t.is_undefined()));
    if ghy.is_none() && gcy.is_none() {
        return Ok((Tensor::undefined(), Tensor::undefined(), Tensor::undefined()));
    }
    let (b, h) = reference::rnn::cell_dims(name, 4, workspace.sizes(), workspace.sizes(), cx.sizes(), &[])?;
    let d = workspace.dtype();
    let [gg, gcx, gb] = rnn_cell(name, &[ghy, gcy, Some(cx), Some(cy), Some(workspace)], |x| {
        let (gg, gcx) =
            reference::rnn::lstm_cell_backward(b, h, x[0].as_deref(), x[1].as_deref(), v(&x[2]), v(&x[3]), v(&x[4]));
        let gb = reference::rnn::column_sums(&gg, 4 * h);
        Ok([
            Tensor::from_f64(&gg, &[b, 4 * h], d)?,
            Tensor::from_f64(&gcx, &[b, h], d)?,
            Tensor::from_f64(&gb, &[4 * h], d)?,
        ])
    })?;
    Ok((gg, gcx, if has_bias { gb } else { Tensor::undefined() }))
}

/// xirang-fallback: _thnn_fused_gru_cell
pub fn _thnn_fused_gru_cell(
    input_gates: &Tensor,
    hidden_gates: &Tensor,
    hx: &Tensor,
    input_bias: Option<&Tensor>,
    hidden_bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let name = "_thnn_fused_gru_cell";
    let (b, h) = reference::rnn::cell_dims(
        name,
        3,
        input_gates.sizes(),
        hidden_gates.sizes(),
        hx.sizes(),
        &[input_bias.map(Tensor::sizes), hidden_bias.map(Tensor::sizes)],
    )?;
    let d = input_gates.dtype();
    reference::require_float(name, d)?;
    let [hy, ws] = rnn_cell(name, &[Some(input_gates), Some(hidden_gates), Some(hx), input_bias, hidden_bias], |x| {
        let (hy, ws) = reference::rnn::gru_cell(b, h, v(&x[0]), v(&x[1]), v(&x[2]), x[3].as_deref(), x[4].as_deref());
        Ok([Tensor::from_f64(&hy, &[b, h], d)?, Tensor::from_f64(&ws, &[b, 5 * h], d)?])
    })?;
    Ok((hy, ws))
}

/// xirang-fallback: _thnn_fused_gru_cell_backward
pub fn _thnn_fused_gru_cell_backward(
    grad_hy: &Tensor,
    workspace: &Tensor,
    has_bias: bool,
) -> Result<(Tensor, Tensor, Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_gru_cell_backward";
    let s = workspace.sizes();
    if s.len() != 2 || !s[1].is_multiple_of(5) || grad_hy.sizes() != [s[0], s[1] / 5] {
        return Err(Error::Shape(format!(
            "{name}: a workspace of shape {s:?} for a gradient of shape {:?}",
            grad_hy.sizes()
        )));
    }
    let (b, h) = (s[0], s[1] / 5);
    let d = workspace.dtype();
    let [gi, gh, ghx, gib, ghb] = rnn_cell(name, &[Some(grad_hy), Some(workspace)], |x| {
        let (gi, gh, ghx) = reference::rnn::gru_cell_backward(b, h, v(&x[0]), v(&x[1]));
        let (gib, ghb) = (reference::rnn::column_sums(&gi, 3 * h), reference::rnn::column_sums(&gh, 3 * h));
        Ok([
            Tensor::from_f64(&gi, &[b, 3 * h], d)?,
            Tensor::from_f64(&gh, &[b, 3 * h], d)?,
            Tensor::from_f64(&ghx, &[b, h], d)?,
            Tensor::from_f64(&gib, &[3 * h], d)?,
            Tensor::from_f64(&ghb, &[3 * h], d)?,
        ])
    })?;
    if has_bias { Ok((gi, gh, ghx, gib, ghb)) } else { Ok((gi, gh, ghx, Tensor::undefined(), Tensor::undefined())) }
}

// Accelerator-only operators (PyTorch has CUDA/XPU kernels and no CPU kernel): the host tier is
// what serves them for the CPU fallback's part. The bridge registers them (coverage:
// `device_only`).

fn depthwise(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Tensor> {
    let groups = *x.sizes().get(1).ok_or_else(|| Error::Shape("depthwise convolution of a 0-d input".into()))?;
    reference::convolution(x, weight, bias, stride, padding, dilation, false, groups as i64)
}

/// xirang-fallback: _conv_depthwise2d
pub fn _conv_depthwise2d(
    self_: &Tensor,
    weight: &Tensor,
    _kernel_size: &[i64],
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Tensor> {
    depthwise(self_, weight, bias, stride, padding, dilation)
}

/// xirang-fallback: conv_depthwise3d
pub fn conv_depthwise3d(
    self_: &Tensor,
    weight: &Tensor,
    _kernel_size: &[i64],
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Tensor> {
    depthwise(self_, weight, bias, stride, padding, dilation)
}

/// `out_dtype` matmuls: the product of the operands cast to `out_dtype` (PyTorch accepts the
/// inputs' dtype or float32 for float16/bfloat16 inputs).
fn out_dtype_check(name: &str, a: &Tensor, out_dtype: DType) -> Result<()> {
    let d = a.dtype();
    if out_dtype == d || (out_dtype == DType::F32 && matches!(d, DType::F16 | DType::BF16)) {
        Ok(())
    } else {
        Err(Error::DType(format!("{name}: out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs")))
    }
}

/// xirang-fallback: mm.dtype
pub fn mm_dtype(self_: &Tensor, mat2: &Tensor, out_dtype: DType) -> Result<Tensor> {
    out_dtype_check("mm.dtype", self_, out_dtype)?;
    reference::mm(&self_.to_dtype(out_dtype)?, &mat2.to_dtype(out_dtype)?)
}

/// xirang-fallback: bmm.dtype
pub fn bmm_dtype(self_: &Tensor, mat2: &Tensor, out_dtype: DType) -> Result<Tensor> {
    out_dtype_check("bmm.dtype", self_, out_dtype)?;
    reference::bmm(&self_.to_dtype(out_dtype)?, &mat2.to_dtype(out_dtype)?)
}

/// xirang-fallback: addmm.dtype
pub fn addmm_dtype(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    out_dtype: DType,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    out_dtype_check("addmm.dtype", mat1, out_dtype)?;
    let c = |t: &Tensor| t.to_dtype(out_dtype);
    reference::addmm(&c(self_)?, &c(mat1)?, &c(mat2)?, beta, alpha)
}

/// xirang-fallback: baddbmm.dtype
pub fn baddbmm_dtype(
    self_: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    out_dtype: DType,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    out_dtype_check("baddbmm.dtype", batch1, out_dtype)?;
    let c = |t: &Tensor| t.to_dtype(out_dtype);
    reference::baddbmm(&c(self_)?, &c(batch1)?, &c(batch2)?, beta, alpha)
}

/// xirang-fallback: _masked_scale
pub fn _masked_scale(self_: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    let kept = reference::mul(self_, &mask.to_dtype(self_.dtype())?)?;
    reference::mul(&kept, Scalar::Float(scale))
}

/// xirang-fallback: _fused_rms_norm_backward
pub fn _fused_rms_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    rstd: &Tensor,
    weight: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let name = "_fused_rms_norm_backward";
    let k = normalized_shape.len();
    let sizes = input.sizes().to_vec();
    if k > sizes.len() || sizes[sizes.len() - k..].iter().zip(normalized_shape).any(|(a, b)| *a as i64 != *b) {
        return Err(Error::Shape(format!("{name}: normalized shape {normalized_shape:?} does not end {sizes:?}")));
    }
    let n: usize = sizes[sizes.len() - k..].iter().product();
    let m = input.numel().checked_div(n).unwrap_or(0);
    if rstd.numel() != m || grad_out.sizes() != sizes.as_slice() || weight.is_some_and(|w| w.numel() != n) {
        return Err(Error::Shape(format!("{name}: rstd, grad_out or weight do not match an input of shape {sizes:?}")));
    }
    let d = input.dtype();
    let mask = |i: usize| output_mask.get(i).copied().unwrap_or(false);
    let mut ins = vec![grad_out, input, rstd];
    ins.extend(weight);
    let [gi, gw] = reference::on_host(name, &ins, |h| {
        let (g, x, r) = (h[0].to_f64_vec()?, h[1].to_f64_vec()?, h[2].to_f64_vec()?);
        let w = h.get(3).map(Tensor::to_f64_vec).transpose()?;
        let wv = |j: usize| w.as_ref().map_or(1.0, |w| w[j]);
        let (mut gi, mut gw) = (vec![0.0; m * n], vec![0.0; n]);
        for (row, &rs) in r.iter().enumerate().take(m) {
            let at = |j: usize| row * n + j;
            let dot: f64 = (0..n).map(|j| g[at(j)] * wv(j) * x[at(j)]).sum::<f64>() / n as f64;
            for j in 0..n {
                gi[at(j)] = rs * (g[at(j)] * wv(j) - x[at(j)] * rs * rs * dot);
                gw[j] += g[at(j)] * x[at(j)] * rs;
            }
        }
        let wshape: Vec<usize> = sizes[sizes.len() - k..].to_vec();
        Ok([Tensor::from_f64(&gi, &sizes, d)?, Tensor::from_f64(&gw, &wshape, weight.map_or(d, Tensor::dtype))?])
    })?;
    let gw = if mask(1) && weight.is_some() { gw } else { Tensor::undefined() };
    Ok((if mask(0) { gi } else { Tensor::undefined() }, gw))
}
