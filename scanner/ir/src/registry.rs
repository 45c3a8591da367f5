//! `native_functions.yaml` + `tags.yaml` -> the operator registry, as torchgen builds it.
//!
//! Follows `torchgen/gen.py::parse_native_yaml`, `torchgen/model.py::NativeFunction.from_yaml`
//! and `torchgen/native_function_generation.py::add_generated_native_functions` (the `autogen`
//! expansion): the resulting set of operators, their canonical schemas, dispatch keys, tags and
//! autogen flags equal what each PyTorch version's own torchgen produces.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{SourceError, SourceFile};
use crate::schema::{
    Annotation, Argument, Arguments, BaseName, FunctionSchema, OperatorName, Return, SchemaKind, Type,
};
use crate::yaml::{self, Node, Value};

/// A tag defined in `tags.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagDef {
    pub tag: String,
    pub desc: String,
}

/// `variants:` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    Function,
    Method,
}

/// One operator of the registry (a `NativeFunction` in torchgen's terms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeFunction {
    pub func: FunctionSchema,
    /// Dispatch key -> kernel name. Includes the defaulted `CompositeImplicitAutograd` entry
    /// and the CPU/CUDA entries implied by `ufunc_inner_loop`.
    pub dispatch: BTreeMap<String, String>,
    /// True when `dispatch` was defaulted to `CompositeImplicitAutograd` (no dispatch table).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dispatch_defaulted: bool,
    /// Tags as written in the yaml (for generated operators: torchgen's generated tag set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub variants: Vec<Variant>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub structured: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_delegate: Option<OperatorName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_inherits: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub precomputed: Vec<String>,
    /// The `autogen:` list of this entry (operators torchgen generates from it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autogen: Vec<OperatorName>,
    /// True for operators created by the autogen expansion (not written in the yaml).
    #[serde(default, skip_serializing_if = "is_false")]
    pub generated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_module: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category_override: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_guard: Option<bool>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub manual_kernel_registration: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub manual_cpp_binding: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpp_no_default_args: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub use_const_ref_for_mutable_tensors: bool,
    /// `ufunc_inner_loop:` (dispatch key, e.g. `Generic`/`ScalarOnly`, -> inner loop name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ufunc_inner_loop: BTreeMap<String, String>,
    /// Line of the `- func:` entry in native_functions.yaml (of the source entry for generated ops).
    pub line: u32,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What PyTorch provides for an operator on a backend that registers nothing for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Composite {
    /// `CompositeImplicitAutograd`: it decomposes into other operators upstream; a backend never
    /// needs a kernel.
    Implicit,
    /// `CompositeExplicitAutograd(NonFunctional)`: PyTorch has one kernel for every backend;
    /// inside PyTorch a backend may override it, and needs nothing. (The standalone runtime, with
    /// no PyTorch beneath it, still needs a kernel, a recipe or a host implementation.)
    Explicit,
    /// Only backend-specific kernels (CPU, CUDA, ...): the backend must provide one (or fall back).
    None,
}

impl Composite {
    pub fn as_str(self) -> &'static str {
        match self {
            Composite::Implicit => "CompositeImplicitAutograd",
            Composite::Explicit => "CompositeExplicitAutograd",
            Composite::None => "no composite kernel",
        }
    }
}

impl NativeFunction {
    pub fn name(&self) -> &OperatorName {
        &self.func.name
    }
    pub fn has_composite_implicit_autograd_kernel(&self) -> bool {
        self.dispatch.contains_key("CompositeImplicitAutograd")
    }
    /// What PyTorch itself provides for this operator on a new (PrivateUse1) backend.
    pub fn composite(&self) -> Composite {
        if self.has_composite_implicit_autograd_kernel() {
            Composite::Implicit
        } else if self.dispatch.contains_key("CompositeExplicitAutograd")
            || self.dispatch.contains_key("CompositeExplicitAutogradNonFunctional")
        {
            Composite::Explicit
        } else {
            Composite::None
        }
    }
    /// torchgen's `is_view_op`.
    pub fn is_view_op(&self) -> bool {
        let non_mutating_view = self.func.returns.iter().any(|r| r.annotation.as_ref().is_some_and(|a| !a.is_write));
        let name = self.func.name.to_string();
        let inplace_view = self.tags.iter().any(|t| t == "inplace_view") && name != "resize_" && name != "resize_as_";
        let wildcard = self
            .func
            .arguments
            .all()
            .any(|a| a.annotation.as_ref().is_some_and(|an| an.alias_set_after.iter().any(|s| s == "*")));
        non_mutating_view || inplace_view || wildcard
    }
    /// Whether PyTorch has kernels for this operator only on accelerators (CUDA, XPU, MPS, ...):
    /// dispatch keys, none of them a CPU or composite kernel. The CPU fallback of an out-of-tree
    /// device can never run such an operator; only the adapter can serve it. The `_overrideable`
    /// operators (`convolution_overrideable` and its backward) count too: their one kernel,
    /// CompositeExplicitAutograd, only raises "not implemented", as they exist for backends outside
    /// PyTorch to override.
    pub fn device_only(&self) -> bool {
        if self.func.name.name.ends_with("_overrideable") {
            return true;
        }
        self.composite() == Composite::None
            && !self.dispatch.is_empty()
            && !self.dispatch.keys().any(|k| k.contains("CPU") || k.starts_with("Math") || k.starts_with("Composite"))
    }
    /// Sorted dispatch key names.
    pub fn dispatch_keys(&self) -> Vec<&str> {
        self.dispatch.keys().map(String::as_str).collect()
    }
}

/// The loaded registry of one PyTorch version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    pub tags: Vec<TagDef>,
    /// Yaml order, then generated operators in generation order.
    pub functions: Vec<NativeFunction>,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<&NativeFunction> {
        self.functions.iter().find(|f| f.func.name.to_string() == name)
    }
    /// Map of qualified name (`add.Tensor`) -> index in `functions`.
    pub fn index(&self) -> HashMap<String, usize> {
        self.functions.iter().enumerate().map(|(i, f)| (f.func.name.to_string(), i)).collect()
    }
}

/// The keys torchgen accepts in a native_functions.yaml entry.
pub const NATIVE_FUNCTION_KEYS: &[&str] = &[
    "func",
    "variants",
    "dispatch",
    "structured",
    "structured_delegate",
    "structured_inherits",
    "precomputed",
    "autogen",
    "tags",
    "device_check",
    "device_guard",
    "manual_kernel_registration",
    "manual_cpp_binding",
    "python_module",
    "category_override",
    "cpp_no_default_args",
    "use_const_ref_for_mutable_tensors",
    "ufunc_inner_loop",
];

type Res<T> = Result<T, Box<SourceError>>;

fn err(src: &SourceFile, node: &Node, msg: impl Into<String>) -> Box<SourceError> {
    let len = match &node.value {
        Value::Scalar { text, .. } => text.len().max(1),
        _ => 1,
    };
    Box::new(src.error(node.pos, len, msg))
}

/// Loads `tags.yaml`.
pub fn load_tags(src: &SourceFile) -> Res<Vec<TagDef>> {
    let root = parse_yaml(src)?;
    if root.is_null() {
        return Ok(Vec::new());
    }
    let Some(items) = root.as_seq() else {
        return Err(err(
            src,
            &root,
            format!("tags.yaml must be a list of {{tag, desc}} entries, found {}", root.kind_name()),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(map) = item.as_map() else {
            return Err(err(
                src,
                item,
                format!("expected a mapping with `tag` and `desc`, found {}", item.kind_name()),
            ));
        };
        let mut tag = None;
        let mut desc = String::new();
        for (k, v) in map {
            match k.as_str() {
                Some("tag") => tag = Some(scalar(src, v, "tag")?.to_string()),
                Some("desc") => desc = scalar(src, v, "desc")?.to_string(),
                Some(other) => {
                    return Err(err(src, k, format!("unknown key `{other}` in tags.yaml (expected `tag` or `desc`)")));
                }
                None => return Err(err(src, k, "keys must be strings")),
            }
        }
        let Some(tag) = tag else {
            return Err(err(src, item, "tag entry without `tag:`"));
        };
        out.push(TagDef { tag, desc });
    }
    Ok(out)
}

pub(crate) fn parse_yaml(src: &SourceFile) -> Res<Node> {
    yaml::parse(src).map_err(|e| Box::new(src.error(e.pos, 1, format!("YAML syntax error: {}", e.message))))
}

pub(crate) fn scalar<'n>(src: &SourceFile, node: &'n Node, key: &str) -> Res<&'n str> {
    node.as_str().ok_or_else(|| err(src, node, format!("`{key}` must be a string, found {}", node.kind_name())))
}

fn boolean(src: &SourceFile, node: &Node, key: &str) -> Res<bool> {
    node.as_bool().ok_or_else(|| err(src, node, format!("`{key}` must be True or False")))
}

/// Converts a schema error inside a yaml scalar to a file position (schemas are one-line scalars).
pub(crate) fn schema_error(src: &SourceFile, node: &Node, e: &crate::schema::SchemaError) -> Box<SourceError> {
    let pos = match &node.value {
        Value::Scalar { plain: true, .. } => src.pos_of_offset(node.pos.offset + e.offset),
        // quoted: skip the opening quote
        Value::Scalar { plain: false, .. } => src.pos_of_offset(node.pos.offset + 1 + e.offset),
        _ => node.pos,
    };
    Box::new(src.error(pos, e.len.max(1), format!("invalid schema: {}", e.message)))
}

/// Parses the schema text held by a scalar node.
pub(crate) fn parse_schema_node(src: &SourceFile, node: &Node) -> Res<FunctionSchema> {
    let text = scalar(src, node, "func")?;
    FunctionSchema::parse(text).map_err(|e| schema_error(src, node, &e))
}

/// Which torchgen's behaviour to follow where it changed between releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TorchgenVersion {
    pub major: u32,
    pub minor: u32,
}

impl TorchgenVersion {
    /// The newest behaviour known to this scanner.
    pub const LATEST: TorchgenVersion = TorchgenVersion { major: 2, minor: 15 };

    pub fn new(major: u32, minor: u32) -> Self {
        TorchgenVersion { major, minor }
    }

    /// Since 2.6, non-core CompositeImplicitAutograd groups are skipped but core ones get
    /// their out=/functional variants generated (before: every CompositeImplicitAutograd group
    /// was skipped).
    fn core_composite_implicit_gets_variants(self) -> bool {
        self >= TorchgenVersion::new(2, 6)
    }

    /// Since 2.13 (the `out` tag in tags.yaml), generated out= variants carry the `out` tag.
    fn generated_out_gets_out_tag(self) -> bool {
        self >= TorchgenVersion::new(2, 13)
    }
}

impl std::default::Default for TorchgenVersion {
    fn default() -> Self {
        TorchgenVersion::LATEST
    }
}

/// Loads `native_functions.yaml` with the tags of `tags.yaml` and expands `autogen`, following
/// the newest torchgen.
pub fn load_native_functions(src: &SourceFile, tags: Vec<TagDef>) -> Res<Registry> {
    load_native_functions_as(src, tags, TorchgenVersion::LATEST)
}

/// Like [`load_native_functions`], following the torchgen of version `tg`.
pub fn load_native_functions_as(src: &SourceFile, tags: Vec<TagDef>, tg: TorchgenVersion) -> Res<Registry> {
    let root = parse_yaml(src)?;
    let Some(items) = root.as_seq() else {
        return Err(err(
            src,
            &root,
            format!("native_functions.yaml must be a list of entries, found {}", root.kind_name()),
        ));
    };
    let mut functions = Vec::with_capacity(items.len() + items.len() / 5);
    let mut seen: HashMap<String, u32> = HashMap::with_capacity(items.len());
    let valid: std::collections::BTreeSet<&str> = tags.iter().map(|t| t.tag.as_str()).collect();
    for item in items {
        let f = load_entry(src, item)?;
        // torchgen: `assert len(valid_tags) == 0 or t in valid_tags, f"illegal tag {t}"`
        if !valid.is_empty()
            && let Some(bad) = f.tags.iter().find(|t| !valid.contains(t.as_str()))
        {
            let at = item.get("tags").map_or(item, |n| match n.as_seq() {
                Some(xs) => xs.iter().find(|x| x.as_str() == Some(bad.as_str())).unwrap_or(n),
                None => n,
            });
            let hint = crate::suggest::hint(bad, valid.iter().copied());
            return Err(err(src, at, format!("illegal tag `{bad}`: tags.yaml does not define it{hint}")));
        }
        let qn = f.func.name.to_string();
        if let Some(prev) = seen.insert(qn.clone(), f.line) {
            return Err(err(
                src,
                item.get("func").unwrap_or(item),
                format!("operator `{qn}` is already defined at line {prev}"),
            ));
        }
        functions.push(f);
    }
    add_generated_native_functions(&mut functions, tg);
    Ok(Registry { tags, functions })
}

fn load_entry(src: &SourceFile, item: &Node) -> Res<NativeFunction> {
    let Some(map) = item.as_map() else {
        return Err(err(
            src,
            item,
            format!("each entry must be a mapping with a `func:` key, found {}", item.kind_name()),
        ));
    };
    for (k, _) in map {
        match k.as_str() {
            Some(key) if NATIVE_FUNCTION_KEYS.contains(&key) => {}
            Some(key) => {
                return Err(err(
                    src,
                    k,
                    format!(
                        "unknown key `{key}` in native_functions.yaml entry (torchgen accepts: {})",
                        NATIVE_FUNCTION_KEYS.join(", ")
                    ),
                ));
            }
            None => return Err(err(src, k, "keys must be strings")),
        }
    }
    let func_node = item.get("func").ok_or_else(|| err(src, item, "entry has no `func:` key"))?;
    let func = parse_schema_node(src, func_node)?;
    let line = func_node.pos.line;

    let mut variants = Vec::new();
    match item.get("variants") {
        None => variants.push(Variant::Function),
        Some(v) => {
            for part in scalar(src, v, "variants")?.split(',') {
                match part.trim() {
                    "function" => variants.push(Variant::Function),
                    "method" => variants.push(Variant::Method),
                    other => {
                        return Err(err(
                            src,
                            v,
                            format!("unknown variant `{other}` (expected `function` and/or `method`)"),
                        ));
                    }
                }
            }
        }
    }
    variants.sort();
    variants.dedup();
    let structured = match item.get("structured") {
        Some(v) => boolean(src, v, "structured")?,
        None => false,
    };
    let structured_delegate = match item.get("structured_delegate") {
        Some(v) => {
            Some(OperatorName::parse(scalar(src, v, "structured_delegate")?).map_err(|e| schema_error(src, v, &e))?)
        }
        None => None,
    };
    if structured && structured_delegate.is_some() {
        return Err(err(
            src,
            item.get("structured").unwrap_or(item),
            "an entry cannot be both `structured` and a `structured_delegate`",
        ));
    }
    let structured_inherits = opt_string(src, item, "structured_inherits")?;
    let precomputed = match item.get("precomputed") {
        None => Vec::new(),
        Some(v) => match &v.value {
            Value::Seq(xs) => {
                xs.iter().map(|x| scalar(src, x, "precomputed").map(str::to_string)).collect::<Res<_>>()?
            }
            Value::Scalar { text, .. } => vec![text.clone()],
            Value::Map(_) => return Err(err(src, v, "`precomputed` must be a list")),
        },
    };
    let autogen = match item.get("autogen") {
        None => Vec::new(),
        Some(v) => {
            let text = scalar(src, v, "autogen")?;
            let mut names = Vec::new();
            for part in text.split(',') {
                let p = part.trim();
                names.push(OperatorName::parse(p).map_err(|e| {
                    Box::new(src.error(v.pos, text.len(), format!("invalid autogen name `{p}`: {}", e.message)))
                })?);
            }
            names
        }
    };
    let tags = match item.get("tags") {
        None => Vec::new(),
        Some(v) => match &v.value {
            Value::Scalar { text, .. } => vec![text.clone()],
            Value::Seq(xs) => xs.iter().map(|x| scalar(src, x, "tags").map(str::to_string)).collect::<Res<_>>()?,
            Value::Map(_) => {
                return Err(err(src, v, "`tags` must be a string or a list of strings"));
            }
        },
    };
    // torchgen keeps tags as a set; the reference lists them sorted.
    let mut tags = tags;
    tags.sort();
    tags.dedup();
    let device_check = match item.get("device_check") {
        None => None,
        Some(v) => {
            let s = scalar(src, v, "device_check")?;
            if s != "NoCheck" && s != "ExactSame" {
                return Err(err(src, v, format!("invalid device_check `{s}` (expected NoCheck or ExactSame)")));
            }
            Some(s.to_string())
        }
    };
    let device_guard = match item.get("device_guard") {
        Some(v) => Some(boolean(src, v, "device_guard")?),
        None => None,
    };
    let manual_kernel_registration = match item.get("manual_kernel_registration") {
        Some(v) => boolean(src, v, "manual_kernel_registration")?,
        None => false,
    };
    let manual_cpp_binding = match item.get("manual_cpp_binding") {
        Some(v) => boolean(src, v, "manual_cpp_binding")?,
        None => false,
    };
    let use_const_ref_for_mutable_tensors = match item.get("use_const_ref_for_mutable_tensors") {
        Some(v) => boolean(src, v, "use_const_ref_for_mutable_tensors")?,
        None => false,
    };
    let cpp_no_default_args = match item.get("cpp_no_default_args") {
        None => Vec::new(),
        Some(v) => match &v.value {
            Value::Seq(xs) => {
                xs.iter().map(|x| scalar(src, x, "cpp_no_default_args").map(str::to_string)).collect::<Res<_>>()?
            }
            Value::Scalar { text, .. } => vec![text.clone()],
            Value::Map(_) => return Err(err(src, v, "`cpp_no_default_args` must be a list")),
        },
    };
    let mut ufunc_inner_loop = BTreeMap::new();
    if let Some(v) = item.get("ufunc_inner_loop") {
        let Some(m) = v.as_map() else {
            return Err(err(src, v, "`ufunc_inner_loop` must be a mapping"));
        };
        for (k, val) in m {
            ufunc_inner_loop.insert(
                scalar(src, k, "ufunc_inner_loop")?.to_string(),
                scalar(src, val, "ufunc_inner_loop")?.to_string(),
            );
        }
        if !structured {
            return Err(err(src, v, "ufunc_inner_loop requires `structured: True`"));
        }
    }

    let mut dispatch = BTreeMap::new();
    let mut dispatch_defaulted = false;
    match item.get("dispatch") {
        Some(v) => {
            let Some(m) = v.as_map() else {
                return Err(err(
                    src,
                    v,
                    format!("`dispatch` must be a mapping of dispatch keys to kernel names, found {}", v.kind_name()),
                ));
            };
            if manual_kernel_registration {
                return Err(err(src, v, "cannot specify both manual_kernel_registration and dispatch"));
            }
            for (k, val) in m {
                let keys = scalar(src, k, "dispatch key")?;
                let kernel = scalar(src, val, "dispatch kernel")?;
                for key in keys.split(',') {
                    let key = key.trim();
                    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                        return Err(err(src, k, format!("invalid dispatch key `{key}`")));
                    }
                    dispatch.insert(key.to_string(), kernel.to_string());
                }
            }
        }
        None => {
            if !structured && structured_delegate.is_none() {
                dispatch.insert("CompositeImplicitAutograd".to_string(), cpp_name(&func));
                dispatch_defaulted = true;
            }
        }
    }
    if !ufunc_inner_loop.is_empty() {
        for key in ["CPU", "CUDA"] {
            if dispatch.contains_key(key) {
                return Err(err(
                    src,
                    item.get("dispatch").unwrap_or(item),
                    format!("ufunc should not have explicit dispatch entry for {key}"),
                ));
            }
            dispatch.insert(key.to_string(), format!("ufunc_{}", key.to_ascii_lowercase()));
        }
    }

    Ok(NativeFunction {
        func,
        dispatch,
        dispatch_defaulted,
        tags,
        variants,
        structured,
        structured_delegate,
        structured_inherits,
        precomputed,
        autogen,
        generated: false,
        python_module: opt_string(src, item, "python_module")?,
        category_override: opt_string(src, item, "category_override")?,
        device_check,
        device_guard,
        manual_kernel_registration,
        manual_cpp_binding,
        cpp_no_default_args,
        use_const_ref_for_mutable_tensors,
        ufunc_inner_loop,
        line,
    })
}

fn opt_string(src: &SourceFile, item: &Node, key: &str) -> Res<Option<String>> {
    match item.get(key) {
        None => Ok(None),
        Some(v) => Ok(Some(scalar(src, v, key)?.to_string())),
    }
}

/// torchgen's `cpp.name(func)`: the C++ function name of an operator.
pub fn cpp_name(func: &FunctionSchema) -> String {
    let base = func.name.base();
    let mut name = base.to_string();
    if base.functional_overload {
        name = format!("{}_functional", base.base);
    }
    if func.kind() == SchemaKind::Out || func.kind() == SchemaKind::Scratch {
        name.push_str("_out");
    }
    name
}

// ---------------------------------------------------------------------------------------------
// autogen expansion (torchgen/native_function_generation.py)
// ---------------------------------------------------------------------------------------------

fn strip_arg(a: &Argument, strip_default: bool) -> Argument {
    Argument {
        name: a.name.clone(),
        ty: a.ty.clone(),
        annotation: None,
        default: if strip_default { None } else { a.default.clone() },
    }
}

/// torchgen's `Arguments.signature()`: annotations stripped, TensorOptions and out= dropped.
fn arguments_signature(args: &Arguments, strip_default: bool) -> Arguments {
    let mut kw: Vec<Argument> = Vec::new();
    let to = args.tensor_options_range();
    for (i, a) in args.kwarg_only.iter().enumerate() {
        if let Some(start) = to
            && i >= start
            && i < start + 4
        {
            continue;
        }
        kw.push(strip_arg(a, strip_default));
    }
    Arguments {
        positional: args.positional.iter().map(|a| strip_arg(a, strip_default)).collect(),
        kwarg_only: kw,
        out: Vec::new(),
    }
}

/// torchgen's `FunctionSchema.signature()`: the key that groups functional, inplace, out= and
/// mutable variants of the same operator.
pub fn signature(func: &FunctionSchema, keep_return_names: bool) -> FunctionSchema {
    let bn = func.name.base();
    let args = &func.arguments;
    let self_arg: Vec<&Argument> = args.self_index().map(|i| &args.positional[i]).into_iter().collect();
    let post_self: &[Argument] = match args.self_index() {
        Some(i) => &args.positional[i + 1..],
        None => &args.positional[..],
    };
    let mut returns: Vec<Return> = func
        .returns
        .iter()
        .map(|r| Return {
            name: if keep_return_names { r.name.clone() } else { None },
            ty: r.ty.clone(),
            annotation: None,
        })
        .collect();
    for a in self_arg.into_iter().chain(args.out.iter()).chain(post_self.iter()) {
        if let Some(ann) = &a.annotation
            && ann.is_write
            && !func.returns.iter().any(|r| r.annotation.as_ref() == Some(ann))
        {
            returns.push(Return {
                name: if keep_return_names { Some(format!("{}_out", a.name)) } else { None },
                ty: a.ty.clone(),
                annotation: None,
            });
        }
    }
    let mut args_sig = arguments_signature(args, false);
    if func.name.to_string() == "bernoulli.p" {
        for a in &mut args_sig.positional {
            if a.name == "p" && a.default.is_none() {
                a.default =
                    Some(crate::schema::Default { text: "0.5".into(), value: crate::schema::DefaultValue::Float(0.5) });
            }
        }
    }
    let name = BaseName { base: bn.base.clone(), inplace: false, dunder: bn.dunder, functional_overload: false };
    FunctionSchema { name: OperatorName::new(name.to_string(), ""), arguments: args_sig, returns }
}

fn with_overload_out(name: &OperatorName, remove_inplace: bool) -> OperatorName {
    let base = if remove_inplace {
        let b = name.base();
        BaseName { inplace: false, ..b }.to_string()
    } else {
        name.name.clone()
    };
    let overload = if name.overload.is_empty() { "out".to_string() } else { format!("{}_out", name.overload) };
    OperatorName::new(base, overload)
}

fn generate_out_args(func: &FunctionSchema) -> (Vec<Return>, Vec<Argument>) {
    let used: Vec<String> =
        func.arguments.all().filter_map(|a| a.annotation.as_ref()).flat_map(|a| a.alias_set.iter().cloned()).collect();
    let valid: Vec<char> = ('a'..='z').filter(|c| !used.iter().any(|u| u.len() == 1 && u.starts_with(*c))).collect();
    let all_tensors = func.returns.iter().all(|r| r.ty == Type::Base(crate::schema::BaseTy::Tensor));
    let mut new_returns = Vec::new();
    let mut new_out = Vec::new();
    for (i, r) in func.returns.iter().enumerate() {
        if r.ty.is_tensor_like() {
            let letter = valid.get(i).copied().unwrap_or('z');
            let ann = Annotation { alias_set: vec![letter.to_string()], is_write: true, alias_set_after: Vec::new() };
            let name = if func.returns.len() == 1 { "out".to_string() } else { format!("out{i}") };
            new_out.push(Argument { name, ty: r.ty.clone(), annotation: Some(ann.clone()), default: None });
            if all_tensors {
                new_returns.push(Return { name: None, ty: r.ty.clone(), annotation: Some(ann) });
            }
        } else {
            new_returns.push(r.clone());
        }
    }
    (new_returns, new_out)
}

fn to_out_signature(func: &FunctionSchema) -> Option<FunctionSchema> {
    match func.kind() {
        SchemaKind::Inplace => {
            let si = func.arguments.self_index()?;
            let self_arg = &func.arguments.positional[si];
            let mut arguments = func.arguments.clone();
            arguments.positional[si].annotation = None;
            arguments.out = vec![Argument {
                name: "out".into(),
                ty: self_arg.ty.clone(),
                annotation: self_arg.annotation.clone(),
                default: None,
            }];
            Some(FunctionSchema { name: with_overload_out(&func.name, true), arguments, returns: func.returns.clone() })
        }
        SchemaKind::Mutable => {
            let (returns, out) = generate_out_args(func);
            let mut arguments = func.arguments.clone();
            arguments.out = out;
            Some(FunctionSchema { name: with_overload_out(&func.name, true), arguments, returns })
        }
        SchemaKind::Functional => {
            let (returns, out) = generate_out_args(func);
            let mut arguments = arguments_signature(&func.arguments, false);
            arguments.out = out;
            Some(FunctionSchema { name: with_overload_out(&func.name, false), arguments, returns })
        }
        SchemaKind::Out | SchemaKind::Scratch => None,
    }
}

fn to_functional_signature(func: &FunctionSchema) -> FunctionSchema {
    let sig = signature(func, true);
    let bn = func.name.base();
    let name = BaseName {
        base: bn.base.clone(),
        inplace: false,
        dunder: bn.dunder,
        functional_overload: func.kind() == SchemaKind::Mutable,
    };
    FunctionSchema {
        name: OperatorName::new(name.to_string(), func.name.overload.clone()),
        arguments: sig.arguments,
        returns: sig.returns,
    }
}

/// Tags a generated operator inherits from its source (torchgen: nondeterministic_seeded,
/// view_copy, pt2_compliant_tag), plus `generated`; sorted like Python's sorted(set).
fn generated_tags(f: &NativeFunction, func: &FunctionSchema, tg: TorchgenVersion) -> Vec<String> {
    let mut t: Vec<String> = vec!["generated".into()];
    if tg.generated_out_gets_out_tag() && func.kind() == SchemaKind::Out {
        t.push("out".into());
    }
    for keep in ["nondeterministic_seeded", "view_copy", "pt2_compliant_tag"] {
        if f.tags.iter().any(|x| x == keep) {
            t.push(keep.into());
        }
    }
    t.sort();
    t
}

fn generate_function(f: &NativeFunction, func: FunctionSchema, tg: TorchgenVersion) -> NativeFunction {
    let mut dispatch = BTreeMap::new();
    let kernel = if func.kind() == SchemaKind::Out {
        let n = &func.name;
        if n.overload.is_empty() { n.name.clone() } else { format!("{}_{}", n.name, n.overload) }
    } else {
        cpp_name(&func)
    };
    let kernel = if f.func.has_symint() { format!("{kernel}_symint") } else { kernel };
    dispatch.insert("CompositeExplicitAutograd".to_string(), kernel);
    let tags = generated_tags(f, &func, tg);
    NativeFunction {
        func,
        dispatch,
        dispatch_defaulted: false,
        tags,
        variants: vec![Variant::Function],
        structured: false,
        structured_delegate: None,
        structured_inherits: None,
        precomputed: Vec::new(),
        autogen: Vec::new(),
        generated: true,
        python_module: None,
        category_override: None,
        device_check: Some("NoCheck".into()),
        device_guard: Some(false),
        manual_kernel_registration: false,
        manual_cpp_binding: false,
        cpp_no_default_args: Vec::new(),
        use_const_ref_for_mutable_tensors: f.use_const_ref_for_mutable_tensors,
        ufunc_inner_loop: BTreeMap::new(),
        line: f.line,
    }
}

/// Groups functions by signature and creates the out= and functional variants torchgen
/// generates (`add_generated_native_functions`).
fn add_generated_native_functions(rs: &mut Vec<NativeFunction>, tg: TorchgenVersion) {
    // signature text -> (kind -> index), in first-seen order
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, BTreeMap<SchemaKind, usize>> = HashMap::new();
    for (i, f) in rs.iter().enumerate() {
        let key = signature(&f.func, false).to_string();
        let g = groups.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            BTreeMap::new()
        });
        g.entry(f.func.kind()).or_insert(i);
    }
    let mut generated = Vec::new();
    for key in order {
        let Some(d) = groups.get(&key) else { continue };
        let has = |k: SchemaKind| d.contains_key(&k);
        let (has_functional, has_inplace, has_mutable, has_out) =
            (has(SchemaKind::Functional), has(SchemaKind::Inplace), has(SchemaKind::Mutable), has(SchemaKind::Out));
        if !(has_mutable || has_inplace || has_out || has_functional) {
            continue;
        }
        let fns: Vec<&NativeFunction> = d.values().map(|&i| &rs[i]).collect();
        let is_core = fns.iter().any(|f| f.tags.iter().any(|t| t == "core"));
        let are_manual = fns.iter().all(|f| f.manual_cpp_binding);
        let has_view_ops = fns.iter().any(|f| f.is_view_op() && f.func.name.name != "set_");
        let are_composite_implicit = fns.iter().all(|f| f.has_composite_implicit_autograd_kernel());
        let skip_composite = are_composite_implicit && !(is_core && tg.core_composite_implicit_gets_variants());
        if are_manual || has_view_ops || skip_composite {
            continue;
        }
        if has_out && d.len() == 1 {
            continue;
        }
        // torchgen prefers the in-place variant; a group that has both an in-place and a
        // mutable variant (rrelu_with_noise since 2.6) generates from the mutable one.
        let base_idx = if has_mutable {
            d[&SchemaKind::Mutable]
        } else if has_inplace {
            d[&SchemaKind::Inplace]
        } else if has_out {
            d[&SchemaKind::Out]
        } else {
            d[&SchemaKind::Functional]
        };
        let base_fn = &rs[base_idx];
        let base_fn_valid =
            base_fn.func.kind() == SchemaKind::Inplace || base_fn.func.returns.iter().any(|r| r.ty.is_tensor_like());
        let needs_out = base_fn.autogen.iter().any(|n| n.to_string().contains("out"));
        let gets_out_variant = !has_out && base_fn_valid && needs_out;
        if gets_out_variant && let Some(out_sig) = to_out_signature(&base_fn.func) {
            generated.push(generate_function(base_fn, out_sig, tg));
        }
        if !has_functional && (has_out || gets_out_variant) {
            let fsig = to_functional_signature(&base_fn.func);
            generated.push(generate_function(base_fn, fsig, tg));
        }
    }
    rs.extend(generated);
}
