//! ACL types and error codes, copied from `acl_base_rt.h`, `acl_rt.h` and
//! `error_codes/rt_error_codes.h` of CANN v2.14.0 (the values are the ABI).

use std::ffi::c_void;

/// `typedef int aclError;`
pub type AclError = i32;
/// `typedef void *aclrtStream;`
pub type AclrtStream = *mut c_void;
/// `typedef void *aclrtEvent;`
pub type AclrtEvent = *mut c_void;
/// `typedef void *aclrtContext;`
pub type AclrtContext = *mut c_void;
/// `typedef void (*aclrtCallback)(void *userData);`
pub type AclrtCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `aclrtMemcpyKind` (a C enum, passed as `int`).
pub type AclrtMemcpyKind = i32;
pub const ACL_MEMCPY_HOST_TO_HOST: AclrtMemcpyKind = 0;
pub const ACL_MEMCPY_HOST_TO_DEVICE: AclrtMemcpyKind = 1;
pub const ACL_MEMCPY_DEVICE_TO_HOST: AclrtMemcpyKind = 2;
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: AclrtMemcpyKind = 3;
pub const ACL_MEMCPY_DEFAULT: AclrtMemcpyKind = 4;
pub const ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: AclrtMemcpyKind = 5;
pub const ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: AclrtMemcpyKind = 6;
pub const ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: AclrtMemcpyKind = 7;

/// `aclrtMemMallocPolicy` (a C enum, passed as `int`).
pub type AclrtMemMallocPolicy = i32;
pub const ACL_MEM_MALLOC_HUGE_FIRST: AclrtMemMallocPolicy = 0;
pub const ACL_MEM_MALLOC_HUGE_ONLY: AclrtMemMallocPolicy = 1;
pub const ACL_MEM_MALLOC_NORMAL_ONLY: AclrtMemMallocPolicy = 2;
pub const ACL_MEM_MALLOC_HUGE_FIRST_P2P: AclrtMemMallocPolicy = 3;
pub const ACL_MEM_MALLOC_HUGE_ONLY_P2P: AclrtMemMallocPolicy = 4;
pub const ACL_MEM_MALLOC_NORMAL_ONLY_P2P: AclrtMemMallocPolicy = 5;
pub const ACL_MEM_MALLOC_HUGE1G_ONLY: AclrtMemMallocPolicy = 6;
pub const ACL_MEM_MALLOC_HUGE1G_ONLY_P2P: AclrtMemMallocPolicy = 7;
pub const ACL_MEM_TYPE_LOW_BAND_WIDTH: AclrtMemMallocPolicy = 0x0100;
pub const ACL_MEM_TYPE_HIGH_BAND_WIDTH: AclrtMemMallocPolicy = 0x1000;
pub const ACL_MEM_ACCESS_USER_SPACE_READONLY: AclrtMemMallocPolicy = 0x100000;

/// `aclrtMemAttr` (a C enum, passed as `int`).
pub type AclrtMemAttr = i32;
pub const ACL_DDR_MEM: AclrtMemAttr = 0;
pub const ACL_HBM_MEM: AclrtMemAttr = 1;
/// Last value of `aclrtMemAttr` (`ACL_HBM_MEM_P2P_HUGE1G`).
pub const ACL_MEM_ATTR_LAST: AclrtMemAttr = 11;

/// `aclrtCallbackBlockType` (a C enum, passed as `int`).
pub type AclrtCallbackBlockType = i32;
pub const ACL_CALLBACK_NO_BLOCK: AclrtCallbackBlockType = 0;
pub const ACL_CALLBACK_BLOCK: AclrtCallbackBlockType = 1;

pub const ACL_SUCCESS: AclError = 0;
pub const ACL_ERROR_INVALID_PARAM: AclError = 100000;
pub const ACL_ERROR_UNINITIALIZE: AclError = 100001;
pub const ACL_ERROR_REPEAT_INITIALIZE: AclError = 100002;
pub const ACL_ERROR_REPEAT_FINALIZE: AclError = 100037;
pub const ACL_ERROR_BAD_ALLOC: AclError = 200000;
pub const ACL_ERROR_INVALID_DEVICE: AclError = 200002;
pub const ACL_ERROR_FEATURE_UNSUPPORTED: AclError = 200006;

pub const ACL_ERROR_RT_PARAM_INVALID: AclError = 107000;
pub const ACL_ERROR_RT_INVALID_DEVICEID: AclError = 107001;
pub const ACL_ERROR_RT_CONTEXT_NULL: AclError = 107002;
pub const ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID: AclError = 107006;
pub const ACL_ERROR_RT_INVALID_HANDLE: AclError = 107017;
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: AclError = 207001;
pub const ACL_ERROR_RT_MEMORY_FREE: AclError = 207002;
pub const ACL_ERROR_RT_NO_STREAM_RESOURCE: AclError = 207008;
pub const ACL_ERROR_RT_INTERNAL_ERROR: AclError = 507000;
pub const ACL_ERROR_RT_EVENT_NOT_COMPLETE: AclError = 507006;
pub const ACL_ERROR_RT_AICORE_EXCEPTION: AclError = 507015;
