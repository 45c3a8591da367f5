//! Forward-mode autograd: one jvp function per `derivatives.yaml` entry (dispatch key `Default`)
//! of the selected operators that has forward formulas (`result: ...` keys), rendered by
//! `templates/forward.rs.jinja` into `generated/forward.rs`.
//!
//! The formulas come from the [`Derivative`] IR, with torchgen's `auto_element_wise` (the backward
//! formula with `grad` replaced by the tangent `<input>_t.conj()` and inputs by their primals
//! `<input>_p`) and `auto_linear` (the operator applied to the tangents) already expanded. They are
//! translated by the backward translator ([`Env::translate`]) over a forward environment:
//!
//! * `<input>_t`: the tangent of a differentiable input (zeros when the input is not dual, as
//!   PyTorch materializes undefined tangents);
//! * `<input>_p` and `<input>`: the primal value of a tensor input; other arguments by name;
//! * `result` / `resultN` / return names: the primal outputs;
//! * `x.sym_sizes()`, `x.sizes()`, `x.scalar_type()`, `x.dim()`, `x.sym_numel()` of those
//!   tensors are rewritten to values computed from the primal before translation.
//!
//! An operator whose formulas do not all translate gets a jvp that returns
//! `Error::Unsupported("forward-mode AD: `<op>` has no translated forward formula (...)")`, so a
//! dual input never produces a silently wrong tangent. `FORWARD_COVERAGE` lists every operator
//! with a backward node as `translated`, `untranslated` or `no_formula`.

use std::collections::{BTreeSet, HashMap, HashSet};

use askama::Template;

use crate::derivatives::{Derivative, ForwardKind};
use crate::naming::method_name;
use crate::registry::NativeFunction;
use crate::schema::{Argument, BaseTy, SchemaKind, Type};

use super::autograd::{Env, OpIndex, Ty, owned_ty};

/// One operator's jvp.
#[derive(Debug, Clone)]
pub struct JvpCtx {
    pub op: String,
    /// The Rust function name (the operator's method name).
    pub func: String,
    pub schema: String,
    /// `translated` or `untranslated`.
    pub status: &'static str,
    /// Doc lines: `result: <formula> (<kind>)`.
    pub docs: Vec<String>,
    /// Statements binding the primals, tangents and values the translated formulas use.
    pub lets: Vec<String>,
    /// Per return: the tangent expression (`Some(t_out0)`) or `None`.
    pub outs: Vec<String>,
    /// For an untranslated operator: the error message as a Rust string literal.
    pub message: String,
}

/// The forward-mode model.
#[derive(Debug, Clone, Default)]
pub struct Forward {
    pub jvps: Vec<JvpCtx>,
    /// Every operator with a backward node: (operator, `translated` / `untranslated` / `no_formula`).
    pub coverage: Vec<(String, &'static str)>,
}

impl Forward {
    pub fn count(&self, kind: &str) -> usize {
        self.coverage.iter().filter(|c| c.1 == kind).count()
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `code` mentions identifier `name` (not as part of a longer identifier).
fn mentions(code: &str, name: &str) -> bool {
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(k) = code[from..].find(name) {
        let s = from + k;
        let e = s + name.len();
        let before = s == 0 || !is_ident_byte(bytes[s - 1]);
        let after = e >= bytes.len() || !is_ident_byte(bytes[e]);
        if before && after {
            return true;
        }
        from = s + 1;
    }
    false
}

/// Replaces `pat` (which starts with an identifier) by `with` where `pat` is not preceded by an
/// identifier character.
fn replace_at_ident(text: &str, pat: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(k) = rest.find(pat) {
        let before_ok = if k == 0 {
            out.chars().next_back().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
        } else {
            !is_ident_byte(rest.as_bytes()[k - 1])
        };
        out.push_str(&rest[..k]);
        if before_ok {
            out.push_str(with);
        } else {
            out.push_str(pat);
        }
        rest = &rest[k + pat.len()..];
    }
    out.push_str(rest);
    out
}

/// Methods on a tensor that give a value computed from the tensor (name, suffix, code template
/// with `{}` for the local, type).
const DERIVED: &[(&str, &str, &str, Ty)] = &[
    (".sym_sizes()", "sym_sizes", "fw::sizes(&{})", Ty::IntList),
    (".sizes()", "sizes", "fw::sizes(&{})", Ty::IntList),
    (".scalar_type()", "scalar_type", "{}.dtype()", Ty::DType),
    (".dim()", "dim", "({}.dim() as i64)", Ty::Int),
    (".sym_numel()", "sym_numel", "({}.numel() as i64)", Ty::Int),
    (".numel()", "numel", "({}.numel() as i64)", Ty::Int),
];

/// Builds the jvps of the selected operators' `Default` derivative entries.
pub fn build(derivatives: &[Derivative], functions: &[NativeFunction], selected: &BTreeSet<String>) -> Forward {
    let index = OpIndex::new(functions, selected);
    let by_name: HashMap<String, &NativeFunction> = functions.iter().map(|f| (f.func.name.to_string(), f)).collect();
    let mut out = Forward::default();
    let mut seen = HashSet::new();
    let mut ds: Vec<&Derivative> =
        derivatives.iter().filter(|d| d.dispatch_key == "Default" && selected.contains(&d.op.to_string())).collect();
    ds.sort_by_key(|d| d.op.to_string());
    for d in ds {
        let q = d.op.to_string();
        let Some(f) = by_name.get(&q) else { continue };
        if !seen.insert(q.clone()) {
            continue;
        }
        if d.forward.is_empty() {
            out.coverage.push((q, "no_formula"));
            continue;
        }
        let jvp = jvp_of(d, f, &index);
        out.coverage.push((q, jvp.status));
        out.jvps.push(jvp);
    }
    out
}

/// A local of the generated function: its name, the statement binding it.
struct Local {
    name: String,
    bind: String,
}

fn jvp_of(d: &Derivative, f: &NativeFunction, index: &OpIndex) -> JvpCtx {
    let q = d.op.to_string();
    let func = format!("jvp_{}", method_name(&d.op).trim_start_matches("r#"));
    let args: Vec<&Argument> = f.func.arguments.positional.iter().chain(&f.func.arguments.kwarg_only).collect();
    let mut vars: HashMap<String, (String, Ty)> = HashMap::new();
    let mut locals: Vec<Local> = Vec::new();
    // tensor names usable with `.sym_sizes()` etc.: (formula name, local)
    let mut tensor_names: Vec<(String, String)> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let n = &a.name;
        let arg = format!("unbox::arg(OP, a, {i})?");
        let differentiable = d.args_with_derivatives.contains(n);
        match &a.ty {
            Type::Base(BaseTy::Tensor) => {
                let p = format!("p_{n}");
                locals.push(Local { name: p.clone(), bind: format!("let {p} = unbox::tensor(OP, {n:?}, {arg})?;") });
                vars.insert(n.clone(), (p.clone(), Ty::Tensor));
                vars.insert(format!("{n}_p"), (p.clone(), Ty::Tensor));
                tensor_names.push((n.clone(), p.clone()));
                tensor_names.push((format!("{n}_p"), p.clone()));
                if differentiable {
                    let t = format!("t_{n}");
                    locals.push(Local { name: t.clone(), bind: format!("let {t} = fw::tangent(OP, {n:?}, {arg})?;") });
                    vars.insert(format!("{n}_t"), (t.clone(), Ty::Tensor));
                    tensor_names.push((format!("{n}_t"), t));
                }
            }
            Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => {
                let p = format!("p_{n}");
                locals
                    .push(Local { name: p.clone(), bind: format!("let {p} = unbox::opt_tensor(OP, {n:?}, {arg})?;") });
                vars.insert(n.clone(), (p.clone(), Ty::OptTensor));
                vars.insert(format!("{n}_p"), (p, Ty::OptTensor));
                if differentiable {
                    let t = format!("t_{n}");
                    locals.push(Local {
                        name: t.clone(),
                        bind: format!("let {t} = fw::opt_tangent(OP, {n:?}, {arg})?;"),
                    });
                    vars.insert(format!("{n}_t"), (t, Ty::OptTensor));
                }
            }
            ty => {
                let (rust, t) = owned_ty(ty);
                if t == Ty::Other || t == Ty::TensorList {
                    continue;
                }
                let v = format!("v_{n}");
                locals.push(Local { name: v.clone(), bind: format!("let {v} = unbox::value::<{rust}>(OP, {arg})?;") });
                vars.insert(n.clone(), (v, t));
            }
        }
    }
    // outputs
    let n_ret = f.func.returns.len();
    let mut out_index: HashMap<String, usize> = HashMap::new();
    for (j, r) in f.func.returns.iter().enumerate() {
        let alias = if n_ret == 1 { "result".to_string() } else { format!("result{j}") };
        let mut names = vec![alias];
        if let Some(n) = &r.name {
            names.push(n.clone());
        }
        for n in &names {
            out_index.insert(n.clone(), j);
        }
        if r.ty != Type::Base(BaseTy::Tensor) {
            continue;
        }
        let l = format!("r_{j}");
        locals.push(Local {
            name: l.clone(),
            bind: format!("let {l} = unbox::tensor(OP, \"result\", unbox::arg(OP, r, {j})?)?;"),
        });
        for n in names {
            vars.insert(n.clone(), (l.clone(), Ty::Tensor));
            tensor_names.push((n, l.clone()));
        }
    }
    // derived values: longest names first so that `self_p.x()` is not matched as `p.x()`
    tensor_names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    let rewrite = |formula: &str, vars: &mut HashMap<String, (String, Ty)>| -> String {
        let mut s = formula.to_string();
        for (name, local) in &tensor_names {
            for (pat, suffix, code, ty) in DERIVED {
                let full = format!("{name}{pat}");
                if s.contains(&full) {
                    let v = format!("xfw_{name}_{suffix}");
                    s = replace_at_ident(&s, &full, &v);
                    vars.insert(v, (code.replace("{}", local), *ty));
                }
            }
        }
        s
    };
    let mut docs = Vec::new();
    let mut codes: Vec<(usize, String)> = Vec::new();
    // `auto_linear`: the operator itself, called through `call_boxed` with the tangents in place of
    // the differentiable inputs (every argument kind the boxed call takes, kwarg-only ones included)
    let mut linear: Vec<String> = Vec::new();
    let mut failure: Option<(String, String)> = None;
    for fw in &d.forward {
        let formula = one_line(&fw.formula);
        let kind = match fw.kind {
            ForwardKind::Formula => "",
            ForwardKind::AutoElementWise => " (auto_element_wise)",
            ForwardKind::AutoLinear => " (auto_linear)",
        };
        docs.push(format!("{}: `{formula}`{kind}", fw.outputs.join(", ")));
        if failure.is_some() {
            continue;
        }
        let tr = if f.func.kind() != SchemaKind::Functional {
            // the jvp would run the operator on the tangents and mutate them
            Err("an in-place or out= operator (forward mode covers functional calls)".to_string())
        } else if fw.outputs.len() != 1 {
            Err("several outputs in one formula".to_string())
        } else {
            match out_index.get(&fw.outputs[0]) {
                None => Err(format!("unknown output `{}`", fw.outputs[0])),
                Some(&j) if f.func.returns[j].ty != Type::Base(BaseTy::Tensor) => Err("a non-Tensor output".into()),
                Some(&j) if fw.kind == ForwardKind::AutoLinear => {
                    linear.push("let mut b_lin = a.to_vec();".into());
                    for (i, a) in args.iter().enumerate() {
                        if d.args_with_derivatives.contains(&a.name) {
                            linear.push(format!("fw::set_tangent(OP, {:?}, &mut b_lin, {i})?;", a.name));
                        }
                    }
                    Ok((j, format!("fw::output(OP, super::ops::call_boxed(o, OP, &b_lin)?, {j})?")))
                }
                Some(&j) => {
                    let src = rewrite(&fw.formula, &mut vars);
                    let env = Env { vars: vars.clone(), ops: index };
                    // parenthesized: `self_t * other;` alone parses as a C++ declaration
                    env.translate(&format!("({src})")).map(|c| (j, c))
                }
            }
        };
        match tr {
            Ok(c) => codes.push(c),
            Err(reason) => failure = Some((formula, one_line(&reason))),
        }
    }
    let schema = one_line(&d.schema);
    match failure {
        Some((formula, reason)) => {
            let msg = format!("forward-mode AD: `{q}` has no translated forward formula (`{formula}`: {reason})");
            JvpCtx {
                op: q,
                func,
                schema,
                status: "untranslated",
                docs,
                lets: Vec::new(),
                outs: Vec::new(),
                message: format!("{msg:?}"),
            }
        }
        None => {
            let all: String = codes.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join("\n");
            let mut lets: Vec<String> =
                locals.iter().filter(|l| mentions(&all, &l.name)).map(|l| l.bind.clone()).collect();
            lets.extend(linear);
            let mut outs = vec!["None".to_string(); n_ret];
            for (j, c) in &codes {
                lets.push(format!("let t_out{j} = {c};"));
                outs[*j] = format!("Some(t_out{j})");
            }
            JvpCtx { op: q, func, schema, status: "translated", docs, lets, outs, message: String::new() }
        }
    }
}

/// [`build`] over a generation run's snapshot and selection.
pub fn forward_model(inputs: &super::Inputs, selected: &BTreeSet<String>) -> Forward {
    build(&inputs.snapshot.derivatives, &inputs.snapshot.registry.functions, selected)
}

#[derive(Template)]
#[template(path = "forward.rs.jinja", escape = "none")]
struct ForwardTemplate<'a> {
    pytorch: &'a str,
    m: &'a Forward,
    translated: usize,
    untranslated: usize,
    no_formula: usize,
}

/// Renders `generated/forward.rs`.
pub fn render(pytorch: &str, m: &Forward) -> Result<String, askama::Error> {
    ForwardTemplate {
        pytorch,
        m,
        translated: m.count("translated"),
        untranslated: m.count("untranslated"),
        no_formula: m.count("no_formula"),
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Store;
    use crate::{Inputs, config::LoadedConfig};

    fn model() -> Option<Forward> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cfg = LoadedConfig::load(&root.join("xirang.toml")).ok()?;
        let store = Store::discover(Some(&root.join("schemas"))).ok()?;
        let inputs = Inputs::load(cfg, &store).ok()?;
        let sel = super::super::ops::select(&inputs.cfg.config, &inputs.snapshot.registry.functions)
            .iter()
            .map(|(f, _)| f.func.name.to_string())
            .collect();
        Some(forward_model(&inputs, &sel))
    }

    fn jvp<'a>(m: &'a Forward, op: &str) -> &'a JvpCtx {
        m.jvps.iter().find(|j| j.op == op).unwrap_or_else(|| panic!("no jvp for {op}"))
    }

    #[test]
    fn helpers() {
        assert!(mentions("aten::exp(o, &t_self)?", "t_self"));
        assert!(!mentions("aten::exp(o, &t_self2)?", "t_self"));
        assert_eq!(replace_at_ident("self_p.dim() + p.dim()", "p.dim()", "X"), "self_p.dim() + X");
        assert_eq!(replace_at_ident("p.dim()", "p.dim()", "X"), "X");
    }

    #[test]
    fn translates_elementwise_forward_formulas() {
        let m = model().expect("the repository's xirang.toml and v2.3 snapshot");
        for op in [
            "add.Tensor",
            "sub.Tensor",
            "mul.Tensor",
            "div.Tensor",
            "neg",
            "exp",
            "log",
            "sin",
            "cos",
            "tanh",
            "sigmoid",
            "relu",
            "sqrt",
            "mm",
            "sum",
            "t",
            "expand",
            "clone",
            "view",
            "mul.Scalar",
        ] {
            let j = jvp(&m, op);
            assert_eq!(j.status, "translated", "{op}: {}", j.message);
        }
        let exp = jvp(&m, "exp");
        assert_eq!(exp.lets.last().map(String::as_str), Some("let t_out0 = aten::mul_tensor(o, &t_self, &r_0)?;"));
        assert_eq!(exp.outs, ["Some(t_out0)"]);
        // auto_linear: the operator on the tangents, through the boxed call
        let sum = jvp(&m, "sum");
        assert!(sum.lets.contains(&"fw::set_tangent(OP, \"self\", &mut b_lin, 0)?;".to_string()), "{:?}", sum.lets);
        assert_eq!(jvp(&m, "zero_").status, "untranslated");
        // not translated: a helper the runtime does not have
        assert!(jvp(&m, "amax").message.contains("no operator or helper `amaxamin_jvp`"));
        // translated through runtime helpers and `<math.h>` constants
        for op in ["pow.Tensor_Scalar", "exp2", "acosh", "erf"] {
            assert_eq!(jvp(&m, op).status, "translated", "{op}: {}", jvp(&m, op).message);
        }
        // coverage: every row is one of the three kinds, sorted and unique
        let (tr, un, no) = (m.count("translated"), m.count("untranslated"), m.count("no_formula"));
        assert_eq!(tr + un + no, m.coverage.len());
        assert!(tr > 100, "{tr} translated");
        let ops: Vec<&str> = m.coverage.iter().map(|c| c.0.as_str()).collect();
        let mut sorted = ops.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ops, sorted);
        // untranslated ones carry the clear message
        assert!(m.jvps.iter().filter(|j| j.status == "untranslated").all(|j| j.message.contains("forward-mode AD: `")));
        // deterministic
        let b = model().expect("model");
        assert_eq!(render("v2.3.1", &m).unwrap(), render("v2.3.1", &b).unwrap());
    }
}
