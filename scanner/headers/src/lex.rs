//! A small C/C++ tokenizer used by the preprocessor pass, the macro neutralizer and the
//! expression evaluator. It never fails: unknown bytes become one-character punctuation.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident,
    Number,
    Str,
    Char,
    Punct,
}

/// One token: kind and byte range in the text it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Tok,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.start..self.end).unwrap_or("")
    }
}

const PUNCT3: [&str; 4] = ["...", "<<=", ">>=", "->*"];
const PUNCT2: [&str; 19] =
    ["::", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "##", "++", "--", "+=", "-=", "*=", "/=", "|=", "&="];

/// Tokenizes `src`, skipping whitespace and comments.
pub fn tokenize(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() || c == b'\\' {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
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
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
                i += 1;
            }
            // string prefixes: L"..", u8"..", R"(..)" are rare in C headers; treat prefix as ident
            out.push(Token { kind: Tok::Ident, start, end: i });
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            while i < b.len() {
                let d = b[i];
                let exponent_sign = (d == b'+' || d == b'-')
                    && i > start
                    && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P')
                    && !src[start..i].starts_with("0x")
                    && !src[start..i].starts_with("0X");
                if d.is_ascii_alphanumeric() || d == b'.' || d == b'_' || d == b'\'' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token { kind: Tok::Number, start, end: i });
            continue;
        }
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            let kind = if c == b'"' { Tok::Str } else { Tok::Char };
            out.push(Token { kind, start, end: i });
            continue;
        }
        let rest = &src[i..];
        let mut len = 0;
        for p in PUNCT3 {
            if rest.starts_with(p) {
                len = 3;
                break;
            }
        }
        if len == 0 {
            for p in PUNCT2 {
                if rest.starts_with(p) {
                    len = 2;
                    break;
                }
            }
        }
        if len == 0 {
            len = rest.chars().next().map(char::len_utf8).unwrap_or(1);
        }
        i += len;
        out.push(Token { kind: Tok::Punct, start, end: i });
    }
    out
}

/// Normalizes type or expression text: comments dropped, single spaces, `const char *` style.
pub fn normalize(src: &str) -> String {
    let toks = tokenize(src);
    let mut out = String::new();
    let mut prev: Option<(&str, Tok)> = None;
    for (i, t) in toks.iter().enumerate() {
        let s = t.text(src);
        let next = toks.get(i + 1).map(|n| n.text(src));
        if let Some((p, pk)) = prev {
            let p_word = matches!(pk, Tok::Ident | Tok::Number | Tok::Str | Tok::Char);
            let s_word = matches!(t.kind, Tok::Ident | Tok::Number | Tok::Str | Tok::Char);
            let space = match (p, s) {
                (_, ")") | (_, "]") | (_, ",") | (_, ";") | ("(", _) | ("[", _) => false,
                ("::", _) | (_, "::") => false,
                ("*", "*") | ("*", "&") | ("&", "&") | ("&", "*") => false,
                ("*", _) | ("&", _) | ("&&", _) if s_word => false,
                (_, "*") | (_, "&") | (_, "&&") => p_word || p == ")" || p == "]",
                // `void (*)(int)` keeps its space, `sizeof(int)` and `F(x)` do not
                (_, "(") => (p_word && matches!(next, Some("*" | "^" | "&"))) || p == "*" || p == ",",
                (_, "[") => p_word || p == "*",
                (",", _) => true,
                _ => true,
            };
            if space {
                out.push(' ');
            }
        }
        out.push_str(s);
        prev = Some((s, t.kind));
    }
    out
}

/// Index of the token that closes the group opened at `open` (a `(`, `[` or `{`).
pub fn matching(src: &str, toks: &[Token], open: usize) -> Option<usize> {
    let (o, c) = match toks.get(open)?.text(src) {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        "{" => ("{", "}"),
        _ => return None,
    };
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        let s = t.text(src);
        if s == o {
            depth += 1;
        } else if s == c {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// Unescapes a C string literal token (quotes included); adjacent literals are joined by callers.
pub fn unquote(s: &str) -> String {
    let inner = s.strip_prefix('"').map(|r| r.strip_suffix('"').unwrap_or(r)).unwrap_or(s);
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn normalizes_types() {
        assert_eq!(normalize("const   char*"), "const char *");
        assert_eq!(normalize("void * *"), "void **");
        assert_eq!(normalize("char * const *"), "char *const *");
        assert_eq!(normalize("void (*)(int,char *)"), "void (*)(int, char *)");
        assert_eq!(normalize("char [ 32 ]"), "char [32]");
        assert_eq!(normalize("struct  a /* c */ *"), "struct a *");
        assert_eq!(normalize("std :: size_t"), "std::size_t");
        assert_eq!(normalize("sizeof ( int )"), "sizeof(int)");
        assert_eq!(normalize("WRAP (x)"), "WRAP(x)");
    }
}
