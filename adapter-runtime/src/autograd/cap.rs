//! Capture helpers the generated `capture` functions call: a node's saved state read from the
//! boxed arguments and results of the recorded call.

use super::node::*;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ivalue::{FromIValue, IValue, Layout};
use crate::tensor::Tensor;

fn want<'a>(op: &str, what: &str, v: &'a IValue) -> Result<&'a Tensor> {
    match v {
        IValue::Tensor(t) => Ok(t),
        other => Err(Error::InvalidArgument(format!("{op}: saved `{what}` is {}, not a Tensor", other.kind()))),
    }
}

/// Boxed value `i` (an argument or a result); a call recorded with fewer values than the
/// schema has (trailing defaults omitted) is an error, not a panic.
pub fn arg<'a>(op: &str, v: &'a [IValue], i: usize) -> Result<&'a IValue> {
    v.get(i).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "autograd: `{op}` was recorded with {} values; pass every argument (schema defaults included)",
            v.len()
        ))
    })
}

/// A saved tensor: detached (the node must not keep the graph of its outputs alive).
pub fn tensor(op: &str, what: &str, v: &IValue) -> Result<Tensor> {
    Ok(want(op, what, v)?.detach())
}
pub fn opt_tensor(op: &str, what: &str, v: &IValue) -> Result<Option<Tensor>> {
    match v {
        IValue::None => Ok(None),
        v => tensor(op, what, v).map(Some),
    }
}
pub fn tensor_list(op: &str, what: &str, v: &IValue) -> Result<Vec<Tensor>> {
    match v {
        IValue::TensorList(ts) => Ok(ts.iter().map(Tensor::detach).collect()),
        other => Err(Error::InvalidArgument(format!("{op}: saved `{what}` is {}, not Tensor[]", other.kind()))),
    }
}
pub fn value<T: FromIValue>(op: &str, v: &IValue) -> Result<T> {
    T::from_ivalue(op, v.clone())
}
fn ints(xs: &[usize]) -> Vec<i64> {
    xs.iter().map(|&x| x as i64).collect()
}
pub fn sizes(op: &str, v: &IValue) -> Result<Vec<i64>> {
    Ok(ints(want(op, "sizes", v)?.sizes()))
}
pub fn sizes_opt(op: &str, v: &IValue) -> Result<Option<Vec<i64>>> {
    match v {
        IValue::None => Ok(None),
        v => sizes(op, v).map(Some),
    }
}
pub fn strides(op: &str, v: &IValue) -> Result<Vec<i64>> {
    Ok(ints(want(op, "strides", v)?.strides()))
}
pub fn scalar_type(op: &str, v: &IValue) -> Result<DType> {
    Ok(want(op, "scalar_type", v)?.dtype())
}
pub fn layout(op: &str, v: &IValue) -> Result<Layout> {
    want(op, "layout", v).map(|_| Layout::Strided)
}
pub fn dim(op: &str, v: &IValue) -> Result<i64> {
    Ok(want(op, "dim", v)?.dim() as i64)
}
pub fn numel(op: &str, v: &IValue) -> Result<i64> {
    Ok(want(op, "numel", v)?.numel() as i64)
}
pub fn size(op: &str, v: &IValue, k: i64) -> Result<i64> {
    Ok(want(op, "size", v)?.size(k)? as i64)
}
pub fn list_sizes(op: &str, v: &IValue) -> Result<Vec<Vec<i64>>> {
    match v {
        IValue::TensorList(ts) => Ok(ts.iter().map(|t| ints(t.sizes())).collect()),
        other => Err(Error::InvalidArgument(format!("{op}: expected Tensor[], got {}", other.kind()))),
    }
}
pub fn list_scalar_types(op: &str, v: &IValue) -> Result<Vec<DType>> {
    match v {
        IValue::TensorList(ts) => Ok(ts.iter().map(Tensor::dtype).collect()),
        other => Err(Error::InvalidArgument(format!("{op}: expected Tensor[], got {}", other.kind()))),
    }
}
pub fn options(op: &str, v: &IValue) -> Result<TensorOptions> {
    Ok(TensorOptions::of(want(op, "options", v)?))
}
pub fn info(op: &str, v: &IValue) -> Result<TensorInfo> {
    let t = want(op, "info", v)?;
    Ok(TensorInfo { sizes: ints(t.sizes()), options: TensorOptions::of(t) })
}
pub fn geometry(op: &str, v: &IValue) -> Result<TensorGeometry> {
    let t = want(op, "geometry", v)?;
    Ok(TensorGeometry {
        sizes: ints(t.sizes()),
        strides: ints(t.strides()),
        storage_offset: t.storage_offset() as i64,
        options: TensorOptions::of(t),
    })
}
/// A saved value the generator cannot capture from the boxed call.
pub fn unsupported(op: &str, what: &str) -> Error {
    Error::Unsupported(format!(
        "autograd: cannot record `{op}`: its backward saves `{what}`, which the engine does not capture"
    ))
}
