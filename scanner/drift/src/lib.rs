//! The drift engine: compare two snapshots, classify every change by a rule of the catalogue, join
//! the changes with this adapter (hand-written kernels, a vendor backend yaml, generated files) and
//! render the result.
//!
//! Pipeline (each step a module):
//! - [`rules`]: the rule catalogue, data in `scanner/rules/pytorch.json` (plus the header rules of
//!   `xirang-headers` when a header source is wired in): stable id, severity, explanation, remedy.
//! - [`pytorch`]: two PyTorch snapshots -> [`Change`]s (operators, arguments, returns, dispatch,
//!   tags, derivatives), each with PyTorch's own backward-compatibility verdict.
//! - the adapter index (`xirang-index`): `syn` over `adapter-runtime/` -> the operators implemented by
//!   hand, with file and line.
//! - [`impact`]: changes x (kernels, backend yaml, generated files) -> [`Impact`]s.
//! - [`pipeline`]: header and C++ interface reports, the adapter indexes a comparison joins. The
//!   PyTorch report joined with the adapter's coverage and custom operators (their formulas call aten
//!   operators: the generator translates them) is built one layer up, by `xirang-compare`.
//! - [`allow`]: the allow list (rule id + fingerprint, reason, expiry).
//! - [`report_terminal`], [`report_markdown`], [`report_json`]: the three renderings.
//!
//! Every change source (PyTorch registry today, driver headers next) produces the same [`Change`]
//! type, so reports, allow lists and exit codes do not care where a change came from.

pub mod allow;
pub mod cxx;
pub mod cxx_kernels;
pub mod error;
pub mod header;
pub mod impact;
pub mod pipeline;
pub mod pytorch;
pub mod report_json;
pub mod report_markdown;
pub mod report_terminal;
pub mod rules;

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use error::Error;
pub use rules::{Rule, RuleSet};
pub(crate) use xirang_index::{adapter_index, naming};
pub(crate) use xirang_ir::{backend, derivatives, registry, schema, suggest, version};
pub(crate) use xirang_store::{cxx_snapshot, fsio, snapshot, width};

/// How much a change matters to this adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Hand-written code stops compiling or computes the wrong thing.
    Breaking,
    /// Someone should look and probably edit something.
    Action,
    /// Nothing to do.
    Info,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Breaking, Severity::Action, Severity::Info];
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Breaking => "breaking",
            Severity::Action => "action",
            Severity::Info => "info",
        }
    }
    pub fn parse(s: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|v| v.as_str() == s)
    }
    /// Exit-code bit of this severity (see [`exit_code`]).
    pub fn bit(self) -> u8 {
        match self {
            Severity::Breaking => 4,
            Severity::Action => 8,
            Severity::Info => 16,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the subject of a change of `rule` is, in words: `operator`, or `C++ interface` for `cxx.*`.
pub fn subject_noun(rule: &str) -> &'static str {
    if rule.starts_with("cxx.") { "C++ interface" } else { "operator" }
}

/// Which upstream interface a change comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Upstream {
    Pytorch,
    Header,
    /// PyTorch's C++ extension interface (`pytorch-cxx` snapshots).
    Cxx,
}

/// A file and (when known) a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    pub file: String,
    pub line: Option<u32>,
}

impl Location {
    pub fn new(file: impl Into<String>, line: Option<u32>) -> Self {
        Location { file: file.into(), line }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}", self.file),
            None => f.write_str(&self.file),
        }
    }
}

/// One upstream change, classified by a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Rule id (`arg.inserted`).
    pub rule: String,
    pub severity: Severity,
    pub upstream: Upstream,
    /// The operator as `name.overload` (`name` for the default overload), or the driver symbol.
    pub subject: String,
    /// What the change is about inside the subject (an argument name, a tag, a dispatch key), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether PyTorch's own backward-compatibility check accepts the change (null: not a schema change).
    pub pytorch_bc: Option<bool>,
    /// Canonical old text (schema fragment, tag list, formula, C declaration).
    pub old: Option<String>,
    pub new: Option<String>,
    /// Where the change is upstream (native_functions.yaml / derivatives.yaml / header line, new side
    /// unless removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_location: Option<Location>,
    /// One line in words.
    pub message: String,
    /// sha256 over rule id, subject, detail, old and new (see [`fingerprint`]); stable across wording.
    pub fingerprint: String,
}

/// sha256 of the rule id, subject, detail and old/new canonical details, hex, first 16 bytes.
/// Never includes message text, so rewording a rule does not invalidate allow lists.
pub fn fingerprint(rule: &str, subject: &str, detail: Option<&str>, old: Option<&str>, new: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in [Some(rule), Some(subject), detail, old, new] {
        match part {
            Some(p) => {
                h.update([1u8]);
                h.update(p.as_bytes());
            }
            None => h.update([0u8]),
        }
        h.update([0xffu8]);
    }
    let d = h.finalize();
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

impl Change {
    /// Builds a change with the rule's severity from the catalogue and a computed fingerprint.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rules: &RuleSet,
        rule: &str,
        upstream: Upstream,
        subject: impl Into<String>,
        detail: Option<String>,
        pytorch_bc: Option<bool>,
        old: Option<String>,
        new: Option<String>,
        message: String,
    ) -> Change {
        let subject = subject.into();
        let severity = rules.severity(rule);
        let fp = fingerprint(rule, &subject, detail.as_deref(), old.as_deref(), new.as_deref());
        Change {
            rule: rule.to_string(),
            severity,
            upstream,
            subject,
            detail,
            pytorch_bc,
            old,
            new,
            upstream_location: None,
            message,
            fingerprint: fp,
        }
    }

    pub fn at(mut self, loc: Option<Location>) -> Change {
        self.upstream_location = loc;
        self
    }

    /// Deterministic order: severity, subject, rule, detail, fingerprint.
    pub fn sort_key(&self) -> (Severity, &str, &str, Option<&str>, &str) {
        (self.severity, &self.subject, &self.rule, self.detail.as_deref(), &self.fingerprint)
    }
}

/// Where an impact lands in this adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImpactSource {
    /// A hand-written kernel in adapter-runtime/ (someone edits it).
    Kernel,
    /// A hand-written backward (a `BackwardHooks` method; someone edits it).
    Hook,
    /// A host (CPU-fallback) implementation, registered by name and arity (someone edits it).
    Host,
    /// An operator the adapter must cover and does not (someone adds a kernel, a recipe or a host
    /// implementation).
    Cover,
    /// An entry of the vendor backend yaml passed with `--backend` (someone edits it).
    Backend,
    /// A use of a changed driver symbol in adapter-runtime/ (a binding, a `dlsym` name, a call).
    Driver,
    /// A generated file (the generator rewrites it: nothing to do by hand).
    Generated,
    /// An entry of the adapter's custom-operator file (`[operators] custom`): a formula calling a
    /// changed operator, or a custom operator whose name a new upstream operator takes.
    Custom,
}

impl ImpactSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ImpactSource::Kernel => "kernel",
            ImpactSource::Hook => "hook",
            ImpactSource::Host => "host",
            ImpactSource::Cover => "cover",
            ImpactSource::Backend => "backend",
            ImpactSource::Driver => "driver",
            ImpactSource::Generated => "generated",
            ImpactSource::Custom => "custom",
        }
    }
}

/// One change as it lands on one place of this adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Impact {
    pub subject: String,
    pub rule: String,
    pub severity: Severity,
    pub source: ImpactSource,
    pub location: Location,
    /// The Rust item (kernel fn / trait method), the backend list name, or the generated item.
    pub item: String,
    /// The change's fingerprint (links the impact to its change).
    pub fingerprint: String,
    /// What to do at that place, in words (empty for generated items).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub action: String,
}

/// What the adapter does for one operator in one version, as far as the drift engine needs it
/// (the layer that computes coverage fills it in; see `xirang_compare::states`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpState {
    /// Native, recipe or fallback (a call does not return `Unsupported`).
    pub reachable: bool,
    /// `native at file:line`, `recipe recipes::x`, `fallback at file:line`, or why it is `none`.
    pub how: String,
    /// In the Core ATen set.
    pub core: bool,
    /// PyTorch has no CPU kernel and no composite kernel for it, only kernels for other devices
    /// (`cudnn_batch_norm.out`: CUDA): a library entry point of another backend, not asked of this one.
    pub foreign: bool,
}

/// The adapter's state in both versions of a comparison: operators selected by `xirang.toml` with
/// their tier, and where kernels are added.
#[derive(Debug, Clone, Default)]
pub struct AdapterStates {
    pub old: std::collections::BTreeMap<String, OpState>,
    pub new: std::collections::BTreeMap<String, OpState>,
    /// The file that holds most of the adapter's kernels (where a native kernel is added).
    pub kernel_file: Option<String>,
}

/// An allow-list entry that matched nothing or has expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowNote {
    pub rule: String,
    pub fingerprint: String,
    pub reason: String,
    pub expires: String,
    /// `expired` (no longer suppresses) or `unused` (matched no change).
    pub status: String,
}

/// Everything a report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `pytorch v2.1.2 -> v2.3.1`, or the driver pair.
    pub title: String,
    pub old: String,
    pub new: String,
    /// Changes not suppressed by the allow list, sorted.
    pub changes: Vec<Change>,
    /// Impacts of those changes, sorted (kernel and backend first, ranked by severity).
    pub impact: Vec<Impact>,
    /// Changes suppressed by a live allow-list entry.
    pub suppressed: Vec<Change>,
    /// Expired or unused allow-list entries.
    pub allow_notes: Vec<AllowNote>,
    /// How many hand-written kernels were indexed, and the backend files joined.
    pub kernels_indexed: usize,
    pub backend_files: Vec<String>,
    /// What was indexed of the adapter, in words, when it is not Rust kernels (the C++ interface
    /// report: subclasses, overrides, registrations); replaces the kernel count in renderings.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub adapter_summary: String,
}

impl Report {
    /// Counts of changes per severity.
    pub fn counts(&self) -> [(Severity, usize); 3] {
        Severity::ALL.map(|s| (s, self.changes.iter().filter(|c| c.severity == s).count()))
    }
    /// Counts of changes per rule id, sorted by severity then id.
    pub fn rule_counts(&self) -> Vec<(Severity, String, usize)> {
        let mut m: std::collections::BTreeMap<(Severity, &str), usize> = std::collections::BTreeMap::new();
        for c in &self.changes {
            *m.entry((c.severity, c.rule.as_str())).or_default() += 1;
        }
        m.into_iter().map(|((s, r), n)| (s, r.to_string(), n)).collect()
    }
    /// Impacts someone edits by hand (kernel, backend, driver, custom).
    pub fn to_edit(&self) -> impl Iterator<Item = &Impact> {
        self.impact.iter().filter(|i| i.source != ImpactSource::Generated)
    }
    pub fn generated(&self) -> impl Iterator<Item = &Impact> {
        self.impact.iter().filter(|i| i.source == ImpactSource::Generated)
    }
}

/// Exit codes of `xirang-scan diff` (documented in `--help` and the README):
/// `0` nothing at or above the `--fail-on` threshold (or no threshold); `1` error; `2` usage;
/// otherwise `--fail-on` was crossed and the code is a bit set: 4 = breaking changes present,
/// 8 = action changes present (counted when the threshold is action or info), 16 = info changes
/// present (counted when the threshold is info), 32 = an allow-list entry has expired.
pub fn exit_code(report: &Report, fail_on: Option<Severity>) -> u8 {
    let Some(threshold) = fail_on else {
        return 0;
    };
    let mut code = 0u8;
    for (sev, n) in report.counts() {
        if n > 0 && sev <= threshold {
            code |= sev.bit();
        }
    }
    if report.allow_notes.iter().any(|n| n.status == "expired") {
        code |= 32;
    }
    code
}

/// Sorts changes and impacts into the report's deterministic order.
pub fn sort_report(r: &mut Report) {
    r.changes.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    r.suppressed.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    r.impact.sort_by(|a, b| {
        (a.source == ImpactSource::Generated, a.severity, &a.location, &a.subject, &a.rule, &a.fingerprint).cmp(&(
            b.source == ImpactSource::Generated,
            b.severity,
            &b.location,
            &b.subject,
            &b.rule,
            &b.fingerprint,
        ))
    });
    r.allow_notes.sort_by(|a, b| (&a.status, &a.rule, &a.fingerprint).cmp(&(&b.status, &b.rule, &b.fingerprint)));
}

/// What a report is built from.
pub struct ReportInput<'a> {
    pub title: String,
    pub old: String,
    pub new: String,
    pub changes: Vec<Change>,
    pub kernels: &'a adapter_index::AdapterIndex,
    pub backends: &'a [impact::Backend<'a>],
    pub generated: &'a impact::GeneratedIndex,
    pub allow: Option<&'a allow::AllowList>,
    /// `YYYY-MM-DD`, for allow-list expiry.
    pub today: &'a str,
    /// The adapter's coverage in both versions, when known (it adds `coverage.unreachable` changes
    /// and decides which dispatch and Core ATen changes need a kernel).
    pub states: Option<&'a AdapterStates>,
    pub rules: &'a RuleSet,
    /// Impacts on the custom operators ([`custom::impacts`]); kept for the changes the allow list
    /// leaves.
    pub custom: Vec<Impact>,
}

/// Operators reachable in the old version and not in the new one (`coverage.unreachable`).
pub fn coverage_changes(states: &AdapterStates, rules: &RuleSet) -> Vec<Change> {
    let mut out = Vec::new();
    for (op, new) in &states.new {
        let Some(old) = states.old.get(op) else { continue };
        if old.reachable && !new.reachable {
            let core = if new.core { " (Core ATen)" } else { "" };
            out.push(Change::new(
                rules,
                "coverage.unreachable",
                Upstream::Pytorch,
                op.clone(),
                None,
                None,
                Some(old.how.clone()),
                Some(new.how.clone()),
                format!("`{op}`{core} was reachable ({}) and is not in the new version: {}", old.how, new.how),
            ));
        }
    }
    out
}

/// Applies the allow list, joins the remaining changes with the adapter, and sorts everything.
pub fn build_report(input: ReportInput<'_>) -> Report {
    let mut all = input.changes;
    if let Some(states) = input.states {
        all.extend(coverage_changes(states, input.rules));
    }
    let (changes, suppressed, allow_notes) = match input.allow {
        Some(a) => a.apply(all, input.today),
        None => (all, Vec::new(), Vec::new()),
    };
    let mut impact = impact::impacts(&changes, input.kernels, input.backends, input.generated, input.states);
    let live: std::collections::HashSet<&str> = changes.iter().map(|c| c.fingerprint.as_str()).collect();
    impact.extend(input.custom.into_iter().filter(|i| live.contains(i.fingerprint.as_str())));
    let mut r = Report {
        title: input.title,
        old: input.old,
        new: input.new,
        changes,
        impact,
        suppressed,
        allow_notes,
        kernels_indexed: input.kernels.kernels.len(),
        backend_files: input.backends.iter().map(|b| b.path.clone()).collect(),
        adapter_summary: String::new(),
    };
    sort_report(&mut r);
    r
}

/// A small report for the renderers' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A report with a long message, a change to edit by hand and an allow-list note.
    pub(crate) fn sample() -> Report {
        let rules = RuleSet::builtin();
        let long = Change::new(
            &rules,
            "arg.inserted",
            Upstream::Pytorch,
            "_cslt_sparse_mm",
            Some("alpha".into()),
            Some(false),
            None,
            Some("Tensor? alpha=None".into()),
            format!("`_cslt_sparse_mm`: argument `Tensor? alpha=None` inserted before {} END", "existing ".repeat(20)),
        );
        let short = Change::new(
            &rules,
            "tag.core_added",
            Upstream::Pytorch,
            "atan2",
            Some("core".into()),
            None,
            None,
            Some("core".into()),
            "`atan2` gained tag `core`".into(),
        );
        let impact = Impact {
            subject: "_cslt_sparse_mm".into(),
            rule: "arg.inserted".into(),
            severity: Severity::Breaking,
            source: ImpactSource::Kernel,
            location: Location::new(
                "adapter-runtime/src/kernels/a_rather_long_path/sparse_matrix_products.rs",
                Some(42),
            ),
            item: "impl AtenOps for NpuOps::_cslt_sparse_mm".into(),
            fingerprint: long.fingerprint.clone(),
            action: String::new(),
        };
        let note = AllowNote {
            rule: "op.removed".into(),
            fingerprint: "00112233445566778899aabbccddeeff".into(),
            reason: "a reason that goes on and on ".repeat(6),
            expires: "2026-01-01".into(),
            status: "expired".into(),
        };
        Report {
            title: "pytorch v2.1.2 -> v2.3.1".into(),
            old: "v2.1.2".into(),
            new: "v2.3.1".into(),
            changes: vec![long, short],
            impact: vec![impact],
            suppressed: Vec::new(),
            allow_notes: vec![note],
            kernels_indexed: 3,
            backend_files: Vec::new(),
            adapter_summary: String::new(),
        }
    }
}
