//! Kernel of the custom operator `xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor`.
//!
//! Written by `xirang-scan new-op`; the body is yours (it is never regenerated). Compose existing
//! operators through their front-ends (`aten::tanh(o, self_)?`) or launch a device kernel.
//! Tests: `cargo test -p xirang-runtime --test runtime custom::scaled_gelu::`.
//! Gradient rule: `self: gelu_backward(grad * scale, self)`.
//! Reference: `gelu(self) * scale` (the tests compare the kernel with it).

#[allow(unused_imports)]
use crate::dtype::{DType, Scalar};
#[allow(unused_imports)]
use crate::error::{Error, Result};
#[allow(unused_imports)]
use crate::generated::ops::aten;
#[allow(unused_imports)]
use crate::ivalue::{Generator, Layout, MemoryFormat, Opaque};
use crate::kernels::NpuOps;
#[allow(unused_imports)]
use crate::tensor::Tensor;

/// `xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor`: `gelu(self) * scale`, composed of
/// the aten front-ends (a device kernel would fuse the two passes).
pub fn scaled_gelu(o: &NpuOps, self_: &Tensor, scale: f64) -> Result<Tensor> {
    aten::mul_scalar(o, &aten::gelu(o, self_, "none")?, Scalar::Float(scale))
}
