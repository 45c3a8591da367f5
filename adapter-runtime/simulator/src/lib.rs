//! `xirang-acl-sim`: a simulated Huawei Ascend ACL runtime.
//!
//! The library exports a subset of the real `acl_rt.h` C ABI (CANN v2.14.0)
//! with the exact C signatures, implemented on host memory, so an adapter
//! drives the same code path it would drive on hardware. Built as a `cdylib`
//! (to be opened with `dlopen`/libloading like `libascendcl.so`) and as an
//! `rlib` (to be linked directly, as `xirang-runtime` does).
//!
//! # What is simulated
//!
//! * **Devices.** A configurable list of *physical* device ids, which may be
//!   sparse and out of order (`XIRANG_SIM_DEVICES="3,0,7"` or
//!   [`configure`]). `aclrtSetDevice` takes a physical id; the adapter is
//!   expected to renumber them. The current device is per thread, as in ACL.
//! * **Memory.** `aclrtMalloc` returns opaque addresses tagged
//!   `0xD...` that are *not* host-addressable; they map to host buffers
//!   inside the simulator and are reached only through `aclrtMemcpy*`,
//!   `aclrtMemset*` and kernels. Addresses are never reused, so use after
//!   free and out-of-range accesses are reported as
//!   `ACL_ERROR_RT_PARAM_INVALID` (107000). Each device has a finite
//!   capacity (`XIRANG_SIM_CAPACITY_BYTES`, default 1 GiB); exceeding it
//!   returns `ACL_ERROR_RT_MEMORY_ALLOCATION` (207001). `aclrtFree` waits
//!   for the device's queued work first, like `cudaFree`.
//! * **Streams.** Each stream (including each device's default stream, the
//!   null handle) is a worker thread running a FIFO queue. Errors raised by
//!   queued work are sticky until the next `aclrtSynchronizeStream` /
//!   `aclrtSynchronizeDevice`, which returns and clears the first one.
//!   A synchronizing host thread waits as `XIRANG_SIM_SYNC` says, after
//!   CUDA's device schedule flags: `auto` (default: poll, yielding the core
//!   between polls, for about twice the stream's last wait, 50 µs to 1 ms,
//!   then block), `yield` (poll until done) or `block` (sleep at once).
//!   The queue is bounded, as a device's launch queue: a host thread that
//!   is more than `XIRANG_SIM_QUEUE_DEPTH` tasks (default 64) ahead of the
//!   stream waits for the oldest, so memory held by queued kernels stays
//!   bounded and the caching allocator reuses it.
//! * **Events.** Record, synchronize, wait (from another stream) and elapsed
//!   milliseconds between two completed records.
//! * **Faults.** [`inject_malloc_failure`] / `XIRANG_SIM_FAIL_MALLOC=N`
//!   makes the Nth following `aclrtMalloc` fail with 207001;
//!   [`inject_launch_failure`] / `XIRANG_SIM_FAIL_LAUNCH=N` makes the Nth
//!   following `xirangSimLaunchKernel` fail synchronously with
//!   `ACL_ERROR_RT_AICORE_EXCEPTION` (507015) without enqueuing it.
//!
//! # Vendor extension (not in `acl_rt.h`)
//!
//! ```c
//! typedef struct xirangSimKernelCtx xirangSimKernelCtx;           // opaque
//! typedef aclError (*xirangSimKernel)(const xirangSimKernelCtx *ctx, void *userData);
//! // Enqueue `kernel(ctx, userData)` on `stream` (null = default stream).
//! aclError xirangSimLaunchKernel(xirangSimKernel kernel, void *userData, aclrtStream stream);
//! // Inside a kernel only: copy between device memory and kernel-local host memory.
//! aclError xirangSimKernelRead(const xirangSimKernelCtx *ctx, const void *devPtr, void *dst, size_t count);
//! aclError xirangSimKernelWrite(const xirangSimKernelCtx *ctx, void *devPtr, const void *src, size_t count);
//! // Inside a kernel only: fn(userData, hostPtrs) with direct host views of n device ranges,
//! // valid until fn returns (the allocations stay locked meanwhile; no Read/Write on them in fn).
//! typedef void (*xirangSimMappedFn)(void *userData, void *const *hostPtrs);
//! aclError xirangSimKernelMap(const xirangSimKernelCtx *ctx, size_t n, const void *const *devPtrs,
//!                             const size_t *sizes, xirangSimMappedFn fn, void *userData);
//! // Physical ids in driver enumeration order; *count receives the total.
//! aclError xirangSimGetPhysicalDeviceIds(int32_t *ids, uint32_t capacity, uint32_t *count);
//! aclError xirangSimInjectMallocFailure(uint64_t nth);
//! aclError xirangSimInjectLaunchFailure(uint64_t nth);
//! ```
//!
//! A kernel returning non-zero makes that code the stream's sticky error.
//! The kernel context is the only way a kernel reaches device memory: this
//! is how the adapter's "native kernel library" runs on device buffers.
//! Rust callers can use [`launch_kernel`] and [`KernelCtx`] directly.
//!
//! Differences from real ACL worth knowing: `aclrtMemcpyAsync` from host
//! snapshots the host source when enqueued (the caller may reuse it at once);
//! async copies *to* host write when executed, so the host buffer must
//! outlive the stream's next synchronize. `aclrtLaunchCallback` runs the
//! callback on the stream's worker without `aclrtSubscribeReport`.

#![deny(unsafe_code)]

mod codes;
#[allow(unsafe_code)] // the exported C ABI
mod ffi;
mod state;

pub use codes::*;
pub use ffi::*;

use std::sync::{Mutex, MutexGuard};

/// Default per-device capacity: 1 GiB.
pub const DEFAULT_CAPACITY_BYTES: u64 = 1 << 30;

/// Errors of the Rust configuration API.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SimError {
    #[error("the simulator is initialized; configure it before aclInit or after aclFinalize")]
    AlreadyInitialized,
    #[error("invalid simulator configuration: {0}")]
    InvalidConfig(String),
    #[error("ACL error {code}: {msg}")]
    Acl { code: AclError, msg: String },
}

/// Simulator configuration, read at `aclInit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Physical device ids in driver enumeration order (sparse, any order).
    pub devices: Vec<i32>,
    /// Capacity of each device in bytes.
    pub capacity_bytes: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { devices: vec![0], capacity_bytes: DEFAULT_CAPACITY_BYTES }
    }
}

impl SimConfig {
    /// Read `XIRANG_SIM_DEVICES` (comma-separated physical ids, default `0`)
    /// and `XIRANG_SIM_CAPACITY_BYTES` (default 1 GiB).
    pub fn from_env() -> Result<SimConfig, SimError> {
        let mut cfg = SimConfig::default();
        if let Ok(v) = std::env::var("XIRANG_SIM_DEVICES") {
            cfg.devices = parse_devices(&v)?;
        }
        if let Ok(v) = std::env::var("XIRANG_SIM_CAPACITY_BYTES") {
            cfg.capacity_bytes = v
                .trim()
                .parse()
                .map_err(|_| SimError::InvalidConfig(format!("XIRANG_SIM_CAPACITY_BYTES: not a number: {v:?}")))?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), SimError> {
        let mut seen = self.devices.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != self.devices.len() {
            return Err(SimError::InvalidConfig(format!("duplicate device ids in {:?}", self.devices)));
        }
        if self.devices.iter().any(|&d| d < 0) {
            return Err(SimError::InvalidConfig("device ids must be >= 0".into()));
        }
        if self.devices.len() > 4096 {
            return Err(SimError::InvalidConfig("at most 4096 devices".into()));
        }
        Ok(())
    }
}

/// Parse a `XIRANG_SIM_DEVICES` value such as `"3,0,7"` (empty: no devices).
pub fn parse_devices(v: &str) -> Result<Vec<i32>, SimError> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i32>().map_err(|_| SimError::InvalidConfig(format!("bad device id {s:?} in {v:?}"))))
        .collect()
}

/// Set the configuration used by the next `aclInit` (overrides env vars).
pub fn configure(cfg: SimConfig) -> Result<(), SimError> {
    state::configure(cfg)
}

/// Whether `aclInit` has been called (and not finalized).
pub fn is_initialized() -> bool {
    state::is_initialized()
}

/// Make the `nth` following `aclrtMalloc` (1 = the next one) fail with
/// `ACL_ERROR_RT_MEMORY_ALLOCATION`. `0` clears the fault.
pub fn inject_malloc_failure(nth: u64) {
    state::faults().malloc_countdown = (nth > 0).then_some(nth);
}

/// Make the `nth` following kernel launch fail with
/// `ACL_ERROR_RT_AICORE_EXCEPTION`. `0` clears the fault.
pub fn inject_launch_failure(nth: u64) {
    state::LAUNCH_COUNTDOWN.store(nth, std::sync::atomic::Ordering::SeqCst);
}

/// Clear all injected faults.
pub fn clear_faults() {
    inject_malloc_failure(0);
    inject_launch_failure(0);
}

/// Physical device ids in enumeration order (requires `aclInit`).
pub fn physical_device_ids() -> Result<Vec<i32>, SimError> {
    state::physical_ids().map_err(|f| SimError::Acl { code: f.code, msg: f.msg })
}

/// A process-wide lock for tests that reconfigure or finalize the
/// simulator: hold it for the whole test.
pub fn exclusive() -> MutexGuard<'static, ()> {
    state::EXCLUSIVE.get_or_init(|| Mutex::new(())).lock().unwrap_or_else(|p| p.into_inner())
}

/// What a kernel sees: device memory of the launching stream's simulator,
/// reachable only through this context.
#[derive(Debug)]
pub struct KernelCtx {
    _private: (),
}

impl KernelCtx {
    /// Copy `dst.len()` bytes from device address `src` into `dst`.
    pub fn read(&self, src: u64, dst: &mut [u8]) -> Result<(), AclError> {
        state::read_device(src, dst).map_err(|f| f.code)
    }

    /// Copy `src` to device address `dst`.
    pub fn write(&self, dst: u64, src: &[u8]) -> Result<(), AclError> {
        state::write_device(dst, src).map_err(|f| f.code)
    }

    /// Run `f` on the device bytes `[addr, addr + len)` in place.
    pub fn with_slice_mut<T>(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8]) -> T) -> Result<T, AclError> {
        state::with_device_slice(addr, len as u64, f).map_err(|f| f.code)
    }
}

/// Rust form of `xirangSimLaunchKernel`: enqueue `kernel` on `stream`
/// (`0` = the current device's default stream).
pub fn launch_kernel(
    stream: usize,
    kernel: impl FnOnce(&KernelCtx) -> Result<(), AclError> + Send + 'static,
) -> Result<(), AclError> {
    let r = (|| {
        let st = state::get_stream(stream)?;
        state::check_launch_fault()?;
        st.submit(Box::new(move || {
            kernel(&KernelCtx { _private: () })
                .map_err(|code| state::Fail { code, msg: format!("kernel failed with code {code}") })
        }))
    })();
    r.map_err(|f| {
        state::set_last_error(&f.msg);
        f.code
    })
}
