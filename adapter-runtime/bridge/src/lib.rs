//! `xirang-bridge`: the C ABI between PyTorch's device shim and the Xirang runtime (issue #21).
//!
//! PyTorch sees the runtime as device `xirang` (its PrivateUse1 key renamed). The C++ shim of the
//! `torch-xirang` package (`adapter-runtime/torch-xirang/csrc/`) does only what PyTorch's
//! registration demands (allocator, device guard, hooks, the boxed kernel) and calls the functions
//! declared in `include/xirang_bridge.h`, which this crate exports. Map:
//!
//! * [`abi`]: the `#[repr(C)]` types and constants.
//! * [`ffi`]: the exported functions, the only `unsafe` code (decoding raw arguments,
//!   `catch_unwind` around every call).
//! * [`bridge`]: the safe API: devices, storages, the boxed call through
//!   `generated::ops::call_boxed_at` with the adapter's `NpuOps`, copies, streams, events, fallback
//!   policy and counters.
//! * [`values`]: arguments -> the runtime's `IValue`s (tensors as views of their storage, no copy),
//!   results -> the buffer the shim reads.
//! * [`devices`]: `XIRANG_VISIBLE_DEVICES` and the per-thread current device.
//! * [`error`]: typed errors and the status codes they cross as.
//!
//! Storage: every `xirang` storage PyTorch holds is a runtime [`Storage`] (an `Arc` over a
//! caching-allocator block), its handle the `Arc`'s raw pointer (`Arc::into_raw`, no box). A tensor
//! argument clones the `Arc` and views it; a result's storage is retained by the shim or, when it is an argument's, not at all.
//!
//! [`Storage`]: xirang_runtime::tensor::Storage

#![deny(unsafe_code)]

pub mod abi;
pub mod bridge;
pub mod devices;
pub mod error;
pub mod ffi;
pub mod values;

pub use bridge::Bridge;
pub use error::{BridgeError, Status};
