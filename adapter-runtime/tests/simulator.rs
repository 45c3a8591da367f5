//! The simulated ACL device: sparse device ids, memory, async streams,
//! events, errors and fault injection. All tests in this process share one
//! simulator configured with physical ids 3,0,7 and 1 MiB per device.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use xirang_acl_sim::{self as sim, SimConfig};
use xirang_runtime::Error;
use xirang_runtime::driver::acl::AclDriver;
use xirang_runtime::driver::{Driver, StreamId};
use xirang_runtime::runtime::Runtime;

const CAP: u64 = 1 << 20;

fn setup() -> (MutexGuard<'static, ()>, AclDriver) {
    let g = sim::exclusive();
    if !sim::is_initialized() {
        sim::configure(SimConfig { devices: vec![3, 0, 7], capacity_bytes: CAP }).unwrap();
    }
    let d = AclDriver::simulator();
    d.init().unwrap();
    sim::clear_faults();
    (g, d)
}

fn code(e: Error) -> i32 {
    match e {
        Error::Driver { code, .. } => code,
        other => panic!("expected a driver error, got {other:?}"),
    }
}

#[test]
fn sparse_out_of_order_ids_are_renumbered() {
    let (_g, d) = setup();
    assert_eq!(d.device_count().unwrap(), 3);
    assert_eq!(d.physical_device_ids().unwrap(), vec![3, 0, 7]);
    let rt = Runtime::new(Arc::new(AclDriver::simulator())).unwrap();
    assert_eq!(rt.device_map().physical_ids(), &[0, 3, 7]);
    assert_eq!(rt.device(1).unwrap().physical_id(), 3);
    assert_eq!(rt.device_map().logical(7), Some(2));
    assert_eq!(rt.device_map().logical(1), None);
    assert!(rt.device(3).is_err());
    // a physical id that does not exist
    assert_eq!(code(d.set_device(1).unwrap_err()), sim::ACL_ERROR_RT_INVALID_DEVICEID);
}

#[test]
fn memcpy_roundtrip_and_memset() {
    let (_g, d) = setup();
    let p = d.malloc(7, 64).unwrap();
    let q = d.malloc(7, 64).unwrap();
    let data: Vec<u8> = (0..64).collect();
    d.memcpy_h2d(7, p, &data).unwrap();
    d.memcpy_d2d(7, q, p + 8, 32).unwrap();
    let mut out = vec![0u8; 32];
    d.memcpy_d2h(7, &mut out, q).unwrap();
    assert_eq!(out, (8..40).collect::<Vec<u8>>());
    d.memset(7, q + 4, 0xAB, 4).unwrap();
    d.memcpy_d2h(7, &mut out[..8], q).unwrap();
    assert_eq!(&out[..8], &[8, 9, 10, 11, 0xAB, 0xAB, 0xAB, 0xAB]);
    // async variants on a created stream
    let s = d.create_stream(7).unwrap();
    d.memset_async(7, p, 1, 64, s).unwrap();
    d.memcpy_d2d_async(7, q, p, 64, s).unwrap();
    let mut all = vec![0u8; 64];
    d.memcpy_d2h_async(7, &mut all, q, s).unwrap();
    assert!(all.iter().all(|&b| b == 1));
    d.destroy_stream(7, s).unwrap();
    d.free(7, p).unwrap();
    d.free(7, q).unwrap();
}

#[test]
fn device_memory_is_not_host_addressable_and_bad_pointers_fail() {
    let (_g, d) = setup();
    let p = d.malloc(0, 16).unwrap();
    assert_eq!(p >> 60, 0xD, "device addresses are tagged, not host pointers");
    let mut buf = vec![0u8; 32];
    // read past the end of the allocation
    assert_eq!(code(d.memcpy_d2h(0, &mut buf, p).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    // interior pointer cannot be freed
    assert_eq!(code(d.free(0, p + 4).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    d.free(0, p).unwrap();
    // use after free, double free
    assert_eq!(code(d.memcpy_d2h(0, &mut buf[..4], p).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(d.free(0, p).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    // never-allocated tagged address
    assert_eq!(code(d.memset(0, 0xD000_0000_0000_0040, 0, 4).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    // a host address used as device memory
    assert_eq!(code(d.memcpy_h2d(0, buf.as_ptr() as u64, &[1, 2]).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    // size 0 is rejected
    assert_eq!(code(d.malloc(0, 0).unwrap_err()), sim::ACL_ERROR_INVALID_PARAM);
    let msg = d.last_error_message().unwrap();
    assert!(msg.contains("size"), "{msg}");
}

#[test]
fn raw_c_abi_argument_errors() {
    let (_g, d) = setup();
    d.set_device(0).unwrap();
    let p = d.malloc(0, 8).unwrap() as usize as *mut c_void;
    let src = [0u8; 16];
    // SAFETY: all host pointers are valid for the sizes passed.
    unsafe {
        assert_eq!(
            sim::aclrtMemcpy(p, 8, src.as_ptr().cast(), 16, sim::ACL_MEMCPY_HOST_TO_DEVICE),
            sim::ACL_ERROR_INVALID_PARAM,
            "count > destMax"
        );
        assert_eq!(
            sim::aclrtMemcpy(std::ptr::null_mut(), 8, src.as_ptr().cast(), 8, sim::ACL_MEMCPY_HOST_TO_DEVICE),
            sim::ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(sim::aclrtMemcpy(p, 8, src.as_ptr().cast(), 8, 42), sim::ACL_ERROR_INVALID_PARAM);
        // ACL_MEMCPY_DEFAULT infers the direction from the addresses
        assert_eq!(sim::aclrtMemcpy(p, 8, src.as_ptr().cast(), 8, sim::ACL_MEMCPY_DEFAULT), sim::ACL_SUCCESS);
        assert_eq!(sim::aclrtMalloc(std::ptr::null_mut(), 8, 0), sim::ACL_ERROR_INVALID_PARAM);
        let mut q: *mut c_void = std::ptr::null_mut();
        assert_eq!(sim::aclrtMalloc(&mut q, 8, 99), sim::ACL_ERROR_INVALID_PARAM, "bad policy");
        assert_eq!(sim::aclrtFree(std::ptr::null_mut()), sim::ACL_ERROR_INVALID_PARAM);
        assert_eq!(sim::aclrtSynchronizeStream(0x1234 as *mut c_void), sim::ACL_ERROR_RT_INVALID_HANDLE);
        assert_eq!(sim::aclrtDestroyStream(std::ptr::null_mut()), sim::ACL_ERROR_INVALID_PARAM);
        assert!(!sim::aclGetRecentErrMsg().is_null());
        assert_eq!(sim::aclrtFree(p), sim::ACL_SUCCESS);
    }
}

#[test]
fn out_of_memory_and_mem_info() {
    let (_g, d) = setup();
    let before = d.mem_info(3).unwrap();
    assert_eq!(before.total as u64, CAP);
    let big = d.malloc(3, (CAP / 2) as usize).unwrap();
    let info = d.mem_info(3).unwrap();
    assert_eq!(info.free, before.free - (CAP / 2) as usize);
    let err = d.malloc(3, (CAP / 2 + 1) as usize).unwrap_err();
    assert!(err.is_driver_oom());
    assert_eq!(code(err), sim::ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_eq!(sim::ACL_ERROR_RT_MEMORY_ALLOCATION, 207001);
    // capacity is per device
    let other = d.malloc(7, (CAP / 2 + 1) as usize).unwrap();
    d.free(7, other).unwrap();
    d.free(3, big).unwrap();
    assert_eq!(d.mem_info(3).unwrap(), before);
}

#[test]
fn fault_injection_nth_malloc_and_next_launch() {
    let (_g, d) = setup();
    sim::inject_malloc_failure(2);
    let a = d.malloc(0, 8).unwrap();
    assert_eq!(code(d.malloc(0, 8).unwrap_err()), sim::ACL_ERROR_RT_MEMORY_ALLOCATION);
    let b = d.malloc(0, 8).unwrap();
    d.free(0, a).unwrap();
    d.free(0, b).unwrap();

    sim::inject_launch_failure(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let e = d
        .launch_kernel(
            0,
            StreamId::DEFAULT,
            Box::new(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap_err();
    assert_eq!(code(e), sim::ACL_ERROR_RT_AICORE_EXCEPTION);
    let r = ran.clone();
    d.launch_kernel(
        0,
        StreamId::DEFAULT,
        Box::new(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }),
    )
    .unwrap();
    d.synchronize_stream(0, StreamId::DEFAULT).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the failed launch never runs");

    // the C extension entry point does the same
    // SAFETY: plain value argument.
    assert_eq!(unsafe { sim::xirangSimInjectMallocFailure(1) }, sim::ACL_SUCCESS);
    assert!(d.malloc(0, 8).unwrap_err().is_driver_oom());
}

#[test]
fn streams_run_asynchronously_in_fifo_order() {
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let p = d.malloc(0, 8).unwrap();
    d.memset(0, p, 0, 8).unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    // kernel 1 blocks until the host releases it: launch must not wait.
    d.launch_kernel(
        0,
        s,
        Box::new(move |mem| {
            rx.recv_timeout(Duration::from_secs(10)).map_err(|_| Error::Unsupported("timeout".into()))?;
            mem.write(p, &1u64.to_le_bytes())
        }),
    )
    .unwrap();
    // kernel 2 reads what kernel 1 wrote (FIFO) and doubles it.
    d.launch_kernel(
        0,
        s,
        Box::new(move |mem| {
            let mut b = [0u8; 8];
            mem.read(p, &mut b)?;
            mem.write(p, &(u64::from_le_bytes(b) * 2 + 1).to_le_bytes())
        }),
    )
    .unwrap();
    // launches returned while kernel 1 is still blocked
    let mut now = [0u8; 8];
    d.memcpy_d2h(0, &mut now, p).unwrap();
    assert_eq!(u64::from_le_bytes(now), 0);
    tx.send(()).unwrap();
    d.synchronize_stream(0, s).unwrap();
    d.memcpy_d2h(0, &mut now, p).unwrap();
    assert_eq!(u64::from_le_bytes(now), 3);
    d.destroy_stream(0, s).unwrap();
    d.free(0, p).unwrap();
}

#[test]
fn freed_memory_is_invalid_for_a_worker_that_used_it() {
    // The stream worker caches the allocations it resolved; a free must invalidate that cache.
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let p = d.malloc(0, 64).unwrap();
    d.launch_kernel(0, s, Box::new(move |mem| mem.write(p, &[7u8; 64]))).unwrap();
    d.synchronize_stream(0, s).unwrap();
    d.free(0, p).unwrap();
    d.launch_kernel(0, s, Box::new(move |mem| mem.write(p, &[1u8; 8]))).unwrap();
    assert_eq!(code(d.synchronize_stream(0, s).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    let mut b = [0u8; 8];
    d.launch_kernel(0, s, Box::new(move |mem| mem.read(p, &mut b))).unwrap();
    assert_eq!(code(d.synchronize_stream(0, s).unwrap_err()), sim::ACL_ERROR_RT_PARAM_INVALID);
    d.destroy_stream(0, s).unwrap();
}

/// Records the thread that drops it.
struct DropProbe(Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>);

impl Drop for DropProbe {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(std::thread::current().id());
    }
}

#[test]
fn finished_kernels_are_dropped_by_the_synchronizing_thread() {
    // What a kernel captured is released once a synchronize returns, on the caller's thread (not
    // on the stream's worker: memory freed on another thread than its allocator's contends for the
    // host allocator's lock).
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let drops = Arc::new(std::sync::Mutex::new(Vec::new()));
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let (probe, n) = (DropProbe(drops.clone()), ran.clone());
        d.launch_kernel(
            0,
            s,
            Box::new(move |_| {
                let _ = &probe;
                n.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
    }
    d.synchronize_stream(0, s).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 3, "each kernel ran once");
    let me = std::thread::current().id();
    assert_eq!(*drops.lock().unwrap(), vec![me; 3], "dropped at the synchronize, on this thread");
    d.destroy_stream(0, s).unwrap();
}

#[test]
fn kernel_errors_are_sticky_until_synchronize() {
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    d.launch_kernel(0, s, Box::new(|_| Err(Error::Driver { api: "k", code: 507015, message: String::new() }))).unwrap();
    // a kernel touching an invalid address fails too
    d.launch_kernel(0, s, Box::new(|mem| mem.write(0xD000_0000_0000_0040, &[1]))).unwrap();
    assert_eq!(code(d.synchronize_stream(0, s).unwrap_err()), 507015);
    d.synchronize_stream(0, s).unwrap();
    d.destroy_stream(0, s).unwrap();
}

/// A kernel that panics fails like one that returns an error (the panic does not unwind through
/// the C ABI into the simulator, which would abort the process); the stream keeps working.
#[test]
fn a_panicking_kernel_is_a_sticky_error() {
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let p = d.malloc(0, 8).unwrap();
    d.launch_kernel(0, s, Box::new(|_| panic!("kernel bug (expected by this test)"))).unwrap();
    assert_eq!(code(d.synchronize_stream(0, s).unwrap_err()), 507015);
    d.launch_kernel(0, s, Box::new(move |mem| mem.write(p, &[3u8; 8]))).unwrap();
    d.synchronize_stream(0, s).unwrap();
    let mut b = [0u8; 8];
    d.memcpy_d2h(0, &mut b, p).unwrap();
    assert_eq!(b, [3u8; 8]);
    d.free(0, p).unwrap();
    d.destroy_stream(0, s).unwrap();
}

#[test]
fn kernels_map_device_memory_in_place() {
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let (p, q) = (d.malloc(0, 16).unwrap(), d.malloc(0, 16).unwrap());
    d.memcpy_h2d(0, p, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]).unwrap();
    let (tx, rx) = mpsc::channel();
    d.launch_kernel(
        0,
        s,
        Box::new(move |mem| {
            // two reads of one allocation and a write to another: mapped in place
            let mut seen = Vec::new();
            let a = mem.with_mapped(&[(p, 4), (p + 8, 4)], &[(q, 8)], &mut |ins, outs| {
                seen = ins.iter().map(|b| b.to_vec()).collect();
                outs[0][..4].copy_from_slice(ins[0]);
                outs[0][4..].copy_from_slice(ins[1]);
            })?;
            // a write overlapping a read is refused (the kernel would copy instead)
            let b = mem.with_mapped(&[(p, 8)], &[(p + 4, 8)], &mut |_, _| panic!("must not run"))?;
            // a range outside any allocation is the driver's error
            let c = mem.with_mapped(&[(p, 64)], &[(q, 4)], &mut |_, _| panic!("must not run")).is_err();
            tx.send((a, b, c, seen)).map_err(|e| Error::InvalidArgument(e.to_string()))
        }),
    )
    .unwrap();
    d.synchronize_stream(0, s).unwrap();
    let (a, b, c, seen) = rx.recv().unwrap();
    assert!(a && !b && c);
    assert_eq!(seen, [vec![1, 2, 3, 4], vec![9, 10, 11, 12]]);
    let mut out = [0u8; 8];
    d.memcpy_d2h(0, &mut out, q).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 9, 10, 11, 12]);
    d.destroy_stream(0, s).unwrap();
    d.free(0, p).unwrap();
    d.free(0, q).unwrap();
}

#[test]
fn events_record_wait_and_time() {
    let (_g, d) = setup();
    let (a, b) = (d.create_stream(0).unwrap(), d.create_stream(0).unwrap());
    let (start, end, never) = (d.create_event(0).unwrap(), d.create_event(0).unwrap(), d.create_event(0).unwrap());
    let p = d.malloc(0, 8).unwrap();
    let q = d.malloc(0, 8).unwrap();
    d.memset(0, p, 0, 8).unwrap();
    d.record_event(0, start, a).unwrap();
    d.launch_kernel(
        0,
        a,
        Box::new(move |mem| {
            std::thread::sleep(Duration::from_millis(40));
            mem.write(p, &7u64.to_le_bytes())
        }),
    )
    .unwrap();
    d.record_event(0, end, a).unwrap();
    // stream b waits for `end`, then copies p to q
    d.stream_wait_event(0, b, end).unwrap();
    d.memcpy_d2d_async(0, q, p, 8, b).unwrap();
    d.synchronize_stream(0, b).unwrap();
    let mut out = [0u8; 8];
    d.memcpy_d2h(0, &mut out, q).unwrap();
    assert_eq!(u64::from_le_bytes(out), 7, "wait_event orders stream b after stream a");
    d.synchronize_event(0, end).unwrap();
    let ms = d.event_elapsed_ms(0, start, end).unwrap();
    assert!((35.0..5000.0).contains(&ms), "elapsed {ms} ms");
    assert_eq!(code(d.event_elapsed_ms(0, start, never).unwrap_err()), sim::ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    // synchronizing an event that was never recorded returns at once
    d.synchronize_event(0, never).unwrap();
    for e in [start, end, never] {
        d.destroy_event(0, e).unwrap();
    }
    assert_eq!(code(d.record_event(0, start, a).unwrap_err()), sim::ACL_ERROR_RT_INVALID_HANDLE);
    d.destroy_stream(0, a).unwrap();
    d.destroy_stream(0, b).unwrap();
    d.free(0, p).unwrap();
    d.free(0, q).unwrap();
}

unsafe extern "C" fn bump(user_data: *mut c_void) {
    // SAFETY: the test passes a pointer to a live AtomicUsize.
    let c = unsafe { &*(user_data as *const AtomicUsize) };
    c.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn launch_callback_runs_in_stream_order() {
    let (_g, d) = setup();
    d.set_device(0).unwrap();
    let counter = AtomicUsize::new(0);
    let ud = &counter as *const AtomicUsize as *mut c_void;
    // SAFETY: `counter` outlives the stream synchronize below; `bump` is thread-safe.
    unsafe {
        assert_eq!(sim::aclrtLaunchCallback(Some(bump), ud, sim::ACL_CALLBACK_BLOCK, std::ptr::null_mut()), 0);
        assert_eq!(sim::aclrtLaunchCallback(Some(bump), ud, sim::ACL_CALLBACK_NO_BLOCK, std::ptr::null_mut()), 0);
        assert_eq!(sim::aclrtLaunchCallback(None, ud, 0, std::ptr::null_mut()), sim::ACL_ERROR_INVALID_PARAM);
        assert_eq!(sim::aclrtSynchronizeStream(std::ptr::null_mut()), 0);
    }
    assert_eq!(counter.load(Ordering::SeqCst), 2);
    d.synchronize_device(0).unwrap();
}

#[test]
fn current_device_is_per_thread() {
    let (_g, d) = setup();
    d.set_device(7).unwrap();
    let h = std::thread::spawn(|| {
        let mut id = -1;
        // SAFETY: valid out-pointer.
        unsafe { sim::aclrtGetDevice(&mut id) }
    });
    assert_eq!(h.join().unwrap(), sim::ACL_ERROR_RT_CONTEXT_NULL);
    let mut id = -1;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { sim::aclrtGetDevice(&mut id) }, 0);
    assert_eq!(id, 7);
}

#[test]
fn optional_entry_points_fall_back() {
    let (_g, _d) = setup();
    use xirang_runtime::driver::acl::linked_symbol;
    let hidden = ["aclrtCreateStreamWithConfig", "xirangSimGetPhysicalDeviceIds", "xirangSimLaunchKernel"];
    let resolve = |name: &str| if hidden.contains(&name) { None } else { linked_symbol(name) };
    let d = AclDriver::from_resolver(&resolve, "no-extensions").unwrap();
    // aclrtCreateStreamWithConfig -> aclrtCreateStream (the chain of xirang.toml [driver])
    assert_eq!(AclDriver::simulator().resolved("stream_create"), Some("aclrtCreateStreamWithConfig"));
    assert_eq!(d.resolved("stream_create"), Some("aclrtCreateStream"));
    let s = d.create_stream(0).unwrap();
    d.synchronize_stream(0, s).unwrap();
    d.destroy_stream(0, s).unwrap();
    // without the enumeration extension, ids are 0..count
    assert_eq!(d.physical_device_ids().unwrap(), vec![0, 1, 2]);
    // without the launch extension, kernels are unsupported (CPU fallback)
    let e = d.launch_kernel(0, StreamId::DEFAULT, Box::new(|_| Ok(()))).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
}

#[test]
fn tensors_move_between_sparse_devices() {
    let (_g, _d) = setup();
    use xirang_runtime::{Device, Tensor};
    let rt = Runtime::new(Arc::new(AclDriver::simulator())).unwrap();
    let t = Tensor::from_slice(&[1i32, 2, 3]).to_device(&rt, Device::Npu(0)).unwrap();
    let before = rt.memory_stats(2).unwrap().allocated_bytes;
    let u = t.to_device(&rt, Device::Npu(2)).unwrap();
    assert_eq!(u.device(), Device::Npu(2));
    assert_eq!(u.device_ctx().unwrap().physical_id(), 7);
    assert_eq!(rt.memory_stats(2).unwrap().allocated_bytes - before, 512);
    assert_eq!(u.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    // ops refuse tensors on two different devices
    let e = xirang_runtime::reference::add(&t, &u, xirang_runtime::Scalar::Int(1)).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch(_)), "{e:?}");
}

#[test]
fn event_query_answers_without_waiting() {
    let (_g, d) = setup();
    let s = d.create_stream(0).unwrap();
    let (e, never) = (d.create_event(0).unwrap(), d.create_event(0).unwrap());
    let (go, gate) = mpsc::channel::<()>();
    // a kernel that runs until the test lets it finish
    d.launch_kernel(
        0,
        s,
        Box::new(move |_| {
            let _ = gate.recv_timeout(Duration::from_secs(30));
            Ok(())
        }),
    )
    .unwrap();
    d.record_event(0, e, s).unwrap();
    assert!(!d.query_event(0, e).unwrap(), "the kernel before the event is still running");
    assert!(d.query_event(0, never).unwrap(), "an event never recorded counts as complete");
    go.send(()).unwrap();
    d.synchronize_event(0, e).unwrap();
    assert!(d.query_event(0, e).unwrap());
    for ev in [e, never] {
        d.destroy_event(0, ev).unwrap();
    }
    d.destroy_stream(0, s).unwrap();
}

#[test]
fn page_locked_host_memory_round_trips() {
    let (_g, d) = setup();
    let h = d.malloc_host(10_000).unwrap();
    assert_eq!(h % 4096, 0, "page-aligned");
    let p = d.malloc(0, 256).unwrap();
    let data: Vec<u8> = (0..=255).collect();
    d.memcpy_h2d(0, p, &data).unwrap();
    let mut out = vec![0u8; 256];
    d.memcpy_d2h(0, &mut out, p).unwrap();
    assert_eq!(out, data);
    d.free(0, p).unwrap();
    d.free_host(h).unwrap();
    assert!(d.free_host(h).is_err(), "freed twice");
}
