//! Boxed host reference implementations by operator name: what the
//! CPU-fallback tier ([`crate::dispatch::fallback`]) runs.
//!
//! Each entry unboxes the schema's arguments (in schema order, out= tensors
//! last), calls the host reference op in [`crate::ops`] and boxes the
//! results. The host ops accept device tensors: they copy them to the host,
//! compute, and copy the results back to the inputs' device.

use crate::dispatch::HostFn;
use crate::error::Result;
use crate::ivalue::{IValue, unbox};
use crate::ops;

/// The host implementation of `op` (qualified name such as `add.Tensor`).
pub fn lookup(op: &str) -> Option<HostFn> {
    let f: HostFn = match op {
        "add.Tensor" => add_tensor,
        "mm" => mm,
        "mul.Tensor" => mul_tensor,
        "relu" => relu,
        _ => return None,
    };
    Some(f)
}

/// Operators that have a host implementation, sorted.
pub fn operators() -> Vec<&'static str> {
    let mut v = vec!["add.Tensor", "mm", "mul.Tensor", "relu"];
    v.sort_unstable();
    v
}

fn add_tensor(a: &[IValue]) -> Result<Vec<IValue>> {
    const OP: &str = "add.Tensor";
    let [x, y, alpha] = a else { return arity(OP, 3, a) };
    let r =
        ops::add(unbox::tensor(OP, "self", x)?, unbox::tensor(OP, "other", y)?, unbox::scalar(OP, "alpha", alpha)?)?;
    Ok(vec![r.into()])
}

fn mm(a: &[IValue]) -> Result<Vec<IValue>> {
    const OP: &str = "mm";
    let [x, y] = a else { return arity(OP, 2, a) };
    Ok(vec![ops::mm(unbox::tensor(OP, "self", x)?, unbox::tensor(OP, "mat2", y)?)?.into()])
}

fn mul_tensor(a: &[IValue]) -> Result<Vec<IValue>> {
    const OP: &str = "mul.Tensor";
    let [x, y] = a else { return arity(OP, 2, a) };
    Ok(vec![ops::mul(unbox::tensor(OP, "self", x)?, unbox::tensor(OP, "other", y)?)?.into()])
}

fn relu(a: &[IValue]) -> Result<Vec<IValue>> {
    const OP: &str = "relu";
    let [x] = a else { return arity(OP, 1, a) };
    Ok(vec![ops::relu(unbox::tensor(OP, "self", x)?)?.into()])
}

fn arity<T>(op: &str, want: usize, got: &[IValue]) -> Result<T> {
    Err(crate::error::Error::InvalidArgument(format!("{op}: expected {want} arguments, got {}", got.len())))
}
