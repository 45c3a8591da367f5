//! Shape arithmetic: strides, broadcasting, dimension wrapping, view
//! stride computation (PyTorch's `computeStride`), element offsets; the index arithmetic of pooling
//! windows and grid sampling (ATen's `pooling_output_shape`, `reflect_coordinates`,
//! `get_cubic_upsample_coefficients`).

use crate::error::{Result, index_err, shape_err};

pub fn numel(sizes: &[usize]) -> usize {
    sizes.iter().product()
}

/// Row-major strides (a size-0 or size-1 dim gets the stride it would have).
/// Sizes or strides of a tensor handle: inline up to 5 dims, as PyTorch's `SizesAndStrides`, so
/// cloning or viewing a tensor of ordinary rank allocates nothing.
pub type Dims = smallvec::SmallVec<[usize; 5]>;

/// [`contiguous_strides`] as [`Dims`].
pub fn contiguous_dims(sizes: &[usize]) -> Dims {
    let mut st = Dims::from_elem(0, sizes.len());
    let mut acc = 1usize;
    for i in (0..sizes.len()).rev() {
        st[i] = acc;
        acc *= sizes[i].max(1);
    }
    st
}

pub fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut st = vec![0; sizes.len()];
    let mut acc = 1usize;
    for i in (0..sizes.len()).rev() {
        st[i] = acc;
        acc *= sizes[i].max(1);
    }
    st
}

/// PyTorch `is_contiguous`: dims of size 1 are ignored; empty is contiguous.
pub fn is_contiguous(sizes: &[usize], strides: &[usize]) -> bool {
    if numel(sizes) == 0 {
        return true;
    }
    let mut expected = 1usize;
    for i in (0..sizes.len()).rev() {
        if sizes[i] != 1 {
            if strides[i] != expected {
                return false;
            }
            expected *= sizes[i];
        }
    }
    true
}

/// Wrap a possibly negative dim. As in PyTorch, a 0-dim tensor accepts
/// dims -1 and 0.
pub fn wrap_dim(dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return index_err(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -n,
            n - 1
        ));
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize })
}

/// Like `wrap_dim` but for inserting a dim (range `[-ndim-1, ndim]`).
pub fn wrap_dim_insert(dim: i64, ndim: usize) -> Result<usize> {
    wrap_dim(dim, ndim + 1)
}

fn broadcast_pair(a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out = Dims::from_elem(0, n);
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return shape_err(format!(
                "The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
            ));
        };
    }
    Ok(out)
}

/// Broadcast two shapes (`torch.broadcast_shapes`).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    broadcast_pair(a, b).map(Dims::into_vec)
}

/// Broadcast any number of shapes.
pub fn broadcast_all(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    broadcast_dims(shapes).map(Dims::into_vec)
}

/// [`broadcast_all`] as [`Dims`] (no allocation up to 5 dims).
pub fn broadcast_dims(shapes: &[&[usize]]) -> Result<Dims> {
    // equal shapes (the common case) broadcast to themselves
    if let Some((first, rest)) = shapes.split_first()
        && rest.iter().all(|s| s == first)
    {
        return Ok(Dims::from_slice(first));
    }
    let mut out = Dims::new();
    for s in shapes {
        out = broadcast_pair(&out, s)?;
    }
    Ok(out)
}

/// Strides of `sizes`/`strides` viewed as `target` (stride 0 on broadcast
/// dims). Fails if the shape does not broadcast to `target`.
pub fn expand_strides(sizes: &[usize], strides: &[usize], target: &[usize]) -> Result<Vec<usize>> {
    if sizes.len() > target.len() {
        return shape_err(format!(
            "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
            target.len(),
            sizes.len()
        ));
    }
    let lead = target.len() - sizes.len();
    let mut out = vec![0; target.len()];
    for i in 0..target.len() {
        if i < lead {
            out[i] = 0;
            continue;
        }
        let (s, st) = (sizes[i - lead], strides[i - lead]);
        if s == target[i] {
            out[i] = st;
        } else if s == 1 {
            out[i] = 0;
        } else {
            return shape_err(format!(
                "The expanded size of the tensor ({}) must match the existing size ({s}) at non-singleton dimension {i}.  Target sizes: {target:?}.  Tensor sizes: {sizes:?}",
                target[i]
            ));
        }
    }
    Ok(out)
}

/// Resolve a `-1` in a requested shape (`infer_size`).
pub fn infer_size(shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut prod = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return shape_err("only one dimension can be inferred");
            }
            infer = Some(i);
        } else if d < 0 {
            return shape_err(format!("invalid shape dimension {d}"));
        } else {
            prod = match prod.checked_mul(d as usize) {
                Some(p) => p,
                None => return shape_err(format!("shape {shape:?} is too large")),
            };
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if prod == 0 || !numel.is_multiple_of(prod) {
                return shape_err(format!("shape '{shape:?}' is invalid for input of size {numel}"));
            }
            out[i] = numel / prod;
        }
        None => {
            if prod != numel {
                return shape_err(format!("shape '{shape:?}' is invalid for input of size {numel}"));
            }
        }
    }
    Ok(out)
}

/// PyTorch's `computeStride`: strides for viewing (old sizes, strides) as
/// `new` without copying, or `None` when a copy is required.
pub fn view_strides(old: &[usize], old_strides: &[usize], new: &[usize]) -> Option<Vec<usize>> {
    let n = numel(old);
    if n == 0 || old.is_empty() {
        if old == new {
            return Some(old_strides.to_vec());
        }
        return Some(contiguous_strides(new));
    }
    let mut new_strides = vec![0usize; new.len()];
    let mut view_d = new.len() as i64 - 1;
    let mut chunk_base_stride = *old_strides.last()?;
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for tensor_d in (0..old.len()).rev() {
        tensor_numel *= old[tensor_d];
        if tensor_d == 0 || (old[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride) {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

/// Calls `f(storage offset of the run's first element, run length, run stride)` for each run of
/// the innermost dimension, in row-major logical order: the same elements as
/// [`element_offsets`], without materialising one offset per element.
pub fn for_each_run(sizes: &[usize], strides: &[usize], offset: usize, mut f: impl FnMut(usize, usize, usize)) {
    if numel(sizes) == 0 {
        return;
    }
    let Some((&inner, outer)) = sizes.split_last() else {
        f(offset, 1, 0);
        return;
    };
    let inner_stride = strides.last().copied().unwrap_or(0);
    let mut idx = vec![0usize; outer.len()];
    let mut cur = offset;
    loop {
        f(cur, inner, inner_stride);
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            cur += strides[d];
            if idx[d] < outer[d] {
                break;
            }
            cur -= strides[d] * outer[d];
            idx[d] = 0;
        }
    }
}

/// Copies the elements of a strided view of `src` (element size `es`), in row-major logical
/// order, into `dst` (`numel * es` bytes).
pub fn gather_strided(src: &[u8], es: usize, sizes: &[usize], strides: &[usize], dst: &mut [u8]) {
    if let Some(()) = gather_transposed(src, es, sizes, strides, dst) {
        return;
    }
    let mut o = 0;
    for_each_run(sizes, strides, 0, |start, len, st| {
        if st == 1 {
            dst[o..o + len * es].copy_from_slice(&src[start * es..(start + len) * es]);
        } else {
            let d = &mut dst[o..o + len * es];
            match es {
                // fixed-size element copies (a 4-byte `copy_from_slice` of run-time length is a
                // `memcpy` call per element)
                1 => d.iter_mut().enumerate().for_each(|(j, x)| *x = src[start + j * st]),
                2 => strided_elems::<2>(src, start, st, d),
                4 => strided_elems::<4>(src, start, st, d),
                8 => strided_elems::<8>(src, start, st, d),
                _ => {
                    for (j, x) in d.chunks_exact_mut(es).enumerate() {
                        let s = (start + j * st) * es;
                        x.copy_from_slice(&src[s..s + es]);
                    }
                }
            }
        }
        o += len * es;
    });
}

/// Side of the square tiles of [`gather_transposed`]: 16 rows of 16 elements of 4 bytes are 16
/// cache lines read and 16 written per tile.
const TILE: usize = 16;

/// [`gather_strided`] for a view whose last two dims are swapped (`t.t()`, `t.transpose(-1, -2)`
/// of a contiguous tensor, the gradient of a linear layer's weight): element by element the
/// reads would stride across the rows of the source and touch a new cache line each; by tiles,
/// every line read is used whole. `None` when the view is not of that form (nothing written).
fn gather_transposed(src: &[u8], es: usize, sizes: &[usize], strides: &[usize], dst: &mut [u8]) -> Option<()> {
    let n = sizes.len();
    if n < 2 || !matches!(es, 1 | 2 | 4 | 8) {
        return None;
    }
    let (rows, cols) = (sizes[n - 2], sizes[n - 1]);
    let (rs, cs) = (strides[n - 2], strides[n - 1]);
    if rs != 1 || cs < rows || rows < TILE || cols < TILE {
        return None;
    }
    let plane = rows * cols;
    let mut o = 0;
    let mut ok = true;
    for_each_run(&sizes[..n - 2], &strides[..n - 2], 0, |start, len, st| {
        for t in 0..len {
            let base = start + t * st;
            let d = &mut dst[o..o + plane * es];
            ok &= match es {
                1 => transpose_tiles::<1>(src, base, rows, cols, cs, d),
                2 => transpose_tiles::<2>(src, base, rows, cols, cs, d),
                4 => transpose_tiles::<4>(src, base, rows, cols, cs, d),
                _ => transpose_tiles::<8>(src, base, rows, cols, cs, d),
            };
            o += plane * es;
        }
    });
    // a source too short for the view is a caller's bug: fall back to the checked walk's panic
    // message rather than a partial copy
    ok.then_some(())
}

/// `dst[i * cols + j] = src[base + i + j * cs]` (elements of `ES` bytes) by square tiles; false
/// (nothing read out of bounds) when `src` does not hold the view.
fn transpose_tiles<const ES: usize>(
    src: &[u8],
    base: usize,
    rows: usize,
    cols: usize,
    cs: usize,
    dst: &mut [u8],
) -> bool {
    let last = base + (rows - 1) + (cols - 1) * cs;
    if (last + 1) * ES > src.len() || dst.len() < rows * cols * ES {
        return false;
    }
    for i0 in (0..rows).step_by(TILE) {
        let i1 = (i0 + TILE).min(rows);
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            for j in j0..j1 {
                let s = (base + j * cs) * ES;
                for i in i0..i1 {
                    let (a, b) = (s + i * ES, (i * cols + j) * ES);
                    let mut e = [0u8; ES];
                    e.copy_from_slice(&src[a..a + ES]);
                    dst[b..b + ES].copy_from_slice(&e);
                }
            }
        }
    }
    true
}

fn strided_elems<const ES: usize>(src: &[u8], start: usize, st: usize, dst: &mut [u8]) {
    for (j, x) in dst.chunks_exact_mut(ES).enumerate() {
        let s = (start + j * st) * ES;
        let mut e = [0u8; ES];
        e.copy_from_slice(&src[s..s + ES]);
        x.copy_from_slice(&e);
    }
}

/// Storage element offsets of every element, in row-major logical order.
pub fn element_offsets(sizes: &[usize], strides: &[usize], offset: usize) -> Vec<usize> {
    let n = numel(sizes);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let nd = sizes.len();
    let mut idx = vec![0usize; nd];
    let mut cur = offset;
    for _ in 0..n {
        out.push(cur);
        for d in (0..nd).rev() {
            idx[d] += 1;
            cur += strides[d];
            if idx[d] < sizes[d] {
                break;
            }
            cur -= strides[d] * sizes[d];
            idx[d] = 0;
        }
    }
    out
}

/// Largest storage element index touched + 1 (0 for empty).
pub fn storage_extent(sizes: &[usize], strides: &[usize], offset: usize) -> usize {
    if numel(sizes) == 0 {
        return 0;
    }
    sizes
        .iter()
        .zip(strides)
        .fold(offset.saturating_add(1), |acc, (s, st)| acc.saturating_add((s - 1).saturating_mul(*st)))
}

/// One spatial dimension of a pooling window: kernel size, stride, padding, dilation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Kernel size.
    pub k: usize,
    /// Stride.
    pub s: usize,
    /// Padding (each side).
    pub p: usize,
    /// Dilation.
    pub d: usize,
}

impl Window {
    /// PyTorch's `pooling_output_shape`: the number of windows over an input of `size`;
    /// `ceil_mode` rounds up, but the last window must start inside the input or its left
    /// padding. Zero or negative when the input is too small (the caller reports it). In i128:
    /// no argument can overflow it.
    pub fn out_len(&self, size: usize, ceil: bool) -> i128 {
        let (size, k, s, p, d) = (size as i128, self.k as i128, self.s as i128, self.p as i128, self.d as i128);
        let num = size + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
        let mut len = num.div_euclid(s) + 1;
        if ceil && (len - 1) * s >= size + p {
            len -= 1;
        }
        len
    }

    /// The first input position of window `o` (negative inside the left padding).
    pub fn start(&self, o: usize) -> i128 {
        o as i128 * self.s as i128 - self.p as i128
    }

    /// The dilated taps of window `o` that fall inside an input of `size`, and the first tap at
    /// or past position 0 (PyTorch's starting index, even when it lies past the input).
    pub fn taps(&self, o: usize, size: usize) -> (Vec<usize>, i128) {
        let (start, d, k) = (self.start(o), self.d as i128, self.k as i128);
        let j0 = if start < 0 { (-start + d - 1) / d } else { 0 };
        let mut taps = Vec::new();
        let mut j = j0;
        while j < k && start + j * d < size as i128 {
            taps.push((start + j * d) as usize);
            j += 1;
        }
        (taps, start + j0 * d)
    }

    /// Window `o` of an average pool over an input of `size`: (its extent clipped to the input
    /// plus padding, as counted by `count_include_pad`; the in-bounds range `lo..hi`).
    pub fn span(&self, o: usize, size: usize) -> (i128, usize, usize) {
        let start = self.start(o);
        let end = (start + self.k as i128).min(size as i128 + self.p as i128);
        let lo = start.max(0);
        let hi = end.min(size as i128).max(lo);
        (end - start, lo as usize, hi as usize)
    }
}

/// ATen's `reflect_coordinates`: reflects `x` until it lies in [low, high], the bounds given
/// doubled so that half-integers are exact.
pub fn reflect_coordinates(x: f64, twice_low: i64, twice_high: i64) -> f64 {
    if twice_low == twice_high {
        return 0.0;
    }
    let min = twice_low as f64 / 2.0;
    let span = (twice_high - twice_low) as f64 / 2.0;
    let x = (x - min).abs();
    let extra = x % span;
    let flips = (x / span).floor();
    if flips % 2.0 == 0.0 { extra + min } else { span - extra + min }
}

/// The cubic convolution weights (A = -0.75) of the four taps around a fractional offset `t`
/// (ATen's `get_cubic_upsample_coefficients`).
pub fn cubic_coefficients(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// `std::max(a, b)` (`b` only when `a < b`: a NaN `a` stays).
pub fn std_max(a: f64, b: f64) -> f64 {
    if a < b { b } else { a }
}

/// `std::min(a, b)` (`b` only when `b < a`: a NaN `b` gives `a`).
pub fn std_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// ATen's `clip_coordinates`: into [0, size - 1].
pub fn clip_coordinates(x: f64, size: usize) -> f64 {
    std_min(size as f64 - 1.0, std_max(x, 0.0))
}

/// An integral pixel position inside `0..size` (NaN and out-of-range positions: `None`).
pub fn pixel(x: f64, size: usize) -> Option<usize> {
    (0.0..size as f64).contains(&x).then_some(x as usize)
}
