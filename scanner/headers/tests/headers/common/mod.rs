//! Shared helpers for the corpus tests: where the corpus is, its releases in version order, and
//! an independent (string-level, not tokenizer- or tree-sitter-based) reading of the headers.
#![allow(dead_code)]

use std::path::PathBuf;

use xirang_headers::{HeaderSet, Profile, scan_dir};

pub fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus"))
}

fn version_key(v: &str) -> Vec<u64> {
    v.trim_start_matches('v')
        .split(['.', 'p', 'o', 's', 't'])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect()
}

/// Release folder names of a vendor, oldest first.
pub fn releases(vendor: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus().join(vendor))
        .expect("corpus vendor folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort_by_key(|a| version_key(a));
    v
}

/// The header folder of a release.
pub fn header_dir(vendor: &str, release: &str) -> PathBuf {
    let d = corpus().join(vendor).join(release);
    if vendor == "ascend" { d.join("acl") } else { d }
}

pub fn scan(vendor: &str, release: &str, profile: Profile) -> HeaderSet {
    scan_dir(profile, &header_dir(vendor, release)).expect("scan")
}

/// Removes comments and preprocessor lines, keeping line structure.
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                if b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            out.push(' ');
            continue;
        }
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if b[i] == '"' {
            out.push(b[i]);
            i += 1;
            while i < b.len() && b[i] != '"' && b[i] != '\n' {
                if b[i] == '\\' {
                    out.push(b[i]);
                    i += 1;
                }
                if i < b.len() {
                    out.push(b[i]);
                }
                i += 1;
            }
            if i < b.len() {
                out.push(b[i]);
            }
            i += 1;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    let mut res = String::new();
    let mut in_directive = false;
    for line in out.lines() {
        let t = line.trim_start();
        if in_directive || t.starts_with('#') {
            in_directive = line.trim_end().ends_with('\\');
            res.push('\n');
            continue;
        }
        res.push_str(line);
        res.push('\n');
    }
    res
}

/// Functions found after an export / calling-convention marker: (name, parameter count),
/// first occurrence of each name. Parameter count includes `...`; `(void)` and `()` are 0.
pub fn marked_functions(stripped: &str, markers: &[&str]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for m in markers {
        let mut from = 0;
        while let Some(pos) = stripped[from..].find(m) {
            let at = from + pos;
            from = at + m.len();
            // the marker must be a whole word
            let before = stripped[..at].chars().next_back();
            let after = stripped[at + m.len()..].chars().next();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                || after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            {
                continue;
            }
            let rest = &stripped[at + m.len()..];
            let Some(open) = rest.find(['(', ';', '{', '}']) else { continue };
            if !rest[open..].starts_with('(') {
                continue;
            }
            let head = rest[..open].trim_end();
            let name: String = head
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if name.is_empty() || name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                continue;
            }
            // parameters: up to the matching parenthesis
            let mut depth = 0;
            let mut commas = 0;
            let mut content = String::new();
            for c in rest[open..].chars() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => commas += 1,
                    _ => {}
                }
                if depth >= 1 {
                    content.push(c);
                }
            }
            let inner = content.trim_start_matches('(').trim();
            let count = if inner.is_empty() || inner == "void" { 0 } else { commas + 1 };
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, count));
            }
        }
    }
    out
}

/// Lines `NAME = <integer literal>[,]` (enumerators) and `static const int NAME = <lit>;`.
/// (name, value) pairs.
pub type Named = Vec<(String, i64)>;

pub fn literal_assignments(stripped: &str) -> (Named, Named) {
    let mut enumerators = Vec::new();
    let mut constants = Vec::new();
    for line in stripped.lines() {
        let t = line.trim();
        let Some((lhs, rhs)) = t.split_once('=') else { continue };
        let rhs = rhs.trim().trim_end_matches([',', ';']).trim();
        let Some(v) = int_literal(rhs) else { continue };
        let lhs = lhs.trim();
        if let Some(name) = lhs.strip_prefix("static const int ") {
            constants.push((name.trim().to_string(), v));
        } else if !lhs.is_empty()
            && lhs.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !lhs.chars().next().is_some_and(|c| c.is_ascii_digit())
        {
            enumerators.push((lhs.to_string(), v));
        }
    }
    (enumerators, constants)
}

/// `#define NAME <integer literal>` lines (first definition of each name).
pub fn literal_defines(text: &str) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else { continue };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix("define") else { continue };
        let rest = rest.split("//").next().unwrap_or("").split("/*").next().unwrap_or("");
        let parts: Vec<&str> = rest.split_whitespace().collect();
        if parts.len() != 2 || parts[0].contains('(') {
            continue;
        }
        if let Some(v) = int_literal(parts[1])
            && !out.iter().any(|(n, _)| n == parts[0])
        {
            out.push((parts[0].to_string(), v));
        }
    }
    out
}

pub fn int_literal(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r.trim()),
        None => (false, s),
    };
    let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}
