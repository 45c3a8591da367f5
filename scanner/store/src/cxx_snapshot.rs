//! Snapshots of PyTorch's C++ extension interface (`schemas/pytorch-cxx/<version>/`): the classes a
//! backend implements or registers through, their members, the registration macros and functions,
//! and the autocast policy lists, as scanned by `xirang-cxx`.
//!
//! Files (format `xirang-cxx-snapshot` v1, published in `schemas/format/cxx-snapshot.schema.json`):
//! `meta.json` (provenance, sha256 of the headers, counts), `files.json` (the headers read and their
//! parse diagnostics), `classes.jsonl` (one class per line, without members), `members.jsonl` (one
//! member per line: its class, the class's line, the member), `functions.jsonl`, `macros.jsonl`,
//! `autocast.jsonl`. Sorted by file then line; no timestamps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xirang_cxx::{AutocastEntry, Class, ClassRole, CxxFile, CxxSet, Diagnostic, Function, Macro, Method};

use crate::error::{Error, Result};
use crate::snapshot::{Store, read_json, read_jsonl, to_pretty};
use crate::version::Version;

/// Name of the format, written in every `meta.json`.
pub const CXX_FORMAT_NAME: &str = "xirang-cxx-snapshot";
/// Version of the format.
pub const CXX_FORMAT_VERSION: u32 = 1;
/// The store folder of these snapshots.
pub const CXX_UPSTREAM: &str = "pytorch-cxx";

/// Provenance and counts (`meta.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CxxMeta {
    pub format: String,
    pub format_version: u32,
    /// Always `pytorch-cxx`.
    pub upstream: String,
    pub version: String,
    /// `folder:<name>` of the folder scanned.
    pub origin: String,
    /// sha256 over the headers read (include-relative path, length, bytes), in path order.
    pub content_sha256: String,
    pub counts: BTreeMap<String, usize>,
}

/// The C++ interface of one PyTorch release.
#[derive(Debug, Clone, PartialEq)]
pub struct CxxSnapshot {
    pub meta: CxxMeta,
    pub set: CxxSet,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FileEntry {
    path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ClassLine {
    name: String,
    role: ClassRole,
    file: String,
    line: u32,
    bases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct MemberLine {
    class: String,
    class_line: u32,
    file: String,
    #[serde(flatten)]
    member: Method,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AutocastLine {
    file: String,
    #[serde(flatten)]
    entry: AutocastEntry,
}

fn counts(set: &CxxSet) -> BTreeMap<String, usize> {
    set.counts().into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

impl CxxSnapshot {
    /// Scans a folder of headers: the corpus' `pytorch-cxx/vX.Y.Z`, a wheel's `torch/include` (or a
    /// folder above it), or a PyTorch source tree.
    pub fn scan(folder: &Path, version: &Version) -> Result<CxxSnapshot> {
        let sources = folder_sources(folder)?;
        let origin = format!("folder:{}", folder.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        Self::from_sources(sources, origin, version)
    }

    /// Scans headers already read (`(include-relative path, text)`): a wheel's, or a folder's.
    pub fn from_sources(mut sources: Vec<(String, String)>, origin: String, version: &Version) -> Result<CxxSnapshot> {
        sources.sort();
        let mut h = <sha2::Sha256 as sha2::Digest>::new();
        for (rel, text) in &sources {
            sha2::Digest::update(&mut h, rel.as_bytes());
            sha2::Digest::update(&mut h, (text.len() as u64).to_le_bytes());
            sha2::Digest::update(&mut h, text.as_bytes());
        }
        let set = xirang_cxx::scan_sources(&sources).map_err(cxx_err)?;
        let meta = CxxMeta {
            format: CXX_FORMAT_NAME.into(),
            format_version: CXX_FORMAT_VERSION,
            upstream: CXX_UPSTREAM.into(),
            version: version.to_string(),
            origin,
            content_sha256: crate::source::hex(&sha2::Digest::finalize(h)),
            counts: counts(&set),
        };
        Ok(CxxSnapshot { meta, set })
    }

    fn files(&self) -> Result<Vec<(&'static str, String)>> {
        let s = &self.set;
        let files: Vec<FileEntry> =
            s.files.iter().map(|f| FileEntry { path: f.path.clone(), diagnostics: f.diagnostics.clone() }).collect();
        let classes: Vec<ClassLine> = s
            .classes()
            .map(|c| ClassLine {
                name: c.name.clone(),
                role: c.role,
                file: c.file.clone(),
                line: c.line,
                bases: c.bases.clone(),
            })
            .collect();
        let members: Vec<MemberLine> = s
            .classes()
            .flat_map(|c| {
                c.members.iter().map(move |m| MemberLine {
                    class: c.name.clone(),
                    class_line: c.line,
                    file: c.file.clone(),
                    member: m.clone(),
                })
            })
            .collect();
        let functions: Vec<&Function> = s.functions().collect();
        let macros: Vec<&Macro> = s.macros().collect();
        let autocast: Vec<AutocastLine> = s
            .files
            .iter()
            .flat_map(|f| f.autocast.iter().map(move |e| AutocastLine { file: f.path.clone(), entry: e.clone() }))
            .collect();
        Ok(vec![
            ("meta.json", to_pretty(&self.meta)?),
            ("files.json", to_pretty(&files)?),
            ("classes.jsonl", crate::snapshot::to_jsonl(&classes)?),
            ("members.jsonl", crate::snapshot::to_jsonl(&members)?),
            ("functions.jsonl", crate::snapshot::to_jsonl(&functions)?),
            ("macros.jsonl", crate::snapshot::to_jsonl(&macros)?),
            ("autocast.jsonl", crate::snapshot::to_jsonl(&autocast)?),
        ])
    }
}

/// The interface headers under a folder (see `xirang_cxx::Layout`), read as text.
pub fn folder_sources(folder: &Path) -> Result<Vec<(String, String)>> {
    let layout = xirang_cxx::Layout::find(folder).map_err(cxx_err)?;
    let mut sources = Vec::new();
    for rel in layout.files().map_err(cxx_err)? {
        let bytes = crate::fsio::read_bytes(&layout.path(&rel), crate::fsio::MAX_INPUT_BYTES)?;
        sources.push((rel, String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(sources)
}

/// The interface headers of a torch wheel (`torch/include/...`), read as text; empty when the wheel
/// ships none.
pub fn wheel_sources(path: &Path) -> Result<Vec<(String, String)>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| Error::Archive { context: path.display().to_string(), message: e.to_string() })?;
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.strip_prefix("torch/include/"))
        .filter(|rel| xirang_cxx::is_interface_path(rel))
        .map(|rel| format!("torch/include/{rel}"))
        .collect();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let archive = |message: String| Error::Archive { context: format!("{}:{name}", path.display()), message };
        let mut entry = zip.by_name(&name).map_err(|e| archive(e.to_string()))?;
        if entry.size() > crate::fsio::MAX_INPUT_BYTES {
            return Err(archive(format!("unpacks to {} bytes, more than this tool reads", entry.size())));
        }
        let bytes =
            crate::fsio::read_limited(&mut entry, crate::fsio::MAX_INPUT_BYTES, "the entry").map_err(archive)?;
        let rel = name.trim_start_matches("torch/include/").to_string();
        out.push((rel, String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(out)
}

fn cxx_err(e: xirang_cxx::CxxError) -> Error {
    match e {
        xirang_cxx::CxxError::NotADirectory(p) | xirang_cxx::CxxError::NoHeaders(p) => Error::SourceNotFound(format!(
            "{p}: no PyTorch C++ extension headers there (c10/core/Allocator.h under the folder, torch/include/, include/, or a source tree)"
        )),
        other => Error::Invalid(other.to_string()),
    }
}

impl Store {
    /// Writes a C++ interface snapshot (only the files that changed, as one group).
    pub fn write_cxx(&self, snap: &CxxSnapshot) -> Result<PathBuf> {
        let v = Version::parse(&snap.meta.version)
            .ok_or_else(|| Error::Internal(format!("bad version {}", snap.meta.version)))?;
        let files = snap.files()?;
        let refs: Vec<(&str, String)> = files.into_iter().collect();
        self.write_group(CXX_UPSTREAM, &v, &refs)
    }

    /// The autocast policy lists of a C++ interface snapshot (only `autocast.jsonl` is read).
    pub fn load_cxx_autocast(&self, v: &Version) -> Result<Vec<AutocastEntry>> {
        let dir = self.dir(CXX_UPSTREAM, v);
        Ok(read_jsonl::<AutocastLine>(&dir.join("autocast.jsonl"))?.into_iter().map(|a| a.entry).collect())
    }

    /// Loads a C++ interface snapshot, checking its format and that every line names a listed file
    /// and class.
    pub fn load_cxx(&self, v: &Version) -> Result<CxxSnapshot> {
        let dir = self.dir(CXX_UPSTREAM, v);
        let meta: CxxMeta = read_json(&dir.join("meta.json"))?;
        if meta.format != CXX_FORMAT_NAME || meta.format_version != CXX_FORMAT_VERSION {
            return Err(Error::Snapshot {
                path: dir.join("meta.json"),
                message: format!(
                    "format {} v{} is not {CXX_FORMAT_NAME} v{CXX_FORMAT_VERSION}",
                    meta.format, meta.format_version
                ),
            });
        }
        let entries: Vec<FileEntry> = read_json(&dir.join("files.json"))?;
        let mut files: Vec<CxxFile> = entries
            .into_iter()
            .map(|e| CxxFile { path: e.path, diagnostics: e.diagnostics, ..CxxFile::default() })
            .collect();
        let index: std::collections::HashMap<String, usize> =
            files.iter().enumerate().map(|(i, f)| (f.path.clone(), i)).collect();
        let at = |file: &str, what: &str, name: &str| -> Result<usize> {
            index.get(file).copied().ok_or_else(|| Error::Snapshot {
                path: dir.join(what),
                message: format!("{name} names file {file} that files.json does not list"),
            })
        };
        let mut class_at: std::collections::HashMap<(String, String, u32), (usize, usize)> = Default::default();
        for c in read_jsonl::<ClassLine>(&dir.join("classes.jsonl"))? {
            let fi = at(&c.file, "classes.jsonl", &c.name)?;
            class_at.insert((c.file.clone(), c.name.clone(), c.line), (fi, files[fi].classes.len()));
            files[fi].classes.push(Class {
                name: c.name,
                role: c.role,
                file: c.file,
                line: c.line,
                bases: c.bases,
                members: Vec::new(),
            });
        }
        for m in read_jsonl::<MemberLine>(&dir.join("members.jsonl"))? {
            let Some(&(fi, ci)) = class_at.get(&(m.file.clone(), m.class.clone(), m.class_line)) else {
                return Err(Error::Snapshot {
                    path: dir.join("members.jsonl"),
                    message: format!(
                        "member {} names class {} ({}:{}) that classes.jsonl does not list",
                        m.member.name, m.class, m.file, m.class_line
                    ),
                });
            };
            files[fi].classes[ci].members.push(m.member);
        }
        for f in read_jsonl::<Function>(&dir.join("functions.jsonl"))? {
            let fi = at(&f.file, "functions.jsonl", &f.name)?;
            files[fi].functions.push(f);
        }
        for m in read_jsonl::<Macro>(&dir.join("macros.jsonl"))? {
            let fi = at(&m.file, "macros.jsonl", &m.name)?;
            files[fi].macros.push(m);
        }
        for a in read_jsonl::<AutocastLine>(&dir.join("autocast.jsonl"))? {
            let fi = at(&a.file, "autocast.jsonl", &a.entry.op)?;
            files[fi].autocast.push(a.entry);
        }
        let set = CxxSet { files };
        if counts(&set) != meta.counts {
            return Err(Error::Snapshot {
                path: dir.join("meta.json"),
                message: "the counts in meta.json do not match the snapshot's files (edited by hand?)".into(),
            });
        }
        Ok(CxxSnapshot { meta, set })
    }
}
