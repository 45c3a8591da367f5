//! Typed errors of the runtime.

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the runtime. Library code never panics
/// on bad input: it returns one of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A driver call failed with a vendor error code.
    #[error("{api} failed with ACL error {code}: {message}")]
    Driver { api: &'static str, code: i32, message: String },
    /// The device is out of memory even after emptying the allocator cache.
    #[error(
        "out of memory on device {device}: tried to allocate {requested} bytes \
         ({allocated} bytes allocated, {reserved} bytes reserved by the caching allocator): {message}"
    )]
    OutOfMemory { device: usize, requested: usize, allocated: usize, reserved: usize, message: String },
    /// The driver library could not be opened or lacks a required symbol.
    #[error("cannot load driver: {0}")]
    Load(String),
    #[error("shape error: {0}")]
    Shape(String),
    #[error("dtype error: {0}")]
    DType(String),
    #[error("index error: {0}")]
    Index(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("device mismatch: {0}")]
    DeviceMismatch(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The call would reach the runtime's own CPU-fallback tier while an embedding application
    /// runs the CPU fallback itself ([`crate::dispatch::HostFallback::Decline`]): nothing ran on
    /// any tier, and the application runs the whole operator on its own CPU kernels.
    #[error("{0}: no device implementation for these arguments (the CPU fallback is the embedding application's)")]
    Declined(String),
}

impl Error {
    /// Whether a driver error means "device out of memory".
    pub fn is_driver_oom(&self) -> bool {
        matches!(self, Error::Driver { code, .. }
            if *code == xirang_acl_sim::ACL_ERROR_RT_MEMORY_ALLOCATION
                || *code == 207018 // ACL_ERROR_RT_DEVICE_OOM
                || *code == xirang_acl_sim::ACL_ERROR_BAD_ALLOC)
    }
}

pub fn shape_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Shape(msg.into()))
}
pub fn dtype_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::DType(msg.into()))
}
pub fn index_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Index(msg.into()))
}
pub fn arg_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::InvalidArgument(msg.into()))
}
