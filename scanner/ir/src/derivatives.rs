//! `derivatives.yaml` -> derivative entries matched to registry operators.
//!
//! Follows PyTorch's `tools/autograd/load_derivatives.py` (shipped in wheels as
//! `torchgen/packaged/autograd/load_derivatives.py`), and produces what its `load_derivatives`
//! returns, one [`Derivative`] per (operator, dispatch key):
//!
//! - Each entry's `name:` must be the exact canonical schema text of an operator of the registry
//!   (view-copy operators included). The entry then belongs to the *canonical* function of that
//!   operator's signature group (torchgen's `canonical_function`: usually the operator itself).
//! - An entry without `dispatch:` is the `Default` dispatch key; with `dispatch:`, each key
//!   (`Default` or an `Autograd*` key such as `AutogradNestedTensor`) holds its own formulas and
//!   gives its own [`Derivative`]. `output_differentiability` stays at the top level and is a
//!   list of booleans or a single condition string (then it reads as `[True]`).
//! - Keys are processed in sorted order, as torchgen does. A key whose first name is an argument
//!   of the operator (its C++ arguments: `options` for the TensorOptions group) holds a backward
//!   formula for those inputs, or `non_differentiable`; any other key names outputs (`result`,
//!   `resultN` or return names) and holds a forward-mode formula. `auto_element_wise` and
//!   `auto_linear` forward formulas are expanded exactly as torchgen expands them.
//! - Saved variables are inferred from the formulas with torchgen's `saved_variables` rules: the
//!   table of cheap replacements (`x.sym_sizes()` -> `x_sym_sizes`, `x.scalar_type()` ->
//!   `x_scalar_type`, `x.sym_size(-1)` -> `x_sym_argsize_minus_1`, `zeros_like(x)` -> `x_info`,
//!   `to_args_sizes(xs)` -> `xs_args_sizes`, ...), then every input (output) still referenced as
//!   an identifier is saved whole. The matching is hand-written and reproduces Python `re`
//!   semantics of torchgen's patterns, quirks included (the `.` before a method name matches any
//!   character; `(^|\W)name($|\W)` consumes its delimiters, so `x*x` substitutes only once).
//! - Like torchgen's `add_view_copy_derivatives`, every view operator's entry is copied to its
//!   `{view}_copy` operator unless the yaml defines that one itself ([`Derivative::view_copy_of`]).
//! - torchgen's consistency checks are errors here, with the file position: unknown schema, bad
//!   keys, formula keys naming neither an argument nor an output, `grads`/`grad` misuse,
//!   out-of-bounds `grads[i]`, `.sizes()`/`.strides()`/`.size(int)` in formulas, and the
//!   `auto_element_wise`/`auto_linear` preconditions.
//!
//! In-place and out= variants get no entry here: torchgen's `load_derivatives` does not create
//! them either (`gen_autograd` matches them to the functional entry later).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use serde::{Deserialize, Serialize};

use crate::error::{SourceError, SourceFile};
use crate::registry::{NativeFunction, Registry, TorchgenVersion, Variant, parse_yaml, signature};
use crate::schema::{BaseName, BaseTy, FunctionSchema, OperatorName, SchemaKind, Type};
use crate::yaml::{Node, Value};

type Res<T> = Result<T, Box<SourceError>>;

/// A backward formula for one group of inputs (one key of the entry, e.g. `self, other`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardFormula {
    /// The inputs this formula computes gradients for, as written in the key.
    pub inputs: Vec<String>,
    /// The formula as written (torchgen's `original_formula`).
    pub formula: String,
    /// The formula with the saved-variable replacements applied (torchgen's `formula`, what the
    /// generated backward function evaluates: `self.sym_sizes()` -> `self_sym_sizes`, ...).
    pub rewritten: String,
    /// Inputs (or facts about inputs) this formula needs saved, in torchgen's order, deduplicated.
    pub saved_inputs: Vec<String>,
    /// Outputs (or facts about outputs) this formula needs saved, in torchgen's order, deduplicated.
    pub saved_outputs: Vec<String>,
}

/// How a forward-mode formula was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardKind {
    /// An explicit formula.
    Formula,
    /// `auto_element_wise`: derived from the single backward formula.
    AutoElementWise,
    /// `auto_linear`: the operator applied to the tangents.
    AutoLinear,
}

/// A forward-mode formula for one group of outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForwardFormula {
    /// Output names as written in the key (`result`, `result1`, a return name).
    pub outputs: Vec<String>,
    /// The final formula (`auto_element_wise` / `auto_linear` expanded, as torchgen does).
    pub formula: String,
    pub kind: ForwardKind,
}

/// One derivative definition: an operator's autograd formulas for one dispatch key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derivative {
    /// The operator this entry resolves to (torchgen's `info.func`).
    pub op: OperatorName,
    /// The `name:` text as written (for a generated view-copy entry: the view's text).
    pub schema: String,
    /// `Default`, or the autograd dispatch key of a `dispatch:` sub-map (`AutogradNestedTensor`).
    pub dispatch_key: String,
    /// Backward formulas, in torchgen's order (keys sorted).
    pub formulas: Vec<BackwardFormula>,
    /// Inputs declared `non_differentiable`.
    pub non_differentiable: Vec<String>,
    /// Forward-mode formulas, in torchgen's order (keys sorted).
    pub forward: Vec<ForwardFormula>,
    /// `output_differentiability` (a condition string reads as `[true]`).
    pub output_differentiability: Option<Vec<bool>>,
    /// The condition of `output_differentiability: ["cond"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_differentiability_conditions: Option<Vec<String>>,
    /// Inputs with a backward formula, in argument order.
    pub args_with_derivatives: Vec<String>,
    /// All saved inputs of all formulas, in torchgen's order, deduplicated.
    pub saved_inputs: Vec<String>,
    /// All saved outputs of all formulas, in torchgen's order, deduplicated.
    pub saved_outputs: Vec<String>,
    /// For an entry generated for a `{view}_copy` operator: the view operator it was copied from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_copy_of: Option<OperatorName>,
    /// Line of the entry's `name:` in derivatives.yaml.
    pub line: u32,
}

// ---------------------------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------------------------

fn err(src: &SourceFile, node: &Node, msg: impl Into<String>) -> Box<SourceError> {
    let len = match &node.value {
        Value::Scalar { text, .. } => text.len().max(1),
        _ => 1,
    };
    Box::new(src.error(node.pos, len, msg))
}

fn scalar_text<'n>(src: &SourceFile, node: &'n Node, what: impl Fn() -> String) -> Res<&'n str> {
    match &node.value {
        Value::Scalar { text, .. } if !node.is_null() => Ok(text),
        Value::Scalar { .. } => Err(err(src, node, format!("{} is empty", what()))),
        _ => Err(err(src, node, format!("{} must be a string, found {}", what(), node.kind_name()))),
    }
}

// ---------------------------------------------------------------------------------------------
// registry lookups
// ---------------------------------------------------------------------------------------------

/// torchgen's `strip_view_copy_name` on a base name.
fn strip_view_copy(base: &str) -> Cow<'_, str> {
    if base.ends_with("_copy") {
        Cow::Owned(base.replace("_copy", ""))
    } else if base.ends_with("_scatter") {
        Cow::Owned(base.replace("scatter", "inverse"))
    } else {
        Cow::Borrowed(base)
    }
}

/// (view-copy-stripped base name, dunder) of an operator name, as [`BaseName::of`] splits it,
/// without allocating in the common case.
fn stem(name: &str) -> (Cow<'_, str>, bool) {
    if name.len() > 4 && name.starts_with("__") && name.ends_with("__") {
        let bn = BaseName::of(name);
        if bn.dunder {
            return (Cow::Owned(strip_view_copy(&bn.base).into_owned()), true);
        }
    }
    let base = match name.strip_suffix('_') {
        Some(b) => b,
        None => name.strip_suffix("_functional").unwrap_or(name),
    };
    (strip_view_copy(base), false)
}

/// FNV-1a: the index keys are short operator names; no untrusted-input DoS concern here.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// Signature texts, computed on demand and cached.
struct Sigs<'r> {
    reg: &'r Registry,
    /// (signature text, view-signature text) per function.
    cache: Vec<Option<(String, String)>>,
}

impl<'r> Sigs<'r> {
    fn new(reg: &'r Registry) -> Self {
        Sigs { reg, cache: vec![None; reg.functions.len()] }
    }
    fn get(&mut self, i: usize) -> &(String, String) {
        self.cache[i].get_or_insert_with(|| {
            let func = &self.reg.functions[i].func;
            let sig = signature(func, false);
            let text = sig.to_string();
            let name_len = sig.name.to_string().len();
            let bn = func.name.base();
            let view_name = BaseName {
                base: strip_view_copy(&bn.base).into_owned(),
                inplace: false,
                dunder: bn.dunder,
                functional_overload: false,
            };
            let view = format!("{view_name}{}", text.get(name_len..).unwrap_or(""));
            (text, view)
        })
    }
    fn sig(&mut self, i: usize) -> &str {
        &self.get(i).0
    }
    fn view_sig(&mut self, i: usize) -> &str {
        &self.get(i).1
    }
}

struct Index<'r> {
    reg: &'r Registry,
    by_name: FastMap<(&'r str, &'r str), usize>,
    /// base name as written (`add`, `add_`) -> functions, in registry order.
    by_base: FastMap<&'r str, Vec<usize>>,
    /// (view-copy-stripped stem, dunder) -> functions, in registry order. Every member of a
    /// signature group (same stem) and of a view group (same stripped stem) is in one bucket.
    by_stem: FastMap<(Cow<'r, str>, bool), Vec<usize>>,
}

impl<'r> Index<'r> {
    fn new(reg: &'r Registry) -> Self {
        let n = reg.functions.len();
        let mut by_name = FastMap::with_capacity_and_hasher(n, Default::default());
        let mut by_base: FastMap<&str, Vec<usize>> = FastMap::with_capacity_and_hasher(n, Default::default());
        let mut by_stem: FastMap<(Cow<'r, str>, bool), Vec<usize>> =
            FastMap::with_capacity_and_hasher(n, Default::default());
        for (i, f) in reg.functions.iter().enumerate() {
            let name = f.func.name.name.as_str();
            by_name.entry((name, f.func.name.overload.as_str())).or_insert(i);
            by_base.entry(name).or_default().push(i);
            by_stem.entry(stem(name)).or_default().push(i);
        }
        Index { reg, by_name, by_base, by_stem }
    }
    fn stem_bucket(&self, i: usize) -> Option<&Vec<usize>> {
        self.by_stem.get(&stem(&self.reg.functions[i].func.name.name))
    }
}

/// `value.to_string() == expected`, without building the string.
fn displays_as(value: &impl std::fmt::Display, expected: &str) -> bool {
    struct Cmp<'a>(&'a str);
    impl std::fmt::Write for Cmp<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            match self.0.strip_prefix(s) {
                Some(rest) => {
                    self.0 = rest;
                    Ok(())
                }
                None => Err(std::fmt::Error),
            }
        }
    }
    let mut c = Cmp(expected);
    std::fmt::write(&mut c, format_args!("{value}")).is_ok() && c.0.is_empty()
}

/// torchgen's `is_functional_fn`.
fn is_functional_fn(f: &FunctionSchema) -> bool {
    f.name.overload.contains("functional")
}

/// torchgen's `canonical_function`: the first function of `schema_fn`'s signature group whose
/// base name is the entry's name and that is neither out= nor a `.functional` overload (usually
/// `schema_fn` itself), else the group's first function when the entry names an operator that
/// only has an in-place variant.
fn canonical_function(idx: &Index<'_>, sigs: &mut Sigs<'_>, schema_fn: usize, defn_name: &str) -> Option<usize> {
    let fns = &idx.reg.functions;
    let qualifies = |i: usize| {
        let f = &fns[i].func;
        !is_functional_fn(f) && f.arguments.out.is_empty() && f.name.name == defn_name
    };
    let empty = Vec::new();
    if qualifies(schema_fn) {
        // Only an earlier qualifying member of the same group could take precedence; those all
        // have the base name `defn_name`: compare the signatures of those few only.
        for &i in idx.by_base.get(defn_name).unwrap_or(&empty) {
            if i == schema_fn {
                break;
            }
            if qualifies(i) {
                let sig = sigs.sig(schema_fn).to_string();
                if sigs.sig(i) == sig {
                    return Some(i);
                }
            }
        }
        return Some(schema_fn);
    }
    let bucket = idx.stem_bucket(schema_fn).unwrap_or(&empty);
    let sig = sigs.sig(schema_fn).to_string();
    let mut first = None;
    for &i in bucket {
        if sigs.sig(i) != sig {
            continue;
        }
        first.get_or_insert(i);
        if qualifies(i) {
            return Some(i);
        }
    }
    // "some functions only have in-place variants"
    let first = first?;
    (format!("{defn_name}_") == crate::registry::cpp_name(&fns[first].func)).then_some(first)
}

/// The `{view}_copy` operator of a view operator (torchgen's `NativeFunctionsViewGroup.view_copy`).
fn view_copy_of(idx: &Index<'_>, sigs: &mut Sigs<'_>, view: usize) -> Option<usize> {
    let vf = &idx.reg.functions[view];
    if !vf.is_view_op() || vf.func.name.base().inplace {
        return None;
    }
    let vsig = sigs.view_sig(view).to_string();
    let bucket = idx.stem_bucket(view)?;
    // The group's aliasing member must be this view (torchgen asserts it is unique).
    let mut copy = None;
    for &i in bucket {
        if sigs.view_sig(i) != vsig {
            continue;
        }
        let f = &idx.reg.functions[i];
        if f.is_view_op() {
            if !f.func.name.base().inplace && i != view {
                return None;
            }
        } else if f.func.kind() == SchemaKind::Functional && copy.is_none() {
            copy = Some(i);
        }
    }
    copy
}

// ---------------------------------------------------------------------------------------------
// C++ arguments and returns (torchgen.api.cpp, non-faithful signature, method=False)
// ---------------------------------------------------------------------------------------------

struct CppArg<'a> {
    /// Binding name (`options` for the TensorOptions group).
    name: &'a str,
    /// The name saved_variables searches for (torchgen's `nctype.name`: `memory_format` next to
    /// TensorOptions is the special `possibly_redundant_memory_format`).
    saved_name: &'a str,
    /// `str?`: torchgen rewrites its uses to a `string_view` optional.
    optional_string: bool,
    /// `Tensor[]`: forward formulas may use its base name.
    tensor_list: bool,
}

fn cpp_arguments(f: &FunctionSchema) -> Vec<CppArg<'_>> {
    let args = &f.arguments;
    let to = args.tensor_options_range();
    let mut out = Vec::with_capacity(args.len());
    fn plain(a: &crate::schema::Argument, special_mf: bool) -> CppArg<'_> {
        CppArg {
            name: &a.name,
            saved_name: if special_mf && a.name == "memory_format" {
                "possibly_redundant_memory_format"
            } else {
                &a.name
            },
            optional_string: matches!(&a.ty, Type::Optional(t) if **t == Type::Base(BaseTy::Str)),
            tensor_list: matches!(&a.ty, Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor)),
        }
    }
    let has_to = to.is_some();
    for a in args.out.iter().chain(&args.positional) {
        out.push(plain(a, has_to));
    }
    for (i, a) in args.kwarg_only.iter().enumerate() {
        match to {
            Some(s) if i == s => {
                out.push(CppArg { name: "options", saved_name: "options", optional_string: false, tensor_list: false })
            }
            Some(s) if i > s && i < s + 4 => {}
            _ => out.push(plain(a, has_to)),
        }
    }
    out
}

/// torchgen's `cpp.return_names`, with `self` read as `result` (create_derivative).
fn return_names(f: &FunctionSchema) -> Vec<String> {
    let inplace = f.name.base().inplace;
    let is_out = !f.arguments.out.is_empty();
    let n = f.returns.len();
    f.returns
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let name = if inplace {
                "self".to_string()
            } else if is_out {
                f.arguments.out.get(i).map(|a| a.name.clone()).unwrap_or_else(|| format!("result{i}"))
            } else if let Some(rn) = &r.name {
                if f.arguments.all().any(|a| &a.name == rn) { format!("{rn}_return") } else { rn.clone() }
            } else if n == 1 {
                "result".to_string()
            } else {
                format!("result{i}")
            };
            if name == "self" { "result".to_string() } else { name }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Python `re` emulation for torchgen's patterns
// ---------------------------------------------------------------------------------------------

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|t| t.chars().next())
}

/// One match of `(^|\W)NAME($|\W)`: (match start, name start, name end, match end).
fn ident_find(s: &str, name: &str, from: usize) -> Option<(usize, usize, usize, usize)> {
    if name.is_empty() {
        return None;
    }
    let mut j = from;
    while let Some(off) = s.get(j..).and_then(|t| t.find(name)) {
        let ns = j + off;
        let ne = ns + name.len();
        let start = if ns == 0 {
            Some(0)
        } else {
            s[..ns].chars().next_back().filter(|c| !is_word(*c)).map(|c| ns - c.len_utf8()).filter(|p| *p >= from)
        };
        if let Some(start) = start {
            // `$` matches at the end or before a final newline; else one non-word char.
            let end = if ne == s.len() || (ne + 1 == s.len() && s.as_bytes()[ne] == b'\n') {
                Some(ne)
            } else {
                char_at(s, ne).filter(|c| !is_word(*c)).map(|c| ne + c.len_utf8())
            };
            if let Some(end) = end {
                return Some((start, ns, ne, end));
            }
        }
        // next candidate (names are ASCII identifiers in practice; stay on char boundaries)
        j = ns + s[ns..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// `re.search(IDENT_REGEX.format(name), s)`.
fn ident_search(s: &str, name: &str) -> bool {
    ident_find(s, name, 0).is_some()
}

/// `re.sub(IDENT_REGEX.format(name), lambda m: m[1] + repl + m[2], s)`.
fn ident_sub(s: &str, name: &str, repl: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut last = 0;
    let mut pos = 0;
    while let Some((_, ns, ne, end)) = ident_find(s, name, pos) {
        out.push_str(&s[last..ns]);
        out.push_str(repl);
        out.push_str(&s[ne..end]);
        last = end;
        pos = end;
        if end >= s.len() {
            break;
        }
    }
    out.push_str(&s[last..]);
    out
}

/// `len(re.findall(IDENT_REGEX.format(name), s))`.
fn ident_count(s: &str, name: &str) -> usize {
    let mut n = 0;
    let mut pos = 0;
    while let Some((_, _, _, end)) = ident_find(s, name, pos) {
        n += 1;
        pos = end;
        if end >= s.len() {
            break;
        }
    }
    n
}

/// `re.findall(r"(?:^|\W)grads\[(\d+)\]", s)` as integers (saturating).
fn used_gradient_indices(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    const PAT: &str = "grads[";
    while let Some(off) = s.get(pos..).and_then(|t| t.find(PAT)) {
        let ns = pos + off;
        let ok_start = ns == 0 || s[..ns].chars().next_back().is_some_and(|c| !is_word(c) && ns - c.len_utf8() >= pos);
        let ds = ns + PAT.len();
        let digits = s[ds..].bytes().take_while(u8::is_ascii_digit).count();
        if ok_start && digits > 0 && s.as_bytes().get(ds + digits) == Some(&b']') {
            let v = s[ds..ds + digits].parse::<usize>().unwrap_or(usize::MAX);
            out.push(v);
            pos = ds + digits + 1;
        } else {
            pos = ns + 1;
        }
    }
    out
}

/// The saved-variable replacement patterns of torchgen's `saved_variables`, in its order.
#[derive(Clone, Copy)]
enum Pat {
    /// `{name}.{method}()`: the name, any one character but a newline, then `tail`.
    Method(&'static str, &'static str),
    /// `{name}{tail}` literally.
    Exact(&'static str, &'static str),
    /// `{head}{name})`.
    Wrap(&'static str, &'static str),
    /// `zeros_like({name})` -> `{name}_info.zeros()`.
    ZerosLike,
    /// `{name}.sym_size(-?\w+)` -> `{name}_sym_argsize_{arg}`.
    SymSize,
    /// `{name}.sym_strides()`, only in a formula for that tensor alone.
    SymStrides,
    /// `{name}.sym_numel()` -> `{name}_sym_numel` (torchgen 2.2 and later; before, the whole
    /// tensor is saved).
    SymNumel,
}

const REPLACEMENTS: &[Pat] = &[
    Pat::Method("sym_sizes()", "_sym_sizes"),
    Pat::Exact("->sym_sizes()", "_sym_sizes_opt"),
    Pat::Method("sym_blocksize()", "_self_sym_blocksize_opt"),
    Pat::Method("options()", "_options"),
    Pat::ZerosLike,
    Pat::SymSize,
    Pat::Method("numel()", "_numel"),
    Pat::SymNumel,
    Pat::Wrap("to_args_sizes(", "_args_sizes"),
    Pat::Wrap("to_args_sizes_symint(", "_args_sizes_symint"),
    Pat::Wrap("to_args_scalartypes(", "_args_scalartypes"),
    Pat::Wrap("TensorGeometry(", "_geometry"),
    Pat::Method("scalar_type()", "_scalar_type"),
    Pat::Method("dim()", "_dim"),
    Pat::SymStrides,
    Pat::Method("layout()", "_layout"),
    Pat::Method("is_conj()", "_conjugate"),
];

/// Tries `pat` with `name` starting at `p`; returns (match end, saved name, replacement).
fn try_pat(s: &str, p: usize, name: &str, pat: Pat) -> Option<(usize, String, String)> {
    let rest = s.get(p..)?;
    let after_name = |rest: &str| -> Option<usize> { rest.starts_with(name).then_some(name.len()) };
    // name, one char that is not a newline, then tail
    let method = |tail: &str| -> Option<usize> {
        let n = after_name(rest)?;
        let c = rest[n..].chars().next().filter(|c| *c != '\n')?;
        let t = n + c.len_utf8();
        rest[t..].starts_with(tail).then_some(t + tail.len())
    };
    match pat {
        Pat::Method(tail, suffix) => {
            let len = method(tail)?;
            let saved = format!("{name}{suffix}");
            Some((p + len, saved.clone(), saved))
        }
        Pat::SymNumel => {
            let len = method("sym_numel()")?;
            let saved = format!("{name}_sym_numel");
            Some((p + len, saved.clone(), saved))
        }
        Pat::SymStrides => {
            let len = method("sym_strides()")?;
            let saved = format!("{name}_sym_strides");
            Some((p + len, saved.clone(), saved))
        }
        Pat::Exact(tail, suffix) => {
            let n = after_name(rest)?;
            rest[n..].starts_with(tail).then(|| {
                let saved = format!("{name}{suffix}");
                (p + n + tail.len(), saved.clone(), saved)
            })
        }
        Pat::Wrap(head, suffix) => {
            let r = rest.strip_prefix(head)?;
            let r = r.strip_prefix(name)?;
            r.starts_with(')').then(|| {
                let saved = format!("{name}{suffix}");
                (p + head.len() + name.len() + 1, saved.clone(), saved)
            })
        }
        Pat::ZerosLike => {
            let r = rest.strip_prefix("zeros_like(")?;
            let r = r.strip_prefix(name)?;
            r.starts_with(')').then(|| {
                (p + "zeros_like(".len() + name.len() + 1, format!("{name}_info"), format!("{name}_info.zeros()"))
            })
        }
        Pat::SymSize => {
            let len = method("sym_size(")?;
            let arg_start = len;
            let r = &rest[arg_start..];
            let minus = usize::from(r.starts_with('-'));
            let word: usize = r[minus..].chars().take_while(|c| is_word(*c)).map(char::len_utf8).sum();
            if word == 0 || !r[minus + word..].starts_with(')') {
                return None;
            }
            let arg = &r[..minus + word];
            let saved = format!("{name}_sym_argsize_{}", arg.replace('-', "minus_"));
            Some((p + arg_start + minus + word + 1, saved.clone(), saved))
        }
    }
}

/// The literal that every match of `pat` starts with, if not the name itself.
fn pat_head(pat: Pat) -> Option<&'static str> {
    match pat {
        Pat::Wrap(head, _) => Some(head),
        Pat::ZerosLike => Some("zeros_like("),
        _ => None,
    }
}

/// Start offsets of every (possibly overlapping) occurrence of `name` in `s`.
fn occurrences(s: &str, name: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(off) = s.get(pos..).and_then(|t| t.find(name)) {
        out.push(pos + off);
        pos += off + 1;
    }
    out
}

/// `re.sub(pattern.format(name), repl, s)` for one replacement pattern, given the occurrences
/// of `name` in `s` (every match contains one); appends saved names.
fn apply_pat(
    s: &str,
    occ: &[usize],
    name: &str,
    pat: Pat,
    var_names: &[String],
    saved: &mut Vec<String>,
) -> Result<Option<String>, String> {
    let mut out: Option<String> = None;
    let mut last = 0;
    let mut pos = 0;
    for &o in occ {
        // leftmost-first, non-overlapping: match starts grow with the occurrences
        let p = match pat_head(pat) {
            Some(h) => match o.checked_sub(h.len()) {
                Some(p) if s.get(p..o) == Some(h) => p,
                _ => continue,
            },
            None => o,
        };
        if p < pos {
            continue;
        }
        if let Some((end, saved_name, repl)) = try_pat(s, p, name, pat) {
            if matches!(pat, Pat::SymStrides) && !(var_names.len() == 1 && var_names[0] == name) {
                return Err(format!(
                    "`{name}.sym_strides()` can only be used in the formula for `{name}` alone \
                     (torchgen replaces it by strides_or_error({name}))"
                ));
            }
            let o = out.get_or_insert_with(|| String::with_capacity(s.len()));
            o.push_str(&s[last..p]);
            o.push_str(&repl);
            saved.push(saved_name);
            last = end;
            pos = end;
        }
    }
    Ok(out.map(|mut o| {
        o.push_str(&s[last..]);
        o
    }))
}

/// `re.sub(rf"\b{name}\b", repl, s)`.
fn word_sub(s: &str, name: &str, repl: &str) -> String {
    let mut out = String::with_capacity(s.len() + repl.len());
    let mut last = 0;
    let mut pos = 0;
    while let Some(off) = s.get(pos..).and_then(|t| t.find(name)) {
        let ns = pos + off;
        let ne = ns + name.len();
        let before = s[..ns].chars().next_back().is_some_and(is_word);
        let after = char_at(s, ne).is_some_and(is_word);
        if !before && !after {
            out.push_str(&s[last..ns]);
            out.push_str(repl);
            last = ne;
            pos = ne;
        } else {
            pos = ns + 1;
        }
    }
    out.push_str(&s[last..]);
    out
}

struct NcType<'a> {
    name: &'a str,
    optional_string: bool,
}

/// torchgen's `saved_variables`: rewrites `formula` and lists what it needs saved.
fn saved_variables(
    formula: &str,
    nctypes: &[NcType<'_>],
    var_names: &[String],
    tg: TorchgenVersion,
) -> Result<(String, Vec<String>), String> {
    if formula.contains(".sizes()") || formula.contains("->sizes()") {
        return Err(".sizes() is not supported in derivative formulas; use .sym_sizes()".into());
    }
    if has_size_int(formula) {
        return Err(".size(int) is not supported in derivative formulas; use .sym_size(int)".into());
    }
    if formula.contains(".strides()") || formula.contains("->strides()") {
        return Err(".strides() is not supported in derivative formulas; use .sym_strides()".into());
    }
    let mut formula = formula.to_string();
    let mut saved = Vec::new();
    for nc in nctypes {
        let name = nc.name;
        if name.is_empty() {
            continue;
        }
        let mut occ = occurrences(&formula, name);
        if occ.is_empty() {
            continue;
        }
        for &pat in REPLACEMENTS {
            if matches!(pat, Pat::SymNumel) && tg < TorchgenVersion::new(2, 2) {
                continue;
            }
            if let Some(f) = apply_pat(&formula, &occ, name, pat, var_names, &mut saved)? {
                formula = f;
                occ = occurrences(&formula, name);
            }
        }
        if nc.optional_string {
            let repl =
                format!("{name}.has_value() ? ::std::optional<::std::string_view>({name}.value()) : ::std::nullopt");
            formula = word_sub(&formula, name, &repl);
        }
        if ident_search(&formula, name) {
            saved.push(name.to_string());
        }
    }
    Ok((formula, saved))
}

/// `re.search(r"\.size\([-]?\d+\)", f) or re.search(r"->size\([-]?\d+\)", f)`.
fn has_size_int(f: &str) -> bool {
    f.match_indices("size(").any(|(i, _)| {
        let pre = &f[..i];
        if !(pre.ends_with('.') || pre.ends_with("->")) {
            return false;
        }
        let r = &f[i + 5..];
        let r = r.strip_prefix('-').unwrap_or(r);
        let d = r.bytes().take_while(u8::is_ascii_digit).count();
        d > 0 && r[d..].starts_with(')')
    })
}

fn dedup(v: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    v.into_iter().filter(|x| seen.insert(x.clone())).collect()
}

// ---------------------------------------------------------------------------------------------
// loading
// ---------------------------------------------------------------------------------------------

/// Loads `derivatives.yaml` against the operator registry of the same PyTorch version,
/// following the newest torchgen.
pub fn load_derivatives(src: &SourceFile, registry: &Registry) -> Res<Vec<Derivative>> {
    load_derivatives_as(src, registry, TorchgenVersion::LATEST)
}

/// Like [`load_derivatives`], following the torchgen of version `tg` where it changed
/// (2.1 has no `sym_numel()` replacement: such formulas save the whole tensor).
pub fn load_derivatives_as(src: &SourceFile, registry: &Registry, tg: TorchgenVersion) -> Res<Vec<Derivative>> {
    let root = parse_yaml(src)?;
    if root.is_null() {
        return Ok(Vec::new());
    }
    let Some(items) = root.as_seq() else {
        return Err(err(
            src,
            &root,
            format!("derivatives.yaml must be a list of `- name:` entries, found {}", root.kind_name()),
        ));
    };
    let idx = Index::new(registry);
    let mut sigs = Sigs::new(registry);
    let mut out: Vec<Derivative> = Vec::with_capacity(items.len() + items.len() / 8);
    // canonical function -> (line of its entry, range in `out`)
    let mut entries: Vec<(usize, std::ops::Range<usize>)> = Vec::with_capacity(items.len());
    let mut seen: HashMap<usize, u32> = HashMap::with_capacity(items.len());
    for item in items {
        let (canonical, name_node, infos) = load_entry(src, item, &idx, &mut sigs, tg)?;
        if let Some(prev) = seen.insert(canonical, name_node.pos.line) {
            return Err(err(
                src,
                name_node,
                format!(
                    "derivatives for `{}` are already defined at line {prev}",
                    registry.functions[canonical].func.name
                ),
            ));
        }
        let start = out.len();
        out.extend(infos);
        entries.push((canonical, start..out.len()));
    }
    // add_view_copy_derivatives: prefer manually defined ones; a later view replaces an
    // earlier one's copy in place (Python dict update).
    let mut generated: Vec<Vec<Derivative>> = Vec::new();
    let mut generated_at: HashMap<usize, usize> = HashMap::new();
    for (canonical, range) in &entries {
        let Some(copy) = view_copy_of(&idx, &mut sigs, *canonical) else {
            continue;
        };
        if seen.contains_key(&copy) {
            continue;
        }
        let copy_name = &registry.functions[copy].func.name;
        let infos: Vec<Derivative> = out[range.clone()]
            .iter()
            .map(|d| Derivative { op: copy_name.clone(), view_copy_of: Some(d.op.clone()), ..d.clone() })
            .collect();
        match generated_at.get(&copy) {
            Some(&k) => generated[k] = infos,
            None => {
                generated_at.insert(copy, generated.len());
                generated.push(infos);
            }
        }
    }
    out.extend(generated.into_iter().flatten());
    Ok(out)
}

const TOP_KEYS: [&str; 3] = ["name", "dispatch", "output_differentiability"];

struct OutputDiff {
    values: Option<Vec<bool>>,
    conditions: Option<Vec<String>>,
}

fn load_output_differentiability(src: &SourceFile, node: Option<&Node>, with_dispatch: bool) -> Res<OutputDiff> {
    let Some(node) = node else {
        return Ok(OutputDiff { values: None, conditions: None });
    };
    let Some(xs) = node.as_seq() else {
        return Err(err(
            src,
            node,
            format!(
                "`output_differentiability` must be a list of True/False (or one condition string), found {}",
                node.kind_name()
            ),
        ));
    };
    let mut bools = Vec::with_capacity(xs.len());
    let mut conds = Vec::new();
    for x in xs {
        if let Some(b) = x.as_bool() {
            bools.push(b);
        } else if let Value::Scalar { text, plain: false } = &x.value {
            conds.push(text.clone());
        } else {
            return Err(err(src, x, "`output_differentiability` items must be True, False or a quoted condition"));
        }
    }
    if !conds.is_empty() {
        if xs.len() != 1 {
            return Err(err(
                src,
                node,
                "a condition in `output_differentiability` is only supported for single-output \
                 functions: use exactly one condition string",
            ));
        }
        return Ok(OutputDiff { values: Some(vec![true]), conditions: Some(conds) });
    }
    // Without `dispatch:`, torchgen drops an empty list (`if output_differentiability:`).
    if bools.is_empty() && !with_dispatch {
        return Ok(OutputDiff { values: None, conditions: None });
    }
    Ok(OutputDiff { values: Some(bools), conditions: None })
}

/// `split_name_params`: the base name of `name[.overload](...)`, and the operator name.
fn split_name(spec: &str) -> Option<(&str, &str)> {
    // the byte length of the leading word characters (whole characters: `\w` is Unicode-aware)
    let word_len = |s: &str| s.char_indices().find(|(_, c)| !is_word(*c)).map_or(s.len(), |(i, _)| i);
    let n = word_len(spec);
    if n == 0 {
        return None;
    }
    let name = &spec[..n];
    let rest = &spec[n..];
    let (overload, rest) = match rest.strip_prefix('.') {
        Some(r) => {
            let m = word_len(r);
            if m == 0 {
                return None;
            }
            (&r[..m], &r[m..])
        }
        None => ("", rest),
    };
    rest.starts_with('(').then_some((name, overload))
}

fn load_entry<'n>(
    src: &SourceFile,
    item: &'n Node,
    idx: &Index<'_>,
    sigs: &mut Sigs<'_>,
    tg: TorchgenVersion,
) -> Res<(usize, &'n Node, Vec<Derivative>)> {
    let Some(map) = item.as_map() else {
        return Err(err(
            src,
            item,
            format!("each derivatives.yaml entry must be a mapping with a `name:` key, found {}", item.kind_name()),
        ));
    };
    let mut keys_seen: HashMap<&str, u32> = HashMap::new();
    for (k, _) in map {
        let Some(key) = k.as_str() else {
            return Err(err(src, k, "keys must be strings"));
        };
        if let Some(prev) = keys_seen.insert(key, k.pos.line) {
            return Err(err(src, k, format!("key `{key}` appears twice in this entry (first at line {prev})")));
        }
    }
    let name_node = item.get("name").ok_or_else(|| err(src, item, "derivatives.yaml entry has no `name:` key"))?;
    let spec = scalar_text(src, name_node, || "`name`".into())?;
    let Some((defn_name, overload)) = split_name(spec) else {
        return Err(err(src, name_node, format!("`{spec}` is not a schema (`name[.overload](args) -> returns`)")));
    };
    let Some(&schema_fn) = idx.by_name.get(&(defn_name, overload)) else {
        let q = if overload.is_empty() { defn_name.to_string() } else { format!("{defn_name}.{overload}") };
        return Err(err(
            src,
            name_node,
            format!("could not find an operator for schema `{spec}`: no operator `{q}` in native_functions.yaml"),
        ));
    };
    if !displays_as(&idx.reg.functions[schema_fn].func, spec) {
        let actual = idx.reg.functions[schema_fn].func.to_string();
        return Err(err(
            src,
            name_node,
            format!(
                "could not find an operator for schema `{spec}`: the schema of `{}` is `{actual}`",
                idx.reg.functions[schema_fn].func.name
            ),
        ));
    }
    let Some(canonical) = canonical_function(idx, sigs, schema_fn, defn_name) else {
        return Err(err(
            src,
            name_node,
            format!(
                "no canonical (functional or in-place) function named `{defn_name}` in the signature group of `{spec}`"
            ),
        ));
    };
    let f = &idx.reg.functions[canonical];
    let args = cpp_arguments(&f.func);
    for bad in ["grad_input_mask", "result"] {
        if args.iter().any(|a| a.name == bad) {
            return Err(err(
                src,
                name_node,
                format!("`{defn_name}` has an argument named `{bad}`, which derivative formulas reserve"),
            ));
        }
    }

    let od_node = item.get("output_differentiability");
    let mut dispatch: Vec<(&Node, Vec<(&Node, &Node)>)> = Vec::new();
    match item.get("dispatch") {
        Some(d) => {
            let Some(dmap) = d.as_map() else {
                return Err(err(
                    src,
                    d,
                    format!("`dispatch` must map dispatch keys to formulas, found {}", d.kind_name()),
                ));
            };
            for (k, _) in map {
                if let Some(key) = k.as_str()
                    && !TOP_KEYS.contains(&key)
                {
                    return Err(err(
                        src,
                        k,
                        format!("key `{key}` next to `dispatch:`: formulas go under a dispatch key"),
                    ));
                }
            }
            let mut dseen = HashSet::new();
            for (k, v) in dmap {
                let Some(key) = k.as_str() else {
                    return Err(err(src, k, "dispatch keys must be strings"));
                };
                if key != "Default" && !key.starts_with("Autograd") {
                    return Err(err(
                        src,
                        k,
                        format!(
                            "invalid dispatch key `{key}` in derivatives.yaml: expected `Default` or an autograd key (`AutogradNestedTensor`, `AutogradCUDA`, ...)"
                        ),
                    ));
                }
                if !dseen.insert(key) {
                    return Err(err(src, k, format!("dispatch key `{key}` appears twice")));
                }
                let Some(defs) = v.as_map() else {
                    return Err(err(
                        src,
                        v,
                        format!("formulas for `{key}` must be a mapping, found {}", v.kind_name()),
                    ));
                };
                let mut fseen = HashSet::new();
                for (fk, _) in defs {
                    let Some(fkey) = fk.as_str() else {
                        return Err(err(src, fk, "keys must be strings"));
                    };
                    if !fseen.insert(fkey) {
                        return Err(err(src, fk, format!("key `{fkey}` appears twice")));
                    }
                }
                dispatch.push((k, defs.iter().map(|(a, b)| (a, b)).collect()));
            }
        }
        None => {
            let defs = map
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), Some("name" | "output_differentiability")))
                .map(|(a, b)| (a, b))
                .collect();
            dispatch.push((name_node, defs));
        }
    }
    let od = load_output_differentiability(src, od_node, item.get("dispatch").is_some())?;

    let ctx = EntryCtx { src, f, defn_name, args: &args, od: &od, tg };
    let mut infos = Vec::with_capacity(dispatch.len());
    for (key_node, defs) in &dispatch {
        let key = if item.get("dispatch").is_some() { key_node.as_str().unwrap_or("Default") } else { "Default" };
        let mut d = ctx.set_up_derivatives(defs, key_node)?;
        d.schema = spec.to_string();
        d.dispatch_key = key.to_string();
        d.line = name_node.pos.line;
        infos.push(d);
    }
    Ok((canonical, name_node, infos))
}

struct EntryCtx<'a> {
    src: &'a SourceFile,
    tg: TorchgenVersion,
    f: &'a NativeFunction,
    defn_name: &'a str,
    args: &'a [CppArg<'a>],
    od: &'a OutputDiff,
}

struct RawForward<'n> {
    key: &'n Node,
    outputs: Vec<String>,
    formula: String,
}

impl EntryCtx<'_> {
    fn set_up_derivatives(&self, defs: &[(&Node, &Node)], at: &Node) -> Res<Derivative> {
        let src = self.src;
        let func = &self.f.func;
        let all_arg_names: Vec<&str> = self.args.iter().map(|a| a.name).collect();
        let ret_names: Vec<Option<&str>> = func.returns.iter().map(|r| r.name.as_deref()).collect();
        let cpp_ret_names = return_names(func);
        let differentiability: Vec<bool> = match &self.od.values {
            Some(v) if !v.is_empty() => v.clone(),
            _ => vec![true; func.returns.len()],
        };
        let available_named_gradients: Vec<String> = func
            .returns
            .iter()
            .zip(&differentiability)
            .filter(|(r, d)| **d && r.ty.is_tensor_like())
            .filter_map(|(r, _)| r.name.as_ref().map(|n| format!("grad_{n}")))
            .collect();

        let mut sorted: Vec<(&str, &Node, &Node)> =
            defs.iter().filter_map(|(k, v)| k.as_str().map(|ks| (ks, *k, *v))).collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));

        let mut formulas: Vec<BackwardFormula> = Vec::new();
        let mut derivative_keys: Vec<&Node> = Vec::new();
        let mut used_named: Vec<bool> = Vec::new();
        let mut forwards: Vec<RawForward<'_>> = Vec::new();
        let mut non_differentiable: Vec<String> = Vec::new();
        let mut with_derivatives: Vec<&str> = Vec::new();
        let arg_nc: Vec<NcType<'_>> =
            self.args.iter().map(|a| NcType { name: a.saved_name, optional_string: a.optional_string }).collect();
        let ret_nc: Vec<NcType<'_>> =
            cpp_ret_names.iter().map(|n| NcType { name: n, optional_string: false }).collect();

        for (raw, key, value) in sorted {
            let names: Vec<String> = raw.split(',').map(|s| s.trim().to_string()).collect();
            if names.iter().any(String::is_empty) {
                return Err(err(src, key, format!("empty name in key `{raw}`")));
            }
            for n in &names {
                if all_arg_names.contains(&n.as_str()) && ret_names.contains(&Some(n.as_str())) {
                    return Err(err(src, key, format!("`{n}` is both an input and a named output of `{}`", func.name)));
                }
            }
            let formula = scalar_text(src, value, || format!("the formula for `{raw}`"))?;
            if !all_arg_names.contains(&names[0].as_str()) {
                // forward-mode definition: every name must be an output
                for n in &names {
                    let is_ret = ret_names.contains(&Some(n.as_str()));
                    let is_result = (n == "result" && func.returns.len() == 1)
                        || n.strip_prefix("result")
                            .and_then(|d| {
                                (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                                    .then(|| d.parse::<usize>().ok())
                                    .flatten()
                            })
                            .is_some_and(|i| i < func.returns.len());
                    if !is_ret && !is_result {
                        return Err(err(
                            src,
                            key,
                            format!(
                                "`{n}` names no argument and no output of `{}` (arguments: {}; outputs: {})",
                                func.name,
                                all_arg_names.join(", "),
                                output_names(func).join(", ")
                            ),
                        ));
                    }
                }
                forwards.push(RawForward { key, outputs: names, formula: formula.to_string() });
                continue;
            }
            for n in &names {
                if !all_arg_names.contains(&n.as_str()) {
                    return Err(err(
                        src,
                        key,
                        format!(
                            "`{n}` in `{raw}` names no argument of `{}` (arguments: {})",
                            func.name,
                            all_arg_names.join(", ")
                        ),
                    ));
                }
            }
            if formula.trim().to_lowercase() == "non_differentiable" {
                non_differentiable.extend(names);
                continue;
            }
            let at_formula = |m: String| err(src, value, m);
            let (f1, saved_inputs) = saved_variables(formula, &arg_nc, &names, self.tg).map_err(at_formula)?;
            let (f2, saved_outputs) = saved_variables(&f1, &ret_nc, &names, self.tg).map_err(at_formula)?;
            let uses_named = available_named_gradients.iter().any(|g| ident_search(&f2, g));
            for i in used_gradient_indices(&f2) {
                if i >= func.returns.len() {
                    return Err(err(
                        src,
                        value,
                        format!(
                            "out of bounds grads access: the formula uses grads[{i}], but `{}` returns {} output(s)",
                            func.name,
                            func.returns.len()
                        ),
                    ));
                }
            }
            for n in &names {
                if let Some(a) = all_arg_names.iter().find(|a| **a == n.as_str()) {
                    with_derivatives.push(a);
                }
            }
            formulas.push(BackwardFormula {
                inputs: names,
                formula: formula.to_string(),
                rewritten: f2,
                saved_inputs: dedup(saved_inputs),
                saved_outputs: dedup(saved_outputs),
            });
            derivative_keys.push(key);
            used_named.push(uses_named);
        }
        if let Some(n) = non_differentiable.iter().find(|n| with_derivatives.contains(&n.as_str())) {
            return Err(err(src, at, format!("`{n}` is declared both non_differentiable and differentiable")));
        }
        let args_with_derivatives: Vec<&CppArg> =
            self.args.iter().filter(|a| with_derivatives.contains(&a.name)).collect();

        let forward = self.postprocess_forward(&formulas, &forwards, &args_with_derivatives)?;
        self.check_grad_usage(&formulas, &used_named, at)?;

        let saved_inputs = dedup(formulas.iter().flat_map(|d| d.saved_inputs.iter().cloned()));
        let saved_outputs = dedup(formulas.iter().flat_map(|d| d.saved_outputs.iter().cloned()));
        Ok(Derivative {
            op: func.name.clone(),
            schema: String::new(),
            dispatch_key: String::new(),
            formulas,
            non_differentiable,
            forward,
            output_differentiability: self.od.values.clone(),
            output_differentiability_conditions: self.od.conditions.clone(),
            args_with_derivatives: args_with_derivatives.iter().map(|a| a.name.to_string()).collect(),
            saved_inputs,
            saved_outputs,
            view_copy_of: None,
            line: 0,
        })
    }

    fn postprocess_forward(
        &self,
        derivatives: &[BackwardFormula],
        forwards: &[RawForward<'_>],
        args_with_derivatives: &[&CppArg],
    ) -> Res<Vec<ForwardFormula>> {
        let src = self.src;
        let func = &self.f.func;
        let is_foreach = func.name.base().base.starts_with("_foreach_");
        let check_base_names = |formula: &str, key: &Node| -> Res<()> {
            for a in args_with_derivatives {
                if a.tensor_list && !is_foreach {
                    continue;
                }
                if ident_search(formula, a.name) {
                    return Err(err(
                        src,
                        key,
                        format!(
                            "the forward formula for `{}` uses the base name of the `{n}` argument, \
                             which is ambiguous: use `{n}_p` for the primal value and `{n}_t` for the tangent",
                            self.defn_name,
                            n = a.name
                        ),
                    ));
                }
            }
            Ok(())
        };
        let mut out = Vec::with_capacity(forwards.len());
        for fw in forwards {
            check_base_names(&fw.formula, fw.key)?;
            let (formula, kind) = match fw.formula.as_str() {
                "auto_element_wise" => {
                    if func.kind() == SchemaKind::Inplace {
                        return Err(err(
                            src,
                            fw.key,
                            format!("cannot use auto_element_wise with `{}`: it is an in-place variant", func.name),
                        ));
                    }
                    if args_with_derivatives.len() != 1 || forwards.len() > 1 || fw.outputs.len() > 1 {
                        return Err(err(
                            src,
                            fw.key,
                            format!(
                                "the forward derivative of `{}` is auto_element_wise, which only works \
                                 for functions with a single differentiable input and a single differentiable output",
                                self.defn_name
                            ),
                        ));
                    }
                    if derivatives.len() != 1 {
                        return Err(err(
                            src,
                            fw.key,
                            format!(
                                "the forward derivative of `{}` is auto_element_wise, but it does not \
                                 define the backward formula of its input, which is required",
                                self.defn_name
                            ),
                        ));
                    }
                    let input = &args_with_derivatives[0].name;
                    let mut f = ident_sub(&derivatives[0].formula, "grad", &format!("{input}_t.conj()"));
                    for a in args_with_derivatives {
                        f = ident_sub(&f, a.name, &format!("{}_p", a.name));
                    }
                    (format!("({f}).conj()"), ForwardKind::AutoElementWise)
                }
                "auto_linear" => {
                    if forwards.len() > 1 || fw.outputs.len() > 1 {
                        return Err(err(
                            src,
                            fw.key,
                            format!(
                                "the forward derivative of `{}` is auto_linear, which only works \
                                 for functions with a single differentiable output",
                                self.defn_name
                            ),
                        ));
                    }
                    if args_with_derivatives.is_empty() {
                        return Err(err(
                            src,
                            fw.key,
                            format!(
                                "the forward derivative of `{}` is auto_linear, but no input has a backward formula",
                                self.defn_name
                            ),
                        ));
                    }
                    let new_args: Vec<String> = self
                        .args
                        .iter()
                        .map(|a| {
                            if args_with_derivatives.iter().any(|d| d.name == a.name) {
                                format!("{}_t", a.name)
                            } else {
                                a.name.to_string()
                            }
                        })
                        .collect();
                    let mut name = self.defn_name.to_string();
                    if func.has_symint() {
                        name.push_str("_symint");
                    }
                    let f = if self.f.variants.contains(&Variant::Function) || new_args.is_empty() {
                        format!("at::{name}({})", new_args.join(", "))
                    } else {
                        format!("{}.{name}({})", new_args[0], new_args[1..].join(", "))
                    };
                    (f, ForwardKind::AutoLinear)
                }
                other => (other.to_string(), ForwardKind::Formula),
            };
            if kind != ForwardKind::Formula {
                check_base_names(&formula, fw.key)?;
            }
            out.push(ForwardFormula { outputs: fw.outputs.clone(), formula, kind });
        }
        Ok(out)
    }

    fn check_grad_usage(&self, derivatives: &[BackwardFormula], used_named: &[bool], at: &Node) -> Res<()> {
        let mut uses_grad = false;
        let mut num_grads_uses = 0;
        let mut indices: Vec<usize> = Vec::new();
        for d in derivatives {
            uses_grad |= ident_search(&d.rewritten, "grad");
            num_grads_uses += ident_count(&d.rewritten, "grads");
            indices.extend(used_gradient_indices(&d.rewritten));
        }
        let uses_named = used_named.iter().any(|u| *u);
        let name = self.defn_name;
        let fail = |m: String| Err(err(self.src, at, m));
        if uses_grad && num_grads_uses > 0 {
            return fail(format!("the derivatives of `{name}` mix `grad` and `grads`: replace `grad` with `grads[0]`"));
        }
        if num_grads_uses == indices.len() && !indices.is_empty() && indices.iter().all(|i| *i == 0) {
            return fail(format!(
                "the derivatives of `{name}` only use `grads[0]`: if the first output is the only \
                 differentiable one, use `grad`"
            ));
        }
        if uses_named && (uses_grad || num_grads_uses > 0) {
            return fail(format!("the derivatives of `{name}` mix `grad_RETURN_NAME` with `grad` or `grads[i]`"));
        }
        Ok(())
    }
}

fn output_names(f: &FunctionSchema) -> Vec<String> {
    let n = f.returns.len();
    f.returns
        .iter()
        .enumerate()
        .map(|(i, r)| match &r.name {
            Some(x) => x.clone(),
            None if n == 1 => "result".into(),
            None => format!("result{i}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{load_native_functions, load_tags};

    const NATIVE: &str = "\
- func: abs(Tensor self) -> Tensor
  variants: function, method
- func: abs_(Tensor(a!) self) -> Tensor(a!)
- func: abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
- func: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
- func: split(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]
- func: transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)
- func: transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor
- func: mul.Tensor(Tensor self, Tensor other) -> Tensor
- func: foo(Tensor self, str? reduce=None) -> Tensor
";

    fn reg() -> Registry {
        let tags = load_tags(&SourceFile::new("tags.yaml", "")).expect("tags");
        load_native_functions(&SourceFile::new("native_functions.yaml", NATIVE), tags).expect("registry")
    }

    fn load(text: &str) -> Res<Vec<Derivative>> {
        load_derivatives(&SourceFile::new("derivatives.yaml", text), &reg())
    }

    #[test]
    fn basic_entry_and_saved_variables() {
        let d = load(
            "- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  \
             self: handle_r_to_c(self.scalar_type(), grad)\n  \
             other: handle_r_to_c(other.scalar_type(), maybe_multiply(grad, alpha.conj()))\n  \
             result: self_t + maybe_multiply(other_t, alpha)\n",
        )
        .expect("loads");
        assert_eq!(d.len(), 1);
        let d = &d[0];
        assert_eq!(d.op.to_string(), "add.Tensor");
        assert_eq!(d.dispatch_key, "Default");
        assert_eq!(d.formulas[0].inputs, ["other"]);
        assert_eq!(d.formulas[1].inputs, ["self"]);
        assert_eq!(d.saved_inputs, ["other_scalar_type", "alpha", "self_scalar_type"]);
        assert_eq!(d.args_with_derivatives, ["self", "other"]);
        assert_eq!(d.forward[0].outputs, ["result"]);
        assert_eq!(d.line, 1);
    }

    #[test]
    fn auto_element_wise_and_auto_linear() {
        let d = load(
            "- name: abs(Tensor self) -> Tensor\n  self: grad * self.sgn()\n  result: auto_element_wise\n\
             - name: transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)\n  \
             self: grad.transpose(dim0, dim1)\n  result: auto_linear\n",
        )
        .expect("loads");
        assert_eq!(d[0].forward[0].formula, "(self_t.conj() * self_p.sgn()).conj()");
        assert_eq!(d[1].forward[0].formula, "at::transpose(self_t, dim0, dim1)");
        // view_copy entry generated from the view's
        assert_eq!(d.len(), 3);
        assert_eq!(d[2].op.to_string(), "transpose_copy.int");
        assert_eq!(d[2].view_copy_of.as_ref().map(|o| o.to_string()).as_deref(), Some("transpose.int"));
    }

    #[test]
    fn replacement_table() {
        let d = load(
            "- name: split(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]\n  \
             self: f(grads, self.sym_size(-1), self.sym_size(dim), zeros_like(self), self.options(), self.dim(), self.sym_numel())\n",
        )
        .expect("loads");
        assert_eq!(
            d[0].saved_inputs,
            [
                "self_options",
                "self_info",
                "self_sym_argsize_minus_1",
                "self_sym_argsize_dim",
                "self_sym_numel",
                "self_dim"
            ]
        );
        assert_eq!(
            d[0].formulas[0].rewritten,
            "f(grads, self_sym_argsize_minus_1, self_sym_argsize_dim, self_info.zeros(), self_options, self_dim, self_sym_numel)"
        );
    }

    #[test]
    fn dispatch_keys_and_outputs() {
        let d = load(
            "- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  \
             dispatch:\n    Default:\n      self: g(grad, dim, indices, self.sym_sizes(), keepdim)\n      \
             values: gather(self_t, dim, indices, keepdim)\n    AutogradNestedTensor:\n      \
             self: h(grad, self)\n  output_differentiability: [True, False]\n",
        )
        .expect("loads");
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].dispatch_key, "Default");
        assert_eq!(d[1].dispatch_key, "AutogradNestedTensor");
        assert_eq!(d[0].saved_outputs, ["indices"]);
        assert_eq!(d[0].saved_inputs, ["self_sym_sizes", "dim", "keepdim"]);
        assert_eq!(d[1].saved_inputs, ["self"]);
        assert_eq!(d[0].output_differentiability, Some(vec![true, false]));
    }

    #[test]
    fn ident_regex_quirks() {
        // Python: re.sub(r"(^|\W)x($|\W)", ...) consumes the delimiter.
        assert_eq!(ident_sub("x*x", "x", "y"), "y*x");
        assert_eq!(ident_sub("x * x", "x", "y"), "y * y");
        assert_eq!(ident_sub("f(x)", "x", "y"), "f(y)");
        assert_eq!(ident_sub("xx x", "x", "y"), "xx y");
        assert!(!ident_search("self_t", "self"));
        assert_eq!(ident_count("grads[0] + grads[1]", "grads"), 2);
        assert_eq!(used_gradient_indices("f(grads[0], grads[12])"), vec![0, 12]);
        assert_eq!(used_gradient_indices("mygrads[1]"), Vec::<usize>::new());
    }

    #[test]
    fn unknown_schema_is_positioned() {
        let e = load("- name: abs(Tensor self, int x) -> Tensor\n  self: grad\n").unwrap_err();
        assert_eq!((e.line, e.col), (1, 9));
        assert!(e.message.contains("could not find an operator"), "{}", e.message);
        let e = load("\n- name: nope(Tensor self) -> Tensor\n  self: grad\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 9));
        assert!(e.message.contains("no operator `nope`"), "{}", e.message);
    }

    #[test]
    fn formula_key_naming_nothing_is_positioned() {
        let e = load("- name: abs(Tensor self) -> Tensor\n  slef: grad\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 3));
        assert!(e.message.contains("`slef` names no argument"), "{}", e.message);
        let e =
            load("- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  self, oter: grad\n")
                .unwrap_err();
        assert_eq!((e.line, e.col), (2, 3));
        assert!(e.message.contains("`oter`"), "{}", e.message);
    }

    #[test]
    fn malformed_entries_are_errors() {
        for (text, line, needle) in [
            ("- abs\n", 1, "must be a mapping"),
            ("name: abs\n", 1, "must be a list"),
            ("- self: grad\n", 1, "no `name:`"),
            ("- name: [abs]\n", 1, "must be a string"),
            ("- name: abs\n", 1, "not a schema"),
            ("- name: abs(Tensor self) -> Tensor\n  self:\n", 2, "is empty"),
            ("- name: abs(Tensor self) -> Tensor\n  self: [grad]\n", 2, "must be a string"),
            ("- name: abs(Tensor self) -> Tensor\n  dispatch: x\n", 2, "dispatch"),
            (
                "- name: abs(Tensor self) -> Tensor\n  dispatch:\n    CPU:\n      self: grad\n",
                3,
                "invalid dispatch key",
            ),
            (
                "- name: abs(Tensor self) -> Tensor\n  dispatch:\n    Default:\n      self: grad\n  self: grad\n",
                5,
                "next to `dispatch:`",
            ),
            ("- name: abs(Tensor self) -> Tensor\n  output_differentiability: True\n", 2, "output_differentiability"),
            ("- name: abs(Tensor self) -> Tensor\n  output_differentiability: [1]\n", 2, "output_differentiability"),
            ("- name: abs(Tensor self) -> Tensor\n  self: grad\n  self: grad\n", 3, "duplicate key `self`"),
            ("- name: abs(Tensor self) -> Tensor\n  self: grads[1]\n", 2, "out of bounds"),
            (
                "- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  self: f(grads[0])\n",
                1,
                "only use `grads[0]`",
            ),
            (
                "- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  self: f(grad, grads[1])\n",
                1,
                "mix `grad` and `grads`",
            ),
            ("- name: abs(Tensor self) -> Tensor\n  self: self.sizes()\n", 2, ".sizes()"),
            ("- name: abs(Tensor self) -> Tensor\n  self: grad\n  result: self + 1\n", 3, "base name"),
            (
                "- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  self: grad * other.sym_strides()[0]\n",
                2,
                "sym_strides",
            ),
            (
                "- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  self, other: grad\n  result: auto_element_wise\n",
                3,
                "auto_element_wise",
            ),
            (
                "- name: abs(Tensor self) -> Tensor\n  self: non_differentiable\n  result: auto_linear\n",
                3,
                "auto_linear",
            ),
            (
                "- name: abs(Tensor self) -> Tensor\n  self: grad\n- name: abs(Tensor self) -> Tensor\n  self: grad\n",
                3,
                "already defined",
            ),
            ("- name: abs(Tensor self) -> Tensor\n  self: grad\n  result: [x\n", 4, "YAML"),
        ] {
            match load(text) {
                Ok(d) => panic!("{text:?} loaded: {d:?}"),
                Err(e) => {
                    assert_eq!(e.line, line, "{text:?}: {e}");
                    assert!(e.message.contains(needle), "{text:?}: {e}");
                }
            }
        }
    }

    #[test]
    fn sym_numel_is_saved_whole_before_2_2() {
        let src = SourceFile::new(
            "derivatives.yaml",
            "- name: abs(Tensor self) -> Tensor\n  self: grad / self.sym_numel()\n",
        );
        let old = load_derivatives_as(&src, &reg(), TorchgenVersion::new(2, 1)).expect("loads");
        assert_eq!(old[0].saved_inputs, ["self"]);
        let new = load_derivatives(&src, &reg()).expect("loads");
        assert_eq!(new[0].saved_inputs, ["self_sym_numel"]);
    }

    #[test]
    fn optional_string_is_saved() {
        let d = load("- name: foo(Tensor self, str? reduce=None) -> Tensor\n  self: g(grad, reduce)\n").expect("loads");
        assert_eq!(d[0].saved_inputs, ["reduce"]);
        assert!(d[0].formulas[0].rewritten.contains("reduce.has_value()"));
    }

    #[test]
    fn never_panics_on_garbage() {
        let base = "- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  dispatch:\n    Default:\n      self: g(grads[0], grads[1], self.sym_size(-), zeros_like(self, dim.sym_strides(\n      values: auto_linear\n  output_differentiability: ['c']\n";
        for cut in 0..=base.len() {
            if let Some(prefix) = base.get(..cut) {
                let _ = load(prefix);
            }
        }
        for junk in [
            "",
            "~",
            "[]",
            "{}",
            "- ",
            "- name:",
            "- name: (",
            "- name: a.(",
            "- {name: abs(Tensor self) -> Tensor, ? [a] : b}",
            // found by the yaml_loaders fuzz target: a multi-byte character in the name
            "- name: abs\u{42b}ensor self) -> Tensor\n  self: grad\n",
            "- name: abs.\u{42b}x(Tensor self) -> Tensor\n  self: grad\n",
        ] {
            let _ = load(junk);
        }
    }
}
