//! Release of autograd's saved tensors on the device. Here, not in the `runtime` binary, because it
//! reads the device's live bytes, which every test on the device moves: it runs alone.

use xirang_runtime::autograd::{self, TensorAutograd};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::generated::ops::ag;
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{Device, Runtime, Tensor};

/// Saved tensors are released by backward: the device's live bytes drop back to what the caller
/// still holds (parameters, gradients, the loss); with `retain_graph` they stay.
#[test]
fn saved_tensors_are_freed_after_backward_on_the_device() {
    let _g = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let rt = Runtime::simulator().unwrap();
    let ctx = rt.context(Device::Npu(0)).unwrap().clone();
    let o = &NpuOps;
    let dev = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap().to_device(&rt, Device::Npu(0)).unwrap();
    let (n, d, h) = (64, 32, 48);
    let w = dev((0..h * d).map(|i| (i % 7) as f32 * 0.01).collect(), &[h, d]).requires_grad_(true);
    let x = dev((0..n * d).map(|i| (i % 5) as f32 * 0.1).collect(), &[n, d]);
    // count after the queued work (a kernel holds buffers of other streams until it has run)
    let live = || {
        ctx.synchronize().unwrap();
        ctx.stats().allocated_bytes
    };
    let before = live();
    let run = |retain: bool| -> usize {
        let loss = {
            let hid = ag::relu(o, &ag::mm(o, &x, &ag::t(o, &w).unwrap()).unwrap()).unwrap();
            ag::sum(o, &hid, None).unwrap()
        };
        autograd::backward(o, std::slice::from_ref(&loss), None, retain).unwrap();
        let after = live();
        drop(loss);
        w.zero_grad();
        after
    };
    let released = run(false);
    let retained = run(true);
    let grad_bytes = h * d * 4;
    // released: the loss (one element, rounded to a block) and w's gradient beyond what was live
    assert!(released - before <= grad_bytes + 1024, "live after backward grew by {} bytes", released - before);
    // retained: relu's saved result [n, h] is still alive
    assert!(retained - released >= n * h * 4, "retain_graph kept {} bytes", retained - released);
    assert_eq!(live(), before, "everything is freed once the loss and gradients are dropped");
}
