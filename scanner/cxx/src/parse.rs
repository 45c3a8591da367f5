//! The tree walk: classes, members, free registration functions, macros and autocast lists out of a
//! tree-sitter-cpp tree of one (masked) header.

use std::collections::HashSet;

use tree_sitter::{Node, Parser, Tree};

use crate::text::{self, norm};
use crate::{
    AutocastEntry, Class, ClassRole, CxxError, CxxFile, Diagnostic, Function, Macro, MemberKind, Method, Param,
};

/// Deepest nesting of namespaces, classes and conditionals the walk follows; deeper input is
/// reported, not followed (no stack overflow on hostile input).
pub const MAX_DEPTH: usize = 128;
/// At most this many parse diagnostics per file.
const MAX_DIAGNOSTICS: usize = 20;

pub fn parser() -> Result<Parser, CxxError> {
    let mut p = Parser::new();
    p.set_language(&tree_sitter_cpp::LANGUAGE.into()).map_err(|e| CxxError::Language(e.to_string()))?;
    Ok(p)
}

/// Parses every source on the machine's cores (at most 4): the largest sources first, each thread
/// taking the next one when it is done, so one big header does not leave a core idle. `None` for a
/// source tree-sitter gave up on, or one `skip` says needs no parsing.
pub fn parse_all(srcs: &[String], skip: &[bool]) -> Result<Vec<Option<Tree>>, CxxError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut order: Vec<usize> = (0..srcs.len()).filter(|&i| !skip.get(i).copied().unwrap_or(false)).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(srcs[i].len()));
    let threads =
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 4).min(order.len().max(1));
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Tree>>> = Mutex::new((0..srcs.len()).map(|_| None).collect());
    let work = || -> Result<(), CxxError> {
        let mut p = parser()?;
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { return Ok(()) };
            let t = p.parse(&srcs[i], None);
            // a poisoned lock only means another parser thread panicked; the slot is still ours
            let mut guard = out.lock().unwrap_or_else(|e| e.into_inner());
            guard[i] = t;
        }
    };
    if threads == 1 {
        work()?;
    } else {
        let results: Vec<Result<(), CxxError>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..threads).map(|_| sc.spawn(work)).collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(CxxError::Language("a parser thread failed".into()))))
                .collect()
        });
        for r in results {
            r?;
        }
    }
    Ok(out.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// Words one of which every file that can add to the interface contains (a virtual or an override,
/// a registrar, a registration macro or function, an autocast list); a file with none is listed but
/// not parsed.
const INTERFACE_WORDS: &[&str] = &[
    "virtual",
    "override",
    "register",
    "registry",
    "allocator",
    "privateuse1",
    "fallback",
    "hooks",
    "torch_library",
    "at_forall_",
    "library",
    "cppfunction",
];

/// Whether `text` may add to the interface (see [`INTERFACE_WORDS`]).
pub fn may_define_interface(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    INTERFACE_WORDS.iter().any(|w| lower.contains(w))
}

/// Macros that fail unconditionally whatever their arguments.
const ALWAYS_FAIL: &[&str] = &["AT_ERROR", "C10_THROW_ERROR", "TORCH_CHECK_NOT_IMPLEMENTED_ALWAYS"];
/// Checks that fail when their first argument is `false` (or `0`).
const CHECKS: &[&str] = &[
    "TORCH_CHECK",
    "TORCH_CHECK_NOT_IMPLEMENTED",
    "TORCH_CHECK_VALUE",
    "TORCH_CHECK_TYPE",
    "TORCH_CHECK_INDEX",
    "TORCH_CHECK_LINALG",
    "TORCH_INTERNAL_ASSERT",
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE",
    "AT_ASSERT",
    "AT_ASSERTM",
];

fn call_fails(name: &str, first_arg: Option<&str>, failing: &HashSet<String>) -> bool {
    if ALWAYS_FAIL.contains(&name) || failing.contains(name) {
        return true;
    }
    CHECKS.contains(&name) && matches!(first_arg.map(str::trim), Some("false" | "0"))
}

/// The function-like macros of `texts` whose body starts with an unconditional failure
/// (`#define FAIL_PRIVATEUSE1HOOKS_FUNC(func) TORCH_CHECK_NOT_IMPLEMENTED(false, ...)`), to a fixed point.
pub fn failing_macros<'a>(texts: impl Iterator<Item = &'a str>) -> HashSet<String> {
    let mut defs: Vec<(String, String)> = Vec::new();
    for t in texts {
        let mut lines = t.lines();
        while let Some(l) = lines.next() {
            let lt = l.trim_start();
            let Some(rest) = lt.strip_prefix('#') else { continue };
            let rest = rest.trim_start();
            let Some(rest) = rest.strip_prefix("define") else { continue };
            let mut full = rest.to_string();
            let mut cur = l;
            while cur.trim_end().ends_with('\\') {
                match lines.next() {
                    Some(n) => {
                        full.push('\n');
                        full.push_str(n);
                        cur = n;
                    }
                    None => break,
                }
            }
            let full = full.trim_start();
            let name: String = full.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name.is_empty() {
                continue;
            }
            let after = &full[name.len()..];
            let Some(after) = after.strip_prefix('(') else { continue };
            let Some(close) = after.find(')') else { continue };
            defs.push((name, norm(&after[close + 1..])));
        }
    }
    let mut failing = HashSet::new();
    for _ in 0..8 {
        let before = failing.len();
        for (name, body) in &defs {
            if failing.contains(name) {
                continue;
            }
            let callee: String = body.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let rest = &body[callee.len()..];
            let first =
                rest.strip_prefix('(').map(|r| text::split_top(r.trim_end_matches([')', ';']))).unwrap_or_default();
            if !callee.is_empty() && call_fails(&callee, first.first().map(String::as_str), &failing) {
                failing.insert(name.clone());
            }
        }
        if failing.len() == before {
            break;
        }
    }
    failing
}

struct Ctx<'a> {
    src: &'a str,
    /// The file as written (same offsets as `src`, whose plain bodies are blanked).
    orig: &'a str,
    /// The `#if` condition of every line (see [`text::line_conditions`]).
    conds: Vec<String>,
    path: &'a str,
    failing: &'a HashSet<String>,
    file: CxxFile,
    ns: Vec<String>,
    cond: Vec<String>,
}

pub fn read_file(
    path: &str,
    original: &str,
    masked: &str,
    tree: &Option<Tree>,
    skipped: bool,
    failing: &HashSet<String>,
) -> CxxFile {
    let mut cx = Ctx {
        src: masked,
        orig: original,
        conds: text::line_conditions(original),
        path,
        failing,
        file: CxxFile { path: path.to_string(), ..CxxFile::default() },
        ns: Vec::new(),
        cond: Vec::new(),
    };
    match tree {
        None if skipped => {}
        None => cx.file.diagnostics.push(Diagnostic {
            file: path.to_string(),
            line: 1,
            column: 1,
            message: "tree-sitter returned no tree for this file; nothing in it was read".into(),
        }),
        Some(t) => {
            let root = t.root_node();
            cx.errors(root);
            cx.walk(root, 0, false);
        }
    }
    let f = &mut cx.file;
    f.classes.sort_by(|a, b| (a.line, &a.name).cmp(&(b.line, &b.name)));
    f.classes.dedup_by(|a, b| a.name == b.name && a.members == b.members);
    f.functions.sort_by(|a, b| (a.line, &a.name).cmp(&(b.line, &b.name)));
    f.macros.sort_by(|a, b| (a.line, &a.name).cmp(&(b.line, &b.name)));
    f.autocast.sort();
    f.autocast.dedup_by(|a, b| a.list == b.list && a.op == b.op);
    f.diagnostics.sort();
    cx.file
}

fn line(n: Node) -> u32 {
    u32::try_from(n.start_position().row + 1).unwrap_or(u32::MAX)
}

impl<'a> Ctx<'a> {
    fn text(&self, n: Node) -> &'a str {
        self.src.get(n.byte_range()).unwrap_or("")
    }

    fn diag(&mut self, n: Node, message: String) {
        if self.file.diagnostics.len() < MAX_DIAGNOSTICS {
            let p = n.start_position();
            self.file.diagnostics.push(Diagnostic {
                file: self.path.to_string(),
                line: u32::try_from(p.row + 1).unwrap_or(u32::MAX),
                column: u32::try_from(p.column + 1).unwrap_or(u32::MAX),
                message,
            });
        }
    }

    /// Reports the outermost ERROR and MISSING nodes (iterative: no recursion over the tree).
    fn errors(&mut self, root: Node) {
        if !root.has_error() {
            return;
        }
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if self.file.diagnostics.len() >= MAX_DIAGNOSTICS {
                return;
            }
            if n.is_error() {
                let snippet: String = norm(self.text(n)).chars().take(60).collect();
                self.diag(n, format!("tree-sitter could not parse `{snippet}`; declarations in it may be missing"));
                continue;
            }
            if n.is_missing() {
                // a macro that supplies its own `;` (`TORCH_CHECK(false, ...)` at the end of a body)
                // is the usual cause of a missing `;`: not worth a warning
                if n.kind() != ";" {
                    self.diag(n, format!("expected `{}` here; read as if it were present", n.kind()));
                }
                continue;
            }
            if n.has_error() {
                let mut c = n.walk();
                let kids: Vec<Node> = n.children(&mut c).collect();
                stack.extend(kids.into_iter().rev());
            }
        }
    }

    fn qualify(&self, name: &str) -> String {
        let mut parts: Vec<&str> = self.ns.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
        parts.push(name);
        parts.join("::")
    }

    fn condition(&self, n: Node) -> Option<String> {
        let mut parts: Vec<&str> = self.cond.iter().map(String::as_str).collect();
        if let Some(c) = self.conds.get(n.start_position().row)
            && !c.is_empty()
        {
            parts.push(c);
        }
        if parts.is_empty() { None } else { Some(parts.join(" && ")) }
    }

    fn walk(&mut self, n: Node<'a>, depth: usize, in_template: bool) {
        if depth > MAX_DEPTH {
            self.diag(n, format!("nested more than {MAX_DEPTH} levels deep; the rest is not read"));
            return;
        }
        match n.kind() {
            "namespace_definition" => {
                let name = n.child_by_field_name("name").map(|x| norm(self.text(x))).unwrap_or_default();
                let pushed = if name.is_empty() { "(anonymous)".to_string() } else { name };
                self.ns.push(pushed);
                if let Some(b) = n.child_by_field_name("body") {
                    self.walk_children(b, depth + 1, false);
                }
                self.ns.pop();
            }
            "class_specifier" | "struct_specifier" if n.child_by_field_name("body").is_some() => {
                self.class(n, depth + 1);
            }
            "preproc_def" | "preproc_function_def" => self.r#macro(n),
            "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else" | "preproc_elifdef" => {
                let c = self.cond_text(n);
                self.cond.push(c);
                self.walk_children(n, depth + 1, false);
                self.cond.pop();
            }
            "template_declaration" => self.walk_children(n, depth + 1, true),
            "declaration" | "function_definition" => {
                self.free_function(n, in_template);
                // `struct X {...} x;` and the like
                if let Some(t) = n.child_by_field_name("type")
                    && matches!(t.kind(), "class_specifier" | "struct_specifier")
                {
                    self.walk(t, depth + 1, false);
                }
            }
            "translation_unit"
            | "declaration_list"
            | "linkage_specification"
            | "ERROR"
            | "type_definition"
            | "expression_statement" => self.walk_children(n, depth + 1, in_template),
            _ => {}
        }
    }

    fn walk_children(&mut self, n: Node<'a>, depth: usize, in_template: bool) {
        let mut c = n.walk();
        let kids: Vec<Node<'a>> = n.named_children(&mut c).collect();
        for k in kids {
            self.walk(k, depth, in_template);
        }
    }

    fn cond_text(&self, n: Node) -> String {
        match n.kind() {
            "preproc_else" => "#else".into(),
            _ => {
                let t = self.text(n);
                let first = t.lines().next().unwrap_or("");
                norm(first)
            }
        }
    }

    fn r#macro(&mut self, n: Node) {
        let Some(name_node) = n.child_by_field_name("name") else { return };
        let name = self.text(name_node).to_string();
        let value = n.child_by_field_name("value").map(|v| self.text(v)).unwrap_or("");
        let params = n.child_by_field_name("parameters").map(|p| {
            let t = self.text(p);
            let inner = t.trim().trim_start_matches('(').trim_end_matches(')');
            inner.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect::<Vec<_>>()
        });
        if self.path.ends_with("autocast_mode.h")
            && let Some(list) = name.strip_prefix("AT_FORALL_")
            && let Some(ps) = &params
            && ps.len() == 1
        {
            let base = line(n) - 1;
            let vstart = n.child_by_field_name("value").map(|v| v.start_position().row as u32).unwrap_or(base);
            for (off, args) in text::xmacro_entries(value, &ps[0]) {
                let at = vstart + 1 + value.get(..off).map(|s| s.matches('\n').count() as u32).unwrap_or(0);
                let op = autocast_op(&args);
                if op.is_empty() {
                    continue;
                }
                self.file.autocast.push(AutocastEntry { list: list.to_ascii_lowercase(), op, line: at });
            }
        }
        if is_registration_macro(&name) {
            self.file.macros.push(Macro {
                name,
                params,
                body: text::hash(&norm(value)),
                file: self.path.to_string(),
                line: line(n),
            });
        }
    }

    fn free_function(&mut self, n: Node<'a>, in_template: bool) {
        let Some(fd) = function_declarator(n) else { return };
        let Some(name_node) = fd.child_by_field_name("declarator") else { return };
        if name_node.kind() != "identifier" {
            return;
        }
        let name = self.text(name_node).to_string();
        if !is_registration_function(&name) {
            return;
        }
        let (ret, _) = self.prefix(n, name_node);
        let (params, quals) = self.params(fd);
        self.file.functions.push(Function {
            name: self.qualify(&name),
            ret,
            params,
            noexcept: quals.noexcept,
            template: in_template,
            file: self.path.to_string(),
            line: line(n),
        });
    }

    /// The return type (specifier keywords removed) and the specifier words of a declaration: the text
    /// from its start to its name.
    fn prefix(&self, decl: Node, name: Node) -> (String, Vec<String>) {
        let start = decl.start_byte();
        let end = name.start_byte().max(start);
        let mut raw = self.src.get(start..end).unwrap_or("").to_string();
        // attributes: [[...]]
        while let Some(p) = raw.find("[[") {
            match raw[p..].find("]]") {
                Some(q) => raw.replace_range(p..p + q + 2, " "),
                None => break,
            }
        }
        let mut t = norm(&raw);
        // statement-like macro invocations without a `;` before the declaration
        // (`DEFINE_BINARY_NOT_SUPPORTED(add)` lines in a class body) glue onto it: drop them
        while let Some(cut) = leading_macro_call(&t) {
            t = t[cut..].trim_start().to_string();
        }
        let mut words = Vec::new();
        loop {
            let w: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if matches!(
                w.as_str(),
                "virtual"
                    | "static"
                    | "inline"
                    | "explicit"
                    | "constexpr"
                    | "friend"
                    | "extern"
                    | "consteval"
                    | "mutable"
            ) {
                t = t[w.len()..].trim_start().to_string();
                words.push(w);
            } else {
                break;
            }
        }
        // `Foo::` of an out-of-line name, and a trailing `::`
        (t.trim().to_string(), words)
    }

    fn params(&self, fd: Node<'a>) -> (Vec<Param>, Quals) {
        let mut out = Vec::new();
        let mut q = Quals::default();
        let Some(pl) = fd.child_by_field_name("parameters") else { return (out, q) };
        let mut c = pl.walk();
        for p in pl.named_children(&mut c) {
            match p.kind() {
                "parameter_declaration" | "optional_parameter_declaration" | "variadic_parameter_declaration" => {}
                _ => continue,
            }
            let default = p.child_by_field_name("default_value").map(|d| norm(self.text(d)));
            let name = p.child_by_field_name("declarator").and_then(innermost_name);
            let start = p.start_byte();
            let end = p.child_by_field_name("default_value").map(|d| d.start_byte()).unwrap_or(p.end_byte());
            let mut raw = self.src.get(start..end).unwrap_or("").to_string();
            if let Some(nm) = name
                && nm.start_byte() >= start
                && nm.end_byte() <= end
            {
                raw.replace_range(nm.start_byte() - start..nm.end_byte() - start, " ");
            }
            while let Some(a) = raw.find("[[") {
                match raw[a..].find("]]") {
                    Some(b) => raw.replace_range(a..a + b + 2, " "),
                    None => break,
                }
            }
            let mut ty = norm(&raw);
            if default.is_some() {
                ty = ty.trim_end_matches('=').trim_end().to_string();
            }
            if ty == "void" && out.is_empty() && pl.named_child_count() == 1 {
                continue;
            }
            out.push(Param { ty, name: name.map(|n| self.text(n).to_string()), default });
        }
        let mut after = false;
        let mut c2 = fd.walk();
        for ch in fd.children(&mut c2) {
            if ch.id() == pl.id() {
                after = true;
                continue;
            }
            if !after {
                continue;
            }
            match ch.kind() {
                "type_qualifier" if self.text(ch) == "const" => q.is_const = true,
                "noexcept" => q.noexcept = Some(norm(self.text(ch))),
                "virtual_specifier" => {
                    let s = self.text(ch).to_string();
                    q.specifier = Some(match q.specifier.take() {
                        Some(prev) => format!("{prev} {s}"),
                        None => s,
                    });
                }
                "trailing_return_type" => {
                    q.trailing = Some(norm(self.text(ch).trim_start_matches("->")));
                }
                "ref_qualifier" => q.ref_qual = Some(self.text(ch).to_string()),
                _ => {}
            }
        }
        (out, q)
    }

    fn class(&mut self, n: Node<'a>, depth: usize) {
        let Some(name_node) = n.child_by_field_name("name") else { return };
        let short = norm(self.text(name_node));
        let name = self.qualify(&short);
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
        let access = if n.kind() == "class_specifier" { "private" } else { "public" };
        let mut members = Vec::new();
        self.ns.push(short.clone());
        if let Some(body) = n.child_by_field_name("body") {
            let mut acc = access.to_string();
            self.members(body, &short, &mut acc, &mut members, depth + 1, false);
        }
        self.ns.pop();
        for (i, m) in members.iter_mut().enumerate() {
            m.index = u32::try_from(i).unwrap_or(u32::MAX);
        }
        let role = if members.iter().any(|m| m.is_virtual) {
            Some(ClassRole::Interface)
        } else if is_registrar_class(&name) {
            Some(ClassRole::Registrar)
        } else {
            None
        };
        if let Some(role) = role {
            self.file.classes.push(Class { name, role, file: self.path.to_string(), line: line(n), bases, members });
        }
    }

    fn members(
        &mut self,
        list: Node<'a>,
        class: &str,
        access: &mut String,
        out: &mut Vec<Method>,
        depth: usize,
        in_template: bool,
    ) {
        if depth > MAX_DEPTH {
            self.diag(list, format!("nested more than {MAX_DEPTH} levels deep; the rest is not read"));
            return;
        }
        let mut c = list.walk();
        let kids: Vec<Node<'a>> = list.named_children(&mut c).collect();
        for k in kids {
            match k.kind() {
                "access_specifier" => *access = self.text(k).trim().to_string(),
                "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else" | "preproc_elifdef" => {
                    let ct = self.cond_text(k);
                    self.cond.push(ct);
                    self.members(k, class, access, out, depth + 1, false);
                    self.cond.pop();
                }
                "preproc_def" | "preproc_function_def" => self.r#macro(k),
                "template_declaration" => self.members(k, class, access, out, depth + 1, true),
                "field_declaration" | "declaration" | "function_definition" => {
                    if let Some(t) = k.child_by_field_name("type")
                        && matches!(t.kind(), "class_specifier" | "struct_specifier")
                        && t.child_by_field_name("body").is_some()
                    {
                        self.class(t, depth + 1);
                        continue;
                    }
                    if access == "private" {
                        continue;
                    }
                    if let Some(m) = self.method(k, class, access) {
                        // the same member in two branches of a conditional is kept once
                        if !out.iter().any(|o| o.name == m.name && o.override_key() == m.override_key()) {
                            out.push(m);
                        }
                    }
                }
                _ => {}
            }
        }
        let _ = in_template;
    }

    fn method(&mut self, decl: Node<'a>, class: &str, access: &str) -> Option<Method> {
        let fd = function_declarator(decl)?;
        let name_node = fd.child_by_field_name("declarator")?;
        let (name, mut kind) = match name_node.kind() {
            "field_identifier" | "identifier" => (self.text(name_node).to_string(), MemberKind::Method),
            "operator_name" => (norm(self.text(name_node)), MemberKind::Operator),
            "template_function" => (norm(self.text(name_node)), MemberKind::Method),
            _ => return None, // destructors, out-of-line definitions
        };
        let mut c = decl.walk();
        let mut has_default = false;
        let mut pure = false;
        for ch in decl.children(&mut c) {
            match ch.kind() {
                "delete_method_clause" => return None,
                "default_method_clause" => has_default = true,
                "pure_virtual_clause" => pure = true,
                _ => {}
            }
        }
        if decl.kind() == "field_declaration"
            && let Some(d) = decl.child_by_field_name("default_value")
            && self.text(d).trim() == "0"
        {
            pure = true;
        }
        let (mut ret, words) = self.prefix(decl, name_node);
        if decl.child_by_field_name("type").is_none() && name == class.rsplit("::").next().unwrap_or(class) {
            kind = MemberKind::Constructor;
            ret.clear();
        }
        let (params, q) = self.params(fd);
        if let Some(t) = q.trailing
            && ret == "auto"
        {
            ret = t;
        }
        // `{ TORCH_CHECK(false, "...") }` without a `;` (the macro brings its own) parses as a brace
        // initializer of a field: it is the body
        let body = decl.child_by_field_name("body").or_else(|| {
            decl.child_by_field_name("default_value")
                .filter(|d| decl.kind() == "field_declaration" && d.kind() == "initializer_list")
        });
        let is_virtual = words.iter().any(|w| w == "virtual") || q.specifier.is_some();
        // the bodies of other members were blanked before parsing (text::blank_plain_bodies): their
        // hash is taken from the file as written, and only a virtual's default can throw
        let body_hash = body.map(|b| text::hash(&norm(self.orig.get(b.byte_range()).unwrap_or(""))));
        let throws = body.is_some_and(|b| is_virtual && self.body_throws(b));
        if body.is_some() {
            has_default = true;
        }

        Some(Method {
            name,
            kind,
            ret,
            ref_qualifier: q.ref_qual,
            params,
            is_const: q.is_const,
            noexcept: q.noexcept,
            is_virtual,
            pure,
            has_default,
            default_throws: throws,
            is_static: words.iter().any(|w| w == "static"),
            specifier: q.specifier,
            access: access.to_string(),
            index: 0,
            body: body_hash,
            line: line(name_node),
            condition: self.condition(name_node),
        })
    }

    /// Whether a body fails unconditionally at its top level.
    fn body_throws(&self, body: Node) -> bool {
        let mut c = body.walk();
        for st in body.named_children(&mut c) {
            match st.kind() {
                "throw_statement" => return true,
                "expression_statement" | "call_expression" => {
                    let call = if st.kind() == "call_expression" {
                        st
                    } else {
                        let Some(c) = st.named_child(0) else { continue };
                        c
                    };
                    if call.kind() != "call_expression" {
                        continue;
                    }
                    let Some(f) = call.child_by_field_name("function") else { continue };
                    let fname = self.text(f).trim();
                    let first =
                        call.child_by_field_name("arguments").and_then(|a| a.named_child(0)).map(|a| self.text(a));
                    if call_fails(fname, first, self.failing) {
                        return true;
                    }
                }
                "return_statement" => return false,
                _ => {}
            }
        }
        false
    }
}

#[derive(Default)]
struct Quals {
    is_const: bool,
    noexcept: Option<String>,
    specifier: Option<String>,
    trailing: Option<String>,
    ref_qual: Option<String>,
}

/// The function declarator of a declaration (through pointer / reference / parenthesized wrappers).
fn function_declarator(decl: Node) -> Option<Node> {
    let mut d = decl.child_by_field_name("declarator")?;
    for _ in 0..16 {
        match d.kind() {
            "function_declarator" => return Some(d),
            "pointer_declarator"
            | "reference_declarator"
            | "parenthesized_declarator"
            | "attributed_declarator"
            | "init_declarator" => {
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

/// The identifier a (parameter) declarator names, if any.
fn innermost_name(d: Node) -> Option<Node> {
    let mut d = d;
    for _ in 0..16 {
        match d.kind() {
            "identifier" | "field_identifier" => return Some(d),
            "pointer_declarator"
            | "reference_declarator"
            | "array_declarator"
            | "parenthesized_declarator"
            | "attributed_declarator"
            | "function_declarator" => {
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

/// When `t` starts with `NAME(...)` where NAME is an all-caps macro name, the offset after the
/// closing parenthesis.
fn leading_macro_call(t: &str) -> Option<usize> {
    let name: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if name.len() < 2
        || !name.contains('_')
        || !name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let rest = &t[name.len()..];
    if !rest.starts_with('(') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(name.len() + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn autocast_op(args: &[String]) -> String {
    match args {
        [] => String::new(),
        [op] => op.clone(),
        [_, s, ..] if s.starts_with('"') => s.trim_matches('"').to_string(),
        [op, ov, ..] if ov.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => format!("{op}.{ov}"),
        [op, ..] => op.clone(),
    }
}

/// Registration macros: `*REGISTER*`, `*REGISTRY*`, `TORCH_LIBRARY*`.
pub fn is_registration_macro(name: &str) -> bool {
    name.contains("REGISTER") || name.contains("REGISTRY") || name.trim_start_matches('_').starts_with("TORCH_LIBRARY")
}

/// Registration functions: names with `register`, `allocator`, `privateuse1`, `fallback` or `hooks`.
pub fn is_registration_function(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    ["register", "allocator", "privateuse1", "fallback", "hooks"].iter().any(|k| l.contains(k))
}

/// Registrars and the registration API.
pub fn is_registrar_class(name: &str) -> bool {
    let short = name.rsplit("::").next().unwrap_or(name);
    short.ends_with("Registrar")
        || short.ends_with("Registerer")
        || matches!(name, "torch::Library" | "torch::CppFunction" | "c10::impl::DeviceGuardImplRegistrar")
}
