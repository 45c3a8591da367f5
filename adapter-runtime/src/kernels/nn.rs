//! Neural-network kernels: softmax / log_softmax and their backward, layer
//! norm and its backward, embedding dense backward, nll_loss and mse_loss
//! forward and backward. Row statistics accumulate in f64 and round once.

use std::borrow::Cow;

use rayon::prelude::*;

use super::{PAR_MIN, Real, device_of, launch, unsupported, with_real};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape;
use crate::tensor::Tensor;

/// `t` with `dim` moved last, contiguous on the device: (rows, row length, moved view shape).
fn rows_of(t: &Tensor, dim: usize) -> Result<Tensor> {
    let last = t.dim().saturating_sub(1) as i64;
    if t.dim() == 0 {
        return Ok(t.clone());
    }
    Ok(super::contiguous(&t.transpose(dim as i64, last)?)?.into_owned())
}

/// Undoes [`rows_of`]'s transpose on a result laid out like the rows, into a contiguous tensor:
/// PyTorch's softmax returns one, and kernels that run on it require it (`nll_loss2d_backward`'s
/// CPU kernel refused the transposed view of `log_softmax(x, 1)` that a 4-d cross entropy made).
fn unrows(t: Tensor, dim: usize) -> Result<Tensor> {
    if t.dim() == 0 || dim + 1 == t.dim() {
        return Ok(t);
    }
    Ok(super::contiguous(&t.transpose(dim as i64, t.dim() as i64 - 1)?)?.into_owned())
}

fn row_len(t: &Tensor, dim: usize) -> usize {
    if t.dim() == 0 { 1 } else { t.sizes()[dim] }
}

fn softmax_fwd(name: &str, x: &Tensor, dim: i64, half_to_float: bool, log: bool) -> Result<Tensor> {
    let ctx = device_of(name, &[x])?;
    if half_to_float {
        return unsupported(name, "half_to_float takes the fallback");
    }
    let d = x.dtype();
    let dd = shape::wrap_dim(dim, x.dim().max(1))?;
    let r = rows_of(x, dd)?;
    let out = Tensor::empty_on(&ctx, r.sizes(), d)?;
    let n = r.numel();
    let len = row_len(x, dd);
    if n == 0 {
        return unrows(out, dd);
    }
    let (pr, po) = (r.data_ptr()?, out.data_ptr()?);
    with_real!(name, d, T => launch(&ctx, [&r, &out], move |mem| {
        let mut v = T::load(mem, pr, n, d)?;
        let body = |row: &mut [T]| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, x| m.max(x.to_f64()));
            let s: f64 = row.iter().map(|x| (x.to_f64() - m).exp()).sum();
            for x in row.iter_mut() {
                let y = x.to_f64() - m;
                *x = T::from_f64(if log { y - s.ln() } else { y.exp() / s });
            }
        };
        if n >= PAR_MIN { v.par_chunks_mut(len).for_each(body) } else { v.chunks_mut(len).for_each(body) }
        T::store(mem, po, &v, d)
    }))?;
    unrows(out, dd)
}

/// `_softmax(self, dim, half_to_float)`.
/// xirang-kernel: _softmax
pub fn softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    softmax_fwd("_softmax", self_, dim, half_to_float, false)
}

/// `_log_softmax(self, dim, half_to_float)`.
/// xirang-kernel: _log_softmax
pub fn log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    softmax_fwd("_log_softmax", self_, dim, half_to_float, true)
}

fn softmax_bwd(name: &str, g: &Tensor, y: &Tensor, dim: i64, input_dtype: DType, log: bool) -> Result<Tensor> {
    let ctx = device_of(name, &[g, y])?;
    let d = g.dtype();
    if y.dtype() != d || input_dtype != d || g.sizes() != y.sizes() {
        return unsupported(name, "mixed dtypes or shapes take the fallback");
    }
    let dd = shape::wrap_dim(dim, g.dim().max(1))?;
    let (gr, yr) = (rows_of(g, dd)?, rows_of(y, dd)?);
    let out = Tensor::empty_on(&ctx, gr.sizes(), d)?;
    let n = gr.numel();
    let len = row_len(g, dd);
    if n == 0 {
        return unrows(out, dd);
    }
    let (pg, py, po) = (gr.data_ptr()?, yr.data_ptr()?, out.data_ptr()?);
    with_real!(name, d, T => launch(&ctx, [&gr, &yr, &out], move |mem| {
        let gv = T::load(mem, pg, n, d)?;
        let yv = T::load(mem, py, n, d)?;
        let mut o = vec![T::ZERO; n];
        let body = |(i, orow): (usize, &mut [T])| {
            let (gs, ys) = (&gv[i * len..(i + 1) * len], &yv[i * len..(i + 1) * len]);
            if log {
                let s: f64 = gs.iter().map(|x| x.to_f64()).sum();
                for j in 0..len {
                    orow[j] = T::from_f64(gs[j].to_f64() - ys[j].to_f64().exp() * s);
                }
            } else {
                let s: f64 = gs.iter().zip(ys).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
                for j in 0..len {
                    orow[j] = T::from_f64(ys[j].to_f64() * (gs[j].to_f64() - s));
                }
            }
        };
        if n >= PAR_MIN { o.par_chunks_mut(len).enumerate().for_each(body) } else { o.chunks_mut(len).enumerate().for_each(body) }
        T::store(mem, po, &o, d)
    }))?;
    unrows(out, dd)
}

/// `_softmax_backward_data(grad_output, output, dim, input_dtype)`.
/// xirang-kernel: _softmax_backward_data
pub fn softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Result<Tensor> {
    softmax_bwd("_softmax_backward_data", grad_output, output, dim, input_dtype, false)
}

/// `_log_softmax_backward_data(grad_output, output, dim, input_dtype)`.
/// xirang-kernel: _log_softmax_backward_data
pub fn log_softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<Tensor> {
    softmax_bwd("_log_softmax_backward_data", grad_output, output, dim, input_dtype, true)
}

/// (rows, row length, stat shape) of a layer norm over the trailing `normalized_shape`.
fn ln_split(x: &Tensor, normalized_shape: &[i64]) -> Result<(usize, usize, Vec<usize>)> {
    let (nd, k) = (x.dim(), normalized_shape.len());
    let ok = k > 0
        && k <= nd
        && x.sizes()[nd - k..].iter().zip(normalized_shape).all(|(a, b)| i64::try_from(*a).is_ok_and(|a| a == *b));
    if !ok {
        return Err(Error::Shape(format!(
            "Given normalized_shape={normalized_shape:?}, expected input with shape [*, {normalized_shape:?}], but got input of size {:?}",
            x.sizes()
        )));
    }
    let n: usize = x.sizes()[nd - k..].iter().product();
    let m: usize = x.sizes()[..nd - k].iter().product();
    let mut stat = x.sizes()[..nd - k].to_vec();
    stat.extend(std::iter::repeat_n(1, k));
    Ok((m, n, stat))
}

/// `native_layer_norm(input, normalized_shape, weight, bias, eps)` -> `(out, mean, rstd)`.
/// xirang-kernel: native_layer_norm
pub fn native_layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let mut all = vec![input];
    all.extend(weight);
    all.extend(bias);
    let ctx = device_of("native_layer_norm", &all)?;
    let d = input.dtype();
    if all.iter().any(|t| t.dtype() != d) {
        return unsupported("native_layer_norm", "mixed dtypes take the fallback");
    }
    let (m, n, stat) = ln_split(input, normalized_shape)?;
    for p in weight.iter().chain(bias.iter()) {
        if p.numel() != n {
            return Err(Error::Shape(format!("native_layer_norm: weight/bias of shape {:?} do not match", p.sizes())));
        }
    }
    let x = super::contiguous(input)?;
    let w = weight.map(super::contiguous).transpose()?;
    let b = bias.map(super::contiguous).transpose()?;
    let out = Tensor::empty_on(&ctx, x.sizes(), d)?;
    let mean = Tensor::empty_on(&ctx, &stat, d)?;
    let rstd = Tensor::empty_on(&ctx, &stat, d)?;
    if m * n == 0 {
        if m > 0 {
            // rows of zero length: mean 0? PyTorch gives NaN statistics; leave to the fallback.
            return unsupported("native_layer_norm", "empty normalized rows");
        }
        return Ok((out, mean, rstd));
    }
    let (px, po, pm, pr) = (x.data_ptr()?, out.data_ptr()?, mean.data_ptr()?, rstd.data_ptr()?);
    let pw = w.as_ref().map(|t| t.data_ptr()).transpose()?;
    let pb = b.as_ref().map(|t| t.data_ptr()).transpose()?;
    let mut keep = vec![x.into_owned(), out.clone(), mean.clone(), rstd.clone()];
    keep.extend(w.map(Cow::into_owned));
    keep.extend(b.map(Cow::into_owned));
    with_real!("native_layer_norm", d, T => launch(&ctx, keep, move |mem| {
        let xv = T::load(mem, px, m * n, d)?;
        let wv = pw.map(|p| T::load(mem, p, n, d)).transpose()?;
        let bv = pb.map(|p| T::load(mem, p, n, d)).transpose()?;
        let mut o = vec![T::ZERO; m * n];
        let mut stats = vec![(0.0f64, 0.0f64); m];
        type Row<'r, T> = ((&'r mut [T], &'r mut (f64, f64)), &'r [T]);
        let body = |((orow, st), xr): Row<'_, T>| {
            let mu = xr.iter().map(|v| v.to_f64()).sum::<f64>() / n as f64;
            let var = xr.iter().map(|v| (v.to_f64() - mu).powi(2)).sum::<f64>() / n as f64;
            let rs = 1.0 / (var + eps).sqrt();
            for j in 0..n {
                let mut y = (xr[j].to_f64() - mu) * rs;
                if let Some(w) = &wv {
                    y *= w[j].to_f64();
                }
                if let Some(b) = &bv {
                    y += b[j].to_f64();
                }
                orow[j] = T::from_f64(y);
            }
            *st = (mu, rs);
        };
        if m * n >= PAR_MIN {
            o.par_chunks_mut(n).zip(stats.par_iter_mut()).zip(xv.par_chunks(n)).for_each(body);
        } else {
            o.chunks_mut(n).zip(stats.iter_mut()).zip(xv.chunks(n)).for_each(body);
        }
        T::store(mem, po, &o, d)?;
        T::store(mem, pm, &stats.iter().map(|s| T::from_f64(s.0)).collect::<Vec<_>>(), d)?;
        T::store(mem, pr, &stats.iter().map(|s| T::from_f64(s.1)).collect::<Vec<_>>(), d)
    }))?;
    Ok((out, mean, rstd))
}

/// `native_layer_norm_backward`: the three gradients; an unrequested one (`output_mask`), or the
/// gradient of a missing weight or bias, is an undefined tensor, as in PyTorch.
/// xirang-kernel: native_layer_norm_backward
#[allow(clippy::too_many_arguments)]
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
    let (a, b, c) =
        layer_norm_backward_masked(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)?;
    let def = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    Ok((def(a), def(b), def(c)))
}

/// `native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)`
/// -> `(grad_input, grad_weight, grad_bias)`; unrequested or undefined gradients are `None`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward_masked(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let mut all = vec![grad_out, input, mean, rstd];
    all.extend(weight);
    let ctx = device_of("native_layer_norm_backward", &all)?;
    let d = input.dtype();
    if all.iter().any(|t| t.dtype() != d) || grad_out.sizes() != input.sizes() {
        return unsupported("native_layer_norm_backward", "mixed dtypes or shapes take the fallback");
    }
    let (m, n, _) = ln_split(input, normalized_shape)?;
    if mean.numel() != m || rstd.numel() != m || weight.is_some_and(|w| w.numel() != n) {
        return Err(Error::Shape("native_layer_norm_backward: inconsistent shapes".into()));
    }
    let want = |i: usize| output_mask.get(i).copied().unwrap_or(true);
    let w_shape: Vec<usize> = input.sizes()[input.dim() - normalized_shape.len()..].to_vec();
    let gx = Tensor::empty_on(&ctx, input.sizes(), d)?;
    let gw = Tensor::empty_on(&ctx, &w_shape, d)?;
    let gb = Tensor::empty_on(&ctx, &w_shape, d)?;
    let result = |gx: &Tensor, gw: &Tensor, gb: &Tensor| {
        (
            want(0).then(|| gx.clone()),
            (want(1) && weight.is_some()).then(|| gw.clone()),
            (want(2) && bias.is_some()).then(|| gb.clone()),
        )
    };
    if m * n == 0 {
        if n > 0 {
            let z = |t: &Tensor| t.fill_(crate::dtype::Scalar::Int(0));
            z(&gw)?;
            z(&gb)?;
            return Ok(result(&gx, &gw, &gb));
        }
        return unsupported("native_layer_norm_backward", "empty normalized rows");
    }
    let (g, x, mu, rs) =
        (super::contiguous(grad_out)?, super::contiguous(input)?, super::contiguous(mean)?, super::contiguous(rstd)?);
    let w = weight.map(super::contiguous).transpose()?;
    let (pg, px, pmu, prs) = (g.data_ptr()?, x.data_ptr()?, mu.data_ptr()?, rs.data_ptr()?);
    let pw = w.as_ref().map(|t| t.data_ptr()).transpose()?;
    let (pgx, pgw, pgb) = (gx.data_ptr()?, gw.data_ptr()?, gb.data_ptr()?);
    let mut keep =
        vec![g.into_owned(), x.into_owned(), mu.into_owned(), rs.into_owned(), gx.clone(), gw.clone(), gb.clone()];
    keep.extend(w.map(Cow::into_owned));
    with_real!("native_layer_norm_backward", d, T => launch(&ctx, keep, move |mem| {
        let dy = T::load(mem, pg, m * n, d)?;
        let xv = T::load(mem, px, m * n, d)?;
        let muv = T::load(mem, pmu, m, d)?;
        let rsv = T::load(mem, prs, m, d)?;
        let wv: Vec<f64> = match pw {
            Some(p) => T::load(mem, p, n, d)?.iter().map(|v| v.to_f64()).collect(),
            None => vec![1.0; n],
        };
        let mut dx = vec![T::ZERO; m * n];
        let (mut dw, mut db) = (vec![0.0f64; n], vec![0.0f64; n]);
        for i in 0..m {
            let (mu, rs) = (muv[i].to_f64(), rsv[i].to_f64());
            let (mut sg, mut sgx) = (0.0, 0.0);
            for j in 0..n {
                let k = i * n + j;
                let xh = (xv[k].to_f64() - mu) * rs;
                let gy = dy[k].to_f64();
                let gw_ = gy * wv[j];
                sg += gw_;
                sgx += gw_ * xh;
                dw[j] += gy * xh;
                db[j] += gy;
            }
            for (j, w) in wv.iter().enumerate() {
                let k = i * n + j;
                let xh = (xv[k].to_f64() - mu) * rs;
                let gw_ = dy[k].to_f64() * w;
                dx[k] = T::from_f64(rs * (gw_ - sg / n as f64 - xh * sgx / n as f64));
            }
        }
        T::store(mem, pgx, &dx, d)?;
        T::store(mem, pgw, &dw.iter().map(|v| T::from_f64(*v)).collect::<Vec<_>>(), d)?;
        T::store(mem, pgb, &db.iter().map(|v| T::from_f64(*v)).collect::<Vec<_>>(), d)
    }))?;
    Ok(result(&gx, &gw, &gb))
}

/// `embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)`.
/// xirang-kernel: embedding_dense_backward
pub fn embedding_dense_backward(
    grad_output: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let ctx = device_of("embedding_dense_backward", &[grad_output, indices])?;
    if scale_grad_by_freq {
        return unsupported("embedding_dense_backward", "scale_grad_by_freq takes the fallback");
    }
    let d = grad_output.dtype();
    let nw = usize::try_from(num_weights)
        .map_err(|_| Error::InvalidArgument(format!("embedding_dense_backward: num_weights {num_weights}")))?;
    let dm = grad_output.sizes().last().copied().unwrap_or(0);
    let k = indices.numel();
    if grad_output.numel() != k * dm {
        return Err(Error::Shape("embedding_dense_backward: grad_output does not match indices".into()));
    }
    let idx = indices.to_i64_vec()?;
    if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= nw) {
        return Err(Error::Index(format!("embedding_dense_backward: index {bad} out of range for {nw} rows")));
    }
    let out = Tensor::empty_on(&ctx, &[nw, dm], d)?;
    if nw * dm == 0 {
        return Ok(out);
    }
    let g = super::contiguous(grad_output)?;
    let pg = if k * dm > 0 { g.data_ptr()? } else { 0 };
    let po = out.data_ptr()?;
    with_real!("embedding_dense_backward", d, T => launch(&ctx, [&*g, &out], move |mem| {
        let gv = T::load(mem, pg, k * dm, d)?;
        let mut acc = vec![0.0f64; nw * dm];
        for (r, &i) in idx.iter().enumerate() {
            if i == padding_idx {
                continue;
            }
            let dst = &mut acc[i as usize * dm..(i as usize + 1) * dm];
            for (a, gvv) in dst.iter_mut().zip(&gv[r * dm..(r + 1) * dm]) {
                *a += gvv.to_f64();
            }
        }
        T::store(mem, po, &acc.iter().map(|v| T::from_f64(*v)).collect::<Vec<_>>(), d)
    }))?;
    Ok(out)
}

fn nll_shape(name: &str, input: &Tensor, target: &Tensor) -> Result<(usize, usize)> {
    match (input.sizes(), target.sizes()) {
        (&[n, c], &[t]) if t == n => Ok((n, c)),
        (&[c], &[]) => Ok((1, c)),
        _ => unsupported(name, "only [N, C] inputs with [N] targets (or [C] with a scalar) run natively"),
    }
}

/// `nll_loss_forward(self, target, weight, reduction, ignore_index)` -> `(output, total_weight)`.
/// xirang-kernel: nll_loss_forward
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    let mut all = vec![self_, target];
    all.extend(weight);
    let ctx = device_of("nll_loss_forward", &all)?;
    let d = self_.dtype();
    let (n, c) = nll_shape("nll_loss_forward", self_, target)?;
    if target.dtype() != DType::I64
        || weight.is_some_and(|w| w.dtype() != d || w.numel() != c)
        || !(0..=2).contains(&reduction)
    {
        return unsupported("nll_loss_forward", "argument checks are the fallback's");
    }
    let tv = target.to_i64_vec()?;
    if let Some(bad) = tv.iter().find(|&&t| t != ignore_index && (t < 0 || t as usize >= c)) {
        return Err(Error::Index(format!("Target {bad} is out of bounds.")));
    }
    let out_shape: Vec<usize> = if reduction == 0 { target.sizes().to_vec() } else { vec![] };
    let out = Tensor::empty_on(&ctx, &out_shape, d)?;
    let tw = Tensor::empty_on(&ctx, &[], d)?;
    let x = super::contiguous(self_)?;
    let w = weight.map(super::contiguous).transpose()?;
    let px = if x.numel() > 0 { x.data_ptr()? } else { 0 };
    let pw = w.as_ref().map(|t| t.data_ptr()).transpose()?;
    let (po, ptw) = (if out.numel() > 0 { out.data_ptr()? } else { 0 }, tw.data_ptr()?);
    let mut keep = vec![x.into_owned(), out.clone(), tw.clone()];
    keep.extend(w.map(Cow::into_owned));
    with_real!("nll_loss_forward", d, T => launch(&ctx, keep, move |mem| {
        let xv = T::load(mem, px, n * c, d)?;
        let wv: Vec<f64> = match pw {
            Some(p) => T::load(mem, p, c, d)?.iter().map(|v| v.to_f64()).collect(),
            None => vec![1.0; c],
        };
        let mut losses = vec![0.0f64; n];
        let mut total = 0.0;
        for (k, &t) in tv.iter().enumerate() {
            if t == ignore_index {
                continue;
            }
            let wt = wv[t as usize];
            losses[k] = -xv[k * c + t as usize].to_f64() * wt;
            total += wt;
        }
        match reduction {
            0 => {
                T::store(mem, po, &losses.iter().map(|v| T::from_f64(*v)).collect::<Vec<_>>(), d)?;
                total = 0.0;
            }
            1 => T::store(mem, po, &[T::from_f64(losses.iter().sum::<f64>() / total)], d)?,
            _ => T::store(mem, po, &[T::from_f64(losses.iter().sum::<f64>())], d)?,
        }
        T::store(mem, ptw, &[T::from_f64(total)], d)
    }))?;
    Ok((out, tw))
}

/// `nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)`.
/// xirang-kernel: nll_loss_backward
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    let mut all = vec![grad_output, self_, target, total_weight];
    all.extend(weight);
    let ctx = device_of("nll_loss_backward", &all)?;
    let d = self_.dtype();
    let (n, c) = nll_shape("nll_loss_backward", self_, target)?;
    let g_ok = if reduction == 0 { grad_output.numel() == n } else { grad_output.numel() == 1 };
    if target.dtype() != DType::I64
        || grad_output.dtype() != d
        || total_weight.dtype() != d
        || weight.is_some_and(|w| w.dtype() != d || w.numel() != c)
        || !(0..=2).contains(&reduction)
        || !g_ok
    {
        return unsupported("nll_loss_backward", "argument checks are the fallback's");
    }
    let tv = target.to_i64_vec()?;
    if let Some(bad) = tv.iter().find(|&&t| t != ignore_index && (t < 0 || t as usize >= c)) {
        return Err(Error::Index(format!("Target {bad} is out of bounds.")));
    }
    let out = Tensor::empty_on(&ctx, self_.sizes(), d)?;
    if n * c == 0 {
        return Ok(out);
    }
    let (g, tw) = (super::contiguous(grad_output)?, super::contiguous(total_weight)?);
    let w = weight.map(super::contiguous).transpose()?;
    let (pg, ptw, po) = (g.data_ptr()?, tw.data_ptr()?, out.data_ptr()?);
    let pw = w.as_ref().map(|t| t.data_ptr()).transpose()?;
    let ng = g.numel();
    let mut keep = vec![g.into_owned(), tw.into_owned(), out.clone()];
    keep.extend(w.map(Cow::into_owned));
    with_real!("nll_loss_backward", d, T => launch(&ctx, keep, move |mem| {
        let gv = T::load(mem, pg, ng, d)?;
        let total = T::load(mem, ptw, 1, d)?[0].to_f64();
        let wv: Vec<f64> = match pw {
            Some(p) => T::load(mem, p, c, d)?.iter().map(|v| v.to_f64()).collect(),
            None => vec![1.0; c],
        };
        let mut o = vec![T::ZERO; n * c];
        for (k, &t) in tv.iter().enumerate() {
            if t == ignore_index {
                continue;
            }
            let g = match reduction {
                0 => gv[k].to_f64(),
                1 => gv[0].to_f64() / total,
                _ => gv[0].to_f64(),
            };
            o[k * c + t as usize] = T::from_f64(-wv[t as usize] * g);
        }
        T::store(mem, po, &o, d)
    }))?;
    Ok(out)
}

/// `mse_loss(self, target, reduction)`.
/// xirang-kernel: mse_loss
pub fn mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    let ctx = device_of("mse_loss", &[self_, target])?;
    let d = self_.dtype();
    if target.dtype() != d || target.sizes() != self_.sizes() || !(0..=2).contains(&reduction) {
        return unsupported("mse_loss", "mixed dtypes, broadcasting or a bad reduction take the fallback");
    }
    let n = self_.numel();
    let out = Tensor::empty_on(&ctx, if reduction == 0 { self_.sizes() } else { &[] }, d)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    let (x, t) = (super::contiguous(self_)?, super::contiguous(target)?);
    let (px, pt, po) = (if n > 0 { x.data_ptr()? } else { 0 }, if n > 0 { t.data_ptr()? } else { 0 }, out.data_ptr()?);
    with_real!("mse_loss", d, T => launch(&ctx, [&*x, &*t, &out], move |mem| {
        let xv = T::load(mem, px, n, d)?;
        let tv = T::load(mem, pt, n, d)?;
        if reduction == 0 {
            let o: Vec<T> = xv.iter().zip(&tv).map(|(a, b)| { let e = *a - *b; e * e }).collect();
            return T::store(mem, po, &o, d);
        }
        let s: f64 = xv.iter().zip(&tv).map(|(a, b)| { let e = (*a - *b).to_f64(); e * e }).sum();
        let v = if reduction == 1 { s / n as f64 } else { s };
        T::store(mem, po, &[T::from_f64(v)], d)
    }))?;
    Ok(out)
}

/// `mse_loss_backward(grad_output, self, target, reduction)` = `norm * (self - target) * grad`,
/// `norm = 2 / numel` for mean, 2 otherwise.
/// xirang-kernel: mse_loss_backward
pub fn mse_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    let ctx = device_of("mse_loss_backward", &[grad_output, self_, target])?;
    let d = self_.dtype();
    if target.dtype() != d || grad_output.dtype() != d || target.sizes() != self_.sizes() {
        return unsupported("mse_loss_backward", "mixed dtypes or broadcasting take the fallback");
    }
    let g_ok = if reduction == 0 { grad_output.sizes() == self_.sizes() } else { grad_output.numel() == 1 };
    if !g_ok {
        return unsupported("mse_loss_backward", "gradient shape");
    }
    let n = self_.numel();
    let out = Tensor::empty_on(&ctx, self_.sizes(), d)?;
    if n == 0 {
        return Ok(out);
    }
    let (g, x, t) = (super::contiguous(grad_output)?, super::contiguous(self_)?, super::contiguous(target)?);
    let (pg, px, pt, po, ng) = (g.data_ptr()?, x.data_ptr()?, t.data_ptr()?, out.data_ptr()?, g.numel());
    let norm = if reduction == 1 { 2.0 / n as f64 } else { 2.0 };
    with_real!("mse_loss_backward", d, T => launch(&ctx, [&*g, &*x, &*t, &out], move |mem| {
        let gv = T::load(mem, pg, ng, d)?;
        let xv = T::load(mem, px, n, d)?;
        let tv = T::load(mem, pt, n, d)?;
        let nm = T::from_f64(norm);
        let o: Vec<T> = (0..n).map(|i| nm * (xv[i] - tv[i]) * gv[if ng == 1 { 0 } else { i }]).collect();
        T::store(mem, po, &o, d)
    }))?;
    Ok(out)
}
