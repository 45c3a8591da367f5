//! Joins changes with this adapter: where a person acts, and what the generator rewrites.
//!
//! Which places a change lands on depends on what the change does to the adapter's code, not only
//! on its severity (a rule's `remedy` is general; an impact's `action` is for that place):
//!
//! - `kernel`: a change to the operator's Rust signature (an argument inserted, removed, retyped,
//!   made optional, reordered; a return or the out= group changed; the operator removed or its
//!   overload renamed; a default changed, which the kernel may have relied on) lands on each
//!   hand-written kernel of the operator ([`super::adapter_index`]: `impl AtenOps` methods and
//!   `xirang-kernel:` functions), with file and line. Changes the Rust signature does not see
//!   (`int` -> `SymInt`: both are `i64`; an argument renamed or made keyword-only: Rust passes by
//!   position; a return renamed) land on no kernel. An operator that now decomposes upstream and
//!   left the selection lands on its kernel too: the trait method is gone.
//! - `host`: the same signature changes land on the operator's host (CPU-fallback)
//!   implementation, registered by name and arity.
//! - `hook`: a change to a derivative entry lands on the operator's hand-written backward
//!   (`BackwardHooks` methods) when it has one; a translated backward is regenerated.
//! - `cover`: an operator the adapter must now cover and does not (dispatch changes that leave no
//!   composite kernel, an operator joining Core ATen, and `coverage.unreachable`), judged on the
//!   new version's coverage ([`super::AdapterStates`]): already covered means nothing to do.
//! - `backend`: a breaking or action change to an operator listed in a backend yaml passed with
//!   `--backend` lands on that entry.
//! - `generated`: schema, dispatch and derivative changes land on the generated item rewritten from
//!   the new snapshot (the `AtenOps` trait method in `generated/ops.rs`, the node in
//!   `generated/autograd.rs`): the generator handles it, nobody edits it.

use std::collections::HashMap;
use std::path::Path;

use super::{AdapterStates, Change, Impact, ImpactSource, Location, Severity};
use crate::adapter_index::{AdapterIndex, HOOKS_TRAIT};
use crate::backend::BackendYaml;
use crate::naming;

/// The generated file holding the `AtenOps` trait (one method per operator), relative to the
/// generated folder.
pub const GENERATED_TRAIT_FILE: &str = "ops.rs";
/// The generated file holding the autograd nodes (one per derivative entry).
pub const GENERATED_AUTOGRAD_FILE: &str = "autograd.rs";
/// The default generated folder (`[adapter] generated` of xirang.toml).
pub const GENERATED_DIR: &str = "generated";

/// A backend yaml and the path it is reported under.
pub struct Backend<'a> {
    pub path: String,
    pub yaml: &'a BackendYaml,
}

/// Lines of the generated items under the generated folder: `AtenOps` trait methods in `ops.rs`
/// (by method name) and autograd nodes in `autograd.rs` (by operator, from the node's
/// "/// Backward of `<schema>`" line). Empty when not generated yet.
#[derive(Debug, Default)]
pub struct GeneratedIndex {
    /// The folder as reported (`generated`), relative to the repository root.
    dir: String,
    methods: HashMap<String, u32>,
    nodes: HashMap<String, u32>,
}

impl GeneratedIndex {
    /// Reads `<root>/<dir>/ops.rs` and `<root>/<dir>/autograd.rs` when they exist.
    pub fn load_from(root: &Path, dir: &str) -> GeneratedIndex {
        let mut g = GeneratedIndex { dir: dir.trim_end_matches('/').to_string(), ..Default::default() };
        if let Ok(text) =
            crate::fsio::read_text(&root.join(dir).join(GENERATED_TRAIT_FILE), crate::fsio::MAX_INPUT_BYTES)
        {
            // the trait's methods: `    fn name(&self` inside `pub trait AtenOps {`
            let mut in_trait = false;
            for (i, l) in text.lines().enumerate() {
                if l.starts_with("pub trait AtenOps") {
                    in_trait = true;
                } else if in_trait && l.starts_with('}') {
                    break;
                } else if in_trait && let Some(rest) = l.strip_prefix("    fn ") {
                    let name: String =
                        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '#').collect();
                    g.methods.entry(name).or_insert(i as u32 + 1);
                }
            }
        }
        if let Ok(text) =
            crate::fsio::read_text(&root.join(dir).join(GENERATED_AUTOGRAD_FILE), crate::fsio::MAX_INPUT_BYTES)
        {
            for (i, l) in text.lines().enumerate() {
                if let Some(rest) = l.strip_prefix("/// Backward of `") {
                    let op: String = rest.chars().take_while(|c| *c != '(').collect();
                    g.nodes.entry(op).or_insert(i as u32 + 1);
                }
            }
        }
        g
    }

    /// [`GeneratedIndex::load_from`] the default folder, `generated/`.
    pub fn load(root: &Path) -> GeneratedIndex {
        Self::load_from(root, GENERATED_DIR)
    }

    fn file(&self, name: &str) -> String {
        if self.dir.is_empty() { format!("{GENERATED_DIR}/{name}") } else { format!("{}/{name}", self.dir) }
    }

    fn method(&self, method: &str) -> Location {
        Location::new(self.file(GENERATED_TRAIT_FILE), self.methods.get(method).copied())
    }

    fn node(&self, op: &str) -> Location {
        Location::new(self.file(GENERATED_AUTOGRAD_FILE), self.nodes.get(op).copied())
    }
}

/// What a change asks of the adapter's hand-written code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// The operator's Rust signature (or existence) changes: kernels and host implementations.
    Signature,
    /// The semantics of an argument changes, not its type (a default): check the kernels.
    Check,
    /// The operator may need a kernel now: only when the new coverage has none.
    Cover,
    /// A new operator: it needs a kernel only when it is Core ATen and the new coverage has none.
    CoverCore,
    /// Its backward changes: a hand-written hook, if any.
    Backward,
    /// The operator now decomposes upstream: a kernel is deleted when the operator left the selection.
    Decomposes,
    /// Nothing by hand.
    Nothing,
}

fn need(rule: &str) -> Need {
    match rule {
        "op.removed"
        | "op.overload_renamed"
        | "arg.added_required"
        | "arg.added_default_end"
        | "arg.inserted"
        | "arg.removed"
        | "arg.reordered"
        | "arg.retyped"
        | "arg.widened"
        | "arg.alias_changed"
        | "out.changed"
        | "ret.count_changed"
        | "ret.type_changed" => Need::Signature,
        "arg.default_changed" => Need::Check,
        // (not `dispatch.composite_explicit`: the operator decomposed before, so neither the
        // standalone runtime nor the bridge served it natively; inside PyTorch its new composite
        // kernel serves every backend)
        "dispatch.no_longer_composite" | "dispatch.composite_removed" | "tag.core_added" | "coverage.unreachable" => {
            Need::Cover
        }
        "deriv.removed"
        | "deriv.formula_changed"
        | "deriv.saved_changed"
        | "deriv.output_differentiability_changed"
        | "deriv.added" => Need::Backward,
        "dispatch.now_composite" => Need::Decomposes,
        "op.added" => Need::CoverCore,
        _ => Need::Nothing,
    }
}

/// What to do at a kernel for a change, in words.
fn kernel_action(c: &Change) -> String {
    let what = c.detail.as_deref().map(|d| format!(" (`{d}`)")).unwrap_or_default();
    match c.rule.as_str() {
        "op.removed" => "delete it: the operator is gone, and so is its trait method".into(),
        "op.overload_renamed" => {
            format!(
                "rename it after the new overload{}",
                c.detail.as_deref().map(|d| format!(" `{d}`")).unwrap_or_default()
            )
        }
        "arg.default_changed" => format!("check it still matches the new default{what}"),
        "dispatch.now_composite" => "delete it: the operator decomposes upstream and left the selection".into(),
        _ => format!("update its signature and body{what}: {}", c.message),
    }
}

/// Whether every input a hook (`hook_<method>_<inputs>`) computes keeps its backward formula
/// between the two formula texts of a `deriv.formula_changed` change (one `inputs: formula` line
/// each), compared after [`respell`].
fn hook_inputs_unchanged(method: &str, old: &str, new: &str) -> bool {
    let formula = |text: &str, input: &str| -> Option<String> {
        text.lines().find_map(|l| {
            let (keys, f) = l.split_once(": ")?;
            keys.split(", ").any(|k| k == input).then(|| respell(f))
        })
    };
    // the hook's inputs: the longest suffix of its name whose parts are all keys of the formulas
    let keys: Vec<&str> =
        old.lines().chain(new.lines()).filter_map(|l| l.split_once(": ")).flat_map(|(k, _)| k.split(", ")).collect();
    let parts: Vec<&str> = method.split('_').collect();
    let mut inputs: Vec<String> = Vec::new();
    let mut end = parts.len();
    while end > 1 {
        // an input name may itself contain `_` (per_sample_weights): take the longest that is a key
        let found = (1..end).find_map(|start| {
            let name = parts[start..end].join("_");
            keys.contains(&name.as_str()).then_some((start, name))
        });
        match found {
            Some((start, name)) => {
                inputs.push(name);
                end = start;
            }
            None => break,
        }
    }
    !inputs.is_empty() && inputs.iter().all(|i| formula(old, i).is_some() && formula(old, i) == formula(new, i))
}

/// A formula with PyTorch's own respellings undone, so that a rewrite that keeps the math is no
/// change: `masked_fill_inplace_if_safe(x, m, v)` (2.6, for functionalization) is `x.masked_fill_(m,
/// v)`; spaces are collapsed.
pub fn respell(formula: &str) -> String {
    const HELPER: &str = "masked_fill_inplace_if_safe(";
    let mut s: String = formula.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut from = 0;
    while let Some(i) = s[from..].find(HELPER).map(|i| i + from) {
        let prev = s[..i].chars().next_back();
        let args_at = i + HELPER.len();
        // the three arguments at depth 0, up to the matching parenthesis
        let (mut depth, mut cuts, mut close) = (0i32, vec![args_at], None);
        for (k, ch) in s[args_at..].char_indices() {
            match ch {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => {
                    close = Some(args_at + k);
                    break;
                }
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => cuts.push(args_at + k + 1),
                _ => {}
            }
        }
        let Some(close) = close else { break };
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') || cuts.len() != 3 {
            from = args_at;
            continue;
        }
        let arg = |a: usize, b: usize| s[a..b].trim().trim_end_matches(',').trim().to_string();
        let (x, m, v) = (arg(cuts[0], cuts[1]), arg(cuts[1], cuts[2]), arg(cuts[2], close));
        let rewritten = format!("{x}.masked_fill_({m}, {v})");
        s.replace_range(i..=close, &rewritten);
        from = i;
    }
    s
}

fn generated_file(rule: &str) -> Option<&'static str> {
    let family = rule.split('.').next().unwrap_or("");
    match family {
        "op" | "arg" | "out" | "ret" | "dispatch" | "structured" => Some(GENERATED_TRAIT_FILE),
        "deriv" => Some(GENERATED_AUTOGRAD_FILE),
        _ => None,
    }
}

/// All impacts of `changes` (unsorted; [`super::sort_report`] orders them).
pub fn impacts(
    changes: &[Change],
    kernels: &AdapterIndex,
    backends: &[Backend<'_>],
    generated: &GeneratedIndex,
    states: Option<&AdapterStates>,
) -> Vec<Impact> {
    let mut names: Vec<(String, &str, &str, u32)> = Vec::new();
    for b in backends {
        for (list, e) in b.yaml.entries() {
            if list != "custom" {
                names.push((e.op.to_string(), list, b.path.as_str(), e.line));
            }
        }
    }
    let mut by_op: HashMap<&str, Vec<(&str, &str, u32)>> = HashMap::new();
    for (op, list, path, line) in &names {
        by_op.entry(op.as_str()).or_default().push((list, path, *line));
    }
    let hooks_item = format!("impl {HOOKS_TRAIT} for ");

    let mut out = Vec::new();
    let mut push = |c: &Change, source: ImpactSource, location: Location, item: String, action: String| {
        out.push(Impact {
            subject: c.subject.clone(),
            rule: c.rule.clone(),
            severity: c.severity,
            source,
            location,
            item,
            fingerprint: c.fingerprint.clone(),
            action,
        });
    };
    for c in changes {
        let op = c.subject.as_str();
        let code_kernels = || kernels.of(op).filter(|k| !k.item.starts_with(&hooks_item));
        match need(&c.rule) {
            Need::Signature | Need::Check => {
                for k in code_kernels() {
                    push(
                        c,
                        ImpactSource::Kernel,
                        Location::new(&k.file, Some(k.line)),
                        k.item.clone(),
                        kernel_action(c),
                    );
                }
                if need(&c.rule) == Need::Signature {
                    for h in kernels.fallbacks_of(op) {
                        push(
                            c,
                            ImpactSource::Host,
                            Location::new(&h.file, Some(h.line)),
                            format!("host implementation of {op}"),
                            if c.rule == "op.removed" {
                                "remove its fallback-table entry".into()
                            } else {
                                "update its arity and argument handling to the new schema".into()
                            },
                        );
                    }
                }
            }
            Need::Cover | Need::CoverCore => {
                // judged on the new version's coverage; without one, the rule's remedy stands alone.
                // Not asked: an operator PyTorch implements only for other devices (a CUDA library
                // entry point), and a new operator outside Core ATen.
                if let Some(s) = states
                    && let Some(st) = s.new.get(op)
                    && !st.reachable
                    && !st.foreign
                    && (need(&c.rule) == Need::Cover || st.core)
                {
                    let at = Location::new(s.kernel_file.clone().unwrap_or_else(|| "adapter-runtime/src".into()), None);
                    push(
                        c,
                        ImpactSource::Cover,
                        at,
                        format!("cover {op}"),
                        format!(
                            "add a native kernel (a function marked `/// xirang-kernel: {op}`, then `xirang-scan \
                             generate`), a recipe (templates/recipes.toml) or a host implementation: today {}",
                            st.how
                        ),
                    );
                }
            }
            Need::Backward => {
                for k in kernels.of(op).filter(|k| k.item.starts_with(&hooks_item)) {
                    // a formula change lands on a hook only when the backward formula of the
                    // hook's own input changed (not another input's, not a forward formula), and
                    // not when PyTorch only respelled it
                    if c.rule == "deriv.formula_changed"
                        && let (Some(o), Some(n), Some(method)) = (&c.old, &c.new, k.hook_method())
                        && hook_inputs_unchanged(method, o, n)
                    {
                        continue;
                    }
                    push(
                        c,
                        ImpactSource::Hook,
                        Location::new(&k.file, Some(k.line)),
                        k.item.clone(),
                        match (&c.old, &c.new) {
                            (Some(o), Some(n)) if c.rule == "deriv.formula_changed" => {
                                format!("check the hand-written backward against the new formula: `{o}` -> `{n}`")
                            }
                            _ => format!("update the hand-written backward: {}", c.message),
                        },
                    );
                }
            }
            Need::Decomposes => {
                let left = states.is_some_and(|s| !s.new.contains_key(op));
                if left {
                    for k in code_kernels() {
                        push(
                            c,
                            ImpactSource::Kernel,
                            Location::new(&k.file, Some(k.line)),
                            k.item.clone(),
                            kernel_action(c),
                        );
                    }
                }
            }
            Need::Nothing => {}
        }
        if c.severity <= Severity::Action
            && let Some(entries) = by_op.get(op)
        {
            for (list, path, line) in entries {
                push(
                    c,
                    ImpactSource::Backend,
                    Location::new(*path, Some(*line)),
                    format!("{list}: {op}"),
                    format!("review the `{list}` entry: {}", c.message),
                );
            }
        }
        if let Some(file) = generated_file(&c.rule) {
            // a removed operator's method disappears; an overload rename renames it
            let subject = match c.rule.as_str() {
                "op.overload_renamed" => c.detail.as_deref().unwrap_or(op),
                _ => op,
            };
            let Some(method) = naming::method_name_of(subject) else { continue };
            let (location, item) = if file == GENERATED_TRAIT_FILE {
                (generated.method(&method), format!("AtenOps::{method}"))
            } else {
                (generated.node(subject), format!("autograd node of {subject}"))
            };
            push(c, ImpactSource::Generated, location, item, String::new());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter_index::Kernel;
    use crate::{OpState, RuleSet, Upstream, coverage_changes};

    fn change(rule: &str, op: &str) -> Change {
        Change::new(
            &RuleSet::builtin(),
            rule,
            Upstream::Pytorch,
            op,
            Some("x".into()),
            None,
            None,
            None,
            format!("{rule} of {op}"),
        )
    }

    fn kernel(op: &str, item: &str, line: u32) -> Kernel {
        Kernel { op: op.into(), item: item.into(), file: "adapter-runtime/src/k.rs".into(), line }
    }

    fn index() -> AdapterIndex {
        let mut kernels = vec![
            kernel("mm", "impl AtenOps for Npu::mm", 10),
            kernel("maximum", "impl BackwardHooks for Npu::hook_maximum_self", 20),
            kernel("trunc", "impl AtenOps for Npu::trunc", 30),
        ];
        kernels.sort();
        let fallbacks = vec![Kernel { op: "mm".into(), item: "fallback".into(), file: "h.rs".into(), line: 5 }];
        AdapterIndex { kernels, fallbacks, warnings: Vec::new() }
    }

    fn states() -> AdapterStates {
        let st = |reachable: bool| OpState {
            reachable,
            how: if reachable { "native" } else { "none: nothing" }.into(),
            core: true,
            foreign: false,
        };
        let mut s = AdapterStates { kernel_file: Some("adapter-runtime/src/k.rs".into()), ..Default::default() };
        for (op, old, new) in [("trunc", true, true), ("masked_scatter", false, false), ("gone_after", true, false)] {
            s.old.insert(op.into(), st(old));
            s.new.insert(op.into(), st(new));
        }
        s.new.insert("cudnn_thing".into(), OpState { foreign: true, ..st(false) });
        s.new.insert("new_core".into(), st(false));
        s.new.insert("new_plain".into(), OpState { core: false, ..st(false) });
        s
    }

    fn sources(changes: &[Change]) -> Vec<(String, ImpactSource, Option<u32>)> {
        let g = GeneratedIndex::default();
        let mut v: Vec<_> = impacts(changes, &index(), &[], &g, Some(&states()))
            .into_iter()
            .filter(|i| i.source != ImpactSource::Generated)
            .map(|i| (i.subject, i.source, i.location.line))
            .collect();
        v.sort_by(|a, b| (&a.0, a.2).cmp(&(&b.0, b.2)));
        v
    }

    #[test]
    fn signature_changes_land_on_kernels_and_host_implementations() {
        let v = sources(&[change("arg.inserted", "mm")]);
        assert_eq!(v, [("mm".into(), ImpactSource::Host, Some(5)), ("mm".into(), ImpactSource::Kernel, Some(10))]);
        // invisible to the Rust signature: nothing to edit
        for rule in
            ["arg.int_to_symint", "arg.renamed", "arg.kwarg_only_changed", "ret.name_changed", "structured.changed"]
        {
            assert!(sources(&[change(rule, "mm")]).is_empty(), "{rule}");
        }
        // a default change: check the kernel, not the host table's arity
        assert_eq!(sources(&[change("arg.default_changed", "mm")]), [("mm".into(), ImpactSource::Kernel, Some(10))]);
    }

    #[test]
    fn coverage_decides_whether_an_operator_needs_a_kernel() {
        // trunc joined Core ATen but has a kernel: nothing to do; masked_scatter has none: cover it
        let v = sources(&[change("tag.core_added", "trunc"), change("tag.core_added", "masked_scatter")]);
        assert_eq!(v, [("masked_scatter".into(), ImpactSource::Cover, None)]);
        // Implicit -> Explicit: PyTorch's composite kernel serves every backend
        assert!(sources(&[change("dispatch.composite_explicit", "masked_scatter")]).is_empty());
        // no composite kernel left and not covered
        assert_eq!(
            sources(&[change("dispatch.no_longer_composite", "masked_scatter")]),
            [("masked_scatter".into(), ImpactSource::Cover, None)]
        );
        // a CUDA-only operator is not asked of this backend
        assert!(sources(&[change("dispatch.composite_removed", "cudnn_thing")]).is_empty());
        // a new operator: asked only when it is Core ATen and unreachable
        assert_eq!(sources(&[change("op.added", "new_core")]), [("new_core".into(), ImpactSource::Cover, None)]);
        assert!(sources(&[change("op.added", "new_plain")]).is_empty());
        // reachable before, not after
        let lost = coverage_changes(&states(), &RuleSet::builtin());
        assert_eq!(
            lost.iter().map(|c| (c.rule.as_str(), c.subject.as_str())).collect::<Vec<_>>(),
            [("coverage.unreachable", "gone_after")]
        );
    }

    #[test]
    fn derivative_changes_land_on_hand_written_backwards_only() {
        assert_eq!(
            sources(&[change("deriv.formula_changed", "maximum")]),
            [("maximum".into(), ImpactSource::Hook, Some(20))]
        );
        // a translated backward (no hook) is regenerated: nothing by hand
        assert!(sources(&[change("deriv.formula_changed", "mm")]).is_empty());
    }

    #[test]
    fn respelled_or_other_formulas_do_not_land_on_a_hook() {
        assert_eq!(
            respell("masked_fill_inplace_if_safe(at::where(self == other, grad / 2, grad), self < other, 0)"),
            "at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)"
        );
        let old = "other: at::where(self == other, grad / 2, grad).masked_fill_(self > other, 0)\n\
                   self: at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)\n\
                   result: other_t + x";
        let respelled = "other: masked_fill_inplace_if_safe(at::where(self == other, grad / 2, grad), self > other, 0)\n\
                         self: masked_fill_inplace_if_safe(at::where(self == other, grad / 2, grad), self < other, 0)\n\
                         result: at::where(self_p == other_p, y, z)";
        assert!(hook_inputs_unchanged("hook_maximum_self", old, respelled));
        assert!(hook_inputs_unchanged("hook_maximum_other", old, respelled));
        let changed = "self: where(self > min, grad, 0)";
        assert!(!hook_inputs_unchanged("hook_clamp_min_self", "self: where(self >= min, grad, 0)", changed));
        // an input name with underscores
        assert!(hook_inputs_unchanged(
            "hook_embedding_bag_per_sample_weights",
            "per_sample_weights: f(x)\nweight: a",
            "per_sample_weights: f(x)\nweight: b"
        ));
        assert!(!hook_inputs_unchanged(
            "hook_embedding_bag_weight",
            "per_sample_weights: f(x)\nweight: a",
            "per_sample_weights: f(x)\nweight: b"
        ));
    }

    #[test]
    fn a_kernel_of_an_operator_that_left_the_selection_is_deleted() {
        // mm is not in the new selection of `states()`
        assert_eq!(sources(&[change("dispatch.now_composite", "mm")]), [("mm".into(), ImpactSource::Kernel, Some(10))]);
        // trunc still is: its kernel stays an optional override
        assert!(sources(&[change("dispatch.now_composite", "trunc")]).is_empty());
    }

    #[test]
    fn generated_items_get_their_lines() {
        let root = std::env::temp_dir().join(format!("xirang-genindex-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("gen")).unwrap();
        std::fs::write(
            root.join("gen/ops.rs"),
            "// @generated\nfn helper() {}\npub trait AtenOps {\n    fn abs(&self, self_: &Tensor) -> Result<Tensor> {\n        x\n    }\n    fn r#where(&self) {}\n}\npub mod aten {\n    pub fn abs() {}\n}\n",
        )
        .unwrap();
        std::fs::write(
            root.join("gen/autograd.rs"),
            "x\n/// Backward of `add.Tensor(Tensor self) -> Tensor`.\npub struct AddTensorBackward {}\n",
        )
        .unwrap();
        let g = GeneratedIndex::load_from(&root, "gen");
        assert_eq!(g.method("abs"), Location::new("gen/ops.rs", Some(4)));
        assert_eq!(g.method("r#where"), Location::new("gen/ops.rs", Some(7)));
        assert_eq!(g.node("add.Tensor"), Location::new("gen/autograd.rs", Some(2)));
        assert_eq!(g.method("helper").line, None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
