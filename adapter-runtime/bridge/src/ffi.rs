//! The exported C functions (`include/xirang_bridge.h`): the only `unsafe` code of the bridge.
//!
//! Each function decodes its raw arguments into borrowed Rust values (the `unsafe` blocks, each
//! with its `// SAFETY:` contract), calls the safe API of [`crate::bridge`] inside
//! `catch_unwind`, and returns a [`Status`]; the message of a failure is the calling thread's
//! [`xirang_last_error`]. No panic unwinds into C++.

#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)] // the contracts are in include/xirang_bridge.h

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use xirang_runtime::Error as RtError;
use xirang_runtime::dispatch::{self, FallbackMode};
use xirang_runtime::driver::{EventId, StreamId};
use xirang_runtime::tensor::{Storage, StorageImpl, Tensor};

use crate::abi::*;
use crate::bridge::{self, Bridge};
use crate::error::{BridgeError, Result, Status};
use crate::values::{self, Arg, Elements, Results, TensorRef};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning an error or a panic into a status and the thread's last error.
fn guard(f: impl FnOnce() -> Result<()>) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Err(BridgeError::Panic(msg))
    });
    match r {
        Ok(()) => Status::Ok as i32,
        Err(e) => {
            set_last_error(&message(&e));
            e.status() as i32
        }
    }
}

/// The message PyTorch shows for `e`: an out-of-memory error names the device as the user does
/// (`xirang:0`), then the runtime's number of it, which `XIRANG_VISIBLE_DEVICES` may make another.
fn message(e: &BridgeError) -> String {
    if let BridgeError::Runtime(RtError::OutOfMemory { device, requested, allocated, reserved, message }) = e
        && let Some(torch) = get().ok().and_then(|b| b.visible().torch(*device))
    {
        return format!(
            "out of memory on xirang:{torch} (runtime device {device}): tried to allocate {requested} bytes \
             ({allocated} bytes allocated, {reserved} bytes reserved by the caching allocator): {message}"
        );
    }
    e.to_string()
}

fn get() -> Result<&'static Bridge> {
    if bridge::forked() {
        return Err(BridgeError::Forked);
    }
    Bridge::get()
}

/// The package's `os.register_at_fork(after_in_child=...)`: this process is a fork of one whose
/// runtime was running. Its driver threads did not survive the fork, so every later call fails
/// (CUDA's "Cannot re-initialize CUDA in forked subprocess"), and storages are not released.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_mark_forked() {
    bridge::mark_forked();
}

/// Resolves -1 to the calling thread's current device.
fn device(index: i32) -> i64 {
    if index < 0 { crate::devices::current() as i64 } else { index as i64 }
}

/// The message of the calling thread's last failure (empty if none); valid until its next call.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Initializes the runtime (idempotent).
#[unsafe(no_mangle)]
pub extern "C" fn xirang_init() -> i32 {
    guard(|| get().map(|_| ()))
}

/// Devices PyTorch sees; 0 when the runtime cannot start (never fails).
#[unsafe(no_mangle)]
pub extern "C" fn xirang_device_count() -> i32 {
    catch_unwind(|| get().map_or(0, |b| b.device_count() as i32)).unwrap_or(0)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_current_device(out: *mut i32) -> i32 {
    guard(|| {
        let d = get()?.current_device() as i32;
        // SAFETY: the caller passes a valid, writable `int32_t*` (header contract).
        unsafe { out.write(d) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_set_device(index: i32) -> i32 {
    guard(|| get()?.set_device(index as i64))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_storage_alloc(
    index: i32,
    nbytes: u64,
    handle: *mut *mut c_void,
    data: *mut u64,
) -> i32 {
    guard(|| {
        let n = usize::try_from(nbytes).map_err(|_| BridgeError::Abi(format!("{nbytes} bytes")))?;
        let s = get()?.allocate(device(index), n)?;
        let ptr = s.device_ptr().unwrap_or(0);
        let h = into_handle(s);
        // SAFETY: the caller passes valid, writable out-pointers (header contract).
        unsafe {
            handle.write(h);
            data.write(ptr);
        }
        Ok(())
    })
}

/// A storage handle of the C ABI: `Arc::into_raw` of the storage's allocation. Owned handles
/// (`xirang_storage_alloc`, `xirang_storage_retain`) hold one count; a result's borrowed handle
/// points at a storage its `Results` holds. A handle the shim passes in is borrowed for the call.
#[derive(Clone, Copy)]
pub struct StorageRef<'a> {
    ptr: std::ptr::NonNull<StorageImpl>,
    _live: std::marker::PhantomData<&'a Storage>,
}

impl std::fmt::Debug for StorageRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with(|s| s.fmt(f))
    }
}

impl<'a> StorageRef<'a> {
    /// The handle `h` (`None` for null).
    ///
    /// # Safety
    /// `h` is null or a live handle (see the type) that stays live for `'a`.
    pub unsafe fn new(h: *mut c_void) -> Option<StorageRef<'a>> {
        std::ptr::NonNull::new(h as *mut StorageImpl).map(|ptr| StorageRef { ptr, _live: std::marker::PhantomData })
    }

    /// Runs `f` with the storage, without touching its count.
    pub fn with<R>(&self, f: impl FnOnce(&Storage) -> R) -> R {
        // SAFETY: `ptr` came from `Arc::into_raw` and the allocation is live for `'a` (contract of
        // `new`); the `Arc` made here is never dropped (`ManuallyDrop`), so the count the handle
        // holds is untouched, and `f` gets only a borrow of it.
        let s = std::mem::ManuallyDrop::new(Storage::from_arc(unsafe { Arc::from_raw(self.ptr.as_ptr()) }));
        f(&s)
    }

    /// The storage's address: equal for handles of one storage (compared, never dereferenced).
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// A counted handle on the storage.
    pub fn to_storage(&self) -> Storage {
        self.with(Storage::clone)
    }
}

/// The handle of `s` for the C ABI, holding one count (freed by `xirang_storage_release`).
pub fn into_handle(s: Storage) -> *mut c_void {
    Arc::into_raw(s.into_arc()) as *mut c_void
}

/// Borrows the storage a handle names.
///
/// # Safety
/// `h` is null or a live handle from `xirang_storage_alloc` / `xirang_storage_retain`, or a result
/// tensor's borrowed handle before `xirang_result_free`, live for `'a`.
unsafe fn storage_ref<'a>(h: *mut c_void) -> Option<StorageRef<'a>> {
    // SAFETY: the caller's contract, which is `StorageRef::new`'s.
    unsafe { StorageRef::new(h) }
}

/// A new handle on the storage `h` names (null for null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_storage_retain(h: *mut c_void) -> *mut c_void {
    // SAFETY: header contract (see `storage_ref`).
    match unsafe { storage_ref(h) } {
        Some(s) => into_handle(s.to_storage()),
        None => std::ptr::null_mut(),
    }
}

/// Drops a handle (the storage returns to the cache once no handle or tensor holds it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_storage_release(h: *mut c_void) {
    // in a forked child the storage's block belongs to the parent's driver (its locks may have
    // been held by a thread that did not survive the fork): leave it to the process's exit
    if !h.is_null() && !bridge::forked() {
        // SAFETY: `h` came from `Arc::into_raw` in `into_handle` (`xirang_storage_alloc`,
        // `xirang_storage_retain`) and the caller gives up its only use of it, with the count it
        // holds (header contract). Dropping a storage cannot panic (the block's drop only takes a
        // lock that recovers from poisoning).
        drop(Storage::from_arc(unsafe { Arc::from_raw(h as *const StorageImpl) }));
    }
}

/// Decodes a tensor argument.
///
/// # Safety
/// `t` follows the `XrTensor` contract of the header: `sizes`/`strides` point at `ndim` values, a
/// non-null `storage` is a live handle, and a CPU tensor's `data` points at `nbytes` readable bytes.
unsafe fn tensor_ref<'a>(t: &'a XrTensor) -> Result<TensorRef<'a>> {
    let n = usize::try_from(t.ndim).map_err(|_| BridgeError::Abi(format!("ndim {}", t.ndim)))?;
    // SAFETY: header contract: `sizes` and `strides` hold `ndim` values (or ndim is 0).
    let (sizes, strides) = unsafe { (slice(t.sizes, n), slice(t.strides, n)) };
    // SAFETY: header contract on `storage`.
    let storage = unsafe { storage_ref(t.storage) };
    let host = if storage.is_none() {
        let len = usize::try_from(t.nbytes).map_err(|_| BridgeError::Abi(format!("{} bytes", t.nbytes)))?;
        // SAFETY: header contract: a CPU tensor's `data` is the address of `nbytes` readable bytes.
        Some(unsafe { slice(t.data as *const u8, len) })
    } else {
        None
    };
    Ok(TensorRef { storage, host, sizes, strides, offset: t.offset, dtype: t.dtype, itemsize: t.itemsize })
}

/// `len` values at `p` (empty for `len` 0, whatever `p` is).
///
/// # Safety
/// For `len > 0`, `p` points at `len` initialized, aligned values that outlive `'a`.
unsafe fn slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

/// Decodes one argument.
///
/// # Safety
/// `v` follows the `XrValue` contract of the header for its tag.
unsafe fn arg<'a>(v: &'a XrValue) -> Result<Arg<'a>> {
    let len = usize::try_from(v.len).map_err(|_| BridgeError::Abi(format!("length {}", v.len)))?;
    // SAFETY (every block below): header contract: `p` points at `len` values of the tag's type.
    Ok(match v.tag {
        TAG_NONE => Arg::None,
        TAG_TENSOR => {
            let t =
                unsafe { (v.p as *const XrTensor).as_ref() }.ok_or_else(|| BridgeError::Abi("a null tensor".into()))?;
            Arg::Tensor(unsafe { tensor_ref(t) }?)
        }
        TAG_TENSOR_LIST => Arg::TensorList(
            unsafe { slice(v.p as *const XrTensor, len) }
                .iter()
                .map(|t| unsafe { tensor_ref(t) })
                .collect::<Result<_>>()?,
        ),
        TAG_OPT_TENSOR_LIST => Arg::OptTensorList(
            unsafe { slice(v.p as *const XrTensor, len) }
                .iter()
                .map(|t| if t.dtype < 0 { Ok(None) } else { unsafe { tensor_ref(t) }.map(Some) })
                .collect::<Result<_>>()?,
        ),
        TAG_INT => Arg::Int(v.i),
        TAG_INT_LIST => Arg::IntList(unsafe { slice(v.p as *const i64, len) }),
        TAG_FLOAT => Arg::Float(v.f),
        TAG_FLOAT_LIST => Arg::FloatList(unsafe { slice(v.p as *const f64, len) }),
        TAG_BOOL => Arg::Bool(v.i != 0),
        TAG_BOOL_LIST => Arg::BoolList(unsafe { slice(v.p as *const u8, len) }),
        TAG_SCALAR_INT | TAG_SCALAR_FLOAT | TAG_SCALAR_BOOL => Arg::Scalar(scalar(v)?),
        TAG_SCALAR_LIST => {
            Arg::ScalarList(unsafe { slice(v.p as *const XrValue, len) }.iter().map(scalar).collect::<Result<_>>()?)
        }
        TAG_STR => Arg::Str(
            std::str::from_utf8(unsafe { slice(v.p as *const u8, len) })
                .map_err(|e| BridgeError::Abi(format!("a string argument: {e}")))?,
        ),
        TAG_DTYPE => Arg::DType(v.i as i32),
        TAG_LAYOUT => Arg::Layout(v.i),
        TAG_MEMORY_FORMAT => Arg::MemoryFormat(v.i),
        TAG_DEVICE => Arg::Device(v.i),
        TAG_UNSUPPORTED => Arg::Unsupported,
        t => return Err(BridgeError::Abi(format!("unknown value tag {t}"))),
    })
}

fn scalar(v: &XrValue) -> Result<xirang_runtime::Scalar> {
    use xirang_runtime::Scalar;
    Ok(match v.tag {
        TAG_SCALAR_INT | TAG_INT => Scalar::Int(v.i),
        TAG_SCALAR_FLOAT | TAG_FLOAT => Scalar::Float(v.f),
        TAG_SCALAR_BOOL | TAG_BOOL => Scalar::Bool(v.i != 0),
        t => return Err(BridgeError::Abi(format!("tag {t} in a scalar list"))),
    })
}

fn op_name<'a>(op: *const u8, len: usize) -> Result<&'a str> {
    // SAFETY: header contract: `op` points at `len` bytes of the operator's name.
    std::str::from_utf8(unsafe { slice(op, len) }).map_err(|e| BridgeError::Abi(format!("operator name: {e}")))
}

/// The position of operator `op` (`add.Tensor`) in the runtime's operator table, for
/// `xirang_call_at`; -1 when the runtime does not know it (never fails).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_op_index(op: *const u8, op_len: usize) -> i64 {
    catch_unwind(|| {
        op_name(op, op_len).ok().and_then(xirang_runtime::generated::ops::operator_index).map_or(-1, |i| i as i64)
    })
    .unwrap_or(-1)
}

/// Runs operator `op` (`add.Tensor`) on `nargs` arguments in schema order. On success `out` holds
/// the results until `xirang_result_free(out)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_call(
    op: *const u8,
    op_len: usize,
    args: *const XrValue,
    nargs: usize,
    out: *mut XrResult,
) -> i32 {
    guard(|| {
        let op = op_name(op, op_len)?;
        let index = xirang_runtime::generated::ops::operator_index(op)
            .ok_or_else(|| BridgeError::Abi(format!("unknown operator `{op}` (not selected in xirang.toml)")))?;
        // SAFETY: the caller's contract is `xirang_call_at`'s (header).
        unsafe { call_at(index, args, nargs, out) }
    })
}

/// `xirang_call` for the operator at `index` (from `xirang_op_index`): no lookup by name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_call_at(index: i64, args: *const XrValue, nargs: usize, out: *mut XrResult) -> i32 {
    guard(|| {
        let index = usize::try_from(index)
            .ok()
            .filter(|&i| i < xirang_runtime::generated::ops::OPERATORS.len())
            .ok_or_else(|| BridgeError::Abi(format!("operator index {index} is out of range")))?;
        // SAFETY: header contract, passed on.
        unsafe { call_at(index, args, nargs, out) }
    })
}

/// The body of the calls: decode, run, lay the results out for the shim.
///
/// # Safety
/// `args` points at `nargs` valid values (header contract for each); `out` is a valid, writable
/// `XrResult*`.
unsafe fn call_at(index: usize, args: *const XrValue, nargs: usize, out: *mut XrResult) -> Result<()> {
    let b = get()?;
    // SAFETY: header contract: `args` points at `nargs` values.
    let raw = unsafe { slice(args, nargs) };
    let mut decoded = smallvec::SmallVec::<[Arg<'_>; 4]>::with_capacity(nargs);
    for v in raw {
        // SAFETY: header contract for each value.
        decoded.push(unsafe { arg(v) }?);
    }
    let wrapped: values::Flags = raw.iter().map(|v| v.flags & FLAG_WRAPPED_NUMBER != 0).collect();
    let mut ivalues = values::IValues::new();
    values::ivalues(b, &decoded, &mut ivalues)?;
    values::prepare(b, &mut ivalues, &wrapped)?;
    let results = b.call_at(index, &ivalues)?;
    drop(ivalues);
    let mutable: values::Flags = raw.iter().map(|v| v.flags & FLAG_MUTABLE != 0).collect();
    let inputs = values::input_storages(&decoded, &mutable);
    let mut r = Results::boxed(b, results, &inputs)?;
    let values = r.values.as_mut_ptr();
    let len = r.values.len() as u64;
    // SAFETY: header contract: `out` is a valid, writable `XrResult*`.
    unsafe { out.write(XrResult { values, len, owner: Box::into_raw(r) as *mut c_void }) };
    Ok(())
}

/// Frees the results of a call (handles the shim retained stay valid).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_result_free(out: *mut XrResult) {
    // SAFETY: header contract: `out` is null or the `XrResult` a successful `xirang_call` filled,
    // freed once; `owner` is the `Box<Results>` leaked there.
    if let Some(r) = unsafe { out.as_mut() }
        && !r.owner.is_null()
    {
        let owner = std::mem::replace(&mut r.owner, std::ptr::null_mut());
        r.values = std::ptr::null_mut();
        r.len = 0;
        // SAFETY: see above; recycling `Results` drops its storages (no panic: see
        // `xirang_storage_release`) and keeps the box for the next call.
        Results::recycle(unsafe { Box::from_raw(owner as *mut Results) });
    }
}

/// Decodes a tensor argument of a copy (raw elements).
///
/// # Safety
/// As `tensor_ref`.
unsafe fn raw_tensor(t: *const XrTensor) -> Result<Tensor> {
    // SAFETY: header contract: a valid `XrTensor*`.
    let t = unsafe { t.as_ref() }.ok_or_else(|| BridgeError::Abi("a null tensor".into()))?;
    // SAFETY: as above.
    values::tensor(&unsafe { tensor_ref(t) }?, Elements::Raw)
}

/// Reads the elements of the `xirang` tensor `src` in row-major order into `nbytes` bytes at `dst`
/// (exactly `numel * itemsize`). Synchronous.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_read(src: *const XrTensor, dst: *mut u8, nbytes: u64) -> i32 {
    guard(|| {
        let b = get()?;
        // SAFETY: header contract.
        let t = unsafe { raw_tensor(src) }?;
        let n = usize::try_from(nbytes).map_err(|_| BridgeError::Abi(format!("{nbytes} bytes")))?;
        let out: &mut [u8] = match (n, dst.is_null()) {
            (0, _) => &mut [],
            (_, true) => return Err(BridgeError::Abi("a null destination".into())),
            // SAFETY: header contract: `dst` points at `nbytes` writable bytes.
            _ => unsafe { std::slice::from_raw_parts_mut(dst, n) },
        };
        b.read_elements(&t, out)
    })
}

/// Writes `nbytes` bytes at `src` (the elements of `dst` in row-major order, same dtype) into the
/// `xirang` tensor `dst` (any strides).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_write(dst: *const XrTensor, src: *const u8, nbytes: u64) -> i32 {
    guard(|| {
        let b = get()?;
        // SAFETY: header contract.
        let d = unsafe { raw_tensor(dst) }?;
        let n = usize::try_from(nbytes).map_err(|_| BridgeError::Abi(format!("{nbytes} bytes")))?;
        // SAFETY: header contract: `src` points at `nbytes` readable bytes.
        b.write_elements(&d, unsafe { slice(src, n) })
    })
}

/// `dst.copy_(src)` for two `xirang` tensors: broadcasting, casting between the dtypes the runtime
/// models, across devices; elements of the same width move as bytes otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_copy(dst: *const XrTensor, src: *const XrTensor) -> i32 {
    guard(|| {
        let b = get()?;
        // SAFETY: header contract for both.
        let codes = unsafe { (dst.as_ref().map(|t| t.dtype), src.as_ref().map(|t| t.dtype)) };
        // a dtype the runtime does not model crosses as raw bytes: a cast from or to one (complex
        // to float) is the host's to do
        if let (Some(dc), Some(sc)) = codes
            && dc != sc
            && (values::dtype(dc).is_none() || values::dtype(sc).is_none())
        {
            return Err(BridgeError::Declined(format!("a cast from dtype code {sc} to {dc}")));
        }
        // SAFETY: header contract for both.
        let (d, s) = unsafe { (raw_tensor(dst)?, raw_tensor(src)?) };
        b.copy(&d, &s)
    })
}

/// Reads `nbytes` at device address `addr` of device `index` (-1: the current one) into `dst`,
/// after the device's queued work: memory that no storage handle names (`at::from_blob`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_read_address(index: i32, addr: u64, dst: *mut u8, nbytes: u64) -> i32 {
    guard(|| {
        let b = get()?;
        let n = usize::try_from(nbytes).map_err(|_| BridgeError::Abi(format!("{nbytes} bytes")))?;
        if n == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(BridgeError::Abi("a null destination".into()));
        }
        // SAFETY: header contract: `dst` points at `nbytes` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(dst, n) };
        b.read_address(device(index), addr, out)
    })
}

/// Writes `nbytes` from `src` to device address `addr` of device `index` (-1: the current one),
/// after the device's queued work.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_write_address(index: i32, addr: u64, src: *const u8, nbytes: u64) -> i32 {
    guard(|| {
        let b = get()?;
        let n = usize::try_from(nbytes).map_err(|_| BridgeError::Abi(format!("{nbytes} bytes")))?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: header contract: `src` points at `nbytes` readable bytes.
        let bytes = unsafe { slice(src, n) };
        b.write_address(device(index), addr, bytes)
    })
}

/// Waits for every stream of device `index` (-1: the current device; -2: every device).
#[unsafe(no_mangle)]
pub extern "C" fn xirang_synchronize(index: i32) -> i32 {
    guard(|| {
        let b = get()?;
        if index == -2 {
            (0..b.device_count() as i64).try_for_each(|i| b.synchronize_device(i))
        } else {
            b.synchronize_device(device(index))
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_stream_current(index: i32, out: *mut i64) -> i32 {
    guard(|| {
        let s = get()?.current_stream(device(index))?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { out.write(s.0 as i64) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_stream_set(index: i32, stream: i64) -> i32 {
    guard(|| get()?.set_current_stream(device(index), StreamId(stream as usize)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_stream_new(index: i32, out: *mut i64) -> i32 {
    guard(|| {
        let s = get()?.new_stream(device(index))?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { out.write(s.0 as i64) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_stream_synchronize(index: i32, stream: i64) -> i32 {
    guard(|| get()?.synchronize_stream(device(index), StreamId(stream as usize)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_event_create(index: i32, out: *mut u64) -> i32 {
    guard(|| {
        let e = get()?.create_event(device(index))?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { out.write(e.0 as u64) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_event_record(index: i32, event: u64, stream: i64) -> i32 {
    guard(|| get()?.record_event(device(index), EventId(event as usize), StreamId(stream as usize)))
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_event_block(index: i32, stream: i64, event: u64) -> i32 {
    guard(|| get()?.stream_wait_event(device(index), StreamId(stream as usize), EventId(event as usize)))
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_event_synchronize(index: i32, event: u64) -> i32 {
    guard(|| get()?.synchronize_event(device(index), EventId(event as usize)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_event_elapsed(index: i32, start: u64, end: u64, ms: *mut f64) -> i32 {
    guard(|| {
        let t = get()?.event_elapsed_ms(device(index), EventId(start as usize), EventId(end as usize))?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { ms.write(t as f64) };
        Ok(())
    })
}

/// 1 in `*done` when the work recorded before `event` has completed, else 0; never waits.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_event_query(index: i32, event: u64, done: *mut i32) -> i32 {
    guard(|| {
        let d = get()?.query_event(device(index), EventId(event as usize))?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { done.write(d as i32) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_event_destroy(index: i32, event: u64) -> i32 {
    guard(|| get()?.destroy_event(device(index), EventId(event as usize)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_memory_stats(index: i32, out: *mut XrMemoryStats) -> i32 {
    guard(|| {
        let s = get()?.context(device(index))?.stats();
        let x = XrMemoryStats {
            allocated_bytes: s.allocated_bytes as u64,
            reserved_bytes: s.reserved_bytes as u64,
            peak_allocated_bytes: s.peak_allocated_bytes as u64,
            peak_reserved_bytes: s.peak_reserved_bytes as u64,
            alloc_count: s.alloc_count,
            free_count: s.free_count,
            cache_hits: s.cache_hits,
            device_mallocs: s.device_mallocs,
            device_frees: s.device_frees,
            oom_retries: s.oom_retries,
            ooms: s.ooms,
        };
        // SAFETY: header contract: a writable out-pointer.
        unsafe { out.write(x) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_reset_peak_memory_stats(index: i32) -> i32 {
    guard(|| {
        get()?.context(device(index))?.reset_peak_stats();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_reset_accumulated_memory_stats(index: i32) -> i32 {
    guard(|| {
        get()?.context(device(index))?.reset_accumulated_stats();
        Ok(())
    })
}

/// The driver's free and total bytes of the device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_mem_get_info(index: i32, free: *mut u64, total: *mut u64) -> i32 {
    guard(|| {
        let m = get()?.context(device(index))?.mem_info()?;
        // SAFETY: header contract: writable out-pointers.
        unsafe {
            free.write(m.free as u64);
            total.write(m.total as u64);
        }
        Ok(())
    })
}

/// `size` bytes of pinned (page-locked) host memory; its address in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_host_alloc(size: u64, out: *mut u64) -> i32 {
    guard(|| {
        let addr = get()?.host_alloc(size as usize)?;
        // SAFETY: header contract: a writable out-pointer.
        unsafe { out.write(addr as u64) };
        Ok(())
    })
}

/// Frees what xirang_host_alloc returned.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_host_free(addr: u64) -> i32 {
    guard(|| get()?.host_free(addr as usize))
}

/// 1 when `addr` lies inside pinned memory of xirang_host_alloc, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_host_is_pinned(addr: u64) -> i32 {
    catch_unwind(|| Bridge::is_pinned(addr as usize) as i32).unwrap_or(0)
}

/// Waits for the device, then gives its cached blocks back to the driver.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_empty_cache(index: i32) -> i32 {
    guard(|| {
        let ctx = get()?.context(device(index))?;
        ctx.synchronize()?;
        Ok(ctx.empty_cache()?)
    })
}

/// PyTorch is about to run `op` on its CPU kernels: applies the fallback policy (error mode ->
/// an error naming the operator) and counts the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_fallback_admit(op: *const u8, op_len: usize) -> i32 {
    guard(|| bridge::admit_fallback(op_name(op, op_len)?))
}

/// Whether `op` is on the force-fallback list (1) or not (0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_forced_fallback(op: *const u8, op_len: usize) -> i32 {
    catch_unwind(|| op_name(op, op_len).map_or(0, |op| dispatch::forced_fallback(op) as i32)).unwrap_or(0)
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_set_fallback_mode(mode: i32) -> i32 {
    guard(|| {
        let m = match mode {
            FALLBACK_ERROR => FallbackMode::Error,
            FALLBACK_WARN => FallbackMode::Warn,
            FALLBACK_SILENT => FallbackMode::Silent,
            m => {
                return Err(BridgeError::Config(format!(
                    "fallback mode {m}: expected 0 (error), 1 (warn), 2 (silent)"
                )));
            }
        };
        bridge::set_fallback_mode(m);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_fallback_mode() -> i32 {
    catch_unwind(|| match dispatch::policy().mode {
        FallbackMode::Error => FALLBACK_ERROR,
        FallbackMode::Warn => FALLBACK_WARN,
        FallbackMode::Silent => FALLBACK_SILENT,
    })
    .unwrap_or(FALLBACK_WARN)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_set_force_fallback(ops: *const u8, len: usize) -> i32 {
    guard(|| {
        bridge::set_force_fallback(op_name(ops, len)?);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_set_fallback_alert(threshold: u64) -> i32 {
    guard(|| {
        bridge::set_alert_threshold(threshold);
        Ok(())
    })
}

/// The runtime's per-operator tier counters as JSON; free with `xirang_string_free`.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_counters_json() -> *mut c_char {
    catch_unwind(|| CString::new(bridge::counters_json()).map_or(std::ptr::null_mut(), CString::into_raw))
        .unwrap_or(std::ptr::null_mut())
}

#[unsafe(no_mangle)]
pub extern "C" fn xirang_reset_counters() {
    let _ = catch_unwind(dispatch::reset_counters);
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn xirang_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: header contract: `s` came from `CString::into_raw` in this crate, freed once.
        drop(unsafe { CString::from_raw(s) });
    }
}

/// Seeds the runtime's default generator (the device's random kernels, e.g. dropout).
#[unsafe(no_mangle)]
pub extern "C" fn xirang_manual_seed(seed: u64) -> i32 {
    guard(|| {
        xirang_runtime::rng::manual_seed(seed);
        Ok(())
    })
}

/// The PyTorch version the runtime's operators were generated for (`v2.15.0`), NUL-terminated.
#[unsafe(no_mangle)]
pub extern "C" fn xirang_pytorch_version() -> *const c_char {
    static V: std::sync::OnceLock<CString> = std::sync::OnceLock::new();
    V.get_or_init(|| CString::new(xirang_runtime::generated::PYTORCH_VERSION).unwrap_or_default()).as_ptr()
}
