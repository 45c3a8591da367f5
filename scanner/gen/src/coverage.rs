//! `xirang-scan coverage`: which tier serves every selected operator, and how its backward is
//! computed.
//!
//! The report joins what the generator decides (`generate::model`: the selection of
//! `xirang.toml [operators]`, the default body of every `AtenOps` method, the recipes chosen from
//! the knowledge base; `generate::autograd`: the backward nodes and their hooks) with what the
//! adapter hand-writes (`diff::adapter_index` over the runtime's `src/`: `impl AtenOps` methods,
//! `impl BackwardHooks` methods, the host fallback table). It is computed the way the generated
//! front-ends dispatch (`generated/ops.rs`):
//!
//! * **native**: the adapter implements the operator's `AtenOps` method (a kernel that declines its
//!   arguments falls back to the host implementation at run time);
//! * **recipe**: the trait's default body is a composition recipe (`generated/recipes.rs`) or an
//!   `out=` / in-place wrapper over the functional operator. A recipe counts only when every
//!   operator it calls is itself reachable (native, recipe or fallback), transitively: the runtime
//!   does not fall back when a recipe's callee fails, so a recipe with an unreachable callee is
//!   `none`;
//! * **fallback**: the default body is the CPU fallback and the host registry has an
//!   implementation;
//! * **none**: a call returns `Unsupported`.
//!
//! Autograd, per input of an operator with a `derivatives.yaml` entry: `translated` (the generator
//! compiled the formula), `hand-written` (the formula became a `BackwardHooks` method and the adapter
//! implements it), `missing hook` (the hook's default returns `Unsupported`), `not differentiable`
//! (a Tensor input without a formula). Operators without an entry are `no derivative entry`.
//!
//! Custom operators (`[operators] custom`) are rows of their own, counted apart: `native` when the
//! adapter implements the `CustomOps` method (following a method that forwards to a kernel file, and
//! counting the `new-op` skeleton, which returns a "not implemented" error, as not implemented),
//! else `none`; their backward is the generated node of the gradient rules (`translated` inputs, or
//! `not differentiable` ones declared `non_differentiable`).
//!
//! Output is deterministic (sorted by operator). `coverage --write` commits the report to
//! `diffs/coverage.md` and `diffs/coverage.json` (the runtime's `tests/serial/coverage_truth.rs` checks the
//! JSON against what the runtime dispatches); `coverage --check` reports them stale (CI).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate as generate;
use crate::adapter_index::{self, AdapterIndex, HOOKS_TRAIT, Kernel, TRAIT_NAME};
use crate::error::Error;
use crate::schema::{BaseTy, Type};
use crate::{Inputs, custom, ops::Body};

/// Where the committed reports live, relative to the repository root.
pub const REPORT_MD: &str = "diffs/coverage.md";
pub const REPORT_JSON: &str = "diffs/coverage.json";

/// Errors of the coverage report.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CoverageError {
    #[error("adapter folder `{0}` does not exist")]
    #[diagnostic(
        code(xirang::coverage::adapter),
        help("pass the adapter runtime's folder with --adapter, or set `[adapter] runtime` in xirang.toml")
    )]
    AdapterNotFound(PathBuf),
    #[error("--fail-under-{what} {value}: not a percentage between 0 and 100")]
    #[diagnostic(code(xirang::coverage::threshold))]
    BadThreshold { what: &'static str, value: f64 },
    #[error("encoding the coverage report as JSON: {0}")]
    #[diagnostic(code(xirang::coverage::json))]
    Json(String),
}

/// The forward tier of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Native,
    Recipe,
    Fallback,
    None,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Native, Tier::Recipe, Tier::Fallback, Tier::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Native => "native",
            Tier::Recipe => "recipe",
            Tier::Fallback => "fallback",
            Tier::None => "none",
        }
    }
}

/// What PyTorch provides a backend for an operator (see [`OpCoverage::upstream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Upstream {
    Required,
    Optional,
    Decomposes,
}

impl Upstream {
    pub const ALL: [Upstream; 3] = [Upstream::Required, Upstream::Optional, Upstream::Decomposes];

    pub fn of(f: &crate::registry::NativeFunction) -> Upstream {
        match f.composite() {
            crate::registry::Composite::None => Upstream::Required,
            crate::registry::Composite::Explicit => Upstream::Optional,
            crate::registry::Composite::Implicit => Upstream::Decomposes,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Upstream::Required => "backend must provide",
            Upstream::Optional => "composite kernel upstream (override optional)",
            Upstream::Decomposes => "decomposes upstream",
        }
    }
}

/// The autograd status of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GradStatus {
    Translated,
    HandWritten,
    MissingHook,
    /// PyTorch's own formula is `not_implemented(...)`: backward raises upstream too.
    NotImplementedUpstream,
    NotDifferentiable,
}

impl GradStatus {
    pub const ALL: [GradStatus; 5] = [
        GradStatus::Translated,
        GradStatus::HandWritten,
        GradStatus::MissingHook,
        GradStatus::NotImplementedUpstream,
        GradStatus::NotDifferentiable,
    ];

    /// Whether the input has (or lacks) a backward of this adapter's: not for inputs that are
    /// not differentiable or whose gradient PyTorch does not implement either.
    pub fn has_backward_or_misses(self) -> bool {
        matches!(self, GradStatus::Translated | GradStatus::HandWritten | GradStatus::MissingHook)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GradStatus::Translated => "translated",
            GradStatus::HandWritten => "hand-written",
            GradStatus::MissingHook => "missing hook",
            GradStatus::NotImplementedUpstream => "not implemented upstream",
            GradStatus::NotDifferentiable => "not differentiable",
        }
    }
}

/// One input of an operator with a derivative entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputCoverage {
    pub input: String,
    pub status: GradStatus,
    /// The `BackwardHooks` method (hand-written or missing hooks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// `file:line` of the hand-written hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// One selected operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpCoverage {
    pub op: String,
    pub schema: String,
    pub tier: Tier,
    /// The recipe: `recipes::<fn>` (knowledge base), or `out= wrapper of <op>` / `in-place wrapper
    /// of <op>`; also set when the recipe is unreachable (tier `none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe: Option<String>,
    /// The operators the recipe calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callees: Vec<String>,
    /// `file:line` of the native kernel (a function marked `xirang-kernel:`, or a hand-written
    /// `impl AtenOps` method) or of the host implementation (fallback tier).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// `file:line` of the host implementation, whatever the tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `file:line` of a method marked `xirang-kernel:` (inside an `impl` block: the generator
    /// attaches free functions only, so the generated front-ends do not reach it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwired_kernel: Option<String>,
    /// Why the tier is `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the operator is in the Core ATen set (`tags: core` in native_functions.yaml).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub core: bool,
    /// What PyTorch provides a backend for it (`registry::Composite`): `required` (only
    /// backend-specific kernels: inside PyTorch the backend must provide it or fall back to the
    /// CPU), `optional` (a CompositeExplicitAutograd kernel serves every backend: overriding is
    /// optional inside PyTorch) or `decomposes` (CompositeImplicitAutograd, selected as Core ATen or
    /// by `include`). The standalone runtime, with no PyTorch beneath it, needs all three.
    pub upstream: Upstream,
    /// PyTorch has kernels for it only on accelerators (no CPU or composite kernel): the CPU
    /// fallback of an out-of-tree device cannot run it, the adapter's own tiers must.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub device_only: bool,
    /// Whether `derivatives.yaml` has an entry for the operator.
    pub derivative: bool,
    /// The inputs of the derivative entry (empty without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputCoverage>,
}

/// One custom operator of the adapter (`[operators] custom` of xirang.toml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomCoverage {
    /// `xirang::scaled_gelu`.
    pub op: String,
    pub schema: String,
    /// `file:line` of its entry in the custom-operator file.
    pub declared: String,
    /// `native` when the adapter implements its `CustomOps` method (and the kernel is not the
    /// `new-op` skeleton), else `none`.
    pub tier: Tier,
    /// `file:line` of the kernel (the function the `CustomOps` method forwards to, or the method).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Why the tier is `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the operator has gradient rules (`custom_derivatives`).
    pub derivative: bool,
    /// The generated backward node (`custom::autograd::ScaledGeluBackward`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its differentiable inputs: `translated` (the rule is compiled into the node) or `not
    /// differentiable` (declared `non_differentiable`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputCoverage>,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub adapter: String,
    pub pytorch: String,
    /// The selection of xirang.toml `[operators]` (`select = "backend", core = true`).
    pub select: String,
    /// The indexed adapter folder, relative to the repository root.
    pub indexed: String,
    pub ops: Vec<OpCoverage>,
    /// The custom-operator file as configured (`custom_ops.yaml`).
    pub custom_file: String,
    /// The custom operators, sorted; counted apart from `ops`.
    pub custom: Vec<CustomCoverage>,
}

impl Coverage {
    /// Operators per tier.
    pub fn tier_counts(&self) -> BTreeMap<Tier, usize> {
        let mut m: BTreeMap<Tier, usize> = Tier::ALL.iter().map(|t| (*t, 0)).collect();
        for o in &self.ops {
            *m.entry(o.tier).or_default() += 1;
        }
        m
    }

    /// Inputs per autograd status.
    pub fn grad_counts(&self) -> BTreeMap<GradStatus, usize> {
        let mut m: BTreeMap<GradStatus, usize> = GradStatus::ALL.iter().map(|s| (*s, 0)).collect();
        for i in self.ops.iter().flat_map(|o| &o.inputs) {
            *m.entry(i.status).or_default() += 1;
        }
        m
    }

    /// Operators without a derivative entry.
    pub fn no_derivative(&self) -> usize {
        self.ops.iter().filter(|o| !o.derivative).count()
    }

    /// Operators whose every differentiable input has a working backward (translated or
    /// hand-written), among those with a derivative entry and at least one such input.
    pub fn complete_backward(&self) -> (usize, usize) {
        let with: Vec<&OpCoverage> =
            self.ops.iter().filter(|o| o.inputs.iter().any(|i| i.status.has_backward_or_misses())).collect();
        let done = with.iter().filter(|o| o.inputs.iter().all(|i| i.status != GradStatus::MissingHook)).count();
        (done, with.len())
    }

    /// Percentage of operators with a tier other than `none`.
    pub fn reachable_pct(&self) -> f64 {
        pct(self.ops.iter().filter(|o| o.tier != Tier::None).count(), self.ops.len())
    }

    /// Core ATen operators per tier.
    pub fn core_tier_counts(&self) -> BTreeMap<Tier, usize> {
        let mut m: BTreeMap<Tier, usize> = Tier::ALL.iter().map(|t| (*t, 0)).collect();
        for o in self.ops.iter().filter(|o| o.core) {
            *m.entry(o.tier).or_default() += 1;
        }
        m
    }

    /// Custom operators, and those the adapter implements (tier `native`).
    pub fn custom_counts(&self) -> (usize, usize) {
        (self.custom.len(), self.custom.iter().filter(|c| c.tier == Tier::Native).count())
    }

    /// Percentage of differentiable inputs with a working backward (translated or hand-written).
    pub fn autograd_pct(&self) -> f64 {
        let c = self.grad_counts();
        let ok = c[&GradStatus::Translated] + c[&GradStatus::HandWritten];
        pct(ok, ok + c[&GradStatus::MissingHook])
    }
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 { 100.0 } else { n as f64 * 100.0 / of as f64 }
}

fn loc(k: &Kernel) -> String {
    format!("{}:{}", k.file, k.line)
}

/// The folder the index reads: `<adapter>/src` when it exists (tests and examples implement the
/// traits for their own test types), else `<adapter>`.
pub fn index_folder(adapter: &Path) -> PathBuf {
    let src = adapter.join("src");
    if src.is_dir() { src } else { adapter.to_path_buf() }
}

/// Builds the report for a generation run's inputs, indexing the adapter at `adapter` (default:
/// `[adapter] runtime` of xirang.toml).
pub fn build(inputs: &Inputs, adapter: Option<&Path>) -> Result<Coverage, Error> {
    let cfg = &inputs.cfg;
    let root = cfg.root.clone();
    let adapter = adapter.map(Path::to_path_buf).unwrap_or_else(|| cfg.path(&cfg.config.adapter.runtime));
    if !adapter.is_dir() {
        return Err(CoverageError::AdapterNotFound(adapter).into());
    }
    let model = generate::model(inputs)?;
    let functions = &inputs.snapshot.registry.functions;
    let selected: BTreeSet<String> = model.ops.iter().map(|o| o.qualified.clone()).collect();
    let map = adapter_index::method_map(functions.iter().map(|f| &f.func.name));
    let folder = index_folder(&adapter);
    let index = adapter_index::index_dir(&folder, &root, &map)?;
    let ag = generate::autograd::autograd_model(inputs, &selected);
    let rows: Vec<TierRow<'_>> =
        model.ops.iter().map(|o| TierRow { qualified: &o.qualified, method: &o.method, body: &o.body }).collect();
    let mut c = assemble(&inputs.cfg, &inputs.snapshot, &rows, &model.recipes, &index, Some(&ag), rel(&folder, &root));
    let (name, path) = custom::file_of(&inputs.cfg);
    let set = custom::load(&path, &name)?;
    let target = custom::Target { functions, selected: &selected, cfg: &inputs.cfg.config };
    let ctxs = custom::model(&set, &target)?;
    c.custom = custom_rows(&set, &ctxs, &custom_kernels(&folder, &root)?);
    c.custom_file = name;
    Ok(c)
}

/// The operators' tiers of [`build`] only: each row's tier, place, recipe and reason, without
/// the schema text, the autograd columns and the custom operators (what `diff` joins for two versions on every
/// call). `index`: the adapter already indexed by the caller from the repository root (with the
/// methods of this version's operators, or of more versions), of which the kernels under the
/// folder [`build`] reads are used; `None` indexes that folder here.
pub fn tiers(
    cfg: &generate::config::LoadedConfig,
    snapshot: &crate::snapshot::PytorchSnapshot,
    index: Option<&AdapterIndex>,
) -> Result<Coverage, Error> {
    let model = generate::tier_model(cfg, snapshot)?;
    tiers_of_model(cfg, snapshot, index, &model)
}

/// [`tiers`] with the snapshot's [`generate::tier_model`] already built (it does not depend on
/// the adapter index, so a caller can build it while the adapter is indexed).
pub fn tiers_of_model(
    cfg: &generate::config::LoadedConfig,
    snapshot: &crate::snapshot::PytorchSnapshot,
    index: Option<&AdapterIndex>,
    model: &generate::TierModel,
) -> Result<Coverage, Error> {
    let root = cfg.root.clone();
    let adapter = cfg.path(&cfg.config.adapter.runtime);
    if !adapter.is_dir() {
        return Err(CoverageError::AdapterNotFound(adapter).into());
    }
    let folder = index_folder(&adapter);
    let indexed = rel(&folder, &root);
    let own;
    let index = match index {
        Some(all) => {
            let under = format!("{}/", indexed.trim_end_matches('/'));
            let keep = |k: &&Kernel| k.file.starts_with(&under);
            own = AdapterIndex {
                kernels: all.kernels.iter().filter(keep).cloned().collect(),
                fallbacks: all.fallbacks.iter().filter(keep).cloned().collect(),
                warnings: Vec::new(),
            };
            &own
        }
        None => {
            let functions = &snapshot.registry.functions;
            let map = adapter_index::method_map(functions.iter().map(|f| &f.func.name));
            own = adapter_index::index_dir(&folder, &root, &map)?;
            &own
        }
    };
    let rows: Vec<TierRow<'_>> =
        model.ops.iter().map(|o| TierRow { qualified: &o.qualified, method: &o.method, body: &o.body }).collect();
    Ok(assemble(cfg, snapshot, &rows, &model.recipes, index, None, indexed))
}

/// The custom operators' rows: forward from the adapter's `CustomOps` methods, backward from the
/// generated nodes.
fn custom_rows(
    set: &custom::CustomSet,
    ctxs: &[custom::CustomCtx],
    kernels: &HashMap<String, CustomKernel>,
) -> Vec<CustomCoverage> {
    let by_q: HashMap<&str, &custom::CustomCtx> = ctxs.iter().map(|c| (c.qualified.as_str(), c)).collect();
    let mut rows = Vec::new();
    for op in &set.ops {
        let q = op.qualified();
        let ctx = by_q.get(q.as_str());
        let mut row = CustomCoverage {
            op: q.clone(),
            schema: op.schema_text(),
            declared: format!("{}:{}", set.file, op.func.line()),
            tier: Tier::None,
            at: None,
            reason: None,
            derivative: op.grads.is_some(),
            node: ctx.and_then(|c| c.node.as_ref()).map(|n| format!("custom::autograd::{}", n.name)),
            inputs: Vec::new(),
        };
        match kernels.get(&op.method()) {
            Some(k) if k.implemented => {
                row.tier = Tier::Native;
                row.at = Some(k.at.clone());
            }
            _ => {
                row.reason = Some(format!("not implemented: write the kernel in {}", custom::kernel_path(op)));
            }
        }
        if op.grads.is_some() {
            let translated: BTreeSet<&str> = ctx
                .and_then(|c| c.node.as_ref())
                .map(|n| n.inputs.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let a = &op.schema.arguments;
            for arg in a.positional.iter().chain(&a.kwarg_only).filter(|x| is_tensor(&x.ty)) {
                let status = if translated.contains(arg.name.as_str()) {
                    GradStatus::Translated
                } else {
                    GradStatus::NotDifferentiable
                };
                row.inputs.push(InputCoverage { input: arg.name.clone(), status, hook: None, at: None });
            }
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| a.op.cmp(&b.op));
    rows
}

// ---------------------------------------------------------------------------------------------
// custom-operator kernels
// ---------------------------------------------------------------------------------------------

/// The trait of the custom operators (`generated/custom.rs`).
pub const CUSTOM_TRAIT: &str = "CustomOps";

/// How the adapter serves one `CustomOps` method.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CustomKernel {
    /// `file:line` of the function doing the work: the kernel-file function the method forwards
    /// to (`adapter-runtime/src/custom/mod.rs` forwards `scaled_gelu` to `scaled_gelu::scaled_gelu`
    /// in `scaled_gelu.rs`), else the method itself.
    at: String,
    /// False while that function is still the `new-op` skeleton: its only statement (besides `let
    /// _ = ...;`) returns `Err(..)` with a "not implemented" message.
    implemented: bool,
}

/// The `CustomOps` methods implemented under `folder` (every `impl CustomOps for X`), by method
/// name. Files that do not parse, or nest too deep, are left out (the compiler reports them).
fn custom_kernels(folder: &Path, root: &Path) -> Result<HashMap<String, CustomKernel>, Error> {
    let mut files = Vec::new();
    rust_files(folder, &mut files)?;
    files.sort();
    let mut out = HashMap::new();
    for path in files {
        let text = crate::fsio::read_text(&path, crate::fsio::MAX_INPUT_BYTES)?;
        if !text.contains(CUSTOM_TRAIT) {
            continue;
        }
        let Some(file) = parse_rust(&text) else { continue };
        let mut methods = Vec::new();
        custom_impl_methods(&file.items, &mut methods);
        for m in methods {
            let name = syn::ext::IdentExt::unraw(&m.sig.ident).to_string();
            let method_at = format!("{}:{}", rel(&path, root), m.sig.ident.span().start().line);
            let k = match forwarded(&m.block, &path, &file, root)? {
                Some(k) => k,
                None => CustomKernel { at: method_at, implemented: !is_skeleton(&m.block) },
            };
            out.entry(name).or_insert(k);
        }
    }
    Ok(out)
}

fn parse_rust(text: &str) -> Option<syn::File> {
    // syn recurses per bracket: leave out what the adapter index would (no real source nests so deep)
    if adapter_index::too_deep(text).is_some() {
        return None;
    }
    syn::parse_file(text).ok()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let p = e.path();
        let ft = e.file_type().map_err(|x| Error::io(&p, x))?;
        let name = e.file_name();
        if ft.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                rust_files(&p, out)?;
            }
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The methods of `impl CustomOps for X` blocks among `items` (inline modules included).
fn custom_impl_methods<'a>(items: &'a [syn::Item], out: &mut Vec<&'a syn::ImplItemFn>) {
    for item in items {
        match item {
            syn::Item::Impl(imp) => {
                let is_custom = imp
                    .trait_
                    .as_ref()
                    .and_then(|(_, path, _)| path.segments.last())
                    .is_some_and(|s| s.ident == CUSTOM_TRAIT);
                if is_custom {
                    out.extend(imp.items.iter().filter_map(|i| match i {
                        syn::ImplItem::Fn(f) => Some(f),
                        _ => None,
                    }));
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    custom_impl_methods(items, out);
                }
            }
            _ => {}
        }
    }
}

/// The statements of a body that do something (`let _ = ...;` only silences unused parameters).
fn working_statements(b: &syn::Block) -> Vec<&syn::Stmt> {
    b.stmts.iter().filter(|s| !matches!(s, syn::Stmt::Local(l) if matches!(l.pat, syn::Pat::Wild(_)))).collect()
}

/// The value a body returns when it is one expression (tail, or `return x;`).
fn only_value(b: &syn::Block) -> Option<&syn::Expr> {
    let [only] = working_statements(b)[..] else { return None };
    let mut e = match only {
        syn::Stmt::Expr(e, None) => e,
        syn::Stmt::Expr(e @ syn::Expr::Return(_), Some(_)) => e,
        _ => return None,
    };
    loop {
        e = match e {
            syn::Expr::Paren(p) => &p.expr,
            syn::Expr::Group(g) => &g.expr,
            syn::Expr::Return(r) => r.expr.as_deref()?,
            _ => return Some(e),
        };
    }
}

/// Whether a body is the `new-op` skeleton: it returns `Err(..)` carrying a string literal that
/// starts with "not implemented", and does nothing else.
fn is_skeleton(b: &syn::Block) -> bool {
    struct Lit(bool);
    fn not_implemented(s: &str) -> bool {
        s.trim_start().starts_with("not implemented")
    }
    fn in_tokens(ts: proc_macro2::TokenStream) -> bool {
        ts.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Literal(l) => {
                matches!(syn::Lit::new(l), syn::Lit::Str(s) if not_implemented(&s.value()))
            }
            proc_macro2::TokenTree::Group(g) => in_tokens(g.stream()),
            _ => false,
        })
    }
    impl<'ast> syn::visit::Visit<'ast> for Lit {
        fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
            self.0 |= not_implemented(&s.value());
        }
        // `format!("not implemented: ...")`: macro arguments are tokens
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.0 |= in_tokens(m.tokens.clone());
        }
    }
    let Some(syn::Expr::Call(call)) = only_value(b) else { return false };
    let syn::Expr::Path(f) = &*call.func else { return false };
    if f.path.segments.last().is_none_or(|s| s.ident != "Err") {
        return false;
    }
    let mut v = Lit(false);
    for a in &call.args {
        syn::visit::Visit::visit_expr(&mut v, a);
    }
    v.0
}

/// When a method's body only calls `module::function(...)` (or `function(...)` of its own file),
/// the kernel of that function, read from the module's file next to `path` (`module.rs` or
/// `module/mod.rs`). `None` when the body does something else or the function is not found.
fn forwarded(b: &syn::Block, path: &Path, file: &syn::File, root: &Path) -> Result<Option<CustomKernel>, Error> {
    let Some(syn::Expr::Call(call)) = only_value(b) else { return Ok(None) };
    let syn::Expr::Path(f) = &*call.func else { return Ok(None) };
    let segs: Vec<String> = f.path.segments.iter().map(|s| syn::ext::IdentExt::unraw(&s.ident).to_string()).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).skip_while(|s| *s == "self").collect();
    let find = |items: &[syn::Item], name: &str| {
        items.iter().find_map(|i| match i {
            syn::Item::Fn(x) if syn::ext::IdentExt::unraw(&x.sig.ident) == name => Some(x.clone()),
            _ => None,
        })
    };
    let (target_path, target) = match segs[..] {
        [name] => (path.to_path_buf(), find(&file.items, name)),
        [module, name] => {
            // a module's files sit next to `mod.rs` / `lib.rs` / `main.rs`, else in a folder named
            // after the file
            let dir = match (path.parent(), path.file_stem().and_then(|s| s.to_str())) {
                (Some(d), Some("mod" | "lib" | "main")) => d.to_path_buf(),
                (Some(d), Some(stem)) => d.join(stem),
                _ => return Ok(None),
            };
            let Some(p) =
                [dir.join(format!("{module}.rs")), dir.join(module).join("mod.rs")].into_iter().find(|p| p.is_file())
            else {
                return Ok(None);
            };
            let text = crate::fsio::read_text(&p, crate::fsio::MAX_INPUT_BYTES)?;
            let found = parse_rust(&text).and_then(|m| find(&m.items, name));
            (p, found)
        }
        _ => return Ok(None),
    };
    Ok(target.map(|t| CustomKernel {
        at: format!("{}:{}", rel(&target_path, root), t.sig.ident.span().start().line),
        implemented: !is_skeleton(&t.block),
    }))
}

fn rel(p: &Path, root: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).to_string_lossy().replace('\\', "/")
}

/// What the generated trait does for an operator, before reachability.
enum Direct {
    Native(String),
    Recipe { name: String, callees: Vec<String> },
    Fallback(String),
    None,
}

/// What decides one selected operator's tier: the part of its context [`assemble`] reads.
struct TierRow<'a> {
    qualified: &'a str,
    method: &'a str,
    body: &'a Body,
}

/// The coverage rows of the selected operators `model` (the autograd columns and the schema text
/// when `ag` is given).
fn assemble(
    loaded: &generate::config::LoadedConfig,
    snapshot: &crate::snapshot::PytorchSnapshot,
    model: &[TierRow<'_>],
    recipes: &generate::recipes::Recipes,
    index: &AdapterIndex,
    ag: Option<&generate::autograd::Autograd>,
    indexed: String,
) -> Coverage {
    let method_to_op: HashMap<&str, &str> = model.iter().map(|o| (o.method, o.qualified)).collect();
    let aten_item = format!("impl {TRAIT_NAME} for ");
    let hooks_item = format!("impl {HOOKS_TRAIT} for ");
    // a `xirang-kernel:` device kernel (not a trait method or a hook)
    let (aten_ref, hooks_ref) = (&aten_item, &hooks_item);
    // (a free function: the generator attaches it as the operator's method, `generated/native.rs`)
    let device_kernel = |q: &str| {
        index
            .of(q)
            .find(move |k| !k.item.starts_with(aten_ref) && !k.item.starts_with(hooks_ref) && k.item.starts_with("fn "))
    };
    let mut direct: BTreeMap<&str, Direct> = BTreeMap::new();
    for o in model {
        let q = o.qualified;
        let native = index.of(q).find(|k| k.item.starts_with(&aten_item)).or_else(|| device_kernel(q));
        let host = index.fallbacks_of(q).next();
        let d = if let Some(k) = native {
            Direct::Native(loc(k))
        } else {
            match o.body {
                Body::Recipe { function, .. } => Direct::Recipe {
                    name: format!("recipes::{function}"),
                    callees: recipes.chosen.get(q).map(|c| c.callees.iter().cloned().collect()).unwrap_or_default(),
                },
                Body::Out { functional_method, .. } | Body::Inplace { functional_method, .. } => {
                    let f = method_to_op.get(functional_method.as_str()).copied().unwrap_or(functional_method);
                    let kind = if matches!(o.body, Body::Out { .. }) { "out=" } else { "in-place" };
                    Direct::Recipe { name: format!("{kind} wrapper of {f}"), callees: vec![f.to_string()] }
                }
                Body::Fallback => host.map_or(Direct::None, |k| Direct::Fallback(loc(k))),
            }
        };
        direct.insert(q, d);
    }
    // reachability: native and fallback operators, then recipes whose callees all are (fixed point)
    let mut reachable: BTreeSet<&str> =
        direct.iter().filter(|(_, d)| matches!(d, Direct::Native(_) | Direct::Fallback(_))).map(|(q, _)| *q).collect();
    loop {
        let before = reachable.len();
        for (q, d) in &direct {
            if let Direct::Recipe { callees, .. } = d
                && callees.iter().all(|c| reachable.contains(c.as_str()))
            {
                reachable.insert(q);
            }
        }
        if reachable.len() == before {
            break;
        }
    }

    // autograd: node groups per operator
    let nodes: HashMap<&str, &generate::autograd::NodeCtx> =
        ag.iter().flat_map(|ag| &ag.nodes).map(|n| (n.op.as_str(), n)).collect();
    let functions: HashMap<String, &crate::registry::NativeFunction> =
        snapshot.registry.functions.iter().map(|f| (f.func.name.to_string(), f)).collect();

    let mut ops = Vec::new();
    for o in model {
        let q = o.qualified;
        let host = index.fallbacks_of(q).next().map(loc);
        let mut row = OpCoverage {
            op: q.to_string(),
            // (the tiers alone, [`tiers`], leave the schema text out: `diff` never shows it)
            schema: if ag.is_some() {
                functions.get(q).map(|f| f.func.to_string()).unwrap_or_default()
            } else {
                String::new()
            },
            tier: Tier::None,
            recipe: None,
            callees: Vec::new(),
            at: None,
            host: host.clone(),
            unwired_kernel: None,
            reason: None,
            core: functions.get(q).is_some_and(|f| f.tags.iter().any(|t| t == "core")),
            upstream: functions.get(q).map_or(Upstream::Required, |f| Upstream::of(f)),
            device_only: functions.get(q).is_some_and(|f| f.device_only()),
            derivative: false,
            inputs: Vec::new(),
        };
        match &direct[q] {
            Direct::Native(at) => {
                row.tier = Tier::Native;
                row.at = Some(at.clone());
            }
            Direct::Fallback(at) => {
                row.tier = Tier::Fallback;
                row.at = Some(at.clone());
            }
            Direct::None => {
                let inplace_view = functions.get(q).is_some_and(|f| f.tags.iter().any(|t| t == "inplace_view"));
                row.reason = Some(if inplace_view {
                    "in-place view (tag inplace_view): changes the handle's geometry, so no in-place wrapper over the functional operator; no native kernel or host implementation".into()
                } else {
                    "no native kernel, no recipe and no host implementation".into()
                });
            }
            Direct::Recipe { name, callees } => {
                row.recipe = Some(name.clone());
                row.callees = callees.clone();
                if reachable.contains(q) {
                    row.tier = Tier::Recipe;
                } else {
                    let bad: Vec<&str> =
                        callees.iter().map(String::as_str).filter(|c| !reachable.contains(c)).collect();
                    row.reason = Some(format!("{name} calls unreachable {}", bad.join(", ")));
                }
            }
        }
        if row.tier != Tier::Native {
            // a marked method of some type: the generator attaches free functions only
            row.unwired_kernel = index
                .of(q)
                .find(|k| !k.item.starts_with(aten_ref) && !k.item.starts_with(hooks_ref) && !k.item.starts_with("fn "))
                .map(loc);
        }
        if let Some(n) = nodes.get(q) {
            row.derivative = true;
            let mut by_input: HashMap<String, InputCoverage> = HashMap::new();
            for g in &n.groups {
                for v in &g.inputs {
                    let input = v.strip_prefix("g_").unwrap_or(v).to_string();
                    let c = match (&g.code, &g.hook) {
                        (Some(_), _) => InputCoverage {
                            input: input.clone(),
                            status: if g.upstream_not_implemented {
                                GradStatus::NotImplementedUpstream
                            } else {
                                GradStatus::Translated
                            },
                            hook: None,
                            at: None,
                        },
                        (None, hook) => {
                            let k = hook.as_deref().and_then(|h| index.hook(h));
                            InputCoverage {
                                input: input.clone(),
                                status: if k.is_some() { GradStatus::HandWritten } else { GradStatus::MissingHook },
                                hook: hook.clone(),
                                at: k.map(loc),
                            }
                        }
                    };
                    by_input.insert(input, c);
                }
            }
            // argument order; Tensor inputs without a formula are not differentiable
            if let Some(f) = functions.get(q) {
                let a = &f.func.arguments;
                for arg in a.positional.iter().chain(&a.kwarg_only) {
                    if let Some(c) = by_input.remove(&arg.name) {
                        row.inputs.push(c);
                    } else if is_tensor(&arg.ty) {
                        row.inputs.push(InputCoverage {
                            input: arg.name.clone(),
                            status: GradStatus::NotDifferentiable,
                            hook: None,
                            at: None,
                        });
                    }
                }
            }
            // formulas for names that are not arguments (none expected): keep them, sorted
            let mut rest: Vec<InputCoverage> = by_input.into_values().collect();
            rest.sort_by(|a, b| a.input.cmp(&b.input));
            row.inputs.extend(rest);
        }
        ops.push(row);
    }
    let cfg = &loaded.config;
    let mut select = format!("select = {:?}", cfg.operators.select);
    if cfg.operators.core {
        select.push_str(", core = true");
    }
    Coverage {
        adapter: cfg.adapter.name.clone(),
        pytorch: snapshot.meta.version.clone(),
        select,
        indexed,
        ops,
        custom_file: String::new(),
        custom: Vec::new(),
    }
}

fn is_tensor(t: &Type) -> bool {
    match t {
        Type::Base(BaseTy::Tensor) => true,
        Type::Optional(inner) => is_tensor(inner),
        Type::List { elem, .. } => is_tensor(elem),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// rendering
// ---------------------------------------------------------------------------------------------

fn forward_text(o: &OpCoverage) -> String {
    match (o.tier, &o.recipe) {
        (Tier::Recipe, Some(r)) => format!("recipe ({r})"),
        (t, _) => t.as_str().to_string(),
    }
}

fn where_text(o: &OpCoverage) -> String {
    let mut parts = Vec::new();
    if let Some(a) = &o.at {
        parts.push(a.clone());
    }
    if let Some(r) = &o.reason {
        parts.push(r.clone());
    }
    if let Some(k) = &o.unwired_kernel {
        parts.push(format!("unwired device kernel {k}"));
    }
    parts.join("; ")
}

fn autograd_text(o: &OpCoverage) -> String {
    if !o.derivative {
        return "no derivative entry".into();
    }
    if o.inputs.is_empty() {
        return "no differentiable input".into();
    }
    o.inputs
        .iter()
        .map(|i| match &i.at {
            Some(at) => format!("{}: {} ({at})", i.input, i.status.as_str()),
            None => format!("{}: {}", i.input, i.status.as_str()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn totals_lines(c: &Coverage) -> Vec<(String, String)> {
    let t = c.tier_counts();
    let g = c.grad_counts();
    let (done, with) = c.complete_backward();
    vec![
        ("operators".into(), c.ops.len().to_string()),
        (
            "forward".into(),
            Tier::ALL.iter().map(|x| format!("{} {}", x.as_str(), t[x])).collect::<Vec<_>>().join(", ")
                + &format!(" ({:.1}% reachable)", c.reachable_pct()),
        ),
        (
            "inside pytorch".into(),
            Upstream::ALL
                .iter()
                .map(|u| {
                    let ops: Vec<&OpCoverage> = c.ops.iter().filter(|o| o.upstream == *u).collect();
                    let reach = ops.iter().filter(|o| o.tier != Tier::None).count();
                    format!("{} {} ({reach} reachable)", u.as_str(), ops.len())
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        {
            let d: Vec<&OpCoverage> = c.ops.iter().filter(|o| o.device_only).collect();
            (
                "accelerator-only upstream".into(),
                format!(
                    "{} operators PyTorch has kernels for only on accelerators (the CPU fallback cannot run them): ",
                    d.len()
                ) + &Tier::ALL
                    .iter()
                    .map(|x| format!("{} {}", x.as_str(), d.iter().filter(|o| o.tier == *x).count()))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        },
        {
            let k = c.core_tier_counts();
            let n: usize = k.values().sum();
            let reach = n - k[&Tier::None];
            (
                "core aten".into(),
                format!("{n} operators: ")
                    + &Tier::ALL.iter().map(|x| format!("{} {}", x.as_str(), k[x])).collect::<Vec<_>>().join(", ")
                    + &format!(" ({:.1}% reachable)", pct(reach, n)),
            )
        },
        (
            "autograd inputs".into(),
            GradStatus::ALL.iter().map(|x| format!("{} {}", x.as_str(), g[x])).collect::<Vec<_>>().join(", ")
                + &format!(" ({:.1}% of differentiable inputs have a backward)", c.autograd_pct()),
        ),
        (
            "autograd operators".into(),
            format!(
                "{} with a derivative entry, {} without; {done} of {with} with differentiable inputs have a complete backward",
                c.ops.len() - c.no_derivative(),
                c.no_derivative()
            ),
        ),
        {
            let (n, implemented) = c.custom_counts();
            let rules = c.custom.iter().filter(|o| o.derivative).count();
            let translated =
                c.custom.iter().flat_map(|o| &o.inputs).filter(|i| i.status == GradStatus::Translated).count();
            (
                "custom operators".into(),
                format!(
                    "{n}, implemented {implemented} ({}); {rules} with gradient rules, {translated} input(s) translated into backward nodes",
                    if c.custom_file.is_empty() { "no custom-operator file" } else { c.custom_file.as_str() }
                ),
            )
        },
    ]
}

fn custom_autograd_text(o: &CustomCoverage) -> String {
    if !o.derivative {
        return "no gradient rules".into();
    }
    let inputs: Vec<String> = o.inputs.iter().map(|i| format!("{}: {}", i.input, i.status.as_str())).collect();
    let inputs = if inputs.is_empty() { "no differentiable input".to_string() } else { inputs.join(", ") };
    match &o.node {
        Some(n) => format!("{inputs} ({n})"),
        None => inputs,
    }
}

fn custom_where_text(o: &CustomCoverage) -> String {
    let mut parts: Vec<String> = o.at.iter().chain(&o.reason).cloned().collect();
    parts.push(format!("declared at {}", o.declared));
    parts.join("; ")
}

/// The plain-text report, fitted to `width` columns (see [`crate::width`]): totals wrapped at
/// spaces, each operator on one line cut to fit (ending in `...`). The operator column takes at
/// most 3/10 of the width (a longer name is kept whole and shifts its row) and the forward column
/// 1/5 (longer tiers are cut), so that the autograd and where columns keep some room.
/// `None` (`--wide`): every row whole, the columns as wide as their widest cell.
pub fn render_text(c: &Coverage, width: Option<usize>) -> String {
    use crate::width::{columns, cut, fit, wrap};
    let mut s = String::new();
    let head = format!(
        "coverage of {} for PyTorch {} (xirang.toml [operators] {}; adapter index: {})",
        c.adapter, c.pytorch, c.select, c.indexed
    );
    for l in wrap(&head, width, 2) {
        let _ = writeln!(s, "{l}");
    }
    for (k, v) in totals_lines(c) {
        for l in wrap(&format!("{k}: {v}"), width, 2) {
            let _ = writeln!(s, "{l}");
        }
    }
    s.push('\n');
    if !c.custom.is_empty() {
        let w = c.custom.iter().map(|o| columns(&o.op)).max().unwrap_or(2).max(15);
        let _ = writeln!(s, "{}", fit(&format!("{:w$}  {:7}  AUTOGRAD  [WHERE]", "CUSTOM OPERATOR", "FORWARD"), width));
        for o in &c.custom {
            let line =
                format!("{:w$}  {:7}  {}  [{}]", o.op, o.tier.as_str(), custom_autograd_text(o), custom_where_text(o));
            let _ = writeln!(s, "{}", fit(&line, width));
        }
        s.push('\n');
    }
    let mut w = c.ops.iter().map(|o| columns(&o.op)).max().unwrap_or(2).max(8);
    let mut fw = c.ops.iter().map(|o| columns(&forward_text(o))).max().unwrap_or(7).max(7);
    if let Some(total) = width {
        w = w.min((total * 3 / 10).max(12));
        fw = fw.min((total / 5).max(8));
    }
    let _ = writeln!(s, "{}", fit(&format!("{:w$}  {:fw$}  AUTOGRAD  [WHERE]", "OPERATOR", "FORWARD"), width));
    for o in &c.ops {
        let wh = where_text(o);
        let wh = if wh.is_empty() { String::new() } else { format!("  [{wh}]") };
        let forward = match width {
            Some(_) => cut(&forward_text(o), fw),
            None => forward_text(o),
        };
        let line = format!("{:w$}  {forward:fw$}  {}{wh}", o.op, autograd_text(o));
        let _ = writeln!(s, "{}", fit(&line, width));
    }
    s
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The markdown report (the committed `diffs/coverage.md`).
pub fn render_markdown(c: &Coverage) -> String {
    let mut s = format!(
        "# Operator coverage: {} for PyTorch {}\n\nGenerated by `xirang-scan coverage --write` (checked by `xirang-scan coverage --check` in CI); \
         do not edit by hand. Selection: xirang.toml `[operators] {}`; hand-written code indexed in `{}`. \
         Tiers as the generated front-ends dispatch: native (a function marked `xirang-kernel:`, attached as the operator's method in `generated/native.rs`, or a hand-written `impl AtenOps` method), recipe (composition recipe or \
         out=/in-place wrapper, counted only when every callee is reachable), fallback (host implementation), none. \
         Machine-readable: [coverage.json](coverage.json).\n\n",
        c.adapter, c.pytorch, c.select, c.indexed
    );
    s.push_str("| | |\n| --- | --- |\n");
    for (k, v) in totals_lines(c) {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    if !c.custom.is_empty() {
        let _ = writeln!(
            s,
            "\nCustom operators (`{}`: native when the adapter implements the `CustomOps` method; backward: the generated node of the gradient rules):\n",
            c.custom_file
        );
        s.push_str("| custom operator | forward | where | autograd |\n| --- | --- | --- | --- |\n");
        for o in &c.custom {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} |",
                o.op,
                o.tier.as_str(),
                md_escape(&custom_where_text(o)),
                md_escape(&custom_autograd_text(o))
            );
        }
    }
    let device_only: Vec<&OpCoverage> = c.ops.iter().filter(|o| o.device_only).collect();
    if !device_only.is_empty() {
        s.push_str(
            "\nAccelerator-only operators (PyTorch has CUDA/XPU/MPS kernels and no CPU or composite kernel: the CPU \
             fallback can never run them, so each is served by the adapter or says why it is not reached):\n\n",
        );
        s.push_str("| operator | forward | where, or why it is not reached |\n| --- | --- | --- |\n");
        for o in device_only {
            let why = if o.tier == Tier::None { device_only_reason(&o.op).to_string() } else { where_text(o) };
            let _ = writeln!(s, "| `{}` | {} | {} |", o.op, md_escape(&forward_text(o)), md_escape(&why));
        }
    }
    s.push_str("\n| operator | forward | where | autograd |\n| --- | --- | --- | --- |\n");
    for o in &c.ops {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} |",
            o.op,
            md_escape(&forward_text(o)),
            md_escape(&where_text(o)),
            md_escape(&autograd_text(o))
        );
    }
    s
}

/// Why an accelerator-only operator the adapter does not serve is not reached on a PrivateUse1
/// device, by the family PyTorch selects it from.
pub fn device_only_reason(op: &str) -> &'static str {
    let base = op.split('.').next().unwrap_or(op);
    const FAMILIES: &[(&[&str], &str)] = &[
        (
            &["cudnn", "_cudnn_rnn", "_cudnn_ctc", "_use_cudnn", "_cudnn_init", "miopen", "_use_miopen"],
            "a cuDNN/MIOpen library kernel: PyTorch selects it only for CUDA/ROCm tensors",
        ),
        (
            &[
                "_scaled_dot_product_",
                "_flash_attention",
                "_efficient_attention",
                "_cudnn_attention",
                "_triton",
                "_fill_mem_eff",
            ],
            "a fused attention kernel: `scaled_dot_product_attention` takes it only when `_fused_sdp_choice` picks it, and for PrivateUse1 it picks the math path",
        ),
        (
            &[
                "_cslt",
                "_sparse_semi_structured",
                "_to_sparse_semi_structured",
                "_mixed_dtypes_linear",
                "_weight_int4pack",
                "_convert_weight_to_int4pack",
                "_scaled_addmm",
                "_scaled_grouped_mm",
            ],
            "a vendor-tuned matmul (cuSPARSELt, 2:4 sparsity, int4/fp8 scaling): called explicitly by quantization libraries, never by PyTorch's own kernels or decompositions",
        ),
        (
            &[
                "batch_norm_stats",
                "batch_norm_elemt",
                "batch_norm_gather_stats",
                "batch_norm_backward_reduce",
                "batch_norm_backward_elemt",
            ],
            "SyncBatchNorm's kernels: reached only under torch.distributed (the distributed backend's work)",
        ),
        (&["record_stream"], "stream bookkeeping of the caching allocator: the streams and events work"),
    ];
    FAMILIES
        .iter()
        .find(|(prefixes, _)| prefixes.iter().any(|p| base.starts_with(p)))
        .map_or("not served: called directly, it raises; no tier of the adapter implements it yet", |(_, why)| why)
}

/// The JSON report: totals, then one operator per line (sorted).
pub fn render_json(c: &Coverage) -> Result<String, Error> {
    let t: BTreeMap<&str, usize> = c.tier_counts().into_iter().map(|(k, v)| (k.as_str(), v)).collect();
    let g: BTreeMap<String, usize> =
        c.grad_counts().into_iter().map(|(k, v)| (k.as_str().replace([' ', '-'], "_"), v)).collect();
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"adapter\": {},", enc(&c.adapter)?);
    let _ = writeln!(s, "  \"pytorch\": {},", enc(&c.pytorch)?);
    let _ = writeln!(s, "  \"select\": {},", enc(&c.select)?);
    let _ = writeln!(s, "  \"indexed\": {},", enc(&c.indexed)?);
    let k: BTreeMap<&str, usize> = c.core_tier_counts().into_iter().map(|(k, v)| (k.as_str(), v)).collect();
    let _ = writeln!(s, "  \"tiers\": {},", enc(&t)?);
    let _ = writeln!(s, "  \"core_aten_tiers\": {},", enc(&k)?);
    let _ = writeln!(s, "  \"autograd_inputs\": {},", enc(&g)?);
    let _ = writeln!(s, "  \"no_derivative_entry\": {},", c.no_derivative());
    let (n, implemented) = c.custom_counts();
    let _ = writeln!(s, "  \"custom_file\": {},", enc(&c.custom_file)?);
    let _ = writeln!(s, "  \"custom\": {{\"operators\":{n},\"implemented\":{implemented}}},");
    s.push_str("  \"custom_operators\": [");
    for (i, o) in c.custom.iter().enumerate() {
        let _ = write!(s, "\n    {}", enc(o)?);
        s.push_str(if i + 1 < c.custom.len() { "," } else { "\n  " });
    }
    s.push_str("],\n");
    s.push_str("  \"operators\": [\n");
    for (i, o) in c.ops.iter().enumerate() {
        let _ = write!(s, "    {}", enc(o)?);
        s.push_str(if i + 1 < c.ops.len() { ",\n" } else { "\n" });
    }
    s.push_str("  ]\n}\n");
    Ok(s)
}

fn enc<T: Serialize + ?Sized>(v: &T) -> Result<String, Error> {
    serde_json::to_string(v).map_err(|e| CoverageError::Json(e.to_string()).into())
}

/// The committed files: path relative to the repository root -> content.
pub fn committed(c: &Coverage) -> Result<Vec<(PathBuf, String)>, Error> {
    Ok(vec![(PathBuf::from(REPORT_JSON), render_json(c)?), (PathBuf::from(REPORT_MD), render_markdown(c))])
}

/// Writes the committed report under `root`; returns the files that changed.
pub fn write(root: &Path, c: &Coverage) -> Result<Vec<PathBuf>, Error> {
    Ok(crate::fsio::write_changed(root, "diffs", &committed(c)?, &[])?)
}

/// The committed files under `root` that differ from the report.
pub fn check(root: &Path, c: &Coverage) -> Result<Vec<PathBuf>, Error> {
    let mut stale = Vec::new();
    for (rel, text) in committed(c)? {
        match std::fs::read(root.join(&rel)) {
            Ok(b) if b == text.as_bytes() => {}
            _ => stale.push(rel),
        }
    }
    Ok(stale)
}

/// Checks a `--fail-under-*` percentage.
pub fn threshold(what: &'static str, value: f64) -> Result<f64, Error> {
    if (0.0..=100.0).contains(&value) { Ok(value) } else { Err(CoverageError::BadThreshold { what, value }.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadedConfig;
    use crate::snapshot::Store;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn inputs() -> Inputs {
        let root = root();
        let cfg = LoadedConfig::load(&root.join("xirang.toml")).expect("xirang.toml");
        let store = Store::discover(Some(&root.join("schemas"))).expect("store");
        Inputs::load(cfg, &store).expect("inputs")
    }

    /// The README's numbers are the code's: the coverage example (totals and the sample rows'
    /// places) and the counts of the generated files it quotes. Regenerate, then fix the README.
    #[test]
    fn readme_numbers_are_the_generated_codes() {
        let root = root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let c = build(&inputs(), None).unwrap();
        let text = render_text(&c, None);
        let totals = &text[..text.find("\n\n").unwrap()];
        assert!(readme.contains(totals), "README's `coverage --wide` example is stale; its totals are now:\n{totals}");
        for op in ["addmm", "exp", "silu"] {
            let line = text.lines().find(|l| l.split_whitespace().next() == Some(op)).unwrap();
            let place = &line[line.rfind('[').unwrap()..];
            let shown = readme.lines().find(|l| l.split_whitespace().next() == Some(op)).unwrap();
            assert!(shown.ends_with(place), "README's row of `{op}` is stale: the report says {place}");
        }
        let g = |f: &str| std::fs::read_to_string(root.join("generated").join(f)).unwrap();
        let version = c.pytorch.clone();
        let (ops, ag, fw) = (g("ops.rs"), g("autograd.rs"), g("forward.rs"));
        let count = |text: &str, key: &str| text.matches(key).count();
        let methods = {
            let t = &ops[ops.find("pub trait AtenOps").unwrap()..];
            let t = &t[..t.find("\n}\n").unwrap()];
            t.lines().filter(|l| l.starts_with("    fn ")).count()
        };
        // `pub static INPLACE_NODES: [(&str, &str); N]`
        let inplace: usize = {
            let t = &ops[ops.find("pub static INPLACE_NODES").unwrap()..];
            let t = &t[t.find("; ").unwrap() + 2..];
            t[..t.find(']').unwrap()].parse().unwrap()
        };
        let bw = |k: &str| count(&ag, &format!("\"{k}\"),"));
        let fwc = |k: &str| count(&fw, &format!("\"{k}\"),"));
        for want in [
            format!("one typed method per selected operator ({methods} for {version})"),
            format!("({} for {version}). Each node", count(&ag, "/// Backward of `")),
            format!(
                "`not_implemented` ({} / {} / {} for {version})",
                bw("translated"),
                bw("hook"),
                bw("not_implemented")
            ),
            format!("in-place operators ({inplace} for {version})"),
            format!(
                "`no_formula` ({} / {} / {} for {version})",
                fwc("translated"),
                fwc("untranslated"),
                fwc("no_formula")
            ),
        ] {
            assert!(readme.contains(&want), "README should say `{want}`");
        }
    }

    fn row<'a>(c: &'a Coverage, op: &str) -> &'a OpCoverage {
        c.ops.iter().find(|o| o.op == op).unwrap_or_else(|| panic!("no row for {op}"))
    }

    #[test]
    fn the_repository_adapter() {
        let inputs = inputs();
        let c = build(&inputs, None).unwrap();
        assert!(c.ops.windows(2).all(|w| w[0].op < w[1].op), "sorted");
        assert_eq!(c.tier_counts().values().sum::<usize>(), c.ops.len());
        // mm's kernel (marked, attached in generated/native.rs): native, at the function
        let mm = row(&c, "mm");
        assert_eq!(mm.tier, Tier::Native);
        assert!(mm.at.as_deref().is_some_and(|a| a.starts_with("adapter-runtime/src/kernels/matmul.rs:")), "{mm:?}");
        // its host implementation is the reference function itself (it takes mm's schema arguments)
        assert!(
            mm.host.as_deref().is_some_and(|a| a.starts_with("adapter-runtime/src/reference/linalg.rs:")),
            "{mm:?}"
        );
        // silu's formula calls `silu_backward`, a runtime helper: translated, no hook to write
        let silu = row(&c, "silu");
        assert_eq!(silu.inputs.len(), 1);
        assert_eq!(silu.inputs[0].status, GradStatus::Translated);
        assert_eq!(silu.inputs[0].hook, None);
        // a host implementation without a kernel: fallback at the marked function
        let fb = c.ops.iter().find(|o| o.tier == Tier::Fallback).expect("a fallback operator");
        assert!(fb.at.as_deref().is_some_and(|a| a.starts_with("adapter-runtime/src/reference/")), "{fb:?}");
        assert!(fb.unwired_kernel.is_none());
        // a view served without a kernel launch, and an operator whose default body is a recipe:
        // native at the marked function
        let t = row(&c, "t");
        assert_eq!(t.tier, Tier::Native);
        assert!(t.at.as_deref().is_some_and(|a| a.starts_with("adapter-runtime/src/kernels/npu_ops.rs:")), "{t:?}");
        assert_eq!(row(&c, "rsqrt").tier, Tier::Native);
        let exp = row(&c, "exp");
        assert_eq!(exp.tier, Tier::Native);
        assert!(exp.at.as_deref().is_some_and(|a| a.starts_with("adapter-runtime/src/kernels/")), "{exp:?}");
        // the generator's autograd rows: every translated / hook row is an input of the report
        let g = c.grad_counts();
        let ag = generate::autograd::autograd_model(&inputs, &c.ops.iter().map(|o| o.op.clone()).collect());
        assert_eq!(g[&GradStatus::Translated], ag.count("translated"));
        assert_eq!(g[&GradStatus::HandWritten] + g[&GradStatus::MissingHook], ag.count("hook"));
        // PyTorch's own `not_implemented(..)` formulas: counted apart, not hooks to write
        assert_eq!(g[&GradStatus::NotImplementedUpstream], ag.count("not_implemented"));
        assert!(g[&GradStatus::NotImplementedUpstream] > 0);
        let acosh_ = row(&c, "acosh_");
        assert_eq!(acosh_.inputs[0].status, GradStatus::NotImplementedUpstream);
        // the custom operator: its kernel file (mod.rs forwards to it), its translated gradient rule;
        // counted apart from the aten operators
        assert!(!c.ops.iter().any(|o| o.op.contains("::")));
        let g = c.custom.iter().find(|o| o.op == "xirang::scaled_gelu").expect("custom row");
        assert_eq!(g.tier, Tier::Native);
        assert_eq!(g.at.as_deref(), Some("adapter-runtime/src/custom/scaled_gelu.rs:23"));
        assert_eq!(g.declared, "custom_ops.yaml:4");
        assert_eq!(g.node.as_deref(), Some("custom::autograd::ScaledGeluBackward"));
        assert_eq!(
            g.inputs.iter().map(|i| (i.input.as_str(), i.status)).collect::<Vec<_>>(),
            [("self", GradStatus::Translated)]
        );
        assert_eq!(c.custom_counts(), (c.custom.len(), c.custom.len()));
        let text = render_text(&c, None);
        assert!(text.contains("custom operators: 1, implemented 1 (custom_ops.yaml)"), "{text}");
        // deterministic
        assert_eq!(render_json(&c).unwrap(), render_json(&build(&inputs, None).unwrap()).unwrap());
        let v: serde_json::Value = serde_json::from_str(&render_json(&c).unwrap()).unwrap();
        assert_eq!(v["operators"].as_array().map(Vec::len), Some(c.ops.len()));
        assert_eq!(v["custom"]["implemented"], 1);
        assert_eq!(v["custom_operators"][0]["op"], "xirang::scaled_gelu");
    }

    #[test]
    fn custom_kernels_forwarded_written_or_still_the_skeleton() {
        let dir = std::env::temp_dir().join(format!("xirang-coverage-custom-{}", std::process::id()));
        let custom_dir = dir.join("src/custom");
        std::fs::create_dir_all(&custom_dir).unwrap();
        let files = [
            (
                "mod.rs",
                "mod done;\nmod todo;\n\nimpl CustomOps for NpuOps {\n    fn done(&self, x: &Tensor) -> Result<Tensor> {\n        done::done(self, x)\n    }\n\n    fn todo(&self, x: &Tensor) -> Result<Tensor> {\n        todo::todo(self, x)\n    }\n\n    fn inline(&self, x: &Tensor) -> Result<Tensor> {\n        aten::neg(self, x)\n    }\n\n    fn r#unsupported(&self) -> Result<Tensor> {\n        return Err(Error::Unsupported(format!(\"not implemented: yet\")));\n    }\n\n    fn elsewhere(&self, x: &Tensor) -> Result<Tensor> {\n        missing::elsewhere(self, x)\n    }\n}\n",
            ),
            (
                "done.rs",
                "/// xirang::done\npub fn done(o: &NpuOps, x: &Tensor) -> Result<Tensor> {\n    aten::neg(o, x)\n}\n",
            ),
            (
                "todo.rs",
                "pub fn todo(o: &NpuOps, x: &Tensor) -> Result<Tensor> {\n    let _ = (o, x);\n    Err(Error::Unsupported(\"not implemented: write the kernel of `xirang::todo` in adapter-runtime/src/custom/todo.rs\".to_string()))\n}\n",
            ),
            // a kernel that declines some inputs with the same words is written
            (
                "other.rs",
                "pub fn other(x: i64) -> Result<i64> {\n    if x < 0 {\n        return Err(Error::Unsupported(\"not implemented for negatives\".into()));\n    }\n    Ok(x)\n}\n",
            ),
        ];
        for (name, text) in files {
            std::fs::write(custom_dir.join(name), text).unwrap();
        }
        let k = custom_kernels(&dir.join("src"), &dir);
        std::fs::remove_dir_all(&dir).unwrap();
        let k = k.unwrap();
        let got = |m: &str| k.get(m).map(|k| (k.at.as_str(), k.implemented));
        assert_eq!(got("done"), Some(("src/custom/done.rs:2", true)));
        assert_eq!(got("todo"), Some(("src/custom/todo.rs:1", false)));
        assert_eq!(got("inline"), Some(("src/custom/mod.rs:13", true)));
        assert_eq!(got("unsupported"), Some(("src/custom/mod.rs:17", false)));
        // a forward the index cannot follow counts at the method
        assert_eq!(got("elsewhere"), Some(("src/custom/mod.rs:21", true)));
        assert_eq!(k.len(), 5);
        let body = |src: &str| syn::parse_str::<syn::Block>(src).unwrap();
        assert!(!is_skeleton(&body("{ if x { return Err(E(\"not implemented\")); } Ok(1) }")));
        assert!(is_skeleton(&body("{ let _ = o; (Err(Error::Unsupported(\"not implemented: x\".into()))) }")));
        assert!(!is_skeleton(&body("{ Err(Error::Unsupported(\"no device\".into())) }")));
    }

    #[test]
    fn text_fits_the_width_or_is_whole_with_wide() {
        use crate::width::columns;
        let c = build(&inputs(), None).unwrap();
        let long = c.ops.iter().max_by_key(|o| columns(&where_text(o)) + columns(&autograd_text(o))).unwrap();
        for width in [60, 100] {
            let text = render_text(&c, Some(width));
            for l in text.lines() {
                assert!(columns(l) <= width, "{width}: {l:?}");
            }
            // totals are wrapped, not cut: every number is there
            assert!(text.contains(&format!("({:.1}% reachable)", c.reachable_pct())), "{text}");
            // one line per operator, long rows cut with `...`
            let row = text.lines().find(|l| l.starts_with(&format!("{} ", long.op))).expect("row");
            assert!(row.ends_with("..."), "{row}");
            assert_eq!(text.lines().skip_while(|l| !l.starts_with("OPERATOR")).skip(1).count(), c.ops.len());
        }
        let wide = render_text(&c, None);
        let row = wide.lines().find(|l| l.starts_with(&format!("{} ", long.op))).expect("row");
        assert!(row.contains(&where_text(long)) && row.contains(&autograd_text(long)), "{row}");
        assert!(!wide.contains("..."));
        assert!(wide.lines().any(|l| columns(l) > 100));
    }

    #[test]
    fn recipes_count_only_when_every_callee_is_reachable() {
        // an adapter with host implementations of mm, mul.Scalar and add.Tensor only
        let dir = std::env::temp_dir().join(format!("xirang-coverage-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("src/host.rs"),
            "static TABLE: &[(&str, usize, HostFn)] = &[(\"add.Tensor\", 3, a), (\"mm\", 2, m), (\"mul.Scalar\", 2, s)];\n",
        )
        .unwrap();
        let c = build(&inputs(), Some(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
        let c = c.unwrap();
        // addmm = mm, mul.Scalar, add.Tensor: a recipe
        let addmm = row(&c, "addmm");
        assert_eq!(addmm.tier, Tier::Recipe, "{addmm:?}");
        assert_eq!(addmm.recipe.as_deref(), Some("recipes::addmm"));
        // baddbmm calls bmm, which has nothing: none, naming it
        let b = row(&c, "baddbmm");
        assert_eq!(b.tier, Tier::None);
        assert!(b.reason.as_deref().is_some_and(|r| r.contains("unreachable bmm")), "{b:?}");
        // add.out wraps add.Tensor (fallback here): a recipe
        assert_eq!(row(&c, "add.out").tier, Tier::Recipe);
        assert_eq!(row(&c, "add.Tensor").tier, Tier::Fallback);
        // nothing hand-written: no native operator, every hook missing, no custom kernel
        assert_eq!(c.tier_counts()[&Tier::Native], 0);
        let g = c.custom.iter().find(|o| o.op == "xirang::scaled_gelu").expect("custom row");
        assert_eq!(g.tier, Tier::None);
        assert_eq!(
            g.reason.as_deref(),
            Some("not implemented: write the kernel in adapter-runtime/src/custom/scaled_gelu.rs")
        );
        assert_eq!(c.custom_counts(), (1, 0));
        assert_eq!(c.grad_counts()[&GradStatus::HandWritten], 0);
        assert!(matches!(
            build(&inputs(), Some(Path::new("/nonexistent/xirang"))),
            Err(Error::Coverage(CoverageError::AdapterNotFound(_)))
        ));
    }
}
