//! Tests of the custom operator `xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor`,
//! written by `xirang-scan new-op` (edit freely: it is never regenerated). They fail with
//! "not implemented" until the kernel in
//! `adapter-runtime/src/custom/scaled_gelu.rs` is written.

use xirang_runtime::generated::custom as custom_ops;
use xirang_runtime::kernels::NpuOps;
use xirang_runtime::{Error, Result, Tensor};

/// A deterministic f64 input (2x3), number `k`.
fn input(k: usize) -> Tensor {
    let v: Vec<f64> = (0..6).map(|i| ((i * 7 + k * 5) % 13) as f64 / 6.0 - 1.0).collect();
    Tensor::from_vec(v, &[2, 3]).expect("a 2x3 host tensor")
}

fn values(t: &Tensor) -> Result<Vec<f64>> {
    t.to_vec::<f64>()
}

fn run(r: Result<()>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn scaled_gelu_runs() {
    run(forward());
}

fn forward() -> Result<()> {
    let o = NpuOps;
    let self_ = input(0);
    let scale: f64 = 1.5;
    let r = values(&custom_ops::xirang::scaled_gelu(&o, &self_, scale)?)?;
    assert!(r.iter().all(|x| x.is_finite()), "non-finite output: {r:?}");
    Ok(())
}

fn dot(a: &Tensor, b: &Tensor) -> Result<f64> {
    Ok(values(a)?.iter().zip(values(b)?).map(|(x, y)| x * y).sum())
}

/// An upstream gradient of the given shape.
fn ramp(sizes: &[usize]) -> Result<Tensor> {
    let n: usize = sizes.iter().product();
    Tensor::from_vec((0..n).map(|i| 0.5 + (i % 5) as f64 * 0.25).collect::<Vec<f64>>(), sizes)
}

/// Central finite differences of `f` at `x` against the backward node's gradient.
fn check_gradient(name: &str, x: &Tensor, analytic: Option<&Tensor>, f: impl Fn(&Tensor) -> Result<f64>) -> Result<()> {
    let analytic = values(analytic.ok_or_else(|| Error::InvalidArgument(format!("no gradient for `{name}`")))?)?;
    let base = values(x)?;
    assert_eq!(analytic.len(), base.len(), "gradient of `{name}`: number of elements");
    let h = 1e-6;
    for (i, &want) in analytic.iter().enumerate() {
        let mut plus = base.clone();
        plus[i] += h;
        let mut minus = base.clone();
        minus[i] -= h;
        let numeric = (f(&Tensor::from_vec(plus, x.sizes())?)? - f(&Tensor::from_vec(minus, x.sizes())?)?) / (2.0 * h);
        let err = (numeric - want).abs();
        assert!(
            err <= 1e-5 * (1.0 + numeric.abs()),
            "d/d{name}[{i}]: finite differences {numeric}, backward node {want}"
        );
    }
    Ok(())
}

#[test]
fn scaled_gelu_gradients_match_finite_differences() {
    run(gradients());
}

fn gradients() -> Result<()> {
    let o = NpuOps;
    let self_ = input(0);
    let scale: f64 = 1.5;
    let (result, node) = custom_ops::autograd::scaled_gelu(&o, &self_, scale)?;
    let g = ramp(result.sizes())?;
    let grads = node.apply(&o, &[Some(g.clone())])?;
    check_gradient("self", &self_, grads[0].as_ref(), |x| dot(&g, &custom_ops::xirang::scaled_gelu(&o, x, scale)?))?;
    Ok(())
}

#[test]
fn scaled_gelu_matches_the_reference() {
    run(reference());
}

fn reference() -> Result<()> {
    let o = NpuOps;
    let self_ = input(0);
    let scale: f64 = 1.5;
    let got = values(&custom_ops::xirang::scaled_gelu(&o, &self_, scale)?)?;
    let want = values(&custom_ops::reference::scaled_gelu(&o, &self_, scale)?)?;
    assert_eq!(got.len(), want.len(), "number of elements");
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "element {i}: kernel {a}, reference {b}");
    }
    Ok(())
}
