//! Matrix products: `mm`, `bmm`, `addmm`, `baddbmm`, `addmv` for float dtypes.
//!
//! The product itself is `ndarray`'s `general_mat_mul` over matrixmultiply's
//! packed, cache-blocked, register-blocked kernels (AVX-512, else AVX2/FMA,
//! picked at run time by what the CPU has, as PyTorch's CPU BLAS does: the
//! runtime's manifest turns on matrixmultiply's `avx512` feature); bands of output
//! rows run as rayon tasks. A transposed operand (a `.t()` view of a
//! contiguous matrix) is read as stored and transposed while loading, with
//! no device copy. Accumulation is in the compute type (f32 for
//! f32/f16/bf16, as PyTorch's CPU BLAS), in blocked order.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::{PAR_MIN, Real, device_of, launch, unsupported, with_real};
use crate::driver::{DevicePtr, KernelMemory};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// How a matrix operand is stored: row-major, or as the transpose of a
/// row-major matrix.
#[derive(Clone, Copy)]
struct Operand {
    ptr: DevicePtr,
    rows: usize,
    cols: usize,
    transposed: bool,
}

/// A 2-D (or batch of 2-D) operand whose last two dims are row-major or
/// transposed-contiguous; other layouts get a contiguous device copy.
fn operand(t: &Tensor) -> Result<(Tensor, bool)> {
    let nd = t.dim();
    let (s, st) = (t.sizes(), t.strides());
    let (r, c) = (s[nd - 2], s[nd - 1]);
    let batch_ok =
        |inner: usize| (0..nd - 2).all(|i| s[i] <= 1 || st[i] == inner * s[i + 1..nd - 2].iter().product::<usize>());
    if t.is_contiguous() {
        return Ok((t.clone(), false));
    }
    // stored as [c, r] row-major: a row steps by 1 (when there are rows to step), a column by r
    // (when there are columns); a [1, n] view with a column stride other than 1 is neither layout
    if (r <= 1 || st[nd - 2] == 1) && (c <= 1 || st[nd - 1] == r) && batch_ok(r * c) {
        return Ok((t.clone(), true));
    }
    Ok((super::contiguous(t)?.into_owned(), false))
}

fn load_matrix<T: Real>(mem: &dyn KernelMemory, op: Operand, batch: usize, d: DType) -> Result<Vec<T>> {
    let (r, c) = (op.rows, op.cols);
    let v = T::load(mem, op.ptr, batch * r * c, d)?;
    if !op.transposed {
        return Ok(v);
    }
    // stored as [batch, c, r]; return [batch, r, c]
    let mut out = vec![T::ZERO; v.len()];
    for b in 0..batch {
        let (src, dst) = (&v[b * r * c..(b + 1) * r * c], &mut out[b * r * c..(b + 1) * r * c]);
        for j in 0..c {
            for i in 0..r {
                dst[i * c + j] = src[j * r + i];
            }
        }
    }
    Ok(out)
}

/// `c[n, m] += alpha * a[n, k] * b[k, m]` (row-major slices).
pub(super) fn gemm<T: Real>(a: &[T], b: &[T], c: &mut [T], n: usize, k: usize, m: usize, alpha: T) -> Result<()> {
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let shape = |e: ndarray::ShapeError| Error::Shape(format!("gemm: {e}"));
    let bv = ArrayView2::from_shape((k, m), b).map_err(shape)?;
    // `c[rows] += a[rows] @ b`: matrixmultiply's packed, register-blocked kernels (AVX-512, else
    // AVX2/FMA, chosen at run time by what the CPU has)
    let rows = |ar: &[T], cr: &mut [T]| -> Result<()> {
        let r = cr.len() / m;
        let av = ArrayView2::from_shape((r, k), ar).map_err(shape)?;
        let mut cv = ArrayViewMut2::from_shape((r, m), cr).map_err(shape)?;
        general_mat_mul(alpha, &av, &bv, T::ONE, &mut cv);
        Ok(())
    };
    if n * m * k >= PAR_MIN && n >= 2 {
        // one band of rows per rayon thread
        let per = n.div_ceil(rayon::current_num_threads().clamp(1, n));
        c.par_chunks_mut(per * m).zip(a.par_chunks(per * k)).try_for_each(|(cr, ar)| rows(ar, cr))
    } else {
        rows(a, c)
    }
}

/// `c = beta * bias` with `bias` indexed by its (broadcast) strides.
fn init_bias<T: Real>(c: &mut [T], bias: &[T], (n, m): (usize, usize), (s0, s1): (usize, usize), beta: T) {
    for i in 0..n {
        for j in 0..m {
            c[i * m + j] = beta * bias[i * s0 + j * s1];
        }
    }
}

/// A row-major `[rows, cols]` matrix, or the transpose of a row-major `[cols, rows]` one, as a
/// strided view of `data`.
fn view<T>(data: &[T], rows: usize, cols: usize, transposed: bool) -> Option<ArrayView2<'_, T>> {
    use ndarray::ShapeBuilder;
    let strides = if transposed { (1, rows) } else { (cols, 1) };
    ArrayView2::from_shape((rows, cols).strides(strides), data).ok()
}

/// `out[b] = alpha * a[b] @ b[b] + beta * bias` straight on mapped device memory (no operand
/// copies, transposed operands read by stride). `Ok(false)` when the driver does not map these
/// ranges (the caller copies instead).
fn mapped_product<T: Real>(
    mem: &dyn KernelMemory,
    (oa, ob): (Operand, Operand),
    bias: Option<Bias>,
    (alpha, beta): (T, T),
    batch: usize,
    po: DevicePtr,
) -> Result<bool> {
    let (n, k, m) = (oa.rows, oa.cols, ob.cols);
    let mut ins = vec![(oa.ptr, batch * n * k), (ob.ptr, batch * k * m)];
    ins.extend(bias.map(|b| (b.ptr, b.span)));
    let mut ok = true;
    let ran = super::mapped::<T>(mem, &ins, (po, batch * n * m), |xs, o| {
        for bi in 0..batch {
            let c = &mut o[bi * n * m..(bi + 1) * n * m];
            let keep = match (bias, xs.get(2)) {
                (Some(b), Some(bv)) => {
                    init_bias(c, &bv[bi * b.strides[0]..], (n, m), (b.strides[1], b.strides[2]), beta);
                    T::ONE
                }
                _ => T::ZERO,
            };
            let (Some(av), Some(bv), Ok(mut cv)) = (
                view(&xs[0][bi * n * k..(bi + 1) * n * k], n, k, oa.transposed),
                view(&xs[1][bi * k * m..(bi + 1) * k * m], k, m, ob.transposed),
                ArrayViewMut2::from_shape((n, m), c),
            ) else {
                ok = false;
                return;
            };
            // beta 0 (`keep`): matrixmultiply does not read `c`, so garbage (NaN) in it is ignored
            general_mat_mul(alpha, &av, &bv, keep, &mut cv);
        }
    })?;
    if ran && !ok {
        return Err(Error::Shape(format!("matmul: cannot view [{n}, {k}] x [{k}, {m}] operands")));
    }
    Ok(ran)
}

fn check_float(name: &str, a: &Tensor, b: &Tensor) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return Err(Error::DType(format!(
            "{name}: expected m1 and m2 to have the same dtype, but got: {} != {}",
            a.dtype().name(),
            b.dtype().name()
        )));
    }
    if !super::is_real(a.dtype()) {
        return unsupported(name, format!("dtype {} takes the fallback", a.dtype()));
    }
    Ok(a.dtype())
}

/// A bias operand in device memory: its address, the elements its strides reach, and its strides
/// broadcast to `[batch, n, m]` (0 where it is broadcast).
#[derive(Clone, Copy)]
struct Bias {
    ptr: DevicePtr,
    span: usize,
    strides: [usize; 3],
}

/// `out = beta * bias + alpha * a @ b` over a batch; `bias` is broadcast to `[batch, n, m]` (or
/// absent).
#[allow(clippy::too_many_arguments)]
fn batched<T: Real>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    bias: Option<&Tensor>,
    beta: f64,
    alpha: f64,
    batch: usize,
    (n, k, m): (usize, usize, usize),
    out_shape: &[usize],
) -> Result<Tensor> {
    let mut ins = vec![a, b];
    ins.extend(bias);
    let ctx = device_of(name, &ins)?;
    let d = a.dtype();
    let (a, ta) = operand(a)?;
    let (b, tb) = operand(b)?;
    let out = Tensor::empty_on(&ctx, out_shape, d)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    // the bias as a broadcast view (no copy): its strides index it inside the kernel
    let bias = bias.map(|t| t.broadcast_to(&[batch, n, m])).transpose()?;
    let bias_at = bias
        .as_ref()
        .map(|t| -> Result<Bias> {
            let span = crate::shape::storage_extent(t.sizes(), t.strides(), 0);
            Ok(Bias { ptr: t.data_ptr()?, span, strides: [t.strides()[0], t.strides()[1], t.strides()[2]] })
        })
        .transpose()?;
    let oa = Operand { ptr: if a.numel() > 0 { a.data_ptr()? } else { 0 }, rows: n, cols: k, transposed: ta };
    let ob = Operand { ptr: if b.numel() > 0 { b.data_ptr()? } else { 0 }, rows: k, cols: m, transposed: tb };
    let po = out.data_ptr()?;
    let mut keep = vec![a, b, out.clone()];
    keep.extend(bias);
    let (al, be) = (T::from_f64(alpha), T::from_f64(beta));
    // beta == 0 ignores the bias (NaN included), as PyTorch.
    let bias_at = bias_at.filter(|_| beta != 0.0);
    launch(&ctx, keep, move |mem| {
        // The operands stored as the compute type (f32 as f32, f64 as f64; not f16/bf16): the
        // product runs on device memory in place, reading transposed operands by their strides.
        if std::mem::size_of::<T>() == d.size() && mapped_product(mem, (oa, ob), bias_at, (al, be), batch, po)? {
            return Ok(());
        }
        let av = load_matrix::<T>(mem, oa, batch, d)?;
        let bv = load_matrix::<T>(mem, ob, batch, d)?;
        let mut c = vec![T::ZERO; batch * n * m];
        if let Some(b) = bias_at {
            let bv = T::load(mem, b.ptr, b.span, d)?;
            let [sb, s0, s1] = b.strides;
            for bi in 0..batch {
                init_bias(&mut c[bi * n * m..(bi + 1) * n * m], &bv[bi * sb..], (n, m), (s0, s1), be);
            }
        }
        for bi in 0..batch {
            gemm(
                &av[bi * n * k..(bi + 1) * n * k],
                &bv[bi * k * m..(bi + 1) * k * m],
                &mut c[bi * n * m..(bi + 1) * n * m],
                n,
                k,
                m,
                al,
            )?;
        }
        T::store(mem, po, &c, d)
    })?;
    Ok(out)
}

/// `mm(self, mat2)`.
/// xirang-kernel: mm
pub fn mm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    let d = check_float("mm", self_, mat2)?;
    let (&[n, k], &[k2, m]) = (self_.sizes(), mat2.sizes()) else {
        return Err(Error::Shape("mm: both arguments must be 2-D".into()));
    };
    if k != k2 {
        return Err(Error::Shape(format!("mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m})")));
    }
    with_real!("mm", d, T => batched::<T>("mm", self_, mat2, None, 0.0, 1.0, 1, (n, k, m), &[n, m]))
}

/// `bmm(self, mat2)`.
/// xirang-kernel: bmm
pub fn bmm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    let d = check_float("bmm", self_, mat2)?;
    let (&[b, n, k], &[b2, k2, m]) = (self_.sizes(), mat2.sizes()) else {
        return Err(Error::Shape("bmm: both arguments must be 3-D".into()));
    };
    if b != b2 || k != k2 {
        return Err(Error::Shape(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{b}, {k}] but got: [{b2}, {k2}]."
        )));
    }
    with_real!("bmm", d, T => batched::<T>("bmm", self_, mat2, None, 0.0, 1.0, b, (n, k, m), &[b, n, m]))
}

/// `addmm(self, mat1, mat2, beta, alpha)` = `beta * self + alpha * mat1 @ mat2`.
/// xirang-kernel: addmm
pub fn addmm(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    let d = check_float("addmm", mat1, mat2)?;
    if self_.dtype() != d {
        return unsupported("addmm", "a bias of another dtype takes the fallback");
    }
    let (&[n, k], &[k2, m]) = (mat1.sizes(), mat2.sizes()) else {
        return Err(Error::Shape("addmm: mat1 and mat2 must be 2-D".into()));
    };
    if k != k2 {
        return Err(Error::Shape(format!("mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m})")));
    }
    let (be, al) = (beta.to_f64(), alpha.to_f64());
    with_real!("addmm", d, T => batched::<T>("addmm", mat1, mat2, Some(self_), be, al, 1, (n, k, m), &[n, m]))
}

/// `baddbmm(self, batch1, batch2, beta, alpha)` = `beta * self + alpha * batch1 @ batch2`, batch by
/// batch (`self` broadcast to the result). With `beta` 0, `self` is not read (NaN in it is ignored),
/// as PyTorch: a composition `beta * self + ...` would keep its NaN.
/// xirang-kernel: baddbmm
pub fn baddbmm(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    let d = check_float("baddbmm", batch1, batch2)?;
    if self_.dtype() != d {
        return unsupported("baddbmm", "an input of another dtype takes the fallback");
    }
    let (&[b, n, k], &[b2, k2, m]) = (batch1.sizes(), batch2.sizes()) else {
        return Err(Error::Shape("baddbmm: batch1 and batch2 must be 3-D tensors".into()));
    };
    if b != b2 || k != k2 {
        return Err(Error::Shape(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{b}, {k}] but got: [{b2}, {k2}]."
        )));
    }
    let (be, al) = (beta.to_f64(), alpha.to_f64());
    with_real!("baddbmm", d, T => batched::<T>("baddbmm", batch1, batch2, Some(self_), be, al, b, (n, k, m), &[b, n, m]))
}

/// `addmv(self, mat, vec, beta, alpha)` = `beta * self + alpha * mat @ vec`: the product of `mat`
/// and `vec` as a one-column matrix. With `beta` 0, `self` is not read, as PyTorch.
/// xirang-kernel: addmv
pub fn addmv(self_: &Tensor, mat: &Tensor, vec: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    let d = check_float("addmv", mat, vec)?;
    if self_.dtype() != d {
        return unsupported("addmv", "an input of another dtype takes the fallback");
    }
    let (&[n, k], &[k2]) = (mat.sizes(), vec.sizes()) else {
        return Err(Error::Shape(format!(
            "vector + matrix @ vector expected, got {}, {}, {}",
            self_.dim(),
            mat.dim(),
            vec.dim()
        )));
    };
    if k != k2 {
        return Err(Error::Shape(format!("size mismatch, got input ({n}), mat ({n}x{k}), vec ({k2})")));
    }
    // `self` is `[n]` (or broadcast to it): a column, as the product's
    let bias = if self_.dim() == 1 { self_.unsqueeze(1)? } else { self_.clone() };
    let column = vec.unsqueeze(1)?;
    let (be, al) = (beta.to_f64(), alpha.to_f64());
    with_real!("addmv", d, T => batched::<T>("addmv", mat, &column, Some(&bias), be, al, 1, (n, k, 1), &[n]))
}
