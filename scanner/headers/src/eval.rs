//! Integer constant-expression evaluator for enumerator values, `static const` initializers and
//! `#define` bodies. Supports literals (decimal, hex, octal, binary, suffixes, character
//! literals), unary and binary operators, the ternary operator, casts to integer types and
//! references to enumerators, constants and macros (object-like and function-like, expanded on
//! tokens). Anything it cannot decide (`sizeof`, floats, unknown names) yields `None`.

use crate::lex::{Tok, tokenize};

/// A `#define`: parameters are `Some` for function-like macros.
#[derive(Clone, Debug, PartialEq)]
pub struct MacroDef {
    pub name: String,
    pub params: Option<Vec<String>>,
    pub body: String,
}

/// Where names get their values.
pub trait Env {
    /// Value of an enumerator or constant.
    fn value(&self, name: &str) -> Option<i64>;
    /// A macro definition.
    fn macro_def(&self, name: &str) -> Option<&MacroDef>;
}

#[derive(Clone, Debug, PartialEq)]
struct ETok {
    text: String,
    kind: Tok,
}

fn lex(s: &str) -> Vec<ETok> {
    tokenize(s).into_iter().map(|t| ETok { text: t.text(s).to_string(), kind: t.kind }).collect()
}

const MAX_DEPTH: usize = 24;
const MAX_TOKENS: usize = 20_000;

fn expand(toks: Vec<ETok>, env: &dyn Env, stack: &mut Vec<String>) -> Option<Vec<ETok>> {
    if stack.len() > MAX_DEPTH || toks.len() > MAX_TOKENS {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.kind != Tok::Ident || stack.iter().any(|s| s == &t.text) {
            out.push(t.clone());
            i += 1;
            continue;
        }
        if t.text == "defined" {
            return None;
        }
        if let Some(v) = env.value(&t.text) {
            out.extend(lex(&format!("({v})")));
            i += 1;
            continue;
        }
        let Some(def) = env.macro_def(&t.text) else {
            out.push(t.clone());
            i += 1;
            continue;
        };
        match &def.params {
            None => {
                stack.push(def.name.clone());
                let body = expand(lex(&def.body), env, stack)?;
                stack.pop();
                out.push(ETok { text: "(".into(), kind: Tok::Punct });
                out.extend(body);
                out.push(ETok { text: ")".into(), kind: Tok::Punct });
                i += 1;
            }
            Some(params) => {
                if toks.get(i + 1).map(|t| t.text.as_str()) != Some("(") {
                    out.push(t.clone());
                    i += 1;
                    continue;
                }
                // collect arguments
                let mut args: Vec<Vec<ETok>> = vec![Vec::new()];
                let mut depth = 0usize;
                let mut j = i + 1;
                let mut closed = false;
                while j < toks.len() {
                    let s = toks[j].text.as_str();
                    if s == "(" {
                        depth += 1;
                        if depth == 1 {
                            j += 1;
                            continue;
                        }
                    } else if s == ")" {
                        depth -= 1;
                        if depth == 0 {
                            closed = true;
                            break;
                        }
                    } else if s == "," && depth == 1 {
                        args.push(Vec::new());
                        j += 1;
                        continue;
                    }
                    if let Some(a) = args.last_mut() {
                        a.push(toks[j].clone());
                    }
                    j += 1;
                }
                if !closed {
                    return None;
                }
                if params.is_empty() && args.len() == 1 && args[0].is_empty() {
                    args.clear();
                }
                if args.len() != params.len() {
                    return None;
                }
                let body = lex(&def.body);
                if body.iter().any(|b| b.text == "#" || b.text == "##") {
                    return None;
                }
                let mut subst = Vec::new();
                for b in body {
                    if b.kind == Tok::Ident
                        && let Some(k) = params.iter().position(|p| p == &b.text)
                    {
                        subst.push(ETok { text: "(".into(), kind: Tok::Punct });
                        subst.extend(args[k].iter().cloned());
                        subst.push(ETok { text: ")".into(), kind: Tok::Punct });
                        continue;
                    }
                    subst.push(b);
                }
                stack.push(def.name.clone());
                let body = expand(subst, env, stack)?;
                stack.pop();
                out.push(ETok { text: "(".into(), kind: Tok::Punct });
                out.extend(body);
                out.push(ETok { text: ")".into(), kind: Tok::Punct });
                i = j + 1;
            }
        }
    }
    Some(out)
}

/// A value with C's unsignedness and width, enough to get `~0U` and casts right.
#[derive(Clone, Copy, Debug)]
struct V {
    v: i128,
    unsigned: bool,
    wide: bool,
}

impl V {
    fn fix(mut self) -> Option<V> {
        if self.unsigned {
            let mask: i128 = if self.wide { u64::MAX as i128 } else { u32::MAX as i128 };
            if !self.wide && (self.v > mask || self.v < 0) {
                // promote like C would only if it was produced by an operation on 32-bit
                self.v &= mask;
            } else if self.wide {
                self.v &= mask;
            }
        }
        if self.v.abs() > (u64::MAX as i128) * 2 {
            return None;
        }
        Some(self)
    }
}

struct P<'a> {
    t: &'a [ETok],
    i: usize,
    /// Nesting of `expr`/`unary` calls: parentheses and unary operators recurse, so a macro of
    /// 10,000 `(` would overflow the stack; past [`MAX_NESTING`] the value is unknown.
    depth: usize,
}

/// Deepest nesting of a constant expression evaluated.
const MAX_NESTING: usize = 256;

const TYPE_WORDS: [&str; 12] =
    ["unsigned", "signed", "int", "long", "short", "char", "const", "volatile", "struct", "enum", "bool", "_Bool"];

impl P<'_> {
    fn peek(&self) -> Option<&str> {
        self.t.get(self.i).map(|t| t.text.as_str())
    }
    fn next(&mut self) -> Option<&ETok> {
        let t = self.t.get(self.i);
        self.i += 1;
        t
    }
    fn expr(&mut self) -> Option<V> {
        if self.depth >= MAX_NESTING {
            return None;
        }
        self.depth += 1;
        let v = self.expr_inner();
        self.depth -= 1;
        v
    }
    fn expr_inner(&mut self) -> Option<V> {
        let c = self.bin(0)?;
        if self.peek() == Some("?") {
            self.i += 1;
            let a = self.expr()?;
            if self.peek() != Some(":") {
                return None;
            }
            self.i += 1;
            let b = self.expr()?;
            return Some(if c.v != 0 { a } else { b });
        }
        Some(c)
    }
    fn prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            "|" => 3,
            "^" => 4,
            "&" => 5,
            "==" | "!=" => 6,
            "<" | ">" | "<=" | ">=" => 7,
            "<<" | ">>" => 8,
            "+" | "-" => 9,
            "*" | "/" | "%" => 10,
            _ => return None,
        })
    }
    fn bin(&mut self, min: u8) -> Option<V> {
        let mut l = self.unary()?;
        while let Some(op) = self.peek().map(str::to_string) {
            let Some(p) = Self::prec(&op) else { break };
            if p <= min {
                break;
            }
            self.i += 1;
            let r = self.bin(p)?;
            let unsigned = l.unsigned || r.unsigned;
            let wide = l.wide || r.wide;
            let (a, b) = (l.v, r.v);
            let v = match op.as_str() {
                "||" => ((a != 0) || (b != 0)) as i128,
                "&&" => ((a != 0) && (b != 0)) as i128,
                "|" => a | b,
                "^" => a ^ b,
                "&" => a & b,
                "==" => (a == b) as i128,
                "!=" => (a != b) as i128,
                "<" => (a < b) as i128,
                ">" => (a > b) as i128,
                "<=" => (a <= b) as i128,
                ">=" => (a >= b) as i128,
                "<<" => {
                    if !(0..64).contains(&b) {
                        return None;
                    }
                    a.checked_shl(b as u32)?
                }
                ">>" => {
                    if !(0..64).contains(&b) {
                        return None;
                    }
                    a >> b
                }
                "+" => a.checked_add(b)?,
                "-" => a.checked_sub(b)?,
                "*" => a.checked_mul(b)?,
                "/" => a.checked_div(b)?,
                "%" => a.checked_rem(b)?,
                _ => return None,
            };
            let cmp = matches!(op.as_str(), "||" | "&&" | "==" | "!=" | "<" | ">" | "<=" | ">=");
            l = if cmp {
                V { v, unsigned: false, wide: false }
            } else if op == "<<" || op == ">>" {
                V { v, unsigned: l.unsigned, wide: l.wide }.fix()?
            } else {
                V { v, unsigned, wide }.fix()?
            };
        }
        Some(l)
    }
    fn is_cast(&self) -> Option<usize> {
        // `(` type-words [*]* `)` followed by an operand
        let mut j = self.i + 1;
        let mut saw_word = false;
        while let Some(t) = self.t.get(j) {
            match t.kind {
                Tok::Ident => {
                    saw_word = true;
                    j += 1;
                }
                Tok::Punct if t.text == "*" || t.text == "::" => j += 1,
                Tok::Punct if t.text == ")" => break,
                _ => return None,
            }
        }
        if !saw_word || self.t.get(j).map(|t| t.text.as_str()) != Some(")") {
            return None;
        }
        let after = self.t.get(j + 1)?;
        let operand = matches!(after.kind, Tok::Number | Tok::Char | Tok::Ident)
            || matches!(after.text.as_str(), "(" | "-" | "~" | "!" | "+");
        operand.then_some(j)
    }
    fn unary(&mut self) -> Option<V> {
        if self.depth >= MAX_NESTING {
            return None;
        }
        self.depth += 1;
        let v = self.unary_inner();
        self.depth -= 1;
        v
    }
    fn unary_inner(&mut self) -> Option<V> {
        let t = self.peek()?.to_string();
        match t.as_str() {
            "-" => {
                self.i += 1;
                let v = self.unary()?;
                V { v: -v.v, ..v }.fix()
            }
            "+" => {
                self.i += 1;
                self.unary()
            }
            "~" => {
                self.i += 1;
                let v = self.unary()?;
                V { v: !v.v, ..v }.fix()
            }
            "!" => {
                self.i += 1;
                let v = self.unary()?;
                Some(V { v: (v.v == 0) as i128, unsigned: false, wide: false })
            }
            "(" => {
                if let Some(close) = self.is_cast() {
                    let words: Vec<String> = self.t[self.i + 1..close].iter().map(|t| t.text.clone()).collect();
                    self.i = close + 1;
                    let v = self.unary()?;
                    return cast(&words, v);
                }
                self.i += 1;
                let v = self.expr()?;
                if self.next().map(|t| t.text.as_str()) != Some(")") {
                    return None;
                }
                Some(v)
            }
            _ => {
                let tok = self.next()?.clone();
                match tok.kind {
                    Tok::Number => number(&tok.text),
                    Tok::Char => char_lit(&tok.text),
                    _ => None,
                }
            }
        }
    }
}

fn cast(words: &[String], v: V) -> Option<V> {
    if words.iter().any(|w| w == "*") {
        return Some(V { v: v.v, unsigned: true, wide: true });
    }
    let has = |w: &str| words.iter().any(|x| x == w);
    let joined = words.join(" ");
    let (bits, unsigned): (u32, bool) = match joined.as_str() {
        "int8_t" | "signed char" | "char" => (8, false),
        "uint8_t" | "unsigned char" => (8, true),
        "int16_t" | "short" | "short int" | "signed short" => (16, false),
        "uint16_t" | "unsigned short" | "unsigned short int" => (16, true),
        "int32_t" | "int" | "signed" | "signed int" => (32, false),
        "uint32_t" | "unsigned" | "unsigned int" => (32, true),
        "int64_t" | "long long" | "long long int" | "signed long long" | "long" | "intptr_t" | "ssize_t"
        | "ptrdiff_t" => (64, false),
        "uint64_t" | "unsigned long long" | "unsigned long long int" | "unsigned long" | "size_t" | "uintptr_t" => {
            (64, true)
        }
        _ if words.iter().all(|w| TYPE_WORDS.contains(&w.as_str())) && has("unsigned") => (32, true),
        // an unknown typedef name (hi_s32, CUresult): keep the value as it is
        _ => return Some(v),
    };
    let m: i128 = (1i128 << bits) - 1;
    let mut x = v.v & m;
    if !unsigned && x >= (1i128 << (bits - 1)) {
        x -= 1i128 << bits;
    }
    Some(V { v: x, unsigned, wide: bits == 64 })
}

fn number(s: &str) -> Option<V> {
    let s = s.replace('\'', "");
    let lower = s.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h.to_string(), 16)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b.to_string(), 2)
    } else if lower.len() > 1 && lower.starts_with('0') && lower.as_bytes()[1].is_ascii_digit() {
        (lower[1..].to_string(), 8)
    } else {
        (lower.clone(), 10)
    };
    let body = digits.trim_end_matches(['u', 'l', 'z']);
    let suffix = &digits[body.len()..];
    if body.is_empty() || body.contains(['.', 'e', 'p']) && radix != 16 || body.contains('.') {
        return None;
    }
    let v = i128::from_str_radix(body, radix).ok()?;
    let mut unsigned = suffix.contains('u');
    let mut wide = suffix.contains('l') || suffix.contains('z');
    if v > i32::MAX as i128 {
        if radix != 10 && v <= u32::MAX as i128 && !wide {
            unsigned = true;
        } else {
            wide = true;
            if v > i64::MAX as i128 {
                unsigned = true;
            }
        }
    }
    if v > u64::MAX as i128 {
        return None;
    }
    Some(V { v, unsigned, wide })
}

fn char_lit(s: &str) -> Option<V> {
    let inner = s.strip_prefix('\'')?.strip_suffix('\'')?;
    let v: i128 = if let Some(esc) = inner.strip_prefix('\\') {
        match esc {
            "n" => 10,
            "t" => 9,
            "r" => 13,
            "0" => 0,
            "\\" => 92,
            "'" => 39,
            "\"" => 34,
            "a" => 7,
            "b" => 8,
            "f" => 12,
            "v" => 11,
            _ if esc.starts_with('x') => i128::from_str_radix(&esc[1..], 16).ok()?,
            _ if esc.chars().all(|c| c.is_digit(8)) => i128::from_str_radix(esc, 8).ok()?,
            _ => return None,
        }
    } else {
        let mut cs = inner.chars();
        let c = cs.next()?;
        if cs.next().is_some() {
            return None;
        }
        c as i128
    };
    Some(V { v, unsigned: false, wide: false })
}

/// Evaluates `expr` to an `i64`, or `None` when it is not an integer constant we can decide.
pub fn eval(expr: &str, env: &dyn Env) -> Option<i64> {
    let toks = lex(expr);
    if toks.is_empty() || toks.iter().any(|t| t.kind == Tok::Str || t.text == "sizeof") {
        return None;
    }
    let mut stack = Vec::new();
    let toks = expand(toks, env, &mut stack)?;
    // after expansion the expression must be closed: no identifiers other than cast type words
    let mut p = P { t: &toks, i: 0, depth: 0 };
    let v = p.expr()?;
    if p.i != toks.len() {
        return None;
    }
    i64::try_from(v.v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct E(BTreeMap<String, i64>, Vec<MacroDef>);
    impl Env for E {
        fn value(&self, n: &str) -> Option<i64> {
            self.0.get(n).copied()
        }
        fn macro_def(&self, n: &str) -> Option<&MacroDef> {
            self.1.iter().find(|m| m.name == n)
        }
    }

    #[test]
    fn deep_nesting_is_unknown_not_a_crash() {
        let e = E(BTreeMap::new(), Vec::new());
        let deep = "(".repeat(9_000) + "1" + &")".repeat(9_000);
        assert_eq!(eval(&deep, &e), None);
        let minus = "-".repeat(9_000) + "1";
        assert_eq!(eval(&minus, &e), None);
        assert_eq!(eval(&("(".repeat(50) + "7" + &")".repeat(50)), &e), Some(7));
    }

    #[test]
    fn evaluates() {
        let mut m = BTreeMap::new();
        m.insert("A".to_string(), 7);
        let defs = vec![
            MacroDef { name: "BASE".into(), params: None, body: "0x1000".into() },
            MacroDef {
                name: "ERR".into(),
                params: Some(vec!["m".into(), "e".into()]),
                body: "((int)(BASE | ((m) << 16) | (e)))".into(),
            },
        ];
        let e = E(m, defs);
        assert_eq!(eval("(1U << 3)", &e), Some(8));
        assert_eq!(eval("0x10", &e), Some(16));
        assert_eq!(eval("-1", &e), Some(-1));
        assert_eq!(eval("A + 1", &e), Some(8));
        assert_eq!(eval("~0U", &e), Some(4294967295));
        assert_eq!(eval("(int)0xFFFFFFFF", &e), Some(-1));
        assert_eq!(eval("'a'", &e), Some(97));
        assert_eq!(eval("ERR(2, 5)", &e), Some(0x1000 | (2 << 16) | 5));
        assert_eq!(eval("BASE + B", &e), None);
        assert_eq!(eval("sizeof(int)", &e), None);
        assert_eq!(eval("1.5", &e), None);
        assert_eq!(eval("0x7fffffffffffffffLL", &e), Some(i64::MAX));
        assert_eq!(eval("(unsigned int)-1", &e), Some(4294967295));
        assert_eq!(eval("1 ? 2 : 3", &e), Some(2));
        assert_eq!(eval("010", &e), Some(8));
    }
}
