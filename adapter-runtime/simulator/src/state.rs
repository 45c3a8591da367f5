//! The simulator's process-wide state: devices, memory, streams and events.
//!
//! Everything here is safe Rust; the C ABI in `ffi.rs` converts raw pointers
//! and calls into these functions.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::codes::*;
use crate::{SimConfig, SimError};

/// High tag of every simulated device address. Host pointers on the
/// platforms we run on are below 2^57, so the tag never collides with them.
pub(crate) const DEV_TAG: u64 = 0xD000_0000_0000_0000;
const TAG_MASK: u64 = 0xF000_0000_0000_0000;
const SLOT_SHIFT: u32 = 44;
const OFFSET_MASK: u64 = (1 << SLOT_SHIFT) - 1;
/// Alignment of every allocation (and gap between allocations).
pub(crate) const ALLOC_ALIGN: u64 = 512;
const STREAM_TAG: usize = 0x5000_0000;
const EVENT_TAG: usize = 0xE000_0000;

/// A failure: an ACL error code and a message for `aclGetRecentErrMsg`.
#[derive(Debug, Clone)]
pub(crate) struct Fail {
    pub code: AclError,
    pub msg: String,
}

pub(crate) type R<T> = Result<T, Fail>;

/// Bumped (under the state lock, after the change) by `aclInit`, `aclFinalize`, `aclrtResetDevice`
/// and `aclrtDestroyStream`: a thread's [`CURRENT_PHYS`] and [`STREAM_CACHE`] from an older epoch
/// are stale (the devices changed, or a stream handle may no longer name the stream it named).
static EPOCH: AtomicU64 = AtomicU64::new(0);

fn set_current(slot: Option<(usize, i32)>) {
    CURRENT_DEVICE.with(|c| c.set(slot.map(|(s, _)| s)));
    CURRENT_PHYS.with(|c| c.set(slot.map(|(_, p)| (EPOCH.load(Ordering::SeqCst), p))));
}

pub(crate) fn fail<T>(code: AclError, msg: impl Into<String>) -> R<T> {
    Err(Fail { code, msg: msg.into() })
}

thread_local! {
    static CURRENT_DEVICE: Cell<Option<usize>> = const { Cell::new(None) };
    /// `aclrtGetDevice`'s answer without the state lock (it is called on every kernel launch):
    /// (the [`EPOCH`] it was read in, the current device's physical id). The devices only change
    /// at `aclInit` / `aclFinalize` / `aclrtResetDevice`, which start a new epoch.
    static CURRENT_PHYS: Cell<Option<(u64, i32)>> = const { Cell::new(None) };
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The streams this thread looked up lately, so that a kernel launch does not take the state
    /// lock (which the stream workers take too, to find the memory their kernels touch):
    /// ([`EPOCH`] when filled, [(handle, current slot for the null handle, stream)]).
    static STREAM_CACHE: RefCell<(u64, Vec<CachedStream>)> = const { RefCell::new((0, Vec::new())) };
}

/// A [`STREAM_CACHE`] entry: (handle, the current slot when the handle is null, the stream).
type CachedStream = (usize, Option<usize>, Arc<Stream>);

/// Streams a thread keeps in [`STREAM_CACHE`] (the oldest is dropped first).
const STREAM_CACHE_LEN: usize = 8;

pub(crate) fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}

/// Pointer to the thread's last error message, or null. Valid until the next
/// failing call on this thread.
pub(crate) fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|e| match &*e.borrow() {
        Some(c) => c.as_ptr(),
        None => std::ptr::null(),
    })
}

/// Addresses are never reused, even across `aclFinalize`/`aclInit`, so a
/// stale pointer is always detected.
static NEXT_OFFSET: AtomicU64 = AtomicU64::new(0x10_0000);
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

type Buffer = Arc<Mutex<Vec<u8>>>;

struct DeviceState {
    phys_id: i32,
    capacity: u64,
    used: u64,
    /// base offset -> buffer
    allocs: BTreeMap<u64, Buffer>,
    default_stream: Option<Arc<Stream>>,
}

pub(crate) struct Faults {
    /// Fail the malloc call when this countdown reaches 1.
    pub malloc_countdown: Option<u64>,
}

/// Fail the kernel launch when this countdown reaches 1 (0: no fault). An atomic, not under
/// [`FAULTS`]' lock: every launch checks it.
pub(crate) static LAUNCH_COUNTDOWN: AtomicU64 = AtomicU64::new(0);

struct Inner {
    initialized: bool,
    config: Option<SimConfig>,
    devices: Vec<DeviceState>,
    streams: BTreeMap<u64, Arc<Stream>>,
    events: BTreeMap<u64, Arc<Event>>,
}

static STATE: Mutex<Inner> = Mutex::new(Inner {
    initialized: false,
    config: None,
    devices: Vec::new(),
    streams: BTreeMap::new(),
    events: BTreeMap::new(),
});
pub(crate) static FAULTS: Mutex<Faults> = Mutex::new(Faults { malloc_countdown: None });

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking kernel must not wedge the whole simulator.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn state() -> MutexGuard<'static, Inner> {
    lock(&STATE)
}

pub(crate) fn faults() -> MutexGuard<'static, Faults> {
    lock(&FAULTS)
}

fn initialized(s: &Inner) -> R<()> {
    if s.initialized { Ok(()) } else { fail(ACL_ERROR_UNINITIALIZE, "aclInit has not been called") }
}

/// Take one tick off a fault countdown; true when the fault fires now.
fn tick(countdown: &mut Option<u64>) -> bool {
    match countdown {
        Some(1) => {
            *countdown = None;
            true
        }
        Some(n) => {
            *n -= 1;
            false
        }
        None => false,
    }
}

// ---------------------------------------------------------------- config

pub(crate) fn configure(cfg: SimConfig) -> Result<(), SimError> {
    cfg.validate()?;
    let mut s = state();
    if s.initialized {
        return Err(SimError::AlreadyInitialized);
    }
    s.config = Some(cfg);
    Ok(())
}

pub(crate) fn is_initialized() -> bool {
    state().initialized
}

pub(crate) fn physical_ids() -> R<Vec<i32>> {
    let s = state();
    initialized(&s)?;
    Ok(s.devices.iter().map(|d| d.phys_id).collect())
}

// ---------------------------------------------------------------- init

pub(crate) fn init() -> R<()> {
    let mut s = state();
    if s.initialized {
        return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit called twice");
    }
    let cfg = match s.config.clone() {
        Some(c) => c,
        None => SimConfig::from_env().map_err(|e| Fail { code: ACL_ERROR_INVALID_PARAM, msg: e.to_string() })?,
    };
    if let Ok(v) = std::env::var("XIRANG_SIM_FAIL_MALLOC") {
        let n: u64 = v.trim().parse().map_err(|_| Fail {
            code: ACL_ERROR_INVALID_PARAM,
            msg: format!("XIRANG_SIM_FAIL_MALLOC: not a positive integer: {v:?}"),
        })?;
        if n > 0 {
            faults().malloc_countdown = Some(n);
        }
    }
    if let Ok(v) = std::env::var("XIRANG_SIM_FAIL_LAUNCH") {
        let n: u64 = v.trim().parse().map_err(|_| Fail {
            code: ACL_ERROR_INVALID_PARAM,
            msg: format!("XIRANG_SIM_FAIL_LAUNCH: not a positive integer: {v:?}"),
        })?;
        if n > 0 {
            LAUNCH_COUNTDOWN.store(n, Ordering::SeqCst);
        }
    }
    s.devices = cfg
        .devices
        .iter()
        .map(|&phys_id| DeviceState {
            phys_id,
            capacity: cfg.capacity_bytes,
            used: 0,
            allocs: BTreeMap::new(),
            default_stream: None,
        })
        .collect();
    s.initialized = true;
    EPOCH.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

pub(crate) fn finalize() -> R<()> {
    let (streams, defaults) = {
        let mut s = state();
        if !s.initialized {
            return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize without aclInit");
        }
        s.initialized = false;
        let streams: Vec<_> = std::mem::take(&mut s.streams).into_values().collect();
        let defaults: Vec<_> = s.devices.iter_mut().filter_map(|d| d.default_stream.take()).collect();
        s.devices.clear();
        EPOCH.fetch_add(1, Ordering::SeqCst);
        bump_unmap_generation();
        s.events.clear();
        (streams, defaults)
    };
    for st in streams.into_iter().chain(defaults) {
        st.shutdown();
    }
    set_current(None);
    Ok(())
}

// ---------------------------------------------------------------- devices

pub(crate) fn device_count() -> R<u32> {
    let s = state();
    initialized(&s)?;
    Ok(s.devices.len() as u32)
}

fn slot_of(s: &Inner, phys_id: i32) -> R<usize> {
    s.devices
        .iter()
        .position(|d| d.phys_id == phys_id)
        .map_or_else(|| fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("device id {phys_id} does not exist")), Ok)
}

pub(crate) fn set_device(phys_id: i32) -> R<()> {
    let mut s = state();
    initialized(&s)?;
    let slot = slot_of(&s, phys_id)?;
    if s.devices[slot].default_stream.is_none() {
        s.devices[slot].default_stream = Some(Stream::spawn(0, slot)?);
    }
    set_current(Some((slot, phys_id)));
    Ok(())
}

fn current_slot(s: &Inner) -> R<usize> {
    initialized(s)?;
    match CURRENT_DEVICE.with(|c| c.get()) {
        Some(slot) if slot < s.devices.len() => Ok(slot),
        _ => fail(ACL_ERROR_RT_CONTEXT_NULL, "no current device on this thread: call aclrtSetDevice first"),
    }
}

pub(crate) fn get_device() -> R<i32> {
    // read before the lookup: a change after it bumps the epoch past this one
    let epoch = EPOCH.load(Ordering::SeqCst);
    if let Some((e, phys)) = CURRENT_PHYS.with(|c| c.get())
        && e == epoch
    {
        return Ok(phys);
    }
    let s = state();
    let slot = current_slot(&s)?;
    let phys = s.devices[slot].phys_id;
    CURRENT_PHYS.with(|c| c.set(Some((epoch, phys))));
    Ok(phys)
}

pub(crate) fn reset_device(phys_id: i32) -> R<()> {
    let to_stop = {
        let mut s = state();
        initialized(&s)?;
        let slot = slot_of(&s, phys_id)?;
        let ids: Vec<u64> = s.streams.iter().filter(|(_, st)| st.slot == slot).map(|(k, _)| *k).collect();
        let mut v: Vec<Arc<Stream>> = ids.iter().filter_map(|k| s.streams.remove(k)).collect();
        let d = &mut s.devices[slot];
        v.extend(d.default_stream.take());
        EPOCH.fetch_add(1, Ordering::SeqCst);
        d.allocs.clear();
        bump_unmap_generation();
        d.used = 0;
        if CURRENT_DEVICE.with(|c| c.get()) == Some(slot) {
            set_current(None);
        }
        v
    };
    for st in to_stop {
        st.shutdown();
    }
    Ok(())
}

pub(crate) fn synchronize_device() -> R<()> {
    let streams: Vec<Arc<Stream>> = {
        let s = state();
        let slot = current_slot(&s)?;
        s.streams.values().filter(|st| st.slot == slot).cloned().chain(s.devices[slot].default_stream.clone()).collect()
    };
    let mut first = Ok(());
    for st in streams {
        let r = st.synchronize();
        if first.is_ok() {
            first = r;
        }
    }
    first
}

pub(crate) fn mem_info(attr: AclrtMemAttr) -> R<(u64, u64)> {
    let s = state();
    let slot = current_slot(&s)?;
    if !(0..=ACL_MEM_ATTR_LAST).contains(&attr) {
        return fail(ACL_ERROR_INVALID_PARAM, format!("invalid aclrtMemAttr {attr}"));
    }
    let d = &s.devices[slot];
    Ok((d.capacity - d.used, d.capacity))
}

// ---------------------------------------------------------------- memory

pub(crate) fn is_device_addr(addr: u64) -> bool {
    addr & TAG_MASK == DEV_TAG
}

fn decode(addr: u64) -> Option<(usize, u64)> {
    if is_device_addr(addr) { Some((((addr & !TAG_MASK) >> SLOT_SHIFT) as usize, addr & OFFSET_MASK)) } else { None }
}

pub(crate) fn malloc(size: u64, policy: AclrtMemMallocPolicy) -> R<u64> {
    let mut s = state();
    let slot = current_slot(&s)?;
    let valid_policy = (0..=7).contains(&(policy & 0xff))
        && policy
            & !(0xff | ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH | ACL_MEM_ACCESS_USER_SPACE_READONLY)
            == 0;
    if !valid_policy {
        return fail(ACL_ERROR_INVALID_PARAM, format!("invalid aclrtMemMallocPolicy {policy}"));
    }
    if size == 0 {
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size must be greater than 0");
    }
    if tick(&mut faults().malloc_countdown) {
        return fail(
            ACL_ERROR_RT_MEMORY_ALLOCATION,
            format!("aclrtMalloc: injected allocation failure ({size} bytes)"),
        );
    }
    let d = &mut s.devices[slot];
    if size > d.capacity - d.used {
        return fail(
            ACL_ERROR_RT_MEMORY_ALLOCATION,
            format!(
                "aclrtMalloc: out of memory on device {}: requested {size} bytes, {} of {} bytes free",
                d.phys_id,
                d.capacity - d.used,
                d.capacity
            ),
        );
    }
    let len = usize::try_from(size)
        .map_err(|_| Fail { code: ACL_ERROR_RT_MEMORY_ALLOCATION, msg: "size too large".into() })?;
    let span = size.div_ceil(ALLOC_ALIGN) * ALLOC_ALIGN + ALLOC_ALIGN;
    let offset = NEXT_OFFSET.fetch_add(span, Ordering::Relaxed);
    if offset + span > OFFSET_MASK {
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "simulated address space exhausted");
    }
    d.used += size;
    d.allocs.insert(offset, Arc::new(Mutex::new(vec![0u8; len])));
    Ok(DEV_TAG | ((slot as u64) << SLOT_SHIFT) | offset)
}

pub(crate) fn free(addr: u64) -> R<()> {
    // cudaFree-like: wait for the device's queued work first.
    let Some((slot, offset)) = decode(addr) else {
        return fail(ACL_ERROR_RT_PARAM_INVALID, format!("aclrtFree: {addr:#x} is not a device address"));
    };
    {
        let s = state();
        initialized(&s)?;
    }
    let streams: Vec<Arc<Stream>> = {
        let s = state();
        s.streams
            .values()
            .filter(|st| st.slot == slot)
            .cloned()
            .chain(s.devices.get(slot).and_then(|d| d.default_stream.clone()))
            .collect()
    };
    for st in streams {
        st.wait_idle();
    }
    let mut s = state();
    let Some(d) = s.devices.get_mut(slot) else {
        return fail(ACL_ERROR_RT_PARAM_INVALID, format!("aclrtFree: {addr:#x} has no device"));
    };
    match d.allocs.remove(&offset) {
        Some(buf) => {
            bump_unmap_generation();
            d.used -= lock(&buf).len() as u64;
            Ok(())
        }
        None => fail(ACL_ERROR_RT_PARAM_INVALID, format!("aclrtFree: {addr:#x} is not the start of a live allocation")),
    }
}

/// Bumped (under the state lock) whenever live allocations go away: `aclrtFree`, a device reset,
/// `aclFinalize`. A thread's [`resolve`] cache holds only entries of the current generation.
static UNMAP_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Allocations a thread's [`resolve`] cache remembers.
const RESOLVE_CACHE: usize = 8;

/// A thread's recently resolved allocations: (start address, size, buffer), most recent first.
struct ResolveCache {
    generation: u64,
    entries: Vec<(u64, u64, Buffer)>,
}

thread_local! {
    static RESOLVED: RefCell<ResolveCache> = const { RefCell::new(ResolveCache { generation: 0, entries: Vec::new() }) };
}

fn bump_unmap_generation() {
    UNMAP_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Resolve `[addr, addr+len)` to an allocation and the offset inside it.
///
/// A kernel resolves the same few allocations again and again; a per-thread cache answers those
/// without the global state lock (which the launching thread takes for every launch). Addresses
/// are never reused, so an entry stays right until an allocation is released, which starts a new
/// generation.
pub(crate) fn resolve(addr: u64, len: u64) -> R<(Buffer, usize)> {
    let generation = UNMAP_GENERATION.load(Ordering::Acquire);
    let fits = |start: u64, size: u64| addr >= start && addr - start <= size && len <= size - (addr - start);
    let hit = RESOLVED.with(|c| {
        let mut c = c.borrow_mut();
        if c.generation != generation {
            c.entries.clear();
            c.generation = generation;
            return None;
        }
        let i = c.entries.iter().position(|(start, size, _)| fits(*start, *size))?;
        if i > 0 {
            let e = c.entries.remove(i);
            c.entries.insert(0, e);
        }
        let (start, _, buf) = &c.entries[0];
        Some((buf.clone(), (addr - start) as usize))
    });
    if let Some(h) = hit {
        return Ok(h);
    }
    let (buf, off, size) = resolve_locked(addr, len)?;
    RESOLVED.with(|c| {
        let mut c = c.borrow_mut();
        if c.generation == generation {
            c.entries.insert(0, (addr - off as u64, size, buf.clone()));
            c.entries.truncate(RESOLVE_CACHE);
        }
    });
    Ok((buf, off))
}

/// [`resolve`] under the state lock; also returns the allocation's size.
fn resolve_locked(addr: u64, len: u64) -> R<(Buffer, usize, u64)> {
    let Some((slot, offset)) = decode(addr) else {
        return fail(ACL_ERROR_RT_PARAM_INVALID, format!("{addr:#x} is not a device address"));
    };
    let s = state();
    initialized(&s)?;
    let Some(d) = s.devices.get(slot) else {
        return fail(ACL_ERROR_RT_PARAM_INVALID, format!("{addr:#x}: no such device"));
    };
    if let Some((base, buf)) = d.allocs.range(..=offset).next_back() {
        let size = lock(buf).len() as u64;
        let start = offset - base;
        if start <= size && len <= size - start {
            return Ok((buf.clone(), start as usize, size));
        }
        if start < size {
            return fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("device range {addr:#x}+{len} overruns its allocation of {size} bytes at offset {start}"),
            );
        }
    }
    fail(
        ACL_ERROR_RT_PARAM_INVALID,
        format!("{addr:#x} is not inside a live device allocation (freed or never allocated)"),
    )
}

pub(crate) fn read_device(addr: u64, dst: &mut [u8]) -> R<()> {
    let (buf, off) = resolve(addr, dst.len() as u64)?;
    dst.copy_from_slice(&lock(&buf)[off..off + dst.len()]);
    Ok(())
}

pub(crate) fn write_device(addr: u64, src: &[u8]) -> R<()> {
    let (buf, off) = resolve(addr, src.len() as u64)?;
    lock(&buf)[off..off + src.len()].copy_from_slice(src);
    Ok(())
}

pub(crate) fn copy_d2d(dst: u64, src: u64, count: u64) -> R<()> {
    let (sb, so) = resolve(src, count)?;
    let (db, doff) = resolve(dst, count)?;
    let n = count as usize;
    if Arc::ptr_eq(&sb, &db) {
        lock(&sb).copy_within(so..so + n, doff);
    } else {
        let tmp = lock(&sb)[so..so + n].to_vec();
        lock(&db)[doff..doff + n].copy_from_slice(&tmp);
    }
    Ok(())
}

pub(crate) fn fill_device(addr: u64, value: u8, count: u64) -> R<()> {
    let (buf, off) = resolve(addr, count)?;
    lock(&buf)[off..off + count as usize].fill(value);
    Ok(())
}

/// Run `f` on a mutable view of device memory (used by kernels).
pub(crate) fn with_device_slice<T>(addr: u64, len: u64, f: impl FnOnce(&mut [u8]) -> T) -> R<T> {
    let (buf, off) = resolve(addr, len)?;
    let mut g = lock(&buf);
    Ok(f(&mut g[off..off + len as usize]))
}

/// Runs `f` with host pointers to the device ranges `ranges` (address, length): the kernel's
/// direct view of device memory. Every allocation involved is locked for the duration of `f`, in
/// one global order (by the allocation's identity), so two kernels mapping the same allocations
/// in different orders cannot deadlock; ranges of one allocation share its lock. `f` must not
/// read or write these allocations through [`read_device`] / [`write_device`] (they would wait
/// for the lock `f`'s caller holds).
pub(crate) fn with_mapped(ranges: &[(u64, u64)], f: impl FnOnce(&[*mut u8])) -> R<()> {
    let resolved: Vec<(Buffer, usize)> = ranges.iter().map(|&(a, n)| resolve(a, n)).collect::<R<_>>()?;
    let mut bufs: Vec<&Buffer> = Vec::new();
    for (b, _) in &resolved {
        if !bufs.iter().any(|x| Arc::ptr_eq(x, b)) {
            bufs.push(b);
        }
    }
    bufs.sort_by_key(|b| Arc::as_ptr(b) as usize);
    let mut guards: Vec<MutexGuard<'_, Vec<u8>>> = bufs.iter().map(|b| lock(&***b)).collect();
    let mut ptrs = Vec::with_capacity(resolved.len());
    for (b, off) in &resolved {
        let Some(k) = bufs.iter().position(|x| Arc::ptr_eq(x, b)) else {
            return fail(ACL_ERROR_RT_INTERNAL_ERROR, "mapped allocation lost");
        };
        // `Vec::as_mut_ptr` does not materialise a reference to the elements: pointers taken
        // one after another from the same guard stay valid together
        ptrs.push(guards[k].as_mut_ptr().wrapping_add(*off));
    }
    f(&ptrs);
    drop(guards);
    Ok(())
}

// ---------------------------------------------------------------- streams

/// A closure queued on a stream (copies, memsets, events, callbacks, Rust kernels).
pub(crate) type Job = Box<dyn FnOnce() -> R<()> + Send>;

/// Work queued on a stream. A kernel launch is the hot path, so it is queued without a heap
/// allocation of its own (memory allocated on the launching thread and freed on the worker
/// contends for the host allocator's lock on every launch).
pub(crate) enum Task {
    Job(Job),
    Kernel(crate::ffi::RawKernel),
}

impl Task {
    fn run(self) -> R<()> {
        match self {
            Task::Job(f) => f(),
            Task::Kernel(k) => k.run(),
        }
    }
}

/// Completion tracking of one stream. The submitting thread and the worker only touch atomics on
/// the hot path; the mutex and condition variable are used only when someone waits.
#[derive(Default)]
struct Progress {
    submitted: AtomicU64,
    completed: AtomicU64,
    /// Threads blocked in `wait_idle` (the worker notifies only when there are some).
    waiters: AtomicUsize,
    /// How long the last `wait_idle` that had to wait took (ns): the next one polls for about
    /// that long before it blocks ([`WaitPolicy::Auto`], an adaptive spin as adaptive mutexes do).
    last_wait_ns: AtomicU64,
    error: Mutex<Option<Fail>>,
    lock: Mutex<()>,
    cv: Condvar,
}

/// How long an idle stream worker polls its queue before it blocks. A device's command processor
/// polls too; blocking after every kernel would make each launch pay a thread wake-up (a futex
/// system call on the submitting thread), which dominates the launch of a tiny kernel.
const WORKER_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// How a host thread waits in a synchronize (`XIRANG_SIM_SYNC`), as CUDA's device schedule flags
/// (`cudaDeviceScheduleAuto`, `...Yield`, `...BlockingSync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitPolicy {
    /// Poll (yielding) for up to twice the stream's last wait, at least 50 µs and at most 1 ms,
    /// then block. A kernel that runs as long as the last one is caught by polling, without a
    /// thread wake-up; a much longer one costs a core's polling for 1 ms at most.
    Auto,
    /// Poll, yielding the core between polls, until the work is done.
    Yield,
    /// Block on a condition variable at once.
    Block,
}

/// The longest a synchronize polls under [`WaitPolicy::Auto`] before it blocks.
const HOST_POLL_MAX: std::time::Duration = std::time::Duration::from_millis(1);

/// Launch queue depth per stream (`XIRANG_SIM_QUEUE_DEPTH`, default 64, at least 1): how many
/// tasks may be queued and not yet completed before a submitting host thread waits.
pub(crate) fn queue_depth() -> u64 {
    static DEPTH: OnceLock<u64> = OnceLock::new();
    *DEPTH.get_or_init(|| {
        std::env::var("XIRANG_SIM_QUEUE_DEPTH").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(64).max(1)
    })
}

pub(crate) fn wait_policy() -> WaitPolicy {
    static POLICY: OnceLock<WaitPolicy> = OnceLock::new();
    *POLICY.get_or_init(|| match std::env::var("XIRANG_SIM_SYNC").as_deref() {
        Ok("yield") => WaitPolicy::Yield,
        Ok("block") => WaitPolicy::Block,
        _ => WaitPolicy::Auto,
    })
}

pub(crate) struct Stream {
    pub id: u64,
    pub slot: usize,
    tx: Mutex<Option<Sender<Task>>>,
    progress: Arc<Progress>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

/// The next task: polls for up to [`WORKER_SPIN`], then blocks. `None` when the stream is closed.
fn next_task(rx: &Receiver<Task>) -> Option<Task> {
    match rx.try_recv() {
        Ok(t) => return Some(t),
        Err(TryRecvError::Disconnected) => return None,
        Err(TryRecvError::Empty) => {}
    }
    let start = Instant::now();
    while start.elapsed() < WORKER_SPIN {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
        match rx.try_recv() {
            Ok(t) => return Some(t),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    rx.recv().ok()
}

impl Stream {
    fn spawn(id: u64, slot: usize) -> R<Arc<Stream>> {
        let (tx, rx) = channel::<Task>();
        let progress: Arc<Progress> = Arc::default();
        let p = progress.clone();
        let worker = std::thread::Builder::new()
            .name(format!("acl-sim-stream-{id}"))
            .spawn(move || {
                while let Some(task) = next_task(&rx) {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()))
                        .unwrap_or_else(|_| fail(ACL_ERROR_RT_AICORE_EXCEPTION, "task panicked"));
                    if let Err(e) = r {
                        let mut g = lock(&p.error);
                        if g.is_none() {
                            *g = Some(e);
                        }
                    }
                    // SeqCst pairs with `wait_idle`: either the waiter sees this completion, or
                    // this sees the waiter and notifies it under the lock.
                    p.completed.fetch_add(1, Ordering::SeqCst);
                    if p.waiters.load(Ordering::SeqCst) > 0 {
                        let _g = lock(&p.lock);
                        p.cv.notify_all();
                    }
                }
            })
            .map_err(|e| Fail {
                code: ACL_ERROR_RT_NO_STREAM_RESOURCE,
                msg: format!("cannot start stream worker: {e}"),
            })?;
        Ok(Arc::new(Stream { id, slot, tx: Mutex::new(Some(tx)), progress, worker: Mutex::new(Some(worker)) }))
    }

    pub(crate) fn submit(&self, job: Job) -> R<()> {
        self.send(Task::Job(job))
    }

    pub(crate) fn submit_kernel(&self, kernel: crate::ffi::RawKernel) -> R<()> {
        self.send(Task::Kernel(kernel))
    }

    fn send(&self, task: Task) -> R<()> {
        let submitted = {
            let tx = lock(&self.tx);
            let Some(tx) = tx.as_ref() else {
                return fail(ACL_ERROR_RT_INVALID_HANDLE, "stream has been destroyed");
            };
            let n = self.progress.submitted.fetch_add(1, Ordering::SeqCst) + 1;
            if tx.send(task).is_err() {
                self.progress.submitted.fetch_sub(1, Ordering::SeqCst);
                return fail(ACL_ERROR_RT_INTERNAL_ERROR, "stream worker is gone");
            }
            n
        };
        // A bounded launch queue, as a device's: a host that outruns the stream by more than
        // `queue_depth()` tasks waits for the oldest. Memory that queued kernels hold (the
        // runtime keeps a kernel's tensors of other streams alive until it has run) stays
        // bounded, and the caching allocator reuses their blocks instead of growing the pool
        // every call of a loop that outruns the device. Every task waits only on work already submitted (an event wait
        // targets a record already queued), so waiting here cannot deadlock.
        let depth = queue_depth();
        if submitted > depth {
            self.wait_until(submitted - depth);
        }
        Ok(())
    }

    /// Whether every task submitted so far has completed.
    fn is_idle(&self) -> bool {
        let p = &*self.progress;
        p.completed.load(Ordering::SeqCst) >= p.submitted.load(Ordering::SeqCst)
    }

    fn wait_idle(&self) {
        self.wait_until(self.progress.submitted.load(Ordering::SeqCst));
    }

    /// Waits until `target` tasks of the stream have completed.
    fn wait_until(&self, target: u64) {
        let p = &*self.progress;
        if p.completed.load(Ordering::SeqCst) >= target {
            return;
        }
        // Poll briefly first, as a host thread polling a device's completion flag: a tiny
        // kernel finishes within microseconds, and sleeping on the condition variable would
        // cost two thread wake-ups (futex system calls) per synchronize.
        let start = Instant::now();
        let spin = match wait_policy() {
            WaitPolicy::Block => std::time::Duration::ZERO,
            WaitPolicy::Yield => std::time::Duration::MAX,
            // Twice the stream's last wait, within [50 µs, 1 ms].
            WaitPolicy::Auto => {
                std::time::Duration::from_nanos(p.last_wait_ns.load(Ordering::Relaxed).saturating_mul(2))
                    .clamp(WORKER_SPIN, HOST_POLL_MAX)
            }
        };
        let waited = |p: &Progress| {
            p.last_wait_ns.store(start.elapsed().as_nanos().try_into().unwrap_or(u64::MAX), Ordering::Relaxed)
        };
        while start.elapsed() < spin {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if p.completed.load(Ordering::SeqCst) >= target {
                waited(p);
                return;
            }
            std::thread::yield_now();
        }
        p.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = lock(&p.lock);
        while p.completed.load(Ordering::SeqCst) < target {
            g = p.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        p.waiters.fetch_sub(1, Ordering::SeqCst);
        waited(p);
    }

    /// Wait for all queued work; report (and clear) the first async error.
    pub(crate) fn synchronize(&self) -> R<()> {
        self.wait_idle();
        match lock(&self.progress.error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn shutdown(&self) {
        self.wait_idle();
        lock(&self.tx).take();
        if let Some(h) = lock(&self.worker).take() {
            let _ = h.join();
        }
    }
}

pub(crate) fn stream_handle(st: &Stream) -> usize {
    STREAM_TAG + st.id as usize
}

pub(crate) fn create_stream() -> R<usize> {
    let mut s = state();
    let slot = current_slot(&s)?;
    let id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    let st = Stream::spawn(id, slot)?;
    let h = stream_handle(&st);
    s.streams.insert(id, st);
    Ok(h)
}

/// Look up a stream handle; 0 (null) is the current device's default stream. Every kernel launch
/// does: the thread's [`STREAM_CACHE`] answers without the state lock while no handle changed.
pub(crate) fn get_stream(handle: usize) -> R<Arc<Stream>> {
    // Read before the lookup: a change after it bumps the epoch past this one.
    let generation = EPOCH.load(Ordering::SeqCst);
    let slot = if handle == 0 { CURRENT_DEVICE.with(|c| c.get()) } else { None };
    let hit = STREAM_CACHE.with(|c| {
        let c = c.borrow();
        if c.0 != generation {
            return None;
        }
        c.1.iter().find(|e| e.0 == handle && e.1 == slot).map(|e| e.2.clone())
    });
    if let Some(st) = hit {
        return Ok(st);
    }
    let st = lookup_stream(handle)?;
    STREAM_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != generation {
            *c = (generation, Vec::new());
        }
        if c.1.len() == STREAM_CACHE_LEN {
            c.1.remove(0);
        }
        c.1.push((handle, slot, st.clone()));
    });
    Ok(st)
}

/// [`get_stream`] under the state lock.
fn lookup_stream(handle: usize) -> R<Arc<Stream>> {
    let s = state();
    if handle == 0 {
        let slot = current_slot(&s)?;
        return s.devices[slot]
            .default_stream
            .clone()
            .map_or_else(|| fail(ACL_ERROR_RT_CONTEXT_NULL, "device has no default stream"), Ok);
    }
    initialized(&s)?;
    handle
        .checked_sub(STREAM_TAG)
        .and_then(|id| s.streams.get(&(id as u64)))
        .cloned()
        .map_or_else(|| fail(ACL_ERROR_RT_INVALID_HANDLE, format!("invalid stream handle {handle:#x}")), Ok)
}

pub(crate) fn destroy_stream(handle: usize) -> R<()> {
    if handle == 0 {
        return fail(ACL_ERROR_INVALID_PARAM, "cannot destroy the default (null) stream");
    }
    let st = {
        let mut s = state();
        initialized(&s)?;
        let id = handle.checked_sub(STREAM_TAG).map(|v| v as u64);
        match id.and_then(|id| s.streams.remove(&id)) {
            Some(st) => {
                EPOCH.fetch_add(1, Ordering::SeqCst);
                st
            }
            None => {
                return fail(ACL_ERROR_RT_INVALID_HANDLE, format!("invalid stream handle {handle:#x}"));
            }
        }
    };
    st.shutdown();
    Ok(())
}

// ---------------------------------------------------------------- events

#[derive(Default)]
struct EventState {
    /// Number of records issued.
    recorded: u64,
    /// Highest record that has completed.
    completed: u64,
    timestamp: Option<Instant>,
}

pub(crate) struct Event {
    state: Mutex<EventState>,
    cv: Condvar,
}

pub(crate) fn create_event() -> R<usize> {
    let mut s = state();
    initialized(&s)?;
    let id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    s.events.insert(id, Arc::new(Event { state: Mutex::default(), cv: Condvar::new() }));
    Ok(EVENT_TAG + id as usize)
}

fn get_event(handle: usize) -> R<Arc<Event>> {
    let s = state();
    initialized(&s)?;
    if handle == 0 {
        return fail(ACL_ERROR_INVALID_PARAM, "event is null");
    }
    handle
        .checked_sub(EVENT_TAG)
        .and_then(|id| s.events.get(&(id as u64)))
        .cloned()
        .map_or_else(|| fail(ACL_ERROR_RT_INVALID_HANDLE, format!("invalid event handle {handle:#x}")), Ok)
}

pub(crate) fn destroy_event(handle: usize) -> R<()> {
    get_event(handle)?;
    let mut s = state();
    s.events.remove(&((handle - EVENT_TAG) as u64));
    Ok(())
}

pub(crate) fn record_event(event: usize, stream: usize) -> R<()> {
    let ev = get_event(event)?;
    let st = get_stream(stream)?;
    let generation = {
        let mut g = lock(&ev.state);
        g.recorded += 1;
        g.recorded
    };
    // on an idle stream the record completes at once, as a device's command processor fires it
    // (a query right after it says complete, as cudaStreamQuery does of an idle stream)
    if st.is_idle() {
        let mut g = lock(&ev.state);
        if generation > g.completed {
            g.completed = generation;
            g.timestamp = Some(Instant::now());
        }
        ev.cv.notify_all();
        return Ok(());
    }
    st.submit(Box::new(move || {
        let mut g = lock(&ev.state);
        if generation > g.completed {
            g.completed = generation;
            g.timestamp = Some(Instant::now());
        }
        ev.cv.notify_all();
        Ok(())
    }))
}

fn wait_event(ev: &Event, generation: u64) {
    let mut g = lock(&ev.state);
    while g.completed < generation {
        g = ev.cv.wait(g).unwrap_or_else(|p| p.into_inner());
    }
}

/// Whether the event's latest record has completed (an event never recorded has), without waiting.
pub(crate) fn query_event(event: usize) -> R<bool> {
    let ev = get_event(event)?;
    let s = lock(&ev.state);
    Ok(s.completed >= s.recorded)
}

pub(crate) fn synchronize_event(event: usize) -> R<()> {
    let ev = get_event(event)?;
    let generation = lock(&ev.state).recorded;
    wait_event(&ev, generation);
    Ok(())
}

pub(crate) fn stream_wait_event(stream: usize, event: usize) -> R<()> {
    let ev = get_event(event)?;
    let st = get_stream(stream)?;
    let generation = lock(&ev.state).recorded;
    if generation == 0 {
        return Ok(());
    }
    st.submit(Box::new(move || {
        wait_event(&ev, generation);
        Ok(())
    }))
}

pub(crate) fn elapsed_ms(start: usize, end: usize) -> R<f32> {
    let a = get_event(start)?;
    let b = get_event(end)?;
    let stamp = |e: &Event| -> R<Instant> {
        let g = lock(&e.state);
        if g.recorded == 0 {
            return fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "event has not been recorded");
        }
        if g.completed < g.recorded {
            return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "event has not completed yet");
        }
        g.timestamp.map_or_else(|| fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "event has no timestamp"), Ok)
    };
    let (ta, tb) = (stamp(&a)?, stamp(&b)?);
    let ms =
        if tb >= ta { tb.duration_since(ta).as_secs_f64() * 1e3 } else { -(ta.duration_since(tb).as_secs_f64() * 1e3) };
    Ok(ms as f32)
}

// ---------------------------------------------------------------- launches

pub(crate) fn check_launch_fault() -> R<()> {
    // Decrements a set countdown; a plain load when none is set.
    let fired = LAUNCH_COUNTDOWN.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) == Ok(1);
    if fired {
        return fail(ACL_ERROR_RT_AICORE_EXCEPTION, "injected kernel launch failure");
    }
    Ok(())
}

/// Serializes tests that reconfigure the process-wide simulator.
pub(crate) static EXCLUSIVE: OnceLock<Mutex<()>> = OnceLock::new();

// ---------------------------------------------------------------- page-locked host memory

/// One page of page-locked host memory (`aclrtMallocHost` returns page-aligned memory).
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct HostPage([u8; HOST_PAGE]);

const HOST_PAGE: usize = 4096;

/// Live `aclrtMallocHost` allocations by start address: the pages and the requested size.
type HostAllocations = BTreeMap<usize, (Box<[HostPage]>, usize)>;
static HOST: Mutex<HostAllocations> = Mutex::new(BTreeMap::new());

/// Page-locked host memory of `size` bytes (zeroed, page-aligned): the device's copy engine reads
/// and writes it directly, where pageable memory goes through a staging buffer first.
pub(crate) fn malloc_host(size: usize) -> R<*mut std::ffi::c_void> {
    if size == 0 {
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size must be greater than 0");
    }
    let mut pages = vec![HostPage([0; HOST_PAGE]); size.div_ceil(HOST_PAGE)].into_boxed_slice();
    let ptr = pages.as_mut_ptr().cast::<std::ffi::c_void>();
    lock(&HOST).insert(ptr.addr(), (pages, size));
    Ok(ptr)
}

/// Frees what [`malloc_host`] returned at `addr`.
pub(crate) fn free_host(addr: usize) -> R<()> {
    match lock(&HOST).remove(&addr) {
        Some(_) => Ok(()),
        None => fail(ACL_ERROR_INVALID_PARAM, format!("aclrtFreeHost: {addr:#x} is not an aclrtMallocHost allocation")),
    }
}

/// Whether `len` bytes at `addr` lie inside one live page-locked allocation.
pub(crate) fn is_page_locked(addr: usize, len: usize) -> bool {
    let host = lock(&HOST);
    host.range(..=addr).next_back().is_some_and(|(&start, (_, size))| addr + len <= start + size)
}

/// The driver's staging buffers for pageable copies, kept between copies as a driver keeps its
/// page-locked bounce buffers (a fresh buffer per copy would add first-touch page faults no driver
/// pays). At most [`STAGING_KEPT`] are kept.
static STAGING: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
const STAGING_KEPT: usize = 2;

/// A staging buffer holding a copy of `src` (what a pageable host-to-device copy takes at enqueue).
pub(crate) fn stage(src: &[u8]) -> Vec<u8> {
    let mut v = {
        let mut pool = lock(&STAGING);
        match pool.iter().position(|b| b.capacity() >= src.len()) {
            Some(i) => pool.swap_remove(i),
            None => pool.pop().unwrap_or_default(),
        }
    };
    v.clear();
    v.extend_from_slice(src);
    v
}

/// Gives a staging buffer back for the next pageable copy.
pub(crate) fn unstage(v: Vec<u8>) {
    let mut pool = lock(&STAGING);
    if pool.len() < STAGING_KEPT {
        pool.push(v);
    }
}

/// A host-to-device copy as the copy engine does it: page-locked memory is read directly,
/// pageable memory is first staged into a page-locked buffer (one more pass over the bytes).
pub(crate) fn write_device_from_host(addr: u64, src: &[u8]) -> R<()> {
    if is_page_locked(src.as_ptr().addr(), src.len()) {
        return write_device(addr, src);
    }
    let staged = stage(src);
    let r = write_device(addr, &staged);
    unstage(staged);
    r
}

/// A device-to-host copy: into page-locked memory directly, into pageable memory through a
/// staging buffer.
pub(crate) fn read_device_to_host(addr: u64, dst: &mut [u8]) -> R<()> {
    if is_page_locked(dst.as_ptr().addr(), dst.len()) {
        return read_device(addr, dst);
    }
    let mut staged = stage(&[]);
    staged.resize(dst.len(), 0);
    let r = read_device(addr, &mut staged);
    if r.is_ok() {
        dst.copy_from_slice(&staged);
    }
    unstage(staged);
    r
}
