//! Forward-mode autograd (`forward_ad`) over the generated jvps.
//!
//! Scope of the finite-difference check: every operator whose forward formulas were translated
//! (`FORWARD_COVERAGE` row `translated`) and that the runtime can run (a native kernel, a
//! composition recipe or a host implementation for the CPU fallback). The test computes that
//! set from the generated tables and fails if an operator in it has neither a case below nor an
//! entry in `EXCLUDED` with its reason.
//!
//! For a case, every differentiable tensor input `x_i` gets a random tangent `v_i`; the jvp
//! (`unpack_dual` of each output) must match the f64 central difference
//! `(f(x + eps v) - f(x - eps v)) / (2 eps)` within 1e-6 absolute + 1e-5 relative.

use std::collections::BTreeSet;

use xirang_runtime::autograd::forward::{self as forward_ad, dual_level, make_dual, unpack_dual};
use xirang_runtime::autograd::{self, TensorAutograd};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::generated::forward::{FORWARD_COVERAGE, JVPS};
use xirang_runtime::generated::ops::ag;
use xirang_runtime::generated::recipes::RECIPES;
use xirang_runtime::ivalue::IValue;
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{Error, Scalar, Tensor};

/// An argument of a case.
#[derive(Clone)]
enum A {
    /// A differentiable f64 input of this shape; values in (-1, 1) away from 0 (`Pos`: (0.5, 1.5)).
    T(&'static [usize]),
    Pos(&'static [usize]),
    /// Values in (1.2, 2.2) (`acosh`).
    Gt1(&'static [usize]),
    /// A tensor without tangent (index, mask, target...).
    Fixed(fn() -> Tensor),
    V(fn() -> IValue),
}

fn one() -> IValue {
    IValue::Scalar(Scalar::Int(1))
}

fn int(v: i64) -> IValue {
    IValue::Int(v)
}

fn none() -> IValue {
    IValue::None
}

/// (operator, arguments in schema order).
fn cases() -> Vec<(&'static str, Vec<A>)> {
    use A::*;
    let mask = || Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3]).unwrap();
    let target = || Tensor::from_vec(vec![2i64, 0, 1], &[3]).unwrap();
    vec![
        ("abs", vec![T(&[2, 3])]),
        ("gelu", vec![T(&[2, 3]), V(|| IValue::Str("none".into()))]),
        ("neg", vec![T(&[2, 3])]),
        ("exp", vec![T(&[2, 3])]),
        ("log", vec![Pos(&[2, 3])]),
        ("sqrt", vec![Pos(&[2, 3])]),
        ("rsqrt", vec![Pos(&[2, 3])]),
        ("sin", vec![T(&[2, 3])]),
        ("cos", vec![T(&[2, 3])]),
        ("tanh", vec![T(&[2, 3])]),
        ("sigmoid", vec![T(&[2, 3])]),
        ("relu", vec![T(&[2, 3])]),
        ("reciprocal", vec![Pos(&[2, 3])]),
        ("expm1", vec![T(&[2, 3])]),
        ("log2", vec![Pos(&[2, 3])]),
        ("log10", vec![Pos(&[2, 3])]),
        ("clone", vec![T(&[2, 3]), V(none)]),
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
        ("silu", vec![T(&[2, 3])]),
        ("add.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("sub.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("mul.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(1.5)))]),
        ("div.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(1.5)))]),
        ("rsub.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.5))), V(one)]),
        ("rsub.Tensor", vec![T(&[2, 3]), T(&[3]), V(|| IValue::Scalar(Scalar::Int(3)))]),
        ("addcdiv", vec![T(&[2, 3]), T(&[2, 3]), Pos(&[3]), V(|| IValue::Scalar(Scalar::Float(0.5)))]),
        ("addcmul", vec![T(&[3]), T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(2.0)))]),
        ("baddbmm", vec![T(&[2, 2, 2]), T(&[2, 2, 3]), T(&[2, 3, 2]), V(one), V(one)]),
        ("dot", vec![T(&[4]), T(&[4])]),
        ("lerp.Tensor", vec![T(&[2, 3]), T(&[2, 3]), T(&[3])]),
        ("mse_loss", vec![T(&[2, 3]), T(&[2, 3]), V(|| int(1))]),
        ("sigmoid_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("tanh_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("threshold_backward", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(0)))]),
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
        ("sign", vec![T(&[2, 3])]),
        ("atan2", vec![T(&[2, 3]), T(&[2, 3])]),
        ("elu", vec![T(&[2, 3]), V(one), V(one), V(one)]),
        ("hardsigmoid", vec![T(&[2, 3])]),
        ("hardswish", vec![T(&[2, 3])]),
        ("hardtanh", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Int(-2))), V(|| IValue::Scalar(Scalar::Int(2)))]),
        ("leaky_relu", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1)))]),
        (
            "leaky_relu_backward",
            vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1))), V(|| IValue::Bool(false))],
        ),
        ("transpose.int", vec![T(&[2, 3, 2]), V(|| int(0)), V(|| int(2))]),
        ("tril", vec![T(&[2, 3, 4]), V(|| int(1))]),
        ("triu", vec![T(&[4, 3]), V(|| int(-1))]),
        ("expand", vec![T(&[3, 1]), V(|| IValue::IntList(vec![2, 3, 4])), V(|| IValue::Bool(false))]),
        ("_unsafe_view", vec![T(&[2, 6]), V(|| IValue::IntList(vec![4, -1]))]),
        ("unsqueeze", vec![T(&[2, 3]), V(|| int(1))]),
        ("squeeze", vec![T(&[2, 1, 3])]),
        ("select.int", vec![T(&[2, 3]), V(|| int(1)), V(|| int(2))]),
        ("view", vec![T(&[2, 3]), V(|| IValue::IntList(vec![3, 2]))]),
        ("sum", vec![T(&[2, 3]), V(none)]),
        ("mean", vec![T(&[2, 3]), V(none)]),
        ("_softmax", vec![T(&[2, 3]), V(|| int(1)), V(|| IValue::Bool(false))]),
        ("_log_softmax", vec![T(&[2, 3]), V(|| int(1)), V(|| IValue::Bool(false))]),
        ("masked_fill.Scalar", vec![T(&[2, 3]), Fixed(mask), V(|| IValue::Scalar(Scalar::Float(0.25)))]),
        ("where.self", vec![Fixed(mask), T(&[2, 3]), T(&[2, 3])]),
        // 2.15 spells their forward formulas with `masked_fill_inplace_if_safe`, which the translator reads
        ("maximum", vec![T(&[2, 3]), T(&[2, 3])]),
        ("minimum", vec![T(&[2, 3]), T(&[2, 3])]),
        ("masked_scatter", vec![T(&[2, 3]), Fixed(mask), T(&[6])]),
        ("nll_loss_forward", vec![T(&[3, 4]), Fixed(target), V(none), V(|| int(1)), V(|| int(-100))]),
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
        ("mv", vec![T(&[2, 3]), T(&[3])]),
        ("as_strided", vec![T(&[2, 3]), V(|| IValue::IntList(vec![3, 2])), V(|| IValue::IntList(vec![1, 3])), V(none)]),
        (
            "embedding",
            vec![
                T(&[4, 3]),
                Fixed(|| Tensor::from_vec(vec![2i64, 0, 3], &[3]).unwrap()),
                V(|| int(-1)),
                V(|| IValue::Bool(false)),
                V(|| IValue::Bool(false)),
            ],
        ),
        (
            "embedding_dense_backward",
            vec![
                T(&[3, 2]),
                Fixed(|| Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap()),
                V(|| int(4)),
                V(|| int(-1)),
                V(|| IValue::Bool(false)),
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
        ("index_select", vec![T(&[3, 2]), V(|| int(0)), Fixed(|| Tensor::from_vec(vec![2i64, 0], &[2]).unwrap())]),
        (
            "scatter_add",
            vec![
                T(&[3, 2]),
                V(|| int(0)),
                Fixed(|| Tensor::from_vec(vec![0i64, 2, 1, 0], &[2, 2]).unwrap()),
                T(&[2, 2]),
            ],
        ),
        ("lerp.Scalar", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.3)))]),
        ("masked_fill.Tensor", vec![T(&[2, 3]), Fixed(mask), T(&[])]),
        ("mean.dim", vec![T(&[2, 3]), V(|| IValue::IntList(vec![1])), V(|| IValue::Bool(false)), V(none)]),
        ("sum.dim_IntList", vec![T(&[2, 3]), V(|| IValue::IntList(vec![0])), V(|| IValue::Bool(true)), V(none)]),
        ("permute", vec![T(&[2, 3, 2]), V(|| IValue::IntList(vec![2, 0, 1]))]),
        ("select_backward", vec![T(&[3]), V(|| IValue::IntList(vec![2, 3])), V(|| int(0)), V(|| int(1))]),
        ("slice.Tensor", vec![T(&[4, 3]), V(|| int(0)), V(|| int(1)), V(|| int(3)), V(|| int(1))]),
        ("squeeze.dim", vec![T(&[2, 1, 3]), V(|| int(1))]),
        // translated once the translator took `M_PI`/`M_LN2`, `is_complex()` conditions and
        // string literals
        ("acosh", vec![Gt1(&[2, 3])]),
        ("exp2", vec![T(&[2, 3])]),
        ("erf", vec![T(&[2, 3])]),
        // translated once the translator took `where(c, x, 0)`, `at::scalar_tensor` and
        // conditionals on optional bools (`native_dropout` in eval mode: deterministic)
        ("clamp_min", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1)))]),
        ("clamp_max", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(0.1)))]),
        ("log1p", vec![Pos(&[2, 3])]),
        ("native_dropout", vec![T(&[2, 3]), V(|| IValue::Float(0.5)), V(|| IValue::Bool(false))]),
        ("sgn", vec![T(&[2, 3])]),
        ("fmod.Tensor", vec![T(&[2, 3]), Pos(&[2, 3])]),
        ("remainder.Tensor", vec![T(&[2, 3]), Pos(&[3])]),
        (
            "clamp",
            vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(-0.5))), V(|| IValue::Scalar(Scalar::Float(0.5)))],
        ),
        ("pow.Tensor_Scalar", vec![Pos(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(2.5)))]),
        ("pow.Tensor_Tensor", vec![Pos(&[2, 3]), T(&[3])]),
        ("pow.Scalar", vec![V(|| IValue::Scalar(Scalar::Float(1.7))), T(&[2, 3])]),
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
        ("gelu_backward", vec![T(&[2, 3]), T(&[2, 3]), V(|| IValue::Str("tanh".into()))]),
        ("hardswish_backward", vec![T(&[2, 3]), T(&[2, 3])]),
        ("mse_loss_backward", vec![T(&[]), T(&[2, 3]), T(&[2, 3]), V(|| int(1))]),
        // Core ATen operators with host implementations (`ops/core_aten.rs`): linear in their
        // differentiable inputs, so the jvp is the operator on the tangents
        ("alias", vec![T(&[2, 3])]),
        ("fill.Scalar", vec![T(&[2, 3]), V(|| IValue::Scalar(Scalar::Float(1.5)))]),
        ("flip", vec![T(&[2, 3]), V(|| il(&[0, 1]))]),
        ("repeat", vec![T(&[2, 3]), V(|| il(&[2, 1, 2]))]),
        ("cumsum", vec![T(&[2, 3]), V(|| int(1)), V(none)]),
        ("diagonal", vec![T(&[3, 4]), V(|| int(1)), V(|| int(0)), V(|| int(1))]),
        ("squeeze.dims", vec![T(&[2, 1, 3, 1]), V(|| il(&[1, 3]))]),
        ("constant_pad_nd", vec![T(&[2, 3]), V(|| il(&[1, 2])), V(|| IValue::Scalar(Scalar::Float(0.5)))]),
        ("reflection_pad1d", vec![T(&[1, 2, 5]), V(|| il(&[2, 1]))]),
        ("reflection_pad2d", vec![T(&[1, 1, 4, 4]), V(|| il(&[1, 2, 2, 1]))]),
        ("reflection_pad3d", vec![T(&[1, 1, 3, 3, 3]), V(|| il(&[1, 1, 1, 0, 2, 1]))]),
        ("replication_pad2d", vec![T(&[1, 1, 3, 3]), V(|| il(&[2, 1, 0, 2]))]),
        ("replication_pad3d", vec![T(&[1, 1, 2, 3, 3]), V(|| il(&[1, 0, 2, 1, 1, 1]))]),
        (
            "index.Tensor",
            vec![
                T(&[4, 3]),
                V(|| IValue::OptTensorList(vec![Some(Tensor::from_vec(vec![2i64, 0, 3, 2], &[4]).unwrap()), None])),
            ],
        ),
        (
            "scatter.src",
            vec![
                T(&[3, 4]),
                V(|| int(0)),
                Fixed(|| Tensor::from_vec(vec![0i64, 2, 1, 0, 2, 1, 0, 1], &[2, 4]).unwrap()),
                T(&[2, 4]),
            ],
        ),
        (
            "scatter.value",
            vec![
                T(&[3, 4]),
                V(|| int(1)),
                Fixed(|| Tensor::from_vec(vec![3i64, 0, 1, 2, 0, 3], &[3, 2]).unwrap()),
                V(|| IValue::Scalar(Scalar::Float(0.5))),
            ],
        ),
        ("select_scatter", vec![T(&[3, 4]), T(&[3]), V(|| int(1)), V(|| int(2))]),
        ("slice_scatter", vec![T(&[4, 3]), T(&[2, 3]), V(|| int(0)), V(|| int(1)), V(|| int(3)), V(|| int(1))]),
        ("topk", vec![T(&[2, 5]), V(|| int(2)), V(|| int(1)), V(|| IValue::Bool(true)), V(|| IValue::Bool(true))]),
        ("_adaptive_avg_pool2d", vec![T(&[1, 2, 5, 4]), V(|| il(&[2, 3]))]),
        ("_adaptive_avg_pool3d", vec![T(&[1, 2, 3, 4, 5]), V(|| il(&[2, 2, 3]))]),
        ("_adaptive_avg_pool2d_backward", vec![T(&[1, 2, 2, 3]), T(&[1, 2, 5, 4])]),
        (
            "avg_pool3d",
            vec![
                T(&[1, 2, 3, 4, 4]),
                V(|| il(&[2, 2, 2])),
                V(|| il(&[1, 2, 2])),
                V(|| il(&[1, 0, 1])),
                V(|| IValue::Bool(true)),
                V(|| IValue::Bool(false)),
                V(none),
            ],
        ),
        (
            "col2im",
            vec![
                T(&[1, 8, 6]),
                V(|| il(&[3, 4])),
                V(|| il(&[2, 2])),
                V(|| il(&[1, 1])),
                V(|| il(&[0, 0])),
                V(|| il(&[1, 1])),
            ],
        ),
        (
            "avg_pool2d",
            vec![
                T(&[1, 2, 5, 4]),
                V(|| il(&[2, 2])),
                V(|| il(&[2, 1])),
                V(|| il(&[1, 0])),
                V(|| IValue::Bool(false)),
                V(|| IValue::Bool(true)),
                V(none),
            ],
        ),
        (
            "avg_pool2d_backward",
            vec![
                T(&[1, 2, 3, 3]),
                T(&[1, 2, 5, 4]),
                V(|| il(&[2, 2])),
                V(|| il(&[2, 1])),
                V(|| il(&[1, 0])),
                V(|| IValue::Bool(false)),
                V(|| IValue::Bool(true)),
                V(none),
            ],
        ),
        (
            "max_pool2d_with_indices_backward",
            vec![
                T(&[1, 1, 2, 2]),
                T(&[1, 1, 4, 4]),
                V(|| il(&[2, 2])),
                V(|| il(&[2, 2])),
                V(|| il(&[0, 0])),
                V(|| il(&[1, 1])),
                V(|| IValue::Bool(false)),
                Fixed(|| Tensor::from_vec(vec![0i64, 3, 9, 14], &[1, 1, 2, 2]).unwrap()),
            ],
        ),
    ]
}

fn il(v: &[i64]) -> IValue {
    IValue::IntList(v.to_vec())
}

/// Operators in scope that have no case (or whose case is not run), with the reason.
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

/// Builds the boxed arguments; differentiable inputs get their tangents when `tangents` is set.
fn build(spec: &[A], data: &[Vec<f64>], tangents: Option<&[Vec<f64>]>) -> Vec<IValue> {
    let mut args = Vec::new();
    let mut k = 0;
    for a in spec {
        match a {
            A::T(s) | A::Pos(s) | A::Gt1(s) => {
                let t = Tensor::from_vec(data[k].clone(), s).unwrap();
                let t = match tangents {
                    Some(v) => make_dual(&t, &Tensor::from_vec(v[k].clone(), s).unwrap()).unwrap(),
                    None => t,
                };
                k += 1;
                args.push(IValue::Tensor(t));
            }
            A::Fixed(f) => args.push(IValue::Tensor(f())),
            A::V(f) => args.push(f()),
        }
    }
    args
}

fn float_outputs(outs: &[IValue]) -> Vec<Tensor> {
    outs.iter()
        .filter_map(|v| match v {
            IValue::Tensor(t) if t.dtype().is_floating() => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn outputs_at(op: &str, spec: &[A], data: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let args = build(spec, data, None);
    let outs = autograd::call(&NpuOps, op, &args).unwrap();
    float_outputs(&outs).iter().map(|t| t.to_f64_vec().unwrap()).collect()
}

fn check(op: &'static str, spec: &[A], seed: u64) -> Result<(), String> {
    let _level = dual_level(&NpuOps).map_err(|e| e.to_string())?;
    let mut rng = Rng(seed);
    let mut data = Vec::new();
    let mut dirs = Vec::new();
    for a in spec {
        match a {
            A::T(s) => data.push(values(&mut rng, numel(s), false)),
            A::Pos(s) => data.push(values(&mut rng, numel(s), true)),
            A::Gt1(s) => data.push(values(&mut rng, numel(s), true).into_iter().map(|v| v + 0.7).collect()),
            _ => continue,
        }
        dirs.push(values(&mut rng, data.last().map_or(0, Vec::len), false));
    }
    let args = build(spec, &data, Some(dirs.as_slice()));
    let outs = autograd::call(&NpuOps, op, &args).map_err(|e| format!("{op}: forward: {e}"))?;
    let outs = float_outputs(&outs);
    if outs.is_empty() {
        return Err(format!("{op}: no floating outputs"));
    }
    let eps = 1e-6;
    let shifted = |sign: f64| -> Vec<Vec<f64>> {
        data.iter().zip(&dirs).map(|(x, v)| x.iter().zip(v).map(|(a, b)| a + sign * eps * b).collect()).collect()
    };
    let plus = outputs_at(op, spec, &shifted(1.0));
    let minus = outputs_at(op, spec, &shifted(-1.0));
    for (k, out) in outs.iter().enumerate() {
        let (_, tangent) = unpack_dual(out);
        let Some(tangent) = tangent else { return Err(format!("{op}: output {k} has no tangent")) };
        if tangent.sizes() != out.sizes() {
            return Err(format!("{op}: output {k}: tangent size {:?} vs {:?}", tangent.sizes(), out.sizes()));
        }
        let got = tangent.to_f64_vec().map_err(|e| e.to_string())?;
        for (i, g) in got.iter().enumerate() {
            let num = (plus[k][i] - minus[k][i]) / (2.0 * eps);
            if (g - num).abs() > 1e-6 + 1e-5 * num.abs() {
                return Err(format!("{op}: output {k} element {i}: jvp {g} vs finite difference {num}"));
            }
        }
    }
    Ok(())
}

/// Operators with a translated jvp that the runtime can run.
fn in_scope() -> BTreeSet<&'static str> {
    let runnable: BTreeSet<&str> = xirang_runtime::kernels::operators()
        .into_iter()
        .chain(RECIPES.iter().map(|r| r.0))
        .chain(xirang_runtime::generated::ops::fallback::HOST_OPERATORS.iter().copied())
        .collect();
    FORWARD_COVERAGE.iter().filter(|r| r.1 == "translated" && runnable.contains(r.0)).map(|r| r.0).collect()
}

#[test]
fn finite_differences_agree_with_the_jvp_of_every_translated_operator_in_scope() {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let scope = in_scope();
    let cases = cases();
    let covered: BTreeSet<&str> = cases.iter().map(|c| c.0).collect();
    let excluded: BTreeSet<&str> = EXCLUDED.iter().map(|e| e.0).collect();
    let missing: Vec<&str> =
        scope.iter().copied().filter(|op| !covered.contains(op) && !excluded.contains(op)).collect();
    let not_in_scope: Vec<&str> = covered.iter().copied().filter(|op| !scope.contains(op)).collect();
    println!("cases for operators not in scope (not run): {not_in_scope:?}");
    let mut failures = Vec::new();
    let mut ran = 0;
    for (i, (op, spec)) in cases.iter().enumerate() {
        if excluded.contains(op) || !scope.contains(op) {
            continue;
        }
        ran += 1;
        if let Err(e) = check(op, spec, 31 + i as u64) {
            failures.push(e);
        }
    }
    println!("forward gradcheck: {ran} cases run, {} excluded, {} operators in scope", excluded.len(), scope.len());
    assert!(failures.is_empty(), "jvp check failures:\n{}", failures.join("\n"));
    assert!(missing.is_empty(), "operators in scope without a finite-difference case: {missing:?}");
}

#[test]
fn coverage_table_matches_jvps() {
    for j in JVPS.iter() {
        let row = FORWARD_COVERAGE.iter().find(|r| r.0 == j.op).expect("a coverage row per jvp");
        assert_eq!(row.1 == "translated", j.translated, "{}", j.op);
    }
    assert!(JVPS.windows(2).all(|w| w[0].op < w[1].op), "JVPS sorted");
    let translated = FORWARD_COVERAGE.iter().filter(|r| r.1 == "translated").count();
    for op in ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "neg", "exp", "log", "sin", "cos", "tanh"] {
        assert!(forward_ad::jvp_info(op).is_some_and(|j| j.translated), "{op} translated");
    }
    for op in ["sigmoid", "relu", "sqrt"] {
        assert!(forward_ad::jvp_info(op).is_some_and(|j| j.translated), "{op} translated");
    }
    println!("forward coverage: {translated} of {} operators translated", FORWARD_COVERAGE.len());
}

fn t(v: Vec<f64>, s: &[usize]) -> Tensor {
    Tensor::from_vec(v, s).unwrap()
}

#[test]
fn tangents_flow_through_a_chain_of_three_operators() {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let o = &NpuOps;
    let xs = vec![0.3, -0.7, 0.9, 0.1, -0.4, 0.6];
    let vs = vec![1.0, 0.5, -2.0, 0.25, 1.5, -1.0];
    let level = dual_level(&NpuOps).unwrap();
    let x = make_dual(&t(xs.clone(), &[2, 3]), &t(vs.clone(), &[2, 3])).unwrap();
    assert!(forward_ad::is_dual(&x));
    assert!(!x.requires_grad());
    // y = exp(tanh(x * x)): dy = exp(tanh(x²)) (1 - tanh²(x²)) 2x v
    let y = ag::exp(o, &ag::tanh(o, &ag::mul_tensor(o, &x, &x).unwrap()).unwrap()).unwrap();
    assert!(forward_ad::is_dual(&y));
    assert!(y.grad_fn().is_none(), "no backward node when nothing requires grad");
    let (p, tan) = unpack_dual(&y);
    assert!(!forward_ad::is_dual(&p));
    let tan = tan.expect("tangent").to_f64_vec().unwrap();
    for (i, ((x, v), got)) in xs.iter().zip(&vs).zip(&tan).enumerate() {
        let th = (x * x).tanh();
        let want = th.exp() * (1.0 - th * th) * 2.0 * x * v;
        assert!((got - want).abs() < 1e-12, "{i}: {got} vs {want}");
    }
    // a non-dual operand contributes a zero tangent: (x + c) has tangent v
    let c = t(vec![1.0; 6], &[2, 3]);
    let z = ag::add_tensor(o, &c, &x, Scalar::Int(1)).unwrap();
    assert_eq!(unpack_dual(&z).1.unwrap().to_f64_vec().unwrap(), vs);
    // leaving the level clears the tangents
    drop(level);
    assert!(unpack_dual(&y).1.is_none());
    assert!(!forward_ad::is_dual(&y));
}

#[test]
fn untranslated_operator_is_a_clear_error() {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    // an operator with a forward formula the translator cannot handle
    let row = FORWARD_COVERAGE.iter().find(|r| r.0 == "amax").expect("amax row");
    assert_eq!(row.1, "untranslated");
    let _level = dual_level(&NpuOps).unwrap();
    let x = make_dual(&t(vec![0.5, 1.5], &[2]), &t(vec![1.0, 1.0], &[2])).unwrap();
    let err = ag::amax(&NpuOps, &x, &[0], false).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Unsupported(_)), "{msg}");
    assert!(msg.contains("forward-mode AD: `amax` has no translated forward formula (`amaxamin_jvp("), "{msg}");
    // without a tangent the same call works
    let (p, _) = unpack_dual(&x);
    assert!(ag::amax(&NpuOps, &p, &[0], false).is_ok());
}

#[test]
fn make_dual_checks_like_pytorch() {
    let p = t(vec![1.0, 2.0, 3.0], &[3]);
    // outside a level
    let e = make_dual(&p, &t(vec![0.0; 3], &[3])).unwrap_err().to_string();
    assert!(e.contains("no dual level is active"), "{e}");
    let level = dual_level(&NpuOps).unwrap();
    let nested = dual_level(&NpuOps).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(nested.contains("Nested forward mode AD is not supported"), "{nested}");
    let e = make_dual(&p, &t(vec![0.0; 4], &[4])).unwrap_err().to_string();
    assert!(
        e.contains("different size than that of the original Tensor") && e.contains("[3]") && e.contains("[4]"),
        "{e}"
    );
    let e = make_dual(&p, &Tensor::from_vec(vec![0.0f32; 3], &[3]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("dtype"), "{e}");
    let e = make_dual(&Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap(), &p).unwrap_err().to_string();
    assert!(e.contains("Expected primal to be floating point"), "{e}");
    let d = make_dual(&p, &t(vec![1.0; 3], &[3])).unwrap();
    assert!(make_dual(&d, &t(vec![1.0; 3], &[3])).unwrap_err().to_string().contains("already has a forward gradient"));
    // detach drops the tangent
    assert!(!forward_ad::is_dual(&d.detach()));
    drop(level);
}

/// `<a, b>` of two equally shaped tensors.
fn dot(a: &Tensor, b: &Tensor) -> f64 {
    a.to_f64_vec().unwrap().iter().zip(b.to_f64_vec().unwrap()).map(|(x, y)| x * y).sum()
}

#[test]
fn forward_and_reverse_mode_agree() {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let o = &NpuOps;
    let mut rng = Rng(7);
    let x = t(values(&mut rng, 6, false), &[2, 3]);
    let w = t(values(&mut rng, 12, false), &[3, 4]);
    let vx = t(values(&mut rng, 6, false), &[2, 3]);
    let vw = t(values(&mut rng, 12, false), &[3, 4]);
    let u = t(values(&mut rng, 8, false), &[2, 4]);
    // f(x, w) = tanh(x @ w) * sigmoid(x @ w) + exp(x @ w)
    let f = |x: &Tensor, w: &Tensor| -> Tensor {
        let h = ag::mm(o, x, w).unwrap();
        let a = ag::mul_tensor(o, &ag::tanh(o, &h).unwrap(), &ag::sigmoid(o, &h).unwrap()).unwrap();
        ag::add_tensor(o, &a, &ag::exp(o, &h).unwrap(), Scalar::Int(1)).unwrap()
    };
    // forward: <u, J v>; the inputs are dual and require grad, so one call records both
    let level = dual_level(&NpuOps).unwrap();
    let xd = make_dual(&x, &vx).unwrap().requires_grad_(true);
    let wd = make_dual(&w, &vw).unwrap().requires_grad_(true);
    assert!(forward_ad::is_dual(&xd) && xd.requires_grad());
    let y = f(&xd, &wd);
    let jv = unpack_dual(&y).1.expect("tangent");
    let forward = dot(&u, &jv);
    // reverse: <J^T u, v>
    let loss = ag::sum(o, &ag::mul_tensor(o, &y, &u).unwrap(), None).unwrap();
    loss.backward(o).unwrap();
    let reverse = dot(&xd.grad().unwrap(), &vx) + dot(&wd.grad().unwrap(), &vw);
    drop(level);
    assert!((forward - reverse).abs() < 1e-10 * (1.0 + forward.abs()), "forward {forward} vs reverse {reverse}");
    // and a function evaluated without duals has no tangent
    assert!(unpack_dual(&f(&x, &w)).1.is_none());
}
