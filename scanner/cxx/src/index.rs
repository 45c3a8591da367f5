//! The index of a C++ adapter: what in it depends on PyTorch's C++ interface and operator registry.
//!
//! - classes with base classes (a backend's `c10::Allocator`, `DeviceGuardImplInterface`,
//!   `PrivateUse1HooksInterface` subclasses) and their member functions;
//! - `TORCH_LIBRARY_IMPL(ns, Key, m)` blocks and every `m.impl("op", ...)` / `m.fallback(...)` in them;
//! - uses of names: macro invocations (`C10_REGISTER_GUARD_IMPL(...)`) and calls of free functions
//!   (`RegisterPrivateUse1HooksInterface(...)`), with file and line;
//! - kernel definitions, named the way C++ adapters name them: out-of-line members of a
//!   `*NativeFunctions` class (`at::Tensor XLANativeFunctions::add(...)`), and functions with
//!   external linkage in a kernel namespace (op-plugin's `op_api::add`, `acl_op::add`, `atb::`,
//!   `sparse::`), with the `#if` gate around them (op-plugin's `VERSION_BETWEEN(V2R1, V2R3)`).

use std::path::{Path, PathBuf};

use serde::Serialize;
use tree_sitter::Node;

use crate::text::norm;
use crate::{CxxError, Diagnostic, Param};

/// Namespaces whose external functions are operator kernels.
pub const KERNEL_NAMESPACES: &[&str] = &["op_api", "acl_op", "atb", "sparse", "op_plugin", "custom_ops", "dvm"];

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct AdapterMethod {
    pub name: String,
    pub line: u32,
    /// Parameter types, canonical spacing.
    pub params: Vec<String>,
}

/// A class of the adapter with base classes.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct AdapterClass {
    /// Qualified by the namespaces around it.
    pub name: String,
    pub file: String,
    pub line: u32,
    pub bases: Vec<String>,
    pub methods: Vec<AdapterMethod>,
}

/// One `m.impl("op", fn)` (or `m.fallback(fn)`, op empty) inside `TORCH_LIBRARY_IMPL(ns, key, m)`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub namespace: String,
    pub key: String,
    pub op: String,
    /// The kernel's text as passed (`TORCH_FN(add)`, `&custom_add`).
    pub function: String,
    pub file: String,
    pub line: u32,
}

/// A use of a name: a macro invocation or a call.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Use {
    pub name: String,
    pub file: String,
    pub line: u32,
}

/// A kernel definition.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// `add`, `add_out`, `npu_dropout`.
    pub name: String,
    /// `op_api`, `acl_op`, `XLANativeFunctions`.
    pub scope: String,
    #[serde(rename = "return")]
    pub ret: String,
    pub params: Vec<Param>,
    pub file: String,
    pub line: u32,
    /// The `#if` conditions around it, innermost last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
}

/// Everything indexed in a tree of C++ sources.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct CxxIndex {
    pub files: usize,
    pub classes: Vec<AdapterClass>,
    pub registrations: Vec<Registration>,
    pub uses: Vec<Use>,
    pub kernels: Vec<Kernel>,
    pub diagnostics: Vec<Diagnostic>,
}

impl CxxIndex {
    /// The adapter classes deriving (directly) from `class` (qualified or not).
    pub fn subclasses_of<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a AdapterClass> + 'a {
        let short = class.rsplit("::").next().unwrap_or(class);
        self.classes.iter().filter(move |c| {
            c.bases.iter().any(|b| {
                let b = b.trim_start_matches("public ").trim_start_matches("protected ").trim_start_matches("private ");
                let b = b.split('<').next().unwrap_or(b);
                b == class || b.rsplit("::").next() == Some(short)
            })
        })
    }

    /// Every use of `name`.
    pub fn uses_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Use> + 'a {
        self.uses.iter().filter(move |u| u.name == name)
    }

    fn merge(&mut self, other: CxxIndex) {
        self.files += other.files;
        self.classes.extend(other.classes);
        self.registrations.extend(other.registrations);
        self.uses.extend(other.uses);
        self.kernels.extend(other.kernels);
        self.diagnostics.extend(other.diagnostics);
    }
}

/// Whether a path is C++ source the index reads.
pub fn is_cxx_source(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("cpp" | "cc" | "cxx" | "h" | "hpp" | "hh" | "cu"))
}

/// Indexes every C++ source under `dir` (skipping `target/`, `build/` and hidden folders); paths in
/// the result are relative to `root`.
pub fn index_dir(dir: &Path, root: &Path) -> Result<CxxIndex, CxxError> {
    let mut files = Vec::new();
    collect(dir, &mut files, 0);
    files.sort();
    let mut srcs = Vec::with_capacity(files.len());
    for p in &files {
        let text = crate::read_source(p)?;
        let rel = p.strip_prefix(root).unwrap_or(p).to_string_lossy().replace('\\', "/");
        srcs.push((rel, text));
    }
    index_sources(&srcs)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 32 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "build" && name != "node_modules" {
                collect(&p, out, depth + 1);
            }
        } else if ft.is_file() && is_cxx_source(&p) {
            out.push(p);
        }
    }
}

/// Indexes in-memory sources (`(path, text)`).
pub fn index_sources(srcs: &[(String, String)]) -> Result<CxxIndex, CxxError> {
    let masked: Vec<String> = srcs.iter().map(|(_, t)| crate::text::mask(t)).collect();
    let trees = crate::parse::parse_all(&masked, &[])?;
    let mut idx = CxxIndex::default();
    for (((path, orig), m), tree) in srcs.iter().zip(masked.iter()).zip(trees.iter()) {
        let conds = crate::text::line_conditions(orig);
        let mut w = Walker { src: m, path, conds, ns: Vec::new(), gates: Vec::new(), out: CxxIndex::default() };
        match tree {
            Some(t) => w.walk(t.root_node(), 0),
            None => w.out.diagnostics.push(Diagnostic {
                file: path.clone(),
                line: 1,
                column: 1,
                message: "tree-sitter returned no tree; nothing in this file was indexed".into(),
            }),
        }
        w.out.files = 1;
        idx.merge(w.out);
    }
    idx.uses.sort();
    idx.uses.dedup();
    idx.registrations.sort_by(|a, b| (&a.file, a.line, &a.op).cmp(&(&b.file, b.line, &b.op)));
    idx.kernels.sort_by(|a, b| (&a.file, a.line, &a.name).cmp(&(&b.file, b.line, &b.name)));
    idx.classes.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    Ok(idx)
}

struct Walker<'a> {
    src: &'a str,
    conds: Vec<String>,
    path: &'a str,
    ns: Vec<String>,
    gates: Vec<String>,
    out: CxxIndex,
}

fn line(n: Node) -> u32 {
    u32::try_from(n.start_position().row + 1).unwrap_or(u32::MAX)
}

impl<'a> Walker<'a> {
    fn text(&self, n: Node) -> &'a str {
        self.src.get(n.byte_range()).unwrap_or("")
    }

    fn walk(&mut self, n: Node<'a>, depth: usize) {
        if depth > crate::parse::MAX_DEPTH {
            if self.out.diagnostics.len() < 20 {
                self.out.diagnostics.push(Diagnostic {
                    file: self.path.to_string(),
                    line: line(n),
                    column: 1,
                    message: format!(
                        "nested more than {} levels deep; the rest is not indexed",
                        crate::parse::MAX_DEPTH
                    ),
                });
            }
            return;
        }
        match n.kind() {
            "namespace_definition" => {
                let name = n.child_by_field_name("name").map(|x| norm(self.text(x))).unwrap_or_default();
                self.ns.push(name);
                if let Some(b) = n.child_by_field_name("body") {
                    self.children(b, depth + 1);
                }
                self.ns.pop();
            }
            "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else" | "preproc_elifdef" => {
                let g = if n.kind() == "preproc_else" {
                    format!("#else of {}", self.gates.last().cloned().unwrap_or_default())
                } else {
                    norm(self.text(n).lines().next().unwrap_or(""))
                };
                self.gates.push(g);
                self.children(n, depth + 1);
                self.gates.pop();
            }
            "class_specifier" | "struct_specifier" => self.class(n, depth),
            "function_definition" => self.function(n, depth),
            "declaration" | "field_declaration" | "template_declaration" | "linkage_specification" => {
                self.scan_calls(n);
                self.children(n, depth + 1)
            }
            "translation_unit" | "declaration_list" | "ERROR" => self.children(n, depth + 1),
            "expression_statement" => self.scan_calls(n),
            _ => {}
        }
    }

    fn children(&mut self, n: Node<'a>, depth: usize) {
        let mut c = n.walk();
        let kids: Vec<Node<'a>> = n.named_children(&mut c).collect();
        for k in kids {
            self.walk(k, depth);
        }
    }

    fn qualify(&self, name: &str) -> String {
        let mut parts: Vec<&str> = self.ns.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
        parts.push(name);
        parts.join("::")
    }

    fn class(&mut self, n: Node<'a>, depth: usize) {
        let (Some(name), Some(body)) = (n.child_by_field_name("name"), n.child_by_field_name("body")) else {
            return;
        };
        let name = norm(self.text(name));
        let mut bases = Vec::new();
        let mut c = n.walk();
        for ch in n.named_children(&mut c) {
            if ch.kind() == "base_class_clause" {
                let mut c2 = ch.walk();
                for b in ch.named_children(&mut c2) {
                    if matches!(b.kind(), "type_identifier" | "qualified_identifier" | "template_type") {
                        bases.push(norm(self.text(b)));
                    }
                }
            }
        }
        let mut methods = Vec::new();
        let mut stack = vec![body];
        while let Some(list) = stack.pop() {
            let mut c = list.walk();
            for m in list.named_children(&mut c) {
                match m.kind() {
                    "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else" | "template_declaration"
                        if stack.len() < 64 =>
                    {
                        stack.push(m)
                    }
                    "field_declaration" | "declaration" | "function_definition" => {
                        if let Some(fd) = fdecl(m)
                            && let Some(nm) = fd.child_by_field_name("declarator")
                            && matches!(nm.kind(), "field_identifier" | "identifier" | "operator_name")
                        {
                            methods.push(AdapterMethod {
                                name: norm(self.text(nm)),
                                line: line(m),
                                params: self.params(fd).into_iter().map(|p| p.ty).collect(),
                            });
                        }
                        if m.kind() == "function_definition"
                            && let Some(b) = m.child_by_field_name("body")
                        {
                            self.calls_in(b);
                        }
                    }
                    _ => {}
                }
            }
        }
        methods.sort_by_key(|m| m.line);
        if !bases.is_empty() {
            self.out.classes.push(AdapterClass {
                name: self.qualify(&name),
                file: self.path.to_string(),
                line: line(n),
                bases,
                methods,
            });
        }
        let _ = depth;
    }

    fn params(&self, fd: Node) -> Vec<Param> {
        let mut out = Vec::new();
        let Some(pl) = fd.child_by_field_name("parameters") else { return out };
        let mut c = pl.walk();
        for p in pl.named_children(&mut c) {
            if !matches!(
                p.kind(),
                "parameter_declaration" | "optional_parameter_declaration" | "variadic_parameter_declaration"
            ) {
                continue;
            }
            let name = p.child_by_field_name("declarator").and_then(innermost);
            let start = p.start_byte();
            let end = p.child_by_field_name("default_value").map(|d| d.start_byte()).unwrap_or(p.end_byte());
            let mut raw = self.src.get(start..end).unwrap_or("").to_string();
            if let Some(nm) = name
                && nm.start_byte() >= start
                && nm.end_byte() <= end
            {
                raw.replace_range(nm.start_byte() - start..nm.end_byte() - start, " ");
            }
            let ty = norm(&raw).trim_end_matches('=').to_string();
            out.push(Param {
                ty,
                name: name.map(|n| self.text(n).to_string()),
                default: p.child_by_field_name("default_value").map(|d| norm(self.text(d))),
            });
        }
        out
    }

    fn function(&mut self, n: Node<'a>, depth: usize) {
        let _ = depth;
        let Some(fd) = fdecl(n) else { return };
        let Some(nm) = fd.child_by_field_name("declarator") else { return };
        // TORCH_LIBRARY_IMPL(ns, Key, m) { ... } parses as a function definition named by the macro
        let fname = self.text(nm).trim().to_string();
        if matches!(fname.as_str(), "TORCH_LIBRARY_IMPL" | "TORCH_LIBRARY" | "TORCH_LIBRARY_FRAGMENT") {
            self.out.uses.push(Use { name: fname.clone(), file: self.path.to_string(), line: line(n) });
            let args: Vec<String> = self.params(fd).into_iter().map(|p| p.ty).collect();
            let ns = args.first().cloned().unwrap_or_default();
            let (key, var) = if fname == "TORCH_LIBRARY_IMPL" {
                (args.get(1).cloned().unwrap_or_default(), args.get(2).cloned().unwrap_or_default())
            } else {
                ("(schema)".to_string(), args.get(1).cloned().unwrap_or_default())
            };
            if let Some(b) = n.child_by_field_name("body") {
                self.registrations(b, &ns, &key, &var);
                self.calls_in(b);
            }
            return;
        }
        let is_static = {
            let mut c = n.walk();
            n.children(&mut c).any(|ch| ch.kind() == "storage_class_specifier" && self.text(ch) == "static")
        };
        let (scope, name) = match nm.kind() {
            "identifier" => (self.ns.last().cloned().unwrap_or_default(), fname.clone()),
            "qualified_identifier" => match fname.rsplit_once("::") {
                Some((q, s)) => (q.rsplit("::").next().unwrap_or(q).to_string(), s.to_string()),
                None => (String::new(), fname.clone()),
            },
            _ => (String::new(), String::new()),
        };
        let kernel_scope = KERNEL_NAMESPACES.contains(&scope.as_str())
            || scope.ends_with("NativeFunctions")
            || scope.ends_with("NativeOpApiFunctions");
        if !is_static && kernel_scope && !name.is_empty() {
            let start = n.start_byte();
            let mut ret = self.src.get(start..nm.start_byte().max(start)).unwrap_or("").to_string();
            for w in ["inline ", "constexpr ", "extern "] {
                ret = ret.replace(w, " ");
            }
            let ret = norm(&ret).trim_end_matches(&format!("{scope}::")).to_string();
            let ret =
                if let Some(q) = fname.rsplit_once("::") { norm(&ret.replace(&format!("{}::", q.0), "")) } else { ret };
            self.out.kernels.push(Kernel {
                name,
                scope,
                ret,
                params: self.params(fd),
                file: self.path.to_string(),
                line: line(n),
                gates: {
                    let mut g = self.gates.clone();
                    if let Some(c) = self.conds.get(n.start_position().row)
                        && !c.is_empty()
                    {
                        g.push(c.clone());
                    }
                    g
                },
            });
        }
        if let Some(b) = n.child_by_field_name("body") {
            self.calls_in(b);
        }
    }

    /// `m.impl("op", fn)` and `m.fallback(fn)` at the top level of a TORCH_LIBRARY_IMPL body (also
    /// inside `#if` blocks there).
    fn registrations(&mut self, body: Node<'a>, ns: &str, key: &str, var: &str) {
        let mut stack = vec![body];
        let mut steps = 0usize;
        while let Some(n) = stack.pop() {
            steps += 1;
            if steps > 1_000_000 {
                break;
            }
            if n.kind() == "call_expression"
                && let Some(f) = n.child_by_field_name("function")
                && f.kind() == "field_expression"
            {
                let obj = f.child_by_field_name("argument").map(|a| self.text(a).trim()).unwrap_or("");
                let field = f.child_by_field_name("field").map(|a| self.text(a).trim()).unwrap_or("");
                if (var.is_empty() || obj == var) && matches!(field, "impl" | "fallback" | "def") {
                    let args = n.child_by_field_name("arguments");
                    let mut parts = Vec::new();
                    if let Some(a) = args {
                        let mut c = a.walk();
                        for x in a.named_children(&mut c) {
                            if x.kind() != "comment" {
                                parts.push(x);
                            }
                        }
                    }
                    let (op, func) = if field == "fallback" {
                        (String::new(), parts.first().map(|x| norm(self.text(*x))).unwrap_or_default())
                    } else {
                        let op = parts
                            .first()
                            .map(|x| self.text(*x).trim().trim_matches('"').to_string())
                            .unwrap_or_default();
                        (op, parts.get(1).map(|x| norm(self.text(*x))).unwrap_or_default())
                    };
                    self.out.registrations.push(Registration {
                        namespace: ns.to_string(),
                        key: if field == "def" { "(schema)".to_string() } else { key.to_string() },
                        op,
                        function: func,
                        file: self.path.to_string(),
                        line: line(n),
                    });
                    continue;
                }
            }
            let mut c = n.walk();
            for ch in n.named_children(&mut c) {
                stack.push(ch);
            }
        }
    }

    fn scan_calls(&mut self, n: Node<'a>) {
        self.calls_in(n);
    }

    /// Every call under `n` by the name it calls (iterative).
    fn calls_in(&mut self, n: Node<'a>) {
        let mut stack = vec![n];
        let mut steps = 0usize;
        while let Some(x) = stack.pop() {
            steps += 1;
            if steps > 2_000_000 {
                break;
            }
            if x.kind() == "call_expression"
                && let Some(f) = x.child_by_field_name("function")
            {
                let name = match f.kind() {
                    "identifier" => Some(self.text(f).to_string()),
                    "qualified_identifier" => self.text(f).rsplit("::").next().map(|s| s.trim().to_string()),
                    "template_function" => f.child_by_field_name("name").map(|t| {
                        let t = self.text(t);
                        t.rsplit("::").next().unwrap_or(t).to_string()
                    }),
                    _ => None,
                };
                if let Some(name) = name {
                    self.out.uses.push(Use { name, file: self.path.to_string(), line: line(x) });
                }
            }
            // a macro invocation at namespace level can parse as a declaration: `C10_REGISTER_GUARD_IMPL(A, B);`
            if matches!(x.kind(), "declaration" | "expression_statement")
                && let Some(first) = x.named_child(0)
            {
                let t = self.text(first);
                let head: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if head.len() > 3 && head.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
                    self.out.uses.push(Use { name: head, file: self.path.to_string(), line: line(x) });
                }
            }
            let mut c = x.walk();
            for ch in x.named_children(&mut c) {
                stack.push(ch);
            }
        }
    }
}

fn fdecl(decl: Node) -> Option<Node> {
    let mut d = decl.child_by_field_name("declarator")?;
    for _ in 0..16 {
        match d.kind() {
            "function_declarator" => return Some(d),
            "pointer_declarator" | "reference_declarator" | "parenthesized_declarator" | "attributed_declarator" => {
                d = match d.child_by_field_name("declarator") {
                    Some(x) => x,
                    None => d.named_child(u32::try_from(d.named_child_count().checked_sub(1)?).ok()?)?,
                };
            }
            _ => return None,
        }
    }
    None
}

fn innermost(d: Node) -> Option<Node> {
    let mut d = d;
    for _ in 0..16 {
        match d.kind() {
            "identifier" | "field_identifier" => return Some(d),
            "pointer_declarator"
            | "reference_declarator"
            | "array_declarator"
            | "parenthesized_declarator"
            | "attributed_declarator" => {
                d = match d.child_by_field_name("declarator") {
                    Some(x) => x,
                    None => d.named_child(u32::try_from(d.named_child_count().checked_sub(1)?).ok()?)?,
                };
            }
            _ => return None,
        }
    }
    None
}
