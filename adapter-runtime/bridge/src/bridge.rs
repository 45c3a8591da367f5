//! The bridge's safe API over the runtime: what every C function of [`crate::ffi`] calls.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use xirang_runtime::device::DeviceContext;
use xirang_runtime::dispatch::{self, FallbackMode, HostFallback, Tier};
use xirang_runtime::driver::{EventId, StreamId};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::kernels::NpuOps;
use xirang_runtime::tensor::{Storage, Tensor};
use xirang_runtime::{Device, Runtime};

use crate::devices::{self, Visible};
use crate::error::{BridgeError, Result};

/// The runtime and the devices PyTorch sees. One per process ([`Bridge::get`]).
pub struct Bridge {
    rt: Runtime,
    visible: Visible,
}

static BRIDGE: OnceLock<Result<Bridge>> = OnceLock::new();

/// A device tensor whose `n` bytes are one dense row-major run of its storage: its device context
/// and the run's device address (a copy to or from the host then moves them in one driver copy:
/// pinned host memory straight to or from the device, pageable memory through the driver's
/// staging buffer).
fn dense_run(t: &Tensor, n: usize) -> Option<(Arc<DeviceContext>, u64)> {
    if n == 0 || !t.is_contiguous() || t.numel() * t.dtype().size() != n {
        return None;
    }
    let storage = t.storage();
    let base = storage.device_ptr()?;
    Some((storage.device_ctx()?.clone(), base + (t.storage_offset() * t.dtype().size()) as u64))
}

/// Set in a forked child of a process whose runtime ran ([`mark_forked`]).
static FORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks this process as a fork: the bridge refuses every later call ([`BridgeError::Forked`]).
pub fn mark_forked() {
    FORKED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process is a fork of one whose runtime ran.
pub fn forked() -> bool {
    FORKED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Live pinned host allocations: address -> size.
static PINNED: Mutex<std::collections::BTreeMap<usize, usize>> = Mutex::new(std::collections::BTreeMap::new());

fn lock_pinned() -> std::sync::MutexGuard<'static, std::collections::BTreeMap<usize, usize>> {
    PINNED.lock().unwrap_or_else(|p| p.into_inner())
}

impl Bridge {
    /// The process's bridge: the simulated device's runtime (configured from the environment:
    /// `XIRANG_SIM_DEVICES`, `XIRANG_SIM_CAPACITY_BYTES`), `XIRANG_VISIBLE_DEVICES`, and the
    /// runtime's host tier handed to PyTorch ([`HostFallback::Decline`]).
    pub fn get() -> Result<&'static Bridge> {
        BRIDGE
            .get_or_init(|| {
                device_threads();
                let rt = Runtime::simulator()?;
                dispatch::set_host_fallback(HostFallback::Decline);
                let visible = Visible::from_env(rt.device_count());
                Ok(Bridge { rt, visible })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// `size` bytes of the driver's page-locked host memory (PyTorch's pinned memory): its address.
    pub fn host_alloc(&self, size: usize) -> Result<usize> {
        let addr = self.rt.driver().malloc_host(size.max(1))?;
        lock_pinned().insert(addr, size.max(1));
        Ok(addr)
    }

    /// Frees what [`Bridge::host_alloc`] returned.
    pub fn host_free(&self, addr: usize) -> Result<()> {
        lock_pinned().remove(&addr);
        Ok(self.rt.driver().free_host(addr)?)
    }

    /// Whether `addr` lies inside pinned memory of [`Bridge::host_alloc`] (`Tensor.is_pinned`).
    pub fn is_pinned(addr: usize) -> bool {
        lock_pinned().range(..=addr).next_back().is_some_and(|(&start, &size)| addr < start + size)
    }
    pub fn visible(&self) -> &Visible {
        &self.visible
    }
    /// Devices PyTorch sees.
    pub fn device_count(&self) -> usize {
        self.visible.count()
    }

    /// The context of PyTorch's device `index`.
    pub fn context(&self, index: i64) -> Result<&Arc<DeviceContext>> {
        Ok(self.rt.device(self.visible.runtime(index)?)?)
    }

    /// PyTorch's index of a runtime device (-1: CPU).
    pub fn torch_index(&self, d: Device) -> Result<i64> {
        match d {
            Device::Cpu => Ok(-1),
            Device::Npu(r) => self.visible.torch(r).map(|i| i as i64).ok_or_else(|| {
                BridgeError::Abi(format!("runtime device {r} is not visible to PyTorch ({:?})", self.visible))
            }),
        }
    }

    /// The calling thread's current device.
    pub fn current_device(&self) -> usize {
        devices::current()
    }

    /// Sets the calling thread's current device.
    pub fn set_device(&self, index: i64) -> Result<()> {
        self.context(index)?;
        devices::set_current(index as usize);
        Ok(())
    }

    /// `nbytes` of device memory on device `index` from the caching allocator.
    pub fn allocate(&self, index: i64, nbytes: usize) -> Result<Storage> {
        Ok(Storage::allocate(self.context(index)?, nbytes)?)
    }

    /// Runs the operator `OPERATORS[index]` of the generated table (the shim looks each operator
    /// up once by name, `generated::ops::operator_index`) through the generated boxed entry with
    /// the adapter's kernels. An operator on the force-fallback list, or one the runtime would
    /// have to run on its host tier, is declined: PyTorch's CPU kernel runs it. An operator PyTorch
    /// has no CPU kernel for (`convolution_overrideable`) is not declined when forced: the
    /// generated front-end runs its host implementation, its fallback tier.
    pub fn call_at(&self, index: usize, args: &[IValue]) -> Result<Vec<IValue>> {
        let Some(op) = xirang_runtime::generated::ops::OPERATORS.get(index) else {
            return Err(BridgeError::Abi(format!("operator index {index} is out of range")));
        };
        if dispatch::forced_fallback(op)
            && !xirang_runtime::generated::ops::fallback::ACCELERATOR_ONLY_HOST.contains(op)
        {
            return Err(BridgeError::Declined(format!("{op} is on the force-fallback list")));
        }
        Ok(xirang_runtime::generated::ops::call_boxed_at(&NpuOps, index, args)?)
    }

    /// `dst.copy_(src)` between two runtime tensors (broadcast, dtype cast, any devices): the
    /// device's copy kernel when it takes them, else through the host.
    pub fn copy(&self, dst: &Tensor, src: &Tensor) -> Result<()> {
        if !dst.is_cpu() && !src.is_cpu() && dst.device() == src.device() {
            let args = [IValue::from(dst), IValue::from(src), IValue::Bool(false)];
            match xirang_runtime::generated::ops::call_boxed(&NpuOps, "copy_", &args) {
                Ok(_) => return Ok(()),
                Err(xirang_runtime::Error::Declined(_) | xirang_runtime::Error::Unsupported(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(xirang_runtime::reference::copy_into_view(dst, src)?)
    }

    /// The elements of the `xirang` tensor `t` in row-major order into `out` (exactly numel * itemsize
    /// bytes), after the work queued on the current stream.
    pub fn read_elements(&self, t: &Tensor, out: &mut [u8]) -> Result<()> {
        if let Some((ctx, addr)) = dense_run(t, out.len()) {
            ctx.driver().memcpy_d2h_async(ctx.physical_id(), out, addr, ctx.current_stream())?;
            xirang_runtime::observe::on_copy(xirang_runtime::observe::CopyDir::DeviceToHost, out.len());
            return Ok(());
        }
        let b = t.gather_bytes()?;
        if b.len() != out.len() {
            return Err(BridgeError::Abi(format!("reading {} bytes into a {}-byte buffer", b.len(), out.len())));
        }
        out.copy_from_slice(&b);
        Ok(())
    }

    /// `bytes` (the elements of `dst` in row-major order, same dtype) into the `xirang` tensor `dst`
    /// (any strides), in order on the current stream.
    pub fn write_elements(&self, dst: &Tensor, bytes: &[u8]) -> Result<()> {
        if bytes.len() != dst.numel() * dst.dtype().size() {
            return Err(BridgeError::Abi(format!(
                "writing {} bytes into {} elements of {}",
                bytes.len(),
                dst.numel(),
                dst.dtype()
            )));
        }
        if let Some((ctx, addr)) = dense_run(dst, bytes.len()) {
            ctx.driver().memcpy_h2d_async(ctx.physical_id(), addr, bytes, ctx.current_stream())?;
            xirang_runtime::observe::on_copy(xirang_runtime::observe::CopyDir::HostToDevice, bytes.len());
            return Ok(());
        }
        let host = Tensor::from_bytes(bytes.to_vec(), dst.sizes(), dst.dtype())?;
        self.copy(dst, &host)
    }

    /// Bytes at a raw device address of device `index` (no storage handle names it), after the
    /// device's queued work; the driver checks the range against its allocations.
    pub fn read_address(&self, index: i64, addr: u64, out: &mut [u8]) -> Result<()> {
        let ctx = self.context(index)?;
        ctx.synchronize()?;
        Ok(ctx.driver().memcpy_d2h(ctx.physical_id(), out, addr)?)
    }
    /// Writes bytes at a raw device address of device `index`, after the device's queued work.
    pub fn write_address(&self, index: i64, addr: u64, bytes: &[u8]) -> Result<()> {
        let ctx = self.context(index)?;
        ctx.synchronize()?;
        Ok(ctx.driver().memcpy_h2d(ctx.physical_id(), addr, bytes)?)
    }

    /// The current stream of PyTorch's device `index` for the calling thread.
    pub fn current_stream(&self, index: i64) -> Result<StreamId> {
        Ok(self.context(index)?.current_stream())
    }
    pub fn set_current_stream(&self, index: i64, s: StreamId) -> Result<()> {
        self.context(index)?.set_current_stream(s);
        Ok(())
    }
    /// A new stream on device `index`.
    pub fn new_stream(&self, index: i64) -> Result<StreamId> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().create_stream(ctx.physical_id())?)
    }
    pub fn synchronize_stream(&self, index: i64, s: StreamId) -> Result<()> {
        let ctx = self.context(index)?;
        ctx.driver().synchronize_stream(ctx.physical_id(), s)?;
        ctx.driver().collect_finished();
        Ok(())
    }
    pub fn synchronize_device(&self, index: i64) -> Result<()> {
        Ok(self.context(index)?.synchronize()?)
    }
    pub fn create_event(&self, index: i64) -> Result<EventId> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().create_event(ctx.physical_id())?)
    }
    pub fn record_event(&self, index: i64, e: EventId, s: StreamId) -> Result<()> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().record_event(ctx.physical_id(), e, s)?)
    }
    pub fn stream_wait_event(&self, index: i64, s: StreamId, e: EventId) -> Result<()> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().stream_wait_event(ctx.physical_id(), s, e)?)
    }
    pub fn synchronize_event(&self, index: i64, e: EventId) -> Result<()> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().synchronize_event(ctx.physical_id(), e)?)
    }
    /// Whether the work recorded before `e` has completed, without waiting.
    pub fn query_event(&self, index: i64, e: EventId) -> Result<bool> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().query_event(ctx.physical_id(), e)?)
    }
    pub fn event_elapsed_ms(&self, index: i64, a: EventId, b: EventId) -> Result<f32> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().event_elapsed_ms(ctx.physical_id(), a, b)?)
    }
    pub fn destroy_event(&self, index: i64, e: EventId) -> Result<()> {
        let ctx = self.context(index)?;
        Ok(ctx.driver().destroy_event(ctx.physical_id(), e)?)
    }
}

/// The simulated device computes on rayon's global pool, on the host's cores, beside PyTorch's
/// own thread. `XIRANG_SIM_THREADS` sizes the pool (rayon's `RAYON_NUM_THREADS` works too; by
/// default one thread per core). Set once, before the first kernel.
fn device_threads() {
    let n = std::env::var("XIRANG_SIM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n > 0);
    if let Some(n) = n {
        // an error means the pool already exists (an embedding program built it): it stays
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
    }
}

/// At most this many distinct operator names are counted (PyTorch has about 3,000 overloads).
const MAX_COUNTED_OPERATORS: usize = 1 << 16;

/// The runtime's counters key on `&'static str`: PyTorch's operator names are interned once each.
fn intern(op: &str) -> Result<&'static str> {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut g = NAMES.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = g.get(op) {
        return Ok(n);
    }
    if g.len() >= MAX_COUNTED_OPERATORS {
        return Err(BridgeError::Abi(format!("more than {MAX_COUNTED_OPERATORS} distinct operator names")));
    }
    let n: &'static str = Box::leak(op.to_string().into_boxed_str());
    g.insert(n);
    Ok(n)
}

/// PyTorch is about to run `op` on its CPU kernels: the runtime's policy decides (error mode:
/// an error naming the operator; warn once; alert at the threshold) and the call is counted on
/// the fallback tier of the runtime's counters.
pub fn admit_fallback(op: &str) -> Result<()> {
    let op = intern(op)?;
    dispatch::admit_fallback(op).map_err(|e| match e {
        xirang_runtime::Error::Unsupported(m) => BridgeError::FallbackForbidden(m),
        e => e.into(),
    })?;
    dispatch::record(op, Tier::Fallback);
    Ok(())
}

/// Sets the fallback mode, keeping the rest of the policy.
pub fn set_fallback_mode(mode: FallbackMode) {
    let mut p = dispatch::policy();
    p.mode = mode;
    dispatch::set_policy(p);
}

/// Sets the force-fallback list (qualified or base operator names).
pub fn set_force_fallback(ops: &str) {
    let mut p = dispatch::policy();
    p.force_fallback = ops.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    dispatch::set_policy(p);
}

/// Sets the alert threshold.
pub fn set_alert_threshold(n: u64) {
    let mut p = dispatch::policy();
    p.alert_threshold = n;
    dispatch::set_policy(p);
}

/// The runtime's per-operator tier counters as JSON: `{"op": {"native": n, "recipe": n,
/// "fallback": n}, ...}`, sorted by operator.
pub fn counters_json() -> String {
    let mut m = serde_json::Map::new();
    for (op, c) in dispatch::counters() {
        let mut e = serde_json::Map::new();
        e.insert("native".into(), c.native.into());
        e.insert("recipe".into(), c.recipe.into());
        e.insert("fallback".into(), c.fallback.into());
        m.insert(op.to_string(), e.into());
    }
    serde_json::Value::Object(m).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_are_shared() {
        let a = intern("xirang_bridge_test.intern").unwrap();
        let b = intern(&String::from("xirang_bridge_test.intern")).unwrap();
        assert!(std::ptr::eq(a, b));
    }
}
