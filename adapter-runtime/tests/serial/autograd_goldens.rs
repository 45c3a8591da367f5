//! Backward goldens through the autograd engine: PyTorch's gradients (`torch.autograd.grad`,
//! `goldens/make_autograd_goldens.py`) of every differentiable operator in scope, in f32, f16 and
//! bf16, against the engine's on the simulated device.
//!
//! For each case of `goldens/autograd_index.json` the inputs are put on the device, the
//! differentiable ones require grad, the operator is recorded through the engine
//! (`autograd::call`), and `autograd::backward` runs with PyTorch's upstream gradients. Every
//! input's `.grad()` is compared with PyTorch's using the suite's tolerance standards
//! (`goldens/tolerances.json`, the case's class and the input's dtype).
//!
//! Scope: the operators of `autograd_gradcheck.rs` (a backward node whose formulas are all
//! translated, and a kernel or recipe). The test fails if one of them has no golden case in each
//! of f32, f16 and bf16 and is not in `EXCLUDED` with its reason.
//!
//! The report (max abs / rel error per operator and dtype, case counts, the tiers of the operators
//! forward and backward ran) is printed (`--nocapture`) and written to
//! `$CARGO_TARGET_TMPDIR/autograd_goldens_report.md`. No torch needed.

use crate::{scope, suite};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Value, json};
use xirang_runtime::autograd::{self, Ops, TensorAutograd};
use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::kernels::npu_ops::NpuOps;
use xirang_runtime::{Runtime, Tensor, io};

/// The dtypes every operator in scope must have goldens in.
const DTYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// Operators in scope whose cases do not run, with the reason.
const EXCLUDED: &[(&str, &str)] = &[];

#[derive(Default)]
struct Stat {
    cases: u64,
    grads: u64,
    max_abs: f64,
    max_rel: f64,
}

/// Runs one case; returns (max abs, max rel, gradients compared) or the first failure.
fn run_case(ctx: &suite::Ctx, tols: &Value, case: &Value) -> Result<(f64, f64, u64), String> {
    // `&dyn Ops`: the boxed dispatcher is instantiated once, not for `NpuOps` in this test crate
    let o: &dyn Ops = &NpuOps;
    let op = case["op"].as_str().unwrap();
    let class = case["class"].as_str().unwrap();
    let mut args = case["args"].as_array().unwrap().iter().map(|a| ctx.arg(a)).collect::<Result<Vec<_>, _>>()?;
    let mut leaves = Vec::new();
    for i in case["inputs"].as_array().unwrap() {
        let i = i.as_u64().unwrap() as usize;
        match &args[i] {
            IValue::Tensor(t) => {
                let leaf = t.requires_grad_(true);
                args[i] = IValue::Tensor(leaf.clone());
                leaves.push(leaf);
            }
            // a differentiable `Tensor[]` (`cat`): every element is a leaf, in order
            IValue::TensorList(ts) => {
                let elems: Vec<Tensor> = ts.iter().map(|t| t.requires_grad_(true)).collect();
                leaves.extend(elems.iter().cloned());
                args[i] = IValue::TensorList(elems);
            }
            _ => return Err(format!("argument {i} is not a tensor")),
        }
    }
    let outs = autograd::call(o, op, &args).map_err(|e| format!("forward: {e}"))?;
    let (mut roots, mut seeds) = (Vec::new(), Vec::new());
    for go in case["grad_outputs"].as_array().unwrap() {
        let k = go[0].as_u64().unwrap() as usize;
        let Some(IValue::Tensor(t)) = outs.get(k) else { return Err(format!("output {k} is not a tensor")) };
        roots.push(t.clone());
        seeds.push(ctx.tensor(&json!({ "T": go[1] }))?);
    }
    autograd::backward(o, &roots, Some(&seeds[..]), false).map_err(|e| format!("backward: {e}"))?;
    let (mut max_abs, mut max_rel) = (0f64, 0f64);
    let wants = case["grads"].as_array().unwrap();
    for (k, (leaf, want)) in leaves.iter().zip(wants).enumerate() {
        let want = &ctx.tensors[want.as_str().unwrap()];
        // no gradient reached the input: PyTorch's `None`, written as zeros
        let got = leaf.grad().unwrap_or_else(|| Tensor::zeros(leaf.sizes(), leaf.dtype()));
        let tol = suite::tol_of(&tols["classes"][class][suite::dtype_key(want.dtype())]);
        let (a, r) = suite::compare(&got, want, tol).map_err(|e| format!("gradient of input {k}: {e}"))?;
        max_abs = max_abs.max(a);
        max_rel = max_rel.max(r);
    }
    Ok((max_abs, max_rel, leaves.len() as u64))
}

#[test]
fn engine_gradients_match_pytorch_autograd_in_f32_f16_bf16() {
    let _serial = crate::serial();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    dispatch::reset_counters();
    let dir = suite::goldens();
    let index: Value = serde_json::from_slice(&std::fs::read(dir.join("autograd_index.json")).unwrap()).unwrap();
    let tols: Value = serde_json::from_slice(&std::fs::read(dir.join("tolerances.json")).unwrap()).unwrap();
    let ctx = suite::Ctx {
        rt: Runtime::simulator().unwrap(),
        tensors: io::load_safetensors(dir.join("autograd_cases.safetensors")).unwrap(),
    };
    let excluded: BTreeMap<&str, &str> = EXCLUDED.iter().copied().collect();
    let cases = index["cases"].as_array().unwrap();

    // coverage: every operator in scope has cases in every dtype, or is excluded with a reason
    let have: BTreeSet<(&str, &str)> =
        cases.iter().map(|c| (c["op"].as_str().unwrap(), c["dtype"].as_str().unwrap())).collect();
    let scope = scope::in_scope();
    let mut missing: Vec<String> = Vec::new();
    for op in scope.iter().filter(|op| !excluded.contains_key(*op)) {
        for dt in DTYPES {
            if !have.contains(&(*op, dt)) {
                missing.push(format!("{op} {dt}"));
            }
        }
    }

    let mut stats: BTreeMap<(String, String), Stat> = BTreeMap::new();
    let mut per_dtype: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut skipped = 0;
    for case in cases {
        let op = case["op"].as_str().unwrap();
        let dt = case["dtype"].as_str().unwrap();
        if excluded.contains_key(op) {
            skipped += 1;
            continue;
        }
        let label = format!(
            "case {} {op} {dt} {} ({})",
            case["id"],
            case["layout"].as_str().unwrap(),
            case["class"].as_str().unwrap()
        );
        match run_case(&ctx, &tols, case) {
            Ok((a, r, n)) => {
                let s = stats.entry((op.to_string(), dt.to_string())).or_default();
                s.cases += 1;
                s.grads += n;
                s.max_abs = s.max_abs.max(a);
                s.max_rel = s.max_rel.max(r);
                let d = per_dtype.entry(dt.to_string()).or_default();
                d.0 += 1;
                d.1 += n;
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }

    let mut report = format!(
        "# Autograd goldens report\n\ngoldens: PyTorch {}, {} cases; ran {}, passed {}, failed {}, skipped {skipped} \
         (excluded operators)\n\nin scope: {} operators; excluded: {}; missing goldens: {missing:?}\n\n",
        index["torch"].as_str().unwrap_or("?"),
        cases.len(),
        cases.len() - skipped,
        cases.len() - skipped - failures.len(),
        failures.len(),
        scope.len(),
        EXCLUDED.len(),
    );
    report.push_str("| dtype | cases passed | gradients compared |\n| --- | ---: | ---: |\n");
    for (dt, (c, g)) in &per_dtype {
        report.push_str(&format!("| {dt} | {c} | {g} |\n"));
    }
    report.push_str(
        "\n| operator | dtype | cases | gradients | max abs err | max rel err |\n| --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    for ((op, dt), s) in &stats {
        report.push_str(&format!(
            "| {op} | {dt} | {} | {} | {:.3e} | {:.3e} |\n",
            s.cases, s.grads, s.max_abs, s.max_rel
        ));
    }
    report.push_str("\nTiers of the operators forward and backward ran:\n\n| operator | native | recipe | fallback |\n| --- | ---: | ---: | ---: |\n");
    for (op, c) in dispatch::counters() {
        report.push_str(&format!("| {op} | {} | {} | {} |\n", c.native, c.recipe, c.fallback));
    }
    report.push_str("\nExcluded:\n\n");
    for (op, why) in EXCLUDED {
        report.push_str(&format!("- `{op}`: {why}\n"));
    }
    if !failures.is_empty() {
        report.push_str("\n## Failures\n\n");
        for f in &failures {
            report.push_str(&format!("- {f}\n"));
        }
    }
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("autograd_goldens_report.md");
    std::fs::write(&path, &report).unwrap();
    println!("{report}\nreport written to {}", path.display());

    assert!(missing.is_empty(), "operators in scope without autograd goldens: {missing:?}");
    for dt in DTYPES {
        assert!(per_dtype.get(dt).is_some_and(|d| d.0 > 0), "no {dt} case passed");
    }
    assert!(
        failures.is_empty(),
        "{} of {} autograd golden cases failed; first: {:#?}",
        failures.len(),
        cases.len() - skipped,
        &failures[..failures.len().min(40)]
    );
}
