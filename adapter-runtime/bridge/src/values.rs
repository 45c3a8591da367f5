//! Boxed values across the boundary: the shim's arguments (decoded by [`crate::ffi`] into the
//! borrowed [`Arg`] form) -> the runtime's [`IValue`]s, and the runtime's results -> the
//! [`Results`] buffer the shim reads.

use std::ffi::c_void;
use std::sync::Arc;

use xirang_runtime::dtype::{DType, Operand, Scalar, result_type};
use xirang_runtime::ivalue::{IValue, Layout, MemoryFormat};
use xirang_runtime::tensor::{Storage, Tensor};
use xirang_runtime::{Device, shape};

use crate::abi::*;
use crate::bridge::Bridge;
use crate::error::{BridgeError, Result};
pub use crate::ffi::StorageRef;

/// A flag per argument (mutable, wrapped number), inline up to 16.
pub type Flags = smallvec::SmallVec<[bool; 16]>;

/// The runtime's boxed arguments of one call, inline up to 4 (most operators' calls allocate
/// nothing for them).
pub type IValues = smallvec::SmallVec<[IValue; 4]>;

/// A tensor argument, borrowed from the shim's [`XrTensor`].
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    /// The storage of a `xirang` tensor.
    pub storage: Option<StorageRef<'a>>,
    /// The whole storage of a CPU tensor.
    pub host: Option<&'a [u8]>,
    pub sizes: &'a [i64],
    pub strides: &'a [i64],
    pub offset: i64,
    pub dtype: i32,
    pub itemsize: i32,
}

/// An argument, borrowed from the shim's [`XrValue`].
#[derive(Debug, Clone)]
pub enum Arg<'a> {
    None,
    Tensor(TensorRef<'a>),
    TensorList(Vec<TensorRef<'a>>),
    OptTensorList(Vec<Option<TensorRef<'a>>>),
    Int(i64),
    IntList(&'a [i64]),
    Float(f64),
    FloatList(&'a [f64]),
    Bool(bool),
    BoolList(&'a [u8]),
    Scalar(Scalar),
    ScalarList(Vec<Scalar>),
    Str(&'a str),
    DType(i32),
    Layout(i64),
    MemoryFormat(i64),
    /// PyTorch's `xirang` index; -1: CPU.
    Device(i64),
    Unsupported,
}

/// The runtime dtype of a `c10::ScalarType` code.
pub fn dtype(code: i32) -> Option<DType> {
    Some(match code {
        DTYPE_U8 => DType::U8,
        DTYPE_I8 => DType::I8,
        DTYPE_I16 => DType::I16,
        DTYPE_I32 => DType::I32,
        DTYPE_I64 => DType::I64,
        DTYPE_F16 => DType::F16,
        DTYPE_F32 => DType::F32,
        DTYPE_F64 => DType::F64,
        DTYPE_BOOL => DType::Bool,
        DTYPE_BF16 => DType::BF16,
        _ => return None,
    })
}

/// The `c10::ScalarType` code of a runtime dtype.
pub fn dtype_code(d: DType) -> i32 {
    match d {
        DType::U8 => DTYPE_U8,
        DType::I8 => DTYPE_I8,
        DType::I16 => DTYPE_I16,
        DType::I32 => DTYPE_I32,
        DType::I64 => DTYPE_I64,
        DType::F16 => DTYPE_F16,
        DType::F32 => DTYPE_F32,
        DType::F64 => DTYPE_F64,
        DType::Bool => DTYPE_BOOL,
        DType::BF16 => DTYPE_BF16,
    }
}

fn dims(what: &str, v: &[i64]) -> Result<shape::Dims> {
    let mut d = shape::Dims::with_capacity(v.len());
    for &x in v {
        d.push(usize::try_from(x).map_err(|_| BridgeError::Abi(format!("negative {what} {x}")))?);
    }
    Ok(d)
}

/// How a tensor's elements are read: as a dtype the runtime computes with, or, for data movement
/// only, as raw bytes of the same width (a `complex64` moves as `int64`; a 16-byte element as two
/// `int64`s along an extra last dimension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elements {
    /// Only dtypes the runtime models (operator arguments).
    Typed,
    /// Any dtype, as bytes (copies between devices).
    Raw,
}

/// The runtime tensor an argument describes: a view of the `xirang` storage (no copy), or a host
/// tensor holding a copy of the span of the CPU storage it reaches.
pub fn tensor(t: &TensorRef<'_>, elements: Elements) -> Result<Tensor> {
    let mut sizes = dims("size", t.sizes)?;
    let mut strides = dims("stride", t.strides)?;
    if sizes.len() != strides.len() {
        return Err(BridgeError::Abi(format!("{} sizes but {} strides", sizes.len(), strides.len())));
    }
    let mut offset = usize::try_from(t.offset).map_err(|_| BridgeError::Abi(format!("offset {}", t.offset)))?;
    let dt = match (dtype(t.dtype), elements) {
        (Some(d), _) => d,
        (None, Elements::Typed) => {
            return Err(BridgeError::Declined(format!("dtype code {} is not modelled by the runtime", t.dtype)));
        }
        (None, Elements::Raw) => match t.itemsize {
            1 => DType::U8,
            2 => DType::I16,
            4 => DType::I32,
            8 => DType::I64,
            16 => {
                // two 8-byte words per element, along a new last dimension
                for s in &mut strides {
                    *s *= 2;
                }
                sizes.push(2);
                strides.push(1);
                offset *= 2;
                DType::I64
            }
            n => return Err(BridgeError::Declined(format!("{n}-byte elements are not supported"))),
        },
    };
    if let Some(s) = t.storage {
        return Ok(s.with(|s| Tensor::from_storage(s, &sizes, &strides, offset, dt))?);
    }
    let Some(host) = t.host else {
        return Err(BridgeError::Abi("a tensor with neither a xirang storage nor host memory".into()));
    };
    // a CPU tensor: copy the span of its storage that the view reaches
    let es = dt.size();
    let extent = shape::storage_extent(&sizes, &strides, offset);
    let (lo, hi) = if extent == 0 { (0, 0) } else { (offset, extent) };
    let bytes = host.get(lo * es..hi * es).ok_or_else(|| {
        BridgeError::Abi(format!("a CPU tensor view reaches byte {} of a {}-byte storage", hi * es, host.len()))
    })?;
    let storage = Storage::from_host_bytes(bytes.to_vec());
    Ok(Tensor::from_storage(&storage, &sizes, &strides, offset - lo, dt)?)
}

/// The runtime's boxed form of the arguments.
/// The runtime's boxed form of the arguments, appended to `out` (filled in place: the inline
/// vector is not moved through a return value).
pub fn ivalues(bridge: &Bridge, args: &[Arg<'_>], out: &mut IValues) -> Result<()> {
    out.reserve(args.len());
    for a in args {
        out.push(ivalue(bridge, a)?);
    }
    Ok(())
}

fn ivalue(bridge: &Bridge, a: &Arg<'_>) -> Result<IValue> {
    Ok(match a {
        Arg::None => IValue::None,
        Arg::Tensor(t) => IValue::Tensor(tensor(t, Elements::Typed)?),
        Arg::TensorList(l) => IValue::TensorList(l.iter().map(|t| tensor(t, Elements::Typed)).collect::<Result<_>>()?),
        Arg::OptTensorList(l) => IValue::OptTensorList(
            l.iter().map(|t| t.as_ref().map(|t| tensor(t, Elements::Typed)).transpose()).collect::<Result<_>>()?,
        ),
        Arg::Int(i) => IValue::Int(*i),
        Arg::IntList(l) => IValue::IntList(l.to_vec()),
        Arg::Float(f) => IValue::Float(*f),
        Arg::FloatList(l) => IValue::FloatList(l.to_vec()),
        Arg::Bool(b) => IValue::Bool(*b),
        Arg::BoolList(l) => IValue::BoolList(l.iter().map(|&b| b != 0).collect()),
        Arg::Scalar(s) => IValue::Scalar(*s),
        Arg::ScalarList(l) => IValue::ScalarList(l.clone()),
        Arg::Str(s) => IValue::Str((*s).to_string()),
        Arg::DType(code) => IValue::DType(
            dtype(*code).ok_or_else(|| BridgeError::Declined(format!("dtype code {code} is not modelled")))?,
        ),
        Arg::Layout(l) if *l == LAYOUT_STRIDED => IValue::Layout(Layout::Strided),
        Arg::Layout(l) => return Err(BridgeError::Declined(format!("layout code {l} is not strided"))),
        Arg::MemoryFormat(m) => IValue::MemoryFormat(match *m {
            MEMORY_FORMAT_CONTIGUOUS => MemoryFormat::Contiguous,
            MEMORY_FORMAT_PRESERVE => MemoryFormat::Preserve,
            MEMORY_FORMAT_CHANNELS_LAST => MemoryFormat::ChannelsLast,
            MEMORY_FORMAT_CHANNELS_LAST_3D => MemoryFormat::ChannelsLast3d,
            m => return Err(BridgeError::Abi(format!("memory format code {m}"))),
        }),
        Arg::Device(-1) => IValue::Device(Device::Cpu),
        Arg::Device(i) => IValue::Device(Device::Npu(bridge.visible().runtime(*i)?)),
        Arg::Unsupported => return Err(BridgeError::Declined("an argument the runtime does not model".into())),
    })
}

/// PyTorch's rules for mixing devices, applied before the runtime sees the arguments: tensors on
/// two `xirang` devices are an error (PyTorch's message), and CPU zero-dim tensors join the device
/// of the others, as zero-dim tensors of their dtype; a Python number PyTorch wrapped in one
/// (`x + 1`, flagged in `wrapped`) becomes a zero-dim tensor of the dtype that leaves the
/// operator PyTorch's result type (the runtime has no wrapped numbers: only scalars).
pub fn prepare(bridge: &Bridge, args: &mut [IValue], wrapped: &[bool]) -> Result<()> {
    // the first device tensor, borrowed (no handle cloned per call)
    let mut device: Option<&Tensor> = None;
    for a in args.iter() {
        match a {
            IValue::Tensor(t) => same_device(bridge, &mut device, t)?,
            IValue::TensorList(l) => l.iter().try_for_each(|t| same_device(bridge, &mut device, t))?,
            IValue::OptTensorList(l) => l.iter().flatten().try_for_each(|t| same_device(bridge, &mut device, t))?,
            _ => {}
        }
    }
    let Some(d) = device else { return Ok(()) };
    // PyTorch's rule: a CPU tensor joins a device computation only as a zero-dim tensor
    let cpu_with_dims = |t: &Tensor| t.is_cpu() && t.dim() != 0;
    let mixed = args.iter().any(|a| match a {
        IValue::Tensor(t) => cpu_with_dims(t),
        IValue::TensorList(l) => l.iter().any(cpu_with_dims),
        _ => false,
    });
    if mixed {
        return Err(BridgeError::DeviceMismatch(format!(
            "Expected all tensors to be on the same device, but found at least two devices, {} and cpu!",
            name(bridge, d.device())
        )));
    }
    let Some(ctx) = d.device_ctx().cloned() else { return Ok(()) };
    for i in 0..args.len() {
        let IValue::Tensor(t) = &args[i] else { continue };
        if !t.is_cpu() || t.dim() != 0 {
            continue;
        }
        let moved = if wrapped.get(i).copied().unwrap_or(false) {
            let value = t.item()?;
            let dt = wrapped_dtype(args, wrapped, i, value)?;
            Tensor::scalar_of(value, dt).to_ctx(&ctx)?
        } else {
            t.to_ctx(&ctx)?
        };
        args[i] = IValue::Tensor(moved);
    }
    Ok(())
}

/// Records the first device tensor in `device`; a tensor on another `xirang` device is PyTorch's
/// error. CPU tensors are checked by the caller.
fn same_device<'a>(bridge: &Bridge, device: &mut Option<&'a Tensor>, t: &'a Tensor) -> Result<()> {
    if t.is_cpu() {
        return Ok(());
    }
    match device {
        None => *device = Some(t),
        Some(d) if d.device() != t.device() => {
            return Err(BridgeError::DeviceMismatch(format!(
                "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
                name(bridge, d.device()),
                name(bridge, t.device())
            )));
        }
        Some(_) => {}
    }
    Ok(())
}

fn name(bridge: &Bridge, d: Device) -> String {
    match bridge.torch_index(d) {
        Ok(i) if i >= 0 => format!("xirang:{i}"),
        _ => d.to_string(),
    }
}

/// The dtype of the zero-dim tensor that stands for the Python number at argument `i`.
fn wrapped_dtype(args: &[IValue], wrapped: &[bool], i: usize, value: Scalar) -> Result<DType> {
    let mut others = Vec::new();
    let mut dimensioned = Vec::new();
    for (j, a) in args.iter().enumerate() {
        let IValue::Tensor(t) = a else { continue };
        if j == i {
            continue;
        }
        if wrapped.get(j).copied().unwrap_or(false) && t.dim() == 0 {
            others.push(Operand::Scalar(t.item()?));
        } else if t.dim() == 0 {
            others.push(Operand::ZeroDim(t.dtype()));
        } else {
            others.push(Operand::Tensor(t.dtype()));
            dimensioned.push(t.dtype());
        }
    }
    let without = result_type(&others);
    others.push(Operand::Scalar(value));
    let with = result_type(&others).unwrap_or(value.wrapped_dtype());
    Ok(if without != Some(with) {
        // the number raises the category: the category's default dtype, as PyTorch
        with
    } else if matches!(with, DType::F16 | DType::BF16) && dimensioned.contains(&with) {
        // the number does not change the result type; keep it in the op-math type (PyTorch
        // computes `half + 0.1` with 0.1 in float)
        DType::F32
    } else {
        with
    })
}

/// The storages of the tensor arguments: (argument index, storage address ([`StorageRef::addr`]),
/// written by the operator).
pub type Inputs = smallvec::SmallVec<[(usize, usize, bool); 4]>;

/// The storages of the tensor arguments, for [`Results::boxed`].
pub fn input_storages(args: &[Arg<'_>], mutable: &[bool]) -> Inputs {
    let mut v = Inputs::new();
    for (i, a) in args.iter().enumerate() {
        let m = mutable.get(i).copied().unwrap_or(false);
        let mut push = |t: &TensorRef<'_>| {
            if let Some(s) = t.storage {
                v.push((i, s.addr(), m));
            }
        };
        match a {
            Arg::Tensor(t) => push(t),
            Arg::TensorList(l) => l.iter().for_each(&mut push),
            Arg::OptTensorList(l) => l.iter().flatten().for_each(&mut push),
            _ => {}
        }
    }
    v
}

/// Result boxes a thread keeps for reuse: the shim reads and frees one call's results before the
/// next, so one is the steady state; a few more cover results held across a nested call.
const POOL_MAX: usize = 4;

thread_local! {
    // boxes, not values: each is an allocation handed to the shim as is (`Results` is large)
    #[allow(clippy::vec_box)]
    static POOL: std::cell::RefCell<Vec<Box<Results>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// No index (a value that is not a tensor, a tensor with no storage handle).
const NO: usize = usize::MAX;

/// The results of one call, laid out for the shim in one allocation for the common call (up to two
/// results, two tensors of up to four dimensions each): the values, tensors, their sizes and
/// strides and the storage handles sit in inline vectors of the boxed `Results`, and the pointers
/// between them are set once everything is in place ([`Results::boxed`]), so nothing moves after.
/// Rarer payloads (lists of numbers, strings, CPU tensors' bytes) are boxed slices, whose heap
/// addresses never move.
#[derive(Default)]
pub struct Results {
    pub values: smallvec::SmallVec<[XrValue; 2]>,
    /// Per value: the index of its first tensor in `tensors` ([`NO`]: not a tensor value).
    first: smallvec::SmallVec<[usize; 2]>,
    tensors: smallvec::SmallVec<[XrTensor; 2]>,
    /// Per tensor: where its sizes, then its strides, start in `dims`, and its storage's index in
    /// `storages` ([`NO`]: none, an aliased argument or a CPU result).
    places: smallvec::SmallVec<[(usize, usize); 2]>,
    dims: smallvec::SmallVec<[i64; 16]>,
    /// The storages the result tensors' `storage` fields borrow.
    storages: smallvec::SmallVec<[Storage; 2]>,
    ints: Vec<Box<[i64]>>,
    floats: Vec<Box<[f64]>>,
    bytes: Vec<Box<[u8]>>,
    scalars: Vec<Box<[XrValue]>>,
}

impl Results {
    /// Lays out `out`. A result sharing the storage of an argument the operator writes names it in
    /// `alias`; one sharing the storage of any other argument is copied first, because PyTorch's
    /// schema promises fresh memory there (views are never registered with the runtime).
    pub fn boxed(bridge: &Bridge, out: Vec<IValue>, inputs: &[(usize, usize, bool)]) -> Result<Box<Results>> {
        let mut r = POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default();
        for v in out {
            r.first.push(NO);
            let x = r.value(bridge, v, inputs)?;
            r.values.push(x);
        }
        r.link();
        Ok(r)
    }

    /// Frees `r`'s contents and keeps the box for this thread's next call (up to [`POOL_MAX`]).
    pub fn recycle(mut r: Box<Results>) {
        // every field named (no `..`): a field added later fails to compile here until it is cleared
        let Results { values, first, tensors, places, dims, storages, ints, floats, bytes, scalars } = &mut *r;
        values.clear();
        first.clear();
        tensors.clear();
        places.clear();
        dims.clear();
        storages.clear();
        ints.clear();
        floats.clear();
        bytes.clear();
        scalars.clear();
        // `try_with`: a thread being torn down frees the box instead
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOL_MAX {
                p.push(r);
            }
        });
    }

    /// Points the values at their tensors and the tensors at their dims and storages: after the
    /// last push, in the box (nothing moves from here until the box is freed).
    fn link(&mut self) {
        let dims = self.dims.as_ptr();
        for (t, &(d, s)) in self.tensors.iter_mut().zip(&self.places) {
            if d != NO {
                // in bounds: `tensor` pushed `2 * ndim` dims at `d`
                t.sizes = dims.wrapping_add(d);
                t.strides = dims.wrapping_add(d + t.ndim as usize);
            }
            if s != NO {
                // a borrowed handle (see `StorageRef`): the storage this box holds
                t.storage = Arc::as_ptr(self.storages[s].as_arc()) as *mut c_void;
            }
        }
        let tensors = self.tensors.as_mut_ptr();
        for (v, &f) in self.values.iter_mut().zip(&self.first) {
            if f != NO {
                v.p = tensors.wrapping_add(f) as *mut c_void;
            }
        }
    }

    fn value(&mut self, bridge: &Bridge, v: IValue, inputs: &[(usize, usize, bool)]) -> Result<XrValue> {
        let mut x = XrValue::NONE;
        let first = self.tensors.len();
        match v {
            IValue::None => {}
            IValue::Tensor(t) => {
                self.tensor(bridge, t, inputs)?;
                x.tag = TAG_TENSOR;
                x.len = 1;
            }
            IValue::TensorList(l) => {
                x.tag = TAG_TENSOR_LIST;
                x.len = l.len() as u64;
                for t in l {
                    self.tensor(bridge, t, inputs)?;
                }
            }
            IValue::OptTensorList(l) => {
                x.tag = TAG_OPT_TENSOR_LIST;
                x.len = l.len() as u64;
                for t in l {
                    match t {
                        Some(t) => self.tensor(bridge, t, inputs)?,
                        None => {
                            self.tensors.push(XrTensor::NONE);
                            self.places.push((NO, NO));
                        }
                    }
                }
            }
            IValue::Int(i) => {
                x.tag = TAG_INT;
                x.i = i;
            }
            IValue::IntList(l) => {
                x.tag = TAG_INT_LIST;
                x.len = l.len() as u64;
                let b = l.into_boxed_slice();
                x.p = b.as_ptr() as *mut c_void;
                self.ints.push(b);
            }
            IValue::Float(f) => {
                x.tag = TAG_FLOAT;
                x.f = f;
            }
            IValue::FloatList(l) => {
                x.tag = TAG_FLOAT_LIST;
                x.len = l.len() as u64;
                let b = l.into_boxed_slice();
                x.p = b.as_ptr() as *mut c_void;
                self.floats.push(b);
            }
            IValue::Bool(b) => {
                x.tag = TAG_BOOL;
                x.i = b as i64;
            }
            IValue::BoolList(l) => {
                x.tag = TAG_BOOL_LIST;
                x.len = l.len() as u64;
                let b: Box<[u8]> = l.into_iter().map(u8::from).collect();
                x.p = b.as_ptr() as *mut c_void;
                self.bytes.push(b);
            }
            IValue::Scalar(s) => x = scalar(s),
            IValue::ScalarList(l) => {
                let b: Box<[XrValue]> = l.into_iter().map(scalar).collect();
                x.tag = TAG_SCALAR_LIST;
                x.len = b.len() as u64;
                x.p = b.as_ptr() as *mut c_void;
                self.scalars.push(b);
            }
            IValue::Str(s) => {
                x.tag = TAG_STR;
                x.len = s.len() as u64;
                let b = s.into_bytes().into_boxed_slice();
                x.p = b.as_ptr() as *mut c_void;
                self.bytes.push(b);
            }
            IValue::DType(d) => {
                x.tag = TAG_DTYPE;
                x.i = dtype_code(d) as i64;
            }
            IValue::Layout(Layout::Strided) => {
                x.tag = TAG_LAYOUT;
                x.i = LAYOUT_STRIDED;
            }
            IValue::MemoryFormat(m) => {
                x.tag = TAG_MEMORY_FORMAT;
                x.i = match m {
                    MemoryFormat::Contiguous => MEMORY_FORMAT_CONTIGUOUS,
                    MemoryFormat::Preserve => MEMORY_FORMAT_PRESERVE,
                    MemoryFormat::ChannelsLast => MEMORY_FORMAT_CHANNELS_LAST,
                    MemoryFormat::ChannelsLast3d => MEMORY_FORMAT_CHANNELS_LAST_3D,
                };
            }
            IValue::Device(d) => {
                x.tag = TAG_DEVICE;
                x.i = bridge.torch_index(d)?;
            }
            other => {
                return Err(BridgeError::Abi(format!("a {} result cannot cross to PyTorch", other.kind())));
            }
        }
        if matches!(x.tag, TAG_TENSOR | TAG_TENSOR_LIST | TAG_OPT_TENSOR_LIST)
            && let Some(f) = self.first.last_mut()
        {
            *f = first;
        }
        Ok(x)
    }

    /// Appends the tensor `t` (its pointers are set by [`Results::link`]).
    fn tensor(&mut self, bridge: &Bridge, mut t: Tensor, inputs: &[(usize, usize, bool)]) -> Result<()> {
        let mut st = t.storage();
        let mut alias = -1;
        let addr = Arc::as_ptr(st.as_arc()) as usize;
        if let Some((i, _, mutable)) = inputs.iter().find(|(_, a, _)| *a == addr) {
            if *mutable {
                alias = *i as i32;
            } else {
                t = t.clone_contiguous()?;
                st = t.storage();
            }
        }
        let ndim = t.dim();
        let mut x = XrTensor {
            storage: std::ptr::null_mut(),
            data: 0,
            nbytes: st.nbytes() as u64,
            sizes: std::ptr::null(),
            strides: std::ptr::null(),
            ndim: ndim as i64,
            offset: t.storage_offset() as i64,
            dtype: dtype_code(t.dtype()),
            itemsize: t.dtype().size() as i32,
            device: -1,
            alias,
        };
        let d = self.dims.len();
        let mut storage = NO;
        self.dims.extend(t.sizes().iter().map(|&s| s as i64));
        match st.device() {
            Device::Cpu => {
                // a host result: its contiguous bytes
                self.dims.extend(shape::contiguous_strides(t.sizes()).into_iter().map(|s| s as i64));
                let b = t.gather_bytes()?.into_boxed_slice();
                x.nbytes = b.len() as u64;
                x.offset = 0;
                x.data = b.as_ptr() as u64;
                self.bytes.push(b);
            }
            dev => {
                self.dims.extend(t.strides().iter().map(|&s| s as i64));
                x.device = bridge.torch_index(dev)? as i32;
                x.data = st.device_ptr().unwrap_or(0);
                if alias < 0 {
                    storage = self.storages.len();
                    self.storages.push(st);
                }
            }
        }
        self.tensors.push(x);
        self.places.push((d, storage));
        Ok(())
    }
}

fn scalar(s: Scalar) -> XrValue {
    let mut x = XrValue::NONE;
    match s {
        Scalar::Int(i) => {
            x.tag = TAG_SCALAR_INT;
            x.i = i;
        }
        Scalar::Float(f) => {
            x.tag = TAG_SCALAR_FLOAT;
            x.f = f;
        }
        Scalar::Bool(b) => {
            x.tag = TAG_SCALAR_BOOL;
            x.i = b as i64;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(dtype: DType, dims: usize) -> IValue {
        let sizes = vec![2; dims];
        IValue::Tensor(Tensor::zeros(&sizes, dtype))
    }

    #[test]
    fn a_wrapped_number_takes_the_dtype_that_keeps_pytorchs_result_type() {
        let f = Scalar::Float(0.1);
        let case = |args: &[IValue], wrapped: &[bool], i: usize, v: Scalar| wrapped_dtype(args, wrapped, i, v).unwrap();
        let num = IValue::Tensor(Tensor::scalar(0.1f64));
        // int64 tensor + 0.1: the number raises the category -> the default float dtype
        assert_eq!(case(&[host(DType::I64, 1), num.clone()], &[false, true], 1, f), DType::F32);
        // float64 tensor + 0.1: float64, the number exact
        assert_eq!(case(&[host(DType::F64, 1), num.clone()], &[false, true], 1, f), DType::F64);
        // float16 tensor + 0.1: float16 result; the number kept in float (op math)
        assert_eq!(case(&[host(DType::F16, 1), num.clone()], &[false, true], 1, f), DType::F32);
        // zero-dim float16 alone + 0.1: float16 (float32 would promote a zero-dim pair)
        assert_eq!(case(&[host(DType::F16, 0), num.clone()], &[false, true], 1, f), DType::F16);
        // uint8 tensor + 3: uint8
        let three = IValue::Tensor(Tensor::scalar(3i64));
        assert_eq!(case(&[host(DType::U8, 1), three], &[false, true], 1, Scalar::Int(3)), DType::U8);
        // bool tensor + 3: int64
        let three = IValue::Tensor(Tensor::scalar(3i64));
        assert_eq!(case(&[host(DType::Bool, 1), three], &[false, true], 1, Scalar::Int(3)), DType::I64);
    }
}
