//! The device driver interface.
//!
//! [`Driver`] is the set of device operations the runtime needs. It is implemented by
//! [`acl::AclDriver`] over the driver table `xirang-scan generate` writes from the vendor's
//! headers (`generated/driver.rs`: the exact `acl_rt.h` function types and `xirang.toml [driver]`'s
//! fallback chains), filled either from the simulator linked into this crate
//! ([`acl::AclDriver::simulator`]) or from a shared library opened at run time with libloading
//! ([`acl::AclDriver::load`]). Either way the runtime goes through the C ABI, exactly as it would
//! on hardware.
//!
//! Device-scoped methods take the *physical* device id; implementations make
//! it current on the calling thread first (ACL's current device is per
//! thread). Streams are identified by [`StreamId`]; `StreamId::DEFAULT` is
//! the device's default (null) stream.

#[allow(unsafe_code)] // the FFI boundary
pub mod acl;
/// The driver table `xirang-scan generate` writes from the vendor headers and `xirang.toml
/// [driver]` (also named `crate::generated::driver`).
#[path = "../../../../generated/driver.rs"]
pub mod table;

use std::any::Any;

use crate::error::{Error, Result};
use crate::shape;

/// An opaque device address. Never dereferenced on the host.
pub type DevicePtr = u64;
/// The address of page-locked host memory from [`Driver::malloc_host`] (host-addressable).
pub type HostPtr = usize;

/// A stream handle (`aclrtStream` as an integer); 0 is the default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StreamId(pub usize);

impl StreamId {
    /// The device's default (null) stream.
    pub const DEFAULT: StreamId = StreamId(0);
}

/// An event handle (`aclrtEvent` as an integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub usize);

/// Free and total device memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    pub free: usize,
    pub total: usize,
}

/// Device memory as seen by a running kernel.
pub trait KernelMemory {
    /// Copy `dst.len()` bytes from device address `src`.
    fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;
    /// Copy `src` to device address `dst`.
    fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// Direct access to device memory for the duration of `f(reads, writes)`: the bytes of each
    /// `(address, length)` range, in order, with no copy. `Ok(false)` (and `f` not called) when
    /// the driver cannot map device memory, or a write range overlaps another range: the kernel
    /// then copies through [`read`](Self::read) / [`write`](Self::write). `f` must not call
    /// `read` / `write` itself.
    fn with_mapped(
        &self,
        reads: &[(DevicePtr, usize)],
        writes: &[(DevicePtr, usize)],
        f: &mut MapBody<'_>,
    ) -> Result<bool> {
        let _ = (reads, writes, f);
        Ok(false)
    }
}

/// The body of [`KernelMemory::with_mapped`]: the read ranges' bytes, then the write ranges'.
pub type MapBody<'a> = dyn FnMut(&[&[u8]], &mut [&mut [u8]]) + 'a;

/// A kernel: runs once on a stream worker, reaches device memory only through
/// [`KernelMemory`]. An `Err` becomes the stream's sticky error.
///
/// `FnMut` rather than `FnOnce` so that running it does not drop what it captured: a driver may
/// hand a finished kernel back to be dropped on a launching thread
/// ([`Driver::collect_finished`]) instead of freeing its captures on the stream's worker.
pub type Kernel = Box<dyn FnMut(&dyn KernelMemory) -> Result<()> + Send + 'static>;

/// A strided view to copy into a contiguous buffer: sizes and strides in elements, from the view's
/// first element, and the element size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StridedView {
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub elem_size: usize,
}

impl StridedView {
    /// Bytes the view spans in its storage, from its first element.
    pub fn span_bytes(&self) -> usize {
        shape::storage_extent(&self.sizes, &self.strides, 0) * self.elem_size
    }

    /// Bytes of the contiguous copy.
    pub fn dense_bytes(&self) -> usize {
        shape::numel(&self.sizes) * self.elem_size
    }
}

/// Results below this many bytes are copied through [`KernelMemory::read`] even when the
/// driver maps device memory (mapping costs more than it saves for a few pages).
const MAP_MIN_BYTES: usize = 1 << 12;

/// The default [`Driver::copy_strided`]: a kernel that walks the view on the device, one inner
/// run at a time, on mapped memory when the driver maps it, else through one read and one write.
pub fn strided_copy_kernel(src: DevicePtr, view: StridedView, dst: DevicePtr, keep: Box<dyn Any + Send>) -> Kernel {
    Box::new(move |mem| {
        // `keep` lives as long as the kernel box
        let _ = &keep;
        let (span, n, es) = (view.span_bytes(), view.dense_bytes(), view.elem_size);
        if n == 0 {
            return Ok(());
        }
        let mut ran = false;
        if n >= MAP_MIN_BYTES {
            let mapped = mem.with_mapped(&[(src, span)], &[(dst, n)], &mut |ins, outs| {
                if let (Some(x), Some(o)) = (ins.first(), outs.get_mut(0)) {
                    shape::gather_strided(x, es, &view.sizes, &view.strides, o);
                    ran = true;
                }
            })?;
            ran &= mapped;
        }
        if !ran {
            let mut x = vec![0u8; span];
            mem.read(src, &mut x)?;
            let mut o = vec![0u8; n];
            shape::gather_strided(&x, es, &view.sizes, &view.strides, &mut o);
            mem.write(dst, &o)?;
        }
        Ok(())
    })
}

/// Device operations the runtime needs from a vendor driver.
pub trait Driver: Send + Sync {
    /// A short name for diagnostics.
    fn name(&self) -> &str;
    /// Initialize the driver (idempotent: a repeated init is not an error).
    fn init(&self) -> Result<()>;
    /// Number of visible devices.
    fn device_count(&self) -> Result<usize>;
    /// Physical device ids in driver enumeration order (may be sparse and
    /// unordered); defaults to `0..device_count`.
    fn physical_device_ids(&self) -> Result<Vec<i32>> {
        Ok((0..self.device_count()? as i32).collect())
    }
    /// Make `device` current on the calling thread.
    fn set_device(&self, device: i32) -> Result<()>;

    fn malloc(&self, device: i32, size: usize) -> Result<DevicePtr>;
    fn free(&self, device: i32, ptr: DevicePtr) -> Result<()>;
    fn memcpy_h2d(&self, device: i32, dst: DevicePtr, src: &[u8]) -> Result<()>;
    fn memcpy_d2h(&self, device: i32, dst: &mut [u8], src: DevicePtr) -> Result<()>;
    fn memcpy_d2d(&self, device: i32, dst: DevicePtr, src: DevicePtr, count: usize) -> Result<()>;
    /// Stream-ordered host-to-device copy. Because `src` is borrowed, the
    /// call returns only when the host buffer may be reused (it synchronizes
    /// the stream unless the driver copies the source at enqueue time).
    fn memcpy_h2d_async(&self, device: i32, dst: DevicePtr, src: &[u8], stream: StreamId) -> Result<()>;
    /// Stream-ordered device-to-host copy; returns when `dst` is filled.
    fn memcpy_d2h_async(&self, device: i32, dst: &mut [u8], src: DevicePtr, stream: StreamId) -> Result<()>;
    /// Stream-ordered device-to-device copy (truly asynchronous).
    fn memcpy_d2d_async(
        &self,
        device: i32,
        dst: DevicePtr,
        src: DevicePtr,
        count: usize,
        stream: StreamId,
    ) -> Result<()>;
    fn memset(&self, device: i32, ptr: DevicePtr, value: u8, count: usize) -> Result<()>;
    fn memset_async(&self, device: i32, ptr: DevicePtr, value: u8, count: usize, stream: StreamId) -> Result<()>;

    fn create_stream(&self, device: i32) -> Result<StreamId>;
    fn destroy_stream(&self, device: i32, stream: StreamId) -> Result<()>;
    fn synchronize_stream(&self, device: i32, stream: StreamId) -> Result<()>;
    fn synchronize_device(&self, device: i32) -> Result<()>;

    fn create_event(&self, device: i32) -> Result<EventId>;
    fn record_event(&self, device: i32, event: EventId, stream: StreamId) -> Result<()>;
    fn synchronize_event(&self, device: i32, event: EventId) -> Result<()>;
    /// Milliseconds between two completed records.
    fn event_elapsed_ms(&self, device: i32, start: EventId, end: EventId) -> Result<f32>;
    fn destroy_event(&self, device: i32, event: EventId) -> Result<()>;
    /// Whether the work recorded before `event` has completed. A driver without a non-blocking
    /// query answers by waiting for the event (then `true`).
    fn query_event(&self, device: i32, event: EventId) -> Result<bool> {
        self.synchronize_event(device, event)?;
        Ok(true)
    }
    fn stream_wait_event(&self, device: i32, stream: StreamId, event: EventId) -> Result<()>;

    fn mem_info(&self, device: i32) -> Result<MemInfo>;
    /// `size` bytes of page-locked (pinned) host memory: the device's copy engine reads and writes
    /// it directly, where pageable memory is staged first. The address of its first byte.
    fn malloc_host(&self, size: usize) -> Result<HostPtr> {
        Err(Error::Unsupported(format!("{}: page-locked host memory ({size} bytes)", self.name())))
    }
    /// Frees what [`Driver::malloc_host`] returned.
    fn free_host(&self, ptr: HostPtr) -> Result<()> {
        Err(Error::Unsupported(format!("{}: freeing page-locked host memory at {ptr:#x}", self.name())))
    }
    /// The driver's most recent error message on this thread, if any.
    fn last_error_message(&self) -> Option<String>;

    /// Enqueue a kernel on `stream`.
    fn launch_kernel(&self, device: i32, stream: StreamId, kernel: Kernel) -> Result<()>;

    /// Enqueue on `stream` the copy of the strided view at `src` into the contiguous buffer at
    /// `dst`: the one device computation the tensor layer needs (`contiguous()`, `clone()`), the
    /// device's operation as candle's `BackendStorage::copy_strided_src` is the backend's. The
    /// default launches [`strided_copy_kernel`]; a driver with a strided-copy engine (CUDA's
    /// `cudaMemcpy3DAsync`, CANN's ViewCopy) overrides it. `keep` (what must outlive the copy)
    /// is dropped once the copy has run.
    fn copy_strided(
        &self,
        device: i32,
        stream: StreamId,
        src: DevicePtr,
        view: StridedView,
        dst: DevicePtr,
        keep: Box<dyn Any + Send>,
    ) -> Result<()> {
        self.launch_kernel(device, stream, strided_copy_kernel(src, view, dst, keep))
    }

    /// Drops, on the calling thread, the kernels the streams have finished since the last call,
    /// with everything they captured (tensors a kernel kept alive return their blocks to the
    /// caching allocator here). A driver whose workers drop kernels themselves keeps the default.
    ///
    /// Memory freed on another thread than the one that allocated it contends for the host
    /// allocator's arena lock on every launch, so the runtime calls this on the launching thread
    /// before each launch and before emptying the cache on out-of-memory. A driver that defers
    /// drops must also call it at the end of its own synchronizing calls (synchronize, event
    /// synchronize, device-to-host copy), so a kernel's captures are gone once those return, as
    /// when the worker dropped them. The caller must hold no allocator lock.
    fn collect_finished(&self) {}
    /// What the runtime calls before each launch: [`Driver::collect_finished`], or nothing until
    /// enough kernels have finished to be worth a pass (a driver that defers drops pays its lock
    /// once per batch instead of once per launch). The synchronizing calls still collect everything.
    fn collect_finished_batch(&self) {
        self.collect_finished()
    }
}
