//! `xirang-scan snapshot`: import, sync and list the snapshot store.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use xirang_scan::error::Error;
use xirang_scan::snapshot::{PytorchSnapshot, Version};
use xirang_scan::source::{self, SourceSpec};

use super::Ctx;

#[derive(Subcommand)]
pub enum Cmd {
    /// Import a source as a PyTorch snapshot: `snapshot import torch-2.4.0-....whl --as v2.4.0`
    Import {
        /// Folder, .whl, or REPO@REF
        source: String,
        /// The version to store it as: a full vX.Y.Z (optionally with a suffix such as .post1)
        #[arg(long = "as", value_name = "VERSION")]
        as_version: String,
        /// Replace a snapshot of that version that holds other content
        #[arg(long)]
        force: bool,
    },
    /// Import every `vX.Y.Z` sub-folder of a folder of releases (e.g. ../shared/corpus/pytorch,
    /// or ../shared/corpus/cuda with --upstream cuda)
    Sync {
        /// Folder whose sub-folders are named by version
        folder: PathBuf,
        /// What the releases are: pytorch operator files, ascend / cuda driver headers, or
        /// pytorch-cxx (PyTorch's C++ extension headers: ../shared/corpus/pytorch-cxx, or folders of
        /// wheels' torch/include or source trees named by version)
        #[arg(long, default_value = "pytorch", value_parser = ["pytorch", "ascend", "cuda", "pytorch-cxx"])]
        upstream: String,
        /// Only report what would be imported
        #[arg(long)]
        dry_run: bool,
    },
    /// List the versions in the store
    List,
}

pub fn run(ctx: &Ctx, cmd: Cmd) -> Result<(), Error> {
    match cmd {
        Cmd::Import { source, as_version, force } => import(ctx, &source, &as_version, force),
        Cmd::Sync { folder, upstream, dry_run } => match upstream.as_str() {
            "pytorch-cxx" => sync_cxx(ctx, &folder, dry_run),
            "pytorch" => sync_pytorch(ctx, &folder, dry_run),
            _ => sync_headers(ctx, &folder, &upstream, dry_run),
        },
        Cmd::List => {
            let st = ctx.store()?;
            for up in xirang_scan::snapshot::UPSTREAMS {
                let vs = st.versions(up);
                if !vs.is_empty() {
                    let names: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
                    say!("{up}: {}", names.join(" "));
                }
            }
            Ok(())
        }
    }
}

fn import(ctx: &Ctx, source: &str, as_version: &str, force: bool) -> Result<(), Error> {
    let v = exact_version(as_version)?;
    let spec = SourceSpec::parse(source)?;
    let files = source::read(&spec)?;
    files.require_complete(&v)?;
    let snap = PytorchSnapshot::build(&files, &v)?;
    let st = ctx.store_for_write();
    if !force && let Some(dir) = st.pytorch_differs(&snap)? {
        return Err(Error::Usage(format!(
            "{} already holds a different snapshot of {v}; pass --force to replace it",
            dir.display()
        )));
    }
    let dir = st.write_pytorch(&snap)?;
    say!(
        "imported {} as {v}: {} operators ({} generated), {} derivative entries -> {}",
        files.origin,
        snap.meta.counts.operators,
        snap.meta.counts.generated_operators,
        snap.meta.counts.derivatives,
        dir.display()
    );
    Ok(())
}

fn sync_cxx(ctx: &Ctx, folder: &Path, dry_run: bool) -> Result<(), Error> {
    let st = ctx.store_for_write();
    let entries = release_folders(folder)?;
    if entries.is_empty() {
        return Err(xirang_store::Error::SourceNotFound(format!(
            "{} has no sub-folder named by a version (v2.15.0, ...)",
            folder.display()
        ))
        .into());
    }
    for (v, path) in entries {
        if dry_run {
            say!("would import {} as pytorch-cxx {v}", path.display());
            continue;
        }
        let snap = xirang_scan::cxx_snapshot::CxxSnapshot::scan(&path, &v)?;
        st.write_cxx(&snap)?;
        let c = &snap.meta.counts;
        let n = |k: &str| c.get(k).copied().unwrap_or(0);
        say!(
            "pytorch-cxx {v}: {} files, {} classes, {} members ({} virtual, {} pure), {} registration macros, \
             {} registration functions, {} autocast entries, {} parse warnings",
            n("files"),
            n("classes"),
            n("members"),
            n("virtual"),
            n("pure"),
            n("macros"),
            n("functions"),
            n("autocast"),
            n("diagnostics")
        );
    }
    Ok(())
}

fn sync_headers(ctx: &Ctx, folder: &Path, upstream: &str, dry_run: bool) -> Result<(), Error> {
    let st = ctx.store_for_write();
    for (v, path) in release_folders(folder)? {
        if dry_run {
            say!("would import {} as {upstream} {v}", path.display());
            continue;
        }
        let snap = xirang_scan::snapshot::HeaderSnapshot::scan(upstream, &path, &v)?;
        st.write_headers(&snap)?;
        let c = &snap.meta.counts;
        say!(
            "{upstream} {v}: {} files, {} functions, {} enumerators",
            c.get("files").copied().unwrap_or(0),
            c.get("function").copied().unwrap_or(0),
            c.get("enumerator").copied().unwrap_or(0)
        );
    }
    Ok(())
}

fn sync_pytorch(ctx: &Ctx, folder: &Path, dry_run: bool) -> Result<(), Error> {
    let st = ctx.store_for_write();
    for (v, path) in release_folders(folder)? {
        if dry_run {
            say!("would import {} as {v}", path.display());
            continue;
        }
        let files = source::read(&SourceSpec::Folder(path.clone()))?;
        files.require_complete(&v)?;
        let snap = PytorchSnapshot::build(&files, &v)?;
        st.write_pytorch(&snap)?;
        say!("{v}: {} operators, {} derivative entries", snap.meta.counts.operators, snap.meta.counts.derivatives);
    }
    Ok(())
}

/// A version to store a snapshot as: three numeric parts at least (`v2.3` would be ambiguous with
/// the `v2.3` that selects the newest 2.3.x).
fn exact_version(s: &str) -> Result<Version, Error> {
    match Version::parse(s) {
        Some(v) if v.parts.len() >= 3 => Ok(v),
        Some(_) => Err(Error::Usage(format!(
            "`{s}` is not a full version: store a snapshot as vX.Y.Z (e.g. v2.3.1), since `{s}` selects the newest match"
        ))),
        None => Err(Error::Usage(format!("`{s}` is not a version like v2.4.0"))),
    }
}

/// The `vX.Y.Z` sub-folders of a folder of releases, by version.
fn release_folders(folder: &Path) -> Result<Vec<(Version, PathBuf)>, Error> {
    let mut entries: Vec<(Version, PathBuf)> = std::fs::read_dir(folder)
        .map_err(|e| Error::io(folder, e))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .collect();
    entries.sort();
    Ok(entries)
}
