//! Core ATen operators the CPU-fallback tier reaches with no kernel behind them: data movement
//! (flip, repeat, constant padding, scatter, advanced indexing), scans and reductions with
//! indices (cumsum, any, max/min over a dim, var, sort, topk), nonzero, convolution, pooling and
//! the batch / group norms.
//!
//! Same conventions as the rest of [`crate::reference`]: device inputs are copied to the host
//! ([`on_host`]), floating math runs in f64 and is rounded once to the result dtype; data
//! movement copies element bytes, so every dtype (bool and the integers included) is exact.

use super::{on_host, on_host1};
use crate::dtype::{DType, Scalar, load_f64, load_i64, promote_types};
use crate::error::{Error, Result, arg_err, dtype_err, index_err, shape_err};
use crate::shape::{contiguous_strides, numel, wrap_dim};
use crate::tensor::Tensor;

/// Calls `f(multi_index, linear_index)` for every element of `sizes` in row-major order.
fn each_index(sizes: &[usize], mut f: impl FnMut(&[usize], usize) -> Result<()>) -> Result<()> {
    let n = numel(sizes);
    let mut idx = vec![0usize; sizes.len()];
    for lin in 0..n {
        f(&idx, lin)?;
        for d in (0..sizes.len()).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(())
}

/// A new tensor of `out_sizes` whose element at each index is `x`'s element at linear (row-major)
/// index `src(index)`, or `fill` where `src` gives `None`. Exact for every dtype.
fn remap(
    x: &Tensor,
    out_sizes: &[usize],
    fill: Scalar,
    mut src: impl FnMut(&[usize]) -> Option<usize>,
) -> Result<Tensor> {
    let d = x.dtype();
    let es = d.size();
    let xb = x.gather_bytes()?;
    let fb = Tensor::full(&[1], fill, d).gather_bytes()?;
    let mut out = Vec::with_capacity(numel(out_sizes) * es);
    each_index(out_sizes, |mi, _| {
        match src(mi) {
            Some(s) => out.extend_from_slice(&xb[s * es..s * es + es]),
            None => out.extend_from_slice(&fb),
        }
        Ok(())
    })?;
    Tensor::from_bytes(out, out_sizes, d)
}

fn usize_list(name: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&s| {
            usize::try_from(s).map_err(|_| Error::InvalidArgument(format!("{name}: negative value {s} in {v:?}")))
        })
        .collect()
}

// ------------------------------------------------------------ data movement

/// `torch.masked_scatter(x, mask, source)`: `x` with the positions where `mask` (broadcast to `x`'s
/// shape) is true replaced, in row-major order, by `source`'s leading elements (read row-major).
/// Joined Core ATen in PyTorch 2.7. Exact for every dtype.
/// xirang-fallback: masked_scatter
pub fn masked_scatter(x: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    if mask.dtype() != DType::Bool {
        return dtype_err(format!(
            "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
            mask.dtype().name()
        ));
    }
    if source.dtype() != x.dtype() {
        return dtype_err(format!(
            "masked_scatter: expected self and source to have same dtypes but got {} and {}",
            x.dtype().name(),
            source.dtype().name()
        ));
    }
    on_host1("masked_scatter", &[x, mask, source], |h| {
        let shape = h[0].sizes().to_vec();
        let m = h[1].broadcast_to(&shape)?.to_bool_vec()?;
        let es = h[0].dtype().size();
        let mut xb = h[0].gather_bytes()?;
        let sb = h[2].gather_bytes()?;
        let available = sb.len() / es.max(1);
        let mut k = 0usize;
        for (i, on) in m.iter().enumerate() {
            if *on {
                if k >= available {
                    return arg_err("masked_scatter: Number of elements of source < number of ones in mask");
                }
                xb[i * es..(i + 1) * es].copy_from_slice(&sb[k * es..(k + 1) * es]);
                k += 1;
            }
        }
        Tensor::from_bytes(xb, &shape, h[0].dtype())
    })
}

/// `torch.flip(x, dims)`.
/// xirang-fallback: flip
pub fn flip(x: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let nd = x.dim();
    let mut flipped = vec![false; nd.max(1)];
    for &d in dims {
        let w = wrap_dim(d, nd)?;
        if flipped[w] {
            return arg_err(format!("dims has duplicates, original flip dims size={}", dims.len()));
        }
        flipped[w] = true;
    }
    on_host1("flip", &[x], |h| {
        let s = h[0].sizes().to_vec();
        let st = contiguous_strides(&s);
        remap(&h[0], &s, Scalar::Int(0), |mi| {
            Some(mi.iter().enumerate().map(|(k, &i)| if flipped[k] { s[k] - 1 - i } else { i } * st[k]).sum())
        })
    })
}

/// `Tensor.repeat(repeats)`: `repeats` has at least `x.dim()` entries; leading extra ones add
/// dimensions.
/// xirang-fallback: repeat
pub fn repeat(x: &Tensor, repeats: &[i64]) -> Result<Tensor> {
    if repeats.len() < x.dim() {
        return arg_err("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
    }
    let reps = usize_list("repeat", repeats)?;
    on_host1("repeat", &[x], |h| {
        let lead = reps.len() - h[0].dim();
        let mut xs = vec![1usize; lead];
        xs.extend_from_slice(h[0].sizes());
        let st = contiguous_strides(&xs);
        let out: Vec<usize> = xs.iter().zip(&reps).map(|(a, b)| a * b).collect();
        remap(&h[0], &out, Scalar::Int(0), |mi| Some(mi.iter().enumerate().map(|(k, &i)| (i % xs[k]) * st[k]).sum()))
    })
}

/// `constant_pad_nd(x, pad, value)`: `pad` holds (before, after) pairs from the last dimension
/// backwards; negative amounts crop.
/// xirang-fallback: constant_pad_nd
pub fn constant_pad_nd(x: &Tensor, pad: &[i64], value: Scalar) -> Result<Tensor> {
    if !pad.len().is_multiple_of(2) {
        return arg_err(format!("Length of pad must be even but instead it equals {}", pad.len()));
    }
    let nd = x.dim();
    if pad.len() / 2 > nd {
        return arg_err(format!(
            "Length of pad should be no more than twice the number of dimensions of the input. Pad length is {} while the input has {nd} dimensions.",
            pad.len()
        ));
    }
    let mut before = vec![0i64; nd];
    let mut out = Vec::with_capacity(nd);
    for (k, bk) in before.iter_mut().enumerate() {
        // pairs count from the last dimension
        let j = nd - 1 - k;
        let (b, a) = if 2 * j + 1 < pad.len() { (pad[2 * j], pad[2 * j + 1]) } else { (0, 0) };
        let size = x.sizes()[k] as i64 + b + a;
        if size < 0 {
            return arg_err(format!(
                "The input size {}, plus negative padding {b} and {a} resulted in a negative output size, which is invalid. Check dimension {k} of your input.",
                x.sizes()[k]
            ));
        }
        *bk = b;
        out.push(size as usize);
    }
    on_host1("constant_pad_nd", &[x], |h| {
        let s = h[0].sizes().to_vec();
        let st = contiguous_strides(&s);
        remap(&h[0], &out, value, |mi| {
            let mut off = 0usize;
            for k in 0..mi.len() {
                let i = mi[k] as i64 - before[k];
                if i < 0 || i >= s[k] as i64 {
                    return None;
                }
                off += i as usize * st[k];
            }
            Some(off)
        })
    })
}

/// Checks `index` for `scatter`/`gather`-style ops: int64, same number of dimensions, and
/// `index.size(d) <= x.size(d)` for `d != dim` (and `<= src.size(d)` for every `d`).
fn check_scatter(name: &str, x: &Tensor, dim: usize, index: &Tensor, src: Option<&Tensor>) -> Result<()> {
    if index.dtype() != DType::I64 {
        return dtype_err(format!("{name}(): Expected dtype int64 for index"));
    }
    let nd = x.dim().max(1);
    if index.dim().max(1) != nd {
        return shape_err(format!("Index tensor must have the same number of dimensions as self tensor ({name})"));
    }
    let is: Vec<usize> = if index.dim() == 0 { vec![1] } else { index.sizes().to_vec() };
    let xs: Vec<usize> = if x.dim() == 0 { vec![1] } else { x.sizes().to_vec() };
    for k in 0..nd {
        if k != dim && is[k] > xs[k] {
            return shape_err(format!(
                "Size does not match at dimension {k} expected index {is:?} to be smaller than self {xs:?} apart from dimension {dim}"
            ));
        }
        if let Some(s) = src {
            let ss: Vec<usize> = if s.dim() == 0 { vec![1] } else { s.sizes().to_vec() };
            if ss.len() != nd || is[k] > ss[k] {
                return shape_err(format!(
                    "Size does not match at dimension {k} expected index {is:?} to be smaller than src {ss:?}"
                ));
            }
        }
    }
    Ok(())
}

/// `torch.scatter(x, dim, index, src)` (`scatter.src`) or with a scalar `value`
/// (`scatter.value`): a copy of `x` with `out[index[i][j]][j] = src[i][j]` (dim 0); with
/// repeated indices the last write wins.
pub fn scatter(x: &Tensor, dim: i64, index: &Tensor, src: super::Rhs) -> Result<Tensor> {
    let d = wrap_dim(dim, x.dim())?;
    let mut ins: Vec<&Tensor> = vec![x, index];
    let value = match src {
        super::Rhs::Tensor(s) => {
            if s.dtype() != x.dtype() {
                return dtype_err(format!(
                    "scatter(): Expected self.dtype to be equal to src.dtype (got {} and {})",
                    x.dtype().name(),
                    s.dtype().name()
                ));
            }
            check_scatter("scatter", x, d, index, Some(s))?;
            ins.push(s);
            None
        }
        super::Rhs::Scalar(v) => {
            check_scatter("scatter", x, d, index, None)?;
            Some(v)
        }
    };
    on_host1("scatter", &ins, |h| {
        let dt = h[0].dtype();
        let es = dt.size();
        let xs = if h[0].dim() == 0 { vec![1] } else { h[0].sizes().to_vec() };
        let xst = contiguous_strides(&xs);
        let mut xb = h[0].gather_bytes()?;
        let idx = h[1].to_i64_vec()?;
        let is = if h[1].dim() == 0 { vec![1] } else { h[1].sizes().to_vec() };
        // the source: the `src` tensor, or the scalar value as one element (a host tensor made here)
        let src_t = match value {
            Some(v) => Tensor::full(&[1], v, dt),
            None => h[2].clone(),
        };
        let ss = if src_t.dim() == 0 { vec![1] } else { src_t.sizes().to_vec() };
        let sst = contiguous_strides(&ss);
        let sb = src_t.gather_bytes()?;
        each_index(&is, |mi, lin| {
            let i = idx[lin];
            if i < 0 || i as usize >= xs[d] {
                return index_err(format!("index {i} is out of bounds for dimension {d} with size {}", xs[d]));
            }
            let off: usize = mi.iter().enumerate().map(|(k, &v)| if k == d { i as usize } else { v } * xst[k]).sum();
            let soff: usize = if value.is_some() { 0 } else { mi.iter().zip(&sst).map(|(v, s)| v * s).sum() };
            xb[off * es..off * es + es].copy_from_slice(&sb[soff * es..soff * es + es]);
            Ok(())
        })?;
        Tensor::from_bytes(xb, h[0].sizes(), dt)
    })
}

/// `torch.slice_scatter(x, src, dim, start, end, step)`: a copy of `x` with `src` written into
/// the slice.
/// xirang-fallback: slice_scatter
pub fn slice_scatter(
    x: &Tensor,
    src: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    let out = x.clone_contiguous()?;
    let view = out.slice(dim, start, end, step)?;
    if view.sizes() != src.sizes() {
        return shape_err(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {:?}",
            src.sizes(),
            view.sizes()
        ));
    }
    view.copy_(src)?;
    Ok(out)
}

/// `torch.select_scatter(x, src, dim, index)`.
/// xirang-fallback: select_scatter
pub fn select_scatter(x: &Tensor, src: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    let out = x.clone_contiguous()?;
    let view = out.select(dim, index)?;
    if view.sizes() != src.sizes() {
        return shape_err(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {:?}",
            src.sizes(),
            view.sizes()
        ));
    }
    view.copy_(src)?;
    Ok(out)
}

/// Advanced indexing (`x[indices]`): the index tensors (int64, or bool masks, which stand for
/// their `nonzero()` columns), broadcast together. Returns the result sizes and, per result
/// element, the linear index into contiguous `x`.
fn advanced_index(xs: &[usize], indices: &[Option<Tensor>]) -> Result<(Vec<usize>, Vec<usize>)> {
    // expand bool masks into one long index per masked dimension
    let mut idx: Vec<Option<(Vec<usize>, Vec<i64>)>> = Vec::new();
    for t in indices {
        match t {
            None => idx.push(None),
            Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => {
                let k = idx.len();
                let ms = t.sizes();
                for (j, &m) in ms.iter().enumerate() {
                    if k + j >= xs.len() || xs[k + j] != m {
                        return index_err(format!(
                            "The shape of the mask {ms:?} at index {j} does not match the shape of the indexed tensor {xs:?} at index {}",
                            k + j
                        ));
                    }
                }
                let v = t.to_i64_vec()?;
                let st = contiguous_strides(ms);
                let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0).collect();
                for j in 0..ms.len() {
                    let col: Vec<i64> = hits.iter().map(|&i| ((i / st[j]) % ms[j]) as i64).collect();
                    idx.push(Some((vec![hits.len()], col)));
                }
            }
            Some(t) if matches!(t.dtype(), DType::I64 | DType::I32) => {
                idx.push(Some((t.sizes().to_vec(), t.to_i64_vec()?)));
            }
            Some(t) => {
                return index_err(format!(
                    "tensors used as indices must be long, int, byte or bool tensors (got {})",
                    t.dtype().name()
                ));
            }
        }
    }
    if idx.len() > xs.len() {
        return index_err(format!("too many indices for tensor of dimension {} (got {})", xs.len(), idx.len()));
    }
    idx.resize(xs.len(), None);
    let used: Vec<usize> = (0..idx.len()).filter(|&k| idx[k].is_some()).collect();
    if used.is_empty() {
        let n = numel(xs);
        return Ok((xs.to_vec(), (0..n).collect()));
    }
    // broadcast the index shapes
    let mut bshape: Vec<usize> = Vec::new();
    for k in &used {
        let s = &idx[*k].as_ref().map(|p| p.0.clone()).unwrap_or_default();
        bshape = crate::shape::broadcast_shapes(&bshape, s)?;
    }
    let adjacent = used.windows(2).all(|w| w[1] == w[0] + 1);
    let first = used[0];
    // result dims: [before..., B..., after...] when adjacent, else [B..., rest...]
    let rest: Vec<usize> = (0..xs.len()).filter(|k| idx[*k].is_none()).collect();
    let (pre, post): (Vec<usize>, Vec<usize>) = if adjacent {
        (rest.iter().copied().filter(|&k| k < first).collect(), rest.iter().copied().filter(|&k| k > first).collect())
    } else {
        (Vec::new(), rest.clone())
    };
    let mut out: Vec<usize> = pre.iter().map(|&k| xs[k]).collect();
    out.extend_from_slice(&bshape);
    out.extend(post.iter().map(|&k| xs[k]));
    let xst = contiguous_strides(xs);
    // each index tensor broadcast to `bshape`
    let bst: Vec<Vec<usize>> = used
        .iter()
        .map(|k| {
            let s = &idx[*k].as_ref().expect("used").0;
            let st = contiguous_strides(s);
            let lead = bshape.len() - s.len();
            (0..bshape.len()).map(|d| if d < lead || s[d - lead] == 1 { 0 } else { st[d - lead] }).collect()
        })
        .collect();
    let mut lin = Vec::with_capacity(numel(&out));
    let (np, nb) = (pre.len(), bshape.len());
    each_index(&out, |mi, _| {
        let mut off = 0usize;
        for (j, &k) in pre.iter().enumerate() {
            off += mi[j] * xst[k];
        }
        for (j, &k) in post.iter().enumerate() {
            off += mi[np + nb + j] * xst[k];
        }
        let b = &mi[np..np + nb];
        for (u, &k) in used.iter().enumerate() {
            let (_, vals) = idx[k].as_ref().expect("used");
            let pos: usize = b.iter().zip(&bst[u]).map(|(i, s)| i * s).sum();
            let mut v = vals[pos];
            if v < 0 {
                v += xs[k] as i64;
            }
            if v < 0 || v as usize >= xs[k] {
                return index_err(format!(
                    "index {} is out of bounds for dimension {k} with size {}",
                    vals[pos], xs[k]
                ));
            }
            off += v as usize * xst[k];
        }
        lin.push(off);
        Ok(())
    })?;
    Ok((out, lin))
}

/// `x[indices]` (`index.Tensor`).
/// xirang-fallback: index.Tensor
pub fn index(x: &Tensor, indices: &[Option<Tensor>]) -> Result<Tensor> {
    let mut ins: Vec<&Tensor> = vec![x];
    ins.extend(indices.iter().flatten());
    on_host1("index", &ins, |h| {
        let mut it = h[1..].iter();
        let hidx: Vec<Option<Tensor>> = indices.iter().map(|t| t.as_ref().and_then(|_| it.next().cloned())).collect();
        let (out, lin) = advanced_index(h[0].sizes(), &hidx)?;
        let mut k = 0;
        remap(&h[0], &out, Scalar::Int(0), |_| {
            k += 1;
            Some(lin[k - 1])
        })
    })
}

/// `x.index_put(indices, values, accumulate)`: a copy of `x` with `values` (broadcast to the
/// indexed shape) written (or, with `accumulate`, added) at `x[indices]`.
pub fn index_put(x: &Tensor, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
    let mut ins: Vec<&Tensor> = vec![x, values];
    ins.extend(indices.iter().flatten());
    on_host1("index_put", &ins, |h| {
        let mut it = h[2..].iter();
        let hidx: Vec<Option<Tensor>> = indices.iter().map(|t| t.as_ref().and_then(|_| it.next().cloned())).collect();
        let (out, lin) = advanced_index(h[0].sizes(), &hidx)?;
        let d = h[0].dtype();
        let v = h[1].to_dtype(d)?.broadcast_to(&out)?;
        let es = d.size();
        let vb = v.gather_bytes()?;
        let mut xb = h[0].gather_bytes()?;
        for (i, &o) in lin.iter().enumerate() {
            if accumulate {
                if d.is_floating() {
                    let s = load_f64(&xb, d, o) + load_f64(&vb, d, i);
                    crate::dtype::store_f64(&mut xb, d, o, s);
                } else {
                    let s = load_i64(&xb, d, o).wrapping_add(load_i64(&vb, d, i));
                    crate::dtype::store_i64(&mut xb, d, o, s);
                }
            } else {
                xb[o * es..o * es + es].copy_from_slice(&vb[i * es..i * es + es]);
            }
        }
        Tensor::from_bytes(xb, h[0].sizes(), d)
    })
}

/// `torch.nonzero(x)`: `[n, x.dim()]` int64 indices of the non-zero elements, row-major.
/// xirang-fallback: nonzero
pub fn nonzero(x: &Tensor) -> Result<Tensor> {
    on_host1("nonzero", &[x], |h| {
        let s = h[0].sizes().to_vec();
        let nz: Vec<bool> = if h[0].dtype().is_floating() {
            h[0].to_f64_vec()?.iter().map(|v| *v != 0.0).collect()
        } else {
            h[0].to_i64_vec()?.iter().map(|v| *v != 0).collect()
        };
        let mut out = Vec::new();
        let mut n = 0;
        each_index(&s, |mi, lin| {
            if nz[lin] {
                out.extend(mi.iter().map(|&i| i as i64));
                n += 1;
            }
            Ok(())
        })?;
        Tensor::from_i64(&out, &[n, s.len()], DType::I64)
    })
}

// ------------------------------------------------------------ scans and reductions

/// Moves `dim` last: (values of `x` as f64 in [outer, n] rows, the permutation's sizes).
fn rows_along(x: &Tensor, dim: usize) -> Result<(Vec<f64>, usize, usize, Vec<i64>)> {
    let nd = x.dim();
    let mut perm: Vec<i64> = (0..nd as i64).filter(|&k| k != dim as i64).collect();
    perm.push(dim as i64);
    let p = x.permute(&perm)?;
    let n = if nd == 0 { 1 } else { x.sizes()[dim] };
    let total = x.numel();
    let outer = total.checked_div(n).unwrap_or(0);
    Ok((p.to_f64_vec()?, outer, n, perm))
}

/// A [outer, n] row-major result (dim last) back in the input's dimension order.
fn unrows(v: Vec<f64>, x_sizes: &[usize], dim: usize, n: usize, perm: &[i64], d: DType) -> Result<Tensor> {
    if x_sizes.is_empty() {
        return Tensor::from_f64(&v, &[], d);
    }
    let mut ps: Vec<usize> = perm.iter().map(|&k| x_sizes[k as usize]).collect();
    *ps.last_mut().expect("dims") = n;
    let t = Tensor::from_f64(&v, &ps, d)?;
    let mut inv = vec![0i64; perm.len()];
    for (i, &k) in perm.iter().enumerate() {
        inv[k as usize] = i as i64;
    }
    let _ = dim;
    t.permute(&inv)?.contiguous()
}

/// `torch.cumsum(x, dim, dtype)`: integral and bool inputs accumulate in int64.
/// xirang-fallback: cumsum
pub fn cumsum(x: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    let od = dtype.unwrap_or(x.dtype().sum_dtype());
    let d = wrap_dim(dim, x.dim())?;
    on_host1("cumsum", &[x], |h| {
        let xin = h[0].to_dtype(od)?;
        if od.is_floating() {
            let (v, outer, n, perm) = rows_along(&xin, d)?;
            let mut r = v;
            for o in 0..outer {
                let mut acc = 0.0;
                for e in &mut r[o * n..o * n + n] {
                    acc += *e;
                    *e = acc;
                }
            }
            unrows(r, xin.sizes(), d, n, &perm, od)
        } else {
            let nd = xin.dim();
            let mut perm: Vec<i64> = (0..nd as i64).filter(|&k| k != d as i64).collect();
            perm.push(d as i64);
            let v = xin.permute(&perm)?.to_i64_vec()?;
            let n = if nd == 0 { 1 } else { xin.sizes()[d] };
            let mut r = v;
            if n > 0 {
                for row in r.chunks_mut(n) {
                    let mut acc = 0i64;
                    for e in row {
                        acc = acc.wrapping_add(*e);
                        *e = acc;
                    }
                }
            }
            let ps: Vec<usize> = if nd == 0 { vec![] } else { perm.iter().map(|&k| xin.sizes()[k as usize]).collect() };
            let t = Tensor::from_i64(&r, &ps, od)?;
            let mut inv = vec![0i64; perm.len()];
            for (i, &k) in perm.iter().enumerate() {
                inv[k as usize] = i as i64;
            }
            if nd == 0 { Ok(t) } else { t.permute(&inv)?.contiguous() }
        }
    })
}

/// `torch.any(x, dims, keepdim)`: bool result (uint8 for uint8 input, as PyTorch); `None` or
/// empty `dims` reduce everything.
/// xirang-fallback: any.dims
pub fn any(x: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    any_all("any", x, dims, keepdim, false)
}

/// `torch.all(x, dims, keepdim)`: whether every element is non-zero (NaN is); bool result
/// (uint8 for uint8 input, as PyTorch); an empty slice is true.
/// xirang-fallback: all.dims
pub fn all(x: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    any_all("all", x, dims, keepdim, true)
}

fn any_all(name: &'static str, x: &Tensor, dims: Option<&[i64]>, keepdim: bool, all: bool) -> Result<Tensor> {
    let od = if x.dtype() == DType::U8 { DType::U8 } else { DType::Bool };
    on_host1(name, &[x], |h| {
        let l = super::reduce::layout(&h[0], dims, keepdim)?;
        let nz: Vec<bool> = if h[0].dtype().is_floating() {
            l.permuted.to_f64_vec()?.iter().map(|v| *v != 0.0).collect()
        } else {
            l.permuted.to_i64_vec()?.iter().map(|v| *v != 0).collect()
        };
        let r: Vec<i64> = (0..l.outer)
            .map(|o| {
                let row = &nz[o * l.inner..o * l.inner + l.inner];
                i64::from(if all { row.iter().all(|b| *b) } else { row.iter().any(|b| *b) })
            })
            .collect();
        Tensor::from_i64(&r, &l.out_shape, od)
    })
}

/// `torch.max(x, dim, keepdim)` / `torch.min` (`max.dim`, `min.dim`): values and int64 indices
/// (the first extreme; NaN counts as the extreme, as in PyTorch).
pub fn max_min_dim(x: &Tensor, dim: i64, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
    let name = if max { "max" } else { "min" };
    let d = wrap_dim(dim, x.dim())?;
    if x.numel() == 0 {
        return Err(Error::Index(format!("{name}(): Expected reduction dim {d} to have non-zero size.")));
    }
    let [v, i] = on_host(if max { "max.dim" } else { "min.dim" }, &[x], |h| {
        let dt = h[0].dtype();
        let l = super::reduce::layout(&h[0], Some(&[d as i64]), keepdim)?;
        let n = l.inner;
        let mut vals = Vec::with_capacity(l.outer);
        let mut idx = Vec::with_capacity(l.outer);
        if dt.is_floating() {
            let v = l.permuted.to_f64_vec()?;
            for o in 0..l.outer {
                let row = &v[o * n..o * n + n];
                let mut best = 0usize;
                for (k, &e) in row.iter().enumerate() {
                    let b = row[best];
                    if b.is_nan() {
                        break;
                    }
                    if e.is_nan() || (max && e > b) || (!max && e < b) {
                        best = k;
                    }
                }
                vals.push(row[best]);
                idx.push(best as i64);
            }
            Ok([Tensor::from_f64(&vals, &l.out_shape, dt)?, Tensor::from_i64(&idx, &l.out_shape, DType::I64)?])
        } else {
            let v = l.permuted.to_i64_vec()?;
            let mut ivals = Vec::with_capacity(l.outer);
            for o in 0..l.outer {
                let row = &v[o * n..o * n + n];
                let mut best = 0usize;
                for (k, &e) in row.iter().enumerate() {
                    if (max && e > row[best]) || (!max && e < row[best]) {
                        best = k;
                    }
                }
                ivals.push(row[best]);
                idx.push(best as i64);
            }
            Ok([Tensor::from_i64(&ivals, &l.out_shape, dt)?, Tensor::from_i64(&idx, &l.out_shape, DType::I64)?])
        }
    })?;
    Ok((v, i))
}

/// `torch.var(x, dims, correction, keepdim)`: floating inputs; `correction` defaults to 1 (the
/// unbiased estimate); `None` or empty `dims` reduce everything. Two-pass in f64.
pub fn var(x: &Tensor, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Tensor> {
    super::require_float("var", x.dtype())?;
    on_host1("var", &[x], |h| {
        let l = super::reduce::layout(&h[0], dims, keepdim)?;
        let v = l.permuted.to_f64_vec()?;
        let n = l.inner;
        let r: Vec<f64> = (0..l.outer)
            .map(|o| {
                let row = &v[o * n..o * n + n];
                let mean = row.iter().sum::<f64>() / n as f64;
                let ss: f64 = row.iter().map(|e| (e - mean) * (e - mean)).sum();
                ss / (n as f64 - correction).max(0.0)
            })
            .collect();
        Tensor::from_f64(&r, &l.out_shape, h[0].dtype())
    })
}

/// Sort key order: NaN is the largest value (PyTorch's sort and topk).
fn cmp_nan_last(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal),
    }
}

/// The row-wise order of `x` along `dim`: (values, int64 indices) of the first `k` elements of
/// each row sorted ascending or descending (stable).
fn order_along(
    name: &'static str,
    x: &Tensor,
    dim: i64,
    descending: bool,
    k: Option<usize>,
) -> Result<(Tensor, Tensor)> {
    let d = wrap_dim(dim, x.dim())?;
    let [v, i] = on_host(name, &[x], |h| {
        let dt = h[0].dtype();
        let (vals, outer, n, perm) = rows_along(&h[0], d)?;
        let k = k.unwrap_or(n);
        if k > n {
            return Err(Error::Index("selected index k out of range".into()));
        }
        let mut ov = Vec::with_capacity(outer * k);
        let mut oi = Vec::with_capacity(outer * k);
        for o in 0..outer {
            let row = &vals[o * n..o * n + n];
            let mut ord: Vec<usize> = (0..n).collect();
            ord.sort_by(|&a, &b| {
                let c = cmp_nan_last(row[a], row[b]);
                if descending { c.reverse() } else { c }
            });
            for &j in &ord[..k] {
                ov.push(row[j]);
                oi.push(j as f64);
            }
        }
        Ok([unrows(ov, h[0].sizes(), d, k, &perm, dt)?, unrows(oi, h[0].sizes(), d, k, &perm, DType::I64)?])
    })?;
    Ok((v, i))
}

/// `torch.sort(x, dim, descending)` (stable).
pub fn sort(x: &Tensor, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    order_along("sort", x, dim, descending, None)
}

/// `torch.topk(x, k, dim, largest, sorted)`: the results are always sorted.
pub fn topk(x: &Tensor, k: i64, dim: i64, largest: bool) -> Result<(Tensor, Tensor)> {
    let k = usize::try_from(k).map_err(|_| Error::Index("selected index k out of range".into()))?;
    order_along("topk", x, dim, largest, Some(k))
}

// ------------------------------------------------------------ nn

/// `torch.convolution(input, weight, bias, stride, padding, dilation, transposed=False,
/// output_padding, groups)` for 1-, 2- and 3-d (input `[N, C, *spatial]`, weight `[O, C /
/// groups, *kernel]`); floating dtypes, f64 accumulation. Transposed convolution is not
/// implemented here.
#[allow(clippy::too_many_arguments)]
pub fn convolution(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    groups: i64,
) -> Result<Tensor> {
    if transposed {
        return Err(Error::Unsupported("convolution: transposed convolution has no host implementation".into()));
    }
    // PyTorch's CPU convolution takes int64 too (`nn.functional.conv2d` OpInfo's dtypes): the
    // sums are computed in f64, exact while they stay below 2^53
    if input.dtype() != DType::I64 {
        super::require_float("convolution", input.dtype())?;
    }
    let sp = weight.dim().saturating_sub(2);
    if !(1..=3).contains(&sp) || input.dim() != sp + 2 {
        return shape_err(format!(
            "convolution: expected a {}-d input for a {}-d weight, got input {:?}",
            weight.dim(),
            weight.dim(),
            input.sizes()
        ));
    }
    let expand = |v: &[i64], what: &str| -> Result<Vec<i64>> {
        match v.len() {
            1 => Ok(vec![v[0]; sp]),
            n if n == sp => Ok(v.to_vec()),
            _ => arg_err(format!("convolution: expected {what} to be a single integer or a list of {sp}")),
        }
    };
    let (st, pd, dl) = (expand(stride, "stride")?, expand(padding, "padding")?, expand(dilation, "dilation")?);
    if st.iter().any(|&s| s <= 0) || dl.iter().any(|&s| s <= 0) || pd.iter().any(|&s| s < 0) || groups <= 0 {
        return arg_err("convolution: non-positive stride or dilation, negative padding or groups");
    }
    let g = groups as usize;
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let (o, cg) = (weight.sizes()[0], weight.sizes()[1]);
    if c != cg * g || o % g != 0 {
        return shape_err(format!(
            "Given groups={g}, weight of size {:?}, expected input{:?} to have {} channels, but got {c} channels instead",
            weight.sizes(),
            input.sizes(),
            cg * g
        ));
    }
    let ins: Vec<usize> = input.sizes()[2..].to_vec();
    let ks: Vec<usize> = weight.sizes()[2..].to_vec();
    let mut outs = Vec::with_capacity(sp);
    for k in 0..sp {
        let eff = dl[k] * (ks[k] as i64 - 1) + 1;
        let len = (ins[k] as i64 + 2 * pd[k] - eff) / st[k] + 1;
        if len <= 0 {
            return shape_err(format!(
                "Calculated output size is too small: input {:?}, kernel {:?}",
                input.sizes(),
                weight.sizes()
            ));
        }
        outs.push(len as usize);
    }
    let d = input.dtype();
    let mut tins: Vec<&Tensor> = vec![input, weight];
    if let Some(b) = bias {
        tins.push(b);
    }
    on_host1("convolution", &tins, |h| {
        let x = h[0].to_f64_vec()?;
        let w = h[1].to_f64_vec()?;
        let b = if h.len() > 2 { Some(h[2].to_f64_vec()?) } else { None };
        let og = o / g;
        let xsp: usize = ins.iter().product();
        let ksp: usize = ks.iter().product();
        let osp: usize = outs.iter().product();
        let xst = contiguous_strides(&ins);
        let kst = contiguous_strides(&ks);
        let ost = contiguous_strides(&outs);
        // (kernel offset, input spatial offsets) per output position is computed on the fly
        let rows: Vec<Vec<f64>> = super::pmap(&(0..n * o).collect::<Vec<_>>(), |&no| {
            let (b_i, oc) = (no / o, no % o);
            let grp = oc / og;
            let mut row = vec![b.as_ref().map_or(0.0, |b| b[oc]); osp];
            for (op_lin, acc) in row.iter_mut().enumerate() {
                let opos: Vec<usize> = (0..sp).map(|k| (op_lin / ost[k]) % outs[k]).collect();
                for ic in 0..cg {
                    let xc = grp * cg + ic;
                    let xbase = (b_i * c + xc) * xsp;
                    let wbase = (oc * cg + ic) * ksp;
                    'k: for kl in 0..ksp {
                        let mut xoff = 0usize;
                        for k in 0..sp {
                            let kk = (kl / kst[k]) % ks[k];
                            let pos = opos[k] as i64 * st[k] - pd[k] + kk as i64 * dl[k];
                            if pos < 0 || pos >= ins[k] as i64 {
                                continue 'k;
                            }
                            xoff += pos as usize * xst[k];
                        }
                        *acc += x[xbase + xoff] * w[wbase + kl];
                    }
                }
            }
            row
        });
        let flat: Vec<f64> = rows.into_iter().flatten().collect();
        let mut shape = vec![n, o];
        shape.extend_from_slice(&outs);
        Tensor::from_f64(&flat, &shape, d)
    })
}

/// `max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)`: values and
/// int64 flat indices into each input plane (`[N, C, H, W]` or `[C, H, W]`). The n-d pooling of
/// `core_aten_more` (PyTorch's rules: the last NaN of a window wins, ceil-mode windows, every
/// dtype but bool).
pub fn max_pool2d_with_indices(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let win = super::core_aten_more::windows("max_pool2d", 2, kernel, stride, padding, dilation)?;
    super::core_aten_more::max_pool_nd("max_pool2d_with_indices", x, &win, ceil_mode)
}

/// `avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)`:
/// the n-d average pooling of `core_aten_more` (floating dtypes and int64).
/// xirang-fallback: avg_pool2d
pub fn avg_pool2d(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let win = super::core_aten_more::windows("avg_pool2d", 2, kernel, stride, padding, &[1])?;
    super::core_aten_more::avg_pool_nd("avg_pool2d", x, &win, ceil_mode, count_include_pad, divisor_override)
}

/// Per-channel statistics over `[N, C, *]`: (mean, biased variance) per channel.
fn channel_stats(v: &[f64], n: usize, c: usize, inner: usize) -> (Vec<f64>, Vec<f64>) {
    let count = (n * inner) as f64;
    let mut mean = vec![0.0; c];
    let mut var = vec![0.0; c];
    for ch in 0..c {
        let mut s = 0.0;
        for b in 0..n {
            s += v[(b * c + ch) * inner..(b * c + ch + 1) * inner].iter().sum::<f64>();
        }
        let m = s / count;
        let mut ss = 0.0;
        for b in 0..n {
            ss += v[(b * c + ch) * inner..(b * c + ch + 1) * inner].iter().map(|e| (e - m) * (e - m)).sum::<f64>();
        }
        mean[ch] = m;
        var[ch] = ss / count;
    }
    (mean, var)
}

/// `_native_batch_norm_legit(input, weight, bias, running_mean, running_var, training,
/// momentum, eps)` and its `no_training` / `no_stats` forms: (output, save_mean, save_invstd).
/// Training normalizes by the batch statistics and, when given, updates the running statistics
/// in place (unbiased variance, as PyTorch); evaluation uses the running statistics and returns
/// empty saved statistics.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running: Option<(&Tensor, &Tensor)>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    super::require_float("batch_norm", input.dtype())?;
    if input.dim() < 2 {
        return shape_err(format!("batch_norm: expected at least a 2-d input, got {:?}", input.sizes()));
    }
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let inner: usize = input.sizes()[2..].iter().product();
    if !training && running.is_none() {
        return arg_err("batch_norm: running_mean and running_var must be defined in evaluation mode");
    }
    let d = input.dtype();
    let mut ins: Vec<&Tensor> = vec![input];
    let wi = weight.map(|w| {
        ins.push(w);
        ins.len() - 1
    });
    let bi = bias.map(|b| {
        ins.push(b);
        ins.len() - 1
    });
    let ri = running.map(|(m, v)| {
        ins.push(m);
        ins.push(v);
        ins.len() - 2
    });
    let [out, sm, sv, rm, rv] = on_host("batch_norm", &ins, |h| {
        let x = h[0].to_f64_vec()?;
        let w = match wi {
            Some(i) => h[i].to_f64_vec()?,
            None => vec![1.0; c],
        };
        let b = match bi {
            Some(i) => h[i].to_f64_vec()?,
            None => vec![0.0; c],
        };
        let (mean, var, new_run) = if training {
            let (m, v) = channel_stats(&x, n, c, inner);
            let run = match ri {
                Some(i) => {
                    let (rm, rv) = (h[i].to_f64_vec()?, h[i + 1].to_f64_vec()?);
                    let cnt = (n * inner) as f64;
                    let unb = if cnt > 1.0 { cnt / (cnt - 1.0) } else { 1.0 };
                    let nm: Vec<f64> = rm.iter().zip(&m).map(|(r, x)| (1.0 - momentum) * r + momentum * x).collect();
                    let nv: Vec<f64> =
                        rv.iter().zip(&v).map(|(r, x)| (1.0 - momentum) * r + momentum * x * unb).collect();
                    Some((nm, nv, h[i].dtype(), h[i + 1].dtype()))
                }
                None => None,
            };
            (m, v, run)
        } else {
            let i = ri.expect("checked above");
            (h[i].to_f64_vec()?, h[i + 1].to_f64_vec()?, None)
        };
        let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let mut y = vec![0.0; x.len()];
        for bt in 0..n {
            for ch in 0..c {
                let o = (bt * c + ch) * inner;
                for k in 0..inner {
                    y[o + k] = (x[o + k] - mean[ch]) * invstd[ch] * w[ch] + b[ch];
                }
            }
        }
        let out = Tensor::from_f64(&y, h[0].sizes(), d)?;
        // a reduced-precision input with float32 parameters (mixed types, as autocast leaves
        // batch norm) saves its statistics in the parameters' dtype, as PyTorch's CPU kernel
        let sd = h[1..].iter().map(|t| t.dtype()).find(|&t| t != d).unwrap_or(d);
        let (sm, sv) = if training {
            (Tensor::from_f64(&mean, &[c], sd)?, Tensor::from_f64(&invstd, &[c], sd)?)
        } else {
            (Tensor::empty(&[0], sd), Tensor::empty(&[0], sd))
        };
        let (rm, rv) = match new_run {
            Some((nm, nv, dm, dv)) => (Tensor::from_f64(&nm, &[c], dm)?, Tensor::from_f64(&nv, &[c], dv)?),
            None => (Tensor::empty(&[0], d), Tensor::empty(&[0], d)),
        };
        Ok([out, sm, sv, rm, rv])
    })?;
    if let (Some((m, v)), true) = (running, training) {
        m.copy_(&rm)?;
        v.copy_(&rv)?;
    }
    Ok((out, sm, sv))
}

/// `native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
/// save_invstd, train, eps, output_mask)`: (grad_input, grad_weight, grad_bias). Training uses the
/// saved batch statistics (the batch mean and `1/sqrt(var + eps)`), evaluation the running ones;
/// in training the input's gradient includes the statistics' dependence on the input.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    weight: Option<&Tensor>,
    running: Option<(&Tensor, &Tensor)>,
    saved: Option<(&Tensor, &Tensor)>,
    train: bool,
    eps: f64,
    mask: [bool; 3],
) -> Result<[Option<Tensor>; 3]> {
    super::require_float("native_batch_norm_backward", input.dtype())?;
    if input.dim() < 2 || grad_out.sizes() != input.sizes() {
        return shape_err(format!(
            "native_batch_norm_backward: grad_out {:?} and input {:?} must be one shape of at least 2 dims",
            grad_out.sizes(),
            input.sizes()
        ));
    }
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let inner: usize = input.sizes()[2..].iter().product();
    let stats = if train { saved } else { running };
    let Some((sm, sv)) = stats else {
        return arg_err(if train {
            "native_batch_norm_backward: save_mean and save_invstd must be defined in training"
        } else {
            "native_batch_norm_backward: running_mean and running_var must be defined in evaluation"
        });
    };
    if sm.numel() != c || sv.numel() != c || weight.is_some_and(|w| w.numel() != c) {
        return shape_err(format!("native_batch_norm_backward: statistics and weight must have {c} elements"));
    }
    let d = input.dtype();
    let mut ins: Vec<&Tensor> = vec![grad_out, input, sm, sv];
    ins.extend(weight);
    let [gx, gw, gb] = on_host("native_batch_norm_backward", &ins, |h| {
        let dy = h[0].to_f64_vec()?;
        let x = h[1].to_f64_vec()?;
        let mean = h[2].to_f64_vec()?;
        let invstd: Vec<f64> = if train {
            h[3].to_f64_vec()?
        } else {
            h[3].to_f64_vec()?.iter().map(|v| 1.0 / (v + eps).sqrt()).collect()
        };
        let w = if h.len() > 4 { h[4].to_f64_vec()? } else { vec![1.0; c] };
        let cnt = (n * inner) as f64;
        let mut gi = vec![0.0; x.len()];
        let (mut gwv, mut gbv) = (vec![0.0; c], vec![0.0; c]);
        for ch in 0..c {
            let (mu, rs) = (mean[ch], invstd[ch]);
            let (mut sum, mut dot) = (0.0, 0.0);
            for b in 0..n {
                let o = (b * c + ch) * inner;
                for k in o..o + inner {
                    sum += dy[k];
                    dot += dy[k] * (x[k] - mu);
                }
            }
            gwv[ch] = dot * rs;
            gbv[ch] = sum;
            for b in 0..n {
                let o = (b * c + ch) * inner;
                for k in o..o + inner {
                    gi[k] = if train {
                        (dy[k] - sum / cnt - (x[k] - mu) * rs * rs * dot / cnt) * rs * w[ch]
                    } else {
                        dy[k] * rs * w[ch]
                    };
                }
            }
        }
        Ok([
            Tensor::from_f64(&gi, h[1].sizes(), d)?,
            Tensor::from_f64(&gwv, &[c], d)?,
            Tensor::from_f64(&gbv, &[c], d)?,
        ])
    })?;
    Ok([mask[0].then_some(gx), mask[1].then_some(gw), mask[2].then_some(gb)])
}

/// `native_group_norm(input, weight, bias, N, C, HxW, group, eps)`: (output, mean, rstd), the
/// statistics `[N, group]`.
#[allow(clippy::too_many_arguments)]
pub fn group_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    n: usize,
    c: usize,
    hxw: usize,
    group: usize,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    super::require_float("group_norm", input.dtype())?;
    if group == 0 || !c.is_multiple_of(group) {
        return arg_err(format!(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape {:?} and num_groups={group}",
            input.sizes()
        ));
    }
    if input.numel() != n * c * hxw {
        return shape_err(format!("group_norm: input {:?} is not N={n} x C={c} x HxW={hxw}", input.sizes()));
    }
    let d = input.dtype();
    let mut ins: Vec<&Tensor> = vec![input];
    let wi = weight.map(|w| {
        ins.push(w);
        ins.len() - 1
    });
    let bi = bias.map(|b| {
        ins.push(b);
        ins.len() - 1
    });
    let [out, mean, rstd] = on_host("native_group_norm", &ins, |h| {
        let x = h[0].to_f64_vec()?;
        let w = match wi {
            Some(i) => h[i].to_f64_vec()?,
            None => vec![1.0; c],
        };
        let b = match bi {
            Some(i) => h[i].to_f64_vec()?,
            None => vec![0.0; c],
        };
        let cg = c / group;
        let len = cg * hxw;
        let mut y = vec![0.0; x.len()];
        let mut ms = Vec::with_capacity(n * group);
        let mut rs = Vec::with_capacity(n * group);
        for bt in 0..n {
            for g in 0..group {
                let o = (bt * c + g * cg) * hxw;
                let seg = &x[o..o + len];
                let m = seg.iter().sum::<f64>() / len as f64;
                let v = seg.iter().map(|e| (e - m) * (e - m)).sum::<f64>() / len as f64;
                let r = 1.0 / (v + eps).sqrt();
                for ci in 0..cg {
                    let ch = g * cg + ci;
                    for k in 0..hxw {
                        let j = o + ci * hxw + k;
                        y[j] = (x[j] - m) * r * w[ch] + b[ch];
                    }
                }
                ms.push(m);
                rs.push(r);
            }
        }
        Ok([
            Tensor::from_f64(&y, h[0].sizes(), d)?,
            Tensor::from_f64(&ms, &[n, group], d)?,
            Tensor::from_f64(&rs, &[n, group], d)?,
        ])
    })?;
    Ok((out, mean, rstd))
}

/// `clamp.Tensor(x, min, max)`: `min(max(x, min), max)` with broadcasting and type promotion; NaN
/// in any operand gives NaN.
/// xirang-fallback: clamp.Tensor
pub fn clamp_tensor(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return arg_err("torch.clamp: At least one of 'min' or 'max' must not be None");
    }
    let mut d = x.dtype();
    let mut shape = x.sizes().to_vec();
    for t in [min, max].into_iter().flatten() {
        d = promote_types(d, t.dtype());
        shape = crate::shape::broadcast_shapes(&shape, t.sizes())?;
    }
    let mut ins: Vec<&Tensor> = vec![x];
    ins.extend([min, max].into_iter().flatten());
    on_host1("clamp.Tensor", &ins, |h| {
        let xv = super::f64s(&h[0], &shape)?;
        let mut k = 1;
        let lo = if min.is_some() {
            k += 1;
            Some(super::f64s(&h[k - 1], &shape)?)
        } else {
            None
        };
        let hi = if max.is_some() { Some(super::f64s(&h[k], &shape)?) } else { None };
        let r: Vec<f64> = (0..xv.len())
            .map(|i| {
                let mut v = xv[i];
                if let Some(lo) = &lo {
                    v = if v.is_nan() || lo[i].is_nan() { f64::NAN } else { v.max(lo[i]) };
                }
                if let Some(hi) = &hi {
                    v = if v.is_nan() || hi[i].is_nan() { f64::NAN } else { v.min(hi[i]) };
                }
                v
            })
            .collect();
        Tensor::from_f64(&r, &shape, d)
    })
}

/// `torch.arange(start, end, step, dtype)`: the dtype defaults to int64 when all three are
/// integers, else the default float dtype (f32).
pub fn arange(start: Scalar, end: Scalar, step: Scalar, dtype: Option<DType>) -> Result<Tensor> {
    let ints = [start, end, step].iter().all(|s| matches!(s, Scalar::Int(_) | Scalar::Bool(_)));
    let d = dtype.unwrap_or(if ints { DType::I64 } else { DType::F32 });
    let (a, b, s) = (start.to_f64(), end.to_f64(), step.to_f64());
    if s == 0.0 {
        return arg_err("step must be nonzero");
    }
    if !(a.is_finite() && b.is_finite()) {
        return arg_err(format!("unsupported range: {a} -> {b}"));
    }
    if (s > 0.0 && b < a) || (s < 0.0 && b > a) {
        return arg_err("upper bound and larger bound inconsistent with step sign");
    }
    let n = ((b - a) / s).ceil().max(0.0) as usize;
    if d.is_floating() {
        let v: Vec<f64> = (0..n).map(|i| a + i as f64 * s).collect();
        Tensor::from_f64(&v, &[n], d)
    } else {
        let (ai, si) = (start.to_f64() as i64, step.to_f64() as i64);
        let v: Vec<i64> = if ints {
            (0..n as i64).map(|i| ai + i * si).collect()
        } else {
            (0..n).map(|i| (a + i as f64 * s) as i64).collect()
        };
        Tensor::from_i64(&v, &[n], d)
    }
}

/// `Tensor.diagonal(offset, dim1, dim2)`: a view (no copy) of the diagonal, appended as the last
/// dimension.
/// xirang-fallback: diagonal
pub fn diagonal(x: &Tensor, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
    let nd = x.dim();
    let (d1, d2) = (wrap_dim(dim1, nd)?, wrap_dim(dim2, nd)?);
    if d1 == d2 {
        return arg_err(format!("diagonal dimensions cannot be identical {dim1}, {dim2}"));
    }
    let (s, st) = (x.sizes(), x.strides());
    let (len, off) = if offset >= 0 {
        let len = (s[d2] as i64 - offset).min(s[d1] as i64).max(0) as usize;
        (len, if len > 0 { offset as usize * st[d2] } else { 0 })
    } else {
        let len = (s[d1] as i64 + offset).min(s[d2] as i64).max(0) as usize;
        (len, if len > 0 { (-offset) as usize * st[d1] } else { 0 })
    };
    let mut sizes = Vec::with_capacity(nd - 1);
    let mut strides = Vec::with_capacity(nd - 1);
    for k in 0..nd {
        if k != d1 && k != d2 {
            sizes.push(s[k]);
            strides.push(st[k]);
        }
    }
    sizes.push(len);
    strides.push(st[d1] + st[d2]);
    x.as_strided(&sizes, &strides, x.storage_offset() + off)
}

/// `Tensor.split_with_sizes(split_sizes, dim)`: views along `dim`.
pub fn split_with_sizes(x: &Tensor, split_sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
    let d = wrap_dim(dim, x.dim())?;
    let total: i64 = split_sizes.iter().sum();
    if split_sizes.iter().any(|&s| s < 0) || total != x.sizes()[d] as i64 {
        return arg_err(format!(
            "split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension {d}), but got split_sizes={split_sizes:?}",
            x.sizes()[d]
        ));
    }
    let mut at = 0i64;
    split_sizes
        .iter()
        .map(|&s| {
            let v = x.narrow(d as i64, at, s as usize);
            at += s;
            v
        })
        .collect()
}

/// `Tensor.squeeze(dims)`: a view without the listed dimensions of size 1.
/// xirang-fallback: squeeze.dims
pub fn squeeze_dims(x: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let nd = x.dim();
    let mut drop = vec![false; nd];
    for &d in dims {
        let w = wrap_dim(d, nd)?;
        if nd > 0 && x.sizes()[w] == 1 {
            drop[w] = true;
        }
    }
    let sizes: Vec<usize> = (0..nd).filter(|&k| !drop[k]).map(|k| x.sizes()[k]).collect();
    let strides: Vec<usize> = (0..nd).filter(|&k| !drop[k]).map(|k| x.strides()[k]).collect();
    x.as_strided(&sizes, &strides, x.storage_offset())
}

// ------------------------------------------------------------ padding, resampling, pooling (2)

/// Padding mode of [`pad_nd`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// `reflection_pad*d`: mirrored about the edge element (the edge is not repeated).
    Reflect,
    /// `replication_pad*d`: the edge element repeated.
    Replicate,
}

/// `reflection_pad{1,2,3}d` / `replication_pad{2,3}d`: `pad` holds (before, after) pairs from the
/// last dimension backwards, `pad.len() / 2` spatial dimensions; leading dimensions are batch /
/// channel.
pub fn pad_nd(x: &Tensor, pad: &[i64], mode: PadMode) -> Result<Tensor> {
    let name = match mode {
        PadMode::Reflect => "reflection_pad",
        PadMode::Replicate => "replication_pad",
    };
    let k = pad.len() / 2;
    if !pad.len().is_multiple_of(2) || k == 0 || x.dim() < k + 1 || x.dim() > k + 2 {
        return shape_err(format!(
            "{name}{k}d: expected a {}-d or {}-d input and {} padding values, got input {:?}",
            k + 1,
            k + 2,
            2 * k,
            x.sizes()
        ));
    }
    let nd = x.dim();
    let mut before = vec![0i64; nd];
    let mut out: Vec<usize> = x.sizes().to_vec();
    for j in 0..k {
        let dim = nd - 1 - j;
        let (b, a) = (pad[2 * j], pad[2 * j + 1]);
        let size = x.sizes()[dim] as i64;
        if mode == PadMode::Reflect && (b >= size || a >= size || b < 0 || a < 0) {
            return arg_err(format!(
                "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({b}, {a}) at dimension {dim} of input {:?}",
                x.sizes()
            ));
        }
        if size == 0 || size + b + a <= 0 {
            return shape_err(format!(
                "{name}: input size {size} with padding ({b}, {a}) at dimension {dim} is too small"
            ));
        }
        before[dim] = b;
        out[dim] = (size + b + a) as usize;
    }
    on_host1(if mode == PadMode::Reflect { "reflection_pad" } else { "replication_pad" }, &[x], |h| {
        let s = h[0].sizes().to_vec();
        let st = contiguous_strides(&s);
        remap(&h[0], &out, Scalar::Int(0), |mi| {
            let mut off = 0usize;
            for d in 0..mi.len() {
                let n = s[d] as i64;
                let mut i = mi[d] as i64 - before[d];
                if i < 0 || i >= n {
                    i = match mode {
                        PadMode::Reflect => {
                            if i < 0 {
                                -i
                            } else {
                                2 * (n - 1) - i
                            }
                        }
                        PadMode::Replicate => i.clamp(0, n - 1),
                    };
                }
                off += i as usize * st[d];
            }
            Some(off)
        })
    })
}

/// `adaptive_avg_pool{1,2,3}d` over the last `output_size.len()` dimensions: window `i` of an
/// input length `n` and output length `m` is `[floor(i n / m), ceil((i + 1) n / m))`.
/// xirang-fallback: _adaptive_avg_pool2d, _adaptive_avg_pool3d, adaptive_avg_pool1d
pub fn adaptive_avg_pool(x: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let k = output_size.len();
    super::require_float("adaptive_avg_pool", x.dtype())?;
    if x.dim() < k + 1 || x.dim() > k + 2 || output_size.iter().any(|&o| o < 0) {
        return shape_err(format!(
            "adaptive_avg_pool{k}d: expected a {}-d or {}-d input, got {:?}",
            k + 1,
            k + 2,
            x.sizes()
        ));
    }
    let nd = x.dim();
    let ins: Vec<usize> = x.sizes()[nd - k..].to_vec();
    if ins.contains(&0) {
        return shape_err(format!("adaptive_avg_pool{k}d: empty spatial dimension in {:?}", x.sizes()));
    }
    let outs = usize_list("adaptive_avg_pool", output_size)?;
    on_host1("adaptive_avg_pool", &[x], |h| {
        let v = h[0].to_f64_vec()?;
        let isp: usize = ins.iter().product();
        let planes = v.len().checked_div(isp).unwrap_or(0);
        let ist = contiguous_strides(&ins);
        let mut shape = h[0].sizes()[..nd - k].to_vec();
        shape.extend_from_slice(&outs);
        let osp: usize = outs.iter().product();
        let mut r = Vec::with_capacity(planes * osp);
        for p in 0..planes {
            let base = p * isp;
            each_index(&outs, |oi, _| {
                let bounds: Vec<(usize, usize)> =
                    (0..k).map(|d| ((oi[d] * ins[d]) / outs[d], ((oi[d] + 1) * ins[d]).div_ceil(outs[d]))).collect();
                let win: Vec<usize> = bounds.iter().map(|(a, b)| b - a).collect();
                let mut sum = 0.0;
                each_index(&win, |wi, _| {
                    let off: usize = (0..k).map(|d| (bounds[d].0 + wi[d]) * ist[d]).sum();
                    sum += v[base + off];
                    Ok(())
                })?;
                r.push(sum / numel(&win) as f64);
                Ok(())
            })?;
        }
        Tensor::from_f64(&r, &shape, h[0].dtype())
    })
}

/// `avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad)`: `avg_pool2d`
/// over a height of 1.
/// xirang-fallback: avg_pool1d
pub fn avg_pool1d(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
) -> Result<Tensor> {
    if !(2..=3).contains(&x.dim()) {
        return shape_err("avg_pool1d: expected a 2-d or 3-d input");
    }
    let one = |v: &[i64], d: i64| -> Vec<i64> { if v.is_empty() { vec![] } else { vec![d, v[0]] } };
    let k = one(kernel, 1);
    let s = if stride.is_empty() { vec![] } else { one(stride, 1) };
    let p = if padding.is_empty() { vec![0, 0] } else { one(padding, 0) };
    let r = avg_pool2d(&x.unsqueeze(-2)?, &k, &s, &p, ceil_mode, count_include_pad, None)?;
    r.squeeze_dim(-2)
}

/// `upsample_nearest2d.vec(x, output_size, scale_factors)`: source index `floor(dst * scale)`,
/// `scale = 1 / scale_factor` when factors are given, else `in / out`.
pub fn upsample_nearest2d(x: &Tensor, output_size: Option<&[i64]>, scale_factors: Option<&[f64]>) -> Result<Tensor> {
    if x.dim() != 4 && x.dim() != 3 {
        return shape_err(format!("upsample_nearest2d: expected a 3-d or 4-d input, got {:?}", x.sizes()));
    }
    let nd = x.dim();
    let (ih, iw) = (x.sizes()[nd - 2], x.sizes()[nd - 1]);
    let (oh, ow, sh, sw) = match (output_size, scale_factors) {
        (Some(o), None) if o.len() == 2 => {
            let (oh, ow) = (usize_list("upsample_nearest2d", o)?[0], usize_list("upsample_nearest2d", o)?[1]);
            (oh, ow, ih as f64 / oh.max(1) as f64, iw as f64 / ow.max(1) as f64)
        }
        (None, Some(f)) if f.len() == 2 && f.iter().all(|v| *v > 0.0) => {
            let (oh, ow) = ((ih as f64 * f[0]).floor() as usize, (iw as f64 * f[1]).floor() as usize);
            (oh, ow, 1.0 / f[0], 1.0 / f[1])
        }
        _ => {
            return arg_err(
                "upsample_nearest2d: give exactly one of output_size (2 values) and scale_factors (2 positive values)",
            );
        }
    };
    let mut out = x.sizes().to_vec();
    out[nd - 2] = oh;
    out[nd - 1] = ow;
    on_host1("upsample_nearest2d", &[x], |h| {
        let st = contiguous_strides(h[0].sizes());
        remap(&h[0], &out, Scalar::Int(0), |mi| {
            let sy = ((mi[nd - 2] as f64 * sh) as usize).min(ih - 1);
            let sx = ((mi[nd - 1] as f64 * sw) as usize).min(iw - 1);
            let mut off = sy * st[nd - 2] + sx * st[nd - 1];
            for d in 0..nd - 2 {
                off += mi[d] * st[d];
            }
            Some(off)
        })
    })
}

/// `avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override)`: each output's gradient spread evenly over its window.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward(
    grad_output: &Tensor,
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let win = super::core_aten_more::windows("avg_pool2d_backward", 2, kernel, stride, padding, &[1])?;
    super::core_aten_more::avg_pool_nd_backward(
        "avg_pool2d_backward",
        grad_output,
        x,
        &win,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )
}

/// `max_pool2d_with_indices_backward(grad_output, x, ..., indices)`: each output's gradient added
/// at the input position its index names.
pub fn max_pool2d_with_indices_backward(grad_output: &Tensor, x: &Tensor, indices: &Tensor) -> Result<Tensor> {
    if !(3..=4).contains(&x.dim()) || grad_output.sizes() != indices.sizes() {
        return shape_err(
            "max_pool2d_with_indices_backward: expected a 3-d or 4-d input and indices shaped like grad_output",
        );
    }
    let nd = x.dim();
    let (h, w) = (x.sizes()[nd - 2], x.sizes()[nd - 1]);
    let planes = x.numel() / (h * w).max(1);
    on_host1("max_pool2d_with_indices_backward", &[grad_output, x, indices], |hs| {
        let g = hs[0].to_f64_vec()?;
        let idx = hs[2].to_i64_vec()?;
        let per = g.len().checked_div(planes).unwrap_or(0);
        let mut gi = vec![0.0; planes * h * w];
        for (j, (gv, &i)) in g.iter().zip(&idx).enumerate() {
            let pl = j / per.max(1);
            if i < 0 || i as usize >= h * w {
                return index_err(format!("max_pool2d backward: index {i} out of range for a {h}x{w} plane"));
            }
            gi[pl * h * w + i as usize] += gv;
        }
        Tensor::from_f64(&gi, hs[1].sizes(), hs[1].dtype())
    })
}

/// `convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
/// transposed=False, output_padding, groups, output_mask)`: (grad_input, grad_weight,
/// grad_bias), `None` where the mask is off (or no bias).
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    has_bias: bool,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    groups: i64,
    mask: [bool; 3],
) -> Result<[Option<Tensor>; 3]> {
    if transposed {
        return Err(Error::Unsupported(
            "convolution_backward: transposed convolution has no host implementation".into(),
        ));
    }
    // the forward checks the geometry (and gives the output sizes)
    let out = convolution(input, weight, None, stride, padding, dilation, false, groups)?;
    if out.sizes() != grad_output.sizes() {
        return shape_err(format!(
            "convolution_backward: grad_output {:?} for an output {:?}",
            grad_output.sizes(),
            out.sizes()
        ));
    }
    let sp = weight.dim() - 2;
    let expand = |v: &[i64]| if v.len() == 1 { vec![v[0]; sp] } else { v.to_vec() };
    let (st, pd, dl) = (expand(stride), expand(padding), expand(dilation));
    let g = groups as usize;
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let (o, cg) = (weight.sizes()[0], weight.sizes()[1]);
    let ins: Vec<usize> = input.sizes()[2..].to_vec();
    let ks: Vec<usize> = weight.sizes()[2..].to_vec();
    let outs: Vec<usize> = out.sizes()[2..].to_vec();
    let d = input.dtype();
    let [gx, gw, gb] = on_host("convolution_backward", &[grad_output, input, weight], |h| {
        let go = h[0].to_f64_vec()?;
        let x = h[1].to_f64_vec()?;
        let w = h[2].to_f64_vec()?;
        let og = o / g;
        let xsp: usize = ins.iter().product();
        let ksp: usize = ks.iter().product();
        let osp: usize = outs.iter().product();
        let (xst, kst, ost) = (contiguous_strides(&ins), contiguous_strides(&ks), contiguous_strides(&outs));
        let mut gi = vec![0.0; x.len()];
        let mut gwv = vec![0.0; w.len()];
        let mut gbv = vec![0.0; o];
        for b_i in 0..n {
            for oc in 0..o {
                let grp = oc / og;
                for op_lin in 0..osp {
                    let gv = go[(b_i * o + oc) * osp + op_lin];
                    gbv[oc] += gv;
                    if gv == 0.0 {
                        continue;
                    }
                    let opos: Vec<usize> = (0..sp).map(|k| (op_lin / ost[k]) % outs[k]).collect();
                    for ic in 0..cg {
                        let xbase = (b_i * c + grp * cg + ic) * xsp;
                        let wbase = (oc * cg + ic) * ksp;
                        'k: for kl in 0..ksp {
                            let mut xoff = 0usize;
                            for k in 0..sp {
                                let kk = (kl / kst[k]) % ks[k];
                                let pos = opos[k] as i64 * st[k] - pd[k] + kk as i64 * dl[k];
                                if pos < 0 || pos >= ins[k] as i64 {
                                    continue 'k;
                                }
                                xoff += pos as usize * xst[k];
                            }
                            gi[xbase + xoff] += gv * w[wbase + kl];
                            gwv[wbase + kl] += gv * x[xbase + xoff];
                        }
                    }
                }
            }
        }
        Ok([
            Tensor::from_f64(&gi, h[1].sizes(), d)?,
            Tensor::from_f64(&gwv, h[2].sizes(), d)?,
            Tensor::from_f64(&gbv, &[o], d)?,
        ])
    })?;
    Ok([mask[0].then_some(gx), mask[1].then_some(gw), (mask[2] && has_bias).then_some(gb)])
}

/// `native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
/// output_mask)`: (grad_input, grad_weight, grad_bias).
#[allow(clippy::too_many_arguments)]
pub fn group_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    n: usize,
    c: usize,
    hxw: usize,
    group: usize,
    mask: [bool; 3],
) -> Result<[Option<Tensor>; 3]> {
    if group == 0 || !c.is_multiple_of(group) || input.numel() != n * c * hxw || grad_out.sizes() != input.sizes() {
        return shape_err(format!(
            "native_group_norm_backward: input {:?} is not N={n} x C={c} x HxW={hxw} in {group} groups",
            input.sizes()
        ));
    }
    let d = input.dtype();
    let mut ins: Vec<&Tensor> = vec![grad_out, input, mean, rstd];
    if let Some(w) = weight {
        ins.push(w);
    }
    let [gx, gw, gb] = on_host("native_group_norm_backward", &ins, |h| {
        let dy = h[0].to_f64_vec()?;
        let x = h[1].to_f64_vec()?;
        let m = h[2].to_f64_vec()?;
        let r = h[3].to_f64_vec()?;
        let w = if h.len() > 4 { h[4].to_f64_vec()? } else { vec![1.0; c] };
        let cg = c / group;
        let len = (cg * hxw) as f64;
        let mut gi = vec![0.0; x.len()];
        let mut gwv = vec![0.0; c];
        let mut gbv = vec![0.0; c];
        for bt in 0..n {
            for g in 0..group {
                let (mu, rs) = (m[bt * group + g], r[bt * group + g]);
                let o = (bt * c + g * cg) * hxw;
                let (mut s1, mut s2) = (0.0, 0.0);
                for ci in 0..cg {
                    let ch = g * cg + ci;
                    for k in 0..hxw {
                        let j = o + ci * hxw + k;
                        let xh = (x[j] - mu) * rs;
                        gwv[ch] += dy[j] * xh;
                        gbv[ch] += dy[j];
                        let dyw = dy[j] * w[ch];
                        s1 += dyw;
                        s2 += dyw * xh;
                    }
                }
                for ci in 0..cg {
                    let ch = g * cg + ci;
                    for k in 0..hxw {
                        let j = o + ci * hxw + k;
                        let xh = (x[j] - mu) * rs;
                        gi[j] = rs / len * (len * dy[j] * w[ch] - s1 - xh * s2);
                    }
                }
            }
        }
        Ok([
            Tensor::from_f64(&gi, h[1].sizes(), d)?,
            Tensor::from_f64(&gwv, &[c], d)?,
            Tensor::from_f64(&gbv, &[c], d)?,
        ])
    })?;
    Ok([mask[0].then_some(gx), (mask[1] && weight.is_some()).then_some(gw), mask[2].then_some(gb)])
}

/// `_cdist_forward(x1, x2, p, compute_mode)`: p-norm distances between the rows of `[..., P, M]`
/// and `[..., R, M]` (batch dimensions broadcast), `p = inf` the max norm.
pub fn cdist(x1: &Tensor, x2: &Tensor, p: f64) -> Result<Tensor> {
    super::require_float("cdist", x1.dtype())?;
    if x1.dim() < 2 || x2.dim() < 2 || x1.sizes()[x1.dim() - 1] != x2.sizes()[x2.dim() - 1] || p < 0.0 {
        return arg_err(format!(
            "cdist: X1 {:?} and X2 {:?} must have the same number of columns (and p >= 0)",
            x1.sizes(),
            x2.sizes()
        ));
    }
    let (pr, m) = (x1.sizes()[x1.dim() - 2], x1.sizes()[x1.dim() - 1]);
    let r = x2.sizes()[x2.dim() - 2];
    let batch = crate::shape::broadcast_shapes(&x1.sizes()[..x1.dim() - 2], &x2.sizes()[..x2.dim() - 2])?;
    let mut s1 = batch.clone();
    s1.extend([pr, m]);
    let mut s2 = batch.clone();
    s2.extend([r, m]);
    on_host1("cdist", &[x1, x2], |h| {
        let a = super::f64s(&h[0], &s1)?;
        let b = super::f64s(&h[1], &s2)?;
        let nb = numel(&batch);
        let mut out = Vec::with_capacity(nb * pr * r);
        for bi in 0..nb {
            for i in 0..pr {
                for j in 0..r {
                    let (ra, rb) = (&a[(bi * pr + i) * m..][..m], &b[(bi * r + j) * m..][..m]);
                    let diffs = ra.iter().zip(rb).map(|(u, v)| (u - v).abs());
                    let dist = if p == 0.0 {
                        diffs.filter(|d| *d != 0.0).count() as f64
                    } else if p.is_infinite() {
                        diffs.fold(0.0, f64::max)
                    } else {
                        diffs.map(|d| d.powf(p)).sum::<f64>().powf(1.0 / p)
                    };
                    out.push(dist);
                }
            }
        }
        let mut shape = batch.clone();
        shape.extend([pr, r]);
        Tensor::from_f64(&out, &shape, h[0].dtype())
    })
}

/// `_pdist_forward(x, p)`: the distances between the rows of `[N, M]`, upper triangle, row-major.
/// xirang-fallback: _pdist_forward
pub fn pdist(x: &Tensor, p: f64) -> Result<Tensor> {
    if x.dim() != 2 {
        return shape_err(format!("pdist only supports 2D tensors, got: {}D", x.dim()));
    }
    let full = cdist(x, x, p)?.to_cpu()?.to_f64_vec()?;
    let n = x.sizes()[0];
    let mut v = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            v.push(full[i * n + j]);
        }
    }
    let t = Tensor::from_f64(&v, &[v.len()], x.dtype())?;
    super::on_device_of(t, x)
}

/// `scatter_reduce.two(x, dim, index, src, reduce, include_self)`: `reduce` is `sum`, `prod`,
/// `mean`, `amax` or `amin`; without `include_self` the scattered-to elements start from the
/// first scattered value (positions nothing is scattered to keep `x`'s value).
/// xirang-fallback: scatter_reduce.two
pub fn scatter_reduce(
    x: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    let d = wrap_dim(dim, x.dim())?;
    if !matches!(reduce, "sum" | "prod" | "mean" | "amax" | "amin") {
        return arg_err(format!("reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"));
    }
    if src.dtype() != x.dtype() {
        return dtype_err(format!(
            "scatter(): Expected self.dtype to be equal to src.dtype (got {} and {})",
            x.dtype().name(),
            src.dtype().name()
        ));
    }
    check_scatter("scatter_reduce", x, d, index, Some(src))?;
    let reduce = reduce.to_string();
    on_host1("scatter_reduce", &[x, index, src], |h| {
        let dt = h[0].dtype();
        let xs = if h[0].dim() == 0 { vec![1] } else { h[0].sizes().to_vec() };
        let xst = contiguous_strides(&xs);
        let mut acc = h[0].to_f64_vec()?;
        let mut count = vec![usize::from(include_self); acc.len()];
        let idx = h[1].to_i64_vec()?;
        let is = if h[1].dim() == 0 { vec![1] } else { h[1].sizes().to_vec() };
        let ss = if h[2].dim() == 0 { vec![1] } else { h[2].sizes().to_vec() };
        let sst = contiguous_strides(&ss);
        let sv = h[2].to_f64_vec()?;
        each_index(&is, |mi, lin| {
            let i = idx[lin];
            if i < 0 || i as usize >= xs[d] {
                return index_err(format!("index {i} is out of bounds for dimension {d} with size {}", xs[d]));
            }
            let off: usize = mi.iter().enumerate().map(|(k, &v)| if k == d { i as usize } else { v } * xst[k]).sum();
            let v = sv[mi.iter().zip(&sst).map(|(a, s)| a * s).sum::<usize>()];
            let a = &mut acc[off];
            *a = if count[off] == 0 {
                v
            } else {
                match reduce.as_str() {
                    "sum" | "mean" => *a + v,
                    "prod" => *a * v,
                    "amax" => {
                        if v.is_nan() || v > *a {
                            v
                        } else {
                            *a
                        }
                    }
                    _ => {
                        if v.is_nan() || v < *a {
                            v
                        } else {
                            *a
                        }
                    }
                }
            };
            count[off] += 1;
            Ok(())
        })?;
        if reduce == "mean" {
            for (a, &n) in acc.iter_mut().zip(&count) {
                if n > 0 {
                    *a /= n as f64;
                    if !dt.is_floating() {
                        // PyTorch's integer mean floors
                        *a = a.floor();
                    }
                }
            }
        }
        if dt.is_floating() {
            Tensor::from_f64(&acc, h[0].sizes(), dt)
        } else {
            let v: Vec<i64> = acc.iter().map(|a| *a as i64).collect();
            Tensor::from_i64(&v, h[0].sizes(), dt)
        }
    })
}

/// `_adaptive_avg_pool2d_backward(grad_output, x)`: each output's gradient spread evenly over
/// its adaptive window.
/// xirang-fallback: _adaptive_avg_pool2d_backward
pub fn adaptive_avg_pool2d_backward(grad_output: &Tensor, x: &Tensor) -> Result<Tensor> {
    if !(3..=4).contains(&x.dim()) || grad_output.dim() != x.dim() {
        return shape_err("_adaptive_avg_pool2d_backward: expected 3-d or 4-d input and grad_output");
    }
    let nd = x.dim();
    let (h, w) = (x.sizes()[nd - 2], x.sizes()[nd - 1]);
    let (oh, ow) = (grad_output.sizes()[nd - 2], grad_output.sizes()[nd - 1]);
    if oh == 0 || ow == 0 {
        return shape_err("_adaptive_avg_pool2d_backward: empty output");
    }
    let planes = x.numel() / (h * w).max(1);
    on_host1("_adaptive_avg_pool2d_backward", &[grad_output, x], |hs| {
        let g = hs[0].to_f64_vec()?;
        let mut gi = vec![0.0; planes * h * w];
        for pl in 0..planes {
            for y in 0..oh {
                let (y0, y1) = ((y * h) / oh, ((y + 1) * h).div_ceil(oh));
                for xx in 0..ow {
                    let (x0, x1) = ((xx * w) / ow, ((xx + 1) * w).div_ceil(ow));
                    let gv = g[(pl * oh + y) * ow + xx] / ((y1 - y0) * (x1 - x0)) as f64;
                    for iy in y0..y1 {
                        for ix in x0..x1 {
                            gi[pl * h * w + iy * w + ix] += gv;
                        }
                    }
                }
            }
        }
        Tensor::from_f64(&gi, hs[1].sizes(), hs[1].dtype())
    })
}

/// PyTorch's `area_pixel_compute_scale` / `area_pixel_compute_source_index` for linear modes.
fn linear_source(
    input: usize,
    output: usize,
    align_corners: bool,
    scale_factor: Option<f64>,
) -> impl Fn(usize) -> (usize, usize, f64) {
    let scale = if align_corners {
        if output > 1 { (input as f64 - 1.0) / (output as f64 - 1.0) } else { 0.0 }
    } else {
        match scale_factor {
            Some(f) if f > 0.0 => 1.0 / f,
            _ => input as f64 / output as f64,
        }
    };
    move |dst: usize| {
        let src = if align_corners { scale * dst as f64 } else { (scale * (dst as f64 + 0.5) - 0.5).max(0.0) };
        let i0 = (src.floor() as usize).min(input - 1);
        let i1 = if i0 < input - 1 { i0 + 1 } else { i0 };
        (i0, i1, (src - i0 as f64).clamp(0.0, 1.0))
    }
}

/// `upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors)`.
pub fn upsample_bilinear2d(
    x: &Tensor,
    output_size: Option<&[i64]>,
    align_corners: bool,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    super::require_float("upsample_bilinear2d", x.dtype())?;
    if x.dim() != 4 {
        return shape_err(format!("upsample_bilinear2d: expected a 4-d input, got {:?}", x.sizes()));
    }
    let (ih, iw) = (x.sizes()[2], x.sizes()[3]);
    if ih == 0 || iw == 0 {
        return shape_err("upsample_bilinear2d: empty input plane");
    }
    let (oh, ow, fh, fw) = match (output_size, scale_factors) {
        (Some(o), None) if o.len() == 2 => {
            let o = usize_list("upsample_bilinear2d", o)?;
            (o[0], o[1], None, None)
        }
        (None, Some(f)) if f.len() == 2 && f.iter().all(|v| *v > 0.0) => {
            ((ih as f64 * f[0]).floor() as usize, (iw as f64 * f[1]).floor() as usize, Some(f[0]), Some(f[1]))
        }
        _ => {
            return arg_err(
                "upsample_bilinear2d: give exactly one of output_size (2 values) and scale_factors (2 positive values)",
            );
        }
    };
    let sy = linear_source(ih, oh, align_corners, fh);
    let sx = linear_source(iw, ow, align_corners, fw);
    let planes = x.sizes()[0] * x.sizes()[1];
    on_host1("upsample_bilinear2d", &[x], |h| {
        let v = h[0].to_f64_vec()?;
        let mut out = Vec::with_capacity(planes * oh * ow);
        for p in 0..planes {
            let base = p * ih * iw;
            for y in 0..oh {
                let (y0, y1, ly) = sy(y);
                for xx in 0..ow {
                    let (x0, x1, lx) = sx(xx);
                    let at = |a: usize, b: usize| v[base + a * iw + b];
                    out.push(
                        (1.0 - ly) * ((1.0 - lx) * at(y0, x0) + lx * at(y0, x1))
                            + ly * ((1.0 - lx) * at(y1, x0) + lx * at(y1, x1)),
                    );
                }
            }
        }
        Tensor::from_f64(&out, &[x.sizes()[0], x.sizes()[1], oh, ow], h[0].dtype())
    })
}
