//! The exported C ABI. Every function converts its raw arguments, calls the
//! safe core in `state.rs`, and maps failures to ACL error codes (recording
//! the message for `aclGetRecentErrMsg`).

use std::ffi::{c_char, c_void};
use std::ptr;

use crate::KernelCtx;
use crate::codes::*;
use crate::state::{self, Fail, R, fail};

/// A C kernel and its user data, as queued by `xirangSimLaunchKernel` (no allocation per launch).
pub(crate) struct RawKernel {
    call: unsafe extern "C" fn(*const XirangSimKernelCtx, *mut c_void) -> AclError,
    user_data: *mut c_void,
}

// SAFETY: `xirangSimLaunchKernel`'s contract: the kernel may run on another thread with its user
// data; the simulator only hands the pointer back to the kernel, once.
unsafe impl Send for RawKernel {}

impl RawKernel {
    /// Runs the kernel on the calling (stream worker) thread.
    pub(crate) fn run(self) -> R<()> {
        let ctx = KernelCtx { _private: () };
        // SAFETY: the launch contract above; `ctx` outlives the call.
        let code = unsafe { (self.call)(&ctx, self.user_data) };
        if code == ACL_SUCCESS { Ok(()) } else { fail(code, format!("kernel failed with code {code}")) }
    }
}

fn ret(r: R<()>) -> AclError {
    match r {
        Ok(()) => ACL_SUCCESS,
        Err(Fail { code, msg }) => {
            state::set_last_error(&msg);
            code
        }
    }
}

/// A raw host pointer moved to a stream worker. The ACL contract makes the
/// caller keep it valid until the stream is synchronized.
struct SendPtr(*mut c_void);
// SAFETY: the pointer is only dereferenced on the worker under the ACL
// contract above; the simulator never aliases it.
unsafe impl Send for SendPtr {}

fn handle(p: *mut c_void) -> usize {
    p.addr()
}

fn as_handle_ptr(h: usize) -> *mut c_void {
    ptr::without_provenance_mut(h)
}

/// `aclError aclInit(const char *configPath);` (the config file is ignored).
///
/// # Safety
/// `configPath` is null or a valid C string (it is not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(_config_path: *const c_char) -> AclError {
    ret(state::init())
}

/// `aclError aclFinalize();`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclFinalize() -> AclError {
    ret(state::finalize())
}

/// `const char *aclGetRecentErrMsg();` The string lives until the next
/// failing call on this thread; null when nothing failed yet.
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    state::last_error_ptr()
}

/// Write `v` through an out-pointer, or fail with `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, v: R<T>) -> AclError {
    if out.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "output pointer is null"));
    }
    match v {
        Ok(v) => {
            // SAFETY: non-null and valid for writes per the caller's contract.
            unsafe { out.write(v) };
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclrtGetDeviceCount(uint32_t *count);`
///
/// # Safety
/// `count` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(count, state::device_count()) }
}

/// `aclError aclrtSetDevice(int32_t deviceId);` (physical id)
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetDevice(device_id: i32) -> AclError {
    ret(state::set_device(device_id))
}

/// `aclError aclrtGetDevice(int32_t *deviceId);`
///
/// # Safety
/// `deviceId` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevice(device_id: *mut i32) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(device_id, state::get_device()) }
}

/// `aclError aclrtResetDevice(int32_t deviceId);` Waits for the device's
/// streams, destroys them and frees all of its memory.
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtResetDevice(device_id: i32) -> AclError {
    ret(state::reset_device(device_id))
}

/// `aclError aclrtSynchronizeDevice(void);`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeDevice() -> AclError {
    ret(state::synchronize_device())
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);`
///
/// # Safety
/// `devPtr` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: AclrtMemMallocPolicy) -> AclError {
    let r = state::malloc(size as u64, policy).map(|a| as_handle_ptr(a as usize));
    // SAFETY: forwarded caller contract.
    unsafe { put(dev_ptr, r) }
}

/// `aclError aclrtFree(void *devPtr);`
///
/// # Safety
/// Always safe (the pointer is only looked up); `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> AclError {
    if dev_ptr.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is null"));
    }
    ret(state::free(dev_ptr.addr() as u64))
}

/// `aclError aclrtMallocHost(void **hostPtr, size_t size);`
///
/// Page-locked host memory: copies to and from it skip the staging buffer pageable memory goes
/// through, and an asynchronous copy from it reads it when the copy runs (keep it unchanged until
/// the stream is done, as with CUDA's pinned memory).
///
/// # Safety
/// `hostPtr` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> AclError {
    let r = state::malloc_host(size);
    // SAFETY: forwarded caller contract.
    unsafe { put(host_ptr, r) }
}

/// `aclError aclrtFreeHost(void *hostPtr);`
///
/// # Safety
/// Always safe (the pointer is only looked up); `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> AclError {
    if host_ptr.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is null"));
    }
    ret(state::free_host(host_ptr.addr()))
}

/// Direction of a copy after resolving `ACL_MEMCPY_DEFAULT`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    H2H,
    H2D,
    D2H,
    D2D,
}

fn direction(dst: *mut c_void, src: *const c_void, kind: AclrtMemcpyKind) -> R<Dir> {
    let dd = state::is_device_addr(dst.addr() as u64);
    let sd = state::is_device_addr(src.addr() as u64);
    let want = match kind {
        ACL_MEMCPY_HOST_TO_HOST => Dir::H2H,
        ACL_MEMCPY_HOST_TO_DEVICE | ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE => Dir::H2D,
        ACL_MEMCPY_DEVICE_TO_HOST => Dir::D2H,
        ACL_MEMCPY_DEVICE_TO_DEVICE | ACL_MEMCPY_INNER_DEVICE_TO_DEVICE | ACL_MEMCPY_INTER_DEVICE_TO_DEVICE => Dir::D2D,
        ACL_MEMCPY_DEFAULT => match (sd, dd) {
            (false, false) => Dir::H2H,
            (false, true) => Dir::H2D,
            (true, false) => Dir::D2H,
            (true, true) => Dir::D2D,
        },
        k => {
            return fail(ACL_ERROR_INVALID_PARAM, format!("invalid aclrtMemcpyKind {k}"));
        }
    };
    let (need_sd, need_dd) = match want {
        Dir::H2H => (false, false),
        Dir::H2D => (false, true),
        Dir::D2H => (true, false),
        Dir::D2D => (true, true),
    };
    if need_sd != sd || need_dd != dd {
        return fail(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("memcpy kind {kind} does not match the addresses (src {:#x}, dst {:#x})", src.addr(), dst.addr()),
        );
    }
    Ok(want)
}

fn check_copy(dst: *mut c_void, dest_max: usize, src: *const c_void, count: usize) -> R<()> {
    if dst.is_null() || src.is_null() {
        return fail(ACL_ERROR_INVALID_PARAM, "memcpy: null pointer");
    }
    if count > dest_max {
        return fail(ACL_ERROR_INVALID_PARAM, format!("memcpy: count {count} exceeds destMax {dest_max}"));
    }
    Ok(())
}

/// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);`
///
/// # Safety
/// Host-side pointers are valid for `count` bytes (reads for `src`,
/// writes for `dst`) and do not overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: AclrtMemcpyKind,
) -> AclError {
    let r = (|| {
        check_copy(dst, dest_max, src, count)?;
        let dir = direction(dst, src, kind)?;
        if count == 0 {
            return Ok(());
        }
        match dir {
            Dir::H2H => {
                // SAFETY: both are host pointers valid for `count` bytes
                // and non-overlapping per the caller's contract.
                unsafe { ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, count) };
                Ok(())
            }
            Dir::H2D => {
                // SAFETY: `src` is a host pointer valid for `count` reads.
                let s = unsafe { std::slice::from_raw_parts(src as *const u8, count) };
                state::write_device_from_host(dst.addr() as u64, s)
            }
            Dir::D2H => {
                // SAFETY: `dst` is a host pointer valid for `count` writes.
                let d = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, count) };
                state::read_device_to_host(src.addr() as u64, d)
            }
            Dir::D2D => state::copy_d2d(dst.addr() as u64, src.addr() as u64, count as u64),
        }
    })();
    ret(r)
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind, aclrtStream stream);`
///
/// Host sources are snapshotted at enqueue time; host destinations are
/// written when the copy executes.
///
/// # Safety
/// As [`aclrtMemcpy`]; a host `dst` stays valid until the stream is
/// synchronized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: AclrtMemcpyKind,
    stream: AclrtStream,
) -> AclError {
    let r = (|| {
        check_copy(dst, dest_max, src, count)?;
        let dir = direction(dst, src, kind)?;
        let st = state::get_stream(handle(stream))?;
        let (d, s) = (dst.addr() as u64, src.addr() as u64);
        let task: state::Job = match dir {
            Dir::H2D if state::is_page_locked(src.addr(), count) => {
                // page-locked memory is read when the copy runs, as a DMA engine reads it
                let from = SendPtr(src as *mut c_void);
                Box::new(move || {
                    let from = from;
                    // SAFETY: page-locked host `src` stays valid and unchanged for `count` reads
                    // until the stream is synchronized (caller contract, as CUDA's pinned memory).
                    let bytes = unsafe { std::slice::from_raw_parts(from.0 as *const u8, count) };
                    state::write_device(d, bytes)
                })
            }
            Dir::H2H | Dir::H2D => {
                // pageable memory is staged at enqueue time (the caller may change it afterwards)
                // SAFETY: `src` is a host pointer valid for `count` reads.
                let bytes = state::stage(unsafe { std::slice::from_raw_parts(src as *const u8, count) });
                if dir == Dir::H2D {
                    Box::new(move || {
                        let r = state::write_device(d, &bytes);
                        state::unstage(bytes);
                        r
                    })
                } else {
                    let out = SendPtr(dst);
                    Box::new(move || {
                        let out = out;
                        // SAFETY: host `dst` valid for `count` writes until
                        // the stream is synchronized (caller contract).
                        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), out.0 as *mut u8, count) };
                        state::unstage(bytes);
                        Ok(())
                    })
                }
            }
            Dir::D2H => {
                let out = SendPtr(dst);
                Box::new(move || {
                    let out = out;
                    // SAFETY: host `dst` valid for `count` writes until the
                    // stream is synchronized (caller contract).
                    let dst = unsafe { std::slice::from_raw_parts_mut(out.0 as *mut u8, count) };
                    state::read_device_to_host(s, dst)
                })
            }
            Dir::D2D => Box::new(move || state::copy_d2d(d, s, count as u64)),
        };
        st.submit(task)
    })();
    ret(r)
}

fn check_memset(dev_ptr: *mut c_void, max_count: usize, count: usize) -> R<()> {
    if dev_ptr.is_null() {
        return fail(ACL_ERROR_INVALID_PARAM, "memset: null pointer");
    }
    if count > max_count {
        return fail(ACL_ERROR_INVALID_PARAM, format!("memset: count {count} exceeds maxCount {max_count}"));
    }
    Ok(())
}

/// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);`
/// Sets `count` bytes to `(uint8_t)value`, on device or host memory.
///
/// # Safety
/// A host `devPtr` is valid for `count` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemset(dev_ptr: *mut c_void, max_count: usize, value: i32, count: usize) -> AclError {
    let r = (|| {
        check_memset(dev_ptr, max_count, count)?;
        let a = dev_ptr.addr() as u64;
        if state::is_device_addr(a) {
            state::fill_device(a, value as u8, count as u64)
        } else {
            // SAFETY: host pointer valid for `count` writes (caller contract).
            unsafe { ptr::write_bytes(dev_ptr as *mut u8, value as u8, count) };
            Ok(())
        }
    })();
    ret(r)
}

/// `aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);`
/// Device memory only.
///
/// # Safety
/// Always safe (device addresses are only looked up); `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: AclrtStream,
) -> AclError {
    let r = (|| {
        check_memset(dev_ptr, max_count, count)?;
        let a = dev_ptr.addr() as u64;
        if !state::is_device_addr(a) {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemsetAsync: not a device address");
        }
        let st = state::get_stream(handle(stream))?;
        st.submit(Box::new(move || state::fill_device(a, value as u8, count as u64)))
    })();
    ret(r)
}

/// `aclError aclrtCreateStream(aclrtStream *stream);`
///
/// # Safety
/// `stream` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut AclrtStream) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(stream, state::create_stream().map(as_handle_ptr)) }
}

/// `aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);`
/// Priority and flags are accepted and ignored.
///
/// # Safety
/// `stream` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(stream: *mut AclrtStream, _priority: u32, _flag: u32) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(stream, state::create_stream().map(as_handle_ptr)) }
}

/// `aclError aclrtDestroyStream(aclrtStream stream);` Waits for queued work.
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStream(stream: AclrtStream) -> AclError {
    ret(state::destroy_stream(handle(stream)))
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream);`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: AclrtStream) -> AclError {
    ret(state::get_stream(handle(stream)).and_then(|s| s.synchronize()))
}

/// `aclError aclrtCreateEvent(aclrtEvent *event);`
///
/// # Safety
/// `event` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut AclrtEvent) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(event, state::create_event().map(as_handle_ptr)) }
}

/// `aclError aclrtDestroyEvent(aclrtEvent event);`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyEvent(event: AclrtEvent) -> AclError {
    ret(state::destroy_event(handle(event)))
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRecordEvent(event: AclrtEvent, stream: AclrtStream) -> AclError {
    ret(state::record_event(handle(event), handle(stream)))
}

/// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);`
/// `*status` is `ACL_EVENT_RECORDED_STATUS_COMPLETE` (1) once the work recorded before the event's
/// latest record has run (and for an event never recorded), else `..._NOT_READY` (0). Never waits.
///
/// # Safety
/// `status` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: AclrtEvent, status: *mut i32) -> AclError {
    let r = state::query_event(handle(event)).map(i32::from);
    // SAFETY: forwarded caller contract.
    unsafe { put(status, r) }
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event);` Returns at once for
/// an event never recorded.
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: AclrtEvent) -> AclError {
    ret(state::synchronize_event(handle(event)))
}

/// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);`
///
/// # Safety
/// `ms` is null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start_event: AclrtEvent,
    end_event: AclrtEvent,
) -> AclError {
    // SAFETY: forwarded caller contract.
    unsafe { put(ms, state::elapsed_ms(handle(start_event), handle(end_event))) }
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);`
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: AclrtStream, event: AclrtEvent) -> AclError {
    ret(state::stream_wait_event(handle(stream), handle(event)))
}

/// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);`
/// For the current device; every memory attribute reports the device's HBM.
///
/// # Safety
/// `free` and `total` are null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemInfo(attr: AclrtMemAttr, free: *mut usize, total: *mut usize) -> AclError {
    if free.is_null() || total.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: null output"));
    }
    match state::mem_info(attr) {
        Ok((f, t)) => {
            // SAFETY: both checked non-null; valid for writes (caller contract).
            unsafe {
                free.write(f as usize);
                total.write(t as usize);
            }
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType, aclrtStream stream);`
/// Runs `fn(userData)` on the stream's worker, in order. Both block types
/// block the stream until the callback returns.
///
/// # Safety
/// `fn` is safe to call on another thread with `userData`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchCallback(
    callback: AclrtCallback,
    user_data: *mut c_void,
    block_type: AclrtCallbackBlockType,
    stream: AclrtStream,
) -> AclError {
    let r = (|| {
        let Some(cb) = callback else {
            return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is null");
        };
        if block_type != ACL_CALLBACK_NO_BLOCK && block_type != ACL_CALLBACK_BLOCK {
            return fail(ACL_ERROR_INVALID_PARAM, format!("invalid block type {block_type}"));
        }
        let st = state::get_stream(handle(stream))?;
        let ud = SendPtr(user_data);
        st.submit(Box::new(move || {
            let ud = ud;
            // SAFETY: the caller guarantees `cb` may run on another thread
            // with `userData`.
            unsafe { cb(ud.0) };
            Ok(())
        }))
    })();
    ret(r)
}

// ------------------------------------------------------------ extensions

/// Opaque kernel context (`xirangSimKernelCtx`); see the crate docs.
pub type XirangSimKernelCtx = KernelCtx;

/// `typedef aclError (*xirangSimKernel)(const xirangSimKernelCtx *ctx, void *userData);`
pub type XirangSimKernel =
    Option<unsafe extern "C" fn(ctx: *const XirangSimKernelCtx, user_data: *mut c_void) -> AclError>;

/// `aclError xirangSimLaunchKernel(xirangSimKernel kernel, void *userData, aclrtStream stream);`
///
/// On success the kernel will be called exactly once; on failure never.
///
/// # Safety
/// `kernel` is safe to call on another thread with `userData`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimLaunchKernel(
    kernel: XirangSimKernel,
    user_data: *mut c_void,
    stream: AclrtStream,
) -> AclError {
    let Some(k) = kernel else {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimLaunchKernel: kernel is null"));
    };
    let r = (|| {
        let st = state::get_stream(handle(stream))?;
        state::check_launch_fault()?;
        // The caller guarantees `k` may run on another thread with `userData` (see `RawKernel`).
        st.submit_kernel(RawKernel { call: k, user_data })
    })();
    ret(r)
}

/// `aclError xirangSimKernelRead(const xirangSimKernelCtx *ctx, const void *devPtr, void *dst, size_t count);`
///
/// # Safety
/// `ctx` is the context passed to the running kernel; `dst` is valid for
/// `count` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimKernelRead(
    ctx: *const XirangSimKernelCtx,
    dev_ptr: *const c_void,
    dst: *mut c_void,
    count: usize,
) -> AclError {
    if ctx.is_null() || dst.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimKernelRead: null pointer"));
    }
    if count == 0 {
        return ACL_SUCCESS;
    }
    // SAFETY: `dst` valid for `count` writes (caller contract).
    let d = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, count) };
    ret(state::read_device(dev_ptr.addr() as u64, d))
}

/// `aclError xirangSimKernelWrite(const xirangSimKernelCtx *ctx, void *devPtr, const void *src, size_t count);`
///
/// # Safety
/// `ctx` is the context passed to the running kernel; `src` is valid for
/// `count` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimKernelWrite(
    ctx: *const XirangSimKernelCtx,
    dev_ptr: *mut c_void,
    src: *const c_void,
    count: usize,
) -> AclError {
    if ctx.is_null() || src.is_null() {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimKernelWrite: null pointer"));
    }
    if count == 0 {
        return ACL_SUCCESS;
    }
    // SAFETY: `src` valid for `count` reads (caller contract).
    let s = unsafe { std::slice::from_raw_parts(src as *const u8, count) };
    ret(state::write_device(dev_ptr.addr() as u64, s))
}

/// `typedef void (*xirangSimMappedFn)(void *userData, void *const *hostPtrs);`
pub type XirangSimMappedFn = Option<unsafe extern "C" fn(user_data: *mut c_void, host_ptrs: *const *mut c_void)>;

/// `aclError xirangSimKernelMap(const xirangSimKernelCtx *ctx, size_t n, const void *const *devPtrs,
/// const size_t *sizes, xirangSimMappedFn fn, void *userData);`
///
/// Inside a kernel only: calls `fn(userData, hostPtrs)` once, where `hostPtrs[i]` is the host
/// address of the `sizes[i]` bytes at `devPtrs[i]`, valid until `fn` returns. The allocations are
/// locked meanwhile (in one global order); `fn` must not use `xirangSimKernelRead/Write` on them.
/// Zero sizes are invalid.
///
/// # Safety
/// `ctx` is the context passed to the running kernel; `devPtrs` and `sizes` are valid for `n`
/// reads; `fn` is safe to call with `userData` and an array of `n` pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimKernelMap(
    ctx: *const XirangSimKernelCtx,
    n: usize,
    dev_ptrs: *const *const c_void,
    sizes: *const usize,
    f: XirangSimMappedFn,
    user_data: *mut c_void,
) -> AclError {
    let Some(f) = f else {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimKernelMap: fn is null"));
    };
    if ctx.is_null() || (n > 0 && (dev_ptrs.is_null() || sizes.is_null())) {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimKernelMap: null pointer"));
    }
    let mut ranges = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n; both arrays are valid for `n` reads (caller contract).
        let (p, len) = unsafe { (*dev_ptrs.add(i), *sizes.add(i)) };
        if len == 0 {
            return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimKernelMap: a zero-sized range"));
        }
        ranges.push((p.addr() as u64, len as u64));
    }
    ret(state::with_mapped(&ranges, |ptrs| {
        // SAFETY: `ptrs` holds `n` host pointers, each valid for its range's size while the
        // allocations stay locked (until `with_mapped` returns); the caller guarantees `f` may be
        // called with `userData`.
        unsafe { f(user_data, ptrs.as_ptr().cast::<*mut c_void>()) }
    }))
}

/// `aclError xirangSimGetPhysicalDeviceIds(int32_t *ids, uint32_t capacity, uint32_t *count);`
/// Writes up to `capacity` ids (enumeration order) and the total to `*count`.
///
/// # Safety
/// `ids` is valid for `capacity` writes (or null with capacity 0); `count`
/// is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimGetPhysicalDeviceIds(ids: *mut i32, capacity: u32, count: *mut u32) -> AclError {
    if count.is_null() || (ids.is_null() && capacity > 0) {
        return ret(fail(ACL_ERROR_INVALID_PARAM, "xirangSimGetPhysicalDeviceIds: null pointer"));
    }
    match state::physical_ids() {
        Ok(v) => {
            for (i, id) in v.iter().take(capacity as usize).enumerate() {
                // SAFETY: i < capacity; `ids` valid for `capacity` writes.
                unsafe { ids.add(i).write(*id) };
            }
            // SAFETY: checked non-null; valid for writes (caller contract).
            unsafe { count.write(v.len() as u32) };
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError xirangSimInjectMallocFailure(uint64_t nth);` (0 clears)
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimInjectMallocFailure(nth: u64) -> AclError {
    crate::inject_malloc_failure(nth);
    ACL_SUCCESS
}

/// `aclError xirangSimInjectLaunchFailure(uint64_t nth);` (0 clears)
///
/// # Safety
/// Always safe; `unsafe` for ABI uniformity.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirangSimInjectLaunchFailure(nth: u64) -> AclError {
    crate::inject_launch_failure(nth);
    ACL_SUCCESS
}
