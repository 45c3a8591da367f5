//! Neural-network ops: softmax family, layer_norm, embedding, dropout,
//! nll_loss / cross_entropy, mse_loss (forward and backward).

// Index loops mirror the reference formulas; tuples name their parts in docs.
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

use super::{Reduction, on_host, on_host1, require_float};
use crate::dtype::DType;
use crate::error::{Error, Result, arg_err, dtype_err, index_err, shape_err};
use crate::shape::wrap_dim;
use crate::tensor::Tensor;

/// Values of `t` with `dim` moved last: (values, outer, len).
fn rows(t: &Tensor, dim: usize) -> Result<(Vec<f64>, usize, usize)> {
    if t.dim() == 0 {
        return Ok((t.to_f64_vec()?, 1, 1));
    }
    let n = t.dim();
    let mut perm: Vec<i64> = (0..n).filter(|&i| i != dim).map(|i| i as i64).collect();
    perm.push(dim as i64);
    let p = t.permute(&perm)?;
    let len = t.sizes()[dim];
    let v = p.to_f64_vec()?;
    let outer = v.len().checked_div(len).unwrap_or(0);
    Ok((v, outer, len))
}

/// Inverse of [`rows`]: build a tensor of `sizes` from row values.
fn unrows(v: &[f64], sizes: &[usize], dim: usize, dtype: DType) -> Result<Tensor> {
    if sizes.is_empty() {
        return Tensor::from_f64(v, &[], dtype);
    }
    let n = sizes.len();
    let mut psizes: Vec<usize> = (0..n).filter(|&i| i != dim).map(|i| sizes[i]).collect();
    psizes.push(sizes[dim]);
    let t = Tensor::from_f64(v, &psizes, dtype)?;
    // position of original dim i in the permuted tensor
    let mut inv = vec![0i64; n];
    let mut k = 0;
    for (i, slot) in inv.iter_mut().enumerate() {
        if i == dim {
            *slot = (n - 1) as i64;
        } else {
            *slot = k;
            k += 1;
        }
    }
    t.permute(&inv)?.contiguous()
}

fn for_rows(v: &mut [f64], len: usize, f: impl Fn(&mut [f64]) + Sync + Send) {
    if len == 0 {
        return;
    }
    if v.len() >= super::PARALLEL_THRESHOLD {
        use rayon::prelude::*;
        v.par_chunks_mut(len).for_each(f);
    } else {
        v.chunks_mut(len).for_each(f);
    }
}

fn softmax_impl(name: &'static str, x: &Tensor, dim: i64, dtype: Option<DType>, log: bool) -> Result<Tensor> {
    let od = dtype.unwrap_or(x.dtype());
    require_float(name, od)?;
    let d = wrap_dim(dim, x.dim())?;
    on_host1(name, &[x], |h| {
        let (mut v, _, len) = rows(&h[0], d)?;
        for_rows(&mut v, len, |r| {
            let m = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let m = if m.is_finite() {
                m
            } else if r.iter().any(|x| x.is_nan()) {
                f64::NAN
            } else {
                m
            };
            let s: f64 = r.iter().map(|x| (x - m).exp()).sum();
            for x in r.iter_mut() {
                *x = if log { (*x - m) - s.ln() } else { (*x - m).exp() / s };
            }
        });
        unrows(&v, h[0].sizes(), d, od)
    })
}

/// `torch.softmax(x, dim, dtype)`; the input is cast to `dtype` first.
pub fn softmax(x: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    softmax_impl("softmax", x, dim, dtype, false)
}

/// `torch.log_softmax(x, dim, dtype)`.
pub fn log_softmax(x: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    softmax_impl("log_softmax", x, dim, dtype, true)
}

fn softmax_bwd(name: &'static str, grad: &Tensor, output: &Tensor, dim: i64, log: bool) -> Result<Tensor> {
    if grad.sizes() != output.sizes() {
        return shape_err(format!("{name}: grad_output and output shapes differ"));
    }
    require_float(name, output.dtype())?;
    let d = wrap_dim(dim, output.dim())?;
    let od = grad.dtype();
    on_host1(name, &[grad, output], |h| {
        let (g, _, len) = rows(&h[0], d)?;
        let (y, _, _) = rows(&h[1], d)?;
        let mut out = vec![0.0; g.len()];
        if len > 0 {
            for ((o, g), y) in out.chunks_mut(len).zip(g.chunks(len)).zip(y.chunks(len)) {
                if log {
                    let s: f64 = g.iter().sum();
                    for i in 0..len {
                        o[i] = g[i] - y[i].exp() * s;
                    }
                } else {
                    let s: f64 = g.iter().zip(y).map(|(a, b)| a * b).sum();
                    for i in 0..len {
                        o[i] = y[i] * (g[i] - s);
                    }
                }
            }
        }
        unrows(&out, h[0].sizes(), d, od)
    })
}

/// `_softmax_backward_data(grad_output, output, dim)` = `y * (g - sum(g*y))`.
pub fn softmax_backward(grad_output: &Tensor, output: &Tensor, dim: i64) -> Result<Tensor> {
    softmax_bwd("softmax_backward", grad_output, output, dim, false)
}

/// `_log_softmax_backward_data(grad_output, output, dim)` = `g - exp(y) * sum(g)`.
pub fn log_softmax_backward(grad_output: &Tensor, output: &Tensor, dim: i64) -> Result<Tensor> {
    softmax_bwd("log_softmax_backward", grad_output, output, dim, true)
}

fn ln_split(x: &Tensor, normalized_shape: &[usize]) -> Result<(usize, usize, Vec<usize>)> {
    let nd = x.dim();
    let k = normalized_shape.len();
    if k == 0 || k > nd || x.sizes()[nd - k..] != *normalized_shape {
        return shape_err(format!(
            "Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size {:?}",
            normalized_shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
            x.sizes()
        ));
    }
    let n: usize = normalized_shape.iter().product();
    let m: usize = x.sizes()[..nd - k].iter().product();
    let mut stat_shape = x.sizes()[..nd - k].to_vec();
    stat_shape.extend(std::iter::repeat_n(1, k));
    Ok((m, n, stat_shape))
}

/// `native_layer_norm(x, normalized_shape, weight, bias, eps)` ->
/// `(out, mean, rstd)`; `mean`/`rstd` have shape `x.shape[:-k] + [1]*k`
/// and use the biased variance.
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    require_float("layer_norm", x.dtype())?;
    let (m, n, stat_shape) = ln_split(x, normalized_shape)?;
    for p in weight.iter().chain(bias.iter()) {
        if p.sizes() != normalized_shape {
            return shape_err(format!(
                "layer_norm: weight/bias of shape {:?} do not match normalized_shape {normalized_shape:?}",
                p.sizes()
            ));
        }
    }
    let ones = super::on_device_of(Tensor::ones(normalized_shape, x.dtype()), x)?;
    let zeros = super::on_device_of(Tensor::zeros(normalized_shape, x.dtype()), x)?;
    let w = weight.unwrap_or(&ones);
    let b = bias.unwrap_or(&zeros);
    let [o, mu, rs] = on_host("layer_norm", &[x, w, b], |h| {
        let xv = h[0].to_f64_vec()?;
        let (wv, bv) = (h[1].to_f64_vec()?, h[2].to_f64_vec()?);
        let mut out = vec![0.0; xv.len()];
        let (mut means, mut rstds) = (vec![0.0; m], vec![0.0; m]);
        for i in 0..m {
            let r = &xv[i * n..(i + 1) * n];
            let mean = r.iter().sum::<f64>() / n as f64;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
            let rstd = 1.0 / (var + eps).sqrt();
            for j in 0..n {
                out[i * n + j] = (r[j] - mean) * rstd * wv[j] + bv[j];
            }
            means[i] = mean;
            rstds[i] = rstd;
        }
        let d = h[0].dtype();
        Ok([
            Tensor::from_f64(&out, h[0].sizes(), d)?,
            Tensor::from_f64(&means, &stat_shape, d)?,
            Tensor::from_f64(&rstds, &stat_shape, d)?,
        ])
    })?;
    Ok((o, mu, rs))
}

/// `native_layer_norm_backward` -> `(grad_input, grad_weight, grad_bias)`;
/// the parameter gradients are `None` when `weight` is `None`.
pub fn layer_norm_backward(
    grad_out: &Tensor,
    x: &Tensor,
    normalized_shape: &[usize],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
    require_float("layer_norm_backward", x.dtype())?;
    let (m, n, _) = ln_split(x, normalized_shape)?;
    if grad_out.sizes() != x.sizes() || mean.numel() != m || rstd.numel() != m {
        return shape_err("layer_norm_backward: inconsistent shapes");
    }
    let ones = super::on_device_of(Tensor::ones(normalized_shape, x.dtype()), x)?;
    let w = weight.unwrap_or(&ones);
    let [dx, dw, db] = on_host("layer_norm_backward", &[grad_out, x, mean, rstd, w], |h| {
        let (dy, xv) = (h[0].to_f64_vec()?, h[1].to_f64_vec()?);
        let (mu, rs, wv) = (h[2].to_f64_vec()?, h[3].to_f64_vec()?, h[4].to_f64_vec()?);
        let mut dx = vec![0.0; xv.len()];
        let (mut dw, mut db) = (vec![0.0; n], vec![0.0; n]);
        for i in 0..m {
            let (mut sg, mut sgx) = (0.0, 0.0);
            for j in 0..n {
                let k = i * n + j;
                let xh = (xv[k] - mu[i]) * rs[i];
                let g = dy[k] * wv[j];
                sg += g;
                sgx += g * xh;
                dw[j] += dy[k] * xh;
                db[j] += dy[k];
            }
            for j in 0..n {
                let k = i * n + j;
                let xh = (xv[k] - mu[i]) * rs[i];
                let g = dy[k] * wv[j];
                dx[k] = rs[i] * (g - sg / n as f64 - xh * sgx / n as f64);
            }
        }
        let d = h[1].dtype();
        Ok([
            Tensor::from_f64(&dx, h[1].sizes(), d)?,
            Tensor::from_f64(&dw, normalized_shape, d)?,
            Tensor::from_f64(&db, normalized_shape, d)?,
        ])
    })?;
    Ok(if weight.is_some() { (dx, Some(dw), Some(db)) } else { (dx, None, None) })
}

fn check_indices(name: &str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::I64 | DType::I32 => Ok(()),
        d => dtype_err(format!(
            "{name}: Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead",
            d.name()
        )),
    }
}

/// `torch.embedding(weight, indices)`: rows of a 2-D `weight`; the result
/// has shape `indices.shape + [embedding_dim]`.
pub fn embedding(weight: &Tensor, indices: &Tensor) -> Result<Tensor> {
    check_indices("embedding", indices)?;
    if weight.dim() != 2 {
        return shape_err("'weight' must be 2-D");
    }
    on_host1("embedding", &[weight, indices], |h| {
        let (v, dm) = (h[0].sizes()[0], h[0].sizes()[1]);
        let idx = h[1].to_i64_vec()?;
        let es = h[0].dtype().size();
        let wb = h[0].gather_bytes()?;
        let mut out = Vec::with_capacity(idx.len() * dm * es);
        for &i in &idx {
            if i < 0 || i as usize >= v {
                return index_err(format!("index out of range in self (index {i}, num_embeddings {v})"));
            }
            out.extend_from_slice(&wb[i as usize * dm * es..(i as usize + 1) * dm * es]);
        }
        let mut sizes = h[1].sizes().to_vec();
        sizes.push(dm);
        Tensor::from_bytes(out, &sizes, h[0].dtype())
    })
}

/// `embedding_dense_backward(grad, indices, num_weights, padding_idx,
/// scale_grad_by_freq)`: rows for `padding_idx` get no gradient.
pub fn embedding_backward(
    grad: &Tensor,
    indices: &Tensor,
    num_weights: usize,
    padding_idx: Option<i64>,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    check_indices("embedding_backward", indices)?;
    let dm = *grad.sizes().last().unwrap_or(&0);
    if grad.numel() != indices.numel() * dm {
        return shape_err("embedding_backward: grad does not match indices.shape + [dim]");
    }
    on_host1("embedding_backward", &[grad, indices], |h| {
        let g = h[0].to_f64_vec()?;
        let idx = h[1].to_i64_vec()?;
        let mut counts = vec![0usize; num_weights];
        for &i in &idx {
            if i < 0 || i as usize >= num_weights {
                return index_err(format!("index {i} out of range for {num_weights} embeddings"));
            }
            counts[i as usize] += 1;
        }
        let mut out = vec![0.0; num_weights * dm];
        for (k, &i) in idx.iter().enumerate() {
            if Some(i) == padding_idx {
                continue;
            }
            let scale = if scale_grad_by_freq { 1.0 / counts[i as usize] as f64 } else { 1.0 };
            for j in 0..dm {
                out[i as usize * dm + j] += g[k * dm + j] * scale;
            }
        }
        Tensor::from_f64(&out, &[num_weights, dm], h[0].dtype())
    })
}

pub use crate::rng::Generator;

/// `native_dropout(x, p, train)` -> `(out, mask)`: each element is kept
/// with probability `1 - p` and scaled by `1 / (1 - p)`; `mask` is bool.
/// In eval mode (or `p == 0`) the output equals the input and the mask is
/// all true; `p == 1` zeroes everything.
pub fn dropout(x: &Tensor, p: f64, train: bool, generator: &mut Generator) -> Result<(Tensor, Tensor)> {
    if !(0.0..=1.0).contains(&p) {
        return arg_err(format!("dropout probability has to be between 0 and 1, but got {p}"));
    }
    require_float("dropout", x.dtype())?;
    let [o, m] = on_host("dropout", &[x], |h| {
        let v = h[0].to_f64_vec()?;
        let shape = h[0].sizes();
        if v.is_empty() {
            // PyTorch: an empty input gives an empty mask of the input's dtype.
            return Ok([h[0].clone_contiguous()?, Tensor::zeros(shape, h[0].dtype())]);
        }
        if !train || p == 0.0 {
            return Ok([h[0].clone_contiguous()?, Tensor::ones(shape, DType::Bool)]);
        }
        let mask: Vec<i64> = v.iter().map(|_| (generator.uniform() >= p) as i64).collect();
        let scale = if p == 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
        let out: Vec<f64> = v.iter().zip(&mask).map(|(x, k)| x * *k as f64 * scale).collect();
        Ok([Tensor::from_f64(&out, shape, h[0].dtype())?, Tensor::from_i64(&mask, shape, DType::Bool)?])
    })?;
    Ok((o, m))
}

/// `native_dropout_backward(grad, mask, scale)` = `grad * mask * scale`
/// with `scale = 1 / (1 - p)`.
/// xirang-fallback: native_dropout_backward
pub fn dropout_backward(grad: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    if mask.dtype() != DType::Bool {
        return dtype_err("Mask should be Bool Scalar Type");
    }
    on_host1("dropout_backward", &[grad, mask], |h| {
        let shape = h[0].sizes();
        let g = h[0].to_f64_vec()?;
        let mk = h[1].broadcast_to(shape)?.to_bool_vec()?;
        let out: Vec<f64> = g.iter().zip(&mk).map(|(g, k)| if *k { g * scale } else { 0.0 }).collect();
        Tensor::from_f64(&out, shape, h[0].dtype())
    })
}

// ------------------------------------------------------------------ losses

/// Flatten (N, C, d1...) / (C) log-probabilities to rows of C, and targets
/// to one entry per row. Returns (rows, targets, C, target shape).
fn nll_layout(input: &Tensor, target: &Tensor) -> Result<(Vec<f64>, Vec<i64>, usize, Vec<usize>)> {
    match target.dtype() {
        DType::I64 | DType::U8 => {}
        d => {
            return dtype_err(format!("nll_loss: expected scalar type Long but found {}", d.name()));
        }
    }
    let nd = input.dim();
    if nd == 0 {
        return shape_err("nll_loss: input tensor should be 1D or more");
    }
    let (c, expected): (usize, Vec<usize>) = if nd == 1 {
        (input.sizes()[0], vec![])
    } else {
        let mut t = vec![input.sizes()[0]];
        t.extend_from_slice(&input.sizes()[2..]);
        (input.sizes()[1], t)
    };
    if target.sizes() != expected.as_slice() {
        return shape_err(format!("nll_loss: expected target of size {expected:?}, got {:?}", target.sizes()));
    }
    let (v, _, _) = rows(input, if nd == 1 { 0 } else { 1 })?;
    Ok((v, target.to_i64_vec()?, c, expected))
}

fn class_weights(weight: Option<&Tensor>, c: usize) -> Result<Vec<f64>> {
    match weight {
        None => Ok(vec![1.0; c]),
        Some(w) if w.numel() == c => w.to_f64_vec(),
        Some(w) => shape_err(format!(
            "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}",
            w.sizes()
        )),
    }
}

/// `nll_loss_forward(input, target, weight, reduction, ignore_index)` ->
/// `(output, total_weight)`. `mean` divides by the summed weights of the
/// non-ignored targets (NaN when that is zero).
pub fn nll_loss(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    require_float("nll_loss", input.dtype())?;
    let w_in = weight.cloned().unwrap_or_else(|| Tensor::ones(&[], input.dtype()));
    let [o, tw] = on_host("nll_loss", &[input, target, &w_in], |h| {
        let (v, t, c, tshape) = nll_layout(&h[0], &h[1])?;
        let w = class_weights(weight.map(|_| &h[2]), c)?;
        let mut losses = vec![0.0; t.len()];
        let mut total = 0.0;
        for (k, &ti) in t.iter().enumerate() {
            if ti == ignore_index {
                continue;
            }
            if ti < 0 || ti as usize >= c {
                return index_err(format!("Target {ti} is out of bounds."));
            }
            let wt = w[ti as usize];
            losses[k] = -v[k * c + ti as usize] * wt;
            total += wt;
        }
        let d = h[0].dtype();
        let out = match reduction {
            Reduction::None => Tensor::from_f64(&losses, &tshape, d)?,
            Reduction::Sum => Tensor::from_f64(&[losses.iter().sum()], &[], d)?,
            Reduction::Mean => Tensor::from_f64(&[losses.iter().sum::<f64>() / total], &[], d)?,
        };
        // PyTorch reports a zero total weight when nothing is reduced.
        let total = if reduction == Reduction::None { 0.0 } else { total };
        Ok([out, Tensor::from_f64(&[total], &[], d)?])
    })?;
    Ok((o, tw))
}

/// `nll_loss_backward(grad_output, input, target, weight, reduction,
/// ignore_index, total_weight)` -> gradient w.r.t. `input`.
pub fn nll_loss_backward(
    grad_output: &Tensor,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    require_float("nll_loss_backward", input.dtype())?;
    let w_in = weight.cloned().unwrap_or_else(|| Tensor::ones(&[], input.dtype()));
    on_host1("nll_loss_backward", &[grad_output, input, target, &w_in, total_weight], |h| {
        let (_, t, c, _) = nll_layout(&h[1], &h[2])?;
        let w = class_weights(weight.map(|_| &h[3]), c)?;
        let g = h[0].to_f64_vec()?;
        let tw = h[4].to_f64_vec()?.first().copied().unwrap_or(0.0);
        if reduction != Reduction::None && g.len() != 1 {
            return shape_err("nll_loss_backward: grad_output must be a scalar for sum/mean");
        }
        if reduction == Reduction::None && g.len() != t.len() {
            return shape_err("nll_loss_backward: grad_output must match target for reduction='none'");
        }
        let mut rows_g = vec![0.0; t.len() * c];
        for (k, &ti) in t.iter().enumerate() {
            if ti == ignore_index {
                continue;
            }
            if ti < 0 || ti as usize >= c {
                return index_err(format!("Target {ti} is out of bounds."));
            }
            let gk = match reduction {
                Reduction::None => g[k],
                Reduction::Sum => g[0],
                Reduction::Mean => g[0] / tw,
            };
            rows_g[k * c + ti as usize] = -w[ti as usize] * gk;
        }
        let cd = if h[1].dim() == 1 { 0 } else { 1 };
        unrows(&rows_g, h[1].sizes(), cd, h[1].dtype())
    })
}

fn class_dim(input: &Tensor) -> i64 {
    if input.dim() == 1 { 0 } else { 1 }
}

/// Label-smoothing term of `cross_entropy` and its gradient w.r.t. the
/// log-probabilities (`(loss, dlogp_per_unit_grad)`), following PyTorch's
/// `cross_entropy_loss_label_smoothing`.
struct Smoothing {
    /// Per-row smoothing loss (0 for ignored rows).
    per_row: Vec<f64>,
    /// d(per-row loss)/d(logp), rows of C.
    grad: Vec<f64>,
    target_shape: Vec<usize>,
    /// Denominator of the `mean` reduction.
    denom: f64,
}

fn smoothing(logp: &Tensor, target: &Tensor, weight: Option<&Tensor>, ignore_index: i64) -> Result<Smoothing> {
    let (v, t, c, tshape) = nll_layout(logp, target)?;
    let w = class_weights(weight, c)?;
    let mut smooth = vec![0.0; t.len()];
    let mut denom = 0.0;
    for (k, &ti) in t.iter().enumerate() {
        if ti == ignore_index {
            continue;
        }
        if ti < 0 || ti as usize >= c {
            return index_err(format!("Target {ti} is out of bounds."));
        }
        smooth[k] = -(0..c).map(|j| v[k * c + j] * w[j]).sum::<f64>();
        denom += if weight.is_some() { w[ti as usize] } else { 1.0 };
    }
    // gradient of each per-row smooth loss w.r.t. logp (before reduction)
    let mut grad = vec![0.0; t.len() * c];
    for (k, &ti) in t.iter().enumerate() {
        if ti != ignore_index {
            for j in 0..c {
                grad[k * c + j] = -w[j];
            }
        }
    }
    Ok(Smoothing { per_row: smooth, grad, target_shape: tshape, denom })
}

/// `torch.nn.functional.cross_entropy(input, target, weight, reduction,
/// ignore_index, label_smoothing)` with class-index targets.
pub fn cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    if target.dtype().is_floating() {
        return Err(Error::Unsupported("cross_entropy with class-probability targets".into()));
    }
    if !(0.0..=1.0).contains(&label_smoothing) {
        return arg_err(format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"));
    }
    let logp = log_softmax(input, class_dim(input), None)?;
    let (nll, _) = nll_loss(&logp, target, weight, reduction, ignore_index)?;
    if label_smoothing == 0.0 {
        return Ok(nll);
    }
    let c = input.size(class_dim(input))? as f64;
    let w_in = weight.cloned();
    on_host1("cross_entropy", &[&logp, target, &nll], |h| {
        let w_host = w_in.as_ref().map(|w| w.to_cpu()).transpose()?;
        let sm = smoothing(&h[0], &h[1], w_host.as_ref(), ignore_index)?;
        let (smooth, tshape, denom) = (sm.per_row, sm.target_shape, sm.denom);
        let nllv = h[2].to_f64_vec()?;
        let e = label_smoothing;
        let d = h[0].dtype();
        match reduction {
            Reduction::None => {
                let v: Vec<f64> = nllv.iter().zip(&smooth).map(|(n, s)| (1.0 - e) * n + s * (e / c)).collect();
                Tensor::from_f64(&v, &tshape, d)
            }
            Reduction::Sum => Tensor::from_f64(&[(1.0 - e) * nllv[0] + smooth.iter().sum::<f64>() * (e / c)], &[], d),
            Reduction::Mean => {
                Tensor::from_f64(&[(1.0 - e) * nllv[0] + smooth.iter().sum::<f64>() / denom * (e / c)], &[], d)
            }
        }
    })
}

/// Gradient of [`cross_entropy`] w.r.t. `input` (logits).
pub fn cross_entropy_backward(
    grad_output: &Tensor,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    let cd = class_dim(input);
    let logp = log_softmax(input, cd, None)?;
    let (_, total) = nll_loss(&logp, target, weight, reduction, ignore_index)?;
    let mut dlogp = nll_loss_backward(grad_output, &logp, target, weight, reduction, ignore_index, &total)?;
    if label_smoothing != 0.0 {
        let e = label_smoothing;
        let c = input.size(cd)? as f64;
        let w_in = weight.cloned();
        dlogp = on_host1("cross_entropy_backward", &[&logp, target, grad_output, &dlogp], |h| {
            let w_host = w_in.as_ref().map(|w| w.to_cpu()).transpose()?;
            let sm = smoothing(&h[0], &h[1], w_host.as_ref(), ignore_index)?;
            let (sg, denom) = (sm.grad, sm.denom);
            let g = h[2].to_f64_vec()?;
            let (dn, _, cc) = rows(&h[3], cd as usize)?;
            let out: Vec<f64> = dn
                .iter()
                .zip(&sg)
                .enumerate()
                .map(|(i, (dn, s))| {
                    let gk = match reduction {
                        Reduction::None => g[i / cc.max(1)],
                        Reduction::Sum => g[0],
                        Reduction::Mean => g[0] / denom,
                    };
                    (1.0 - e) * dn + s * gk * (e / c)
                })
                .collect();
            unrows(&out, h[0].sizes(), cd as usize, h[0].dtype())
        })?;
    }
    log_softmax_backward(&dlogp, &logp, cd)
}

/// `mse_loss(input, target, reduction)`; shapes broadcast.
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let diff = super::sub(input, target, crate::dtype::Scalar::Int(1))?;
    require_float("mse_loss", diff.dtype())?;
    let sq = super::mul(&diff, &diff)?;
    match reduction {
        Reduction::None => Ok(sq),
        Reduction::Sum => super::sum(&sq, None, false, None),
        Reduction::Mean => super::mean(&sq, None, false, None),
    }
}

/// `mse_loss_backward(grad_output, input, target, reduction)` =
/// `2 (x - y) g` (divided by the element count for `mean`).
pub fn mse_loss_backward(
    grad_output: &Tensor,
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
) -> Result<Tensor> {
    let diff = super::sub(input, target, crate::dtype::Scalar::Int(1))?;
    require_float("mse_loss_backward", diff.dtype())?;
    let n = diff.numel() as f64;
    let scale = if reduction == Reduction::Mean { 2.0 / n } else { 2.0 };
    let g = super::mul(&diff, grad_output)?;
    super::mul(&g, scale)
}
