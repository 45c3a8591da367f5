//! Fitting plain-text output to a width: the terminal reports (`diff --format terminal`,
//! `coverage --format text`) fit the terminal's width, or, with `--wide`, show everything whole.
//!
//! The width is `COLUMNS` when that is a positive number, else the terminal's width when stdout is
//! a terminal, else [`DEFAULT_WIDTH`]; never less than [`MIN_WIDTH`]. One character is one
//! column: the reports are ASCII (operator names, schemas, paths, rule texts), so no table of
//! East Asian widths is carried for them.
//!
//! Text cut to fit ends in `...`; prose lines (totals, notes) are wrapped at spaces instead.

use std::io::IsTerminal;

/// Columns when stdout is not a terminal and `COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 100;
/// The narrowest width the reports are laid out for (a smaller `COLUMNS` counts as this).
pub const MIN_WIDTH: usize = 20;
/// What ends text that was cut to fit.
pub const ELLIPSIS: &str = "...";

/// The width of text output for this process (see the module documentation).
pub fn output_width() -> usize {
    let columns = std::env::var("COLUMNS").ok();
    let stdout = std::io::stdout();
    let terminal = if stdout.is_terminal() {
        terminal_size::terminal_size_of(&stdout).map(|(w, _)| usize::from(w.0))
    } else {
        None
    };
    width_from(columns.as_deref(), terminal)
}

/// The width from the value of `COLUMNS` and the terminal's width (if stdout is one).
pub fn width_from(columns: Option<&str>, terminal: Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
        .or(terminal.filter(|&w| w > 0))
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// Columns `s` takes (one per character).
pub fn columns(s: &str) -> usize {
    s.chars().count()
}

/// `s` on one line: newlines, tabs and other control characters become spaces.
pub fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// `s` cut to at most `width` columns, ending in `...` when something was cut.
pub fn cut(s: &str, width: usize) -> String {
    if columns(s) <= width {
        return s.to_string();
    }
    let keep = width.saturating_sub(ELLIPSIS.len());
    let mut o: String = s.chars().take(keep).collect();
    o.push_str(&ELLIPSIS[..width.min(ELLIPSIS.len())]);
    o
}

/// `s` cut to `width` columns, or whole when there is no width (`--wide`).
pub fn fit(s: &str, width: Option<usize>) -> String {
    match width {
        Some(w) => cut(s, w),
        None => s.to_string(),
    }
}

/// `s` wrapped at spaces into lines of at most `width` columns; lines after the first start with
/// `indent` spaces. A word longer than a line is cut. Whole on one line when there is no width.
pub fn wrap(s: &str, width: Option<usize>, indent: usize) -> Vec<String> {
    let s = one_line(s);
    let Some(width) = width else {
        return vec![s];
    };
    let indent = indent.min(width / 2);
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut cur_cols = 0;
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let lead = if lines.is_empty() { 0 } else { indent };
        let room = width - lead;
        let wc = columns(word);
        if cur_cols > 0 && cur_cols + 1 + wc > room {
            lines.push(format!("{}{cur}", " ".repeat(lead)));
            cur.clear();
            cur_cols = 0;
        }
        let lead = if lines.is_empty() { 0 } else { indent };
        let room = width - lead;
        if cur_cols > 0 {
            cur.push(' ');
            cur_cols += 1;
        }
        let w = cut(word, room - cur_cols.min(room));
        cur_cols += columns(&w);
        cur.push_str(&w);
    }
    if cur_cols > 0 || lines.is_empty() {
        let lead = if lines.is_empty() { 0 } else { indent };
        lines.push(format!("{}{cur}", " ".repeat(lead)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_sources() {
        assert_eq!(width_from(None, None), 100);
        assert_eq!(width_from(None, Some(132)), 132);
        assert_eq!(width_from(Some("72"), Some(132)), 72, "COLUMNS overrides");
        assert_eq!(width_from(Some("72"), None), 72, "also when stdout is not a terminal");
        assert_eq!(width_from(Some("x"), Some(90)), 90);
        assert_eq!(width_from(Some("0"), None), 100);
        assert_eq!(width_from(Some("5"), None), MIN_WIDTH);
        assert_eq!(width_from(None, Some(0)), 100);
    }

    #[test]
    fn cutting_ends_in_dots() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdefg", 6), "abc...");
        assert_eq!(cut("añbcdefg", 6), "añb...");
        assert_eq!(cut("abcdefg", 2), "..");
        assert_eq!(fit("abcdefg", None), "abcdefg");
        assert_eq!(one_line("a\nb\tc"), "a b c");
    }

    #[test]
    fn wrapping() {
        let l = wrap("one two three four five six", Some(10), 2);
        assert_eq!(l, vec!["one two", "  three", "  four", "  five six"]);
        assert!(l.iter().all(|x| columns(x) <= 10));
        let l = wrap("averyveryverylongword and more", Some(10), 2);
        assert_eq!(l, vec!["averyve...", "  and more"]);
        assert_eq!(wrap("a  b", None, 2), vec!["a  b"]);
        assert_eq!(wrap("", Some(10), 2), vec![""]);
    }
}
