//! The committed coverage report (`diffs/coverage.json`, written by `xirang-scan coverage --write`)
//! against what the runtime does: every operator of the report is called once through the
//! generated boxed entry point with the adapter's `NpuOps` and arguments made from its schema
//! (small tensors on the simulated device), and the dispatch counters say which tier served it.
//!
//! The fallback policy is `error` during the probe, so no host implementation runs: a call that
//! reaches the CPU-fallback tier either has a host implementation (the policy refuses it) or has
//! none (`no native kernel, no composition recipe and no host reference implementation`).
//!
//! Checked, for every operator:
//! * the report and `generated::ops::OPERATORS` list the same operators;
//! * the direct tier the front-end took (native / recipe / fallback / none) is the report's; a
//!   recipe of the report that is `none` because of an unreachable callee must be a recipe at run
//!   time, and the reachability the report claims (every callee reachable, transitively) must hold
//!   over the tiers observed here;
//! * the operators a recipe called at run time are among the report's callees (transitively);
//! * the autograd rows (`translated` vs a hook) equal `generated::autograd::BACKWARD_COVERAGE`;
//! * the custom operators of the report are those of `generated::custom::CUSTOM_OPERATORS`, each
//!   called once through `generated::custom::call_boxed`: `native` runs the adapter's method,
//!   `none` answers "not implemented" (their backward rows come from the same generator model as
//!   `generated/custom.rs` and are checked by the scanner's tests).
//!
//! Not checked at run time: that a hand-written hook computes the right gradient (the gradcheck
//! tests do that) and that a recipe's callees all run (an earlier callee may stop the call).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use xirang_runtime::dispatch::{self, FallbackMode, Policy, TierCounts};
use xirang_runtime::generated::autograd::BACKWARD_COVERAGE;
use xirang_runtime::generated::custom::{CUSTOM_OPERATORS, call_boxed as call_custom};
use xirang_runtime::generated::ops::{OPERATORS, call_boxed};
use xirang_runtime::ivalue::{Generator, IValue, Layout, MemoryFormat, Opaque};
use xirang_runtime::kernels::NpuOps;
use xirang_runtime::{DType, Device, Runtime, Scalar, Tensor};

const NO_IMPL: &str = "no native kernel, no composition recipe and no host reference implementation";

fn report() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../diffs/coverage.json");
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e} (run `xirang-scan coverage --write`)"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The arguments of a schema `name.overload(args) -> returns`: (type, name), `*` left out.
fn schema_args(schema: &str) -> Vec<(String, String)> {
    let open = schema.find('(').expect("schema has arguments");
    let mut depth = 0i32;
    let mut close = open;
    for (i, c) in schema[open..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    close = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &schema[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "*")
        .map(|p| {
            let decl = p.split('=').next().unwrap_or(p).trim();
            let (ty, name) = decl.rsplit_once(' ').expect("`Type name`");
            // drop alias annotations: `Tensor(a!)` -> `Tensor`, `Tensor(a)[]` -> `Tensor[]`
            let mut t = String::new();
            let mut skip = 0;
            for c in ty.chars() {
                match c {
                    '(' => skip += 1,
                    ')' => skip -= 1,
                    _ if skip == 0 => t.push(c),
                    _ => {}
                }
            }
            (t, name.to_string())
        })
        .collect()
}

/// The optional per-channel statistics arguments of `native_batch_norm` and its backward.
const BN_STATS: [&str; 4] = ["running_mean", "running_var", "save_mean", "save_invstd"];

struct Maker {
    rt: Runtime,
}

impl Maker {
    /// A device tensor for argument `name` of `op`: int64 `[2]` zeros for indices and targets,
    /// a one-element gradient for the loss backward kernels (the probe passes reduction 1, mean),
    /// a 1-d convolution's tensors for the convolutions, float32 `[2]` for the vectors of dot and
    /// mv, else float32 `[2, 2]`.
    fn tensor(&self, op: &str, name: &str) -> Tensor {
        let integer =
            matches!(name, "index" | "indices" | "offsets") || (name == "target" && op.starts_with("nll_loss"));
        let t = if op == "gather" && name == "index" {
            // gather's index has the input's rank
            Tensor::zeros(&[2, 2], DType::I64)
        } else if op.starts_with("bitwise_") {
            // bitwise operators take integers (floats are an error in PyTorch)
            Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).expect("tensor")
        } else if integer {
            Tensor::zeros(&[2], DType::I64)
        } else if matches!(name, "mask" | "condition") {
            Tensor::zeros(&[2, 2], DType::Bool)
        } else if op.starts_with("convolution") && matches!(name, "input" | "weight" | "grad_output") {
            // a 1-d convolution: input [1, 1, 2] and weight [1, 1, 1]; with the probe's stride,
            // padding and dilation of 1 its output (the backward's grad_output) is [1, 1, 4]
            let sizes: &[usize] = match name {
                "input" => &[1, 1, 2],
                "weight" => &[1, 1, 1],
                _ => &[1, 1, 4],
            };
            Tensor::from_vec(vec![1.0f32; sizes.iter().product()], sizes).expect("tensor")
        } else if op.starts_with("native_batch_norm") && BN_STATS.contains(&name) {
            // per-channel statistics of the [2, 2] input (2 channels; variances positive)
            Tensor::from_vec(vec![1.0f32, 2.0], &[2]).expect("tensor")
        } else if matches!((op, name), ("dot" | "dot.out", "self" | "tensor") | ("mv" | "mv.out", "vec")) {
            // dot and mv take vectors (their recipes decline other ranks, as PyTorch refuses them)
            Tensor::from_vec(vec![1.0f32, 2.0], &[2]).expect("tensor")
        } else if (op.starts_with("nll_loss") || op.starts_with("mse_loss")) && name == "grad_output" {
            Tensor::from_vec(vec![1.0f32], &[1]).expect("tensor")
        } else {
            Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).expect("tensor")
        };
        t.to_device(&self.rt, Device::Npu(0)).expect("device tensor")
    }

    /// A value of schema type `ty` for argument `name` of `op`.
    fn value(&self, op: &str, ty: &str, name: &str) -> IValue {
        if ty.ends_with('?') {
            // batch norm's statistics: evaluation (the probe's `false`) needs the running ones
            if op.starts_with("native_batch_norm") && BN_STATS.contains(&name) {
                return IValue::Tensor(self.tensor(op, name));
            }
            return IValue::None;
        }
        if let Some(open) = ty.find('[') {
            let elem = &ty[..open];
            let n: usize = ty[open + 1..ty.len() - 1].parse().unwrap_or(1);
            return match elem {
                "Tensor" => IValue::TensorList(vec![self.tensor(op, name), self.tensor(op, name)]),
                "Tensor?" => IValue::OptTensorList(vec![Some(self.tensor(op, "indices"))]),
                "int" | "SymInt" => IValue::IntList(vec![1]),
                "float" => IValue::FloatList(vec![1.0]),
                "bool" => IValue::BoolList(vec![true; n]),
                "Scalar" => IValue::ScalarList(vec![Scalar::Int(1)]),
                "str" | "Dimname" => IValue::StrList(Vec::new()),
                other => IValue::Opaque(Opaque { kind: format!("{other}[]"), value: "probe".into() }),
            };
        }
        match ty {
            "Tensor" => IValue::Tensor(self.tensor(op, name)),
            "int" | "SymInt" | "DeviceIndex" => IValue::Int(if name == "ignore_index" { -100 } else { 1 }),
            "float" => IValue::Float(0.5),
            "bool" | "SymBool" => IValue::Bool(false),
            "Scalar" => IValue::Scalar(Scalar::Int(1)),
            "str" => IValue::Str("none".into()),
            "Dimname" => IValue::Str("N".into()),
            "ScalarType" => IValue::DType(DType::F32),
            "Layout" => IValue::Layout(Layout::Strided),
            "MemoryFormat" => IValue::MemoryFormat(MemoryFormat::Contiguous),
            "Device" => IValue::Device(Device::Npu(0)),
            "Generator" => IValue::Generator(Generator::new(0)),
            other => IValue::Opaque(Opaque { kind: other.into(), value: "probe".into() }),
        }
    }
}

/// The tier the runtime took for one call, from the counter delta and the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    Native,
    Recipe,
    Fallback,
    None,
}

impl Seen {
    fn name(self) -> &'static str {
        match self {
            Seen::Native => "native",
            Seen::Recipe => "recipe",
            Seen::Fallback => "fallback",
            Seen::None => "none",
        }
    }
}

fn delta(before: &BTreeMap<&'static str, TierCounts>, after: &BTreeMap<&'static str, TierCounts>) -> BTreeSet<String> {
    after
        .iter()
        .filter(|(k, v)| before.get(*k).copied().unwrap_or_default() != **v)
        .map(|(k, _)| k.to_string())
        .collect()
}

#[test]
fn committed_coverage_report_matches_the_runtime() {
    let _serial = crate::serial();
    let report = report();
    let ops = report["operators"].as_array().expect("operators");
    let listed: Vec<&str> = ops.iter().map(|o| o["op"].as_str().expect("op")).collect();
    assert_eq!(listed, OPERATORS.to_vec(), "the report lists other operators than generated/ops.rs: regenerate it");

    dispatch::set_policy(Policy {
        mode: FallbackMode::Error,
        alert_threshold: u64::MAX,
        force_fallback: BTreeSet::new(),
    });
    let maker = Maker { rt: Runtime::simulator().expect("simulator") };
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut called: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for o in ops {
        let op = o["op"].as_str().unwrap();
        let schema = o["schema"].as_str().unwrap();
        let args: Vec<IValue> = schema_args(schema).iter().map(|(t, n)| maker.value(op, t, n)).collect();
        let before = dispatch::counters();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call_boxed(&NpuOps, op, &args)));
        let Ok(r) = r else {
            problems.push(format!("{op}: panicked"));
            continue;
        };
        let after = dispatch::counters();
        let c0 = before.get(op).copied().unwrap_or_default();
        let c1 = after.get(op).copied().unwrap_or_default();
        let err = r.err().map(|e| e.to_string()).unwrap_or_default();
        let s = if c1.native > c0.native {
            Seen::Native
        } else if c1.recipe > c0.recipe {
            Seen::Recipe
        } else if c1.fallback > c0.fallback {
            if err.contains(&format!("{op}: {NO_IMPL}")) { Seen::None } else { Seen::Fallback }
        } else {
            problems.push(format!("{op}: not probed (the call did not reach the front-end: {err})"));
            continue;
        };
        if (c1.total() - c0.total()) != 1 {
            problems.push(format!("{op}: counted {} times for one call", c1.total() - c0.total()));
        }
        let mut d = delta(&before, &after);
        d.remove(op);
        called.insert(op.to_string(), d);
        seen.insert(op.to_string(), s);
    }

    // effective reachability over the observed tiers, with the report's callees (fixed point)
    let callees: BTreeMap<&str, Vec<&str>> = ops
        .iter()
        .map(|o| {
            let cs = o["callees"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            (o["op"].as_str().unwrap(), cs)
        })
        .collect();
    let mut reachable: BTreeSet<&str> =
        seen.iter().filter(|(_, s)| matches!(s, Seen::Native | Seen::Fallback)).map(|(k, _)| k.as_str()).collect();
    loop {
        let n = reachable.len();
        for (op, s) in &seen {
            if *s == Seen::Recipe && callees[op.as_str()].iter().all(|c| reachable.contains(c)) {
                reachable.insert(op.as_str());
            }
        }
        if reachable.len() == n {
            break;
        }
    }
    let closure = |op: &str| -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        let mut todo: Vec<&str> = callees.get(op).cloned().unwrap_or_default();
        while let Some(c) = todo.pop() {
            if out.insert(c) {
                todo.extend(callees.get(c).cloned().unwrap_or_default());
            }
        }
        out
    };

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in ops {
        let op = o["op"].as_str().unwrap();
        let tier = o["tier"].as_str().unwrap();
        let Some(&s) = seen.get(op) else { continue };
        let has_recipe = o.get("recipe").is_some_and(|r| !r.is_null());
        let effective = match s {
            Seen::Recipe if !reachable.contains(op) => "none",
            s => s.name(),
        };
        *counts.entry(effective).or_default() += 1;
        if tier != effective {
            problems
                .push(format!("{op}: the report says {tier}, the runtime dispatches to {} ({effective})", s.name()));
        }
        if has_recipe && s != Seen::Recipe {
            problems.push(format!("{op}: the report names a recipe, the runtime took the {} tier", s.name()));
        }
        if s == Seen::Recipe {
            let allowed = closure(op);
            let extra: Vec<&String> = called[op].iter().filter(|c| !allowed.contains(c.as_str())).collect();
            if !extra.is_empty() {
                problems.push(format!("{op}: the recipe called {extra:?}, not among the report's callees"));
            }
        }
    }

    // autograd rows
    let mut ag_report: BTreeSet<(String, String, &str)> = BTreeSet::new();
    for o in ops {
        for i in o["inputs"].as_array().into_iter().flatten() {
            let kind = match i["status"].as_str().unwrap() {
                "translated" => "translated",
                "hand_written" | "missing_hook" => "hook",
                "not_implemented_upstream" => "not_implemented",
                _ => continue,
            };
            ag_report.insert((o["op"].as_str().unwrap().to_string(), i["input"].as_str().unwrap().to_string(), kind));
        }
    }
    let ag_runtime: BTreeSet<(String, String, &str)> =
        BACKWARD_COVERAGE.iter().map(|(o, i, k)| (o.to_string(), i.to_string(), *k)).collect();
    for x in ag_report.symmetric_difference(&ag_runtime) {
        let side = if ag_report.contains(x) { "only in the report" } else { "only in BACKWARD_COVERAGE" };
        problems.push(format!("autograd {}::{} {}: {side}", x.0, x.1, x.2));
    }

    // custom operators: the report's rows are those of generated/custom.rs; `native` means the
    // adapter's `CustomOps` method runs (whatever it returns), `none` that the call answers "not
    // implemented" (the trait's default body or the new-op skeleton)
    let custom = report["custom_operators"].as_array().expect("custom_operators");
    let listed: Vec<&str> = custom.iter().map(|o| o["op"].as_str().expect("op")).collect();
    let generated: Vec<&str> = CUSTOM_OPERATORS.iter().map(|(q, _)| *q).collect();
    if listed != generated {
        problems.push(format!("custom operators: the report lists {listed:?}, generated/custom.rs {generated:?}"));
    }
    let implemented = custom.iter().filter(|o| o["tier"] == "native").count();
    if report["custom"]["operators"] != custom.len() || report["custom"]["implemented"] != implemented {
        problems.push(format!("custom totals {} do not count the rows", report["custom"]));
    }
    for o in custom {
        let op = o["op"].as_str().unwrap();
        let args: Vec<IValue> =
            schema_args(o["schema"].as_str().unwrap()).iter().map(|(t, n)| maker.value(op, t, n)).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call_custom(&NpuOps, op, &args)));
        let Ok(r) = r else {
            problems.push(format!("{op}: panicked"));
            continue;
        };
        let err = r.err().map(|e| e.to_string()).unwrap_or_default();
        let seen = if err.contains("not implemented") { "none" } else { "native" };
        if o["tier"] != seen {
            problems.push(format!("{op}: the report says {}, the runtime runs it as {seen} ({err})", o["tier"]));
        }
    }

    eprintln!("observed tiers: {counts:?}; report totals: {}", report["tiers"]);
    assert!(problems.is_empty(), "{} mismatches:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn schema_arguments_parse() {
    let _serial = crate::serial();
    let a = schema_args("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)");
    let names: Vec<(&str, &str)> = a.iter().map(|(t, n)| (t.as_str(), n.as_str())).collect();
    assert_eq!(names, [("Tensor", "self"), ("Tensor", "other"), ("Scalar", "alpha"), ("Tensor", "out")]);
    let a =
        schema_args("max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], bool ceil_mode=False) -> Tensor");
    assert_eq!(a[1], ("int[2]".to_string(), "kernel_size".to_string()));
    assert_eq!(a[2], ("int[2]".to_string(), "stride".to_string()));
}
