//! Header drift: the rule catalogue (as data) and the comparison of two header sets.
//!
//! Declarations are matched by name across the whole set (C has one namespace for functions,
//! enumerators and typedefs), so a declaration that moves between files is not a change.
//! When a name is declared in several files the first file in path order wins.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{Decl, DeclKind, HeaderSet, Param};

/// What a change breaks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum HeaderSeverity {
    /// Binaries built against the old header misbehave or fail to link with the new library.
    Abi,
    /// Code written against the old header no longer compiles (or binds to another symbol).
    Source,
    /// Information only.
    None,
}

impl HeaderSeverity {
    pub fn as_str(self) -> &'static str {
        match self {
            HeaderSeverity::Abi => "abi",
            HeaderSeverity::Source => "source",
            HeaderSeverity::None => "none",
        }
    }
}

/// One drift rule.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct HeaderRule {
    /// Stable id, e.g. `header.function.removed`.
    pub id: &'static str,
    pub severity: HeaderSeverity,
    /// One line: what changed and why it matters.
    pub explanation: &'static str,
    /// What an adapter maintainer does about it.
    pub remedy: &'static str,
}

/// One detected change.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HeaderChange {
    pub rule: &'static str,
    pub severity: HeaderSeverity,
    /// `aclrtMalloc`, `cudaError::cudaErrorFoo`, `cudaDeviceProp.name`, a typedef or macro name.
    pub subject: String,
    /// File and line in the new set (in the old set for removals).
    pub file: String,
    pub line: u32,
    pub old: Option<String>,
    pub new: Option<String>,
    pub message: String,
}

impl HeaderChange {
    /// Stable key for allow lists: rule id and subject, never the message.
    pub fn fingerprint(&self) -> String {
        format!("{}:{}", self.rule, self.subject)
    }
}

macro_rules! rule {
    ($id:literal, $sev:ident, $exp:literal, $rem:literal) => {
        HeaderRule { id: $id, severity: HeaderSeverity::$sev, explanation: $exp, remedy: $rem }
    };
}

static RULES: &[HeaderRule] = &[
    rule!("header.function.added", None, "A function was added.", "Nothing to do; map it if the adapter can use it."),
    rule!(
        "header.function.removed",
        Abi,
        "A function was removed: binaries that call it no longer load or link.",
        "Drop the binding or give it a fallback chain to its replacement."
    ),
    rule!(
        "header.function.return_changed",
        Abi,
        "A function's return type changed.",
        "Regenerate the binding and check every caller's use of the result."
    ),
    rule!(
        "header.function.param_added",
        Abi,
        "A parameter was added: the call no longer matches the symbol's signature.",
        "Regenerate the binding and pass the new argument at every call site."
    ),
    rule!(
        "header.function.param_removed",
        Abi,
        "A parameter was removed: the call no longer matches the symbol's signature.",
        "Regenerate the binding and drop the argument at every call site."
    ),
    rule!(
        "header.function.param_retyped",
        Abi,
        "A parameter's type changed.",
        "Regenerate the binding and check the values passed."
    ),
    rule!(
        "header.function.param_reordered",
        Abi,
        "Parameters kept their names but changed places: old callers pass arguments in the wrong order.",
        "Fix the argument order at every call site and regenerate the binding."
    ),
    rule!(
        "header.function.param_renamed",
        None,
        "A parameter was renamed; C does not bind by name.",
        "Nothing to do; names in generated bindings follow."
    ),
    rule!(
        "header.function.param_default_changed",
        Source,
        "A C++ default argument (or CUDA `__dv`) changed or appeared/disappeared.",
        "Check callers that rely on the default."
    ),
    rule!(
        "header.function.deprecated",
        None,
        "A function became deprecated.",
        "Plan the move to the replacement named in the message."
    ),
    rule!("header.enum.added", None, "An enum was added.", "Nothing to do."),
    rule!(
        "header.enum.removed",
        Source,
        "An enum was removed; code naming it no longer compiles.",
        "Replace uses of the enum."
    ),
    rule!(
        "header.enumerator.added",
        None,
        "An enumerator was added.",
        "Map it if the adapter translates this enum (status codes, attributes)."
    ),
    rule!(
        "header.enumerator.removed",
        Source,
        "An enumerator was removed; code naming it no longer compiles.",
        "Replace uses of the enumerator."
    ),
    rule!(
        "header.enumerator.value_changed",
        Abi,
        "An enumerator's value changed: values compiled into binaries now mean something else.",
        "Rebuild everything that uses the enum; re-check value tables and error mappings."
    ),
    rule!(
        "header.enumerator.deprecated",
        None,
        "An enumerator became deprecated.",
        "Move to the replacement named in the message."
    ),
    rule!("header.struct.added", None, "A struct or union was added.", "Nothing to do."),
    rule!(
        "header.struct.removed",
        Source,
        "A struct or union was removed; code naming it no longer compiles.",
        "Replace uses of the type."
    ),
    rule!(
        "header.struct.field_added",
        Abi,
        "A field was added: size and possibly offsets changed (layout change).",
        "Regenerate the binding; never allocate this struct with the old size."
    ),
    rule!(
        "header.struct.field_removed",
        Abi,
        "A field was removed: size and offsets changed (layout change).",
        "Regenerate the binding and drop uses of the field."
    ),
    rule!(
        "header.struct.field_retyped",
        Abi,
        "A field's type, array size or bit-field width changed (layout change).",
        "Regenerate the binding and check reads and writes of the field."
    ),
    rule!(
        "header.struct.field_renamed",
        Source,
        "A field was renamed at the same position with the same type.",
        "Rename uses of the field."
    ),
    rule!(
        "header.struct.field_reordered",
        Abi,
        "Fields were reordered: offsets changed (layout change).",
        "Regenerate the binding; anything that copies the struct by layout is broken."
    ),
    rule!(
        "header.struct.field_deprecated",
        None,
        "A field became deprecated.",
        "Move to the replacement named in the message."
    ),
    rule!("header.typedef.added", None, "A typedef was added.", "Nothing to do."),
    rule!(
        "header.typedef.removed",
        Source,
        "A typedef was removed; code naming it no longer compiles.",
        "Replace uses of the type name."
    ),
    rule!(
        "header.typedef.retagged",
        Source,
        "A typedef now names a struct/union/enum with another tag; code using the old tag breaks, the layout is compared separately.",
        "Use the typedef name instead of the tag."
    ),
    rule!(
        "header.typedef.changed",
        Abi,
        "A typedef now names another type (handle or function-pointer signature changed).",
        "Regenerate the binding; check callbacks and handle conversions."
    ),
    rule!("header.macro.added", None, "A `#define` constant was added.", "Nothing to do."),
    rule!(
        "header.macro.removed",
        Source,
        "A `#define` constant was removed; code naming it no longer compiles.",
        "Replace uses of the macro."
    ),
    rule!(
        "header.macro.value_changed",
        Abi,
        "A `#define` constant's value changed: values compiled into binaries now differ.",
        "Rebuild everything that uses it; re-check flag and error tables."
    ),
    rule!(
        "header.macro.alias_changed",
        Source,
        "A versioned rename (`#define f f_v2`) now points at another symbol: recompiled code binds to it.",
        "Check the new symbol's signature; keep a fallback to the old symbol for older drivers."
    ),
    rule!("header.constant.added", None, "A `static const` constant was added.", "Nothing to do."),
    rule!(
        "header.constant.removed",
        Source,
        "A `static const` constant was removed; code naming it no longer compiles.",
        "Replace uses of the constant."
    ),
    rule!(
        "header.constant.value_changed",
        Abi,
        "A `static const` constant's value changed.",
        "Rebuild everything that uses it; re-check error tables."
    ),
    rule!(
        "header.constant.spelling_changed",
        None,
        "A constant moved between `static const` and `#define` with the same value: code naming it still compiles and binaries see the same value.",
        "Nothing to do; the generated binding follows."
    ),
];

/// The rule catalogue.
pub fn rules() -> &'static [HeaderRule] {
    RULES
}

fn rule(id: &str) -> &'static HeaderRule {
    RULES.iter().find(|r| r.id == id).unwrap_or(&RULES[0])
}

struct Index<'a> {
    by_kind: BTreeMap<(DeclKind, String), &'a Decl>,
    members: BTreeMap<(String, String), Vec<&'a Decl>>,
}

fn index(set: &HeaderSet) -> Index<'_> {
    let mut by_kind = BTreeMap::new();
    for d in set.decls() {
        let kind = match d.kind {
            DeclKind::Union => DeclKind::Struct,
            k => k,
        };
        if matches!(kind, DeclKind::Field) {
            continue;
        }
        if kind == DeclKind::Enum && d.name.is_empty() {
            continue;
        }
        let slot = by_kind.entry((kind, d.name.clone())).or_insert(d);
        // a declaration wins over an inline definition of the same function in another file
        if slot.definition && !d.definition {
            *slot = d;
        }
    }
    let mut members: BTreeMap<(String, String), Vec<&Decl>> = BTreeMap::new();
    for d in set.of_kind(DeclKind::Field) {
        if let Some(p) = &d.parent {
            members.entry((d.file.clone(), p.clone())).or_default().push(d);
        }
    }
    for v in members.values_mut() {
        v.sort_by_key(|d| d.index);
    }
    Index { by_kind, members }
}

struct Out(Vec<HeaderChange>);

impl Out {
    fn push(
        &mut self,
        id: &str,
        subject: String,
        at: &Decl,
        old: Option<String>,
        new: Option<String>,
        message: String,
    ) {
        let r = rule(id);
        self.0.push(HeaderChange {
            rule: r.id,
            severity: r.severity,
            subject,
            file: at.file.clone(),
            line: at.line,
            old,
            new,
            message,
        });
    }
}

fn sig(d: &Decl) -> String {
    let ps: Vec<String> = d
        .params
        .iter()
        .flatten()
        .map(|p| if p.name.is_empty() { p.ty.clone() } else { format!("{} {}", p.ty, p.name) })
        .collect();
    let mut all = ps;
    if d.variadic {
        all.push("...".into());
    }
    format!("{} {}({})", d.ret.clone().unwrap_or_default(), d.name, all.join(", "))
}

fn value_text(d: &Decl) -> Option<String> {
    d.value.map(|v| v.to_string()).or_else(|| d.expr.clone())
}

fn param_text(p: &Param) -> String {
    if p.name.is_empty() { p.ty.clone() } else { format!("{} {}", p.ty, p.name) }
}

/// Compares two header sets. The result is sorted (file, line, rule, subject).
pub fn diff(old: &HeaderSet, new: &HeaderSet) -> Vec<HeaderChange> {
    let a = index(old);
    let b = index(new);
    let mut out = Out(Vec::new());
    let respelled = respelled(&mut out, &a, &b);
    let keys: BTreeSet<&(DeclKind, String)> = a.by_kind.keys().chain(b.by_kind.keys()).collect();
    for key in keys {
        let (kind, name) = key;
        match (a.by_kind.get(key), b.by_kind.get(key)) {
            (Some(_), None) | (None, Some(_))
                if matches!(kind, DeclKind::Constant | DeclKind::Macro) && respelled.contains(name.as_str()) => {}
            (Some(o), None) => removed(&mut out, *kind, o),
            (None, Some(n)) => added(&mut out, *kind, n),
            (Some(o), Some(n)) => match kind {
                DeclKind::Function => function(&mut out, o, n),
                DeclKind::Enumerator => enumerator(&mut out, o, n),
                DeclKind::Struct => aggregate(&mut out, o, n, &a, &b),
                DeclKind::Typedef => {
                    if let Some((ot, nt)) = retagged(o, n) {
                        out.push(
                            "header.typedef.retagged",
                            name.clone(),
                            n,
                            o.ty.clone(),
                            n.ty.clone(),
                            format!("typedef {name} now names `{nt}` (was `{ot}`); layout compared below"),
                        );
                        let oa = a.by_kind.get(&(DeclKind::Struct, tag_name(&ot)));
                        let na = b.by_kind.get(&(DeclKind::Struct, tag_name(&nt)));
                        if let (Some(oa), Some(na)) = (oa, na) {
                            aggregate(&mut out, oa, na, &a, &b);
                        }
                    } else if o.ty != n.ty {
                        out.push(
                            "header.typedef.changed",
                            name.clone(),
                            n,
                            o.ty.clone(),
                            n.ty.clone(),
                            format!(
                                "typedef {name} changed from `{}` to `{}`",
                                o.ty.clone().unwrap_or_default(),
                                n.ty.clone().unwrap_or_default()
                            ),
                        );
                    }
                }
                DeclKind::Macro => {
                    if o.alias_of.is_some() || n.alias_of.is_some() {
                        if o.alias_of != n.alias_of {
                            out.push(
                                "header.macro.alias_changed",
                                name.clone(),
                                n,
                                o.alias_of.clone().or(o.expr.clone()),
                                n.alias_of.clone().or(n.expr.clone()),
                                format!(
                                    "{name} now renames to {} (was {})",
                                    n.alias_of.clone().or(n.expr.clone()).unwrap_or_default(),
                                    o.alias_of.clone().or(o.expr.clone()).unwrap_or_default()
                                ),
                            );
                        }
                    } else if value_text(o) != value_text(n)
                        && (o.value.is_some() || n.value.is_some() || o.expr != n.expr)
                    {
                        out.push(
                            "header.macro.value_changed",
                            name.clone(),
                            n,
                            value_text(o),
                            value_text(n),
                            format!(
                                "macro {name} changed from {} to {}",
                                value_text(o).unwrap_or_default(),
                                value_text(n).unwrap_or_default()
                            ),
                        );
                    }
                }
                DeclKind::Constant if value_text(o) != value_text(n) => {
                    out.push(
                        "header.constant.value_changed",
                        name.clone(),
                        n,
                        value_text(o),
                        value_text(n),
                        format!(
                            "constant {name} changed from {} to {}",
                            value_text(o).unwrap_or_default(),
                            value_text(n).unwrap_or_default()
                        ),
                    );
                }
                _ => {}
            },
            (None, None) => {}
        }
    }
    let mut v = out.0;
    v.sort_by(|x, y| {
        (&x.file, x.line, x.rule, &x.subject, &x.old, &x.new)
            .cmp(&(&y.file, y.line, y.rule, &y.subject, &y.old, &y.new))
    });
    v.dedup();
    v
}

/// Constants that changed spelling between `static const` and a value `#define` (either way) and
/// kept their value: one `header.constant.spelling_changed` each, instead of a removal and an
/// addition. Returns their names, which the caller then skips. A changed value, a macro that
/// renames another symbol, or a name that keeps its old spelling next to the new one is left to
/// the other rules.
fn respelled<'a>(out: &mut Out, a: &Index<'a>, b: &Index<'a>) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    for ((from, to), (from_text, to_text)) in [
        ((DeclKind::Constant, DeclKind::Macro), ("static const", "#define")),
        ((DeclKind::Macro, DeclKind::Constant), ("#define", "static const")),
    ] {
        for ((kind, name), &o) in a.by_kind.range((from, String::new())..) {
            if *kind != from {
                break;
            }
            let key_to = (to, name.clone());
            let key_from = (from, name.clone());
            let Some(n) = b.by_kind.get(&key_to) else { continue };
            if b.by_kind.contains_key(&key_from) || a.by_kind.contains_key(&key_to) {
                continue;
            }
            if o.alias_of.is_some() || n.alias_of.is_some() || !same_value(o, n) {
                continue;
            }
            out.push(
                "header.constant.spelling_changed",
                name.clone(),
                n,
                Some(spelling(o)),
                Some(spelling(n)),
                format!(
                    "{name} is now a `{to_text}` (was a `{from_text}`) with the same value {}",
                    value_text(n).unwrap_or_default()
                ),
            );
            names.insert(o.name.as_str());
        }
    }
    names
}

/// A constant as declared: `const int32_t X = 1` or `#define X 1`.
fn spelling(d: &Decl) -> String {
    let v = value_text(d).unwrap_or_default();
    match d.kind {
        DeclKind::Macro => format!("#define {} {v}", d.name),
        _ => format!("{} {} = {v}", d.ty.as_deref().unwrap_or("const"), d.name),
    }
}

/// The same constant value: both resolved to the same integer, or neither resolved and both written
/// the same (normalized) way.
fn same_value(o: &Decl, n: &Decl) -> bool {
    match (o.value, n.value) {
        (Some(x), Some(y)) => x == y,
        (None, None) => o.expr.is_some() && o.expr == n.expr,
        _ => false,
    }
}

fn tag_name(t: &str) -> String {
    t.split_whitespace().nth(1).unwrap_or("").to_string()
}

/// `struct a_` -> `struct a` (same keyword, only the tag differs): the old and new tags.
fn retagged(o: &Decl, n: &Decl) -> Option<(String, String)> {
    let (ot, nt) = (o.ty.as_deref()?, n.ty.as_deref()?);
    let (ok, on) = ot.split_once(' ')?;
    let (nk, nn) = nt.split_once(' ')?;
    let simple = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ok == nk && matches!(ok, "struct" | "union" | "enum") && on != nn && simple(on) && simple(nn))
        .then(|| (ot.to_string(), nt.to_string()))
}

fn kind_rule(kind: DeclKind) -> &'static str {
    match kind {
        DeclKind::Function => "function",
        DeclKind::Enum => "enum",
        DeclKind::Enumerator => "enumerator",
        DeclKind::Struct | DeclKind::Union | DeclKind::Field => "struct",
        DeclKind::Typedef => "typedef",
        DeclKind::Macro => "macro",
        DeclKind::Constant => "constant",
    }
}

fn describe(d: &Decl) -> Option<String> {
    match d.kind {
        DeclKind::Function => Some(sig(d)),
        DeclKind::Enumerator | DeclKind::Constant => value_text(d),
        DeclKind::Macro => d.alias_of.clone().or_else(|| value_text(d)),
        DeclKind::Typedef => d.ty.clone(),
        _ => Some(d.name.clone()),
    }
}

fn removed(out: &mut Out, kind: DeclKind, o: &Decl) {
    let id = format!("header.{}.removed", kind_rule(kind));
    out.push(&id, o.subject(), o, describe(o), None, format!("{} {} was removed", o.kind.as_str(), o.subject()));
}

fn added(out: &mut Out, kind: DeclKind, n: &Decl) {
    let id = format!("header.{}.added", kind_rule(kind));
    out.push(&id, n.subject(), n, None, describe(n), format!("{} {} was added", n.kind.as_str(), n.subject()));
}

fn function(out: &mut Out, o: &Decl, n: &Decl) {
    let name = &n.name;
    if o.ret != n.ret {
        out.push(
            "header.function.return_changed",
            name.clone(),
            n,
            o.ret.clone(),
            n.ret.clone(),
            format!(
                "{name} now returns `{}` (was `{}`)",
                n.ret.clone().unwrap_or_default(),
                o.ret.clone().unwrap_or_default()
            ),
        );
    }
    if !o.deprecated && n.deprecated {
        out.push(
            "header.function.deprecated",
            name.clone(),
            n,
            None,
            n.deprecation.clone(),
            match &n.deprecation {
                Some(m) => format!("{name} is deprecated: {m}"),
                None => format!("{name} is deprecated"),
            },
        );
    }
    let empty = Vec::new();
    let op = o.params.as_ref().unwrap_or(&empty);
    let np = n.params.as_ref().unwrap_or(&empty);
    let (os, ns) = (sig(o), sig(n));
    let named = |ps: &[Param]| {
        let names: BTreeSet<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        ps.iter().all(|p| !p.name.is_empty()) && names.len() == ps.len()
    };
    if op.len() != np.len() && named(op) && named(np) {
        // align by name
        for (i, p) in np.iter().enumerate() {
            match op.iter().find(|q| q.name == p.name) {
                None => out.push(
                    "header.function.param_added",
                    name.clone(),
                    n,
                    Some(os.clone()),
                    Some(ns.clone()),
                    format!("{name}: parameter `{}` added at position {}", param_text(p), i + 1),
                ),
                Some(q) => param_pair(out, n, q, p, &os, &ns),
            }
        }
        for (i, q) in op.iter().enumerate() {
            if !np.iter().any(|p| p.name == q.name) {
                out.push(
                    "header.function.param_removed",
                    name.clone(),
                    n,
                    Some(os.clone()),
                    Some(ns.clone()),
                    format!("{name}: parameter `{}` at position {} removed", param_text(q), i + 1),
                );
            }
        }
    } else if op.len() == np.len()
        && named(op)
        && named(np)
        && op.iter().any(|q| q.name != np[op.iter().position(|x| x.name == q.name).unwrap_or(0)].name)
        && {
            let mut x: Vec<&str> = op.iter().map(|p| p.name.as_str()).collect();
            let mut y: Vec<&str> = np.iter().map(|p| p.name.as_str()).collect();
            x.sort_unstable();
            y.sort_unstable();
            x == y && op.iter().map(|p| &p.name).ne(np.iter().map(|p| &p.name))
        }
    {
        let on: Vec<&str> = op.iter().map(|p| p.name.as_str()).collect();
        let nn: Vec<&str> = np.iter().map(|p| p.name.as_str()).collect();
        out.push(
            "header.function.param_reordered",
            name.clone(),
            n,
            Some(os.clone()),
            Some(ns.clone()),
            format!("{name}: parameters reordered from ({}) to ({})", on.join(", "), nn.join(", ")),
        );
        for p in np {
            if let Some(q) = op.iter().find(|q| q.name == p.name) {
                param_pair(out, n, q, p, &os, &ns);
            }
        }
    } else {
        for (i, (q, p)) in op.iter().zip(np.iter()).enumerate() {
            if q.ty != p.ty {
                out.push(
                    "header.function.param_retyped",
                    name.clone(),
                    n,
                    Some(os.clone()),
                    Some(ns.clone()),
                    format!("{name}: parameter {} `{}` changed type from `{}` to `{}`", i + 1, p.name, q.ty, p.ty),
                );
            } else if q.name != p.name {
                out.push(
                    "header.function.param_renamed",
                    name.clone(),
                    n,
                    Some(os.clone()),
                    Some(ns.clone()),
                    format!("{name}: parameter {} renamed from `{}` to `{}`", i + 1, q.name, p.name),
                );
            }
            if q.default != p.default {
                out.push(
                    "header.function.param_default_changed",
                    name.clone(),
                    n,
                    q.default.clone(),
                    p.default.clone(),
                    format!(
                        "{name}: default of parameter `{}` changed from {:?} to {:?}",
                        p.name, q.default, p.default
                    ),
                );
            }
        }
        for (i, p) in np.iter().enumerate().skip(op.len()) {
            out.push(
                "header.function.param_added",
                name.clone(),
                n,
                Some(os.clone()),
                Some(ns.clone()),
                format!("{name}: parameter `{}` added at position {}", param_text(p), i + 1),
            );
        }
        for (i, q) in op.iter().enumerate().skip(np.len()) {
            out.push(
                "header.function.param_removed",
                name.clone(),
                n,
                Some(os.clone()),
                Some(ns.clone()),
                format!("{name}: parameter `{}` at position {} removed", param_text(q), i + 1),
            );
        }
    }
    if o.variadic != n.variadic {
        let id = if n.variadic { "header.function.param_added" } else { "header.function.param_removed" };
        out.push(
            id,
            name.clone(),
            n,
            Some(os.clone()),
            Some(ns.clone()),
            format!("{name}: variadic `...` {}", if n.variadic { "added" } else { "removed" }),
        );
    }
}

fn param_pair(out: &mut Out, n: &Decl, q: &Param, p: &Param, os: &str, ns: &str) {
    let name = &n.name;
    if q.ty != p.ty {
        out.push(
            "header.function.param_retyped",
            name.clone(),
            n,
            Some(os.to_string()),
            Some(ns.to_string()),
            format!("{name}: parameter `{}` changed type from `{}` to `{}`", p.name, q.ty, p.ty),
        );
    }
    if q.default != p.default {
        out.push(
            "header.function.param_default_changed",
            name.clone(),
            n,
            q.default.clone(),
            p.default.clone(),
            format!("{name}: default of parameter `{}` changed from {:?} to {:?}", p.name, q.default, p.default),
        );
    }
}

fn enumerator(out: &mut Out, o: &Decl, n: &Decl) {
    let subject = n.subject();
    let changed = match (o.value, n.value) {
        (Some(a), Some(b)) => a != b,
        (None, None) => o.expr != n.expr,
        _ => true,
    };
    if changed {
        out.push(
            "header.enumerator.value_changed",
            subject.clone(),
            n,
            value_text(o),
            value_text(n),
            format!(
                "{subject} changed value from {} to {}",
                value_text(o).unwrap_or_default(),
                value_text(n).unwrap_or_default()
            ),
        );
    }
    if !o.deprecated && n.deprecated {
        out.push(
            "header.enumerator.deprecated",
            subject.clone(),
            n,
            None,
            n.deprecation.clone(),
            match &n.deprecation {
                Some(m) => format!("{subject} is deprecated: {m}"),
                None => format!("{subject} is deprecated"),
            },
        );
    }
}

fn field_type(f: &Decl) -> String {
    match &f.bits {
        Some(b) => format!("{} : {b}", f.ty.clone().unwrap_or_default()),
        None => f.ty.clone().unwrap_or_default(),
    }
}

fn aggregate(out: &mut Out, o: &Decl, n: &Decl, a: &Index, b: &Index) {
    let empty = Vec::new();
    let of = a.members.get(&(o.file.clone(), o.name.clone())).unwrap_or(&empty);
    let nf = b.members.get(&(n.file.clone(), n.name.clone())).unwrap_or(&empty);
    let sname = &n.name;
    let mut renamed: BTreeSet<String> = BTreeSet::new();
    let mut renamed_old: BTreeSet<String> = BTreeSet::new();
    // same position, same type, name absent on the other side: a rename
    for f in nf {
        if of.iter().any(|g| g.name == f.name) {
            continue;
        }
        if let Some(g) = of
            .iter()
            .find(|g| g.index == f.index && field_type(g) == field_type(f) && !nf.iter().any(|x| x.name == g.name))
        {
            out.push(
                "header.struct.field_renamed",
                format!("{sname}.{}", f.name),
                f,
                Some(g.name.clone()),
                Some(f.name.clone()),
                format!("{sname}: field `{}` renamed to `{}`", g.name, f.name),
            );
            renamed.insert(f.name.clone());
            renamed_old.insert(g.name.clone());
        }
    }
    for f in nf {
        match of.iter().find(|g| g.name == f.name) {
            None if !renamed.contains(&f.name) => {
                out.push(
                    "header.struct.field_added",
                    format!("{sname}.{}", f.name),
                    f,
                    None,
                    Some(field_type(f)),
                    format!(
                        "{sname}: field `{} {}` added at position {}",
                        field_type(f),
                        f.name,
                        f.index.unwrap_or(0) + 1
                    ),
                );
            }
            None => {}
            Some(g) => {
                if field_type(g) != field_type(f) {
                    out.push(
                        "header.struct.field_retyped",
                        format!("{sname}.{}", f.name),
                        f,
                        Some(field_type(g)),
                        Some(field_type(f)),
                        format!(
                            "{sname}: field `{}` changed type from `{}` to `{}`",
                            f.name,
                            field_type(g),
                            field_type(f)
                        ),
                    );
                }
                if !g.deprecated && f.deprecated {
                    out.push(
                        "header.struct.field_deprecated",
                        format!("{sname}.{}", f.name),
                        f,
                        None,
                        f.deprecation.clone(),
                        format!("{sname}: field `{}` is deprecated", f.name),
                    );
                }
            }
        }
    }
    for g in of {
        if !nf.iter().any(|f| f.name == g.name) && !renamed_old.contains(&g.name) {
            out.push(
                "header.struct.field_removed",
                format!("{sname}.{}", g.name),
                n,
                Some(field_type(g)),
                None,
                format!("{sname}: field `{} {}` removed", field_type(g), g.name),
            );
        }
    }
    // relative order of the fields both sides have
    let common_old: Vec<&str> =
        of.iter().filter(|g| nf.iter().any(|f| f.name == g.name)).map(|g| g.name.as_str()).collect();
    let common_new: Vec<&str> =
        nf.iter().filter(|f| of.iter().any(|g| g.name == f.name)).map(|f| f.name.as_str()).collect();
    if common_old != common_new {
        out.push(
            "header.struct.field_reordered",
            sname.clone(),
            n,
            Some(common_old.join(", ")),
            Some(common_new.join(", ")),
            format!("{sname}: fields reordered"),
        );
    }
}
