//! The subcommands of `xirang-scan`, one file each; [`Ctx`] is what they share: the snapshot store,
//! discovered once per command.

#[macro_use]
pub mod out;

pub mod coverage;
pub mod diff;
pub mod diffs;
pub mod explain;
pub mod generate;
pub mod headers;
pub mod new_op;
pub mod ops;
pub mod rules;
pub mod show;
pub mod snapshot;

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use xirang_scan::error::Error;
use xirang_scan::generate::config::LoadedConfig;
use xirang_scan::snapshot::{PytorchSnapshot, Store, Version};
use xirang_scan::source::{self, SourceSpec};

/// Output of the listing commands (`ops`, `headers`).
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Jsonl,
}

/// Output of `show` and `rules`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ShowFormat {
    Text,
    Json,
}

/// What every subcommand is given: the `--store` flag and the store it names, discovered on first
/// use and then kept (a command opens the store once).
pub struct Ctx {
    flag: Option<PathBuf>,
    store: OnceCell<Store>,
}

impl Ctx {
    pub fn new(flag: Option<PathBuf>) -> Ctx {
        Ctx { flag, store: OnceCell::new() }
    }

    /// The store: `--store`, else `$XIRANG_STORE`, else `./schemas` or a parent's, else the shipped one.
    pub fn store(&self) -> Result<&Store, Error> {
        if let Some(s) = self.store.get() {
            return Ok(s);
        }
        let s = Store::discover(self.flag.as_deref())?;
        Ok(self.store.get_or_init(|| s))
    }

    /// The store a command that works on an adapter reads: `--store`, else the one beside the
    /// adapter's `xirang.toml` (`schemas/`), else the discovered one.
    pub fn store_near(&self, cfg: &LoadedConfig) -> Result<&Store, Error> {
        if self.flag.is_none()
            && self.store.get().is_none()
            && let Ok(s) = Store::discover(Some(&cfg.path("schemas")))
        {
            return Ok(self.store.get_or_init(|| s));
        }
        self.store()
    }

    /// The store to import into: the discovered one, else a new `./schemas`.
    pub fn store_for_write(&self) -> Store {
        Store::discover(self.flag.as_deref()).unwrap_or_else(|_| Store::new("schemas"))
    }

    /// The store and the version `target` names when it is a version of the store (as
    /// [`Ctx::load_target`] reads it), else `None` (a source folder, wheel or git ref).
    pub fn store_version(&self, target: &str) -> Result<Option<(&Store, Version)>, Error> {
        if !names_a_version(target) {
            return Ok(None);
        }
        let st = self.store()?;
        let v = st.resolve("pytorch", target)?;
        Ok(Some((st, v)))
    }

    /// A version in the store, or a source read and parsed on the spot.
    pub fn load_target(&self, target: &str, torch_version: Option<&str>) -> Result<PytorchSnapshot, Error> {
        if let Some((st, v)) = self.store_version(target)? {
            return Ok(st.load_pytorch(&v)?);
        }
        let spec = SourceSpec::parse(target)?;
        let v = match torch_version {
            Some(t) => Version::parse(t).ok_or_else(|| Error::Usage(format!("`{t}` is not a version")))?,
            None => guess_version(&spec).unwrap_or_else(|| Version { parts: vec![2, 15, 0], suffix: None }),
        };
        let files = source::read(&spec)?;
        Ok(PytorchSnapshot::build(&files, &v)?)
    }
}

/// Whether `target` is a version (`v2.1`, `v2.1.0`) rather than a path that exists.
pub fn names_a_version(target: &str) -> bool {
    Version::parse(target).is_some() && !Path::new(target).exists()
}

/// A version from a folder name (`.../v2.4.0`), a wheel name (`torch-2.4.0-...`) or a ref (`v2.4.0`).
fn guess_version(spec: &SourceSpec) -> Option<Version> {
    match spec {
        SourceSpec::Folder(p) => p.file_name().and_then(|n| Version::parse(&n.to_string_lossy())),
        SourceSpec::Wheel(p) => {
            let name = p.file_name()?.to_string_lossy().to_string();
            name.split('-').nth(1).and_then(|v| Version::parse(v.split('+').next().unwrap_or(v)))
        }
        SourceSpec::Git { reference, .. } => Version::parse(reference.trim_start_matches("refs/tags/")),
    }
}

/// The version a folder is named by (`.../v2.15.0`), else `v0`.
pub fn folder_version(p: &Path) -> Version {
    Version::parse(&p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default())
        .unwrap_or(Version { parts: vec![0], suffix: None })
}

/// The adapter configuration: `--config FILE`, else `xirang.toml` in the current folder or a parent.
pub fn load_config(config: Option<&Path>) -> Result<LoadedConfig, Error> {
    Ok(match config {
        Some(p) => LoadedConfig::load(p)?,
        None => LoadedConfig::discover(&std::env::current_dir().map_err(|e| Error::io(".", e))?)?,
    })
}

/// Prints a command's output.
pub fn print_str(text: &str) {
    out::write(text);
}
