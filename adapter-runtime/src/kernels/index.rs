//! Data movement kernels (any dtype: they move element bytes): the strided
//! copy that makes views contiguous (the driver's, through the tensor), `cat`, `index_select`, `gather`,
//! `embedding`, `tril` and `triu`.
//!
//! Index tensors are validated on the host before launch (one small
//! device-to-host read), so an out-of-range index is a typed error at the
//! call rather than a sticky stream error later.

use super::elementwise::pick_bytes;
use super::{device_of, launch, read_vec, unsupported};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape;
use crate::tensor::Tensor;

/// `clone` / `contiguous` of a device tensor: the driver's strided copy
/// ([`Driver::copy_strided`](crate::driver::Driver::copy_strided)) on the current stream, counted
/// as this operator's launch by the profiler.
pub fn strided_copy(t: &Tensor) -> Result<Tensor> {
    let ctx = device_of("contiguous", &[t])?;
    crate::profile::on_launch(&ctx, ctx.current_stream());
    t.clone_contiguous()
}

/// Index values (i64 or i32 tensor) read on the host and bounds-checked.
fn indices(name: &str, index: &Tensor, bound: usize) -> Result<Vec<usize>> {
    if !matches!(index.dtype(), DType::I64 | DType::I32) {
        return unsupported(name, "index must be int64 or int32");
    }
    index
        .to_i64_vec()?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + bound as i64 } else { i };
            if j < 0 || j >= bound as i64 {
                Err(Error::Index(format!("{name}: index {i} is out of bounds for dimension with size {bound}")))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

/// `cat(tensors, dim)`: one dtype, one device (legacy empty 1-D inputs are skipped).
/// xirang-kernel: cat
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let ctx = device_of("cat", &refs)?;
    let parts: Vec<&Tensor> = tensors.iter().filter(|t| !(t.dim() == 1 && t.numel() == 0)).collect();
    let Some(first) = parts.first() else {
        return unsupported("cat", "only empty inputs");
    };
    let d = first.dtype();
    if parts.iter().any(|t| t.dtype() != d) {
        return unsupported("cat", "mixed dtypes take the fallback (type promotion)");
    }
    let nd = first.dim();
    if nd == 0 {
        return Err(Error::Shape("zero-dimensional tensor cannot be concatenated".into()));
    }
    let dd = shape::wrap_dim(dim, nd)?;
    let mut total = 0;
    for t in &parts {
        if t.dim() != nd || (0..nd).any(|i| i != dd && t.sizes()[i] != first.sizes()[i]) {
            return Err(Error::Shape(format!(
                "Sizes of tensors must match except in dimension {dd}: {:?} vs {:?}",
                first.sizes(),
                t.sizes()
            )));
        }
        total += t.sizes()[dd];
    }
    let mut out_shape = first.sizes().to_vec();
    out_shape[dd] = total;
    let out = Tensor::empty_on(&ctx, &out_shape, d)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    let es = d.size();
    let outer: usize = out_shape[..dd].iter().product();
    let inner: usize = out_shape[dd + 1..].iter().product();
    let mut srcs = Vec::new();
    let mut keep = vec![out.clone()];
    for t in parts {
        if t.numel() == 0 {
            continue;
        }
        let c = super::contiguous(t)?;
        srcs.push((c.data_ptr()?, t.sizes()[dd] * inner * es));
        keep.push(c.into_owned());
    }
    let po = out.data_ptr()?;
    let row = total * inner * es;
    launch(&ctx, keep, move |mem| {
        let mut o = vec![0u8; outer * row];
        let mut col = 0;
        for &(p, w) in &srcs {
            let v = read_vec::<u8>(mem, p, outer * w)?;
            for r in 0..outer {
                o[r * row + col..r * row + col + w].copy_from_slice(&v[r * w..(r + 1) * w]);
            }
            col += w;
        }
        mem.write(po, &o)
    })?;
    Ok(out)
}

/// `index_select(self, dim, index)`.
/// xirang-kernel: index_select
pub fn index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    let ctx = device_of("index_select", &[self_, index])?;
    if index.dim() > 1 {
        return Err(Error::Index("index_select(): Index is supposed to be a vector".into()));
    }
    let nd = self_.dim().max(1);
    let dd = shape::wrap_dim(dim, nd)?;
    let sizes: Vec<usize> = if self_.dim() == 0 { vec![1] } else { self_.sizes().to_vec() };
    let idx = indices("index_select", index, sizes[dd])?;
    let mut out_shape = sizes.clone();
    out_shape[dd] = idx.len();
    if self_.dim() == 0 {
        out_shape.clear();
    }
    let d = self_.dtype();
    let out = Tensor::empty_on(&ctx, &out_shape, d)?;
    let n = out.numel();
    if n == 0 {
        return Ok(out);
    }
    let x = super::contiguous(self_)?;
    let es = d.size();
    let inner: usize = sizes[dd + 1..].iter().product();
    let (len, k) = (sizes[dd], idx.len());
    let (px, po, nx) = (x.data_ptr()?, out.data_ptr()?, x.numel());
    launch(&ctx, [&*x, &out], move |mem| {
        let src = read_vec::<u8>(mem, px, nx * es)?;
        let o = pick_bytes(&src, es, n, |i| {
            let (o, rest) = (i / (k * inner), i % (k * inner));
            let (j, r) = (rest / inner, rest % inner);
            (o * len + idx[j]) * inner + r
        });
        mem.write(po, &o)
    })?;
    Ok(out)
}

/// `gather(self, dim, index, sparse_grad)`.
/// xirang-kernel: gather
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Result<Tensor> {
    let _ = sparse_grad;
    let ctx = device_of("gather", &[self_, index])?;
    let nd = self_.dim();
    if index.dim() != nd || nd == 0 {
        return unsupported("gather", "index of another rank (or zero-dim) takes the fallback");
    }
    let dd = shape::wrap_dim(dim, nd)?;
    for i in 0..nd {
        if i != dd && index.sizes()[i] > self_.sizes()[i] {
            return Err(Error::Shape(format!(
                "Size does not match at dimension {i} expected index {:?} to be smaller than self {:?} apart from dimension {dd}",
                index.sizes(),
                self_.sizes()
            )));
        }
    }
    let idx = indices("gather", index, self_.sizes()[dd])?;
    let d = self_.dtype();
    let out = Tensor::empty_on(&ctx, index.sizes(), d)?;
    let n = out.numel();
    if n == 0 {
        return Ok(out);
    }
    let x = super::contiguous(self_)?;
    let mut cs = shape::contiguous_strides(x.sizes());
    let sd = cs[dd];
    cs[dd] = 0;
    let base = shape::element_offsets(index.sizes(), &cs, 0);
    let es = d.size();
    let (px, po, nx) = (x.data_ptr()?, out.data_ptr()?, x.numel());
    launch(&ctx, [&*x, &out], move |mem| {
        let src = read_vec::<u8>(mem, px, nx * es)?;
        mem.write(po, &pick_bytes(&src, es, n, |i| base[i] + idx[i] * sd))
    })?;
    Ok(out)
}

/// `embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)`:
/// rows of `weight` (the other arguments only matter for the backward).
/// xirang-kernel: embedding
pub fn embedding(
    weight: &Tensor,
    indices: &Tensor,
    padding_idx: i64,
    scale_grad_by_freq: bool,
    sparse: bool,
) -> Result<Tensor> {
    let _ = (padding_idx, scale_grad_by_freq, sparse);
    if weight.dim() != 2 {
        return Err(Error::Shape("'weight' must be 2-D".into()));
    }
    let flat = indices.reshape(&[-1])?;
    let rows = index_select(weight, 0, &flat)?;
    let mut shape: Vec<i64> = indices.sizes().iter().map(|&s| s as i64).collect();
    shape.push(weight.sizes()[1] as i64);
    rows.view(&shape)
}

/// `tril(self, diagonal)`: the lower triangle of each matrix (the last two dimensions) at and below
/// the `diagonal`-th diagonal, zeros above.
/// xirang-kernel: tril
pub fn tril(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle("tril", self_, move |row, col| col - row <= diagonal)
}

/// `triu(self, diagonal)`: the upper triangle of each matrix (the last two dimensions) at and above
/// the `diagonal`-th diagonal, zeros below.
/// xirang-kernel: triu
pub fn triu(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle("triu", self_, move |row, col| col - row >= diagonal)
}

/// Keeps the elements of each matrix of `t` whose (row, column) `keep` accepts, zeros elsewhere (zero
/// bytes are zero in every dtype).
fn triangle(name: &str, t: &Tensor, keep: impl Fn(i64, i64) -> bool + Send + 'static) -> Result<Tensor> {
    let ctx = device_of(name, &[t])?;
    let nd = t.dim();
    if nd < 2 {
        return Err(Error::Shape(format!("{name}: input tensor must have at least 2 dimensions")));
    }
    let d = t.dtype();
    let out = Tensor::empty_on(&ctx, t.sizes(), d)?;
    let n = out.numel();
    if n == 0 {
        return Ok(out);
    }
    let x = super::contiguous(t)?;
    let (es, rows, cols) = (d.size(), t.sizes()[nd - 2], t.sizes()[nd - 1]);
    let (px, po) = (x.data_ptr()?, out.data_ptr()?);
    launch(&ctx, [&*x, &out], move |mem| {
        let mut v = read_vec::<u8>(mem, px, n * es)?;
        for (k, e) in v.chunks_exact_mut(es).enumerate() {
            if !keep(((k / cols) % rows) as i64, (k % cols) as i64) {
                e.fill(0);
            }
        }
        mem.write(po, &v)
    })?;
    Ok(out)
}
