//! Configuration through environment variables (own process, one test).

use std::ffi::c_void;

use xirang_acl_sim as sim;

#[test]
fn env_vars_configure_devices_capacity_and_faults() {
    let _g = sim::exclusive();
    // SAFETY: this test binary runs a single test; no other thread reads
    // the environment concurrently.
    unsafe {
        std::env::set_var("XIRANG_SIM_DEVICES", "3,0,7");
        std::env::set_var("XIRANG_SIM_CAPACITY_BYTES", "4096");
        std::env::set_var("XIRANG_SIM_FAIL_MALLOC", "2");
    }
    // SAFETY: valid out-pointers; null config path is allowed.
    unsafe {
        assert_eq!(sim::aclInit(std::ptr::null()), 0);
        assert_eq!(sim::physical_device_ids().unwrap(), vec![3, 0, 7]);
        assert_eq!(sim::aclrtSetDevice(7), 0);
        let (mut free, mut total) = (0usize, 0usize);
        assert_eq!(sim::aclrtGetMemInfo(sim::ACL_HBM_MEM, &mut free, &mut total), 0);
        assert_eq!(total, 4096);
        let mut p: *mut c_void = std::ptr::null_mut();
        assert_eq!(sim::aclrtMalloc(&mut p, 8, 0), 0);
        assert_eq!(sim::aclrtMalloc(&mut p, 8, 0), sim::ACL_ERROR_RT_MEMORY_ALLOCATION);
        assert_eq!(sim::aclrtMalloc(&mut p, 8, 0), 0);
        assert_eq!(sim::aclFinalize(), 0);
        std::env::set_var("XIRANG_SIM_DEVICES", "1,x");
        assert_eq!(sim::aclInit(std::ptr::null()), sim::ACL_ERROR_INVALID_PARAM);
        let msg = std::ffi::CStr::from_ptr(sim::aclGetRecentErrMsg()).to_string_lossy().into_owned();
        assert!(msg.contains("bad device id"), "{msg}");
        std::env::set_var("XIRANG_SIM_DEVICES", "2,2");
        assert_eq!(sim::aclInit(std::ptr::null()), sim::ACL_ERROR_INVALID_PARAM);
    }
}
