//! Shape arithmetic: strides, broadcasting, dimension wrapping, view
//! stride computation (PyTorch's `computeStride`), element offsets.

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
