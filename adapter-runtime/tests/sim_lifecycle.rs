//! aclInit / aclFinalize lifecycle and configuration (own process).

use std::ffi::c_void;

use xirang_acl_sim::{self as sim, SimConfig, SimError};

#[test]
fn init_finalize_reconfigure() {
    let _g = sim::exclusive();
    sim::configure(SimConfig { devices: vec![5, 2], capacity_bytes: 4096 }).unwrap();
    assert!(sim::configure(SimConfig { devices: vec![1, 1], capacity_bytes: 1 }).is_err());
    // SAFETY: all out-pointers are valid; null config path is allowed.
    unsafe {
        let mut n = 0u32;
        assert_eq!(sim::aclrtGetDeviceCount(&mut n), sim::ACL_ERROR_UNINITIALIZE);
        assert_eq!(sim::aclInit(std::ptr::null()), 0);
        assert_eq!(sim::aclInit(std::ptr::null()), sim::ACL_ERROR_REPEAT_INITIALIZE);
        assert_eq!(sim::configure(SimConfig::default()), Err(SimError::AlreadyInitialized));
        assert_eq!(sim::aclrtGetDeviceCount(&mut n), 0);
        assert_eq!(n, 2);
        assert_eq!(sim::physical_device_ids().unwrap(), vec![5, 2]);
        // no current device yet on this thread
        let mut p: *mut c_void = std::ptr::null_mut();
        assert_eq!(sim::aclrtMalloc(&mut p, 8, 0), sim::ACL_ERROR_RT_CONTEXT_NULL);
        assert_eq!(sim::aclrtSetDevice(2), 0);
        assert_eq!(sim::aclrtMalloc(&mut p, 4096, 0), 0);
        assert_eq!(sim::aclrtMalloc(&mut p, 1, 0), sim::ACL_ERROR_RT_MEMORY_ALLOCATION);
        // reset frees the device's memory
        assert_eq!(sim::aclrtResetDevice(2), 0);
        assert_eq!(sim::aclrtSetDevice(2), 0);
        let (mut free, mut total) = (0usize, 0usize);
        assert_eq!(sim::aclrtGetMemInfo(sim::ACL_HBM_MEM, &mut free, &mut total), 0);
        assert_eq!((free, total), (4096, 4096));
        assert_eq!(sim::aclrtGetMemInfo(99, &mut free, &mut total), sim::ACL_ERROR_INVALID_PARAM);
        assert_eq!(sim::aclFinalize(), 0);
        assert_eq!(sim::aclFinalize(), sim::ACL_ERROR_REPEAT_FINALIZE);
        assert_eq!(sim::aclrtSetDevice(2), sim::ACL_ERROR_UNINITIALIZE);
    }
    assert_eq!(sim::parse_devices("3, 0,7").unwrap(), vec![3, 0, 7]);
    assert!(sim::parse_devices("3,x").is_err());
    sim::configure(SimConfig { devices: vec![1], capacity_bytes: 64 }).unwrap();
    // SAFETY: valid out-pointer.
    unsafe {
        assert_eq!(sim::aclInit(std::ptr::null()), 0);
        let mut n = 0u32;
        assert_eq!(sim::aclrtGetDeviceCount(&mut n), 0);
        assert_eq!(n, 1);
        assert_eq!(sim::aclFinalize(), 0);
    }
}

/// A launch on the null stream after `aclrtResetDevice` runs on the device's new default stream,
/// not on the one the reset stopped: launches find their stream in a per-thread cache, which the
/// reset must invalidate.
#[test]
fn null_stream_launches_survive_a_device_reset() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let _g = sim::exclusive();
    sim::configure(SimConfig { devices: vec![4], capacity_bytes: 4096 }).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let launch = || {
        let r = ran.clone();
        sim::launch_kernel(0, move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    };
    // SAFETY: null config path and null (default) stream handles are allowed.
    unsafe {
        assert_eq!(sim::aclInit(std::ptr::null()), 0);
        assert_eq!(sim::aclrtSetDevice(4), 0);
        assert_eq!(launch(), Ok(()));
        assert_eq!(sim::aclrtSynchronizeStream(std::ptr::null_mut()), 0);
        assert_eq!(sim::aclrtResetDevice(4), 0);
        assert_eq!(sim::aclrtSetDevice(4), 0);
        assert_eq!(launch(), Ok(()));
        assert_eq!(sim::aclrtSynchronizeStream(std::ptr::null_mut()), 0);
        assert_eq!(sim::aclFinalize(), 0);
    }
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}
