//! Operator stubs: selection and the per-operator template context of `templates/ops.rs.jinja`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::naming::method_name;
use crate::registry::{NativeFunction, signature};
use crate::schema::{Argument, FunctionSchema, SchemaKind, Type};

use super::config::{Config, OperatorsTable};
use super::types::{arg_map, arg_name, default_ivalue, returns_ty};

/// Why an operator is in the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    Backend,
    Core,
    Include,
    Custom,
}

/// The operators the generated trait covers, sorted by qualified name.
pub fn select<'a>(cfg: &Config, functions: &'a [NativeFunction]) -> Vec<(&'a NativeFunction, Reason)> {
    select_by(&cfg.operators, functions)
}

/// [`select`] by the `[operators]` table alone.
pub fn select_by<'a>(t: &OperatorsTable, functions: &'a [NativeFunction]) -> Vec<(&'a NativeFunction, Reason)> {
    let excluded = |f: &NativeFunction| {
        let q = f.func.name.to_string();
        t.exclude.iter().any(|e| *e == q || *e == f.func.name.name)
    };
    let mut out: Vec<(&NativeFunction, Reason)> = Vec::new();
    for f in functions {
        if excluded(f) {
            continue;
        }
        let q = f.func.name.to_string();
        let is_core = f.tags.iter().any(|t| t == "core");
        let reason = if t.select == "backend" && !f.has_composite_implicit_autograd_kernel() {
            Some(Reason::Backend)
        } else if (t.select == "core" || t.core) && is_core {
            Some(Reason::Core)
        } else if t.include.contains(&q) {
            Some(Reason::Include)
        } else {
            None
        };
        if let Some(r) = reason {
            out.push((f, r));
        }
    }
    out.sort_by(|a, b| a.0.func.name.cmp(&b.0.func.name));
    out
}

/// One parameter of a generated method.
#[derive(Debug, Clone)]
pub struct ParamCtx {
    /// Rust name.
    pub name: String,
    /// Schema name.
    pub schema_name: String,
    pub ty: String,
    /// Expression boxing the parameter.
    pub boxed: String,
    /// Expression unboxing `&a[i]`.
    pub unboxed: String,
    pub is_out: bool,
    /// `IValue` expression of the schema default (boxed entry point).
    pub default: Option<String>,
    pub index: usize,
}

/// What the trait's default body does.
#[derive(Debug, Clone)]
pub enum Body {
    /// A composition recipe from the knowledge base.
    /// `guarded`: the recipe has `requires` checks, run before it marks the recipe tier.
    Recipe { function: String, cost: String, guarded: bool },
    /// `out=` variant: call the functional operator, store into the out tensors.
    Out { functional_method: String, functional: String, writes: Vec<(String, String)>, result: String },
    /// In-place variant: call the functional operator, store into `self`.
    Inplace { functional_method: String, functional: String, target: String },
    /// The CPU fallback.
    Fallback,
}

impl Body {
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Recipe { .. } => "recipe",
            Body::Out { .. } => "out_wrapper",
            Body::Inplace { .. } => "inplace_wrapper",
            Body::Fallback => "fallback",
        }
    }
}

/// Everything the templates need about one operator.
#[derive(Debug, Clone)]
pub struct OpCtx {
    pub qualified: String,
    /// Whether the operator gets an autograd front-end (`ag::`): functional, with a backward node.
    pub autograd: bool,
    /// The functional operator of an in-place operator that writes only `self` and returns it
    /// (`add_.Tensor` -> `add.Tensor`); in-place views (`inplace_view` tag) have none.
    pub inplace_functional: Option<String>,
    /// An in-place operator's recording node (`inplace_functional`'s, or its own derivatives.yaml
    /// entry): it gets an in-place `ag::` front-end that rebases `self`'s history.
    pub inplace_node: Option<String>,
    /// The backward node struct (`generated::autograd::<Op>Backward`) the `ag::` front-end builds:
    /// the operator's own (functional) or `inplace_node`'s (in-place).
    pub node_struct: Option<String>,
    /// Statements bumping the version counters of the tensors the operator writes (in-place and
    /// `out=` arguments), run after the call: autograd's saved-tensor check reads them.
    pub bumps: Vec<String>,
    pub schema: String,
    pub method: String,
    pub params: Vec<ParamCtx>,
    pub ret: String,
    pub body: Body,
    pub tags: String,
    pub reason: &'static str,
    /// Statements validating the arguments (front-end).
    pub checks: Vec<String>,
    /// Statements preparing inputs (contiguous copies, zero-dim promotion).
    pub prep: Vec<String>,
    /// Whether the result is reshaped back to zero-dim (`zd`).
    pub zero_dim: bool,
    /// `, a, b, c` (the parameters as passed on).
    pub call_args: String,
    /// Boxing of the parameters for the fallback.
    pub boxed_args: String,
    /// Indices of mutated arguments.
    pub mutated: String,
    /// Statements turning the fallback's `r: Vec<IValue>` into the typed result (ends with the value).
    pub unbox_result: String,
    /// Expression boxing the typed result `r` for the boxed entry point.
    pub box_result: String,
    pub n_args: usize,
    /// Lines of the documentation (argument defaults).
    pub doc: Vec<String>,
    /// Tensor and optional-tensor arguments as `Option<&Tensor>` expressions (a native kernel
    /// takes the call only when they are all on one device).
    pub kernel_tensors: Vec<String>,
    /// Tensor-list arguments (`&[Tensor]`).
    pub kernel_lists: Vec<String>,
    /// The host reference implementation the CPU fallback calls (`crate::reference::schema::add_tensor`): a
    /// runtime function marked `/// xirang-fallback: <op>`; `None` when there is none.
    pub host: Option<String>,
    /// PyTorch has kernels for it only on accelerators ([`crate::registry::NativeFunction::device_only`]):
    /// the host tier serves it even inside an application with CPU kernels of its own (PyTorch),
    /// which has none for it.
    pub device_only: bool,
}

fn all_args(f: &FunctionSchema) -> Vec<(&Argument, bool)> {
    let a = &f.arguments;
    a.positional
        .iter()
        .map(|x| (x, false))
        .chain(a.kwarg_only.iter().map(|x| (x, false)))
        .chain(a.out.iter().map(|x| (x, true)))
        .collect()
}

fn params(f: &FunctionSchema) -> Vec<ParamCtx> {
    all_args(f)
        .into_iter()
        .enumerate()
        .map(|(i, (a, is_out))| {
            let m = arg_map(&a.ty, is_out && a.ty == Type::Base(crate::schema::BaseTy::Tensor));
            let name = arg_name(&a.name);
            ParamCtx {
                boxed: m.boxed.replace("{x}", &name),
                unboxed: m.unboxed.replace("{n}", &a.name).replace("{v}", &format!("&a[{i}]")),
                ty: m.ty,
                name,
                schema_name: a.name.clone(),
                is_out: is_out && a.ty == Type::Base(crate::schema::BaseTy::Tensor),
                default: default_ivalue(a),
                index: i,
            }
        })
        .collect()
}

/// The knowledge the context builder needs beyond the operator itself.
pub struct OpEnv<'a> {
    pub cfg: &'a Config,
    /// Functional operator of each signature group (for out/in-place wrappers).
    pub functional: HashMap<String, &'a NativeFunction>,
    /// The selected operator names.
    pub selected: BTreeSet<String>,
    /// Operator -> (recipe function, cost text).
    pub recipes: BTreeMap<String, (String, String, bool)>,
}

impl<'a> OpEnv<'a> {
    pub fn new(cfg: &'a Config, all: &'a [NativeFunction], selected: &[(&NativeFunction, Reason)]) -> OpEnv<'a> {
        let mut functional = HashMap::new();
        for f in all {
            if f.func.kind() == SchemaKind::Functional {
                functional.entry(signature(&f.func, false).to_string()).or_insert(f);
            }
        }
        OpEnv {
            cfg,
            functional,
            selected: selected.iter().map(|(f, _)| f.func.name.to_string()).collect(),
            recipes: BTreeMap::new(),
        }
    }
}

/// Non-out arguments of `f` equal (name and type) those of `g`.
fn same_inputs(f: &FunctionSchema, g: &FunctionSchema) -> bool {
    let strip = |s: &FunctionSchema| -> Vec<(String, Type)> {
        s.arguments.positional.iter().chain(&s.arguments.kwarg_only).map(|a| (a.name.clone(), a.ty.clone())).collect()
    };
    strip(f) == strip(g)
}

fn wrapper_body(f: &NativeFunction, env: &OpEnv, ps: &[ParamCtx]) -> Option<Body> {
    let kind = f.func.kind();
    if kind != SchemaKind::Out && kind != SchemaKind::Inplace {
        return None;
    }
    // an in-place view (`t_`, `as_strided_`) changes the handle's geometry, not the data: a
    // copy of the functional's result into `self` would write the storage instead
    if kind == SchemaKind::Inplace && f.tags.iter().any(|t| t == "inplace_view") {
        return None;
    }
    let func = env.functional.get(&signature(&f.func, false).to_string())?;
    let fq = func.func.name.to_string();
    if !env.selected.contains(&fq) || !same_inputs(&f.func, &func.func) {
        return None;
    }
    let frets = &func.func.returns;
    if frets.is_empty() || frets.iter().any(|r| r.ty != Type::Base(crate::schema::BaseTy::Tensor)) {
        return None;
    }
    let inputs: Vec<&ParamCtx> = ps.iter().filter(|p| !p.is_out).collect();
    let call = inputs.iter().map(|p| format!(", {}", p.name)).collect::<String>();
    let fmethod = method_name(&func.func.name);
    let functional_call = format!("aten::{fmethod}(self{call})");
    match kind {
        SchemaKind::Out => {
            let outs: Vec<&ParamCtx> = ps.iter().filter(|p| p.is_out).collect();
            if outs.len() != frets.len()
                || outs.len() != f.func.returns.len()
                || f.func.arguments.out.len() != outs.len()
            {
                return None;
            }
            let writes: Vec<(String, String)> = outs
                .iter()
                .enumerate()
                .map(|(i, o)| (if outs.len() == 1 { "r".to_string() } else { format!("r.{i}") }, o.name.clone()))
                .collect();
            let result = if outs.len() == 1 {
                format!("{}.clone()", outs[0].name)
            } else {
                format!("({})", outs.iter().map(|o| format!("{}.clone()", o.name)).collect::<Vec<_>>().join(", "))
            };
            Some(Body::Out { functional_method: fmethod, functional: functional_call, writes, result })
        }
        SchemaKind::Inplace => {
            if frets.len() != 1 || f.func.returns.len() != 1 {
                return None;
            }
            let target = ps.iter().find(|p| p.schema_name == "self")?.name.clone();
            Some(Body::Inplace { functional_method: fmethod, functional: functional_call, target })
        }
        _ => None,
    }
}

/// The functional operator of in-place `f` (same inputs, one result, `self` the only written
/// argument), unless `f` is an in-place view.
fn inplace_functional(f: &NativeFunction, env: &OpEnv) -> Option<String> {
    if f.func.kind() != SchemaKind::Inplace || f.tags.iter().any(|t| t == "inplace_view") || f.func.returns.len() != 1 {
        return None;
    }
    let written: Vec<&str> = f
        .func
        .arguments
        .all()
        .filter(|a| a.annotation.as_ref().is_some_and(|x| x.is_write))
        .map(|a| a.name.as_str())
        .collect();
    if written != ["self"] {
        return None;
    }
    let func = env.functional.get(&signature(&f.func, false).to_string())?;
    same_inputs(&f.func, &func.func).then(|| func.func.name.to_string())
}

/// What the trait's default body of `f` does: its recipe, an out=/in-place wrapper of the
/// functional operator, or the CPU fallback (`ps`: its parameters, built when not given).
fn body_of(f: &NativeFunction, env: &OpEnv, q: &str, ps: Option<&[ParamCtx]>) -> Body {
    if let Some((function, cost, guarded)) = env.recipes.get(q) {
        return Body::Recipe { function: function.clone(), cost: cost.clone(), guarded: *guarded };
    }
    let body = match ps {
        Some(ps) => wrapper_body(f, env, ps),
        None if matches!(f.func.kind(), SchemaKind::Out | SchemaKind::Inplace) => {
            wrapper_body(f, env, &params(&f.func))
        }
        None => None,
    };
    body.unwrap_or(Body::Fallback)
}

/// The part of an operator's context that decides its tier (what the coverage join of `diff`
/// needs, without the templates' code fragments).
#[derive(Debug, Clone)]
pub struct OpTier {
    pub qualified: String,
    pub method: String,
    pub body: Body,
}

/// Builds the tier-deciding part of one operator's context ([`op_ctx`] without its code).
pub fn op_tier(f: &NativeFunction, env: &OpEnv) -> OpTier {
    let qualified = f.func.name.to_string();
    let body = body_of(f, env, &qualified, None);
    OpTier { method: method_name(&f.func.name), qualified, body }
}

/// Builds the context of one operator.
pub fn op_ctx(f: &NativeFunction, reason: Reason, env: &OpEnv) -> OpCtx {
    let q = f.func.name.to_string();
    let ps = params(&f.func);
    let ret = returns_ty(&f.func.returns);
    let body = body_of(f, env, &q, Some(&ps));
    let args = all_args(&f.func);

    // the tensors a native kernel reads (all on one device, else it declines)
    let (mut kernel_tensors, mut kernel_lists) = (Vec::new(), Vec::new());
    for (p, (a, _)) in ps.iter().zip(&args) {
        let tensor = Type::Base(crate::schema::BaseTy::Tensor);
        match &a.ty {
            t if *t == tensor && p.is_out => kernel_tensors.push(format!("Some(&*{})", p.name)),
            t if *t == tensor => kernel_tensors.push(format!("Some({})", p.name)),
            Type::Optional(inner) if **inner == tensor => kernel_tensors.push(p.name.clone()),
            Type::List { elem, .. } if **elem == tensor => kernel_lists.push(p.name.clone()),
            _ => {}
        }
    }

    // validation
    let mut checks = Vec::new();
    if f.device_check.as_deref() != Some("NoCheck") {
        let mut tensors = Vec::new();
        for (p, (a, _)) in ps.iter().zip(&args) {
            match &a.ty {
                Type::Base(crate::schema::BaseTy::Tensor) if p.is_out => tensors.push(format!("Some(&*{})", p.name)),
                Type::Base(crate::schema::BaseTy::Tensor) => tensors.push(format!("Some({})", p.name)),
                Type::Optional(inner) if **inner == Type::Base(crate::schema::BaseTy::Tensor) => {
                    tensors.push(p.name.clone())
                }
                _ => {}
            }
        }
        if tensors.len() >= 2 {
            checks.push(format!("dispatch::check_devices(OP, &[{}])?;", tensors.join(", ")));
        }
    }
    for (p, (a, _)) in ps.iter().zip(&args) {
        match &a.ty {
            Type::List { size: Some(n), .. } if *n >= 2 => {
                // `int[2] stride=[]`: empty means "the default" (pooling: the kernel size), as in
                // PyTorch, whose dispatcher checks no list length: the backward gets the forward's
                // empty `stride` as it was given (`max_pool2d_with_indices_backward`), so an empty
                // list passes to the kernel, which knows what it means
                let check = format!("dispatch::check_len(OP, \"{}\", {}.len(), {n})?;", p.schema_name, p.name);
                checks.push(format!("if !{}.is_empty() {{ {check} }}", p.name))
            }
            Type::Optional(inner) => {
                if let Type::List { size: Some(n), .. } = &**inner
                    && *n >= 2
                {
                    checks.push(format!(
                        "if let Some(x) = {} {{ dispatch::check_len(OP, \"{}\", x.len(), {n})?; }}",
                        p.name, p.schema_name
                    ));
                }
            }
            _ => {}
        }
    }

    // input preparation declared by kernels
    let mut prep = Vec::new();
    let plain: Vec<&ParamCtx> = ps.iter().filter(|p| p.ty == "&Tensor").collect();
    let contiguous = env.cfg.kernels.contiguous.contains(&q);
    let zero_dim = env.cfg.kernels.no_zero_dim.contains(&q) && ret == "Tensor" && !plain.is_empty();
    if zero_dim {
        let cond = plain.iter().map(|p| format!("{}.dim() == 0", p.name)).collect::<Vec<_>>().join(" && ");
        prep.push(format!("let zd = {cond};"));
        for p in &plain {
            prep.push(format!("let {0} = &dispatch::at_least_1d({0})?;", p.name));
        }
    }
    if contiguous {
        for p in &plain {
            prep.push(format!("let {0} = &{0}.contiguous()?;", p.name));
        }
    }

    let mutated: Vec<String> =
        args.iter().enumerate().filter(|(_, (a, _))| a.is_write()).map(|(i, _)| i.to_string()).collect();
    let bumps: Vec<String> = args
        .iter()
        .enumerate()
        .filter(|(_, (a, _))| a.is_write())
        .map(|(i, _)| {
            let p = &ps[i];
            if p.ty.starts_with("Option<") {
                format!("if let Some(t) = {} {{ t.bump_version(); }}", p.name)
            } else if p.ty.contains("[Tensor]") || p.ty.starts_with("Vec<") {
                format!("for t in {}.iter() {{ t.bump_version(); }}", p.name)
            } else {
                format!("{}.bump_version();", p.name)
            }
        })
        .collect();
    let n_ret = f.func.returns.len();
    let unbox_result = unbox_result(f, &ps, n_ret);
    let box_result = match n_ret {
        0 => "{ let () = r; Vec::new() }".to_string(),
        1 => "vec![IValue::from(r)]".to_string(),
        n => format!("vec![{}]", (0..n).map(|i| format!("IValue::from(r.{i})")).collect::<Vec<_>>().join(", ")),
    };
    let mut doc = Vec::new();
    for a in f.func.arguments.all() {
        if let Some(d) = &a.default {
            doc.push(format!("`{}` defaults to `{}`.", a.name, d.text));
        }
    }
    OpCtx {
        schema: f.func.to_string(),
        method: method_name(&f.func.name),
        call_args: ps.iter().map(|p| format!(", {}", p.name)).collect(),
        boxed_args: ps.iter().map(|p| p.boxed.clone()).collect::<Vec<_>>().join(", "),
        mutated: mutated.join(", "),
        n_args: ps.len(),
        params: ps,
        ret,
        body,
        tags: f.tags.join(", "),
        reason: match reason {
            Reason::Backend => "backend",
            Reason::Core => "core",
            Reason::Include => "include",
            Reason::Custom => "custom",
        },
        checks,
        prep,
        zero_dim,
        unbox_result,
        box_result,
        doc,
        inplace_functional: inplace_functional(f, env),
        qualified: q,
        autograd: false,
        inplace_node: None,
        node_struct: None,
        bumps,
        kernel_tensors,
        kernel_lists,
        host: None,
        device_only: f.device_only(),
    }
}

/// Statements that turn the fallback's boxed results `r` into the typed return value.
fn unbox_result(f: &NativeFunction, ps: &[ParamCtx], n_ret: usize) -> String {
    if n_ret == 0 {
        return "let _ = r;\n        Ok(())".into();
    }
    let names: Vec<String> = (0..n_ret).map(|i| format!("r{i}")).collect();
    let mut s = format!("let [{}] = results::<{n_ret}>(OP, r)?;", names.join(", "));
    let mut vals = Vec::new();
    for (i, ret) in f.func.returns.iter().enumerate() {
        let ty = super::types::return_ty(ret);
        // a return aliasing an argument written in place: the argument itself
        let alias = ret.annotation.as_ref().filter(|a| a.is_write).and_then(|ann| {
            f.func.arguments.all().position(|a| a.annotation.as_ref().is_some_and(|x| x.alias_set == ann.alias_set))
        });
        match alias.map(|j| &ps[j]) {
            Some(p) if p.is_out => {
                s.push_str(&format!("\n        dispatch::write_back(&Tensor::from_ivalue(OP, r{i})?, {})?;", p.name));
                vals.push(format!("{}.clone()", p.name));
            }
            Some(p) if p.ty == "&Tensor" => {
                s.push_str(&format!("\n        let _ = r{i};"));
                vals.push(format!("{}.clone()", p.name));
            }
            _ => vals.push(format!("<{ty}>::from_ivalue(OP, r{i})?")),
        }
    }
    let value = if n_ret == 1 { vals.remove(0) } else { format!("({})", vals.join(", ")) };
    s.push_str(&format!("\n        Ok({value})"));
    s
}
