//! Xirang adapter runtime: tensors with PyTorch semantics over a vendor
//! driver, here the simulated Ascend device (`xirang-acl-sim`).
//!
//! Map of the crate. Re-exported from the core crate below it (`xirang-core`, which knows no
//! operator): [`error`], [`dtype`], [`rng`], [`observe`], [`shape`], [`driver`] (the driver table
//! and the ACL driver, the only `unsafe` code), [`device`], [`runtime`], [`tensor`], [`io`].
//! This crate's own modules:
//! * [`kernels`]: native device kernels (run through the driver's kernel
//!   launch; device memory only through `KernelMemory`).
//! * [`dispatch`]: three-tier dispatch (native, recipe, CPU fallback) with
//!   per-operator counters and the fallback policy.
//! * [`ivalue`]: boxed arguments/results and the schema-type mapping.
//! * [`boxed`]: calling an operator by name through the tiers.
//! * [`custom`]: kernels of the adapter's custom operators (`xirang-scan new-op`).
//! * [`profile`]: operator-level profiling (`XIRANG_PROFILE`), reports,
//!   baseline comparison and the tuning advisor (`xirang-prof`).
//! * [`reference`]: the host reference tier (the CPU fallback's implementations, the precision
//!   suite's reference); on device tensors they copy to host, compute, and copy back.

#![deny(unsafe_code)]

// The core (`xirang-core`), under the paths these modules had when they were part of this crate.
pub use xirang_core::{device, driver, dtype, error, io, observe, rng, runtime, shape, tensor};

pub mod autograd;
pub mod boxed;
/// Kernels of the custom operators (`generated/custom.rs`); maintained by `xirang-scan new-op`.
pub mod custom;
pub mod dispatch;
/// The code `xirang-scan generate` writes into `generated/` (do not edit there: edit
/// `templates/` or `xirang.toml` and regenerate).
#[path = "../../generated/mod.rs"]
pub mod generated;
pub mod ivalue;
pub mod kernels;
pub mod profile;
pub mod reference;

pub use device::{AllocatorStats, Device, DeviceMap};
pub use dtype::{DType, Operand, Scalar, promote_types, result_type};
pub use error::{Error, Result};
pub use runtime::Runtime;
pub use tensor::{Element, Tensor};
