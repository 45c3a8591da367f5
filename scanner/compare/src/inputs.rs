//! What a PyTorch drift report joins besides the two versions, assembled in one place for the CLI's
//! `diff`, the bot and `diffs/` ([`crate::committed`]): the adapter's configuration, its generated
//! files' index and custom operators ([`AdapterInputs`]), the backend yaml files given together
//! ([`BackendFiles`]), and the report over two whole snapshots ([`whole_report`]). The callers differ only in where the
//! files come from (command-line paths, `[bot]` entries of the base branch, the repository).

use std::path::{Path, PathBuf};

use crate::custom::CustomOperators;
use crate::diff::allow::AllowList;
use crate::diff::impact::{Backend, GeneratedIndex};
use crate::diff::{AdapterStates, Report, RuleSet};
use crate::error::Result;
use crate::generate::config::LoadedConfig;
use crate::snapshot::PytorchSnapshot;
use xirang_index::adapter_index::AdapterIndex;
use xirang_ir::backend::BackendYaml;
use xirang_ir::error::SourceFile;

/// The adapter a report is about, as its repository holds it.
pub struct AdapterInputs {
    /// The repository root (the folder of `xirang.toml`, when it has one).
    pub root: PathBuf,
    /// `xirang.toml`, when the repository has one that reads.
    pub config: Option<LoadedConfig>,
    /// The generated files (`[adapter] generated`, default `generated/`).
    pub generated: GeneratedIndex,
    /// The custom operators of `[operators] custom`.
    pub custom: Option<CustomOperators>,
}

impl AdapterInputs {
    /// Reads the adapter at `root`. A `xirang.toml` that does not read is an error.
    pub fn load(root: &Path) -> Result<AdapterInputs> {
        let config = crate::config_at(root)?;
        Self::with_config(root, config)
    }

    /// As [`AdapterInputs::load`], but a `xirang.toml` that does not read is left out (the report
    /// then has no coverage) and `warn` is told why.
    pub fn load_lenient(root: &Path, warn: &mut dyn FnMut(String)) -> Result<AdapterInputs> {
        Self::with_config(root, Self::config_lenient(root, warn))
    }

    /// The `xirang.toml` at `root`: `None` without one, or (told to `warn`) when it does not read.
    pub fn config_lenient(root: &Path, warn: &mut dyn FnMut(String)) -> Option<LoadedConfig> {
        match crate::config_at(root) {
            Ok(c) => c,
            Err(e) => {
                warn(format!(
                    "warning: {}: {e}; the report leaves out the adapter's coverage",
                    root.join("xirang.toml").display()
                ));
                None
            }
        }
    }

    /// The adapter at `root` with its configuration already read (`None`: none that reads).
    pub fn with_config(root: &Path, config: Option<LoadedConfig>) -> Result<AdapterInputs> {
        let generated = match &config {
            Some(c) => GeneratedIndex::load_from(root, &c.config.adapter.generated),
            None => GeneratedIndex::load(root),
        };
        let custom = CustomOperators::load(root)?;
        Ok(AdapterInputs { root: root.to_path_buf(), config, generated, custom })
    }
}

/// Backend yaml files given together, each with the path it is reported under.
#[derive(Default)]
pub struct BackendFiles {
    pub files: Vec<(String, BackendYaml)>,
}

impl BackendFiles {
    /// Parses `sources` together (a `custom:` operator of one may be listed as supported in
    /// another); every PyTorch operator they name must be one of `names` (sorted), the operators of
    /// the two versions compared (`versions` names them in messages), or it is a typo.
    pub fn parse(sources: &[SourceFile], names: &[&str], versions: &str) -> Result<BackendFiles> {
        let yamls =
            xirang_ir::backend::load_all_checked(sources, names, versions).map_err(xirang_store::Error::from)?;
        Ok(BackendFiles { files: sources.iter().map(|s| s.name().to_string()).zip(yamls).collect() })
    }

    /// Reads and parses the files at `paths` (reported under their paths as given).
    pub fn read(paths: &[PathBuf], names: &[&str], versions: &str) -> Result<BackendFiles> {
        let mut sources = Vec::with_capacity(paths.len());
        for p in paths {
            let text = crate::fsio::read_text(p, crate::fsio::MAX_INPUT_BYTES)?;
            sources.push(SourceFile::new(p.display().to_string(), text));
        }
        Self::parse(&sources, names, versions)
    }

    /// The files as the report joins them.
    pub fn backends(&self) -> Vec<Backend<'_>> {
        self.files.iter().map(|(path, yaml)| Backend { path: path.clone(), yaml }).collect()
    }
}

/// The names of the operators of two snapshots, sorted and unique (what a backend yaml may name).
pub fn operator_names(old: &PytorchSnapshot, new: &PytorchSnapshot) -> Vec<String> {
    let mut names: Vec<String> =
        old.registry.functions.iter().chain(&new.registry.functions).map(|f| f.func.name.to_string()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// `old or new`, as backend yaml errors name the versions compared.
pub fn versions_text(old: &PytorchSnapshot, new: &PytorchSnapshot) -> String {
    format!("{} or {}", old.meta.version, new.meta.version)
}

/// A report over two whole snapshots joined with the adapter: the CLI's `diff` of sources and the
/// bot build it here.
pub struct WholeDiff<'a> {
    pub old: &'a PytorchSnapshot,
    pub new: &'a PytorchSnapshot,
    pub adapter: &'a AdapterInputs,
    pub kernels: &'a AdapterIndex,
    pub backends: &'a BackendFiles,
    pub allow: Option<&'a AllowList>,
    pub today: &'a str,
    pub states: Option<&'a AdapterStates>,
}

/// Builds the report of a [`WholeDiff`]: custom operators resolved against the old version.
pub fn whole_report(d: WholeDiff<'_>, rules: &RuleSet) -> Report {
    let custom = d.adapter.custom.as_ref().map(|c| c.resolve(&d.old.registry.functions));
    let backends = d.backends.backends();
    crate::pytorch_report(
        crate::PytorchDiff {
            old: d.old,
            new: d.new,
            title: format!("pytorch {} -> {}", d.old.meta.version, d.new.meta.version),
            kernels: d.kernels,
            backends: &backends,
            generated: &d.adapter.generated,
            allow: d.allow,
            today: d.today,
            states: d.states,
            custom: custom.as_ref(),
        },
        rules,
    )
}
