//! Elementwise kernels: arithmetic, comparisons, activations and their
//! backward, `where`, `masked_fill`, dropout.
//!
//! Binary kernels take two tensors of one dtype (PyTorch's promotion across
//! dtypes is left to the fallback) and broadcast them; the contiguous
//! same-shape case runs as a plain zip over slices.

use rayon::prelude::*;

use super::{PAR_MIN, Real, device_of, is_real, launch, load_int, store_int, unsupported, with_real};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::shape;
use crate::tensor::Tensor;

/// How an input element is found from an output index.
#[derive(Clone)]
pub(crate) enum IndexMap {
    /// Same shape: element `i`.
    Identity,
    /// One element broadcast everywhere.
    Splat,
    /// A general broadcast: precomputed input offsets.
    Map(Vec<usize>),
}

impl IndexMap {
    pub(crate) fn new(sizes: &[usize], out: &[usize]) -> Result<IndexMap> {
        if sizes == out {
            return Ok(IndexMap::Identity);
        }
        if shape::numel(sizes) == 1 {
            return Ok(IndexMap::Splat);
        }
        let st = shape::expand_strides(sizes, &shape::contiguous_strides(sizes), out)?;
        Ok(IndexMap::Map(shape::element_offsets(out, &st, 0)))
    }
    #[inline]
    pub(crate) fn at(&self, i: usize) -> usize {
        match self {
            IndexMap::Identity => i,
            IndexMap::Splat => 0,
            IndexMap::Map(m) => m[i],
        }
    }
}

/// Output shape and input index maps of a broadcast op.
pub(crate) struct Bcast {
    pub shape: shape::Dims,
    pub maps: smallvec::SmallVec<[IndexMap; 3]>,
}

impl Bcast {
    pub(crate) fn new(shapes: &[&[usize]]) -> Result<Bcast> {
        let out = shape::broadcast_dims(shapes)?;
        let maps = shapes.iter().map(|s| IndexMap::new(s, &out)).collect::<Result<_>>()?;
        Ok(Bcast { shape: out, maps })
    }
    pub(crate) fn numel(&self) -> usize {
        shape::numel(&self.shape)
    }
    /// `f(x[map0(i)], y[map1(i)])` for every output index.
    pub(crate) fn map2<X: Copy + Sync, Y: Copy + Sync, U: Send>(
        &self,
        x: &[X],
        y: &[Y],
        f: impl Fn(X, Y) -> U + Sync + Send,
    ) -> Vec<U> {
        let n = self.numel();
        match (&self.maps[0], &self.maps[1]) {
            (IndexMap::Identity, IndexMap::Identity) => {
                if n >= PAR_MIN {
                    x.par_iter().zip(y.par_iter()).map(|(a, b)| f(*a, *b)).collect()
                } else {
                    x.iter().zip(y).map(|(a, b)| f(*a, *b)).collect()
                }
            }
            (IndexMap::Identity, IndexMap::Splat) => {
                let b = y[0];
                if n >= PAR_MIN {
                    x.par_iter().map(|a| f(*a, b)).collect()
                } else {
                    x.iter().map(|a| f(*a, b)).collect()
                }
            }
            (ma, mb) => {
                let g = |i: usize| f(x[ma.at(i)], y[mb.at(i)]);
                if n >= PAR_MIN { (0..n).into_par_iter().map(g).collect() } else { (0..n).map(g).collect() }
            }
        }
    }
}

impl Bcast {
    /// [`map2`](Self::map2) into `out` (one element per output index), in place.
    pub(crate) fn map2_into<X: Copy + Sync, Y: Copy + Sync, U: Send>(
        &self,
        x: &[X],
        y: &[Y],
        out: &mut [U],
        f: impl Fn(X, Y) -> U + Sync + Send,
    ) {
        let par = out.len() >= PAR_MIN;
        match (&self.maps[0], &self.maps[1]) {
            (IndexMap::Identity, IndexMap::Identity) => {
                let run = |(o, (a, b)): (&mut [U], (&[X], &[Y]))| {
                    for ((o, a), b) in o.iter_mut().zip(a).zip(b) {
                        *o = f(*a, *b);
                    }
                };
                if par {
                    super::par_items(out.chunks_mut(CHUNK).zip(x.chunks(CHUNK).zip(y.chunks(CHUNK))).collect(), run);
                } else {
                    run((out, (x, y)));
                }
            }
            (IndexMap::Identity, IndexMap::Splat) => {
                let b = y[0];
                let run = |(o, a): (&mut [U], &[X])| {
                    for (o, a) in o.iter_mut().zip(a) {
                        *o = f(*a, b);
                    }
                };
                if par {
                    super::par_items(out.chunks_mut(CHUNK).zip(x.chunks(CHUNK)).collect(), run)
                } else {
                    run((out, x))
                }
            }
            (ma, mb) => {
                let run = |(c, o): (usize, &mut [U])| {
                    for (j, o) in o.iter_mut().enumerate() {
                        let i = c * CHUNK + j;
                        *o = f(x[ma.at(i)], y[mb.at(i)]);
                    }
                };
                if par { super::par_items(out.chunks_mut(CHUNK).enumerate().collect(), run) } else { run((0, out)) }
            }
        }
    }
}

/// Elements per rayon task of the in-place loops.
const CHUNK: usize = 1 << 14;

/// [`map1`] into `out`, in place.
pub(crate) fn map1_into<X: Copy + Sync, U: Send>(x: &[X], out: &mut [U], f: impl Fn(X) -> U + Sync + Send) {
    let run = |(o, a): (&mut [U], &[X])| {
        for (o, a) in o.iter_mut().zip(a) {
            *o = f(*a);
        }
    };
    if out.len() >= PAR_MIN {
        super::par_items(out.chunks_mut(CHUNK).zip(x.chunks(CHUNK)).collect(), run)
    } else {
        run((out, x))
    }
}

/// `f` over every element (contiguous slice, parallel when large).
pub(crate) fn map1<X: Copy + Sync, U: Send>(x: &[X], f: impl Fn(X) -> U + Sync + Send) -> Vec<U> {
    if x.len() >= PAR_MIN { x.par_iter().map(|a| f(*a)).collect() } else { x.iter().map(|a| f(*a)).collect() }
}

fn same_dtype(name: &str, a: &Tensor, b: &Tensor) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return unsupported(name, "mixed dtypes take the fallback (type promotion)");
    }
    Ok(a.dtype())
}

/// Two float operands of different dtypes (a bfloat16 activation and a float32 one under autocast)
/// cast to PyTorch's result dtype (`torch.result_type`: a zero-dim operand does not raise it), for
/// the promoting binary kernels; `None` when the dtypes agree or either is not a float (integer and
/// bool mixes take the fallback). Widening a float is exact, so computing on the cast operands is
/// what PyTorch's CPU kernel does (it casts on load).
///
/// A zero-dim operand wider than the result (a float32 scalar tensor with a bfloat16 one) is
/// `Unsupported`: PyTorch's CPU kernels of reduced floats take such a scalar at its original
/// precision (and `div` multiplies by its reciprocal), which casting it to the result dtype
/// would not reproduce; the fallback runs that kernel.
fn mixed_floats(a: &Tensor, b: &Tensor) -> Result<Option<(Tensor, Tensor)>> {
    use crate::dtype::{Operand, promote_types, result_type};
    if a.dtype() == b.dtype() || !is_real(a.dtype()) || !is_real(b.dtype()) {
        return Ok(None);
    }
    let operand = |t: &Tensor| if t.dim() == 0 { Operand::ZeroDim(t.dtype()) } else { Operand::Tensor(t.dtype()) };
    let Some(d) = result_type(&[operand(a), operand(b)]) else {
        return Ok(None);
    };
    let ctx = device_of("binary", &[a, b])?;
    let cast = |t: &Tensor| -> Result<Tensor> {
        if t.dtype() == d {
            return Ok(t.clone());
        }
        if promote_types(t.dtype(), d) != d {
            return unsupported("binary", "a zero-dim operand wider than the result takes the fallback");
        }
        // widening on the device: exact
        let out = Tensor::empty_on(&ctx, t.sizes(), d)?;
        copy_strided(&out, t)?;
        Ok(out)
    };
    Ok(Some((cast(a)?, cast(b)?)))
}

/// A float binary kernel with broadcasting; the result has the inputs' dtype.
pub(crate) fn binary_real<T: Real>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> T + Send + Sync + Copy + 'static,
) -> Result<Tensor> {
    let ctx = device_of(name, &[a, b])?;
    let d = same_dtype(name, a, b)?;
    let (a, b) = (super::contiguous(a)?, super::contiguous(b)?);
    let bc = Bcast::new(&[a.sizes(), b.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, d)?;
    if bc.numel() == 0 {
        return Ok(out);
    }
    let (pa, pb, po, na, nb) = (a.data_ptr()?, b.data_ptr()?, out.data_ptr()?, a.numel(), b.numel());
    let no = bc.numel();
    launch(&ctx, [&*a, &*b, &out], move |mem| {
        // stored in the compute type (f32, f64): in place on device memory
        if d.size() == std::mem::size_of::<T>()
            && super::mapped::<T>(mem, &[(pa, na), (pb, nb)], (po, no), |xs, o| bc.map2_into(xs[0], xs[1], o, f))?
        {
            return Ok(());
        }
        let x = T::load(mem, pa, na, d)?;
        let y = T::load(mem, pb, nb, d)?;
        T::store(mem, po, &bc.map2(&x, &y, f), d)
    })?;
    Ok(out)
}

/// A float kernel of three same-dtype tensors with broadcasting, computed in the compute type
/// (f32 for f16/bf16/f32, f64 for f64) and rounded once to the inputs' dtype: what PyTorch's
/// CPU kernels of `addcmul`, `addcdiv` and `lerp` do, where a composition of binary kernels in
/// float16 would round after each step.
fn ternary_real<T: Real>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    f: impl Fn(T, T, T) -> T + Send + Sync + Copy + 'static,
) -> Result<Tensor> {
    let ctx = device_of(name, &[a, b, c])?;
    let d = same_dtype(name, a, b)?;
    same_dtype(name, a, c)?;
    let (a, b, c) = (super::contiguous(a)?, super::contiguous(b)?, super::contiguous(c)?);
    let bc = Bcast::new(&[a.sizes(), b.sizes(), c.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, d)?;
    if bc.numel() == 0 {
        return Ok(out);
    }
    let (pa, pb, pc, po) = (a.data_ptr()?, b.data_ptr()?, c.data_ptr()?, out.data_ptr()?);
    let (na, nb, nc) = (a.numel(), b.numel(), c.numel());
    launch(&ctx, [&*a, &*b, &*c, &out], move |mem| {
        let (x, y, z) = (T::load(mem, pa, na, d)?, T::load(mem, pb, nb, d)?, T::load(mem, pc, nc, d)?);
        let [ma, mb, mc] = [&bc.maps[0], &bc.maps[1], &bc.maps[2]];
        let g = |i: usize| f(x[ma.at(i)], y[mb.at(i)], z[mc.at(i)]);
        let n = bc.numel();
        let v: Vec<T> = if n >= PAR_MIN { (0..n).into_par_iter().map(g).collect() } else { (0..n).map(g).collect() };
        T::store(mem, po, &v, d)
    })?;
    Ok(out)
}

/// `addcmul`: `self + value * tensor1 * tensor2`, rounded once.
/// xirang-kernel: addcmul
pub fn addcmul(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: Scalar) -> Result<Tensor> {
    let v = value.to_f64();
    with_real!("addcmul", self_.dtype(), T => {
        let v = T::from_f64(v);
        ternary_real::<T>("addcmul", self_, tensor1, tensor2, move |s, a, b| s + v * a * b)
    })
}

/// `addcdiv`: `self + value * tensor1 / tensor2`, rounded once.
/// xirang-kernel: addcdiv
pub fn addcdiv(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: Scalar) -> Result<Tensor> {
    let v = value.to_f64();
    with_real!("addcdiv", self_.dtype(), T => {
        let v = T::from_f64(v);
        ternary_real::<T>("addcdiv", self_, tensor1, tensor2, move |s, a, b| s + v * (a / b))
    })
}

/// PyTorch's `lerp` formula (ATen/native/Lerp.h): from the nearer end, so `lerp(a, b, 1) == b`.
fn lerp_t<T: Real>(s: T, e: T, w: T) -> T {
    let half = T::from_f64(0.5);
    if w.abs() < half { s + w * (e - s) } else { e - (e - s) * (T::ONE - w) }
}

/// `lerp.Tensor`: `self + weight * (end - self)`, rounded once.
/// xirang-kernel: lerp.Tensor
pub fn lerp_tensor(self_: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    with_real!("lerp", self_.dtype(), T => ternary_real::<T>("lerp", self_, end, weight, lerp_t::<T>))
}

/// `lerp.Scalar`: `self + weight * (end - self)`, rounded once.
/// xirang-kernel: lerp.Scalar
pub fn lerp_scalar(self_: &Tensor, end: &Tensor, weight: Scalar) -> Result<Tensor> {
    let w = weight.to_f64();
    with_real!("lerp", self_.dtype(), T => {
        let w = T::from_f64(w);
        binary_real::<T>("lerp", self_, end, move |s, e| lerp_t(s, e, w))
    })
}

/// A float kernel `f(a, b) -> bool` with broadcasting; the result is bool.
fn compare_real<T: Real>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> bool + Send + Sync + Copy + 'static,
) -> Result<Tensor> {
    let ctx = device_of(name, &[a, b])?;
    let d = same_dtype(name, a, b)?;
    let (a, b) = (super::contiguous(a)?, super::contiguous(b)?);
    let bc = Bcast::new(&[a.sizes(), b.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, DType::Bool)?;
    if bc.numel() == 0 {
        return Ok(out);
    }
    let (pa, pb, po, na, nb) = (a.data_ptr()?, b.data_ptr()?, out.data_ptr()?, a.numel(), b.numel());
    launch(&ctx, [&*a, &*b, &out], move |mem| {
        let x = T::load(mem, pa, na, d)?;
        let y = T::load(mem, pb, nb, d)?;
        super::write_slice(mem, po, &bc.map2(&x, &y, |p, q| u8::from(f(p, q))))
    })?;
    Ok(out)
}

/// An integer kernel over i64 values (i64/i32/bool storage) with broadcasting.
fn binary_int(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    out_dtype: Option<DType>,
    f: impl Fn(i64, i64) -> i64 + Send + Sync + Copy + 'static,
) -> Result<Tensor> {
    let ctx = device_of(name, &[a, b])?;
    let d = same_dtype(name, a, b)?;
    let od = out_dtype.unwrap_or(d);
    let (a, b) = (super::contiguous(a)?, super::contiguous(b)?);
    let bc = Bcast::new(&[a.sizes(), b.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, od)?;
    if bc.numel() == 0 {
        return Ok(out);
    }
    let (pa, pb, po, na, nb) = (a.data_ptr()?, b.data_ptr()?, out.data_ptr()?, a.numel(), b.numel());
    launch(&ctx, [&*a, &*b, &out], move |mem| {
        let x = load_int(mem, pa, na, d)?;
        let y = load_int(mem, pb, nb, d)?;
        store_int(mem, po, &bc.map2(&x, &y, f), od)
    })?;
    Ok(out)
}

/// A float unary kernel; the result has the input's dtype.
pub(crate) fn unary_real<T: Real>(
    name: &str,
    a: &Tensor,
    f: impl Fn(T) -> T + Send + Sync + Copy + 'static,
) -> Result<Tensor> {
    let ctx = device_of(name, &[a])?;
    let d = a.dtype();
    let a = super::contiguous(a)?;
    let out = Tensor::empty_on(&ctx, a.sizes(), d)?;
    let n = a.numel();
    if n == 0 {
        return Ok(out);
    }
    let (pa, po) = (a.data_ptr()?, out.data_ptr()?);
    launch(&ctx, [&*a, &out], move |mem| {
        if d.size() == std::mem::size_of::<T>()
            && super::mapped::<T>(mem, &[(pa, n)], (po, n), |xs, o| map1_into(xs[0], o, f))?
        {
            return Ok(());
        }
        let x = T::load(mem, pa, n, d)?;
        T::store(mem, po, &map1(&x, f), d)
    })?;
    Ok(out)
}

fn unary_int(name: &str, a: &Tensor, f: impl Fn(i64) -> i64 + Send + Sync + Copy + 'static) -> Result<Tensor> {
    let ctx = device_of(name, &[a])?;
    let d = a.dtype();
    let a = super::contiguous(a)?;
    let out = Tensor::empty_on(&ctx, a.sizes(), d)?;
    let n = a.numel();
    if n == 0 {
        return Ok(out);
    }
    let (pa, po) = (a.data_ptr()?, out.data_ptr()?);
    launch(&ctx, [&*a, &out], move |mem| {
        let x = load_int(mem, pa, n, d)?;
        store_int(mem, po, &map1(&x, f), d)
    })?;
    Ok(out)
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::I64 | DType::I32)
}

/// A zero-dim device tensor holding `s` as `dtype` (the scalar operand of
/// the `.Scalar` overloads).
fn scalar_on(like: &Tensor, s: Scalar, dtype: DType) -> Result<Tensor> {
    let ctx = device_of("scalar", &[like])?;
    Tensor::scalar_of(s, dtype).to_ctx(&ctx)
}

/// Checks that a scalar keeps the tensor's dtype (else: promotion, fallback).
fn scalar_keeps_dtype(name: &str, d: DType, s: Scalar) -> Result<()> {
    let ok = if is_real(d) {
        true
    } else if is_int(d) {
        matches!(s, Scalar::Int(_))
    } else {
        false
    };
    if ok { Ok(()) } else { unsupported(name, format!("{d} with scalar {s:?} takes the fallback")) }
}

fn nan_max<T: Real>(x: T, y: T) -> T {
    if x.is_nan() || y.is_nan() {
        T::from_f64(f64::NAN)
    } else if x >= y {
        x
    } else {
        y
    }
}
fn nan_min<T: Real>(x: T, y: T) -> T {
    if x.is_nan() || y.is_nan() {
        T::from_f64(f64::NAN)
    } else if x <= y {
        x
    } else {
        y
    }
}

// ------------------------------------------------------------ arithmetic

/// `add.Tensor`: `self + alpha * other`.
/// xirang-kernel: add.Tensor
pub fn add_tensor(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return add_tensor(&a, &b, alpha);
    }
    let d = self_.dtype();
    if is_int(d) {
        if alpha.is_floating() {
            return unsupported("add", "a float alpha with integers");
        }
        let al = alpha.to_i64();
        return binary_int("add", self_, other, None, move |x, y| x.wrapping_add(al.wrapping_mul(y)));
    }
    with_real!("add", d, T => {
        let al = T::from_f64(alpha.to_f64());
        if alpha.to_f64() == 1.0 {
            binary_real::<T>("add", self_, other, |x, y| x + y)
        } else {
            binary_real::<T>("add", self_, other, move |x, y| x + al * y)
        }
    })
}

/// `add.Scalar`.
/// xirang-kernel: add.Scalar
pub fn add_scalar(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("add", self_.dtype(), other)?;
    add_tensor(self_, &scalar_on(self_, other, self_.dtype())?, alpha)
}

/// `sub.Tensor`: `self - alpha * other`.
/// xirang-kernel: sub.Tensor
pub fn sub_tensor(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return sub_tensor(&a, &b, alpha);
    }
    let d = self_.dtype();
    if is_int(d) {
        if alpha.is_floating() {
            return unsupported("sub", "a float alpha with integers");
        }
        let al = alpha.to_i64();
        return binary_int("sub", self_, other, None, move |x, y| x.wrapping_sub(al.wrapping_mul(y)));
    }
    with_real!("sub", d, T => {
        let al = T::from_f64(alpha.to_f64());
        binary_real::<T>("sub", self_, other, move |x, y| x - al * y)
    })
}

/// `sub.Scalar`.
/// xirang-kernel: sub.Scalar
pub fn sub_scalar(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("sub", self_.dtype(), other)?;
    sub_tensor(self_, &scalar_on(self_, other, self_.dtype())?, alpha)
}

/// `mul.Tensor`.
/// xirang-kernel: mul.Tensor
pub fn mul_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return mul_tensor(&a, &b);
    }
    let d = self_.dtype();
    if is_int(d) {
        return binary_int("mul", self_, other, None, i64::wrapping_mul);
    }
    with_real!("mul", d, T => binary_real::<T>("mul", self_, other, |x, y| x * y))
}

/// `mul.Scalar`.
/// xirang-kernel: mul.Scalar
pub fn mul_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("mul", self_.dtype(), other)?;
    mul_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `div.Tensor` (true division; integer inputs promote, so they fall back).
/// xirang-kernel: div.Tensor
pub fn div_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return div_tensor(&a, &b);
    }
    with_real!("div", self_.dtype(), T => binary_real::<T>("div", self_, other, |x, y| x / y))
}

/// `div.Scalar`.
/// xirang-kernel: div.Scalar
pub fn div_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    if !is_real(self_.dtype()) {
        return unsupported("div", "integer true division promotes");
    }
    // PyTorch multiplies by the reciprocal only on CUDA; CPU divides.
    div_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `maximum` (NaN-propagating).
/// xirang-kernel: maximum
pub fn maximum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return maximum(&a, &b);
    }
    let d = self_.dtype();
    if is_int(d) {
        return binary_int("maximum", self_, other, None, i64::max);
    }
    with_real!("maximum", d, T => binary_real::<T>("maximum", self_, other, nan_max::<T>))
}

/// `minimum` (NaN-propagating).
/// xirang-kernel: minimum
pub fn minimum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    if let Some((a, b)) = mixed_floats(self_, other)? {
        return minimum(&a, &b);
    }
    let d = self_.dtype();
    if is_int(d) {
        return binary_int("minimum", self_, other, None, i64::min);
    }
    with_real!("minimum", d, T => binary_real::<T>("minimum", self_, other, nan_min::<T>))
}

/// `add_.Tensor`: in place into `self_` (the kernel writes `self_`'s storage).
/// xirang-kernel: add_.Tensor
pub fn add_tensor_(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if !self_.is_contiguous() || shape::broadcast_shapes(self_.sizes(), other.sizes())? != self_.sizes() {
        return unsupported("add_", "in-place kernels need a contiguous self of the broadcast shape");
    }
    let r = add_tensor(self_, other, alpha)?;
    if r.dtype() == self_.dtype() {
        copy_into(&r, self_)?;
    } else {
        // computed in the result type (a float32 `other` into a bfloat16 `self_`), rounded on the write
        copy_strided(self_, &r)?;
    }
    Ok(self_.clone())
}

/// Device-to-device copy of contiguous `src` into contiguous `dst` (same dtype and size).
pub(crate) fn copy_into(src: &Tensor, dst: &Tensor) -> Result<()> {
    let ctx = device_of("copy", &[src, dst])?;
    if src.dtype() != dst.dtype() || src.numel() != dst.numel() || !src.is_contiguous() || !dst.is_contiguous() {
        return unsupported("copy", "needs contiguous tensors of one dtype and size");
    }
    let n = src.numel() * src.dtype().size();
    if n == 0 {
        return Ok(());
    }
    let (ps, pd) = (src.data_ptr()?, dst.data_ptr()?);
    launch(&ctx, [src, dst], move |mem| {
        // device to device in place when the driver maps the ranges, else through a host buffer
        if super::mapped::<u8>(mem, &[(ps, n)], (pd, n), |xs, o| o.copy_from_slice(xs[0]))? {
            return Ok(());
        }
        let b = super::read_vec::<u8>(mem, ps, n)?;
        mem.write(pd, &b)
    })
}

/// `dst.copy_(src)` on the device: `src` broadcast to `dst`'s shape, any strides on both sides,
/// any dtype pair (PyTorch's `static_cast` semantics, as [`Tensor::copy_`]). One kernel on the
/// current stream, no host round trip: the host copy path reads `dst` back first, which waits
/// for the device. `Unsupported` when the tensors are not on one device, or `dst` has elements
/// that share memory (PyTorch refuses those).
pub fn copy_strided(dst: &Tensor, src: &Tensor) -> Result<()> {
    let ctx = match (dst.device_ctx(), src.device_ctx()) {
        (Some(a), Some(b)) if std::sync::Arc::ptr_eq(a, b) => a.clone(),
        _ => return unsupported("copy_", "the tensors are not on one device"),
    };
    if dst.sizes().iter().zip(dst.strides()).any(|(s, st)| *s > 1 && *st == 0) {
        return unsupported(
            "copy_",
            "a written-to tensor with repeated elements takes the host path (which refuses it)",
        );
    }
    let src = src.broadcast_to(dst.sizes())?;
    let n = dst.numel();
    if n == 0 {
        return Ok(());
    }
    dst.bump_version();
    if src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous() {
        return copy_into(&src, dst);
    }
    let (sd, dd) = (src.dtype(), dst.dtype());
    let (ses, des) = (sd.size(), dd.size());
    let (ssz, sst) = (src.sizes().to_vec(), src.strides().to_vec());
    let (dsz, dst_st) = (dst.sizes().to_vec(), dst.strides().to_vec());
    let dense = dst.is_contiguous();
    let sspan = shape::storage_extent(&ssz, &sst, 0);
    let dspan = shape::storage_extent(&dsz, &dst_st, 0);
    let (ps, pd) = (src.data_ptr()?, dst.data_ptr()?);
    launch(&ctx, [&src, dst], move |mem| {
        // src's elements in logical order, then cast to dst's dtype
        let sb = super::read_vec::<u8>(mem, ps, sspan * ses)?;
        let mut vals = vec![0u8; n * ses];
        shape::gather_strided(&sb, ses, &ssz, &sst, &mut vals);
        if sd != dd {
            let mut cast = vec![0u8; n * des];
            for i in 0..n {
                if sd.is_floating() {
                    crate::dtype::store_f64(&mut cast, dd, i, crate::dtype::load_f64(&vals, sd, i));
                } else {
                    crate::dtype::store_i64(&mut cast, dd, i, crate::dtype::load_i64(&vals, sd, i));
                }
            }
            vals = cast;
        }
        if dense {
            return mem.write(pd, &vals);
        }
        // a strided destination: read its span, write the touched elements, write it back
        // (kernels on one stream run in order, so nothing writes the span in between)
        let mut db = super::read_vec::<u8>(mem, pd, dspan * des)?;
        let mut i = 0;
        shape::for_each_run(&dsz, &dst_st, 0, |start, len, st| {
            for j in 0..len {
                let o = (start + j * st) * des;
                db[o..o + des].copy_from_slice(&vals[(i + j) * des..(i + j + 1) * des]);
            }
            i += len;
        });
        mem.write(pd, &db)
    })
}

// ------------------------------------------------------------ comparisons

/// `eq.Tensor`.
/// xirang-kernel: eq.Tensor
pub fn eq_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("eq", self_, other, Some(DType::Bool), |x, y| i64::from(x == y));
    }
    with_real!("eq", d, T => compare_real::<T>("eq", self_, other, |x, y| x == y))
}

/// `eq.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: eq.Scalar
pub fn eq_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("eq", self_.dtype(), other)?;
    eq_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `ne.Tensor`.
/// xirang-kernel: ne.Tensor
pub fn ne_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("ne", self_, other, Some(DType::Bool), |x, y| i64::from(x != y));
    }
    with_real!("ne", d, T => compare_real::<T>("ne", self_, other, |x, y| x != y))
}

/// `ne.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: ne.Scalar
pub fn ne_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("ne", self_.dtype(), other)?;
    ne_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `lt.Tensor`.
/// xirang-kernel: lt.Tensor
pub fn lt_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("lt", self_, other, Some(DType::Bool), |x, y| i64::from(x < y));
    }
    with_real!("lt", d, T => compare_real::<T>("lt", self_, other, |x, y| x < y))
}

/// `lt.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: lt.Scalar
pub fn lt_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("lt", self_.dtype(), other)?;
    lt_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `le.Tensor`.
/// xirang-kernel: le.Tensor
pub fn le_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("le", self_, other, Some(DType::Bool), |x, y| i64::from(x <= y));
    }
    with_real!("le", d, T => compare_real::<T>("le", self_, other, |x, y| x <= y))
}

/// `le.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: le.Scalar
pub fn le_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("le", self_.dtype(), other)?;
    le_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `gt.Tensor`.
/// xirang-kernel: gt.Tensor
pub fn gt_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("gt", self_, other, Some(DType::Bool), |x, y| i64::from(x > y));
    }
    with_real!("gt", d, T => compare_real::<T>("gt", self_, other, |x, y| x > y))
}

/// `gt.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: gt.Scalar
pub fn gt_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("gt", self_.dtype(), other)?;
    gt_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

/// `ge.Tensor`.
/// xirang-kernel: ge.Tensor
pub fn ge_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = self_.dtype();
    if is_int(d) || d == DType::Bool {
        return binary_int("ge", self_, other, Some(DType::Bool), |x, y| i64::from(x >= y));
    }
    with_real!("ge", d, T => compare_real::<T>("ge", self_, other, |x, y| x >= y))
}

/// `ge.Scalar` (the scalar is cast to the tensor's dtype, the common dtype).
/// xirang-kernel: ge.Scalar
pub fn ge_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("ge", self_.dtype(), other)?;
    ge_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}

// ------------------------------------------------------------ unary and activations

/// `neg`.
/// xirang-kernel: neg
pub fn neg(self_: &Tensor) -> Result<Tensor> {
    if is_int(self_.dtype()) {
        return unary_int("neg", self_, i64::wrapping_neg);
    }
    with_real!("neg", self_.dtype(), T => unary_real::<T>("neg", self_, |x| -x))
}
/// `abs`.
/// xirang-kernel: abs
pub fn abs(self_: &Tensor) -> Result<Tensor> {
    if is_int(self_.dtype()) {
        return unary_int("abs", self_, i64::wrapping_abs);
    }
    with_real!("abs", self_.dtype(), T => unary_real::<T>("abs", self_, |x| x.abs()))
}
/// `sign`: -1, 0 or 1 (NaN gives 0, as PyTorch's `(0 < x) - (x < 0)`); bool takes the fallback.
/// xirang-kernel: sign
pub fn sign(self_: &Tensor) -> Result<Tensor> {
    if is_int(self_.dtype()) {
        return unary_int("sign", self_, i64::signum);
    }
    with_real!("sign", self_.dtype(), T => unary_real::<T>("sign", self_, |x| {
        if x > T::ZERO { T::ONE } else if x < T::ZERO { -T::ONE } else { T::ZERO }
    }))
}
/// `exp`.
/// xirang-kernel: exp
pub fn exp(self_: &Tensor) -> Result<Tensor> {
    with_real!("exp", self_.dtype(), T => unary_real::<T>("exp", self_, |x| x.exp()))
}
/// `log`.
/// xirang-kernel: log
pub fn log(self_: &Tensor) -> Result<Tensor> {
    with_real!("log", self_.dtype(), T => unary_real::<T>("log", self_, |x| x.ln()))
}
/// `expm1`: `exp(x) - 1` without the cancellation of computing it so (`exp_m1`, in f64 for every
/// storage dtype, rounded once); a composition `exp(x) - 1` loses every digit below 1e-8 in f32.
/// xirang-kernel: expm1
pub fn expm1(self_: &Tensor) -> Result<Tensor> {
    with_real!("expm1", self_.dtype(), T => unary_real::<T>("expm1", self_, |x| T::from_f64(x.to_f64().exp_m1())))
}
/// `log1p`: `ln(1 + x)` accurate for small `x` (`ln_1p` in f64, rounded once), which `log(x + 1)`
/// is not.
/// xirang-kernel: log1p
pub fn log1p(self_: &Tensor) -> Result<Tensor> {
    with_real!("log1p", self_.dtype(), T => unary_real::<T>("log1p", self_, |x| T::from_f64(x.to_f64().ln_1p())))
}
/// `sqrt`.
/// xirang-kernel: sqrt
pub fn sqrt(self_: &Tensor) -> Result<Tensor> {
    with_real!("sqrt", self_.dtype(), T => unary_real::<T>("sqrt", self_, |x| x.sqrt()))
}
/// `rsqrt`.
/// xirang-kernel: rsqrt
pub fn rsqrt(self_: &Tensor) -> Result<Tensor> {
    with_real!("rsqrt", self_.dtype(), T => unary_real::<T>("rsqrt", self_, |x| T::ONE / x.sqrt()))
}
fn sigmoid_t<T: Real>(x: T) -> T {
    T::ONE / (T::ONE + (-x).exp())
}
/// `sigmoid`.
/// xirang-kernel: sigmoid
pub fn sigmoid(self_: &Tensor) -> Result<Tensor> {
    with_real!("sigmoid", self_.dtype(), T => unary_real::<T>("sigmoid", self_, sigmoid_t::<T>))
}
/// `tanh`.
/// xirang-kernel: tanh
pub fn tanh(self_: &Tensor) -> Result<Tensor> {
    with_real!("tanh", self_.dtype(), T => unary_real::<T>("tanh", self_, |x| x.tanh()))
}
/// `relu`.
/// xirang-kernel: relu
pub fn relu(self_: &Tensor) -> Result<Tensor> {
    if is_int(self_.dtype()) {
        return unary_int("relu", self_, |x| x.max(0));
    }
    // NaN stays NaN (x > 0 is false, but PyTorch's clamp_min propagates it).
    with_real!("relu", self_.dtype(), T => unary_real::<T>("relu", self_, |x| if x.is_nan() || x > T::ZERO { x } else { T::ZERO }))
}
/// `silu`.
/// xirang-kernel: silu
pub fn silu(self_: &Tensor) -> Result<Tensor> {
    with_real!("silu", self_.dtype(), T => unary_real::<T>("silu", self_, |x| x * sigmoid_t(x)))
}

fn relu6_over_6<T: Real>(x: T) -> T {
    let (three, six) = (T::from_f64(3.0), T::from_f64(6.0));
    let v = x + three;
    // NaN stays NaN (PyTorch's min(max(x + 3, 0), 6) propagates it)
    if v.is_nan() {
        v
    } else if v < T::ZERO {
        T::ZERO
    } else if v > six {
        T::ONE
    } else {
        v / six
    }
}
/// `hardsigmoid`: `relu6(x + 3) / 6`.
/// xirang-kernel: hardsigmoid
pub fn hardsigmoid(self_: &Tensor) -> Result<Tensor> {
    with_real!("hardsigmoid", self_.dtype(), T => unary_real::<T>("hardsigmoid", self_, relu6_over_6::<T>))
}
/// `hardswish`: `x * relu6(x + 3) / 6`.
/// xirang-kernel: hardswish
pub fn hardswish(self_: &Tensor) -> Result<Tensor> {
    with_real!("hardswish", self_.dtype(), T => unary_real::<T>("hardswish", self_, |x| x * relu6_over_6(x)))
}
/// `hardswish_`: in place into `self_` (MobileNetV3's `nn.Hardswish(inplace=True)`).
/// xirang-kernel: hardswish_
pub fn hardswish_(self_: &Tensor) -> Result<Tensor> {
    if !self_.is_contiguous() {
        return unsupported("hardswish_", "in-place kernels need a contiguous self");
    }
    let r = hardswish(self_)?;
    copy_into(&r, self_)?;
    Ok(self_.clone())
}

fn gelu_t<T: Real>(x: T, tanh: bool) -> T {
    let half = T::from_f64(0.5);
    if tanh {
        let k_beta = T::from_f64(std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5);
        let inner = k_beta * (x + T::from_f64(0.044715) * x * x * x);
        half * x * (T::ONE + inner.tanh())
    } else {
        half * x * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).gauss_erf())
    }
}

fn approx(name: &str, a: &str) -> Result<bool> {
    match a {
        "none" => Ok(false),
        "tanh" => Ok(true),
        other => Err(crate::Error::InvalidArgument(format!(
            "{name}: approximate argument must be either none or tanh, got {other:?}"
        ))),
    }
}

/// `gelu(self, approximate)`.
/// xirang-kernel: gelu
pub fn gelu(self_: &Tensor, approximate: &str) -> Result<Tensor> {
    let t = approx("gelu", approximate)?;
    with_real!("gelu", self_.dtype(), T => unary_real::<T>("gelu", self_, move |x| gelu_t(x, t)))
}

/// `threshold_backward(grad_output, self, threshold)`.
/// xirang-kernel: threshold_backward
pub fn threshold_backward(grad_output: &Tensor, self_: &Tensor, threshold: Scalar) -> Result<Tensor> {
    with_real!("threshold_backward", grad_output.dtype(), T => {
        let th = T::from_f64(threshold.to_f64());
        binary_real::<T>("threshold_backward", grad_output, self_, move |g, x| if x <= th { T::ZERO } else { g })
    })
}

/// `gelu_backward(grad_output, self, approximate)`.
/// xirang-kernel: gelu_backward
pub fn gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Result<Tensor> {
    let t = approx("gelu_backward", approximate)?;
    with_real!("gelu_backward", grad_output.dtype(), T => {
        binary_real::<T>("gelu_backward", grad_output, self_, move |g, x| {
            let half = T::from_f64(0.5);
            if t {
                let k_beta = T::from_f64(std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5);
                let k_kappa = T::from_f64(0.044715);
                let x_sq = x * x;
                let th = (k_beta * (x + k_kappa * x_sq * x)).tanh();
                let left = half * x;
                let right = T::ONE + th;
                g * (half * right + left * (T::ONE - th * th) * k_beta * (T::ONE + T::from_f64(3.0) * k_kappa * x_sq))
            } else {
                let cdf = half * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).gauss_erf());
                let pdf = (-half * x * x).exp() * T::from_f64(1.0 / (2.0 * std::f64::consts::PI).sqrt());
                g * (cdf + x * pdf)
            }
        })
    })
}

/// `elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)`: with
/// `neg = alpha * scale`, `x <= 0` gives `g * input_scale * (y + neg)` from the result `y`, or
/// `g * input_scale * neg * exp(x * input_scale)` from the input; `x > 0` gives `g * scale`.
/// xirang-kernel: elu_backward
pub fn elu_backward(
    grad_output: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
) -> Result<Tensor> {
    with_real!("elu_backward", grad_output.dtype(), T => {
        let neg = T::from_f64(alpha.to_f64() * scale.to_f64());
        let pos = T::from_f64(scale.to_f64());
        let ipt = T::from_f64(input_scale.to_f64());
        binary_real::<T>("elu_backward", grad_output, self_or_result, move |g, x| {
            if x <= T::ZERO {
                if is_result { g * ipt * (x + neg) } else { g * ipt * neg * (x * ipt).exp() }
            } else {
                g * pos
            }
        })
    })
}

/// `hardsigmoid_backward(grad_output, self)`: `g / 6` on `(-3, 3)`, else 0.
/// xirang-kernel: hardsigmoid_backward
pub fn hardsigmoid_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    with_real!("hardsigmoid_backward", grad_output.dtype(), T => {
        // PyTorch's constant is the float `1.0f / 6.0f`, also for double
        let (three, sixth) = (T::from_f64(3.0), T::from_f64(f64::from(1.0f32 / 6.0f32)));
        binary_real::<T>("hardsigmoid_backward", grad_output, self_, move |g, x| {
            if x > -three && x < three { g * sixth } else { T::ZERO }
        })
    })
}

/// `hardswish_backward(grad_output, self)`: 0 up to -3, `g * (x / 3 + 0.5)` below 3, else `g` (the
/// kinks take the outer sides, as PyTorch: 0 at -3, `g` at 3).
/// xirang-kernel: hardswish_backward
pub fn hardswish_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    with_real!("hardswish_backward", grad_output.dtype(), T => {
        let (three, half) = (T::from_f64(3.0), T::from_f64(0.5));
        binary_real::<T>("hardswish_backward", grad_output, self_, move |g, x| {
            if x <= -three { T::ZERO } else if x < three { g * (x / three + half) } else { g }
        })
    })
}

/// `hardtanh_backward(grad_output, self, min_val, max_val)`: 0 where `x <= min` or `x >= max`.
/// xirang-kernel: hardtanh_backward
pub fn hardtanh_backward(grad_output: &Tensor, self_: &Tensor, min_val: Scalar, max_val: Scalar) -> Result<Tensor> {
    with_real!("hardtanh_backward", grad_output.dtype(), T => {
        let (lo, hi) = (T::from_f64(min_val.to_f64()), T::from_f64(max_val.to_f64()));
        binary_real::<T>("hardtanh_backward", grad_output, self_, move |g, x| {
            if x <= lo || x >= hi { T::ZERO } else { g }
        })
    })
}

/// `leaky_relu_backward(grad_output, self, negative_slope, self_is_result)`: `g` where `x > 0`,
/// else `g * negative_slope` (the same from the input or the result: the slope is positive).
/// xirang-kernel: leaky_relu_backward
pub fn leaky_relu_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    negative_slope: Scalar,
    self_is_result: bool,
) -> Result<Tensor> {
    let _ = self_is_result;
    with_real!("leaky_relu_backward", grad_output.dtype(), T => {
        let slope = T::from_f64(negative_slope.to_f64());
        binary_real::<T>("leaky_relu_backward", grad_output, self_, move |g, x| {
            if x > T::ZERO { g } else { g * slope }
        })
    })
}

/// `silu_backward(grad_output, self)`.
/// xirang-kernel: silu_backward
pub fn silu_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    with_real!("silu_backward", grad_output.dtype(), T => binary_real::<T>("silu_backward", grad_output, self_, |g, x| {
        let s = sigmoid_t(x);
        g * s * (T::ONE + x * (T::ONE - s))
    }))
}

/// `sigmoid_backward(grad_output, output)`.
/// xirang-kernel: sigmoid_backward
pub fn sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    with_real!("sigmoid_backward", grad_output.dtype(), T => {
        binary_real::<T>("sigmoid_backward", grad_output, output, |g, y| g * (T::ONE - y) * y)
    })
}

/// `tanh_backward(grad_output, output)`.
/// xirang-kernel: tanh_backward
pub fn tanh_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    with_real!("tanh_backward", grad_output.dtype(), T => {
        binary_real::<T>("tanh_backward", grad_output, output, |g, y| g * (T::ONE - y * y))
    })
}

// ------------------------------------------------------------ selection

/// Element-size generic gather of raw bytes: `out[i] = src[idx(i)]`.
pub(crate) fn pick_bytes(src: &[u8], es: usize, n: usize, idx: impl Fn(usize) -> usize + Sync) -> Vec<u8> {
    let mut out = vec![0u8; n * es];
    let body = |(i, o): (usize, &mut [u8])| {
        let j = idx(i);
        o.copy_from_slice(&src[j * es..j * es + es]);
    };
    if n >= PAR_MIN {
        out.par_chunks_mut(es).enumerate().for_each(body);
    } else {
        out.chunks_mut(es).enumerate().for_each(body);
    }
    out
}

/// `where.self(condition, self, other)`: self and other of one dtype, any dtype.
/// xirang-kernel: where.self
pub fn where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let ctx = device_of("where", &[condition, self_, other])?;
    if condition.dtype() != DType::Bool {
        return unsupported("where", "a non-bool condition takes the fallback (error path)");
    }
    let d = same_dtype("where", self_, other)?;
    let (c, a, b) = (super::contiguous(condition)?, super::contiguous(self_)?, super::contiguous(other)?);
    let bc = Bcast::new(&[c.sizes(), a.sizes(), b.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, d)?;
    let n = bc.numel();
    if n == 0 {
        return Ok(out);
    }
    let es = d.size();
    let (pc, pa, pb, po) = (c.data_ptr()?, a.data_ptr()?, b.data_ptr()?, out.data_ptr()?);
    let (nc, na, nb) = (c.numel(), a.numel(), b.numel());
    launch(&ctx, [&*c, &*a, &*b, &out], move |mem| {
        let cv = super::read_vec::<u8>(mem, pc, nc)?;
        let av = super::read_vec::<u8>(mem, pa, na * es)?;
        let bv = super::read_vec::<u8>(mem, pb, nb * es)?;
        let mut o = vec![0u8; n * es];
        let body = |(i, dst): (usize, &mut [u8])| {
            let src = if cv[bc.maps[0].at(i)] != 0 { (&av, bc.maps[1].at(i)) } else { (&bv, bc.maps[2].at(i)) };
            dst.copy_from_slice(&src.0[src.1 * es..src.1 * es + es]);
        };
        if n >= PAR_MIN {
            o.par_chunks_mut(es).enumerate().for_each(body);
        } else {
            o.chunks_mut(es).enumerate().for_each(body);
        }
        mem.write(po, &o)
    })?;
    Ok(out)
}

/// `masked_fill.Scalar(self, mask, value)`: the mask broadcasts to `self`.
/// xirang-kernel: masked_fill.Scalar
pub fn masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    let ctx = device_of("masked_fill", &[self_, mask])?;
    let d = self_.dtype();
    if mask.dtype() != DType::Bool {
        return unsupported("masked_fill", "a non-bool mask takes the fallback (error path)");
    }
    if !d.is_floating() && value.is_floating() {
        return unsupported("masked_fill", "a float value into an integer tensor takes the fallback");
    }
    let (x, m) = (super::contiguous(self_)?, super::contiguous(mask)?);
    let bc = Bcast::new(&[x.sizes(), m.sizes()])?;
    if bc.shape[..] != *x.sizes() {
        return unsupported("masked_fill", "the mask must broadcast to self");
    }
    let out = Tensor::empty_on(&ctx, &bc.shape, d)?;
    let n = bc.numel();
    if n == 0 {
        return Ok(out);
    }
    let es = d.size();
    let fill = Tensor::scalar_of(value, d).gather_bytes()?;
    let (px, pm, po, nm) = (x.data_ptr()?, m.data_ptr()?, out.data_ptr()?, m.numel());
    launch(&ctx, [&*x, &*m, &out], move |mem| {
        let mut xv = super::read_vec::<u8>(mem, px, n * es)?;
        let mv = super::read_vec::<u8>(mem, pm, nm)?;
        for (i, dst) in xv.chunks_mut(es).enumerate() {
            if mv[bc.maps[1].at(i)] != 0 {
                dst.copy_from_slice(&fill);
            }
        }
        mem.write(po, &xv)
    })?;
    Ok(out)
}

// ------------------------------------------------------------ dropout

/// Counter-based uniform in [0, 1) for element `i` of a dropout with `seed`
/// (SplitMix64 of seed + i: every element independent, any order, like
/// Philox's counter mode on devices).
fn uniform_at(seed: u64, i: u64) -> f64 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `native_dropout(input, p, train)` -> `(output, mask)` with the seed
/// drawn from the default generator ([`crate::rng::manual_seed`]).
/// xirang-kernel: native_dropout
pub fn native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> Result<(Tensor, Tensor)> {
    let seed = crate::rng::with_default_generator(|g| g.next_u64());
    native_dropout_seeded(input, p, train, seed)
}

/// [`native_dropout`] with an explicit seed.
pub fn native_dropout_seeded(input: &Tensor, p: f64, train: Option<bool>, seed: u64) -> Result<(Tensor, Tensor)> {
    let ctx = device_of("native_dropout", &[input])?;
    if !(0.0..=1.0).contains(&p) {
        return Err(crate::Error::InvalidArgument(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    let d = input.dtype();
    if !is_real(d) {
        return unsupported("native_dropout", format!("dtype {d}"));
    }
    let x = super::contiguous(input)?;
    let n = x.numel();
    if n == 0 {
        return Ok((Tensor::empty_on(&ctx, x.sizes(), d)?, Tensor::empty_on(&ctx, x.sizes(), d)?));
    }
    let out = Tensor::empty_on(&ctx, x.sizes(), d)?;
    let mask = Tensor::empty_on(&ctx, x.sizes(), DType::Bool)?;
    let train = train.unwrap_or(true) && p > 0.0;
    let (px, po, pm) = (x.data_ptr()?, out.data_ptr()?, mask.data_ptr()?);
    with_real!("native_dropout", d, T => {
        let scale = if p >= 1.0 { T::ZERO } else { T::from_f64(1.0 / (1.0 - p)) };
        launch(&ctx, [&*x, &out, &mask], move |mem| {
            let v = T::load(mem, px, n, d)?;
            if !train {
                super::write_slice(mem, pm, &vec![1u8; n])?;
                return T::store(mem, po, &v, d);
            }
            let keep: Vec<u8> = (0..n as u64).map(|i| u8::from(uniform_at(seed, i) >= p)).collect();
            let o: Vec<T> = v.iter().zip(&keep).map(|(x, k)| if *k != 0 { *x * scale } else { T::ZERO }).collect();
            super::write_slice(mem, pm, &keep)?;
            T::store(mem, po, &o, d)
        })
    })?;
    Ok((out, mask))
}

/// `native_dropout_backward(grad_output, mask, scale)`.
/// xirang-kernel: native_dropout_backward
pub fn native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    let ctx = device_of("native_dropout_backward", &[grad_output, mask])?;
    let d = grad_output.dtype();
    if mask.dtype() != DType::Bool || mask.sizes() != grad_output.sizes() {
        return unsupported("native_dropout_backward", "needs a bool mask of the gradient's shape");
    }
    let (g, m) = (super::contiguous(grad_output)?, super::contiguous(mask)?);
    let out = Tensor::empty_on(&ctx, g.sizes(), d)?;
    let n = g.numel();
    if n == 0 {
        return Ok(out);
    }
    let (pg, pm, po) = (g.data_ptr()?, m.data_ptr()?, out.data_ptr()?);
    with_real!("native_dropout_backward", d, T => {
        let s = T::from_f64(scale);
        launch(&ctx, [&*g, &*m, &out], move |mem| {
            let gv = T::load(mem, pg, n, d)?;
            let mv = super::read_vec::<u8>(mem, pm, n)?;
            let o: Vec<T> = gv.iter().zip(&mv).map(|(g, k)| if *k != 0 { *g * s } else { T::ZERO }).collect();
            T::store(mem, po, &o, d)
        })
    })?;
    Ok(out)
}

// ------------------------------------------------------------ Core ATen math
//
// Trigonometric and hyperbolic functions, `erf`, rounding, NaN/inf predicates, logical and
// bitwise operators, `atan2`, `fmod` and `remainder`. Floats compute in f64 from the stored
// value and round once to the result dtype; integer inputs of the float-only functions take the
// fallback (PyTorch promotes them to the default float dtype).

/// `f` over a float tensor, computed in f64.
fn float_map(name: &str, a: &Tensor, f: fn(f64) -> f64) -> Result<Tensor> {
    with_real!(name, a.dtype(), T => unary_real::<T>(name, a, move |x| T::from_f64(f(x.to_f64()))))
}

/// A rounding function: the identity on integers (a copy, as PyTorch returns).
fn rounding(name: &str, a: &Tensor, f: fn(f64) -> f64) -> Result<Tensor> {
    if is_int(a.dtype()) {
        return unary_int(name, a, |x| x);
    }
    float_map(name, a, f)
}

/// Values of any real, integer or bool dtype as f64 (for predicates and truth values).
pub(crate) fn load_f64(
    mem: &dyn crate::driver::KernelMemory,
    p: crate::driver::DevicePtr,
    n: usize,
    d: DType,
) -> Result<Vec<f64>> {
    match d {
        DType::F64 => f64::load(mem, p, n, d),
        DType::F32 | DType::F16 | DType::BF16 => Ok(f32::load(mem, p, n, d)?.into_iter().map(f64::from).collect()),
        _ => Ok(load_int(mem, p, n, d)?.into_iter().map(|v| v as f64).collect()),
    }
}

/// A bool-valued unary kernel over any real, integer or bool tensor.
fn predicate(name: &str, a: &Tensor, f: fn(f64) -> bool) -> Result<Tensor> {
    let ctx = device_of(name, &[a])?;
    let d = a.dtype();
    let a = super::contiguous(a)?;
    let out = Tensor::empty_on(&ctx, a.sizes(), DType::Bool)?;
    let n = a.numel();
    if n == 0 {
        return Ok(out);
    }
    let (pa, po) = (a.data_ptr()?, out.data_ptr()?);
    launch(&ctx, [&*a, &out], move |mem| {
        let x = load_f64(mem, pa, n, d)?;
        super::write_slice(mem, po, &map1(&x, move |v| u8::from(f(v))))
    })?;
    Ok(out)
}

/// A bool-valued binary kernel on the truth values of two tensors of any (mixed) dtypes.
fn logical(name: &str, a: &Tensor, b: &Tensor, f: fn(bool, bool) -> bool) -> Result<Tensor> {
    let ctx = device_of(name, &[a, b])?;
    let (da, db) = (a.dtype(), b.dtype());
    let (a, b) = (super::contiguous(a)?, super::contiguous(b)?);
    let bc = Bcast::new(&[a.sizes(), b.sizes()])?;
    let out = Tensor::empty_on(&ctx, &bc.shape, DType::Bool)?;
    if bc.numel() == 0 {
        return Ok(out);
    }
    let (pa, pb, po, na, nb) = (a.data_ptr()?, b.data_ptr()?, out.data_ptr()?, a.numel(), b.numel());
    launch(&ctx, [&*a, &*b, &out], move |mem| {
        let x = load_f64(mem, pa, na, da)?;
        let y = load_f64(mem, pb, nb, db)?;
        super::write_slice(mem, po, &bc.map2(&x, &y, move |p, q| u8::from(f(p != 0.0, q != 0.0))))
    })?;
    Ok(out)
}

/// Both operands cast to PyTorch's result dtype of `a op b` (`torch.result_type`; a zero-dim
/// operand does not raise the category), or to `float32` when `float_op` and that is an integer
/// type (the default float dtype of `atan2` and friends).
fn promoted(a: &Tensor, b: &Tensor, float_op: bool) -> Result<(Tensor, Tensor)> {
    use crate::dtype::{Operand, result_type};
    let operand = |t: &Tensor| if t.dim() == 0 { Operand::ZeroDim(t.dtype()) } else { Operand::Tensor(t.dtype()) };
    let mut d = result_type(&[operand(a), operand(b)]).unwrap_or(a.dtype());
    if float_op && !d.is_floating() {
        d = DType::F32;
    }
    Ok((a.to_dtype(d)?, b.to_dtype(d)?))
}

/// A bitwise kernel on integer and bool tensors (promoted to one dtype); floats are an error in
/// PyTorch and take the fallback, which reports it.
fn bitwise(name: &str, a: &Tensor, b: &Tensor, f: fn(i64, i64) -> i64) -> Result<Tensor> {
    let (a, b) = promoted(a, b, false)?;
    let d = a.dtype();
    if !(is_int(d) || d == DType::Bool) {
        return unsupported(name, format!("dtype {d} has no bitwise kernel"));
    }
    binary_int(name, &a, &b, None, f)
}

/// An integer division-like kernel: a zero divisor is PyTorch's `ZeroDivisionError`.
fn int_division(name: &str, a: &Tensor, b: &Tensor, f: fn(i64, i64) -> i64) -> Result<Tensor> {
    if b.to_i64_vec()?.contains(&0) {
        return Err(crate::Error::InvalidArgument(format!("{name}: ZeroDivisionError")));
    }
    binary_int(name, a, b, None, f)
}

/// `sin`.
/// xirang-kernel: sin
pub fn sin(self_: &Tensor) -> Result<Tensor> {
    float_map("sin", self_, f64::sin)
}
/// `cos`.
/// xirang-kernel: cos
pub fn cos(self_: &Tensor) -> Result<Tensor> {
    float_map("cos", self_, f64::cos)
}
/// `tan`.
/// xirang-kernel: tan
pub fn tan(self_: &Tensor) -> Result<Tensor> {
    float_map("tan", self_, f64::tan)
}
/// `asin`.
/// xirang-kernel: asin
pub fn asin(self_: &Tensor) -> Result<Tensor> {
    float_map("asin", self_, f64::asin)
}
/// `acos`.
/// xirang-kernel: acos
pub fn acos(self_: &Tensor) -> Result<Tensor> {
    float_map("acos", self_, f64::acos)
}
/// `atan`.
/// xirang-kernel: atan
pub fn atan(self_: &Tensor) -> Result<Tensor> {
    float_map("atan", self_, f64::atan)
}
/// `exp2` (computed in f64 and rounded once: the `exp(x * ln 2)` recipe rounds `x * ln 2` to the
/// tensor's dtype first, which costs f16 a few ulp).
/// xirang-kernel: exp2
pub fn exp2(self_: &Tensor) -> Result<Tensor> {
    float_map("exp2", self_, f64::exp2)
}
/// `sinh`.
/// xirang-kernel: sinh
pub fn sinh(self_: &Tensor) -> Result<Tensor> {
    float_map("sinh", self_, f64::sinh)
}
/// `cosh`.
/// xirang-kernel: cosh
pub fn cosh(self_: &Tensor) -> Result<Tensor> {
    float_map("cosh", self_, f64::cosh)
}
/// `asinh`.
/// xirang-kernel: asinh
pub fn asinh(self_: &Tensor) -> Result<Tensor> {
    float_map("asinh", self_, f64::asinh)
}
/// `acosh`.
/// xirang-kernel: acosh
pub fn acosh(self_: &Tensor) -> Result<Tensor> {
    float_map("acosh", self_, f64::acosh)
}
/// `atanh`.
/// xirang-kernel: atanh
pub fn atanh(self_: &Tensor) -> Result<Tensor> {
    float_map("atanh", self_, f64::atanh)
}
/// `erf`.
/// xirang-kernel: erf
pub fn erf(self_: &Tensor) -> Result<Tensor> {
    float_map("erf", self_, |x| x.gauss_erf())
}
/// `ceil`.
/// xirang-kernel: ceil
pub fn ceil(self_: &Tensor) -> Result<Tensor> {
    rounding("ceil", self_, f64::ceil)
}
/// `floor`.
/// xirang-kernel: floor
pub fn floor(self_: &Tensor) -> Result<Tensor> {
    rounding("floor", self_, f64::floor)
}
/// `round`: halves to even, as `std::nearbyint` in PyTorch.
/// xirang-kernel: round
pub fn round(self_: &Tensor) -> Result<Tensor> {
    rounding("round", self_, f64::round_ties_even)
}
/// `trunc`.
/// xirang-kernel: trunc
pub fn trunc(self_: &Tensor) -> Result<Tensor> {
    rounding("trunc", self_, f64::trunc)
}
/// `isnan` (false for integers and bool).
/// xirang-kernel: isnan
pub fn isnan(self_: &Tensor) -> Result<Tensor> {
    predicate("isnan", self_, f64::is_nan)
}
/// `isinf` (false for integers and bool).
/// xirang-kernel: isinf
pub fn isinf(self_: &Tensor) -> Result<Tensor> {
    predicate("isinf", self_, f64::is_infinite)
}
/// `pow.Tensor_Scalar` for floating tensors: the small exponents CPU special-cases as products
/// (`2`, `3`), square roots (`0.5`, `-0.5`) and reciprocals (`-1`, `-2`) are computed so too,
/// others as `powf` in f64, rounded once. Integer and bool tensors take the fallback.
/// xirang-kernel: pow.Tensor_Scalar
pub fn pow_tensor_scalar(self_: &Tensor, exponent: Scalar) -> Result<Tensor> {
    const NAME: &str = "pow";
    if matches!(exponent, Scalar::Bool(_)) {
        return unsupported(NAME, "a bool exponent takes the fallback");
    }
    let e = exponent.to_f64();
    with_real!(NAME, self_.dtype(), T => {
        if e == 2.0 {
            unary_real::<T>(NAME, self_, |x| x * x)
        } else if e == 3.0 {
            unary_real::<T>(NAME, self_, |x| x * x * x)
        } else if e == 0.5 {
            unary_real::<T>(NAME, self_, |x| x.sqrt())
        } else if e == -0.5 {
            unary_real::<T>(NAME, self_, |x| T::ONE / x.sqrt())
        } else if e == -1.0 {
            unary_real::<T>(NAME, self_, |x| T::ONE / x)
        } else if e == -2.0 {
            unary_real::<T>(NAME, self_, |x| T::ONE / (x * x))
        } else {
            unary_real::<T>(NAME, self_, move |x| T::from_f64(x.to_f64().powf(e)))
        }
    })
}
/// `isneginf` (false for integers and bool).
/// xirang-kernel: isneginf
pub fn isneginf(self_: &Tensor) -> Result<Tensor> {
    predicate("isneginf", self_, |v| v == f64::NEG_INFINITY)
}
/// `logical_not`: `x == 0` (NaN is true, so its `logical_not` is false).
/// xirang-kernel: logical_not
pub fn logical_not(self_: &Tensor) -> Result<Tensor> {
    predicate("logical_not", self_, |v| v == 0.0)
}
/// `logical_and`.
/// xirang-kernel: logical_and
pub fn logical_and(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_and", self_, other, |p, q| p && q)
}
/// `logical_or`.
/// xirang-kernel: logical_or
pub fn logical_or(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_or", self_, other, |p, q| p || q)
}
/// `logical_xor`.
/// xirang-kernel: logical_xor
pub fn logical_xor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_xor", self_, other, |p, q| p != q)
}
/// `bitwise_not` (`!x` on integers, logical not on bool).
/// xirang-kernel: bitwise_not
pub fn bitwise_not(self_: &Tensor) -> Result<Tensor> {
    match self_.dtype() {
        DType::Bool => unary_int("bitwise_not", self_, |x| i64::from(x == 0)),
        d if is_int(d) => unary_int("bitwise_not", self_, |x| !x),
        d => unsupported("bitwise_not", format!("dtype {d} has no bitwise kernel")),
    }
}
/// `bitwise_and.Tensor`.
/// xirang-kernel: bitwise_and.Tensor
pub fn bitwise_and_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    bitwise("bitwise_and", self_, other, |x, y| x & y)
}
/// `bitwise_or.Tensor`.
/// xirang-kernel: bitwise_or.Tensor
pub fn bitwise_or_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    bitwise("bitwise_or", self_, other, |x, y| x | y)
}
/// `bitwise_xor.Tensor`.
/// xirang-kernel: bitwise_xor.Tensor
pub fn bitwise_xor_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    bitwise("bitwise_xor", self_, other, |x, y| x ^ y)
}
/// `bitwise_and.Scalar` (the scalar must keep the tensor's dtype).
/// xirang-kernel: bitwise_and.Scalar
pub fn bitwise_and_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("bitwise_and", self_.dtype(), other)?;
    bitwise_and_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}
/// `bitwise_or.Scalar` (the scalar must keep the tensor's dtype).
/// xirang-kernel: bitwise_or.Scalar
pub fn bitwise_or_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("bitwise_or", self_.dtype(), other)?;
    bitwise_or_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}
/// `bitwise_xor.Scalar` (the scalar must keep the tensor's dtype).
/// xirang-kernel: bitwise_xor.Scalar
pub fn bitwise_xor_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("bitwise_xor", self_.dtype(), other)?;
    bitwise_xor_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}
/// `atan2(self, other)`.
/// xirang-kernel: atan2
pub fn atan2(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let (a, b) = promoted(self_, other, true)?;
    with_real!("atan2", a.dtype(), T => {
        binary_real::<T>("atan2", &a, &b, |y, x| T::from_f64(y.to_f64().atan2(x.to_f64())))
    })
}
/// `fmod.Tensor`: the remainder with the dividend's sign (C `fmod`; a zero integer divisor is an
/// error).
/// xirang-kernel: fmod.Tensor
pub fn fmod_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let (a, b) = promoted(self_, other, false)?;
    if is_int(a.dtype()) {
        return int_division("fmod", &a, &b, i64::wrapping_rem);
    }
    with_real!("fmod", a.dtype(), T => {
        binary_real::<T>("fmod", &a, &b, |x, y| T::from_f64(x.to_f64() % y.to_f64()))
    })
}
/// `fmod.Scalar`.
/// xirang-kernel: fmod.Scalar
pub fn fmod_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("fmod", self_.dtype(), other)?;
    fmod_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}
/// `remainder.Tensor`: the remainder with the divisor's sign (Python `%`), as PyTorch's CPU
/// kernel: `m = fmod(x, y); if m != 0 && (y < 0) != (m < 0) { m += y }`.
/// xirang-kernel: remainder.Tensor
pub fn remainder_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let (a, b) = promoted(self_, other, false)?;
    if is_int(a.dtype()) {
        return int_division("remainder", &a, &b, |x, y| {
            let m = x.wrapping_rem(y);
            if m != 0 && ((y < 0) != (m < 0)) { m + y } else { m }
        });
    }
    with_real!("remainder", a.dtype(), T => {
        binary_real::<T>("remainder", &a, &b, |x, y| {
            let (x, y) = (x.to_f64(), y.to_f64());
            let mut m = x % y;
            if m != 0.0 && ((y < 0.0) != (m < 0.0)) {
                m += y;
            }
            T::from_f64(m)
        })
    })
}
/// `remainder.Scalar`.
/// xirang-kernel: remainder.Scalar
pub fn remainder_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    scalar_keeps_dtype("remainder", self_.dtype(), other)?;
    remainder_tensor(self_, &scalar_on(self_, other, self_.dtype())?)
}
