//! Max pooling on the device: `max_pool2d_with_indices`, where `nn.MaxPool2d` and `F.max_pool2d`
//! of a PrivateUse1 tensor land, and `max_pool2d_with_indices_backward`. The geometry (kernel,
//! stride, padding, dilation, `ceil_mode`, PyTorch's checks and messages) is the host
//! reference's (`reference::core_aten_more::{windows, pool_geometry}`), so both tiers agree on
//! every shape; the kernel walks the windows of each plane in one launch. Floating dtypes; the
//! others take the fallback.

use rayon::prelude::*;

use super::{PAR_MIN, Real, contiguous, device_of, is_real, launch, load_int, unsupported, with_real};
use crate::error::{Error, Result};
use crate::reference::core_aten_more::{pool_geometry, windows};
use crate::shape::Window;
use crate::tensor::Tensor;

/// Per output position of one plane (row-major over the output's spatial sizes): the flat
/// in-plane input positions its window reads, and the position PyTorch reports for a window with
/// no tap inside the input.
fn plane_windows(win: &[Window], spatial: &[usize], outs: &[usize]) -> Vec<(Vec<usize>, i64)> {
    let (h, w) = (spatial[0], spatial[1]);
    let rows: Vec<(Vec<usize>, i128)> = (0..outs[0]).map(|o| win[0].taps(o, h)).collect();
    let cols: Vec<(Vec<usize>, i128)> = (0..outs[1]).map(|o| win[1].taps(o, w)).collect();
    let mut out = Vec::with_capacity(outs[0] * outs[1]);
    for (rt, r0) in &rows {
        for (ct, c0) in &cols {
            let taps = rt.iter().flat_map(|r| ct.iter().map(move |c| r * w + c)).collect();
            let first = i64::try_from(r0 * w as i128 + c0).unwrap_or(i64::MAX);
            out.push((taps, first));
        }
    }
    out
}

/// `max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)`: the
/// maxima and their int64 flat indices into each input plane. PyTorch's CPU rule: a strictly
/// larger value replaces the maximum and so does every NaN.
/// xirang-kernel: max_pool2d_with_indices
pub fn max_pool2d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    const NAME: &str = "max_pool2d_with_indices";
    let ctx = device_of(NAME, &[self_])?;
    let d = self_.dtype();
    if !is_real(d) {
        return unsupported(NAME, format!("dtype {d} takes the fallback"));
    }
    let win = windows("max_pool2d", 2, kernel_size, stride, padding, dilation)?;
    let (lead, spatial, outs) = pool_geometry(NAME, self_, &win, ceil_mode, false)?;
    let mut shape = lead.clone();
    shape.extend_from_slice(&outs);
    let values = Tensor::empty_on(&ctx, &shape, d)?;
    let indices = Tensor::empty_on(&ctx, &shape, crate::dtype::DType::I64)?;
    let planes: usize = lead.iter().product();
    let (plane, per) = (spatial[0] * spatial[1], outs[0] * outs[1]);
    if planes * per == 0 {
        return Ok((values, indices));
    }
    let taps = plane_windows(&win, &spatial, &outs);
    let x = contiguous(self_)?.into_owned();
    let (px, pv, pi) = (x.data_ptr()?, values.data_ptr()?, indices.data_ptr()?);
    let keep = vec![x, values.clone(), indices.clone()];
    with_real!(NAME, d, T => launch(&ctx, keep, move |mem| {
        let xv = T::load(mem, px, planes * plane, d)?;
        let mut vals = vec![T::ZERO; planes * per];
        let mut idx = vec![0i64; planes * per];
        let body = |((p, vo), io): ((usize, &mut [T]), &mut [i64])| {
            let src = &xv[p * plane..(p + 1) * plane];
            for (o, (tp, first)) in taps.iter().enumerate() {
                let (mut best, mut at, mut seen) = (T::ZERO, *first, false);
                for &j in tp {
                    let e = src[j];
                    if !seen || e > best || e.is_nan() {
                        best = e;
                        at = j as i64;
                        seen = true;
                    }
                }
                // a window with no tap inside the input: -inf and its first position, as CPU
                vo[o] = if seen { best } else { T::from_f64(f64::NEG_INFINITY) };
                io[o] = at;
            }
        };
        if planes * per * win[0].k * win[1].k >= PAR_MIN {
            vals.par_chunks_mut(per).enumerate().zip(idx.par_chunks_mut(per)).for_each(body);
        } else {
            vals.chunks_mut(per).enumerate().zip(idx.chunks_mut(per)).for_each(body);
        }
        T::store(mem, pv, &vals, d)?;
        super::store_int(mem, pi, &idx, crate::dtype::DType::I64)
    }))?;
    Ok((values, indices))
}

/// `max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
/// ceil_mode, indices)`: each output gradient added into the input position its index names.
/// xirang-kernel: max_pool2d_with_indices_backward
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    const NAME: &str = "max_pool2d_with_indices_backward";
    let ctx = device_of(NAME, &[grad_output, self_, indices])?;
    let d = self_.dtype();
    if !is_real(d) || grad_output.dtype() != d || indices.dtype() != crate::dtype::DType::I64 {
        return unsupported(NAME, "dtypes other than one floating dtype and int64 indices take the fallback");
    }
    let win = windows("max_pool2d", 2, kernel_size, stride, padding, dilation)?;
    let (lead, spatial, outs) = pool_geometry(NAME, self_, &win, ceil_mode, false)?;
    let mut shape = lead.clone();
    shape.extend_from_slice(&outs);
    if grad_output.sizes() != shape.as_slice() || indices.sizes() != shape.as_slice() {
        return Err(Error::Shape(format!(
            "{NAME}: grad_output {:?} and indices {:?} must have the output's sizes {shape:?}",
            grad_output.sizes(),
            indices.sizes()
        )));
    }
    let gi = Tensor::empty_on(&ctx, self_.sizes(), d)?;
    let planes: usize = lead.iter().product();
    let (plane, per) = (spatial[0] * spatial[1], outs[0] * outs[1]);
    if planes * plane == 0 {
        return Ok(gi);
    }
    let g = contiguous(grad_output)?.into_owned();
    let ix = contiguous(indices)?.into_owned();
    let (pg, pix, pgi) = (g.data_ptr()?, ix.data_ptr()?, gi.data_ptr()?);
    let keep = vec![g, ix, gi.clone()];
    with_real!(NAME, d, T => launch(&ctx, keep, move |mem| {
        let gv = T::load(mem, pg, planes * per, d)?;
        let iv = load_int(mem, pix, planes * per, crate::dtype::DType::I64)?;
        if let Some(bad) = iv.iter().find(|&&i| i < 0 || i as usize >= plane) {
            return Err(Error::Index(format!(
                "{NAME}: index {bad} out of range for a {}x{} plane",
                spatial[0], spatial[1]
            )));
        }
        let mut out = vec![T::ZERO; planes * plane];
        let body = |(p, o): (usize, &mut [T])| {
            for k in p * per..(p + 1) * per {
                o[iv[k] as usize] += gv[k];
            }
        };
        if planes * plane >= PAR_MIN {
            out.par_chunks_mut(plane).enumerate().for_each(body);
        } else {
            out.chunks_mut(plane).enumerate().for_each(body);
        }
        T::store(mem, pgi, &out, d)
    }))?;
    Ok(gi)
}
