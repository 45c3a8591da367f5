//! The autograd engine (`xirang_runtime::autograd`) over the generated backward nodes: graph
//! recording, topological backward, accumulation, `retain_graph`, the saved-tensor version check,
//! release of saved tensors, and no recording under `no_grad`.

use xirang_runtime::autograd::{self, backward};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::generated::autograd::BackwardHooks;
use xirang_runtime::generated::ops::{AtenOps, ag};
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{Device, Error, Runtime, Scalar, Tensor};

struct Host;
impl AtenOps for Host {}
impl BackwardHooks for Host {}

fn silent() {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
}

fn m(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

#[test]
fn records_and_backpropagates_through_a_small_graph() {
    silent();
    let o = &Host;
    // loss = sum((a @ b) * a[:, :2] + b.t()[..]) — here: sum(mm(a, b) * c), c no grad
    let a = m(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad_(true);
    let b = m(&[1.0, 0.0, 0.0, 1.0, 2.0, -1.0], &[3, 2]).requires_grad_(true);
    let c = m(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let p = ag::mm(o, &a, &b).unwrap();
    assert!(p.requires_grad() && !p.is_leaf());
    assert_eq!(p.grad_fn().unwrap().name(), "MmBackward");
    let q = ag::mul_tensor(o, &p, &c).unwrap();
    let loss = ag::sum(o, &q, None).unwrap();
    loss.backward(o).unwrap();
    // d loss / d p = c; d/da = c @ b^T, d/db = a^T @ c
    assert_eq!(vals(&a.grad().unwrap()), [1.0, 2.0, 0.0, 3.0, 4.0, 2.0]);
    assert_eq!(vals(&b.grad().unwrap()), [13.0, 18.0, 17.0, 24.0, 21.0, 30.0]);
    assert!(c.grad().is_none());
}

#[test]
fn gradients_accumulate_at_shared_inputs_and_across_calls() {
    silent();
    let o = &Host;
    let x = m(&[1.0, -2.0, 3.0], &[3]).requires_grad_(true);
    // y = x * x + x: dy/dx = 2x + 1, x used three times
    let y = ag::add_tensor(o, &ag::mul_tensor(o, &x, &x).unwrap(), &x, Scalar::Int(1)).unwrap();
    let loss = ag::sum(o, &y, None).unwrap();
    autograd::backward(o, std::slice::from_ref(&loss), None, true).unwrap();
    assert_eq!(vals(&x.grad().unwrap()), [3.0, -3.0, 7.0]);
    // a second backward (graph retained) accumulates into .grad
    loss.backward(o).unwrap();
    assert_eq!(vals(&x.grad().unwrap()), [6.0, -6.0, 14.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
}

#[test]
fn broadcast_inputs_get_gradients_of_their_own_shape() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad_(true);
    let bias = m(&[0.5, 0.5, 0.5], &[3]).requires_grad_(true);
    let loss = ag::sum(o, &ag::add_tensor(o, &x, &bias, Scalar::Int(2)).unwrap(), None).unwrap();
    loss.backward(o).unwrap();
    assert_eq!(bias.grad().unwrap().sizes(), [3]);
    assert_eq!(vals(&bias.grad().unwrap()), [4.0, 4.0, 4.0]); // alpha 2, summed over 2 rows
    assert_eq!(vals(&x.grad().unwrap()), [1.0; 6]);
}

#[test]
fn a_second_backward_without_retain_graph_is_an_error() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let loss = ag::sum(o, &ag::exp(o, &x).unwrap(), None).unwrap();
    loss.backward(o).unwrap();
    assert!(loss.grad_fn().unwrap().is_released());
    match loss.backward(o) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("backward through the graph a second time"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn modifying_a_saved_tensor_in_place_before_backward_is_an_error() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let w = m(&[3.0, 4.0], &[2]);
    let loss = ag::sum(o, &ag::mul_tensor(o, &x, &w).unwrap(), None).unwrap();
    // MulBackward saved `w` (for d/dx); an in-place write bumps its version
    w.fill_(Scalar::Float(0.0)).unwrap();
    match loss.backward(o) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("modified by an inplace operation"), "{msg}");
            assert!(msg.contains("MulTensorBackward"), "{msg}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    // an in-place write to a tensor no node saved is fine (PyTorch agrees)
    let y = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let k = m(&[5.0, 5.0], &[2]);
    let loss = ag::sum(o, &ag::add_tensor(o, &y, &k, Scalar::Int(1)).unwrap(), None).unwrap();
    k.fill_(Scalar::Float(1.0)).unwrap();
    loss.backward(o).unwrap();
    assert_eq!(vals(&y.grad().unwrap()), [1.0, 1.0]);
}

#[test]
fn no_grad_records_nothing_and_non_float_outputs_do_not_require_grad() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    {
        let _g = autograd::no_grad();
        let y = ag::exp(o, &x).unwrap();
        assert!(!y.requires_grad());
    }
    assert!(autograd::is_grad_enabled());
    let y = ag::exp(o, &x.detach()).unwrap();
    assert!(!y.requires_grad());
    match backward(o, &[y], None, false) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("does not require grad"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
    // a non-scalar root needs an explicit gradient
    let z = ag::exp(o, &x).unwrap();
    assert!(z.backward(o).is_err());
    backward(o, std::slice::from_ref(&z), Some(&[m(&[1.0, 0.0], &[2])]), false).unwrap();
    let e1 = 1f64.exp();
    assert_eq!(vals(&x.grad().unwrap()), [e1, 0.0]);
}

#[test]
fn only_differentiable_outputs_get_a_grad_fn() {
    silent();
    let o = &NpuOps;
    let x = m(&[1.0, 2.0, 4.0, -1.0, 0.5, 3.0], &[2, 3]).requires_grad_(true);
    // torchgen's rule: the formula uses `grad` only, so mean and rstd are not differentiable
    let (y, mean, rstd) = ag::native_layer_norm(o, &x, &[3], None, None, 1e-5).unwrap();
    assert!(y.requires_grad());
    assert!(!mean.requires_grad() && !rstd.requires_grad());
    // backward through the one differentiable output
    let loss = ag::sum(o, &ag::mul_tensor(o, &y, &y).unwrap(), None).unwrap();
    loss.backward(o).unwrap();
    assert_eq!(x.grad().unwrap().sizes(), &[2, 3]);
}

#[test]
fn hooks_without_a_hand_written_formula_fail_with_the_formula_named() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let loss = ag::sum(o, &ag::silu(o, &x).unwrap(), None).unwrap();
    match loss.backward(o) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("SiluBackward"), "{msg}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

/// Saved tensors are released by backward: the device's live bytes drop back to what the caller
/// still holds (parameters, gradients, the loss); with `retain_graph` they stay.
#[test]
fn saved_tensors_are_freed_after_backward_on_the_device() {
    silent();
    let rt = Runtime::simulator().unwrap();
    let ctx = rt.context(Device::Npu(0)).unwrap().clone();
    let o = &NpuOps;
    let dev = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap().to_device(&rt, Device::Npu(0)).unwrap();
    let (n, d, h) = (64, 32, 48);
    let w = dev((0..h * d).map(|i| (i % 7) as f32 * 0.01).collect(), &[h, d]).requires_grad_(true);
    let x = dev((0..n * d).map(|i| (i % 5) as f32 * 0.1).collect(), &[n, d]);
    // queued kernels hold their buffers until the stream runs them: synchronize, then count
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
