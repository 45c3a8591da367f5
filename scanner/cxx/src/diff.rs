//! Comparing the C++ interfaces of two releases under the `cxx.*` rules.
//!
//! Classes match by qualified name, members by name and canonical override key (return, parameter
//! types, `const`, `noexcept`, with `c10::optional` = `std::optional` and namespace qualifiers
//! folded). A member that disappeared while one with the same key appeared, with the same default
//! body or at the same position, is a rename. A class whose bases changed is also compared on what
//! it inherits, so a pure virtual arriving through a new base is reported on the class a backend
//! derives from.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Serialize;

use crate::{Class, CxxSet, Function, Method};

/// How much a change hurts a backend.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum CxxSeverity {
    /// The backend no longer compiles (or no longer links) against the new headers.
    Breaking,
    /// It compiles, but something fails when called or must be updated to keep its meaning.
    Action,
    /// Nothing to do.
    Info,
}

/// One rule of the catalogue.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CxxRule {
    pub id: &'static str,
    pub severity: CxxSeverity,
    pub explanation: &'static str,
    pub remedy: &'static str,
}

/// One detected change.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CxxChange {
    pub rule: &'static str,
    pub severity: CxxSeverity,
    /// `c10::Allocator::copy_data`, `c10::Allocator`, `TORCH_LIBRARY_IMPL`, `autocast fp32: pow.Scalar`.
    pub subject: String,
    /// What inside the subject (a base class, a list), when not the subject itself.
    pub detail: Option<String>,
    /// File and line in the new set (in the old set for removals).
    pub file: String,
    pub line: u32,
    pub old: Option<String>,
    pub new: Option<String>,
    pub message: String,
}

macro_rules! rule {
    ($id:literal, $sev:ident, $exp:literal, $rem:literal) => {
        CxxRule { id: $id, severity: CxxSeverity::$sev, explanation: $exp, remedy: $rem }
    };
}

static RULES: &[CxxRule] = &[
    rule!(
        "cxx.class.added",
        Info,
        "A class a backend implements or registers through was added.",
        "Nothing to do; implement it if the backend wants the feature."
    ),
    rule!(
        "cxx.class.removed",
        Breaking,
        "A class a backend derives from or registers through was removed: code naming it no longer compiles.",
        "Move the backend's subclass or registration to the replacement PyTorch names in its release notes."
    ),
    rule!(
        "cxx.class.renamed",
        Breaking,
        "A class was renamed (same members under a new name): code naming the old one no longer compiles.",
        "Rename the base class in the backend's subclass."
    ),
    rule!(
        "cxx.class.bases_changed",
        Action,
        "A class's base classes changed: it inherits other members (and other pure virtuals).",
        "Check the subclass against the members it now inherits; implement the new pure virtuals."
    ),
    rule!(
        "cxx.virtual.pure_added",
        Breaking,
        "A pure virtual was added: a backend's subclass no longer compiles until it overrides it.",
        "Override the new method in the subclass."
    ),
    rule!(
        "cxx.virtual.throwing_added",
        Action,
        "A virtual was added whose default throws: the backend compiles, and fails only when PyTorch calls it.",
        "Override the new method where the device supports it; the default raises at run time."
    ),
    rule!(
        "cxx.virtual.added",
        Info,
        "A virtual was added with a working default.",
        "Nothing to do; override it if the device can do better than the default."
    ),
    rule!(
        "cxx.virtual.became_pure",
        Breaking,
        "A virtual lost its default (became pure): subclasses that did not override it no longer compile.",
        "Override the method in the subclass."
    ),
    rule!(
        "cxx.virtual.now_throws",
        Action,
        "A virtual's default now throws: a subclass that relied on the default fails when it is called.",
        "Override the method in the subclass."
    ),
    rule!(
        "cxx.virtual.no_longer_pure",
        Info,
        "A pure virtual got a default implementation.",
        "Nothing to do; the override may be dropped if the default suffices."
    ),
    rule!(
        "cxx.virtual.signature_changed",
        Breaking,
        "A virtual's return or parameter types changed: an override with the old signature stops overriding (`override` fails to compile).",
        "Change the override's signature to the new one."
    ),
    rule!(
        "cxx.virtual.const_changed",
        Breaking,
        "A virtual gained or lost `const`: an override with the old qualification stops overriding.",
        "Change the override's `const` to match."
    ),
    rule!(
        "cxx.virtual.noexcept_changed",
        Breaking,
        "A virtual gained or lost `noexcept`: an override that is less strict no longer compiles.",
        "Change the override's `noexcept` to match."
    ),
    rule!(
        "cxx.virtual.removed",
        Breaking,
        "A virtual was removed: an override marked `override` no longer compiles, and PyTorch no longer calls it.",
        "Delete the override (or move its logic to the member that replaced it)."
    ),
    rule!(
        "cxx.virtual.renamed",
        Breaking,
        "A virtual was renamed (same signature, same default or position): the override under the old name no longer compiles.",
        "Rename the override."
    ),
    rule!(
        "cxx.virtual.no_longer_virtual",
        Breaking,
        "A member stopped being virtual: an override of it no longer compiles.",
        "Delete the override; the behaviour is fixed upstream now."
    ),
    rule!(
        "cxx.virtual.became_virtual",
        Info,
        "A member became virtual: a backend may now override it.",
        "Nothing to do; override it if the device needs to."
    ),
    rule!("cxx.method.added", Info, "A non-virtual member was added.", "Nothing to do."),
    rule!(
        "cxx.method.removed",
        Action,
        "A non-virtual member (or constructor) was removed: callers no longer compile.",
        "Move the calls to the replacement."
    ),
    rule!(
        "cxx.method.renamed",
        Action,
        "A non-virtual member was renamed: callers no longer compile.",
        "Rename the calls."
    ),
    rule!(
        "cxx.method.signature_changed",
        Action,
        "A non-virtual member's (or constructor's) signature changed: callers must pass the new arguments.",
        "Update the calls."
    ),
    rule!(
        "cxx.method.param_added_with_default",
        Info,
        "A non-virtual member gained trailing parameters with defaults: existing calls compile unchanged.",
        "Nothing to do; pass the new arguments where the device needs them."
    ),
    rule!(
        "cxx.signature.respelled",
        Info,
        "A signature was respelled without changing its meaning (`c10::optional` -> `std::optional`, a namespace qualifier); overrides still override.",
        "Nothing to do; match the spelling when next touching the override."
    ),
    rule!("cxx.function.added", Info, "A registration function was added.", "Nothing to do."),
    rule!(
        "cxx.function.removed",
        Breaking,
        "A registration function was removed: the backend's registration no longer compiles or links.",
        "Register through the replacement."
    ),
    rule!(
        "cxx.function.signature_changed",
        Breaking,
        "A registration function's signature changed.",
        "Update the call."
    ),
    rule!("cxx.macro.added", Info, "A registration macro was added.", "Nothing to do."),
    rule!(
        "cxx.macro.removed",
        Breaking,
        "A registration macro was removed: registrations using it no longer compile.",
        "Register through the replacement."
    ),
    rule!(
        "cxx.macro.params_changed",
        Breaking,
        "A registration macro's parameters changed: its invocations no longer expand.",
        "Update every invocation."
    ),
    rule!(
        "cxx.macro.body_changed",
        Action,
        "A registration macro now expands differently: what it registers, or how, changed.",
        "Read the new expansion and check the backend's invocations still register what they meant."
    ),
    rule!(
        "cxx.autocast.added",
        Action,
        "An operator joined an autocast policy list: autocast on the device must cast it as CPU and CUDA do.",
        "Regenerate the device's autocast registration (`xirang-scan generate`)."
    ),
    rule!(
        "cxx.autocast.removed",
        Action,
        "An operator left an autocast policy list.",
        "Regenerate the device's autocast registration (`xirang-scan generate`)."
    ),
    rule!(
        "cxx.autocast.moved",
        Action,
        "An operator moved between autocast policy lists (another precision policy).",
        "Regenerate the device's autocast registration (`xirang-scan generate`)."
    ),
    rule!(
        "cxx.autocast.lists_published",
        Info,
        "The autocast policy lists appeared in the installed headers (they were in a .cpp before).",
        "Nothing to do; the device's autocast registration is generated from them from now on."
    ),
];

/// The rule catalogue.
pub fn rules() -> &'static [CxxRule] {
    RULES
}

fn rule(id: &'static str) -> &'static CxxRule {
    // every id used below is in RULES (a unit test calls every diff path); the first rule is a safe
    // stand-in rather than a panic
    RULES.iter().find(|r| r.id == id).unwrap_or(&RULES[0])
}

struct Out(Vec<CxxChange>);

impl Out {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        id: &'static str,
        subject: String,
        detail: Option<String>,
        file: &str,
        line: u32,
        old: Option<String>,
        new: Option<String>,
        message: String,
    ) {
        let r = rule(id);
        self.0.push(CxxChange {
            rule: r.id,
            severity: r.severity,
            subject,
            detail,
            file: file.to_string(),
            line,
            old,
            new,
            message,
        });
    }
}

/// Compares two C++ interface sets; sorted by severity, rule, subject.
pub fn diff(old: &CxxSet, new: &CxxSet) -> Vec<CxxChange> {
    let mut out = Out(Vec::new());
    classes(old, new, &mut out);
    functions(old, new, &mut out);
    macros(old, new, &mut out);
    autocast(old, new, &mut out);
    let mut v = out.0;
    v.sort_by(|a, b| {
        (a.severity, a.rule, &a.subject, &a.detail, &a.old, &a.new)
            .cmp(&(b.severity, b.rule, &b.subject, &b.detail, &b.old, &b.new))
    });
    v.dedup();
    v
}

fn by_name(s: &CxxSet) -> BTreeMap<&str, &Class> {
    let mut m = BTreeMap::new();
    for c in s.classes() {
        // a class defined twice (two #if branches) is compared once, at its first definition
        m.entry(c.name.as_str()).or_insert(c);
    }
    m
}

fn classes(old: &CxxSet, new: &CxxSet, out: &mut Out) {
    let (o, n) = (by_name(old), by_name(new));
    let mut removed: Vec<&Class> = o.iter().filter(|(k, _)| !n.contains_key(*k)).map(|(_, c)| *c).collect();
    let mut added: Vec<&Class> = n.iter().filter(|(k, _)| !o.contains_key(*k)).map(|(_, c)| *c).collect();
    // renames: same members (names and keys), another name
    let shape = |c: &Class| -> BTreeSet<(String, String)> {
        c.members
            .iter()
            .filter(|m| m.kind != crate::MemberKind::Constructor)
            .map(|m| (m.name.clone(), m.override_key()))
            .collect()
    };
    let mut renamed = Vec::new();
    for r in &removed {
        let sr = shape(r);
        if sr.len() < 2 {
            continue;
        }
        if let Some(a) = added.iter().find(|a| shape(a) == sr) {
            renamed.push((*r, *a));
        }
    }
    for (r, a) in &renamed {
        out.push(
            "cxx.class.renamed",
            r.name.clone(),
            None,
            &a.file,
            a.line,
            Some(r.name.clone()),
            Some(a.name.clone()),
            format!("`{}` is now `{}` ({}:{})", r.name, a.name, a.file, a.line),
        );
        removed.retain(|x| x.name != r.name);
        added.retain(|x| x.name != a.name);
    }
    for r in removed {
        out.push(
            "cxx.class.removed",
            r.name.clone(),
            None,
            &r.file,
            r.line,
            Some(r.name.clone()),
            None,
            format!("`{}` ({} members) is gone", r.name, r.members.len()),
        );
    }
    for a in added {
        let pure = a.members.iter().filter(|m| m.pure).count();
        out.push(
            "cxx.class.added",
            a.name.clone(),
            None,
            &a.file,
            a.line,
            None,
            Some(a.name.clone()),
            format!("`{}` with {} members ({pure} pure virtual)", a.name, a.members.len()),
        );
    }
    for (name, oc) in &o {
        let Some(nc) = n.get(name) else { continue };
        members(oc, nc, out);
        if canon_bases(oc) != canon_bases(nc) {
            out.push(
                "cxx.class.bases_changed",
                nc.name.clone(),
                None,
                &nc.file,
                nc.line,
                Some(oc.bases.join(", ")),
                Some(nc.bases.join(", ")),
                {
                    let list =
                        |b: &[String]| if b.is_empty() { "no base".to_string() } else { format!("`{}`", b.join(", ")) };
                    format!("`{}` derives from {} (was {})", nc.name, list(&nc.bases), list(&oc.bases))
                },
            );
            inherited(oc, old, nc, new, out);
        }
    }
}

fn canon_bases(c: &Class) -> Vec<String> {
    c.bases.iter().map(|b| crate::text::canonical_type(b)).collect()
}

/// Members a class inherits and does not declare itself (by name), through bases found in the set.
fn inherited_members<'a>(c: &'a Class, set: &'a CxxSet) -> Vec<(&'a Class, &'a Method)> {
    let mut out = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let own: HashSet<&str> = c.members.iter().map(|m| m.name.as_str()).collect();
    let mut stack: Vec<&Class> = vec![c];
    let mut steps = 0;
    while let Some(cur) = stack.pop() {
        steps += 1;
        if steps > 64 {
            break;
        }
        for b in &cur.bases {
            let short = crate::text::canonical_type(b);
            let Some(base) = set.classes().find(|k| {
                k.name == *b || crate::text::canonical_type(&k.name) == short || k.name.ends_with(&format!("::{short}"))
            }) else {
                continue;
            };
            if !seen.insert(base.name.as_str()) {
                continue;
            }
            for m in &base.members {
                if m.is_virtual && !own.contains(m.name.as_str()) && m.kind == crate::MemberKind::Method {
                    out.push((base, m));
                }
            }
            stack.push(base);
        }
    }
    out
}

fn inherited(oc: &Class, old: &CxxSet, nc: &Class, new: &CxxSet, out: &mut Out) {
    let before: HashSet<(String, String)> =
        inherited_members(oc, old).into_iter().map(|(_, m)| (m.name.clone(), m.override_key())).collect();
    let mut seen = HashSet::new();
    for (base, m) in inherited_members(nc, new) {
        let k = (m.name.clone(), m.override_key());
        if before.contains(&k) || !seen.insert(k) {
            continue;
        }
        let id = if m.pure {
            "cxx.virtual.pure_added"
        } else if m.default_throws {
            "cxx.virtual.throwing_added"
        } else {
            continue;
        };
        out.push(
            id,
            format!("{}::{}", nc.name, m.name),
            Some(format!("inherited from {}", base.name)),
            &base.file,
            m.line,
            None,
            Some(m.signature()),
            format!("`{}` now inherits `{}` from `{}`", nc.name, m.signature(), base.name),
        );
    }
}

fn members(oc: &Class, nc: &Class, out: &mut Out) {
    let subj = |m: &Method| format!("{}::{}", nc.name, m.name);
    let mut o_left: Vec<&Method> = Vec::new();
    let mut n_used = vec![false; nc.members.len()];
    // 1. same name and key
    for om in &oc.members {
        let k = om.override_key();
        match nc.members.iter().enumerate().find(|(i, nm)| !n_used[*i] && nm.name == om.name && nm.override_key() == k)
        {
            Some((i, nm)) => {
                n_used[i] = true;
                same_member(om, nm, &subj(nm), nc, out);
            }
            None => o_left.push(om),
        }
    }
    // 2. same name, another signature (1:1 in order)
    let mut o_rest = Vec::new();
    for om in o_left {
        match nc.members.iter().enumerate().find(|(i, nm)| !n_used[*i] && nm.name == om.name && nm.kind == om.kind) {
            Some((i, nm)) => {
                n_used[i] = true;
                signature_changed(om, nm, &subj(nm), nc, out);
            }
            None => o_rest.push(om),
        }
    }
    // 3. renames: same key, same body or position; the old name must be gone
    let mut removed = Vec::new();
    for om in o_rest {
        let k = om.override_key();
        let cand = nc.members.iter().enumerate().find(|(i, nm)| {
            !n_used[*i]
                && nm.kind == om.kind
                && nm.is_virtual == om.is_virtual
                && nm.override_key() == k
                && !oc.members.iter().any(|x| x.name == nm.name)
                && ((om.body.is_some() && nm.body == om.body) || nm.index == om.index)
        });
        match cand {
            Some((i, nm)) => {
                n_used[i] = true;
                let id = if om.is_virtual { "cxx.virtual.renamed" } else { "cxx.method.renamed" };
                out.push(
                    id,
                    format!("{}::{}", nc.name, om.name),
                    None,
                    &nc.file,
                    nm.line,
                    Some(om.signature()),
                    Some(nm.signature()),
                    format!("`{}::{}` is now `{}`", nc.name, om.name, nm.name),
                );
            }
            None => removed.push(om),
        }
    }
    for om in removed {
        let id = if om.is_virtual { "cxx.virtual.removed" } else { "cxx.method.removed" };
        out.push(
            id,
            format!("{}::{}", oc.name, om.name),
            None,
            &oc.file,
            om.line,
            Some(om.signature()),
            None,
            format!("`{}` is gone from `{}`", om.signature(), oc.name),
        );
    }
    for (i, nm) in nc.members.iter().enumerate() {
        if n_used[i] {
            continue;
        }
        let (id, what) = if !nm.is_virtual {
            ("cxx.method.added", "")
        } else if nm.pure {
            ("cxx.virtual.pure_added", " (pure: subclasses must override it)")
        } else if nm.default_throws {
            ("cxx.virtual.throwing_added", " (its default throws)")
        } else if nm.specifier.is_some() {
            // an override of an inherited virtual: the class implements more of its base
            ("cxx.virtual.added", " (overrides the base's)")
        } else {
            ("cxx.virtual.added", "")
        };
        out.push(
            id,
            subj(nm),
            None,
            &nc.file,
            nm.line,
            None,
            Some(nm.signature()),
            format!("`{}` added to `{}`{what}", nm.signature(), nc.name),
        );
    }
}

fn same_member(om: &Method, nm: &Method, subject: &str, nc: &Class, out: &mut Out) {
    let mut push = |id: &'static str, msg: String| {
        out.push(id, subject.to_string(), None, &nc.file, nm.line, Some(om.signature()), Some(nm.signature()), msg)
    };
    if om.is_virtual && !nm.is_virtual {
        push("cxx.virtual.no_longer_virtual", format!("`{subject}` is no longer virtual"));
    } else if !om.is_virtual && nm.is_virtual && nm.specifier.is_none() {
        push("cxx.virtual.became_virtual", format!("`{subject}` became virtual"));
    }
    if nm.is_virtual {
        if !om.pure && nm.pure {
            push("cxx.virtual.became_pure", format!("`{subject}` lost its default and is pure now"));
        } else if om.pure && !nm.pure {
            push("cxx.virtual.no_longer_pure", format!("`{subject}` has a default now"));
        } else if !om.pure && !om.default_throws && nm.default_throws {
            push("cxx.virtual.now_throws", format!("the default of `{subject}` throws now"));
        }
    }
    if om.param_types() != nm.param_types() || om.ret != nm.ret {
        let (os, ns) = (om.signature(), nm.signature());
        push("cxx.signature.respelled", format!("`{subject}` respelled: `{ns}` (was `{os}`)"));
    }
}

fn signature_changed(om: &Method, nm: &Method, subject: &str, nc: &Class, out: &mut Out) {
    let same_but = |f: &dyn Fn(&Method) -> Method| f(om).override_key() == f(nm).override_key();
    let only_defaulted_added = nm.params.len() > om.params.len()
        && nm.params[..om.params.len()].iter().zip(&om.params).all(|(a, b)| a.ty == b.ty)
        && nm.params[om.params.len()..].iter().all(|p| p.default.is_some())
        && nm.ret == om.ret
        && nm.is_const == om.is_const;
    let id = if !om.is_virtual && only_defaulted_added {
        "cxx.method.param_added_with_default"
    } else if !om.is_virtual {
        "cxx.method.signature_changed"
    } else if same_but(&|m: &Method| Method { is_const: false, ..m.clone() }) {
        "cxx.virtual.const_changed"
    } else if same_but(&|m: &Method| Method { noexcept: None, ..m.clone() }) {
        "cxx.virtual.noexcept_changed"
    } else {
        "cxx.virtual.signature_changed"
    };
    out.push(
        id,
        subject.to_string(),
        None,
        &nc.file,
        nm.line,
        Some(om.signature()),
        Some(nm.signature()),
        format!("`{}` is now `{}`", om.signature(), nm.signature()),
    );
}

fn functions(old: &CxxSet, new: &CxxSet, out: &mut Out) {
    let group = |s: &CxxSet| {
        let mut m: BTreeMap<String, Vec<Function>> = BTreeMap::new();
        for f in s.functions() {
            let v = m.entry(f.name.clone()).or_default();
            if !v.iter().any(|x| x.override_key() == f.override_key()) {
                v.push(f.clone());
            }
        }
        m
    };
    let (o, n) = (group(old), group(new));
    for (name, ofs) in &o {
        let nfs = n.get(name).cloned().unwrap_or_default();
        let mut used = vec![false; nfs.len()];
        let mut left = Vec::new();
        for of in ofs {
            match nfs.iter().enumerate().find(|(i, nf)| !used[*i] && nf.override_key() == of.override_key()) {
                Some((i, nf)) => {
                    used[i] = true;
                    if of.signature() != nf.signature() && (of.ret != nf.ret || of.params != nf.params) {
                        let ps = |f: &Function| f.params.iter().map(|p| p.ty.clone()).collect::<Vec<_>>();
                        if of.ret != nf.ret || ps(of) != ps(nf) {
                            out.push(
                                "cxx.signature.respelled",
                                name.clone(),
                                None,
                                &nf.file,
                                nf.line,
                                Some(of.signature()),
                                Some(nf.signature()),
                                format!("`{name}` respelled"),
                            );
                        }
                    }
                }
                None => left.push(of),
            }
        }
        for of in left {
            match nfs.iter().enumerate().find(|(i, _)| !used[*i]) {
                Some((i, nf)) => {
                    used[i] = true;
                    out.push(
                        "cxx.function.signature_changed",
                        name.clone(),
                        None,
                        &nf.file,
                        nf.line,
                        Some(of.signature()),
                        Some(nf.signature()),
                        format!("`{}` is now `{}`", of.signature(), nf.signature()),
                    );
                }
                None => out.push(
                    "cxx.function.removed",
                    name.clone(),
                    None,
                    &of.file,
                    of.line,
                    Some(of.signature()),
                    None,
                    format!("`{}` is gone", of.signature()),
                ),
            }
        }
        for (i, nf) in nfs.iter().enumerate() {
            if !used[i] && !ofs.is_empty() {
                out.push(
                    "cxx.function.added",
                    name.clone(),
                    Some("overload".into()),
                    &nf.file,
                    nf.line,
                    None,
                    Some(nf.signature()),
                    format!("new overload `{}`", nf.signature()),
                );
            }
        }
    }
    for (name, nfs) in &n {
        if o.contains_key(name) {
            continue;
        }
        for nf in nfs {
            out.push(
                "cxx.function.added",
                name.clone(),
                None,
                &nf.file,
                nf.line,
                None,
                Some(nf.signature()),
                format!("`{}` added", nf.signature()),
            );
        }
    }
}

fn macros(old: &CxxSet, new: &CxxSet, out: &mut Out) {
    let first = |s: &CxxSet| {
        let mut m: BTreeMap<String, crate::Macro> = BTreeMap::new();
        for x in s.macros() {
            m.entry(x.name.clone()).or_insert_with(|| x.clone());
        }
        m
    };
    let (o, n) = (first(old), first(new));
    let sig = |m: &crate::Macro| match &m.params {
        Some(p) => format!("{}({})", m.name, p.join(", ")),
        None => m.name.clone(),
    };
    for (name, om) in &o {
        match n.get(name) {
            None => out.push(
                "cxx.macro.removed",
                name.clone(),
                None,
                &om.file,
                om.line,
                Some(sig(om)),
                None,
                format!("`{}` is gone", sig(om)),
            ),
            Some(nm) if nm.params != om.params => out.push(
                "cxx.macro.params_changed",
                name.clone(),
                None,
                &nm.file,
                nm.line,
                Some(sig(om)),
                Some(sig(nm)),
                format!("`{}` is now `{}`", sig(om), sig(nm)),
            ),
            Some(nm) if nm.body != om.body => out.push(
                "cxx.macro.body_changed",
                name.clone(),
                None,
                &nm.file,
                nm.line,
                Some(format!("{} body {}", sig(om), om.body)),
                Some(format!("{} body {}", sig(nm), nm.body)),
                format!("`{}` expands differently ({}:{})", sig(nm), nm.file, nm.line),
            ),
            Some(_) => {}
        }
    }
    for (name, nm) in &n {
        if !o.contains_key(name) {
            out.push(
                "cxx.macro.added",
                name.clone(),
                None,
                &nm.file,
                nm.line,
                None,
                Some(sig(nm)),
                format!("`{}` added", sig(nm)),
            );
        }
    }
}

fn autocast(old: &CxxSet, new: &CxxSet, out: &mut Out) {
    let lists = |s: &CxxSet| {
        let mut m: BTreeMap<String, (BTreeSet<String>, String, u32)> = BTreeMap::new();
        let file = s.files.iter().find(|f| f.path.ends_with("autocast_mode.h")).map(|f| f.path.clone());
        for e in s.autocast() {
            let ent =
                m.entry(e.op.clone()).or_insert_with(|| (BTreeSet::new(), file.clone().unwrap_or_default(), e.line));
            ent.0.insert(e.list.clone());
        }
        m
    };
    let (o, n) = (lists(old), lists(new));
    if o.is_empty() {
        if let Some((_, (_, file, _))) = n.iter().next() {
            out.push(
                "cxx.autocast.lists_published",
                "autocast policy lists".into(),
                None,
                file,
                1,
                None,
                Some(format!("{} operators", n.len())),
                format!("{file} publishes the autocast policy lists ({} operators)", n.len()),
            );
        }
        return;
    }
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
    for (op, (ol, ofile, oline)) in &o {
        match n.get(op) {
            None => out.push(
                "cxx.autocast.removed",
                op.clone(),
                Some(join(ol)),
                ofile,
                *oline,
                Some(join(ol)),
                None,
                format!("`{op}` left autocast list {}", join(ol)),
            ),
            Some((nl, nfile, nline)) if nl != ol => out.push(
                "cxx.autocast.moved",
                op.clone(),
                None,
                nfile,
                *nline,
                Some(join(ol)),
                Some(join(nl)),
                format!("`{op}` moved from autocast list {} to {}", join(ol), join(nl)),
            ),
            Some(_) => {}
        }
    }
    for (op, (nl, nfile, nline)) in &n {
        if !o.contains_key(op) {
            out.push(
                "cxx.autocast.added",
                op.clone(),
                Some(join(nl)),
                nfile,
                *nline,
                None,
                Some(join(nl)),
                format!("`{op}` joined autocast list {}", join(nl)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_sorted_and_unique() {
        let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        let mut s = ids.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), ids.len());
        for id in ids {
            assert!(id.starts_with("cxx."));
        }
    }
}
