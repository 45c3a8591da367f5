//! The tuning advisor: rules are data (`profile/advice.toml`, embedded;
//! another file can replace it), evaluated over a profile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::report::{cell, fmt_bytes, fmt_ns};
use xirang_runtime::profile::model::{Call, Profile, base_name};
use xirang_runtime::profile::{ProfileError, Result};

/// The rules shipped with the runtime.
pub const DEFAULT_RULES: &str = include_str!("../advice.toml");
/// The largest rules file [`Rules::read`] takes: 4 MiB.
pub const MAX_RULES_BYTES: u64 = 4 << 20;

/// What a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Fallback,
    Recipe,
    ElementwiseChain,
    Contiguous,
}

impl Kind {
    fn placeholders(self) -> &'static [&'static str] {
        match self {
            Kind::Fallback | Kind::Recipe => &["op", "calls", "time", "share", "saving", "bytes", "tier", "children"],
            Kind::ElementwiseChain => &["chain", "length", "count", "time", "share", "saving"],
            Kind::Contiguous => &["op", "calls", "time", "share", "bytes", "tier", "children", "copies"],
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    pub kind: Kind,
    #[serde(default)]
    pub min_calls: u64,
    #[serde(default)]
    pub min_share: f64,
    #[serde(default = "default_native_ratio")]
    pub native_ratio: f64,
    #[serde(default = "default_min_length")]
    pub min_length: usize,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    #[serde(default)]
    pub min_count: u64,
    #[serde(default)]
    pub min_copies: u64,
    #[serde(default)]
    pub min_bytes: u64,
    pub message: String,
}

fn default_native_ratio() -> f64 {
    0.1
}
fn default_min_length() -> usize {
    3
}
fn default_max_bytes() -> u64 {
    u64::MAX
}

/// A rule set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Base names of elementwise operators.
    #[serde(default)]
    pub elementwise: BTreeSet<String>,
    #[serde(rename = "rule")]
    pub rules: Vec<Rule>,
}

impl Rules {
    /// The shipped rules.
    pub fn builtin() -> Result<Rules> {
        Rules::parse(DEFAULT_RULES, Path::new("profile/advice.toml"))
    }

    /// Reads a rules file: a regular file of at most [`MAX_RULES_BYTES`].
    pub fn read(path: impl AsRef<Path>) -> Result<Rules> {
        let path = path.as_ref();
        let bytes = xirang_runtime::io::read_file(path, "advice rules", MAX_RULES_BYTES)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| ProfileError::Rules { path: path.into(), message: format!("not UTF-8: {e}") })?;
        Rules::parse(&text, path)
    }

    /// Parses and checks rules (ids unique, thresholds sane, templates use
    /// only the placeholders of their kind).
    pub fn parse(text: &str, path: &Path) -> Result<Rules> {
        let err = |message: String| ProfileError::Rules { path: PathBuf::from(path), message };
        let r: Rules = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let mut ids = BTreeSet::new();
        for rule in &r.rules {
            if rule.id.is_empty() || !ids.insert(rule.id.as_str()) {
                return Err(err(format!("rule id `{}` is empty or used twice", rule.id)));
            }
            if !(rule.min_share.is_finite() && (0.0..=1.0).contains(&rule.min_share)) {
                return Err(err(format!("rule {}: min_share must be within 0..=1", rule.id)));
            }
            if !(rule.native_ratio.is_finite() && (0.0..=1.0).contains(&rule.native_ratio)) {
                return Err(err(format!("rule {}: native_ratio must be within 0..=1", rule.id)));
            }
            if rule.min_length < 2 {
                return Err(err(format!("rule {}: min_length must be at least 2", rule.id)));
            }
            let names = placeholders(&rule.message).map_err(|m| err(format!("rule {}: {m}", rule.id)))?;
            for n in names {
                if !rule.kind.placeholders().contains(&n.as_str()) {
                    return Err(err(format!(
                        "rule {}: unknown placeholder {{{n}}} for kind {:?} (known: {})",
                        rule.id,
                        rule.kind,
                        rule.kind.placeholders().join(", ")
                    )));
                }
            }
        }
        Ok(r)
    }
}

fn placeholders(t: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let j = after.find('}').ok_or_else(|| format!("unclosed `{{` in message `{t}`"))?;
        out.push(after[..j].to_string());
        rest = &after[j + 1..];
    }
    Ok(out)
}

fn fill(t: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut s = String::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        s.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                let name = &after[..j];
                s.push_str(vars.get(name).map_or(name, String::as_str));
                rest = &after[j + 1..];
            }
            None => {
                rest = after;
            }
        }
    }
    s.push_str(rest);
    s
}

/// One piece of advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub rule: String,
    pub kind: Kind,
    /// The operator, or the chain (`a -> b -> c`).
    pub subject: String,
    pub message: String,
    /// Estimated saving in host nanoseconds (0 when not estimated).
    pub saving_ns: u64,
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Evaluates `rules` over `p`. Sorted by estimated saving (descending),
/// then rule id, then subject.
pub fn advise(p: &Profile, rules: &Rules) -> Vec<Advice> {
    let total = p.top_level_ns().max(1) as f64;
    let stats = p.by_operator();
    // callees of each operator's recipe calls
    let by_id: HashMap<u64, &Call> = p.calls.iter().map(|c| (c.id, c)).collect();
    let mut children: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for c in &p.calls {
        if let Some(parent) = c.parent.and_then(|id| by_id.get(&id)) {
            children.entry(parent.op.as_str()).or_default().insert(c.op.as_str());
        }
    }
    let mut out = Vec::new();
    for rule in &rules.rules {
        match rule.kind {
            Kind::Fallback | Kind::Recipe => {
                for s in &stats {
                    let (calls, time, tier) = match rule.kind {
                        Kind::Fallback => (s.fallback, s.fallback_ns, "fallback"),
                        _ => (s.recipe, s.recipe_ns, "recipe"),
                    };
                    let share = time as f64 / total;
                    if calls == 0 || calls < rule.min_calls || share < rule.min_share {
                        continue;
                    }
                    let native_estimate = if s.native > 0 {
                        (s.native_ns as f64 / s.native as f64 * calls as f64).min(time as f64)
                    } else {
                        time as f64 * rule.native_ratio
                    };
                    let saving = (time as f64 - native_estimate).max(0.0) as u64;
                    let kids =
                        children.get(s.op.as_str()).map(|k| k.iter().map(|c| cell(c)).collect::<Vec<_>>().join(", "));
                    let vars = BTreeMap::from([
                        ("op", cell(&s.op).into_owned()),
                        ("calls", calls.to_string()),
                        ("time", fmt_ns(time)),
                        ("share", pct(share)),
                        ("saving", fmt_ns(saving)),
                        ("bytes", fmt_bytes(s.h2d_bytes.saturating_add(s.d2h_bytes))),
                        ("tier", tier.to_string()),
                        ("children", kids.unwrap_or_else(|| "no other operator".into())),
                    ]);
                    out.push(Advice {
                        rule: rule.id.clone(),
                        kind: rule.kind,
                        subject: s.op.clone(),
                        message: fill(&rule.message, &vars),
                        saving_ns: saving,
                    });
                }
            }
            Kind::Contiguous => {
                for s in &stats {
                    if s.contiguous_copies == 0
                        || s.contiguous_copies < rule.min_copies
                        || s.contiguous_bytes < rule.min_bytes
                    {
                        continue;
                    }
                    let vars = BTreeMap::from([
                        ("op", cell(&s.op).into_owned()),
                        ("calls", s.calls.to_string()),
                        ("time", fmt_ns(s.host_ns)),
                        ("share", pct(s.host_ns as f64 / total)),
                        ("bytes", fmt_bytes(s.contiguous_bytes)),
                        ("copies", s.contiguous_copies.to_string()),
                        ("tier", s.main_tier().to_string()),
                        ("children", String::new()),
                    ]);
                    out.push(Advice {
                        rule: rule.id.clone(),
                        kind: rule.kind,
                        subject: s.op.clone(),
                        message: fill(&rule.message, &vars),
                        saving_ns: 0,
                    });
                }
            }
            Kind::ElementwiseChain => {
                let mut chains: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
                for run in elementwise_runs(p, rules, rule) {
                    let key = run.iter().map(|c| c.op.as_str()).collect::<Vec<_>>().join(" -> ");
                    let e = chains.entry(key).or_insert((run.len(), 0, 0));
                    e.1 += 1;
                    e.2 = run.iter().fold(e.2, |a, c| a.saturating_add(c.host_ns));
                }
                for (chain, (len, count, time)) in chains {
                    let share = time as f64 / total;
                    if count < rule.min_count || share < rule.min_share {
                        continue;
                    }
                    // one fused call instead of `len`
                    let saving = (time as f64 * (1.0 - 1.0 / len as f64)) as u64;
                    let shown = chain.split(" -> ").map(|o| cell(o)).collect::<Vec<_>>().join(" -> ");
                    let vars = BTreeMap::from([
                        ("chain", shown),
                        ("length", len.to_string()),
                        ("count", count.to_string()),
                        ("time", fmt_ns(time)),
                        ("share", pct(share)),
                        ("saving", fmt_ns(saving)),
                    ]);
                    out.push(Advice {
                        rule: rule.id.clone(),
                        kind: rule.kind,
                        subject: chain,
                        message: fill(&rule.message, &vars),
                        saving_ns: saving,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| {
        b.saving_ns.cmp(&a.saving_ns).then_with(|| a.rule.cmp(&b.rule)).then_with(|| a.subject.cmp(&b.subject))
    });
    out
}

/// Maximal runs of consecutive sibling calls (same thread, same caller)
/// that are small elementwise operators, at least `min_length` long.
fn elementwise_runs<'a>(p: &'a Profile, rules: &Rules, rule: &Rule) -> Vec<Vec<&'a Call>> {
    let mut siblings: BTreeMap<(u32, Option<u64>), Vec<&Call>> = BTreeMap::new();
    for c in &p.calls {
        siblings.entry((c.tid, c.parent)).or_default().push(c);
    }
    let mut runs = Vec::new();
    for (_, mut v) in siblings {
        v.sort_by_key(|c| (c.start_ns, c.id));
        let mut cur: Vec<&Call> = Vec::new();
        for c in v {
            if rules.elementwise.contains(base_name(&c.op)) && c.alloc_bytes <= rule.max_bytes {
                cur.push(c);
            } else {
                if cur.len() >= rule.min_length {
                    runs.push(std::mem::take(&mut cur));
                }
                cur.clear();
            }
        }
        if cur.len() >= rule.min_length {
            runs.push(cur);
        }
    }
    runs
}

/// Advice as text (`markdown`: a list for pull requests).
pub fn render(advice: &[Advice], markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "### Tuning advice\n");
    }
    if advice.is_empty() {
        let _ = writeln!(out, "no advice: no rule matched this profile");
        return out;
    }
    for a in advice {
        // operator names in messages went through `cell` when they were filled in
        if markdown {
            let subject = cell(&a.subject).replace('`', "'");
            let _ = writeln!(out, "- **{}** `{subject}`: {}", a.rule, a.message);
        } else {
            let _ = writeln!(out, "[{}] {}", a.rule, a.message);
        }
    }
    out
}
