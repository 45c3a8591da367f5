//! `xirang-scan diff`: load two versions, compare, join with the adapter, render, exit code.
//!
//! What a PyTorch report joins besides the versions (configuration, generated files, custom
//! operators, backend yaml) is assembled by `xirang_compare::inputs`, as for the bot and `diffs/`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;
use xirang_scan::compare::{AdapterInputs, BackendFiles, inputs};
use xirang_scan::diff;
use xirang_scan::error::Error;
use xirang_scan::snapshot::{PytorchSnapshot, Store, Version};

use super::{Ctx, folder_version, print_str};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DiffFormat {
    Terminal,
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FailOn {
    Breaking,
    Action,
    Info,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(clap::Args)]
pub struct Args {
    /// Old version (v2.1, v2.1.0) or source
    old: String,
    /// New version or source
    new: String,
    #[arg(long, value_enum, default_value_t = DiffFormat::Terminal)]
    format: DiffFormat,
    /// What to compare: PyTorch snapshots, ascend / cuda driver header snapshots, or pytorch-cxx
    /// (PyTorch's C++ extension interface: classes, virtuals, registration macros, autocast
    /// lists) (alias: --vendor)
    #[arg(long, visible_alias = "vendor", default_value = "pytorch", value_parser = ["pytorch", "ascend", "cuda", "pytorch-cxx"])]
    upstream: String,
    /// Vendor backend yaml (gen_backend_stubs / torch_npu format) to join; repeatable. The files given
    /// go together: an entry of one that another declares under `custom:` is the backend's own
    /// operator (torch_npu's `npu_native_functions.yaml` with `npu_native_functions_by_codegen.yaml`)
    #[arg(long, value_name = "FILE")]
    backend: Vec<PathBuf>,
    /// Allow list (json: rule, fingerprint, reason, expires)
    #[arg(long, value_name = "FILE")]
    allow: Option<PathBuf>,
    /// Set a non-zero exit code when changes of this severity or worse remain
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
    /// Adapter tree to index for hand-written kernels (default: adapter-runtime/ of the repository)
    #[arg(long, value_name = "DIR")]
    adapter: Option<PathBuf>,
    /// Colour in the terminal format (auto: a terminal and NO_COLOR unset)
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
    /// Subjects listed per rule in the terminal format (0: all)
    #[arg(long, default_value_t = 8)]
    limit: usize,
    /// Terminal format: show every detail and fingerprint whole, whatever the width (default: lines
    /// fit the terminal's width, $COLUMNS, or 100 columns when stdout is not a terminal; what is
    /// cut ends in `...`, fingerprints are shortened)
    #[arg(long)]
    wide: bool,
    /// Date for allow-list expiry (YYYY-MM-DD; default: today, UTC)
    #[arg(long, value_name = "DATE")]
    today: Option<String>,
    /// Leave out the adapter's coverage of both versions (faster; no `coverage.unreachable`
    /// changes, and no "cover" items judged on the new version's coverage)
    #[arg(long)]
    no_coverage: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<ExitCode, Error> {
    let rules = diff::RuleSet::builtin();
    let allow = match &a.allow {
        Some(p) => Some(diff::allow::AllowList::load_with_rules(p, Some(&rules))?),
        None => None,
    };
    let today = match &a.today {
        Some(t) => {
            if diff::allow::parse_date(t).is_none() {
                return Err(Error::Usage(format!("--today `{t}` is not YYYY-MM-DD")));
            }
            t.clone()
        }
        None => diff::allow::today_utc(),
    };
    let report = match a.upstream.as_str() {
        "pytorch" => pytorch_report(ctx, &a, &rules, allow.as_ref(), &today)?,
        "pytorch-cxx" => cxx_report(ctx, &a, &rules, allow.as_ref(), &today)?,
        vendor => {
            let st = ctx.store()?;
            let (vo, vn) = (st.resolve(vendor, &a.old)?, st.resolve(vendor, &a.new)?);
            let (old, new) = (st.load_headers(vendor, &vo)?, st.load_headers(vendor, &vn)?);
            let root = diff::pipeline::repo_root(st);
            let dir = a.adapter.clone().unwrap_or_else(|| root.join(diff::pipeline::ADAPTER_DIR));
            let uses = diff::header::SymbolUses::index_dir(&dir, &root)?;
            diff::pipeline::header_report(vendor, &old, &new, &uses, allow.as_ref(), &today, &rules)
        }
    };
    let text = match a.format {
        DiffFormat::Terminal => {
            let color = match a.color {
                ColorWhen::Always => true,
                ColorWhen::Never => false,
                ColorWhen::Auto => diff::report_terminal::auto_color(),
            };
            let width = if a.wide { None } else { Some(xirang_scan::width::output_width()) };
            diff::report_terminal::render(
                &report,
                &rules,
                diff::report_terminal::Options { color, limit: a.limit, width },
            )
        }
        DiffFormat::Markdown => diff::report_markdown::render(&report, &rules),
        DiffFormat::Json => diff::report_json::render(&report)?,
    };
    print_str(&text);
    let fail_on = a.fail_on.map(|f| match f {
        FailOn::Breaking => diff::Severity::Breaking,
        FailOn::Action => diff::Severity::Action,
        FailOn::Info => diff::Severity::Info,
    });
    Ok(ExitCode::from(diff::exit_code(&report, fail_on)))
}

/// `--upstream pytorch-cxx`: PyTorch's C++ extension interface, joined with the adapter's C++.
fn cxx_report(
    ctx: &Ctx,
    a: &Args,
    rules: &diff::RuleSet,
    allow: Option<&diff::allow::AllowList>,
    today: &str,
) -> Result<diff::Report, Error> {
    let st = ctx.store()?;
    let load = |spec: &str| -> Result<xirang_scan::cxx_snapshot::CxxSnapshot, Error> {
        let p = Path::new(spec);
        if p.is_dir() {
            return Ok(xirang_scan::cxx_snapshot::CxxSnapshot::scan(p, &folder_version(p))?);
        }
        let v = st.resolve("pytorch-cxx", spec)?;
        Ok(st.load_cxx(&v)?)
    };
    let (old, new) = (load(&a.old)?, load(&a.new)?);
    let root = adapter_root(Some(st));
    let dir = a.adapter.clone().unwrap_or_else(|| root.join(diff::pipeline::ADAPTER_DIR));
    // paths relative to the repository, or to the adapter tree when it lies elsewhere
    let base = if dir.canonicalize().ok().zip(root.canonicalize().ok()).is_some_and(|(d, r)| d.starts_with(r)) {
        root.clone()
    } else {
        dir.clone()
    };
    let index = diff::pipeline::index_cxx(&dir, &base)?;
    for d in index.diagnostics.iter().take(5) {
        warn!("warning: {}:{}:{}: {}", d.file, d.line, d.column, d.message);
    }
    let autocast = root.join(diff::pipeline::cxx_autocast_file()).is_file();
    Ok(diff::pipeline::cxx_report(&old, &new, &index, autocast, allow, today, rules))
}

/// The repository whose adapter a report is about: the one holding `xirang.toml` above the current
/// folder, else the store's parent, else the current folder. (Not the store's parent first: a
/// `--store` elsewhere must not silently drop the adapter from the report.)
fn adapter_root(store: Option<&Store>) -> PathBuf {
    if let Ok(cwd) = std::env::current_dir() {
        let mut d = cwd.as_path();
        loop {
            if d.join("xirang.toml").is_file() {
                return d.to_path_buf();
            }
            match d.parent() {
                Some(p) => d = p,
                None => break,
            }
        }
    }
    store.map(diff::pipeline::repo_root).unwrap_or_else(|| PathBuf::from("."))
}

/// Says so when the report will name no hand-written kernel (the wrong folder, most likely).
fn warn_if_no_kernels(kernels: &diff::adapter_index::AdapterIndex, adapter: Option<&Path>, root: &Path) {
    for w in &kernels.warnings {
        warn!("warning: {w}");
    }
    if kernels.kernels.is_empty() {
        let dir = adapter.map(Path::to_path_buf).unwrap_or_else(|| root.join(diff::pipeline::ADAPTER_DIR));
        warn!(
            "warning: no hand-written kernels indexed in {}: the report names no file to edit; \
             run inside the adapter's repository or pass --adapter DIR",
            dir.display()
        );
    }
}

/// The PyTorch side of `diff`: two versions of the store read as a pair (parsing only the entries
/// that differ), else two whole snapshots (a source on either side).
fn pytorch_report(
    ctx: &Ctx,
    a: &Args,
    rules: &diff::RuleSet,
    allow: Option<&diff::allow::AllowList>,
    today: &str,
) -> Result<diff::Report, Error> {
    if let (Some((st, vo)), Some((_, vn))) = (ctx.store_version(&a.old)?, ctx.store_version(&a.new)?) {
        return pair_report(st, &vo, &vn, a, rules, allow, today);
    }
    let old = ctx.load_target(&a.old, None)?;
    let new = ctx.load_target(&a.new, None)?;
    let root = adapter_root(ctx.store().ok());
    let kernels = match &a.adapter {
        Some(dir) => {
            let map = diff::adapter_index::method_map(
                old.registry.functions.iter().chain(new.registry.functions.iter()).map(|f| &f.func.name),
            );
            diff::adapter_index::index_dir(dir, dir.parent().unwrap_or(dir), &map)?
        }
        None => diff::pipeline::index_adapter(&root, &[&old, &new])?,
    };
    let backends = backend_files(&a.backend, &old, &new)?;
    warn_if_no_kernels(&kernels, a.adapter.as_deref(), &root);
    // a broken `xirang.toml` is reported and left out
    let adapter = AdapterInputs::load_lenient(&root, &mut |w| warn!("{w}"))?;
    let states = if a.no_coverage {
        None
    } else {
        join_states(adapter.config.as_ref(), a.adapter.is_none(), &old, &new, &kernels)
    };
    Ok(xirang_scan::compare::whole_report(
        xirang_scan::compare::WholeDiff {
            old: &old,
            new: &new,
            adapter: &adapter,
            kernels: &kernels,
            backends: &backends,
            allow,
            today,
            states: states.as_ref(),
        },
        rules,
    ))
}

/// `--backend` files, checked against the operators of both versions.
fn backend_files(paths: &[PathBuf], old: &PytorchSnapshot, new: &PytorchSnapshot) -> Result<BackendFiles, Error> {
    let names = inputs::operator_names(old, new);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok(BackendFiles::read(paths, &names, &inputs::versions_text(old, new))?)
}

/// Two versions of the store, read as a pair. The coverage join needs whole snapshots (the pair
/// holds only what differs) and their tier models, which do not depend on the adapter's index: two
/// chains of work, balanced over the cores by rayon's work stealing, build them beside the pair,
/// the adapter index and the adapter's inputs ([`pair_side`], [`whole_side`]).
fn pair_report(
    st: &Store,
    vo: &Version,
    vn: &Version,
    a: &Args,
    rules: &diff::RuleSet,
    allow: Option<&diff::allow::AllowList>,
    today: &str,
) -> Result<diff::Report, Error> {
    let root = adapter_root(Some(st));
    let config = AdapterInputs::config_lenient(&root, &mut |w| warn!("{w}"));
    let (side, whole) = rayon::join(
        || pair_side(st, vo, vn, a, &root, config.as_ref()),
        || whole_side(st, vo, vn, config.as_ref().filter(|_| !a.no_coverage)),
    );
    let PairSide { pair, kernels, cxx_kernels, backend_files, adapter } = side?;
    let whole = whole?;
    // the custom operators' formulas, resolved against the old version (only what they call is parsed)
    let custom = match &adapter.custom {
        Some(c) => Some(c.resolve_in(st, vo)?),
        None => None,
    };
    // the coverage of both versions, from the whole snapshots and tier models built meanwhile
    let states = match (&adapter.config, whole) {
        (Some(cfg), Some(whole)) => whole
            .and_then(|(old, new, mo, mn)| {
                let repository_index = a.adapter.is_none();
                xirang_scan::compare::adapter_states_of_models(
                    cfg,
                    (&old, &new),
                    (&mo, &mn),
                    &kernels,
                    repository_index,
                )
                .map_err(|e| e.to_string())
            })
            .map_err(|e| coverage_warning(&e))
            .ok(),
        _ => None,
    };
    let backends = backend_files.backends();
    let d = xirang_scan::compare::PairDiff {
        title: format!("pytorch {} -> {}", pair.old.meta.version, pair.new.meta.version),
        kernels: &kernels,
        backends: &backends,
        generated: &adapter.generated,
        allow,
        today,
        states: states.as_ref(),
        custom: custom.as_ref(),
    };
    let mut report = xirang_scan::compare::pytorch_pair_report(&pair, d, rules);
    if let Some(ck) = &cxx_kernels {
        diff::cxx_kernels::refine(&mut report, ck, st, vn)?;
    }
    Ok(report)
}

/// The pair, the adapter index (Rust kernels, and a C++ tree's with `--adapter`), the backend
/// files and the adapter's inputs.
struct PairSide {
    pair: xirang_scan::snapshot::PytorchPair,
    kernels: diff::adapter_index::AdapterIndex,
    cxx_kernels: Option<diff::cxx_kernels::CxxKernels>,
    backend_files: BackendFiles,
    adapter: AdapterInputs,
}

fn pair_side(
    st: &Store,
    vo: &Version,
    vn: &Version,
    a: &Args,
    root: &Path,
    config: Option<&xirang_scan::generate::config::LoadedConfig>,
) -> Result<PairSide, Error> {
    let pair = st.load_pytorch_pair(vo, vn)?;
    let mut kernels = match &a.adapter {
        Some(dir) => {
            let map = diff::pipeline::pair_method_map(&pair);
            diff::adapter_index::index_dir(dir, dir.parent().unwrap_or(dir), &map)?
        }
        None => diff::pipeline::index_adapter_pair(root, &pair)?,
    };
    // a C++ adapter (--adapter DIR): its kernels matched to operators by name and C++ signature
    let cxx_kernels = match &a.adapter {
        Some(dir) => {
            let ck =
                diff::cxx_kernels::join(&mut kernels, dir, dir.parent().unwrap_or(dir), st, &[vo.clone(), vn.clone()])?;
            if let Some(ck) = &ck {
                warn!(
                    "C++ adapter: {} kernel definitions, {} matched to an operator of {} or {} by name and C++ signature",
                    ck.index.kernels.len(),
                    ck.matching.matched.len(),
                    vo,
                    vn
                );
            }
            ck
        }
        None => None,
    };
    let mut names: Vec<&str> = pair.operator_names().collect();
    names.sort_unstable();
    names.dedup();
    let versions = format!("{} or {}", pair.old.meta.version, pair.new.meta.version);
    let backend_files = BackendFiles::read(&a.backend, &names, &versions)?;
    warn_if_no_kernels(&kernels, a.adapter.as_deref(), root);
    let adapter = AdapterInputs::with_config(root, config.cloned())?;
    Ok(PairSide { pair, kernels, cxx_kernels, backend_files, adapter })
}

type Whole = (PytorchSnapshot, PytorchSnapshot, xirang_scan::generate::TierModel, xirang_scan::generate::TierModel);

/// Both whole snapshots and their tier models, when the adapter has a configuration (`config`) and
/// the coverage join is asked for; `Some(Err)` when the tier models cannot be built (a warning, as
/// [`join_states`] says; the store failing is an error).
fn whole_side(
    st: &Store,
    vo: &Version,
    vn: &Version,
    config: Option<&xirang_scan::generate::config::LoadedConfig>,
) -> Result<Option<Result<Whole, String>>, Error> {
    let Some(cfg) = config else { return Ok(None) };
    let (old, new) = st.load_pytorch_operators_both(vo, vn)?;
    let (mo, mn) =
        rayon::join(|| xirang_scan::generate::tier_model(cfg, &old), || xirang_scan::generate::tier_model(cfg, &new));
    let models = mo.and_then(|mo| Ok((mo, mn?))).map_err(|e| e.to_string());
    Ok(Some(models.map(|(mo, mn)| (old, new, mo, mn))))
}

/// The adapter's coverage of both versions, or `None` (with a warning when it cannot be built).
fn join_states(
    cfg: Option<&xirang_scan::generate::config::LoadedConfig>,
    repository_index: bool,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    kernels: &diff::adapter_index::AdapterIndex,
) -> Option<diff::AdapterStates> {
    xirang_scan::compare::adapter_states(cfg, old, new, kernels, repository_index).unwrap_or_else(|e| {
        coverage_warning(&e);
        None
    })
}

/// Says why the report leaves out the adapter's coverage.
fn coverage_warning(e: &dyn std::fmt::Display) {
    warn!("warning: the adapter's coverage could not be joined into the report: {e}");
}
