//! Native device kernels: the "native kernel library" tier. Each kernel
//! runs on the tensor's device stream through [`Driver::launch_kernel`] and
//! touches device memory only through [`KernelMemory`]. Ops without a
//! native kernel (or called with arguments a kernel does not take: other
//! dtypes, mixed dtypes, host tensors) use the host reference
//! implementations in [`crate::reference`] through the CPU fallback.
//!
//! Kernel functions take the typed arguments of the schema table in
//! [`crate::ivalue`] (`self` is `self_`) and return `Result<Tensor>`.
//! Floating kernels compute in `f32` for f32/f16/bf16 (PyTorch's op-math
//! type) and in `f64` for f64; inner loops run over contiguous slices and
//! split into rayon tasks above [`PAR_MIN`] elements. Inputs that are not
//! contiguous get an explicit contiguous copy on the device first
//! ([`contiguous`]). Zero-dim tensors are handled as one-element tensors.
//!
//! * [`elementwise`]: arithmetic, comparisons, activations and their
//!   backward, where, masked_fill, dropout.
//! * [`matmul`]: mm, bmm, addmm, baddbmm, addmv.
//! * [`reduce`]: sum, mean, amax.
//! * [`nn`]: softmax / log_softmax and backward, layer norm and backward,
//!   embedding and dense backward, nll_loss and mse_loss forward/backward.
//! * [`rnn`]: the fused LSTM and GRU cells and their backward (no CPU kernel exists for them).
//! * [`index`]: cat, index_select, gather, tril, triu, the strided copy.
//! * [`npu_ops`]: the adapter type, its backward hooks, views and `clone`.
//!
//! A kernel is a function marked `/// xirang-kernel: <op>` taking the operator's typed arguments
//! in schema order; `xirang-scan generate` attaches it as the operator's `AtenOps` method
//! (`generated/native.rs`). It declines arguments it does not take with `Error::Unsupported`
//! and the generated front-end runs the CPU fallback instead.
//!
//! [`Driver::launch_kernel`]: crate::driver::Driver::launch_kernel
//! [`KernelMemory`]: crate::driver::KernelMemory

pub mod conv;
pub mod elementwise;
pub mod index;
pub mod matmul;
pub mod nn;
pub mod norm;
pub mod npu_ops;
pub mod pool;
pub mod reduce;
pub mod rnn;

pub use elementwise::*;
pub use index::*;
pub use matmul::*;
pub use nn::*;
pub use npu_ops::NpuOps;
pub use reduce::*;

/// Operators served by a native kernel (the marked functions `generated/native.rs` attaches),
/// sorted.
pub fn operators() -> Vec<&'static str> {
    crate::generated::native::OPERATORS.to_vec()
}

/// Whether `op` (a qualified name) has a native kernel.
pub fn is_native(op: &str) -> bool {
    crate::generated::native::OPERATORS.binary_search(&op).is_ok()
}

use std::sync::Arc;

use half::{bf16, f16};

use crate::device::DeviceContext;
use crate::driver::acl::{Plain, bytes_of, bytes_of_mut, typed, typed_mut};
use crate::driver::{DevicePtr, KernelMemory};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Element count above which kernel loops split into rayon tasks. The simulated device computes
/// on the host's cores, beside the program that drives it (PyTorch's Python thread, the stream
/// worker): below a quarter of a million elements, waking pool threads costs more than it saves,
/// and their spinning takes the core the host thread issues the next operator on (measured inside
/// PyTorch on 2 cores: an MLP training step of 64x512 activations 1.3x slower at 32,768 elements
/// than at this threshold, an add of 1M elements 1.3x faster in parallel than alone).
pub const PAR_MIN: usize = 1 << 18;

/// Runs `f` on every item, in parallel when there are several: the work-sharing loop of the
/// in-place elementwise kernels.
///
/// On a thread of rayon's pool this is a plain parallel iterator. On any other thread (a stream
/// worker of the simulated device) the calling thread takes items itself next to `threads - 1`
/// helpers spawned on the pool, all draining one shared counter, as the master thread of an OpenMP
/// `parallel for` does. A parallel iterator started there would instead hand every item to the
/// pool and put the caller to sleep until the last one is done: one more thread wake-up per kernel
/// and one core fewer doing the work.
pub fn par_items<I: Send>(items: Vec<I>, f: impl Fn(I) + Sync + Send) {
    use rayon::prelude::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    if items.len() < 2 {
        items.into_iter().for_each(f);
        return;
    }
    if rayon::current_thread_index().is_some() {
        items.into_par_iter().for_each(f);
        return;
    }
    let slots: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let next = AtomicUsize::new(0);
    let drain = || {
        while let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) {
            // Each slot is taken once: the counter hands every index to one thread.
            let item = match slot.lock() {
                Ok(mut g) => g.take(),
                Err(p) => p.into_inner().take(),
            };
            if let Some(i) = item {
                f(i);
            }
        }
    };
    // the pool's threads less one: the calling thread works too (a pool of one: it works alone)
    let helpers = rayon::current_num_threads().saturating_sub(1).min(slots.len() - 1);
    if helpers == 0 {
        slots.into_iter().filter_map(|s| s.into_inner().unwrap_or_else(|p| p.into_inner())).for_each(f);
        return;
    }
    rayon::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| drain());
        }
        drain();
    });
}

/// Result size from which [`mapped`] works in place on device memory: below it, copying the
/// operands costs less than mapping them (resolving and locking each allocation).
pub const MAP_MIN: usize = 1 << 12;

pub(crate) fn unsupported<T>(name: &str, why: impl std::fmt::Display) -> Result<T> {
    Err(Error::Unsupported(format!("{name}: {why}")))
}

/// The common device of `ts` (all must be on one device).
pub(crate) fn device_of(name: &str, ts: &[&Tensor]) -> Result<Arc<DeviceContext>> {
    let Some(first) = ts.first() else { return unsupported(name, "no tensor arguments") };
    let first =
        first.device_ctx().ok_or_else(|| Error::Unsupported(format!("{name}: native kernels need device tensors")))?;
    for t in ts {
        match t.device_ctx() {
            Some(c) if Arc::ptr_eq(c, first) => {}
            _ => {
                return Err(Error::DeviceMismatch(format!("{name}: all tensors must be on {}", first.device())));
            }
        }
    }
    Ok(first.clone())
}

/// Launches `body` on the device's current stream. `keep` holds the
/// tensors whose storage the kernel touches until it has run.
pub(crate) fn launch<K: std::borrow::Borrow<Tensor>>(
    ctx: &Arc<DeviceContext>,
    keep: impl IntoIterator<Item = K>,
    mut body: impl FnMut(&dyn KernelMemory) -> Result<()> + Send + 'static,
) -> Result<()> {
    // Finished kernels are dropped here, on the launching thread, a batch at a time.
    ctx.driver.collect_finished_batch();
    let stream = ctx.current_stream();
    // Stream-ordered reuse, as CUDA's caching allocator: a block of this stream that the host
    // frees goes back to this stream's cache at once, because whatever is allocated from it next
    // is used by work queued after this kernel. Only tensors of other streams (or devices) stay
    // alive with the kernel. Without this, a loop that outruns the device holds one result per
    // queued kernel (up to the queue depth: a working set no cache holds) where PyTorch's CUDA
    // allocator holds one.
    // collected from an iterator of handles or borrows: no allocation, and no handle cloned, when
    // every tensor is stream-ordered (the usual case)
    let keep: Vec<Tensor> = keep
        .into_iter()
        .filter(|t| !t.borrow().is_stream_ordered_on(ctx, stream))
        .map(|t| t.borrow().clone())
        .collect();
    crate::profile::on_launch(ctx, stream);
    ctx.driver.launch_kernel(
        ctx.physical_id(),
        stream,
        Box::new(move |mem| {
            // `keep` (what is left of it) lives as long as the kernel box: until the driver hands
            // the finished kernel back ([`Driver::collect_finished`]).
            let _ = &keep;
            body(mem)
        }),
    )
}

/// Runs `f(inputs, out)` directly on device memory when the driver maps it
/// ([`KernelMemory::with_mapped`]): `inputs` are `(address, element count)` ranges of `T`, `out`
/// the result's range. No copies: this is how a kernel on a real device touches its operands.
/// `Ok(false)` when nothing ran (a result smaller than [`MAP_MIN`], the driver does not map, a
/// range is empty or misaligned for `T`, or the output overlaps an input): the caller then copies
/// through `read` / `write`.
pub(crate) fn mapped<T: Plain>(
    mem: &dyn KernelMemory,
    inputs: &[(DevicePtr, usize)],
    out: (DevicePtr, usize),
    f: impl FnOnce(&[&[T]], &mut [T]),
) -> Result<bool> {
    if out.1 < MAP_MIN {
        return Ok(false);
    }
    let size = std::mem::size_of::<T>();
    let reads: Vec<(DevicePtr, usize)> = inputs.iter().map(|&(p, n)| (p, n * size)).collect();
    let mut f = Some(f);
    let mut ran = false;
    let ok = mem.with_mapped(&reads, &[(out.0, out.1 * size)], &mut |ins, outs| {
        let Some(xs) = ins.iter().map(|b| typed::<T>(b)).collect::<Option<Vec<&[T]>>>() else { return };
        let Some(o) = outs.get_mut(0).and_then(|b| typed_mut::<T>(b)) else { return };
        if let Some(f) = f.take() {
            f(&xs, o);
            ran = true;
        }
    })?;
    Ok(ok && ran)
}

/// Reads `n` plain elements at `ptr`.
pub(crate) fn read_vec<T: Plain>(mem: &dyn KernelMemory, ptr: DevicePtr, n: usize) -> Result<Vec<T>> {
    let mut v = vec![T::default(); n];
    if n > 0 {
        mem.read(ptr, bytes_of_mut(&mut v))?;
    }
    Ok(v)
}

/// Writes plain elements at `ptr`.
pub(crate) fn write_slice<T: Plain>(mem: &dyn KernelMemory, ptr: DevicePtr, v: &[T]) -> Result<()> {
    if v.is_empty() { Ok(()) } else { mem.write(ptr, bytes_of(v)) }
}

/// A floating compute type (`f32` or `f64`) and its storage dtypes.
pub trait Real:
    Plain
    + ndarray::LinalgScalar
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::iter::Sum
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn gauss_erf(self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    /// Reads `n` elements stored as `dtype` into compute values.
    fn load(mem: &dyn KernelMemory, ptr: DevicePtr, n: usize, dtype: DType) -> Result<Vec<Self>>;
    /// Stores compute values as `dtype` (rounded once).
    fn store(mem: &dyn KernelMemory, ptr: DevicePtr, v: &[Self], dtype: DType) -> Result<()>;
}

fn halves<T>(v: &[u16], dtype: DType, f: impl Fn(f32) -> T) -> Vec<T> {
    if dtype == DType::F16 {
        v.iter().map(|b| f(f16::from_bits(*b).to_f32())).collect()
    } else {
        v.iter().map(|b| f(bf16::from_bits(*b).to_f32())).collect()
    }
}

fn to_halves(v: impl Iterator<Item = f32>, dtype: DType) -> Vec<u16> {
    if dtype == DType::F16 {
        v.map(|x| f16::from_f32(x).to_bits()).collect()
    } else {
        v.map(|x| bf16::from_f32(x).to_bits()).collect()
    }
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn ln(self) -> f32 {
        f32::ln(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn tanh(self) -> f32 {
        f32::tanh(self)
    }
    fn gauss_erf(self) -> f32 {
        libm::erff(self)
    }
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn load(mem: &dyn KernelMemory, ptr: DevicePtr, n: usize, dtype: DType) -> Result<Vec<f32>> {
        match dtype {
            DType::F32 => read_vec(mem, ptr, n),
            DType::F16 | DType::BF16 => Ok(halves(&read_vec::<u16>(mem, ptr, n)?, dtype, |x| x)),
            other => unsupported("kernel", format!("cannot load {other} as float32")),
        }
    }
    fn store(mem: &dyn KernelMemory, ptr: DevicePtr, v: &[f32], dtype: DType) -> Result<()> {
        match dtype {
            DType::F32 => write_slice(mem, ptr, v),
            DType::F16 | DType::BF16 => write_slice(mem, ptr, &to_halves(v.iter().copied(), dtype)),
            other => unsupported("kernel", format!("cannot store float32 as {other}")),
        }
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn ln(self) -> f64 {
        f64::ln(self)
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn tanh(self) -> f64 {
        f64::tanh(self)
    }
    fn gauss_erf(self) -> f64 {
        libm::erf(self)
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn load(mem: &dyn KernelMemory, ptr: DevicePtr, n: usize, dtype: DType) -> Result<Vec<f64>> {
        match dtype {
            DType::F64 => read_vec(mem, ptr, n),
            other => unsupported("kernel", format!("cannot load {other} as float64")),
        }
    }
    fn store(mem: &dyn KernelMemory, ptr: DevicePtr, v: &[f64], dtype: DType) -> Result<()> {
        match dtype {
            DType::F64 => write_slice(mem, ptr, v),
            other => unsupported("kernel", format!("cannot store float64 as {other}")),
        }
    }
}

/// Whether native float kernels take `d`.
pub(crate) fn is_real(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// Runs `$body` with `$T` bound to the compute type of float dtype `$d`.
macro_rules! with_real {
    ($name:expr, $d:expr, $T:ident => $body:expr) => {
        match $d {
            $crate::dtype::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::dtype::DType::F32 | $crate::dtype::DType::F16 | $crate::dtype::DType::BF16 => {
                type $T = f32;
                $body
            }
            other => $crate::kernels::unsupported($name, format!("dtype {other} has no native kernel")),
        }
    };
}
pub(crate) use with_real;

/// Reads `n` integers stored as `dtype` (i64, i32, bool/u8, i8, i16) as i64.
pub(crate) fn load_int(mem: &dyn KernelMemory, ptr: DevicePtr, n: usize, dtype: DType) -> Result<Vec<i64>> {
    Ok(match dtype {
        DType::I64 => read_vec(mem, ptr, n)?,
        DType::I32 => read_vec::<i32>(mem, ptr, n)?.into_iter().map(i64::from).collect(),
        DType::I16 => read_vec::<i16>(mem, ptr, n)?.into_iter().map(i64::from).collect(),
        DType::I8 => read_vec::<i8>(mem, ptr, n)?.into_iter().map(i64::from).collect(),
        DType::U8 | DType::Bool => read_vec::<u8>(mem, ptr, n)?.into_iter().map(i64::from).collect(),
        other => return unsupported("kernel", format!("cannot load {other} as an integer")),
    })
}

/// Stores i64 values as integer `dtype` (wrapping, like a C++ cast).
pub(crate) fn store_int(mem: &dyn KernelMemory, ptr: DevicePtr, v: &[i64], dtype: DType) -> Result<()> {
    match dtype {
        DType::I64 => write_slice(mem, ptr, v),
        DType::I32 => write_slice(mem, ptr, &v.iter().map(|x| *x as i32).collect::<Vec<_>>()),
        DType::I16 => write_slice(mem, ptr, &v.iter().map(|x| *x as i16).collect::<Vec<_>>()),
        DType::I8 => write_slice(mem, ptr, &v.iter().map(|x| *x as i8).collect::<Vec<_>>()),
        DType::U8 => write_slice(mem, ptr, &v.iter().map(|x| *x as u8).collect::<Vec<_>>()),
        DType::Bool => write_slice(mem, ptr, &v.iter().map(|x| u8::from(*x != 0)).collect::<Vec<_>>()),
        other => unsupported("kernel", format!("cannot store integers as {other}")),
    }
}

/// A contiguous device tensor with `t`'s values: `t` itself (borrowed, no new handle) when it is
/// already contiguous, else a copy made by the device's strided-copy kernel
/// ([`index::strided_copy`]).
pub fn contiguous(t: &Tensor) -> Result<std::borrow::Cow<'_, Tensor>> {
    use std::borrow::Cow;
    if t.is_contiguous() { Ok(Cow::Borrowed(t)) } else { index::strided_copy(t).map(Cow::Owned) }
}

/// Whether `add_f32` can run natively on these inputs.
pub fn add_f32_supported(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == DType::F32
        && b.dtype() == DType::F32
        && a.sizes() == b.sizes()
        && a.is_contiguous()
        && b.is_contiguous()
        && !a.is_cpu()
        && !b.is_cpu()
}

/// `a + alpha * b` for contiguous float32 device tensors of equal shape
/// (the first native kernel; [`add_tensor`] is the general one).
pub fn add_f32(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if !add_f32_supported(a, b) {
        return Err(Error::Unsupported("add_f32: needs contiguous float32 device tensors of equal shape".into()));
    }
    add_tensor(a, b, alpha)
}
