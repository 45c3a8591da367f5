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
//!
//! The index also finds the host reference implementations the CPU-fallback tier runs
//! ([`AdapterIndex::fallbacks`], read by `xirang-scan coverage`, by the generator to attach host implementations
//! (`native::attach_hosts`) and by the drift engine for the impact on them (`impact::fallbacks_of`)):
//! 1. every entry of a fallback table: a `static` whose type names [`FALLBACK_FN_TYPE`] (`HostFn`,
//!    the runtime's boxed host function type), e.g. `static TABLE: &[(&str, usize, HostFn)] = &[
//!    ("add.Tensor", 3, add_tensor), ...]`. Each parenthesised tuple of the value whose first token
//!    is a string literal naming an operator registers that operator, at the literal's line;
//! 2. any function whose doc comment carries a marker line `/// xirang-fallback: op[, op...]` (for
//!    a host implementation registered some other way).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

use crate::error::{Error, SourceFile};
use crate::naming;
use crate::schema::OperatorName;

/// The doc-comment marker: `/// xirang-kernel: op[, op...]`.
pub const MARKER: &str = "xirang-kernel:";
/// The generated trait whose impl methods are kernels.
pub const TRAIT_NAME: &str = "AtenOps";
/// The generated trait of hand-written backward formulas (`hook_<method>_<inputs>`): a hook is
/// reported as a kernel of its operator, so a formula change upstream lands on it.
pub const HOOKS_TRAIT: &str = "BackwardHooks";
/// The doc-comment marker of a host (CPU-fallback) implementation: `/// xirang-fallback: op[, op...]`.
pub const FALLBACK_MARKER: &str = "xirang-fallback:";
/// The boxed host function type: a `static` whose type names it is a fallback table.
pub const FALLBACK_FN_TYPE: &str = "HostFn";

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
    /// Host reference implementations (CPU-fallback tier), sorted like `kernels`.
    pub fallbacks: Vec<Kernel>,
    /// Files left out, with why and where (`file:line:col: ...`), sorted.
    pub warnings: Vec<String>,
}

impl AdapterIndex {
    /// Kernels implementing an operator.
    pub fn of<'a, 'q>(&'a self, op: &'q str) -> impl Iterator<Item = &'a Kernel> + use<'a, 'q> {
        let start = self.kernels.partition_point(|k| k.op.as_str() < op);
        self.kernels[start..].iter().take_while(move |k| k.op == op)
    }

    /// Host reference implementations of an operator.
    pub fn fallbacks_of<'a>(&'a self, op: &'a str) -> impl Iterator<Item = &'a Kernel> + 'a {
        let start = self.fallbacks.partition_point(|k| k.op.as_str() < op);
        self.fallbacks[start..].iter().take_while(move |k| k.op == op)
    }

    /// The hand-written `BackwardHooks` method named `method` (`hook_silu_self`), if any.
    pub fn hook(&self, method: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.hook_method() == Some(method))
    }
}

impl Kernel {
    /// The method name of a `BackwardHooks` impl method (`hook_silu_self`), else `None`.
    pub fn hook_method(&self) -> Option<&str> {
        let rest = self.item.strip_prefix("impl ")?.strip_prefix(HOOKS_TRAIT)?.strip_prefix(" for ")?;
        rest.rsplit_once("::").map(|(_, m)| m)
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
    let map = if sources.iter().any(|(_, t)| t.contains(TRAIT_NAME) || t.contains(HOOKS_TRAIT)) {
        method_ops()
    } else {
        HashMap::new()
    };
    index_sources(&sources, &map)
}

/// The `.rs` files under `dir` that can hold a kernel: (path relative to `root`, text), by path.
fn kernel_sources(dir: &Path, root: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut files = Vec::new();
    collect_rs(dir, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for path in files {
        let text = crate::fsio::read_text(&path, crate::fsio::MAX_INPUT_BYTES)?;
        // a file that mentions neither the marker nor the trait holds no kernel: skip the parse
        if !text.contains(MARKER)
            && !text.contains(TRAIT_NAME)
            && !text.contains(HOOKS_TRAIT)
            && !text.contains(FALLBACK_MARKER)
            && !text.contains(FALLBACK_FN_TYPE)
        {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        sources.push((rel, text));
    }
    Ok(sources)
}

/// What one file gives the index: its kernels and host implementations, or why it is left out.
type FileIndex = std::result::Result<(Vec<Kernel>, Vec<Kernel>), String>;

fn index_file(rel: &str, text: &str, method_ops: &HashMap<String, String>) -> Result<FileIndex, Error> {
    // the lexer and the walk below recurse per bracket: a file nested absurdly deep (no real
    // source is) is left out with a warning instead of overflowing the stack
    if let Some((depth_at, line, col)) = too_deep(text) {
        return Ok(Err(format!(
            "{rel}:{line}:{col}: brackets nested deeper than {MAX_NESTING} (from offset {depth_at}); the file is not indexed"
        )));
    }
    // a file whose only index content is `xirang-fallback:` markers on functions (a host
    // reference tier) needs only each marked item's head lexed, not the whole file
    if !text.contains(MARKER)
        && !text.contains(TRAIT_NAME)
        && !text.contains(HOOKS_TRAIT)
        && !text.contains(FALLBACK_FN_TYPE)
        && let Some(found) = marked_heads(rel, text)
    {
        return Ok(Ok((Vec::new(), found)));
    }
    Ok(Ok(index_source_all(rel, text, method_ops)?))
}

/// The host implementations of a file that holds only `xirang-fallback:` markers, found by lexing
/// each marked item's head (from the marker's line to the first `{` or `;` on a line that is not a
/// comment): what [`index_source_all`] finds in the whole file, at a fraction of the lexing.
/// A marker in a `//` or `//!` comment is no item's doc and is passed over. `None` when a head does
/// not lex or does not end, or a marker sits inside a block comment or a string (a line that does
/// not start with `///` or `#[`): the caller then lexes the whole file.
fn marked_heads(rel: &str, text: &str) -> Option<Vec<Kernel>> {
    let mut found = Vec::new();
    let (mut from, mut line0) = (0usize, 0usize);
    let mut counted = 0usize;
    while let Some(off) = text[from..].find(FALLBACK_MARKER) {
        let at = from + off;
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let lead = text[start..at].trim_start();
        let doc = lead.starts_with("///") && !lead.starts_with("////");
        if !doc && lead.starts_with("//") {
            // a plain or inner (`//!`) comment names the marker: no item's doc
            from = at + FALLBACK_MARKER.len();
            continue;
        }
        if !(doc || lead.starts_with("#[")) {
            return None;
        }
        // the head ends at the first `{` or `;` of a code line after the marker's line
        let mut end = None;
        let mut pos = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
        while pos < text.len() {
            let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
            let line = &text[pos..line_end];
            if !line.trim_start().starts_with("//")
                && let Some(i) = line.find(['{', ';'])
            {
                end = Some(pos + i);
                break;
            }
            pos = line_end + 1;
        }
        let end = end?;
        let head = &text[start..end];
        if too_deep(head).is_some() {
            return None;
        }
        line0 += text[counted..start].matches('\n').count();
        counted = start;
        let Ok(tokens) = head.parse::<TokenStream>() else { return None };
        let empty = HashMap::new();
        let mut w = Walker { file: rel, method_ops: &empty, out: Vec::new(), fallbacks: Vec::new() };
        w.items(tokens, None);
        found.extend(w.fallbacks.into_iter().map(|mut k| {
            k.line += line0 as u32;
            k
        }));
        from = end;
    }
    Some(found)
}

/// Sources smaller than this in all are lexed on one thread.
const SPLIT_BYTES: usize = 64 * 1024;

fn index_sources(sources: &[(String, String)], method_ops: &HashMap<String, String>) -> Result<AdapterIndex, Error> {
    // lexing dominates: a runtime's worth of sources is lexed on two scoped threads, every other
    // file on each; the results are taken in file order, so the first error is a sequential read's
    let total: usize = sources.iter().map(|(_, t)| t.len()).sum();
    let per_file: Vec<Result<FileIndex, Error>> = if total < SPLIT_BYTES || sources.len() < 2 {
        sources.iter().map(|(rel, text)| index_file(rel, text, method_ops)).collect()
    } else {
        let half = |parity: usize| -> Vec<Result<FileIndex, Error>> {
            sources.iter().skip(parity).step_by(2).map(|(rel, text)| index_file(rel, text, method_ops)).collect()
        };
        let (odd, even) = std::thread::scope(|s| {
            let h = s.spawn(|| half(1));
            let even = half(0);
            (h.join(), even)
        });
        let odd = odd.map_err(|_| Error::Internal("the adapter index thread panicked".into()))?;
        let (mut odd, mut even) = (odd.into_iter(), even.into_iter());
        (0..sources.len()).filter_map(|i| if i % 2 == 0 { even.next() } else { odd.next() }).collect()
    };
    let (mut kernels, mut fallbacks, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    for r in per_file {
        match r? {
            Ok((k, f)) => {
                kernels.extend(k);
                fallbacks.extend(f);
            }
            Err(w) => warnings.push(w),
        }
    }
    kernels.sort();
    kernels.dedup();
    fallbacks.sort();
    fallbacks.dedup();
    warnings.sort();
    Ok(AdapterIndex { kernels, fallbacks, warnings })
}

/// Deepest bracket nesting a source file may have to be indexed.
pub const MAX_NESTING: usize = 256;

/// Where a Rust source first nests brackets deeper than [`MAX_NESTING`]: (byte offset, line,
/// column), skipping comments (nested block comments too), string, raw string, byte string and
/// character literals; `None` when it never does.
pub fn too_deep(text: &str) -> Option<(usize, usize, usize)> {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0usize, 0usize);
    let at = |i: usize| {
        let line = text[..i].bytes().filter(|&c| c == b'\n').count() + 1;
        let col = text[..i].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Some((i, line, col))
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut level = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        level += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            // raw strings: r"..", r#".."#, br#".."#
            b'r' if (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                || (i > 0
                    && b[i - 1] == b'b'
                    && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_'))) =>
            {
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                if b.get(j) == Some(&b'"') {
                    let hashes = j - i - 1;
                    j += 1;
                    loop {
                        match b.get(j) {
                            None => return None,
                            Some(b'"') if b[j + 1..].iter().take(hashes).filter(|&&c| c == b'#').count() == hashes => {
                                i = j + 1 + hashes;
                                break;
                            }
                            _ => j += 1,
                        }
                    }
                    continue;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' => {
                // a character literal ('x', '\n', 'é'), else a lifetime or label ('a, 'static)
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                } else if let Some(c) = text.get(i + 1..).and_then(|r| r.chars().next())
                    && b.get(i + 1 + c.len_utf8()) == Some(&b'\'')
                {
                    i += 1 + c.len_utf8();
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return at(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Indexes one source text (`file` is the name reported).
///
/// The index needs item headers only (doc attributes, `fn` names, `impl ... for ...` headers), never
/// function bodies, so it walks the token trees `proc_macro2` lexes instead of building a full `syn`
/// syntax tree: about three times faster on the runtime's sources, which matters because `diff` runs
/// it on every call. Text that does not lex (unbalanced delimiters, bad literals) is an error; other
/// syntax errors are left to the compiler.
pub fn index_source(file: &str, text: &str, method_ops: &HashMap<String, String>) -> Result<Vec<Kernel>, Error> {
    Ok(index_source_all(file, text, method_ops)?.0)
}

/// [`index_source`], also returning the host (CPU-fallback) implementations the text registers.
pub fn index_source_all(
    file: &str,
    text: &str,
    method_ops: &HashMap<String, String>,
) -> Result<(Vec<Kernel>, Vec<Kernel>), Error> {
    let tokens: TokenStream = text.parse().map_err(|e: proc_macro2::LexError| {
        let src = SourceFile::new(file, text);
        let start = e.span().start();
        let pos = src.pos_of_marker(start.line, start.column);
        Error::from(src.error(pos, 1, format!("adapter index: cannot lex Rust: {e}")))
    })?;
    let mut w = Walker { file, method_ops, out: Vec::new(), fallbacks: Vec::new() };
    w.items(tokens, None);
    Ok((w.out, w.fallbacks))
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

struct Walker<'a> {
    file: &'a str,
    method_ops: &'a HashMap<String, String>,
    out: Vec<Kernel>,
    fallbacks: Vec<Kernel>,
}

/// The impl block a brace group is the body of: (is `impl AtenOps for ...`, self type text).
type ImplCtx = (ImplKind, String);

/// Which generated trait an impl block implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImplKind {
    Other,
    Aten,
    Hooks,
}

fn line_of(span: Span) -> u32 {
    span.start().line as u32
}

fn is_punct(t: &TokenTree, c: char) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == c)
}

/// Whether a token (or a group, at any depth) is the identifier `name`.
fn mentions(t: &TokenTree, name: &str) -> bool {
    match t {
        TokenTree::Ident(id) => id == name,
        TokenTree::Group(g) => g.stream().into_iter().any(|t| mentions(&t, name)),
        _ => false,
    }
}

/// Operators named by `xirang-kernel:` lines (into `out`) and `xirang-fallback:` lines (into `fb`)
/// of a doc attribute body (`doc = "..."`).
fn marked_ops(doc: &TokenStream, out: &mut Vec<String>, fb: &mut Vec<String>) {
    let toks: Vec<TokenTree> = doc.clone().into_iter().collect();
    let [TokenTree::Ident(name), eq, TokenTree::Literal(lit)] = toks.as_slice() else { return };
    if name != "doc" || !is_punct(eq, '=') {
        return;
    }
    let syn::Lit::Str(s) = syn::Lit::new(lit.clone()) else { return };
    for line in s.value().lines() {
        let line = line.trim();
        let (rest, into) = match (line.strip_prefix(MARKER), line.strip_prefix(FALLBACK_MARKER)) {
            (Some(rest), _) => (rest, &mut *out),
            (_, Some(rest)) => (rest, &mut *fb),
            _ => continue,
        };
        for op in rest.split(',') {
            let op = op.trim();
            if OperatorName::parse(op).is_ok() {
                into.push(op.to_string());
            }
        }
    }
}

/// Reads an `impl` header (`toks[i]` is the token after `impl`) up to its body. Returns the body
/// index and the impl context, or `None` when no brace body follows (not an impl item).
fn impl_header(toks: &[TokenTree], mut i: usize) -> Option<(usize, ImplCtx)> {
    let is_close = |toks: &[TokenTree], i: usize| is_punct(&toks[i], '>') && !(i > 0 && is_punct(&toks[i - 1], '-'));
    let mut depth = 0i32;
    // skip generics `<...>` right after `impl`
    if toks.get(i).is_some_and(|t| is_punct(t, '<')) {
        while i < toks.len() {
            if is_punct(&toks[i], '<') {
                depth += 1;
            } else if is_close(toks, i) {
                depth -= 1;
            }
            i += 1;
            if depth == 0 {
                break;
            }
        }
    }
    // `Trait for Self` or `Self`: the last identifier of each path at angle depth 0
    let (mut trait_last, mut last) = (None::<String>, None::<String>);
    let (mut in_self, mut first, mut path_type, mut done) = (false, true, true, false);
    while let Some(t) = toks.get(i) {
        match t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let self_ty = last.filter(|_| path_type).unwrap_or_else(|| "?".into());
                let kind = match trait_last.as_deref() {
                    Some(TRAIT_NAME) if in_self => ImplKind::Aten,
                    Some(HOOKS_TRAIT) if in_self => ImplKind::Hooks,
                    _ => ImplKind::Other,
                };
                return Some((i, (kind, self_ty)));
            }
            TokenTree::Punct(p) if p.as_char() == ';' => return None,
            _ if done => {}
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(_) if is_close(toks, i) => depth -= 1,
            _ if depth != 0 => {}
            TokenTree::Ident(id) if id == "where" => done = true,
            TokenTree::Ident(id) if id == "for" && !in_self => {
                trait_last = last.take();
                (in_self, first, path_type) = (true, true, true);
            }
            TokenTree::Ident(id) => {
                last = Some(id.to_string());
                first = false;
            }
            // `impl X for &T`, `impl X for (A, B)`: not a path type
            TokenTree::Punct(p) if first && p.as_char() != ':' => path_type = false,
            TokenTree::Group(_) if first => path_type = false,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The operator of a backward hook method `hook_<method>_<inputs>`: the longest operator method
/// name it starts with (the hook's name itself when none matches).
fn hook_op(hook: &str, method_ops: &HashMap<String, String>) -> String {
    let rest = hook.strip_prefix("hook_").unwrap_or(hook);
    let mut best: Option<&str> = None;
    for (i, _) in rest.match_indices('_') {
        let m = &rest[..i];
        if let Some(op) = method_ops.get(m).or_else(|| method_ops.get(&format!("r#{m}"))) {
            best = Some(op);
        }
    }
    best.map(str::to_string).unwrap_or_else(|| hook.to_string())
}

impl Walker<'_> {
    /// Walks the items of a file or of a brace group; `imp` is set when the group is an impl body.
    fn items(&mut self, stream: TokenStream, imp: Option<&ImplCtx>) {
        let toks: Vec<TokenTree> = stream.into_iter().collect();
        let mut docs: Vec<String> = Vec::new();
        let mut fb_docs: Vec<String> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i];
            match t {
                TokenTree::Punct(p) if p.as_char() == '#' => {
                    // outer attribute `#[...]` (inner `#![...]` applies to the enclosing item)
                    if let Some(TokenTree::Group(g)) = toks.get(i + 1)
                        && g.delimiter() == Delimiter::Bracket
                    {
                        marked_ops(&g.stream(), &mut docs, &mut fb_docs);
                        i += 2;
                        continue;
                    }
                }
                TokenTree::Punct(p) if p.as_char() == ';' => {
                    docs.clear();
                    fb_docs.clear();
                }
                // `static NAME: T = ...;` (not the lifetime `'static`)
                TokenTree::Ident(id) if id == "static" && !(i > 0 && is_punct(&toks[i - 1], '\'')) => {
                    if let Some(end) = self.fallback_table(&toks, i + 1) {
                        docs.clear();
                        fb_docs.clear();
                        i = end;
                        continue;
                    }
                }
                TokenTree::Ident(id) if id == "impl" && self.item_start(&toks, i) => {
                    if let Some((body, ctx)) = impl_header(&toks, i + 1) {
                        if let TokenTree::Group(g) = &toks[body] {
                            self.items(g.stream(), Some(&ctx));
                        }
                        docs.clear();
                        fb_docs.clear();
                        i = body + 1;
                        continue;
                    }
                }
                TokenTree::Ident(id) if id == "fn" => {
                    if let Some(TokenTree::Ident(name)) = toks.get(i + 1) {
                        for op in std::mem::take(&mut fb_docs) {
                            let item = format!("fn {name}");
                            let (file, line) = (self.file.to_string(), line_of(name.span()));
                            self.fallbacks.push(Kernel { op, item, file, line });
                        }
                        self.function(name, std::mem::take(&mut docs), imp);
                        i += 2;
                        continue;
                    }
                }
                TokenTree::Group(g) => {
                    if g.delimiter() == Delimiter::Brace {
                        // a function body, module, block: items inside are free items
                        self.items(g.stream(), None);
                        docs.clear();
                        fb_docs.clear();
                    } else {
                        self.nested(g.stream());
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// A `static` item at `toks[i]` (the token after `static`): when its type names
    /// [`FALLBACK_FN_TYPE`], records the operators of its tuples as fallbacks. Returns the index
    /// after the item's `;`, or `None` when it is not a fallback table.
    fn fallback_table(&mut self, toks: &[TokenTree], mut i: usize) -> Option<usize> {
        if matches!(toks.get(i), Some(TokenTree::Ident(m)) if m == "mut") {
            i += 1;
        }
        let TokenTree::Ident(name) = toks.get(i)? else { return None };
        if !is_punct(toks.get(i + 1)?, ':') {
            return None;
        }
        let eq = (i + 2..toks.len()).find(|&k| is_punct(&toks[k], '=') || is_punct(&toks[k], ';'))?;
        if !is_punct(&toks[eq], '=') || !toks[i + 2..eq].iter().any(|t| mentions(t, FALLBACK_FN_TYPE)) {
            return None;
        }
        let end = (eq + 1..toks.len()).find(|&k| is_punct(&toks[k], ';')).unwrap_or(toks.len());
        let item = format!("static {name}");
        for t in &toks[eq + 1..end] {
            self.table_entries(t, &item);
        }
        Some(end + 1)
    }

    /// The `("op", ...)` tuples inside a fallback table's value.
    fn table_entries(&mut self, t: &TokenTree, item: &str) {
        let TokenTree::Group(g) = t else { return };
        if g.delimiter() == Delimiter::Parenthesis
            && let Some(TokenTree::Literal(lit)) = g.stream().into_iter().next()
            && let syn::Lit::Str(s) = syn::Lit::new(lit.clone())
        {
            let op = s.value();
            if OperatorName::parse(&op).is_ok() {
                let (file, line) = (self.file.to_string(), line_of(lit.span()));
                self.fallbacks.push(Kernel { op, item: item.to_string(), file, line });
            }
            return;
        }
        for t in g.stream() {
            self.table_entries(&t, item);
        }
    }

    /// Brace groups inside parentheses / brackets (closure bodies, array expressions) can hold items.
    fn nested(&mut self, stream: TokenStream) {
        for t in stream {
            if let TokenTree::Group(g) = t {
                if g.delimiter() == Delimiter::Brace {
                    self.items(g.stream(), None);
                } else {
                    self.nested(g.stream());
                }
            }
        }
    }

    /// Whether `toks[i]` starts an item (not `-> impl Trait`, `x: impl Trait`).
    fn item_start(&self, toks: &[TokenTree], i: usize) -> bool {
        match i.checked_sub(1).map(|j| &toks[j]) {
            None => true,
            Some(TokenTree::Punct(p)) => p.as_char() == ';',
            Some(TokenTree::Group(g)) => matches!(g.delimiter(), Delimiter::Brace | Delimiter::Bracket),
            Some(TokenTree::Ident(id)) => id == "unsafe" || id == "default",
            Some(TokenTree::Literal(_)) => false,
        }
    }

    fn function(&mut self, name: &proc_macro2::Ident, marked: Vec<String>, imp: Option<&ImplCtx>) {
        let method = name.to_string();
        let line = line_of(name.span());
        let file = self.file.to_string();
        match imp {
            None => {
                for op in marked {
                    self.out.push(Kernel { op, item: format!("fn {method}"), file: file.clone(), line });
                }
            }
            Some((kind, self_ty)) => {
                let mut marked = marked;
                let trait_op = match kind {
                    // `r#where` is spelled `r#where` by the naming scheme and by the lexer
                    ImplKind::Aten => {
                        Some((TRAIT_NAME, self.method_ops.get(&method).cloned().unwrap_or_else(|| method.clone())))
                    }
                    ImplKind::Hooks => Some((HOOKS_TRAIT, hook_op(&method, self.method_ops))),
                    ImplKind::Other => None,
                };
                if let Some((tr, op)) = trait_op {
                    marked.retain(|m| *m != op);
                    self.out.push(Kernel {
                        op,
                        item: format!("impl {tr} for {self_ty}::{method}"),
                        file: file.clone(),
                        line,
                    });
                }
                for op in marked {
                    self.out.push(Kernel { op, item: format!("{self_ty}::{method}"), file: file.clone(), line });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The marked-heads path finds exactly what lexing the whole file finds, on every file of
    /// this repository's runtime that takes it, and on crafted files.
    #[test]
    fn marked_heads_match_the_whole_file_walk() {
        let full = |text: &str| {
            let mut fb = index_source_all("f.rs", text, &HashMap::new()).unwrap().1;
            fb.sort();
            fb
        };
        let heads = |text: &str| {
            marked_heads("f.rs", text).map(|mut v| {
                v.sort();
                v
            })
        };
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapter-runtime");
        let mut files = Vec::new();
        collect_rs(&root, &mut files).unwrap();
        let mut tried = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            if !text.contains(FALLBACK_MARKER) || text.contains(MARKER) || text.contains(TRAIT_NAME) {
                continue;
            }
            tried += 1;
            assert_eq!(heads(&text), Some(full(&text)), "{}", f.display());
        }
        assert!(tried >= 5, "{tried} files");
        // a doc line with `;` and `{` between the marker and the function, attributes, a
        // multi-line signature, two markers on one item, and an item that is not a function
        let crafted = "//! m\n\n/// xirang-fallback: add.Tensor\n/// `a; b {c}`\n#[inline]\npub fn add(\n    a: &T,\n) -> R {\n    x\n}\n/// xirang-fallback: mul.Tensor\n/// xirang-fallback: mul.Scalar\nfn mul<'a>(a: impl Into<Rhs<'a>>) -> R { y }\n/// xirang-fallback: sub.Tensor\nconst C: u8 = 1;\n";
        let got = heads(crafted).unwrap();
        assert_eq!(got, full(crafted));
        assert_eq!(
            got.iter().map(|k| (k.op.as_str(), k.line)).collect::<Vec<_>>(),
            [("add.Tensor", 6), ("mul.Scalar", 13), ("mul.Tensor", 13)]
        );
        // a marker inside a string or a block comment: the whole file is lexed instead
        assert_eq!(heads("fn f() { let s = \"xirang-fallback: add.Tensor\"; }\n"), None);
        assert_eq!(heads("/*\n xirang-fallback: add.Tensor\n*/\nfn g() {}\n"), None);
    }

    #[test]
    fn nesting_depth_skips_literals_and_comments() {
        use super::{MAX_NESTING, too_deep};
        let deep = format!("fn f() {{ {}1{} }}", "(".repeat(MAX_NESTING + 5), ")".repeat(MAX_NESTING + 5));
        let (_, line, col) = too_deep(&deep).expect("deep");
        assert_eq!(line, 1);
        assert!(col > MAX_NESTING);
        let brackets = "(".repeat(MAX_NESTING + 5);
        for ok in [
            format!("fn f() {{ let s = \"{brackets}\"; }}"),
            format!("// {brackets}\nfn f() {{}}"),
            format!("/* {brackets} /* nested */ {brackets} */ fn f() {{}}"),
            format!("fn f() {{ let s = r#\"{brackets}\"#; let c = '('; let l: &'static str = \"\\\"(\"; }}"),
        ] {
            assert_eq!(too_deep(&ok), None, "{ok}");
        }
    }

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
        assert!(index_source("bad.rs", "fn f( {", &map).is_err());
    }

    #[test]
    fn impl_headers_generics_and_impl_trait_positions() {
        let src = r#"
impl<T: Clone, const N: usize> crate::generated::AtenOps for Dev<T, N> where T: Fn() -> u8 {
    fn relu(&self) {}
}
impl<T> AtenOps for &Dev<T> { fn neg(&self) {} }
fn make() -> impl AtenOps {
    /// xirang-kernel: abs
    fn inner() {}
}
fn takes(x: impl AtenOps, f: fn(u8) -> u8) {}
impl Other for Dev { fn relu(&self) {} }
"#;
        let ops: Vec<OperatorName> = ["relu", "neg"].iter().map(|s| OperatorName::parse(s).unwrap()).collect();
        let mut ks = index_source("b.rs", src, &method_map(&ops)).unwrap();
        ks.sort();
        let got: Vec<(String, String, u32)> = ks.iter().map(|k| (k.op.clone(), k.item.clone(), k.line)).collect();
        assert_eq!(
            got,
            vec![
                ("abs".to_string(), "fn inner".to_string(), 8),
                ("neg".to_string(), "impl AtenOps for ?::neg".to_string(), 5),
                ("relu".to_string(), "impl AtenOps for Dev::relu".to_string(), 3),
            ]
        );
    }

    #[test]
    fn backward_hooks_are_kernels_of_their_operator() {
        let src = r#"
impl BackwardHooks for NpuOps {
    fn hook_silu_self(&self) {}
    fn hook_native_layer_norm_input_weight_bias(&self) {}
}
"#;
        let ops: Vec<OperatorName> =
            ["silu", "native_layer_norm", "native"].iter().map(|s| OperatorName::parse(s).unwrap()).collect();
        let mut ks = index_source("h.rs", src, &method_map(&ops)).unwrap();
        ks.sort();
        let got: Vec<(String, String)> = ks.iter().map(|k| (k.op.clone(), k.item.clone())).collect();
        assert_eq!(
            got,
            vec![
                (
                    "native_layer_norm".into(),
                    "impl BackwardHooks for NpuOps::hook_native_layer_norm_input_weight_bias".into()
                ),
                ("silu".into(), "impl BackwardHooks for NpuOps::hook_silu_self".into()),
            ]
        );
    }

    #[test]
    fn fallback_tables_and_markers_are_indexed_apart_from_kernels() {
        let src = r#"
use crate::dispatch::HostFn;
type NativeFn = fn();
/// (operator, arity, implementation)
pub static TABLE: &[(&str, usize, HostFn)] = &[
    ("add.Tensor", 3, add_tensor),
    ("relu", 1, relu),
    ("not an op!", 1, relu),
];
static NATIVE: &[(&str, usize, NativeFn)] = &[("mm", 2, mm)];
fn find(op: &str) -> Option<&'static (&'static str, usize, HostFn)> { None }
static mut COUNT: usize = 0;
/// xirang-fallback: neg, mul.Scalar
fn host_neg() {}
/// xirang-kernel: abs
fn abs() {}
"#;
        let (ks, fbs) = index_source_all("h.rs", src, &HashMap::new()).unwrap();
        let got: Vec<(String, String, u32)> = fbs.iter().map(|k| (k.op.clone(), k.item.clone(), k.line)).collect();
        assert_eq!(
            got,
            vec![
                ("add.Tensor".to_string(), "static TABLE".to_string(), 6),
                ("relu".to_string(), "static TABLE".to_string(), 7),
                ("neg".to_string(), "fn host_neg".to_string(), 14),
                ("mul.Scalar".to_string(), "fn host_neg".to_string(), 14),
            ]
        );
        let kernels: Vec<&str> = ks.iter().map(|k| k.op.as_str()).collect();
        assert_eq!(kernels, ["abs"], "fallbacks are not kernels");
    }

    #[test]
    fn hooks_are_found_by_method_name() {
        let src = "impl BackwardHooks for NpuOps {\n    fn hook_silu_self(&self) {}\n}\n";
        let ops: Vec<OperatorName> = ["silu"].iter().map(|s| OperatorName::parse(s).unwrap()).collect();
        let kernels = index_source("n.rs", src, &method_map(&ops)).unwrap();
        let idx = AdapterIndex { kernels, fallbacks: Vec::new(), warnings: Vec::new() };
        assert_eq!(idx.hook("hook_silu_self").map(|k| k.line), Some(2));
        assert!(idx.hook("hook_silu").is_none());
    }
}
