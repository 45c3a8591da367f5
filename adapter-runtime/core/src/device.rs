//! Devices, the logical-to-physical device map, and per-device state
//! (caching allocator, current stream).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

use crate::driver::{DevicePtr, Driver, StreamId};
use crate::error::{Error, Result};

/// Where a tensor lives. `Npu(i)` is a *logical* index: devices appear as
/// `0..n` in ascending order of physical id, whatever order the driver
/// enumerates them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Cpu,
    Npu(usize),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Npu(i) => write!(f, "npu:{i}"),
        }
    }
}

/// Logical index <-> physical id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMap {
    physical: Vec<i32>,
}

impl DeviceMap {
    /// Build from the driver's enumeration (any order); rejects duplicates.
    pub fn new(mut physical: Vec<i32>) -> Result<DeviceMap> {
        physical.sort_unstable();
        if physical.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!("driver reported duplicate device ids: {physical:?}")));
        }
        Ok(DeviceMap { physical })
    }
    pub fn len(&self) -> usize {
        self.physical.len()
    }
    pub fn is_empty(&self) -> bool {
        self.physical.is_empty()
    }
    /// Physical id of logical device `index`.
    pub fn physical(&self, index: usize) -> Result<i32> {
        self.physical.get(index).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("invalid device index {index}: {} device(s) available", self.physical.len()))
        })
    }
    /// Logical index of physical id `id`.
    pub fn logical(&self, id: i32) -> Option<usize> {
        self.physical.binary_search(&id).ok()
    }
    /// Physical ids in logical order.
    pub fn physical_ids(&self) -> &[i32] {
        &self.physical
    }
}

/// Caching allocator statistics (like `torch.npu.memory_stats()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes in blocks handed out to tensors now (block sizes, rounded).
    pub allocated_bytes: usize,
    /// Bytes obtained from the driver now (allocated + cached).
    pub reserved_bytes: usize,
    pub peak_allocated_bytes: usize,
    pub peak_reserved_bytes: usize,
    /// Allocation requests served (from cache or driver).
    pub alloc_count: u64,
    /// Blocks returned to the allocator.
    pub free_count: u64,
    /// Requests served from the cache.
    pub cache_hits: u64,
    /// Calls to the driver's malloc that succeeded / blocks given back.
    pub device_mallocs: u64,
    pub device_frees: u64,
    /// Times the cache was emptied to retry after a driver OOM.
    pub oom_retries: u64,
    /// Requests that failed with out-of-memory after the retry.
    pub ooms: u64,
}

/// Block size granularity.
pub const BLOCK_ROUND: usize = 512;

#[derive(Default)]
struct AllocState {
    /// Cached free blocks: (stream, size, ptr).
    cache: BTreeSet<(StreamId, usize, DevicePtr)>,
    stats: AllocatorStats,
}

/// One logical device: driver, physical id, caching allocator, current stream.
pub struct DeviceContext {
    pub driver: Arc<dyn Driver>,
    index: usize,
    physical: i32,
    alloc: Mutex<AllocState>,
    /// Current stream per thread (PyTorch's current stream is thread-local); threads on the
    /// default stream have no entry.
    stream: Mutex<HashMap<ThreadId, StreamId>>,
    /// Entries in `stream`: while no thread has set a stream, [`Self::current_stream`] answers
    /// without the lock (it runs on every allocation and launch).
    streams_set: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A device block owned by a storage; returned to the cache on drop.
pub struct Block {
    pub ctx: Arc<DeviceContext>,
    pub ptr: DevicePtr,
    pub size: usize,
    pub stream: StreamId,
}

impl Drop for Block {
    fn drop(&mut self) {
        if self.size > 0 {
            self.ctx.release(self.ptr, self.size, self.stream);
        }
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({:#x}, {} bytes, npu:{})", self.ptr, self.size, self.ctx.index)
    }
}

impl Drop for DeviceContext {
    /// Blocks hold the context, so this runs once every block is back in
    /// the cache: give them all to the driver.
    fn drop(&mut self) {
        let _ = self.empty_cache();
    }
}

impl DeviceContext {
    pub fn new(driver: Arc<dyn Driver>, index: usize, physical: i32) -> DeviceContext {
        DeviceContext {
            driver,
            index,
            physical,
            alloc: Mutex::default(),
            stream: Mutex::default(),
            streams_set: AtomicUsize::new(0),
        }
    }
    pub fn index(&self) -> usize {
        self.index
    }
    pub fn physical_id(&self) -> i32 {
        self.physical
    }
    pub fn device(&self) -> Device {
        Device::Npu(self.index)
    }
    pub fn driver(&self) -> &dyn Driver {
        &*self.driver
    }
    /// The stream new work on this device goes to, for the calling thread
    /// (the default stream unless set).
    pub fn current_stream(&self) -> StreamId {
        // A thread that set a stream sees its own store (program order); other threads' entries
        // do not concern it.
        if self.streams_set.load(Ordering::Acquire) == 0 {
            return StreamId::DEFAULT;
        }
        let id = std::thread::current().id();
        lock(&self.stream).get(&id).copied().unwrap_or_default()
    }
    /// Set the calling thread's current stream on this device.
    pub fn set_current_stream(&self, s: StreamId) {
        let id = std::thread::current().id();
        let mut g = lock(&self.stream);
        if s == StreamId::DEFAULT {
            g.remove(&id);
        } else {
            g.insert(id, s);
        }
        self.streams_set.store(g.len(), Ordering::Release);
    }
    /// Waits for every stream of this device. The driver drops the finished kernels as it
    /// returns ([`Driver::collect_finished`]), so tensors they alone kept alive are back in the
    /// cache after this.
    ///
    /// [`Driver::collect_finished`]: crate::driver::Driver::collect_finished
    pub fn synchronize(&self) -> Result<()> {
        self.driver.synchronize_device(self.physical)
    }
    pub fn stats(&self) -> AllocatorStats {
        lock(&self.alloc).stats
    }
    /// Zeroes the event counts (allocations, frees, cache hits, driver calls, OOM retries and
    /// failures); the byte gauges and their peaks stay (`torch.cuda.reset_accumulated_memory_stats`).
    pub fn reset_accumulated_stats(&self) {
        let mut g = lock(&self.alloc);
        let s = &mut g.stats;
        s.alloc_count = 0;
        s.free_count = 0;
        s.cache_hits = 0;
        s.device_mallocs = 0;
        s.device_frees = 0;
        s.oom_retries = 0;
        s.ooms = 0;
    }
    /// The driver's free and total bytes of this device (`torch.cuda.mem_get_info`).
    pub fn mem_info(&self) -> Result<crate::driver::MemInfo> {
        self.driver.mem_info(self.physical)
    }
    pub fn reset_peak_stats(&self) {
        let mut g = lock(&self.alloc);
        g.stats.peak_allocated_bytes = g.stats.allocated_bytes;
        g.stats.peak_reserved_bytes = g.stats.reserved_bytes;
    }

    /// Allocate `size` bytes for use on the current stream: a cached block of this stream when one
    /// fits, else the driver's. When the driver is out of memory, waits for the device's queued work
    /// (blocks that only finished kernels held come back), empties the cache and retries once.
    pub fn allocate(self: &Arc<Self>, size: usize) -> Result<Block> {
        let stream = self.current_stream();
        if size == 0 {
            return Ok(Block { ctx: self.clone(), ptr: 0, size: 0, stream });
        }
        let rounded = size.div_ceil(BLOCK_ROUND) * BLOCK_ROUND;
        if let Some(b) = self.cached(stream, rounded) {
            return Ok(b);
        }
        // A miss: blocks that finished kernels still hold come back once the driver hands those
        // kernels back. Collect them (the launch path does so too, but only after this
        // allocation) and look again before asking the driver for fresh memory.
        self.driver.collect_finished();
        if let Some(b) = self.cached(stream, rounded) {
            return Ok(b);
        }
        self.allocate_fresh(size, rounded, stream)
    }

    /// A cached block of `stream` for a request of `rounded` bytes (best fit, wasting at most 2x).
    fn cached(self: &Arc<Self>, stream: StreamId, rounded: usize) -> Option<Block> {
        {
            let mut g = lock(&self.alloc);
            // Best fit among cached blocks of this stream, wasting at most 2x.
            let hit = g.cache.range((stream, rounded, 0)..(stream, rounded.saturating_mul(2), 0)).next().copied();
            if let Some(key) = hit {
                g.cache.remove(&key);
                let s = &mut g.stats;
                s.cache_hits += 1;
                s.alloc_count += 1;
                s.allocated_bytes += key.1;
                s.peak_allocated_bytes = s.peak_allocated_bytes.max(s.allocated_bytes);
                crate::observe::on_alloc(key.1);
                return Some(Block { ctx: self.clone(), ptr: key.2, size: key.1, stream });
            }
        }
        None
    }

    /// A new block from the driver (on driver OOM: wait for the device, empty the cache, retry).
    fn allocate_fresh(self: &Arc<Self>, size: usize, rounded: usize, stream: StreamId) -> Result<Block> {
        let ptr = match self.driver.malloc(self.physical, rounded) {
            Ok(p) => p,
            Err(e) if e.is_driver_oom() => {
                lock(&self.alloc).stats.oom_retries += 1;
                // Tensors that only queued kernels still hold come back once those kernels have
                // run: wait for the device (the driver then drops the finished kernels and their
                // blocks return to the cache), then give the cache back to the driver. Without the
                // wait, a loop that enqueues large results and never synchronizes runs out of
                // memory while most of it is garbage. An error of earlier queued work surfaces
                // here, as it would at any synchronizing call.
                self.synchronize()?;
                self.empty_cache()?;
                match self.driver.malloc(self.physical, rounded) {
                    Ok(p) => p,
                    Err(e) if e.is_driver_oom() => {
                        let mut g = lock(&self.alloc);
                        g.stats.ooms += 1;
                        return Err(Error::OutOfMemory {
                            device: self.index,
                            requested: size,
                            allocated: g.stats.allocated_bytes,
                            reserved: g.stats.reserved_bytes,
                            message: e.to_string(),
                        });
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let mut g = lock(&self.alloc);
        let s = &mut g.stats;
        s.device_mallocs += 1;
        s.alloc_count += 1;
        s.allocated_bytes += rounded;
        s.reserved_bytes += rounded;
        s.peak_allocated_bytes = s.peak_allocated_bytes.max(s.allocated_bytes);
        s.peak_reserved_bytes = s.peak_reserved_bytes.max(s.reserved_bytes);
        drop(g);
        crate::observe::on_alloc(rounded);
        Ok(Block { ctx: self.clone(), ptr, size: rounded, stream })
    }

    fn release(&self, ptr: DevicePtr, size: usize, stream: StreamId) {
        let mut g = lock(&self.alloc);
        g.stats.allocated_bytes -= size;
        g.stats.free_count += 1;
        g.cache.insert((stream, size, ptr));
    }

    /// Give every cached block back to the driver (`torch.npu.empty_cache`).
    pub fn empty_cache(&self) -> Result<()> {
        let blocks = std::mem::take(&mut lock(&self.alloc).cache);
        let mut first = Ok(());
        for (_, size, ptr) in blocks {
            let r = self.driver.free(self.physical, ptr);
            let mut g = lock(&self.alloc);
            match r {
                Ok(()) => {
                    g.stats.reserved_bytes -= size;
                    g.stats.device_frees += 1;
                }
                Err(e) => {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        first
    }
}
