//! Text helpers: masking of export / attribute macros before tree-sitter sees the source, whitespace
//! normalization of C++ fragments, and a stable hash.

/// Macros that expand to nothing or to attributes in a normal build and that tree-sitter-cpp would
/// otherwise read as a type or a class name (`struct TORCH_API Foo` parses as a struct named
/// `TORCH_API`). Besides these, every identifier ending in `_API`, `_EXPORT`, `_IMPORT` or
/// `_VISIBILITY` is masked.
const MASKED: &[&str] = &[
    "C10_NODISCARD",
    "C10_ALWAYS_INLINE",
    "C10_ALWAYS_INLINE_UNLESS_MOBILE",
    "C10_HOST_DEVICE",
    "C10_HOST",
    "C10_DEVICE",
    "C10_NOINLINE",
    "C10_UNUSED",
    "C10_DEPRECATED",
    "C10_HIDDEN",
    "C10_ALWAYS_INLINE_ATTRIBUTE",
    "C10_ATTR_VISIBILITY_HIDDEN",
    "TORCH_UNUSED_EXCEPT_CUDA",
    "C10_LAUNCH_BOUNDS_0",
    "AT_ERROR_NORETURN",
];

/// Macros with an argument list that are attributes (`C10_DEPRECATED_MESSAGE("use ...")`): the name
/// and its parenthesized arguments are masked.
const MASKED_CALLS: &[&str] =
    &["C10_DEPRECATED_MESSAGE", "C10_DEPRECATED_USING", "C10_LAUNCH_BOUNDS_1", "C10_LAUNCH_BOUNDS_2"];

fn is_masked(word: &str) -> bool {
    MASKED.contains(&word)
        || ["_API", "_EXPORT", "_IMPORT", "_VISIBILITY"].iter().any(|s| {
            word.len() > s.len()
                && word.ends_with(s)
                && word.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// Replaces masked macros with spaces of the same length (byte offsets, lines and columns are kept).
/// Comments, string and character literals and preprocessor lines are left as they are.
pub fn mask(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if line_start && (c == b' ' || c == b'\t') {
            i += 1;
            continue;
        }
        if line_start && c == b'#' {
            // a directive, with its continuation lines; conditionals are blanked (both branches are
            // read: tree-sitter cannot parse a class or namespace whose braces an `#if` splits, and
            // PyTorch 2.15 wraps whole headers in one)
            let d0 = i;
            let conditional = is_conditional(&b[i..]);
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && i + 1 < b.len() && b[i + 1] == b'\n' {
                    i += 2;
                    continue;
                }
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    i = skip_block_comment(b, i);
                    continue;
                }
                i += 1;
            }
            if conditional {
                blank(&mut out[d0..i]);
            }
            continue;
        }
        line_start = false;
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = skip_block_comment(b, i);
            continue;
        }
        if c == b'"' || c == b'\'' {
            i = skip_literal(b, i);
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // raw string literal R"delim(...)delim"
            if i < b.len() && b[i] == b'"' && matches!(&src[s..i], "R" | "LR" | "uR" | "UR" | "u8R") {
                i = skip_raw(b, i);
                continue;
            }
            let word = &src[s..i];
            if is_masked(word) {
                out[s..i].fill(b' ');
            } else if MASKED_CALLS.contains(&word) {
                let mut j = i;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                if j < b.len() && b[j] == b'(' {
                    let end = matching_paren(b, j);
                    blank(&mut out[s..end]);
                    i = end;
                } else {
                    out[s..i].fill(b' ');
                }
            }
            continue;
        }
        i += 1;
    }
    // only ASCII bytes were replaced by ASCII spaces, and only whole identifiers or balanced groups
    String::from_utf8(out).unwrap_or_else(|_| src.to_string())
}

/// Whether the directive starting at `b` (at its `#`) is a conditional: `#if`, `#ifdef`, `#ifndef`,
/// `#elif`, `#elifdef`, `#elifndef`, `#else`, `#endif`.
fn is_conditional(b: &[u8]) -> bool {
    let mut j = 1;
    while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
        j += 1;
    }
    let mut k = j;
    while k < b.len() && b[k].is_ascii_alphabetic() {
        k += 1;
    }
    matches!(&b[j..k], b"if" | b"ifdef" | b"ifndef" | b"elif" | b"elifdef" | b"elifndef" | b"else" | b"endif")
}

/// The preprocessor condition each line is under (index 0 is line 1): the `#if` texts around it
/// joined by ` && `, an `#else` branch as `!(cond)`; include guards and PyTorch's whole-file
/// `!defined(TORCH_STABLE_ONLY)` wrapper are left out. Empty when unconditional.
pub fn line_conditions(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<Option<String>> = Vec::new();
    let mut lines = src.split('\n').peekable();
    let mut cur = String::new();
    let mut pending_guard: Option<String> = None;
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        let mut full = t.to_string();
        let mut extra = 0;
        if t.starts_with('#') {
            let mut last = l;
            while last.trim_end().ends_with('\\') {
                match lines.next() {
                    Some(n) => {
                        full.push(' ');
                        full.push_str(n.trim());
                        last = n;
                        extra += 1;
                    }
                    None => break,
                }
            }
            let body = full[1..].trim_start();
            let word: String = body.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            let rest = norm(body[word.len()..].split("//").next().unwrap_or(""));
            match word.as_str() {
                "if" | "ifdef" | "ifndef" => {
                    let c = match word.as_str() {
                        "ifdef" => format!("defined({rest})"),
                        "ifndef" => format!("!defined({rest})"),
                        _ => rest.clone(),
                    };
                    let wrapper = c.contains("TORCH_STABLE_ONLY") && c.contains("TORCH_TARGET_VERSION");
                    if word == "ifndef" {
                        pending_guard = Some(rest.clone());
                    }
                    stack.push(if wrapper { None } else { Some(c) });
                }
                "elif" | "elifdef" | "elifndef" => {
                    if let Some(top) = stack.last_mut() {
                        *top = Some(rest.clone());
                    }
                }
                "else" => {
                    if let Some(top) = stack.last_mut() {
                        *top = top.as_ref().map(|c| format!("!({c})"));
                    }
                }
                "endif" => {
                    stack.pop();
                }
                "define" => {
                    // `#ifndef X` + `#define X`: an include guard, not a condition
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if pending_guard.as_deref() == Some(name.as_str())
                        && let Some(top) = stack.last_mut()
                    {
                        *top = None;
                    }
                }
                _ => {}
            }
            if word != "ifndef" {
                pending_guard = None;
            }
            cur = stack.iter().flatten().cloned().collect::<Vec<_>>().join(" && ");
            for _ in 0..=extra {
                out.push(cur.clone());
            }
            continue;
        }
        if !t.is_empty() {
            pending_guard = None;
        }
        out.push(cur.clone());
    }
    out
}

/// Blanks the bodies of functions that are not virtual (contents become spaces, newlines and braces
/// kept): the scan needs the bodies of virtual members only (does the default throw; rename
/// detection), and tree-sitter's time is mostly spent in bodies. A `{` opens a function body when the
/// last token before it (past `const`, `noexcept(...)`, `override`, `final`, `&`, `&&`, `-> type`)
/// is the `)` of a parameter list; the body is kept when the declaration before that list says
/// `virtual`, or its qualifiers say `override` / `final`. Comments, literals and directives are
/// skipped; offsets and lines do not move.
pub fn blank_plain_bodies(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let mut line_start = true;
    // start of the current declaration (after the last `;`, `{`, `}` or access label)
    let mut decl_start = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if line_start && (c == b' ' || c == b'\t') {
            i += 1;
            continue;
        }
        if line_start && c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                    i += 2;
                    continue;
                }
                i += 1;
            }
            continue;
        }
        line_start = false;
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = skip_block_comment(b, i);
                continue;
            }
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                continue;
            }
            b';' | b'}' => decl_start = i + 1,
            b'{' => {
                if let Some(keep) = function_body_kind(src, decl_start, i) {
                    let end = matching_brace(b, i);
                    if !keep && end > i + 1 {
                        blank(&mut out[i + 1..end - 1]);
                    }
                    i = end.max(i + 1);
                    decl_start = i;
                    continue;
                }
                decl_start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| src.to_string())
}

/// For the `{` at `open`: `None` when it does not open a function body; `Some(true)` when the body is
/// a virtual member's (keep it), `Some(false)` otherwise.
fn function_body_kind(src: &str, decl_start: usize, open: usize) -> Option<bool> {
    let head = src.get(decl_start..open)?;
    let head = strip_comments(head);
    let t = head.trim_end();
    // walk back over qualifiers to the `)` of the parameter list
    let mut end = t.len();
    let mut quals = String::new();
    loop {
        let s = t[..end].trim_end();
        end = s.len();
        if s.ends_with(')') {
            // noexcept(...) is a qualifier, not the parameter list
            let open_p = matching_open(s.as_bytes(), end - 1)?;
            let before = s[..open_p].trim_end();
            if let Some(kw) = ["noexcept", "throw", "requires"]
                .into_iter()
                .find(|k| before.ends_with(k) && !before[..before.len() - k.len()].chars().last().is_some_and(is_word))
            {
                quals.push(' ');
                quals.push_str(kw);
                end = before.len() - kw.len();
                continue;
            }
            let decl = &s[..open_p];
            // a control statement or a lambda is not a member function
            let word: String =
                decl.trim_end().chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if matches!(word.as_str(), "fi" | "rof" | "elihw" | "hctiws" | "hctac") || decl.trim_end().ends_with(']') {
                return None;
            }
            let virt = has_word(decl, "virtual") || has_word(&quals, "override") || has_word(&quals, "final");
            return Some(virt);
        }
        // a qualifier word or token
        let w: String = s.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '&').collect();
        let w: String = w.chars().rev().collect();
        match w.as_str() {
            "const" | "override" | "final" | "noexcept" | "volatile" | "&" | "&&" | "mutable" => {
                quals.push(' ');
                quals.push_str(&w);
                end -= w.len();
            }
            _ => {
                // `-> Type`: a trailing return type
                if let Some(p) = s.rfind("->")
                    && s[..p].trim_end().ends_with(|c: char| c == ')' || c.is_ascii_alphabetic())
                    && !s[p..].contains('(')
                {
                    end = p;
                    continue;
                }
                return None;
            }
        }
    }
}

fn has_word(s: &str, w: &str) -> bool {
    s.match_indices(w).any(|(i, _)| {
        let before = s[..i].chars().last();
        let after = s[i + w.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// The index of the `(` matching the `)` at `close` (comments already blanked).
fn matching_open(b: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = close + 1;
    while i > 0 {
        i -= 1;
        match b[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index just past the brace closing the one at `open` (or the end of the input).
fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    let mut line_start = false;
    while i < b.len() {
        match b[i] {
            b'\n' => line_start = true,
            b'#' if line_start => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b' ' | b'\t' => {}
            b'{' => {
                depth += 1;
                line_start = false;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
                line_start = false;
            }
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                line_start = false;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = skip_block_comment(b, i);
                continue;
            }
            _ => line_start = false,
        }
        i += 1;
    }
    b.len()
}

/// Spaces over every byte but newlines.
fn blank(bytes: &mut [u8]) {
    for b in bytes.iter_mut().filter(|b| **b != b'\n') {
        *b = b' ';
    }
}

fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    i += 2;
    while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
        i += 1;
    }
    (i + 2).min(b.len())
}

fn skip_literal(b: &[u8], mut i: usize) -> usize {
    let q = b[i];
    i += 1;
    while i < b.len() && b[i] != q && b[i] != b'\n' {
        if b[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    (i + 1).min(b.len())
}

fn skip_raw(b: &[u8], i: usize) -> usize {
    // b[i] == '"'
    let mut j = i + 1;
    while j < b.len() && b[j] != b'(' && j - i < 20 {
        j += 1;
    }
    let delim = &b[i + 1..j.min(b.len())];
    let mut k = j + 1;
    while k < b.len() {
        if b[k] == b')' && b[k + 1..].starts_with(delim) && b.get(k + 1 + delim.len()) == Some(&b'"') {
            return k + 2 + delim.len();
        }
        k += 1;
    }
    b.len()
}

/// The index just past the parenthesis closing the one at `open` (or the end of the input).
fn matching_paren(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Collapses a C++ fragment to canonical spacing: comments dropped, one space only between two
/// word tokens (`const c10::Device & d` -> `const c10::Device&d`, `unsigned  int` -> `unsigned int`).
pub fn norm(s: &str) -> String {
    let stripped = strip_comments(s);
    let mut out = String::with_capacity(stripped.len());
    let mut pending_space = false;
    for c in stripped.chars() {
        if c.is_whitespace() || c == '\\' {
            pending_space = true;
            continue;
        }
        if pending_space && out.chars().last().is_some_and(is_word) && is_word(c) {
            out.push(' ');
        }
        pending_space = false;
        out.push(c);
    }
    out
}

/// `s` with `//` and `/* */` comments blanked to spaces (newlines kept, so offsets and lines do not
/// move; string literals kept).
pub fn strip_comments(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let e = skip_block_comment(b, i);
            blank(&mut out[i..e]);
            i = e;
            continue;
        }
        if b[i] == b'"' || b[i] == b'\'' {
            i = skip_literal(b, i);
            continue;
        }
        i += 1;
    }
    // whole comments (every byte of any multi-byte character in them) became spaces
    String::from_utf8(out).unwrap_or_default()
}

/// Spelling equivalences that keep an override overriding: `c10::optional` has been an alias of
/// `std::optional` since PyTorch 2.4, and a qualified and an unqualified name of the same type (inside
/// the namespaces a backend implements against) are the same type.
pub fn canonical_type(s: &str) -> String {
    let mut t = s.replace("c10::optional<", "std::optional<").replace("c10::nullopt", "std::nullopt");
    for ns in ["c10::impl::", "c10::", "at::", "torch::", "c10d::", "caffe2::"] {
        t = strip_qualifier(&t, ns);
    }
    t.replace("::std::", "std::")
}

fn strip_qualifier(s: &str, ns: &str) -> String {
    // remove `ns` where it starts a name (not inside `foo_c10::`)
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find(ns) {
        let before = &rest[..p];
        let starts_name = before.chars().last().is_none_or(|c| !is_word(c) && c != ':');
        out.push_str(before);
        if !starts_name {
            out.push_str(ns);
        }
        rest = &rest[p + ns.len()..];
    }
    out.push_str(rest);
    out
}

/// 64-bit FNV-1a, printed as 16 hex digits: stable across Rust releases and platforms.
pub fn hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Splits `s` at top-level commas (outside (), <>, [], {} and literals).
pub fn split_top(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                continue;
            }
            b',' if depth <= 0 => {
                out.push(s[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = s[start.min(s.len())..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last.to_string());
    }
    out
}

/// The X-macro entries of a `#define AT_FORALL_X(_)` body: the byte offset and the argument list of
/// every `_(...)` call.
pub fn xmacro_entries(body: &str, param: &str) -> Vec<(usize, Vec<String>)> {
    let body = strip_comments(body);
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(param.as_bytes())
            && (i == 0 || !is_word(b[i - 1] as char))
            && !b.get(i + param.len()).is_some_and(|&c| is_word(c as char))
        {
            let mut j = i + param.len();
            while j < b.len() && ((b[j] as char).is_whitespace() || b[j] == b'\\') {
                j += 1;
            }
            if b.get(j) == Some(&b'(') {
                let end = matching_paren(b, j);
                let inner = body.get(j + 1..end.saturating_sub(1).max(j + 1)).unwrap_or("");
                out.push((i, split_top(inner).into_iter().map(|a| norm(&a)).collect()));
                i = end.max(i + 1);
                continue;
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_keeps_offsets() {
        let s = "struct TORCH_API Foo : Bar {\n#define X TORCH_API\n  C10_DEPRECATED_MESSAGE(\"a)\") void f(); // C10_API\n};";
        let m = mask(s);
        assert_eq!(m.len(), s.len());
        assert!(m.starts_with("struct           Foo"));
        assert!(m.contains("#define X TORCH_API"));
        let c = mask("#if A\nint x;\n#else\nint y;\n#endif\n");
        assert_eq!(c, "     \nint x;\n     \nint y;\n      \n");
        let lc = line_conditions("#ifndef G\n#define G\n#if A\nint x;\n#else\nint y;\n#endif\nint z;\n");
        assert_eq!(lc[3], "A");
        assert_eq!(lc[5], "!(A)");
        assert_eq!(lc[7], "");
        assert!(m.contains("  ").then_some(()).is_some());
        assert!(!m.contains("C10_DEPRECATED_MESSAGE"));
        assert!(m.contains("// C10_API"));
    }

    #[test]
    fn plain_bodies_are_blanked() {
        let s = "struct A {\n  int f(int x) const { return x + 1; }\n  virtual int g() const { TORCH_CHECK(false, \"}\") }\n  int h() override { return 2; }\n  A() : a_(1) { if (a_) { x(); } }\n};\nnamespace n { int k = f({1}); }\n";
        let m = blank_plain_bodies(s);
        assert_eq!(m.len(), s.len());
        assert!(!m.contains("return x + 1;") && m.contains("int f(int x) const {"), "{m}");
        assert!(m.contains("TORCH_CHECK(false, \"}\")"), "{m}");
        assert!(m.contains("return 2;"), "{m}");
        assert!(!m.contains("x();"), "{m}");
        assert!(m.contains("namespace n { int k = f({1}); }"), "{m}");
    }

    #[test]
    fn norm_spacing() {
        assert_eq!(norm("const  c10::Device & /*d*/"), "const c10::Device&");
        assert_eq!(norm("unsigned   int"), "unsigned int");
        assert_eq!(norm("std::vector< std::vector<int> >"), "std::vector<std::vector<int>>");
    }

    #[test]
    fn canonical() {
        assert_eq!(canonical_type("c10::optional<c10::Device>"), "std::optional<Device>");
        assert_eq!(canonical_type("at::Tensor&"), "Tensor&");
        assert_eq!(canonical_type("my_c10::X"), "my_c10::X");
    }

    #[test]
    fn xmacro() {
        let e = xmacro_entries(
            "  _(conv1d) \\\n  _(pow, Tensor_Scalar) /* c */ \\\n _(ADD_NS(norm), \"norm.Scalar\", Tensor(const Tensor&, X))",
            "_",
        );
        assert_eq!(e[0].1, vec!["conv1d"]);
        assert_eq!(e[1].1, vec!["pow", "Tensor_Scalar"]);
        assert_eq!(e[2].1[1], "\"norm.Scalar\"");
        assert_eq!(e.len(), 3);
    }
}
