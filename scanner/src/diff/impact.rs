//! Joins changes with this adapter: hand-written kernels, a vendor backend yaml, generated files.
//!
//! - `kernel`: a breaking or action change to an operator with a hand-written kernel
//!   ([`super::adapter_index`]) lands on that kernel (file and line): someone edits it.
//! - `backend`: a breaking or action change to an operator listed in a backend yaml passed with
//!   `--backend` lands on that entry (file and line): someone edits the list.
//! - `generated`: every schema, dispatch or derivative change lands on the generated file that is
//!   rewritten from the new snapshot (the `AtenOps` trait method, the autograd glue): the generator
//!   handles it, nobody edits it.

use std::collections::HashMap;
use std::path::Path;

use super::adapter_index::AdapterIndex;
use super::{Change, Impact, ImpactSource, Location, Severity};
use crate::backend::BackendYaml;
use crate::naming;

/// The generated file holding the `AtenOps` trait (one method per operator).
pub const GENERATED_TRAIT_FILE: &str = "generated/aten_ops.rs";
/// The generated file holding the autograd glue (one node per derivative entry).
pub const GENERATED_AUTOGRAD_FILE: &str = "generated/autograd.rs";

/// A backend yaml and the path it is reported under.
pub struct Backend<'a> {
    pub path: String,
    pub yaml: &'a BackendYaml,
}

/// Line numbers of `fn <name>` in the generated files under `root` (empty when not generated yet).
#[derive(Debug, Default)]
pub struct GeneratedIndex {
    lines: HashMap<(&'static str, String), u32>,
}

impl GeneratedIndex {
    /// Reads `generated/aten_ops.rs` and `generated/autograd.rs` under `root` when they exist.
    pub fn load(root: &Path) -> GeneratedIndex {
        let mut lines = HashMap::new();
        for file in [GENERATED_TRAIT_FILE, GENERATED_AUTOGRAD_FILE] {
            let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
            for (i, l) in text.lines().enumerate() {
                if let Some(rest) = l.trim_start().strip_prefix("fn ") {
                    let name: String =
                        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '#').collect();
                    lines.entry((file, name)).or_insert(i as u32 + 1);
                }
            }
        }
        GeneratedIndex { lines }
    }
    fn loc(&self, file: &'static str, name: &str) -> Location {
        Location::new(file, self.lines.get(&(file, name.to_string())).copied())
    }
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

    let mut out = Vec::new();
    for c in changes {
        let to_edit = c.severity <= Severity::Action;
        if to_edit {
            for k in kernels.of(&c.subject) {
                out.push(Impact {
                    subject: c.subject.clone(),
                    rule: c.rule.clone(),
                    severity: c.severity,
                    source: ImpactSource::Kernel,
                    location: Location::new(&k.file, Some(k.line)),
                    item: k.item.clone(),
                    fingerprint: c.fingerprint.clone(),
                });
            }
            if let Some(entries) = by_op.get(c.subject.as_str()) {
                for (list, path, line) in entries {
                    out.push(Impact {
                        subject: c.subject.clone(),
                        rule: c.rule.clone(),
                        severity: c.severity,
                        source: ImpactSource::Backend,
                        location: Location::new(*path, Some(*line)),
                        item: format!("{list}: {}", c.subject),
                        fingerprint: c.fingerprint.clone(),
                    });
                }
            }
        }
        if let Some(file) = generated_file(&c.rule) {
            // a removed operator's method disappears; an overload rename renames it
            let subject = match c.rule.as_str() {
                "op.overload_renamed" => c.detail.as_deref().unwrap_or(&c.subject),
                _ => c.subject.as_str(),
            };
            let Some(method) = naming::method_name_of(subject) else { continue };
            let item = if file == GENERATED_TRAIT_FILE {
                format!("AtenOps::{method}")
            } else {
                format!("autograd node of {subject}")
            };
            out.push(Impact {
                subject: c.subject.clone(),
                rule: c.rule.clone(),
                severity: c.severity,
                source: ImpactSource::Generated,
                location: generated.loc(file, &method),
                item,
                fingerprint: c.fingerprint.clone(),
            });
        }
    }
    out
}
