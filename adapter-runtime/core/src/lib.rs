//! Xirang runtime core: what a tensor is and where its bytes live, below every kernel.
//!
//! Map of the crate (`xirang-runtime` re-exports each module under the same path):
//! * [`error`]: typed errors.
//! * [`dtype`]: dtypes, scalars, PyTorch type promotion.
//! * [`rng`]: the seeded generator and the default generator `manual_seed` seeds.
//! * [`observe`]: observation points of the allocator and transfers, and [`Tier`](observe::Tier).
//! * [`shape`]: strides, broadcasting, view stride computation, strided walks.
//! * [`driver`]: the [`Driver`](driver::Driver) trait, the generated driver table and the ACL
//!   driver over it (the crate's only `unsafe` code).
//! * [`device`]: logical/physical device map, per-device caching allocator, streams.
//! * [`runtime`]: a driver and its devices, the current device and stream.
//! * [`tensor`]: the strided [`Tensor`] and its views. A device tensor's strided copy
//!   (`contiguous()`) is the driver's operation ([`Driver::copy_strided`](driver::Driver::copy_strided),
//!   as candle's `BackendStorage::copy_strided_src`): the tensor calls no kernel.
//! * [`io`]: safetensors files and the bounded reader of user files.
//!
//! Nothing here knows an operator: the kernels, the dispatcher, autograd and the host reference
//! tier are `xirang-runtime`, one crate up.

#![deny(unsafe_code)]

pub mod device;
pub mod driver;
pub mod dtype;
pub mod error;
pub mod io;
pub mod observe;
pub mod rng;
pub mod runtime;
pub mod shape;
pub mod tensor;

pub use device::{AllocatorStats, Device, DeviceMap};
pub use dtype::{DType, Operand, Scalar, promote_types, result_type};
pub use error::{Error, Result};
pub use runtime::Runtime;
pub use tensor::{Element, Tensor};
