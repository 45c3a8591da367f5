//! The allow list: accepted changes, keyed by rule id and fingerprint (never by message text).
//!
//! A JSON file:
//! ```json
//! { "allow": [
//!     { "rule": "arg.inserted", "fingerprint": "3f1c…", "subject": "_cslt_sparse_mm",
//!       "reason": "our kernel takes the new alpha already", "expires": "2027-03-31" } ] }
//! ```
//! `subject` is informative. An entry suppresses the change with the same rule and fingerprint until
//! its `expires` date (inclusive). Expired entries stop suppressing and are reported; entries that
//! match nothing are reported as unused.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{AllowNote, Change, RuleSet};
use crate::error::{Error, SourceFile};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowEntry {
    pub rule: String,
    pub fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub reason: String,
    /// `YYYY-MM-DD`, inclusive.
    pub expires: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowList {
    pub allow: Vec<AllowEntry>,
}

impl AllowList {
    /// Parses an allow list; errors point at `name:line:col`. Rule ids are not checked (see
    /// [`AllowList::parse_with_rules`]).
    pub fn parse(name: &str, text: &str) -> Result<AllowList, Error> {
        Self::parse_with_rules(name, text, None)
    }

    /// Parses an allow list and checks every entry: a calendar date, a reason, and (with `rules`)
    /// a rule id of the catalogue, with a suggestion for a typo.
    pub fn parse_with_rules(name: &str, text: &str, rules: Option<&RuleSet>) -> Result<AllowList, Error> {
        let src = SourceFile::new(name, text);
        let list: AllowList = serde_json::from_str(text).map_err(|e| {
            let pos = src.pos_of_marker(e.line(), e.column().saturating_sub(1));
            src.error(pos, 1, format!("allow list: {e}"))
        })?;
        let at = |i: usize, key: &str, msg: String| -> Error {
            let (offset, len) = nth_value(text, key, i).unwrap_or((0, 0));
            src.error(src.pos_of_offset(offset), len, msg).into()
        };
        for (i, e) in list.allow.iter().enumerate() {
            if parse_date(&e.expires).is_none() {
                return Err(at(
                    i,
                    "expires",
                    format!("allow entry {} ({}): expires `{}` is not a date YYYY-MM-DD", i + 1, e.rule, e.expires),
                ));
            }
            if e.reason.trim().is_empty() {
                return Err(at(i, "reason", format!("allow entry {} ({}): a reason is required", i + 1, e.rule)));
            }
            if let Some(rules) = rules
                && rules.get(&e.rule).is_none()
            {
                let hint = crate::suggest::hint(&e.rule, rules.all().iter().map(|r| r.id.as_str()));
                return Err(at(
                    i,
                    "rule",
                    format!(
                        "allow entry {}: `{}` is not a rule of the catalogue{hint}; `xirang-scan rules` lists them",
                        i + 1,
                        e.rule
                    ),
                ));
            }
        }
        Ok(list)
    }

    pub fn load(path: &Path) -> Result<AllowList, Error> {
        Self::load_with_rules(path, None)
    }

    /// Reads and checks an allow list (see [`AllowList::parse_with_rules`]).
    pub fn load_with_rules(path: &Path, rules: Option<&RuleSet>) -> Result<AllowList, Error> {
        let text = crate::fsio::read_text(path, crate::fsio::MAX_INPUT_BYTES)?;
        AllowList::parse_with_rules(&path.display().to_string(), &text, rules)
    }

    /// Splits `changes` into (kept, suppressed) and reports expired and unused entries.
    /// `today` is `YYYY-MM-DD`.
    pub fn apply(&self, changes: Vec<Change>, today: &str) -> (Vec<Change>, Vec<Change>, Vec<AllowNote>) {
        let today = parse_date(today).unwrap_or((0, 0, 0));
        let mut used = vec![false; self.allow.len()];
        let mut kept = Vec::new();
        let mut suppressed = Vec::new();
        for c in changes {
            let hit = self.allow.iter().position(|e| e.rule == c.rule && e.fingerprint == c.fingerprint);
            match hit {
                Some(i) => {
                    used[i] = true;
                    let live = parse_date(&self.allow[i].expires).is_some_and(|d| d >= today);
                    if live { suppressed.push(c) } else { kept.push(c) }
                }
                None => kept.push(c),
            }
        }
        let mut notes = Vec::new();
        for (i, e) in self.allow.iter().enumerate() {
            let expired = parse_date(&e.expires).is_none_or(|d| d < today);
            let status = if expired {
                "expired"
            } else if !used[i] {
                "unused"
            } else {
                continue;
            };
            notes.push(AllowNote {
                rule: e.rule.clone(),
                fingerprint: e.fingerprint.clone(),
                reason: e.reason.clone(),
                expires: e.expires.clone(),
                status: status.into(),
            });
        }
        (kept, suppressed, notes)
    }
}

/// `YYYY-MM-DD` -> (y, m, d).
pub fn parse_date(s: &str) -> Option<(u32, u32, u32)> {
    let mut it = s.split('-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    if ![y, m, d].iter().all(|p| p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let (y, m, d): (u32, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&d).then_some((y, m, d))
}

/// Index of the closing quote of a JSON string body.
fn string_end(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Byte span of the value of the `n`-th `"key":` in a JSON text (keys inside strings are escaped,
/// so a bare `"key"` followed by a colon is a key).
fn nth_value(text: &str, key: &str, n: usize) -> Option<(usize, usize)> {
    let pat = format!("\"{key}\"");
    let mut seen = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find(&pat).map(|i| i + from) {
        from = i + pat.len();
        if text[..i].ends_with('\\') {
            continue;
        }
        let rest = text[from..].trim_start();
        let Some(value) = rest.strip_prefix(':') else { continue };
        if seen == n {
            let v = value.trim_start();
            let start = text.len() - v.len();
            let len = match v.strip_prefix('"') {
                // the string with its quotes
                Some(body) => string_end(body).map_or(v.len(), |e| e + 2),
                None => v.find([',', '}']).unwrap_or(v.len()),
            };
            return Some((start, len));
        }
        seen += 1;
    }
    None
}

/// Today's UTC date, `YYYY-MM-DD` (from the system clock; `--today` overrides it in the CLI).
pub fn today_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 -> civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
        assert_eq!(parse_date("2026-11-30"), Some((2026, 11, 30)));
        assert_eq!(parse_date("2026-13-01"), None);
        assert_eq!(parse_date("26-1-1"), None);
        assert_eq!(parse_date("2025-02-30"), None);
        assert_eq!(parse_date("2024-02-29"), Some((2024, 2, 29)));
        assert_eq!(parse_date("2025-02-29"), None);
        assert_eq!(parse_date("2025-04-31"), None);
        assert_eq!(parse_date("2025-+1-01"), None);
        assert!(
            AllowList::parse(
                "a.json",
                r#"{"allow":[{"rule":"x","fingerprint":"y","reason":"","expires":"2026-01-01"}]}"#
            )
            .is_err()
        );
    }
}
