//! The generated backward nodes (`generated/autograd.rs`) on small host tensors, against
//! hand-computed gradients.

use xirang_runtime::dtype::DType;
use xirang_runtime::generated::autograd::{
    BACKWARD_COVERAGE, BackwardHooks, MmBackward, MulTensorBackward, SincBackward,
};
use xirang_runtime::generated::ops::AtenOps;
use xirang_runtime::ivalue::Layout;
use xirang_runtime::{Error, Result, Tensor};

/// No native kernels and no hand-written hooks: the CPU fallback and the default hooks.
struct Host;
impl AtenOps for Host {}
impl BackwardHooks for Host {}

fn m(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn values(g: &Option<Tensor>) -> Vec<f32> {
    g.as_ref().expect("a gradient").to_vec::<f32>().unwrap()
}

#[test]
fn mul_tensor_node_gives_grad_times_the_other_factor() {
    let x = m(&[1.0, 2.0, 3.0], &[3]);
    let y = m(&[4.0, 5.0, 6.0], &[3]);
    let node = MulTensorBackward { self_: x, other: y, self_scalar_type: DType::F32, other_scalar_type: DType::F32 };
    let g = m(&[1.0, 10.0, 100.0], &[3]);
    let r = node.apply(&Host, &[Some(g)]).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(values(&r[0]), [4.0, 50.0, 600.0]); // d/dself = grad * other
    assert_eq!(values(&r[1]), [1.0, 20.0, 300.0]); // d/dother = grad * self
    // no incoming gradient: no gradients
    let none = node.apply(&Host, &[None]).unwrap();
    assert!(none.iter().all(Option::is_none));
}

#[test]
fn mm_node_gives_grad_mat2_t_and_self_t_grad() {
    // a: 2x3, b: 3x2, grad: 2x2
    let a = m(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = m(&[1.0, 0.0, 0.0, 1.0, 2.0, -1.0], &[3, 2]);
    let g = m(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let node = MmBackward {
        self_: a,
        mat2: b,
        self_sym_sizes: vec![2, 3],
        self_sym_strides: vec![3, 1],
        self_layout: Layout::Strided,
        mat2_sym_sizes: vec![3, 2],
        mat2_sym_strides: vec![2, 1],
        mat2_layout: Layout::Strided,
    };
    let r = node.apply(&Host, &[Some(g)]).unwrap();
    assert_eq!(r.len(), 2);
    // grad_self = grad @ b^T: [[1,2],[3,4]] @ [[1,0,2],[0,1,-1]] = [[1,2,0],[3,4,2]]
    assert_eq!(r[0].as_ref().unwrap().sizes(), [2, 3]);
    assert_eq!(values(&r[0]), [1.0, 2.0, 0.0, 3.0, 4.0, 2.0]);
    // grad_mat2 = a^T @ grad: [[1,4],[2,5],[3,6]] @ [[1,2],[3,4]] = [[13,18],[17,24],[21,30]]
    assert_eq!(r[1].as_ref().unwrap().sizes(), [3, 2]);
    assert_eq!(values(&r[1]), [13.0, 18.0, 17.0, 24.0, 21.0, 30.0]);
}

#[test]
fn coverage_table_lists_translated_and_hooked_inputs() {
    for row in
        [("mul.Tensor", "self", "translated"), ("mul.Tensor", "other", "translated"), ("mm", "mat2", "translated")]
    {
        assert!(BACKWARD_COVERAGE.contains(&row), "{row:?}");
    }
    assert!(BACKWARD_COVERAGE.iter().all(|r| matches!(r.2, "translated" | "hook" | "not_implemented")));
    // PyTorch's own `not_implemented(..)` formula: the same error, not a hook to write
    assert!(BACKWARD_COVERAGE.contains(&("acosh_", "self", "not_implemented")));
    assert!(BACKWARD_COVERAGE.iter().any(|r| r.2 == "hook"));
    assert!(BACKWARD_COVERAGE.contains(&("sinc", "self", "hook")));
    // `silu_backward(grad, self)`: a runtime helper; `where(condition, grad, 0)`: `masked_fill`
    assert!(BACKWARD_COVERAGE.contains(&("silu", "self", "translated")));
    assert!(BACKWARD_COVERAGE.contains(&("where.self", "self", "translated")));
}

/// An adapter that implements one hook by hand.
struct SincByHand;
impl AtenOps for SincByHand {}
impl BackwardHooks for SincByHand {
    fn hook_sinc_self(&self, node: &SincBackward, grads: &[Option<Tensor>]) -> Result<Option<Tensor>> {
        // d sinc(x) / dx = (cos(pi x) - sinc(x)) / x, 0 at x = 0
        assert_eq!(node.self_.to_vec::<f32>()?, [0.0]);
        Ok(grads[0].as_ref().map(|g| xirang_runtime::reference::mul(g, 0.0).unwrap()))
    }
}

#[test]
fn hooks_default_to_unsupported_and_hand_written_hooks_are_called() {
    let node = SincBackward { self_: m(&[0.0], &[1]) };
    let g = m(&[4.0], &[1]);
    match node.apply(&Host, &[Some(g.clone())]) {
        Err(Error::Unsupported(msg)) => {
            assert!(msg.contains("backward hook `SincBackward::self` not implemented"), "{msg}");
            assert!(msg.contains("formula `"), "{msg}");
        }
        other => panic!("expected Unsupported, got {:?}", other.map(|v| v.len())),
    }
    let r = node.apply(&SincByHand, &[Some(g)]).unwrap();
    assert_eq!(values(&r[0]), [0.0]);
}
