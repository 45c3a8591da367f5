//! The C ABI end to end, as the shim uses it: storages, the boxed call (results, aliases of
//! written arguments, declines, errors), copies, devices, the fallback policy, memory statistics.
//! One process, three simulated devices with sparse physical ids (3, 0, 7) and 64 MiB each.
//!
//! `unsafe` here is the shim's side of the boundary: every call passes pointers to live,
//! correctly sized values, as `include/xirang_bridge.h` requires.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_void};
use std::sync::Once;

use xirang_bridge::abi::*;
use xirang_bridge::ffi::*;

fn setup() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        xirang_acl_sim::configure(xirang_acl_sim::SimConfig { devices: vec![3, 0, 7], capacity_bytes: 64 << 20 })
            .unwrap();
        assert_eq!(xirang_init(), 0, "{}", last_error());
    });
}

fn last_error() -> String {
    // SAFETY: the bridge returns a NUL-terminated string valid until its next call on this thread.
    unsafe { CStr::from_ptr(xirang_last_error()) }.to_string_lossy().into_owned()
}

/// A device tensor owned by the test: a storage handle plus its contiguous sizes and strides.
struct Dev {
    handle: *mut c_void,
    data: u64,
    nbytes: u64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    device: i32,
}

impl Dev {
    fn new_f32(device: i32, values: &[f32], sizes: &[i64]) -> Dev {
        let nbytes = (values.len() * 4) as u64;
        let (mut handle, mut data) = (std::ptr::null_mut(), 0u64);
        // SAFETY: valid out-pointers.
        let rc = unsafe { xirang_storage_alloc(device, nbytes, &mut handle, &mut data) };
        assert_eq!(rc, 0, "{}", last_error());
        let mut strides = vec![1i64; sizes.len()];
        for i in (0..sizes.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * sizes[i + 1];
        }
        let d = Dev { handle, data, nbytes, sizes: sizes.to_vec(), strides, device };
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        // SAFETY: `bytes` holds every element of the tensor.
        let rc = unsafe { xirang_write(&d.xr(), bytes.as_ptr(), bytes.len() as u64) };
        assert_eq!(rc, 0, "{}", last_error());
        d
    }

    fn xr(&self) -> XrTensor {
        XrTensor {
            storage: self.handle,
            data: self.data,
            nbytes: self.nbytes,
            sizes: self.sizes.as_ptr(),
            strides: self.strides.as_ptr(),
            ndim: self.sizes.len() as i64,
            offset: 0,
            dtype: DTYPE_F32,
            itemsize: 4,
            device: self.device,
            alias: -1,
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and released once.
        unsafe { xirang_storage_release(self.handle) };
    }
}

fn read_f32(t: &XrTensor) -> Vec<f32> {
    let n: i64 = (0..t.ndim as usize)
        // SAFETY: `sizes` holds `ndim` values.
        .map(|i| unsafe { *t.sizes.add(i) })
        .product();
    let mut buf = vec![0u8; n as usize * 4];
    // SAFETY: `buf` holds every element.
    let rc = unsafe { xirang_read(t, buf.as_mut_ptr(), buf.len() as u64) };
    assert_eq!(rc, 0, "{}", last_error());
    buf.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn tensor_arg(t: &XrTensor) -> XrValue {
    XrValue { tag: TAG_TENSOR, p: t as *const XrTensor as *mut c_void, len: 1, ..XrValue::NONE }
}

fn scalar_int(i: i64) -> XrValue {
    XrValue { tag: TAG_SCALAR_INT, i, ..XrValue::NONE }
}

fn call(op: &str, args: &[XrValue]) -> (i32, XrResult) {
    let mut out = XrResult { values: std::ptr::null_mut(), len: 0, owner: std::ptr::null_mut() };
    // SAFETY: `args` are valid values whose pointers outlive the call.
    let rc = unsafe { xirang_call(op.as_ptr(), op.len(), args.as_ptr(), args.len(), &mut out) };
    (rc, out)
}

fn result_tensor(out: &XrResult, i: usize) -> XrTensor {
    assert!(i < out.len as usize);
    // SAFETY: `values` holds `len` values until `xirang_result_free`.
    let v = unsafe { *out.values.add(i) };
    assert_eq!(v.tag, TAG_TENSOR);
    // SAFETY: a TENSOR value points at one `XrTensor`.
    unsafe { *(v.p as *const XrTensor) }
}

#[test]
fn devices_are_renumbered_and_current_is_per_thread() {
    setup();
    assert_eq!(xirang_device_count(), 3);
    assert_eq!(xirang_set_device(2), 0);
    let mut d = -1;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { xirang_current_device(&mut d) }, 0);
    assert_eq!(d, 2);
    std::thread::spawn(|| {
        let mut d = -1;
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { xirang_current_device(&mut d) }, 0);
        assert_eq!(d, 0, "a new thread starts on device 0");
    })
    .join()
    .unwrap();
    assert_eq!(xirang_set_device(3), XR_STATUS_ERROR);
    assert!(last_error().contains("invalid device index 3: 3 xirang device(s) visible"), "{}", last_error());
    assert_eq!(xirang_set_device(0), 0);
}

const XR_STATUS_ERROR: i32 = xirang_bridge::Status::Error as i32;

#[test]
fn add_runs_on_the_device_and_returns_a_fresh_storage() {
    setup();
    let a = Dev::new_f32(0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Dev::new_f32(0, &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], &[2, 3]);
    let (ta, tb) = (a.xr(), b.xr());
    let (rc, mut out) = call("add.Tensor", &[tensor_arg(&ta), tensor_arg(&tb), scalar_int(2)]);
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(out.len, 1);
    let r = result_tensor(&out, 0);
    assert_eq!((r.alias, r.device, r.dtype, r.ndim), (-1, 0, DTYPE_F32, 2));
    assert!(!r.storage.is_null());
    assert_eq!(r.data >> 60, 0xD, "a simulated device address, never a host pointer");
    assert_eq!(read_f32(&r), vec![21.0, 42.0, 63.0, 84.0, 105.0, 126.0]);
    // SAFETY: the borrowed handle is live until `xirang_result_free`.
    let kept = unsafe { xirang_storage_retain(r.storage) };
    // SAFETY: `out` came from a successful call.
    unsafe { xirang_result_free(&mut out) };
    let kept_view = XrTensor { storage: kept, ..r };
    // the retained handle keeps the storage; the sizes/strides of `r` are gone with the result
    let sizes = [2i64, 3];
    let strides = [3i64, 1];
    let kept_view = XrTensor { sizes: sizes.as_ptr(), strides: strides.as_ptr(), ..kept_view };
    assert_eq!(read_f32(&kept_view)[5], 126.0);
    // SAFETY: ours, released once.
    unsafe { xirang_storage_release(kept) };
}

/// The shim looks an operator up once (`xirang_op_index`) and calls it by index: same results
/// as by name; an unknown name is -1, an index out of the table an error, never a crash.
#[test]
fn operators_are_called_by_their_index() {
    setup();
    let name = "add.Tensor";
    // SAFETY: `name` is `len` bytes.
    let index = unsafe { xirang_op_index(name.as_ptr(), name.len()) };
    assert!(index >= 0);
    let unknown = "add.Tensr";
    // SAFETY: as above.
    assert_eq!(unsafe { xirang_op_index(unknown.as_ptr(), unknown.len()) }, -1);
    let a = Dev::new_f32(0, &[1.0, 2.0, 3.0], &[3]);
    let ta = a.xr();
    let args = [tensor_arg(&ta), tensor_arg(&ta), scalar_int(1)];
    let mut out = XrResult { values: std::ptr::null_mut(), len: 0, owner: std::ptr::null_mut() };
    // SAFETY: `args` are valid values whose pointers outlive the call.
    let rc = unsafe { xirang_call_at(index, args.as_ptr(), args.len(), &mut out) };
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(read_f32(&result_tensor(&out, 0)), vec![2.0, 4.0, 6.0]);
    // SAFETY: `out` came from a successful call.
    unsafe { xirang_result_free(&mut out) };
    for bad in [-1i64, 1 << 40] {
        // SAFETY: as above; the index is checked before anything is read.
        let rc = unsafe { xirang_call_at(bad, args.as_ptr(), args.len(), &mut out) };
        assert_eq!(rc, XR_STATUS_ERROR);
        assert!(last_error().contains("out of range"), "{}", last_error());
    }
}

#[test]
fn an_inplace_result_names_the_written_argument() {
    setup();
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let b = Dev::new_f32(0, &[3.0, 4.0], &[2]);
    let (ta, tb) = (a.xr(), b.xr());
    let mut self_arg = tensor_arg(&ta);
    self_arg.flags = FLAG_MUTABLE;
    let (rc, mut out) = call("add_.Tensor", &[self_arg, tensor_arg(&tb), scalar_int(1)]);
    assert_eq!(rc, 0, "{}", last_error());
    let r = result_tensor(&out, 0);
    assert_eq!(r.alias, 0);
    assert!(r.storage.is_null());
    // SAFETY: from a successful call.
    unsafe { xirang_result_free(&mut out) };
    assert_eq!(read_f32(&ta), vec![4.0, 6.0]);
}

#[test]
fn a_result_sharing_an_unwritten_argument_is_copied() {
    setup();
    // `contiguous`-like results must not alias: `clone` of a contiguous tensor is fresh anyway;
    // `expand` returns a view, so a non-written argument's storage comes back copied.
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let ta = a.xr();
    let sizes = XrValue { tag: TAG_INT_LIST, p: [2i64, 2].as_ptr() as *mut c_void, len: 2, ..XrValue::NONE };
    let implicit = XrValue { tag: TAG_BOOL, i: 0, ..XrValue::NONE };
    let (rc, mut out) = call("expand", &[tensor_arg(&ta), sizes, implicit]);
    assert_eq!(rc, 0, "{}", last_error());
    let r = result_tensor(&out, 0);
    assert_eq!(r.alias, -1);
    assert_ne!(r.data, a.data);
    assert_eq!(read_f32(&r), vec![1.0, 2.0, 1.0, 2.0]);
    // SAFETY: from a successful call.
    unsafe { xirang_result_free(&mut out) };
}

#[test]
fn a_cpu_zero_dim_tensor_mixes_with_device_tensors() {
    setup();
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let ta = a.xr();
    let two = 2.5f32.to_le_bytes();
    let cpu = XrTensor {
        storage: std::ptr::null_mut(),
        data: two.as_ptr() as u64,
        nbytes: 4,
        sizes: std::ptr::null(),
        strides: std::ptr::null(),
        ndim: 0,
        offset: 0,
        dtype: DTYPE_F32,
        itemsize: 4,
        device: -1,
        alias: -1,
    };
    let (rc, mut out) = call("mul.Tensor", &[tensor_arg(&ta), tensor_arg(&cpu)]);
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(read_f32(&result_tensor(&out, 0)), vec![2.5, 5.0]);
    // SAFETY: from a successful call.
    unsafe { xirang_result_free(&mut out) };
}

#[test]
fn tensors_on_two_devices_are_a_runtime_error() {
    setup();
    let a = Dev::new_f32(0, &[1.0], &[1]);
    let b = Dev::new_f32(1, &[1.0], &[1]);
    let (ta, tb) = (a.xr(), b.xr());
    let (rc, _) = call("add.Tensor", &[tensor_arg(&ta), tensor_arg(&tb), scalar_int(1)]);
    assert_eq!(rc, XR_STATUS_ERROR);
    assert!(last_error().contains("same device"), "{}", last_error());
}

#[test]
fn unmodelled_dtypes_and_host_tier_operators_are_declined() {
    setup();
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let complex = XrTensor { dtype: 9, itemsize: 8, sizes: [1i64].as_ptr(), ..a.xr() };
    let (rc, _) = call("add.Tensor", &[tensor_arg(&complex), tensor_arg(&complex), scalar_int(1)]);
    assert_eq!(rc, xirang_bridge::Status::Declined as i32, "{}", last_error());
    // an operator the runtime serves only on its host tier
    let ta = a.xr();
    let (rc, _) = call("cumsum", &[tensor_arg(&ta), XrValue { tag: TAG_INT, i: 0, ..XrValue::NONE }, XrValue::NONE]);
    assert_eq!(rc, xirang_bridge::Status::Declined as i32, "{}", last_error());
}

#[test]
fn copies_move_bytes_across_devices_and_dtypes() {
    setup();
    let a = Dev::new_f32(0, &[1.5, -2.0, 3.0], &[3]);
    // (device 2 is the memory-statistics test's alone: tests of this file run in parallel)
    let b = Dev::new_f32(1, &[0.0, 0.0, 0.0], &[3]);
    // SAFETY: both tensors are live.
    assert_eq!(unsafe { xirang_copy(&b.xr(), &a.xr()) }, 0, "{}", last_error());
    assert_eq!(read_f32(&b.xr()), vec![1.5, -2.0, 3.0]);
    // a dtype the runtime does not model moves as bytes of its width (complex64 as 8 bytes)
    let c = Dev::new_f32(0, &[1.0, 2.0, 3.0, 4.0], &[4]);
    let d = Dev::new_f32(1, &[0.0; 4], &[4]);
    let sizes = [2i64];
    let strides = [1i64];
    let as_complex = |t: XrTensor| XrTensor {
        dtype: 9,
        itemsize: 8,
        sizes: sizes.as_ptr(),
        strides: strides.as_ptr(),
        ndim: 1,
        ..t
    };
    // SAFETY: both tensors are live; two 8-byte elements fit each 16-byte storage.
    assert_eq!(unsafe { xirang_copy(&as_complex(d.xr()), &as_complex(c.xr())) }, 0, "{}", last_error());
    assert_eq!(read_f32(&d.xr()), vec![1.0, 2.0, 3.0, 4.0]);
    // a strided read: every other element
    let e = Dev::new_f32(0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]);
    let (sz, st) = ([3i64], [2i64]);
    let view = XrTensor { sizes: sz.as_ptr(), strides: st.as_ptr(), offset: 1, ..e.xr() };
    assert_eq!(read_f32(&view), vec![2.0, 4.0, 6.0]);
}

#[test]
fn a_view_outside_its_storage_is_refused() {
    setup();
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let (sz, st) = ([3i64], [1i64]);
    let bad = XrTensor { sizes: sz.as_ptr(), strides: st.as_ptr(), ..a.xr() };
    let mut buf = [0u8; 12];
    // SAFETY: `buf` is 12 bytes.
    let rc = unsafe { xirang_read(&bad, buf.as_mut_ptr(), 12) };
    assert_eq!(rc, XR_STATUS_ERROR);
    assert!(last_error().contains("storage"), "{}", last_error());
}

#[test]
fn out_of_memory_is_its_own_status() {
    setup();
    let (mut h, mut d) = (std::ptr::null_mut(), 0);
    // SAFETY: valid out-pointers.
    let rc = unsafe { xirang_storage_alloc(1, 1 << 30, &mut h, &mut d) };
    assert_eq!(rc, xirang_bridge::Status::OutOfMemory as i32);
    assert!(last_error().contains("out of memory"), "{}", last_error());
}

#[test]
fn memory_returns_to_the_cache_when_the_last_handle_goes() {
    setup();
    let mut before = XrMemoryStats::default();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { xirang_memory_stats(2, &mut before) }, 0);
    let a = Dev::new_f32(2, &[0.0; 1000], &[1000]);
    let mut during = XrMemoryStats::default();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { xirang_memory_stats(2, &mut during) }, 0);
    assert_eq!(during.allocated_bytes, before.allocated_bytes + 4096);
    drop(a);
    assert_eq!(xirang_synchronize(2), 0);
    let mut after = XrMemoryStats::default();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { xirang_memory_stats(2, &mut after) }, 0);
    assert_eq!(after.allocated_bytes, before.allocated_bytes);
    assert!(after.peak_allocated_bytes >= during.allocated_bytes);
}

#[test]
fn the_fallback_policy_is_the_runtimes() {
    setup();
    let op = "xirang_test.fallback";
    assert_eq!(xirang_set_fallback_mode(FALLBACK_SILENT), 0);
    // SAFETY: `op` is valid UTF-8 of that length.
    assert_eq!(unsafe { xirang_fallback_admit(op.as_ptr(), op.len()) }, 0);
    assert_eq!(xirang_set_fallback_mode(FALLBACK_ERROR), 0);
    assert_eq!(xirang_fallback_mode(), FALLBACK_ERROR);
    // SAFETY: as above.
    let rc = unsafe { xirang_fallback_admit(op.as_ptr(), op.len()) };
    assert_eq!(rc, XR_STATUS_ERROR);
    assert!(last_error().contains("xirang_test.fallback") && last_error().contains("XIRANG_FALLBACK=error"));
    assert_eq!(xirang_set_fallback_mode(FALLBACK_WARN), 0);
    assert_eq!(xirang_set_fallback_mode(7), XR_STATUS_ERROR);
    let json = xirang_counters_json();
    // SAFETY: a NUL-terminated string from the bridge, freed once below.
    let text = unsafe { CStr::from_ptr(json) }.to_string_lossy().into_owned();
    // SAFETY: from `xirang_counters_json`.
    unsafe { xirang_string_free(json) };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v[op]["fallback"], 1, "{text}");
    // the force-fallback list declines the operator before the runtime runs it
    let list = "sub";
    // SAFETY: valid UTF-8 of that length.
    assert_eq!(unsafe { xirang_set_force_fallback(list.as_ptr(), list.len()) }, 0);
    let a = Dev::new_f32(0, &[1.0], &[1]);
    let ta = a.xr();
    let (rc, _) = call("sub.Tensor", &[tensor_arg(&ta), tensor_arg(&ta), scalar_int(1)]);
    assert_eq!(rc, xirang_bridge::Status::Declined as i32);
    // SAFETY: empty list.
    assert_eq!(unsafe { xirang_set_force_fallback("".as_ptr(), 0) }, 0);
}

#[test]
fn streams_and_events() {
    setup();
    let (mut s, mut cur) = (0i64, -1i64);
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(xirang_stream_current(0, &mut cur), 0);
        assert_eq!(cur, 0, "the default stream");
        assert_eq!(xirang_stream_new(0, &mut s), 0, "{}", last_error());
    }
    assert_ne!(s, 0);
    assert_eq!(xirang_stream_set(0, s), 0);
    // SAFETY: valid out-pointer.
    unsafe { assert_eq!(xirang_stream_current(0, &mut cur), 0) };
    assert_eq!(cur, s);
    let (mut e1, mut e2) = (0u64, 0u64);
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(xirang_event_create(0, &mut e1), 0);
        assert_eq!(xirang_event_create(0, &mut e2), 0);
    }
    assert_eq!(xirang_event_record(0, e1, s), 0, "{}", last_error());
    let a = Dev::new_f32(0, &[1.0; 64], &[64]);
    let ta = a.xr();
    let (rc, mut out) = call("add.Tensor", &[tensor_arg(&ta), tensor_arg(&ta), scalar_int(1)]);
    assert_eq!(rc, 0);
    // SAFETY: from a successful call.
    unsafe { xirang_result_free(&mut out) };
    assert_eq!(xirang_event_record(0, e2, s), 0);
    assert_eq!(xirang_event_block(0, 0, e2), 0);
    assert_eq!(xirang_event_synchronize(0, e2), 0);
    let mut ms = -1.0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { xirang_event_elapsed(0, e1, e2, &mut ms) }, 0, "{}", last_error());
    assert!(ms >= 0.0);
    assert_eq!(xirang_stream_synchronize(0, s), 0);
    assert_eq!(xirang_event_destroy(0, e1), 0);
    assert_eq!(xirang_event_destroy(0, e2), 0);
    assert_eq!(xirang_stream_set(0, 0), 0);
}

#[test]
fn version_is_the_generated_one() {
    // SAFETY: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(xirang_pytorch_version()) }.to_str().unwrap().to_string();
    assert_eq!(v, xirang_runtime::generated::PYTORCH_VERSION);
}

/// A CPU zero-dim tensor holding `bytes` of `dtype`.
fn cpu_scalar(bytes: &[u8], dtype: i32) -> XrTensor {
    XrTensor {
        storage: std::ptr::null_mut(),
        data: bytes.as_ptr() as u64,
        nbytes: bytes.len() as u64,
        sizes: std::ptr::null(),
        strides: std::ptr::null(),
        ndim: 0,
        offset: 0,
        dtype,
        itemsize: bytes.len() as i32,
        device: -1,
        alias: -1,
    }
}

#[test]
fn wrapped_numbers_join_the_device() {
    setup();
    // float32 tensor + 2.5 (a Python float PyTorch wrapped as a float64 CPU tensor): float32, on
    // the device's kernel
    let a = Dev::new_f32(0, &[1.0, 2.0], &[2]);
    let ta = a.xr();
    let num = 2.5f64.to_le_bytes();
    let wrapped = cpu_scalar(&num, DTYPE_F64);
    let mut other = tensor_arg(&wrapped);
    other.flags = FLAG_WRAPPED_NUMBER;
    let (rc, mut out) = call("add.Tensor", &[tensor_arg(&ta), other, scalar_int(1)]);
    assert_eq!(rc, 0, "{}", last_error());
    let r = result_tensor(&out, 0);
    assert_eq!(r.dtype, DTYPE_F32);
    assert_eq!(read_f32(&r), vec![3.5, 4.5]);
    // SAFETY: from a successful call.
    unsafe { xirang_result_free(&mut out) };
}
