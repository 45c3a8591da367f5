//! The comparison builder: a PyTorch drift report (two snapshots, or a pair read with
//! [`Store::load_pytorch_pair`](crate::snapshot::Store::load_pytorch_pair)) joined with the adapter's
//! kernels, backend yaml, generated files, coverage and custom operators. The CLI's `diff`, the bot,
//! `diffs` ([`crate::committed`]) and the benches build every PyTorch report here.

use crate::custom::CustomUses;
use crate::diff::allow::AllowList;
use crate::diff::impact::{Backend, GeneratedIndex};
use crate::diff::{AdapterStates, Change, Impact, Report, ReportInput, RuleSet, build_report, pytorch};
use crate::snapshot::{PytorchPair, PytorchSnapshot};
use xirang_index::adapter_index::AdapterIndex;

/// Diffs a pair read with [`Store::load_pytorch_pair`] and builds the report: the same report as
/// [`pytorch_report`] over the two full snapshots.
pub fn pytorch_pair_report(pair: &PytorchPair, d: PairDiff<'_>, rules: &RuleSet) -> Report {
    let (old, new) = (pair.old.meta.version.clone(), pair.new.meta.version.clone());
    assemble(old, new, pytorch::diff_pair(pair, rules), d, rules)
}

/// The report of `changes` between versions `old` and `new`, joined with the adapter as `d` says: the
/// one body of [`pytorch_report`] and [`pytorch_pair_report`].
fn assemble(old: String, new: String, changes: Vec<Change>, d: PairDiff<'_>, rules: &RuleSet) -> Report {
    let (changes, custom) = with_custom(changes, d.custom, rules);
    build_report(ReportInput {
        title: d.title,
        old,
        new,
        changes,
        kernels: d.kernels,
        backends: d.backends,
        generated: d.generated,
        allow: d.allow,
        today: d.today,
        states: d.states,
        rules,
        custom,
    })
}

/// Joins the changes with the custom operators (when given): their collision changes are added,
/// the impacts returned for [`ReportInput::custom`].
fn with_custom(mut changes: Vec<Change>, custom: Option<&CustomUses>, rules: &RuleSet) -> (Vec<Change>, Vec<Impact>) {
    let Some(custom) = custom else { return (changes, Vec::new()) };
    let (impacts, added) = crate::custom::impacts(custom, &changes, rules);
    changes.extend(added);
    (changes, impacts)
}

/// Options of a comparison of a [`PytorchPair`] (as [`PytorchDiff`], the snapshots in the pair).
pub struct PairDiff<'a> {
    pub title: String,
    pub kernels: &'a AdapterIndex,
    pub backends: &'a [Backend<'a>],
    pub generated: &'a GeneratedIndex,
    pub allow: Option<&'a AllowList>,
    pub today: &'a str,
    /// The adapter's coverage in both versions ([`crate::adapter_states`]), when known.
    pub states: Option<&'a AdapterStates>,
    /// The adapter's custom operators, resolved against the old version
    /// ([`CustomOperators::resolve`](crate::custom::CustomOperators::resolve)).
    pub custom: Option<&'a CustomUses>,
}

/// Options of one PyTorch comparison.
pub struct PytorchDiff<'a> {
    pub old: &'a PytorchSnapshot,
    pub new: &'a PytorchSnapshot,
    pub title: String,
    pub kernels: &'a AdapterIndex,
    pub backends: &'a [Backend<'a>],
    pub generated: &'a GeneratedIndex,
    pub allow: Option<&'a AllowList>,
    pub today: &'a str,
    pub states: Option<&'a AdapterStates>,
    /// The adapter's custom operators, resolved against `old` ([`CustomOperators::resolve`](crate::custom::CustomOperators::resolve)).
    pub custom: Option<&'a CustomUses>,
}

/// Diffs two PyTorch snapshots and builds the report.
pub fn pytorch_report(d: PytorchDiff<'_>, rules: &RuleSet) -> Report {
    let PytorchDiff { old, new, title, kernels, backends, generated, allow, today, states, custom } = d;
    let changes = pytorch::diff(old, new, rules);
    let d = PairDiff { title, kernels, backends, generated, allow, today, states, custom };
    assemble(old.meta.version.clone(), new.meta.version.clone(), changes, d, rules)
}
