//! The precision suite's runner, shared by `tests/runtime/precision.rs` (native
//! kernels where the device has them, fallback otherwise) and
//! `tests/serial/precision_fallback.rs` (every operator forced onto the CPU
//! fallback). Every golden case produced by real PyTorch
//! (`goldens/make_goldens.py`) runs through the runtime on the simulated
//! device and is checked against the tolerance standards in
//! `goldens/tolerances.json`. No torch needed.
//!
//! The report (max abs / rel error per operator and dtype, case counts,
//! per-tier counts) is printed (`--nocapture`) and written to
//! `$CARGO_TARGET_TMPDIR/<name>.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use xirang_runtime::dispatch::{self, Policy, Tier};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::{DType, Device, Runtime, Scalar, Tensor, boxed, io};

/// Golden operators that are not on the adapter's operator surface for the PyTorch version it is
/// generated for: `silu_backward` is CompositeImplicitAutograd in v2.15 (PyTorch decomposes it
/// before a backend sees it, so the generator selects no method for it and it has no host
/// implementation). Their cases are counted as skipped; any other missing operator fails.
const OFF_SURFACE: &[&str] = &["silu_backward"];

pub fn goldens() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("goldens")
}

#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub atol: f64,
    pub rtol: f64,
    pub ulp: f64,
}

pub fn tol_of(v: &Value) -> Tol {
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("tolerance field {k} in {v}"));
    Tol { atol: f("atol"), rtol: f("rtol"), ulp: f("ulp") }
}

pub fn dtype_key(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "int",
    }
}

/// The spacing of `dtype` values around `x` (one unit in the last place).
fn ulp_size(x: f64, d: DType) -> f64 {
    let (mant, min_exp) = match d {
        DType::F64 => (52, -1022),
        DType::F32 => (23, -126),
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        _ => return 1.0,
    };
    let e = if x == 0.0 || !x.is_finite() { min_exp } else { (x.abs().log2().floor() as i32).max(min_exp) };
    2f64.powi(e - mant)
}

#[derive(Default)]
struct Stat {
    cases: u64,
    max_abs: f64,
    max_rel: f64,
    tiers: BTreeMap<&'static str, u64>,
}

fn dtype_name(s: &str) -> DType {
    DType::from_name(match s {
        "f32" => "float32",
        "f64" => "float64",
        "f16" => "float16",
        "bf16" => "bfloat16",
        "i64" => "int64",
        "i32" => "int32",
        "bool" => "bool",
        other => panic!("dtype {other}"),
    })
    .unwrap_or_else(|| panic!("dtype {s}"))
}

fn scalar(v: &Value) -> Scalar {
    if let Some(i) = v.get("i") {
        Scalar::Int(i.as_i64().unwrap())
    } else if let Some(f) = v.get("f") {
        Scalar::Float(f.as_f64().unwrap())
    } else {
        Scalar::Bool(v["b"].as_bool().unwrap())
    }
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

pub struct Ctx {
    pub rt: Runtime,
    pub tensors: BTreeMap<String, Tensor>,
}

impl Ctx {
    pub fn tensor(&self, v: &Value) -> Result<Tensor, String> {
        let name = v["T"].as_str().unwrap();
        let host = self.tensors.get(name).ok_or_else(|| format!("missing golden tensor {name}"))?;
        let mut t = host.to_device(&self.rt, Device::Npu(0)).map_err(|e| e.to_string())?;
        if let Some(p) = v.get("perm") {
            t = t.permute(&ints(p)).map_err(|e| e.to_string())?;
        }
        if let Some(s) = v.get("expand") {
            t = t.expand(&ints(s)).map_err(|e| e.to_string())?;
        }
        Ok(t)
    }

    pub fn arg(&self, v: &Value) -> Result<IValue, String> {
        if v.is_null() {
            return Ok(IValue::None);
        }
        let o = v.as_object().ok_or("argument is not an object")?;
        Ok(if o.contains_key("T") {
            IValue::Tensor(self.tensor(v)?)
        } else if let Some(l) = o.get("TL") {
            IValue::TensorList(l.as_array().unwrap().iter().map(|x| self.tensor(x)).collect::<Result<_, _>>()?)
        } else if let Some(l) = o.get("OTL") {
            IValue::OptTensorList(
                l.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| if x.is_null() { Ok(None) } else { self.tensor(x).map(Some) })
                    .collect::<Result<_, _>>()?,
            )
        } else if let Some(i) = o.get("i") {
            IValue::Int(i.as_i64().unwrap())
        } else if let Some(f) = o.get("f") {
            IValue::Float(f.as_f64().unwrap())
        } else if let Some(b) = o.get("b") {
            IValue::Bool(b.as_bool().unwrap())
        } else if let Some(l) = o.get("il") {
            IValue::IntList(ints(l))
        } else if let Some(l) = o.get("fl") {
            IValue::FloatList(l.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
        } else if let Some(l) = o.get("bl") {
            IValue::BoolList(l.as_array().unwrap().iter().map(|x| x.as_bool().unwrap()).collect())
        } else if let Some(s) = o.get("s") {
            IValue::Scalar(scalar(s))
        } else if let Some(s) = o.get("str") {
            IValue::Str(s.as_str().unwrap().to_string())
        } else if let Some(d) = o.get("dtype") {
            IValue::DType(dtype_name(d.as_str().unwrap()))
        } else {
            return Err(format!("unknown argument encoding {v}"));
        })
    }
}

/// Compares `got` with `want`: (max abs, max rel, first failure).
pub fn compare(got: &Tensor, want: &Tensor, tol: Tol) -> Result<(f64, f64), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} != expected {}", got.dtype(), want.dtype()));
    }
    if got.sizes() != want.sizes() {
        return Err(format!("shape {:?} != expected {:?}", got.sizes(), want.sizes()));
    }
    let g = got.to_cpu().and_then(|t| t.to_f64_vec()).map_err(|e| e.to_string())?;
    let w = want.to_f64_vec().map_err(|e| e.to_string())?;
    let (mut max_abs, mut max_rel) = (0f64, 0f64);
    for (i, (a, e)) in g.iter().zip(&w).enumerate() {
        if e.is_nan() || a.is_nan() {
            if e.is_nan() && a.is_nan() {
                continue;
            }
            return Err(format!("element {i}: {a} != expected {e}"));
        }
        if e.is_infinite() || a.is_infinite() {
            if a == e {
                continue;
            }
            return Err(format!("element {i}: {a} != expected {e}"));
        }
        let d = (a - e).abs();
        let rel = if *e != 0.0 {
            d / e.abs()
        } else if d == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        max_abs = max_abs.max(d);
        max_rel = max_rel.max(rel);
        let ok = d <= tol.atol + tol.rtol * e.abs() || d <= tol.ulp * ulp_size(*e, want.dtype());
        if !ok {
            return Err(format!(
                "element {i}: {a} vs expected {e} (abs {d:.3e}, rel {rel:.3e}, {:.1} ulp; tolerance {tol:?})",
                d / ulp_size(*e, want.dtype())
            ));
        }
    }
    Ok((max_abs, max_rel))
}

/// Runs every golden case under `policy`; writes `<name>.md` next to the
/// other test outputs; panics on any failure. Returns the tier counts.
pub fn run(name: &str, policy: Policy) -> BTreeMap<&'static str, u64> {
    let dir = goldens();
    let index: Value = serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let tols: Value = serde_json::from_slice(&std::fs::read(dir.join("tolerances.json")).unwrap()).unwrap();
    let ctx = Ctx {
        rt: Runtime::simulator().unwrap(),
        tensors: io::load_safetensors(dir.join("cases.safetensors")).unwrap(),
    };
    dispatch::set_policy(policy);
    let integer = tol_of(&tols["integer"]);

    let mut stats: BTreeMap<(String, String), Stat> = BTreeMap::new();
    let mut tiers: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let cases = index["cases"].as_array().unwrap();
    for case in cases {
        let op = case["op"].as_str().unwrap();
        if xirang_runtime::generated::ops::operator_index(op).is_none() {
            *skipped.entry(op.to_string()).or_default() += 1;
            continue;
        }
        let class = case["class"].as_str().unwrap();
        let id = case["id"].as_i64().unwrap();
        let label = format!(
            "case {id} {op} {} {} ({class})",
            case["dtype"].as_str().unwrap(),
            case["layout"].as_str().unwrap()
        );
        let args = match case["args"].as_array().unwrap().iter().map(|a| ctx.arg(a)).collect::<Result<Vec<_>, _>>() {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{label}: arguments: {e}"));
                continue;
            }
        };
        let (results, tier) = match boxed::call_with_tier(op, args) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{label}: {e}"));
                continue;
            }
        };
        let tier_name = match tier {
            Tier::Native => "native",
            Tier::Recipe => "recipe",
            Tier::Fallback => "fallback",
        };
        *tiers.entry(tier_name).or_default() += 1;
        let outs: Vec<&str> = case["outs"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        let got: Vec<&Tensor> = results
            .iter()
            .filter_map(|r| match r {
                IValue::Tensor(t) => Some(t),
                _ => None,
            })
            .collect();
        if got.len() < outs.len() {
            failures.push(format!("{label}: {} tensor results, expected {}", got.len(), outs.len()));
            continue;
        }
        let mut case_ok = true;
        for (k, (g, o)) in got.iter().zip(&outs).enumerate() {
            let want = &ctx.tensors[*o];
            let tol = if want.dtype().is_floating() {
                tol_of(&tols["classes"][class][dtype_key(want.dtype())])
            } else {
                integer
            };
            match compare(g, want, tol) {
                Ok((a, r)) => {
                    let s = stats.entry((op.to_string(), case["dtype"].as_str().unwrap().to_string())).or_default();
                    s.max_abs = s.max_abs.max(a);
                    s.max_rel = s.max_rel.max(r);
                }
                Err(e) => {
                    failures.push(format!("{label}: output {k}: {e}"));
                    case_ok = false;
                    break;
                }
            }
        }
        if case_ok {
            let s = stats.entry((op.to_string(), case["dtype"].as_str().unwrap().to_string())).or_default();
            s.cases += 1;
            *s.tiers.entry(tier_name).or_default() += 1;
        }
    }

    let mut report = String::new();
    report.push_str(&format!(
        "# Precision report\n\ngoldens: PyTorch {}, {} cases; passed {}, failed {}, skipped {} (not operators of \
         the adapter's surface: {:?})\n\ntiers: {:?}\n\n",
        index["torch"].as_str().unwrap_or("?"),
        cases.len(),
        cases.len() - failures.len() - skipped.values().sum::<usize>(),
        failures.len(),
        skipped.values().sum::<usize>(),
        skipped,
        tiers
    ));
    report.push_str(
        "| operator | dtype | cases | max abs err | max rel err | tiers |\n| --- | --- | ---: | ---: | ---: | --- |\n",
    );
    for ((op, dt), s) in &stats {
        if s.cases == 0 {
            continue;
        }
        let t: Vec<String> = s.tiers.iter().map(|(k, v)| format!("{k} {v}")).collect();
        report.push_str(&format!(
            "| {op} | {dt} | {} | {:.3e} | {:.3e} | {} |\n",
            s.cases,
            s.max_abs,
            s.max_rel,
            t.join(", ")
        ));
    }
    if !failures.is_empty() {
        report.push_str("\n## Failures\n\n");
        for f in &failures {
            report.push_str(&format!("- {f}\n"));
        }
    }
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.md"));
    std::fs::write(&path, &report).unwrap();
    println!("{report}\nreport written to {}", path.display());
    assert!(cases.len() >= 1000, "the suite should have thousands of cases");
    assert_eq!(
        skipped.keys().map(String::as_str).collect::<Vec<_>>(),
        OFF_SURFACE,
        "golden operators missing from the adapter's surface (generated::ops::OPERATORS)"
    );
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed; first: {:#?}",
        failures.len(),
        cases.len(),
        &failures[..failures.len().min(40)]
    );
    tiers
}
