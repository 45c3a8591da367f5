//! Reductions: sum, mean, prod, amax, amin, argmax, argmin.

use rayon::prelude::*;

use super::{PARALLEL_THRESHOLD, on_host1};
use crate::dtype::DType;
use crate::error::{Result, arg_err, dtype_err, index_err, shape_err};
use crate::shape::wrap_dim;
use crate::tensor::Tensor;

/// Layout of a reduction: input values grouped so each output element owns
/// a contiguous run of `inner` values.
pub(crate) struct ReduceLayout {
    /// Input permuted to (kept dims..., reduced dims...), contiguous order.
    pub permuted: Tensor,
    pub out_shape: Vec<usize>,
    pub outer: usize,
    pub inner: usize,
    /// The input is contiguous and the reduced dims are its leading ones (a bias gradient's
    /// `sum(0)`): as stored, it is `[inner, outer]` row-major, so a kernel can sum its rows into
    /// the output columns without moving the reduced dims last.
    pub leading: bool,
}

/// `dims = None` or empty reduces everything (PyTorch's `dim=[]` quirk).
pub(crate) fn layout(t: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<ReduceLayout> {
    let nd = t.dim();
    let mut red = vec![false; nd];
    match dims {
        Some(ds) if !ds.is_empty() => {
            for &d in ds {
                let w = wrap_dim(d, nd)?;
                if nd == 0 {
                    continue;
                }
                if red[w] {
                    return arg_err(format!("dim {w} appears multiple times in the list of dims"));
                }
                red[w] = true;
            }
        }
        _ => red.iter_mut().for_each(|r| *r = true),
    }
    let mut perm: Vec<i64> = (0..nd).filter(|&i| !red[i]).map(|i| i as i64).collect();
    perm.extend((0..nd).filter(|&i| red[i]).map(|i| i as i64));
    let permuted = t.permute(&perm)?;
    let sizes = t.sizes();
    let outer: usize = (0..nd).filter(|&i| !red[i]).map(|i| sizes[i]).product();
    let inner: usize = (0..nd).filter(|&i| red[i]).map(|i| sizes[i]).product();
    let out_shape = (0..nd)
        .filter_map(|i| {
            if !red[i] {
                Some(sizes[i])
            } else if keepdim {
                Some(1)
            } else {
                None
            }
        })
        .collect();
    let k = red.iter().take_while(|&&r| r).count();
    let leading = t.is_contiguous() && red[k..].iter().all(|&r| !r);
    Ok(ReduceLayout { permuted, out_shape, outer, inner, leading })
}

fn chunks_map<T: Send + Sync, U: Send>(
    v: &[T],
    outer: usize,
    inner: usize,
    f: impl Fn(&[T]) -> U + Sync + Send,
) -> Vec<U> {
    if inner == 0 {
        return (0..outer).map(|_| f(&[])).collect();
    }
    if v.len() >= PARALLEL_THRESHOLD { v.par_chunks(inner).map(f).collect() } else { v.chunks(inner).map(f).collect() }
}

/// `torch.sum(x, dim, keepdim, dtype)`: integral and bool inputs sum in
/// (and return) int64 unless `dtype` says otherwise; the input is cast to
/// `dtype` first.
/// xirang-fallback: sum.dim_IntList
pub fn sum(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let od = dtype.unwrap_or(x.dtype().sum_dtype());
    on_host1("sum", &[x], |h| {
        let l = layout(&h[0], dims, keepdim)?;
        if od.is_floating() {
            let v = l.permuted.to_dtype(od)?.to_f64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| c.iter().sum::<f64>());
            Tensor::from_f64(&r, &l.out_shape, od)
        } else {
            let v = l.permuted.to_dtype(od)?.to_i64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| c.iter().fold(0i64, |a, b| a.wrapping_add(*b)));
            Tensor::from_i64(&r, &l.out_shape, od)
        }
    })
}

/// `torch.prod(x, dim, keepdim, dtype)` (same dtype rules as `sum`).
pub fn prod(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let od = dtype.unwrap_or(x.dtype().sum_dtype());
    on_host1("prod", &[x], |h| {
        let l = layout(&h[0], dims, keepdim)?;
        if od.is_floating() {
            let v = l.permuted.to_dtype(od)?.to_f64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| c.iter().product::<f64>());
            Tensor::from_f64(&r, &l.out_shape, od)
        } else {
            let v = l.permuted.to_dtype(od)?.to_i64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| c.iter().fold(1i64, |a, b| a.wrapping_mul(*b)));
            Tensor::from_i64(&r, &l.out_shape, od)
        }
    })
}

/// `torch.mean(x, dim, keepdim, dtype)`: floating dtypes only; the mean of
/// nothing is NaN.
/// xirang-fallback: mean.dim
pub fn mean(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let od = dtype.unwrap_or(x.dtype());
    if !od.is_floating() {
        return dtype_err(format!(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
            od.name()
        ));
    }
    on_host1("mean", &[x], |h| {
        let l = layout(&h[0], dims, keepdim)?;
        let v = l.permuted.to_dtype(od)?.to_f64_vec()?;
        let n = l.inner as f64;
        let r = chunks_map(&v, l.outer, l.inner, |c| c.iter().sum::<f64>() / n);
        Tensor::from_f64(&r, &l.out_shape, od)
    })
}

fn extreme(name: &'static str, x: &Tensor, dims: Option<&[i64]>, keepdim: bool, max: bool) -> Result<Tensor> {
    on_host1(name, &[x], |h| {
        let l = layout(&h[0], dims, keepdim)?;
        if l.inner == 0 {
            return index_err(format!(
                "{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."
            ));
        }
        let d = h[0].dtype();
        if d.is_floating() {
            let v = l.permuted.to_f64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| {
                let mut acc = c[0];
                for &e in c {
                    if e.is_nan() {
                        return e;
                    }
                    acc = if max { acc.max(e) } else { acc.min(e) };
                }
                acc
            });
            Tensor::from_f64(&r, &l.out_shape, d)
        } else {
            let v = l.permuted.to_i64_vec()?;
            let r = chunks_map(&v, l.outer, l.inner, |c| {
                let it = c.iter().copied();
                if max { it.max().unwrap_or(0) } else { it.min().unwrap_or(0) }
            });
            Tensor::from_i64(&r, &l.out_shape, d)
        }
    })
}

/// `torch.amax(x, dim, keepdim)`: NaN propagates; empty reductions are errors.
pub fn amax(x: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    extreme("amax", x, dims, keepdim, true)
}

/// `torch.amin(x, dim, keepdim)`.
pub fn amin(x: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    extreme("amin", x, dims, keepdim, false)
}

fn arg_extreme(name: &'static str, x: &Tensor, dim: Option<i64>, keepdim: bool, max: bool) -> Result<Tensor> {
    on_host1(name, &[x], |h| {
        let t = &h[0];
        if t.numel() == 0 {
            return index_err(format!("{name}(): Expected reduction dim to be specified for input.numel() == 0."));
        }
        let (src, out_shape) = match dim {
            None => {
                let shape = if keepdim { vec![1; t.dim()] } else { vec![] };
                (t.reshape(&[-1])?, shape)
            }
            Some(d) => {
                let l = layout(t, Some(&[d]), keepdim)?;
                if l.inner == 0 {
                    return shape_err(format!("{name}(): cannot reduce over a zero-size dimension"));
                }
                let shaped = l.permuted.reshape(&[l.outer as i64, l.inner as i64])?;
                (shaped, l.out_shape)
            }
        };
        let inner = *src.sizes().last().unwrap_or(&1);
        let outer = src.numel().checked_div(inner).unwrap_or(0);
        // Exact comparison in f64 is enough for every dtype but int64
        // beyond 2^53; compare as i64 for integral inputs.
        let r: Vec<i64> = if t.dtype().is_floating() {
            let v = src.to_f64_vec()?;
            chunks_map(&v, outer, inner, |c| {
                let mut best = 0usize;
                for (i, &e) in c.iter().enumerate() {
                    if e.is_nan() {
                        return i as i64;
                    }
                    if (max && e > c[best]) || (!max && e < c[best]) {
                        best = i;
                    }
                }
                best as i64
            })
        } else {
            let vi = src.to_i64_vec()?;
            chunks_map(&vi, outer, inner, |c| {
                let mut best = 0usize;
                for (i, &e) in c.iter().enumerate() {
                    if (max && e > c[best]) || (!max && e < c[best]) {
                        best = i;
                    }
                }
                best as i64
            })
        };
        Tensor::from_i64(&r, &out_shape, DType::I64)
    })
}

/// `torch.argmax(x, dim, keepdim)`: first maximal index; NaN counts as
/// maximal; `dim=None` flattens.
/// xirang-fallback: argmax
pub fn argmax(x: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    arg_extreme("argmax", x, dim, keepdim, true)
}

/// `torch.argmin(x, dim, keepdim)`: first minimal index; NaN counts as minimal.
/// xirang-fallback: argmin
pub fn argmin(x: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    arg_extreme("argmin", x, dim, keepdim, false)
}
