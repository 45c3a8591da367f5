//! Typed errors of the bridge and the status codes they cross the C ABI as.

use xirang_runtime::Error as RtError;

/// Status codes of the C ABI (`XR_*` in `include/xirang_bridge.h`). The shim turns each into
/// PyTorch's exception type; the message is [`crate::ffi`]'s thread-local last error.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    /// The operator has no device implementation for these arguments: the shim runs PyTorch's
    /// CPU kernel (after the fallback policy admitted it).
    Declined = 1,
    /// `RuntimeError` (`c10::Error`).
    Error = 2,
    /// `torch.OutOfMemoryError`.
    OutOfMemory = 3,
    /// `IndexError`.
    Index = 4,
    /// `ValueError`.
    Value = 5,
    /// `TypeError`.
    Type = 6,
    /// `NotImplementedError`.
    NotImplemented = 7,
    /// A panic caught at the boundary (a bug): `RuntimeError`.
    Panic = 8,
}

/// Everything the bridge can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BridgeError {
    /// An error of the runtime (kernels, allocator, driver).
    #[error(transparent)]
    Runtime(#[from] RtError),
    /// No device implementation for these arguments (a dtype, layout or value the runtime does not
    /// model, or the runtime's host tier would be needed).
    #[error("{0}")]
    Declined(String),
    /// A malformed value crossed the ABI (the shim's bug, or a value PyTorch should not produce).
    #[error("invalid value at the xirang C ABI: {0}")]
    Abi(String),
    /// A device index outside `0..device_count()`.
    #[error("invalid device index {index}: {count} xirang device(s) visible")]
    Device { index: i64, count: usize },
    /// Tensors of one call on two `xirang` devices (PyTorch's message).
    #[error("{0}")]
    DeviceMismatch(String),
    /// `XIRANG_VISIBLE_DEVICES` or another setting could not be used.
    #[error("{0}")]
    Config(String),
    /// The fallback policy forbids PyTorch's CPU kernel for this operator (`XIRANG_FALLBACK=error`).
    #[error("{0}")]
    FallbackForbidden(String),
    /// A call in a forked child of a process whose runtime ran (CUDA's message, for xirang).
    #[error(
        "Cannot re-initialize xirang in forked subprocess. To use xirang with multiprocessing, you must use \
         the 'spawn' start method"
    )]
    Forked,
    /// A panic caught at the boundary.
    #[error("internal error in the xirang runtime: {0}")]
    Panic(String),
}

impl BridgeError {
    /// The status this error crosses the C ABI as.
    pub fn status(&self) -> Status {
        match self {
            BridgeError::Runtime(e) => match e {
                RtError::OutOfMemory { .. } => Status::OutOfMemory,
                RtError::Index(_) => Status::Index,
                RtError::Declined(_) | RtError::Unsupported(_) => Status::Declined,
                _ => Status::Error,
            },
            BridgeError::Declined(_) => Status::Declined,
            BridgeError::Abi(_)
            | BridgeError::Config(_)
            | BridgeError::Device { .. }
            | BridgeError::FallbackForbidden(_)
            | BridgeError::Forked
            | BridgeError::DeviceMismatch(_) => Status::Error,
            BridgeError::Panic(_) => Status::Panic,
        }
    }
}

/// Result alias of the bridge.
pub type Result<T, E = BridgeError> = std::result::Result<T, E>;
