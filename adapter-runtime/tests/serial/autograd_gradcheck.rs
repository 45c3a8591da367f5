//! Finite-difference gradient checks (f64) of the generated backward nodes, through the engine.
//!
//! Scope: every operator that has a backward node whose formulas were all translated and that
//! the runtime can run on a fast tier (a native kernel or a composition recipe). The test
//! computes that set from the generated tables and fails if an operator in it has neither a case
//! below nor an entry in `EXCLUDED` with its reason, so a new kernel or recipe cannot skip the
//! check silently.
//!
//! For a case, `L = sum_k <out_k, c_k>` with fixed random cotangents `c_k`; the analytical
//! gradient comes from `backward`, the numerical one from central differences (eps 1e-6), and
//! they must agree within 1e-6 absolute + 1e-5 relative.

use crate::scope;

use std::collections::BTreeSet;

use scope::in_scope;
use xirang_runtime::autograd::{self, TensorAutograd};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{DType, Scalar, Tensor};

/// An argument of a case.
#[derive(Clone)]
enum A {
    /// A differentiable f64 input of this shape; values in (-1, 1) away from 0 (`Pos`: (0.5, 1.5)).
    T(&'static [usize]),
    Pos(&'static [usize]),
    /// Values in (1.2, 2.2) (`acosh`).
    Gt1(&'static [usize]),
    /// A differentiable `Tensor[]` of these shapes (`cat`).
    L(&'static [&'static [usize]]),
    /// A tensor that does not require grad (index, mask, target...).
    Fixed(fn() -> Tensor),
    V(fn() -> IValue),
    /// A value computed from the arguments before it, without a graph (`native_layer_norm_backward`'s
    /// mean and rstd come from its input: the double-backward formula assumes they do, and the
    /// finite differences recompute them).
    Derived(fn(&[IValue]) -> IValue),
}

/// Output `k` of `native_layer_norm(args[1], [last dim], eps 1e-5)`, computed without a graph.
fn layer_norm_stat(args: &[IValue], k: usize) -> IValue {
    let IValue::Tensor(x) = &args[1] else { panic!("native_layer_norm_backward: input") };
    let last = *x.sizes().last().expect("a dimension") as i64;
    let _g = autograd::no_grad();
    let a = [IValue::Tensor(x.detach()), IValue::IntList(vec![last]), IValue::None, IValue::None, IValue::Float(1e-5)];
    autograd::call(&NpuOps, "native_layer_norm", &a).expect("native_layer_norm").swap_remove(k)
}

fn one() -> IValue {
    IValue::Scalar(Scalar::Int(1))
}

fn int(v: i64) -> IValue {
    IValue::Int(v)
}

/// (operator, arguments in schema order).
fn cases() -> Vec<(&'static str, Vec<A>)> {
    use A::*;
    let mask = || Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3]).unwrap();
    let target = || Tensor::from_vec(vec![2i64, 0, 1], &[3]).unwrap();
    let indices = || Tensor::from_vec(vec![0i64, 2, 2, 4], &[2, 2]).unwrap();
    vec![
        ("abs", vec![T(&[2, 3])]),
        ("neg", vec![T(&[2, 3])]),
        ("exp", vec![T(&[2, 3])]),
        ("log", vec![Pos(&[2, 3])]),
        ("sqrt", vec![Pos(&[2, 3])]),
        ("rsqrt", vec![Pos(&[2, 3])]),
        ("tanh", vec![T(&[2, 3])]),
        ("sigmoid", vec![T(&[2, 3])]),
        ("relu", vec![T(&[2, 3])]),
        ("reciprocal", vec![Pos(&[2, 3])]),
        ("clone", vec![T(&[2, 3]), V(|| IValue::None)]),
        ("add.Tensor", vec![T(&[2, 3]), T(&[3]), V(|| IValue::Scalar(Scalar::Float(0.5)))]),
        ("sub.Tensor", vec![T(&[2, 3]), T(&[2, 1]), V(|| IValue::Scalar(Scalar::Int(2)))]),
        ("mul.Tensor", vec![T(&[2, 3]), T(&[2, 3])]),
        ("div.Tensor", vec![T(&[2, 3]), Pos(&[3])]),
        ("mm", vec![T(&[2, 3]), T(&[3, 4])]),
        ("bmm", vec![T(&[2, 2, 3]), T(&[2, 3, 2])]),
        (
            "addmm",
            vec![
                T(&[4]),
                T(&[2, 3]),
                T(&[3, 4]),
                V(|| IValue::Scalar(Scalar::Float(0.5))),
                V(|| IValue::Scalar(Scalar::Int(2))),
            ],
        ),
        ("t", vec![T(&[2, 3])]),
        // not in scope (the fallback tier) but the one user of `as_strided_backward`: a view
        // inside the storage, and an output that reads positions twice (its gradients sum)
        (
            "as_strided",
            vec![T(&[2, 3]), V(|| IValue::IntList(vec![2, 2])), V(|| IValue::IntList(vec![1, 2])), V(|| int(1))],
        ),
        (
            "as_strided",
            vec![T(&[2, 3]), V(|| IValue::IntList(vec![3, 2])), V(|| IValue::IntList(vec![1, 1])), V(|| IValue::None)],
        ),
        // a translated formula through a runtime helper (`autograd::helpers::silu_backward`)
        ("silu", vec![T(&[2, 3])]),
        ("add.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("sub.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("rsub.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("rsub.Tensor", vec![T(&[2, 3]), T(&[3]), V(|| IValue::Scalar(Scalar::Int(3)))]),
        ("addcdiv", vec![T(&[2, 3]), T(&[2, 3]), Pos(&[3]), V(|| IValue::Scalar(Scalar::Float(0.5)))]),
        ("addcmul", vec![T(&[3]), T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(2.0)))]),
        ("baddbmm", vec![T(&[2, 2, 2]), T(&[2, 2, 3]), T(&[2, 3, 2]), V(one), V(one)]),
        ("dot", vec![T(&[4]), T(&[4])]),
        ("elu", vec![T(&[2, 3]), V(one), V(one), V(one)]),
        ("expm1", vec![T(&[2, 3])]),
        ("log2", vec![Pos(&[2, 3])]),
        ("log10", vec![Pos(&[2, 3])]),
        ("hardsigmoid", vec![T(&[2, 3])]),
        ("hardswish", vec![T(&[2, 3])]),
        ("hardtanh", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(-1))), V(one)]),
        ("leaky_relu", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1)))]),
        ("lerp.Tensor", vec![T(&[2, 3]), T(&[2, 3]), T(&[3])]),
        ("mse_loss", vec![T(&[2, 3]), T(&[2, 3]), V(|| int(1))]),
        ("sigmoid_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("tanh_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("threshold_backward", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(0)))]),
        ("sign", vec![T(&[2, 3])]),
        // hand-written hooks (`impl BackwardHooks for NpuOps`)
        ("where.self", vec![Fixed(mask), T(&[2, 3]), T(&[3])]),
        ("maximum", vec![T(&[2, 3]), T(&[3])]),
        ("minimum", vec![T(&[2, 3]), T(&[2, 3])]),
        ("erf", vec![T(&[2, 3])]),
        ("log1p", vec![Pos(&[2, 3])]),
        ("clamp_min", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(0)))]),
        ("clamp_max", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(0)))]),
        ("sin", vec![T(&[2, 3])]),
        ("cos", vec![T(&[2, 3])]),
        ("tan", vec![T(&[2, 3])]),
        ("asin", vec![T(&[2, 3])]),
        ("acos", vec![T(&[2, 3])]),
        ("atan", vec![T(&[2, 3])]),
        ("sinh", vec![T(&[2, 3])]),
        ("cosh", vec![T(&[2, 3])]),
        ("asinh", vec![T(&[2, 3])]),
        ("atanh", vec![T(&[2, 3])]),
        // piecewise constant: zero gradients (the values stay away from the steps)
        ("ceil", vec![T(&[2, 3])]),
        ("floor", vec![T(&[2, 3])]),
        ("round", vec![T(&[2, 3])]),
        ("trunc", vec![T(&[2, 3])]),
        // divisor 1.5: no step of fmod/remainder inside (-1, -0.2) and (0.2, 1)
        ("fmod.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(1.5)))]),
        ("remainder.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(1.5)))]),
        (
            "hardtanh_backward",
            vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(-2))), V(|| IValue::Scalar(Scalar::Int(2)))],
        ),
        (
            "leaky_relu_backward",
            vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1))), V(|| IValue::Bool(false))],
        ),
        ("transpose.int", vec![T(&[2, 3, 2]), V(|| int(0)), V(|| int(2))]),
        ("tril", vec![T(&[2, 3, 4]), V(|| int(1))]),
        ("triu", vec![T(&[4, 3]), V(|| int(-1))]),
        ("expand", vec![T(&[3, 1]), V(|| IValue::IntList(vec![2, 3, 4])), V(|| IValue::Bool(false))]),
        ("view", vec![T(&[2, 6]), V(|| IValue::IntList(vec![3, 4]))]),
        ("_unsafe_view", vec![T(&[2, 6]), V(|| IValue::IntList(vec![4, -1]))]),
        ("permute", vec![T(&[2, 3, 2]), V(|| IValue::IntList(vec![2, 0, 1]))]),
        ("unsqueeze", vec![T(&[2, 3]), V(|| int(1))]),
        ("select.int", vec![T(&[2, 3]), V(|| int(1)), V(|| int(2))]),
        ("sum", vec![T(&[2, 3]), V(|| IValue::None)]),
        ("mean", vec![T(&[2, 3]), V(|| IValue::None)]),
        ("_softmax", vec![T(&[2, 3]), V(|| int(1)), V(|| IValue::Bool(false))]),
        ("_log_softmax", vec![T(&[2, 3]), V(|| int(1)), V(|| IValue::Bool(false))]),
        ("masked_fill.Scalar", vec![T(&[2, 3]), Fixed(mask), V(|| IValue::Scalar(Scalar::Float(0.25)))]),
        ("nll_loss_forward", vec![T(&[3, 4]), Fixed(target), V(|| IValue::None), V(|| int(1)), V(|| int(-100))]),
        // translated through the runtime helpers (`autograd/helpers.rs`)
        ("mul.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(-1.5)))]),
        ("div.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(4.0)))]),
        ("gelu", vec![T(&[2, 3]), V(|| IValue::Str("none".into()))]),
        (
            "sum.dim_IntList",
            vec![T(&[2, 3, 2]), V(|| IValue::IntList(vec![0, -1])), V(|| IValue::Bool(false)), V(|| IValue::None)],
        ),
        (
            "mean.dim",
            vec![T(&[2, 3, 2]), V(|| IValue::IntList(vec![1])), V(|| IValue::Bool(false)), V(|| IValue::None)],
        ),
        (
            "native_layer_norm",
            vec![T(&[2, 3, 4]), V(|| IValue::IntList(vec![4])), T(&[4]), T(&[4]), V(|| IValue::Float(1e-5))],
        ),
        (
            "embedding",
            vec![T(&[5, 3]), Fixed(indices), V(|| int(-1)), V(|| IValue::Bool(false)), V(|| IValue::Bool(false))],
        ),
        // translated after the translator learned `M_LN2`, `is_complex()`, string literals,
        // `.to(dtype)` and the helpers of `autograd/helpers.rs`
        ("acosh", vec![Gt1(&[2, 3])]),
        ("exp2", vec![T(&[2, 3])]),
        ("sgn", vec![T(&[2, 3])]),
        ("atan2", vec![T(&[2, 3]), T(&[3])]),
        ("fmod.Tensor", vec![T(&[2, 3]), Pos(&[2, 3])]),
        ("remainder.Tensor", vec![T(&[2, 3]), Pos(&[3])]),
        ("lerp.Scalar", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.3)))]),
        ("amax", vec![T(&[2, 3, 2]), V(|| IValue::IntList(vec![1])), V(|| IValue::Bool(false))]),
        ("amax", vec![T(&[2, 3]), V(|| IValue::IntList(vec![])), V(|| IValue::Bool(true))]),
        (
            "max_pool2d_with_indices",
            vec![
                T(&[1, 2, 4, 5]),
                V(|| IValue::IntList(vec![2, 2])),
                V(|| IValue::IntList(vec![1, 2])),
                V(|| IValue::IntList(vec![0])),
                V(|| IValue::IntList(vec![1])),
                V(|| IValue::Bool(true)),
            ],
        ),
        ("pow.Tensor_Scalar", vec![Pos(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(2.5)))]),
        ("pow.Tensor_Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(3)))]),
        ("mv", vec![T(&[2, 3]), T(&[3])]),
        (
            "addmv",
            vec![
                T(&[2]),
                T(&[2, 3]),
                T(&[3]),
                V(|| IValue::Scalar(Scalar::Float(0.5))),
                V(|| IValue::Scalar(Scalar::Int(2))),
            ],
        ),
        (
            "gather",
            vec![
                T(&[2, 3]),
                V(|| int(1)),
                Fixed(|| Tensor::from_vec(vec![0i64, 2, 1, 1], &[2, 2]).unwrap()),
                V(|| IValue::Bool(false)),
            ],
        ),
        ("index_select", vec![T(&[3, 2]), V(|| int(0)), Fixed(|| Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap())]),
        ("cat", vec![L(&[&[2, 3], &[1, 3], &[2, 3]]), V(|| int(0))]),
        ("cat", vec![L(&[&[2, 1], &[2, 3]]), V(|| int(-1))]),
        // dropout: the engine re-seeds the default generator before every forward (see `check`)
        ("native_dropout", vec![T(&[4, 5]), V(|| IValue::Float(0.4)), V(|| IValue::Bool(true))]),
        // the mask is PyTorch's `not_implemented`: held fixed
        ("native_dropout_backward", vec![T(&[2, 3]), Fixed(mask), V(|| IValue::Float(2.5))]),
        // `layer_norm_double_backward`: grad_out, input and weight vary; mean and rstd follow the
        // input (the bias gets `Tensor()`, no gradient)
        (
            "native_layer_norm_backward",
            vec![
                T(&[2, 2, 4]),
                T(&[2, 2, 4]),
                V(|| IValue::IntList(vec![4])),
                Derived(|a| layer_norm_stat(a, 1)),
                Derived(|a| layer_norm_stat(a, 2)),
                T(&[4]),
                T(&[4]),
                V(|| IValue::BoolList(vec![true, true, true])),
            ],
        ),
        (
            "native_layer_norm_backward",
            vec![
                T(&[3, 5]),
                T(&[3, 5]),
                V(|| IValue::IntList(vec![5])),
                Derived(|a| layer_norm_stat(a, 1)),
                Derived(|a| layer_norm_stat(a, 2)),
                T(&[5]),
                T(&[5]),
                V(|| IValue::BoolList(vec![true, true, true])),
            ],
        ),
        ("_softmax_backward_data", vec![T(&[2, 3]), T(&[2, 3]), V(|| int(1)), V(|| IValue::DType(DType::F64))]),
        ("_log_softmax_backward_data", vec![T(&[2, 3]), T(&[2, 3]), V(|| int(1)), V(|| IValue::DType(DType::F64))]),
        (
            "elu_backward",
            vec![
                T(&[2, 3]),
                V(|| IValue::Scalar(Scalar::Float(0.7))),
                V(|| IValue::Scalar(Scalar::Float(1.2))),
                V(|| IValue::Scalar(Scalar::Float(0.9))),
                V(|| IValue::Bool(false)),
                T(&[2, 3]),
            ],
        ),
        ("gelu_backward", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Str("none".into()))]),
        ("gelu_backward", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Str("tanh".into()))]),
        ("hardswish_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("mse_loss_backward", vec![T(&[]), T(&[2, 3]), T(&[2, 3]), V(|| int(1))]),
        ("mse_loss_backward", vec![T(&[2, 3]), T(&[2, 3]), T(&[2, 3]), V(|| int(0))]),
        (
            "embedding_dense_backward",
            vec![
                T(&[2, 2, 2]),
                Fixed(|| Tensor::from_vec(vec![2i64, 0, 2, 1], &[2, 2]).unwrap()),
                V(|| int(4)),
                V(|| int(1)),
                V(|| IValue::Bool(false)),
            ],
        ),
        (
            "nll_loss_backward",
            vec![
                T(&[]),
                T(&[3, 4]),
                Fixed(target),
                V(|| IValue::None),
                V(|| int(1)),
                V(|| int(-100)),
                Fixed(|| Tensor::from_vec(vec![3.0f64], &[]).unwrap()),
            ],
        ),
    ]
}

/// Operators in scope that have no case, with the reason.
const EXCLUDED: &[(&str, &str)] = &[];

/// Deterministic values: a small LCG.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

fn values(rng: &mut Rng, n: usize, positive: bool) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u = rng.next();
            if positive {
                0.5 + u
            } else {
                // (-1, -0.2) ∪ (0.2, 1): away from the kinks of abs/relu
                let s = if rng.next() < 0.5 { -1.0 } else { 1.0 };
                s * (0.2 + 0.8 * u)
            }
        })
        .collect()
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Builds the boxed arguments; differentiable inputs get `requires_grad` when `grad` is set.
fn build(spec: &[A], data: &[Vec<f64>], grad: bool) -> (Vec<IValue>, Vec<Tensor>) {
    let mut args = Vec::new();
    let mut leaves = Vec::new();
    let mut k = 0;
    for a in spec {
        match a {
            A::T(s) | A::Pos(s) | A::Gt1(s) => {
                let t = Tensor::from_vec(data[k].clone(), s).unwrap();
                k += 1;
                let t = if grad { t.requires_grad_(true) } else { t };
                leaves.push(t.clone());
                args.push(IValue::Tensor(t));
            }
            A::L(shapes) => {
                let mut list = Vec::new();
                for s in *shapes {
                    let t = Tensor::from_vec(data[k].clone(), s).unwrap();
                    k += 1;
                    let t = if grad { t.requires_grad_(true) } else { t };
                    leaves.push(t.clone());
                    list.push(t);
                }
                args.push(IValue::TensorList(list));
            }
            A::Fixed(f) => args.push(IValue::Tensor(f())),
            A::V(f) => args.push(f()),
            A::Derived(f) => {
                let v = f(&args);
                args.push(v);
            }
        }
    }
    (args, leaves)
}

/// The differentiable outputs of a recorded call: the results that got a `grad_fn` (torchgen's
/// rule: `native_layer_norm`'s mean and rstd, `nll_loss_forward`'s total weight do not).
fn differentiable(outs: &[IValue]) -> Vec<usize> {
    (0..outs.len()).filter(|&i| matches!(&outs[i], IValue::Tensor(t) if t.requires_grad())).collect()
}

fn tensors_at(outs: &[IValue], keep: &[usize]) -> Vec<Tensor> {
    keep.iter()
        .filter_map(|&i| match &outs[i] {
            IValue::Tensor(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// `sum_k <out_k, c_k>` with plain f64 arithmetic (no graph).
/// Random operators draw from the default generator: every forward of a case starts from the
/// same seed, so the finite differences see the dropout mask the recorded forward saw.
fn reseed() {
    xirang_runtime::rng::manual_seed(20261201);
}

fn objective(op: &str, spec: &[A], data: &[Vec<f64>], keep: &[usize], cots: &[Vec<f64>]) -> f64 {
    let (args, _) = build(spec, data, false);
    reseed();
    let outs = autograd::call(&NpuOps, op, &args).unwrap();
    tensors_at(&outs, keep)
        .iter()
        .zip(cots)
        .map(|(t, c)| t.to_f64_vec().unwrap().iter().zip(c).map(|(a, b)| a * b).sum::<f64>())
        .sum()
}

fn check(op: &'static str, spec: &[A], seed: u64) -> Result<(), String> {
    let o = &NpuOps;
    let mut rng = Rng(seed);
    let mut data: Vec<Vec<f64>> = Vec::new();
    for a in spec {
        match a {
            A::T(s) => data.push(values(&mut rng, numel(s), false)),
            A::Pos(s) => data.push(values(&mut rng, numel(s), true)),
            A::Gt1(s) => data.push(values(&mut rng, numel(s), true).into_iter().map(|v| v + 0.7).collect()),
            A::L(shapes) => {
                for s in *shapes {
                    data.push(values(&mut rng, numel(s), false));
                }
            }
            _ => {}
        }
    }
    // analytical
    let (args, leaves) = build(spec, &data, true);
    reseed();
    let outs = autograd::call(o, op, &args).map_err(|e| format!("{op}: forward: {e}"))?;
    let keep = differentiable(&outs);
    let outs = tensors_at(&outs, &keep);
    let cots: Vec<Vec<f64>> = outs.iter().map(|t| values(&mut rng, t.numel(), false)).collect();
    let mut terms = Vec::new();
    for (t, c) in outs.iter().zip(&cots) {
        let ct = Tensor::from_vec(c.clone(), t.sizes()).unwrap();
        let prod = autograd::call(o, "mul.Tensor", &[IValue::Tensor(t.clone()), IValue::Tensor(ct)]).unwrap();
        let IValue::Tensor(p) = &prod[0] else { unreachable!() };
        let s = autograd::call(o, "sum", &[IValue::Tensor(p.clone()), IValue::None]).unwrap();
        let IValue::Tensor(s) = &s[0] else { unreachable!() };
        terms.push(s.clone());
    }
    if terms.is_empty() {
        return Err(format!("{op}: no differentiable outputs"));
    }
    autograd::backward(o, &terms, None, false).map_err(|e| format!("{op}: backward: {e}"))?;
    // numerical
    let eps = 1e-6;
    for (li, leaf) in leaves.iter().enumerate() {
        let got = leaf.grad().map(|g| g.to_f64_vec().unwrap()).unwrap_or_else(|| vec![0.0; leaf.numel()]);
        for i in 0..leaf.numel() {
            let mut plus = data.clone();
            plus[li][i] += eps;
            let mut minus = data.clone();
            minus[li][i] -= eps;
            let num =
                (objective(op, spec, &plus, &keep, &cots) - objective(op, spec, &minus, &keep, &cots)) / (2.0 * eps);
            let err = (got[i] - num).abs();
            if err > 1e-6 + 1e-5 * num.abs() {
                return Err(format!("{op}: input {li} element {i}: backward {} vs finite difference {num}", got[i]));
            }
        }
    }
    Ok(())
}

#[test]
fn finite_differences_agree_with_backward_for_every_translated_operator_in_scope() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let cases = cases();
    let covered: BTreeSet<&str> = cases.iter().map(|c| c.0).collect();
    let excluded: BTreeSet<&str> = EXCLUDED.iter().map(|e| e.0).collect();
    let missing: Vec<&str> =
        in_scope().into_iter().filter(|op| !covered.contains(op) && !excluded.contains(op)).collect();
    let mut failures = Vec::new();
    println!("in scope without a case: {missing:?}");
    for (i, (op, spec)) in cases.iter().enumerate() {
        if excluded.contains(op) {
            continue;
        }
        if let Err(e) = check(op, spec, 17 + i as u64) {
            failures.push(e);
        }
    }
    println!(
        "gradcheck: {} cases, {} excluded, {} operators in scope",
        cases.len() - excluded.iter().filter(|e| covered.contains(*e)).count(),
        excluded.len(),
        in_scope().len()
    );
    assert!(failures.is_empty(), "gradient check failures:\n{}", failures.join("\n"));
    assert!(missing.is_empty(), "operators in scope without a finite-difference case: {missing:?}");
    let _ = DType::F64;
}
