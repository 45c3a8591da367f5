//! The autograd engine (`xirang_runtime::autograd`) over the generated backward nodes: graph
//! recording, topological backward, accumulation, `retain_graph`, the saved-tensor version check,
//! release of saved tensors, and no recording under `no_grad`.

use xirang_runtime::autograd::{self, TensorAutograd, backward};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::generated::autograd::BackwardHooks;
use xirang_runtime::generated::ops::{AtenOps, ag};
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{Error, Scalar, Tensor};

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
    // cumsum runs on the host (fallback tier); its backward formula calls `cumsum_backward`,
    // which is neither a selected operator nor a runtime helper
    let loss = ag::sum(o, &ag::cumsum(o, &x, 0, None).unwrap(), None).unwrap();
    match loss.backward(o) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("CumsumBackward"), "{msg}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn in_place_operators_rebase_the_history_of_what_they_write() {
    silent();
    let o = &Host;
    let x = m(&[1.0, -2.0, 3.0], &[3]).requires_grad_(true);
    let b = m(&[0.5, 0.5, -4.0], &[3]).requires_grad_(true);
    // y = x * 2; y += b (in place); y = relu(y) (in place); loss = sum(y * x)
    let y = ag::mul_scalar(o, &x, Scalar::Int(2)).unwrap();
    let y2 = ag::add_tensor_(o, &y, &b, Scalar::Int(1)).unwrap();
    // every handle of the written tensor sees the new history
    assert_eq!(y.grad_fn().unwrap().op(), "add.Tensor");
    assert_eq!(y2.grad_fn().unwrap().name(), y.grad_fn().unwrap().name());
    ag::relu_(o, &y).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "ReluBackward");
    assert_eq!(vals(&y), [2.5, 0.0, 2.0]);
    let loss = ag::sum(o, &ag::mul_tensor(o, &y, &x).unwrap(), None).unwrap();
    loss.backward(o).unwrap();
    // relu mask m = [1, 0, 1]; d/dx = m * (2 x) + y = [2+2.5, 0, 6+2]; d/db = m * x
    assert_eq!(vals(&x.grad().unwrap()), [4.5, 0.0, 8.0]);
    assert_eq!(vals(&b.grad().unwrap()), [1.0, 0.0, 3.0]);
}

#[test]
fn in_place_writes_save_the_original_self_when_the_formula_needs_it() {
    silent();
    let o = &Host;
    let x = m(&[1.0, 2.0, 3.0], &[3]).requires_grad_(true);
    let w = m(&[4.0, 5.0, 6.0], &[3]).requires_grad_(true);
    // y = x + 0 (a non-leaf); y *= w: d/dw needs y before the write (torchgen's original_self)
    let y = ag::add_scalar(o, &x, Scalar::Int(0), Scalar::Int(1)).unwrap();
    ag::mul_tensor_(o, &y, &w).unwrap();
    assert_eq!(vals(&y), [4.0, 10.0, 18.0]);
    ag::sum(o, &y, None).unwrap().backward(o).unwrap();
    assert_eq!(vals(&w.grad().unwrap()), [1.0, 2.0, 3.0]);
    assert_eq!(vals(&x.grad().unwrap()), [4.0, 5.0, 6.0]);
    // x.mul_(x) on a non-leaf: `other` aliases `self`, both taken before the write: d/dy = 2y
    let x = m(&[1.0, -3.0], &[2]).requires_grad_(true);
    let y = ag::mul_scalar(o, &x, Scalar::Int(1)).unwrap();
    ag::mul_tensor_(o, &y, &y.clone()).unwrap();
    assert_eq!(vals(&y), [1.0, 9.0]);
    ag::sum(o, &y, None).unwrap().backward(o).unwrap();
    assert_eq!(vals(&x.grad().unwrap()), [2.0, -6.0]);
}

#[test]
fn in_place_errors_match_pytorch() {
    silent();
    let o = &Host;
    // a leaf that requires grad
    let x = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    match ag::add_scalar_(o, &x, Scalar::Int(1), Scalar::Int(1)) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("a leaf Variable that requires grad"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(vals(&x), [1.0, 2.0], "nothing was written");
    // allowed under no_grad (an optimizer step)
    {
        let _g = autograd::no_grad();
        ag::add_scalar_(o, &x, Scalar::Int(1), Scalar::Int(1)).unwrap();
    }
    assert_eq!(vals(&x), [2.0, 3.0]);
    // writing a tensor a node saved: exp saves its result
    let e = ag::exp(o, &ag::mul_scalar(o, &x, Scalar::Int(1)).unwrap()).unwrap();
    ag::add_scalar_(o, &e, Scalar::Int(1), Scalar::Int(1)).unwrap();
    match ag::sum(o, &e, None).unwrap().backward(o) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("modified by an inplace operation"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
    // a view of a differentiable tensor: refused, not a gradient that ignores the write
    let y = ag::mul_scalar(o, &x, Scalar::Int(1)).unwrap();
    let v = ag::t(o, &ag::unsqueeze(o, &y, 0).unwrap()).unwrap();
    match ag::mul_scalar_(o, &v, Scalar::Int(2)) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("view"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn in_place_on_a_plain_tensor_with_a_differentiable_argument() {
    silent();
    let o = &Host;
    let w = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let acc = m(&[10.0, 10.0], &[2]);
    // the returned handle carries the history (the plain `acc` had no autograd metadata)
    let r = ag::add_tensor_(o, &acc, &w, Scalar::Int(3)).unwrap();
    assert!(r.requires_grad() && !r.is_leaf());
    assert_eq!(vals(&acc), [13.0, 16.0]);
    ag::sum(o, &r, None).unwrap().backward(o).unwrap();
    assert_eq!(vals(&w.grad().unwrap()), [3.0, 3.0]);
    // the boxed twin records the same way
    let w2 = m(&[1.0, 2.0], &[2]).requires_grad_(true);
    let y = ag::add_scalar(o, &w2, Scalar::Int(0), Scalar::Int(1)).unwrap();
    assert_eq!(y.grad_fn().unwrap().op(), "add.Scalar");
    let outs = autograd::call(
        o,
        "mul_.Scalar",
        &[xirang_runtime::ivalue::IValue::from(y.clone()), xirang_runtime::ivalue::IValue::from(Scalar::Int(5))],
    )
    .unwrap();
    assert_eq!(y.grad_fn().unwrap().op(), "mul.Scalar");
    let xirang_runtime::ivalue::IValue::Tensor(r) = &outs[0] else { panic!("a tensor") };
    ag::sum(o, r, None).unwrap().backward(o).unwrap();
    assert_eq!(vals(&w2.grad().unwrap()), [5.0, 5.0]);
}
