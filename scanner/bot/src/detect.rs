//! Where new upstream versions come from: a PyTorch clone's release tags, a folder of releases, or the
//! package registry's JSON API for `torch` (PyPI), whose smallest wheel of a release is downloaded to
//! read the operator files.

use std::path::{Path, PathBuf};

use super::forge::Http;
use super::{BotError, Log};
use crate::source::{self, SourceSpec, UpstreamFiles};
use crate::version::Version;
use serde_json::Value;

/// PyPI's JSON API for torch.
pub const PYPI_TORCH_URL: &str = "https://pypi.org/pypi/torch/json";

/// Where to look for upstream releases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A folder whose `vX.Y.Z` sub-folders each hold a release's files.
    Folder(PathBuf),
    /// A PyTorch clone: its `vX.Y.Z` tags, read from the object database.
    Git(PathBuf),
    /// A PyPI-style JSON API (`https://pypi.org/pypi/torch/json`).
    Pypi(String),
    /// A folder whose `vX.Y.Z[.postN]` sub-folders each hold a release of a vendor's driver headers
    /// (`ascend`: the release folder with its `acl/`; `cuda`: the include folder).
    Headers { vendor: String, dir: PathBuf },
}

/// What the bot keeps in step: PyTorch's operators, or a vendor's driver headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Track {
    Pytorch,
    Headers(String),
}

impl Track {
    /// The store's folder of this upstream (`pytorch`, `ascend`, `cuda`).
    pub fn upstream(&self) -> &str {
        match self {
            Track::Pytorch => "pytorch",
            Track::Headers(v) => v,
        }
    }

    /// The bot branch's name part before the version (`pytorch`, `ascend-headers`).
    pub fn slug(&self) -> String {
        match self {
            Track::Pytorch => "pytorch".into(),
            Track::Headers(v) => format!("{v}-headers"),
        }
    }

    /// How titles and messages name it (`PyTorch`, `ascend headers`).
    pub fn what(&self) -> String {
        match self {
            Track::Pytorch => "PyTorch".into(),
            Track::Headers(v) => format!("{v} headers"),
        }
    }
}

impl Upstream {
    pub fn track(&self) -> Track {
        match self {
            Upstream::Headers { vendor, .. } => Track::Headers(vendor.clone()),
            _ => Track::Pytorch,
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Folder(p) => write!(f, "folder {}", p.display()),
            Upstream::Git(p) => write!(f, "git clone {}", p.display()),
            Upstream::Pypi(u) => write!(f, "package index {u}"),
            Upstream::Headers { vendor, dir } => write!(f, "{vendor} header folder {}", dir.display()),
        }
    }
}

/// How to get one release's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    Source(SourceSpec),
    /// `size`: the index's size of the file in bytes (the download is cut off beyond it).
    Wheel {
        url: String,
        filename: String,
        sha256: String,
        size: Option<u64>,
    },
    /// A release folder of a vendor's driver headers.
    Headers {
        vendor: String,
        dir: PathBuf,
    },
}

/// What a release brings: its operator files, and its C++ extension headers when found
/// (`(include-relative path, text)`).
pub struct ReleaseFiles {
    pub files: UpstreamFiles,
    pub cxx: Option<Vec<(String, String)>>,
}

/// One upstream release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: Version,
    pub fetch: Fetch,
}

/// Every release the upstream has, ascending. Pre-releases (`rc`, `dev`) are not releases. An upstream
/// without any release is an error (a wrong folder, a clone without tags, an index that answered
/// something else): it must not read as "nothing new".
pub fn releases(up: &Upstream, http: &Http, log: &mut Log<'_>) -> Result<Vec<Release>, BotError> {
    let mut out = match up {
        Upstream::Folder(dir) => {
            let rd = std::fs::read_dir(dir).map_err(|e| BotError::io(dir, e))?;
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let v = release_version(&e.file_name().to_string_lossy())?;
                    Some(Release { version: v, fetch: Fetch::Source(SourceSpec::Folder(e.path())) })
                })
                .collect::<Vec<_>>()
        }
        Upstream::Git(repo) => source::git_release_tags(repo)?
            .into_iter()
            .filter_map(|t| {
                let v = release_version(&t)?;
                Some(Release { version: v, fetch: Fetch::Source(SourceSpec::Git { repo: repo.clone(), reference: t }) })
            })
            .collect(),
        Upstream::Headers { vendor, dir } => {
            let rd = std::fs::read_dir(dir).map_err(|e| BotError::io(dir, e))?;
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let v = header_release_version(&e.file_name().to_string_lossy())?;
                    Some(Release { version: v, fetch: Fetch::Headers { vendor: vendor.clone(), dir: e.path() } })
                })
                .collect::<Vec<_>>()
        }
        Upstream::Pypi(url) => pypi_releases(&http.get_json(log, url)?).map_err(|e| match e {
            BotError::Upstream(m) => BotError::Upstream(format!("{url}: {m}")),
            e => e,
        })?,
    };
    out.sort_by(|a, b| a.version.cmp(&b.version));
    out.dedup_by(|a, b| a.version == b.version);
    if out.is_empty() {
        return Err(BotError::Upstream(match up {
            Upstream::Pypi(url) => format!("{url}: the package index lists no release of torch with a wheel"),
            _ => format!("{up}: no release (vX.Y.Z) found"),
        }));
    }
    Ok(out)
}

/// `v2.4.0` / `2.4.0`: plain numeric release versions only.
fn release_version(s: &str) -> Option<Version> {
    let v = Version::parse(s)?;
    (v.suffix.is_none() && v.parts.len() >= 2).then_some(v)
}

/// A driver header release: `v2.14.0`, `v12.4.127`, and the post-releases vendors publish
/// (`v2.3.1.post6`); not pre-releases.
fn header_release_version(s: &str) -> Option<Version> {
    let v = Version::parse(s)?;
    let release = match &v.suffix {
        None => true,
        Some((word, _)) => word == "post",
    };
    (release && v.parts.len() >= 2).then_some(v)
}

/// The most files a header release folder may hold (hashed for the idempotency key).
const MAX_TREE_FILES: usize = 100_000;

/// sha256 over every regular file under `dir` (relative path, length, bytes), in path order; folders
/// nested at most 32 deep.
fn hash_tree(dir: &Path) -> Result<String, BotError> {
    use sha2::Digest;
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| BotError::io(&d, e))?.flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::metadata(&p) else { continue };
            if meta.is_dir() && depth < 32 {
                stack.push((p, depth + 1));
            } else if meta.is_file() {
                files.push(p);
                if files.len() > MAX_TREE_FILES {
                    return Err(BotError::Upstream(format!("{}: more than {MAX_TREE_FILES} files", dir.display())));
                }
            }
        }
    }
    files.sort();
    let mut h = sha2::Sha256::new();
    for p in files {
        let bytes = crate::fsio::read_bytes(&p, crate::fsio::MAX_INPUT_BYTES)?;
        let rel = p.strip_prefix(dir).unwrap_or(&p).to_string_lossy().replace('\\', "/");
        h.update(rel.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(format!("tree-sha256:{}", crate::source::hex(&h.finalize())))
}

/// Releases of a PyPI JSON API document (`{"info": {...}, "releases": {"2.4.0": [files], ...}}`): for
/// each non-yanked release, its smallest wheel. Anything else (an error message served with status 200,
/// a rate-limit notice, an HTML page turned JSON) is an error, not an empty list.
pub fn pypi_releases(doc: &Value) -> Result<Vec<Release>, BotError> {
    let shape = |what: &str| {
        let mut seen = doc.to_string();
        if seen.len() > 200 {
            let mut cut = 200;
            while !seen.is_char_boundary(cut) {
                cut -= 1;
            }
            seen.truncate(cut);
            seen.push('…');
        }
        BotError::Upstream(format!(
            "the answer is not a PyPI JSON API document (a JSON object with `info` and `releases` objects): \
             {what}; it was: {seen}"
        ))
    };
    let Some(obj) = doc.as_object() else { return Err(shape("not a JSON object")) };
    if !obj.get("info").is_some_and(Value::is_object) {
        return Err(shape("no `info` object"));
    }
    let Some(releases) = obj.get("releases").and_then(Value::as_object) else {
        return Err(shape("no `releases` object"));
    };
    let mut out = Vec::new();
    for (name, files) in releases {
        let Some(v) = release_version(name) else { continue };
        let Some(files) = files.as_array() else { continue };
        let best = files
            .iter()
            .filter(|f| !f.get("yanked").and_then(Value::as_bool).unwrap_or(false))
            .filter_map(|f| {
                let filename = f.get("filename")?.as_str()?;
                if !filename.ends_with(".whl") {
                    return None;
                }
                let url = f.get("url")?.as_str()?;
                let sha = f.get("digests")?.get("sha256")?.as_str()?;
                let size = f.get("size").and_then(Value::as_u64);
                Some((size.unwrap_or(u64::MAX), size, filename.to_string(), url.to_string(), sha.to_ascii_lowercase()))
            })
            .min();
        if let Some((_, size, filename, url, sha256)) = best {
            out.push(Release { version: v, fetch: Fetch::Wheel { url, filename, sha256, size } });
        }
    }
    Ok(out)
}

impl Release {
    /// A hash of the release's source files: the sha256 of the operator files' contents (folder, git),
    /// or the registry's sha256 of the wheel (no download needed to know nothing changed).
    pub fn source_hash(&self) -> Result<String, BotError> {
        match &self.fetch {
            Fetch::Source(spec) => Ok(source::read(spec)?.content_hash()),
            Fetch::Wheel { sha256, .. } => Ok(format!("wheel-sha256:{sha256}")),
            // the files as they are, not parsed: the import parses them once, when there is work
            Fetch::Headers { dir, .. } => hash_tree(dir),
        }
    }

    /// Where the files come from, for messages (`folder:v2.4.0`, `git:v2.4.0`, `wheel:torch-...whl`).
    pub fn origin(&self) -> String {
        match &self.fetch {
            Fetch::Source(spec) => spec.to_string(),
            Fetch::Wheel { filename, .. } => format!("wheel:{filename}"),
            Fetch::Headers { dir, .. } => {
                format!("folder:{}", dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
            }
        }
    }

    /// Reads the release's files, downloading a wheel into `tmp` first (its sha256 is verified), with
    /// the C++ extension headers the release ships when they can be found: a wheel's
    /// `torch/include/`, a source tree's headers, or the corpus' `pytorch-cxx/<version>` beside a
    /// `pytorch/<version>` folder.
    pub fn files(&self, http: &Http, log: &mut Log<'_>, tmp: &Path) -> Result<ReleaseFiles, BotError> {
        match &self.fetch {
            Fetch::Headers { dir, .. } => {
                Err(BotError::Upstream(format!("{}: a header release holds no PyTorch operator files", dir.display())))
            }
            Fetch::Source(spec) => {
                let files = source::read(spec)?;
                let cxx = match spec {
                    SourceSpec::Folder(dir) => {
                        let sibling = dir
                            .parent()
                            .and_then(Path::parent)
                            .zip(dir.file_name())
                            .map(|(up, name)| up.join("pytorch-cxx").join(name));
                        [Some(dir.clone()), sibling]
                            .into_iter()
                            .flatten()
                            .find(|d| xirang_cxx::Layout::find(d).is_ok())
                            .map(|d| crate::cxx_snapshot::folder_sources(&d))
                            .transpose()?
                    }
                    _ => None,
                };
                Ok(ReleaseFiles { files, cxx })
            }
            Fetch::Wheel { url, filename, sha256, size } => {
                let safe: String = filename
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+') { c } else { '_' })
                    .collect();
                // never `.` or `..`: the file stays in `tmp`
                let dest = tmp.join(format!("download-{safe}"));
                log.line(&format!("downloading {filename}"));
                // streamed to disk, hashed on the way, cut off beyond the index's size
                let got = http.download(log, url, &dest, *size)?;
                if &got != sha256 {
                    return Err(BotError::Upstream(format!("{filename}: sha256 {got}, the index says {sha256}")));
                }
                let files = source::read(&SourceSpec::Wheel(dest.clone()))?;
                let cxx = crate::cxx_snapshot::wheel_sources(&dest)?;
                let _ = std::fs::remove_file(&dest);
                Ok(ReleaseFiles { files, cxx: (!cxx.is_empty()).then_some(cxx) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pypi_document() {
        let doc: Value = serde_json::from_str(
            r#"{"info": {}, "releases": {
                "2.4.0": [{"filename": "torch-2.4.0-cp311-none-macosx_11_0_arm64.whl", "url": "http://x/a.whl",
                           "digests": {"sha256": "AB"}, "size": 10, "yanked": false},
                          {"filename": "torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl", "url": "http://x/b.whl",
                           "digests": {"sha256": "cd"}, "size": 99}],
                "2.5.0rc1": [{"filename": "torch-2.5.0rc1-x.whl", "url": "u", "digests": {"sha256": "e"}, "size": 1}],
                "2.3.0": [{"filename": "torch-2.3.0.tar.gz", "url": "u", "digests": {"sha256": "e"}, "size": 1}],
                "2.2.0": [{"filename": "torch-2.2.0-x.whl", "url": "u", "digests": {"sha256": "e"}, "size": 1,
                           "yanked": true}],
                "garbage": 3 }}"#,
        )
        .unwrap();
        let r = pypi_releases(&doc).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].version.to_string(), "v2.4.0");
        assert_eq!(
            r[0].fetch,
            Fetch::Wheel {
                url: "http://x/a.whl".into(),
                filename: "torch-2.4.0-cp311-none-macosx_11_0_arm64.whl".into(),
                sha256: "ab".into(),
                size: Some(10),
            }
        );
        for bad in [r#"null"#, r#"{"message": "rate limited"}"#, r#"{"info": {}}"#, r#"{"releases": {}}"#, "[]"] {
            let doc: Value = serde_json::from_str(bad).unwrap();
            let err = pypi_releases(&doc).unwrap_err().to_string();
            assert!(err.contains("not a PyPI JSON API document"), "{bad}: {err}");
        }
    }
}
