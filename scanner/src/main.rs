//! `xirang-scan`: the command-line front end. See `xirang-scan --help`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use xirang_scan::error::Error;
use xirang_scan::render;
use xirang_scan::snapshot::{PytorchSnapshot, Store, Version};
use xirang_scan::source::{self, SourceSpec};

#[derive(Parser)]
#[command(
    name = "xirang-scan",
    version,
    about = "Keeps a PyTorch device adapter in step with PyTorch and with the vendor driver",
    long_about = "Scans PyTorch's operator registry (native_functions.yaml, tags.yaml, derivatives.yaml), \
vendor backend yaml and vendor driver headers into one Interface IR, keeps snapshots per upstream version \
in schemas/, and answers what changed between versions.\n\n\
Versions: `v2.1` means the newest 2.1.x in the snapshot store; `v2.1.0` is exact.\n\
Sources: a folder holding the files (or a PyTorch source tree), a torch wheel (.whl), or `REPO@REF` for a \
git ref of a PyTorch clone (read from the object database, no checkout).\n\n\
Exit codes: 0 success, 1 error (bad input, missing snapshot), 2 usage error."
)]
struct Cli {
    /// Snapshot store (default: $XIRANG_STORE, else ./schemas or a parent's, else the shipped one)
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the operators of a version or a source
    Ops {
        /// A snapshot version (v2.1, v2.1.0) or a source (folder, .whl, REPO@REF)
        target: String,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// torchgen behaviour for a source whose version is unknown (e.g. 2.5); default: from the
        /// folder name, else the newest
        #[arg(long, value_name = "VERSION")]
        torch_version: Option<String>,
    },
    /// Show one operator: schema, dispatch, tags, structured links, derivative formulas
    Show {
        /// A snapshot version or a source
        target: String,
        /// Operator as `name.overload` (or `name` for the default overload)
        op: String,
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
        #[arg(long, value_name = "VERSION")]
        torch_version: Option<String>,
    },
    /// Manage the snapshot store
    #[command(subcommand)]
    Snapshot(SnapshotCmd),
}

#[derive(Subcommand)]
enum SnapshotCmd {
    /// Import a source as a PyTorch snapshot: `snapshot import torch-2.4.0-....whl --as v2.4.0`
    Import {
        /// Folder, .whl, or REPO@REF
        source: String,
        /// The version to store it as (vX.Y.Z)
        #[arg(long = "as", value_name = "VERSION")]
        as_version: String,
    },
    /// Import every `vX.Y.Z` sub-folder of a folder of releases (e.g. ../shared/corpus/pytorch)
    Sync {
        /// Folder whose sub-folders are named by version
        folder: PathBuf,
        /// Only report what would be imported
        #[arg(long)]
        dry_run: bool,
    },
    /// List the versions in the store
    List,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Table,
    Jsonl,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ShowFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let report = miette::Report::new(e);
            eprintln!("{report:?}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Error> {
    let store_flag = cli.store.clone();
    let store = || Store::discover(store_flag.as_deref());
    match cli.command {
        Command::Ops { target, format, torch_version } => {
            let snap = load_target(&store, &target, torch_version.as_deref())?;
            let text = match format {
                Format::Jsonl => render::ops_jsonl(&snap),
                Format::Table => render::ops_table(&snap),
            };
            print_str(&text)?;
        }
        Command::Show { target, op, format, torch_version } => {
            let snap = load_target(&store, &target, torch_version.as_deref())?;
            let text = match format {
                ShowFormat::Text => render::show_text(&snap, &op)?,
                ShowFormat::Json => render::show_json(&snap, &op)?,
            };
            print_str(&text)?;
        }
        Command::Snapshot(SnapshotCmd::Import { source, as_version }) => {
            let v = Version::parse(&as_version)
                .ok_or_else(|| Error::Usage(format!("`{as_version}` is not a version like v2.4.0")))?;
            let spec = SourceSpec::parse(&source)?;
            let files = source::read(&spec)?;
            let snap = PytorchSnapshot::build(&files, &v)?;
            let st = store_for_write(store_flag.as_deref())?;
            let dir = st.write_pytorch(&snap)?;
            println!(
                "imported {} as {v}: {} operators ({} generated), {} derivative entries -> {}",
                files.origin,
                snap.meta.counts.operators,
                snap.meta.counts.generated_operators,
                snap.meta.counts.derivatives,
                dir.display()
            );
        }
        Command::Snapshot(SnapshotCmd::Sync { folder, dry_run }) => {
            let st = store_for_write(store_flag.as_deref())?;
            let mut entries: Vec<(Version, PathBuf)> = std::fs::read_dir(&folder)
                .map_err(|e| Error::io(&folder, e))?
                .flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
                .collect();
            entries.sort();
            for (v, path) in entries {
                if dry_run {
                    println!("would import {} as {v}", path.display());
                    continue;
                }
                let files = source::read(&SourceSpec::Folder(path.clone()))?;
                let snap = PytorchSnapshot::build(&files, &v)?;
                st.write_pytorch(&snap)?;
                println!(
                    "{v}: {} operators, {} derivative entries",
                    snap.meta.counts.operators, snap.meta.counts.derivatives
                );
            }
        }
        Command::Snapshot(SnapshotCmd::List) => {
            let st = store()?;
            for up in xirang_scan::snapshot::UPSTREAMS {
                let vs = st.versions(up);
                if !vs.is_empty() {
                    let names: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
                    println!("{up}: {}", names.join(" "));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn store_for_write(explicit: Option<&std::path::Path>) -> Result<Store, Error> {
    match Store::discover(explicit) {
        Ok(s) => Ok(s),
        Err(_) => Ok(Store::new("schemas")),
    }
}

/// A version in the store, or a source read and parsed on the spot.
fn load_target(
    store: &dyn Fn() -> Result<Store, Error>,
    target: &str,
    torch_version: Option<&str>,
) -> Result<PytorchSnapshot, Error> {
    let looks_like_version = Version::parse(target).is_some() && !std::path::Path::new(target).exists();
    if looks_like_version {
        let st = store()?;
        let v = st.resolve("pytorch", target)?;
        return st.load_pytorch(&v);
    }
    let spec = SourceSpec::parse(target)?;
    let v = match torch_version {
        Some(t) => Version::parse(t).ok_or_else(|| Error::Usage(format!("`{t}` is not a version")))?,
        None => guess_version(&spec).unwrap_or_else(|| Version { parts: vec![2, 15, 0], suffix: None }),
    };
    let files = source::read(&spec)?;
    PytorchSnapshot::build(&files, &v)
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

fn print_str(text: &str) -> Result<(), Error> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        // a closed pipe (`| head`) is not an error
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<stdout>", e)),
    }
}
