//! Xirang adapter runtime: tensors with PyTorch semantics over a vendor
//! driver, here the simulated Ascend device (`xirang-acl-sim`).
//!
//! Map of the crate:
//! * [`driver`]: the [`Driver`](driver::Driver) trait and its ACL
//!   implementation over C function pointers (the only `unsafe` code).
//! * [`device`]: logical/physical device map, per-device caching allocator.
//! * [`runtime`]: a driver and its devices, the current device and stream.
//! * [`dtype`]: dtypes, scalars, PyTorch type promotion.
//! * [`shape`]: strides, broadcasting, view stride computation.
//! * [`tensor`]: the strided [`Tensor`] and its views.
//! * [`kernels`]: native device kernels (run through the driver's kernel
//!   launch; device memory only through `KernelMemory`).
//! * [`dispatch`]: three-tier dispatch (native, recipe, CPU fallback) with
//!   per-operator counters and the fallback policy.
//! * [`ivalue`]: boxed arguments/results and the schema-type mapping.
//! * [`boxed`]: calling an operator by name through the tiers.
//! * [`custom`]: kernels of the adapter's custom operators (`xirang-scan new-op`).
//! * [`host`]: the host reference implementation of each operator, typed (the CPU-fallback tier).
//! * [`rng`]: the seeded generator and the default generator `manual_seed` seeds.
//! * [`io`]: safetensors files.
//! * [`observe`]: observation points of the dispatcher, allocator and transfers, and [`Tier`](observe::Tier).
//! * [`profile`]: operator-level profiling (`XIRANG_PROFILE`), reports,
//!   baseline comparison and the tuning advisor (`xirang-prof`).
//! * [`ops`]: host reference implementations (the CPU-fallback tier); on
//!   device tensors they copy to host, compute, and copy back.

#![deny(unsafe_code)]

pub mod autograd;
pub mod autograd_helpers;
pub mod boxed;
/// Kernels of the custom operators (`generated/custom.rs`); maintained by `xirang-scan new-op`.
pub mod custom;
pub mod device;
pub mod dispatch;
pub mod driver;
pub mod dtype;
pub mod error;
pub mod forward_ad;
/// The code `xirang-scan generate` writes into `generated/` (do not edit there: edit
/// `templates/` or `xirang.toml` and regenerate).
#[path = "../../generated/mod.rs"]
pub mod generated;
pub mod host;
pub mod io;
pub mod ivalue;
pub mod kernels;
pub mod observe;
pub mod ops;
pub mod profile;
pub mod rng;
pub mod runtime;
pub mod shape;
pub mod tensor;

pub use device::{AllocatorStats, Device, DeviceMap};
pub use dtype::{DType, Operand, Scalar, promote_types, result_type};
pub use error::{Error, Result};
pub use runtime::Runtime;
pub use tensor::{Element, Tensor};
