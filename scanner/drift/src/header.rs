//! The driver-header change source: `xirang-headers`' diff of two header snapshots as [`Change`]s,
//! so header drift shares the catalogue, reports, allow lists and exit codes of operator drift.
//!
//! Severity: an ABI break (`abi`: removed function, changed parameters or return, changed enumerator
//! value or struct layout) is `breaking`; a source break (`source`: a rename) is `action`; information
//! (`none`: additions, deprecations) is `info`. `pytorch_bc` is always null. Fingerprints are computed
//! like operator fingerprints (rule, subject, old, new), never from the message.
//!
//! Impact: a changed symbol used anywhere in `adapter-runtime/` (an identifier or a string literal
//! naming it: bindings, `dlsym` names, calls) lands there as a `driver` impact with file and line, and
//! on the generated bindings file as a `generated` impact.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use syn::visit::Visit;

use super::{Change, Impact, ImpactSource, Location, Rule, RuleSet, Severity, Upstream};
use crate::error::Error;
use crate::snapshot::HeaderSnapshot;

fn severity(s: xirang_headers::HeaderSeverity) -> Severity {
    match s {
        xirang_headers::HeaderSeverity::Abi => Severity::Breaking,
        xirang_headers::HeaderSeverity::Source => Severity::Action,
        xirang_headers::HeaderSeverity::None => Severity::Info,
    }
}

/// The header rules of `xirang-headers`, as catalogue entries.
pub fn rules() -> Vec<Rule> {
    xirang_headers::rules()
        .iter()
        .map(|r| Rule {
            id: r.id.to_string(),
            severity: severity(r.severity),
            pytorch_bc: None,
            title: r.explanation.trim_end_matches('.').to_string(),
            explanation: r.explanation.to_string(),
            remedy: r.remedy.to_string(),
            upstream: "header".into(),
        })
        .collect()
}

/// Compares two header snapshots; sorted like operator changes.
pub fn diff(old: &HeaderSnapshot, new: &HeaderSnapshot, rules: &RuleSet) -> Vec<Change> {
    let mut out: Vec<Change> = xirang_headers::diff(&old.set, &new.set)
        .into_iter()
        .map(|h| {
            let mut c = Change::new(rules, h.rule, Upstream::Header, h.subject, None, None, h.old, h.new, h.message)
                .at(Some(Location::new(h.file, Some(h.line))));
            // the header crate's own severity is authoritative for its rules
            c.severity = severity(h.severity);
            c
        })
        .collect();
    out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    out.dedup_by(|a, b| a.fingerprint == b.fingerprint && a.rule == b.rule);
    out
}

/// Uses of names in an adapter tree: name -> sorted (file, line).
#[derive(Debug, Default)]
pub struct SymbolUses {
    uses: HashMap<String, BTreeSet<(String, u32)>>,
}

impl SymbolUses {
    /// Indexes identifiers and string literals of every `.rs` file under `dir`.
    pub fn index_dir(dir: &Path, root: &Path) -> Result<SymbolUses, Error> {
        let mut su = SymbolUses::default();
        if !dir.is_dir() {
            return Ok(su);
        }
        let mut files = Vec::new();
        collect(dir, &mut files)?;
        files.sort();
        for p in files {
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().replace('\\', "/");
            // a file syn cannot parse contributes no uses (the kernel index reports the parse error)
            let Ok(ast) = syn::parse_file(&text) else { continue };
            let mut v = Uses { file: &rel, out: &mut su.uses };
            v.visit_file(&ast);
        }
        Ok(su)
    }

    fn of(&self, subject: &str) -> Option<&BTreeSet<(String, u32)>> {
        // `cudaError::cudaErrorFoo`: code spells the enumerator; `cudaDeviceProp.name`: a field
        // change matters where the struct is used (field names alone are far too common)
        let name = match (subject.rsplit_once("::"), subject.split_once('.')) {
            (Some((_, enumerator)), _) => enumerator,
            (None, Some((aggregate, _))) => aggregate,
            (None, None) => subject,
        };
        self.uses.get(name)
    }
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), Error> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                collect(&p, out)?;
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

struct Uses<'a> {
    file: &'a str,
    out: &'a mut HashMap<String, BTreeSet<(String, u32)>>,
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
        let line = i.span().start().line as u32;
        self.out.entry(i.to_string()).or_default().insert((self.file.to_string(), line));
    }
    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        let v = s.value();
        if !v.is_empty() && v.len() < 128 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            let line = s.span().start().line as u32;
            self.out.entry(v).or_default().insert((self.file.to_string(), line));
        }
    }
    fn visit_lit_byte_str(&mut self, s: &'ast syn::LitByteStr) {
        let v = s.value();
        let v = v.strip_suffix(b"\0").unwrap_or(&v);
        if let Ok(t) = std::str::from_utf8(v)
            && !t.is_empty()
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            let line = s.span().start().line as u32;
            self.out.entry(t.to_string()).or_default().insert((self.file.to_string(), line));
        }
    }
}

/// The generated driver bindings (`DriverApi`, from the `[vendor]` header release of xirang.toml;
/// one file whatever the vendor).
pub fn generated_bindings_file(_vendor: &str) -> String {
    "generated/driver.rs".to_string()
}

/// Impacts of header changes: every use of a changed symbol (breaking or action) in the adapter, and
/// the generated binding of every used symbol.
pub fn impacts(changes: &[Change], uses: &SymbolUses, vendor: &str) -> Vec<Impact> {
    let mut out = Vec::new();
    for c in changes {
        let Some(sites) = uses.of(&c.subject) else { continue };
        if c.severity <= Severity::Action {
            for (file, line) in sites {
                out.push(Impact {
                    subject: c.subject.clone(),
                    rule: c.rule.clone(),
                    severity: c.severity,
                    source: ImpactSource::Driver,
                    location: Location::new(file, Some(*line)),
                    item: format!("use of {}", c.subject),
                    fingerprint: c.fingerprint.clone(),
                    action: format!("check this use: {}", c.message),
                });
            }
        }
        out.push(Impact {
            subject: c.subject.clone(),
            rule: c.rule.clone(),
            severity: c.severity,
            source: ImpactSource::Generated,
            location: Location::new(generated_bindings_file(vendor), None),
            item: format!("binding of {}", c.subject),
            fingerprint: c.fingerprint.clone(),
            action: String::new(),
        });
    }
    out
}
