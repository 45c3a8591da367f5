//! Where new upstream versions come from: a PyTorch clone's release tags, a folder of releases, or the
//! package registry's JSON API for `torch` (PyPI), whose smallest wheel of a release is downloaded to
//! read the operator files.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::forge::Http;
use super::{BotError, Log};
use crate::source::{self, SourceSpec, UpstreamFiles};
use crate::version::Version;

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
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Folder(p) => write!(f, "folder {}", p.display()),
            Upstream::Git(p) => write!(f, "git clone {}", p.display()),
            Upstream::Pypi(u) => write!(f, "package index {u}"),
        }
    }
}

/// How to get one release's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    Source(SourceSpec),
    Wheel { url: String, filename: String, sha256: String },
}

/// One upstream release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: Version,
    pub fetch: Fetch,
}

/// Every release the upstream has, ascending. Pre-releases (`rc`, `dev`) are not releases.
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
        Upstream::Pypi(url) => pypi_releases(&http.get_json(log, url)?),
    };
    out.sort_by(|a, b| a.version.cmp(&b.version));
    out.dedup_by(|a, b| a.version == b.version);
    Ok(out)
}

/// `v2.4.0` / `2.4.0`: plain numeric release versions only.
fn release_version(s: &str) -> Option<Version> {
    let v = Version::parse(s)?;
    (v.suffix.is_none() && v.parts.len() >= 2).then_some(v)
}

/// Releases of a PyPI JSON document: for each non-yanked release, its smallest wheel.
pub fn pypi_releases(doc: &Value) -> Vec<Release> {
    let Some(releases) = doc.get("releases").and_then(Value::as_object) else {
        return Vec::new();
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
                let size = f.get("size").and_then(Value::as_u64).unwrap_or(u64::MAX);
                Some((size, filename.to_string(), url.to_string(), sha.to_ascii_lowercase()))
            })
            .min();
        if let Some((_, filename, url, sha256)) = best {
            out.push(Release { version: v, fetch: Fetch::Wheel { url, filename, sha256 } });
        }
    }
    out
}

impl Release {
    /// A hash of the release's source files: the sha256 of the operator files' contents (folder, git),
    /// or the registry's sha256 of the wheel (no download needed to know nothing changed).
    pub fn source_hash(&self) -> Result<String, BotError> {
        match &self.fetch {
            Fetch::Source(spec) => Ok(source::read(spec)?.content_hash()),
            Fetch::Wheel { sha256, .. } => Ok(format!("wheel-sha256:{sha256}")),
        }
    }

    /// Where the files come from, for messages (`folder:v2.4.0`, `git:v2.4.0`, `wheel:torch-...whl`).
    pub fn origin(&self) -> String {
        match &self.fetch {
            Fetch::Source(spec) => spec.to_string(),
            Fetch::Wheel { filename, .. } => format!("wheel:{filename}"),
        }
    }

    /// Reads the release's files, downloading a wheel into `tmp` first (its sha256 is verified).
    pub fn files(&self, http: &Http, log: &mut Log<'_>, tmp: &Path) -> Result<UpstreamFiles, BotError> {
        match &self.fetch {
            Fetch::Source(spec) => Ok(source::read(spec)?),
            Fetch::Wheel { url, filename, sha256 } => {
                let safe: String = filename
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+') { c } else { '_' })
                    .collect();
                let dest = tmp.join(safe);
                log.line(&format!("downloading {filename}"));
                http.download(log, url, &dest)?;
                let bytes = std::fs::read(&dest).map_err(|e| BotError::io(&dest, e))?;
                let got = crate::source::hex(&Sha256::digest(&bytes));
                if &got != sha256 {
                    return Err(BotError::Upstream(format!("{filename}: sha256 {got}, the index says {sha256}")));
                }
                let files = source::read(&SourceSpec::Wheel(dest.clone()))?;
                let _ = std::fs::remove_file(&dest);
                Ok(files)
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
        let r = pypi_releases(&doc);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].version.to_string(), "v2.4.0");
        assert_eq!(
            r[0].fetch,
            Fetch::Wheel {
                url: "http://x/a.whl".into(),
                filename: "torch-2.4.0-cp311-none-macosx_11_0_arm64.whl".into(),
                sha256: "ab".into()
            }
        );
        assert!(pypi_releases(&Value::Null).is_empty());
    }
}
