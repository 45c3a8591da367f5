//! Preprocessing pass: pulls out directives (`#define`, `#include`, conditionals), blanks them,
//! and neutralizes export, calling-convention, attribute, deprecation and default-argument
//! macros so that tree-sitter-cpp sees plain C/C++. Every replacement keeps byte offsets and
//! line numbers (bytes become spaces, newlines stay).

use std::collections::{BTreeMap, BTreeSet};

use crate::eval::MacroDef;
use crate::lex::{Tok, Token, matching, tokenize, unquote};

/// A `#define` with the line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub struct Define {
    pub def: MacroDef,
    pub line: u32,
    /// Byte offset of the directive.
    pub pos: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum CondKind {
    If { zero: bool },
    Elif,
    Else,
    Endif,
}

#[derive(Clone, Copy, Debug)]
struct Cond {
    kind: CondKind,
    start: usize,
    end: usize,
}

/// A `#include` as written.
#[derive(Clone, Debug, PartialEq)]
pub struct RawInclude {
    pub path: String,
    pub system: bool,
    pub line: u32,
    pub pos: usize,
}

/// Directives of one file.
#[derive(Clone, Debug, Default)]
pub struct Directives {
    pub defines: Vec<Define>,
    pub includes: Vec<RawInclude>,
    /// Text with every directive blanked out.
    pub blanked: String,
    conds: Vec<Cond>,
}

/// 1-based line of a byte offset.
pub fn line_of(line_starts: &[usize], pos: usize) -> u32 {
    let idx = line_starts.partition_point(|&s| s <= pos);
    idx.max(1) as u32
}

pub fn line_starts(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            v.push(i + 1);
        }
    }
    v
}

fn blank(out: &mut [u8], from: usize, to: usize) {
    for b in out.iter_mut().take(to).skip(from) {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
}

/// Extracts directives and blanks them (comment- and string-aware).
pub fn directives(text: &str) -> Directives {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut dirs = Directives::default();
    let starts = line_starts(text);
    let mut i = 0;
    let mut at_line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            at_line_start = true;
            i += 1;
            continue;
        }
        if c == b' ' || c == b'\t' || c == b'\r' || c == 0x0c {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'#' && at_line_start {
            let start = i;
            // directive runs to the end of the line, with continuations and block comments
            let mut j = i;
            let mut logical = String::new();
            while j < b.len() {
                if b[j] == b'\\'
                    && (b.get(j + 1) == Some(&b'\n') || (b.get(j + 1) == Some(&b'\r') && b.get(j + 2) == Some(&b'\n')))
                {
                    j += if b[j + 1] == b'\r' { 3 } else { 2 };
                    logical.push(' ');
                    continue;
                }
                if b[j] == b'\n' {
                    break;
                }
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    j += 2;
                    while j < b.len() && !(b[j] == b'*' && b.get(j + 1) == Some(&b'/')) {
                        j += 1;
                    }
                    j = (j + 2).min(b.len());
                    logical.push(' ');
                    continue;
                }
                if b[j] == b'/' && b.get(j + 1) == Some(&b'/') {
                    while j < b.len() && b[j] != b'\n' {
                        j += 1;
                    }
                    break;
                }
                if b[j] == b'"' || b[j] == b'\'' {
                    let q = b[j];
                    let s = j;
                    j += 1;
                    while j < b.len() && b[j] != q && b[j] != b'\n' {
                        if b[j] == b'\\' {
                            j += 1;
                        }
                        j += 1;
                    }
                    j = (j + 1).min(b.len());
                    logical.push_str(text.get(s..j).unwrap_or(""));
                    continue;
                }
                let ch_len = text.get(j..).and_then(|r| r.chars().next()).map(char::len_utf8).unwrap_or(1);
                logical.push_str(text.get(j..j + ch_len).unwrap_or(" "));
                j += ch_len;
            }
            let line = line_of(&starts, start);
            parse_directive(&logical, line, start, j, &mut dirs);
            blank(&mut out, start, j);
            i = j;
            continue;
        }
        at_line_start = false;
        if c == b'"' || c == b'\'' {
            let q = c;
            i += 1;
            while i < b.len() && b[i] != q && b[i] != b'\n' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        i += 1;
    }
    let conds = std::mem::take(&mut dirs.conds);
    let dropped = prune_branches(&mut out, &conds);
    // defines inside `#if 0` (and dropped alternatives) do not exist
    dirs.defines.retain(|d| !dropped.iter().any(|(a, b)| d.pos >= *a && d.pos < *b));
    dirs.includes.retain(|i| !dropped.iter().any(|(a, b)| i.pos >= *a && i.pos < *b));
    dirs.blanked = String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    dirs
}

fn parse_directive(logical: &str, line: u32, start: usize, end: usize, dirs: &mut Directives) {
    let rest = logical.trim_start().trim_start_matches('#').trim_start();
    let word_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    let (word, args) = rest.split_at(word_end);
    match word {
        "define" => {
            let args = args.trim_start();
            let name_end =
                args.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).unwrap_or(args.len());
            let name = &args[..name_end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return;
            }
            let after = &args[name_end..];
            let (params, body) = if let Some(p) = after.strip_prefix('(') {
                let close = p.find(')').unwrap_or(p.len());
                let params: Vec<String> =
                    p[..close].split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                (Some(params), p.get(close + 1..).unwrap_or(""))
            } else {
                (None, after)
            };
            dirs.defines.push(Define {
                def: MacroDef { name: name.to_string(), params, body: body.trim().to_string() },
                line,
                pos: start,
            });
        }
        "include" | "include_next" | "import" => {
            let a = args.trim();
            let (path, system) = if let Some(r) = a.strip_prefix('"') {
                (r.split('"').next().unwrap_or(""), false)
            } else if let Some(r) = a.strip_prefix('<') {
                (r.split('>').next().unwrap_or(""), true)
            } else {
                (a, false)
            };
            if !path.is_empty() {
                dirs.includes.push(RawInclude { path: path.to_string(), system, line, pos: start });
            }
        }
        "if" | "ifdef" | "ifndef" => {
            let a = args.trim();
            let zero = word == "if" && matches!(a, "0" | "(0)" | "false");
            dirs.conds.push(Cond { kind: CondKind::If { zero }, start, end });
        }
        "elif" | "elifdef" | "elifndef" => dirs.conds.push(Cond { kind: CondKind::Elif, start, end }),
        "else" => dirs.conds.push(Cond { kind: CondKind::Else, start, end }),
        "endif" => dirs.conds.push(Cond { kind: CondKind::Endif, start, end }),
        _ => {}
    }
}

/// Net bracket balance of a stretch of code (comments and strings ignored).
fn balanced(code: &str) -> bool {
    let mut paren = 0i64;
    let mut brace = 0i64;
    for t in tokenize(code) {
        match t.text(code) {
            "(" => paren += 1,
            ")" => paren -= 1,
            "{" => brace += 1,
            "}" => brace -= 1,
            _ => {}
        }
    }
    paren == 0 && brace == 0
}

/// Conditional groups: all branches are scanned, except `#if 0` branches, and except that a
/// group whose branches are not each bracket-balanced (`#if A struct x { #else struct y { #endif`)
/// keeps only its first branch, so that alternatives are not glued into nonsense.
fn prune_branches(out: &mut [u8], conds: &[Cond]) -> Vec<(usize, usize)> {
    let text = String::from_utf8_lossy(out).into_owned();
    let mut dropped = Vec::new();
    let mut stack: Vec<Vec<Cond>> = Vec::new();
    for c in conds {
        match c.kind {
            CondKind::If { .. } => stack.push(vec![*c]),
            CondKind::Elif | CondKind::Else => {
                if let Some(g) = stack.last_mut() {
                    g.push(*c);
                }
            }
            CondKind::Endif => {
                let Some(g) = stack.pop() else { continue };
                // branch k runs from g[k].end to the next directive of the group
                let mut branches = Vec::new();
                for k in 0..g.len() {
                    let to = g.get(k + 1).map(|n| n.start).unwrap_or(c.start);
                    branches.push((g[k].end.min(to), to));
                }
                let zero_first = matches!(g[0].kind, CondKind::If { zero: true });
                let any_unbalanced =
                    branches.len() > 1 && branches.iter().any(|(a, b)| !balanced(text.get(*a..*b).unwrap_or("")));
                for (k, range) in branches.iter().enumerate() {
                    let drop = (k == 0 && zero_first) || (any_unbalanced && k > 0 && !(zero_first && k == 1));
                    if drop {
                        dropped.push(*range);
                    }
                }
            }
        }
    }
    for (a, b) in &dropped {
        blank(out, *a, *b);
    }
    dropped
}

/// What the neutralizer knows about macros before it looks at code.
#[derive(Clone, Debug, Default)]
pub struct Knowledge {
    /// Export / calling-convention / attribute macros: removed (with their argument list).
    pub attr: BTreeSet<String>,
    /// Deprecation macros: removed, and the next declaration is marked deprecated.
    pub deprecated: BTreeSet<String>,
    /// Default-argument macros (`__dv(v)` expands to `= v`).
    pub defaults: BTreeSet<String>,
    /// Wrappers that keep an argument: `GIT_EXTERN(type)`, `OF(args)`, `PyAPI_FUNC(type)`.
    pub wrappers: BTreeSet<String>,
    /// Names known to be types (typedefs and tags of the header set, standard types).
    pub types: BTreeSet<String>,
    /// Function-like macros that expand to declarations (`__cuda_builtin_vector_align8(tag, members)`).
    pub decl_macros: BTreeMap<String, MacroDef>,
    /// Object-like macros that expand to member or declaration lists (`PyObject_HEAD`): expanded
    /// in place before parsing.
    pub inline_macros: BTreeMap<String, String>,
    /// Apply positional heuristics for unknown macros.
    pub heuristics: bool,
}

/// A top-level invocation of a declaration-generating macro, expanded.
#[derive(Clone, Debug, PartialEq)]
pub struct Expansion {
    pub pos: usize,
    pub text: String,
}

/// Language-level attribute keywords neutralized in every profile.
pub const ATTR_KEYWORDS: &[&str] = &[
    "__attribute__",
    "__attribute",
    "__declspec",
    "_declspec",
    "__asm__",
    "__asm",
    "__extension__",
    "__cdecl",
    "_cdecl",
    "__stdcall",
    "_stdcall",
    "__fastcall",
    "__thiscall",
    "__vectorcall",
    "__forceinline",
    "__inline__",
    "__inline",
    "__ptr32",
    "__ptr64",
    "__unaligned",
    "alignas",
    "_Alignas",
    "__restrict__",
    "__restrict",
    "WINAPI",
    "WINAPIV",
    "APIENTRY",
    "STDMETHODCALLTYPE",
];

const BUILTIN_TYPES: &[&str] = &[
    "void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "bool", "_Bool", "wchar_t",
    "char8_t", "char16_t", "char32_t", "__int8", "__int16", "__int32", "__int64", "__int128", "_Complex", "__fp16",
    "_Float16", "auto", "decltype",
];

const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "restrict",
    "_Atomic",
    "static",
    "extern",
    "inline",
    "register",
    "typedef",
    "thread_local",
    "_Thread_local",
    "constexpr",
    "virtual",
    "explicit",
    "friend",
    "mutable",
    "_Noreturn",
    "noreturn",
    "typename",
    "template",
    "using",
    "public",
    "private",
    "protected",
    "operator",
    "return",
    "sizeof",
    "namespace",
    "case",
    "default",
    "if",
    "else",
    "for",
    "while",
    "do",
    "switch",
    "goto",
    "break",
    "continue",
    "new",
    "delete",
    "this",
    "static_assert",
    "_Static_assert",
    "co_return",
    "throw",
    "noexcept",
    "decltype",
];

const TAGS: &[&str] = &["struct", "union", "enum", "class"];

pub fn is_keyword(s: &str) -> bool {
    BUILTIN_TYPES.contains(&s) || QUALIFIERS.contains(&s) || TAGS.contains(&s)
}

/// Standard C types that a header set uses without defining.
pub fn is_std_type(s: &str) -> bool {
    matches!(
        s,
        "size_t"
            | "ssize_t"
            | "ptrdiff_t"
            | "intptr_t"
            | "uintptr_t"
            | "FILE"
            | "va_list"
            | "wchar_t"
            | "off_t"
            | "time_t"
            | "pid_t"
            | "bool"
            | "int8_t"
            | "int16_t"
            | "int32_t"
            | "int64_t"
            | "uint8_t"
            | "uint16_t"
            | "uint32_t"
            | "uint64_t"
            | "intmax_t"
            | "uintmax_t"
            | "HANDLE"
            | "DWORD"
            | "BOOL"
            | "LPCSTR"
            | "LPVOID"
            | "HMODULE"
            | "UINT"
            | "ULONG"
            | "INT"
            | "LONG"
    ) || s.starts_with("std::")
}

fn body_is_attr_like(body: &str, attr: &BTreeSet<String>) -> bool {
    body_attr_uses(body, attr, &[]).is_some()
}

/// `Some(number of parameter uses)` when the body is only attributes plus parameters.
fn body_attr_uses(body: &str, attr: &BTreeSet<String>, params: &[String]) -> Option<usize> {
    let toks = tokenize(body);
    let mut i = 0;
    let mut uses = 0;
    while i < toks.len() {
        let t = toks[i];
        let s = t.text(body);
        if t.kind == Tok::Ident && params.iter().any(|p| p == s) {
            uses += 1;
            i += 1;
            continue;
        }
        let ok_ident = t.kind == Tok::Ident
            && (ATTR_KEYWORDS.contains(&s)
                || attr.contains(s)
                || matches!(s, "extern" | "static" | "inline" | "visibility" | "dllexport" | "dllimport"));
        if ok_ident {
            i += 1;
            if toks.get(i).map(|t| t.text(body)) == Some("(") {
                match matching(body, &toks, i) {
                    Some(c) => i = c + 1,
                    None => return None,
                }
            }
            continue;
        }
        if t.kind == Tok::Str && i > 0 && toks[i - 1].text(body) == "extern" {
            i += 1;
            continue;
        }
        if s == "[" && toks.get(i + 1).map(|t| t.text(body)) == Some("[") {
            match matching(body, &toks, i) {
                Some(c) => i = c + 1,
                None => return None,
            }
            continue;
        }
        return None;
    }
    Some(uses)
}

fn mentions_deprecated(s: &str) -> bool {
    s.to_ascii_lowercase().contains("deprecat")
}

/// Learns attribute, deprecation and default macros from `#define`s (all branches).
pub fn learn_from_defines(k: &mut Knowledge, defines: &[Define]) {
    let mut by_name: BTreeMap<&str, Vec<&MacroDef>> = BTreeMap::new();
    for d in defines {
        by_name.entry(d.def.name.as_str()).or_default().push(&d.def);
    }
    // function-like macros a whole top-level statement may invoke to declare something:
    // prefer a definition that produces a body or declaration keywords, else the first
    for (name, defs) in &by_name {
        let decl_like = |d: &&MacroDef| {
            d.body.contains('{')
                && tokenize(&d.body).iter().any(|t| matches!(t.text(&d.body), "struct" | "union" | "enum" | "typedef"))
        };
        let pick = defs
            .iter()
            .find(|d| d.params.is_some() && decl_like(d))
            .or_else(|| defs.iter().find(|d| d.params.is_some() && !d.body.trim().is_empty()));
        if let Some(d) = pick {
            k.decl_macros.insert(name.to_string(), (*d).clone());
        }
        if let Some(d) = defs.iter().find(|d| d.params.is_none() && d.body.contains(';')) {
            k.inline_macros.insert(name.to_string(), d.body.clone());
        }
        // `#define _Xconst const`, `#define hi_void void`: keyword spellings, expanded in place
        let keywords_only = |b: &str| {
            let toks = tokenize(b);
            !toks.is_empty()
                && toks.iter().all(|t| {
                    let s = t.text(b);
                    BUILTIN_TYPES.contains(&s) || matches!(s, "const" | "volatile" | "*")
                })
        };
        if defs.iter().all(|d| d.params.is_none() && keywords_only(&d.body)) {
            k.inline_macros.insert(name.to_string(), defs[0].body.clone());
        }
    }
    // fix point: a macro whose body only uses attribute macros is itself one
    for _ in 0..4 {
        let mut changed = false;
        for (name, defs) in &by_name {
            if k.attr.contains(*name) || k.defaults.contains(*name) {
                continue;
            }
            let is_default = defs.iter().any(|d| {
                d.params.as_ref().is_some_and(|p| p.len() == 1)
                    && d.body.trim_start().starts_with('=')
                    && !d.body.trim_start().starts_with("==")
            });
            if is_default {
                k.defaults.insert(name.to_string());
                changed = true;
                continue;
            }
            // like the preprocessor on the plain branch: one definition that just passes its
            // argument through (plus attributes) makes a wrapper
            let wrapper = defs.iter().all(|d| d.params.is_some())
                && defs.iter().any(|d| {
                    body_attr_uses(&d.body, &k.attr, d.params.as_deref().unwrap_or(&[])).is_some_and(|u| u == 1)
                });
            if wrapper {
                if !k.wrappers.contains(*name) {
                    k.wrappers.insert(name.to_string());
                    changed = true;
                }
                continue;
            }
            // empty-only object-like defines are flags or guards: only their use in code matters
            // one definition that is attributes (or nothing), the others at most unknown compiler
            // words (`_System`, `__watcall`): the preprocessor would pick one of them
            let plain = |body: &str| {
                tokenize(body).iter().all(|t| {
                    let s = t.text(body);
                    // `extern "C" {` / `}` guards count as nothing
                    (t.kind == Tok::Ident && !is_keyword(s) && !k.types.contains(s) && !is_std_type(s))
                        || s == "extern"
                        || s == "{"
                        || s == "}"
                        || t.kind == Tok::Str
                })
            };
            let all_attr = defs.iter().any(|d| body_is_attr_like(&d.body, &k.attr))
                && defs.iter().all(|d| body_is_attr_like(&d.body, &k.attr) || (d.params.is_none() && plain(&d.body)));
            let any_nonempty = defs.iter().any(|d| !d.body.trim().is_empty());
            let caps = name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if all_attr
                && (any_nonempty || defs.iter().any(|d| d.params.is_some()) || caps || looks_like_api_macro(name))
            {
                k.attr.insert(name.to_string());
                if defs.iter().any(|d| mentions_deprecated(&d.body)) {
                    k.deprecated.insert(name.to_string());
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// Names that by convention are export/calling-convention/attribute macros.
pub fn looks_like_api_macro(s: &str) -> bool {
    let caps = s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && s.chars().any(|c| c.is_ascii_uppercase());
    // `__host__`, `__cudart_builtin__`: compiler-extension style
    if s.starts_with("__") && s.ends_with("__") && s.len() > 4 {
        return true;
    }
    if !caps {
        return false;
    }
    let u = s.to_ascii_uppercase();
    const WORDS: &[&str] = &[
        "API",
        "EXPORT",
        "IMPORT",
        "CALL",
        "ENTRY",
        "VISIBILITY",
        "DECL",
        "INLINE",
        "DEPRECATED",
        "STDCALL",
        "CDECL",
        "EXTERN",
        "ATTR",
        "DLL",
        "LINKAGE",
        "PUBLIC",
        "HOST",
        "DEVICE",
        "BUILTIN",
        "CALLBACK",
        "NODISCARD",
        "WARN_UNUSED",
        "NOEXCEPT",
        "NOTHROW",
        "ALIGN",
        "PACKED",
        "SUFFIX",
        "EXPORTED",
        "VISIBLE",
        "WINAPI",
    ];
    WORDS.iter().any(|w| u.contains(w))
}

/// A position noted while neutralizing.
#[derive(Clone, Debug, PartialEq)]
pub enum MarkKind {
    Deprecated(Option<String>),
    Default(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub pos: usize,
    pub kind: MarkKind,
}

/// Result of neutralizing one file.
pub struct Neutralized {
    pub text: String,
    pub marks: Vec<Mark>,
    pub expansions: Vec<Expansion>,
}

/// Collects typedef names and struct/enum/union tags from blanked text (cheap, token level).
pub fn collect_type_names(blanked: &str, out: &mut BTreeSet<String>) {
    let toks = tokenize(blanked);
    let mut i = 0;
    while i < toks.len() {
        let s = toks[i].text(blanked);
        if TAGS.contains(&s) {
            if let Some(n) = toks.get(i + 1)
                && n.kind == Tok::Ident
                && !is_keyword(n.text(blanked))
            {
                out.insert(n.text(blanked).to_string());
            }
        } else if s == "typedef" {
            let mut depth = 0i32;
            let mut last_ident: Option<&str> = None;
            let mut j = i + 1;
            while j < toks.len() && j < i + 4000 {
                let t = toks[j].text(blanked);
                match t {
                    "{" | "(" | "[" => depth += 1,
                    "}" | ")" | "]" => depth -= 1,
                    ";" if depth <= 0 => break,
                    _ => {}
                }
                if toks[j].kind == Tok::Ident
                    && !is_keyword(t)
                    && (depth <= 0 || (depth == 1 && j > 0 && toks[j - 1].text(blanked) == "*"))
                {
                    last_ident = Some(t);
                }
                j += 1;
            }
            if let Some(n) = last_ident {
                out.insert(n.to_string());
            }
            i = j;
        }
        i += 1;
    }
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Tok(usize),
    Group(usize, usize),
    Body,
}

struct N<'a> {
    src: &'a str,
    toks: Vec<Token>,
    masked: Vec<bool>,
    /// indices of tokens that were not masked by the first pass
    v: Vec<usize>,
    k: &'a Knowledge,
    marks: Vec<Mark>,
    expansions: Vec<Expansion>,
}

impl<'a> N<'a> {
    fn t(&self, vi: usize) -> &'a str {
        let src: &'a str = self.src;
        self.v.get(vi).map(|&ti| self.toks[ti].text(src)).unwrap_or("")
    }
    fn kind(&self, vi: usize) -> Tok {
        self.v.get(vi).map(|&ti| self.toks[ti].kind).unwrap_or(Tok::Punct)
    }
    fn pos(&self, vi: usize) -> usize {
        self.v.get(vi).map(|&ti| self.toks[ti].start).unwrap_or(0)
    }
    fn mask_v(&mut self, from: usize, to: usize) {
        for vi in from..=to {
            if let Some(&ti) = self.v.get(vi) {
                self.masked[ti] = true;
            }
        }
    }
    fn is_masked(&self, vi: usize) -> bool {
        self.v.get(vi).map(|&ti| self.masked[ti]).unwrap_or(true)
    }
    /// Matching close of the group opened at view index `open`.
    fn close_v(&self, open: usize, end: usize) -> usize {
        let (o, c) = match self.t(open) {
            "(" => ("(", ")"),
            "[" => ("[", "]"),
            _ => ("{", "}"),
        };
        let mut depth = 0usize;
        let mut k = open;
        while k < end {
            let s = self.t(k);
            if s == o {
                depth += 1;
            } else if s == c {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            k += 1;
        }
        end.saturating_sub(1).max(open)
    }

    fn message_in(&self, from: usize, to: usize) -> Option<String> {
        let mut msg = String::new();
        let mut found = false;
        for vi in from..=to {
            if self.kind(vi) == Tok::Str {
                msg.push_str(&unquote(self.t(vi)));
                found = true;
            } else if found {
                break;
            }
        }
        found.then_some(msg)
    }

    fn mark_attr(&mut self, name_vi: usize, end_vi: usize) {
        let name = self.t(name_vi);
        let text_has = (name_vi..=end_vi).any(|k| mentions_deprecated(self.t(k)));
        if self.k.deprecated.contains(name) || text_has {
            let msg = self.message_in(name_vi, end_vi);
            let pos = self.pos(name_vi);
            self.marks.push(Mark { pos, kind: MarkKind::Deprecated(msg) });
        }
        self.mask_v(name_vi, end_vi);
    }

    /// First pass: known macros, attribute keywords, `[[...]]`.
    fn known_pass(&mut self) {
        let n = self.v.len();
        let mut vi = 0;
        while vi < n {
            let s = self.t(vi);
            let kind = self.kind(vi);
            if kind == Tok::Ident
                && (ATTR_KEYWORDS.contains(&s)
                    || self.k.attr.contains(s)
                    || self.k.deprecated.contains(s)
                    || self.k.defaults.contains(s))
            {
                let mut end = vi;
                if self.t(vi + 1) == "(" {
                    end = self.close_v(vi + 1, n);
                }
                if self.k.defaults.contains(s) && end > vi + 1 {
                    let from = self.pos(vi + 2);
                    let to = self.v.get(end).map(|&ti| self.toks[ti].start).unwrap_or(from);
                    let val = crate::lex::normalize(self.src.get(from..to).unwrap_or(""));
                    let pos = self.pos(vi);
                    self.marks.push(Mark { pos, kind: MarkKind::Default(val) });
                    self.mask_v(vi, end);
                } else {
                    self.mark_attr(vi, end);
                }
                vi = end + 1;
                continue;
            }
            if kind == Tok::Ident && self.k.wrappers.contains(s) && self.t(vi + 1) == "(" {
                let close = self.close_v(vi + 1, n);
                self.mask_v(vi, vi + 1);
                self.mask_v(close, close);
                vi += 2;
                continue;
            }
            if s == "[" && self.t(vi + 1) == "[" {
                let end = self.close_v(vi, n);
                self.mark_attr(vi, end);
                vi = end + 1;
                continue;
            }
            vi += 1;
        }
    }

    fn rebuild_view(&mut self) {
        self.v = (0..self.toks.len()).filter(|&i| !self.masked[i]).collect();
    }

    /// Second pass: statements and bodies, applying positional heuristics.
    fn scope(&mut self, mut i: usize, end: usize, depth: usize) {
        if depth > 200 {
            return;
        }
        while i < end {
            let mut items: Vec<Item> = Vec::new();
            while i < end {
                let s = self.t(i);
                if s == ";" {
                    i += 1;
                    break;
                }
                if s == "}" {
                    i += 1;
                    break;
                }
                if s == "(" || s == "[" {
                    let c = self.close_v(i, end);
                    items.push(Item::Group(i, c));
                    i = c + 1;
                    continue;
                }
                if s == "{" {
                    let c = self.close_v(i, end);
                    match self.block_kind(&items) {
                        Block::Enum => {
                            self.enum_body(i + 1, c);
                            items.push(Item::Body);
                            i = c + 1;
                            continue;
                        }
                        Block::Aggregate => {
                            self.scope(i + 1, c, depth + 1);
                            items.push(Item::Body);
                            i = c + 1;
                            continue;
                        }
                        Block::Scope => {
                            self.scope(i + 1, c, depth + 1);
                            i = c + 1;
                            items.clear();
                            break;
                        }
                        Block::Code => {
                            self.analyze(&items);
                            items.clear();
                            i = c + 1;
                            break;
                        }
                        Block::Init => {
                            items.push(Item::Body);
                            i = c + 1;
                            continue;
                        }
                    }
                }
                items.push(Item::Tok(i));
                i += 1;
            }
            if !items.is_empty() {
                self.analyze(&items);
            }
        }
    }

    fn block_kind(&self, items: &[Item]) -> Block {
        let texts: Vec<&str> = items
            .iter()
            .map(|it| match it {
                Item::Tok(k) => self.t(*k),
                Item::Group(o, _) => {
                    if self.t(*o) == "(" {
                        "()"
                    } else {
                        "[]"
                    }
                }
                Item::Body => "{}",
            })
            .collect();
        if texts.contains(&"=") {
            return Block::Init;
        }
        if texts.contains(&"namespace")
            || (texts.first() == Some(&"extern")
                && items.len() == 2
                && matches!(items[1], Item::Tok(k) if self.kind(k) == Tok::Str))
        {
            return Block::Scope;
        }
        if items.is_empty() {
            return Block::Scope;
        }
        // a body right after a parameter list (or its const/noexcept/override suffix) is code
        let mut last = texts.len();
        while last > 0 && matches!(texts[last - 1], "const" | "noexcept" | "override" | "final" | "volatile") {
            last -= 1;
        }
        if last > 0 && texts[last - 1] == "()" {
            return Block::Code;
        }
        match texts.iter().position(|t| TAGS.contains(t)) {
            Some(tp) if texts[tp] == "enum" => Block::Enum,
            Some(_) => Block::Aggregate,
            None => Block::Code,
        }
    }

    fn enum_body(&mut self, from: usize, to: usize) {
        let mut i = from;
        while i < to {
            // one enumerator: name [junk] [= value] ,
            let start = i;
            let mut depth = 0i32;
            let mut eq: Option<usize> = None;
            let mut j = i;
            while j < to {
                let s = self.t(j);
                match s {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth -= 1,
                    "," if depth <= 0 => break,
                    "=" if depth <= 0 && eq.is_none() => eq = Some(j),
                    _ => {}
                }
                j += 1;
            }
            let stop = eq.unwrap_or(j);
            if self.heuristic() && stop > start + 1 && self.kind(start) == Tok::Ident {
                let junk_from = start + 1;
                let junk_to = stop - 1;
                if (junk_from..=junk_to).all(|k| !self.is_masked(k)) {
                    self.mark_attr(junk_from, junk_to);
                }
            }
            i = j + 1;
        }
    }

    fn heuristic(&self) -> bool {
        self.k.heuristics
    }

    fn type_score(&self, s: &str) -> i32 {
        if self.k.types.contains(s) || is_std_type(s) {
            return 4;
        }
        if s.starts_with("__") && s.ends_with("__") {
            return -3;
        }
        if looks_like_api_macro(s) {
            return -2;
        }
        if s.ends_with("_t") || s.ends_with("_T") {
            return 2;
        }
        if s.chars().any(|c| c.is_ascii_lowercase()) {
            return 1;
        }
        0
    }

    /// Masks all but one "type" identifier in a declaration head.
    fn classify_head(&mut self, head: &[usize]) {
        let mut idents: Vec<usize> = Vec::new();
        let mut has_builtin = false;
        let mut k = 0;
        while k < head.len() {
            let vi = head[k];
            let s = self.t(vi);
            if TAGS.contains(&s) {
                has_builtin = true;
                k += 2; // skip the tag name
                continue;
            }
            if BUILTIN_TYPES.contains(&s) {
                has_builtin = true;
            } else if self.kind(vi) == Tok::Ident && !is_keyword(s) {
                // qualified names a::b count as one
                let next = head.get(k + 1).map(|&n| self.t(n));
                let prev = k.checked_sub(1).and_then(|p| head.get(p)).map(|&p| self.t(p));
                if next != Some("::") && prev != Some("::") {
                    idents.push(vi);
                }
            }
            k += 1;
        }
        if idents.is_empty() {
            return;
        }
        let keep = if has_builtin {
            None
        } else {
            let mut best: Option<(i32, usize)> = None;
            for &vi in &idents {
                let sc = self.type_score(self.t(vi));
                if best.is_none_or(|(b, _)| sc >= b) {
                    best = Some((sc, vi));
                }
            }
            best.map(|(_, vi)| vi)
        };
        for vi in idents {
            if Some(vi) != keep {
                self.mark_attr(vi, vi);
            }
        }
    }

    /// Leading invocations of declaration macros (`M(a);` or, without semicolons,
    /// `M(a) M(b) int f(void)`): each is expanded and parsed on its own. Returns how many items
    /// were consumed.
    fn expand_decl_macros(&mut self, items: &[Item]) -> usize {
        let mut n = 0;
        while let (Some(Item::Tok(t)), Some(Item::Group(o, _))) = (items.get(n), items.get(n + 1)) {
            let name = self.t(*t);
            let is_decl_macro = self.t(*o) == "("
                && self.k.decl_macros.contains_key(name)
                && !self.k.attr.contains(name)
                && !self.k.wrappers.contains(name)
                && !self.k.defaults.contains(name);
            // `M(x) y` with `y` not another invocation would be a wrapper or a head: stop unless
            // the rest is a new declaration or nothing
            if !is_decl_macro {
                break;
            }
            n += 2;
        }
        if n == 0 {
            return 0;
        }
        // a lone `M(x)` followed by more tokens is only an invocation if the macro declares
        // something on its own (its body ends a declaration)
        if n < items.len() {
            let ends_decl = |k: usize| {
                let Item::Tok(t) = items[k] else { return false };
                let body = self.k.decl_macros.get(self.t(t)).map(|d| d.body.trim_end().to_string()).unwrap_or_default();
                body.ends_with(';') || body.ends_with('}')
            };
            if !(0..n).step_by(2).all(ends_decl) {
                return 0;
            }
        }
        for k in (0..n).step_by(2) {
            self.expand_decl_macro(&items[k..k + 2]);
        }
        n
    }

    fn expand_decl_macro(&mut self, items: &[Item]) -> bool {
        let (Some(Item::Tok(n)), Some(Item::Group(o, c))) = (items.first(), items.get(1)) else {
            return false;
        };
        let (n, o, c) = (*n, *o, *c);
        if items.len() != 2 || self.t(o) != "(" {
            return false;
        }
        let name = self.t(n);
        if self.k.attr.contains(name) || self.k.wrappers.contains(name) || self.k.defaults.contains(name) {
            return false;
        }
        let Some(def) = self.k.decl_macros.get(name) else { return false };
        let params = def.params.clone().unwrap_or_default();
        let mut args: Vec<String> = Vec::new();
        let mut depth = 0i32;
        let mut cur_start = self.pos(o) + 1;
        let src = self.src;
        for k in o + 1..=c {
            let s = self.t(k);
            match s {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" if k != c => depth -= 1,
                _ => {}
            }
            if (s == "," && depth == 0) || k == c {
                args.push(src.get(cur_start..self.pos(k)).unwrap_or("").to_string());
                cur_start = self.pos(k) + 1;
            }
        }
        if args.len() != params.len() {
            return false;
        }
        let body = def.body.clone();
        let btoks = tokenize(&body);
        let mut text = String::new();
        let mut glue = false;
        let mut stringify = false;
        for t in &btoks {
            let s = t.text(&body);
            if s == "##" {
                while text.ends_with(' ') {
                    text.pop();
                }
                glue = true;
                continue;
            }
            if s == "#" {
                stringify = true;
                continue;
            }
            let piece = match params.iter().position(|p| p == s) {
                Some(i) if stringify => format!("\"{}\"", args[i].trim().replace('"', "\\\"")),
                Some(i) if glue => args[i].trim().to_string(),
                Some(i) => args[i].clone(),
                None => s.to_string(),
            };
            text.push_str(&piece);
            text.push(' ');
            glue = false;
            stringify = false;
        }
        let pos = self.pos(n);
        text.push_str(" ;");
        self.expansions.push(Expansion { pos, text });
        self.mask_v(n, c);
        true
    }

    fn analyze(&mut self, items: &[Item]) {
        if items.is_empty() {
            return;
        }
        let consumed = self.expand_decl_macros(items);
        let items = &items[consumed..];
        if items.is_empty() {
            return;
        }
        if !self.heuristic() {
            return;
        }
        // only the part before a depth-0 `=` is a declaration head
        // only the part before a depth-0 `=` (or a constructor's `) :` initializer list) is a head
        let cut = items
            .iter()
            .enumerate()
            .position(|(w, it)| match it {
                Item::Tok(k) if self.t(*k) == "=" => true,
                Item::Tok(k) if self.t(*k) == ":" => {
                    w > 0 && matches!(items[w - 1], Item::Group(o, _) if self.t(o) == "(")
                }
                _ => false,
            })
            .unwrap_or(items.len());
        let mut items: Vec<Item> = self.unwrap_wrappers(&items[..cut]);
        // (a) IDENT("str") / IDENT((..)) / IDENT(number): never a declarator
        let mut k = 0;
        while k + 1 < items.len() {
            if let (Item::Tok(n), Item::Group(o, c)) = (items[k], items[k + 1])
                && self.kind(n) == Tok::Ident
                && !is_keyword(self.t(n))
                && self.t(o) == "("
                && c > o + 1
            {
                let inner_kinds: Vec<Tok> = (o + 1..c).map(|x| self.kind(x)).collect();
                let all_lit = inner_kinds.iter().all(|t| matches!(t, Tok::Str | Tok::Number))
                    || (inner_kinds.iter().all(|t| matches!(t, Tok::Str | Tok::Number | Tok::Punct))
                        && inner_kinds.contains(&Tok::Str));
                let double = self.t(o + 1) == "(";
                if all_lit || double {
                    self.mark_attr(n, c);
                    items.drain(k..k + 2);
                    continue;
                }
            }
            k += 1;
        }
        items.retain(|it| match it {
            Item::Tok(k) => !self.is_masked(*k),
            _ => true,
        });
        // (e) `( M * name ) (` : calling convention inside a function-pointer declarator
        for w in 0..items.len().saturating_sub(1) {
            if let (Item::Group(o, c), Item::Group(o2, _)) = (items[w], items[w + 1])
                && self.t(o) == "("
                && self.t(o2) == "("
            {
                let mut x = o + 1;
                while x < c && self.kind(x) == Tok::Ident && !is_keyword(self.t(x)) {
                    x += 1;
                }
                if x > o + 1 && x < c && matches!(self.t(x), "*" | "^" | "&") {
                    for m in o + 1..x {
                        self.mark_attr(m, m);
                    }
                }
            }
        }
        // candidates: IDENT ( ... ) at depth 0
        let mut cands: Vec<(usize, usize)> = Vec::new(); // (item index of name, item index of group)
        for w in 0..items.len().saturating_sub(1) {
            if let (Item::Tok(n), Item::Group(o, _)) = (items[w], items[w + 1]) {
                // `type (name)(args)`: a parenthesized declarator, not a call
                let paren_decl = matches!(items.get(w + 2), Some(Item::Group(o2, _)) if self.t(*o2) == "(")
                    && matches!(items[w + 1], Item::Group(o, c) if c == o + 2 && self.kind(o + 1) == Tok::Ident);
                if self.kind(n) == Tok::Ident && !is_keyword(self.t(n)) && self.t(o) == "(" && !paren_decl {
                    cands.push((w, w + 1));
                }
            }
        }
        if let Some(&first) = cands.first() {
            let mut f = first;
            for &next in &cands[1..] {
                if next.0 > f.1 + 1 {
                    // tokens between: f was a head macro
                    let (n, g) = (items[f.0], items[f.1]);
                    if let (Item::Tok(n), Item::Group(_, c)) = (n, g) {
                        self.mark_attr(n, c);
                    }
                    f = next;
                } else if let (Item::Tok(n), Item::Group(_, c)) = (items[next.0], items[next.1]) {
                    self.mark_attr(n, c);
                }
            }
            // suffix after the parameter list
            let mut w = f.1 + 1;
            while w < items.len() {
                match items[w] {
                    Item::Tok(t) => {
                        let s = self.t(t);
                        let keep = matches!(
                            s,
                            "const"
                                | "noexcept"
                                | "override"
                                | "final"
                                | "throw"
                                | "volatile"
                                | "&"
                                | "&&"
                                | "->"
                                | ","
                                | "try"
                        ) || self.kind(t) != Tok::Ident;
                        if !keep && !self.is_masked(t) {
                            let end = match items.get(w + 1) {
                                Some(Item::Group(o, c)) if self.t(*o) == "(" => {
                                    w += 1;
                                    *c
                                }
                                _ => t,
                            };
                            self.mark_attr(t, end);
                        }
                        if s == "," || s == "->" {
                            break;
                        }
                    }
                    Item::Group(..) | Item::Body => {}
                }
                w += 1;
            }
            // head
            let head = self.head_tokens(&items[..f.0]);
            self.classify_head(&head);
            // parameters: `type name MACRO(x)` -> MACRO(x) is not part of a declarator
            if let Item::Group(o, c) = items[f.1] {
                self.params(o, c);
            }
            return;
        }
        // no function: tags, then a declaration head
        let has_paren_group = items.iter().any(|it| matches!(it, Item::Group(o, _) if self.t(*o) == "("));
        let flat: Vec<usize> = items
            .iter()
            .filter_map(|it| match it {
                Item::Tok(k) => Some(*k),
                _ => None,
            })
            .collect();
        // identifiers right before struct/enum/union are macros
        for (w, &vi) in flat.iter().enumerate() {
            if TAGS.contains(&self.t(vi)) {
                let mut b = w;
                while b > 0 {
                    let p = flat[b - 1];
                    if self.kind(p) == Tok::Ident && !is_keyword(self.t(p)) && !self.is_masked(p) {
                        self.mark_attr(p, p);
                        b -= 1;
                    } else {
                        break;
                    }
                }
            }
        }
        // runs of identifiers after a tag keyword
        for (w, it) in items.iter().enumerate() {
            let Item::Tok(vi) = *it else { continue };
            if !TAGS.contains(&self.t(vi)) {
                continue;
            }
            let mut run = Vec::new();
            let mut x = w + 1;
            while let Some(Item::Tok(k)) = items.get(x) {
                if self.kind(*k) == Tok::Ident && !is_keyword(self.t(*k)) && !self.is_masked(*k) {
                    run.push(*k);
                    x += 1;
                } else {
                    break;
                }
            }
            let follow_body = matches!(items.get(x), Some(Item::Body));
            let follow_star = matches!(items.get(x), Some(Item::Tok(k)) if self.t(*k) == "*");
            let keep = if follow_body || follow_star { 1 } else { 2 };
            if run.len() > keep {
                for &m in &run[..run.len() - keep] {
                    self.mark_attr(m, m);
                }
            }
        }
        if has_paren_group {
            return;
        }
        // declaration head: name is the last identifier before `[`, `:`, `,` or the end
        let mut name_at: Option<usize> = None;
        for it in &items {
            match it {
                Item::Tok(k) => {
                    let s = self.t(*k);
                    if s == ":" || s == "," {
                        break;
                    }
                    if self.kind(*k) == Tok::Ident && !is_keyword(s) && !self.is_masked(*k) {
                        name_at = Some(*k);
                    }
                }
                Item::Group(o, _) if self.t(*o) == "[" => break,
                Item::Body => {
                    name_at = None;
                }
                _ => {}
            }
        }
        let Some(name) = name_at else { return };
        let head: Vec<usize> =
            flat.iter().copied().take_while(|&k| k != name).filter(|&k| !self.is_masked(k)).collect();
        // only after the last body (a struct's closing brace) does the head restart
        let last_body = items.iter().rposition(|it| matches!(it, Item::Body));
        if last_body.is_some() {
            return;
        }
        self.classify_head(&head);
    }

    /// Items of the tokens `from..to` (groups kept whole).
    fn itemize(&self, from: usize, to: usize) -> Vec<Item> {
        let mut out = Vec::new();
        let mut k = from;
        while k < to {
            if matches!(self.t(k), "(" | "[") {
                let c = self.close_v(k, to).min(to.saturating_sub(1)).max(k);
                out.push(Item::Group(k, c));
                k = c + 1;
            } else {
                out.push(Item::Tok(k));
                k += 1;
            }
        }
        out
    }

    /// Return-type and prototype wrappers nobody defined for us:
    /// `EXPORT(type) name(args)`, `EXPORT(type) variable;`, `type name PROTO((args));`.
    fn unwrap_wrappers(&mut self, items: &[Item]) -> Vec<Item> {
        if !self.heuristic() {
            return items.to_vec();
        }
        let mut items = items.to_vec();
        // leading wrapper, after storage keywords
        let mut s = 0;
        while let Some(Item::Tok(k)) = items.get(s) {
            if matches!(self.t(*k), "extern" | "static" | "inline" | "const") || self.kind(*k) == Tok::Str {
                s += 1;
            } else {
                break;
            }
        }
        if let (Some(Item::Tok(n)), Some(Item::Group(o, c)), Some(Item::Tok(after))) =
            (items.get(s).copied(), items.get(s + 1).copied(), items.get(s + 2).copied())
            && self.kind(n) == Tok::Ident
            && !is_keyword(self.t(n))
            && self.t(o) == "("
            && self.kind(after) == Tok::Ident
            && !matches!(self.t(after), "const" | "noexcept" | "override" | "final")
            && c > o + 1
            && !mentions_deprecated(self.t(n))
            && (o + 1..c).all(|x| !matches!(self.kind(x), Tok::Str | Tok::Number | Tok::Char))
            && (o + 1..c).any(|x| self.kind(x) == Tok::Ident)
        {
            self.mask_v(n, o);
            self.mask_v(c, c);
            let inner = self.itemize(o + 1, c);
            items.splice(s..s + 2, inner);
        }
        // trailing prototype wrapper: `name PROTO((args))`
        let len = items.len();
        if len >= 3
            && let (Item::Tok(a), Item::Tok(b), Item::Group(o, c)) = (items[len - 3], items[len - 2], items[len - 1])
        {
            let double = self.t(o) == "(" && self.t(o + 1) == "(" && self.close_v(o + 1, c + 1) + 1 == c;
            if double
                && self.kind(a) == Tok::Ident
                && self.kind(b) == Tok::Ident
                && !is_keyword(self.t(b))
                && !ATTR_KEYWORDS.contains(&self.t(b))
                && !self.k.attr.contains(self.t(b))
                && !mentions_deprecated(self.t(b))
            {
                self.mask_v(b, o);
                self.mask_v(c, c);
                items.truncate(len - 2);
                items.push(Item::Group(o + 1, c - 1));
            }
        }
        items
    }

    fn head_tokens(&self, items: &[Item]) -> Vec<usize> {
        items
            .iter()
            .filter_map(|it| match it {
                Item::Tok(k) if !self.is_masked(*k) => Some(*k),
                _ => None,
            })
            .collect()
    }

    fn params(&mut self, o: usize, c: usize) {
        let mut start = o + 1;
        let mut depth = 0i32;
        let mut k = o + 1;
        while k <= c {
            let s = self.t(k);
            match s {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" if k != c => depth -= 1,
                _ => {}
            }
            if (s == "," && depth == 0) || k == c {
                self.param(start, k);
                start = k + 1;
            }
            k += 1;
        }
    }

    fn param(&mut self, from: usize, to: usize) {
        // `void (CALLBACK *fn)(...)`: a calling convention inside a function-pointer parameter
        let mut k = from;
        while k < to {
            if self.t(k) == "(" {
                let mut x = k + 1;
                while x < to && self.kind(x) == Tok::Ident && !is_keyword(self.t(x)) && !self.is_masked(x) {
                    x += 1;
                }
                if x > k + 1 && matches!(self.t(x), "*" | "^" | "&") {
                    let close = self.close_v(k, to + 1);
                    if self.t(close + 1) == "(" {
                        for m in k + 1..x {
                            self.mark_attr(m, m);
                        }
                    }
                }
            }
            k += 1;
        }
        // `... name IDENT(..)` at the end, or `IDENT("..")` anywhere
        let toks: Vec<usize> = (from..to).filter(|&k| !self.is_masked(k)).collect();
        if toks.len() >= 3 {
            let n = toks.len();
            if self.t(toks[n - 1]) == ")" {
                // find the open of the trailing group
                let mut depth = 0i32;
                let mut open = None;
                for idx in (0..n).rev() {
                    match self.t(toks[idx]) {
                        ")" => depth += 1,
                        "(" => {
                            depth -= 1;
                            if depth == 0 {
                                open = Some(idx);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(op) = open
                    && op >= 2
                {
                    let m = toks[op - 1];
                    let before = toks[op - 2];
                    if self.kind(m) == Tok::Ident
                        && !is_keyword(self.t(m))
                        && self.kind(before) == Tok::Ident
                        && !is_keyword(self.t(before))
                    {
                        self.mark_attr(m, toks[n - 1]);
                    }
                }
            }
        }
        // a parameter head with several non-keyword identifiers before the name
        let toks: Vec<usize> = (from..to).filter(|&k| !self.is_masked(k)).collect();
        if toks.iter().any(|&k| matches!(self.t(k), "(" | "=" | "[")) {
            return;
        }
        let idents: Vec<usize> = toks.iter().copied().filter(|&k| self.kind(k) == Tok::Ident).collect();
        if idents.len() >= 3 {
            let head: Vec<usize> = toks.iter().copied().take_while(|k| Some(k) != idents.last()).collect();
            let plain: Vec<usize> =
                head.iter().copied().filter(|&k| self.kind(k) == Tok::Ident && !is_keyword(self.t(k))).collect();
            if plain.len() >= 2 {
                let h = head.clone();
                self.classify_head(&h);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Block {
    Enum,
    Aggregate,
    Scope,
    Code,
    Init,
}

/// Neutralizes macros in `blanked` (directives already removed).
pub fn neutralize(blanked: &str, k: &Knowledge) -> Neutralized {
    let toks = tokenize(blanked);
    let n = toks.len();
    let mut st = N {
        src: blanked,
        toks,
        masked: vec![false; n],
        v: (0..n).collect(),
        k,
        marks: Vec::new(),
        expansions: Vec::new(),
    };
    st.known_pass();
    st.rebuild_view();
    let len = st.v.len();
    st.scope(0, len, 0);
    let mut out = blanked.as_bytes().to_vec();
    for (i, t) in st.toks.iter().enumerate() {
        if st.masked[i] {
            blank(&mut out, t.start, t.end);
        }
    }
    let text = String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let mut marks = st.marks;
    marks.sort_by_key(|m| m.pos);
    marks.dedup();
    Neutralized { text, marks, expansions: st.expansions }
}

/// Expands object-like macros that stand for declarations (bodies with `;`) in place. The
/// expansion never contains a newline, so line numbers stay those of the original text.
pub fn inline_expand(blanked: &str, k: &Knowledge) -> String {
    if k.inline_macros.is_empty() {
        return blanked.to_string();
    }
    fn expand(name: &str, k: &Knowledge, depth: usize, out: &mut String) {
        let Some(body) = k.inline_macros.get(name) else {
            out.push_str(name);
            return;
        };
        if depth > 8 || out.len() > 1 << 20 {
            return;
        }
        for t in tokenize(body) {
            let s = t.text(body);
            if t.kind == Tok::Ident && k.inline_macros.contains_key(s) && s != name {
                expand(s, k, depth + 1, out);
            } else {
                out.push_str(&s.replace(['\n', '\r'], " "));
            }
            out.push(' ');
        }
    }
    let toks = tokenize(blanked);
    let mut out = String::with_capacity(blanked.len());
    let mut last = 0;
    for t in toks {
        let s = t.text(blanked);
        if t.kind == Tok::Ident && k.inline_macros.contains_key(s) {
            out.push_str(blanked.get(last..t.start).unwrap_or(""));
            expand(s, k, 0, &mut out);
            last = t.end;
        }
    }
    out.push_str(blanked.get(last..).unwrap_or(""));
    out
}
