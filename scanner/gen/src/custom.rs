//! Custom operators: the adapter's own operators (`xirang::scaled_gelu(...)`), read from the file
//! `xirang.toml` names in `[operators] custom` and rendered by `templates/custom.rs.jinja` into
//! `generated/custom.rs`.
//!
//! The file has torch_npu's backend-yaml `custom:` entries and derivative entries in the
//! `derivatives.yaml` format:
//!
//! ```yaml
//! custom:
//!   - func: "xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor"
//!     reference: "gelu(self) * scale"          # optional: the same function in existing operators
//! custom_derivatives:
//!   - name: "xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor"
//!     self: "gelu_backward(grad * scale, self)"
//! ```
//!
//! Everything here is checked with positions (file:line:col, pointing into the schema or the
//! formula): schema syntax, name conflicts ([`conflicts`]: with the target PyTorch's operators,
//! between custom operators, and between Rust method names after [`method_name`] mangling),
//! gradient formulas (unknown names, inputs without a formula, formulas for non-differentiable
//! inputs) and the reference formula. Formulas are translated by the backward-formula translator
//! of [`super::autograd`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use askama::Template;
use miette::{Diagnostic, SourceSpan};

use crate::error::SourceFile;
use crate::naming::method_name;
use crate::registry::NativeFunction;
use crate::schema::{Argument, BaseTy, FunctionSchema, OperatorName, Type};
use crate::yaml::{Node, Value};

use super::autograd::{Env, OpIndex, Ty, camel, owned_ty};
use super::ops::{OpEnv, ParamCtx, Reason, op_ctx};
use super::types::arg_name;

/// The default custom-operator file (relative to `xirang.toml`) when `[operators] custom` is unset.
pub const DEFAULT_FILE: &str = "custom_ops.yaml";

/// The namespace of PyTorch's own operators.
pub const ATEN: &str = "aten";

/// Front-end module of custom operators in the `aten` namespace (or none): `aten` is taken by the
/// generated operator front-ends.
pub const ATEN_MODULE: &str = "aten_custom";

/// Module names of `generated/custom.rs` that a namespace cannot take.
const RESERVED_MODULES: &[&str] = &["autograd", "reference", ATEN_MODULE, "dispatch", "crate", "super", "self"];

/// What went wrong, for callers and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomErrorKind {
    /// The custom-operator file is not valid (yaml, keys, types).
    File,
    /// The schema does not parse or is not allowed for a custom operator.
    Schema,
    /// The name clashes with a PyTorch operator, another custom operator or a Rust name.
    Conflict,
    /// A gradient formula names something that is not an input, an output or `grad`.
    UnknownName,
    /// A gradient formula is missing, misplaced or cannot be translated.
    Gradient,
    /// The reference formula is not valid.
    Reference,
}

/// A positioned error about a custom operator (a miette diagnostic with a help line).
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("{file}:{line}:{col}: {message}")]
#[diagnostic(code(xirang::custom_op))]
pub struct CustomOpError {
    pub kind: CustomErrorKind,
    pub message: String,
    pub file: String,
    pub line: u32,
    pub col: u32,
    #[source_code]
    pub src: crate::error::Snippet,
    #[label("here")]
    pub span: SourceSpan,
    #[help]
    pub help: Option<String>,
}

type Res<T> = Result<T, Box<CustomOpError>>;

/// A piece of text inside a source file (a yaml value, a command-line argument).
#[derive(Debug, Clone)]
pub struct Spanned {
    pub src: SourceFile,
    /// Byte offset of `text` in `src`.
    pub offset: usize,
    pub text: String,
}

impl Spanned {
    /// A whole command-line argument (`name` is how errors call it, e.g. `--grad`).
    pub fn arg(name: &str, text: &str) -> Spanned {
        Spanned { src: SourceFile::new(name, text), offset: 0, text: text.to_string() }
    }

    /// A part of this text, from byte `start`.
    pub fn sub(&self, start: usize, text: &str) -> Spanned {
        Spanned { src: self.src.clone(), offset: self.offset + start, text: text.to_string() }
    }

    /// An error pointing at `len` bytes from byte `at` of the text.
    pub fn error(
        &self,
        kind: CustomErrorKind,
        at: usize,
        len: usize,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Box<CustomOpError> {
        let at = at.min(self.text.len());
        let pos = self.src.pos_of_offset(self.offset + at);
        let e = self.src.error(pos, len.max(1), message);
        Box::new(CustomOpError {
            kind,
            message: e.message,
            file: e.file,
            line: e.line,
            col: e.col,
            src: e.src,
            span: e.span,
            help,
        })
    }

    /// The 1-based line of the text's start in its source.
    pub fn line(&self) -> u32 {
        self.src.pos_of_offset(self.offset).line
    }

    /// An error pointing at the whole text.
    pub fn whole(&self, kind: CustomErrorKind, message: impl Into<String>, help: Option<String>) -> Box<CustomOpError> {
        self.error(kind, 0, self.text.len(), message, help)
    }
}

/// A gradient rule: the inputs it is for, and the formula (or `non_differentiable`).
#[derive(Debug, Clone)]
pub struct GradRule {
    /// The key as written (`self`, or `self, other`).
    pub key: Spanned,
    pub inputs: Vec<String>,
    pub formula: Spanned,
}

/// One custom operator.
#[derive(Debug, Clone)]
pub struct CustomOp {
    /// The namespace as written (`None`: no namespace, i.e. `aten`).
    pub namespace: Option<String>,
    pub schema: FunctionSchema,
    /// The `func:` text.
    pub func: Spanned,
    pub reference: Option<Spanned>,
    /// Gradient rules (from `custom_derivatives`); `None` when the operator has no entry.
    pub grads: Option<Vec<GradRule>>,
    /// The `name:` of the derivative entry.
    pub grads_at: Option<Spanned>,
}

impl CustomOp {
    /// `aten` when no namespace is written.
    pub fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or(ATEN)
    }
    /// `xirang::scaled_gelu` (the overload after a dot).
    pub fn qualified(&self) -> String {
        format!("{}::{}", self.ns(), self.schema.name)
    }
    /// The canonical schema with its namespace.
    pub fn schema_text(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}::{}", self.schema),
            None => self.schema.to_string(),
        }
    }
    /// The Rust method name (`naming::method_name` of the operator name, without namespace).
    pub fn method(&self) -> String {
        method_name(&self.schema.name)
    }
    /// Module of the front-end in `generated/custom.rs`.
    pub fn module(&self) -> String {
        if self.ns() == ATEN { ATEN_MODULE.to_string() } else { self.ns().to_string() }
    }
    /// The kernel file stem (`adapter-runtime/src/custom/<stem>.rs`).
    pub fn stem(&self) -> String {
        self.method().trim_start_matches("r#").to_string()
    }
}

/// The custom operators of the adapter.
#[derive(Debug, Clone, Default)]
pub struct CustomSet {
    /// The file as named in `xirang.toml` (empty: none).
    pub file: String,
    pub ops: Vec<CustomOp>,
}

// ---------------------------------------------------------------------------------------------
// parsing
// ---------------------------------------------------------------------------------------------

/// Parses `ns::name.overload(args) -> returns`. Errors point into `s`.
pub fn parse_schema(s: &Spanned) -> Res<(Option<String>, FunctionSchema)> {
    let text = s.text.as_str();
    let head_end = text.find('(').unwrap_or(text.len());
    let (ns, start) = match text[..head_end].find("::") {
        Some(i) => (Some(text[..i].trim().to_string()), i + 2),
        None => (None, 0),
    };
    if let Some(ns) = &ns {
        let ok = !ns.is_empty()
            && ns.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && ns.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok && crate::naming::is_keyword(ns) {
            // the namespace is the front-end module `custom::<ns>`
            return Err(s.error(
                CustomErrorKind::Schema,
                0,
                ns.len().max(1),
                format!("the namespace `{ns}` is a Rust keyword"),
                Some("choose another namespace, e.g. `xirang`".into()),
            ));
        }
        if !ok {
            return Err(s.error(
                CustomErrorKind::Schema,
                0,
                start.saturating_sub(2).max(1),
                format!("invalid namespace `{ns}`"),
                Some("a namespace is a lower-case identifier: `xirang::my_op(Tensor self) -> Tensor`".into()),
            ));
        }
    }
    let rest = &text[start..];
    let schema = FunctionSchema::parse(rest).map_err(|e| {
        s.error(
            CustomErrorKind::Schema,
            start + e.offset,
            e.len,
            format!("invalid schema: {}", e.message),
            Some(
                "the schema language of native_functions.yaml: `ns::name(Tensor self, float scale=1.0) -> Tensor`"
                    .into(),
            ),
        )
    })?;
    Ok((ns, schema))
}

fn yaml_text(src: &SourceFile, node: &Node, what: &str) -> Res<Spanned> {
    match &node.value {
        Value::Scalar { text, plain } => {
            let offset = node.pos.offset + usize::from(!*plain);
            // a quoted scalar's text may differ from the source (escapes): point at the start then
            let raw = src.text().get(offset..offset + text.len());
            let offset = if raw == Some(text.as_str()) || *plain { offset } else { node.pos.offset };
            Ok(Spanned { src: src.clone(), offset, text: text.clone() })
        }
        _ => {
            let s = Spanned { src: src.clone(), offset: node.pos.offset, text: String::new() };
            Err(s.error(
                CustomErrorKind::File,
                0,
                1,
                format!("`{what}` must be a string, found {}", node.kind_name()),
                None,
            ))
        }
    }
}

fn node_err(src: &SourceFile, node: &Node, message: impl Into<String>, help: Option<String>) -> Box<CustomOpError> {
    let s = Spanned { src: src.clone(), offset: node.pos.offset, text: node.as_str().unwrap_or(" ").to_string() };
    s.error(CustomErrorKind::File, 0, s.text.len(), message, help)
}

/// Splits a derivative key (`self, other`) into input names.
fn key_inputs(key: &Spanned) -> Vec<String> {
    key.text.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// Parses the custom-operator file (no validation against PyTorch: see [`check`]).
pub fn parse_file(src: &SourceFile) -> Res<CustomSet> {
    let root = crate::yaml::parse(src).map_err(|e| {
        let s = Spanned { src: src.clone(), offset: e.pos.offset, text: " ".into() };
        s.error(CustomErrorKind::File, 0, 1, format!("YAML syntax error: {}", e.message), None)
    })?;
    let mut set = CustomSet { file: src.name().to_string(), ops: Vec::new() };
    if root.is_null() {
        return Ok(set);
    }
    let Some(map) = root.as_map() else {
        return Err(node_err(src, &root, format!("expected a mapping, found {}", root.kind_name()), None));
    };
    let mut derivs: Vec<(Spanned, Vec<GradRule>)> = Vec::new();
    for (k, v) in map {
        let key = k.as_str().unwrap_or_default();
        let items: &[Node] = if v.is_null() {
            &[]
        } else {
            v.as_seq().ok_or_else(|| node_err(src, v, format!("`{key}` must be a list"), None))?
        };
        match key {
            "custom" => {
                for item in items {
                    let func = item.get("func").ok_or_else(|| {
                        node_err(
                            src,
                            item,
                            "entry has no `func:`",
                            Some("`- func: xirang::my_op(Tensor self) -> Tensor`".into()),
                        )
                    })?;
                    let func = yaml_text(src, func, "func")?;
                    let (namespace, schema) = parse_schema(&func)?;
                    let reference = match item.get("reference") {
                        Some(r) => Some(yaml_text(src, r, "reference")?),
                        None => None,
                    };
                    set.ops.push(CustomOp { namespace, schema, func, reference, grads: None, grads_at: None });
                }
            }
            "custom_derivatives" => {
                for item in items {
                    let Some(kv) = item.as_map() else {
                        return Err(node_err(src, item, "expected a `- name:` entry", None));
                    };
                    let name = item.get("name").ok_or_else(|| node_err(src, item, "entry has no `name:`", None))?;
                    let name = yaml_text(src, name, "name")?;
                    let mut rules = Vec::new();
                    for (k, v) in kv {
                        let kt = yaml_text(src, k, "key")?;
                        if kt.text == "name" {
                            continue;
                        }
                        let formula = yaml_text(src, v, &kt.text)?;
                        rules.push(GradRule { inputs: key_inputs(&kt), key: kt, formula });
                    }
                    derivs.push((name, rules));
                }
            }
            other => {
                return Err(node_err(
                    src,
                    k,
                    format!("unknown key `{other}`"),
                    Some("a custom-operator file has `custom:` and `custom_derivatives:`".into()),
                ));
            }
        }
    }
    for (name, rules) in derivs {
        let (ns, schema) = parse_schema(&name)?;
        let ns = ns.unwrap_or_else(|| ATEN.to_string());
        let Some(op) = set.ops.iter_mut().find(|o| o.ns() == ns && o.schema.name == schema.name) else {
            return Err(name.whole(
                CustomErrorKind::Gradient,
                format!("no custom operator `{ns}::{}` in `custom:`", schema.name),
                None,
            ));
        };
        if op.schema != schema {
            return Err(name.whole(
                CustomErrorKind::Gradient,
                format!("this schema differs from the one in `custom:` (`{}`)", op.schema_text()),
                None,
            ));
        }
        if op.grads.is_some() {
            return Err(name.whole(CustomErrorKind::Gradient, "a second derivative entry for this operator", None));
        }
        op.grads = Some(rules);
        op.grads_at = Some(name);
    }
    Ok(set)
}

/// Reads the configured custom-operator file; a missing file is an empty set.
pub fn load(path: &std::path::Path, name: &str) -> crate::Result<CustomSet> {
    match crate::fsio::read_text_opt(path)? {
        Some(text) => Ok(parse_file(&SourceFile::new(name, text))?),
        None => Ok(CustomSet { file: name.to_string(), ops: Vec::new() }),
    }
}

// ---------------------------------------------------------------------------------------------
// conflicts
// ---------------------------------------------------------------------------------------------

/// Why a custom operator's name is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictKind {
    /// `aten::`/no namespace and PyTorch has this operator (`add.Tensor`).
    Aten { aten: String },
    /// Another custom operator (index) has the same qualified name.
    Duplicate { first: usize },
    /// The Rust method name collides with a PyTorch operator's method.
    AtenMethod { method: String, aten: String },
    /// The Rust method name (or backward node name) collides with another custom operator's.
    CustomMethod { method: String, first: usize },
    /// The namespace cannot be a Rust module of the generated file.
    ReservedNamespace,
    /// An argument name the generated code needs (`grad`, `result`, `o`).
    ReservedArgument { name: String },
}

/// A conflict of custom operator `index` (in the order given to [`conflicts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub index: usize,
    pub kind: ConflictKind,
    pub message: String,
    pub help: String,
}

/// The name-conflict detector. `ops`: (namespace, operator name, argument names) of the custom
/// operators in file order; `aten`: every operator of the target PyTorch snapshot. Namespaces
/// isolate operator names (`xirang::add` is not `aten::add`), but not Rust method names: the
/// adapter implements `AtenOps` and `CustomOps` on one type.
pub fn conflicts(ops: &[(Option<&str>, &OperatorName, Vec<&str>)], aten: &[&OperatorName]) -> Vec<Conflict> {
    let aten_names: BTreeSet<String> = aten.iter().map(|n| n.to_string()).collect();
    let aten_methods: HashMap<String, String> = aten.iter().map(|n| (method_name(n), n.to_string())).collect();
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut methods: HashMap<String, usize> = HashMap::new();
    let mut nodes: HashMap<String, usize> = HashMap::new();
    for (i, (ns, name, args)) in ops.iter().enumerate() {
        let ns = ns.unwrap_or(ATEN);
        let q = name.to_string();
        let method = method_name(name);
        let plain = method.trim_start_matches("r#");
        let alias = format!("xirang::xirang_{}", name.name);
        let mut push =
            |kind: ConflictKind, message: String, help: String| out.push(Conflict { index: i, kind, message, help });
        if ns != ATEN && RESERVED_MODULES.contains(&ns) {
            push(
                ConflictKind::ReservedNamespace,
                format!("the namespace `{ns}` is reserved by the generated code"),
                "use the adapter's namespace: `xirang::`".into(),
            );
        }
        if ns == ATEN && aten_names.contains(&q) {
            push(
                ConflictKind::Aten { aten: q.clone() },
                format!("`aten::{q}` is an operator of the target PyTorch"),
                format!(
                    "put it in the adapter's namespace (`xirang::{q}`), use an alias such as `{alias}`, or a different overload name (`{}.custom`)",
                    name.name
                ),
            );
        }
        let key = format!("{ns}::{q}");
        match seen.get(&key) {
            Some(&first) => push(
                ConflictKind::Duplicate { first },
                format!("`{key}` is already defined (custom operator #{})", first + 1),
                "give it a different name or overload name".into(),
            ),
            None => {
                seen.insert(key, i);
            }
        }
        if let Some(a) = aten_methods.get(&method) {
            push(
                ConflictKind::AtenMethod { method: method.clone(), aten: a.clone() },
                format!("its Rust method `{method}` is also the method of `aten::{a}` (AtenOps)"),
                format!("rename it, e.g. `{alias}` (method `xirang_{plain}`)"),
            );
        } else if let Some(&first) = methods.get(&method) {
            push(
                ConflictKind::CustomMethod { method: method.clone(), first },
                format!("its Rust method `{method}` is also the method of custom operator #{}", first + 1),
                "rename one of them (method names drop the namespace and lower-case the overload)".into(),
            );
        } else if let Some(&first) = nodes.get(&camel(&method)) {
            push(
                ConflictKind::CustomMethod { method: method.clone(), first },
                format!(
                    "its backward node `{}Backward` is also the node of custom operator #{}",
                    camel(&method),
                    first + 1
                ),
                "rename one of them".into(),
            );
        }
        methods.entry(method.clone()).or_insert(i);
        nodes.entry(camel(&method)).or_insert(i);
        for a in args {
            if matches!(*a, "grad" | "result" | "o" | "grads" | "OP") {
                push(
                    ConflictKind::ReservedArgument { name: a.to_string() },
                    format!("the argument name `{a}` is reserved (gradient formulas use `grad` and `result`)"),
                    "rename the argument".into(),
                );
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// validation and translation
// ---------------------------------------------------------------------------------------------

/// (translator type, owned Rust type, expression saving parameter `{x}`).
type Usable = (Ty, String, &'static str);

/// The translator type of a value of schema type `ty`, when a formula may use it, with the
/// owned Rust type a backward node saves it as and the expression saving parameter `{x}`.
fn usable(ty: &Type) -> Option<Usable> {
    let (owned, t) = owned_ty(ty);
    let save = match ty {
        Type::Base(BaseTy::Tensor) => "{x}.clone()",
        Type::Base(BaseTy::Str) => "{x}.to_string()",
        Type::Base(_) => "{x}",
        Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => "{x}.cloned()",
        Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) => "{x}.to_vec()",
        _ => return None,
    };
    if t == Ty::Other && !matches!(ty, Type::Base(BaseTy::Str)) {
        return None;
    }
    Some((t, owned, save))
}

fn is_differentiable(ty: &Type) -> bool {
    match ty {
        Type::Base(BaseTy::Tensor) => true,
        Type::Optional(inner) => **inner == Type::Base(BaseTy::Tensor),
        _ => false,
    }
}

fn type_name(ty: &Type) -> String {
    ty.to_string()
}

fn args_of(s: &FunctionSchema) -> Vec<&Argument> {
    s.arguments.positional.iter().chain(&s.arguments.kwarg_only).collect()
}

/// Formulas are parsed as the value of a `return` statement: as a statement of their own, `grad *
/// scale` would read as a C++ declaration of a pointer `scale` of type `grad`.
const WRAP: &str = "void xirang_formula() { return ";

/// Checks the names a formula uses: every identifier must be in `known`. Returns the names used.
fn check_names(f: &Spanned, known: &[String], kind: CustomErrorKind, what: &str) -> Res<BTreeSet<String>> {
    let src = format!("{WRAP}{}; }}", f.text);
    let mut parser = tree_sitter::Parser::new();
    let lang: tree_sitter::Language = tree_sitter_cpp::LANGUAGE.into();
    if parser.set_language(&lang).is_err() {
        return Err(f.whole(kind, "the C++ parser is unavailable", None));
    }
    let Some(tree) = parser.parse(&src, None) else {
        return Err(f.whole(kind, "the formula could not be parsed", None));
    };
    let rel = |b: usize| b.saturating_sub(WRAP.len()).min(f.text.len());
    let mut used = BTreeSet::new();
    let mut stack = vec![tree.root_node()];
    let mut first_error: Option<tree_sitter::Node> = None;
    let mut idents = Vec::new();
    while let Some(n) = stack.pop() {
        if (n.is_error() || n.is_missing()) && first_error.is_none_or(|e| n.start_byte() < e.start_byte()) {
            first_error = Some(n);
        }
        if n.kind() == "identifier" {
            let parent = n.parent();
            let is_fn = parent.is_some_and(|p| {
                p.kind() == "call_expression" && p.child_by_field_name("function").is_some_and(|c| c.id() == n.id())
            });
            let in_qualified = parent.is_some_and(|p| p.kind() == "qualified_identifier");
            let is_decl = parent.is_some_and(|p| p.kind() == "function_declarator");
            if !is_fn && !in_qualified && !is_decl {
                idents.push(n);
            }
        }
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            stack.push(ch);
        }
    }
    if let Some(e) = first_error {
        let at = rel(e.start_byte());
        return Err(f.error(
            kind,
            at,
            (e.end_byte() - e.start_byte()).max(1),
            format!("syntax error in the {what}"),
            None,
        ));
    }
    idents.sort_by_key(|n| n.start_byte());
    for n in idents {
        let name = &src[n.byte_range()];
        if known.iter().any(|k| k == name) {
            used.insert(name.to_string());
            continue;
        }
        return Err(f.error(
            CustomErrorKind::UnknownName,
            rel(n.start_byte()),
            name.len(),
            format!("unknown variable `{name}` in the {what}"),
            Some(format!("the formula can use: {}", known.join(", "))),
        ));
    }
    Ok(used)
}

/// Points a translator failure at the call it names, else at the whole formula.
fn translate_error(f: &Spanned, kind: CustomErrorKind, reason: &str, what: &str) -> Box<CustomOpError> {
    let named = reason.split('`').nth(1).unwrap_or("");
    let help = Some(
        "formulas call existing operators (`tanh(self)`, `at::mul(a, b)`, methods `self.exp()`), use `+ - * /` \
         and comparisons, literals, and the helpers sum_to, maybe_multiply; see README \"Custom operators\""
            .to_string(),
    );
    if !named.is_empty() {
        let mut from = 0;
        while let Some(i) = f.text[from..].find(named) {
            let at = from + i;
            let before = f.text[..at].chars().next_back();
            let after = f.text[at + named.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            if !word(before) && !word(after) {
                return f.error(kind, at, named.len(), format!("cannot translate the {what}: {reason}"), help);
            }
            from = at + named.len();
        }
    }
    f.whole(kind, format!("cannot translate the {what}: {reason}"), help)
}

/// A saved field of a custom backward node.
#[derive(Debug, Clone)]
pub struct FieldCtx {
    pub name: String,
    pub ty: String,
    /// Expression initialising it from the forward's parameters.
    pub init: String,
}

/// One gradient of a custom backward node.
#[derive(Debug, Clone)]
pub struct GradCtx {
    pub var: String,
    pub formula: String,
    pub code: String,
}

/// A custom backward node.
#[derive(Debug, Clone)]
pub struct NodeCtx {
    pub name: String,
    pub fields: Vec<FieldCtx>,
    pub grads: Vec<GradCtx>,
    /// One entry per differentiable input with a formula, argument order: `g_self` or `None`.
    pub outputs: Vec<String>,
    /// The differentiable inputs, in the order of `outputs`.
    pub inputs: Vec<String>,
}

/// Everything the template needs about one custom operator.
#[derive(Debug, Clone)]
pub struct CustomCtx {
    pub qualified: String,
    pub schema: String,
    pub method: String,
    /// Function name inside its namespace module (the method without `r#` where possible).
    pub module: String,
    pub params: Vec<ParamCtx>,
    pub ret: String,
    pub checks: Vec<String>,
    pub n_args: usize,
    pub box_result: String,
    /// The default body's error message, as a Rust string literal.
    pub not_implemented: String,
    pub call_args: String,
    pub node: Option<NodeCtx>,
    /// The reference composition (`Ok(...)` body) and its formula.
    pub reference: Option<(String, String)>,
}

/// What validation needs from the target PyTorch.
pub struct Target<'a> {
    pub functions: &'a [NativeFunction],
    pub selected: &'a BTreeSet<String>,
    pub cfg: &'a super::config::Config,
}

fn native_function(op: &CustomOp) -> Option<NativeFunction> {
    serde_json::from_value(serde_json::json!({
        "func": op.schema.to_string(),
        "dispatch": {},
        "variants": ["function"],
        "line": op.func.src.pos_of_offset(op.func.offset).line,
    }))
    .ok()
}

/// The kernel skeleton's path of an operator (relative to the repository root).
pub fn kernel_path(op: &CustomOp) -> String {
    format!("adapter-runtime/src/custom/{}.rs", op.stem())
}

/// Validates one operator's gradient rules and reference, and builds its context.
fn op_model(op: &CustomOp, target: &Target, index: &OpIndex) -> Res<CustomCtx> {
    let schema = &op.schema;
    let args = args_of(schema);
    if !schema.arguments.out.is_empty() || args.iter().any(|a| a.is_write()) {
        return Err(op.func.whole(
            CustomErrorKind::Schema,
            "custom operators are functional: no `out=` or mutated (`Tensor(a!)`) arguments",
            None,
        ));
    }
    let Some(nf) = native_function(op) else {
        return Err(op.func.whole(CustomErrorKind::Schema, "the schema cannot be used for a custom operator", None));
    };
    let env = OpEnv::new(target.cfg, &[], &[]);
    let ctx = op_ctx(&nf, Reason::Custom, &env);
    let method = op.method();
    let one_tensor = schema.returns.len() == 1 && schema.returns[0].ty == Type::Base(BaseTy::Tensor);
    let kernel = kernel_path(op);
    let not_implemented = format!("not implemented: write the kernel of `{}` in {kernel}", op.qualified());
    let mut out = CustomCtx {
        qualified: op.qualified(),
        schema: op.schema_text(),
        method: method.clone(),
        module: op.module(),
        call_args: ctx.params.iter().map(|p| format!(", {}", p.name)).collect(),
        params: ctx.params,
        ret: ctx.ret,
        checks: ctx.checks,
        n_args: ctx.n_args,
        box_result: ctx.box_result,
        not_implemented: format!("{not_implemented:?}"),
        node: None,
        reference: None,
    };
    let arg_names: Vec<String> = args.iter().map(|a| a.name.clone()).collect();
    // usable variables: (name, translator type, owned type, save expression)
    let usable_args: Vec<(&Argument, Option<Usable>)> = args.iter().map(|a| (*a, usable(&a.ty))).collect();
    let help_types = |a: &Argument| {
        format!(
            "`{}` is a `{}`: formulas can use Tensor, Tensor?, int, float, bool, Scalar, ScalarType, int[] and str values",
            a.name,
            type_name(&a.ty)
        )
    };

    if let Some(reference) = &op.reference {
        if !one_tensor {
            return Err(reference.whole(
                CustomErrorKind::Reference,
                "a reference needs an operator that returns one Tensor",
                None,
            ));
        }
        check_names(reference, &arg_names, CustomErrorKind::Reference, "reference formula")?;
        let mut vars = HashMap::new();
        for (a, u) in &usable_args {
            if let Some((t, _, _)) = u {
                vars.insert(a.name.clone(), (arg_name(&a.name), *t));
            }
        }
        for (a, u) in &usable_args {
            if u.is_none() && contains_word(&reference.text, &a.name) {
                return Err(reference.whole(CustomErrorKind::Reference, help_types(a), None));
            }
        }
        let env = Env { vars, ops: index };
        let code = env
            .translate(&reference.text)
            .map_err(|r| translate_error(reference, CustomErrorKind::Reference, &r, "reference formula"))?;
        out.reference = Some((format!("Ok({code})"), one_line(&reference.text)));
    }

    let Some(rules) = &op.grads else { return Ok(out) };
    let at = op.grads_at.as_ref().unwrap_or(&op.func);
    if !one_tensor {
        return Err(at.whole(
            CustomErrorKind::Gradient,
            "gradient rules need an operator that returns one Tensor",
            None,
        ));
    }
    let mut known: Vec<String> = vec!["grad".into(), "result".into()];
    known.extend(arg_names.iter().cloned());
    let mut formulas: BTreeMap<String, &GradRule> = BTreeMap::new();
    let mut non_diff: BTreeSet<String> = BTreeSet::new();
    for r in rules {
        if r.inputs.len() != 1 {
            return Err(r.key.whole(
                CustomErrorKind::Gradient,
                "one input per gradient rule",
                Some("write one key per input: `self: ...` and `other: ...`".into()),
            ));
        }
        let input = &r.inputs[0];
        let Some(a) = args.iter().find(|a| &a.name == input) else {
            return Err(r.key.whole(
                CustomErrorKind::UnknownName,
                format!("`{input}` is not an argument of `{}`", op.qualified()),
                Some(format!("arguments: {}", arg_names.join(", "))),
            ));
        };
        if !is_differentiable(&a.ty) {
            return Err(r.key.whole(
                CustomErrorKind::Gradient,
                format!("`{input}` is a `{}`, not differentiable: it takes no gradient formula", type_name(&a.ty)),
                Some("only Tensor (and Tensor?) inputs have gradients; remove this formula".into()),
            ));
        }
        if formulas.contains_key(input) || non_diff.contains(input) {
            return Err(r.key.whole(CustomErrorKind::Gradient, format!("a second gradient rule for `{input}`"), None));
        }
        if r.formula.text.trim() == "non_differentiable" {
            non_diff.insert(input.clone());
        } else {
            formulas.insert(input.clone(), r);
        }
    }
    for a in &args {
        if is_differentiable(&a.ty) && !formulas.contains_key(&a.name) && !non_diff.contains(&a.name) {
            // point at the argument in the schema
            let needle = format!(" {}", a.name);
            let hit = at
                .text
                .match_indices(&needle)
                .map(|(i, _)| i + 1)
                .find(|&i| !at.text[i + a.name.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
            let (pos, len) = hit.map(|i| (i, a.name.len())).unwrap_or((0, at.text.len()));
            return Err(at.error(
                CustomErrorKind::Gradient,
                pos,
                len,
                format!("the differentiable input `{}` has no gradient formula", a.name),
                Some(format!(
                    "add one (`--grad \"{0}: <formula>\"`, or `{0}: <formula>` in custom_derivatives), or declare `{0}: non_differentiable`",
                    a.name
                )),
            ));
        }
    }
    // saved state: every usable argument, and the result
    let mut fields = Vec::new();
    let mut vars = HashMap::new();
    vars.insert("grad".to_string(), ("grad".to_string(), Ty::Tensor));
    for (a, u) in &usable_args {
        if let Some((t, owned, save)) = u {
            let f = arg_name(&a.name);
            vars.insert(a.name.clone(), (format!("self.{f}"), *t));
            fields.push(FieldCtx { name: f.clone(), ty: owned.clone(), init: save.replace("{x}", &f) });
        }
    }
    vars.insert("result".to_string(), ("self.result".to_string(), Ty::Tensor));
    fields.push(FieldCtx { name: "result".into(), ty: "Tensor".into(), init: "result.clone()".into() });
    let env = Env { vars, ops: index };
    let mut grads = Vec::new();
    let mut outputs = Vec::new();
    let mut inputs = Vec::new();
    for a in &args {
        let Some(r) = formulas.get(&a.name) else { continue };
        check_names(&r.formula, &known, CustomErrorKind::UnknownName, &format!("gradient formula of `{}`", a.name))?;
        for (b, u) in &usable_args {
            if u.is_none() && contains_word(&r.formula.text, &b.name) {
                return Err(r.formula.whole(CustomErrorKind::Gradient, help_types(b), None));
            }
        }
        let code = env.translate(&r.formula.text).map_err(|e| {
            translate_error(&r.formula, CustomErrorKind::Gradient, &e, &format!("gradient formula of `{}`", a.name))
        })?;
        let var = format!("g_{}", arg_name(&a.name));
        grads.push(GradCtx { var: var.clone(), formula: one_line(&r.formula.text), code });
        outputs.push(var);
        inputs.push(a.name.clone());
    }
    out.node = Some(NodeCtx { name: format!("{}Backward", camel(&method)), fields, grads, outputs, inputs });
    Ok(out)
}

/// One formula of a custom operator and the aten operators it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormulaCalls {
    /// `gradient rule of `self`` or `reference`.
    pub what: String,
    /// Line of the formula in the custom-operator file.
    pub line: u32,
    /// The `AtenOps` methods the translated formula calls (`gelu_backward`, `mul_scalar`), or `None`
    /// when the formula does not translate against the index (then see `names`).
    pub methods: Option<BTreeSet<String>>,
    /// The operator base names the formula may call: functions and methods it calls by name
    /// (`at::` stripped) and the operators its `+ - * /`, comparisons and unary minus become.
    pub names: BTreeSet<String>,
}

/// Base names of the operators the translator may call for the C++ operators of a formula.
const OPERATOR_CALLS: &[(&str, &[&str])] = &[
    ("+", &["add"]),
    ("-", &["sub", "rsub", "neg"]),
    ("*", &["mul"]),
    ("/", &["div", "reciprocal", "mul"]),
    ("<", &["lt", "gt"]),
    (">", &["gt", "lt"]),
    ("<=", &["le", "ge"]),
    (">=", &["ge", "le"]),
    ("==", &["eq"]),
    ("!=", &["ne"]),
];

/// The operator base names a formula may call (see [`FormulaCalls::names`]): every identifier
/// written before a `(` (a call or a method call), and the names of its arithmetic operators.
pub fn called_names(formula: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = formula.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if ident(b[i]) && !b[i].is_ascii_digit() && (i == 0 || !ident(b[i - 1])) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if b.get(j) == Some(&b'(') {
                let name = &formula[start..i];
                out.insert(name.strip_suffix("_symint").unwrap_or(name).to_string());
            }
            continue;
        }
        i += 1;
    }
    // `->` is no arithmetic; `<=` also contains `<` and `-0.5` a minus: over-approximating is fine
    let text = formula.replace("->", " ");
    for (op, names) in OPERATOR_CALLS {
        if text.contains(op) {
            out.extend(names.iter().map(|n| n.to_string()));
        }
    }
    out
}

/// The `aten::<method>(` calls of translated code.
fn aten_methods(code: &str) -> BTreeSet<String> {
    code.match_indices("aten::")
        .filter(|(i, _)| !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .filter_map(|(i, m)| {
            let rest = &code[i + m.len()..];
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#'))?;
            rest[end..].starts_with('(').then(|| rest[..end].to_string())
        })
        .collect()
}

/// The aten operators each formula of `op` calls (gradient rules in file order, then the
/// reference) when translated against `index` the way [`model`] translates them. A formula that
/// does not translate (an operator missing or with another schema in that PyTorch) has no methods.
pub fn formula_calls(op: &CustomOp, index: &OpIndex) -> Vec<FormulaCalls> {
    let args = args_of(&op.schema);
    let usable_args: Vec<(&Argument, Option<Usable>)> = args.iter().map(|a| (*a, usable(&a.ty))).collect();
    let mut out = Vec::new();
    if let Some(rules) = &op.grads {
        let mut vars = HashMap::new();
        vars.insert("grad".to_string(), ("grad".to_string(), Ty::Tensor));
        vars.insert("result".to_string(), ("self.result".to_string(), Ty::Tensor));
        for (a, u) in &usable_args {
            if let Some((t, _, _)) = u {
                vars.insert(a.name.clone(), (format!("self.{}", arg_name(&a.name)), *t));
            }
        }
        let env = Env { vars, ops: index };
        for r in rules {
            if r.formula.text.trim() == "non_differentiable" {
                continue;
            }
            out.push(FormulaCalls {
                what: format!("gradient rule of `{}`", r.inputs.join(", ")),
                line: r.formula.line(),
                methods: env.translate(&r.formula.text).ok().map(|c| aten_methods(&c)),
                names: called_names(&r.formula.text),
            });
        }
    }
    if let Some(reference) = &op.reference {
        let mut vars = HashMap::new();
        for (a, u) in &usable_args {
            if let Some((t, _, _)) = u {
                vars.insert(a.name.clone(), (arg_name(&a.name), *t));
            }
        }
        let env = Env { vars, ops: index };
        out.push(FormulaCalls {
            what: "reference".into(),
            line: reference.line(),
            methods: env.translate(&reference.text).ok().map(|c| aten_methods(&c)),
            names: called_names(&reference.text),
        });
    }
    out
}

fn contains_word(text: &str, word: &str) -> bool {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let w = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !w(text[..at].chars().next_back()) && !w(text[at + word.len()..].chars().next()) {
            return true;
        }
        from = at + word.len();
    }
    false
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks names against the target PyTorch and between custom operators, with positions.
pub fn check_conflicts(set: &CustomSet, functions: &[NativeFunction]) -> Res<()> {
    let keys: Vec<(Option<&str>, &OperatorName, Vec<&str>)> = set
        .ops
        .iter()
        .map(|o| (o.namespace.as_deref(), &o.schema.name, args_of(&o.schema).iter().map(|a| a.name.as_str()).collect()))
        .collect();
    let aten: Vec<&OperatorName> = functions.iter().map(|f| &f.func.name).collect();
    if let Some(c) = conflicts(&keys, &aten).into_iter().next() {
        let op = &set.ops[c.index];
        // point at the name (after the namespace)
        let head = op.func.text.find('(').unwrap_or(op.func.text.len());
        let start = op.func.text[..head].rfind("::").map(|i| i + 2).unwrap_or(0);
        let start = start + (op.func.text[start..head].len() - op.func.text[start..head].trim_start().len());
        let len = op.func.text[start..head].trim_end().len();
        let (at, len) = match &c.kind {
            ConflictKind::ReservedNamespace => (0, start.saturating_sub(2)),
            ConflictKind::ReservedArgument { name } => {
                let i = op.func.text.find(&format!(" {name}")).map(|i| i + 1).unwrap_or(start);
                (i, name.len())
            }
            _ => (start, len),
        };
        return Err(op.func.error(CustomErrorKind::Conflict, at, len, c.message, Some(c.help)));
    }
    Ok(())
}

/// Validates every custom operator against the target and builds the template contexts.
pub fn model(set: &CustomSet, target: &Target) -> Res<Vec<CustomCtx>> {
    check_conflicts(set, target.functions)?;
    let index = OpIndex::new(target.functions, target.selected);
    let mut out = Vec::new();
    for op in &set.ops {
        out.push(op_model(op, target, &index)?);
    }
    out.sort_by(|a, b| a.qualified.cmp(&b.qualified));
    Ok(out)
}

/// One namespace module of the generated file.
#[derive(Debug, Clone)]
pub struct NsCtx {
    pub module: String,
    pub ns: String,
    pub ops: Vec<CustomCtx>,
}

#[derive(Template)]
#[template(path = "custom.rs.jinja", escape = "none")]
struct CustomTemplate<'a> {
    file: &'a str,
    pytorch: &'a str,
    ops: &'a [CustomCtx],
    namespaces: &'a [NsCtx],
}

/// Renders `generated/custom.rs`.
pub fn render(file: &str, pytorch: &str, ops: &[CustomCtx]) -> Result<String, askama::Error> {
    let mut by_ns: BTreeMap<String, NsCtx> = BTreeMap::new();
    for o in ops {
        let ns = o.qualified.split("::").next().unwrap_or(ATEN).to_string();
        by_ns
            .entry(o.module.clone())
            .or_insert_with(|| NsCtx { module: o.module.clone(), ns, ops: Vec::new() })
            .ops
            .push(o.clone());
    }
    let namespaces: Vec<NsCtx> = by_ns.into_values().collect();
    CustomTemplate { file, pytorch, ops, namespaces: &namespaces }.render()
}

/// The custom-operator file of a configuration: (name as configured, path).
pub fn file_of(cfg: &super::config::LoadedConfig) -> (String, std::path::PathBuf) {
    let name = cfg.config.operators.custom.clone().unwrap_or_else(|| DEFAULT_FILE.to_string());
    let path = cfg.path(&name);
    (name, path)
}

/// Loads (or takes, from `new-op`) the custom-operator file, validates it and renders
/// `generated/custom.rs`.
pub fn render_generated(
    inputs: &super::Inputs,
    selected: &BTreeSet<String>,
    file: Option<&SourceFile>,
) -> crate::Result<String> {
    let (name, path) = file_of(&inputs.cfg);
    let set = match file {
        Some(src) => parse_file(src)?,
        None => load(&path, &name)?,
    };
    let target = Target { functions: &inputs.snapshot.registry.functions, selected, cfg: &inputs.cfg.config };
    let ctxs = model(&set, &target)?;
    let version = inputs.snapshot.meta.version.to_string();
    render(&name, &version, &ctxs).map_err(|e| crate::Error::Internal(format!("rendering custom.rs: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(s: &str) -> OperatorName {
        OperatorName::parse(s).unwrap()
    }

    #[test]
    fn aten_names_clash_only_without_a_namespace_or_in_aten() {
        let add = op("add.Tensor");
        let relu = op("relu");
        let aten = [&add, &relu];
        let name = op("relu");
        let c = conflicts(&[(None, &name, vec!["self"])], &aten);
        assert_eq!(c.len(), 2, "{c:?}"); // operator name and method name
        assert_eq!(c[0].kind, ConflictKind::Aten { aten: "relu".into() });
        assert!(c[0].help.contains("xirang::relu") && c[0].help.contains("xirang_relu"), "{}", c[0].help);
        let c = conflicts(&[(Some("aten"), &name, vec![])], &aten);
        assert!(matches!(c[0].kind, ConflictKind::Aten { .. }));
        // another namespace isolates the operator name, not the Rust method
        let c = conflicts(&[(Some("xirang"), &name, vec![])], &aten);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].kind, ConflictKind::AtenMethod { method: "relu".into(), aten: "relu".into() });
        // a different overload name is a different operator
        let other = op("add.Custom");
        assert!(conflicts(&[(None, &other, vec![])], &aten).is_empty());
        let fine = op("scaled_gelu");
        assert!(conflicts(&[(Some("xirang"), &fine, vec!["self", "scale"])], &aten).is_empty());
    }

    #[test]
    fn mangled_method_names_collide() {
        let add = op("add.Tensor");
        let aten = [&add];
        // xirang::add_tensor mangles to the method of add.Tensor
        let n = op("add_tensor");
        let c = conflicts(&[(Some("xirang"), &n, vec![])], &aten);
        assert_eq!(c[0].kind, ConflictKind::AtenMethod { method: "add_tensor".into(), aten: "add.Tensor".into() });
        // two custom operators: foo.Bar and foo_bar are both `foo_bar`
        let a = op("foo.Bar");
        let b = op("foo_bar");
        let c = conflicts(&[(Some("xirang"), &a, vec![]), (Some("xirang"), &b, vec![])], &aten);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].index, 1);
        assert_eq!(c[0].kind, ConflictKind::CustomMethod { method: "foo_bar".into(), first: 0 });
        // the same name in two namespaces: one trait, one method
        let c = conflicts(&[(Some("xirang"), &b, vec![]), (Some("other"), &b, vec![])], &aten);
        assert_eq!(c[0].kind, ConflictKind::CustomMethod { method: "foo_bar".into(), first: 0 });
    }

    #[test]
    fn duplicates_reserved_namespaces_and_arguments() {
        let aten: [&OperatorName; 0] = [];
        let a = op("foo");
        let c = conflicts(&[(Some("xirang"), &a, vec![]), (Some("xirang"), &a, vec![])], &aten);
        assert_eq!(c[0].kind, ConflictKind::Duplicate { first: 0 });
        // no namespace and aten:: are the same namespace
        let c = conflicts(&[(None, &a, vec![]), (Some("aten"), &a, vec![])], &aten);
        assert_eq!(c[0].kind, ConflictKind::Duplicate { first: 0 });
        let c = conflicts(&[(Some("autograd"), &a, vec![])], &aten);
        assert_eq!(c[0].kind, ConflictKind::ReservedNamespace);
        let c = conflicts(&[(Some("xirang"), &a, vec!["self", "grad"])], &aten);
        assert_eq!(c[0].kind, ConflictKind::ReservedArgument { name: "grad".into() });
    }

    #[test]
    fn schema_errors_point_into_the_text() {
        let s = Spanned::arg("<schema>", "xirang::foo(Tensr self) -> Tensor");
        let e = parse_schema(&s).unwrap_err();
        assert_eq!(e.kind, CustomErrorKind::Schema);
        assert_eq!((e.line, e.col), (1, 13));
        let s = Spanned::arg("<schema>", "Xi-rang::foo(Tensor self) -> Tensor");
        assert_eq!(parse_schema(&s).unwrap_err().kind, CustomErrorKind::Schema);
        let (ns, f) = parse_schema(&Spanned::arg("s", "xirang::foo.bar(Tensor self) -> Tensor")).unwrap();
        assert_eq!((ns.as_deref(), f.name.to_string().as_str()), (Some("xirang"), "foo.bar"));
    }

    #[test]
    fn formula_names_are_checked_with_positions() {
        let f = Spanned::arg("--grad", "grad * scale * tanh(slef)");
        let known: Vec<String> = ["grad", "result", "self", "scale"].iter().map(|s| s.to_string()).collect();
        let e = check_names(&f, &known, CustomErrorKind::UnknownName, "formula").unwrap_err();
        assert_eq!(e.kind, CustomErrorKind::UnknownName);
        assert_eq!(e.col, 21);
        assert!(e.message.contains("`slef`"));
        let ok =
            check_names(&Spanned::arg("f", "at::tanh(self).exp() * grad"), &known, CustomErrorKind::UnknownName, "f")
                .unwrap();
        assert_eq!(ok.into_iter().collect::<Vec<_>>(), ["grad", "self"]);
        let e = check_names(&Spanned::arg("f", "grad * (self"), &known, CustomErrorKind::Gradient, "f").unwrap_err();
        assert_eq!(e.kind, CustomErrorKind::Gradient);
    }

    #[test]
    fn file_parses_with_derivatives() {
        let src = SourceFile::new(
            "custom_ops.yaml",
            "custom:\n  - func: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"\n    reference: \"gelu(self) * scale\"\ncustom_derivatives:\n  - name: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"\n    self: \"grad * scale\"\n",
        );
        let set = parse_file(&src).unwrap();
        assert_eq!(set.ops.len(), 1);
        assert_eq!(set.ops[0].qualified(), "xirang::scaled_gelu");
        assert_eq!(set.ops[0].grads.as_ref().map(|g| g.len()), Some(1));
        let src = SourceFile::new("c.yaml", "custom:\n  - func: xirang::foo(Tensr self) -> Tensor\n");
        let e = parse_file(&src).unwrap_err();
        assert_eq!((e.line, e.col), (2, 23));
        let src = SourceFile::new("c.yaml", "customs: []\n");
        assert_eq!(parse_file(&src).unwrap_err().kind, CustomErrorKind::File);
    }
}
