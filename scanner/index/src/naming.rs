//! The one mapping from an operator name to a Rust method name.
//!
//! The code generator emits a trait `AtenOps` with one method per operator named by [`method_name`],
//! and the drift engine's adapter index ([`crate::adapter_index`]) finds hand-written kernels by
//! the same name, so the two can never disagree. The scheme follows tch-rs:
//!
//! | operator | method |
//! | --- | --- |
//! | `add` | `add` |
//! | `add.Tensor` | `add_tensor` (overload lower-cased, joined with `_`) |
//! | `add_` (in-place) | `add_` |
//! | `add_.Tensor` | `add_tensor_` (the in-place `_` moves to the end) |
//! | `add.out` | `add_out` |
//! | `_foo.bar` | `_foo_bar` (leading underscores kept) |
//! | `__and__.Tensor` | `dunder_and_tensor` (dunders spelled out) |
//! | `__iand__.Scalar` | `dunder_iand_scalar` |
//! | `where.self` | `where_self`; `where` alone is `r#where` (keywords become raw identifiers) |
//!
//! Collision-free: `tests::no_collisions_in_any_shipped_snapshot` checks that the mapping is
//! injective over the operators of every PyTorch version in the store (2.0.1 .. 2.15.0), which is
//! where the lower-casing of overload names could in principle collide.

use crate::schema::OperatorName;

/// Rust keywords (strict and reserved, 2024 edition) that cannot be method names as written.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate", "do", "dyn", "else",
    "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro", "match", "mod",
    "move", "mut", "override", "priv", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "try", "type", "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Keywords that cannot be raw identifiers either.
const NOT_RAW: &[&str] = &["crate", "self", "Self", "super"];

/// Whether `name` is a Rust keyword (strict or reserved, 2024 edition).
pub fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name)
}

/// `name` as a Rust identifier: keywords as raw identifiers (`fn` -> `r#fn`); `None` for the
/// keywords that cannot be raw (`self`, `Self`, `super`, `crate`).
pub fn ident(name: &str) -> Option<String> {
    if NOT_RAW.contains(&name) {
        None
    } else if KEYWORDS.contains(&name) {
        Some(format!("r#{name}"))
    } else {
        Some(name.to_string())
    }
}

/// The Rust method name of an operator (see the module docs for the scheme).
pub fn method_name(op: &OperatorName) -> String {
    let name = op.name.as_str();
    let (stem, inplace) = if let Some(inner) = name.strip_prefix("__").and_then(|s| s.strip_suffix("__"))
        && !inner.is_empty()
    {
        (format!("dunder_{inner}"), false)
    } else if let Some(s) = name.strip_suffix('_')
        && !s.is_empty()
    {
        (s.to_string(), true)
    } else {
        (name.to_string(), false)
    };
    let mut out = stem;
    if !op.overload.is_empty() {
        out.push('_');
        out.push_str(&op.overload.to_ascii_lowercase());
    }
    if inplace {
        out.push('_');
    }
    if KEYWORDS.contains(&out.as_str()) {
        if NOT_RAW.contains(&out.as_str()) {
            out.push_str("_op");
        } else {
            out.insert_str(0, "r#");
        }
    }
    out
}

/// [`method_name`] of a qualified name (`add.Tensor`); `None` when it is not a valid operator name.
pub fn method_name_of(qualified: &str) -> Option<String> {
    OperatorName::parse(qualified).ok().map(|o| method_name(&o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn m(s: &str) -> String {
        method_name_of(s).unwrap()
    }

    #[test]
    fn scheme() {
        assert_eq!(m("add"), "add");
        assert_eq!(m("add.Tensor"), "add_tensor");
        assert_eq!(m("add_"), "add_");
        assert_eq!(m("add_.Tensor"), "add_tensor_");
        assert_eq!(m("add.out"), "add_out");
        assert_eq!(m("_foo"), "_foo");
        assert_eq!(m("_foo.bar"), "_foo_bar");
        assert_eq!(m("__and__.Tensor"), "dunder_and_tensor");
        assert_eq!(m("__iand__.Scalar"), "dunder_iand_scalar");
        assert_eq!(m("where"), "r#where");
        assert_eq!(m("where.self"), "where_self");
        assert_eq!(m("_"), "_");
    }

    #[test]
    fn no_collisions_in_any_shipped_snapshot() {
        let Ok(store) = crate::snapshot::Store::discover(None) else { return };
        let versions = store.versions("pytorch");
        assert!(!versions.is_empty());
        for v in versions {
            let snap = store.load_pytorch(&v).expect("snapshot loads");
            let mut seen: HashMap<String, String> = HashMap::new();
            for f in &snap.registry.functions {
                let q = f.func.name.to_string();
                let meth = method_name(&f.func.name);
                if let Some(prev) = seen.insert(meth.clone(), q.clone()) {
                    panic!("{v}: `{prev}` and `{q}` both map to `{meth}`");
                }
            }
        }
    }
}
