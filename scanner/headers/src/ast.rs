//! Walks the tree-sitter-cpp syntax tree of a neutralized header and turns it into
//! declarations. Values are resolved later (see `resolve`), so this module only records text.

use tree_sitter::Node;

use crate::lex::normalize;
use crate::pre::{Mark, MarkKind, line_of};
use crate::{Decl, DeclKind, Diagnostic, Param};

const MAX_DEPTH: usize = 400;
const MAX_DIAGNOSTICS: usize = 50;

pub struct Walker<'a> {
    pub src: &'a str,
    pub file: &'a str,
    pub starts: &'a [usize],
    pub marks: &'a [Mark],
    pub decls: Vec<Decl>,
    /// For enumerators and fields: index of their enum / aggregate in `decls`.
    pub owners: Vec<Option<usize>>,
    /// (start, end, body_start, decl index) for deprecation attachment
    spans: Vec<(usize, usize, Option<usize>, usize)>,
    pub diagnostics: Vec<Diagnostic>,
}

fn text<'a>(n: Node, src: &'a str) -> &'a str {
    src.get(n.start_byte()..n.end_byte()).unwrap_or("")
}

fn is_name(kind: &str) -> bool {
    matches!(
        kind,
        "identifier"
            | "field_identifier"
            | "type_identifier"
            | "qualified_identifier"
            | "operator_name"
            | "destructor_name"
            | "primitive_type"
    )
}

/// The identifier a declarator declares.
fn declarator_name(n: Node) -> Option<Node> {
    let mut cur = n;
    for _ in 0..64 {
        if is_name(cur.kind()) {
            return Some(cur);
        }
        if let Some(d) = cur.child_by_field_name("declarator") {
            cur = d;
            continue;
        }
        // parenthesized_declarator and attributed_declarator keep it as a plain child
        let mut found = None;
        for i in 0..cur.named_child_count() {
            if let Some(c) = cur.named_child(i as u32)
                && (is_name(c.kind()) || c.kind().ends_with("declarator"))
            {
                found = Some(c);
                break;
            }
        }
        cur = found?;
    }
    None
}

/// The function declarator that declares a function (not a function pointer), if any.
fn function_declarator(n: Node) -> Option<Node> {
    let mut cur = n;
    for _ in 0..64 {
        match cur.kind() {
            "function_declarator" => {
                let inner = cur.child_by_field_name("declarator")?;
                // `type (name)(args)` declares `name` too
                let paren_name = inner.kind() == "parenthesized_declarator"
                    && inner.named_child_count() == 1
                    && inner.named_child(0).is_some_and(|c| is_name(c.kind()));
                return if is_name(inner.kind()) || paren_name { Some(cur) } else { function_declarator_in(inner) };
            }
            "pointer_declarator" | "reference_declarator" | "attributed_declarator" | "init_declarator" => {
                cur = cur.child_by_field_name("declarator").or_else(|| cur.named_child(0))?;
            }
            _ => return None,
        }
    }
    None
}

fn function_declarator_in(n: Node) -> Option<Node> {
    // `(*f(int))(char)`: a function returning a function pointer
    let mut cur = n;
    for _ in 0..64 {
        match cur.kind() {
            "parenthesized_declarator" => cur = cur.named_child(0)?,
            "pointer_declarator" => cur = cur.child_by_field_name("declarator")?,
            "function_declarator" => {
                let inner = cur.child_by_field_name("declarator")?;
                return if is_name(inner.kind()) { Some(cur) } else { None };
            }
            _ => return None,
        }
    }
    None
}

impl<'a> Walker<'a> {
    pub fn new(src: &'a str, file: &'a str, starts: &'a [usize], marks: &'a [Mark]) -> Self {
        Walker {
            src,
            file,
            starts,
            marks,
            decls: Vec::new(),
            owners: Vec::new(),
            spans: Vec::new(),
            diagnostics: Vec::new(),
        }
    }

    fn line(&self, n: Node) -> u32 {
        line_of(self.starts, n.start_byte())
    }

    fn push(&mut self, d: Decl, n: Node, body_start: Option<usize>) -> usize {
        self.push_owned(d, n, body_start, None)
    }

    fn push_owned(&mut self, d: Decl, n: Node, body_start: Option<usize>, owner: Option<usize>) -> usize {
        self.owners.push(owner);
        self.decls.push(d);
        let idx = self.decls.len() - 1;
        self.spans.push((n.start_byte(), n.end_byte(), body_start, idx));
        idx
    }

    fn decl(&self, kind: DeclKind, name: &str, n: Node) -> Decl {
        Decl::new(kind, name, self.file, self.line(n))
    }

    pub fn walk(&mut self, n: Node, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if (n.is_error() || n.is_missing()) && self.diagnostics.len() < MAX_DIAGNOSTICS {
            let p = n.start_position();
            self.diagnostics.push(Diagnostic {
                line: p.row as u32 + 1,
                column: p.column as u32 + 1,
                message: if n.is_missing() { format!("missing {}", n.kind()) } else { "syntax error".to_string() },
            });
        }
        match n.kind() {
            "declaration" => self.declaration(n, false),
            "function_definition" => self.declaration(n, true),
            "type_definition" => self.typedef(n),
            "struct_specifier" | "union_specifier" | "class_specifier" | "enum_specifier" => {
                self.specifier(n, None, depth);
            }
            "compound_statement" | "field_declaration_list" | "enumerator_list" | "string_literal" | "comment" => {}
            _ => {
                for i in 0..n.named_child_count() {
                    if let Some(c) = n.named_child(i as u32) {
                        self.walk(c, depth + 1);
                    }
                }
            }
        }
    }

    /// Text of a type specifier: named aggregates become `struct Name`, anonymous ones keep
    /// their (normalized) body so that layout changes show.
    fn spec_text(&self, n: Node, name_override: Option<&str>) -> String {
        let k = n.kind();
        if matches!(k, "struct_specifier" | "union_specifier" | "class_specifier" | "enum_specifier")
            && n.child_by_field_name("body").is_some()
        {
            let kw = match k {
                "union_specifier" => "union",
                "enum_specifier" => "enum",
                _ => "struct",
            };
            if let Some(name) = n.child_by_field_name("name") {
                return format!("{kw} {}", text(name, self.src));
            }
            if let Some(o) = name_override {
                return format!("{kw} {o}");
            }
            return normalize(text(n, self.src));
        }
        normalize(text(n, self.src))
    }

    /// Specifier part of a declaration-like node: type and qualifiers, no storage class.
    fn head(&mut self, n: Node, name_override: Option<&str>, depth: usize) -> String {
        let mut parts = Vec::new();
        let first_decl = n.child_by_field_name("declarator").map(|d| d.start_byte()).unwrap_or(usize::MAX);
        for i in 0..n.named_child_count() {
            let Some(c) = n.named_child(i as u32) else {
                continue;
            };
            if c.start_byte() >= first_decl {
                break;
            }
            match c.kind() {
                "type_qualifier" => parts.push(text(c, self.src).to_string()),
                "storage_class_specifier"
                | "attribute_specifier"
                | "attribute_declaration"
                | "ms_declspec_modifier"
                | "virtual"
                | "comment"
                | "explicit_function_specifier" => {}
                _ => {
                    let is_type = n.child_by_field_name("type").is_some_and(|t| t.id() == c.id());
                    if is_type {
                        if matches!(
                            c.kind(),
                            "struct_specifier" | "union_specifier" | "class_specifier" | "enum_specifier"
                        ) && c.child_by_field_name("body").is_some()
                        {
                            let has_name = c.child_by_field_name("name").is_some();
                            if has_name || name_override.is_some() {
                                self.specifier(c, name_override, depth + 1);
                            }
                        }
                        parts.push(self.spec_text(c, name_override));
                    } else if c.kind().ends_with("qualifier")
                        || c.kind() == "primitive_type"
                        || c.kind() == "sized_type_specifier"
                    {
                        parts.push(text(c, self.src).to_string());
                    }
                }
            }
        }
        // qualifiers after the type (`char const *`) are children after the type too
        for i in 0..n.named_child_count() {
            let Some(c) = n.named_child(i as u32) else {
                continue;
            };
            if c.kind() == "type_qualifier" && c.start_byte() < first_decl {
                continue;
            }
            if c.start_byte() >= first_decl {
                break;
            }
        }
        normalize(&parts.join(" "))
    }

    /// Renders a declarator without the declared name; parameter lists become type lists.
    fn render(&self, n: Node, skip: Option<Node>, out: &mut Vec<String>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(s) = skip
            && s.id() == n.id()
        {
            return;
        }
        match n.kind() {
            "parameter_list" => {
                let ps: Vec<String> = self.params(n).0.into_iter().map(|p| p.ty).collect();
                let variadic = self.params(n).1;
                let mut all = ps;
                if variadic {
                    all.push("...".into());
                }
                out.push(format!("({})", all.join(", ")));
                return;
            }
            "comment" => return,
            "init_declarator" => {
                if let Some(d) = n.child_by_field_name("declarator") {
                    self.render(d, skip, out, depth + 1);
                }
                return;
            }
            _ => {}
        }
        if n.child_count() == 0 {
            out.push(text(n, self.src).to_string());
            return;
        }
        let mut cursor = n.walk();
        for c in n.children(&mut cursor) {
            self.render(c, skip, out, depth + 1);
        }
    }

    fn full_type(&self, head: &str, declarator: Option<Node>, skip: Option<Node>) -> String {
        let mut out = vec![head.to_string()];
        if let Some(d) = declarator {
            self.render(d, skip, &mut out, 0);
        }
        normalize(&out.join(" "))
    }

    fn params(&self, list: Node) -> (Vec<Param>, bool) {
        let mut ps = Vec::new();
        let mut variadic = false;
        let mut cursor = list.walk();
        let children: Vec<Node> = list.children(&mut cursor).collect();
        for (i, c) in children.iter().enumerate() {
            match c.kind() {
                "..." | "variadic_parameter" | "variadic_parameter_declaration" => variadic = true,
                "parameter_declaration" | "optional_parameter_declaration" => {
                    let mut tmp = Walker::new(self.src, self.file, self.starts, &[]);
                    let head = tmp.head_only(*c);
                    let d = c.child_by_field_name("declarator");
                    let name_node = d.and_then(declarator_name);
                    let name_node = name_node.filter(|nn| {
                        nn.kind() != "primitive_type" && nn.kind() != "type_identifier"
                            || d.is_some_and(|d| d.kind() != "abstract_pointer_declarator")
                    });
                    let ty = self.full_type(&head, d, name_node);
                    let name = name_node.map(|nn| text(nn, self.src).to_string()).unwrap_or_default();
                    let mut default = c.child_by_field_name("default_value").map(|v| normalize(text(v, self.src)));
                    if default.is_none() {
                        let end = children.get(i + 1).map(|n| n.start_byte()).unwrap_or(c.end_byte());
                        for m in self.marks {
                            if m.pos >= c.start_byte()
                                && m.pos < end
                                && let MarkKind::Default(v) = &m.kind
                            {
                                default = Some(v.clone());
                            }
                        }
                    }
                    if ty == "void" && name.is_empty() && default.is_none() {
                        continue;
                    }
                    ps.push(Param { name, ty, default });
                }
                _ => {}
            }
        }
        (ps, variadic)
    }

    /// `head` without emitting nested aggregates.
    fn head_only(&mut self, n: Node) -> String {
        self.head(n, None, MAX_DEPTH)
    }

    fn declaration(&mut self, n: Node, definition: bool) {
        let head = self.head(n, None, 0);
        let mut cursor = n.walk();
        let declarators: Vec<Node> = n.children_by_field_name("declarator", &mut cursor).collect();
        let storage: Vec<&str> = (0..n.named_child_count())
            .filter_map(|i| n.named_child(i as u32))
            .filter(|c| c.kind() == "storage_class_specifier" || c.kind() == "type_qualifier")
            .map(|c| text(c, self.src))
            .collect();
        for d in declarators {
            if let Some(f) = function_declarator(d) {
                let Some(name_node) = f.child_by_field_name("declarator").and_then(declarator_name) else {
                    continue;
                };
                let name = text(name_node, self.src).to_string();
                if name.is_empty() || head.is_empty() {
                    continue;
                }
                let ret = self.full_type(&head, Some(d), Some(f));
                let (params, variadic) =
                    f.child_by_field_name("parameters").map(|p| self.params(p)).unwrap_or_default();
                let mut decl = self.decl(DeclKind::Function, &name, n);
                decl.line = self.line(name_node).min(decl.line.max(self.line(n)));
                decl.ret = Some(ret);
                decl.params = Some(params);
                decl.variadic = variadic;
                decl.definition = definition;
                self.push(decl, n, None);
            } else if !definition
                && d.kind() == "init_declarator"
                && d.child_by_field_name("value").is_some_and(|v| v.kind() == "argument_list")
                && !storage.contains(&"const")
            {
                // C++'s most vexing parse: `int f(T *a, int (*cb)(T *))` read as a variable
                // initialized by a call. In a header it is a function declaration.
                let (Some(inner), Some(args)) = (d.child_by_field_name("declarator"), d.child_by_field_name("value"))
                else {
                    continue;
                };
                let Some(name_node) = declarator_name(inner) else { continue };
                if head.is_empty() {
                    continue;
                }
                let mut decl = self.decl(DeclKind::Function, text(name_node, self.src), n);
                decl.ret = Some(self.full_type(&head, Some(inner), Some(name_node)));
                let mut params = Vec::new();
                let mut all_params = true;
                for i in 0..args.named_child_count() {
                    let Some(a) = args.named_child(i as u32) else { continue };
                    if a.kind() == "comment" {
                        continue;
                    }
                    let t = text(a, self.src);
                    if t.trim() == "..." {
                        decl.variadic = true;
                        continue;
                    }
                    match reparse_param(t) {
                        Some(p) => params.push(p),
                        None => all_params = false,
                    }
                }
                if !all_params {
                    continue; // a real initializer (`x(2 * sizeof(int))`), not parameters
                }
                if params.len() == 1 && params[0].ty == "void" && params[0].name.is_empty() {
                    params.clear();
                }
                decl.params = Some(params);
                self.push(decl, n, None);
            } else if !definition && d.kind() == "init_declarator" && storage.contains(&"const") {
                let Some(name_node) = declarator_name(d) else {
                    continue;
                };
                let name = text(name_node, self.src).to_string();
                let mut decl = self.decl(DeclKind::Constant, &name, n);
                decl.ty = Some(self.full_type(&head, d.child_by_field_name("declarator"), Some(name_node)));
                decl.expr = d.child_by_field_name("value").map(|v| normalize(text(v, self.src)));
                self.push(decl, n, None);
            }
        }
    }

    fn typedef(&mut self, n: Node) {
        let mut cursor = n.walk();
        let declarators: Vec<Node> = n.children_by_field_name("declarator", &mut cursor).collect();
        let first_name = declarators.first().and_then(|d| declarator_name(*d)).map(|nn| text(nn, self.src).to_string());
        let head = self.head(n, first_name.as_deref(), 0);
        for d in declarators {
            let Some(name_node) = declarator_name(d) else {
                continue;
            };
            let name = text(name_node, self.src).to_string();
            let ty = self.full_type(&head, Some(d), Some(name_node));
            let mut decl = self.decl(DeclKind::Typedef, &name, n);
            decl.ty = Some(ty);
            self.push(decl, n, None);
        }
    }

    fn specifier(&mut self, n: Node, name_override: Option<&str>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        let kind = match n.kind() {
            "enum_specifier" => DeclKind::Enum,
            "union_specifier" => DeclKind::Union,
            _ => DeclKind::Struct,
        };
        let name = n
            .child_by_field_name("name")
            .map(|nn| text(nn, self.src).to_string())
            .or_else(|| name_override.map(str::to_string))
            .unwrap_or_default();
        if kind != DeclKind::Enum && name.is_empty() {
            return; // anonymous aggregates live inside their parent's field types
        }
        let decl = self.decl(kind, &name, n);
        let owner = self.push(decl, n, Some(body.start_byte()));
        if kind == DeclKind::Enum {
            let mut index = 0u32;
            for i in 0..body.named_child_count() {
                let Some(e) = body.named_child(i as u32) else {
                    continue;
                };
                if e.kind() != "enumerator" {
                    continue;
                }
                let Some(en) = e.child_by_field_name("name") else {
                    continue;
                };
                let mut d = self.decl(DeclKind::Enumerator, text(en, self.src), e);
                d.parent = Some(name.clone());
                d.expr = e.child_by_field_name("value").map(|v| normalize(text(v, self.src)));
                d.index = Some(index);
                index += 1;
                self.push_owned(d, e, None, Some(owner));
            }
        } else {
            let mut index = 0u32;
            self.fields(body, &name, &mut index, depth + 1, owner);
        }
    }

    fn fields(&mut self, body: Node, parent: &str, index: &mut u32, depth: usize, owner: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        for i in 0..body.named_child_count() {
            let Some(f) = body.named_child(i as u32) else {
                continue;
            };
            match f.kind() {
                "field_declaration" => {}
                "ERROR" | "access_specifier" => {
                    continue;
                }
                k if k.starts_with("preproc") => {
                    self.fields(f, parent, index, depth + 1, owner);
                    continue;
                }
                _ => continue,
            }
            let head = self.head(f, None, depth);
            let mut cursor = f.walk();
            let declarators: Vec<Node> = f.children_by_field_name("declarator", &mut cursor).collect();
            let bits = (0..f.named_child_count())
                .filter_map(|k| f.named_child(k as u32))
                .find(|c| c.kind() == "bitfield_clause")
                .map(|c| normalize(text(c, self.src).trim_start_matches(':')));
            if declarators.is_empty() {
                // C11 anonymous struct/union member
                if head.contains('{') {
                    let mut d = self.decl(DeclKind::Field, &format!("(anonymous {})", *index), f);
                    d.parent = Some(parent.to_string());
                    d.ty = Some(head.clone());
                    d.index = Some(*index);
                    *index += 1;
                    self.push_owned(d, f, None, Some(owner));
                }
                continue;
            }
            for decl_node in declarators {
                if function_declarator(decl_node).is_some() {
                    continue; // C++ method
                }
                let Some(name_node) = declarator_name(decl_node) else {
                    continue;
                };
                let mut d = self.decl(DeclKind::Field, text(name_node, self.src), f);
                d.parent = Some(parent.to_string());
                d.ty = Some(self.full_type(&head, Some(decl_node), Some(name_node)));
                d.bits = bits.clone();
                d.index = Some(*index);
                *index += 1;
                self.push_owned(d, f, None, Some(owner));
            }
        }
    }

    /// Attaches deprecation marks: to the innermost declaration that contains the mark (unless
    /// the mark is inside an aggregate's body), else to the next declaration.
    pub fn attach_deprecations(&mut self) {
        for m in self.marks {
            let MarkKind::Deprecated(msg) = &m.kind else {
                continue;
            };
            // the innermost aggregate body around the mark bounds where it can attach
            let scope = self
                .spans
                .iter()
                .filter_map(|&(s, e, body, _)| body.filter(|b| m.pos >= *b && m.pos < e).map(|b| (b, e, e - s)))
                .min_by_key(|t| t.2);
            let (lo, hi) = scope.map(|(b, e, _)| (b, e)).unwrap_or((0, usize::MAX));
            let mut best: Option<(usize, usize)> = None; // (size, idx)
            for &(s, e, body, idx) in &self.spans {
                if s < lo || e > hi {
                    continue;
                }
                if m.pos >= s && m.pos < e && body.is_none_or(|b| m.pos < b) {
                    let size = e - s;
                    if best.is_none_or(|(bs, _)| size < bs) {
                        best = Some((size, idx));
                    }
                }
            }
            let target = best.map(|(_, i)| i).or_else(|| {
                self.spans
                    .iter()
                    .filter(|(s, e, ..)| *s >= m.pos && *s >= lo && *e <= hi)
                    .min_by_key(|(s, e, ..)| (*s, usize::MAX - *e))
                    .map(|t| t.3)
            });
            if let Some(i) = target {
                let d = &mut self.decls[i];
                d.deprecated = true;
                if d.deprecation.is_none() {
                    d.deprecation = msg.clone();
                }
            }
        }
    }
}

/// Reads one parameter on its own, as `typedef text;` (a typedef cannot be read as an
/// expression, so the C++ ambiguity does not come back). `None` when it is not a declaration.
fn reparse_param(text_in: &str) -> Option<Param> {
    // literals outside array brackets mean an expression, not a parameter
    let mut brackets = 0i32;
    for t in crate::lex::tokenize(text_in) {
        match t.text(text_in) {
            "[" => brackets += 1,
            "]" => brackets -= 1,
            "sizeof" if brackets == 0 => return None,
            _ if brackets == 0
                && matches!(t.kind, crate::lex::Tok::Number | crate::lex::Tok::Str | crate::lex::Tok::Char) =>
            {
                return None;
            }
            _ => {}
        }
    }
    let src = format!("typedef {text_in};");
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&tree_sitter_cpp::LANGUAGE.into()).ok()?;
    let tree = parser.parse(&src, None)?;
    if tree.root_node().has_error() {
        return None;
    }
    let decl = tree.root_node().named_child(0).filter(|c| c.kind() == "type_definition")?;
    let starts = [0usize];
    let mut w = Walker::new(&src, "", &starts, &[]);
    let head = w.head_only(decl);
    let d = decl.child_by_field_name("declarator");
    let name_node = d.and_then(declarator_name);
    let ty = w.full_type(&head, d, name_node);
    let name = name_node.map(|nn| text(nn, &src).to_string()).unwrap_or_default();
    Some(Param { name, ty, default: None })
}
