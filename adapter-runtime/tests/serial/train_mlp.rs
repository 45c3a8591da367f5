//! `train_mlp` against the same training run in PyTorch
//! (`goldens/make_goldens.py` writes `mlp_losses.json`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::train;
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::{DType, Device, Error, Runtime, Tensor, io};

fn goldens() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("goldens")
}

#[test]
fn losses_match_pytorch_within_1e_4_relative() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    // the counters are this run's
    dispatch::reset_counters();
    let init = io::load_safetensors(goldens().join("mlp_init.safetensors")).unwrap();
    let data = io::load_safetensors(goldens().join("mlp_data.safetensors")).unwrap();
    let golden: serde_json::Value =
        serde_json::from_slice(&std::fs::read(goldens().join("mlp_losses.json")).unwrap()).unwrap();
    let want: Vec<f64> = golden["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let lr = golden["lr"].as_f64().unwrap();
    let rt = Runtime::simulator().unwrap();
    let (got, _) = train::train_mlp(&rt, Device::Npu(0), &init, &data, want.len(), lr, |_, _| {}).unwrap();
    let mut worst = 0f64;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let rel = (g - w).abs() / w.abs();
        worst = worst.max(rel);
        assert!(rel <= 1e-4, "step {i}: loss {g} vs PyTorch {w} (rel {rel:.3e})");
    }
    println!("train_mlp: {} steps, max relative loss error vs PyTorch {worst:.3e}", got.len());
    assert!(got.last().unwrap() < got.first().unwrap(), "the loss should decrease");
    // every operator of the loop has a native kernel on the device
    let fallbacks: Vec<_> = dispatch::counters().into_iter().filter(|(_, c)| c.fallback > 0).collect();
    assert!(fallbacks.is_empty(), "operators on the CPU fallback: {fallbacks:?}");
}

fn t(v: Vec<f32>, s: &[usize]) -> Tensor {
    Tensor::from_vec(v, s).unwrap()
}

#[test]
fn any_shapes_work_and_bad_inputs_are_errors() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let rt = Runtime::simulator().unwrap();
    let (n, d, h, c) = (5, 3, 2, 4);
    let f = |k: usize, s: f32| (0..k).map(|i| ((i * 7 % 11) as f32 - 5.0) * s).collect::<Vec<_>>();
    let mut init = BTreeMap::new();
    init.insert("fc1.weight".to_string(), t(f(h * d, 0.1), &[h, d]));
    init.insert("fc1.bias".to_string(), t(f(h, 0.01), &[h]));
    init.insert("fc2.weight".to_string(), t(f(c * h, 0.1), &[c, h]));
    init.insert("fc2.bias".to_string(), t(f(c, 0.01), &[c]));
    let mut data = BTreeMap::new();
    data.insert("x".to_string(), t(f(n * d, 0.3), &[n, d]));
    data.insert("y".to_string(), Tensor::from_vec(vec![0i64, 3, 1, 2, 3], &[n]).unwrap());
    let mut seen = Vec::new();
    let (losses, params) =
        train::train_mlp(&rt, Device::Npu(0), &init, &data, 3, 0.5, |i, l| seen.push((i, l))).unwrap();
    assert_eq!(losses.len(), 3);
    assert_eq!(seen.len(), 3);
    assert!(losses.iter().all(|l| l.is_finite()));
    assert_eq!(params["fc2.weight"].sizes(), &[c, h]);

    let mut bad = data.clone();
    bad.insert("y".to_string(), Tensor::from_vec(vec![0i64, 9, 1, 2, 3], &[n]).unwrap());
    assert!(matches!(train::train_mlp(&rt, Device::Npu(0), &init, &bad, 1, 0.1, |_, _| {}), Err(Error::Index(_))));
    let mut bad = init.clone();
    bad.insert("fc1.weight".to_string(), t(f(h * (d + 1), 0.1), &[h, d + 1]));
    assert!(matches!(train::train_mlp(&rt, Device::Npu(0), &bad, &data, 1, 0.1, |_, _| {}), Err(Error::Shape(_))));
    let mut bad = data.clone();
    bad.insert("x".to_string(), Tensor::zeros(&[n, d], DType::F64));
    assert!(matches!(train::train_mlp(&rt, Device::Npu(0), &init, &bad, 1, 0.1, |_, _| {}), Err(Error::DType(_))));
}

/// Autograd (`train_mlp`) and the hand-called backward operators (`train_mlp_explicit`) run the
/// same kernels: their losses and trained parameters agree.
#[test]
fn autograd_and_explicit_backward_agree() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let init = io::load_safetensors(goldens().join("mlp_init.safetensors")).unwrap();
    let data = io::load_safetensors(goldens().join("mlp_data.safetensors")).unwrap();
    let rt = Runtime::simulator().unwrap();
    let (a, pa) = train::train_mlp(&rt, Device::Npu(0), &init, &data, 5, 0.1, |_, _| {}).unwrap();
    let (e, pe) = train::train_mlp_explicit(&rt, Device::Npu(0), &init, &data, 5, 0.1, |_, _| {}).unwrap();
    for (x, y) in a.iter().zip(&e) {
        assert!((x - y).abs() <= 1e-6 * y.abs(), "loss {x} (autograd) vs {y} (explicit)");
    }
    for (name, t) in &pa {
        let (u, v) = (t.to_f64_vec().unwrap(), pe[name].to_f64_vec().unwrap());
        assert!(u.iter().zip(&v).all(|(p, q)| (p - q).abs() <= 1e-6), "{name} differs");
    }
}

/// Row 23 of issue #19: a diverged run printed `"loss": NaN`, which is not JSON. Every step line
/// parses; a non-finite loss is `null` with a `nonfinite` flag saying which value it was.
#[test]
fn loss_lines_are_json_even_when_the_loss_is_not_finite() {
    let _serial = crate::serial();
    for (loss, flag) in
        [(0.25, None), (f64::NAN, Some("NaN")), (f64::INFINITY, Some("inf")), (f64::NEG_INFINITY, Some("-inf"))]
    {
        let line = train::loss_line(7, loss);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("`{line}` is not JSON: {e}"));
        assert_eq!(v["step"], 7, "{line}");
        match flag {
            None => {
                assert_eq!(v["loss"].as_f64(), Some(loss), "{line}");
                assert!(v.get("nonfinite").is_none(), "{line}");
            }
            Some(f) => {
                assert!(v["loss"].is_null(), "{line}");
                assert_eq!(v["nonfinite"], f, "{line}");
            }
        }
    }
    // a finite loss prints as before (shortest round-trip decimal)
    assert_eq!(train::loss_line(0, 2.302585124969482), r#"{"step": 0, "loss": 2.302585124969482}"#);
    // a real run from a NaN bias
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let rt = Runtime::simulator().unwrap();
    let mut init = io::load_safetensors(goldens().join("mlp_init.safetensors")).unwrap();
    let data = io::load_safetensors(goldens().join("mlp_data.safetensors")).unwrap();
    let b = &init["fc2.bias"];
    init.insert("fc2.bias".into(), Tensor::from_vec(vec![f32::NAN; b.numel()], b.sizes()).unwrap());
    let mut lines = Vec::new();
    train::train_mlp(&rt, Device::Npu(0), &init, &data, 2, 0.1, |i, l| lines.push(train::loss_line(i, l))).unwrap();
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("`{line}` is not JSON: {e}"));
        assert!(v["loss"].is_null() && v["nonfinite"] == "NaN", "{line}");
    }
}

/// Row 18 of issue #19: `train_mlp -i /dev/zero` read until it was killed for memory (9 GB); a FIFO
/// blocked the open. Safetensors inputs must be regular files no larger than the limit.
#[cfg(unix)]
#[test]
fn safetensors_inputs_must_be_regular_files_of_bounded_size() {
    let _serial = crate::serial();
    let dir = std::env::temp_dir().join(format!("xirang-train-mlp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("w.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for path in [PathBuf::from("/dev/zero"), fifo, dir.clone()] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(io::load_safetensors(&p).map(|_| ()).map_err(|e| e.to_string()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{}: no answer in 30 s", path.display()));
        let e = r.unwrap_err();
        assert!(e.contains("not a regular file"), "{}: {e}", path.display());
    }
    // a sparse file just over the limit: refused by its size, nothing read
    let big = dir.join("big.safetensors");
    std::fs::File::create(&big).unwrap().set_len((4 << 30) + 1).unwrap();
    let e = io::load_safetensors(&big).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("limit of 4294967296 bytes"), "{e}");
    std::fs::remove_file(&big).unwrap();
}
