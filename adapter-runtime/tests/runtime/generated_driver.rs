//! The generated driver bindings (`generated/driver.rs`, from the real acl_rt.h declarations
//! and xirang.toml's [driver] chains) over the simulator's cdylib, opened like libascendcl.so.

use std::path::PathBuf;

use xirang_runtime::generated::driver::{CHAINS, DriverApi, DriverError, Status};

/// The simulator is process-wide: a second `aclInit` reports ACL_ERROR_REPEAT_INITIALIZE.
fn init(api: &DriverApi) {
    match api.init() {
        Ok(()) => {}
        Err(DriverError::Status { status: Status::RepeatInitialize, .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let name = format!("{}xirang_acl_sim{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let candidates = [dir.join(&name), dir.join("deps").join(&name)];
    candidates.iter().find(|p| p.exists()).cloned().expect("simulator cdylib is built")
}

#[test]
fn bindings_drive_the_simulator_through_the_fallback_chains() {
    let api = DriverApi::load(Some(&cdylib())).unwrap();
    init(&api);
    // the simulator lacks aclrtDestroyStreamForce: the chain falls back to aclrtDestroyStream
    assert_eq!(api.resolved("stream_destroy"), Some("aclrtDestroyStream"));
    assert_eq!(api.resolved("stream_create"), Some("aclrtCreateStreamWithConfig"));
    let n = api.device_count().unwrap();
    assert!(n >= 1);
    api.set_device(0).unwrap();

    let buf = api.malloc(16).unwrap();
    api.memcpy_h2d(&buf, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]).unwrap();
    let other = api.malloc(16).unwrap();
    api.memcpy_d2d(&other, &buf).unwrap();
    let mut back = [0u8; 16];
    api.memcpy_d2h(&mut back, &other).unwrap();
    assert_eq!(back[15], 16);
    api.memset(&other, 7, 4).unwrap();
    api.memcpy_d2h(&mut back, &other).unwrap();
    assert_eq!(&back[..5], &[7, 7, 7, 7, 5]);

    let s = api.stream_create().unwrap();
    let (e0, e1) = (api.event_create().unwrap(), api.event_create().unwrap());
    api.event_record(&e0, &s).unwrap();
    api.event_record(&e1, &s).unwrap();
    api.stream_synchronize(&s).unwrap();
    api.event_synchronize(&e1).unwrap();
    assert!(api.event_elapsed(&e0, &e1).unwrap() >= 0.0);
    let (free, total) = api.memory_info().unwrap();
    assert!(free <= total && total > 0);
}

#[test]
fn driver_status_codes_become_the_generated_enum() {
    let api = DriverApi::load(Some(&cdylib())).unwrap();
    init(&api);
    let e = match api.malloc(usize::MAX / 2) {
        Err(e) => e,
        Ok(_) => panic!("a huge allocation succeeded"),
    };
    let DriverError::Status { op, status, .. } = &e else { panic!("{e}") };
    assert_eq!(*op, "malloc");
    assert!(status.name().starts_with("ACL_ERROR_"), "{e}");
    assert_eq!(Status::from_code(status.code()), Some(*status));
    assert_eq!(Status::from_code(0), None);
}

#[test]
fn a_missing_required_function_is_a_load_error() {
    // a resolver that knows nothing: malloc (required) cannot resolve
    let e = DriverApi::from_resolver(&|_| None).err().expect("fails");
    assert!(matches!(e, DriverError::Missing { .. }), "{e}");
    assert!(CHAINS.iter().any(|c| c.0 == "malloc" && c.1));
}

/// The runtime's driver is the generated table: over the cdylib and over the linked simulator,
/// every device operation of `xirang.toml [driver]` resolves to the candidate the generated table
/// resolves, and a required one always resolves.
#[test]
fn the_runtime_driver_runs_over_the_generated_table() {
    use xirang_runtime::driver::acl::AclDriver;
    let api = DriverApi::load(Some(&cdylib())).unwrap();
    let loaded = AclDriver::load(&cdylib()).unwrap();
    let linked = AclDriver::simulator();
    for (op, required, candidates) in CHAINS {
        assert_eq!(loaded.resolved(op), api.resolved(op), "{op}");
        assert_eq!(linked.resolved(op), api.resolved(op), "{op} (linked)");
        if let Some(sym) = loaded.resolved(op) {
            assert!(candidates.contains(&sym), "{op}: {sym}");
        }
        assert!(!required || loaded.resolved(op).is_some(), "{op} is required");
    }
}
