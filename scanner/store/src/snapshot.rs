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

use std::borrow::Cow;
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
pub const UPSTREAMS: [&str; 4] = ["pytorch", "ascend", "cuda", "pytorch-cxx"];

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// Finds the store: `explicit`, else `$XIRANG_STORE`, else a `schemas/` folder in the current
    /// directory or one of its parents, else the one shipped beside this crate's sources.
    pub fn discover(explicit: Option<&Path>) -> Result<Store> {
        let st = Self::find(explicit)?;
        // an import interrupted by a kill or a full disk is completed or undone before any read
        if st.root.is_dir() {
            crate::fsio::recover(&st.root)?;
        }
        Ok(st)
    }

    fn find(explicit: Option<&Path>) -> Result<Store> {
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
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
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
        // an exact version is itself (`v2.3.1` is not `v2.3.1.post1`); a prefix is its newest match
        if let Some(v) = all.iter().find(|v| **v == want) {
            return Ok(v.clone());
        }
        all.iter().rev().find(|v| v.matches(&want)).cloned().ok_or_else(|| {
            let have: Vec<String> = all.iter().map(|v| v.to_string()).collect();
            Error::SourceNotFound(format!(
                "no {upstream} snapshot matches {spec} in {} (have: {})",
                self.root.display(),
                if have.is_empty() { "none".to_string() } else { have.join(", ") }
            ))
        })
    }

    /// Writes a PyTorch snapshot; returns the folder. Writes only files whose content changed, all
    /// of them or none (a [`crate::fsio::WriteGroup`]: a full disk or a kill leaves the previous
    /// snapshot, or none, never a mix).
    pub fn write_pytorch(&self, snap: &PytorchSnapshot) -> Result<PathBuf> {
        let v = snap.version().ok_or_else(|| Error::Internal(format!("bad version {}", snap.meta.version)))?;
        self.write_group(
            "pytorch",
            &v,
            &[
                ("meta.json", to_pretty(&snap.meta)?),
                ("tags.json", to_pretty(&snap.registry.tags)?),
                ("operators.jsonl", to_jsonl(&snap.registry.functions)?),
                ("derivatives.jsonl", to_jsonl(&snap.derivatives)?),
            ],
        )
    }

    /// Writes the changed files of one snapshot folder as one group.
    pub(crate) fn write_group(&self, upstream: &str, v: &Version, files: &[(&str, String)]) -> Result<PathBuf> {
        let rel = Path::new(upstream).join(v.to_string());
        let dir = self.root.join(&rel);
        crate::fsio::recover(&self.root)?;
        let mut group = crate::fsio::WriteGroup::new(&self.root);
        for (name, text) in files {
            let same = std::fs::read(dir.join(name)).is_ok_and(|b| b == text.as_bytes());
            if !same {
                group.write(rel.join(name), text.as_bytes())?;
            }
        }
        group.commit()?;
        Ok(dir)
    }

    /// Whether the store holds `upstream` `v` with other content than `files` would write (used
    /// to refuse overwriting a snapshot unless forced).
    pub fn pytorch_differs(&self, snap: &PytorchSnapshot) -> Result<Option<PathBuf>> {
        let Some(v) = snap.version() else { return Ok(None) };
        let dir = self.dir("pytorch", &v);
        if !crate::fsio::exists_any(&dir) {
            return Ok(None);
        }
        let files = [
            ("meta.json", to_pretty(&snap.meta)?),
            ("tags.json", to_pretty(&snap.registry.tags)?),
            ("operators.jsonl", to_jsonl(&snap.registry.functions)?),
            ("derivatives.jsonl", to_jsonl(&snap.derivatives)?),
        ];
        let same = files.iter().all(|(n, t)| std::fs::read(dir.join(n)).is_ok_and(|b| b == t.as_bytes()));
        Ok((!same).then_some(dir))
    }

    /// Writes a header snapshot: `meta.json`, `files.json` (files, includes, include graph) and
    /// `decls.jsonl` (one declaration per line, by file then source order).
    pub fn write_headers(&self, snap: &HeaderSnapshot) -> Result<PathBuf> {
        let v = Version::parse(&snap.meta.version)
            .ok_or_else(|| Error::Internal(format!("bad version {}", snap.meta.version)))?;
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
        self.write_group(
            &snap.meta.upstream,
            &v,
            &[
                ("meta.json", to_pretty(&snap.meta)?),
                ("files.json", to_pretty(&doc)?),
                ("decls.jsonl", to_jsonl(&decls)?),
            ],
        )
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

    /// Loads two PyTorch snapshots for a comparison, parsing only what can differ: an operator or a
    /// derivative entry whose line is the same in both (every field but `line`) is left out of both
    /// sides (see [`PytorchPair`]). `xirang-scan diff` between two store versions reads this way.
    pub fn load_pytorch_pair(&self, old: &Version, new: &Version) -> Result<PytorchPair> {
        // each side is read and scanned on its own thread, then the kept lines parsed the same way;
        // errors of the old side are reported first, as a sequential read would
        let (a, b) = std::thread::scope(|s| {
            let h = s.spawn(|| self.read_pytorch_text(old));
            let b = self.read_pytorch_text(new);
            (join_scoped(h, &self.dir("pytorch", old)), b)
        });
        let (a, b) = (a?, b?);
        let (heads_a, heads_b) = std::thread::scope(|s| {
            let h = s.spawn(|| a.heads());
            let heads_b = b.heads();
            (join_scoped(h, &a.ops_path), heads_b)
        });
        let ((ops_a, der_a), (ops_b, der_b)) = (heads_a?, heads_b?);
        validate_heads(&self.dir("pytorch", old), &a.meta, &ops_a, &der_a, a.tags.len())?;
        validate_heads(&self.dir("pytorch", new), &b.meta, &ops_b, &der_b, b.tags.len())?;
        let (keep_ops_a, keep_ops_b) = differing(&ops_a, &ops_b);
        let (keep_der_a, keep_der_b) = differing(&der_a, &der_b);
        let (old_snap, new_snap) = std::thread::scope(|s| {
            let h = s.spawn(|| a.parse_kept(&ops_a, &keep_ops_a, &der_a, &keep_der_a));
            let new_snap = b.parse_kept(&ops_b, &keep_ops_b, &der_b, &keep_der_b);
            (join_scoped(h, &a.ops_path), new_snap)
        });
        let (old_snap, new_snap) = (old_snap?, new_snap?);
        let old_index = OpIndex::of(&ops_a, der_a.len());
        let new_index = OpIndex::of(&ops_b, der_b.len());
        Ok(PytorchPair { old: old_snap, new: new_snap, old_index, new_index })
    }

    /// The operators of a PyTorch snapshot whose base name (`mul` of `mul.Scalar`) `keep` accepts,
    /// parsing only their lines (the drift report resolves what the adapter's custom-operator
    /// formulas call this way, next to [`Store::load_pytorch_pair`]). Every line is still
    /// identified and its name checked.
    pub fn load_pytorch_operators(&self, v: &Version, keep: impl Fn(&str) -> bool) -> Result<Vec<NativeFunction>> {
        let dir = self.dir("pytorch", v);
        let meta: SnapshotMeta = read_json(&dir.join("meta.json"))?;
        check_format(&dir, &meta)?;
        let ops_path = dir.join("operators.jsonl");
        let text = read_file(&ops_path)?;
        let lines = op_lines(&ops_path, &text)?;
        let wanted: Vec<bool> = lines.iter().map(|l| keep(l.key.0.split('.').next().unwrap_or(""))).collect();
        parse_kept_lines(&ops_path, &lines, &wanted)
    }

    /// The raw files of a PyTorch snapshot (meta and tags parsed, after the format check).
    fn read_pytorch_text(&self, v: &Version) -> Result<SnapshotText> {
        let dir = self.dir("pytorch", v);
        let meta: SnapshotMeta = read_json(&dir.join("meta.json"))?;
        check_format(&dir, &meta)?;
        let tags: Vec<TagDef> = read_json(&dir.join("tags.json"))?;
        let (ops_path, der_path) = (dir.join("operators.jsonl"), dir.join("derivatives.jsonl"));
        let ops = read_file(&ops_path)?;
        let der = read_file(&der_path)?;
        Ok(SnapshotText { meta, tags, ops_path, ops, der_path, der })
    }

    /// Loads a PyTorch snapshot.
    pub fn load_pytorch(&self, v: &Version) -> Result<PytorchSnapshot> {
        self.load_pytorch_with(v, true)
    }

    /// [`Store::load_pytorch`]; without `derivatives`, the snapshot's derivative entries are left
    /// empty (not read).
    fn load_pytorch_with(&self, v: &Version, with_derivatives: bool) -> Result<PytorchSnapshot> {
        let dir = self.dir("pytorch", v);
        let meta: SnapshotMeta = read_json(&dir.join("meta.json"))?;
        check_format(&dir, &meta)?;
        let tags: Vec<TagDef> = read_json(&dir.join("tags.json"))?;
        let (ops_path, der_path) = (dir.join("operators.jsonl"), dir.join("derivatives.jsonl"));
        let ops_text = read_file(&ops_path)?;
        let der_text = if with_derivatives { read_file(&der_path)? } else { String::new() };
        // Parsing every operator's schema dominates loading; the lines are independent, so the
        // operators are parsed in two halves and the derivatives beside them, on scoped threads.
        let (head, tail, tail_line) = split_lines_in_half(&ops_text);
        let (head, tail, derivatives) = std::thread::scope(|s| {
            let tail = s.spawn(|| parse_jsonl::<NativeFunction>(&ops_path, tail, tail_line));
            let derivatives = s.spawn(|| parse_jsonl::<Derivative>(&der_path, &der_text, 0));
            let head = parse_jsonl::<NativeFunction>(&ops_path, head, 0);
            (head, joined(tail, &ops_path), joined(derivatives, &der_path))
        });
        // the head's error first: the same error a line-by-line read reports
        let mut functions = head?;
        functions.extend(tail??);
        let derivatives = derivatives??;
        let snap = PytorchSnapshot { meta, registry: Registry { tags, functions }, derivatives };
        validate_with(&dir, &snap, with_derivatives)?;
        Ok(snap)
    }
}

impl Store {
    /// Two whole PyTorch snapshots, as [`Store::load_pytorch`] reads each, for a comparison that
    /// needs every operator of both (the coverage join of `diff`). Consecutive releases share most
    /// entries: a line of the new version equal to a line of the old one but for its `line` field
    /// is the old entry with the new line number, so only the lines that differ are parsed twice.
    pub fn load_pytorch_both(&self, old: &Version, new: &Version) -> Result<(PytorchSnapshot, PytorchSnapshot)> {
        self.load_pytorch_both_with(old, new, true)
    }

    /// [`Store::load_pytorch_both`] without the derivative entries (left empty, not read): what
    /// the coverage join needs, which reads the operators only.
    pub fn load_pytorch_operators_both(
        &self,
        old: &Version,
        new: &Version,
    ) -> Result<(PytorchSnapshot, PytorchSnapshot)> {
        self.load_pytorch_both_with(old, new, false)
    }

    fn load_pytorch_both_with(
        &self,
        old: &Version,
        new: &Version,
        with_derivatives: bool,
    ) -> Result<(PytorchSnapshot, PytorchSnapshot)> {
        let a = self.load_pytorch_with(old, with_derivatives)?;
        let (old_dir, dir) = (self.dir("pytorch", old), self.dir("pytorch", new));
        let meta: SnapshotMeta = read_json(&dir.join("meta.json"))?;
        check_format(&dir, &meta)?;
        let tags: Vec<TagDef> = read_json(&dir.join("tags.json"))?;
        let (ops_path, der_path) = (dir.join("operators.jsonl"), dir.join("derivatives.jsonl"));
        let der = |p: &Path| if with_derivatives { read_file(p) } else { Ok(String::new()) };
        let (old_ops, old_der) =
            (read_file(&old_dir.join("operators.jsonl"))?, der(&old_dir.join("derivatives.jsonl"))?);
        let (ops_text, der_text) = (read_file(&ops_path)?, der(&der_path)?);
        let (functions, derivatives) = std::thread::scope(|s| {
            let d = s.spawn(|| {
                parse_jsonl_like(&der_path, &der_text, &old_der, &a.derivatives, |d: &mut Derivative, l| d.line = l)
            });
            let f =
                parse_jsonl_like(&ops_path, &ops_text, &old_ops, &a.registry.functions, |f: &mut NativeFunction, l| {
                    f.line = l
                });
            (f, joined(d, &der_path))
        });
        let (functions, derivatives) = (functions?, derivatives??);
        let b = PytorchSnapshot { meta, registry: Registry { tags, functions }, derivatives };
        validate_with(&dir, &b, with_derivatives)?;
        Ok((a, b))
    }
}

/// [`parse_jsonl`] of `text`, taking the value of a line equal to a line of `base_text` but for
/// its trailing `"line"` field from `base` (the values `base_text` parses to, one per non-blank
/// line) with `set_line` applied, instead of parsing it again.
fn parse_jsonl_like<T: for<'de> Deserialize<'de> + Clone>(
    path: &Path,
    text: &str,
    base_text: &str,
    base: &[T],
    set_line: impl Fn(&mut T, u32),
) -> Result<Vec<T>> {
    let known: std::collections::HashMap<&str, usize> = base_text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .filter_map(|(i, l)| split_line_field(l).map(|(head, _)| (head, i)))
        .filter(|(_, i)| *i < base.len())
        .collect();
    let mut out = Vec::with_capacity(text.bytes().filter(|&b| b == b'\n').count() + 1);
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        if let Some((head, line)) = split_line_field(l)
            && let Some(&j) = known.get(head)
        {
            let mut v = base[j].clone();
            set_line(&mut v, line);
            out.push(v);
            continue;
        }
        let v = serde_json::from_str(l)
            .map_err(|e| Error::Snapshot { path: path.to_path_buf(), message: format!("line {}: {e}", i + 1) })?;
        out.push(v);
    }
    Ok(out)
}

fn incomplete(dir: &Path, message: String) -> Error {
    Error::Snapshot {
        path: dir.to_path_buf(),
        message: format!(
            "{message}; the snapshot is damaged or incomplete: re-import it with `xirang-scan snapshot import`"
        ),
    }
}

/// What every stored PyTorch snapshot must satisfy whatever wrote it: the counts of `meta.json`,
/// one line per operator and per (operator, dispatch key), and derivative entries for every
/// release that ships derivatives.yaml.
fn validate_counts(dir: &Path, meta: &SnapshotMeta, ops: usize, der: usize, tags: usize) -> Result<()> {
    let c = &meta.counts;
    for (what, stored, counted) in
        [("operators", c.operators, ops), ("derivative entries", c.derivatives, der), ("tags", c.tags, tags)]
    {
        if stored != counted {
            return Err(incomplete(dir, format!("meta.json counts {stored} {what}, the files hold {counted}")));
        }
    }
    if der == 0 && Version::parse(&meta.version).is_some_and(|v| crate::source::ships_derivatives(&v)) {
        return Err(incomplete(
            dir,
            format!(
                "{} has no derivative entries, though every release since 2.1 ships derivatives.yaml",
                meta.version
            ),
        ));
    }
    Ok(())
}

/// The first name that occurs twice in a list of names (any order).
fn first_duplicate<'a>(names: impl Iterator<Item = (&'a str, &'a str)>) -> Option<(&'a str, &'a str)> {
    let mut v: Vec<(&str, &str)> = names.collect();
    v.sort_unstable();
    v.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// [`validate`]; `derivatives`: whether the snapshot's derivative entries were read (else their
/// count is not checked: [`Store::load_pytorch_operators_both`]).
fn validate_with(dir: &Path, snap: &PytorchSnapshot, derivatives: bool) -> Result<()> {
    let fs = &snap.registry.functions;
    let der = if derivatives { snap.derivatives.len() } else { snap.meta.counts.derivatives };
    validate_counts(dir, &snap.meta, fs.len(), der, snap.registry.tags.len())?;
    let generated = fs.iter().filter(|f| f.generated).count();
    if generated != snap.meta.counts.generated_operators {
        return Err(incomplete(
            dir,
            format!(
                "meta.json counts {} generated operators, the files hold {generated}",
                snap.meta.counts.generated_operators
            ),
        ));
    }
    let names: Vec<String> = fs.iter().map(|f| f.func.name.to_string()).collect();
    if let Some((n, _)) = first_duplicate(names.iter().map(|n| (n.as_str(), ""))) {
        return Err(incomplete(dir, format!("operators.jsonl holds `{n}` twice")));
    }
    let keys: Vec<(String, &str)> =
        snap.derivatives.iter().map(|d| (d.op.to_string(), d.dispatch_key.as_str())).collect();
    if let Some((op, key)) = first_duplicate(keys.iter().map(|(o, k)| (o.as_str(), *k))) {
        return Err(incomplete(dir, format!("derivatives.jsonl holds `{op}` ({key}) twice")));
    }
    Ok(())
}

fn validate_heads(
    dir: &Path,
    meta: &SnapshotMeta,
    ops: &[KeyedLine<'_>],
    der: &[KeyedLine<'_>],
    tags: usize,
) -> Result<()> {
    validate_counts(dir, meta, ops.len(), der.len(), tags)?;
    if let Some((n, _)) = first_duplicate(ops.iter().map(|l| (&*l.key.0, &*l.key.1))) {
        return Err(incomplete(dir, format!("operators.jsonl holds `{n}` twice")));
    }
    if let Some((op, key)) = first_duplicate(der.iter().map(|l| (&*l.key.0, &*l.key.1))) {
        return Err(incomplete(dir, format!("derivatives.jsonl holds `{op}` ({key}) twice")));
    }
    Ok(())
}

fn check_format(dir: &Path, meta: &SnapshotMeta) -> Result<()> {
    if meta.format != FORMAT_NAME || meta.format_version != FORMAT_VERSION {
        return Err(Error::Snapshot {
            path: dir.join("meta.json"),
            message: format!(
                "format {} v{} is not {FORMAT_NAME} v{FORMAT_VERSION}; re-import it with `xirang-scan snapshot import`",
                meta.format, meta.format_version
            ),
        });
    }
    Ok(())
}

/// Two PyTorch snapshots read for a comparison ([`Store::load_pytorch_pair`]).
///
/// `old` and `new` hold the full meta and tags, but only the operators and derivative entries that
/// are not the same on the other side: those present on one side only, and those whose stored line
/// differs in some field other than `line`. What both share unchanged cannot produce a change, so
/// comparing the two partial snapshots finds exactly the changes of the full ones; the indexes keep
/// what the comparison needs of the rest (every operator's name and line, the derivative counts).
/// Not a substitute for [`Store::load_pytorch`] anywhere else.
#[derive(Debug, Clone, PartialEq)]
pub struct PytorchPair {
    pub old: PytorchSnapshot,
    pub new: PytorchSnapshot,
    pub old_index: OpIndex,
    pub new_index: OpIndex,
}

impl PytorchPair {
    /// Names of every operator of both versions (old first, by name).
    pub fn operator_names(&self) -> impl Iterator<Item = &str> {
        self.old_index.names().chain(self.new_index.names())
    }
}

/// What a comparison needs of a whole snapshot besides the entries it parses: every operator's
/// qualified name and the line of its `func:` in native_functions.yaml, and the number of
/// derivative entries. The names share one buffer (no allocation per operator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpIndex {
    names: String,
    /// (start, end) of the name in `names`, and the line; sorted by name, one per name.
    ops: Vec<(u32, u32, u32)>,
    /// How many derivative entries the snapshot has.
    pub derivatives: usize,
}

impl OpIndex {
    fn of(ops: &[KeyedLine<'_>], derivatives: usize) -> OpIndex {
        let mut order: Vec<usize> = (0..ops.len()).collect();
        // stable: of a name stored twice the later line wins, as when collecting into a map
        order.sort_by(|&i, &j| ops[i].key.0.cmp(&ops[j].key.0));
        let mut names = String::with_capacity(ops.iter().map(|l| l.key.0.len()).sum());
        let mut entries: Vec<(u32, u32, u32)> = Vec::with_capacity(ops.len());
        let mut prev: Option<&str> = None;
        for i in order {
            let name: &str = &ops[i].key.0;
            if prev == Some(name) {
                entries.pop();
                names.truncate(names.len() - name.len());
            }
            let start = names.len() as u32;
            names.push_str(name);
            entries.push((start, names.len() as u32, ops[i].line));
            prev = Some(name);
        }
        OpIndex { names, ops: entries, derivatives }
    }

    fn name(&self, e: &(u32, u32, u32)) -> &str {
        self.names.get(e.0 as usize..e.1 as usize).unwrap_or("")
    }

    /// Every operator name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.ops.iter().map(|e| self.name(e))
    }

    /// The native_functions.yaml line of an operator (`None`: no such operator).
    pub fn line_of(&self, op: &str) -> Option<u32> {
        self.ops.binary_search_by(|e| self.name(e).cmp(op)).ok().map(|i| self.ops[i].2)
    }

    /// Number of operators.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// The files of one snapshot, read but not parsed.
struct SnapshotText {
    meta: SnapshotMeta,
    tags: Vec<TagDef>,
    ops_path: PathBuf,
    ops: String,
    der_path: PathBuf,
    der: String,
}

impl SnapshotText {
    /// The identity of every operator and derivative line.
    #[allow(clippy::type_complexity)]
    fn heads(&self) -> Result<(Vec<KeyedLine<'_>>, Vec<KeyedLine<'_>>)> {
        Ok((op_lines(&self.ops_path, &self.ops)?, derivative_lines(&self.der_path, &self.der)?))
    }

    /// A snapshot of the kept lines only.
    fn parse_kept(
        &self,
        ops: &[KeyedLine<'_>],
        keep_ops: &[bool],
        der: &[KeyedLine<'_>],
        keep_der: &[bool],
    ) -> Result<PytorchSnapshot> {
        let functions: Vec<NativeFunction> = parse_kept_lines(&self.ops_path, ops, keep_ops)?;
        let derivatives: Vec<Derivative> = parse_kept_lines(&self.der_path, der, keep_der)?;
        Ok(PytorchSnapshot {
            meta: self.meta.clone(),
            registry: Registry { tags: self.tags.clone(), functions },
            derivatives,
        })
    }
}

fn parse_kept_lines<T: for<'de> Deserialize<'de>>(
    path: &Path,
    lines: &[KeyedLine<'_>],
    keep: &[bool],
) -> Result<Vec<T>> {
    lines
        .iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(l, _)| {
            serde_json::from_str(l.text)
                .map_err(|e| Error::Snapshot { path: path.to_path_buf(), message: format!("line {}: {e}", l.number) })
        })
        .collect()
}

/// One stored line with its identity: the operator name (operators) or `op` and dispatch key
/// (derivatives), and the text without its `line` field.
struct KeyedLine<'t> {
    key: (Cow<'t, str>, Cow<'t, str>),
    text: &'t str,
    /// The line without the trailing `"line":N` field (the whole line when it has none).
    content: &'t str,
    /// The `line` field.
    line: u32,
    /// 1-based line number in the file, for errors.
    number: usize,
}

/// The fields that identify an operator line (the rest is skipped unparsed).
#[derive(Deserialize)]
struct OpHead<'a> {
    #[serde(borrow)]
    func: Cow<'a, str>,
    line: u32,
}

/// The fields that identify a derivative line.
#[derive(Deserialize)]
struct DerivativeHead<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(borrow)]
    dispatch_key: Cow<'a, str>,
    line: u32,
}

fn head_error(path: &Path, number: usize, e: impl std::fmt::Display) -> Error {
    Error::Snapshot { path: path.to_path_buf(), message: format!("line {number}: {e}") }
}

/// `text` without its trailing `,"line":N}` (the field the writer puts last), and N.
fn split_line_field(text: &str) -> Option<(&str, u32)> {
    let i = text.rfind(",\"line\":")?;
    let n = text[i + 8..].strip_suffix('}')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((&text[..i], n.parse().ok()?))
}

fn non_blank_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l))
}

/// A plain identifier-like JSON string value at the start of `s` (up to the closing quote): no escapes.
fn plain_str(s: &str) -> Option<(&str, &str)> {
    let end = s.find('"')?;
    let v = &s[..end];
    v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.').then(|| (v, &s[end + 1..]))
}

/// The end of a JSON string's content at the start of `s` (the index of its closing quote).
fn json_str_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Operator name and line of an operator line as the writer lays it out (`{"func":"NAME(...`,
/// ..., `"line":N}`); `None` for any other layout (then read with serde).
fn fast_op_head(l: &str) -> Option<(&str, &str, u32)> {
    let rest = l.strip_prefix("{\"func\":\"")?;
    let name = rest[..rest.find('(')?].trim_end();
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
        return None;
    }
    let (content, line) = split_line_field(l)?;
    Some((name, content, line))
}

/// `op`, dispatch key and line of a derivative line as the writer lays it out
/// (`{"op":"..","schema":"..","dispatch_key":"..",` ..., `"line":N}`).
fn fast_derivative_head(l: &str) -> Option<(&str, &str, &str, u32)> {
    let (op, rest) = plain_str(l.strip_prefix("{\"op\":\"")?)?;
    let rest = rest.strip_prefix(",\"schema\":\"")?;
    let rest = rest[json_str_end(rest)? + 1..].strip_prefix(",\"dispatch_key\":\"")?;
    let (key, _) = plain_str(rest)?;
    let (content, line) = split_line_field(l)?;
    Some((op, key, content, line))
}

fn op_lines<'t>(path: &Path, text: &'t str) -> Result<Vec<KeyedLine<'t>>> {
    let mut out = Vec::with_capacity(text.len() / 200);
    for (number, l) in non_blank_lines(text) {
        let (name, content, line) = match fast_op_head(l) {
            Some((n, c, line)) => (Cow::Borrowed(n), c, line),
            None => {
                let h: OpHead<'_> = serde_json::from_str(l).map_err(|e| head_error(path, number, e))?;
                let name = h.func.split('(').next().unwrap_or("").trim_end().to_string();
                (Cow::Owned(name), split_line_field(l).map_or(l, |(c, _)| c), h.line)
            }
        };
        // a name that parses is its own canonical text
        crate::schema::OperatorName::validate(&name).map_err(|e| head_error(path, number, format!("{name}: {e}")))?;
        out.push(KeyedLine { key: (name, Cow::Borrowed("")), text: l, content, line, number });
    }
    Ok(out)
}

fn derivative_lines<'t>(path: &Path, text: &'t str) -> Result<Vec<KeyedLine<'t>>> {
    let mut out = Vec::with_capacity(text.len() / 400);
    for (number, l) in non_blank_lines(text) {
        let (key, content, line) = match fast_derivative_head(l) {
            Some((op, k, c, line)) => ((Cow::Borrowed(op), Cow::Borrowed(k)), c, line),
            None => {
                let h: DerivativeHead<'_> = serde_json::from_str(l).map_err(|e| head_error(path, number, e))?;
                ((h.op, h.dispatch_key), split_line_field(l).map_or(l, |(c, _)| c), h.line)
            }
        };
        out.push(KeyedLine { key, text: l, content, line, number });
    }
    Ok(out)
}

/// Which lines of each side to parse: all but those whose key occurs exactly once on each side
/// with the same content. Both sides are walked in key order (the files are written sorted, so
/// the sorts below find them sorted), without hashing.
fn differing(a: &[KeyedLine<'_>], b: &[KeyedLine<'_>]) -> (Vec<bool>, Vec<bool>) {
    let (ra, rb) = (unique_in_key_order(a), unique_in_key_order(b));
    let (mut keep_a, mut keep_b) = (vec![true; a.len()], vec![true; b.len()]);
    let (mut i, mut j) = (0, 0);
    while i < ra.len() && j < rb.len() {
        let (x, y) = (&a[ra[i].0], &b[rb[j].0]);
        match key_of(x).cmp(&key_of(y)) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if ra[i].1 && rb[j].1 && x.content == y.content {
                    keep_a[ra[i].0] = false;
                    keep_b[rb[j].0] = false;
                }
                i += 1;
                j += 1;
            }
        }
    }
    (keep_a, keep_b)
}

fn key_of<'k>(l: &'k KeyedLine<'_>) -> (&'k str, &'k str) {
    (&l.key.0, &l.key.1)
}

/// One (index, key occurs once) per distinct key, in key order.
fn unique_in_key_order(ls: &[KeyedLine<'_>]) -> Vec<(usize, bool)> {
    let mut order: Vec<usize> = (0..ls.len()).collect();
    order.sort_by(|&i, &j| key_of(&ls[i]).cmp(&key_of(&ls[j])));
    let mut out: Vec<(usize, bool)> = Vec::with_capacity(order.len());
    for i in order {
        match out.last_mut() {
            Some(last) if key_of(&ls[last.0]) == key_of(&ls[i]) => last.1 = false,
            _ => out.push((i, true)),
        }
    }
    out
}

pub(crate) fn to_pretty<T: Serialize>(v: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(v).map_err(|e| Error::Internal(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// One JSON object per line.
pub fn to_jsonl<T: Serialize>(items: &[T]) -> Result<String> {
    let mut s = String::new();
    for it in items {
        s.push_str(&serde_json::to_string(it).map_err(|e| Error::Internal(e.to_string()))?);
        s.push('\n');
    }
    Ok(s)
}

fn read_file(path: &Path) -> Result<String> {
    crate::fsio::read_text(path, crate::fsio::MAX_INPUT_BYTES)
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = read_file(path)?;
    serde_json::from_str(&text).map_err(|e| Error::Snapshot {
        path: path.to_path_buf(),
        message: format!("line {} column {}: {e}", e.line(), e.column()),
    })
}

pub(crate) fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = read_file(path)?;
    parse_jsonl(path, &text, 0)
}

/// One value per non-blank line of `text`, whose first line is line `first_line + 1` of `path`.
fn parse_jsonl<'t, T: Deserialize<'t>>(path: &Path, text: &'t str, first_line: usize) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(text.bytes().filter(|&b| b == b'\n').count() + 1);
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(l).map_err(|e| Error::Snapshot {
            path: path.to_path_buf(),
            message: format!("line {}: {e}", first_line + i + 1),
        })?;
        out.push(v);
    }
    Ok(out)
}

/// Splits `text` after the line ending nearest its middle: (head, tail, lines in head).
fn split_lines_in_half(text: &str) -> (&str, &str, usize) {
    let mid = text.len() / 2;
    let cut = match text.as_bytes()[mid..].iter().position(|&b| b == b'\n') {
        Some(i) => mid + i + 1,
        None => text.len(),
    };
    let (head, tail) = text.split_at(cut);
    (head, tail, head.bytes().filter(|&b| b == b'\n').count())
}

/// The result of a scoped thread, a panic in it turned into an error (never a second panic).
fn join_scoped<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>, path: &Path) -> Result<T> {
    joined(h, path)?
}

/// The result of a scoped parser thread; a panic in it becomes an error, not a second panic.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>, path: &Path) -> Result<Result<T>> {
    h.join().map_err(|_| Error::Snapshot { path: path.to_path_buf(), message: "the parser thread panicked".into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_load_as_each_alone() {
        let st = Store::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas"));
        let vs = st.versions("pytorch");
        for w in [&vs[..2], &vs[vs.len() - 2..], &[vs[0].clone(), vs[vs.len() - 1].clone()][..]] {
            let (a, b) = st.load_pytorch_both(&w[0], &w[1]).unwrap();
            assert!(a == st.load_pytorch(&w[0]).unwrap(), "{}", w[0]);
            assert!(b == st.load_pytorch(&w[1]).unwrap(), "{} after {}", w[1], w[0]);
            // the operators only: the same snapshots without their derivative entries
            let (oa, ob) = st.load_pytorch_operators_both(&w[0], &w[1]).unwrap();
            assert!(oa.derivatives.is_empty() && ob.derivatives.is_empty());
            assert!(oa.registry == a.registry && oa.meta == a.meta, "{}", w[0]);
            assert!(ob.registry == b.registry && ob.meta == b.meta, "{} after {}", w[1], w[0]);
        }
    }

    #[test]
    fn line_field_split() {
        assert_eq!(split_line_field(r#"{"func":"a() -> Tensor","line":12}"#), Some((r#"{"func":"a() -> Tensor""#, 12)));
        assert_eq!(split_line_field(r#"{"line":12,"func":"a() -> Tensor"}"#), None);
        assert_eq!(split_line_field(r#"{"func":"a","line":}"#), None);
    }

    #[test]
    fn heads_fast_and_fallback_agree() {
        let p = Path::new("operators.jsonl");
        // the writer's layout, and the same fields in another order (read with serde)
        let text = "{\"func\":\"add.Tensor(Tensor self) -> Tensor\",\"variants\":[\"function\"],\"line\":7}\n\n\
                    {\"line\":9,\"func\":\"mul(Tensor self) -> Tensor\"}\n";
        let ls = op_lines(p, text).unwrap();
        assert_eq!(ls.len(), 2);
        assert_eq!((&*ls[0].key.0, ls[0].line, ls[0].number), ("add.Tensor", 7, 1));
        assert_eq!((&*ls[1].key.0, ls[1].line, ls[1].number), ("mul", 9, 3));
        let bad = op_lines(p, "{\"func\":\"a.default() -> Tensor\",\"line\":1}\n");
        assert!(matches!(bad, Err(Error::Snapshot { .. })));
        let d = "{\"op\":\"mul\",\"schema\":\"mul(Tensor self, str s=\\\"x\\\") -> Tensor\",\"dispatch_key\":\"Default\",\"line\":3}\n\
                 {\"dispatch_key\":\"AutogradNestedTensor\",\"op\":\"mul\",\"line\":4}\n";
        let ds = derivative_lines(Path::new("derivatives.jsonl"), d).unwrap();
        assert_eq!((&*ds[0].key.0, &*ds[0].key.1, ds[0].line), ("mul", "Default", 3));
        assert_eq!((&*ds[1].key.0, &*ds[1].key.1, ds[1].line), ("mul", "AutogradNestedTensor", 4));
    }

    #[test]
    fn differing_keeps_duplicates_and_changes() {
        let l = |k: &'static str, c: &'static str| KeyedLine {
            key: (Cow::Borrowed(k), Cow::Borrowed("")),
            text: c,
            content: c,
            line: 1,
            number: 1,
        };
        let a = [l("a", "1"), l("b", "1"), l("c", "1"), l("d", "1"), l("d", "1")];
        let b = [l("b", "1"), l("a", "1"), l("c", "2"), l("d", "1"), l("e", "1")];
        let (ka, kb) = differing(&a, &b);
        assert_eq!(ka, [false, false, true, true, true]);
        assert_eq!(kb, [false, false, true, true, true]);
    }
}
