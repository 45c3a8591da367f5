//! The `#[repr(C)]` types and constants of the C ABI. `include/xirang_bridge.h` declares the
//! same layout for the shim; `tests/header.rs` checks that the two agree on every constant and
//! exported function.

use std::ffi::c_void;

/// A tensor crossing the boundary: a view (sizes, strides, storage offset, dtype) of a storage.
///
/// Arguments: a `xirang` tensor names its storage by `storage`, the handle the shim's allocator
/// received from `xirang_storage_alloc` (or `xirang_storage_retain`); `data` is then the storage's
/// device address (informational). A CPU tensor has `storage` null, `device` -1 and `data` the host
/// address of its storage's first byte, `nbytes` long. An absent element of a `Tensor?[]` has
/// `dtype` -1.
///
/// Results: `storage` is a handle borrowed from the result (valid until `xirang_result_free`): the
/// shim retains it to keep the storage, or, when `alias` names an argument, reuses that argument's
/// storage instead. A CPU result has `storage` null and `data` pointing at its contiguous bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XrTensor {
    pub storage: *mut c_void,
    pub data: u64,
    pub nbytes: u64,
    pub sizes: *const i64,
    pub strides: *const i64,
    pub ndim: i64,
    /// In elements.
    pub offset: i64,
    /// `c10::ScalarType` code; -1: no tensor (an absent element of `Tensor?[]`).
    pub dtype: i32,
    /// Bytes per element (also for dtypes the runtime does not model: copies move them as bytes).
    pub itemsize: i32,
    /// `xirang` device index as PyTorch numbers them; -1: CPU.
    pub device: i32,
    /// Results: the index of the argument (written by the operator) whose storage this is; -1: none.
    pub alias: i32,
}

impl XrTensor {
    /// An absent tensor (all zero, `dtype` -1).
    pub const NONE: XrTensor = XrTensor {
        storage: std::ptr::null_mut(),
        data: 0,
        nbytes: 0,
        sizes: std::ptr::null(),
        strides: std::ptr::null(),
        ndim: 0,
        offset: 0,
        dtype: -1,
        itemsize: 0,
        device: -1,
        alias: -1,
    };
}

/// A boxed argument or result: `tag` says which fields hold it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XrValue {
    pub tag: i32,
    /// Arguments: [`FLAG_MUTABLE`] when the operator writes the argument (schema `Tensor(a!)`),
    /// [`FLAG_WRAPPED_NUMBER`] for a Python number PyTorch wrapped in a tensor.
    pub flags: i32,
    /// `INT`, `BOOL`, `SCALAR_INT`, `SCALAR_BOOL`, `DTYPE`, `LAYOUT`, `MEMORY_FORMAT`, `DEVICE`.
    pub i: i64,
    /// `FLOAT`, `SCALAR_FLOAT`.
    pub f: f64,
    /// `TENSOR` (one `XrTensor`), lists (`len` elements), `STR` (`len` UTF-8 bytes).
    pub p: *mut c_void,
    pub len: u64,
}

impl XrValue {
    pub const NONE: XrValue = XrValue { tag: TAG_NONE, flags: 0, i: 0, f: 0.0, p: std::ptr::null_mut(), len: 0 };
}

/// The results of one `xirang_call`, owned by the runtime until `xirang_result_free`.
#[repr(C)]
#[derive(Debug)]
pub struct XrResult {
    pub values: *mut XrValue,
    pub len: u64,
    /// Opaque owner of `values` and everything they point at.
    pub owner: *mut c_void,
}

/// The caching allocator's statistics of one device (`xirang_memory_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XrMemoryStats {
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub alloc_count: u64,
    pub free_count: u64,
    pub cache_hits: u64,
    pub device_mallocs: u64,
    pub device_frees: u64,
    pub oom_retries: u64,
    pub ooms: u64,
}

pub const TAG_NONE: i32 = 0;
pub const TAG_TENSOR: i32 = 1;
pub const TAG_TENSOR_LIST: i32 = 2;
pub const TAG_OPT_TENSOR_LIST: i32 = 3;
pub const TAG_INT: i32 = 4;
pub const TAG_INT_LIST: i32 = 5;
pub const TAG_FLOAT: i32 = 6;
pub const TAG_FLOAT_LIST: i32 = 7;
pub const TAG_BOOL: i32 = 8;
pub const TAG_BOOL_LIST: i32 = 9;
pub const TAG_SCALAR_INT: i32 = 10;
pub const TAG_SCALAR_FLOAT: i32 = 11;
pub const TAG_SCALAR_BOOL: i32 = 12;
pub const TAG_SCALAR_LIST: i32 = 13;
pub const TAG_STR: i32 = 14;
pub const TAG_DTYPE: i32 = 15;
pub const TAG_LAYOUT: i32 = 16;
pub const TAG_MEMORY_FORMAT: i32 = 17;
pub const TAG_DEVICE: i32 = 18;
/// A value the runtime does not model (a `Generator`, a complex scalar, a `Storage`...): the call
/// is declined and runs on PyTorch's CPU kernel.
pub const TAG_UNSUPPORTED: i32 = 19;

/// [`XrValue::flags`]: the operator writes this argument.
pub const FLAG_MUTABLE: i32 = 1;
/// [`XrValue::flags`]: a CPU zero-dim tensor PyTorch made from a Python number (`x + 1`): it takes
/// part in type promotion as a Python scalar, not as a tensor.
pub const FLAG_WRAPPED_NUMBER: i32 = 2;

/// `c10::ScalarType` codes of the dtypes the runtime models.
pub const DTYPE_U8: i32 = 0;
pub const DTYPE_I8: i32 = 1;
pub const DTYPE_I16: i32 = 2;
pub const DTYPE_I32: i32 = 3;
pub const DTYPE_I64: i32 = 4;
pub const DTYPE_F16: i32 = 5;
pub const DTYPE_F32: i32 = 6;
pub const DTYPE_F64: i32 = 7;
pub const DTYPE_BOOL: i32 = 11;
pub const DTYPE_BF16: i32 = 15;

/// `c10::Layout::Strided` (the only layout the runtime models).
pub const LAYOUT_STRIDED: i64 = 0;
/// `c10::MemoryFormat` codes.
pub const MEMORY_FORMAT_CONTIGUOUS: i64 = 0;
pub const MEMORY_FORMAT_PRESERVE: i64 = 1;
pub const MEMORY_FORMAT_CHANNELS_LAST: i64 = 2;
pub const MEMORY_FORMAT_CHANNELS_LAST_3D: i64 = 3;

/// Fallback modes (`xirang_set_fallback_mode`), as `XIRANG_FALLBACK` spells them.
pub const FALLBACK_ERROR: i32 = 0;
pub const FALLBACK_WARN: i32 = 1;
pub const FALLBACK_SILENT: i32 = 2;
