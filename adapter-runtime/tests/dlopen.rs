//! The same runtime over the simulator's cdylib opened at run time with
//! libloading (the path real hardware takes with libascendcl.so).

use std::path::PathBuf;
use std::sync::Arc;

use xirang_runtime::driver::Driver;
use xirang_runtime::driver::acl::AclDriver;
use xirang_runtime::{Device, Error, Runtime, Scalar, Tensor, reference};

/// `target/<profile>/libxirang_acl_sim.so`, next to this test's `deps/`.
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let name = format!("{}xirang_acl_sim{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    // `cargo build` uplifts it to target/<profile>/; `cargo test` leaves it in deps/
    let candidates = [dir.join(&name), dir.join("deps").join(&name)];
    let found = candidates.iter().find(|p| p.exists()).cloned();
    found.unwrap_or_else(|| {
        panic!("{} not built (cargo builds it with the xirang-acl-sim dependency)", candidates[0].display())
    })
}

#[test]
fn runtime_over_dlopened_simulator() {
    let driver = AclDriver::load(&cdylib()).unwrap();
    assert!(driver.name().contains("xirang_acl_sim"));
    let rt = Runtime::new(Arc::new(driver)).unwrap();
    assert!(rt.device_count() >= 1);
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).to_device(&rt, Device::Npu(0)).unwrap();
    let u = reference::mul(&t, 2.0).unwrap();
    assert_eq!(u.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    // kernels go through the library's own extension entry points
    let ctx = rt.device(0).unwrap();
    let p = u.data_ptr().unwrap();
    ctx.driver()
        .launch_kernel(ctx.physical_id(), ctx.current_stream(), Box::new(move |m| m.write(p, &0f32.to_le_bytes())))
        .unwrap();
    assert_eq!(u.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 4.0, 6.0]);
    u.fill_(Scalar::Int(1)).unwrap();
    assert_eq!(u.to_vec::<f32>().unwrap(), vec![1.0; 3]);
}

#[test]
fn missing_library_is_a_load_error() {
    let e = AclDriver::load(std::path::Path::new("/nonexistent/libascendcl.so")).err().unwrap();
    assert!(matches!(e, Error::Load(_)), "{e:?}");
}
