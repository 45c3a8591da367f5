//! Where upstream files come from: a folder, a torch wheel, or a git ref of a PyTorch clone.
//!
//! All three give the same [`UpstreamFiles`]: `native_functions.yaml`, `tags.yaml` and (from
//! 2.1 on) `derivatives.yaml`, with a content hash that snapshots record as provenance.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result, SourceFile};

/// Paths of the files inside a torch wheel.
pub const WHEEL_PATHS: [(&str, &str); 3] = [
    ("native_functions.yaml", "torchgen/packaged/ATen/native/native_functions.yaml"),
    ("tags.yaml", "torchgen/packaged/ATen/native/tags.yaml"),
    ("derivatives.yaml", "torchgen/packaged/autograd/derivatives.yaml"),
];

/// Paths of the files inside a PyTorch source tree (and so in a git ref).
pub const TREE_PATHS: [(&str, &str); 3] = [
    ("native_functions.yaml", "aten/src/ATen/native/native_functions.yaml"),
    ("tags.yaml", "aten/src/ATen/native/tags.yaml"),
    ("derivatives.yaml", "tools/autograd/derivatives.yaml"),
];

/// Where a set of upstream files was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A folder with the three files side by side, or a PyTorch source tree.
    Folder(PathBuf),
    /// A torch wheel (`.whl`, a zip).
    Wheel(PathBuf),
    /// A git ref of a PyTorch clone, read from the object database without a checkout.
    Git { repo: PathBuf, reference: String },
}

impl SourceSpec {
    /// Interprets a command-line source: `path/to/folder`, `torch-....whl`, or `repo@ref`
    /// (`git:repo@ref` also accepted).
    pub fn parse(s: &str) -> Result<SourceSpec> {
        let s_trim = s.strip_prefix("git:").unwrap_or(s);
        let explicit_git = s.starts_with("git:");
        if let Some((repo, reference)) = s_trim.rsplit_once('@')
            && (explicit_git || Path::new(repo).join(".git").exists() || Path::new(repo).join("HEAD").is_file())
            && !reference.is_empty()
        {
            return Ok(SourceSpec::Git { repo: PathBuf::from(repo), reference: reference.to_string() });
        }
        let p = PathBuf::from(s);
        if p.extension().is_some_and(|e| e == "whl" || e == "zip") {
            if !crate::fsio::exists_any(&p) {
                return Err(Error::SourceNotFound(format!("wheel {} does not exist", p.display())));
            }
            return Ok(SourceSpec::Wheel(p));
        }
        if p.is_dir() {
            return Ok(SourceSpec::Folder(p));
        }
        Err(Error::SourceNotFound(format!(
            "`{s}` is not a snapshot version, a folder, a .whl file, or a git `repo@ref`"
        )))
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // only the folder's own name: provenance must not depend on where the checkout lives
            SourceSpec::Folder(p) => {
                write!(f, "folder:{}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
            }
            SourceSpec::Wheel(p) => {
                write!(f, "wheel:{}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
            }
            SourceSpec::Git { repo: _, reference } => write!(f, "git:{reference}"),
        }
    }
}

/// The upstream operator files of one PyTorch version.
#[derive(Debug, Clone)]
pub struct UpstreamFiles {
    pub origin: String,
    pub native_functions: SourceFile,
    pub tags: SourceFile,
    pub derivatives: Option<SourceFile>,
}

impl UpstreamFiles {
    /// sha256 over the files' contents (name, length, bytes), hex.
    pub fn content_hash(&self) -> String {
        let mut h = Sha256::new();
        let mut add = |name: &str, text: &str| {
            h.update(name.as_bytes());
            h.update((text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        };
        add("native_functions.yaml", self.native_functions.text());
        add("tags.yaml", self.tags.text());
        if let Some(d) = &self.derivatives {
            add("derivatives.yaml", d.text());
        }
        hex(&h.finalize())
    }
}

/// Lower-case hex of `bytes` (content hashes in snapshots, bot keys and downloads).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_text(path: &Path) -> Result<String> {
    crate::fsio::read_text(path, crate::fsio::MAX_INPUT_BYTES)
}

/// The first releases whose wheels ship `derivatives.yaml` (2.0.x ships no autograd files).
pub fn ships_derivatives(v: &crate::version::Version) -> bool {
    v.major_minor() >= (2, 1)
}

impl UpstreamFiles {
    /// Refuses a source of a release that ships `derivatives.yaml` but lacks it: its snapshot would
    /// silently report every derivative entry as gone.
    pub fn require_complete(&self, v: &crate::version::Version) -> Result<()> {
        if self.derivatives.is_none() && ships_derivatives(v) {
            return Err(Error::SourceNotFound(format!(
                "{}: no derivatives.yaml; PyTorch {v} ships one (every release since 2.1 does), and a snapshot \
                 without it would report all derivative entries as removed",
                self.origin
            )));
        }
        Ok(())
    }
}

/// Reads the upstream files from a source.
pub fn read(spec: &SourceSpec) -> Result<UpstreamFiles> {
    match spec {
        SourceSpec::Folder(dir) => read_folder(dir),
        SourceSpec::Wheel(path) => read_wheel(path),
        SourceSpec::Git { repo, reference } => read_git(repo, reference),
    }
}

fn read_folder(dir: &Path) -> Result<UpstreamFiles> {
    // a flat folder (corpus layout) or a PyTorch source tree; a name that exists in any form (a
    // FIFO, a folder, a link loop) is read, so that the error says what it is
    let flat = crate::fsio::exists_any(&dir.join("native_functions.yaml"));
    let path_of = |i: usize| -> PathBuf { if flat { dir.join(TREE_PATHS[i].0) } else { dir.join(TREE_PATHS[i].1) } };
    let nf = path_of(0);
    if !crate::fsio::exists_any(&nf) {
        return Err(Error::SourceNotFound(format!(
            "{}: no native_functions.yaml (looked for {} and {})",
            dir.display(),
            dir.join(TREE_PATHS[0].0).display(),
            dir.join(TREE_PATHS[0].1).display()
        )));
    }
    let load = |p: PathBuf| -> Result<SourceFile> { Ok(SourceFile::new(p.display().to_string(), read_text(&p)?)) };
    let tags_path = path_of(1);
    let deriv_path = path_of(2);
    Ok(UpstreamFiles {
        origin: SourceSpec::Folder(dir.to_path_buf()).to_string(),
        native_functions: load(nf)?,
        tags: if crate::fsio::exists_any(&tags_path) { load(tags_path)? } else { SourceFile::new("tags.yaml", "") },
        derivatives: if crate::fsio::exists_any(&deriv_path) { Some(load(deriv_path)?) } else { None },
    })
}

fn read_wheel(path: &Path) -> Result<UpstreamFiles> {
    // a FIFO would block on open; a wheel is read lazily, so any size is fine
    crate::fsio::check_regular(path, u64::MAX)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| Error::Archive { context: path.display().to_string(), message: e.to_string() })?;
    let mut get = |inner: &str| -> Result<Option<SourceFile>> {
        let mut entry = match zip.by_name(inner) {
            Ok(e) => e,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => {
                return Err(Error::Archive { context: format!("{}:{inner}", path.display()), message: e.to_string() });
            }
        };
        let archive = |message: String| Error::Archive { context: format!("{}:{inner}", path.display()), message };
        // the entry's declared size is checked first; the read is capped as well (a lying header)
        if entry.size() > crate::fsio::MAX_INPUT_BYTES {
            return Err(archive(format!(
                "unpacks to {} bytes, more than the {} bytes this tool reads",
                entry.size(),
                crate::fsio::MAX_INPUT_BYTES
            )));
        }
        let bytes =
            crate::fsio::read_limited(&mut entry, crate::fsio::MAX_INPUT_BYTES, "the entry").map_err(archive)?;
        let text = String::from_utf8(bytes).map_err(|_| archive("not valid UTF-8".into()))?;
        Ok(Some(SourceFile::new(inner.to_string(), text)))
    };
    let nf = get(WHEEL_PATHS[0].1)?
        .ok_or_else(|| Error::SourceNotFound(format!("{}: no {} in the wheel", path.display(), WHEEL_PATHS[0].1)))?;
    let tags = get(WHEEL_PATHS[1].1)?.unwrap_or_else(|| SourceFile::new("tags.yaml", ""));
    let derivatives = get(WHEEL_PATHS[2].1)?;
    Ok(UpstreamFiles {
        origin: SourceSpec::Wheel(path.to_path_buf()).to_string(),
        native_functions: nf,
        tags,
        derivatives,
    })
}

fn read_git(repo_path: &Path, reference: &str) -> Result<UpstreamFiles> {
    let repo = git2::Repository::open(repo_path)
        .map_err(|e| Error::Git(format!("{}: {}", repo_path.display(), e.message())))?;
    let obj = repo
        .revparse_single(reference)
        .map_err(|e| Error::Git(format!("{}: cannot resolve `{reference}`: {}", repo_path.display(), e.message())))?;
    let tree = obj.peel_to_tree().map_err(|e| Error::Git(format!("`{reference}` has no tree: {}", e.message())))?;
    let get = |inner: &str| -> Result<Option<SourceFile>> {
        let entry = match tree.get_path(Path::new(inner)) {
            Ok(e) => e,
            Err(_) => return Ok(None),
        };
        let blob = entry
            .to_object(&repo)
            .and_then(|o| o.peel_to_blob())
            .map_err(|e| Error::Git(format!("{reference}:{inner}: {}", e.message())))?;
        if blob.size() as u64 > crate::fsio::MAX_INPUT_BYTES {
            return Err(Error::Git(format!(
                "{reference}:{inner}: {} bytes, more than the {} bytes this tool reads",
                blob.size(),
                crate::fsio::MAX_INPUT_BYTES
            )));
        }
        let text = String::from_utf8(blob.content().to_vec())
            .map_err(|_| Error::Utf8 { path: PathBuf::from(format!("{reference}:{inner}")) })?;
        Ok(Some(SourceFile::new(format!("{reference}:{inner}"), text)))
    };
    let nf = get(TREE_PATHS[0].1)?
        .ok_or_else(|| Error::SourceNotFound(format!("{reference}: no {} in the tree", TREE_PATHS[0].1)))?;
    let tags = get(TREE_PATHS[1].1)?.unwrap_or_else(|| SourceFile::new("tags.yaml", ""));
    let derivatives = get(TREE_PATHS[2].1)?;
    Ok(UpstreamFiles {
        origin: SourceSpec::Git { repo: repo_path.to_path_buf(), reference: reference.to_string() }.to_string(),
        native_functions: nf,
        tags,
        derivatives,
    })
}

/// Tags of a git repository that look like PyTorch release tags (`v2.4.0`), sorted by version.
pub fn git_release_tags(repo_path: &Path) -> Result<Vec<String>> {
    let repo = git2::Repository::open(repo_path)
        .map_err(|e| Error::Git(format!("{}: {}", repo_path.display(), e.message())))?;
    let names = repo.tag_names(Some("v*")).map_err(|e| Error::Git(e.message().to_string()))?;
    let mut tags: Vec<String> = (0..names.len())
        .filter_map(|i| names.get(i).ok().flatten())
        .filter(|t| crate::version::Version::parse(t).is_some())
        .map(|t| t.to_string())
        .collect();
    tags.sort_by_key(|t| crate::version::Version::parse(t));
    Ok(tags)
}
