//! More Core ATen operators the CPU-fallback tier reaches with no kernel behind them: embedding
//! bags (`_embedding_bag`), 3-d pooling (`avg_pool3d`, `max_pool3d_with_indices`, on a pooling
//! window engine for any number of spatial dimensions), `col2im` and `grid_sampler_2d`.
//!
//! Same conventions as [`crate::reference`]: device inputs are copied to the host ([`on_host`]),
//! floating math runs in f64 and is rounded once to the result dtype; selections (max pooling,
//! `max` bags, nearest sampling) return input values unchanged, so they are exact in every dtype.
//!
//! `resize_`, the last Core ATen operator without a host implementation, has none on purpose: a
//! fallback cannot resize its caller's tensor. The generated in-place wrapper hands the host
//! function a clone of the `self` handle and returns `self_.clone()`, ignoring the result; a
//! [`Tensor`]'s sizes and strides are fields of each handle (not shared with its clones), and
//! its storage has a fixed byte size. A host `resize_` could only return a new tensor while the
//! caller's `self` kept its old shape, which is not `resize_`.

// Index loops mirror PyTorch's reference loops.
#![allow(clippy::needless_range_loop)]

use super::{on_host, on_host1, require_float};
use crate::dtype::DType;
use crate::error::{Error, Result, arg_err, dtype_err, index_err, shape_err};
use crate::shape::{
    Window, clip_coordinates, contiguous_strides, cubic_coefficients, numel, pixel, reflect_coordinates,
};
use crate::tensor::Tensor;

/// `v` as usizes, `what` naming the argument in the error for a negative value.
fn non_negative(name: &str, what: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&x| {
            usize::try_from(x)
                .map_err(|_| Error::InvalidArgument(format!("{name}: {what} must be non-negative, but got {v:?}")))
        })
        .collect()
}

/// Calls `f(multi_index)` for every index of `sizes` in row-major order (nothing when a size is
/// zero).
fn for_each_index(sizes: &[usize], mut f: impl FnMut(&[usize])) {
    let n = numel(sizes);
    let mut idx = vec![0usize; sizes.len()];
    for _ in 0..n {
        f(&idx);
        for d in (0..sizes.len()).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

// ------------------------------------------------------------ embedding bags

/// `_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
/// per_sample_weights, include_last_offset, padding_idx)`: the rows of `weight` (`[num, D]`)
/// named by 1-D `indices`, reduced per bag; bag `b` holds `indices[offsets[b]..offsets[b + 1]]`,
/// the last bag runs to the end of `indices`. `mode` 0 sums (each row scaled by its
/// `per_sample_weights` entry, sum only), 1 averages, 2 takes the per-column maximum (the first
/// maximal row wins; a NaN only when it comes first). Indices equal to `padding_idx` are skipped
/// (a negative `padding_idx` matches nothing). With `include_last_offset`, `offsets` has one
/// more entry than there are bags (CSR style). `scale_grad_by_freq` and `sparse` only concern
/// the backward and are not arguments here.
///
/// Returns `(output [B, D], offset2bag [n], bag_size [B], max_indices)` with the contents PyTorch's
/// CPU kernel gives (int32 auxiliaries when `indices` and `offsets` are both int32, else int64):
/// * `offset2bag[i]`: the bag of index `i` (`-1` before the first bag);
/// * `bag_size`: the number of non-padding indices per bag for `mean` and `max`, zeros for `sum`;
/// * `max_indices`: for `max`, `[B, D]`, the weight row each maximum came from (0 in empty
///   bags); otherwise a copy of `bag_size`.
///
/// Implementation-defined in PyTorch, and so not a contract here: in `sum` mode PyTorch's CPU
/// fast path (f32/f16/bf16 weight with unit column stride, no `padding_idx`) returns an empty
/// `offset2bag` (CUDA returns other auxiliaries again); this implementation always computes it
/// (backward recomputes it when it is empty, so both are accepted downstream). With
/// `include_last_offset` and `offsets[-1] < n`, that fast path also ends the last bag's sum at
/// `offsets[-1]` while every other path (and `bag_size`) runs it to the end of `indices`; this
/// implementation does the latter. 2-D indices are rejected: the ATen operator reads them as a
/// flat array against `offsets` with PyTorch, which gives no meaningful result (the 2-D `input`
/// of `torch.nn.functional.embedding_bag` is flattened there, with offsets `0, N, 2N, ...`).
pub fn embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    mode: i64,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let wd = weight.dtype();
    if !wd.is_floating() {
        return dtype_err(format!(
            "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, Float, Double; but got {} instead (while checking arguments for embedding_bag)",
            wd.name()
        ));
    }
    for (what, t) in [("indices", indices), ("offsets", offsets)] {
        if !matches!(t.dtype(), DType::I64 | DType::I32) {
            return dtype_err(format!(
                "embedding_bag: Expected tensor for argument '{what}' to have one of the following scalar types: Long, Int; but got {} instead",
                t.dtype().name()
            ));
        }
    }
    if weight.dim() != 2 {
        return shape_err(format!("weight has to be a 2D Tensor, but got Tensor of dimension {}", weight.dim()));
    }
    if indices.dim() != 1 {
        return shape_err(format!(
            "_embedding_bag: indices has to be a 1D Tensor, but got sizes {:?} (flatten a 2-D [B, N] input and pass offsets 0, N, 2N, ..., as torch.nn.functional.embedding_bag does)",
            indices.sizes()
        ));
    }
    if offsets.dim() != 1 {
        return shape_err(format!("offsets has to be a 1D Tensor, but got Tensor of dimension {}", offsets.dim()));
    }
    if !(0..=2).contains(&mode) {
        return arg_err("`mode` must be sum, mean, or max.");
    }
    if let Some(p) = per_sample_weights {
        if mode != 0 {
            return arg_err("embedding_bag: per_sample_weights only supported with mode='sum'");
        }
        if p.dtype() != wd {
            return dtype_err(format!(
                "embedding_bag: expected per_sample_weights to have the dtype of weight ({}), but got {}",
                wd.name(),
                p.dtype().name()
            ));
        }
        if p.dim() != 1 || p.numel() != indices.numel() {
            return shape_err(format!(
                "embedding_bag: per_sample_weights must be 1-D with one entry per index ({}), but got sizes {:?}",
                indices.numel(),
                p.sizes()
            ));
        }
    }
    if include_last_offset && offsets.numel() == 0 {
        return arg_err("include_last_offset: number of offset should be at least 1");
    }
    // PyTorch's promoteIndicesAndOffsets: int32 only when both are
    let aux = if indices.dtype() == DType::I32 && offsets.dtype() == DType::I32 { DType::I32 } else { DType::I64 };
    let (num, dim) = (weight.sizes()[0], weight.sizes()[1]);
    let mut ins: Vec<&Tensor> = vec![weight, indices, offsets];
    if let Some(p) = per_sample_weights {
        ins.push(p);
    }
    let [out, o2b, bag_size, max_indices] = on_host("_embedding_bag", &ins, |h| {
        let w = h[0].to_f64_vec()?;
        let idx = h[1].to_i64_vec()?;
        let offs = h[2].to_i64_vec()?;
        let scale = if h.len() > 3 { Some(h[3].to_f64_vec()?) } else { None };
        let n = idx.len();
        if let (Some(&first), Some(&last)) = (offs.first(), offs.last()) {
            if first != 0 {
                return arg_err(format!(
                    "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {first}"
                ));
            }
            if last > n as i64 {
                return arg_err(format!(
                    "offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {last}"
                ));
            }
        }
        if offs.windows(2).any(|p| p[1] < p[0]) {
            return arg_err(format!("embedding_bag: offsets must be non-decreasing, but got {offs:?}"));
        }
        for (i, &v) in idx.iter().enumerate() {
            if v < 0 || v as usize >= num {
                return index_err(format!(
                    "Index {i} of input takes value {v} which is not in the valid range [0, {num})"
                ));
            }
        }
        // checked above: 0 = offs[0] <= offs[1] <= ... <= n
        let bags = offs.len() - usize::from(include_last_offset);
        let starts: Vec<usize> = offs[..bags].iter().map(|&o| o as usize).collect();
        // offset2bag[i]: the last bag starting at or before i (-1: none)
        let mut o2b = Vec::with_capacity(n);
        let (mut bag, mut next) = (-1i64, 0usize);
        for i in 0..n {
            while next < bags && starts[next] <= i {
                bag = next as i64;
                next += 1;
            }
            o2b.push(bag);
        }
        let mut count: Vec<i64> =
            (0..bags).map(|b| (starts.get(b + 1).copied().unwrap_or(n) - starts[b]) as i64).collect();
        let mut acc = vec![0.0; bags * dim];
        let mut arg = vec![0i64; bags * dim];
        let mut empty = vec![true; bags];
        for (i, (&v, &b)) in idx.iter().zip(&o2b).enumerate() {
            // indices before the first bag belong to none (only when there are no bags)
            let Ok(b) = usize::try_from(b) else { continue };
            if v == padding_idx {
                count[b] -= 1;
                continue;
            }
            let row = &w[v as usize * dim..(v as usize + 1) * dim];
            let s = scale.as_ref().map_or(1.0, |p| p[i]);
            let (o, a) = (&mut acc[b * dim..(b + 1) * dim], &mut arg[b * dim..(b + 1) * dim]);
            for j in 0..dim {
                if mode == 2 {
                    if empty[b] || row[j] > o[j] {
                        o[j] = row[j];
                        a[j] = v;
                    }
                } else {
                    o[j] += row[j] * s;
                }
            }
            empty[b] = false;
        }
        if mode == 1 {
            for b in 0..bags {
                let c = count[b].max(1) as f64;
                for e in &mut acc[b * dim..(b + 1) * dim] {
                    *e /= c;
                }
            }
        }
        let sizes = if mode == 0 { vec![0; bags] } else { count };
        let bag_size = Tensor::from_i64(&sizes, &[bags], aux)?;
        let max_indices = if mode == 2 { Tensor::from_i64(&arg, &[bags, dim], aux)? } else { bag_size.clone() };
        Ok([Tensor::from_f64(&acc, &[bags, dim], wd)?, Tensor::from_i64(&o2b, &[n], aux)?, bag_size, max_indices])
    })?;
    Ok((out, o2b, bag_size, max_indices))
}

// ------------------------------------------------------------ pooling windows (any rank)

/// The windows of an `n`-d pooling op from its `int[n]` arguments: `kernel` (one or `n`
/// values), `stride` (empty: the kernel; one or `n`), `padding` and `dilation` (one or `n`),
/// with PyTorch's checks (positive kernel, stride and dilation; padding at most half the kernel).
pub(crate) fn windows(
    name: &str,
    n: usize,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Vec<Window>> {
    let tuple = match n {
        1 => "one int",
        2 => "a tuple of two ints",
        _ => "a tuple of three ints",
    };
    let expand = |v: &[i64], what: &str, omitted: Option<&[i64]>| -> Result<Vec<i64>> {
        match (v.len(), omitted) {
            (0, Some(o)) => Ok(o.to_vec()),
            (1, _) => Ok(vec![v[0]; n]),
            (l, _) if l == n => Ok(v.to_vec()),
            _ => arg_err(format!(
                "{name}: {what} must be {}a single int, or {tuple}",
                if omitted.is_some() { "omitted, " } else { "" }
            )),
        }
    };
    let k = expand(kernel, "kernel_size", None)?;
    let s = expand(stride, "stride", Some(k.as_slice()))?;
    let p = expand(padding, "padding", None)?;
    let d = expand(dilation, "dilation", None)?;
    if k.iter().any(|&v| v <= 0) {
        return arg_err(format!("{name}: kernel size should be greater than zero, but got {k:?}"));
    }
    if s.iter().any(|&v| v <= 0) {
        return arg_err(format!("{name}: stride should be greater than zero, but got {s:?}"));
    }
    if d.iter().any(|&v| v <= 0) {
        return arg_err(format!("{name}: dilation should be greater than zero, but got {d:?}"));
    }
    if p.iter().any(|&v| v < 0) {
        return arg_err(format!("{name}: pad must be non-negative, but got pad: {p:?}"));
    }
    if p.iter().zip(&k).any(|(&p, &k)| p > k / 2) {
        return arg_err(format!(
            "{name}: pad should be smaller than or equal to half of kernel size, but got kernel {k:?} and padding {p:?}"
        ));
    }
    // all positive (or non-negative) i64 values now
    Ok((0..n).map(|i| Window { k: k[i] as usize, s: s[i] as usize, p: p[i] as usize, d: d[i] as usize }).collect())
}

/// The geometry of a pooling input `[N, C, *spatial]` or `[C, *spatial]` with `win.len()`
/// spatial dimensions: (leading sizes, spatial sizes, output spatial sizes). PyTorch's checks:
/// only the batch dimension may be empty, the output has at least one window per dimension and,
/// for average pooling (`kernel_fits`), the input is at least as large as the kernel.
pub(crate) fn pool_geometry(
    name: &str,
    x: &Tensor,
    win: &[Window],
    ceil: bool,
    kernel_fits: bool,
) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let n = win.len();
    let nd = x.dim();
    if nd != n + 1 && nd != n + 2 {
        return shape_err(format!(
            "{name}: non-empty {}D or {}D (batch mode) tensor expected for input, but got sizes {:?}",
            n + 1,
            n + 2,
            x.sizes()
        ));
    }
    if let Some(i) = (0..nd).find(|&i| x.sizes()[i] == 0 && !(nd == n + 2 && i == 0)) {
        return shape_err(format!(
            "{name}: Expected input's non-batch dimensions to have positive length, but input has a shape of {:?} and non-batch dimension {i} has length zero!",
            x.sizes()
        ));
    }
    let (lead, spatial) = x.sizes().split_at(nd - n);
    if kernel_fits && spatial.iter().zip(win).any(|(&s, w)| s < w.k) {
        let ks: Vec<usize> = win.iter().map(|w| w.k).collect();
        return shape_err(format!("{name}: input image {spatial:?} smaller than kernel size {ks:?}"));
    }
    let outs: Vec<i128> = spatial.iter().zip(win).map(|(&s, w)| w.out_len(s, ceil)).collect();
    if outs.iter().any(|&o| o < 1) {
        return shape_err(format!(
            "{name}: Given input size: {:?}. Calculated output size: {outs:?}. Output size is too small",
            x.sizes()
        ));
    }
    // at least 1, and at most the (padded) input size
    let outs = outs.iter().map(|&o| o as usize).collect();
    Ok((lead.to_vec(), spatial.to_vec(), outs))
}

/// The lowest value of an integer dtype (PyTorch's empty-window max).
fn int_lowest(d: DType) -> i64 {
    match d {
        DType::I8 => i8::MIN.into(),
        DType::I16 => i16::MIN.into(),
        DType::I32 => i32::MIN.into(),
        DType::I64 => i64::MIN,
        _ => 0,
    }
}

/// Max pooling over the trailing `win.len()` dimensions: values and int64 flat indices into each
/// input plane. PyTorch's CPU rule: a strictly larger value replaces the maximum and every NaN
/// does (the last NaN of a window wins); a window with no tap inside the input gives the
/// dtype's lowest value and the index of its first tap past the padding.
pub(super) fn max_pool_nd(name: &'static str, x: &Tensor, win: &[Window], ceil: bool) -> Result<(Tensor, Tensor)> {
    let dt = x.dtype();
    if dt == DType::Bool {
        return dtype_err(format!("\"{name}\" not implemented for 'Bool'"));
    }
    let (lead, spatial, outs) = pool_geometry(name, x, win, ceil, false)?;
    let n = win.len();
    // per dimension and output position: (in-bounds taps, first tap)
    let taps: Vec<Vec<(Vec<usize>, i128)>> =
        (0..n).map(|i| (0..outs[i]).map(|o| win[i].taps(o, spatial[i])).collect()).collect();
    let ist = contiguous_strides(&spatial);
    let (plane, planes) = (numel(&spatial), numel(&lead));
    let [v, idx] = on_host(name, &[x], |h| {
        let floating = dt.is_floating();
        let (fv, iv) = if floating { (h[0].to_f64_vec()?, Vec::new()) } else { (Vec::new(), h[0].to_i64_vec()?) };
        let total = planes * numel(&outs);
        let (mut of, mut oi, mut ix) =
            (Vec::with_capacity(total), Vec::with_capacity(total), Vec::with_capacity(total));
        for pl in 0..planes {
            let base = pl * plane;
            for_each_index(&outs, |o| {
                let w: Vec<&(Vec<usize>, i128)> = (0..n).map(|i| &taps[i][o[i]]).collect();
                let first: i128 = (0..n).map(|i| w[i].1 * ist[i] as i128).sum();
                let mut best = i64::try_from(first).unwrap_or(i64::MAX);
                let lens: Vec<usize> = w.iter().map(|t| t.0.len()).collect();
                let (mut bf, mut bi, mut seen) = (f64::NEG_INFINITY, int_lowest(dt), false);
                for_each_index(&lens, |t| {
                    let j: usize = (0..n).map(|i| w[i].0[t[i]] * ist[i]).sum();
                    let take = if floating {
                        let e = fv[base + j];
                        let take = !seen || e > bf || e.is_nan();
                        if take {
                            bf = e;
                        }
                        take
                    } else {
                        let e = iv[base + j];
                        let take = !seen || e > bi;
                        if take {
                            bi = e;
                        }
                        take
                    };
                    if take {
                        best = j as i64;
                        seen = true;
                    }
                });
                of.push(bf);
                oi.push(bi);
                ix.push(best);
            });
        }
        let mut shape = lead.clone();
        shape.extend_from_slice(&outs);
        let values = if floating { Tensor::from_f64(&of, &shape, dt)? } else { Tensor::from_i64(&oi, &shape, dt)? };
        Ok([values, Tensor::from_i64(&ix, &shape, DType::I64)?])
    })?;
    Ok((v, idx))
}

/// Average pooling over the trailing `win.len()` dimensions: the window sum divided by
/// `divisor_override`, else by the window's extent inside the padded input
/// (`count_include_pad`) or inside the input. Floating dtypes and int64 (a truncating integer
/// division, as PyTorch's); a window with nothing inside the input gives 0.
pub(super) fn avg_pool_nd(
    name: &'static str,
    x: &Tensor,
    win: &[Window],
    ceil: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let dt = x.dtype();
    if !dt.is_floating() && dt != DType::I64 {
        return dtype_err(format!("\"{name}\" not implemented for '{}'", dt.name()));
    }
    if divisor_override == Some(0) {
        return arg_err("divisor must be not zero");
    }
    let (lead, spatial, outs) = pool_geometry(name, x, win, ceil, true)?;
    let n = win.len();
    let spans: Vec<Vec<(i128, usize, usize)>> =
        (0..n).map(|i| (0..outs[i]).map(|o| win[i].span(o, spatial[i])).collect()).collect();
    let ist = contiguous_strides(&spatial);
    let (plane, planes) = (numel(&spatial), numel(&lead));
    on_host1(name, &[x], |h| {
        let floating = dt.is_floating();
        let (fv, iv) = if floating { (h[0].to_f64_vec()?, Vec::new()) } else { (Vec::new(), h[0].to_i64_vec()?) };
        let total = planes * numel(&outs);
        let (mut of, mut oi) = (Vec::with_capacity(total), Vec::with_capacity(total));
        for pl in 0..planes {
            let base = pl * plane;
            for_each_index(&outs, |o| {
                let (w, lens, inside, div) = avg_window(&spans, o, count_include_pad, divisor_override);
                let div = i64::try_from(div).unwrap_or(i64::MAX);
                let (mut sf, mut si) = (0.0, 0i64);
                for_each_index(&lens, |t| {
                    let j: usize = (0..n).map(|i| (w[i].1 + t[i]) * ist[i]).sum();
                    if floating {
                        sf += fv[base + j];
                    } else {
                        si = si.wrapping_add(iv[base + j]);
                    }
                });
                if inside == 0 {
                    of.push(0.0);
                    oi.push(0);
                } else {
                    of.push(sf / div as f64);
                    oi.push(si.wrapping_div(div));
                }
            });
        }
        let mut shape = lead.clone();
        shape.extend_from_slice(&outs);
        if floating { Tensor::from_f64(&of, &shape, dt) } else { Tensor::from_i64(&oi, &shape, dt) }
    })
}

/// One output window's extent in one dimension (`Window::span`): the padded window's length, and
/// the `[lo, hi)` range inside the input.
type Span = (i128, usize, usize);

/// One output's window of average pooling: its span per dimension (`Window::span`), the extents
/// inside the input, their product, and the divisor (`divisor_override`, else the padded window's
/// extent with `count_include_pad`, else the part inside the input).
fn avg_window(
    spans: &[Vec<Span>],
    o: &[usize],
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> (Vec<Span>, Vec<usize>, usize, i128) {
    let w: Vec<Span> = spans.iter().zip(o).map(|(s, &i)| s[i]).collect();
    let lens: Vec<usize> = w.iter().map(|&(_, lo, hi)| hi - lo).collect();
    let inside = numel(&lens);
    let div: i128 = match divisor_override {
        Some(dv) => dv.into(),
        None if count_include_pad => w.iter().map(|s| s.0).product(),
        None => inside as i128,
    };
    (w, lens, inside, div)
}

/// The backward of [`avg_pool_nd`]: each output's gradient divided by the forward's divisor and
/// added over the part of its window inside the input (same windows, same divisor).
pub(super) fn avg_pool_nd_backward(
    name: &'static str,
    grad_output: &Tensor,
    x: &Tensor,
    win: &[Window],
    ceil: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    if divisor_override == Some(0) {
        return arg_err("divisor must be not zero");
    }
    let (lead, spatial, outs) = pool_geometry(name, x, win, ceil, true)?;
    let mut gshape = lead.clone();
    gshape.extend_from_slice(&outs);
    if grad_output.sizes() != gshape.as_slice() {
        return shape_err(format!(
            "{name}: grad_output of sizes {:?} for an output of sizes {gshape:?}",
            grad_output.sizes()
        ));
    }
    let n = win.len();
    let spans: Vec<Vec<(i128, usize, usize)>> =
        (0..n).map(|i| (0..outs[i]).map(|o| win[i].span(o, spatial[i])).collect()).collect();
    let ist = contiguous_strides(&spatial);
    let (plane, planes) = (numel(&spatial), numel(&lead));
    on_host1(name, &[grad_output, x], |h| {
        let g = h[0].to_f64_vec()?;
        let mut gi = vec![0.0; planes * plane];
        let mut k = 0;
        for pl in 0..planes {
            let base = pl * plane;
            for_each_index(&outs, |o| {
                let (w, lens, inside, div) = avg_window(&spans, o, count_include_pad, divisor_override);
                let gv = g.get(k).copied().unwrap_or(0.0);
                k += 1;
                if inside > 0 {
                    let v = gv / div as f64;
                    for_each_index(&lens, |t| {
                        let j: usize = (0..n).map(|i| (w[i].1 + t[i]) * ist[i]).sum();
                        gi[base + j] += v;
                    });
                }
            });
        }
        Tensor::from_f64(&gi, h[1].sizes(), h[1].dtype())
    })
}

/// `max_pool3d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)` over
/// `[N, C, D, H, W]` or `[C, D, H, W]`: values and int64 flat indices into each `D * H * W`
/// input volume. Every dtype but bool (as PyTorch's CPU kernel).
pub fn max_pool3d_with_indices(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let win = windows("max_pool3d", 3, kernel, stride, padding, dilation)?;
    max_pool_nd("max_pool3d_with_indices", x, &win, ceil_mode)
}

/// `avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override)` over `[N, C, D, H, W]` or `[C, D, H, W]`. Floating dtypes and int64 (PyTorch's
/// CPU kernel has f32, f64 and int64; f16/bf16 are computed like the others, in f64).
/// xirang-fallback: avg_pool3d
pub fn avg_pool3d(
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let win = windows("avg_pool3d", 3, kernel, stride, padding, &[1])?;
    avg_pool_nd("avg_pool3d", x, &win, ceil_mode, count_include_pad, divisor_override)
}

// ------------------------------------------------------------ col2im

/// `col2im(x, output_size, kernel_size, dilation, padding, stride)`: adds the columns of
/// `[N, C * kH * kW, L]` (or unbatched `[C * kH * kW, L]`) back into `[N, C, H, W]` images
/// (`output_size = [H, W]`), `L` being the number of sliding blocks; the adjoint of `im2col`
/// (`unfold`). Floating dtypes sum in f64, rounded once; bool ORs (PyTorch adds bools).
pub fn col2im(
    x: &Tensor,
    output_size: &[i64],
    kernel: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    for (what, v) in [
        ("output_size", output_size),
        ("kernel_size", kernel),
        ("dilation", dilation),
        ("padding", padding),
        ("stride", stride),
    ] {
        if v.len() != 2 {
            return arg_err(format!("It is expected {what} equals to 2, but got size {}", v.len()));
        }
    }
    if kernel.iter().any(|&v| v <= 0) {
        return arg_err(format!(
            "kernel size should be greater than zero, but got kernel_height: {} kernel_width: {}",
            kernel[0], kernel[1]
        ));
    }
    if stride.iter().any(|&v| v <= 0) {
        return arg_err(format!(
            "stride should be greater than zero, but got stride_height: {} stride_width: {}",
            stride[0], stride[1]
        ));
    }
    if dilation.iter().any(|&v| v <= 0) {
        return arg_err(format!(
            "dilation should be greater than zero, but got dilation_height: {} dilation_width: {}",
            dilation[0], dilation[1]
        ));
    }
    if padding.iter().any(|&v| v < 0) {
        return arg_err(format!(
            "padding should be non-negative, but got pad_height: {} pad_width: {}",
            padding[0], padding[1]
        ));
    }
    let out = non_negative("col2im", "output_size", output_size)?;
    let dt = x.dtype();
    if !dt.is_floating() && dt != DType::Bool {
        return dtype_err(format!("\"col2im\" not implemented for '{}'", dt.name()));
    }
    let s = x.sizes();
    let batched = match s {
        [a, b] if *a != 0 && *b != 0 => false,
        [_, a, b] if *a != 0 && *b != 0 => true,
        _ => {
            return shape_err(format!(
                "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {s:?}"
            ));
        }
    };
    let (n, planes, len) = if batched { (s[0], s[1], s[2]) } else { (1, s[0], s[1]) };
    // all positive (or non-negative) now
    let (k, dl, p, st) = (
        [kernel[0] as usize, kernel[1] as usize],
        [dilation[0] as usize, dilation[1] as usize],
        [padding[0] as usize, padding[1] as usize],
        [stride[0] as usize, stride[1] as usize],
    );
    let kk = k[0].checked_mul(k[1]).filter(|v| planes % v == 0);
    let Some(kk) = kk else {
        return shape_err(format!(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={planes} and kernel_size=({}, {}).",
            k[0], k[1]
        ));
    };
    // PyTorch's sliding_window_count, in i128 (no argument overflows it)
    let blocks = |i: usize| -> i128 {
        let eff = dl[i] as i128 * (k[i] as i128 - 1) + 1;
        (out[i] as i128 + 2 * p[i] as i128 - eff).div_euclid(st[i] as i128) + 1
    };
    let (bh, bw) = (blocks(0), blocks(1));
    let geometry = format!(
        "Given output_size=({}, {}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {})",
        out[0], out[1], k[0], k[1], dl[0], dl[1], p[0], p[1], st[0], st[1]
    );
    if bh < 1 || bw < 1 {
        return shape_err(format!(
            "{geometry}, calculated shape of the array of sliding blocks as ({bh}, {bw}), but its components must be at least one."
        ));
    }
    if len as i128 != bh * bw {
        return shape_err(format!(
            "{geometry}, expected size of input's dimension 2 to match the calculated number of sliding blocks {bh} * {bw} = {}, but got input.size(2)={len}.",
            bh * bw
        ));
    }
    // bh * bw == len: both fit
    let (bh, bw) = (bh as usize, bw as usize);
    let c = planes / kk;
    let (oh, ow) = (out[0], out[1]);
    let Some(total) = [n, c, oh, ow].iter().try_fold(1usize, |a, &b| a.checked_mul(b)) else {
        return shape_err(format!("col2im: output [{n}, {c}, {oh}, {ow}] is too large"));
    };
    // the image position of block `i` at kernel offset `j` along dimension `dim`, if inside
    let place = |dim: usize, i: usize, j: usize, size: usize| -> Option<usize> {
        let r = i as i128 * st[dim] as i128 - p[dim] as i128 + j as i128 * dl[dim] as i128;
        (0..size as i128).contains(&r).then_some(r as usize)
    };
    on_host1("col2im", &[x], |h| {
        let v = h[0].to_f64_vec()?;
        let mut img = vec![0.0; total];
        for b in 0..n {
            for cc in 0..planes {
                let (wo, ho, ci) = (cc % k[1], (cc / k[1]) % k[0], cc / kk);
                let src = (b * planes + cc) * len;
                let dst = (b * c + ci) * oh * ow;
                for hc in 0..bh {
                    let Some(hi) = place(0, hc, ho, oh) else { continue };
                    for wc in 0..bw {
                        if let Some(wi) = place(1, wc, wo, ow) {
                            img[dst + hi * ow + wi] += v[src + hc * bw + wc];
                        }
                    }
                }
            }
        }
        let shape = if batched { vec![n, c, oh, ow] } else { vec![c, oh, ow] };
        // bool: a non-zero sum is `true`, the OR of the contributions
        Tensor::from_f64(&img, &shape, dt)
    })
}

// ------------------------------------------------------------ grid sampling

/// ATen's `grid_sampler_unnormalize`: a grid coordinate in [-1, 1] to a pixel position; -1 and
/// 1 are the corner pixels' centres with `align_corners`, else the image's outer edges.
fn unnormalize(coord: f64, size: usize, align_corners: bool) -> f64 {
    let size = size as f64;
    if align_corners { (coord + 1.0) / 2.0 * (size - 1.0) } else { ((coord + 1.0) * size - 1.0) / 2.0 }
}

/// ATen's `compute_coordinates`: applies the padding mode (1 border: clip; 2 reflection:
/// reflect, then clip; 0 zeros: unchanged).
fn compute_coordinates(x: f64, size: usize, padding_mode: i64, align_corners: bool) -> f64 {
    match padding_mode {
        1 => clip_coordinates(x, size),
        2 => {
            let twice = 2 * size as i64;
            let r = if align_corners {
                reflect_coordinates(x, 0, twice - 2)
            } else {
                reflect_coordinates(x, -1, twice - 1)
            };
            clip_coordinates(r, size)
        }
        _ => x,
    }
}

/// `grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)`: samples
/// `input [N, C, H, W]` at the normalized `(x, y)` positions of `grid [N, Ho, Wo, 2]` into
/// `[N, C, Ho, Wo]`. `interpolation_mode`: 0 bilinear, 1 nearest (ties to even, as
/// `std::nearbyint`), 2 bicubic (A = -0.75); `padding_mode`: 0 zeros, 1 border, 2 reflection.
/// ATen's `GridSampler.h` formulas, in f64 and rounded once (PyTorch computes positions and
/// weights in the input dtype: for f16/bf16 its own result differs from the exact one wherever
/// a position is not exactly representable).
/// xirang-fallback: grid_sampler_2d
pub fn grid_sampler_2d(
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<Tensor> {
    if input.dtype() != grid.dtype() {
        return dtype_err(format!(
            "grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}",
            input.dtype().name(),
            grid.dtype().name()
        ));
    }
    require_float("grid_sampler_2d", input.dtype())?;
    if input.dim() != 4 || grid.dim() != 4 {
        return shape_err(format!(
            "grid_sampler(): expected 4D input and grid with same number of dimensions, but got input with sizes {:?} and grid with sizes {:?}",
            input.sizes(),
            grid.sizes()
        ));
    }
    let (is, gs) = (input.sizes(), grid.sizes());
    if is[0] != gs[0] {
        return shape_err(format!(
            "grid_sampler(): expected grid and input to have same batch size, but got input with sizes {is:?} and grid with sizes {gs:?}"
        ));
    }
    if gs[3] != 2 {
        return shape_err(format!(
            "grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes {gs:?}"
        ));
    }
    if let Some(i) = (2..4).find(|&i| is[i] == 0) {
        return shape_err(format!(
            "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes {is:?} with dimension {i} being empty"
        ));
    }
    if !(0..=2).contains(&interpolation_mode) {
        return arg_err(format!(
            "grid_sampler(): interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got {interpolation_mode}"
        ));
    }
    if !(0..=2).contains(&padding_mode) {
        return arg_err(format!(
            "grid_sampler(): padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got {padding_mode}"
        ));
    }
    let (n, c, ih, iw) = (is[0], is[1], is[2], is[3]);
    let (oh, ow) = (gs[1], gs[2]);
    let d = input.dtype();
    on_host1("grid_sampler_2d", &[input, grid], |h| {
        let x = h[0].to_f64_vec()?;
        let g = h[1].to_f64_vec()?;
        let source = |v: f64, size: usize| {
            compute_coordinates(unnormalize(v, size, align_corners), size, padding_mode, align_corners)
        };
        let mut out = vec![0.0; n * c * oh * ow];
        // (offset into an input plane, weight) of the taps of one output position
        let mut taps: Vec<(usize, f64)> = Vec::with_capacity(16);
        for b in 0..n {
            for p in 0..oh * ow {
                let (gx, gy) = (g[(b * oh * ow + p) * 2], g[(b * oh * ow + p) * 2 + 1]);
                taps.clear();
                match interpolation_mode {
                    0 => {
                        let (fx, fy) = (source(gx, iw), source(gy, ih));
                        let (x0, y0) = (fx.floor(), fy.floor());
                        let (tx, ty) = (fx - x0, fy - y0);
                        for (dx, dy, wt) in [
                            (0.0, 0.0, (1.0 - tx) * (1.0 - ty)),
                            (1.0, 0.0, tx * (1.0 - ty)),
                            (0.0, 1.0, (1.0 - tx) * ty),
                            (1.0, 1.0, tx * ty),
                        ] {
                            if let (Some(xi), Some(yi)) = (pixel(x0 + dx, iw), pixel(y0 + dy, ih)) {
                                taps.push((yi * iw + xi, wt));
                            }
                        }
                    }
                    1 => {
                        let xi = pixel(source(gx, iw).round_ties_even(), iw);
                        let yi = pixel(source(gy, ih).round_ties_even(), ih);
                        if let (Some(xi), Some(yi)) = (xi, yi) {
                            taps.push((yi * iw + xi, 1.0));
                        }
                    }
                    _ => {
                        // bicubic: the 4 x 4 taps around the unpadded position, each one padded
                        let (fx, fy) = (unnormalize(gx, iw, align_corners), unnormalize(gy, ih, align_corners));
                        let (x0, y0) = (fx.floor(), fy.floor());
                        let (cx, cy) = (cubic_coefficients(fx - x0), cubic_coefficients(fy - y0));
                        for (i, wy) in cy.iter().enumerate() {
                            let yy = compute_coordinates(y0 - 1.0 + i as f64, ih, padding_mode, align_corners);
                            for (j, wx) in cx.iter().enumerate() {
                                let xx = compute_coordinates(x0 - 1.0 + j as f64, iw, padding_mode, align_corners);
                                if let (Some(xi), Some(yi)) = (pixel(xx.trunc(), iw), pixel(yy.trunc(), ih)) {
                                    taps.push((yi * iw + xi, wy * wx));
                                }
                            }
                        }
                    }
                }
                for ch in 0..c {
                    let base = (b * c + ch) * ih * iw;
                    out[(b * c + ch) * oh * ow + p] = taps.iter().map(|&(o, wt)| x[base + o] * wt).sum();
                }
            }
        }
        Tensor::from_f64(&out, &[n, c, oh, ow], d)
    })
}
