//! Kernels of the custom operators (`generated/custom.rs`, trait `CustomOps`).
//!
//! Maintained by `xirang-scan new-op`, which rewrites this file: one module per operator
//! (`<name>.rs`, the kernel body: yours) and one forwarding method below. Custom operators without
//! a kernel file keep the trait's default body (an "not implemented" error).

#[allow(unused_imports)]
use crate::dtype::{DType, Scalar};
#[allow(unused_imports)]
use crate::error::Result;
use crate::generated::custom::CustomOps;
#[allow(unused_imports)]
use crate::ivalue::{Generator, Layout, MemoryFormat, Opaque};
use crate::kernels::NpuOps;
#[allow(unused_imports)]
use crate::tensor::Tensor;

mod scaled_gelu;

impl CustomOps for NpuOps {
    fn scaled_gelu(&self, self_: &Tensor, scale: f64) -> Result<Tensor> {
        scaled_gelu::scaled_gelu(self, self_, scale)
    }
}
