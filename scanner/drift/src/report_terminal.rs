//! The terminal report: counts, changes grouped by severity and rule (each with its fingerprint,
//! the key of allow-list entries), the checklist of what to edit (ranked by severity, with
//! file:line), and a summary of what the generator handles.
//!
//! Every line fits the width of [`Options::width`] (see [`crate::width`]): details cut to fit end
//! in `...`, prose (remedies, notes) is wrapped, and fingerprints are shortened to their first
//! [`SHORT_FINGERPRINT`] characters when a whole one would leave a change's message fewer than
//! [`MIN_MESSAGE`] columns. Without a width (`--wide`) everything is whole.
//! Colour only when asked for or when stdout is a terminal and `NO_COLOR` is unset; it is applied
//! after fitting, so escape codes never count as columns.

use std::collections::BTreeMap;

use super::{Change, Report, RuleSet, Severity};
use crate::width::{self, ELLIPSIS, columns, one_line};

/// Rendering options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub color: bool,
    /// Subjects listed per rule before "... and N more" (0 = all).
    pub limit: usize,
    /// Columns to fit every line into (`crate::width::output_width()`); `None` (`--wide`): no cutting.
    pub width: Option<usize>,
}

/// Characters of a fingerprint shown when space is short (as a git short hash).
pub const SHORT_FINGERPRINT: usize = 12;
/// Columns a change's message keeps at least before fingerprints are shortened.
pub const MIN_MESSAGE: usize = 80;
/// Indent of a change line (before its fingerprint).
const CHANGE_INDENT: usize = 4;

/// `--color auto`: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn auto_color() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stdout().is_terminal()
}

/// How many characters of a fingerprint the report shows at this width.
pub fn fingerprint_columns(width: Option<usize>) -> Option<usize> {
    match width {
        Some(w) if w < CHANGE_INDENT + 32 + 2 + MIN_MESSAGE => Some(SHORT_FINGERPRINT),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy)]
enum Style {
    Plain,
    Bold,
    Dim,
    Sev(Severity),
}

/// The report being written: lines are fitted to the width, then painted.
struct Out {
    text: String,
    color: bool,
    width: Option<usize>,
}

impl Out {
    fn paint(&mut self, style: Style, s: &str) {
        let code = match (self.color, style) {
            (false, _) | (true, Style::Plain) => None,
            (true, Style::Bold) => Some("1"),
            (true, Style::Dim) => Some("2"),
            (true, Style::Sev(Severity::Breaking)) => Some("1;31"),
            (true, Style::Sev(Severity::Action)) => Some("1;33"),
            (true, Style::Sev(Severity::Info)) => Some("36"),
        };
        match code {
            Some(c) if !s.is_empty() => {
                self.text.push_str("\x1b[");
                self.text.push_str(c);
                self.text.push('m');
                self.text.push_str(s);
                self.text.push_str("\x1b[0m");
            }
            _ => self.text.push_str(s),
        }
    }

    /// One line of styled segments, cut to the width (the cut segment ends in `...`).
    fn line(&mut self, segs: &[(Style, &str)]) {
        let segs: Vec<(Style, String)> = segs.iter().map(|(st, s)| (*st, one_line(s))).collect();
        let total: usize = segs.iter().map(|(_, s)| columns(s)).sum();
        let mut budget = match self.width {
            Some(w) if total > w => Some(w.saturating_sub(ELLIPSIS.len())),
            _ => None,
        };
        for (st, s) in &segs {
            match budget {
                None => self.paint(*st, s),
                Some(b) if columns(s) <= b => {
                    self.paint(*st, s);
                    budget = Some(b - columns(s));
                }
                Some(b) => {
                    let w = self.width.unwrap_or(0);
                    let mut t: String = s.chars().take(b).collect();
                    t.push_str(&ELLIPSIS[..w.min(ELLIPSIS.len())]);
                    self.paint(*st, &t);
                    break;
                }
            }
        }
        self.text.push('\n');
    }

    /// Prose wrapped at spaces, every line after `indent` spaces.
    fn prose(&mut self, indent: usize, style: Style, s: &str) {
        let room = self.width.map(|w| w.saturating_sub(indent).max(1));
        for l in width::wrap(s, room, 0) {
            let pad = " ".repeat(indent);
            self.line(&[(Style::Plain, &pad), (style, &l)]);
        }
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }
}

/// A fingerprint as shown: whole, or its first `n` characters.
fn short(fp: &str, n: Option<usize>) -> String {
    match n {
        Some(n) => fp.chars().take(n).collect(),
        None => fp.to_string(),
    }
}

pub fn render(r: &Report, rules: &RuleSet, opts: Options) -> String {
    let mut o = Out { text: String::new(), color: opts.color, width: opts.width };
    let fp_n = fingerprint_columns(opts.width);
    let [(_, b), (_, a), (_, i)] = r.counts();
    o.line(&[(Style::Bold, &format!("Drift report: {}", r.title))]);
    let suppressed = if r.suppressed.is_empty() {
        String::new()
    } else {
        format!(" ({} suppressed by the allow list)", r.suppressed.len())
    };
    o.line(&[
        (Style::Plain, &format!("{} changes: ", b + a + i)),
        (Style::Sev(Severity::Breaking), &format!("{b} breaking")),
        (Style::Plain, ", "),
        (Style::Sev(Severity::Action), &format!("{a} action")),
        (Style::Plain, ", "),
        (Style::Sev(Severity::Info), &format!("{i} info")),
        (Style::Plain, &suppressed),
    ]);
    let backend =
        if r.backend_files.is_empty() { String::new() } else { format!(", backend {}", r.backend_files.join(", ")) };
    if r.adapter_summary.is_empty() {
        o.line(&[(Style::Dim, &format!("adapter: {} hand-written kernels indexed{backend}", r.kernels_indexed))]);
    } else {
        o.line(&[(Style::Dim, &format!("adapter: {}{backend}", r.adapter_summary))]);
    }
    if !r.changes.is_empty() {
        let legend = match fp_n {
            Some(n) => format!(
                "Each change starts with the first {n} characters of its fingerprint, the key of allow-list \
                 entries (--wide shows fingerprints whole)."
            ),
            None => "Each change starts with its fingerprint, the key of allow-list entries.".to_string(),
        };
        o.prose(0, Style::Dim, &legend);
    }

    for sev in Severity::ALL {
        let mut by_rule: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
        for c in r.changes.iter().filter(|c| c.severity == sev) {
            by_rule.entry(c.rule.as_str()).or_default().push(c);
        }
        if by_rule.is_empty() {
            continue;
        }
        let n: usize = by_rule.values().map(Vec::len).sum();
        o.blank();
        o.line(&[(Style::Sev(sev), &format!("{} ({n})", sev.as_str().to_uppercase()))]);
        for (rule, cs) in by_rule {
            let title = rules.get(rule).map(|x| x.title.as_str()).unwrap_or("");
            o.line(&[
                (Style::Plain, "  "),
                (Style::Bold, rule),
                (Style::Plain, &format!(" ({}) ", cs.len())),
                (Style::Dim, title),
            ]);
            let shown = if opts.limit == 0 { cs.len() } else { opts.limit.min(cs.len()) };
            for c in &cs[..shown] {
                o.line(&[
                    (Style::Plain, &" ".repeat(CHANGE_INDENT)),
                    (Style::Dim, &short(&c.fingerprint, fp_n)),
                    (Style::Plain, "  "),
                    (Style::Plain, &c.message),
                ]);
            }
            if shown < cs.len() {
                o.line(&[
                    (Style::Plain, &" ".repeat(CHANGE_INDENT)),
                    (
                        Style::Dim,
                        &format!("... and {} more (--limit 0 for all, or --format markdown|json)", cs.len() - shown),
                    ),
                ]);
            }
        }
    }

    let to_edit: Vec<_> = r.to_edit().collect();
    o.blank();
    o.line(&[(Style::Bold, &format!("What to edit ({})", to_edit.len()))]);
    if to_edit.is_empty() {
        o.line(&[(Style::Plain, "  nothing: no hand-written kernel or backend entry is affected")]);
    }
    for im in &to_edit {
        // what to do at that place; the rule's general remedy when the impact says nothing more
        let remedy = if im.action.is_empty() {
            rules.get(&im.rule).map(|x| x.remedy.as_str()).unwrap_or("")
        } else {
            im.action.as_str()
        };
        // the place to edit keeps its line number: when it and the item do not fit one line, the
        // item goes on the next line, and a location still too long loses the start of its path
        let head = format!(" {}  {}", im.location, im.item);
        let sev = format!("{:<8}", im.severity.as_str());
        match o.width {
            Some(w) if 6 + columns(&sev) + columns(&head) > w => {
                let loc = one_line(&im.location.to_string());
                let room = w.saturating_sub(6 + columns(&sev) + 1);
                let loc = if columns(&loc) <= room {
                    loc
                } else {
                    let keep = room.saturating_sub(ELLIPSIS.len());
                    let tail: String = loc.chars().rev().take(keep).collect::<Vec<_>>().into_iter().rev().collect();
                    format!("{ELLIPSIS}{tail}")
                };
                o.line(&[
                    (Style::Plain, "  [ ] "),
                    (Style::Sev(im.severity), &sev),
                    (Style::Plain, &format!(" {loc}")),
                ]);
                o.line(&[(Style::Plain, &format!("        {}", im.item))]);
            }
            _ => o.line(&[(Style::Plain, "  [ ] "), (Style::Sev(im.severity), &sev), (Style::Plain, &head)]),
        }
        o.line(&[
            (
                Style::Plain,
                &format!("        {} {}, rule {}, fingerprint ", super::subject_noun(&im.rule), im.subject, im.rule),
            ),
            (Style::Dim, &short(&im.fingerprint, fp_n)),
        ]);
        if !remedy.is_empty() {
            o.prose(8, Style::Dim, remedy);
        }
    }
    let mut per_file: BTreeMap<&str, (usize, std::collections::BTreeSet<&str>)> = BTreeMap::new();
    for g in r.generated() {
        let e = per_file.entry(g.location.file.as_str()).or_default();
        e.0 += 1;
        e.1.insert(g.subject.as_str());
    }
    o.blank();
    o.line(&[(Style::Bold, "What the generator handles")]);
    if per_file.is_empty() {
        o.line(&[(Style::Plain, "  nothing")]);
    }
    for (f, (n, ops)) in &per_file {
        o.line(&[(
            Style::Plain,
            &format!("  {f}: {n} item(s) for {} operator(s), regenerated from the new snapshot", ops.len()),
        )]);
    }
    for n in &r.allow_notes {
        o.blank();
        o.line(&[
            (Style::Sev(Severity::Action), &n.status),
            (
                Style::Plain,
                &format!(
                    " allow-list entry {} {} (expires {}): {}",
                    n.rule,
                    short(&n.fingerprint, fp_n),
                    n.expires,
                    n.reason
                ),
            ),
        ]);
    }
    o.text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample;

    /// The text without colour escapes.
    fn plain(s: &str) -> String {
        let mut o = String::new();
        let mut esc = false;
        for c in s.chars() {
            match (esc, c) {
                (false, '\x1b') => esc = true,
                (false, c) => o.push(c),
                (true, 'm') => esc = false,
                (true, _) => {}
            }
        }
        o
    }

    fn render_at(width: Option<usize>, color: bool) -> String {
        render(&sample(), &RuleSet::builtin(), Options { color, limit: 8, width })
    }

    #[test]
    fn every_line_fits_a_fixed_width() {
        let r = sample();
        for width in [40, 60, 100] {
            for color in [false, true] {
                let text = render_at(Some(width), color);
                let text = plain(&text);
                for l in text.lines() {
                    assert!(columns(l) <= width, "{width}: {l:?} is {} columns", columns(l));
                }
                // the long message is cut and says so; the short one is whole
                let cut = text.lines().find(|l| l.contains("`_cslt_sparse_mm`:")).expect("change line");
                assert!(cut.ends_with("...") && !cut.contains("END"), "{cut}");
                assert!(text.contains("`atan2` gained tag `core`") || width < 60, "{text}");
                // fingerprints shortened, and the legend says how to see them whole
                assert!(text.contains(&r.changes[0].fingerprint[..SHORT_FINGERPRINT]));
                assert!(!text.contains(&r.changes[0].fingerprint), "{text}");
                assert!(text.contains("--wide"), "{text}");
            }
        }
        // colour codes do not count as columns: the same text, painted
        assert_eq!(plain(&render_at(Some(60), true)), render_at(Some(60), false));
    }

    #[test]
    fn wide_shows_everything_whole() {
        let r = sample();
        let text = render_at(None, false);
        assert!(text.contains(&r.changes[0].message), "{text}");
        assert!(text.contains(&r.changes[0].fingerprint) && text.contains(&r.changes[1].fingerprint));
        assert!(text.contains(&r.allow_notes[0].reason));
        assert!(text.contains("adapter-runtime/src/kernels/a_rather_long_path/sparse_matrix_products.rs:42"));
        assert!(!text.contains("..."), "{text}");
        // a wide enough terminal shows whole fingerprints without --wide
        let text = render_at(Some(CHANGE_INDENT + 32 + 2 + MIN_MESSAGE), false);
        assert!(text.contains(&r.changes[0].fingerprint), "{text}");
        assert_eq!(fingerprint_columns(Some(100)), Some(SHORT_FINGERPRINT));
        assert_eq!(fingerprint_columns(None), None);
    }

    #[test]
    fn the_checklist_names_place_item_rule_fingerprint_and_remedy() {
        let r = sample();
        let text = render_at(None, false);
        let at = text.find("What to edit (1)").expect("checklist");
        let item: Vec<&str> = text[at..].lines().skip(1).take(3).collect();
        assert!(item[0].starts_with("  [ ] breaking"), "{item:?}");
        assert!(item[0].contains("sparse_matrix_products.rs:42") && item[0].contains("NpuOps::_cslt_sparse_mm"));
        assert!(item[1].contains("operator _cslt_sparse_mm, rule arg.inserted"), "{item:?}");
        assert!(item[1].ends_with(&r.changes[0].fingerprint));
        let remedy = RuleSet::builtin().get("arg.inserted").unwrap().remedy.clone();
        assert!(item[2].trim_start().starts_with(&remedy[..20]), "{item:?}");
        // narrow: the remedy is wrapped, not cut
        let text = render_at(Some(50), false);
        let at = text.find("What to edit (1)").expect("checklist");
        // narrow: the location keeps its line number, the item follows on its own line
        let lines: Vec<&str> = text[at..].lines().collect();
        assert!(lines[1].ends_with("sparse_matrix_products.rs:42"), "{lines:?}");
        assert!(lines[2].trim().ends_with("NpuOps::_cslt_sparse_mm"), "{lines:?}");
        let words: String = text[at..]
            .lines()
            .skip(4)
            .take_while(|l| l.starts_with("        "))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(words, remedy);
    }
}
