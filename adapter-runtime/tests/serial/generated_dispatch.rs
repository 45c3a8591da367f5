//! The generated operator layer (`generated/ops.rs`) over the dispatch core: tiers, wrappers,
//! boxed calls with defaults, force-fallback and validation.

use xirang_runtime::dispatch::{self, Policy, Tier};
use xirang_runtime::generated::ops::{AtenOps, OPERATORS, aten, call_boxed};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::{Result, Scalar, Tensor};

/// An adapter without native kernels: everything takes a default body.
struct NoKernels;
impl AtenOps for NoKernels {}

/// An adapter with one native kernel.
struct ReluKernel;
impl AtenOps for ReluKernel {
    fn relu(&self, self_: &Tensor) -> Result<Tensor> {
        xirang_runtime::reference::relu(self_)
    }
}

fn count(op: &str, tier: Tier) -> u64 {
    let c = dispatch::counters().get(op).copied().unwrap_or_default();
    match tier {
        Tier::Native => c.native,
        Tier::Recipe => c.recipe,
        Tier::Fallback => c.fallback,
    }
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_slice(v)
}

#[test]
fn operator_table_is_sorted_and_has_the_mlp_set() {
    let _serial = crate::serial();
    assert!(OPERATORS.windows(2).all(|w| w[0] < w[1]));
    for op in ["add.Tensor", "mm", "relu", "_softmax", "native_layer_norm", "nll_loss_forward", "addmm"] {
        assert!(OPERATORS.contains(&op), "{op} not selected");
    }
}

#[test]
fn default_body_is_the_cpu_fallback_and_native_overrides_it() {
    let _serial = crate::serial();
    let m = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let before_fb = count("mm", Tier::Fallback);
    let y = aten::mm(&NoKernels, &m, &m).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
    assert!(count("mm", Tier::Fallback) > before_fb);

    let x = t(&[-1.0, 2.0]);

    let before_native = count("relu", Tier::Native);
    let y = aten::relu(&ReluKernel, &x).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 2.0]);
    assert!(count("relu", Tier::Native) > before_native);
}

#[test]
fn out_variant_wraps_the_functional_operator() {
    let _serial = crate::serial();
    let a = t(&[1.0, 2.0]);
    let b = t(&[10.0, 20.0]);
    let mut out = Tensor::zeros(&[0], xirang_runtime::DType::F32);
    let before = count("add.out", Tier::Recipe);
    let r = aten::add_out(&NoKernels, &a, &b, Scalar::Int(2), &mut out).unwrap();
    assert_eq!(out.sizes(), [2], "out= is resized like PyTorch does");
    assert_eq!(out.to_vec::<f32>().unwrap(), [21.0, 42.0]);
    assert_eq!(r.to_vec::<f32>().unwrap(), [21.0, 42.0]);
    assert!(count("add.out", Tier::Recipe) > before);
}

#[test]
fn inplace_variant_wraps_the_functional_operator() {
    let _serial = crate::serial();
    let a = t(&[1.0, 2.0]);
    let b = t(&[1.0, 1.0]);
    let r = aten::add_tensor_(&NoKernels, &a, &b, Scalar::Int(1)).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), [2.0, 3.0]);
    assert!(r.shares_storage(&a));
}

#[test]
fn boxed_call_fills_schema_defaults() {
    let _serial = crate::serial();
    let a = t(&[1.0, 2.0]);
    let r = call_boxed(&NoKernels, "add.Tensor", &[IValue::from(&a), IValue::from(&a)]).unwrap();
    let [IValue::Tensor(r)] = r.as_slice() else { panic!("{r:?}") };
    assert_eq!(r.to_vec::<f32>().unwrap(), [2.0, 4.0]);
    let e = call_boxed(&NoKernels, "add.Tensor", &[IValue::from(&a)]).unwrap_err();
    assert!(e.to_string().contains("argument 1 has no default"), "{e}");
    let e = call_boxed(&NoKernels, "no_such_op", &[]).unwrap_err();
    assert!(e.to_string().contains("unknown operator"), "{e}");
    let e = call_boxed(&NoKernels, "add.Tensor", &[IValue::Int(1), IValue::from(&a)]).unwrap_err();
    assert!(e.to_string().contains("expects Tensor"), "{e}");
}

#[test]
fn operator_without_any_implementation_reports_what_is_missing() {
    let _serial = crate::serial();
    let a = t(&[1.0]);
    let e = aten::lgamma(&NoKernels, &a).unwrap_err();
    assert!(e.to_string().contains("no native kernel, no composition recipe and no host reference"), "{e}");
}

#[test]
fn fixed_length_lists_are_validated() {
    let _serial = crate::serial();
    let x = Tensor::zeros(&[1, 1, 4, 4], xirang_runtime::DType::F32);
    let e = aten::max_pool2d_with_indices(&NoKernels, &x, &[2, 2, 2], &[2], &[0], &[1], false).unwrap_err();
    assert!(e.to_string().contains("`kernel_size` must have 2 elements"), "{e}");
}

#[test]
fn recipe_tier_composes_other_operators() {
    let _serial = crate::serial();
    // addmm has a recipe (mm, mul.Scalar, add.Tensor): the call is counted as a recipe and
    // its callees on their own tiers
    let m = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    let before = count("addmm", Tier::Recipe);
    let r = aten::addmm(&NoKernels, &m, &m, &m, Scalar::Int(1), Scalar::Int(2));
    assert!(count("addmm", Tier::Recipe) > before);
    // mul.Scalar has no host implementation in this registry yet: the error names it
    if let Err(e) = r {
        assert!(e.to_string().contains("mul.Scalar") || e.to_string().contains("add.Tensor"), "{e}");
    } else {
        assert_eq!(r.unwrap().to_vec::<f32>().unwrap(), [3.0, 0.0, 0.0, 3.0]);
    }
}

#[test]
fn policy_is_data() {
    let _serial = crate::serial();
    let p = Policy { force_fallback: ["relu".to_string()].into(), ..Policy::default() };
    assert!(p.force_fallback.contains("relu"));
    assert_eq!(Policy::default().alert_threshold, 1000);
}

#[test]
fn npu_ops_serve_device_tensors_natively_through_the_generated_front_ends() {
    let _serial = crate::serial();
    use xirang_runtime::kernels::NpuOps;
    let rt = xirang_runtime::Runtime::simulator().unwrap();
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])
        .unwrap()
        .to_device(&rt, xirang_runtime::Device::Npu(0))
        .unwrap();
    let before = count("mm", Tier::Native);
    let r = aten::mm(&NpuOps, &a, &a).unwrap();
    assert_eq!(r.to_cpu().unwrap().to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
    assert!(count("mm", Tier::Native) > before);
    // an operator NpuOps does not implement takes its generated default body
    // NpuOps routes sigmoid_backward to its device kernel (it used to take the recipe)
    let before = count("sigmoid_backward", Tier::Native);
    let _ = aten::sigmoid_backward(&NpuOps, &a, &a);
    assert!(count("sigmoid_backward", Tier::Native) > before);
}
