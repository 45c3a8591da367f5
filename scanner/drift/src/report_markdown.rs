//! The markdown report, for pull-request bodies: summary tables (numbers), what to edit as GitHub
//! task-list items (one per place: file:line, item, operator, rule, remedy), what the generator
//! handles, then every change, with its fingerprint (the allow-list key), in collapsible sections
//! per rule. Deterministic (no timestamps).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Change, Report, RuleSet, Severity};
use crate::width::one_line;

/// Text for a table cell: `|` escaped, newlines as `<br>`, inside a code span when `code`.
fn cell(s: &str, code: bool) -> String {
    let t = s.replace('|', "\\|").replace('\n', "<br>");
    if code && !t.is_empty() && !t.contains('`') { format!("`{t}`") } else { t }
}

/// Text as an inline code span on one line (double backticks when it holds a backtick).
fn code(s: &str) -> String {
    let t = one_line(s);
    if t.is_empty() {
        String::new()
    } else if t.contains('`') {
        format!("`` {t} ``")
    } else {
        format!("`{t}`")
    }
}

fn bc(c: &Change) -> &'static str {
    match c.pytorch_bc {
        Some(true) => "yes",
        Some(false) => "no",
        None => "n/a",
    }
}

pub fn render(r: &Report, rules: &RuleSet) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Drift report: {}\n", r.title);
    let [(_, b), (_, a), (_, i)] = r.counts();
    let _ = writeln!(o, "| | breaking | action | info | suppressed |");
    let _ = writeln!(o, "| --- | ---: | ---: | ---: | ---: |");
    let _ = writeln!(o, "| changes | {b} | {a} | {i} | {} |", r.suppressed.len());
    let to_edit: Vec<_> = r.to_edit().collect();
    let gen_ops: std::collections::BTreeSet<&str> = r.generated().map(|g| g.subject.as_str()).collect();
    let _ = writeln!(
        o,
        "\n{} place(s) to edit by hand ({}{}); {} generated item(s) for {} operator(s) \
         are regenerated.\n",
        to_edit.len(),
        if r.adapter_summary.is_empty() {
            format!("{} hand-written kernels indexed", r.kernels_indexed)
        } else {
            r.adapter_summary.clone()
        },
        if r.backend_files.is_empty() { String::new() } else { format!("; backend: {}", r.backend_files.join(", ")) },
        r.generated().count(),
        gen_ops.len()
    );

    let _ = writeln!(o, "## Summary by rule\n");
    let _ = writeln!(o, "| rule | severity | changes | PyTorch BC | what it means |");
    let _ = writeln!(o, "| --- | --- | ---: | --- | --- |");
    for (sev, rule, n) in r.rule_counts() {
        let (title, rbc) = match rules.get(&rule) {
            Some(x) => (
                x.title.clone(),
                match x.pytorch_bc {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "n/a",
                },
            ),
            None => (String::new(), "n/a"),
        };
        let _ = writeln!(o, "| `{rule}` | {sev} | {n} | {rbc} | {} |", cell(&title, false));
    }

    let _ = writeln!(o, "\n## What to edit\n");
    if to_edit.is_empty() {
        let _ = writeln!(o, "No hand-written kernel or backend entry is affected.");
    } else {
        // GitHub task-list items (a table shows no checkboxes), one per place, ranked by severity
        for im in &to_edit {
            let remedy = if im.action.is_empty() {
                rules.get(&im.rule).map(|x| x.remedy.as_str()).unwrap_or("")
            } else {
                im.action.as_str()
            };
            let _ = write!(
                o,
                "- [ ] **{}** {} {} ({} {}, rule {})",
                im.severity,
                code(&im.location.to_string()),
                code(&im.item),
                super::subject_noun(&im.rule),
                code(&im.subject),
                code(&im.rule)
            );
            if remedy.is_empty() {
                let _ = writeln!(o);
            } else {
                let _ = writeln!(o, ": {}", one_line(remedy));
            }
        }
    }

    let _ = writeln!(o, "\n## What the generator handles\n");
    let mut per_file: BTreeMap<&str, usize> = BTreeMap::new();
    for g in r.generated() {
        *per_file.entry(g.location.file.as_str()).or_default() += 1;
    }
    if per_file.is_empty() {
        let _ = writeln!(o, "Nothing.");
    } else {
        for (f, n) in &per_file {
            let _ = writeln!(o, "- `{f}`: {n} item(s) regenerated from the new snapshot");
        }
        let _ = writeln!(o, "\n<details><summary>Regenerated items ({})</summary>\n", r.generated().count());
        let _ = writeln!(o, "| item | operator | rule |");
        let _ = writeln!(o, "| --- | --- | --- |");
        for g in r.generated() {
            let _ = writeln!(o, "| {} | `{}` | `{}` |", cell(&g.item, true), g.subject, g.rule);
        }
        let _ = writeln!(o, "\n</details>");
    }

    let _ = writeln!(o, "\n## Changes\n");
    if !r.changes.is_empty() {
        let _ =
            writeln!(o, "Each change has a fingerprint: the key of an allow-list entry (`--allow`) that accepts it.\n");
    }
    for sev in Severity::ALL {
        let mut by_rule: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
        for c in r.changes.iter().filter(|c| c.severity == sev) {
            by_rule.entry(c.rule.as_str()).or_default().push(c);
        }
        if by_rule.is_empty() {
            continue;
        }
        let _ = writeln!(o, "### {sev}\n");
        for (rule, cs) in by_rule {
            let _ = writeln!(o, "<details><summary><code>{rule}</code> ({})</summary>\n", cs.len());
            if let Some(x) = rules.get(rule) {
                let _ = writeln!(o, "{} Remedy: {}\n", x.explanation, x.remedy);
            }
            let _ = writeln!(o, "| operator | detail | old | new | PyTorch BC | upstream | fingerprint |");
            let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- |");
            for c in cs {
                let _ = writeln!(
                    o,
                    "| `{}` | {} | {} | {} | {} | {} | `{}` |",
                    c.subject,
                    cell(c.detail.as_deref().unwrap_or(""), false),
                    cell(c.old.as_deref().unwrap_or(""), true),
                    cell(c.new.as_deref().unwrap_or(""), true),
                    bc(c),
                    c.upstream_location.as_ref().map(|l| l.to_string()).unwrap_or_default(),
                    c.fingerprint
                );
            }
            let _ = writeln!(o, "\n</details>\n");
        }
    }
    if !r.suppressed.is_empty() || !r.allow_notes.is_empty() {
        let _ = writeln!(o, "## Allow list\n");
        for c in &r.suppressed {
            let _ = writeln!(o, "- suppressed: `{}` `{}` (fingerprint `{}`)", c.rule, c.subject, c.fingerprint);
        }
        for n in &r.allow_notes {
            let _ = writeln!(
                o,
                "- **{}** entry: `{}` {} (expires {}): {}",
                n.status,
                n.rule,
                code(&n.fingerprint),
                n.expires,
                one_line(&n.reason)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample;

    #[test]
    fn what_to_edit_is_a_task_list_one_item_per_place() {
        let r = sample();
        let md = render(&r, &RuleSet::builtin());
        let at = md.find("## What to edit").expect("section");
        let section = &md[at..md[at..].find("## What the generator").map_or(md.len(), |e| at + e)];
        let items: Vec<&str> = section.lines().filter(|l| l.starts_with("- [ ] ")).collect();
        assert_eq!(items.len(), r.to_edit().count(), "{section}");
        let remedy = RuleSet::builtin().get("arg.inserted").unwrap().remedy.clone();
        assert_eq!(
            items[0],
            format!(
                "- [ ] **breaking** `adapter-runtime/src/kernels/a_rather_long_path/sparse_matrix_products.rs:42` \
                 `impl AtenOps for NpuOps::_cslt_sparse_mm` (operator `_cslt_sparse_mm`, rule `arg.inserted`): {remedy}"
            )
        );
        // no table rows in the checklist (GitHub shows no checkboxes in tables)
        assert!(!section.lines().any(|l| l.starts_with('|')), "{section}");
        // the summary stays a table of numbers
        assert!(md.contains("| changes | 1 | 1 | 0 | 0 |"), "{md}");
    }

    #[test]
    fn fingerprints_are_whole_in_the_details() {
        let r = sample();
        let md = render(&r, &RuleSet::builtin());
        let details = &md[md.find("## Changes").expect("changes")..];
        for c in &r.changes {
            let row = details.lines().find(|l| l.starts_with(&format!("| `{}` |", c.subject))).expect("row");
            assert!(row.ends_with(&format!("| `{}` |", c.fingerprint)), "{row}");
        }
        assert!(details.contains("| operator | detail | old | new | PyTorch BC | upstream | fingerprint |"));
        assert!(md.contains("`00112233445566778899aabbccddeeff`"), "allow-list notes too");
    }

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("a\nb"), "`a b`");
        assert_eq!(code(""), "");
    }
}
