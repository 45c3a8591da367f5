//! [`Driver`] over the ACL C ABI (`acl_rt.h`), through the driver table `xirang-scan generate`
//! writes from the vendor headers and `xirang.toml [driver]` (`generated/driver.rs`,
//! [`DriverApi`]): every device operation calls the function type generated from its header
//! declaration, so a header drift reaches the code that runs at the next `generate`. With the
//! kernel trampolines below, this is where the runtime crosses the FFI boundary.
//!
//! Optional functions resolve through the fallback chains of `[driver]`, as torch_npu does
//! (`aclrtCreateStreamWithConfig` -> `aclrtCreateStream`). The simulator's own extensions
//! (`xirangSimGetPhysicalDeviceIds`, `xirangSimLaunchKernel`, `xirangSimKernelRead/Write/Map`),
//! which no vendor header declares, are resolved here by the same symbol lookup ([`SimExt`]); they
//! are optional, with `0..count` and "kernels unsupported" as fallbacks.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::table::{self, DriverApi, DriverError};
use super::{DevicePtr, Driver, EventId, HostPtr, Kernel, KernelMemory, MapBody, MemInfo, StreamId};
use crate::error::{Error, Result};
use xirang_acl_sim as sim;

type AclError = i32;
type Vp = *mut c_void;

type KernelFnPtr = Option<unsafe extern "C" fn(ctx: *const c_void, user_data: Vp) -> AclError>;
type MappedFnPtr = Option<unsafe extern "C" fn(user_data: Vp, host_ptrs: *const Vp)>;
type KernelMapFn =
    unsafe extern "C" fn(*const c_void, usize, *const *const c_void, *const usize, MappedFnPtr, Vp) -> AclError;
type PhysicalIdsFn = unsafe extern "C" fn(*mut i32, u32, *mut u32) -> AclError;
type LaunchFn = unsafe extern "C" fn(KernelFnPtr, Vp, Vp) -> AclError;
type KernelReadFn = unsafe extern "C" fn(*const c_void, *const c_void, Vp, usize) -> AclError;
type KernelWriteFn = unsafe extern "C" fn(*const c_void, Vp, *const c_void, usize) -> AclError;

/// The simulator's extensions to ACL (no vendor header declares them), each optional.
#[derive(Clone, Copy, Default)]
pub struct SimExt {
    pub physical_ids: Option<PhysicalIdsFn>,
    pub launch_kernel: Option<LaunchFn>,
    pub kernel_read: Option<KernelReadFn>,
    pub kernel_write: Option<KernelWriteFn>,
    pub kernel_map: Option<KernelMapFn>,
}

impl SimExt {
    /// The extensions `resolve` (symbol name -> address) knows.
    pub fn resolve(resolve: &dyn Fn(&str) -> Option<*const c_void>) -> SimExt {
        let get = |name: &str| resolve(name).filter(|p| !p.is_null());
        SimExt {
            // SAFETY: each symbol is the simulator's extension of that name (xirang-acl-sim's
            // `extern "C"` definitions), of the function type it is stored as up to the pointee
            // type of its kernel-context pointers (`*const c_void` here): the same ABI.
            physical_ids: get("xirangSimGetPhysicalDeviceIds")
                .map(|p| unsafe { std::mem::transmute::<*const c_void, PhysicalIdsFn>(p) }),
            // SAFETY: as above.
            launch_kernel: get("xirangSimLaunchKernel")
                .map(|p| unsafe { std::mem::transmute::<*const c_void, LaunchFn>(p) }),
            // SAFETY: as above.
            kernel_read: get("xirangSimKernelRead")
                .map(|p| unsafe { std::mem::transmute::<*const c_void, KernelReadFn>(p) }),
            // SAFETY: as above.
            kernel_write: get("xirangSimKernelWrite")
                .map(|p| unsafe { std::mem::transmute::<*const c_void, KernelWriteFn>(p) }),
            // SAFETY: as above.
            kernel_map: get("xirangSimKernelMap")
                .map(|p| unsafe { std::mem::transmute::<*const c_void, KernelMapFn>(p) }),
        }
    }
}

/// The address of a function of the simulator linked into this crate (its rlib), by the C name its
/// cdylib exports: the resolver [`AclDriver::simulator`] fills the driver table with.
pub fn linked_symbol(name: &str) -> Option<*const c_void> {
    let p: *const c_void = match name {
        "aclInit" => sim::aclInit as *const c_void,
        "aclFinalize" => sim::aclFinalize as *const c_void,
        "aclGetRecentErrMsg" => sim::aclGetRecentErrMsg as *const c_void,
        "aclrtGetDeviceCount" => sim::aclrtGetDeviceCount as *const c_void,
        "aclrtSetDevice" => sim::aclrtSetDevice as *const c_void,
        "aclrtGetDevice" => sim::aclrtGetDevice as *const c_void,
        "aclrtResetDevice" => sim::aclrtResetDevice as *const c_void,
        "aclrtSynchronizeDevice" => sim::aclrtSynchronizeDevice as *const c_void,
        "aclrtMalloc" => sim::aclrtMalloc as *const c_void,
        "aclrtFree" => sim::aclrtFree as *const c_void,
        "aclrtMemcpy" => sim::aclrtMemcpy as *const c_void,
        "aclrtMemcpyAsync" => sim::aclrtMemcpyAsync as *const c_void,
        "aclrtMemset" => sim::aclrtMemset as *const c_void,
        "aclrtMemsetAsync" => sim::aclrtMemsetAsync as *const c_void,
        "aclrtCreateStream" => sim::aclrtCreateStream as *const c_void,
        "aclrtCreateStreamWithConfig" => sim::aclrtCreateStreamWithConfig as *const c_void,
        "aclrtDestroyStream" => sim::aclrtDestroyStream as *const c_void,
        "aclrtSynchronizeStream" => sim::aclrtSynchronizeStream as *const c_void,
        "aclrtCreateEvent" => sim::aclrtCreateEvent as *const c_void,
        "aclrtRecordEvent" => sim::aclrtRecordEvent as *const c_void,
        "aclrtSynchronizeEvent" => sim::aclrtSynchronizeEvent as *const c_void,
        "aclrtQueryEventStatus" => sim::aclrtQueryEventStatus as *const c_void,
        "aclrtEventElapsedTime" => sim::aclrtEventElapsedTime as *const c_void,
        "aclrtDestroyEvent" => sim::aclrtDestroyEvent as *const c_void,
        "aclrtStreamWaitEvent" => sim::aclrtStreamWaitEvent as *const c_void,
        "aclrtGetMemInfo" => sim::aclrtGetMemInfo as *const c_void,
        "aclrtMallocHost" => sim::aclrtMallocHost as *const c_void,
        "aclrtFreeHost" => sim::aclrtFreeHost as *const c_void,
        "xirangSimGetPhysicalDeviceIds" => sim::xirangSimGetPhysicalDeviceIds as *const c_void,
        "xirangSimLaunchKernel" => sim::xirangSimLaunchKernel as *const c_void,
        "xirangSimKernelRead" => sim::xirangSimKernelRead as *const c_void,
        "xirangSimKernelWrite" => sim::xirangSimKernelWrite as *const c_void,
        "xirangSimKernelMap" => sim::xirangSimKernelMap as *const c_void,
        _ => return None,
    };
    Some(p)
}

/// [`Driver`] implementation over the generated driver table and the simulator's extensions.
pub struct AclDriver {
    api: DriverApi,
    ext: SimExt,
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

fn sp(s: StreamId) -> Vp {
    vp(s.0 as u64)
}

fn ep(e: EventId) -> Vp {
    vp(e.0 as u64)
}

/// A driver table that does not resolve becomes a load error naming what is missing.
fn load_error(what: &str, e: DriverError) -> Error {
    Error::Load(format!("{what}: {e}"))
}

impl AclDriver {
    /// Driver over the linked simulator.
    pub fn simulator() -> AclDriver {
        Self::from_resolver(&linked_symbol, "acl-sim (linked)")
            .expect("the linked simulator exports every required function")
    }

    /// Driver over the functions `resolve` (symbol name -> address) knows, e.g. the linked
    /// simulator's with some left out, to exercise the fallback chains.
    pub fn from_resolver(
        resolve: &dyn Fn(&str) -> Option<*const c_void>,
        name: impl Into<String>,
    ) -> Result<AclDriver> {
        let name = name.into();
        let api = DriverApi::from_resolver(resolve).map_err(|e| load_error(&name, e))?;
        Ok(AclDriver {
            api,
            ext: SimExt::resolve(resolve),
            name,
            finished: finished_list(),
            launches: AtomicUsize::new(0),
            _lib: None,
        })
    }

    /// Driver over a library opened at run time (`libascendcl.so`, or the simulator's
    /// `libxirang_acl_sim.so`).
    pub fn load(path: &std::path::Path) -> Result<AclDriver> {
        // SAFETY: loading a library runs its initializers; the caller names an ACL
        // implementation, whose initializers are trusted.
        let lib =
            unsafe { libloading::Library::new(path) }.map_err(|e| Error::Load(format!("{}: {e}", path.display())))?;
        let resolve = |name: &str| {
            let sym = format!("{name}\0");
            // SAFETY: the symbol is only read as an address here; it is called through the
            // function type of its header declaration (generated) or of the simulator's extension.
            unsafe { lib.get::<*const c_void>(sym.as_bytes()) }.ok().map(|s| *s)
        };
        let name = format!("acl ({})", path.display());
        let mut d = Self::from_resolver(&resolve, name)?;
        d._lib = Some(Arc::new(lib));
        Ok(d)
    }

    /// The symbol a device operation of `[driver]` resolved to (e.g. `stream_create` ->
    /// `aclrtCreateStreamWithConfig`), or `None`.
    pub fn resolved(&self, op: &str) -> Option<&'static str> {
        self.api.resolved(op)
    }

    fn message(&self) -> String {
        self.last_error_message().unwrap_or_default()
    }

    /// A raw call's status: `None` (no candidate of `op` resolved) is unsupported; a non-zero
    /// code is a driver error named by the function that ran.
    fn check(&self, op: &'static str, rc: Option<AclError>) -> Result<()> {
        match rc {
            Some(0) => Ok(()),
            None => Err(Error::Unsupported(format!("{}: no function for `{op}` resolved", self.name))),
            // named by the function that ran (looked up only on failure: this is every call's path)
            Some(code) => {
                Err(Error::Driver { api: self.api.resolved(op).unwrap_or(op), code, message: self.message() })
            }
        }
    }

    /// Make `device` current on this thread if it is not already.
    fn ensure(&self, device: i32) -> Result<()> {
        let mut cur = -1i32;
        // SAFETY: `cur` is a valid out-location (int32_t, as `u32` of the same size).
        let rc = unsafe { self.api.get_device_raw((&raw mut cur).cast::<u32>()) };
        if rc == Some(0) && cur == device {
            return Ok(());
        }
        // SAFETY: a plain value argument.
        self.check("set_device", unsafe { self.api.set_device_raw(device as i64) })
    }

    /// `aclFinalize` (for tests and orderly shutdown).
    pub fn finalize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check("finalize", unsafe { self.api.finalize_raw() })
    }

    /// `aclrtResetDevice`.
    pub fn reset_device(&self, device: i32) -> Result<()> {
        // SAFETY: a plain value argument.
        self.check("reset_device", unsafe { self.api.reset_device_raw(device as i64) })
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
        let rc = unsafe { self.api.init_raw(std::ptr::null()) };
        if rc == Some(sim::ACL_ERROR_REPEAT_INITIALIZE) {
            return Ok(());
        }
        self.check("init", rc)
    }

    fn device_count(&self) -> Result<usize> {
        let mut n = 0u32;
        // SAFETY: a valid out-location.
        self.check("device_count", unsafe { self.api.device_count_raw(&mut n) })?;
        Ok(n as usize)
    }

    fn physical_device_ids(&self) -> Result<Vec<i32>> {
        let n = self.device_count()?;
        let Some(f) = self.ext.physical_ids else {
            return Ok((0..n as i32).collect());
        };
        let mut ids = vec![0i32; n];
        let mut total = 0u32;
        // SAFETY: `ids` has room for `n` elements; `total` is a valid out-pointer.
        let rc = unsafe { f(ids.as_mut_ptr(), n as u32, &mut total) };
        if rc != 0 {
            return Err(Error::Driver { api: "xirangSimGetPhysicalDeviceIds", code: rc, message: self.message() });
        }
        ids.truncate(total as usize);
        Ok(ids)
    }

    fn set_device(&self, device: i32) -> Result<()> {
        self.ensure(device)
    }

    fn malloc(&self, device: i32, size: usize) -> Result<DevicePtr> {
        self.ensure(device)?;
        let mut p: Vp = std::ptr::null_mut();
        // SAFETY: a valid out-location.
        self.check("malloc", unsafe { self.api.malloc_raw(&mut p, size) })?;
        Ok(p.addr() as u64)
    }

    fn free(&self, device: i32, ptr: DevicePtr) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        self.check("free", unsafe { self.api.free_raw(vp(ptr)) })
    }

    fn memcpy_h2d(&self, device: i32, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.ensure(device)?;
        let n = src.len();
        // SAFETY: `src` is valid for `n` reads.
        let rc = unsafe { self.api.memcpy_raw(vp(dst), n, src.as_ptr().cast(), n, table::MEMCPY_HOST_TO_DEVICE) };
        self.check("memcpy", rc)
    }

    fn memcpy_d2h(&self, device: i32, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        self.ensure(device)?;
        let n = dst.len();
        // SAFETY: `dst` is valid for `n` writes.
        let rc = unsafe { self.api.memcpy_raw(dst.as_mut_ptr().cast(), n, vp(src), n, table::MEMCPY_DEVICE_TO_HOST) };
        // A synchronous copy waits for the device: what finished before it is reclaimed here.
        self.collect_finished();
        self.check("memcpy", rc)
    }

    fn memcpy_d2d(&self, device: i32, dst: DevicePtr, src: DevicePtr, count: usize) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        let rc = unsafe { self.api.memcpy_raw(vp(dst), count, vp(src), count, table::MEMCPY_DEVICE_TO_DEVICE) };
        self.check("memcpy", rc)
    }

    fn memcpy_h2d_async(&self, device: i32, dst: DevicePtr, src: &[u8], stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        let n = src.len();
        // SAFETY: `src` is valid for reads until the stream sync below.
        let rc = unsafe {
            self.api.memcpy_async_raw(vp(dst), n, src.as_ptr().cast(), n, table::MEMCPY_HOST_TO_DEVICE, sp(stream))
        };
        self.check("memcpy_async", rc)?;
        // The borrow of `src` ends when we return: wait for the copy.
        self.synchronize_stream(device, stream)
    }

    fn memcpy_d2h_async(&self, device: i32, dst: &mut [u8], src: DevicePtr, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        let n = dst.len();
        // SAFETY: `dst` is valid for writes until the stream sync below.
        let rc = unsafe {
            self.api.memcpy_async_raw(dst.as_mut_ptr().cast(), n, vp(src), n, table::MEMCPY_DEVICE_TO_HOST, sp(stream))
        };
        self.check("memcpy_async", rc)?;
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
        // SAFETY: device addresses and handles are only looked up by the driver.
        let rc = unsafe {
            self.api.memcpy_async_raw(vp(dst), count, vp(src), count, table::MEMCPY_DEVICE_TO_DEVICE, sp(stream))
        };
        self.check("memcpy_async", rc)
    }

    fn memset(&self, device: i32, ptr: DevicePtr, value: u8, count: usize) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses are only looked up by the driver.
        self.check("memset", unsafe { self.api.memset_raw(vp(ptr), count, value as i64, count) })
    }

    fn memset_async(&self, device: i32, ptr: DevicePtr, value: u8, count: usize, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: device addresses and handles are only looked up by the driver.
        let rc = unsafe { self.api.memset_async_raw(vp(ptr), count, value as i64, count, sp(stream)) };
        self.check("memset_async", rc)
    }

    fn create_stream(&self, device: i32) -> Result<StreamId> {
        self.ensure(device)?;
        let mut s: Vp = std::ptr::null_mut();
        // SAFETY: a valid out-location (the chain's first resolved candidate is called).
        self.check("stream_create", unsafe { self.api.stream_create_raw(&mut s) })?;
        Ok(StreamId(s.addr()))
    }

    fn destroy_stream(&self, device: i32, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        self.check("stream_destroy", unsafe { self.api.stream_destroy_raw(sp(stream)) })
    }

    fn synchronize_stream(&self, device: i32, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { self.api.stream_synchronize_raw(sp(stream)) };
        self.collect_finished();
        self.check("stream_synchronize", rc)
    }

    fn synchronize_device(&self, device: i32) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: no arguments.
        let rc = unsafe { self.api.synchronize_device_raw() };
        self.collect_finished();
        self.check("synchronize_device", rc)
    }

    fn create_event(&self, device: i32) -> Result<EventId> {
        self.ensure(device)?;
        let mut e: Vp = std::ptr::null_mut();
        // SAFETY: a valid out-location.
        self.check("event_create", unsafe { self.api.event_create_raw(&mut e) })?;
        Ok(EventId(e.addr()))
    }

    fn record_event(&self, device: i32, event: EventId, stream: StreamId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        self.check("event_record", unsafe { self.api.event_record_raw(ep(event), sp(stream)) })
    }

    fn synchronize_event(&self, device: i32, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        let rc = unsafe { self.api.event_synchronize_raw(ep(event)) };
        self.collect_finished();
        self.check("event_synchronize", rc)
    }

    fn query_event(&self, device: i32, event: EventId) -> Result<bool> {
        self.ensure(device)?;
        let mut status: u32 = 0;
        // SAFETY: handles are only looked up by the driver; a valid out-location.
        match unsafe { self.api.event_query_raw(ep(event), &mut status) } {
            // no query in this driver: wait, then answer
            None => {
                self.synchronize_event(device, event)?;
                Ok(true)
            }
            rc => {
                self.check("event_query", rc)?;
                Ok(status == 1)
            }
        }
    }

    fn event_elapsed_ms(&self, device: i32, start: EventId, end: EventId) -> Result<f32> {
        self.ensure(device)?;
        let mut ms = 0f32;
        // SAFETY: a valid out-location; handles are only looked up.
        self.check("event_elapsed", unsafe { self.api.event_elapsed_raw(&mut ms, ep(start), ep(end)) })?;
        Ok(ms)
    }

    fn destroy_event(&self, device: i32, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        self.check("event_destroy", unsafe { self.api.event_destroy_raw(ep(event)) })
    }

    fn stream_wait_event(&self, device: i32, stream: StreamId, event: EventId) -> Result<()> {
        self.ensure(device)?;
        // SAFETY: handles are only looked up by the driver.
        self.check("stream_wait_event", unsafe { self.api.stream_wait_event_raw(sp(stream), ep(event)) })
    }

    fn mem_info(&self, device: i32) -> Result<MemInfo> {
        self.ensure(device)?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-locations.
        self.check("memory_info", unsafe { self.api.memory_info_raw(&mut free, &mut total) })?;
        Ok(MemInfo { free, total })
    }

    fn malloc_host(&self, size: usize) -> Result<HostPtr> {
        let mut p: Vp = std::ptr::null_mut();
        // SAFETY: a valid out-location.
        self.check("malloc_host", unsafe { self.api.malloc_host_raw(&mut p, size) })?;
        Ok(p.addr())
    }

    fn free_host(&self, ptr: HostPtr) -> Result<()> {
        // SAFETY: the driver only looks the address up among its host allocations.
        self.check("free_host", unsafe { self.api.free_host_raw(std::ptr::without_provenance_mut(ptr)) })
    }

    fn last_error_message(&self) -> Option<String> {
        self.api.error_text()
    }

    fn launch_kernel(&self, device: i32, stream: StreamId, kernel: Kernel) -> Result<()> {
        let (Some(launch), Some(read), Some(write)) =
            (self.ext.launch_kernel, self.ext.kernel_read, self.ext.kernel_write)
        else {
            return Err(Error::Unsupported(format!("{}: no kernel launch entry point", self.name)));
        };
        self.ensure(device)?;
        let ud = Box::into_raw(kernel_box(KernelBox {
            kernel: Some(kernel),
            read,
            write,
            map: self.ext.kernel_map,
            finished: Some(self.finished),
        }));
        // SAFETY: the trampoline consumes `ud` exactly once if the launch
        // succeeds; it may run on the stream's worker thread (Kernel: Send).
        let rc = unsafe { launch(Some(kernel_trampoline), ud.cast(), vp(stream.0 as u64)) };
        if rc != 0 {
            // SAFETY: on failure the kernel is never called; reclaim the box.
            drop(unsafe { Box::from_raw(ud) });
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Driver { api: "xirangSimLaunchKernel", code: rc, message: self.message() })
        }
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
