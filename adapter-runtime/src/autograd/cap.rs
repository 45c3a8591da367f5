//! Capture helpers of the generated nodes' constructors (`generated::autograd::<Op>Backward::new`):
//! a node's saved state taken from the recorded call's *typed* arguments and results, each as its
//! field's type. Nothing is boxed or read back by position: the constructor has the operator's
//! parameters, so a saved value of the wrong type fails to compile in the generated file.

use super::node::*;
use crate::device::Device;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::ivalue::{Generator, Layout, MemoryFormat};
use crate::tensor::Tensor;

/// A typed argument or result as the node keeps it: tensors detached (a node must not keep the
/// graph of its outputs alive), borrowed values owned.
pub trait Save {
    type Saved;
    fn save(self) -> Self::Saved;
}

/// `v` as the node keeps it ([`Save`]).
pub fn save<T: Save>(v: T) -> T::Saved {
    v.save()
}

macro_rules! save_copy {
    ($($t:ty),*) => {$(
        impl Save for $t {
            type Saved = $t;
            fn save(self) -> $t {
                self
            }
        }
        impl Save for Option<$t> {
            type Saved = Option<$t>;
            fn save(self) -> Option<$t> {
                self
            }
        }
    )*};
}
save_copy!(i64, f64, bool, Scalar, DType, Layout, MemoryFormat, Device);

impl Save for &Tensor {
    type Saved = Tensor;
    fn save(self) -> Tensor {
        self.detach()
    }
}
impl Save for Option<&Tensor> {
    type Saved = Option<Tensor>;
    fn save(self) -> Option<Tensor> {
        self.map(Tensor::detach)
    }
}
impl Save for &Option<Tensor> {
    type Saved = Option<Tensor>;
    fn save(self) -> Option<Tensor> {
        self.as_ref().map(Tensor::detach)
    }
}
impl Save for &[Tensor] {
    type Saved = Vec<Tensor>;
    fn save(self) -> Vec<Tensor> {
        self.iter().map(Tensor::detach).collect()
    }
}
impl Save for &[Option<Tensor>] {
    type Saved = Vec<Option<Tensor>>;
    fn save(self) -> Vec<Option<Tensor>> {
        self.iter().map(|t| t.as_ref().map(Tensor::detach)).collect()
    }
}
macro_rules! save_list {
    ($($t:ty),*) => {$(
        impl Save for &[$t] {
            type Saved = Vec<$t>;
            fn save(self) -> Vec<$t> {
                self.to_vec()
            }
        }
        impl Save for Option<&[$t]> {
            type Saved = Option<Vec<$t>>;
            fn save(self) -> Option<Vec<$t>> {
                self.map(<[$t]>::to_vec)
            }
        }
    )*};
}
save_list!(i64, f64, bool, Scalar, String);
impl Save for &str {
    type Saved = String;
    fn save(self) -> String {
        self.to_string()
    }
}
impl Save for Option<&str> {
    type Saved = Option<String>;
    fn save(self) -> Option<String> {
        self.map(str::to_string)
    }
}
impl Save for &Generator {
    type Saved = Generator;
    fn save(self) -> Generator {
        self.clone()
    }
}
impl Save for Option<&Generator> {
    type Saved = Option<Generator>;
    fn save(self) -> Option<Generator> {
        self.cloned()
    }
}

/// An optional tensor a derived value (`weight_sizes`) is read from: the call must have passed one.
pub fn some<'a>(op: &str, what: &str, t: Option<&'a Tensor>) -> Result<&'a Tensor> {
    t.ok_or_else(|| Error::InvalidArgument(format!("{op}: its backward saves `{what}` of an absent tensor")))
}

fn ints(xs: &[usize]) -> Vec<i64> {
    xs.iter().map(|&x| x as i64).collect()
}
pub fn sizes(t: &Tensor) -> Vec<i64> {
    ints(t.sizes())
}
pub fn sizes_opt(t: Option<&Tensor>) -> Option<Vec<i64>> {
    t.map(sizes)
}
pub fn strides(t: &Tensor) -> Vec<i64> {
    ints(t.strides())
}
pub fn scalar_type(t: &Tensor) -> DType {
    t.dtype()
}
pub fn layout(_t: &Tensor) -> Layout {
    Layout::Strided
}
pub fn dim(t: &Tensor) -> i64 {
    t.dim() as i64
}
pub fn numel(t: &Tensor) -> i64 {
    t.numel() as i64
}
pub fn size(t: &Tensor, k: i64) -> Result<i64> {
    Ok(t.size(k)? as i64)
}
pub fn list_sizes(ts: &[Tensor]) -> Vec<Vec<i64>> {
    ts.iter().map(sizes).collect()
}
pub fn list_scalar_types(ts: &[Tensor]) -> Vec<DType> {
    ts.iter().map(Tensor::dtype).collect()
}
pub fn options(t: &Tensor) -> TensorOptions {
    TensorOptions::of(t)
}
pub fn info(t: &Tensor) -> TensorInfo {
    TensorInfo { sizes: sizes(t), options: TensorOptions::of(t) }
}
pub fn geometry(t: &Tensor) -> TensorGeometry {
    TensorGeometry {
        sizes: sizes(t),
        strides: strides(t),
        storage_offset: t.storage_offset() as i64,
        options: TensorOptions::of(t),
    }
}
/// A saved value the generator cannot capture from the call's arguments and results.
pub fn unsupported(op: &str, what: &str) -> Error {
    Error::Unsupported(format!(
        "autograd: cannot record `{op}`: its backward saves `{what}`, which the engine does not capture"
    ))
}
