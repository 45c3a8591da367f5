//! Vendor driver header scanner for Xirang.
//!
//! `scan_dir` / `scan_source` turn C headers (Ascend ACL, CUDA, or any vendor's with the
//! generic profile) into a [`HeaderSet`] of declarations: functions with parameters,
//! enums with resolved enumerator values, structs/unions with fields, typedefs, `#define`
//! constants, `static const` constants, deprecation and the include graph. [`diff`] compares
//! two sets under the rule catalogue of [`rules`].
//!
//! Pipeline per file: directives are extracted and blanked (`pre`), export / calling-convention
//! / attribute / deprecation / default-argument macros are neutralized to same-length
//! whitespace (`pre::neutralize`), tree-sitter-cpp parses the result (`ast`), and values are
//! resolved over the whole set (`eval`).
#![forbid(unsafe_code)]

mod ast;
mod diff;
mod eval;
mod lex;
mod pre;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use diff::{HeaderChange, HeaderRule, HeaderSeverity, diff, rules};
pub use eval::MacroDef;
pub use lex::normalize as normalize_type;

/// Errors of the header scanner.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("unknown header profile `{0}` (expected ascend, cuda or generic)")]
    UnknownProfile(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error("{path}: {message}")]
    Input { path: String, message: String },
    #[error("tree-sitter-cpp could not be loaded: {0}")]
    Language(String),
    #[error("{file}: the parser gave up")]
    ParseFailed { file: String },
}

/// Which macro knowledge to start from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Huawei Ascend ACL (`ACL_FUNC_VISIBILITY`, `ACL_DEPRECATED_MESSAGE`, ...).
    Ascend,
    /// NVIDIA CUDA runtime and driver (`__host__`, `CUDARTAPI`, `__dv`, `__CUDA_DEPRECATED`, ...).
    Cuda,
    /// Any vendor: macros are learnt from `#define`s and detected by position.
    Generic,
}

impl FromStr for Profile {
    type Err = HeaderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "ascend" | "acl" => Ok(Profile::Ascend),
            "cuda" => Ok(Profile::Cuda),
            "generic" => Ok(Profile::Generic),
            _ => Err(HeaderError::UnknownProfile(s.to_string())),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Ascend => "ascend",
            Profile::Cuda => "cuda",
            Profile::Generic => "generic",
        })
    }
}

impl Profile {
    /// Macros this profile knows: (attribute/export/calling convention, deprecation, default).
    pub fn known_macros(self) -> (&'static [&'static str], &'static [&'static str], &'static [&'static str]) {
        match self {
            Profile::Ascend => (
                &["ACL_FUNC_VISIBILITY", "MSVP_PROF_API", "ACL_DUMP_API", "ATTRIBUTE", "ACL_PROF_API"],
                &["ACL_DEPRECATED", "ACL_DEPRECATED_MESSAGE"],
                &[],
            ),
            Profile::Cuda => (
                &[
                    "__host__",
                    "__device__",
                    "__global__",
                    "__noinline__",
                    "__forceinline__",
                    "__cudart_builtin__",
                    "__device_builtin__",
                    "__device_builtin_texture_type__",
                    "__device_builtin_surface_type__",
                    "CUDARTAPI",
                    "CUDAAPI",
                    "CUDART_CB",
                    "CUDA_CB",
                    "__CUDA_ALIGN__",
                    "__builtin_align__",
                    "__align__",
                    "CUDARTAPI_CDECL",
                    "__CUDA_API_VERSION",
                    "CUDA_API_PER_THREAD_DEFAULT_STREAM",
                ],
                &["__CUDA_DEPRECATED", "CUDART_DEPRECATED", "__CUDART_DEPRECATED", "CUDA_DEPRECATED"],
                &["__dv"],
            ),
            Profile::Generic => (&[], &[], &[]),
        }
    }
}

/// Kinds of declarations.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DeclKind {
    Function,
    Enum,
    Enumerator,
    Struct,
    Union,
    Field,
    Typedef,
    Macro,
    /// `static const int X = 1;` (Ascend error codes are written this way).
    Constant,
}

impl DeclKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeclKind::Function => "function",
            DeclKind::Enum => "enum",
            DeclKind::Enumerator => "enumerator",
            DeclKind::Struct => "struct",
            DeclKind::Union => "union",
            DeclKind::Field => "field",
            DeclKind::Typedef => "typedef",
            DeclKind::Macro => "macro",
            DeclKind::Constant => "constant",
        }
    }
}

/// A function parameter.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Empty for unnamed parameters.
    pub name: String,
    /// Normalized type text (`const char *`).
    #[serde(rename = "type")]
    pub ty: String,
    /// Default value (C++ `= x` or CUDA `__dv(x)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One declaration. Kind-specific fields are `None`/empty where they do not apply.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Decl {
    pub kind: DeclKind,
    pub name: String,
    /// Path of the header, relative to the scanned folder, `/` separated.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// Enum of an enumerator, struct/union of a field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Return type of a function.
    #[serde(rename = "return", default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    /// Function takes `...`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub variadic: bool,
    /// Function defined in the header (`static inline`), not an exported symbol.
    #[serde(default, skip_serializing_if = "is_false")]
    pub definition: bool,
    /// Type of a field, typedef or constant.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    /// Bit-field width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits: Option<String>,
    /// Position of a field in its struct or an enumerator in its enum (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Resolved integer value (enumerators, constants, integer macros).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Value as written (normalized); for implicit enumerators `prev + 1` is not invented.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// `#define old new`: the identifier a macro renames to (`cuCtxCreate` -> `cuCtxCreate_v4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
    pub deprecated: bool,
    /// Deprecation message, when the macro carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<String>,
}

impl Decl {
    pub fn new(kind: DeclKind, name: &str, file: &str, line: u32) -> Self {
        Decl {
            kind,
            name: name.to_string(),
            file: file.to_string(),
            line,
            parent: None,
            ret: None,
            params: None,
            variadic: false,
            definition: false,
            ty: None,
            bits: None,
            index: None,
            value: None,
            expr: None,
            alias_of: None,
            deprecated: false,
            deprecation: None,
        }
    }

    /// Stable display name: `Enum::Enumerator`, `struct.field`, or the name.
    pub fn subject(&self) -> String {
        match (self.kind, &self.parent) {
            (DeclKind::Enumerator, Some(p)) if !p.is_empty() => format!("{p}::{}", self.name),
            (DeclKind::Field, Some(p)) => format!("{p}.{}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// An `#include` of a file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Include {
    /// As written between quotes or angle brackets.
    pub path: String,
    pub system: bool,
    pub line: u32,
    /// The file of the set it refers to, when it is in the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
}

/// A syntax problem tree-sitter recovered from (declarations around it are still found).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

/// One scanned header.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HeaderFile {
    pub path: String,
    /// Declarations in source order.
    pub decls: Vec<Decl>,
    pub includes: Vec<Include>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
}

/// An edge of the include graph between two files of the set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct IncludeEdge {
    pub from: String,
    pub to: String,
}

/// A scanned set of headers (one vendor release).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HeaderSet {
    pub profile: Profile,
    /// Sorted by path.
    pub files: Vec<HeaderFile>,
    /// Resolved include edges, sorted.
    pub include_graph: Vec<IncludeEdge>,
}

impl HeaderSet {
    /// All declarations, by file then source order.
    pub fn decls(&self) -> impl Iterator<Item = &Decl> {
        self.files.iter().flat_map(|f| f.decls.iter())
    }
    /// Declarations of one kind.
    pub fn of_kind(&self, kind: DeclKind) -> impl Iterator<Item = &Decl> {
        self.decls().filter(move |d| d.kind == kind)
    }
    /// The function of that name: a declaration before an inline definition, then the first
    /// file in path order.
    pub fn function(&self, name: &str) -> Option<&Decl> {
        let mut it = self.of_kind(DeclKind::Function).filter(|d| d.name == name);
        let first = it.next()?;
        if !first.definition {
            return Some(first);
        }
        Some(it.find(|d| !d.definition).unwrap_or(first))
    }
    /// The first enumerator or constant or macro of that name with a value.
    pub fn value_of(&self, name: &str) -> Option<i64> {
        self.decls()
            .filter(|d| d.name == name && matches!(d.kind, DeclKind::Enumerator | DeclKind::Constant | DeclKind::Macro))
            .find_map(|d| d.value)
    }
    /// Files that `path` includes, transitively, in sorted order.
    pub fn includes_of(&self, path: &str) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            for e in self.include_graph.iter().filter(|e| e.from == p) {
                if seen.insert(e.to.clone()) {
                    stack.push(e.to.clone());
                }
            }
        }
        seen.into_iter().collect()
    }
}

fn knowledge(profile: Profile) -> pre::Knowledge {
    let mut k = pre::Knowledge { heuristics: true, ..Default::default() };
    let (attr, dep, def) = profile.known_macros();
    k.attr.extend(attr.iter().map(|s| s.to_string()));
    k.deprecated.extend(dep.iter().map(|s| s.to_string()));
    k.attr.extend(dep.iter().map(|s| s.to_string()));
    k.defaults.extend(def.iter().map(|s| s.to_string()));
    k
}

struct Prepared {
    path: String,
    dirs: pre::Directives,
}

/// Neutralizes and parses `blanked` (directives removed); expansions of declaration macros are
/// parsed too, their declarations placed on the invocation's line.
type Parsed = (Vec<(Decl, Option<usize>)>, Vec<Diagnostic>);

fn parse_code(path: &str, blanked: &str, k: &pre::Knowledge, depth: usize) -> Result<Parsed, HeaderError> {
    let expanded = pre::inline_expand(blanked, k);
    let blanked = expanded.as_str();
    let neutral = pre::neutralize(blanked, k);
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&tree_sitter_cpp::LANGUAGE.into()).map_err(|e| HeaderError::Language(e.to_string()))?;
    let tree = parser.parse(&neutral.text, None).ok_or_else(|| HeaderError::ParseFailed { file: path.to_string() })?;
    let starts = pre::line_starts(blanked);
    let mut w = ast::Walker::new(&neutral.text, path, &starts, &neutral.marks);
    w.walk(tree.root_node(), 0);
    w.attach_deprecations();
    let diagnostics = std::mem::take(&mut w.diagnostics);
    let mut decls: Vec<(Decl, Option<usize>)> = w.decls.into_iter().zip(w.owners).collect();
    if depth < 6 {
        for e in &neutral.expansions {
            let line = pre::line_of(&starts, e.pos);
            if let Ok((inner, _)) = parse_code(path, &e.text, k, depth + 1) {
                let base = decls.len();
                decls.extend(inner.into_iter().map(|(mut d, o)| {
                    d.line = line;
                    (d, o.map(|o| o + base))
                }));
            }
        }
    }
    Ok((decls, diagnostics))
}

/// One declaration per (kind, parent, name) in a file: the first in source order wins, and an
/// enum or aggregate that loses takes its members with it.
fn dedupe(decls: Vec<(Decl, Option<usize>)>) -> Vec<Decl> {
    // declarations win over definitions (`inline` stubs in other branches), then source order
    let mut order: Vec<usize> = (0..decls.len()).collect();
    order.sort_by_key(|&i| (decls[i].0.definition, decls[i].0.line, i));
    let mut seen = BTreeSet::new();
    let mut dropped = vec![false; decls.len()];
    let mut keep = Vec::new();
    for i in order {
        let (d, owner) = &decls[i];
        let owner_dropped = owner.is_some_and(|o| dropped.get(o).copied().unwrap_or(false));
        if owner_dropped || !seen.insert((d.kind, d.parent.clone(), d.name.clone())) {
            dropped[i] = true;
            continue;
        }
        keep.push(i);
    }
    let mut out: Vec<Option<Decl>> = decls.into_iter().map(|(d, _)| Some(d)).collect();
    keep.into_iter().filter_map(|i| out[i].take()).collect()
}

fn parse_prepared(p: &Prepared, k: &pre::Knowledge) -> Result<HeaderFile, HeaderError> {
    let (decls, diagnostics) = parse_code(&p.path, &p.dirs.blanked, k, 0)?;
    let mut decls = dedupe(decls);

    // macros: object-like with a value, not the ones we neutralized
    let mut seen_macro = BTreeSet::new();
    for d in &p.dirs.defines {
        let name = &d.def.name;
        if d.def.params.is_some() || d.def.body.trim().is_empty() || k.attr.contains(name) || k.defaults.contains(name)
        {
            continue;
        }
        if !seen_macro.insert(name.clone()) {
            continue;
        }
        let mut m = Decl::new(DeclKind::Macro, name, &p.path, d.line);
        let expr = lex::normalize(&d.def.body);
        m.alias_of = alias_target(&expr, &p.dirs.defines).filter(|a| a != name);
        m.expr = Some(expr);
        decls.push(m);
    }
    decls.sort_by_key(|d| d.line);
    let includes = p
        .dirs
        .includes
        .iter()
        .map(|i| Include { path: i.path.clone(), system: i.system, line: i.line, resolved: None })
        .collect();
    Ok(HeaderFile { path: p.path.clone(), decls, includes, diagnostics })
}

/// `#define a b` or `#define a WRAP(b)`: the identifier `a` renames to.
fn alias_target(expr: &str, defines: &[pre::Define]) -> Option<String> {
    let toks = lex::tokenize(expr);
    let is_ident = |t: &lex::Token| t.kind == lex::Tok::Ident && !pre::is_keyword(t.text(expr));
    match toks.as_slice() {
        [t] if is_ident(t) => Some(t.text(expr).to_string()),
        [w, o, t, c] if is_ident(w) && o.text(expr) == "(" && is_ident(t) && c.text(expr) == ")" => {
            let wrapper = w.text(expr);
            defines
                .iter()
                .any(|d| d.def.name == wrapper && d.def.params.as_ref().is_some_and(|p| p.len() == 1))
                .then(|| t.text(expr).to_string())
        }
        _ => None,
    }
}

fn prepare(path: &str, text: &str) -> Prepared {
    Prepared { path: path.to_string(), dirs: pre::directives(text) }
}

fn learn(k: &mut pre::Knowledge, preps: &[Prepared]) {
    for p in preps {
        pre::collect_type_names(&p.dirs.blanked, &mut k.types);
    }
    let all: Vec<pre::Define> = preps.iter().flat_map(|p| p.dirs.defines.iter().cloned()).collect();
    pre::learn_from_defines(k, &all);
}

/// Scans one header on its own (macros defined elsewhere are only known through the profile
/// and the heuristics). Never panics.
pub fn scan_source(profile: Profile, file_name: &str, text: &str) -> Result<HeaderFile, HeaderError> {
    let prep = prepare(file_name, text);
    let mut k = knowledge(profile);
    learn(&mut k, std::slice::from_ref(&prep));
    let file = parse_prepared(&prep, &k)?;
    let mut files = [file];
    resolve_values(&mut files, std::slice::from_ref(&prep));
    let [file] = files;
    Ok(file)
}

/// Scans every `*.h`, `*.hpp`, `*.hh`, `*.hxx`, `*.cuh` under `dir`, recursively.
pub fn scan_dir(profile: Profile, dir: &Path) -> Result<HeaderSet, HeaderError> {
    if !dir.is_dir() {
        return Err(HeaderError::NotADirectory(dir.display().to_string()));
    }
    let mut paths = Vec::new();
    collect(dir, dir, &mut paths, 0)?;
    paths.sort();
    let mut sources = Vec::new();
    for (rel, abs) in paths {
        let bytes = read_header(&abs)?;
        sources.push((rel, String::from_utf8_lossy(&bytes).into_owned()));
    }
    scan_sources(profile, &sources)
}

/// The largest header read (the biggest real driver header is under 1 MB).
pub const MAX_HEADER_BYTES: u64 = 16 << 20;

/// Reads one header: a regular file (a FIFO would block on open, a device such as /dev/zero never
/// ends) of at most [`MAX_HEADER_BYTES`].
fn read_header(path: &Path) -> Result<Vec<u8>, HeaderError> {
    use std::io::Read;
    let name = path.display().to_string();
    let input = |message: String| HeaderError::Input { path: name.clone(), message };
    let meta = std::fs::metadata(path).map_err(|source| HeaderError::Io { path: name.clone(), source })?;
    if !meta.is_file() {
        return Err(input("not a regular file (a FIFO, a device or a socket): not read".into()));
    }
    if meta.len() > MAX_HEADER_BYTES {
        return Err(input(format!("{} bytes, more than the {MAX_HEADER_BYTES} bytes a header may have", meta.len())));
    }
    let f = std::fs::File::open(path).map_err(|source| HeaderError::Io { path: name.clone(), source })?;
    let mut out = Vec::new();
    f.take(MAX_HEADER_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|source| HeaderError::Io { path: name.clone(), source })?;
    if out.len() as u64 > MAX_HEADER_BYTES {
        return Err(input(format!("grew past {MAX_HEADER_BYTES} bytes while it was read")));
    }
    Ok(out)
}

/// Scans a set of in-memory headers `(relative path, text)` as one header set.
pub fn scan_sources(profile: Profile, sources: &[(String, String)]) -> Result<HeaderSet, HeaderError> {
    let mut sorted: Vec<&(String, String)> = sources.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let preps: Vec<Prepared> = sorted.iter().map(|(p, t)| prepare(p, t)).collect();
    let mut k = knowledge(profile);
    learn(&mut k, &preps);
    let mut files = Vec::new();
    for p in &preps {
        files.push(parse_prepared(p, &k)?);
    }
    resolve_values(&mut files, &preps);
    let names: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
    let mut graph = BTreeSet::new();
    for f in &mut files {
        let from = f.path.clone();
        for inc in &mut f.includes {
            inc.resolved = resolve_include(&from, &inc.path, &names);
            if let Some(to) = &inc.resolved {
                graph.insert(IncludeEdge { from: from.clone(), to: to.clone() });
            }
        }
    }
    Ok(HeaderSet { profile, files, include_graph: graph.into_iter().collect() })
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>, depth: usize) -> Result<(), HeaderError> {
    if depth > 64 {
        return Ok(());
    }
    let rd = std::fs::read_dir(dir).map_err(|source| HeaderError::Io { path: dir.display().to_string(), source })?;
    let mut entries: Vec<PathBuf> = Vec::new();
    for e in rd {
        let e = e.map_err(|source| HeaderError::Io { path: dir.display().to_string(), source })?;
        entries.push(e.path());
    }
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(root, &p, out, depth + 1)?;
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "h" | "hpp" | "hh" | "hxx" | "cuh"))
        {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            let rel =
                rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
            out.push((rel, p));
        }
    }
    Ok(())
}

fn join_norm(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').filter(|s| !s.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

fn resolve_include(from: &str, inc: &str, names: &BTreeSet<String>) -> Option<String> {
    let dir = from.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    let local = join_norm(dir, inc);
    if names.contains(&local) {
        return Some(local);
    }
    // include roots above the scanned folder: `acl/acl_base.h` from inside `acl/`
    let comps: Vec<&str> = inc.split('/').collect();
    for skip in 0..comps.len() {
        let cand = join_norm("", &comps[skip..].join("/"));
        if names.contains(&cand) {
            return Some(cand);
        }
    }
    let suffix = format!("/{}", join_norm("", inc));
    let mut hits = names.iter().filter(|n| n.ends_with(&suffix));
    match (hits.next(), hits.next()) {
        (Some(h), None) => Some(h.clone()),
        _ => None,
    }
}

struct SetEnv<'a> {
    values: &'a HashMap<String, i64>,
    macros: &'a HashMap<String, MacroDef>,
}

impl eval::Env for SetEnv<'_> {
    fn value(&self, name: &str) -> Option<i64> {
        self.values.get(name).copied()
    }
    fn macro_def(&self, name: &str) -> Option<&MacroDef> {
        self.macros.get(name)
    }
}

/// Resolves enumerator, constant and macro values over the whole set (a few passes so that
/// references across files and forward references through macros settle).
/// Replaces array sizes written as constant expressions (`[UCE_INFO_RESERVED_SIZE]`) by their
/// value, so that layout comparisons compare sizes, not spellings.
fn resolve_array_sizes(ty: &str, env: &dyn eval::Env) -> String {
    if !ty.contains('[') {
        return ty.to_string();
    }
    let mut out = String::new();
    let mut rest = ty;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| c + open) else { break };
        out.push_str(&rest[..=open]);
        let inner = &rest[open + 1..close];
        let resolved = if inner.trim().is_empty() || inner.trim().chars().all(|c| c.is_ascii_digit()) {
            None
        } else {
            eval::eval(inner, env)
        };
        match resolved {
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(inner),
        }
        out.push(']');
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

fn resolve_values(files: &mut [HeaderFile], preps: &[Prepared]) {
    let mut macros: HashMap<String, MacroDef> = HashMap::new();
    for p in preps {
        for d in &p.dirs.defines {
            if !d.def.body.trim().is_empty() {
                macros.entry(d.def.name.clone()).or_insert_with(|| d.def.clone());
            }
        }
    }
    let mut values: HashMap<String, i64> = HashMap::new();
    for _pass in 0..4 {
        let mut changed = false;
        for f in files.iter_mut() {
            let mut prev: Option<(String, Option<i64>)> = None;
            for d in f.decls.iter_mut() {
                match d.kind {
                    DeclKind::Enumerator => {
                        let same_enum =
                            prev.as_ref().is_some_and(|(p, _)| Some(p) == d.parent.as_ref()) && d.index != Some(0);
                        let v = match &d.expr {
                            Some(e) => {
                                let env = SetEnv { values: &values, macros: &macros };
                                eval::eval(e, &env)
                            }
                            None if d.index == Some(0) || !same_enum => Some(0),
                            None => prev.as_ref().and_then(|(_, v)| *v).and_then(|v| v.checked_add(1)),
                        };
                        if v.is_some() && d.value != v {
                            d.value = v;
                            changed = true;
                        }
                        if let Some(v) = d.value {
                            values.entry(d.name.clone()).or_insert(v);
                        }
                        prev = Some((d.parent.clone().unwrap_or_default(), d.value));
                    }
                    DeclKind::Constant | DeclKind::Macro => {
                        if d.value.is_none()
                            && let Some(e) = &d.expr
                        {
                            let env = SetEnv { values: &values, macros: &macros };
                            let v = if d.kind == DeclKind::Macro && d.alias_of.is_some() {
                                None
                            } else {
                                eval::eval(e, &env)
                            };
                            if v.is_some() {
                                d.value = v;
                                changed = true;
                            }
                        }
                        if let (DeclKind::Constant, Some(v)) = (d.kind, d.value) {
                            values.entry(d.name.clone()).or_insert(v);
                        }
                    }
                    _ => {}
                }
            }
        }
        if !changed {
            break;
        }
    }
    let env = SetEnv { values: &values, macros: &macros };
    for f in files.iter_mut() {
        for d in f.decls.iter_mut() {
            if matches!(d.kind, DeclKind::Field | DeclKind::Typedef)
                && let Some(t) = &d.ty
            {
                d.ty = Some(resolve_array_sizes(t, &env));
            }
        }
    }
}

/// One JSON object per declaration, sorted by file, then line (source order within a line).
pub fn to_jsonl(set: &HeaderSet) -> String {
    let mut decls: Vec<&Decl> = set.decls().collect();
    decls.sort_by(|a, b| a.file.cmp(&b.file).then(a.line.cmp(&b.line)));
    let mut out = String::new();
    for d in decls {
        if let Ok(s) = serde_json::to_string(d) {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}

/// A human-readable table (kind, name, file:line, signature or value).
pub fn to_table(set: &HeaderSet) -> String {
    let mut out = String::new();
    for d in set.decls() {
        let what = match d.kind {
            DeclKind::Function => {
                let ps: Vec<String> = d
                    .params
                    .iter()
                    .flatten()
                    .map(|p| if p.name.is_empty() { p.ty.clone() } else { format!("{} {}", p.ty, p.name) })
                    .collect();
                format!("{} ({})", d.ret.clone().unwrap_or_default(), ps.join(", "))
            }
            DeclKind::Enumerator | DeclKind::Constant | DeclKind::Macro => match (d.value, &d.expr) {
                (Some(v), _) => v.to_string(),
                (None, Some(e)) => e.clone(),
                _ => String::new(),
            },
            _ => d.ty.clone().unwrap_or_default(),
        };
        let dep = if d.deprecated { " [deprecated]" } else { "" };
        out.push_str(&format!("{:<10} {:<48} {}:{}  {}{}\n", d.kind.as_str(), d.subject(), d.file, d.line, what, dep));
    }
    out
}

/// Counts of declarations by kind, for summaries.
pub fn summary(set: &HeaderSet) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for d in set.decls() {
        *m.entry(d.kind.as_str()).or_insert(0) += 1;
    }
    m
}

/// The text tree-sitter sees for `text` (directives blanked, macros neutralized); for debugging.
#[doc(hidden)]
pub fn debug_neutralized(profile: Profile, text: &str) -> String {
    let prep = prepare("debug.h", text);
    let mut k = knowledge(profile);
    learn(&mut k, std::slice::from_ref(&prep));
    pre::neutralize(&prep.dirs.blanked, &k).text
}
