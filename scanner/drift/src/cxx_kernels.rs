//! C++ kernels of a C++ adapter (op-plugin's `op_api::add`, torch_xla's `XLANativeFunctions::add`)
//! matched to their operators by name and C++ signature, with torchgen's rules for the native
//! (unpacked, dispatcher-order) signature: `Tensor` is `const at::Tensor&`, a written `Tensor(a!)` is
//! `at::Tensor&`, `int[]` is `at::IntArrayRef`, `SymInt` is `c10::SymInt` in a `_symint` kernel and
//! `int64_t` otherwise, `str` is `c10::string_view`, ... A kernel is matched when exactly one overload
//! of its name has its parameter types (out arguments last, as torchgen's native signature, or first,
//! as the ATen API).
//!
//! Matched kernels join the drift report's kernel index, so a PyTorch upgrade names the C++ file and
//! line to change; an `arg.*` / `out.*` change lands on a C++ kernel only when that kernel's C++
//! signature really changes (`int` -> `SymInt` does not change a non-`_symint` kernel).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::registry::cpp_name;
use crate::schema::{Argument, BaseTy, FunctionSchema, Type};

/// The C++ type torchgen gives an argument in a native signature.
pub fn cpp_type(a: &Argument, symint: bool) -> String {
    ty(&a.ty, a.is_write(), symint)
}

fn value(b: BaseTy, symint: bool) -> &'static str {
    match b {
        BaseTy::Tensor => "Tensor",
        BaseTy::Int => "int64_t",
        BaseTy::SymInt => {
            if symint {
                "SymInt"
            } else {
                "int64_t"
            }
        }
        BaseTy::SymBool => {
            if symint {
                "SymBool"
            } else {
                "bool"
            }
        }
        BaseTy::Float => "double",
        BaseTy::Bool => "bool",
        BaseTy::Str => "string_view",
        BaseTy::Scalar => "Scalar",
        BaseTy::ScalarType => "ScalarType",
        BaseTy::Layout => "Layout",
        BaseTy::Device => "Device",
        BaseTy::DeviceIndex => "DeviceIndex",
        BaseTy::MemoryFormat => "MemoryFormat",
        BaseTy::QScheme => "QScheme",
        BaseTy::Dimname => "Dimname",
        BaseTy::Generator => "Generator",
        BaseTy::Storage => "Storage",
        BaseTy::Stream => "Stream",
        BaseTy::DimVector => "DimVector",
        BaseTy::ConstQuantizerPtr => "ConstQuantizerPtr",
        BaseTy::GraphModule => "PyObject*",
    }
}

fn ty(t: &Type, mutable: bool, symint: bool) -> String {
    match t {
        Type::Base(BaseTy::Tensor) => {
            if mutable {
                "Tensor&".into()
            } else {
                "const Tensor&".into()
            }
        }
        Type::Base(BaseTy::Scalar) => "const Scalar&".into(),
        Type::Base(b) => value(*b, symint).into(),
        Type::Optional(inner) => match inner.as_ref() {
            Type::Base(BaseTy::Tensor) => "const std::optional<Tensor>&".into(),
            Type::Base(BaseTy::Scalar) => "const std::optional<Scalar>&".into(),
            Type::Base(b) => format!("std::optional<{}>", value(*b, symint)),
            Type::List { elem, .. } => match elem.as_ref() {
                Type::Base(BaseTy::Int) => "OptionalIntArrayRef".into(),
                Type::Base(BaseTy::SymInt) => {
                    if symint {
                        "OptionalSymIntArrayRef".into()
                    } else {
                        "OptionalIntArrayRef".into()
                    }
                }
                Type::Base(BaseTy::Float) => "std::optional<ArrayRef<double>>".into(),
                Type::Base(BaseTy::Dimname) => "std::optional<DimnameList>".into(),
                Type::Base(BaseTy::Tensor) => "std::optional<TensorList>".into(),
                other => format!("std::optional<{}>", ty(other, false, symint)),
            },
            other => format!("std::optional<{}>", ty(other, false, symint)),
        },
        Type::List { elem, size } => match elem.as_ref() {
            Type::Base(BaseTy::Tensor) => "TensorList".into(),
            Type::Optional(e) if matches!(e.as_ref(), Type::Base(BaseTy::Tensor)) => {
                "const List<std::optional<Tensor>>&".into()
            }
            Type::Base(BaseTy::Int) => "IntArrayRef".into(),
            Type::Base(BaseTy::SymInt) => {
                if symint {
                    "SymIntArrayRef".into()
                } else {
                    "IntArrayRef".into()
                }
            }
            Type::Base(BaseTy::Bool) => match size {
                Some(n) => format!("std::array<bool,{n}>"),
                None => "ArrayRef<bool>".into(),
            },
            Type::Base(BaseTy::Float) => "ArrayRef<double>".into(),
            Type::Base(BaseTy::Dimname) => "DimnameList".into(),
            Type::Base(BaseTy::Scalar) => "ArrayRef<Scalar>".into(),
            Type::Base(b) => format!("ArrayRef<{}>", value(*b, symint)),
            other => format!("ArrayRef<{}>", ty(other, false, symint)),
        },
        Type::CustomClass(c) => format!("intrusive_ptr<{}>", c.rsplit('.').next().unwrap_or(c)),
    }
}

/// A C++ parameter type in the form both sides are compared in: namespaces and `c10::optional` folded
/// (`xirang_cxx::text::canonical_type`), `std::string_view` = `c10::string_view`, a tensor list
/// spelled `ITensorListRef` = `TensorList`, `const` dropped from by-value types, no spaces.
pub fn canon(t: &str) -> String {
    let mut s = xirang_cxx::text::norm(t);
    // east const: `at::Tensor const&` is `const at::Tensor&`
    if let Some(p) = s.strip_suffix("const&") {
        s = format!("const {}&", p.trim_end());
    }
    s = xirang_cxx::text::canonical_type(&s);
    // `at::optional` (an alias) and a bare `optional` after the namespaces were folded
    s = s.replace("std::optional<", "\u{1}").replace("optional<", "\u{1}").replace('\u{1}', "std::optional<");
    s = s
        .replace("std::string_view", "string_view")
        .replace("IListRef<Tensor>", "ITensorListRef")
        .replace("OptionalArrayRef<SymInt>", "OptionalSymIntArrayRef")
        .replace("OptionalArrayRef<int64_t>", "OptionalIntArrayRef")
        .replace("std::optional<IntArrayRef>", "OptionalIntArrayRef")
        .replace("std::optional<SymIntArrayRef>", "OptionalSymIntArrayRef");
    // `std::array<bool, N>`: N is often a template parameter in a kernel (`DIM`)
    while let Some(p) = s.find("std::array<bool,") {
        let Some(q) = s[p..].find('>') else { break };
        s.replace_range(p..p + q + 1, "std::array<bool>");
    }
    if s == "const ITensorListRef&" || s == "ITensorListRef" || s == "const TensorList&" || s == "const TensorList" {
        s = "TensorList".into();
    }
    if let Some(rest) = s.strip_prefix("const ")
        && !s.ends_with('&')
        && !s.ends_with('*')
    {
        s = rest.to_string();
    }
    s.replace(' ', "")
}

/// Whether a kernel's parameter types are `want` (canonical); a mutable tensor may be taken by
/// `const Tensor&` (torchgen's `use_const_ref_for_mutable_tensors`). Matching is lenient so that
/// a kernel is found whichever way it takes its tensors.
fn same(want: &[String], have: &[String]) -> bool {
    same_as(want, have, true)
}

/// [`same`], with the `const Tensor&`-for-`Tensor&` leniency only when `const_ref_ok`.
fn same_as(want: &[String], have: &[String], const_ref_ok: bool) -> bool {
    want.len() == have.len()
        && want.iter().zip(have).all(|(w, h)| w == h || (const_ref_ok && w == "Tensor&" && h == "constTensor&"))
}

/// The native-signature parameter types of `f`, canonical: schema order (out arguments last).
pub fn params(f: &FunctionSchema, symint: bool) -> Vec<String> {
    f.arguments.all().map(|a| canon(&cpp_type(a, symint))).collect()
}

/// The same with the out arguments first (the ATen API's `add_out(out, self, ...)`).
fn params_out_first(f: &FunctionSchema, symint: bool) -> Vec<String> {
    f.arguments
        .out
        .iter()
        .chain(f.arguments.positional.iter())
        .chain(f.arguments.kwarg_only.iter())
        .map(|a| canon(&cpp_type(a, symint)))
        .collect()
}

/// The C++ declaration torchgen writes for `f` (for reports): `add_out(const at::Tensor&, ..., at::Tensor&)`.
pub fn signature(f: &FunctionSchema, symint: bool) -> String {
    let name = if symint { format!("{}_symint", cpp_name(f)) } else { cpp_name(f) };
    let ps: Vec<String> = f.arguments.all().map(|a| format!("{} {}", cpp_type(a, symint), a.name)).collect();
    format!("{name}({})", ps.join(", "))
}

/// One kernel matched to its operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// Index into the kernels given.
    pub kernel: usize,
    /// `add.Tensor`.
    pub op: String,
    /// A `_symint` kernel (SymInt kept as `c10::SymInt`).
    pub symint: bool,
}

/// What matching found.
#[derive(Debug, Clone, Default)]
pub struct Matching {
    pub matched: Vec<Matched>,
    /// Kernels no overload matched, with why.
    pub unmatched: Vec<(usize, String)>,
}

/// The operator base names a kernel name may implement (`add_out` -> `add`, `add_` -> `add_`,
/// `foo_symint` -> `foo`): what to load from a snapshot before matching.
pub fn candidate_names(kernel: &str) -> Vec<String> {
    let k = kernel.strip_suffix("_symint").unwrap_or(kernel);
    let mut v = vec![k.to_string()];
    if let Some(b) = k.strip_suffix("_out") {
        v.push(b.to_string());
        v.push(format!("{b}_"));
    }
    if let Some(b) = k.strip_suffix("_functional") {
        v.push(b.to_string());
    }
    v
}

/// Matches kernels to operators (`ops`: every operator the kernels may implement, from one or more
/// PyTorch versions and the adapter's own schema files; duplicates are fine).
pub fn match_kernels(kernels: &[xirang_cxx::index::Kernel], ops: &[FunctionSchema]) -> Matching {
    let mut by_cpp: BTreeMap<String, Vec<&FunctionSchema>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for f in ops {
        if seen.insert(f.to_string()) {
            by_cpp.entry(cpp_name(f)).or_default().push(f);
        }
    }
    let mut out = Matching::default();
    for (i, k) in kernels.iter().enumerate() {
        let symint = k.name.ends_with("_symint");
        let base = k.name.strip_suffix("_symint").unwrap_or(&k.name);
        let Some(cands) = by_cpp.get(base) else {
            out.unmatched.push((i, format!("no operator whose C++ name is `{base}`")));
            continue;
        };
        let have: Vec<String> = k.params.iter().map(|p| canon(&p.ty)).collect();
        let mut hits: Vec<(&FunctionSchema, bool)> = Vec::new();
        for f in cands {
            // a kernel without the suffix may still take SymInt (torchgen's symint backends)
            for s in if symint { vec![true] } else { vec![false, true] } {
                if same(&params(f, s), &have) || (!f.arguments.out.is_empty() && same(&params_out_first(f, s), &have)) {
                    hits.push((f, s));
                    break;
                }
            }
        }
        let mut names: Vec<String> = hits.iter().map(|(f, _)| f.name.to_string()).collect();
        names.dedup();
        match names.len() {
            0 => out.unmatched.push((
                i,
                format!(
                    "{} overload(s) of `{base}`, none with parameters ({})",
                    cands.len(),
                    k.params.iter().map(|p| p.ty.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )),
            _ => out.matched.push(Matched { kernel: i, op: names[0].clone(), symint: hits[0].1 }),
        }
    }
    out
}

/// The operator schemas an adapter declares itself: every `func:` entry of the yaml files under
/// `dir` (op-plugin's `op_plugin_functions.yaml`, a backend's custom operators). Entries that do not
/// parse are skipped.
pub fn adapter_schemas(dir: &Path) -> Vec<FunctionSchema> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut visited = 0;
    while let Some(d) = stack.pop() {
        visited += 1;
        if visited > 10_000 {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "build" {
                    stack.push(p);
                }
            } else if ft.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) {
                let Ok(text) = crate::fsio::read_text(&p, crate::fsio::MAX_INPUT_BYTES) else { continue };
                for l in text.lines() {
                    let t = l.trim_start().trim_start_matches("- ").trim_start();
                    if let Some(s) = t.strip_prefix("func:")
                        && let Ok(f) = FunctionSchema::parse(s.trim())
                    {
                        out.push(f);
                    }
                }
            }
        }
    }
    out
}

/// Whether a matched C++ kernel still has the C++ signature of `new` (the operator after the
/// upgrade): then an argument change upstream does not touch it. The comparison is exact: an
/// alias annotation that makes a `Tensor` argument mutable (`Tensor(a!)`) changes the kernel's
/// `const at::Tensor&` into `at::Tensor&`, unless the operator keeps const references for its
/// mutable tensors (`use_const_ref_for_mutable_tensors: True`, `const_ref_ok`).
pub fn still_matches(k: &xirang_cxx::index::Kernel, new: &FunctionSchema, symint: bool, const_ref_ok: bool) -> bool {
    let have: Vec<String> = k.params.iter().map(|p| canon(&p.ty)).collect();
    same_as(&params(new, symint), &have, const_ref_ok)
        || (!new.arguments.out.is_empty() && same_as(&params_out_first(new, symint), &have, const_ref_ok))
}

/// Whether a `#if` condition holds for PyTorch `major.minor`, as far as op-plugin's version gates
/// tell: every `VERSION_BETWEEN(V<a>R<b>, V<c>R<d> | VERSION_NEWEST)` term (negated with `!`) of a
/// `&&` chain is evaluated; a condition with anything else is taken to hold (compiled).
pub fn gate_holds(cond: &str, major: u64, minor: u64) -> bool {
    let c: String = cond.chars().filter(|c| !c.is_whitespace()).collect();
    if c.contains("||") {
        return true;
    }
    let ver = |t: &str| -> Option<(u64, u64)> {
        if t == "VERSION_NEWEST" {
            return Some((u64::MAX, u64::MAX));
        }
        let (a, b) = t.strip_prefix('V')?.split_once('R')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    for term in c.split("&&") {
        let (neg, t) = match term.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, term),
        };
        let t = t.trim_start_matches('(').trim_end_matches(')');
        let Some(args) = t.strip_prefix("VERSION_BETWEEN(").or_else(|| t.strip_prefix("VERSION_BETWEEN")) else {
            continue;
        };
        let args = args.trim_start_matches('(');
        let Some((lo, hi)) = args.split_once(',') else { continue };
        let (Some(lo), Some(hi)) = (ver(lo.trim()), ver(hi.trim().trim_end_matches(')'))) else { continue };
        let inside = (major, minor) >= lo && (major, minor) <= hi;
        if inside == neg {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> FunctionSchema {
        FunctionSchema::parse(s).expect("schema")
    }

    #[test]
    fn version_gates() {
        assert!(!gate_holds("!VERSION_BETWEEN(V2R13,VERSION_NEWEST)", 2, 13));
        assert!(gate_holds("!VERSION_BETWEEN(V2R13,VERSION_NEWEST)", 2, 12));
        assert!(gate_holds("VERSION_BETWEEN(V2R1, V2R3)", 2, 3));
        assert!(!gate_holds("VERSION_BETWEEN(V2R1, V2R3)", 2, 4));
        assert!(gate_holds("defined(FOO) && VERSION_BETWEEN(V2R1,VERSION_NEWEST)", 2, 15));
        assert!(gate_holds("A || VERSION_BETWEEN(V2R1,V2R2)", 2, 9));
    }

    #[test]
    fn torchgen_types() {
        let add = f("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)");
        assert_eq!(
            signature(&add, false),
            "add_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out)"
        );
        let e = f(
            "empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
        );
        assert_eq!(params(&e, false)[0], "IntArrayRef");
        assert_eq!(params(&e, true)[0], "SymIntArrayRef");
        assert_eq!(params(&e, false)[1], "std::optional<ScalarType>");
        assert_eq!(canon("c10::optional<at::ScalarType>"), "std::optional<ScalarType>");
        assert_eq!(canon("const at::Tensor &"), "constTensor&");
        assert_eq!(canon("const at::ITensorListRef&"), "TensorList");
        assert_eq!(canon("const int64_t"), "int64_t");
        assert_eq!(canon("at::Tensor const&"), "constTensor&");
        assert_eq!(canon("c10::optional<at::Tensor>const&"), "conststd::optional<Tensor>&");
        assert_eq!(canon("at::optional<int64_t>"), "std::optional<int64_t>");
        assert_eq!(canon("c10::OptionalArrayRef<c10::SymInt>"), "OptionalSymIntArrayRef");
        assert_eq!(canon("std::array<bool,DIM>"), canon("::std::array<bool, 3>"));
    }

    #[test]
    fn matching_picks_the_overload_by_parameters() {
        let ops = vec![
            f("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
            f("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"),
            f("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"),
            f("view(Tensor(a) self, SymInt[] size) -> Tensor(a)"),
        ];
        let k = |name: &str, ps: &[&str]| xirang_cxx::index::Kernel {
            name: name.into(),
            scope: "op_api".into(),
            ret: "at::Tensor".into(),
            params: ps.iter().map(|t| xirang_cxx::Param { ty: t.to_string(), name: None, default: None }).collect(),
            file: "k.cpp".into(),
            line: 1,
            gates: vec![],
        };
        let ks = vec![
            k("add", &["const at::Tensor&", "const at::Scalar&", "const at::Scalar&"]),
            k("add", &["const at::Tensor&", "const at::Tensor&", "const at::Scalar&"]),
            k("add_out", &["const at::Tensor&", "const at::Tensor&", "const at::Scalar&", "at::Tensor&"]),
            k("view_symint", &["const at::Tensor&", "c10::SymIntArrayRef"]),
            k("view", &["const at::Tensor&", "at::IntArrayRef"]),
            k("add", &["const at::Tensor&"]),
            k("npu_thing", &[]),
        ];
        let m = match_kernels(&ks, &ops);
        let got: Vec<(usize, &str, bool)> = m.matched.iter().map(|x| (x.kernel, x.op.as_str(), x.symint)).collect();
        assert_eq!(
            got,
            vec![
                (0, "add.Scalar", false),
                (1, "add.Tensor", false),
                (2, "add.out", false),
                (3, "view", true),
                (4, "view", false)
            ]
        );
        assert_eq!(m.unmatched.iter().map(|u| u.0).collect::<Vec<_>>(), vec![5, 6]);
        // int -> SymInt upstream does not change the non-symint kernel's C++ signature
        let v2 = f("view(Tensor(a) self, SymInt[] size) -> Tensor(a)");
        assert!(still_matches(&ks[4], &v2, false, false));
        // an argument made mutable (`Tensor noise` -> `Tensor(b!) noise`, rrelu_with_noise in 2.6)
        // changes a `const at::Tensor&` parameter into `at::Tensor&`
        let k1 = k("rrelu", &["const at::Tensor&", "const at::Tensor&"]);
        let v1 = f("rrelu(Tensor self, Tensor noise) -> Tensor");
        let v2 = f("rrelu(Tensor self, Tensor(b!) noise) -> Tensor");
        assert!(still_matches(&k1, &v1, false, false));
        assert!(!still_matches(&k1, &v2, false, false));
        assert!(still_matches(&k1, &v2, false, true), "use_const_ref_for_mutable_tensors keeps const refs");
        // `Tensor` -> `Tensor?` (`_fused_rms_norm`'s weight in 2.9) changes it to `const std::optional<at::Tensor>&`
        let v3 = f("rrelu(Tensor self, Tensor? noise) -> Tensor");
        assert!(!still_matches(&k1, &v3, false, true));
    }
}

/// The C++ kernels of an adapter tree and how they matched.
#[derive(Debug, Clone, Default)]
pub struct CxxKernels {
    pub index: xirang_cxx::index::CxxIndex,
    pub matching: Matching,
}

/// Indexes the C++ of `dir` (paths relative to `base`), matches its kernels against the operators of
/// `versions` in the store and the adapter's own schema files, and adds the matched ones to
/// `kernels` (the drift report's kernel index). `None` when the tree has no C++ kernel.
pub fn join(
    kernels: &mut crate::adapter_index::AdapterIndex,
    dir: &Path,
    base: &Path,
    st: &crate::snapshot::Store,
    versions: &[crate::version::Version],
) -> Result<Option<CxxKernels>, crate::error::Error> {
    let index = crate::pipeline::index_cxx(dir, base)?;
    if index.kernels.is_empty() {
        return Ok(None);
    }
    let names: BTreeSet<String> = index.kernels.iter().flat_map(|k| candidate_names(&k.name)).collect();
    let mut ops: Vec<FunctionSchema> = adapter_schemas(dir);
    for v in versions {
        ops.extend(st.load_pytorch_operators(v, |n| names.contains(n))?.into_iter().map(|f| f.func));
    }
    let matching = match_kernels(&index.kernels, &ops);
    for m in &matching.matched {
        let k = &index.kernels[m.kernel];
        kernels.kernels.push(crate::adapter_index::Kernel {
            op: m.op.clone(),
            item: format!("{}::{}", k.scope, k.name),
            file: k.file.clone(),
            line: k.line,
        });
    }
    kernels.kernels.sort();
    Ok(Some(CxxKernels { index, matching }))
}

/// Drops the impacts of argument changes on C++ kernels whose C++ signature the change leaves as it
/// was (`int` -> `SymInt` for a kernel without `_symint`), and tells the others the new signature.
pub fn refine(
    report: &mut super::Report,
    ck: &CxxKernels,
    st: &crate::snapshot::Store,
    new_version: &crate::version::Version,
) -> Result<(), crate::error::Error> {
    let at: BTreeMap<(&str, u32), &Matched> = ck
        .matching
        .matched
        .iter()
        .map(|m| ((ck.index.kernels[m.kernel].file.as_str(), ck.index.kernels[m.kernel].line), m))
        .collect();
    let touched: BTreeSet<String> = report
        .impact
        .iter()
        .filter(|i| i.rule.starts_with("arg.") || i.rule.starts_with("out."))
        .filter_map(|i| i.location.line.and_then(|l| at.get(&(i.location.file.as_str(), l))))
        .map(|m| m.op.split('.').next().unwrap_or(&m.op).to_string())
        .collect();
    let new_ops: BTreeMap<String, (FunctionSchema, bool)> = st
        .load_pytorch_operators(new_version, |n| touched.contains(n))?
        .into_iter()
        .map(|f| (f.func.name.to_string(), (f.func, f.use_const_ref_for_mutable_tensors)))
        .collect();
    let (major, minor) =
        (new_version.parts.first().copied().unwrap_or(0), new_version.parts.get(1).copied().unwrap_or(0));
    report.impact.retain_mut(|i| {
        let Some(m) = i.location.line.and_then(|l| at.get(&(i.location.file.as_str(), l))) else { return true };
        let k = &ck.index.kernels[m.kernel];
        // op-plugin's `#if VERSION_BETWEEN(V2R1, V2R12)`: not compiled for the new version, nothing to do
        if !k.gates.iter().all(|g| gate_holds(g, major, minor)) {
            return false;
        }
        if i.rule == "op.removed" {
            i.action = "delete it and its registration, or gate it out of the new version: the operator is gone".into();
        }
        if !(i.rule.starts_with("arg.") || i.rule.starts_with("out.")) {
            return true;
        }
        let Some((new, const_ref_ok)) = new_ops.get(&m.op) else { return true };
        if still_matches(k, new, m.symint, *const_ref_ok) {
            return false;
        }
        i.action = format!("change the C++ signature to `{}` ({})", signature(new, m.symint), i.action);
        true
    });
    Ok(())
}
