//! Reductions over dims: `sum`, `mean`, `amax` for float dtypes.
//!
//! The reduced dims are moved last (a view) and made contiguous on the
//! device, so each output element reduces one contiguous row; when they are
//! the leading dims of a contiguous input (a bias gradient's `sum(0)`), the
//! input is read as stored and its rows are summed into the outputs. Sums
//! accumulate in f64 and round once (PyTorch accumulates f32 with cascade
//! summation; both are within the suite's tolerance).

use rayon::prelude::*;

use super::{PAR_MIN, Real, device_of, launch, unsupported, with_real};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Red {
    Sum,
    Mean,
    Max,
}

fn reduce(
    name: &str,
    x: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    red: Red,
) -> Result<Tensor> {
    let ctx = device_of(name, &[x])?;
    let d = x.dtype();
    if dtype.is_some_and(|t| t != d) {
        return unsupported(name, "a dtype= conversion takes the fallback");
    }
    if !super::is_real(d) {
        return unsupported(name, format!("dtype {d} takes the fallback"));
    }
    let l = crate::reference::layout(x, dims, keepdim)?;
    if red == Red::Max && l.inner == 0 {
        return unsupported(name, "amax of an empty slice is an error (fallback reports it)");
    }
    // leading reduced dims of a contiguous input: read as stored, `[inner, outer]`, and reduce
    // its rows into the output columns (no transposing copy of the input first)
    let leading = l.leading && l.outer > 1;
    let rows = if leading { std::borrow::Cow::Borrowed(x) } else { super::contiguous(&l.permuted)? };
    let out = Tensor::empty_on(&ctx, &l.out_shape, d)?;
    let (outer, inner) = (l.outer, l.inner);
    if outer == 0 {
        return Ok(out);
    }
    let (pr, po) = (if rows.numel() > 0 { rows.data_ptr()? } else { 0 }, out.data_ptr()?);
    with_real!(name, d, T => launch(&ctx, [&*rows, &out], move |mem| {
        let v = T::load(mem, pr, outer * inner, d)?;
        let o: Vec<T> = if leading {
            columns(&v, outer, inner, red)
        } else {
            let row = |i: usize| -> T {
                let r = &v[i * inner..(i + 1) * inner];
                match red {
                    Red::Sum => T::from_f64(r.iter().map(|x| x.to_f64()).sum::<f64>()),
                    Red::Mean => T::from_f64(r.iter().map(|x| x.to_f64()).sum::<f64>() / inner as f64),
                    Red::Max => r.iter().copied().fold(r[0], max_nan),
                }
            };
            if outer * inner >= PAR_MIN { (0..outer).into_par_iter().map(row).collect() } else { (0..outer).map(row).collect() }
        };
        T::store(mem, po, &o, d)
    }))?;
    Ok(out)
}

/// The larger of two values; NaN wins (PyTorch's `amax`).
fn max_nan<T: Real>(m: T, x: T) -> T {
    if x.is_nan() || m.is_nan() {
        T::from_f64(f64::NAN)
    } else if x > m {
        x
    } else {
        m
    }
}

/// Reduces the `inner` rows of a row-major `[inner, outer]` matrix into `outer` values, each
/// column in row order (the order, and so the rounding, of the row-wise path); bands of columns
/// run as rayon tasks.
fn columns<T: Real>(v: &[T], outer: usize, inner: usize, red: Red) -> Vec<T> {
    let band = |j0: usize, w: usize| -> Vec<T> {
        if red == Red::Max {
            let mut m = v[j0..j0 + w].to_vec();
            for r in v.chunks_exact(outer).skip(1) {
                m.iter_mut().zip(&r[j0..j0 + w]).for_each(|(m, &x)| *m = max_nan(*m, x));
            }
            return m;
        }
        let mut acc = vec![0f64; w];
        for r in v.chunks_exact(outer) {
            acc.iter_mut().zip(&r[j0..j0 + w]).for_each(|(a, x)| *a += x.to_f64());
        }
        let n = if red == Red::Mean { inner as f64 } else { 1.0 };
        acc.into_iter().map(|a| T::from_f64(a / n)).collect()
    };
    const BAND: usize = 256;
    if outer * inner >= PAR_MIN && outer > BAND {
        let bands: Vec<Vec<T>> =
            (0..outer.div_ceil(BAND)).into_par_iter().map(|b| band(b * BAND, BAND.min(outer - b * BAND))).collect();
        bands.concat()
    } else {
        band(0, outer)
    }
}

/// `sum(self, dtype)`: everything.
/// xirang-kernel: sum
pub fn sum(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reduce("sum", self_, None, false, dtype, Red::Sum)
}

/// `sum.dim_IntList(self, dim, keepdim, dtype)`.
/// xirang-kernel: sum.dim_IntList
pub fn sum_dim_intlist(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    reduce("sum", self_, dim, keepdim, dtype, Red::Sum)
}

/// `mean(self, dtype)`.
/// xirang-kernel: mean
pub fn mean(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reduce("mean", self_, None, false, dtype, Red::Mean)
}

/// `mean.dim(self, dim, keepdim, dtype)`.
/// xirang-kernel: mean.dim
pub fn mean_dim(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    reduce("mean", self_, dim, keepdim, dtype, Red::Mean)
}

/// `amax(self, dim, keepdim)`.
/// xirang-kernel: amax
pub fn amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reduce("amax", self_, Some(dim), keepdim, None, Red::Max)
}

/// `all.dim(self, dim, keepdim)`: whether every element along `dim` is non-zero (NaN is); a bool
/// result, true for an empty slice. uint8 inputs (whose result is uint8) take the fallback.
/// xirang-kernel: all.dim
pub fn all_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    const NAME: &str = "all";
    let ctx = device_of(NAME, &[self_])?;
    let d = self_.dtype();
    if d == DType::U8 {
        return unsupported(NAME, format!("dtype {d} takes the fallback"));
    }
    let l = crate::reference::layout(self_, Some(&[dim]), keepdim)?;
    let rows = super::contiguous(&l.permuted)?;
    let out = Tensor::empty_on(&ctx, &l.out_shape, DType::Bool)?;
    let (outer, inner) = (l.outer, l.inner);
    if outer == 0 {
        return Ok(out);
    }
    let (pr, po) = (if rows.numel() > 0 { rows.data_ptr()? } else { 0 }, out.data_ptr()?);
    launch(&ctx, [&*rows, &out], move |mem| {
        let v = super::elementwise::load_f64(mem, pr, outer * inner, d)?;
        let o: Vec<u8> =
            (0..outer).map(|i| u8::from(v[i * inner..(i + 1) * inner].iter().all(|x| *x != 0.0))).collect();
        super::write_slice(mem, po, &o)
    })?;
    Ok(out)
}
