//! Two PyTorch snapshots -> classified [`Change`]s.
//!
//! Operators are matched by qualified name (`add.Tensor`). A removed and an added overload of the same
//! operator whose arguments and returns agree (names and types, `SymInt` read as `int`) pair up as
//! `op.overload_renamed`. For a matched operator the non-out arguments are matched by name (a name
//! that vanished and a new name at the same position with the same type are a rename), then compared
//! for insertion, removal, order, type, default, keyword-only status and alias annotation; the out=
//! group, returns, dispatch (CompositeImplicitAutograd in particular), structured status, tags and
//! derivative entries are compared after that. Each change carries PyTorch's backward-compatibility
//! verdict following `FunctionSchema::isBackwardCompatibleWith` (see
//! `../shared/docs/upstream-formats.md`, "Compatibility rules").

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Change, Location, RuleSet, Upstream};
use crate::derivatives::Derivative;
use crate::registry::{Composite, NativeFunction};
use crate::schema::{Argument, FunctionSchema, Return, Type};
use crate::snapshot::{PytorchPair, PytorchSnapshot};

/// Compares two snapshots; the result is sorted (see [`Change::sort_key`]).
pub fn diff(old: &PytorchSnapshot, new: &PytorchSnapshot, rules: &RuleSet) -> Vec<Change> {
    let old_ops = ops_by_name(old);
    let new_ops = ops_by_name(new);
    let old_side =
        Side { line_of: &|op| old_ops.get(op).map(|f| f.line), has_derivatives: !old.derivatives.is_empty() };
    let new_side =
        Side { line_of: &|op| new_ops.get(op).map(|f| f.line), has_derivatives: !new.derivatives.is_empty() };
    diff_sides(old, new, &old_ops, &new_ops, &old_side, &new_side, rules)
}

/// Compares two snapshots read with [`crate::snapshot::Store::load_pytorch_pair`]: the same changes
/// as [`diff`] of the two full snapshots, from the entries that differ.
pub fn diff_pair(pair: &PytorchPair, rules: &RuleSet) -> Vec<Change> {
    let (old, new) = (&pair.old, &pair.new);
    let (oi, ni) = (&pair.old_index, &pair.new_index);
    let old_side = Side { line_of: &|op| oi.line_of(op), has_derivatives: oi.derivatives > 0 };
    let new_side = Side { line_of: &|op| ni.line_of(op), has_derivatives: ni.derivatives > 0 };
    diff_sides(old, new, &ops_by_name(old), &ops_by_name(new), &old_side, &new_side, rules)
}

/// What the derivative comparison needs of a whole snapshot.
struct Side<'a> {
    /// The native_functions.yaml line of an operator of the snapshot (`None`: no such operator).
    line_of: &'a dyn Fn(&str) -> Option<u32>,
    has_derivatives: bool,
}

fn ops_by_name(s: &PytorchSnapshot) -> BTreeMap<String, &NativeFunction> {
    s.registry.functions.iter().map(|f| (f.func.name.to_string(), f)).collect()
}

fn diff_sides(
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    old_ops: &BTreeMap<String, &NativeFunction>,
    new_ops: &BTreeMap<String, &NativeFunction>,
    old_side: &Side<'_>,
    new_side: &Side<'_>,
    rules: &RuleSet,
) -> Vec<Change> {
    let mut out = Out { rules, changes: Vec::new() };

    let mut removed: Vec<&NativeFunction> =
        old_ops.iter().filter(|(k, _)| !new_ops.contains_key(*k)).map(|(_, f)| *f).collect();
    let mut added: Vec<&NativeFunction> =
        new_ops.iter().filter(|(k, _)| !old_ops.contains_key(*k)).map(|(_, f)| *f).collect();

    // overload renames: same operator name, same argument names/types and returns
    let mut renamed: Vec<(&NativeFunction, &NativeFunction)> = Vec::new();
    let mut added_by_sig: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, f) in added.iter().enumerate() {
        added_by_sig.entry((f.func.name.name.clone(), rename_signature(&f.func))).or_default().push(i);
    }
    let mut taken = vec![false; added.len()];
    removed.retain(|r| {
        let key = (r.func.name.name.clone(), rename_signature(&r.func));
        if let Some(cands) = added_by_sig.get(&key)
            && let Some(&i) = cands.iter().find(|&&i| !taken[i])
        {
            taken[i] = true;
            renamed.push((r, added[i]));
            return false;
        }
        true
    });
    let mut i = 0;
    added.retain(|_| {
        let keep = !taken[i];
        i += 1;
        keep
    });

    for f in &removed {
        let name = f.func.name.to_string();
        out.push("op.removed", &name, None, Some(f.func.to_string()), None, format!("`{name}` was removed"), nf(f));
    }
    for f in &added {
        let name = f.func.name.to_string();
        out.push("op.added", &name, None, None, Some(f.func.to_string()), format!("`{name}` was added"), nf(f));
    }
    for (o, n) in &renamed {
        let (on, nn) = (o.func.name.to_string(), n.func.name.to_string());
        out.push(
            "op.overload_renamed",
            &on,
            Some(nn.clone()),
            Some(o.func.to_string()),
            Some(n.func.to_string()),
            format!("overload `{on}` is now `{nn}`"),
            nf(n),
        );
    }
    for (name, o) in old_ops {
        if let Some(n) = new_ops.get(name) {
            compare_op(&mut out, name, o, n);
        }
    }
    compare_derivatives(&mut out, old, new, old_side, new_side);
    out.changes.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    out.changes
}

struct Out<'r> {
    rules: &'r RuleSet,
    changes: Vec<Change>,
}

impl Out<'_> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rule: &str,
        subject: &str,
        detail: Option<String>,
        old: Option<String>,
        new: Option<String>,
        message: String,
        loc: Option<Location>,
    ) {
        let bc = self.rules.get(rule).and_then(|r| r.pytorch_bc);
        self.push_bc(rule, subject, detail, bc, old, new, message, loc);
    }
    #[allow(clippy::too_many_arguments)]
    fn push_bc(
        &mut self,
        rule: &str,
        subject: &str,
        detail: Option<String>,
        bc: Option<bool>,
        old: Option<String>,
        new: Option<String>,
        message: String,
        loc: Option<Location>,
    ) {
        self.changes
            .push(Change::new(self.rules, rule, Upstream::Pytorch, subject, detail, bc, old, new, message).at(loc));
    }
}

fn nf(f: &NativeFunction) -> Option<Location> {
    Some(Location::new("native_functions.yaml", Some(f.line)))
}

/// Argument names and fake types (SymInt as int) plus returns: what an overload rename keeps.
fn rename_signature(s: &FunctionSchema) -> String {
    let args: Vec<String> = s.arguments.all().map(|a| format!("{} {}", a.ty.without_symint(), a.name)).collect();
    let rets: Vec<String> = s.returns.iter().map(|r| r.ty.without_symint().to_string()).collect();
    format!("{}->{}", args.join(","), rets.join(","))
}

/// A non-out argument with its keyword-only flag.
struct Arg<'a> {
    a: &'a Argument,
    kw: bool,
}

fn non_out(s: &FunctionSchema) -> Vec<Arg<'_>> {
    s.arguments
        .positional
        .iter()
        .map(|a| Arg { a, kw: false })
        .chain(s.arguments.kwarg_only.iter().map(|a| Arg { a, kw: true }))
        .collect()
}

fn arg_text(a: &Argument) -> String {
    a.to_string()
}

fn returns_text(rs: &[Return]) -> String {
    let parts: Vec<String> = rs.iter().map(|r| r.to_string()).collect();
    if parts.len() == 1 { parts[0].clone() } else { format!("({})", parts.join(", ")) }
}

fn is_optional_of(new: &Type, old: &Type) -> bool {
    match new {
        Type::Optional(inner) => inner.without_symint() == old.without_symint(),
        _ => false,
    }
}

fn compare_op(out: &mut Out<'_>, name: &str, o: &NativeFunction, n: &NativeFunction) {
    let loc = nf(n);
    if o.func != n.func {
        compare_schema(out, name, &o.func, &n.func, &loc);
    }
    // dispatch: what PyTorch provides a backend that registers nothing (see `Composite`)
    let keys = |f: &NativeFunction| f.dispatch_keys().join(", ");
    let transition = match (o.composite(), n.composite()) {
        (a, b) if a == b => None,
        (_, Composite::Implicit) => Some((
            "dispatch.now_composite",
            format!("`{name}` now decomposes upstream (CompositeImplicitAutograd): no kernel needed"),
        )),
        (Composite::Implicit, Composite::Explicit) => Some((
            "dispatch.composite_explicit",
            format!(
                "`{name}` no longer decomposes, but PyTorch has a composite kernel for every backend: \
                 inside PyTorch overriding it is optional"
            ),
        )),
        (Composite::Implicit, Composite::None) => Some((
            "dispatch.no_longer_composite",
            format!("`{name}` no longer decomposes and has no composite kernel: the backend must provide it"),
        )),
        (Composite::Explicit, Composite::None) => Some((
            "dispatch.composite_removed",
            format!("`{name}` lost its composite kernel (only {} remain): the backend must provide it", keys(n)),
        )),
        (Composite::None, Composite::Explicit) => Some((
            "dispatch.composite_added",
            format!("`{name}` gained a composite kernel: inside PyTorch a backend kernel is now optional"),
        )),
        _ => None,
    };
    if let Some((rule, message)) = transition {
        out.push(rule, name, None, Some(keys(o)), Some(keys(n)), message, loc.clone());
    } else if o.dispatch_keys() != n.dispatch_keys() {
        out.push(
            "dispatch.keys_changed",
            name,
            None,
            Some(keys(o)),
            Some(keys(n)),
            format!("upstream dispatch keys of `{name}` changed"),
            loc.clone(),
        );
    }
    // structured
    let st = |f: &NativeFunction| match (&f.structured, &f.structured_delegate) {
        (true, _) => "structured".to_string(),
        (false, Some(d)) => format!("structured_delegate: {d}"),
        (false, None) => "unstructured".to_string(),
    };
    let (os, ns) = (st(o), st(n));
    if os != ns {
        out.push(
            "structured.changed",
            name,
            None,
            Some(os.clone()),
            Some(ns.clone()),
            format!("`{name}`: {os} -> {ns}"),
            loc.clone(),
        );
    }
    // tags
    let ot: BTreeSet<&str> = o.tags.iter().map(String::as_str).collect();
    let nt: BTreeSet<&str> = n.tags.iter().map(String::as_str).collect();
    for t in nt.difference(&ot) {
        let rule = if *t == "core" { "tag.core_added" } else { "tag.added" };
        out.push(
            rule,
            name,
            Some(t.to_string()),
            None,
            Some(t.to_string()),
            format!("`{name}` gained tag `{t}`"),
            loc.clone(),
        );
    }
    for t in ot.difference(&nt) {
        let rule = if *t == "core" { "tag.core_removed" } else { "tag.removed" };
        out.push(
            rule,
            name,
            Some(t.to_string()),
            Some(t.to_string()),
            None,
            format!("`{name}` lost tag `{t}`"),
            loc.clone(),
        );
    }
}

fn compare_schema<'s>(
    out: &mut Out<'_>,
    name: &str,
    os: &'s FunctionSchema,
    ns: &'s FunctionSchema,
    loc: &Option<Location>,
) {
    let oa = non_out(os);
    let na = non_out(ns);
    let onames: BTreeSet<&'s str> = oa.iter().map(|x| x.a.name.as_str()).collect();
    let nnames: BTreeSet<&'s str> = na.iter().map(|x| x.a.name.as_str()).collect();

    // renames: a vanished name and a new name at the same position with compatible types
    let mut rename_of: HashMap<&'s str, &'s str> = HashMap::new(); // old -> new
    for (i, x) in oa.iter().enumerate() {
        if nnames.contains(x.a.name.as_str()) {
            continue;
        }
        if let Some(y) = na.get(i)
            && !onames.contains(y.a.name.as_str())
            && (y.a.ty.without_symint() == x.a.ty.without_symint() || is_optional_of(&y.a.ty, &x.a.ty))
        {
            rename_of.insert(x.a.name.as_str(), y.a.name.as_str());
        }
    }
    let renamed_new: BTreeSet<&str> = rename_of.values().copied().collect();
    let new_name_of = |old: &'s str| -> Option<&'s str> {
        if nnames.contains(old) { Some(old) } else { rename_of.get(old).copied() }
    };

    // removed
    for x in &oa {
        if new_name_of(&x.a.name).is_none() {
            out.push(
                "arg.removed",
                name,
                Some(x.a.name.clone()),
                Some(arg_text(x.a)),
                None,
                format!("`{name}`: argument `{}` was removed", x.a.name),
                loc.clone(),
            );
        }
    }
    // renamed
    for x in &oa {
        if let Some(nn) = rename_of.get(x.a.name.as_str()) {
            out.push(
                "arg.renamed",
                name,
                Some(x.a.name.clone()),
                Some(x.a.name.clone()),
                Some(nn.to_string()),
                format!("`{name}`: argument `{}` is now `{nn}`", x.a.name),
                loc.clone(),
            );
        }
    }
    // added: appended after every surviving argument, or inserted before some
    let last_common =
        na.iter().rposition(|y| onames.contains(y.a.name.as_str()) || renamed_new.contains(y.a.name.as_str()));
    for (j, y) in na.iter().enumerate() {
        let n = y.a.name.as_str();
        if onames.contains(n) || renamed_new.contains(n) {
            continue;
        }
        let appended = last_common.is_none_or(|lc| j > lc);
        let (rule, how) = match (appended, y.a.default.is_some()) {
            (true, true) => ("arg.added_default_end", "added at the end with a default"),
            (true, false) => ("arg.added_required", "added without a default"),
            (false, _) => ("arg.inserted", "inserted before existing arguments"),
        };
        let before = if appended {
            String::new()
        } else {
            na[j + 1..]
                .iter()
                .find(|z| onames.contains(z.a.name.as_str()) || renamed_new.contains(z.a.name.as_str()))
                .map(|z| format!(" (before `{}`)", z.a.name))
                .unwrap_or_default()
        };
        out.push(
            rule,
            name,
            Some(n.to_string()),
            None,
            Some(arg_text(y.a)),
            format!("`{name}`: argument `{}` {how}{before}", y.a),
            loc.clone(),
        );
    }
    // reorder of the surviving arguments
    let old_order: Vec<&str> = oa.iter().filter_map(|x| new_name_of(&x.a.name)).collect();
    let new_order: Vec<&str> =
        na.iter().map(|y| y.a.name.as_str()).filter(|n| onames.contains(n) || renamed_new.contains(n)).collect();
    if old_order != new_order {
        out.push(
            "arg.reordered",
            name,
            None,
            Some(old_order.join(", ")),
            Some(new_order.join(", ")),
            format!("`{name}`: arguments reordered: ({}) -> ({})", old_order.join(", "), new_order.join(", ")),
            loc.clone(),
        );
    }
    // per surviving argument
    let nidx: HashMap<&str, &Arg<'_>> = na.iter().map(|y| (y.a.name.as_str(), y)).collect();
    for x in &oa {
        let Some(nn) = new_name_of(&x.a.name) else { continue };
        let Some(y) = nidx.get(nn) else { continue };
        compare_arg(out, name, x, y, loc);
    }
    // out= group
    let oo: Vec<String> = os.arguments.out.iter().map(arg_text).collect();
    let no: Vec<String> = ns.arguments.out.iter().map(arg_text).collect();
    if oo != no {
        out.push(
            "out.changed",
            name,
            None,
            Some(oo.join(", ")),
            Some(no.join(", ")),
            format!("`{name}`: out= group ({}) -> ({})", oo.join(", "), no.join(", ")),
            loc.clone(),
        );
    }
    compare_returns(out, name, &os.returns, &ns.returns, loc);
}

fn compare_arg(out: &mut Out<'_>, name: &str, x: &Arg<'_>, y: &Arg<'_>, loc: &Option<Location>) {
    let (a, b) = (x.a, y.a);
    let an = &b.name;
    if a.ty != b.ty {
        let (rule, bc) = if is_optional_of(&b.ty, &a.ty) {
            ("arg.widened", true)
        } else if a.ty.without_symint() == b.ty.without_symint() {
            if b.ty.is_symint_like() {
                ("arg.int_to_symint", true)
            } else {
                // SymInt -> int: the same fake type, but the kernel signature narrows
                ("arg.retyped", true)
            }
        } else {
            ("arg.retyped", false)
        };
        out.push_bc(
            rule,
            name,
            Some(an.clone()),
            Some(bc),
            Some(a.ty.to_string()),
            Some(b.ty.to_string()),
            format!("`{name}`: argument `{an}`: {} -> {}", a.ty, b.ty),
            loc.clone(),
        );
    }
    if a.annotation != b.annotation {
        let t = |x: &Argument| x.annotation.as_ref().map(|z| format!("({z})")).unwrap_or_else(|| "none".into());
        out.push(
            "arg.alias_changed",
            name,
            Some(an.clone()),
            Some(t(a)),
            Some(t(b)),
            format!("`{name}`: alias annotation of `{an}`: {} -> {}", t(a), t(b)),
            loc.clone(),
        );
    }
    let dv = |x: &Argument| x.default.as_ref().map(|d| d.value.clone());
    if dv(a) != dv(b) {
        let dt = |x: &Argument| x.default.as_ref().map(|d| d.text.clone());
        let bc = a.default.is_none();
        out.push_bc(
            "arg.default_changed",
            name,
            Some(an.clone()),
            Some(bc),
            dt(a),
            dt(b),
            format!(
                "`{name}`: default of `{an}`: {} -> {}",
                dt(a).unwrap_or_else(|| "(none)".into()),
                dt(b).unwrap_or_else(|| "(none)".into())
            ),
            loc.clone(),
        );
    }
    if x.kw != y.kw {
        let now = if y.kw { "keyword-only" } else { "positional" };
        out.push_bc(
            "arg.kwarg_only_changed",
            name,
            Some(an.clone()),
            Some(!y.kw),
            Some(if x.kw { "keyword-only" } else { "positional" }.into()),
            Some(now.into()),
            format!("`{name}`: argument `{an}` is now {now}"),
            loc.clone(),
        );
    }
}

fn compare_returns(out: &mut Out<'_>, name: &str, o: &[Return], n: &[Return], loc: &Option<Location>) {
    if o.len() != n.len() {
        out.push(
            "ret.count_changed",
            name,
            None,
            Some(returns_text(o)),
            Some(returns_text(n)),
            format!("`{name}`: {} returns -> {} returns", o.len(), n.len()),
            loc.clone(),
        );
        return;
    }
    for (i, (a, b)) in o.iter().zip(n).enumerate() {
        let detail = Some(format!("return {i}"));
        if a.ty != b.ty || a.annotation != b.annotation {
            let bc = a.ty.without_symint() == b.ty.without_symint() && a.annotation == b.annotation;
            let (at, bt) =
                (Return { name: None, ..a.clone() }.to_string(), Return { name: None, ..b.clone() }.to_string());
            out.push_bc(
                "ret.type_changed",
                name,
                detail.clone(),
                Some(bc),
                Some(at.clone()),
                Some(bt.clone()),
                format!("`{name}`: return {i}: {at} -> {bt}"),
                loc.clone(),
            );
        }
        if a.name != b.name {
            let t = |r: &Return| r.name.clone().unwrap_or_else(|| "(unnamed)".into());
            out.push(
                "ret.name_changed",
                name,
                detail,
                Some(t(a)),
                Some(t(b)),
                format!("`{name}`: return {i} name {} -> {}", t(a), t(b)),
                loc.clone(),
            );
        }
    }
}

fn formulas_text(d: &Derivative) -> String {
    let mut lines: Vec<String> = d.formulas.iter().map(|f| format!("{}: {}", f.inputs.join(", "), f.formula)).collect();
    lines.extend(d.forward.iter().map(|f| format!("{}: {}", f.outputs.join(", "), f.formula)));
    if !d.non_differentiable.is_empty() {
        lines.push(format!("non_differentiable: {}", d.non_differentiable.join(", ")));
    }
    lines.join("\n")
}

/// True when [`formulas_text`] of both is certainly equal (the parts it joins are equal), without
/// building the texts; false means "compare the texts".
fn same_formulas(a: &Derivative, b: &Derivative) -> bool {
    a.non_differentiable == b.non_differentiable
        && a.formulas.len() == b.formulas.len()
        && a.forward.len() == b.forward.len()
        && a.formulas.iter().zip(&b.formulas).all(|(x, y)| x.inputs == y.inputs && x.formula == y.formula)
        && a.forward.iter().zip(&b.forward).all(|(x, y)| x.outputs == y.outputs && x.formula == y.formula)
}

fn saved_text(d: &Derivative) -> String {
    format!("inputs: [{}]; outputs: [{}]", d.saved_inputs.join(", "), d.saved_outputs.join(", "))
}

fn compare_derivatives(
    out: &mut Out<'_>,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    old_side: &Side<'_>,
    new_side: &Side<'_>,
) {
    let key = |d: &Derivative| (d.op.to_string(), d.dispatch_key.clone());
    let od: BTreeMap<(String, String), &Derivative> = old.derivatives.iter().map(|d| (key(d), d)).collect();
    let nd: BTreeMap<(String, String), &Derivative> = new.derivatives.iter().map(|d| (key(d), d)).collect();
    let dloc = |d: &Derivative| Some(Location::new("derivatives.yaml", Some(d.line)));
    let detail = |k: &str| if k == "Default" { None } else { Some(k.to_string()) };
    // a version without derivatives.yaml (2.0.1) says nothing about derivatives
    if !old_side.has_derivatives || !new_side.has_derivatives {
        return;
    }
    for ((op, k), d) in &od {
        match nd.get(&(op.clone(), k.clone())) {
            None => {
                if let Some(line) = (new_side.line_of)(op) {
                    out.push(
                        "deriv.removed",
                        op,
                        detail(k),
                        Some(formulas_text(d)),
                        None,
                        format!("`{op}` has no derivative entry any more"),
                        Some(Location::new("native_functions.yaml", Some(line))),
                    );
                }
            }
            Some(n) => {
                if !same_formulas(d, n) && formulas_text(d) != formulas_text(n) {
                    out.push(
                        "deriv.formula_changed",
                        op,
                        detail(k),
                        Some(formulas_text(d)),
                        Some(formulas_text(n)),
                        format!("`{op}`: derivative formula changed"),
                        dloc(n),
                    );
                }
                if d.saved_inputs != n.saved_inputs || d.saved_outputs != n.saved_outputs {
                    out.push(
                        "deriv.saved_changed",
                        op,
                        detail(k),
                        Some(saved_text(d)),
                        Some(saved_text(n)),
                        format!("`{op}`: saved variables {} -> {}", saved_text(d), saved_text(n)),
                        dloc(n),
                    );
                }
                if d.output_differentiability != n.output_differentiability {
                    let t = |x: &Derivative| match &x.output_differentiability {
                        Some(v) => format!("{v:?}"),
                        None => "all".to_string(),
                    };
                    out.push(
                        "deriv.output_differentiability_changed",
                        op,
                        detail(k),
                        Some(t(d)),
                        Some(t(n)),
                        format!("`{op}`: output differentiability {} -> {}", t(d), t(n)),
                        dloc(n),
                    );
                }
            }
        }
    }
    for ((op, k), n) in &nd {
        if !od.contains_key(&(op.clone(), k.clone())) && (old_side.line_of)(op).is_some() {
            out.push(
                "deriv.added",
                op,
                detail(k),
                None,
                Some(formulas_text(n)),
                format!("`{op}` gained a derivative entry"),
                dloc(n),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Store;

    fn store() -> Store {
        Store::new(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas"))
    }

    /// What PyTorch provides a new backend, across real releases: a decomposition replaced by a
    /// composite kernel is not "a kernel is now needed"; one replaced by CPU/CUDA kernels is.
    #[test]
    fn composite_transitions_of_real_releases() {
        let st = store();
        let rules = RuleSet::builtin();
        let load = |v: &str| st.load_pytorch(&st.resolve("pytorch", v).unwrap()).unwrap();
        let rule_of = |changes: &[Change], op: &str| -> Vec<String> {
            changes
                .iter()
                .filter(|c| c.subject == op && c.rule.starts_with("dispatch."))
                .map(|c| c.rule.clone())
                .collect()
        };
        let c = diff(&load("v2.1"), &load("v2.3"), &rules);
        assert_eq!(rule_of(&c, "bitwise_or.Scalar"), ["dispatch.composite_explicit"]);
        assert_eq!(rule_of(&c, "linalg_eigvals.out"), ["dispatch.no_longer_composite"]);
        let c = diff(&load("v2.5"), &load("v2.7"), &rules);
        assert_eq!(rule_of(&c, "_assert_tensor_metadata"), ["dispatch.composite_explicit"]);
        let c = diff(&load("v2.3"), &load("v2.15"), &rules);
        assert_eq!(rule_of(&c, "cudnn_batch_norm.out"), ["dispatch.composite_removed"]);
    }

    /// The pair path finds exactly the changes of the full load, for near and far pairs, the same
    /// version twice, and a version without derivatives.
    #[test]
    fn pair_diff_equals_full_diff() {
        let st = store();
        let rules = RuleSet::builtin();
        for (a, b) in [("v2.1", "v2.3"), ("v2.3", "v2.4"), ("v2.0", "v2.15"), ("v2.15", "v2.0"), ("v2.4", "v2.4")] {
            let (va, vb) = (st.resolve("pytorch", a).unwrap(), st.resolve("pytorch", b).unwrap());
            let full = diff(&st.load_pytorch(&va).unwrap(), &st.load_pytorch(&vb).unwrap(), &rules);
            let pair = st.load_pytorch_pair(&va, &vb).unwrap();
            assert_eq!(diff_pair(&pair, &rules), full, "{a} -> {b}");
            let parsed = pair.old.registry.functions.len() + pair.new.registry.functions.len();
            assert!(parsed <= pair.old_index.len() + pair.new_index.len());
        }
    }

    #[test]
    fn pair_of_one_version_parses_nothing() {
        let st = store();
        let v = st.resolve("pytorch", "v2.4").unwrap();
        let pair = st.load_pytorch_pair(&v, &v).unwrap();
        assert!(pair.old.registry.functions.is_empty() && pair.new.derivatives.is_empty());
        assert_eq!(pair.old_index, pair.new_index);
        assert!(pair.new_index.line_of("add.Tensor").is_some());
        assert_eq!(pair.new_index.line_of("no_such_op"), None);
    }
}
