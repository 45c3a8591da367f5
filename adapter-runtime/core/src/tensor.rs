//! Tensors: storage (host or device) plus sizes, strides, storage offset
//! and dtype. Views share storage; nothing here copies unless it says so.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use half::{bf16, f16};

use crate::device::{Block, Device, DeviceContext};
use crate::dtype::{DType, Scalar, load_f64, load_i64, store_f64, store_i64};
use crate::error::{Error, Result, arg_err, dtype_err, index_err, shape_err};
use crate::runtime::Runtime;
use crate::shape;

/// Where the bytes are.
pub enum StorageData {
    Host(RwLock<Vec<u8>>),
    Device(Block),
}

/// Reference-counted untyped storage (opaque outside the runtime: see [`Storage::into_arc`]).
pub struct StorageImpl {
    pub data: StorageData,
    pub nbytes: usize,
    /// Version counter shared by every view of the storage: bumped by in-place writes, read by
    /// autograd to detect saved tensors modified before backward (as PyTorch's).
    pub version: std::sync::atomic::AtomicU64,
}

impl StorageImpl {
    pub fn new(data: StorageData, nbytes: usize) -> StorageImpl {
        StorageImpl { data, nbytes, version: std::sync::atomic::AtomicU64::new(0) }
    }
}

/// A shared handle on a tensor's storage, for an embedding framework that keeps tensors of its own
/// (PyTorch through `xirang-bridge`): it holds the storage alive, and views of it are built with
/// [`Tensor::from_storage`] without copying. Cloning it clones a reference count.
#[derive(Clone)]
pub struct Storage(Arc<StorageImpl>);

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes, {})", self.0.nbytes, self.device())
    }
}

impl Storage {
    /// `nbytes` of device memory from the device's caching allocator (on the calling thread's
    /// current stream). The bytes are not initialized.
    pub fn allocate(ctx: &Arc<DeviceContext>, nbytes: usize) -> Result<Storage> {
        let block = ctx.allocate(nbytes)?;
        Ok(Storage(Arc::new(StorageImpl::new(StorageData::Device(block), nbytes))))
    }
    /// A host storage holding `bytes`.
    pub fn from_host_bytes(bytes: Vec<u8>) -> Storage {
        Storage(host_storage(bytes))
    }
    /// Size in bytes (as requested; the device block may be larger).
    pub fn nbytes(&self) -> usize {
        self.0.nbytes
    }
    /// Where the bytes are.
    pub fn device(&self) -> Device {
        match &self.0.data {
            StorageData::Host(_) => Device::Cpu,
            StorageData::Device(b) => b.ctx.device(),
        }
    }
    /// The device address of the first byte (`None` for host storage). An address, never
    /// dereferenced by the host: device memory is reached only through the driver.
    pub fn device_ptr(&self) -> Option<crate::driver::DevicePtr> {
        match &self.0.data {
            StorageData::Device(b) => Some(b.ptr),
            StorageData::Host(_) => None,
        }
    }
    /// The device context of device storage.
    pub fn device_ctx(&self) -> Option<&Arc<DeviceContext>> {
        match &self.0.data {
            StorageData::Device(b) => Some(&b.ctx),
            StorageData::Host(_) => None,
        }
    }
    /// Bytes `[lo, hi)` of host storage (`None` for device storage or a range outside it).
    pub fn host_bytes(&self, lo: usize, hi: usize) -> Option<Vec<u8>> {
        match &self.0.data {
            StorageData::Host(l) => read_lock(l).get(lo..hi).map(<[u8]>::to_vec),
            StorageData::Device(_) => None,
        }
    }
    /// Whether two handles name the same storage.
    pub fn ptr_eq(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The reference-counted allocation behind the handle, for a C ABI that passes storages as
    /// one pointer (`Arc::into_raw`) instead of boxing a `Storage`: `xirang-bridge`'s handles.
    pub fn into_arc(self) -> Arc<StorageImpl> {
        self.0
    }
    /// The handle of an allocation [`Storage::into_arc`] gave out.
    pub fn from_arc(a: Arc<StorageImpl>) -> Storage {
        Storage(a)
    }
    /// The allocation behind the handle, borrowed.
    pub fn as_arc(&self) -> &Arc<StorageImpl> {
        &self.0
    }
}

/// A strided view of a storage.
pub struct Tensor {
    pub(crate) storage: Arc<StorageImpl>,
    pub(crate) sizes: shape::Dims,
    pub(crate) strides: shape::Dims,
    pub(crate) offset: usize,
    pub(crate) dtype: DType,
    /// Autograd metadata (`None`: does not require grad; `autograd::AutogradMeta`, which only
    /// `autograd` reads and writes). Shared by clones of this handle, not by views made with the
    /// methods below (views recorded by autograd get their own).
    pub(crate) autograd: Attached,
    /// Forward-mode tangent (`None`: not dual; `forward_ad::Tangent`, which only `forward_ad` reads
    /// and writes). Shared by clones of this handle, not by views made with the methods below.
    pub(crate) tangent: Attached,
}

impl Tensor {
    /// Autograd's slot (only `xirang_runtime::autograd` reads and writes it).
    pub fn autograd_slot(&self) -> &Attached {
        &self.autograd
    }
    /// Sets autograd's slot.
    pub fn set_autograd_slot(&mut self, v: Attached) {
        self.autograd = v;
    }
    /// Forward-mode autograd's slot (only `xirang_runtime::autograd::forward` reads and writes it).
    pub fn tangent_slot(&self) -> &Attached {
        &self.tangent
    }
    /// Sets forward-mode autograd's slot.
    pub fn set_tangent_slot(&mut self, v: Attached) {
        self.tangent = v;
    }
}

/// What a higher layer attaches to a tensor handle (autograd's metadata, a forward-mode tangent),
/// untyped here as PyTorch's `TensorImpl` holds an `AutogradMetaInterface`: the autograd engine
/// depends on `tensor`, `tensor` does not depend on the engine. Each slot has one owner module,
/// which keeps one type in it and reads it back with `downcast_ref`.
pub type Attached = Option<Arc<dyn std::any::Any + Send + Sync>>;

/// The one storage of every undefined tensor.
fn undefined_storage() -> &'static Arc<StorageImpl> {
    static U: std::sync::OnceLock<Arc<StorageImpl>> = std::sync::OnceLock::new();
    U.get_or_init(|| Tensor::empty(&[0], DType::F32).storage)
}

impl Clone for Tensor {
    /// A new handle: reference counts and an inline copy of sizes and strides, no allocation up
    /// to 5 dims (`SmallVec`'s own `clone` goes through `extend`, element by element).
    fn clone(&self) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            sizes: shape::Dims::from_slice(&self.sizes),
            strides: shape::Dims::from_slice(&self.strides),
            offset: self.offset,
            dtype: self.dtype,
            autograd: self.autograd.clone(),
            tangent: self.tangent.clone(),
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(sizes={:?}, strides={:?}, offset={}, dtype={}, device={})",
            self.sizes,
            self.strides,
            self.offset,
            self.dtype,
            self.device()
        )
    }
}

/// Rust element types that map to a [`DType`].
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    fn write_le(self, out: &mut Vec<u8>);
    fn read_le(b: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(a)
            }
        }
    };
}
element!(f32, DType::F32);
element!(f64, DType::F64);
element!(f16, DType::F16);
element!(bf16, DType::BF16);
element!(i64, DType::I64);
element!(i32, DType::I32);
element!(i16, DType::I16);
element!(i8, DType::I8);
element!(u8, DType::U8);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(b: &[u8]) -> Self {
        b[0] != 0
    }
}

fn host_storage(bytes: Vec<u8>) -> Arc<StorageImpl> {
    let nbytes = bytes.len();
    Arc::new(StorageImpl::new(StorageData::Host(RwLock::new(bytes)), nbytes))
}

fn read_lock(l: &RwLock<Vec<u8>>) -> RwLockReadGuard<'_, Vec<u8>> {
    l.read().unwrap_or_else(|p| p.into_inner())
}
fn write_lock(l: &RwLock<Vec<u8>>) -> RwLockWriteGuard<'_, Vec<u8>> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Tensor {
    /// Whether this tensor's memory is a block of `ctx`'s caching allocator allocated for
    /// `stream`. Work queued on that stream runs before any later use of the block (a freed block
    /// is handed only to allocations on its own stream, and the driver's free waits for the
    /// device), so a kernel launched there need not keep the tensor alive.
    pub fn is_stream_ordered_on(&self, ctx: &Arc<DeviceContext>, stream: crate::driver::StreamId) -> bool {
        match &self.storage.data {
            StorageData::Device(b) => b.size > 0 && b.stream == stream && Arc::ptr_eq(&b.ctx, ctx),
            StorageData::Host(_) => false,
        }
    }
    // ------------------------------------------------------------ creation

    /// A contiguous host tensor from raw little-endian bytes.
    pub fn from_bytes(bytes: Vec<u8>, sizes: &[usize], dtype: DType) -> Result<Tensor> {
        let n = shape::numel(sizes);
        if bytes.len() != n * dtype.size() {
            return shape_err(format!("{} bytes do not hold {n} elements of {dtype}", bytes.len()));
        }
        Ok(Tensor {
            storage: host_storage(bytes),
            sizes: shape::Dims::from_slice(sizes),
            strides: shape::contiguous_dims(sizes),
            offset: 0,
            dtype,
            autograd: None,
            tangent: None,
        })
    }

    /// A contiguous host tensor from a vector.
    pub fn from_vec<T: Element>(data: Vec<T>, sizes: &[usize]) -> Result<Tensor> {
        let mut bytes = Vec::with_capacity(data.len() * T::DTYPE.size());
        for v in data {
            v.write_le(&mut bytes);
        }
        Tensor::from_bytes(bytes, sizes, T::DTYPE)
    }

    /// A 1-D host tensor.
    pub fn from_slice<T: Element>(data: &[T]) -> Tensor {
        let n = data.len();
        // Cannot fail: the length matches by construction.
        Tensor::from_vec(data.to_vec(), &[n]).unwrap_or_else(|_| Tensor::empty(&[0], T::DTYPE))
    }

    /// A zero-dim host tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_vec(vec![v], &[]).unwrap_or_else(|_| Tensor::empty(&[], T::DTYPE))
    }

    /// A zero-dim host tensor holding a [`Scalar`] cast to `dtype`.
    pub fn scalar_of(v: Scalar, dtype: DType) -> Tensor {
        Tensor::full(&[], v, dtype)
    }

    /// Host tensor of f64 values cast to `dtype`.
    pub fn from_f64(data: &[f64], sizes: &[usize], dtype: DType) -> Result<Tensor> {
        if data.len() != shape::numel(sizes) {
            return shape_err(format!("{} values for shape {sizes:?}", data.len()));
        }
        let mut b = vec![0u8; data.len() * dtype.size()];
        for (i, &v) in data.iter().enumerate() {
            store_f64(&mut b, dtype, i, v);
        }
        Tensor::from_bytes(b, sizes, dtype)
    }

    /// Host tensor of i64 values cast to `dtype`.
    pub fn from_i64(data: &[i64], sizes: &[usize], dtype: DType) -> Result<Tensor> {
        if data.len() != shape::numel(sizes) {
            return shape_err(format!("{} values for shape {sizes:?}", data.len()));
        }
        let mut b = vec![0u8; data.len() * dtype.size()];
        for (i, &v) in data.iter().enumerate() {
            store_i64(&mut b, dtype, i, v);
        }
        Tensor::from_bytes(b, sizes, dtype)
    }

    /// Uninitialized-in-spirit (zeroed) host tensor.
    pub fn empty(sizes: &[usize], dtype: DType) -> Tensor {
        let n = shape::numel(sizes);
        Tensor {
            storage: host_storage(vec![0u8; n * dtype.size()]),
            sizes: shape::Dims::from_slice(sizes),
            strides: shape::contiguous_dims(sizes),
            offset: 0,
            dtype,
            autograd: None,
            tangent: None,
        }
    }

    /// PyTorch's undefined tensor (`at::Tensor()`): what an operator returns for a result it does
    /// not compute, such as a masked-off gradient of `native_layer_norm_backward`. Boxed, it is
    /// `IValue::None`. It has no elements; [`Tensor::is_undefined`] tells it apart.
    pub fn undefined() -> Tensor {
        let mut t = Tensor::empty(&[0], DType::F32);
        t.storage = undefined_storage().clone();
        t
    }

    /// Whether this is [`Tensor::undefined`].
    pub fn is_undefined(&self) -> bool {
        Arc::ptr_eq(&self.storage, undefined_storage())
    }

    pub fn zeros(sizes: &[usize], dtype: DType) -> Tensor {
        Tensor::empty(sizes, dtype)
    }

    pub fn ones(sizes: &[usize], dtype: DType) -> Tensor {
        Tensor::full(sizes, Scalar::Int(1), dtype)
    }

    pub fn full(sizes: &[usize], value: Scalar, dtype: DType) -> Tensor {
        let t = Tensor::empty(sizes, dtype);
        let n = t.numel();
        if let StorageData::Host(l) = &t.storage.data {
            let mut b = write_lock(l);
            for i in 0..n {
                store_scalar(&mut b, dtype, i, value);
            }
        }
        t
    }

    /// `torch.arange(n)` in `dtype`.
    pub fn arange(n: usize, dtype: DType) -> Tensor {
        let v: Vec<i64> = (0..n as i64).collect();
        Tensor::from_i64(&v, &[n], dtype).unwrap_or_else(|_| Tensor::empty(&[0], dtype))
    }

    // ------------------------------------------------------------ metadata

    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }
    pub fn storage_offset(&self) -> usize {
        self.offset
    }
    pub fn dim(&self) -> usize {
        self.sizes.len()
    }
    pub fn numel(&self) -> usize {
        shape::numel(&self.sizes)
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Size of dim `d` (negative wraps).
    pub fn size(&self, d: i64) -> Result<usize> {
        let d = shape::wrap_dim(d, self.dim())?;
        Ok(self.sizes.get(d).copied().unwrap_or(1))
    }
    pub fn is_contiguous(&self) -> bool {
        shape::is_contiguous(&self.sizes, &self.strides)
    }
    pub fn device(&self) -> Device {
        match &self.storage.data {
            StorageData::Host(_) => Device::Cpu,
            StorageData::Device(b) => b.ctx.device(),
        }
    }
    pub fn is_cpu(&self) -> bool {
        matches!(self.storage.data, StorageData::Host(_))
    }
    /// Whether two tensors view the same storage.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }
    /// Size of the underlying storage in bytes.
    pub fn storage_nbytes(&self) -> usize {
        self.storage.nbytes
    }
    /// The device context of a device tensor.
    pub fn device_ctx(&self) -> Option<&Arc<DeviceContext>> {
        match &self.storage.data {
            StorageData::Device(b) => Some(&b.ctx),
            StorageData::Host(_) => None,
        }
    }

    fn with_meta(&self, sizes: impl Into<shape::Dims>, strides: impl Into<shape::Dims>, offset: usize) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            sizes: sizes.into(),
            strides: strides.into(),
            offset,
            dtype: self.dtype,
            autograd: None,
            tangent: None,
        }
    }

    // ------------------------------------------------------------ views

    /// The storage this tensor views.
    pub fn storage(&self) -> Storage {
        Storage(self.storage.clone())
    }

    /// A view of `storage` (no copy), checked as [`Tensor::as_strided`] checks: every element the
    /// view reaches lies inside the storage.
    pub fn from_storage(
        storage: &Storage,
        sizes: &[usize],
        strides: &[usize],
        offset: usize,
        dtype: DType,
    ) -> Result<Tensor> {
        let base = Tensor {
            storage: storage.0.clone(),
            sizes: shape::Dims::new(),
            strides: shape::Dims::new(),
            offset: 0,
            dtype,
            autograd: None,
            tangent: None,
        };
        base.check_view(sizes, strides, offset)?;
        Ok(Tensor { sizes: shape::Dims::from_slice(sizes), strides: shape::Dims::from_slice(strides), offset, ..base })
    }

    /// `Tensor.as_strided`: checks that the view stays inside the storage.
    pub fn as_strided(&self, sizes: &[usize], strides: &[usize], offset: usize) -> Result<Tensor> {
        self.check_view(sizes, strides, offset)?;
        Ok(self.with_meta(shape::Dims::from_slice(sizes), shape::Dims::from_slice(strides), offset))
    }

    /// Whether a view with this geometry stays inside this tensor's storage.
    fn check_view(&self, sizes: &[usize], strides: &[usize], offset: usize) -> Result<()> {
        if sizes.len() != strides.len() {
            return shape_err(format!(
                "mismatch in length of strides and shape ({} vs {})",
                strides.len(),
                sizes.len()
            ));
        }
        // as PyTorch's checkInBoundsForStorage: a view of no elements fits any storage, whatever its
        // offset (a slice past the end of an empty dimension keeps the offset it computed)
        if shape::numel(sizes) == 0 {
            return Ok(());
        }
        let extent = shape::storage_extent(sizes, strides, offset);
        let avail = self.storage.nbytes / self.dtype.size();
        if extent > avail {
            return shape_err(format!(
                "setStorage: sizes {sizes:?}, strides {strides:?}, storage offset {offset} require {} bytes but the storage has {}",
                extent * self.dtype.size(),
                self.storage.nbytes
            ));
        }
        Ok(())
    }

    /// `Tensor.view`: never copies; fails when strides do not allow it.
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = shape::infer_size(shape, self.numel())?;
        match shape::view_strides(&self.sizes, &self.strides, &sizes) {
            Some(st) => Ok(self.with_meta(sizes, st, self.offset)),
            None => shape_err(
                "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
            ),
        }
    }

    /// `Tensor.reshape`: a view when possible, else a contiguous copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = shape::infer_size(shape, self.numel())?;
        match shape::view_strides(&self.sizes, &self.strides, &sizes) {
            Some(st) => Ok(self.with_meta(sizes, st, self.offset)),
            None => self.contiguous()?.view(shape),
        }
    }

    /// `Tensor.flatten()` (all dims).
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[-1])
    }

    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        let n = self.dim();
        if n == 0 {
            shape::wrap_dim(d0, 0)?;
            shape::wrap_dim(d1, 0)?;
            return Ok(self.clone());
        }
        let (a, b) = (shape::wrap_dim(d0, n)?, shape::wrap_dim(d1, n)?);
        let (mut sz, mut st) = (self.sizes.clone(), self.strides.clone());
        sz.swap(a, b);
        st.swap(a, b);
        Ok(self.with_meta(sz, st, self.offset))
    }

    /// `Tensor.t()` for <= 2-D tensors.
    pub fn t(&self) -> Result<Tensor> {
        if self.dim() > 2 {
            return shape_err(format!("t() expects a tensor with <= 2 dimensions, but self is {}D", self.dim()));
        }
        if self.dim() < 2 { Ok(self.clone()) } else { self.transpose(0, 1) }
    }

    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let n = self.dim();
        if dims.len() != n {
            return shape_err(format!(
                "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal to len(dims) = {}",
                dims.len()
            ));
        }
        let mut seen = vec![false; n];
        let (mut sz, mut st) = (shape::Dims::with_capacity(n), shape::Dims::with_capacity(n));
        for &d in dims {
            let d = shape::wrap_dim(d, n)?;
            if seen[d] {
                return shape_err("permute(): duplicate dims are not allowed.");
            }
            seen[d] = true;
            sz.push(self.sizes[d]);
            st.push(self.strides[d]);
        }
        Ok(self.with_meta(sz, st, self.offset))
    }

    /// `Tensor.expand`: `-1` keeps a size; new leading dims get stride 0.
    pub fn expand(&self, sizes: &[i64]) -> Result<Tensor> {
        if sizes.len() < self.dim() {
            return shape_err(format!(
                "expand: the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
                sizes.len(),
                self.dim()
            ));
        }
        let lead = sizes.len() - self.dim();
        let mut target = Vec::with_capacity(sizes.len());
        for (i, &s) in sizes.iter().enumerate() {
            if s == -1 {
                if i < lead {
                    return shape_err("expand: -1 is not allowed in a leading, non-existing dimension");
                }
                target.push(self.sizes[i - lead]);
            } else if s < 0 {
                return shape_err(format!("expand: invalid size {s}"));
            } else {
                target.push(s as usize);
            }
        }
        self.broadcast_to(&target)
    }

    /// Broadcast view to `target` (no copy).
    pub fn broadcast_to(&self, target: &[usize]) -> Result<Tensor> {
        let st = shape::expand_strides(&self.sizes, &self.strides, target)?;
        Ok(self.with_meta(target.to_vec(), st, self.offset))
    }

    /// `Tensor.narrow(dim, start, length)`; negative `start` wraps.
    pub fn narrow(&self, dim: i64, start: i64, length: usize) -> Result<Tensor> {
        if self.dim() == 0 {
            return shape_err("narrow() cannot be applied to a 0-dim tensor.");
        }
        let d = shape::wrap_dim(dim, self.dim())?;
        let size = self.sizes[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s > size || s + length as i64 > size {
            return index_err(format!("start ({start}) + length ({length}) exceeds dimension size ({size})."));
        }
        let mut sz = self.sizes.clone();
        sz[d] = length;
        Ok(self.with_meta(sz, self.strides.clone(), self.offset + s as usize * self.strides[d]))
    }

    /// `Tensor[..., start:end:step, ...]` on `dim` (Python slice clamping).
    pub fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return shape_err("slice() cannot be applied to a 0-dim tensor.");
        }
        if step <= 0 {
            return arg_err("slice step must be positive");
        }
        let d = shape::wrap_dim(dim, self.dim())?;
        let size = self.sizes[d] as i64;
        let clamp = |v: i64| -> i64 {
            let v = if v < 0 { v + size } else { v };
            v.clamp(0, size)
        };
        let s = clamp(start.unwrap_or(0));
        let e = clamp(end.unwrap_or(size)).max(s);
        let len = ((e - s) + step - 1) / step;
        let mut sz = self.sizes.clone();
        let mut st = self.strides.clone();
        sz[d] = len as usize;
        st[d] = self.strides[d] * step as usize;
        Ok(self.with_meta(sz, st, self.offset + s as usize * self.strides[d]))
    }

    /// `Tensor.select(dim, index)`: removes `dim`.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return index_err("select() cannot be applied to a 0-dim tensor.");
        }
        let d = shape::wrap_dim(dim, self.dim())?;
        let size = self.sizes[d] as i64;
        if index < -size || index >= size {
            return index_err(format!(
                "select(): index {index} out of range for tensor of size {:?} at dimension {d}",
                self.sizes
            ));
        }
        let i = if index < 0 { index + size } else { index } as usize;
        let (mut sz, mut st) = (self.sizes.clone(), self.strides.clone());
        sz.remove(d);
        let s = st.remove(d);
        Ok(self.with_meta(sz, st, self.offset + i * s))
    }

    /// `Tensor.squeeze()`: drop every size-1 dim.
    pub fn squeeze(&self) -> Tensor {
        let (sz, st): (shape::Dims, shape::Dims) =
            self.sizes.iter().zip(&self.strides).filter(|(s, _)| **s != 1).map(|(a, b)| (*a, *b)).unzip();
        self.with_meta(sz, st, self.offset)
    }

    /// `Tensor.squeeze(dim)`: drop `dim` if its size is 1.
    pub fn squeeze_dim(&self, dim: i64) -> Result<Tensor> {
        let d = shape::wrap_dim(dim, self.dim())?;
        if self.dim() == 0 || self.sizes[d] != 1 {
            return Ok(self.clone());
        }
        let (mut sz, mut st) = (self.sizes.clone(), self.strides.clone());
        sz.remove(d);
        st.remove(d);
        Ok(self.with_meta(sz, st, self.offset))
    }

    /// `Tensor.unsqueeze(dim)`.
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = shape::wrap_dim_insert(dim, self.dim())?;
        let (mut sz, mut st) = (self.sizes.clone(), self.strides.clone());
        let new_stride = if d >= self.dim() { 1 } else { sz[d] * st[d] };
        sz.insert(d, 1);
        st.insert(d, new_stride);
        Ok(self.with_meta(sz, st, self.offset))
    }

    /// Whether gradients flow to or through this tensor (autograd's metadata is attached; the
    /// rest of autograd's methods are `xirang_runtime::autograd::TensorAutograd`).
    pub fn requires_grad(&self) -> bool {
        self.autograd.is_some()
    }

    /// The same data without autograd history or forward-mode tangent (`detach()`).
    pub fn detach(&self) -> Tensor {
        let mut t = self.clone();
        t.autograd = None;
        t.tangent = None;
        t
    }

    /// A contiguous tensor with the same values (self if already contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        crate::observe::on_contiguous_copy(self.numel() * self.dtype.size());
        self.clone_contiguous()
    }

    /// A fresh contiguous copy on the same device (`Tensor.clone()`).
    pub fn clone_contiguous(&self) -> Result<Tensor> {
        if let Some(ctx) = self.device_ctx() {
            // on the device, on the current stream: no host round trip
            return self.copy_strided_on(ctx);
        }
        let host = Tensor::from_bytes(self.gather_bytes()?, &self.sizes, self.dtype)?;
        match self.device_ctx() {
            None => Ok(host),
            Some(ctx) => host.to_ctx(ctx),
        }
    }

    /// A contiguous copy of this device tensor made by the driver on `ctx`'s current stream
    /// ([`Driver::copy_strided`](crate::driver::Driver::copy_strided)). The source stays alive
    /// with the copy unless it is ordered on that stream (its block then goes back to the
    /// stream's cache, and whatever reuses it is queued after the copy).
    fn copy_strided_on(&self, ctx: &Arc<DeviceContext>) -> Result<Tensor> {
        let out = Tensor::empty_on(ctx, &self.sizes, self.dtype)?;
        if self.numel() == 0 {
            return Ok(out);
        }
        let view = crate::driver::StridedView {
            sizes: self.sizes.to_vec(),
            strides: self.strides.to_vec(),
            elem_size: self.dtype.size(),
        };
        let stream = ctx.current_stream();
        let keep: Box<dyn std::any::Any + Send> =
            if self.is_stream_ordered_on(ctx, stream) { Box::new(()) } else { Box::new(self.storage.clone()) };
        let driver = ctx.driver();
        driver.collect_finished_batch();
        driver.copy_strided(ctx.physical_id(), stream, self.data_ptr()?, view, out.data_ptr()?, keep)?;
        Ok(out)
    }

    // ------------------------------------------------------------ data

    /// Run `f` on the storage bytes `[lo, hi)` (host: borrowed; device:
    /// copied to host on the device's current stream).
    fn with_storage_bytes<T>(&self, lo: usize, hi: usize, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        match &self.storage.data {
            StorageData::Host(l) => {
                let g = read_lock(l);
                Ok(f(&g[lo..hi]))
            }
            StorageData::Device(b) => {
                let mut buf = vec![0u8; hi - lo];
                if hi > lo {
                    let ctx = &b.ctx;
                    ctx.driver.memcpy_d2h_async(
                        ctx.physical_id(),
                        &mut buf,
                        b.ptr + lo as u64,
                        ctx.current_stream(),
                    )?;
                    crate::observe::on_copy(crate::observe::CopyDir::DeviceToHost, hi - lo);
                }
                Ok(f(&buf))
            }
        }
    }

    /// Element range of the storage this view touches: (first, end).
    fn span(&self) -> (usize, usize) {
        let end = shape::storage_extent(&self.sizes, &self.strides, self.offset);
        if end == 0 { (0, 0) } else { (self.offset, end) }
    }

    /// The elements in row-major order as contiguous little-endian bytes.
    pub fn gather_bytes(&self) -> Result<Vec<u8>> {
        let es = self.dtype.size();
        let (lo, hi) = self.span();
        let contiguous = self.is_contiguous();
        let (sizes, strides) = (&self.sizes, &self.strides);
        self.with_storage_bytes(lo * es, hi * es, |b| {
            if contiguous {
                return b.to_vec();
            }
            let offs = shape::element_offsets(sizes, strides, 0);
            let mut out = Vec::with_capacity(offs.len() * es);
            for o in offs {
                out.extend_from_slice(&b[o * es..o * es + es]);
            }
            out
        })
    }

    /// Values as f64 in row-major order (exact for every float dtype).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let b = self.gather_bytes()?;
        Ok((0..self.numel()).map(|i| load_f64(&b, self.dtype, i)).collect())
    }

    /// Values as i64 in row-major order (floats truncate toward zero).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        let b = self.gather_bytes()?;
        Ok((0..self.numel()).map(|i| load_i64(&b, self.dtype, i)).collect())
    }

    /// Values as bool (`!= 0`).
    pub fn to_bool_vec(&self) -> Result<Vec<bool>> {
        if self.dtype.is_floating() {
            return Ok(self.to_f64_vec()?.into_iter().map(|v| v != 0.0).collect());
        }
        Ok(self.to_i64_vec()?.into_iter().map(|v| v != 0).collect())
    }

    /// Values as `T`; the dtype must be `T::DTYPE`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return dtype_err(format!("to_vec: tensor is {} but {} was requested", self.dtype, T::DTYPE));
        }
        let b = self.gather_bytes()?;
        let es = self.dtype.size();
        Ok(b.chunks_exact(es).map(T::read_le).collect())
    }

    /// The single value of a one-element tensor (`Tensor.item()`).
    pub fn item(&self) -> Result<Scalar> {
        if self.numel() != 1 {
            return arg_err(format!("a Tensor with {} elements cannot be converted to Scalar", self.numel()));
        }
        Ok(if self.dtype.is_floating() {
            Scalar::Float(self.to_f64_vec()?[0])
        } else if self.dtype == DType::Bool {
            Scalar::Bool(self.to_i64_vec()?[0] != 0)
        } else {
            Scalar::Int(self.to_i64_vec()?[0])
        })
    }

    /// `Tensor.to(dtype)`: a new contiguous tensor on the same device
    /// (self when the dtype already matches).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let b = self.gather_bytes()?;
        let n = self.numel();
        let mut out = vec![0u8; n * dtype.size()];
        if self.dtype.is_floating() {
            for i in 0..n {
                store_f64(&mut out, dtype, i, load_f64(&b, self.dtype, i));
            }
        } else {
            for i in 0..n {
                store_i64(&mut out, dtype, i, load_i64(&b, self.dtype, i));
            }
        }
        let host = Tensor::from_bytes(out, &self.sizes, dtype)?;
        match self.device_ctx() {
            None => Ok(host),
            Some(ctx) => host.to_ctx(ctx),
        }
    }

    // ------------------------------------------------------------ devices

    /// Copy to a device context (contiguous), or return self if already there.
    pub fn to_ctx(&self, ctx: &Arc<DeviceContext>) -> Result<Tensor> {
        if let Some(c) = self.device_ctx()
            && Arc::ptr_eq(c, ctx)
        {
            return Ok(self.clone());
        }
        let bytes = self.gather_bytes()?;
        let block = ctx.allocate(bytes.len())?;
        if !bytes.is_empty() {
            ctx.driver.memcpy_h2d_async(ctx.physical_id(), block.ptr, &bytes, block.stream)?;
            crate::observe::on_copy(crate::observe::CopyDir::HostToDevice, bytes.len());
        }
        let nbytes = bytes.len();
        Ok(Tensor {
            storage: Arc::new(StorageImpl::new(StorageData::Device(block), nbytes)),
            sizes: self.sizes.clone(),
            strides: shape::contiguous_dims(&self.sizes),
            offset: 0,
            dtype: self.dtype,
            autograd: None,
            tangent: None,
        })
    }

    /// An uninitialized contiguous tensor on a device (no host copy: the
    /// storage comes straight from the caching allocator). Kernels fill it.
    pub fn empty_on(ctx: &Arc<DeviceContext>, sizes: &[usize], dtype: DType) -> Result<Tensor> {
        let nbytes = shape::numel(sizes) * dtype.size();
        let block = ctx.allocate(nbytes)?;
        Ok(Tensor {
            storage: Arc::new(StorageImpl::new(StorageData::Device(block), nbytes)),
            sizes: shape::Dims::from_slice(sizes),
            strides: shape::contiguous_dims(sizes),
            offset: 0,
            dtype,
            autograd: None,
            tangent: None,
        })
    }

    /// `Tensor.to(device)`.
    pub fn to_device(&self, rt: &Runtime, device: Device) -> Result<Tensor> {
        match device {
            Device::Cpu => self.to_cpu(),
            Device::Npu(_) => self.to_ctx(rt.context(device)?),
        }
    }

    /// `Tensor.cpu()`: self if already on the host, else a contiguous copy.
    pub fn to_cpu(&self) -> Result<Tensor> {
        if self.is_cpu() {
            return Ok(self.clone());
        }
        Tensor::from_bytes(self.gather_bytes()?, &self.sizes, self.dtype)
    }

    /// `Tensor.copy_(src)`: broadcast `src` into this view, casting dtype,
    /// across devices.
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        if self.sizes.iter().zip(&self.strides).any(|(s, st)| *s > 1 && *st == 0) {
            return arg_err(
                "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.",
            );
        }
        let src = src.broadcast_to(&self.sizes)?;
        let n = self.numel();
        if n == 0 {
            return Ok(());
        }
        self.bump_version();
        let sb = src.gather_bytes()?;
        let es = self.dtype.size();
        let offs = shape::element_offsets(&self.sizes, &self.strides, 0);
        let (lo, hi) = self.span();
        let write = |dst: &mut [u8]| {
            for (i, &o) in offs.iter().enumerate() {
                if src.dtype == self.dtype {
                    dst[o * es..o * es + es].copy_from_slice(&sb[i * es..i * es + es]);
                } else if src.dtype.is_floating() {
                    store_f64(dst, self.dtype, o, load_f64(&sb, src.dtype, i));
                } else {
                    store_i64(dst, self.dtype, o, load_i64(&sb, src.dtype, i));
                }
            }
        };
        match &self.storage.data {
            StorageData::Host(l) => {
                let mut g = write_lock(l);
                write(&mut g[lo * es..hi * es]);
                Ok(())
            }
            StorageData::Device(b) => {
                // Read-modify-write the touched span through the driver.
                let mut buf = self.with_storage_bytes(lo * es, hi * es, |x| x.to_vec())?;
                write(&mut buf);
                let ctx = &b.ctx;
                ctx.driver.memcpy_h2d_async(ctx.physical_id(), b.ptr + (lo * es) as u64, &buf, ctx.current_stream())?;
                crate::observe::on_copy(crate::observe::CopyDir::HostToDevice, buf.len());
                Ok(())
            }
        }
    }

    /// `Tensor.fill_(value)`.
    pub fn fill_(&self, value: Scalar) -> Result<()> {
        self.copy_(&Tensor::scalar_of(value, self.dtype))
    }

    /// The storage's version counter (bumped by every in-place write to any view of it).
    pub fn version(&self) -> u64 {
        self.storage.version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records an in-place write (the generated front-ends call it for in-place and `out=`
    /// arguments; `copy_` calls it itself).
    pub fn bump_version(&self) {
        self.storage.version.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Device pointer of the first element (device tensors only).
    pub fn data_ptr(&self) -> Result<u64> {
        match &self.storage.data {
            StorageData::Device(b) => Ok(b.ptr + (self.offset * self.dtype.size()) as u64),
            StorageData::Host(_) => Err(Error::InvalidArgument("host tensors expose no device pointer".into())),
        }
    }
}

pub fn store_scalar(b: &mut [u8], dtype: DType, i: usize, v: Scalar) {
    match v {
        Scalar::Float(f) => store_f64(b, dtype, i, f),
        Scalar::Int(x) => store_i64(b, dtype, i, x),
        Scalar::Bool(x) => store_i64(b, dtype, i, x as i64),
    }
}
