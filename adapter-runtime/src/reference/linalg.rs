//! Matrix products: mm, bmm, addmm, baddbmm, addmv, matmul (with batch broadcasting).

use rayon::prelude::*;

use super::{PARALLEL_THRESHOLD, on_host1};
use crate::dtype::{DType, Scalar};
use crate::error::{Result, dtype_err, shape_err};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

fn same_dtype(name: &str, a: &Tensor, b: &Tensor) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return dtype_err(format!(
            "{name}: expected m1 and m2 to have the same dtype, but got: {} != {}",
            a.dtype().name(),
            b.dtype().name()
        ));
    }
    if a.dtype() == DType::Bool {
        return dtype_err(format!("\"{name}\" not implemented for 'Bool'"));
    }
    Ok(a.dtype())
}

/// Batched product of row-major `[batch, n, k] x [batch, k, m]` values.
fn bmm_f64(a: &[f64], b: &[f64], batch: usize, n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; batch * n * m];
    let row = |(idx, o): (usize, &mut [f64])| {
        let (bi, i) = (idx / n.max(1), idx % n.max(1));
        let ar = &a[bi * n * k + i * k..bi * n * k + i * k + k];
        let bb = &b[bi * k * m..bi * k * m + k * m];
        for (p, &av) in ar.iter().enumerate() {
            let br = &bb[p * m..p * m + m];
            for (ov, bv) in o.iter_mut().zip(br) {
                *ov += av * bv;
            }
        }
    };
    if m == 0 {
        return out;
    }
    if batch * n * m * k.max(1) >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(m).enumerate().for_each(row);
    } else {
        out.chunks_mut(m).enumerate().for_each(row);
    }
    out
}

fn bmm_i64(a: &[i64], b: &[i64], batch: usize, n: usize, k: usize, m: usize) -> Vec<i64> {
    let mut out = vec![0i64; batch * n * m];
    for bi in 0..batch {
        for i in 0..n {
            for p in 0..k {
                let av = a[bi * n * k + i * k + p];
                for j in 0..m {
                    let o = &mut out[bi * n * m + i * m + j];
                    *o = o.wrapping_add(av.wrapping_mul(b[bi * k * m + p * m + j]));
                }
            }
        }
    }
    out
}

/// Host batched matmul of 3-D tensors with equal batch sizes.
fn bmm_host(a: &Tensor, b: &Tensor, d: DType) -> Result<Tensor> {
    let (bs, n, k) = (a.sizes()[0], a.sizes()[1], a.sizes()[2]);
    let m = b.sizes()[2];
    let shape = [bs, n, m];
    if d.is_floating() {
        Tensor::from_f64(&bmm_f64(&a.to_f64_vec()?, &b.to_f64_vec()?, bs, n, k, m), &shape, d)
    } else {
        Tensor::from_i64(&bmm_i64(&a.to_i64_vec()?, &b.to_i64_vec()?, bs, n, k, m), &shape, d)
    }
}

/// `torch.mm(a, b)`: `[n, k] x [k, m]`.
/// xirang-fallback: mm
pub fn mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dim() != 2 || b.dim() != 2 {
        return shape_err(format!("mm: expected 2D tensors, got {}D and {}D", a.dim(), b.dim()));
    }
    if a.sizes()[1] != b.sizes()[0] {
        return shape_err(format!(
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            a.sizes()[0],
            a.sizes()[1],
            b.sizes()[0],
            b.sizes()[1]
        ));
    }
    let d = same_dtype("mm", a, b)?;
    on_host1("mm", &[a, b], |h| {
        let r = bmm_host(&h[0].unsqueeze(0)?, &h[1].unsqueeze(0)?, d)?;
        r.squeeze_dim(0)
    })
}

/// `torch.bmm(a, b)`: `[b, n, k] x [b, k, m]`.
/// xirang-fallback: bmm
pub fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dim() != 3 || b.dim() != 3 {
        return shape_err(format!("batch1 must be a 3D tensor; got {}D and {}D", a.dim(), b.dim()));
    }
    if a.sizes()[0] != b.sizes()[0] || a.sizes()[2] != b.sizes()[1] {
        return shape_err(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
            a.sizes()[0],
            a.sizes()[2],
            b.sizes()[0],
            b.sizes()[1]
        ));
    }
    let d = same_dtype("bmm", a, b)?;
    on_host1("bmm", &[a, b], |h| bmm_host(&h[0], &h[1], d))
}

/// `torch.addmm(input, m1, m2, beta, alpha)` = `beta*input + alpha*(m1@m2)`;
/// with `beta == 0` the input is ignored (NaN in it does not propagate).
/// xirang-fallback: addmm
pub fn addmm(input: &Tensor, m1: &Tensor, m2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    add_product("addmm", input, mm(m1, m2)?, beta, alpha)
}

/// `torch.baddbmm(input, b1, b2, beta, alpha)` = `beta*input + alpha*(b1@b2)`, batch by batch;
/// with `beta == 0` the input is ignored.
/// xirang-fallback: baddbmm
pub fn baddbmm(input: &Tensor, b1: &Tensor, b2: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    add_product("baddbmm", input, bmm(b1, b2)?, beta, alpha)
}

/// `torch.addmv(input, mat, vec, beta, alpha)` = `beta*input + alpha*(mat@vec)`; with `beta == 0`
/// the input is ignored.
/// xirang-fallback: addmv
pub fn addmv(input: &Tensor, mat: &Tensor, vec: &Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    if mat.dim() != 2 || vec.dim() != 1 {
        return shape_err(format!(
            "vector + matrix @ vector expected, got {}, {}, {}",
            input.dim(),
            mat.dim(),
            vec.dim()
        ));
    }
    if mat.sizes()[1] != vec.sizes()[0] {
        return shape_err(format!(
            "size mismatch, got input ({}), mat ({}x{}), vec ({})",
            mat.sizes()[0],
            mat.sizes()[0],
            mat.sizes()[1],
            vec.sizes()[0]
        ));
    }
    let prod = mm(mat, &vec.unsqueeze(1)?)?.squeeze_dim(1)?;
    add_product("addmv", input, prod, beta, alpha)
}

/// `beta * input + alpha * prod`, `input` broadcast to the product's shape; with `beta == 0` the
/// input is not read (PyTorch's rule for the BLAS-style operators).
fn add_product(name: &'static str, input: &Tensor, prod: Tensor, beta: Scalar, alpha: Scalar) -> Result<Tensor> {
    let d = same_dtype(name, input, &prod)?;
    on_host1(name, &[input, &prod], |h| {
        let shape = prod.sizes().to_vec();
        let inp = h[0].broadcast_to(&shape).map_err(|_| {
            crate::error::Error::Shape(format!(
                "{name}: input of shape {:?} does not broadcast to {:?}",
                h[0].sizes(),
                shape
            ))
        })?;
        if d.is_floating() {
            let (be, al) = (beta.to_f64(), alpha.to_f64());
            let (x, p) = (inp.to_f64_vec()?, h[1].to_f64_vec()?);
            let v: Vec<f64> = x.iter().zip(&p).map(|(x, p)| if be == 0.0 { al * p } else { be * x + al * p }).collect();
            Tensor::from_f64(&v, &shape, d)
        } else {
            let (be, al) = (beta.to_i64(), alpha.to_i64());
            let (x, p) = (inp.to_i64_vec()?, h[1].to_i64_vec()?);
            let v: Vec<i64> =
                x.iter().zip(&p).map(|(x, p)| be.wrapping_mul(*x).wrapping_add(al.wrapping_mul(*p))).collect();
            Tensor::from_i64(&v, &shape, d)
        }
    })
}

/// `torch.matmul(a, b)` with NumPy-style batch broadcasting: 1-D x 1-D is
/// a dot product (zero-dim result); a 1-D operand gets a dim prepended
/// (left) or appended (right) that is removed from the result.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (da, db) = (a.dim(), b.dim());
    if da == 0 || db == 0 {
        return shape_err(format!("both arguments to matmul need to be at least 1D, but they are {da}D and {db}D"));
    }
    if da == 1 && db == 1 {
        if a.sizes()[0] != b.sizes()[0] {
            return shape_err(format!(
                "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                a.sizes()[0],
                b.sizes()[0],
                a.sizes()[0],
                b.sizes()[0]
            ));
        }
        return mm(&a.unsqueeze(0)?, &b.unsqueeze(1)?)?.reshape(&[]);
    }
    let a2 = if da == 1 { a.unsqueeze(0)? } else { a.clone() };
    let b2 = if db == 1 { b.unsqueeze(1)? } else { b.clone() };
    let (n, k) = (a2.sizes()[a2.dim() - 2], a2.sizes()[a2.dim() - 1]);
    let (k2, m) = (b2.sizes()[b2.dim() - 2], b2.sizes()[b2.dim() - 1]);
    if k != k2 {
        return shape_err(format!("mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m})"));
    }
    let batch = broadcast_shapes(&a2.sizes()[..a2.dim() - 2], &b2.sizes()[..b2.dim() - 2])?;
    let nb: usize = batch.iter().product();
    let mut sa = batch.clone();
    sa.extend([n, k]);
    let mut sb = batch.clone();
    sb.extend([k, m]);
    let a3 = a2.broadcast_to(&sa)?.reshape(&[nb as i64, n as i64, k as i64])?;
    let b3 = b2.broadcast_to(&sb)?.reshape(&[nb as i64, k as i64, m as i64])?;
    let r = bmm(&a3, &b3)?;
    let mut out: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
    if da > 1 {
        out.push(n as i64);
    }
    if db > 1 {
        out.push(m as i64);
    }
    r.reshape(&out)
}
