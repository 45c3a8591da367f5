//! The rule catalogue: data, not code.
//!
//! Operator rules live in `scanner/rules/pytorch.json` (embedded at build time). Each rule has a
//! stable id (`arg.inserted`), a severity, a title, a one-line explanation, a remedy, and the default
//! verdict of PyTorch's own backward-compatibility check (`pytorch_bc`: true, false, or null where the
//! check does not look). Header rules come from a header change source ([`RuleSet::extend`]) and share
//! the same catalogue, reports and allow lists.

use serde::{Deserialize, Serialize};

use super::Severity;
use crate::error::Error;

/// The embedded operator rule file.
pub const PYTORCH_RULES_JSON: &str = include_str!("../../rules/pytorch.json");

/// One rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    pub severity: Severity,
    /// PyTorch's compatibility verdict for changes of this kind (null: not a schema change).
    pub pytorch_bc: Option<bool>,
    pub title: String,
    pub explanation: String,
    pub remedy: String,
    /// `pytorch` or `header`.
    #[serde(default = "default_upstream")]
    pub upstream: String,
}

fn default_upstream() -> String {
    "pytorch".into()
}

#[derive(Deserialize)]
struct RuleFile {
    format: String,
    format_version: u32,
    rules: Vec<Rule>,
}

/// The catalogue, sorted by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

impl RuleSet {
    /// Parses a rule file (the embedded one: [`RuleSet::builtin`]).
    pub fn parse(text: &str) -> Result<RuleSet, Error> {
        let f: RuleFile = serde_json::from_str(text).map_err(|e| Error::Rules {
            path: "scanner/rules/pytorch.json".into(),
            message: format!("line {} column {}: {e}", e.line(), e.column()),
        })?;
        if f.format != "xirang-rules" || f.format_version != 1 {
            return Err(Error::Rules {
                path: "scanner/rules/pytorch.json".into(),
                message: format!("format {} v{} is not xirang-rules v1", f.format, f.format_version),
            });
        }
        let mut set = RuleSet { rules: Vec::new() };
        set.extend(f.rules)?;
        Ok(set)
    }

    /// The operator rules shipped with the crate plus the header rules of `xirang-headers`.
    pub fn builtin() -> RuleSet {
        // The embedded file is checked by a unit test; an empty set would only hide rules, never panic.
        let mut set = RuleSet::parse(PYTORCH_RULES_JSON).unwrap_or(RuleSet { rules: Vec::new() });
        let _ = set.extend(super::header::rules());
        let _ = set.extend(super::cxx::rules());
        set
    }

    /// Adds rules from another change source (header rules). Ids must stay unique.
    pub fn extend(&mut self, rules: impl IntoIterator<Item = Rule>) -> Result<(), Error> {
        for r in rules {
            if self.get(&r.id).is_some() {
                return Err(Error::Rules {
                    path: "scanner/rules/pytorch.json".into(),
                    message: format!("duplicate rule id `{}`", r.id),
                });
            }
            self.rules.push(r);
        }
        self.rules.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.binary_search_by(|r| r.id.as_str().cmp(id)).ok().map(|i| &self.rules[i])
    }

    /// Severity of a rule; unknown ids (a programming error, tested against) read as breaking.
    pub fn severity(&self, id: &str) -> Severity {
        self.get(id).map(|r| r.severity).unwrap_or(Severity::Breaking)
    }

    pub fn all(&self) -> &[Rule] {
        &self.rules
    }

    /// `xirang-scan rules`: one line per rule.
    pub fn list_text(&self) -> String {
        let w = self.rules.iter().map(|r| r.id.len()).max().unwrap_or(10);
        let mut out = String::new();
        for r in &self.rules {
            let bc = match r.pytorch_bc {
                Some(true) => "bc:yes",
                Some(false) => "bc:no ",
                None => "bc:n/a",
            };
            out.push_str(&format!("{:<w$}  {:<8}  {bc}  {}\n", r.id, r.severity.as_str(), r.title));
        }
        out
    }

    /// `xirang-scan explain <id>`.
    pub fn explain_text(&self, id: &str) -> Result<String, Error> {
        let r = self.get(id).ok_or_else(|| {
            let near: Vec<&str> = self
                .rules
                .iter()
                .filter(|r| r.id.contains(id) || id.contains(r.id.as_str()))
                .map(|r| r.id.as_str())
                .collect();
            let hint =
                if near.is_empty() { "run `xirang-scan rules` for the list".to_string() } else { near.join(", ") };
            Error::Usage(format!("no rule `{id}` ({hint})"))
        })?;
        let bc = match r.pytorch_bc {
            Some(true) => "accepted by PyTorch's backward-compatibility check",
            Some(false) => "rejected by PyTorch's backward-compatibility check",
            None => "not a schema change (PyTorch's check does not look at it)",
        };
        Ok(format!(
            "{}  [{}]  ({} rule)\n{}\n\nWhat: {}\nRemedy: {}\nPyTorch BC: {bc}\n",
            r.id, r.severity, r.upstream, r.title, r.explanation, r.remedy
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_parses_and_ids_are_unique() {
        let set = RuleSet::parse(PYTORCH_RULES_JSON).expect("embedded rules parse");
        assert!(set.all().len() >= 30);
        for w in set.all().windows(2) {
            assert_ne!(w[0].id, w[1].id);
        }
        assert_eq!(set.severity("arg.inserted"), Severity::Breaking);
        assert!(set.explain_text("arg.int_to_symint").unwrap().contains("SymInt"));
        assert!(set.explain_text("nope").is_err());
    }
}
