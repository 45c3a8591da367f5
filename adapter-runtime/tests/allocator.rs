//! Caching allocator statistics, reuse, OOM retry (own process: one
//! device with 64 KiB).

use std::sync::Arc;

use xirang_acl_sim::{self as sim, SimConfig};
use xirang_runtime::device::BLOCK_ROUND;
use xirang_runtime::device::DeviceContext;
use xirang_runtime::driver::acl::AclDriver;
use xirang_runtime::driver::{Driver, StreamId};
use xirang_runtime::{DType, Device, Error, Runtime, Scalar, Tensor, kernels};

const CAP: u64 = 64 * 1024;

fn runtime() -> (std::sync::MutexGuard<'static, ()>, Runtime) {
    let g = sim::exclusive();
    if !sim::is_initialized() {
        sim::configure(SimConfig { devices: vec![4], capacity_bytes: CAP }).unwrap();
    }
    let rt = Runtime::new(Arc::new(AclDriver::simulator())).unwrap();
    sim::clear_faults();
    rt.empty_cache(0).unwrap();
    rt.device(0).unwrap().reset_peak_stats();
    (g, rt)
}

/// Queues a 50 ms kernel on the current stream: everything queued next waits behind it.
fn hold_stream(driver: &AclDriver, ctx: &xirang_runtime::device::DeviceContext) {
    let sleep = Box::new(|_: &dyn xirang_runtime::driver::KernelMemory| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        Ok(())
    });
    driver.launch_kernel(ctx.physical_id(), ctx.current_stream(), sleep).unwrap();
}

/// A runtime whose driver the test holds too (to queue kernels of its own), its device 0, and
/// `x`, 1024 ones of f32 on it.
fn driver_runtime() -> (std::sync::MutexGuard<'static, ()>, Arc<AclDriver>, Runtime, Arc<DeviceContext>, Tensor) {
    let (g, _) = runtime();
    let driver = Arc::new(AclDriver::simulator());
    let rt = Runtime::new(driver.clone()).unwrap();
    let ctx = rt.device(0).unwrap().clone();
    let x = Tensor::from_vec(vec![1f32; 1024], &[1024]).unwrap().to_device(&rt, Device::Npu(0)).unwrap();
    (g, driver, rt, ctx, x)
}

fn dev_zeros(rt: &Runtime, bytes: usize) -> Tensor {
    Tensor::zeros(&[bytes], DType::U8).to_device(rt, Device::Npu(0)).unwrap()
}

#[test]
fn stats_count_allocations_and_cache_hits() {
    let (_g, rt) = runtime();
    let s0 = rt.memory_stats(0).unwrap();
    let t = dev_zeros(&rt, 1000);
    let s1 = rt.memory_stats(0).unwrap();
    assert_eq!(s1.allocated_bytes - s0.allocated_bytes, 1024, "rounded to {BLOCK_ROUND}");
    assert_eq!(s1.reserved_bytes - s0.reserved_bytes, 1024);
    assert_eq!(s1.device_mallocs - s0.device_mallocs, 1);
    assert_eq!(s1.alloc_count - s0.alloc_count, 1);
    let view = t.narrow(0, 10, 10).unwrap();
    drop(t);
    // a view keeps the storage alive
    assert_eq!(rt.memory_stats(0).unwrap().allocated_bytes, s1.allocated_bytes);
    drop(view);
    let s2 = rt.memory_stats(0).unwrap();
    assert_eq!(s2.allocated_bytes, s0.allocated_bytes);
    assert_eq!(s2.reserved_bytes, s1.reserved_bytes, "freed blocks stay cached");
    assert_eq!(s2.free_count - s0.free_count, 1);
    // same size class again: served from the cache
    let t2 = dev_zeros(&rt, 900);
    let s3 = rt.memory_stats(0).unwrap();
    assert_eq!(s3.cache_hits - s2.cache_hits, 1);
    assert_eq!(s3.device_mallocs, s2.device_mallocs);
    assert!(s3.peak_allocated_bytes >= 1024);
    drop(t2);
    rt.empty_cache(0).unwrap();
    let s4 = rt.memory_stats(0).unwrap();
    assert_eq!(s4.reserved_bytes, 0);
    assert_eq!(s4.device_frees - s3.device_frees, 1);
    // zero-byte tensors never reach the driver
    let e = Tensor::zeros(&[0, 4], DType::F32).to_device(&rt, Device::Npu(0)).unwrap();
    assert_eq!(e.sizes(), &[0, 4]);
    assert_eq!(rt.memory_stats(0).unwrap().device_mallocs, s4.device_mallocs);
}

#[test]
fn oom_empties_cache_and_retries() {
    let (_g, rt) = runtime();
    // Fill the device with cached blocks of a size class that a large
    // request cannot reuse.
    let small: Vec<Tensor> = (0..60).map(|_| dev_zeros(&rt, 1024)).collect();
    drop(small);
    let s = rt.memory_stats(0).unwrap();
    assert_eq!(s.reserved_bytes, 60 * 1024);
    assert_eq!(s.allocated_bytes, 0);
    let big = dev_zeros(&rt, 32 * 1024);
    let s2 = rt.memory_stats(0).unwrap();
    assert_eq!(s2.oom_retries - s.oom_retries, 1);
    assert_eq!(s2.reserved_bytes, 32 * 1024, "the cache was emptied");
    // a request that cannot fit even after emptying the cache
    let err = Tensor::zeros(&[40 * 1024], DType::U8).to_device(&rt, Device::Npu(0)).unwrap_err();
    match err {
        Error::OutOfMemory { device, requested, allocated, .. } => {
            assert_eq!((device, requested, allocated), (0, 40 * 1024, 32 * 1024));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert_eq!(rt.memory_stats(0).unwrap().ooms - s2.ooms, 1);
    drop(big);
}

#[test]
fn injected_malloc_failure_is_retried() {
    let (_g, rt) = runtime();
    let s = rt.memory_stats(0).unwrap();
    sim::inject_malloc_failure(1);
    let t = dev_zeros(&rt, 100);
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![0u8; 100]);
    let s2 = rt.memory_stats(0).unwrap();
    assert_eq!(s2.oom_retries - s.oom_retries, 1);
    assert_eq!(s2.ooms, s.ooms);
    let info = rt.mem_info(0).unwrap();
    assert_eq!(info.total as u64, CAP);
    assert_eq!(info.free as u64, CAP - s2.reserved_bytes as u64);
}

/// Operands dropped on the host while queued kernels of another stream still hold them are
/// garbage, not live memory: an allocation that finds the device full waits for the queued work,
/// which gives them back, instead of failing.
#[test]
fn oom_waits_for_queued_kernels_that_hold_garbage() {
    let (_g, driver, rt, ctx, x) = driver_runtime();
    let s = rt.memory_stats(0).unwrap();
    let side = driver.create_stream(ctx.physical_id()).unwrap();
    ctx.set_current_stream(side);
    hold_stream(&driver, &ctx);
    // 30 operands of 4 KiB made on the default stream, consumed on the held side stream and
    // dropped at once: 120 KiB on a 64 KiB device.
    for _ in 0..30 {
        ctx.set_current_stream(StreamId::DEFAULT);
        let a = kernels::add_tensor(&x, &x, Scalar::Int(1)).unwrap();
        ctx.set_current_stream(side);
        drop(kernels::add_tensor(&a, &x, Scalar::Int(1)).unwrap());
    }
    let y = kernels::add_tensor(&x, &x, Scalar::Int(1)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2f32; 1024]);
    let s2 = rt.memory_stats(0).unwrap();
    assert!(s2.oom_retries > s.oom_retries, "the device filled up");
    assert_eq!(s2.ooms, s.ooms, "no allocation failed");
    ctx.set_current_stream(StreamId::DEFAULT);
    drop(y);
    rt.synchronize(0).unwrap();
    driver.destroy_stream(ctx.physical_id(), side).unwrap();
}

/// Stream-ordered reuse, as PyTorch's CUDA caching allocator: a result of a stream freed on the
/// host goes back to that stream's cache at once, although the kernel that writes it is still
/// queued, because whatever is allocated from the block next is used by work queued after it.
/// A loop of 200 results dropped at once behind a held stream uses one block, and every value is
/// right.
#[test]
fn results_freed_on_their_stream_are_reused_at_once() {
    let (_g, driver, rt, ctx, x) = driver_runtime();
    rt.synchronize(0).unwrap();
    let s = rt.memory_stats(0).unwrap();
    hold_stream(&driver, &ctx);
    for _ in 0..200 {
        drop(kernels::add_tensor(&x, &x, Scalar::Int(1)).unwrap());
    }
    let s1 = rt.memory_stats(0).unwrap();
    assert_eq!(s1.allocated_bytes, s.allocated_bytes, "nothing the host freed is held by the queue");
    assert!(s1.device_mallocs - s.device_mallocs <= 1, "{} fresh blocks", s1.device_mallocs - s.device_mallocs);
    assert_eq!(s1.oom_retries, s.oom_retries);
    // the block's last user is the one that reads it
    let y = kernels::add_tensor(&x, &x, Scalar::Int(2)).unwrap();
    let z = kernels::add_tensor(&y, &x, Scalar::Int(1)).unwrap();
    drop(y);
    let w = kernels::add_tensor(&x, &x, Scalar::Int(5)).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![4f32; 1024]);
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![6f32; 1024]);
}

/// A host that outruns the device: the stream's launch queue is bounded (the simulator's
/// `XIRANG_SIM_QUEUE_DEPTH`, default 64), and an allocation that misses the cache first collects
/// the kernels that have finished. So a loop that never synchronizes reuses the blocks its queued
/// kernels held instead of growing the pool until the device is full.
#[test]
fn a_loop_that_outruns_the_device_reuses_blocks() {
    let (_g, _) = runtime();
    let driver = Arc::new(AclDriver::simulator());
    let rt = Runtime::new(driver.clone()).unwrap();
    let ctx = rt.device(0).unwrap().clone();
    let x = Tensor::from_vec(vec![1f32; 128], &[128]).unwrap().to_device(&rt, Device::Npu(0)).unwrap();
    let s = rt.memory_stats(0).unwrap();
    hold_stream(&driver, &ctx);
    // 300 results of 512 bytes, each dropped at once: 150 KiB, on a 64 KiB device.
    for _ in 0..300 {
        drop(kernels::add_tensor(&x, &x, Scalar::Int(1)).unwrap());
    }
    rt.synchronize(0).unwrap();
    let s2 = rt.memory_stats(0).unwrap();
    assert_eq!(s2.oom_retries, s.oom_retries, "the pool never filled the device");
    assert!(s2.device_mallocs - s.device_mallocs <= 70, "{} fresh blocks", s2.device_mallocs - s.device_mallocs);
    assert!(s2.cache_hits - s.cache_hits >= 230, "{} cache hits", s2.cache_hits - s.cache_hits);
}
