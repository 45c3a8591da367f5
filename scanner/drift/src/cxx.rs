//! The C++ interface change source: `xirang-cxx`'s diff of two `pytorch-cxx` snapshots as
//! [`Change`]s, so C++ drift shares the catalogue, reports, allow lists and exit codes of operator
//! drift (`xirang-scan diff --upstream pytorch-cxx v2.12.0 v2.13.0`).
//!
//! Impact: the adapter's C++ sources (the bridge's shim by default, any C++ adapter with
//! `--adapter DIR`) are indexed by `xirang_cxx::index`; a change to a class lands on every subclass
//! the adapter defines (a pure virtual to add) and on every override of the changed member (a
//! signature to change), a change to a registration macro or function on every use of it, and an
//! autocast list change on the generated autocast registration.

use super::{Change, Impact, ImpactSource, Location, Rule, RuleSet, Severity, Upstream};
use crate::cxx_snapshot::CxxSnapshot;

fn severity(s: xirang_cxx::CxxSeverity) -> Severity {
    match s {
        xirang_cxx::CxxSeverity::Breaking => Severity::Breaking,
        xirang_cxx::CxxSeverity::Action => Severity::Action,
        xirang_cxx::CxxSeverity::Info => Severity::Info,
    }
}

/// The `cxx.*` rules of `xirang-cxx`, as catalogue entries.
pub fn rules() -> Vec<Rule> {
    xirang_cxx::rules()
        .iter()
        .map(|r| Rule {
            id: r.id.to_string(),
            severity: severity(r.severity),
            pytorch_bc: None,
            title: r.explanation.split(": ").next().unwrap_or(r.explanation).trim_end_matches('.').to_string(),
            explanation: r.explanation.to_string(),
            remedy: r.remedy.to_string(),
            upstream: "cxx".into(),
        })
        .collect()
}

/// Compares two C++ interface snapshots; sorted like operator changes.
pub fn diff(old: &CxxSnapshot, new: &CxxSnapshot, rules: &RuleSet) -> Vec<Change> {
    let mut out: Vec<Change> = xirang_cxx::diff(&old.set, &new.set)
        .into_iter()
        .map(|h| {
            let mut c = Change::new(rules, h.rule, Upstream::Cxx, h.subject, h.detail, None, h.old, h.new, h.message)
                .at(Some(Location::new(h.file, Some(h.line))));
            c.severity = severity(h.severity);
            c
        })
        .collect();
    out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    out.dedup_by(|a, b| a.fingerprint == b.fingerprint && a.rule == b.rule);
    out
}

/// The generated autocast registration of the device.
pub const AUTOCAST_FILE: &str = "generated/autocast.cpp";

/// Where each change lands in the adapter's C++ (see the module docs).
/// `autocast_generated`: the repository has [`AUTOCAST_FILE`] (an autocast list change lands there).
pub fn impacts(changes: &[Change], index: &xirang_cxx::index::CxxIndex, autocast_generated: bool) -> Vec<Impact> {
    let mut out = Vec::new();
    for c in changes {
        let imp = |loc: Location, item: String, action: String, source: ImpactSource| Impact {
            subject: c.subject.clone(),
            rule: c.rule.clone(),
            severity: c.severity,
            source,
            location: loc,
            item,
            fingerprint: c.fingerprint.clone(),
            action,
        };
        if c.rule.starts_with("cxx.autocast.") {
            if !autocast_generated {
                continue;
            }
            out.push(imp(
                Location::new(AUTOCAST_FILE, None),
                "autocast registration".into(),
                String::new(),
                ImpactSource::Generated,
            ));
            continue;
        }
        if c.severity == Severity::Info {
            continue;
        }
        let (class, member) = match c.rule.split('.').nth(1) {
            Some("virtual" | "method" | "signature") => match c.subject.rsplit_once("::") {
                Some((k, m)) => (k.to_string(), Some(m.to_string())),
                None => (c.subject.clone(), None),
            },
            Some("class") => (c.subject.clone(), None),
            _ => (String::new(), None),
        };
        if !class.is_empty() {
            for sub in index.subclasses_of(&class) {
                match &member {
                    Some(m) => {
                        let ov: Vec<_> = sub.methods.iter().filter(|x| &x.name == m).collect();
                        if ov.is_empty() {
                            if matches!(
                                c.rule.as_str(),
                                "cxx.virtual.pure_added"
                                    | "cxx.virtual.throwing_added"
                                    | "cxx.virtual.became_pure"
                                    | "cxx.virtual.now_throws"
                            ) {
                                out.push(imp(
                                    Location::new(&sub.file, Some(sub.line)),
                                    format!("class {}", sub.name),
                                    format!("add an override of `{m}` to `{}`: {}", sub.name, c.message),
                                    ImpactSource::Kernel,
                                ));
                            }
                        } else if !c.rule.ends_with("_added") {
                            // an override already there for an added member: nothing to do
                            for o in ov {
                                out.push(imp(
                                    Location::new(&sub.file, Some(o.line)),
                                    format!("{}::{}", sub.name, o.name),
                                    format!("update this override: {}", c.message),
                                    ImpactSource::Kernel,
                                ));
                            }
                        }
                    }
                    None => out.push(imp(
                        Location::new(&sub.file, Some(sub.line)),
                        format!("class {}", sub.name),
                        format!("check this subclass: {}", c.message),
                        ImpactSource::Kernel,
                    )),
                }
            }
            continue;
        }
        // registration macros and functions: every use
        let name = c.subject.rsplit("::").next().unwrap_or(&c.subject);
        for u in index.uses_of(name) {
            out.push(imp(
                Location::new(&u.file, Some(u.line)),
                format!("use of {name}"),
                format!("check this use: {}", c.message),
                ImpactSource::Kernel,
            ));
        }
    }
    out
}
