//! The operators this adapter implements by hand: `syn` over `adapter-runtime/**/*.rs`.
//!
//! A hand-written kernel is found in one of two ways:
//! 1. a method of an `impl AtenOps for X` block (the trait the generator emits, one method per
//!    operator named by [`crate::naming::method_name`]): the method name gives the operator;
//! 2. until the generator lands, any function (free or in an impl) whose doc comment carries a marker
//!    line naming the operators it implements:
//!    ```text
//!    /// xirang-kernel: add.Tensor, add.Scalar
//!    pub fn add(...) -> Result<Tensor> { ... }
//!    ```
//!
//! Each kernel is reported with its file (relative to the repository root) and the line of its name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proc_macro2::Span;
use syn::visit::Visit;

use crate::error::{Error, SourceFile};
use crate::naming;
use crate::schema::OperatorName;

/// The doc-comment marker: `/// xirang-kernel: op[, op...]`.
pub const MARKER: &str = "xirang-kernel:";
/// The generated trait whose impl methods are kernels.
pub const TRAIT_NAME: &str = "AtenOps";

/// One hand-written kernel.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kernel {
    /// Qualified operator name (`add.Tensor`), or for an `AtenOps` method the method name when the
    /// operator is not known to the index's name map (still reported, never dropped).
    pub op: String,
    /// `fn add` / `impl AtenOps for Npu::add_tensor`.
    pub item: String,
    /// Path relative to the repository root, `/`-separated.
    pub file: String,
    pub line: u32,
}

/// All kernels of an adapter tree, sorted by operator, file, line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdapterIndex {
    pub kernels: Vec<Kernel>,
}

impl AdapterIndex {
    /// Kernels implementing an operator.
    pub fn of<'a>(&'a self, op: &'a str) -> impl Iterator<Item = &'a Kernel> + 'a {
        let start = self.kernels.partition_point(|k| k.op.as_str() < op);
        self.kernels[start..].iter().take_while(move |k| k.op == op)
    }
}

/// Indexes every `.rs` file under `dir` (skipping `target/` folders). `method_ops` maps method names to
/// operators (build it with [`method_map`] from the snapshots being compared); `root` is the
/// repository root the reported paths are relative to.
pub fn index_dir(dir: &Path, root: &Path, method_ops: &HashMap<String, String>) -> Result<AdapterIndex, Error> {
    index_sources(&kernel_sources(dir, root)?, method_ops)
}

/// [`index_dir`] that builds the method map only when some file mentions the `AtenOps` trait (the
/// map is consulted only inside `impl AtenOps for ...` blocks; building it for two snapshots costs
/// a few milliseconds that a tree without the trait does not need to spend).
pub fn index_dir_with(
    dir: &Path,
    root: &Path,
    method_ops: impl FnOnce() -> HashMap<String, String>,
) -> Result<AdapterIndex, Error> {
    let sources = kernel_sources(dir, root)?;
    let map = if sources.iter().any(|(_, t)| t.contains(TRAIT_NAME)) { method_ops() } else { HashMap::new() };
    index_sources(&sources, &map)
}

/// The `.rs` files under `dir` that can hold a kernel: (path relative to `root`, text), by path.
fn kernel_sources(dir: &Path, root: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut files = Vec::new();
    collect_rs(dir, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        // a file that mentions neither the marker nor the trait holds no kernel: skip the parse
        if !text.contains(MARKER) && !text.contains(TRAIT_NAME) {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        sources.push((rel, text));
    }
    Ok(sources)
}

fn index_sources(sources: &[(String, String)], method_ops: &HashMap<String, String>) -> Result<AdapterIndex, Error> {
    let mut kernels = Vec::new();
    for (rel, text) in sources {
        kernels.extend(index_source(rel, text, method_ops)?);
    }
    kernels.sort();
    kernels.dedup();
    Ok(AdapterIndex { kernels })
}

/// Indexes one source text (`file` is the name reported).
pub fn index_source(file: &str, text: &str, method_ops: &HashMap<String, String>) -> Result<Vec<Kernel>, Error> {
    let ast = syn::parse_file(text).map_err(|e| {
        let src = SourceFile::new(file, text);
        let start = e.span().start();
        let pos = src.pos_of_marker(start.line, start.column);
        Error::from(src.error(pos, 1, format!("adapter index: cannot parse Rust: {e}")))
    })?;
    let mut v = Visitor { file, method_ops, out: Vec::new(), impl_stack: Vec::new() };
    v.visit_file(&ast);
    Ok(v.out)
}

/// Method name -> qualified operator name, over the operators of the given snapshots.
pub fn method_map<'a>(ops: impl IntoIterator<Item = &'a OperatorName>) -> HashMap<String, String> {
    ops.into_iter().map(|o| (naming::method_name(o), o.to_string())).collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let p = entry.path();
        let ft = entry.file_type().map_err(|e| Error::io(&p, e))?;
        if ft.is_dir() {
            let name = entry.file_name();
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                collect_rs(&p, out)?;
            }
        } else if ft.is_file() && p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

struct Visitor<'a> {
    file: &'a str,
    method_ops: &'a HashMap<String, String>,
    out: Vec<Kernel>,
    /// (is `impl AtenOps for ...`, self type text) of the enclosing impls.
    impl_stack: Vec<(bool, String)>,
}

fn line_of(span: Span) -> u32 {
    span.start().line as u32
}

/// Operators named by `xirang-kernel:` doc lines.
fn marked_ops(attrs: &[syn::Attribute]) -> Vec<String> {
    let mut ops = Vec::new();
    for a in attrs {
        if !a.path().is_ident("doc") {
            continue;
        }
        let syn::Meta::NameValue(nv) = &a.meta else { continue };
        let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value else { continue };
        let text = s.value();
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix(MARKER) {
                for op in rest.split(',') {
                    let op = op.trim();
                    if OperatorName::parse(op).is_ok() {
                        ops.push(op.to_string());
                    }
                }
            }
        }
    }
    ops
}

fn type_text(t: &syn::Type) -> String {
    match t {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_else(|| "?".into()),
        _ => "?".into(),
    }
}

impl<'ast> Visit<'ast> for Visitor<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let name = f.sig.ident.to_string();
        for op in marked_ops(&f.attrs) {
            self.out.push(Kernel {
                op,
                item: format!("fn {name}"),
                file: self.file.to_string(),
                line: line_of(f.sig.ident.span()),
            });
        }
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let is_aten =
            i.trait_.as_ref().and_then(|(_, path, _)| path.segments.last()).is_some_and(|s| s.ident == TRAIT_NAME);
        self.impl_stack.push((is_aten, type_text(&i.self_ty)));
        syn::visit::visit_item_impl(self, i);
        self.impl_stack.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let method = f.sig.ident.to_string();
        let line = line_of(f.sig.ident.span());
        let (is_aten, self_ty) = self.impl_stack.last().cloned().unwrap_or((false, String::new()));
        let mut marked = marked_ops(&f.attrs);
        if is_aten {
            // `r#where` is spelled `r#where` by the naming scheme and by syn
            let op = self.method_ops.get(&method).cloned().unwrap_or_else(|| method.clone());
            marked.retain(|m| *m != op);
            self.out.push(Kernel {
                op,
                item: format!("impl {TRAIT_NAME} for {self_ty}::{method}"),
                file: self.file.to_string(),
                line,
            });
        }
        for op in marked {
            self.out.push(Kernel { op, item: format!("{self_ty}::{method}"), file: self.file.to_string(), line });
        }
        syn::visit::visit_impl_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_trait_methods_and_markers() {
        let src = r#"
use x::AtenOps;
/// Adds.
/// xirang-kernel: add.Tensor, add.Scalar
pub fn add() {}
pub fn not_a_kernel() {}
struct Npu;
impl xirang::AtenOps for Npu {
    fn add_tensor(&self) {}
    fn r#where(&self) {}
    fn mystery(&self) {}
}
impl Npu {
    /// xirang-kernel: mul.Tensor
    fn mul(&self) {}
}
mod inner {
    /// xirang-kernel: neg
    fn neg() {}
}
"#;
        let ops: Vec<OperatorName> =
            ["add.Tensor", "where", "neg"].iter().map(|s| OperatorName::parse(s).unwrap()).collect();
        let map = method_map(&ops);
        let mut ks = index_source("a/lib.rs", src, &map).unwrap();
        ks.sort();
        let got: Vec<(String, u32)> = ks.iter().map(|k| (k.op.clone(), k.line)).collect();
        assert_eq!(
            got,
            vec![
                ("add.Scalar".to_string(), 5),
                ("add.Tensor".to_string(), 5),
                ("add.Tensor".to_string(), 9),
                ("mul.Tensor".to_string(), 15),
                ("mystery".to_string(), 11),
                ("neg".to_string(), 19),
                ("where".to_string(), 10),
            ]
        );
        assert!(index_source("bad.rs", "fn (", &map).is_err());
    }
}
