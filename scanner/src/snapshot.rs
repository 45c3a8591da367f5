//! The snapshot store: one folder per upstream version under `schemas/<upstream>/<version>/`.
//!
//! A PyTorch snapshot is four files, each deterministic (sorted, no timestamps) and line-oriented
//! so that `git diff` between two versions reads like a changelog:
//! - `meta.json`: format name and version, upstream, version, provenance (origin and content hash),
//!   counts;
//! - `operators.jsonl`: one operator per line, sorted by qualified name;
//! - `derivatives.jsonl`: one derivative entry per line, sorted by operator and dispatch key;
//! - `tags.json`: the tags of `tags.yaml`.
//!
//! The format is described by `schemas/format/snapshot.schema.json` (JSON Schema).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::derivatives::{self, Derivative};
use crate::error::{Error, Result};
use crate::registry::{self, NativeFunction, Registry, TagDef};
use crate::source::UpstreamFiles;
pub use crate::version::Version;

/// Name of the snapshot format, written in every `meta.json`.
pub const FORMAT_NAME: &str = "xirang-snapshot";
/// Version of the snapshot format. Bump on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// Provenance and counts of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub format: String,
    pub format_version: u32,
    pub upstream: String,
    pub version: String,
    /// Where the files were read from (`wheel:torch-2.1.0-....whl`, `git:v2.1.0`, `folder:...`).
    pub origin: String,
    /// sha256 of the upstream files' contents.
    pub content_sha256: String,
    pub counts: SnapshotCounts,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotCounts {
    pub operators: usize,
    pub generated_operators: usize,
    pub derivatives: usize,
    pub tags: usize,
}

/// The Interface IR of one PyTorch version.
#[derive(Debug, Clone, PartialEq)]
pub struct PytorchSnapshot {
    pub meta: SnapshotMeta,
    pub registry: Registry,
    pub derivatives: Vec<Derivative>,
}

impl PytorchSnapshot {
    /// Builds the IR from upstream files.
    pub fn build(files: &UpstreamFiles, version: &Version) -> Result<PytorchSnapshot> {
        let tags = registry::load_tags(&files.tags)?;
        let mut reg = registry::load_native_functions_as(&files.native_functions, tags, version.torchgen())?;
        let derivs = match &files.derivatives {
            Some(d) => derivatives::load_derivatives_as(d, &reg, version.torchgen())?,
            None => Vec::new(),
        };
        sort_registry(&mut reg);
        let mut derivs = derivs;
        sort_derivatives(&mut derivs);
        let meta = SnapshotMeta {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            upstream: "pytorch".into(),
            version: version.to_string(),
            origin: files.origin.clone(),
            content_sha256: files.content_hash(),
            counts: SnapshotCounts {
                operators: reg.functions.len(),
                generated_operators: reg.functions.iter().filter(|f| f.generated).count(),
                derivatives: derivs.len(),
                tags: reg.tags.len(),
            },
        };
        Ok(PytorchSnapshot { meta, registry: reg, derivatives: derivs })
    }

    pub fn version(&self) -> Option<Version> {
        Version::parse(&self.meta.version)
    }

    pub fn operator(&self, name: &str) -> Option<&NativeFunction> {
        self.registry.get(name)
    }
}

fn sort_registry(reg: &mut Registry) {
    reg.functions.sort_by(|a, b| a.func.name.cmp(&b.func.name));
}

fn sort_derivatives(d: &mut [Derivative]) {
    d.sort_by(|a, b| (&a.op, &a.dispatch_key).cmp(&(&b.op, &b.dispatch_key)));
}

/// Name of the header snapshot format, written in every header `meta.json`.
pub const HEADER_FORMAT_NAME: &str = "xirang-header-snapshot";
/// Version of the header snapshot format.
pub const HEADER_FORMAT_VERSION: u32 = 1;

/// Provenance and counts of a header snapshot (`schemas/<vendor>/<version>/meta.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderMeta {
    pub format: String,
    pub format_version: u32,
    /// `ascend`, `cuda`, or `generic`.
    pub upstream: String,
    pub version: String,
    pub origin: String,
    /// sha256 over the header files (relative path, length, bytes), in path order.
    pub content_sha256: String,
    /// Declarations per kind, and `files`.
    pub counts: std::collections::BTreeMap<String, usize>,
}

/// One file of a header snapshot without its declarations (those are in `decls.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct HeaderFileEntry {
    path: String,
    includes: Vec<xirang_headers::Include>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    diagnostics: Vec<xirang_headers::Diagnostic>,
}

/// `files.json` of a header snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct HeaderFilesDoc {
    profile: xirang_headers::Profile,
    files: Vec<HeaderFileEntry>,
    include_graph: Vec<xirang_headers::IncludeEdge>,
}

/// The driver-header IR of one vendor release.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderSnapshot {
    pub meta: HeaderMeta,
    pub set: xirang_headers::HeaderSet,
}

impl HeaderSnapshot {
    /// Scans a folder of headers (for Ascend releases laid out as `<release>/acl/`, pass the
    /// release folder: its `acl/` is scanned).
    pub fn scan(vendor: &str, folder: &Path, version: &Version) -> Result<HeaderSnapshot> {
        let profile: xirang_headers::Profile =
            vendor.parse().map_err(|_| Error::Usage(format!("unknown vendor `{vendor}` (ascend, cuda, generic)")))?;
        let dir = if folder.join("acl").is_dir() { folder.join("acl") } else { folder.to_path_buf() };
        let set = xirang_headers::scan_dir(profile, &dir)?;
        let mut h = <sha2::Sha256 as sha2::Digest>::new();
        for f in &set.files {
            let bytes = std::fs::read(dir.join(&f.path)).map_err(|e| Error::io(dir.join(&f.path), e))?;
            sha2::Digest::update(&mut h, f.path.as_bytes());
            sha2::Digest::update(&mut h, (bytes.len() as u64).to_le_bytes());
            sha2::Digest::update(&mut h, &bytes);
        }
        let mut counts: std::collections::BTreeMap<String, usize> =
            xirang_headers::summary(&set).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        counts.insert("files".into(), set.files.len());
        let meta = HeaderMeta {
            format: HEADER_FORMAT_NAME.into(),
            format_version: HEADER_FORMAT_VERSION,
            upstream: vendor.to_string(),
            version: version.to_string(),
            origin: format!("folder:{}", folder.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()),
            content_sha256: crate::source::hex(&sha2::Digest::finalize(h)),
            counts,
        };
        Ok(HeaderSnapshot { meta, set })
    }
}

/// The snapshot store rooted at a `schemas/` folder.
#[derive(Debug, Clone)]
pub struct Store {
    pub root: PathBuf,
}

/// Upstreams the store knows.
pub const UPSTREAMS: [&str; 3] = ["pytorch", "ascend", "cuda"];

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// Finds the store: `explicit`, else `$XIRANG_STORE`, else a `schemas/` folder in the current
    /// directory or one of its parents, else the one shipped beside this crate's sources.
    pub fn discover(explicit: Option<&Path>) -> Result<Store> {
        if let Some(p) = explicit {
            return Ok(Store::new(p));
        }
        if let Some(p) = std::env::var_os("XIRANG_STORE") {
            return Ok(Store::new(PathBuf::from(p)));
        }
        if let Ok(mut dir) = std::env::current_dir() {
            loop {
                let cand = dir.join("schemas");
                if cand.join("pytorch").is_dir() {
                    return Ok(Store::new(cand));
                }
                if !dir.pop() {
                    break;
                }
            }
        }
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
        if shipped.join("pytorch").is_dir() {
            return Ok(Store::new(shipped));
        }
        Err(Error::SourceNotFound(
            "no snapshot store found: pass --store DIR, set XIRANG_STORE, or run inside the repository".into(),
        ))
    }

    pub fn dir(&self, upstream: &str, v: &Version) -> PathBuf {
        self.root.join(upstream).join(v.to_string())
    }

    /// Versions present for an upstream, ascending.
    pub fn versions(&self, upstream: &str) -> Vec<Version> {
        let mut out: Vec<Version> = std::fs::read_dir(self.root.join(upstream))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("meta.json").is_file())
            .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()))
            .collect();
        out.sort();
        out
    }

    /// Resolves `v2.1` to the newest 2.1.x in the store; exact versions resolve to themselves.
    pub fn resolve(&self, upstream: &str, spec: &str) -> Result<Version> {
        let want = Version::parse(spec)
            .ok_or_else(|| Error::Usage(format!("`{spec}` is not a version (expected e.g. v2.1 or v2.1.0)")))?;
        let all = self.versions(upstream);
        all.iter().rev().find(|v| v.matches(&want)).cloned().ok_or_else(|| {
            let have: Vec<String> = all.iter().map(|v| v.to_string()).collect();
            Error::SourceNotFound(format!(
                "no {upstream} snapshot matches {spec} in {} (have: {})",
                self.root.display(),
                if have.is_empty() { "none".to_string() } else { have.join(", ") }
            ))
        })
    }

    /// Writes a PyTorch snapshot; returns the folder. Writes only files whose content changed.
    pub fn write_pytorch(&self, snap: &PytorchSnapshot) -> Result<PathBuf> {
        let v = snap.version().ok_or_else(|| Error::Usage(format!("bad version {}", snap.meta.version)))?;
        let dir = self.dir("pytorch", &v);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        write_if_changed(&dir.join("meta.json"), &to_pretty(&snap.meta)?)?;
        write_if_changed(&dir.join("tags.json"), &to_pretty(&snap.registry.tags)?)?;
        write_if_changed(&dir.join("operators.jsonl"), &to_jsonl(&snap.registry.functions)?)?;
        write_if_changed(&dir.join("derivatives.jsonl"), &to_jsonl(&snap.derivatives)?)?;
        Ok(dir)
    }

    /// Writes a header snapshot: `meta.json`, `files.json` (files, includes, include graph) and
    /// `decls.jsonl` (one declaration per line, by file then source order).
    pub fn write_headers(&self, snap: &HeaderSnapshot) -> Result<PathBuf> {
        let v = Version::parse(&snap.meta.version)
            .ok_or_else(|| Error::Usage(format!("bad version {}", snap.meta.version)))?;
        let dir = self.dir(&snap.meta.upstream, &v);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let doc = HeaderFilesDoc {
            profile: snap.set.profile,
            files: snap
                .set
                .files
                .iter()
                .map(|f| HeaderFileEntry {
                    path: f.path.clone(),
                    includes: f.includes.clone(),
                    diagnostics: f.diagnostics.clone(),
                })
                .collect(),
            include_graph: snap.set.include_graph.clone(),
        };
        let decls: Vec<&xirang_headers::Decl> = snap.set.decls().collect();
        write_if_changed(&dir.join("meta.json"), &to_pretty(&snap.meta)?)?;
        write_if_changed(&dir.join("files.json"), &to_pretty(&doc)?)?;
        write_if_changed(&dir.join("decls.jsonl"), &to_jsonl(&decls)?)?;
        Ok(dir)
    }

    /// Loads a header snapshot of `vendor` (`ascend`, `cuda`).
    pub fn load_headers(&self, vendor: &str, v: &Version) -> Result<HeaderSnapshot> {
        let dir = self.dir(vendor, v);
        let meta: HeaderMeta = read_json(&dir.join("meta.json"))?;
        if meta.format != HEADER_FORMAT_NAME || meta.format_version != HEADER_FORMAT_VERSION {
            return Err(Error::Snapshot {
                path: dir.join("meta.json"),
                message: format!(
                    "format {} v{} is not {HEADER_FORMAT_NAME} v{HEADER_FORMAT_VERSION}",
                    meta.format, meta.format_version
                ),
            });
        }
        let doc: HeaderFilesDoc = read_json(&dir.join("files.json"))?;
        let decls: Vec<xirang_headers::Decl> = read_jsonl(&dir.join("decls.jsonl"))?;
        let mut files: Vec<xirang_headers::HeaderFile> = doc
            .files
            .into_iter()
            .map(|f| xirang_headers::HeaderFile {
                path: f.path,
                decls: Vec::new(),
                includes: f.includes,
                diagnostics: f.diagnostics,
            })
            .collect();
        let index: std::collections::HashMap<String, usize> =
            files.iter().enumerate().map(|(i, f)| (f.path.clone(), i)).collect();
        for d in decls {
            match index.get(&d.file) {
                Some(&i) => files[i].decls.push(d),
                None => {
                    return Err(Error::Snapshot {
                        path: dir.join("decls.jsonl"),
                        message: format!("declaration {} names file {} that files.json does not list", d.name, d.file),
                    });
                }
            }
        }
        let set = xirang_headers::HeaderSet { profile: doc.profile, files, include_graph: doc.include_graph };
        Ok(HeaderSnapshot { meta, set })
    }

    /// Loads a PyTorch snapshot.
    pub fn load_pytorch(&self, v: &Version) -> Result<PytorchSnapshot> {
        let dir = self.dir("pytorch", v);
        let meta: SnapshotMeta = read_json(&dir.join("meta.json"))?;
        if meta.format != FORMAT_NAME || meta.format_version != FORMAT_VERSION {
            return Err(Error::Snapshot {
                path: dir.join("meta.json"),
                message: format!(
                    "format {} v{} is not {FORMAT_NAME} v{FORMAT_VERSION}; re-import it with `xirang-scan snapshot import`",
                    meta.format, meta.format_version
                ),
            });
        }
        let tags: Vec<TagDef> = read_json(&dir.join("tags.json"))?;
        let functions: Vec<NativeFunction> = read_jsonl(&dir.join("operators.jsonl"))?;
        let derivatives: Vec<Derivative> = read_jsonl(&dir.join("derivatives.jsonl"))?;
        Ok(PytorchSnapshot { meta, registry: Registry { tags, functions }, derivatives })
    }
}

fn to_pretty<T: Serialize>(v: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(v).map_err(|e| Error::Usage(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// One JSON object per line.
pub fn to_jsonl<T: Serialize>(items: &[T]) -> Result<String> {
    let mut s = String::new();
    for it in items {
        s.push_str(&serde_json::to_string(it).map_err(|e| Error::Usage(e.to_string()))?);
        s.push('\n');
    }
    Ok(s)
}

/// Writes `text` to `path` unless the file already holds exactly that.
pub fn write_if_changed(path: &Path, text: &str) -> Result<bool> {
    if let Ok(old) = std::fs::read(path)
        && old == text.as_bytes()
    {
        return Ok(false);
    }
    std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
    Ok(true)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Snapshot {
        path: path.to_path_buf(),
        message: format!("line {} column {}: {e}", e.line(), e.column()),
    })
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::Snapshot { path: path.to_path_buf(), message: format!("line {}: {e}", i + 1) })
        })
        .collect()
}
