//! [`Driver`] over the ACL C ABI (`acl_rt.h`), through a table of function
//! pointers. This is the only module of the crate with `unsafe` code: each
//! call crosses the FFI boundary.
//!
//! Optional functions resolve through fallback chains, as torch_npu does:
//! `aclrtCreateStreamWithConfig` -> `aclrtCreateStream`; the simulator's
//! extensions (`xirangSimGetPhysicalDeviceIds`, `xirangSimLaunchKernel`,
//! `xirangSimKernelRead/Write`) are optional, with `0..count` and
//! "kernels unsupported" as fallbacks.

use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{DevicePtr, Driver, EventId, Kernel, KernelMemory, MapBody, MemInfo, StreamId};
use crate::error::{Error, Result};
use xirang_acl_sim as sim;

type AclError = i32;
type Vp = *mut c_void;

type KernelFnPtr = Option<unsafe extern "C" fn(ctx: *const c_void, user_data: Vp) -> AclError>;
type MappedFnPtr = Option<unsafe extern "C" fn(user_data: Vp, host_ptrs: *const Vp)>;
type KernelMapFn =
    unsafe extern "C" fn(*const c_void, usize, *const *const c_void, *const usize, MappedFnPtr, Vp) -> AclError;

/// The ACL entry points the runtime uses, with their exact C signatures.
#[derive(Clone, Copy)]
pub struct AclApi {
    pub acl_init: unsafe extern "C" fn(*const c_char) -> AclError,
    pub acl_finalize: unsafe extern "C" fn() -> AclError,
    pub get_recent_err_msg: unsafe extern "C" fn() -> *const c_char,
    pub get_device_count: unsafe extern "C" fn(*mut u32) -> AclError,
    pub set_device: unsafe extern "C" fn(i32) -> AclError,
    pub get_device: unsafe extern "C" fn(*mut i32) -> AclError,
    pub reset_device: unsafe extern "C" fn(i32) -> AclError,
    pub synchronize_device: unsafe extern "C" fn() -> AclError,
    pub malloc: unsafe extern "C" fn(*mut Vp, usize, i32) -> AclError,
    pub free: unsafe extern "C" fn(Vp) -> AclError,
    pub memcpy: unsafe extern "C" fn(Vp, usize, *const c_void, usize, i32) -> AclError,
    pub memcpy_async: unsafe extern "C" fn(Vp, usize, *const c_void, usize, i32, Vp) -> AclError,
    pub memset: unsafe extern "C" fn(Vp, usize, i32, usize) -> AclError,
    pub memset_async: unsafe extern "C" fn(Vp, usize, i32, usize, Vp) -> AclError,
    pub create_stream: unsafe extern "C" fn(*mut Vp) -> AclError,
    pub create_stream_with_config: Option<unsafe extern "C" fn(*mut Vp, u32, u32) -> AclError>,
    pub destroy_stream: unsafe extern "C" fn(Vp) -> AclError,
    pub synchronize_stream: unsafe extern "C" fn(Vp) -> AclError,
    pub create_event: unsafe extern "C" fn(*mut Vp) -> AclError,
    pub record_event: unsafe extern "C" fn(Vp, Vp) -> AclError,
    pub synchronize_event: unsafe extern "C" fn(Vp) -> AclError,
    pub event_elapsed_time: unsafe extern "C" fn(*mut f32, Vp, Vp) -> AclError,
    pub destroy_event: unsafe extern "C" fn(Vp) -> AclError,
    pub stream_wait_event: unsafe extern "C" fn(Vp, Vp) -> AclError,
    pub get_mem_info: unsafe extern "C" fn(i32, *mut usize, *mut usize) -> AclError,
    pub sim_get_physical_ids: Option<unsafe extern "C" fn(*mut i32, u32, *mut u32) -> AclError>,
    pub sim_launch_kernel: Option<unsafe extern "C" fn(KernelFnPtr, Vp, Vp) -> AclError>,
    pub sim_kernel_read: Option<unsafe extern "C" fn(*const c_void, *const c_void, Vp, usize) -> AclError>,
    pub sim_kernel_write: Option<unsafe extern "C" fn(*const c_void, Vp, *const c_void, usize) -> AclError>,
    pub sim_kernel_map: Option<KernelMapFn>,
}

// Kernel context pointers are passed as `*const c_void`; the simulator's
// functions take `*const KernelCtx`. Both are thin pointers with the same
// ABI, so these adapters only re-type them.
unsafe extern "C" fn sim_launch(k: KernelFnPtr, ud: Vp, stream: Vp) -> AclError {
    // SAFETY: `KernelFnPtr` and `sim::XirangSimKernel` differ only in the
    // pointee type of the first (thin pointer) argument: identical ABI.
    let k: sim::XirangSimKernel = unsafe { std::mem::transmute::<KernelFnPtr, sim::XirangSimKernel>(k) };
    // SAFETY: forwarded caller contract of xirangSimLaunchKernel.
    unsafe { sim::xirangSimLaunchKernel(k, ud, stream) }
}
unsafe extern "C" fn sim_read(ctx: *const c_void, src: *const c_void, dst: Vp, n: usize) -> AclError {
    // SAFETY: forwarded caller contract; `ctx` came from the simulator.
    unsafe { sim::xirangSimKernelRead(ctx.cast(), src, dst, n) }
}
unsafe extern "C" fn sim_write(ctx: *const c_void, dst: Vp, src: *const c_void, n: usize) -> AclError {
    // SAFETY: forwarded caller contract; `ctx` came from the simulator.
    unsafe { sim::xirangSimKernelWrite(ctx.cast(), dst, src, n) }
}
unsafe extern "C" fn sim_map(
    ctx: *const c_void,
    n: usize,
    ptrs: *const *const c_void,
    sizes: *const usize,
    f: MappedFnPtr,
    ud: Vp,
) -> AclError {
    // SAFETY: forwarded caller contract; `ctx` came from the simulator.
    unsafe { sim::xirangSimKernelMap(ctx.cast(), n, ptrs, sizes, f, ud) }
}

impl AclApi {
    /// The simulator linked into this crate (its rlib), through the same C
    /// entry points its cdylib exports.
    pub fn linked_simulator() -> AclApi {
        AclApi {
            acl_init: sim::aclInit,
            acl_finalize: sim::aclFinalize,
            get_recent_err_msg: sim::aclGetRecentErrMsg,
            get_device_count: sim::aclrtGetDeviceCount,
            set_device: sim::aclrtSetDevice,
            get_device: sim::aclrtGetDevice,
            reset_device: sim::aclrtResetDevice,
            synchronize_device: sim::aclrtSynchronizeDevice,
            malloc: sim::aclrtMalloc,
            free: sim::aclrtFree,
            memcpy: sim::aclrtMemcpy,
            memcpy_async: sim::aclrtMemcpyAsync,
            memset: sim::aclrtMemset,
            memset_async: sim::aclrtMemsetAsync,
            create_stream: sim::aclrtCreateStream,
            create_stream_with_config: Some(sim::aclrtCreateStreamWithConfig),
            destroy_stream: sim::aclrtDestroyStream,
            synchronize_stream: sim::aclrtSynchronizeStream,
            create_event: sim::aclrtCreateEvent,
            record_event: sim::aclrtRecordEvent,
            synchronize_event: sim::aclrtSynchronizeEvent,
            event_elapsed_time: sim::aclrtEventElapsedTime,
            destroy_event: sim::aclrtDestroyEvent,
            stream_wait_event: sim::aclrtStreamWaitEvent,
            get_mem_info: sim::aclrtGetMemInfo,
            sim_get_physical_ids: Some(sim::xirangSimGetPhysicalDeviceIds),
            sim_launch_kernel: Some(sim_launch),
            sim_kernel_read: Some(sim_read),
            sim_kernel_write: Some(sim_write),
            sim_kernel_map: Some(sim_map),
        }
    }

    /// Open an ACL implementation (`libascendcl.so`, or the simulator's
    /// `libxirang_acl_sim.so`) at run time. The returned library must outlive
    /// the table; [`AclDriver::load`] keeps them together.
    pub fn load(path: &std::path::Path) -> Result<(libloading::Library, AclApi)> {
        // SAFETY: loading a library runs its initializers; the caller names
        // an ACL implementation, whose initializers are trusted.
        let lib =
            unsafe { libloading::Library::new(path) }.map_err(|e| Error::Load(format!("{}: {e}", path.display())))?;
        macro_rules! req {
            ($name:literal) => {{
                // SAFETY: the symbol is declared in acl_rt.h with the type
                // of the field it is stored in.
                let s = unsafe { lib.get($name) }.map_err(|e| {
                    Error::Load(format!(
                        "{}: missing {}: {e}",
                        path.display(),
                        String::from_utf8_lossy(&$name[..$name.len() - 1])
                    ))
                })?;
                *s
            }};
        }
        macro_rules! opt {
            ($name:literal) => {{
                // SAFETY: as above; absence is allowed.
                unsafe { lib.get($name) }.ok().map(|s| *s)
            }};
        }
        let api = AclApi {
            acl_init: req!(b"aclInit\0"),
            acl_finalize: req!(b"aclFinalize\0"),
            get_recent_err_msg: req!(b"aclGetRecentErrMsg\0"),
            get_device_count: req!(b"aclrtGetDeviceCount\0"),
            set_device: req!(b"aclrtSetDevice\0"),
            get_device: req!(b"aclrtGetDevice\0"),
            reset_device: req!(b"aclrtResetDevice\0"),
            synchronize_device: req!(b"aclrtSynchronizeDevice\0"),
            malloc: req!(b"aclrtMalloc\0"),
            free: req!(b"aclrtFree\0"),
            memcpy: req!(b"aclrtMemcpy\0"),
            memcpy_async: req!(b"aclrtMemcpyAsync\0"),
            memset: req!(b"aclrtMemset\0"),
            memset_async: req!(b"aclrtMemsetAsync\0"),
            create_stream: req!(b"aclrtCreateStream\0"),
            create_stream_with_config: opt!(b"aclrtCreateStreamWithConfig\0"),
            destroy_stream: req!(b"aclrtDestroyStream\0"),
            synchronize_stream: req!(b"aclrtSynchronizeStream\0"),
            create_event: req!(b"aclrtCreateEvent\0"),
            record_event: req!(b"aclrtRecordEvent\0"),
            synchronize_event: req!(b"aclrtSynchronizeEvent\0"),
            event_elapsed_time: req!(b"aclrtEventElapsedTime\0"),
            destroy_event: req!(b"aclrtDestroyEvent\0"),
            stream_wait_event: req!(b"aclrtStreamWaitEvent\0"),
            get_mem_info: req!(b"aclrtGetMemInfo\0"),
            sim_get_physical_ids: opt!(b"xirangSimGetPhysicalDeviceIds\0"),
            sim_launch_kernel: opt!(b"xirangSimLaunchKernel\0"),
            sim_kernel_read: opt!(b"xirangSimKernelRead\0"),
            sim_kernel_write: opt!(b"xirangSimKernelWrite\0"),
            sim_kernel_map: opt!(b"xirangSimKernelMap\0"),
        };
        Ok((lib, api))
    }
}

/// [`Driver`] implementation over an [`AclApi`] table.
pub struct AclDriver {
    api: AclApi,
    name: String,
    /// Where finished kernels wait for the launching side. Leaked, one small list per driver: a
    /// kernel that finishes after its driver was dropped still has a list to go to (and stays
    /// there: drivers live as long as their runtime, usually the program), and neither side counts
    /// references on every launch (a count both threads write bounces between their caches).
    finished: &'static Finished,
    /// Launches so far, for [`Driver::collect_finished_batch`] (written by launching threads only).
    launches: AtomicUsize,
    _lib: Option<Arc<libloading::Library>>,
}

/// A new list of finished kernels (see `AclDriver::finished`).
fn finished_list() -> &'static Finished {
    Box::leak(Box::default())
}

impl Drop for AclDriver {
    /// Drops the kernels that have finished (their list outlives the driver).
    fn drop(&mut self) {
        self.collect_finished();
    }
}

fn vp(p: DevicePtr) -> Vp {
    std::ptr::without_provenance_mut(p as usize)
}

impl AclDriver {
    /// Driver over the linked simulator.
    pub fn simulator() -> AclDriver {
        AclDriver {
            api: AclApi::linked_simulator(),
            name: "acl-sim (linked)".into(),
            finished: finished_list(),
            launches: AtomicUsize::new(0),
            _lib: None,
        }
    }

    /// Driver over an explicit table (e.g. one with optional entries
    /// removed, to exercise the fallback chains).
    pub fn from_api(api: AclApi, name: impl Into<String>) -> AclDriver {
        AclDriver { api, name: name.into(), finished: finished_list(), launches: AtomicUsize::new(0), _lib: None }
    }

    /// Driver over a library opened at run time.
    pub fn load(path: &std::path::Path) -> Result<AclDriver> {
        let (lib, api) = AclApi::load(path)?;
        Ok(AclDriver {
            api,
            name: format!("acl ({})", path.display()),
            finished: finished_list(),
            launches: AtomicUsize::new(0),
            _lib: Some(Arc::new(lib)),
        })
    }

    fn message(&self) -> String {
        self.last_error_message().unwrap_or_default()
    }

    fn check(&self, api: &'static str, code: AclError) -> Result<()> {
        if code == 0 { Ok(()) } else { Err(Error::Driver { api, code, message: self.message() }) }
    }

    /// Make `device` current on this thread if it is not already.
    fn ensure(&self, device: i32) -> Result<()> {
        let mut cur = -1i32;
        // SAFETY: `cur` is a valid out-pointer.
        let rc = unsafe { (self.api.get_device)(&mut cur) };
        if rc == 0 && cur == device {
            return Ok(());
        }
        // SAFETY: plain value argument.
        let rc = unsafe { (self.api.set_device)(device) };
        self.check("aclrtSetDevice", rc)
    }

    /// `aclFinalize` (for tests and orderly shutdown).
    pub fn finalize(&self) -> Result<()> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.api.acl_finalize)() };
        self.check("aclFinalize", rc)
    }

    /// `aclrtResetDevice`.
    pub fn reset_device(&self, device: i32) -> Result<()> {
        // SAFETY: plain value argument.
        let rc = unsafe { (self.api.reset_device)(device) };
        self.check("aclrtResetDevice", rc)
    }
}

struct CtxMemory {
    ctx: *const c_void,
    read: unsafe extern "C" fn(*const c_void, *const c_void, Vp, usize) -> AclError,
    write: unsafe extern "C" fn(*const c_void, Vp, *const c_void, usize) -> AclError,
    map: Option<KernelMapFn>,
}

/// What [`CtxMemory::with_mapped`] hands to the mapping callback.
struct MapCall<'a> {
    reads: &'a [(DevicePtr, usize)],
    writes: &'a [(DevicePtr, usize)],
    f: &'a mut MapBody<'a>,
}

unsafe extern "C" fn map_trampoline(user_data: Vp, host_ptrs: *const Vp) {
    // SAFETY: `user_data` is the `MapCall` on `with_mapped`'s stack, alive for this call.
    let call = unsafe { &mut *user_data.cast::<MapCall<'_>>() };
    let (nr, nw) = (call.reads.len(), call.writes.len());
    // SAFETY: the simulator passes one host pointer per requested range (`nr + nw`).
    let ptrs = unsafe { std::slice::from_raw_parts(host_ptrs, nr + nw) };
    let reads: Vec<&[u8]> = call
        .reads
        .iter()
        .zip(&ptrs[..nr])
        // SAFETY: each pointer is valid for its range's length while the simulator holds the
        // allocation's lock (until this callback returns); read ranges are only read.
        .map(|(&(_, n), &p)| unsafe { std::slice::from_raw_parts(p.cast::<u8>().cast_const(), n) })
        .collect();
    let mut writes: Vec<&mut [u8]> = call
        .writes
        .iter()
        .zip(&ptrs[nr..])
        // SAFETY: as above; `with_mapped` checked that no write range overlaps another range, so
        // each mutable slice is the only reference to its bytes.
        .map(|(&(_, n), &p)| unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
        .collect();
    (call.f)(&reads, &mut writes);
}

/// Whether device ranges `a` and `b` share a byte.
fn overlaps(a: (DevicePtr, usize), b: (DevicePtr, usize)) -> bool {
    a.0 < b.0.saturating_add(b.1 as u64) && b.0 < a.0.saturating_add(a.1 as u64)
}

impl KernelMemory for CtxMemory {
    fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: `ctx` is the live kernel context; `dst` is valid for
        // `dst.len()` writes.
        let rc = unsafe { (self.read)(self.ctx, vp(src), dst.as_mut_ptr().cast(), dst.len()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Driver {
                api: "xirangSimKernelRead",
                code: rc,
                message: format!("read of {} bytes at {src:#x}", dst.len()),
            })
        }
    }
    fn with_mapped(
        &self,
        reads: &[(DevicePtr, usize)],
        writes: &[(DevicePtr, usize)],
        f: &mut MapBody<'_>,
    ) -> Result<bool> {
        let Some(map) = self.map else { return Ok(false) };
        let all: Vec<(DevicePtr, usize)> = reads.iter().chain(writes).copied().collect();
        if all.iter().any(|r| r.1 == 0) {
            return Ok(false);
        }
        for (i, w) in writes.iter().enumerate() {
            if all.iter().enumerate().any(|(j, r)| j != reads.len() + i && overlaps(*w, *r)) {
                return Ok(false);
            }
        }
        let ptrs: Vec<*const c_void> = all.iter().map(|r| vp(r.0).cast_const()).collect();
        let sizes: Vec<usize> = all.iter().map(|r| r.1).collect();
        let mut call = MapCall { reads, writes, f };
        // SAFETY: `ctx` is the live kernel context; `ptrs` and `sizes` hold `all.len()` entries;
        // the trampoline gets `call`, which outlives the (synchronous) mapping call.
        let rc = unsafe {
            map(
                self.ctx,
                all.len(),
                ptrs.as_ptr(),
                sizes.as_ptr(),
                Some(map_trampoline),
                (&raw mut call).cast::<c_void>(),
            )
        };
        if rc == 0 {
            Ok(true)
        } else {
            Err(Error::Driver { api: "xirangSimKernelMap", code: rc, message: format!("mapping {} ranges", all.len()) })
        }
    }
    fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: `ctx` is the live kernel context; `src` is valid for
        // `src.len()` reads.
        let rc = unsafe { (self.write)(self.ctx, vp(dst), src.as_ptr().cast(), src.len()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Driver {
                api: "xirangSimKernelWrite",
                code: rc,
                message: format!("write of {} bytes at {dst:#x}", src.len()),
            })
        }
    }
}

struct KernelBox {
    /// `None` once a launching thread has dropped the finished kernel and kept the box for the
    /// next launch ([`kernel_box`]).
    kernel: Option<Kernel>,
    read: unsafe extern "C" fn(*const c_void, *const c_void, Vp, usize) -> AclError,
    write: unsafe extern "C" fn(*const c_void, Vp, *const c_void, usize) -> AclError,
    map: Option<KernelMapFn>,
    /// Where the worker leaves the box once the kernel has run.
    finished: Option<&'static Finished>,
}

/// Boxes a launching thread keeps for its next launches (at most this many).
const FREE_BOXES_MAX: usize = 64;

thread_local! {
    /// Boxes of kernels this thread collected ([`Driver::collect_finished`]), emptied, for
    /// [`kernel_box`]: a launch in a loop reuses them instead of allocating one per kernel.
    #[allow(clippy::vec_box)]
    static FREE_BOXES: std::cell::RefCell<Vec<Box<KernelBox>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `kb` in a box this thread kept from a finished kernel, else in a new one.
fn kernel_box(kb: KernelBox) -> Box<KernelBox> {
    match FREE_BOXES.try_with(|f| f.borrow_mut().pop()) {
        Ok(Some(mut b)) => {
            *b = kb;
            b
        }
        _ => Box::new(kb),
    }
}

/// Launches between two passes over the finished kernels ([`Driver::collect_finished_batch`]): a
/// tiny operator's launch then takes the list's lock once per this many kernels. What finished
/// kernels keep alive (only tensors of other streams: see `kernels::launch`) waits as long, at most.
const COLLECT_BATCH: usize = 16;

/// Kernels that have run, waiting to be dropped on a launching thread
/// ([`Driver::collect_finished`]).
#[derive(Default)]
struct Finished {
    /// The boxes themselves, not their contents: each is the allocation `launch_kernel` made,
    /// and moving the contents out would free it on the worker, which this list exists to avoid.
    #[allow(clippy::vec_box)]
    boxes: Mutex<Vec<Box<KernelBox>>>,
    count: AtomicUsize,
}

unsafe extern "C" fn kernel_trampoline(ctx: *const c_void, user_data: Vp) -> AclError {
    // SAFETY: `user_data` is the `Box<KernelBox>` leaked by `launch_kernel`;
    // the simulator calls each launched kernel exactly once.
    let mut kb = unsafe { Box::from_raw(user_data.cast::<KernelBox>()) };
    let mem = CtxMemory { ctx, read: kb.read, write: kb.write, map: kb.map };
    // A panic must not unwind through this `extern "C"` frame (that aborts the process): a kernel
    // that panics fails like one that returns an error, with the stream's sticky error.
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match kb.kernel.as_mut() {
        Some(k) => k(&mem),
        None => Err(Error::Unsupported("a launched kernel box without its kernel".into())),
    })) {
        Ok(Ok(())) => 0,
        Ok(Err(Error::Driver { code, .. })) => code,
        Ok(Err(_)) | Err(_) => sim::ACL_ERROR_RT_AICORE_EXCEPTION,
    };
    // Hand the box (and the tensors its kernel kept alive) back to the launching side instead of
    // freeing it on this worker thread.
    if let Some(f) = kb.finished {
        let mut g = lock(&f.boxes);
        g.push(kb);
        f.count.store(g.len(), Ordering::Release);
    }
    code
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Driver for AclDriver {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&self) -> Result<()> {
        // SAFETY: a null config path is allowed by aclInit.
        let rc = unsafe { (self.api.acl_init)(std::ptr::null()) };
        if rc == sim::ACL_ERROR_REPEAT_INITIALIZE {
            return Ok(());
        }
        self.check("aclInit", rc)
    }

    fn device_count(&self) -> Result<usize> {
        let mut n = 0u32;
        // SAFETY: valid out-pointer.
        let rc = unsafe { (self.api.get_device_count)(&mut n) };
        self.check("aclrtGetDeviceCount", rc)?;
        Ok(n as usize)
    }

    fn physical_device_ids(&self) -> Result<Vec<i32>> {
        let n = self.device_count()?;
        let Some(f) = self.api.sim_get_physical_ids else {
            return Ok((0..n as i32).collect());
        };
        let mut ids = vec![0i32; n];
        let mut total = 0u32;
        // SAFETY: `ids` has room for `n` elements; `total` is a valid out-pointer.
        let rc = unsafe { f(ids.as_mut_ptr(), n as u32, &mut total) };
        self.check("xirangSimGetPhysicalDeviceIds", rc)?;
        ids.truncate(total as usize);
        Ok(ids)
    }

    fn set_device(&self, device: i32) -> Result<()> {
        self.ensure(device)
    }

    fn malloc(&self, device: i32, size: usize) -> Result<DevicePtr> {
        self.ensure(device)?;
        let mut p: Vp = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = unsafe { (self.api.malloc)(&mut p, size, sim::ACL_MEM_MALLOC_HUGE_FIRST) };
        self.check("aclrtMalloc", rc)?;
        Ok(p.addr() as u64)
    }

    fn free(&self, device: i32, ptr: DevicePtr) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe { (self.api.free)(vp(ptr)) };
        self.check("aclrtFree", rc)
    }

    fn memcpy_h2d(&self, device: i32, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: `src` is valid for `src.len()` reads.
        let rc = unsafe {
            (self.api.memcpy)(vp(dst), src.len(), src.as_ptr().cast(), src.len(), sim::ACL_MEMCPY_HOST_TO_DEVICE)
        };
        self.check("aclrtMemcpy", rc)
    }

    fn memcpy_d2h(&self, device: i32, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: `dst` is valid for `dst.len()` writes.
        let rc = unsafe {
            (self.api.memcpy)(dst.as_mut_ptr().cast(), dst.len(), vp(src), dst.len(), sim::ACL_MEMCPY_DEVICE_TO_HOST)
        };
        // A synchronous copy waits for the device: what finished before it is reclaimed here.
        self.collect_finished();
        self.check("aclrtMemcpy", rc)
    }

    fn memcpy_d2d(&self, device: i32, dst: DevicePtr, src: DevicePtr, count: usize) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe { (self.api.memcpy)(vp(dst), count, vp(src), count, sim::ACL_MEMCPY_DEVICE_TO_DEVICE) };
        self.check("aclrtMemcpy", rc)
    }

    fn memcpy_h2d_async(&self, device: i32, dst: DevicePtr, src: &[u8], stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: `src` is valid for reads until the stream sync below.
        let rc = unsafe {
            (self.api.memcpy_async)(
                vp(dst),
                src.len(),
                src.as_ptr().cast(),
                src.len(),
                sim::ACL_MEMCPY_HOST_TO_DEVICE,
                vp(stream.0 as u64),
            )
        };
        self.check("aclrtMemcpyAsync", rc)?;
        // The borrow of `src` ends when we return: wait for the copy.
        self.synchronize_stream(device, stream)
    }

    fn memcpy_d2h_async(&self, device: i32, dst: &mut [u8], src: DevicePtr, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: `dst` is valid for writes until the stream sync below.
        let rc = unsafe {
            (self.api.memcpy_async)(
                dst.as_mut_ptr().cast(),
                dst.len(),
                vp(src),
                dst.len(),
                sim::ACL_MEMCPY_DEVICE_TO_HOST,
                vp(stream.0 as u64),
            )
        };
        self.check("aclrtMemcpyAsync", rc)?;
        self.synchronize_stream(device, stream)
    }

    fn memcpy_d2d_async(
        &self,
        device: i32,
        dst: DevicePtr,
        src: DevicePtr,
        count: usize,
        stream: StreamId,
    ) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe {
            (self.api.memcpy_async)(
                vp(dst),
                count,
                vp(src),
                count,
                sim::ACL_MEMCPY_DEVICE_TO_DEVICE,
                vp(stream.0 as u64),
            )
        };
        self.check("aclrtMemcpyAsync", rc)
    }

    fn memset(&self, device: i32, ptr: DevicePtr, value: u8, count: usize) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe { (self.api.memset)(vp(ptr), count, value as i32, count) };
        self.check("aclrtMemset", rc)
    }

    fn memset_async(&self, device: i32, ptr: DevicePtr, value: u8, count: usize, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe { (self.api.memset_async)(vp(ptr), count, value as i32, count, vp(stream.0 as u64)) };
        self.check("aclrtMemsetAsync", rc)
    }

    fn create_stream(&self, device: i32) -> Result<StreamId> {
        self.ensure(device)?;
        let mut s: Vp = std::ptr::null_mut();
        let rc = match self.api.create_stream_with_config {
            // SAFETY: valid out-pointer.
            Some(f) => unsafe { f(&mut s, 0, 0) },
            // SAFETY: valid out-pointer.
            None => unsafe { (self.api.create_stream)(&mut s) },
        };
        self.check("aclrtCreateStream", rc)?;
        Ok(StreamId(s.addr()))
    }

    fn destroy_stream(&self, device: i32, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.destroy_stream)(vp(stream.0 as u64)) };
        self.check("aclrtDestroyStream", rc)
    }

    fn synchronize_stream(&self, device: i32, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.synchronize_stream)(vp(stream.0 as u64)) };
        self.collect_finished();
        self.check("aclrtSynchronizeStream", rc)
    }

    fn synchronize_device(&self, device: i32) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: no arguments.
        let rc = unsafe { (self.api.synchronize_device)() };
        self.collect_finished();
        self.check("aclrtSynchronizeDevice", rc)
    }

    fn create_event(&self, device: i32) -> Result<EventId> {
        self.ensure(device)?;
        let mut e: Vp = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = unsafe { (self.api.create_event)(&mut e) };
        self.check("aclrtCreateEvent", rc)?;
        Ok(EventId(e.addr()))
    }

    fn record_event(&self, device: i32, event: EventId, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.record_event)(vp(event.0 as u64), vp(stream.0 as u64)) };
        self.check("aclrtRecordEvent", rc)
    }

    fn synchronize_event(&self, device: i32, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.synchronize_event)(vp(event.0 as u64)) };
        self.collect_finished();
        self.check("aclrtSynchronizeEvent", rc)
    }

    fn event_elapsed_ms(&self, device: i32, start: EventId, end: EventId) -> Result<f32> {
        self.ensure(device)?;
        let mut ms = 0f32;
        // SAFETY: valid out-pointer; handles are only looked up.
        let rc = unsafe { (self.api.event_elapsed_time)(&mut ms, vp(start.0 as u64), vp(end.0 as u64)) };
        self.check("aclrtEventElapsedTime", rc)?;
        Ok(ms)
    }

    fn destroy_event(&self, device: i32, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.destroy_event)(vp(event.0 as u64)) };
        self.check("aclrtDestroyEvent", rc)
    }

    fn stream_wait_event(&self, device: i32, stream: StreamId, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { (self.api.stream_wait_event)(vp(stream.0 as u64), vp(event.0 as u64)) };
        self.check("aclrtStreamWaitEvent", rc)
    }

    fn mem_info(&self, device: i32) -> Result<MemInfo> {
        self.ensure(device)?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        let rc = unsafe { (self.api.get_mem_info)(sim::ACL_HBM_MEM, &mut free, &mut total) };
        self.check("aclrtGetMemInfo", rc)?;
        Ok(MemInfo { free, total })
    }

    fn last_error_message(&self) -> Option<String> {
        // SAFETY: no arguments; returns null or a NUL-terminated string valid
        // until the next failing call on this thread, copied out at once.
        let p = unsafe { (self.api.get_recent_err_msg)() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated (see above).
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    fn launch_kernel(&self, device: i32, stream: StreamId, kernel: Kernel) -> Result<()> {
        let (Some(launch), Some(read), Some(write)) =
            (self.api.sim_launch_kernel, self.api.sim_kernel_read, self.api.sim_kernel_write)
        else {
            return Err(Error::Unsupported(format!("{}: no kernel launch entry point", self.name)));
        };
        self.ensure(device)?;
        let ud = Box::into_raw(kernel_box(KernelBox {
            kernel: Some(kernel),
            read,
            write,
            map: self.api.sim_kernel_map,
            finished: Some(self.finished),
        }));
        // SAFETY: the trampoline consumes `ud` exactly once if the launch
        // succeeds; it may run on the stream's worker thread (Kernel: Send).
        let rc = unsafe { launch(Some(kernel_trampoline), ud.cast(), vp(stream.0 as u64)) };
        if rc != 0 {
            // SAFETY: on failure the kernel is never called; reclaim the box.
            drop(unsafe { Box::from_raw(ud) });
        }
        self.check("xirangSimLaunchKernel", rc)
    }

    fn collect_finished_batch(&self) {
        // counted on the launching side: reading `count`, which the worker writes after every
        // kernel, would cost a cache miss per launch
        if self.launches.fetch_add(1, Ordering::Relaxed) % COLLECT_BATCH == COLLECT_BATCH - 1 {
            self.collect_finished();
        }
    }

    fn collect_finished(&self) {
        if self.finished.count.load(Ordering::Acquire) == 0 {
            return;
        }
        // Swapped out under the lock for an empty list with capacity (this thread's spare), so
        // neither side allocates in the steady state; the kernels are dropped after the lock.
        thread_local! {
            // the boxes are the allocations `launch_kernel` made (see `Finished`)
            #[allow(clippy::vec_box)]
            static SPARE: std::cell::Cell<Vec<Box<KernelBox>>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let mut done = SPARE.take();
        {
            let mut g = lock(&self.finished.boxes);
            self.finished.count.store(0, Ordering::Release);
            std::mem::swap(&mut *g, &mut done);
        }
        // the kernels (and what they kept alive) are dropped here; the boxes are kept for the
        // next launches, up to `FREE_BOXES_MAX`
        // (dropped before the free list is borrowed: a drop may free memory, which may launch)
        for b in done.iter_mut() {
            b.kernel = None;
        }
        let _ = FREE_BOXES.try_with(|f| {
            let mut free = f.borrow_mut();
            let room = FREE_BOXES_MAX.saturating_sub(free.len());
            free.extend(done.drain(..).take(room));
        });
        done.clear();
        SPARE.set(done);
    }
}

/// Plain element types that kernels move between device memory and typed
/// host slices without a byte-by-byte conversion (device memory is
/// little-endian, like the host this runtime builds for).
pub trait Plain: Copy + Default + Send + Sync + 'static {}
impl Plain for u8 {}
impl Plain for i8 {}
impl Plain for u16 {}
impl Plain for i16 {}
impl Plain for i32 {}
impl Plain for i64 {}
impl Plain for f32 {}
impl Plain for f64 {}

#[cfg(not(target_endian = "little"))]
compile_error!("the xirang runtime's typed kernel buffers assume a little-endian host");

/// `bytes` as a slice of `T`, when it is aligned for `T` and a whole number of elements (a mapped
/// device range: [`KernelMemory::with_mapped`]).
pub fn typed<T: Plain>(bytes: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if !bytes.as_ptr().addr().is_multiple_of(std::mem::align_of::<T>()) || !bytes.len().is_multiple_of(size) {
        return None;
    }
    // SAFETY: aligned for `T` (checked), `len / size` whole elements inside `bytes` (checked);
    // `Plain` types accept every bit pattern; the borrow is carried over.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

/// [`typed`] for a mutable slice.
pub fn typed_mut<T: Plain>(bytes: &mut [u8]) -> Option<&mut [T]> {
    let size = std::mem::size_of::<T>();
    if !bytes.as_ptr().addr().is_multiple_of(std::mem::align_of::<T>()) || !bytes.len().is_multiple_of(size) {
        return None;
    }
    // SAFETY: as in `typed`; the unique borrow of `bytes` becomes the unique borrow of the result.
    Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size) })
}

/// The bytes of a typed slice (for [`KernelMemory::read`]).
pub fn bytes_of_mut<T: Plain>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: `Plain` types are primitive integers/floats: no padding, every
    // byte pattern is a valid value, alignment of u8 is 1, and the length is
    // exactly the slice's size in bytes. The borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a typed slice (for [`KernelMemory::write`]).
pub fn bytes_of<T: Plain>(s: &[T]) -> &[u8] {
    // SAFETY: as in `bytes_of_mut`; read-only.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}
