//! Batch normalization on the device: `native_batch_norm`, where PyTorch sends every
//! `nn.BatchNorm*d` and `F.batch_norm` of a PrivateUse1 tensor (training and evaluation), and
//! `native_batch_norm_backward`, its backward. One launch per call. Statistics are accumulated in
//! f64 (PyTorch's CPU kernel accumulates in double too); each element is computed in f64 and
//! rounded once to the storage dtype. A reduced-precision input (float16, bfloat16) with float32
//! parameters and statistics, as autocast leaves batch norm, runs here as on PyTorch's CPU kernel:
//! the output and the input's gradient in the input's dtype, the saved statistics, the running
//! statistics and the parameters' gradients in float32. Other dtype mixes (which PyTorch refuses)
//! and non-contiguous running statistics take the fallback.

use rayon::prelude::*;

use super::{PAR_MIN, Real, contiguous, device_of, is_real, launch, unsupported, with_real};
use crate::driver::KernelMemory;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// (N, C, inner) of an `[N, C, ...]` input, and the dtype of the per-channel tensors, after the
/// checks both directions share: `same` (the input, the output's gradient) are of the input's
/// dtype, `per_channel` of one dtype, the input's or float32 under a float16/bfloat16 input.
fn layout(
    name: &str,
    input: &Tensor,
    same: &[&Tensor],
    per_channel: &[Option<&Tensor>],
) -> Result<(usize, usize, usize, DType)> {
    let d = input.dtype();
    if !is_real(d) {
        return unsupported(name, format!("dtype {d} takes the fallback"));
    }
    let pd = per_channel.iter().flatten().next().map_or(d, |t| t.dtype());
    let mixed_ok = pd == d || (matches!(d, DType::F16 | DType::BF16) && pd == DType::F32);
    if same.iter().any(|t| t.dtype() != d) || per_channel.iter().flatten().any(|t| t.dtype() != pd) || !mixed_ok {
        return unsupported(
            name,
            "mixed dtypes other than a float16/bfloat16 input with float32 parameters take the fallback",
        );
    }
    if input.dim() < 2 {
        return unsupported(name, "an input of fewer than 2 dimensions takes the fallback (which raises)");
    }
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let inner: usize = input.sizes()[2..].iter().product();
    if per_channel.iter().flatten().any(|t| t.numel() != c || !t.is_contiguous()) {
        return unsupported(name, "per-channel tensors of another size or layout take the fallback");
    }
    if n * inner == 0 {
        return unsupported(name, "an empty batch takes the fallback");
    }
    Ok((n, c, inner, pd))
}

fn ptr(t: Option<&Tensor>) -> Result<Option<u64>> {
    t.map(|t| t.data_ptr()).transpose()
}

fn load_f64<T: Real>(mem: &dyn KernelMemory, p: Option<u64>, n: usize, d: DType) -> Result<Option<Vec<f64>>> {
    p.map(|p| T::load(mem, p, n, d).map(|v| v.into_iter().map(T::to_f64).collect())).transpose()
}

fn store_f64<T: Real>(mem: &dyn KernelMemory, p: u64, v: &[f64], d: DType) -> Result<()> {
    T::store(mem, p, &v.iter().map(|x| T::from_f64(*x)).collect::<Vec<_>>(), d)
}

/// Per channel, `f(values of that channel)` over the `[N, C, inner]` buffer `x`, in parallel
/// when the buffer is large.
fn per_channel<R: Send>(n: usize, c: usize, inner: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if n * c * inner >= PAR_MIN { (0..c).into_par_iter().map(f).collect() } else { (0..c).map(f).collect() }
}

/// `out[i] = f(channel of i, i)` for every element of an `[N, C, inner]` buffer.
fn each<T: Real>(c: usize, inner: usize, out: &mut [T], f: impl Fn(usize, usize) -> T + Sync + Send) {
    let body = |(row, o): (usize, &mut [T])| {
        let ch = row % c;
        for (k, v) in o.iter_mut().enumerate() {
            *v = f(ch, row * inner + k);
        }
    };
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(inner).enumerate().for_each(body);
    } else {
        out.chunks_mut(inner).enumerate().for_each(body);
    }
}

/// `sum over the channel's elements of f(element index)`, in f64.
fn channel_sum(n: usize, c: usize, inner: usize, ch: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut s = 0.0;
    for b in 0..n {
        let o = (b * c + ch) * inner;
        for k in o..o + inner {
            s += f(k);
        }
    }
    s
}

/// `native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)`:
/// (output, save_mean, save_invstd). Training normalizes by the batch statistics, returns them
/// (the mean and `1/sqrt(var + eps)`) and updates the running statistics in place when given
/// (`(1 - momentum) * running + momentum * batch`, the variance unbiased); evaluation normalizes
/// by the running statistics and returns empty saved statistics, as PyTorch.
/// xirang-kernel: native_batch_norm
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
    const NAME: &str = "native_batch_norm";
    let params = [weight, bias, running_mean, running_var];
    let mut all = vec![input];
    all.extend(params.iter().flatten().copied());
    let ctx = device_of(NAME, &all)?;
    let (n, c, inner, pd) = layout(NAME, input, &[input], &params)?;
    if running_mean.is_some() != running_var.is_some() || (!training && running_mean.is_none()) {
        return unsupported(NAME, "running statistics missing where they are needed take the fallback (which raises)");
    }
    let d = input.dtype();
    let x = contiguous(input)?.into_owned();
    let out = Tensor::empty_on(&ctx, x.sizes(), d)?;
    let stat = if training { c } else { 0 };
    let (save_mean, save_invstd) = (Tensor::empty_on(&ctx, &[stat], pd)?, Tensor::empty_on(&ctx, &[stat], pd)?);
    let (px, po) = (x.data_ptr()?, out.data_ptr()?);
    let (pw, pb, prm, prv) = (ptr(weight)?, ptr(bias)?, ptr(running_mean)?, ptr(running_var)?);
    let (psm, psi) = if training { (Some(save_mean.data_ptr()?), Some(save_invstd.data_ptr()?)) } else { (None, None) };
    let mut keep = vec![x, out.clone(), save_mean.clone(), save_invstd.clone()];
    keep.extend(params.iter().flatten().map(|t| (*t).clone()));
    let total = n * c * inner;
    with_real!(NAME, d, T => launch(&ctx, keep, move |mem| {
        let xv = T::load(mem, px, total, d)?;
        let w = load_f64::<T>(mem, pw, c, pd)?;
        let b = load_f64::<T>(mem, pb, c, pd)?;
        let rm = load_f64::<T>(mem, prm, c, pd)?;
        let rv = load_f64::<T>(mem, prv, c, pd)?;
        let (mean, var): (Vec<f64>, Vec<f64>) = match (&rm, &rv) {
            (Some(m), Some(v)) if !training => (m.clone(), v.clone()),
            _ => per_channel(n, c, inner, |ch| {
                let cnt = (n * inner) as f64;
                let m = channel_sum(n, c, inner, ch, |k| xv[k].to_f64()) / cnt;
                (m, channel_sum(n, c, inner, ch, |k| (xv[k].to_f64() - m).powi(2)) / cnt)
            })
            .into_iter()
            .unzip(),
        };
        let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let scale: Vec<f64> = (0..c).map(|ch| invstd[ch] * w.as_ref().map_or(1.0, |w| w[ch])).collect();
        let shift: Vec<f64> = (0..c).map(|ch| b.as_ref().map_or(0.0, |b| b[ch])).collect();
        let mut y = vec![T::ZERO; total];
        each(c, inner, &mut y, |ch, i| T::from_f64((xv[i].to_f64() - mean[ch]) * scale[ch] + shift[ch]));
        T::store(mem, po, &y, d)?;
        if let (Some(psm), Some(psi)) = (psm, psi) {
            store_f64::<T>(mem, psm, &mean, pd)?;
            store_f64::<T>(mem, psi, &invstd, pd)?;
            if let (Some(rm), Some(rv), Some(prm), Some(prv)) = (&rm, &rv, prm, prv) {
                let cnt = (n * inner) as f64;
                let unbiased = if cnt > 1.0 { cnt / (cnt - 1.0) } else { 1.0 };
                let nm: Vec<f64> = rm.iter().zip(&mean).map(|(r, m)| (1.0 - momentum) * r + momentum * m).collect();
                let nv: Vec<f64> =
                    rv.iter().zip(&var).map(|(r, v)| (1.0 - momentum) * r + momentum * v * unbiased).collect();
                store_f64::<T>(mem, prm, &nm, pd)?;
                store_f64::<T>(mem, prv, &nv, pd)?;
            }
        }
        Ok(())
    }))?;
    Ok((out, save_mean, save_invstd))
}

/// `native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
/// save_invstd, train, eps, output_mask)`: (grad_input, grad_weight, grad_bias), each undefined
/// when its `output_mask` entry is false. Training differentiates through the batch statistics
/// (`save_mean`, `save_invstd`); evaluation uses the running statistics as constants.
/// xirang-kernel: native_batch_norm_backward
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
    const NAME: &str = "native_batch_norm_backward";
    let (sm, sv) = if train { (save_mean, save_invstd) } else { (running_mean, running_var) };
    let (Some(sm), Some(sv)) = (sm, sv) else {
        return unsupported(NAME, "statistics missing where they are needed take the fallback (which raises)");
    };
    let params = [weight, Some(sm), Some(sv)];
    let mut all = vec![grad_out, input];
    all.extend(params.iter().flatten().copied());
    let ctx = device_of(NAME, &all)?;
    let (n, c, inner, pd) = layout(NAME, input, &[grad_out, input], &params)?;
    if grad_out.sizes() != input.sizes() {
        return unsupported(NAME, "a grad_out of another shape takes the fallback (which raises)");
    }
    let d = input.dtype();
    let want = |i: usize| output_mask.get(i).copied().unwrap_or(true);
    let gi = if want(0) { Some(Tensor::empty_on(&ctx, input.sizes(), d)?) } else { None };
    let gw = if want(1) { Some(Tensor::empty_on(&ctx, &[c], pd)?) } else { None };
    let gb = if want(2) { Some(Tensor::empty_on(&ctx, &[c], pd)?) } else { None };
    let (pgi, pgw, pgb) = (ptr(gi.as_ref())?, ptr(gw.as_ref())?, ptr(gb.as_ref())?);
    let dy = contiguous(grad_out)?.into_owned();
    let x = contiguous(input)?.into_owned();
    let (pdy, px, pw, psm, psv) = (dy.data_ptr()?, x.data_ptr()?, ptr(weight)?, sm.data_ptr()?, sv.data_ptr()?);
    let mut keep = vec![dy, x, sm.clone(), sv.clone()];
    keep.extend(weight.cloned());
    keep.extend(gi.iter().chain(&gw).chain(&gb).cloned());
    let total = n * c * inner;
    with_real!(NAME, d, T => launch(&ctx, keep, move |mem| {
        let dyv = T::load(mem, pdy, total, d)?;
        let xv = T::load(mem, px, total, d)?;
        let mean = load_f64::<T>(mem, Some(psm), c, pd)?.unwrap_or_default();
        let s = load_f64::<T>(mem, Some(psv), c, pd)?.unwrap_or_default();
        let invstd: Vec<f64> = if train { s } else { s.iter().map(|v| 1.0 / (v + eps).sqrt()).collect() };
        let w = load_f64::<T>(mem, pw, c, pd)?;
        let (sum, dot): (Vec<f64>, Vec<f64>) = per_channel(n, c, inner, |ch| {
            let m = mean[ch];
            let s = channel_sum(n, c, inner, ch, |k| dyv[k].to_f64());
            (s, channel_sum(n, c, inner, ch, |k| dyv[k].to_f64() * (xv[k].to_f64() - m)))
        })
        .into_iter()
        .unzip();
        if let Some(p) = pgb {
            store_f64::<T>(mem, p, &sum, pd)?;
        }
        if let Some(p) = pgw {
            let g: Vec<f64> = dot.iter().zip(&invstd).map(|(a, r)| a * r).collect();
            store_f64::<T>(mem, p, &g, pd)?;
        }
        if let Some(p) = pgi {
            let cnt = (n * inner) as f64;
            let wc = |ch: usize| w.as_ref().map_or(1.0, |w| w[ch]);
            let mut g = vec![T::ZERO; total];
            if train {
                // dx = (dy - mean(dy) - x̂ · mean(dy · x̂)) · invstd · w, with x̂ = (x - mean) · invstd
                let k: Vec<f64> = (0..c).map(|ch| dot[ch] * invstd[ch] * invstd[ch] / cnt).collect();
                let mdy: Vec<f64> = sum.iter().map(|s| s / cnt).collect();
                each(c, inner, &mut g, |ch, i| {
                    let v = dyv[i].to_f64() - mdy[ch] - (xv[i].to_f64() - mean[ch]) * k[ch];
                    T::from_f64(v * invstd[ch] * wc(ch))
                });
            } else {
                each(c, inner, &mut g, |ch, i| T::from_f64(dyv[i].to_f64() * invstd[ch] * wc(ch)));
            }
            T::store(mem, p, &g, d)?;
        }
        Ok(())
    }))?;
    let u = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    Ok((u(gi), u(gw), u(gb)))
}
