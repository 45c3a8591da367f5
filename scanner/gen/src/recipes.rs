//! Composition recipes: a knowledge base of decompositions (`templates/recipes.toml`), compiled
//! into typed Rust over the generated front-ends, with a cost estimate used to choose among the
//! recipes of one operator.
//!
//! The compiler type-checks every call against the target version's schemas (argument count,
//! each argument's type, omitted trailing arguments must have defaults) and rejects recipes that
//! call operators outside the selection or form cycles, so a PyTorch upgrade that breaks a
//! recipe shows up as a positioned error at generate time, not as a wrong result at run time.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;

use crate::error::{Error, Result, SourceFile};
use crate::naming::method_name;
use crate::registry::NativeFunction;
use crate::schema::{Argument, BaseTy, DefaultValue, OperatorName, Type};

use super::types::{arg_map, arg_name, returns_ty};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Kb {
    #[serde(default)]
    recipe: Vec<RecipeSpec>,
}

/// One entry of the knowledge base.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeSpec {
    pub op: String,
    pub body: String,
    #[serde(default)]
    pub note: Option<String>,
    /// Preconditions of the operator that the composition would not enforce itself (PyTorch's
    /// `dot` refuses mixed dtypes and non-1-D inputs; `sum(mul(a, b))` would broadcast and promote).
    /// Each is `same_dtype(t, ...)`, `same_shape(t, ...)` or `dim(t, n)` over tensor parameters.
    /// A call that fails one is declined by the recipe tier and runs on the CPU fallback, which
    /// raises PyTorch's own error.
    #[serde(default)]
    pub requires: Vec<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Estimated cost of a recipe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    /// Kernel launches (one per operator call).
    pub launches: u32,
    /// Tensors read and written, in units of the largest input (N elements).
    pub passes: u32,
}

impl Cost {
    pub fn describe(&self) -> String {
        format!("{} launches, ~{} x N elements moved (N = elements of the largest input)", self.launches, self.passes)
    }
}

/// A compiled recipe.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub op: String,
    pub function: String,
    pub signature: String,
    pub statements: Vec<String>,
    pub result: String,
    pub cost: Cost,
    pub callees: BTreeSet<String>,
    pub body: String,
    pub note: String,
    /// The compiled `requires` checks (Rust statements over the parameters), empty when none.
    pub requires: Vec<String>,
    /// The source text of `requires`, for the generated documentation.
    pub requires_src: Vec<String>,
    /// Alternatives not chosen (for the coverage report), with their cost.
    pub alternatives: Vec<(String, Cost)>,
}

/// A recipe that did not compile.
#[derive(Debug, Clone)]
pub struct Rejected {
    pub op: String,
    pub body: String,
    pub reason: String,
}

/// The knowledge base compiled for one selection.
#[derive(Debug, Clone, Default)]
pub struct Recipes {
    pub chosen: BTreeMap<String, Compiled>,
    pub rejected: Vec<Rejected>,
}

/// Loads and compiles the knowledge base.
pub fn compile(kb_source: &SourceFile, functions: &[NativeFunction], selected: &BTreeSet<String>) -> Result<Recipes> {
    let kb: Kb = toml::from_str(kb_source.text()).map_err(|e| {
        let (start, len) = e.span().map_or((0, 0), |r| (r.start, r.end.saturating_sub(r.start)));
        Error::Source(Box::new(kb_source.error(kb_source.pos_of_offset(start), len, e.message().to_string())))
    })?;
    let by_name: HashMap<String, &NativeFunction> = functions.iter().map(|f| (f.func.name.to_string(), f)).collect();
    let mut candidates: BTreeMap<String, Vec<Compiled>> = BTreeMap::new();
    let mut rejected = Vec::new();
    for spec in kb.recipe.iter().filter(|s| s.enabled) {
        if !selected.contains(&spec.op) {
            continue;
        }
        let Some(f) = by_name.get(&spec.op) else { continue };
        match compile_one(spec, f, &by_name, selected) {
            Ok(c) => candidates.entry(spec.op.clone()).or_default().push(c),
            Err(reason) => rejected.push(Rejected { op: spec.op.clone(), body: spec.body.clone(), reason }),
        }
    }
    // cheapest first; ties keep knowledge-base order
    let mut chosen: BTreeMap<String, Compiled> = BTreeMap::new();
    for (op, mut list) in candidates {
        list.sort_by_key(|c| c.cost);
        let mut best = list.remove(0);
        best.alternatives = list.iter().map(|c| (c.body.clone(), c.cost)).collect();
        chosen.insert(op, best);
    }
    // a recipe must not reach its own operator through other recipes (infinite recursion when
    // none of them has a native kernel): drop recipes on cycles
    loop {
        let on_cycle: Vec<String> =
            chosen.keys().filter(|op| reaches(op, op, &chosen, &mut BTreeSet::new())).cloned().collect();
        let Some(op) = on_cycle.first() else { break };
        if let Some(c) = chosen.remove(op) {
            rejected.push(Rejected {
                op: op.clone(),
                body: c.body,
                reason: format!("recipe cycle: {op} reaches itself through other recipes ({})", on_cycle.join(", ")),
            });
        }
    }
    Ok(Recipes { chosen, rejected })
}

fn reaches(from: &str, target: &str, chosen: &BTreeMap<String, Compiled>, seen: &mut BTreeSet<String>) -> bool {
    let Some(c) = chosen.get(from) else { return false };
    for callee in &c.callees {
        if callee == target {
            return true;
        }
        if seen.insert(callee.clone()) && reaches(callee, target, chosen, seen) {
            return true;
        }
    }
    false
}

// ---------------------------------------------------------------------------------------------
// expression language
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Call(String, Vec<Expr>),
    Name(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    None,
    Str(String),
    List(Vec<Expr>),
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn ident(&mut self) -> Option<String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || b"_.".contains(&self.s[self.i])) {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }
    fn expr(&mut self) -> std::result::Result<Expr, String> {
        match self.peek() {
            None => Err("unexpected end of recipe".into()),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.expr()?);
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(format!("expected `,` or `]` at byte {}", self.i));
                        }
                    }
                }
                Ok(Expr::List(items))
            }
            Some(b'"') => {
                self.i += 1;
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != b'"' {
                    self.i += 1;
                }
                if self.i >= self.s.len() {
                    return Err("unterminated string".into());
                }
                let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                Ok(Expr::Str(s))
            }
            Some(c) if c.is_ascii_digit() || c == b'-' => {
                let start = self.i;
                self.i += 1;
                while self.i < self.s.len() && (self.s[self.i].is_ascii_digit() || b".eE-+".contains(&self.s[self.i])) {
                    self.i += 1;
                }
                let t = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                if let Ok(i) = t.parse::<i64>() {
                    Ok(Expr::Int(i))
                } else {
                    t.parse::<f64>().map(Expr::Float).map_err(|_| format!("bad number `{t}`"))
                }
            }
            Some(_) => {
                let Some(id) = self.ident() else { return Err(format!("unexpected character at byte {}", self.i)) };
                match id.as_str() {
                    "true" => return Ok(Expr::Bool(true)),
                    "false" => return Ok(Expr::Bool(false)),
                    "None" => return Ok(Expr::None),
                    _ => {}
                }
                if self.eat(b'(') {
                    let mut args = Vec::new();
                    if !self.eat(b')') {
                        loop {
                            args.push(self.expr()?);
                            if self.eat(b')') {
                                break;
                            }
                            if !self.eat(b',') {
                                return Err(format!("expected `,` or `)` in the call of `{id}`"));
                            }
                        }
                    }
                    Ok(Expr::Call(id, args))
                } else {
                    Ok(Expr::Name(id))
                }
            }
        }
    }
}

/// Parses `name = expr; ...; expr`.
fn parse_body(body: &str) -> std::result::Result<(Vec<(String, Expr)>, Expr), String> {
    let parts: Vec<&str> = body.split(';').map(str::trim).filter(|s| !s.is_empty()).collect();
    let Some((last, lets)) = parts.split_last() else { return Err("empty recipe".into()) };
    let mut bindings = Vec::new();
    for p in lets {
        let Some((name, e)) = p.split_once('=') else { return Err(format!("`{p}` is not `name = expression`")) };
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("bad binding name `{name}`"));
        }
        bindings.push((name.to_string(), parse_expr(e)?));
    }
    Ok((bindings, parse_expr(last)?))
}

fn parse_expr(s: &str) -> std::result::Result<Expr, String> {
    let mut lx = Lexer { s: s.as_bytes(), i: 0 };
    let e = lx.expr()?;
    if lx.peek().is_some() {
        return Err(format!("trailing text after the expression in `{s}`"));
    }
    Ok(e)
}

// ---------------------------------------------------------------------------------------------
// type checking and code emission
// ---------------------------------------------------------------------------------------------

/// A value during compilation: its Rust expression and what it is.
#[derive(Debug, Clone)]
enum Val {
    /// A parameter of the recipe's operator, by schema type and Rust type.
    Param {
        rust: String,
        ty: Type,
        rust_ty: String,
    },
    /// A local owned `Tensor`.
    Local(String),
    Lit(Expr),
}

struct Ctx<'a> {
    by_name: &'a HashMap<String, &'a NativeFunction>,
    selected: &'a BTreeSet<String>,
    stmts: Vec<String>,
    env: HashMap<String, Val>,
    tmp: usize,
    cost: Cost,
    callees: BTreeSet<String>,
}

fn compile_one(
    spec: &RecipeSpec,
    f: &NativeFunction,
    by_name: &HashMap<String, &NativeFunction>,
    selected: &BTreeSet<String>,
) -> std::result::Result<Compiled, String> {
    let (bindings, result) = parse_body(&spec.body)?;
    let mut cx = Ctx {
        by_name,
        selected,
        stmts: Vec::new(),
        env: HashMap::new(),
        tmp: 0,
        cost: Cost::default(),
        callees: BTreeSet::new(),
    };
    let mut params = Vec::new();
    for a in f.func.arguments.all() {
        let is_out = f.func.arguments.out.iter().any(|o| o.name == a.name);
        let m = arg_map(&a.ty, is_out);
        let rust = arg_name(&a.name);
        params.push(format!("{rust}: {}", m.ty));
        cx.env.insert(a.name.clone(), Val::Param { rust, ty: a.ty.clone(), rust_ty: m.ty });
    }
    if !f.func.arguments.out.is_empty() {
        return Err("recipes for out= variants are not supported (the out= wrapper covers them)".into());
    }
    let ret = returns_ty(&f.func.returns);
    if ret != "Tensor" {
        return Err(format!("recipes must return one Tensor; {} returns {ret}", f.func.name));
    }
    for (name, e) in bindings {
        let v = cx.eval(&e)?;
        let v = match v {
            Val::Local(l) => Val::Local(l),
            other => return Err(format!("`{name}` must be bound to an operator call, not {other:?}")),
        };
        cx.env.insert(name, v);
    }
    let r = cx.eval(&result)?;
    let result = match r {
        Val::Local(l) => l,
        Val::Param { rust, rust_ty, .. } if rust_ty == "&Tensor" => format!("{rust}.clone()"),
        other => return Err(format!("the result must be a tensor, not {other:?}")),
    };
    let mut requires = Vec::new();
    for r in &spec.requires {
        requires.push(compile_require(r, &cx.env, &f.func.name.to_string())?);
    }
    let method = method_name(&f.func.name);
    Ok(Compiled {
        op: f.func.name.to_string(),
        function: method.clone(),
        signature: params.join(", "),
        statements: cx.stmts,
        result,
        cost: cx.cost,
        callees: cx.callees,
        body: spec.body.clone(),
        note: spec.note.clone().unwrap_or_default(),
        requires,
        requires_src: spec.requires.clone(),
        alternatives: Vec::new(),
    })
}

/// Compiles one `requires` entry into a statement of the recipe's guard function.
fn compile_require(src: &str, env: &HashMap<String, Val>, op: &str) -> std::result::Result<String, String> {
    let Expr::Call(check, args) = parse_expr(src)? else {
        return Err(format!("`requires` entry `{src}` is not a check call"));
    };
    let tensor = |e: &Expr| -> std::result::Result<String, String> {
        match e {
            Expr::Name(n) => match env.get(n) {
                Some(Val::Param { rust, rust_ty, .. }) if rust_ty == "&Tensor" => Ok(rust.clone()),
                Some(_) => Err(format!("`{n}` in `{src}` is not a Tensor parameter")),
                None => Err(format!("unknown name `{n}` in `{src}`")),
            },
            other => Err(format!("{other:?} in `{src}` is not a Tensor parameter")),
        }
    };
    let list = |args: &[Expr]| -> std::result::Result<String, String> {
        if args.len() < 2 {
            return Err(format!("`{src}` compares fewer than two tensors"));
        }
        Ok(args.iter().map(tensor).collect::<std::result::Result<Vec<_>, _>>()?.join(", "))
    };
    match check.as_str() {
        "same_dtype" => Ok(format!("crate::dispatch::require_same_dtype(\"{op}\", &[{}])?;", list(&args)?)),
        "same_shape" => Ok(format!("crate::dispatch::require_same_shape(\"{op}\", &[{}])?;", list(&args)?)),
        "dim" => match args.as_slice() {
            [t, Expr::Int(n)] if *n >= 0 => {
                Ok(format!("crate::dispatch::require_dim(\"{op}\", {}, {n})?;", tensor(t)?))
            }
            _ => Err(format!("`{src}`: `dim` takes a Tensor parameter and a non-negative integer")),
        },
        other => Err(format!("unknown check `{other}` in `{src}` (known: same_dtype, same_shape, dim)")),
    }
}

impl Ctx<'_> {
    fn eval(&mut self, e: &Expr) -> std::result::Result<Val, String> {
        match e {
            Expr::Name(n) => self.env.get(n).cloned().ok_or_else(|| format!("unknown name `{n}`")),
            Expr::Call(op, args) => self.call(op, args),
            other => Ok(Val::Lit(other.clone())),
        }
    }

    fn call(&mut self, op: &str, args: &[Expr]) -> std::result::Result<Val, String> {
        let name = OperatorName::parse(op).map_err(|e| format!("`{op}`: {e}"))?.to_string();
        let Some(f) = self.by_name.get(&name) else {
            return Err(format!("`{name}` is not an operator of this PyTorch version"));
        };
        if !self.selected.contains(&name) {
            return Err(format!(
                "`{name}` is not in the operator selection (a recipe may only call selected operators)"
            ));
        }
        if f.func.returns.len() != 1 || f.func.returns[0].ty != Type::Base(BaseTy::Tensor) {
            return Err(format!("`{name}` does not return one Tensor"));
        }
        if !f.func.arguments.out.is_empty() {
            return Err(format!("`{name}` is an out= variant"));
        }
        let formal: Vec<&Argument> = f.func.arguments.all().collect();
        if args.len() > formal.len() {
            return Err(format!("`{name}` takes {} arguments, {} given", formal.len(), args.len()));
        }
        let mut rendered = Vec::new();
        let mut tensor_io = 1; // the output
        for (i, a) in formal.iter().enumerate() {
            let text = match args.get(i) {
                Some(Expr::List(items)) if items.iter().any(|x| matches!(x, Expr::Name(_))) => {
                    self.int_list(items, a).map_err(|m| format!("argument `{}` of `{name}`: {m}", a.name))?
                }
                Some(e) => {
                    let v = self.eval(e)?;
                    if matches!(v, Val::Local(_))
                        || matches!(&v, Val::Param { rust_ty, .. } if rust_ty.contains("Tensor"))
                    {
                        tensor_io += 1;
                    }
                    pass(&v, a).map_err(|m| format!("argument `{}` of `{name}`: {m}", a.name))?
                }
                None => default_expr(a).ok_or_else(|| {
                    format!("argument `{}` of `{name}` is not given and has no usable default", a.name)
                })?,
            };
            rendered.push(text);
        }
        self.tmp += 1;
        let local = format!("t{}", self.tmp);
        let method = method_name(&f.func.name);
        let call_args: String = rendered.iter().map(|r| format!(", {r}")).collect();
        self.stmts.push(format!("let {local} = aten::{method}(o{call_args})?;"));
        self.cost.launches += 1;
        self.cost.passes += tensor_io;
        self.callees.insert(name);
        Ok(Val::Local(local))
    }
}

impl Ctx<'_> {
    /// `[dim, 0]` passed as an int list: names must be `int` parameters.
    fn int_list(&self, items: &[Expr], a: &Argument) -> std::result::Result<String, String> {
        let base = match &a.ty {
            Type::Optional(i) => &**i,
            t => t,
        };
        if !matches!(base, Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt))) {
            return Err(format!("a list of ints cannot be passed as `{}`", a.ty));
        }
        let mut parts = Vec::new();
        for it in items {
            parts.push(match it {
                Expr::Int(i) => i.to_string(),
                Expr::Name(n) => match self.env.get(n) {
                    Some(Val::Param { rust, rust_ty, .. }) if rust_ty == "i64" => rust.clone(),
                    _ => return Err(format!("`{n}` in a list must be an int parameter")),
                },
                other => return Err(format!("{other:?} cannot be an element of an int list")),
            });
        }
        let list = format!("&[{}]", parts.join(", "));
        Ok(if a.ty.is_optional() { format!("Some({list})") } else { list })
    }
}

/// Renders value `v` as the argument `a` of a call, or says why it does not fit.
fn pass(v: &Val, a: &Argument) -> std::result::Result<String, String> {
    let want = arg_map(&a.ty, false).ty;
    match v {
        Val::Local(l) => match want.as_str() {
            "&Tensor" => Ok(format!("&{l}")),
            "Option<&Tensor>" => Ok(format!("Some(&{l})")),
            _ => Err(format!("a Tensor cannot be passed as `{}`", a.ty)),
        },
        Val::Param { rust, rust_ty, ty } => {
            if *rust_ty == want {
                return Ok(rust.clone());
            }
            let inner = match &a.ty {
                Type::Optional(i) => Some(arg_map(i, false).ty),
                _ => None,
            };
            if inner.as_deref() == Some(rust_ty.as_str()) {
                return Ok(format!("Some({rust})"));
            }
            match (want.as_str(), rust_ty.as_str()) {
                ("Scalar", "i64") => Ok(format!("Scalar::Int({rust})")),
                ("Scalar", "f64") => Ok(format!("Scalar::Float({rust})")),
                ("f64", "i64") => Ok(format!("{rust} as f64")),
                _ => Err(format!("`{}` ({ty}) cannot be passed as `{}`", rust, a.ty)),
            }
        }
        Val::Lit(e) => lit(e, &a.ty).ok_or_else(|| format!("literal {e:?} does not fit `{}`", a.ty)),
    }
}

fn lit(e: &Expr, ty: &Type) -> Option<String> {
    if let Type::Optional(inner) = ty {
        return match e {
            Expr::None => Some("None".into()),
            _ => lit(e, inner).map(|s| format!("Some({s})")),
        };
    }
    let b = |t: BaseTy| *ty == Type::Base(t);
    Some(match e {
        Expr::Int(i) if b(BaseTy::Scalar) => format!("Scalar::Int({i})"),
        Expr::Float(f) if b(BaseTy::Scalar) => format!("Scalar::Float({})", float_lit(*f)),
        Expr::Bool(x) if b(BaseTy::Scalar) => format!("Scalar::Bool({x})"),
        Expr::Int(i) if b(BaseTy::Int) || b(BaseTy::SymInt) => i.to_string(),
        Expr::Int(i) if b(BaseTy::Float) => format!("{i}.0"),
        Expr::Float(f) if b(BaseTy::Float) => float_lit(*f),
        Expr::Bool(x) if b(BaseTy::Bool) => x.to_string(),
        Expr::Str(s) if b(BaseTy::Str) => format!("{s:?}"),
        Expr::List(items) => match ty {
            Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) => {
                let parts: Option<Vec<String>> = items
                    .iter()
                    .map(|it| match it {
                        Expr::Int(i) => Some(i.to_string()),
                        _ => None,
                    })
                    .collect();
                format!("&[{}]", parts?.join(", "))
            }
            _ => return None,
        },
        _ => return None,
    })
}

fn float_lit(f: f64) -> String {
    let s = format!("{f:?}");
    if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") }
}

/// A typed Rust expression for an omitted argument's schema default.
fn default_expr(a: &Argument) -> Option<String> {
    let d = a.default.as_ref()?;
    let (opt, base) = match &a.ty {
        Type::Optional(inner) => (true, &**inner),
        t => (false, t),
    };
    let b = |t: BaseTy| *base == Type::Base(t);
    let v = match &d.value {
        DefaultValue::None => return opt.then(|| "None".to_string()),
        DefaultValue::Bool(x) if b(BaseTy::Bool) => x.to_string(),
        DefaultValue::Int(i) if b(BaseTy::Int) || b(BaseTy::SymInt) => i.to_string(),
        DefaultValue::Int(i) if b(BaseTy::Scalar) => format!("Scalar::Int({i})"),
        DefaultValue::Int(i) if b(BaseTy::Float) => format!("{i}.0"),
        DefaultValue::Float(f) if b(BaseTy::Float) => float_lit(*f),
        DefaultValue::Float(f) if b(BaseTy::Scalar) => format!("Scalar::Float({})", float_lit(*f)),
        DefaultValue::Str(s) if b(BaseTy::Str) => format!("{s:?}"),
        DefaultValue::Int(i) if base.is_list() => format!("&[{i}]"),
        DefaultValue::List(items) if base.is_list() => {
            let parts: Option<Vec<String>> = items
                .iter()
                .map(|x| match x {
                    DefaultValue::Int(i) => Some(i.to_string()),
                    _ => None,
                })
                .collect();
            format!("&[{}]", parts?.join(", "))
        }
        DefaultValue::Ident(id) => match (id.as_str(), base) {
            ("Mean", _) => "1".into(),
            ("Sum", _) => "2".into(),
            ("long", _) => "DType::I64".into(),
            ("contiguous_format", _) => "MemoryFormat::Contiguous".into(),
            ("preserve_format", _) => "MemoryFormat::Preserve".into(),
            _ => return None,
        },
        _ => return None,
    };
    Some(if opt { format!("Some({v})") } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bindings_calls_and_literals() {
        let (b, r) = parse_body("p = mm(a, b); add.Tensor(p, [1, -2], 0.5, true, None, \"x\")").unwrap();
        assert_eq!(b.len(), 1);
        let Expr::Call(name, args) = r else { panic!() };
        assert_eq!(name, "add.Tensor");
        assert_eq!(args[1], Expr::List(vec![Expr::Int(1), Expr::Int(-2)]));
        assert_eq!(args[2], Expr::Float(0.5));
        assert!(parse_body("mm(a").is_err());
        assert!(parse_body("").is_err());
        assert!(parse_body("x1 = mm(a, b); x1").is_ok());
    }

    #[test]
    fn requires_compiles_checks_and_rejects_what_it_cannot_check() {
        let Ok(store) = crate::snapshot::Store::discover(None) else { return };
        let Some(v) = store.versions("pytorch").last().cloned() else { return };
        let snap = store.load_pytorch(&v).expect("loads");
        let all: BTreeSet<String> = snap.registry.functions.iter().map(|f| f.func.name.to_string()).collect();
        let kb = |requires: &str| {
            let text = format!(
                "[[recipe]]\nop = \"dot\"\nbody = \"sum(mul.Tensor(self, tensor))\"\nrequires = [{requires}]\n"
            );
            compile(&SourceFile::new("kb.toml", text), &snap.registry.functions, &all).expect("parses")
        };
        let ok = kb("\"same_dtype(self, tensor)\", \"dim(self, 1)\", \"same_shape(self, tensor)\"");
        let dot = &ok.chosen["dot"];
        assert_eq!(dot.requires.len(), 3);
        assert_eq!(dot.requires[0], "crate::dispatch::require_same_dtype(\"dot\", &[self_, tensor])?;");
        assert_eq!(dot.requires[1], "crate::dispatch::require_dim(\"dot\", self_, 1)?;");
        for (bad, why) in [
            ("\"same_dtype(self)\"", "fewer than two"),
            ("\"dim(self, -1)\"", "non-negative"),
            ("\"dim(self, other)\"", "non-negative"),
            ("\"same_dtype(self, nope)\"", "unknown name `nope`"),
            ("\"is_contiguous(self)\"", "unknown check `is_contiguous`"),
            ("\"self\"", "not a check call"),
        ] {
            let r = kb(bad);
            assert!(!r.chosen.contains_key("dot"), "{bad} accepted");
            assert!(r.rejected.iter().any(|x| x.reason.contains(why)), "{bad}: {:?}", r.rejected);
        }
    }

    #[test]
    fn knowledge_base_compiles_against_every_shipped_version() {
        let Ok(store) = crate::snapshot::Store::discover(None) else { return };
        let kb = std::fs::read_to_string(store.root.join("../templates/recipes.toml")).expect("recipes.toml");
        let src = SourceFile::new("templates/recipes.toml", kb);
        for v in store.versions("pytorch") {
            let snap = store.load_pytorch(&v).expect("loads");
            let all: BTreeSet<String> = snap.registry.functions.iter().map(|f| f.func.name.to_string()).collect();
            let r = compile(&src, &snap.registry.functions, &all).expect("compiles");
            assert!(r.chosen.contains_key("addmm"), "{v}: {:?}", r.rejected);
            assert!(r.chosen.contains_key("_softmax"), "{v}: {:?}", r.rejected);
            // the cheaper addmm spelling wins
            assert_eq!(r.chosen["addmm"].cost.launches, 3, "{v}");
            assert_eq!(r.chosen["addmm"].alternatives.len(), 1);
            assert!(r.rejected.is_empty(), "{v}: {:?}", r.rejected);
        }
    }
}
