//! Indexing: cat, index_select, gather, scatter_add, tril / triu.

use super::{on_host, on_host1, operand};
use crate::dtype::{DType, load_f64, load_i64, result_type, store_f64, store_i64};
use crate::error::{Error, Result, dtype_err, index_err, shape_err};
use crate::shape::{contiguous_strides, wrap_dim};
use crate::tensor::Tensor;

fn check_index_dtype(name: &str, index: &Tensor, allow_i32: bool) -> Result<()> {
    match index.dtype() {
        DType::I64 => Ok(()),
        DType::I32 if allow_i32 => Ok(()),
        d => dtype_err(format!("{name}(): Expected dtype int64 for index (got {})", d.name())),
    }
}

/// `torch.cat(tensors, dim)`: the result dtype is the promotion of all
/// inputs; legacy 1-D empty tensors (`[0]`) are skipped.
pub fn cat(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
    if tensors.is_empty() {
        return Err(Error::InvalidArgument("torch.cat(): expected a non-empty list of Tensors".into()));
    }
    if let Some(t) = tensors.iter().find(|t| t.dim() == 0) {
        return shape_err(format!(
            "zero-dimensional tensor (at position {}) cannot be concatenated",
            tensors.iter().position(|x| std::ptr::eq(*x, *t)).unwrap_or(0)
        ));
    }
    let d = result_type(&tensors.iter().map(|t| operand(t)).collect::<Vec<_>>())
        .ok_or_else(|| Error::DType("no operands".into()))?;
    let parts: Vec<&Tensor> = tensors.iter().copied().filter(|t| t.sizes() != [0]).collect();
    let Some(first) = parts.first() else {
        return Ok(Tensor::empty(&[0], d));
    };
    let nd = first.dim();
    let dim = wrap_dim(dim, nd)?;
    for (i, t) in parts.iter().enumerate() {
        if t.dim() != nd {
            return shape_err(format!("Tensors must have same number of dimensions: got {nd} and {}", t.dim()));
        }
        for k in 0..nd {
            if k != dim && t.sizes()[k] != first.sizes()[k] {
                return shape_err(format!(
                    "Sizes of tensors must match except in dimension {dim}. Expected size {} but got size {} for tensor number {i} in the list.",
                    first.sizes()[k],
                    t.sizes()[k]
                ));
            }
        }
    }
    on_host1("cat", &parts, |h| {
        let mut sizes = h[0].sizes().to_vec();
        sizes[dim] = h.iter().map(|t| t.sizes()[dim]).sum();
        let outer: usize = sizes[..dim].iter().product();
        let inner: usize = sizes[dim + 1..].iter().product();
        let es = d.size();
        let bytes: Vec<Vec<u8>> =
            h.iter().map(|t| t.to_dtype(d).and_then(|c| c.gather_bytes())).collect::<Result<_>>()?;
        let mut out = Vec::with_capacity(crate::shape::numel(&sizes) * es);
        for o in 0..outer {
            for (t, b) in h.iter().zip(&bytes) {
                let chunk = t.sizes()[dim] * inner * es;
                out.extend_from_slice(&b[o * chunk..(o + 1) * chunk]);
            }
        }
        Tensor::from_bytes(out, &sizes, d)
    })
}

/// `torch.index_select(x, dim, index)`: `index` is 1-D (or 0-dim) int64/int32.
/// xirang-fallback: index_select
pub fn index_select(x: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    check_index_dtype("index_select", index, true)?;
    if index.dim() > 1 {
        return shape_err("index_select(): Index is supposed to be a vector");
    }
    on_host1("index_select", &[x, index], |h| {
        let (t, idx) = (&h[0], h[1].to_i64_vec()?);
        let scalar = t.dim() == 0;
        let t = if scalar { t.reshape(&[1])? } else { t.clone() };
        let dim = wrap_dim(dim, t.dim())?;
        let size = t.sizes()[dim];
        for &i in &idx {
            if i < 0 || i as usize >= size {
                return index_err(format!("index out of range in self (index {i}, size {size})"));
            }
        }
        let es = t.dtype().size();
        let outer: usize = t.sizes()[..dim].iter().product();
        let inner: usize = t.sizes()[dim + 1..].iter().product();
        let b = t.gather_bytes()?;
        let mut out = Vec::with_capacity(outer * idx.len() * inner * es);
        for o in 0..outer {
            for &i in &idx {
                let start = (o * size + i as usize) * inner * es;
                out.extend_from_slice(&b[start..start + inner * es]);
            }
        }
        let mut sizes = t.sizes().to_vec();
        sizes[dim] = idx.len();
        if scalar {
            if idx.len() != 1 {
                return index_err("index_select(): index of a 0-dim tensor must have one element");
            }
            sizes.clear();
        }
        Tensor::from_bytes(out, &sizes, t.dtype())
    })
}

/// `torch.tril(x, diagonal)` (`lower`) or `torch.triu(x, diagonal)`: each matrix of the last two
/// dimensions keeps its elements on and below (`lower`) or on and above the `diagonal`-th
/// diagonal; the others are zero.
pub fn triangle(x: &Tensor, diagonal: i64, lower: bool) -> Result<Tensor> {
    let name = if lower { "tril" } else { "triu" };
    if x.dim() < 2 {
        return shape_err(format!("{name}: input tensor must have at least 2 dimensions"));
    }
    on_host1(name, &[x], |h| {
        let t = &h[0];
        let (nd, es) = (t.dim(), t.dtype().size());
        let (rows, cols) = (t.sizes()[nd - 2], t.sizes()[nd - 1]);
        let mut b = t.gather_bytes()?;
        for (k, e) in b.chunks_exact_mut(es).enumerate() {
            let above = (k % cols) as i64 - ((k / cols) % rows) as i64;
            if (lower && above > diagonal) || (!lower && above < diagonal) {
                e.fill(0);
            }
        }
        Tensor::from_bytes(b, t.sizes(), t.dtype())
    })
}

/// Visit every multi-index of `sizes` in row-major order.
fn for_each_index(sizes: &[usize], mut f: impl FnMut(&[usize], usize) -> Result<()>) -> Result<()> {
    let n: usize = sizes.iter().product();
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

fn check_gather_shapes(name: &str, x: &Tensor, dim: usize, index: &Tensor, src: Option<&Tensor>) -> Result<()> {
    let nd = x.dim().max(1);
    if index.dim().max(1) != nd {
        return shape_err(format!("{name}(): Index tensor must have the same number of dimensions as input tensor"));
    }
    let xs = if x.dim() == 0 { vec![1] } else { x.sizes().to_vec() };
    let is = if index.dim() == 0 { vec![1] } else { index.sizes().to_vec() };
    for d in 0..nd {
        if d != dim && is[d] > xs[d] {
            return shape_err(format!(
                "Size does not match at dimension {d} expected index {:?} to be smaller than self {:?} apart from dimension {dim}",
                index.sizes(),
                x.sizes()
            ));
        }
        if let Some(s) = src {
            let ss = if s.dim() == 0 { 1 } else { s.sizes()[d] };
            if is[d] > ss {
                return shape_err(format!(
                    "Size does not match at dimension {d} expected index {:?} to be smaller than src {:?}",
                    index.sizes(),
                    s.sizes()
                ));
            }
        }
    }
    Ok(())
}

/// `torch.gather(x, dim, index)`: `out[i][j] = x[index[i][j]][j]` (dim 0).
pub fn gather(x: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    check_index_dtype("gather", index, false)?;
    let d = wrap_dim(dim, x.dim())?;
    check_gather_shapes("gather", x, d, index, None)?;
    on_host1("gather", &[x, index], |h| {
        let xs = if h[0].dim() == 0 { vec![1] } else { h[0].sizes().to_vec() };
        let xst = contiguous_strides(&xs);
        let xb = h[0].gather_bytes()?;
        let idx = h[1].to_i64_vec()?;
        let is = if h[1].dim() == 0 { vec![1] } else { h[1].sizes().to_vec() };
        let es = h[0].dtype().size();
        let mut out = Vec::with_capacity(idx.len() * es);
        for_each_index(&is, |mi, lin| {
            let i = idx[lin];
            if i < 0 || i as usize >= xs[d] {
                return index_err(format!("index {i} is out of bounds for dimension {d} with size {}", xs[d]));
            }
            let off: usize = mi.iter().enumerate().map(|(k, &v)| if k == d { i as usize } else { v } * xst[k]).sum();
            out.extend_from_slice(&xb[off * es..off * es + es]);
            Ok(())
        })?;
        Tensor::from_bytes(out, h[1].sizes(), h[0].dtype())
    })
}

/// `Tensor.scatter_add(dim, index, src)` (out-of-place):
/// `out[index[i][j]][j] += src[i][j]` (dim 0).
/// xirang-fallback: scatter_add
pub fn scatter_add(x: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    check_index_dtype("scatter_add", index, false)?;
    if src.dtype() != x.dtype() {
        return dtype_err(format!(
            "scatter(): Expected self.dtype to be equal to src.dtype (got {} and {})",
            x.dtype().name(),
            src.dtype().name()
        ));
    }
    let d = wrap_dim(dim, x.dim())?;
    check_gather_shapes("scatter_add", x, d, index, Some(src))?;
    let [r] = on_host("scatter_add", &[x, index, src], |h| {
        let dt = h[0].dtype();
        let xs = if h[0].dim() == 0 { vec![1] } else { h[0].sizes().to_vec() };
        let xst = contiguous_strides(&xs);
        let mut xb = h[0].gather_bytes()?;
        let idx = h[1].to_i64_vec()?;
        let is = if h[1].dim() == 0 { vec![1] } else { h[1].sizes().to_vec() };
        let ss = if h[2].dim() == 0 { vec![1] } else { h[2].sizes().to_vec() };
        let sst = contiguous_strides(&ss);
        let sb = h[2].gather_bytes()?;
        for_each_index(&is, |mi, lin| {
            let i = idx[lin];
            if i < 0 || i as usize >= xs[d] {
                return index_err(format!("index {i} is out of bounds for dimension {d} with size {}", xs[d]));
            }
            let off: usize = mi.iter().enumerate().map(|(k, &v)| if k == d { i as usize } else { v } * xst[k]).sum();
            let soff: usize = mi.iter().zip(&sst).map(|(v, s)| v * s).sum();
            if dt.is_floating() {
                let v = load_f64(&xb, dt, off) + load_f64(&sb, dt, soff);
                store_f64(&mut xb, dt, off, v);
            } else {
                let v = load_i64(&xb, dt, off).wrapping_add(load_i64(&sb, dt, soff));
                store_i64(&mut xb, dt, off, v);
            }
            Ok(())
        })?;
        Ok([Tensor::from_bytes(xb, h[0].sizes(), dt)?])
    })?;
    Ok(r)
}

/// `Tensor.scatter_add_(dim, index, src)`: in place.
pub fn scatter_add_(x: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<()> {
    let r = scatter_add(x, dim, index, src)?;
    x.copy_(&r)
}
