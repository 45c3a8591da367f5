//! PyTorch C++ extension-interface scanner for Xirang.
//!
//! [`scan_dir`] reads PyTorch's C++ extension headers (the corpus' `pytorch-cxx/vX.Y.Z/`, a wheel's
//! `torch/include/`, or a PyTorch source tree) into a [`CxxSet`]: the classes a backend implements or
//! registers through (every class with a virtual member, the registrar classes and `torch::Library`),
//! each member with its full signature (return type, parameters, `const`, `noexcept`, virtual, pure,
//! whether a default body exists and whether that default throws), the registration macros and free
//! functions, and the autocast policy lists (the `AT_FORALL_*` X-macros of `ATen/autocast_mode.h`).
//! [`diff`] compares two sets under the `cxx.*` rules of [`rules`].
//!
//! [`index`] reads a C++ adapter (torch_npu's op-plugin, torch_xla, a PrivateUse1 shim): the
//! overrides of those classes, `TORCH_LIBRARY_IMPL` blocks with their `m.impl(...)` registrations, and
//! kernel definitions named the way C++ adapters name them.
//!
//! Pipeline per file: export and attribute macros are masked to same-length spaces ([`text::mask`]),
//! tree-sitter-cpp parses the result with error recovery, and the tree is walked with the namespace
//! and class stack (`parse`). Nothing panics on malformed input: unparsable regions become
//! positioned [`Diagnostic`]s and the rest of the file is still read.
#![forbid(unsafe_code)]

mod diff;
pub mod index;
mod parse;
pub mod text;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use diff::{CxxChange, CxxRule, CxxSeverity, diff, rules};

/// Errors of the C++ scanner.
#[derive(Debug, thiserror::Error)]
pub enum CxxError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error(
        "{0} holds none of PyTorch's C++ extension headers (expected c10/core/Allocator.h under it, under \
         torch/include/, include/, or a source tree's c10/ and aten/src/ATen/)"
    )]
    NoHeaders(String),
    #[error("tree-sitter-cpp could not be loaded: {0}")]
    Language(String),
    #[error("{path} is {size} bytes; the C++ scanner reads files of at most {max} bytes")]
    TooLarge { path: String, size: u64, max: u64 },
}

/// The largest file the scanner reads (PyTorch's largest interface header is ~120 KB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A positioned warning: a region tree-sitter could not parse, or a construct the scanner skipped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

/// A parameter: its type (name removed, canonical spacing), its name and its default argument.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Param {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn public() -> String {
    "public".into()
}

fn is_public(s: &str) -> bool {
    s == "public"
}

/// What a member is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum MemberKind {
    Method,
    Constructor,
    Operator,
}

/// One member function of a class.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Method {
    pub name: String,
    pub kind: MemberKind,
    /// Return type, canonical spacing (empty for a constructor).
    #[serde(rename = "return")]
    pub ret: String,
    pub params: Vec<Param>,
    #[serde(rename = "const", default, skip_serializing_if = "is_false")]
    pub is_const: bool,
    /// `noexcept` (or `noexcept(expr)`, kept as written) when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noexcept: Option<String>,
    #[serde(rename = "virtual", default, skip_serializing_if = "is_false")]
    pub is_virtual: bool,
    /// `= 0`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pure: bool,
    /// A body in the class (or `= default`): an override is optional.
    #[serde(default, skip_serializing_if = "is_false")]
    pub has_default: bool,
    /// The default body fails unconditionally at top level (`TORCH_CHECK(false, ...)`,
    /// `TORCH_CHECK_NOT_IMPLEMENTED(false, ...)`, `AT_ERROR`, `throw`, or a macro of the scanned
    /// headers that expands to one of those).
    #[serde(default, skip_serializing_if = "is_false")]
    pub default_throws: bool,
    #[serde(rename = "static", default, skip_serializing_if = "is_false")]
    pub is_static: bool,
    /// `&` or `&&` after the parameter list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_qualifier: Option<String>,
    /// `override` / `final` as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specifier: Option<String>,
    /// `public` or `protected` (private members are not part of the interface and are not kept).
    #[serde(default = "public", skip_serializing_if = "is_public")]
    pub access: String,
    /// Position among the class's kept members (0-based), for rename detection.
    pub index: u32,
    /// Hash of the default body's canonical text, for rename detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    pub line: u32,
    /// Inside `#if`/`#ifdef`: the condition text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

impl Method {
    /// `(const Device&, size_t)`: the parameter types.
    pub fn param_types(&self) -> String {
        let v: Vec<&str> = self.params.iter().map(|p| p.ty.as_str()).collect();
        format!("({})", v.join(", "))
    }

    /// The declaration as one line: `virtual DeviceIndex deviceCount() const noexcept = 0`.
    pub fn signature(&self) -> String {
        let mut s = String::new();
        if self.is_static {
            s.push_str("static ");
        }
        if self.is_virtual && self.specifier.is_none() {
            s.push_str("virtual ");
        }
        if !self.ret.is_empty() {
            s.push_str(&self.ret);
            s.push(' ');
        }
        s.push_str(&self.name);
        let ps: Vec<String> = self
            .params
            .iter()
            .map(|p| match &p.default {
                Some(d) => format!("{} = {d}", p.ty),
                None => p.ty.clone(),
            })
            .collect();
        s.push('(');
        s.push_str(&ps.join(", "));
        s.push(')');
        if self.is_const {
            s.push_str(" const");
        }
        if let Some(r) = &self.ref_qualifier {
            s.push(' ');
            s.push_str(r);
        }
        if let Some(n) = &self.noexcept {
            s.push(' ');
            s.push_str(n);
        }
        if let Some(sp) = &self.specifier {
            s.push(' ');
            s.push_str(sp);
        }
        if self.pure {
            s.push_str(" = 0");
        }
        s
    }

    /// What an override must match, spelled canonically (aliases and namespace qualifiers folded):
    /// return type, parameter types, const, noexcept.
    pub fn override_key(&self) -> String {
        let ps: Vec<String> = self.params.iter().map(|p| text::canonical_type(&p.ty)).collect();
        format!(
            "{} ({}){}{}{}",
            text::canonical_type(&self.ret),
            ps.join(","),
            if self.is_const { " const" } else { "" },
            self.ref_qualifier.as_deref().unwrap_or(""),
            if self.noexcept.is_some() { " noexcept" } else { "" }
        )
    }
}

/// Why a class is part of the interface.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ClassRole {
    /// Has virtual members: a backend derives from it.
    Interface,
    /// A registrar or the registration API (`torch::Library`, `*Registrar`, `*Registerer`).
    Registrar,
}

/// A class of the interface.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Class {
    /// Qualified: `c10::impl::DeviceGuardImplInterface`.
    pub name: String,
    pub role: ClassRole,
    pub file: String,
    pub line: u32,
    /// Base classes as written (canonical spacing).
    pub bases: Vec<String>,
    pub members: Vec<Method>,
}

/// A registration macro (`TORCH_LIBRARY_IMPL`, `C10_REGISTER_GUARD_IMPL`, `REGISTER_GENERATOR_PRIVATEUSE1`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Macro {
    pub name: String,
    /// Parameter names of a function-like macro.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<String>>,
    /// Hash of the canonical body.
    pub body: String,
    pub file: String,
    pub line: u32,
}

/// A free function of the registration surface (`RegisterPrivateUse1HooksInterface`, `SetAllocator`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Qualified: `at::RegisterPrivateUse1HooksInterface`.
    pub name: String,
    #[serde(rename = "return")]
    pub ret: String,
    pub params: Vec<Param>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noexcept: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub template: bool,
    pub file: String,
    pub line: u32,
}

impl Function {
    pub fn signature(&self) -> String {
        let ps: Vec<String> = self
            .params
            .iter()
            .map(|p| match &p.default {
                Some(d) => format!("{} = {d}", p.ty),
                None => p.ty.clone(),
            })
            .collect();
        format!(
            "{}{} {}({}){}",
            if self.template { "template ... " } else { "" },
            self.ret,
            self.name,
            ps.join(", "),
            self.noexcept.as_deref().map(|n| format!(" {n}")).unwrap_or_default()
        )
    }

    pub fn override_key(&self) -> String {
        let ps: Vec<String> = self.params.iter().map(|p| text::canonical_type(&p.ty)).collect();
        format!("{} ({})", text::canonical_type(&self.ret), ps.join(","))
    }
}

/// One entry of an autocast policy list: `AT_FORALL_FP32(_)` -> list `fp32`, `_(pow, Tensor_Scalar)`
/// -> op `pow.Tensor_Scalar`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AutocastEntry {
    /// `lower_precision_fp`, `fp32`, `fp32_set_opt_dtype`, `different_redispatch_signature`, `promote`.
    pub list: String,
    /// `name` or `name.overload`.
    pub op: String,
    pub line: u32,
}

/// One scanned file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CxxFile {
    /// Include-relative: `c10/core/Allocator.h`.
    pub path: String,
    pub classes: Vec<Class>,
    pub functions: Vec<Function>,
    pub macros: Vec<Macro>,
    pub autocast: Vec<AutocastEntry>,
    pub diagnostics: Vec<Diagnostic>,
}

/// The C++ interface of one PyTorch release.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CxxSet {
    /// Sorted by path.
    pub files: Vec<CxxFile>,
}

impl CxxSet {
    pub fn classes(&self) -> impl Iterator<Item = &Class> {
        self.files.iter().flat_map(|f| f.classes.iter())
    }
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.files.iter().flat_map(|f| f.functions.iter())
    }
    pub fn macros(&self) -> impl Iterator<Item = &Macro> {
        self.files.iter().flat_map(|f| f.macros.iter())
    }
    pub fn autocast(&self) -> impl Iterator<Item = &AutocastEntry> {
        self.files.iter().flat_map(|f| f.autocast.iter())
    }
    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files.iter().flat_map(|f| f.diagnostics.iter())
    }
    pub fn class(&self, name: &str) -> Option<&Class> {
        self.classes().find(|c| c.name == name)
    }

    /// Counts per kind: `files`, `classes`, `members`, `virtual`, `pure`, `functions`, `macros`,
    /// `autocast`, `diagnostics`.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("files", self.files.len()),
            ("classes", self.classes().count()),
            ("members", self.classes().map(|c| c.members.len()).sum()),
            ("virtual", self.classes().flat_map(|c| &c.members).filter(|m| m.is_virtual).count()),
            ("pure", self.classes().flat_map(|c| &c.members).filter(|m| m.pure).count()),
            ("functions", self.functions().count()),
            ("macros", self.macros().count()),
            ("autocast", self.autocast().count()),
            ("diagnostics", self.diagnostics().count()),
        ]
    }
}

/// The interface files, include-relative: every header under these folders, and these files.
pub const INTERFACE_DIRS: &[&str] = &["c10/core", "ATen/detail"];
pub const INTERFACE_FILES: &[&str] = &[
    "torch/library.h",
    "ATen/autocast_mode.h",
    "ATen/native/CPUFallback.h",
    "ATen/core/GeneratorForPrivateuseone.h",
    "ATen/core/Generator.h",
    "torch/csrc/distributed/c10d/Backend.hpp",
    "torch/csrc/distributed/c10d/Work.hpp",
    "torch/csrc/distributed/c10d/Types.hpp",
    "torch/csrc/distributed/c10d/ProcessGroup.hpp",
];

/// Whether an include-relative path is one of the interface headers [`Layout::files`] reads
/// (`c10/core/**` two levels deep, `ATen/detail/*`, and [`INTERFACE_FILES`]): for readers of
/// archives (a wheel's `torch/include/`).
pub fn is_interface_path(rel: &str) -> bool {
    if !(rel.ends_with(".h") || rel.ends_with(".hpp")) {
        return false;
    }
    if INTERFACE_FILES.contains(&rel) {
        return true;
    }
    INTERFACE_DIRS
        .iter()
        .any(|d| rel.strip_prefix(d).and_then(|r| r.strip_prefix('/')).is_some_and(|r| r.matches('/').count() <= 1))
}

/// How the headers are laid out under the folder given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// An include folder (`torch/include`, or the corpus' `pytorch-cxx/vX.Y.Z`).
    Include(PathBuf),
    /// A PyTorch source tree: `c10/`, `aten/src/ATen/`, `torch/`.
    Source(PathBuf),
}

impl Layout {
    /// Finds the headers under `dir`: the folder itself, `torch/include/` (an unpacked wheel or
    /// site-packages), `include/` (the `torch` package folder), or a source tree.
    pub fn find(dir: &Path) -> Result<Layout, CxxError> {
        if !dir.is_dir() {
            return Err(CxxError::NotADirectory(dir.display().to_string()));
        }
        for cand in [dir.to_path_buf(), dir.join("torch/include"), dir.join("include")] {
            if cand.join("c10/core/Allocator.h").is_file() && !dir.join("aten/src/ATen").is_dir() {
                return Ok(Layout::Include(cand));
            }
        }
        if dir.join("aten/src/ATen").is_dir() && dir.join("c10/core/Allocator.h").is_file() {
            return Ok(Layout::Source(dir.to_path_buf()));
        }
        Err(CxxError::NoHeaders(dir.display().to_string()))
    }

    /// Where the include-relative `rel` lives on disk.
    pub fn path(&self, rel: &str) -> PathBuf {
        match self {
            Layout::Include(r) => r.join(rel),
            Layout::Source(r) => match rel.strip_prefix("ATen/") {
                Some(rest) => r.join("aten/src/ATen").join(rest),
                None => r.join(rel),
            },
        }
    }

    /// The interface files present, include-relative and sorted.
    pub fn files(&self) -> Result<Vec<String>, CxxError> {
        let mut out = BTreeSet::new();
        for d in INTERFACE_DIRS {
            let mut stack = vec![d.to_string()];
            while let Some(rel) = stack.pop() {
                let p = self.path(&rel);
                let Ok(rd) = std::fs::read_dir(&p) else { continue };
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().to_string();
                    let sub = format!("{rel}/{name}");
                    let Ok(ft) = e.file_type() else { continue };
                    if ft.is_dir() {
                        // c10/core/impl/ is part of the interface; deeper trees are not walked
                        if sub.matches('/').count() <= 3 {
                            stack.push(sub);
                        }
                    } else if ft.is_file() && (name.ends_with(".h") || name.ends_with(".hpp")) {
                        out.insert(sub);
                    }
                }
            }
        }
        for f in INTERFACE_FILES {
            if self.path(f).is_file() {
                out.insert(f.to_string());
            }
        }
        Ok(out.into_iter().collect())
    }
}

/// Reads a file of at most [`MAX_FILE_BYTES`] (a regular file; invalid UTF-8 is replaced).
pub fn read_source(path: &Path) -> Result<String, CxxError> {
    let io = |e| CxxError::Io { path: path.display().to_string(), source: e };
    let md = std::fs::metadata(path).map_err(io)?;
    if !md.is_file() {
        return Err(CxxError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other("not a regular file"),
        });
    }
    if md.len() > MAX_FILE_BYTES {
        return Err(CxxError::TooLarge { path: path.display().to_string(), size: md.len(), max: MAX_FILE_BYTES });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Scans PyTorch's C++ extension headers under `dir` (see [`Layout::find`]).
pub fn scan_dir(dir: &Path) -> Result<CxxSet, CxxError> {
    let layout = Layout::find(dir)?;
    let files = layout.files()?;
    let mut sources = Vec::with_capacity(files.len());
    for rel in files {
        let text = read_source(&layout.path(&rel))?;
        sources.push((rel, text));
    }
    scan_sources(&sources)
}

/// Scans in-memory headers (`(include-relative path, text)`); the macros of all of them are known
/// when deciding whether a default body throws.
pub fn scan_sources(sources: &[(String, String)]) -> Result<CxxSet, CxxError> {
    let masked: Vec<String> = sources.iter().map(|(_, t)| text::blank_plain_bodies(&text::mask(t))).collect();
    let skip: Vec<bool> = sources.iter().map(|(_, t)| !parse::may_define_interface(t)).collect();
    let trees = parse::parse_all(&masked, &skip)?;
    let failing = parse::failing_macros(sources.iter().map(|(_, t)| t.as_str()));
    let mut files: Vec<CxxFile> = sources
        .iter()
        .zip(masked.iter())
        .zip(trees.iter().zip(skip.iter()))
        .map(|(((path, orig), m), (tree, &skipped))| parse::read_file(path, orig, m, tree, skipped, &failing))
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(CxxSet { files })
}

/// Scans one file on its own.
pub fn scan_source(path: &str, text: &str) -> Result<CxxFile, CxxError> {
    let set = scan_sources(&[(path.to_string(), text.to_string())])?;
    Ok(set.files.into_iter().next().unwrap_or_default())
}
