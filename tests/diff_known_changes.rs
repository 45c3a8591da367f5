//! Known real upstream changes appear with the right rule (pinned), and the report formats, the allow
//! list and the exit codes behave as documented.

use xirang_scan::compare::{PytorchDiff, pytorch_report};
use xirang_scan::diff::adapter_index::{AdapterIndex, index_source, method_map};
use xirang_scan::diff::allow::AllowList;
use xirang_scan::diff::impact::{Backend, GeneratedIndex};
use xirang_scan::diff::{
    Change, ImpactSource, Report, RuleSet, Severity, exit_code, pytorch, report_json, report_markdown, report_terminal,
};
use xirang_scan::snapshot::{PytorchSnapshot, Store};

fn store() -> Store {
    Store::new(xirang_tests::repo_root().join("schemas"))
}

fn load(spec: &str) -> PytorchSnapshot {
    let st = store();
    let v = st.resolve("pytorch", spec).expect("version in store");
    st.load_pytorch(&v).expect("snapshot loads")
}

fn changes(a: &str, b: &str) -> Vec<Change> {
    pytorch::diff(&load(a), &load(b), &RuleSet::builtin())
}

fn has(cs: &[Change], rule: &str, subject: &str, detail: Option<&str>) -> bool {
    cs.iter().any(|c| c.rule == rule && c.subject == subject && (detail.is_none() || c.detail.as_deref() == detail))
}

#[test]
fn v2_1_to_v2_3() {
    let cs = changes("v2.1", "v2.3");
    // _cslt_sparse_mm gained `alpha` and `out_dtype` in the middle (before transpose_result) and `alg_id` at the end
    assert!(has(&cs, "arg.inserted", "_cslt_sparse_mm", Some("alpha")));
    assert!(has(&cs, "arg.inserted", "_cslt_sparse_mm", Some("out_dtype")));
    assert!(has(&cs, "arg.added_default_end", "_cslt_sparse_mm", Some("alg_id")));
    let ins = cs.iter().find(|c| c.rule == "arg.inserted" && c.subject == "_cslt_sparse_mm").unwrap();
    assert_eq!(ins.severity, Severity::Breaking);
    assert_eq!(ins.pytorch_bc, Some(false));
    // _efficient_attention_forward gained outputs (4 -> 6)
    let rc = cs.iter().find(|c| c.rule == "ret.count_changed" && c.subject == "_efficient_attention_forward").unwrap();
    assert_eq!(rc.pytorch_bc, Some(false));
    // many int -> SymInt, invisible to PyTorch's check
    let symint: Vec<&Change> = cs.iter().filter(|c| c.rule == "arg.int_to_symint").collect();
    assert!(symint.len() > 100, "{} int -> SymInt changes", symint.len());
    assert!(symint.iter().all(|c| c.pytorch_bc == Some(true) && c.severity == Severity::Action));
    assert!(has(&cs, "arg.int_to_symint", "_conv_depthwise2d", Some("kernel_size")));
    // a widening and a core-set addition
    assert!(has(&cs, "arg.widened", "_flash_attention_forward", Some("cum_seq_q")));
    assert!(has(&cs, "tag.core_added", "atan2", Some("core")));
}

#[test]
fn v2_4_to_v2_5_scaled_mm() {
    // The issue places this at 2.3 -> 2.4; the snapshots show it landed in 2.5.0 (2.4.x still has the
    // keyword-only optional scales and two returns).
    assert!(!changes("v2.3", "v2.4").iter().any(|c| c.subject == "_scaled_mm"));
    let cs = changes("v2.4", "v2.5");
    assert!(has(&cs, "arg.reordered", "_scaled_mm", None));
    assert!(has(&cs, "arg.retyped", "_scaled_mm", Some("scale_a")));
    assert!(has(&cs, "arg.kwarg_only_changed", "_scaled_mm", Some("scale_a")));
    assert!(has(&cs, "ret.count_changed", "_scaled_mm", None));
    assert!(has(&cs, "ret.count_changed", "_scaled_mm.out", None) || has(&cs, "out.changed", "_scaled_mm.out", None));
}

#[test]
fn v2_12_to_v2_13_dimname_overloads_removed() {
    let cs = changes("v2.12", "v2.13");
    let removed: Vec<&Change> = cs.iter().filter(|c| c.rule == "op.removed").collect();
    assert!(removed.len() >= 100, "{} removals", removed.len());
    for s in ["all.dimname", "cat.names", "index_fill.Dimname_Scalar", "log_softmax.Dimname", "align_to"] {
        assert!(has(&cs, "op.removed", s, None), "{s}");
    }
    // every removal takes a Dimname (or is a named-tensor op)
    for c in &removed {
        let old = c.old.as_deref().unwrap_or("");
        assert!(old.contains("Dimname") || c.subject.starts_with("align") || c.subject.contains("name"), "{old}");
        assert_eq!(c.severity, Severity::Breaking);
        assert_eq!(c.pytorch_bc, Some(false));
    }
    assert!(!cs.iter().any(|c| c.rule == "op.overload_renamed"));
}

#[test]
fn diff_is_deterministic_and_fingerprints_ignore_wording() {
    let a = changes("v2.1", "v2.3");
    let b = changes("v2.1", "v2.3");
    assert_eq!(a, b);
    let c = &a[0];
    let fp =
        xirang_scan::diff::fingerprint(&c.rule, &c.subject, c.detail.as_deref(), c.old.as_deref(), c.new.as_deref());
    assert_eq!(fp, c.fingerprint);
    // no two changes share a fingerprint
    let mut fps: Vec<&str> = a.iter().map(|c| c.fingerprint.as_str()).collect();
    fps.sort();
    fps.dedup();
    assert_eq!(fps.len(), a.len());
}

fn report_with(kernels: &AdapterIndex, backends: &[Backend<'_>], allow: Option<&AllowList>) -> Report {
    let (old, new) = (load("v2.1"), load("v2.3"));
    pytorch_report(
        PytorchDiff {
            old: &old,
            new: &new,
            title: "pytorch v2.1.2 -> v2.3.1".into(),
            kernels,
            backends,
            generated: &GeneratedIndex::default(),
            allow,
            today: "2026-06-01",
            states: None,
            custom: None,
        },
        &RuleSet::builtin(),
    )
}

#[test]
fn impact_on_kernels_and_backend_with_locations() {
    let (old, new) = (load("v2.1"), load("v2.3"));
    let map = method_map(old.registry.functions.iter().chain(&new.registry.functions).map(|f| &f.func.name));
    let src = "struct Npu;\nimpl AtenOps for Npu {\n    fn _cslt_sparse_mm(&self) {}\n}\n/// xirang-kernel: _efficient_attention_forward\npub fn eff() {}\n";
    let kernels = AdapterIndex {
        kernels: index_source("adapter-runtime/src/npu.rs", src, &map).unwrap(),
        fallbacks: Vec::new(),
        warnings: Vec::new(),
    };
    let yaml = xirang_scan::backend::load_backend_yaml(&xirang_scan::SourceFile::new(
        "npu.yaml",
        "backend: NPU\nsupported:\n  - _conv_depthwise2d\n  - abs\n",
    ))
    .unwrap();
    let backends = [Backend { path: "npu.yaml".into(), yaml: &yaml }];
    let r = report_with(&kernels, &backends, None);
    let k: Vec<_> = r.impact.iter().filter(|i| i.source == ImpactSource::Kernel).collect();
    assert!(k.iter().any(|i| i.subject == "_cslt_sparse_mm"
        && i.rule == "arg.inserted"
        && i.location.file == "adapter-runtime/src/npu.rs"
        && i.location.line == Some(3)));
    assert!(k.iter().any(|i| i.subject == "_efficient_attention_forward" && i.location.line == Some(6)));
    let b: Vec<_> = r.impact.iter().filter(|i| i.source == ImpactSource::Backend).collect();
    assert!(b.iter().any(|i| i.subject == "_conv_depthwise2d" && i.location.line == Some(3)));
    assert!(!b.iter().any(|i| i.subject == "abs"));
    // the checklist is ranked: hand edits first, by severity
    let first_gen = r.impact.iter().position(|i| i.source == ImpactSource::Generated).unwrap();
    assert!(r.impact[..first_gen].windows(2).all(|w| w[0].severity <= w[1].severity));
    assert!(r.impact[first_gen..].iter().all(|i| i.source == ImpactSource::Generated));
    // markdown has the summary table and collapsible details; json the documented fields
    let md = report_markdown::render(&r, &RuleSet::builtin());
    assert!(md.contains("| changes | ") && md.contains("<details>") && md.contains("adapter-runtime/src/npu.rs:3"));
    // the checklist: one GitHub task-list item per place to edit, with file:line, item, rule, remedy
    let tasks: Vec<&str> = md.lines().filter(|l| l.starts_with("- [ ] ")).collect();
    assert_eq!(tasks.len(), r.to_edit().count());
    let cslt = r.impact.iter().find(|i| i.subject == "_cslt_sparse_mm" && i.rule == "arg.inserted").unwrap();
    // what to do at that place (the impact's action; the rule's remedy only when it has none)
    assert!(!cslt.action.is_empty());
    let remedy = cslt.action.clone();
    assert!(
        tasks.contains(
            &format!(
                "- [ ] **breaking** `adapter-runtime/src/npu.rs:3` `{}` (operator `_cslt_sparse_mm`, rule `arg.inserted`): \
                 {remedy}",
                cslt.item
            )
            .as_str()
        ),
        "{tasks:#?}"
    );
    assert!(!md.contains("| [ ] |"), "no checklist rows in a table");
    // every change's whole fingerprint is in the markdown (collapsible details)
    assert!(r.changes.iter().all(|c| md.contains(&format!("| `{}` |", c.fingerprint))));
    // the terminal report fits 100 columns, with shortened fingerprints; --wide has them whole
    let rules = RuleSet::builtin();
    let text =
        report_terminal::render(&r, &rules, report_terminal::Options { color: false, limit: 0, width: Some(100) });
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(text.lines().any(|l| l.ends_with("...")));
    assert!(r.changes.iter().all(|c| text.contains(&format!("    {}  ", &c.fingerprint[..12]))));
    assert!(text.contains(&format!("fingerprint {}", &cslt.fingerprint[..12])), "{text}");
    assert!(!text.contains(&cslt.fingerprint));
    let wide = report_terminal::render(&r, &rules, report_terminal::Options { color: false, limit: 0, width: None });
    assert!(r.changes.iter().all(|c| wide.contains(&format!("    {}  {}\n", c.fingerprint, c.message))), "{wide}");
    let j: serde_json::Value = serde_json::from_str(&report_json::render(&r).unwrap()).unwrap();
    assert_eq!(j["format"], "xirang-diff-report");
    let c0 = &j["changes"][0];
    for key in ["rule", "severity", "subject", "pytorch_bc", "old", "new", "fingerprint"] {
        assert!(c0.get(key).is_some(), "change has {key}");
    }
    let i0 = &j["impact"][0];
    for key in ["subject", "rule", "severity", "source", "location"] {
        assert!(i0.get(key).is_some(), "impact has {key}");
    }
    assert!(i0["location"].get("file").is_some() && i0["location"].get("line").is_some());
}

#[test]
fn allow_list_and_exit_codes() {
    let kernels = AdapterIndex::default();
    let r = report_with(&kernels, &[], None);
    assert_eq!(exit_code(&r, None), 0);
    assert_eq!(exit_code(&r, Some(Severity::Breaking)), 4);
    assert_eq!(exit_code(&r, Some(Severity::Action)), 4 | 8);
    assert_eq!(exit_code(&r, Some(Severity::Info)), 4 | 8 | 16);
    let breaking: Vec<&Change> = r.changes.iter().filter(|c| c.severity == Severity::Breaking).collect();
    let mut entries = Vec::new();
    for c in &breaking {
        entries.push(serde_json::json!({"rule": c.rule, "fingerprint": c.fingerprint, "subject": c.subject,
            "reason": "accepted for the test", "expires": "2026-12-31"}));
    }
    // one expired entry (stops suppressing, reported) and one that matches nothing (reported unused)
    let c0 = breaking[0];
    entries[0]["expires"] = serde_json::json!("2026-01-01");
    entries.push(
        serde_json::json!({"rule": "op.removed", "fingerprint": "00", "reason": "stale", "expires": "2027-01-01"}),
    );
    let text = serde_json::json!({ "allow": entries }).to_string();
    let allow = AllowList::parse("allow.json", &text).unwrap();
    let r2 = report_with(&kernels, &[], Some(&allow));
    assert_eq!(r2.suppressed.len(), breaking.len() - 1);
    let left: Vec<&Change> = r2.changes.iter().filter(|c| c.severity == Severity::Breaking).collect();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].fingerprint, c0.fingerprint);
    let statuses: Vec<&str> = r2.allow_notes.iter().map(|n| n.status.as_str()).collect();
    assert_eq!(statuses, vec!["expired", "unused"]);
    assert_eq!(exit_code(&r2, Some(Severity::Breaking)), 4 | 32);
}

#[test]
fn committed_reports_are_current() {
    let stale = xirang_scan::diff::committed::check_reports(&store(), &RuleSet::builtin()).unwrap();
    assert!(stale.is_empty(), "stale reports (run `xirang-scan diffs`): {stale:?}");
}

#[test]
fn header_changes_share_the_engine() {
    use xirang_scan::diff::header::{self, SymbolUses};
    let st = store();
    let vs = st.versions("cuda");
    assert!(vs.len() >= 2, "cuda header snapshots in the store");
    let (a, b) = (st.load_headers("cuda", &vs[0]).unwrap(), st.load_headers("cuda", &vs[1]).unwrap());
    let rules = RuleSet::builtin();
    let cs = header::diff(&a, &b, &rules);
    assert!(!cs.is_empty());
    for c in &cs {
        assert_eq!(c.upstream, xirang_scan::diff::Upstream::Header);
        assert_eq!(c.pytorch_bc, None);
        assert!(rules.get(&c.rule).is_some(), "{} is in the catalogue", c.rule);
        assert!(c.upstream_location.is_some());
    }
    assert!(rules.explain_text("header.function.removed").is_ok());
    // uses of changed symbols in an adapter tree become driver impacts with file and line
    let dir = std::env::temp_dir().join(format!("xirang-diff-uses-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let subject = cs
        .iter()
        .find(|c| c.severity <= Severity::Action && !c.subject.contains(['.', ':']))
        .map(|c| c.subject.clone());
    if let Some(sym) = &subject {
        std::fs::write(dir.join("lib.rs"), format!("fn f() {{\n    let _ = \"{sym}\";\n}}\n")).unwrap();
    }
    let uses = SymbolUses::index_dir(&dir, &dir).unwrap();
    let r = xirang_scan::diff::pipeline::header_report("cuda", &a, &b, &uses, None, "2026-01-01", &rules);
    if let Some(sym) = subject {
        assert!(r.impact.iter().any(|i| i.source == ImpactSource::Driver
            && i.subject == sym
            && i.location.file == "lib.rs"
            && i.location.line == Some(2)));
    }
    assert!(exit_code(&r, Some(Severity::Info)) != 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A custom-operator file: a formula calling `channel_shuffle` (int -> SymInt in 2.1 -> 2.3), one
/// calling only operators that do not change, a custom operator whose method `_chunk_cat` a new
/// operator of 2.2 takes, and one in `aten::` whose name a new operator takes.
const CUSTOM_OPS: &str = "custom:
  - func: \"xirang::shuffled(Tensor self) -> Tensor\"
    reference: \"channel_shuffle(self, 2)\"
  - func: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"
    reference: \"gelu(self) * scale\"
  - func: \"xirang::_chunk_cat(Tensor self) -> Tensor\"
  - func: \"_fused_sgd.custom(Tensor self) -> Tensor\"
  - func: \"_assert_scalar(Tensor self) -> Tensor\"
custom_derivatives:
  - name: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"
    self: \"gelu_backward(grad * scale, self)\"
";

#[test]
fn custom_operators_in_the_report() {
    use xirang_scan::diff::custom::{COLLISION_RULE, CustomOperators};
    let set = xirang_scan::generate::custom::parse_file(&xirang_scan::SourceFile::new("custom_ops.yaml", CUSTOM_OPS))
        .expect("custom file");
    let (old, new) = (load("v2.1"), load("v2.3"));
    let uses = CustomOperators::new(set, None).resolve(&old.registry.functions);
    let rules = RuleSet::builtin();
    let report = |allow: Option<&AllowList>| {
        pytorch_report(
            PytorchDiff {
                old: &old,
                new: &new,
                title: "pytorch v2.1.2 -> v2.3.1".into(),
                kernels: &AdapterIndex::default(),
                backends: &[],
                generated: &GeneratedIndex::default(),
                allow,
                today: "2026-06-01",
                custom: Some(&uses),
                states: None,
            },
            &rules,
        )
    };
    let r = report(None);
    let custom: Vec<(&str, &str, &str, Option<u32>, &str)> = r
        .impact
        .iter()
        .filter(|i| i.source == ImpactSource::Custom)
        .map(|i| (i.subject.as_str(), i.rule.as_str(), i.location.file.as_str(), i.location.line, i.item.as_str()))
        .collect();
    // the reference's channel_shuffle lost nothing but its int became SymInt: one entry per change,
    // at the formula's line; scaled_gelu's operators (gelu, gelu_backward, mul.Scalar) changed no schema
    let shuffle: Vec<_> = custom.iter().filter(|x| x.0 == "channel_shuffle").collect();
    assert!(!shuffle.is_empty(), "{custom:?}");
    assert!(shuffle.iter().all(|x| x.1 == "arg.int_to_symint"
        && x.2 == "custom_ops.yaml"
        && x.3 == Some(3)
        && x.4 == "reference of xirang::shuffled"));
    assert!(!custom.iter().any(|x| x.4.contains("scaled_gelu")), "{custom:?}");
    // the new _chunk_cat takes xirang::_chunk_cat's method; _assert_scalar its name (no namespace);
    // `_fused_sgd.custom` is another overload of the new `_fused_sgd`: no collision
    for (subject, custom_op, line) in
        [("_chunk_cat", "xirang::_chunk_cat", 6), ("_assert_scalar", "aten::_assert_scalar", 8)]
    {
        let c = r
            .changes
            .iter()
            .find(|c| c.rule == COLLISION_RULE && c.subject == subject)
            .unwrap_or_else(|| panic!("no collision for {subject}: {custom:?}"));
        assert_eq!((c.severity, c.detail.as_deref()), (Severity::Breaking, Some(custom_op)));
        assert!(c.message.contains(&format!("custom_ops.yaml:{line}")), "{}", c.message);
        assert!(custom.contains(&(
            subject,
            COLLISION_RULE,
            "custom_ops.yaml",
            Some(line),
            &*format!("custom operator {custom_op}")
        )));
    }
    assert_eq!(r.changes.iter().filter(|c| c.rule == COLLISION_RULE).count(), 2);
    // they render as places to edit, with what to do there
    let md = report_markdown::render(&r, &rules);
    assert!(
        md.contains(
            "- [ ] **breaking** `custom_ops.yaml:6` `custom operator xirang::_chunk_cat` (operator `_chunk_cat`, rule `custom.name_collision`): rename `xirang::_chunk_cat`"
        ),
        "{md}"
    );
    let j: serde_json::Value = serde_json::from_str(&report_json::render(&r).unwrap()).unwrap();
    assert!(j["impact"].as_array().unwrap().iter().any(|i| i["source"] == "custom"));
    // an allow-list entry suppresses a collision and its impact together
    let c = r.changes.iter().find(|c| c.rule == COLLISION_RULE && c.subject == "_chunk_cat").unwrap();
    let text = serde_json::json!({ "allow": [{"rule": COLLISION_RULE, "fingerprint": c.fingerprint,
        "reason": "renamed next release", "expires": "2027-01-01"}] })
    .to_string();
    let allow = AllowList::parse("allow.json", &text).unwrap();
    let r2 = report(Some(&allow));
    assert_eq!(r2.suppressed.len(), 1);
    assert!(!r2.impact.iter().any(|i| i.fingerprint == c.fingerprint));
    assert_eq!(r2.impact.iter().filter(|i| i.source == ImpactSource::Custom).count(), custom.len() - 1);
}

#[test]
fn custom_impacts_of_crafted_changes() {
    use xirang_scan::diff::Upstream;
    use xirang_scan::diff::custom::{COLLISION_RULE, CustomOpUses, CustomUses, OperatorUse, impacts};
    let rules = RuleSet::builtin();
    let op = |qualified: &str, name: &str, aten: bool, method: &str, line: u32, uses: Vec<OperatorUse>| CustomOpUses {
        qualified: qualified.into(),
        name: name.into(),
        aten,
        method: method.into(),
        schema: format!("{qualified}(Tensor self) -> Tensor"),
        line,
        uses,
    };
    let used = |op: &str, what: &str, line: u32| OperatorUse { op: op.into(), what: what.into(), line, exact: true };
    let custom = CustomUses {
        file: "ops/custom.yaml".into(),
        ops: vec![
            op(
                "xirang::fused",
                "fused",
                false,
                "fused",
                2,
                vec![used("mul.Scalar", "gradient rule of `self`", 9), used("tanh", "reference", 3)],
            ),
            op("aten::my_relu", "my_relu", true, "my_relu", 4, vec![]),
            op("xirang::foo_bar", "foo_bar", false, "foo_bar", 5, vec![]),
        ],
    };
    let change = |rule: &str, subject: &str, detail: Option<&str>| {
        Change::new(
            &rules,
            rule,
            Upstream::Pytorch,
            subject,
            detail.map(str::to_string),
            None,
            None,
            Some(format!("{subject}(Tensor self) -> Tensor")),
            String::new(),
        )
    };
    let changes = vec![
        change("op.removed", "mul.Scalar", None),
        change("arg.added_required", "tanh", Some("x")),
        // not a schema change: nothing lands on the formula
        change("dispatch.keys_changed", "tanh", None),
        change("deriv.formula_changed", "mul.Scalar", None),
        // a new operator named like the aten-namespace custom operator, and a renamed overload whose
        // new name mangles to `foo_bar`
        change("op.added", "my_relu", None),
        change("op.overload_renamed", "foo.baz", Some("foo.bar")),
        // another overload of a custom operator's name in another namespace: no collision
        change("op.added", "fused.Tensor", None),
    ];
    let (imp, added) = impacts(&custom, &changes, &rules);
    let got: Vec<(&str, &str, Option<u32>, &str, ImpactSource)> =
        imp.iter().map(|i| (i.subject.as_str(), i.rule.as_str(), i.location.line, i.item.as_str(), i.source)).collect();
    assert_eq!(
        got,
        [
            ("mul.Scalar", "op.removed", Some(9), "gradient rule of `self` of xirang::fused", ImpactSource::Custom),
            ("tanh", "arg.added_required", Some(3), "reference of xirang::fused", ImpactSource::Custom),
            ("my_relu", COLLISION_RULE, Some(4), "custom operator aten::my_relu", ImpactSource::Custom),
            ("foo.bar", COLLISION_RULE, Some(5), "custom operator xirang::foo_bar", ImpactSource::Custom),
        ]
    );
    assert!(imp.iter().all(|i| i.location.file == "ops/custom.yaml"));
    assert_eq!(imp[0].fingerprint, changes[0].fingerprint);
    let names: Vec<(&str, Option<&str>)> = added.iter().map(|c| (c.subject.as_str(), c.detail.as_deref())).collect();
    assert_eq!(names, [("my_relu", Some("aten::my_relu")), ("foo.bar", Some("xirang::foo_bar"))]);
    assert!(
        added.iter().all(|c| c.rule == COLLISION_RULE && c.severity == Severity::Breaking && c.pytorch_bc.is_none())
    );
    assert!(
        added[0].message.contains("has the name of custom operator `aten::my_relu` (ops/custom.yaml:4)"),
        "{}",
        added[0].message
    );
    assert!(added[1].message.contains("has the Rust method `foo_bar`"), "{}", added[1].message);
    assert_eq!(imp[2].fingerprint, added[0].fingerprint);
    assert!(rules.explain_text(COLLISION_RULE).is_ok());
    // nothing custom: nothing
    assert_eq!(impacts(&CustomUses::default(), &changes, &rules), (Vec::new(), Vec::new()));
}
