//! `train_transformer` against the same training run in PyTorch
//! (`goldens/make_transformer_goldens.py` writes `transformer_losses.json`).
//!
//! Tolerance: 1e-4 relative per step. Both sides compute in f32 with other summation orders
//! (blocked matmuls, reductions), a difference of a few ulps per operation that SGD carries
//! forward; over 50 steps it stays around 1e-6 (printed), two orders below the bound, while a
//! wrong gradient shows up as a difference of 1e-2 or more within a few steps.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::train;
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::{Device, Error, Runtime, Tensor, io};

fn goldens() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("goldens")
}

type Files = (BTreeMap<String, Tensor>, BTreeMap<String, Tensor>, serde_json::Value);

fn load() -> Files {
    let init = io::load_safetensors(goldens().join("transformer_init.safetensors")).unwrap();
    let data = io::load_safetensors(goldens().join("transformer_data.safetensors")).unwrap();
    let golden: serde_json::Value =
        serde_json::from_slice(&std::fs::read(goldens().join("transformer_losses.json")).unwrap()).unwrap();
    (init, data, golden)
}

#[test]
fn losses_match_pytorch_within_1e_4_relative_with_no_cpu_fallback() {
    let _serial = crate::serial();
    // a fallback would be an error, not a silent host round trip; the counters are this run's
    dispatch::set_policy(Policy { mode: FallbackMode::Error, ..Policy::default() });
    dispatch::reset_counters();
    let (init, data, golden) = load();
    let want: Vec<f64> = golden["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(want.len(), 50);
    let lr = golden["lr"].as_f64().unwrap();
    let heads = golden["heads"].as_u64().unwrap() as usize;
    let rt = Runtime::simulator().unwrap();
    let (got, params) =
        train::train_transformer(&rt, Device::Npu(0), &init, &data, heads, want.len(), lr, |_, _| {}).unwrap();
    let mut worst = 0f64;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let rel = (g - w).abs() / w.abs();
        worst = worst.max(rel);
        assert!(rel <= 1e-4, "step {i}: loss {g} vs PyTorch {w} (rel {rel:.3e})");
    }
    println!("train_transformer: {} steps, max relative loss error vs PyTorch {worst:.3e}", got.len());
    assert!(got.last().unwrap() < &(0.5 * got.first().unwrap()), "the loss should fall");
    assert_eq!(params.len(), train::TRANSFORMER_PARAMS.len());
    // every operator of the loop, forward and backward, ran on the device
    let counters = dispatch::counters();
    let fallbacks: Vec<_> = counters.iter().filter(|(_, c)| c.fallback > 0).collect();
    assert!(fallbacks.is_empty(), "operators on the CPU fallback: {fallbacks:?}");
    // the backward operators of the new formulas ran
    for op in ["native_layer_norm_backward", "gelu_backward", "_softmax_backward_data", "bmm", "mean.dim"] {
        assert!(counters.iter().any(|(name, c)| *name == op && c.native > 0), "{op} did not run natively");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let (init, data, _) = load();
    let rt = Runtime::simulator().unwrap();
    let run = |init: &BTreeMap<String, Tensor>, data: &BTreeMap<String, Tensor>, heads| {
        train::train_transformer(&rt, Device::Npu(0), init, data, heads, 1, 0.1, |_, _| {})
    };
    assert!(matches!(run(&init, &data, 3), Err(Error::Shape(_))), "3 heads do not divide 16");
    let mut bad = data.clone();
    let n = bad["y"].numel();
    bad.insert("y".to_string(), Tensor::from_vec(vec![7i64; n], &[n]).unwrap());
    assert!(matches!(run(&init, &bad, 2), Err(Error::Index(_))));
    let mut bad = init.clone();
    bad.remove("ln2.bias");
    assert!(matches!(run(&bad, &data, 2), Err(Error::InvalidArgument(_))));
    let mut bad = init.clone();
    bad.insert("fc2.weight".to_string(), Tensor::zeros(&[3, 3], xirang_runtime::DType::F32));
    assert!(matches!(run(&bad, &data, 2), Err(Error::Shape(_))));
}
