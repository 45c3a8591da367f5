//! The terminal report: counts, changes grouped by severity and rule, the checklist of what to edit
//! (ranked by severity, with file:line), and a summary of what the generator handles.
//! Colour only when asked for or when stdout is a terminal and `NO_COLOR` is unset.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Change, Report, RuleSet, Severity};

/// Rendering options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub color: bool,
    /// Subjects listed per rule before "... and N more" (0 = all).
    pub limit: usize,
}

/// `--color auto`: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn auto_color() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stdout().is_terminal()
}

struct Paint {
    on: bool,
}

impl Paint {
    fn sev(&self, s: Severity, text: &str) -> String {
        if !self.on {
            return text.to_string();
        }
        let code = match s {
            Severity::Breaking => "1;31",
            Severity::Action => "1;33",
            Severity::Info => "36",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
    fn bold(&self, text: &str) -> String {
        if self.on { format!("\x1b[1m{text}\x1b[0m") } else { text.to_string() }
    }
    fn dim(&self, text: &str) -> String {
        if self.on { format!("\x1b[2m{text}\x1b[0m") } else { text.to_string() }
    }
}

pub fn render(r: &Report, rules: &RuleSet, opts: Options) -> String {
    let p = Paint { on: opts.color };
    let mut o = String::new();
    let [(_, b), (_, a), (_, i)] = r.counts();
    let _ = writeln!(o, "{}", p.bold(&format!("Drift report: {}", r.title)));
    let _ = writeln!(
        o,
        "{} changes: {}, {}, {}{}",
        b + a + i,
        p.sev(Severity::Breaking, &format!("{b} breaking")),
        p.sev(Severity::Action, &format!("{a} action")),
        p.sev(Severity::Info, &format!("{i} info")),
        if r.suppressed.is_empty() {
            String::new()
        } else {
            format!(" ({} suppressed by the allow list)", r.suppressed.len())
        }
    );
    let _ = writeln!(
        o,
        "{}",
        p.dim(&format!(
            "adapter: {} hand-written kernels indexed{}",
            r.kernels_indexed,
            if r.backend_files.is_empty() {
                String::new()
            } else {
                format!(", backend {}", r.backend_files.join(", "))
            }
        ))
    );

    for sev in Severity::ALL {
        let mut by_rule: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
        for c in r.changes.iter().filter(|c| c.severity == sev) {
            by_rule.entry(c.rule.as_str()).or_default().push(c);
        }
        if by_rule.is_empty() {
            continue;
        }
        let n: usize = by_rule.values().map(Vec::len).sum();
        let _ = writeln!(o, "\n{}", p.sev(sev, &format!("{} ({n})", sev.as_str().to_uppercase())));
        for (rule, cs) in by_rule {
            let title = rules.get(rule).map(|x| x.title.as_str()).unwrap_or("");
            let _ = writeln!(o, "  {} ({}) {}", p.bold(rule), cs.len(), p.dim(title));
            let shown = if opts.limit == 0 { cs.len() } else { opts.limit.min(cs.len()) };
            for c in &cs[..shown] {
                let _ = writeln!(o, "    {}", one_line(&c.message));
            }
            if shown < cs.len() {
                let _ = writeln!(
                    o,
                    "    {}",
                    p.dim(&format!("... and {} more (--limit 0 for all, or --format markdown|json)", cs.len() - shown))
                );
            }
        }
    }

    let to_edit: Vec<_> = r.to_edit().collect();
    let _ = writeln!(o, "\n{}", p.bold(&format!("What to edit ({})", to_edit.len())));
    if to_edit.is_empty() {
        let _ = writeln!(o, "  nothing: no hand-written kernel or backend entry is affected");
    }
    for im in &to_edit {
        // what to do at that place; the rule's general remedy when the impact says nothing more
        let remedy = if im.action.is_empty() {
            rules.get(&im.rule).map(|x| x.remedy.as_str()).unwrap_or("")
        } else {
            im.action.as_str()
        };
        let _ = writeln!(
            o,
            "  [ ] {} {}  {}  {}  {}\n        {}",
            p.sev(im.severity, &format!("{:<8}", im.severity.as_str())),
            im.location,
            im.item,
            im.subject,
            im.rule,
            p.dim(remedy)
        );
    }
    let mut per_file: BTreeMap<&str, (usize, std::collections::BTreeSet<&str>)> = BTreeMap::new();
    for g in r.generated() {
        let e = per_file.entry(g.location.file.as_str()).or_default();
        e.0 += 1;
        e.1.insert(g.subject.as_str());
    }
    let _ = writeln!(o, "\n{}", p.bold("What the generator handles"));
    if per_file.is_empty() {
        let _ = writeln!(o, "  nothing");
    }
    for (f, (n, ops)) in &per_file {
        let _ = writeln!(o, "  {f}: {n} item(s) for {} operator(s), regenerated from the new snapshot", ops.len());
    }
    for n in &r.allow_notes {
        let _ = writeln!(
            o,
            "\n{} allow-list entry {} {} (expires {}): {}",
            p.sev(Severity::Action, &n.status),
            n.rule,
            n.fingerprint,
            n.expires,
            n.reason
        );
    }
    o
}

fn one_line(s: &str) -> String {
    let l = s.replace('\n', " ");
    if l.chars().count() > 160 { format!("{}...", l.chars().take(157).collect::<String>()) } else { l }
}
