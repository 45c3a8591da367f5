//! `xirang-scan`: the command-line front end. See `xirang-scan --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use xirang_scan::diff;
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
    /// Scan vendor driver headers: `headers ascend v2.14.0`, `headers generic path/to/include`
    #[command(long_about = "Scans vendor driver C headers (tree-sitter-cpp) into declarations: functions with \
parameters, enums with resolved enumerator values, structs/unions with fields, typedefs, #define constants, \
deprecations and the include graph.\n\nVENDOR is `ascend`, `cuda` (profiles that know their export and \
calling-convention macros) or `generic` (detects such macros in unknown headers). TARGET is a release in the \
snapshot store (schemas/VENDOR/) or a folder of headers.")]
    Headers {
        /// ascend, cuda or generic
        #[arg(value_parser = ["ascend", "cuda", "generic"])]
        vendor: String,
        /// A release in the store (v2.14.0, v12.4) or a folder of headers
        target: String,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Manage the snapshot store
    #[command(subcommand)]
    Snapshot(SnapshotCmd),
    /// Drift report between two versions: what changed upstream, what it breaks here, what is regenerated
    #[command(long_about = "Compares two PyTorch snapshots (or sources), classifies every change by a rule of the \
catalogue (`xirang-scan rules`), joins the changes with the hand-written kernels of adapter-runtime/ and with \
backend yaml files (--backend), and prints a checklist of what to edit plus what the generator handles.\n\n\
Formats: terminal (grouped by severity and rule; each change starts with its fingerprint, the key of an \
allow-list entry; every line fits the terminal's width, $COLUMNS, or 100 columns when stdout is not a \
terminal: details cut to fit end in `...` and fingerprints are shortened to 12 characters when space is \
short; --wide shows everything whole), markdown (for pull requests: summary tables, a task list of the \
places to edit, collapsible details with whole fingerprints), json (every field; \
schemas/format/diff-report.schema.json).\n\n\
Exit codes: 0 no change at or above --fail-on (or no --fail-on); 1 error; 2 usage error; otherwise a bit set: \
4 breaking changes present, 8 action changes present (counted with --fail-on action|info), 16 info changes \
present (with --fail-on info), 32 an allow-list entry has expired (with any --fail-on).")]
    Diff {
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
    },
    /// List the drift rules (id, severity, PyTorch BC verdict, title)
    Rules {
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
    /// Explain one drift rule: what it means and what to do
    Explain {
        /// Rule id, e.g. arg.inserted
        id: String,
    },
    /// Regeneration bot: import new PyTorch releases, regenerate, check, push, open a pull request
    Bot(xirang_scan::bot::cli::BotArgs),
    /// Regenerate the committed drift reports in diffs/ (or check them with --check; exit 3 when stale)
    Diffs {
        /// Do not write; exit 3 and list the stale files when diffs/ is not current
        #[arg(long)]
        check: bool,
    },
    /// Generate the typed adapter runtime into generated/ (driver bindings, operator stubs,
    /// autograd skeletons, composition recipes) from xirang.toml and the snapshot store
    Generate {
        /// Do not write; exit 3 and list the stale files when generated/ is not current
        #[arg(long)]
        check: bool,
        /// Adapter configuration (default: xirang.toml in the current folder or a parent)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Generate for this PyTorch version instead of the one xirang.toml names
        #[arg(long, value_name = "VERSION")]
        pytorch: Option<String>,
    },
    /// Coverage report: the tier of every selected operator (native, recipe, fallback, none) and
    /// the backward of each differentiable input (translated, hand-written hook, missing hook)
    #[command(
        long_about = "Lists every operator xirang.toml selects (as `generate` does) with the tier the generated front-ends dispatch it to: native (a kernel function marked `xirang-kernel:`, attached by `generate`, or a hand-written `impl AtenOps` method), recipe (a composition recipe of templates/recipes.toml or an out=/in-place wrapper over the functional operator; counted only when every operator it calls is reachable), fallback (a host implementation in the runtime's fallback table), or none; with the file:line of the kernel or host implementation. The text format fits the terminal's width ($COLUMNS, or 100 columns when stdout is not a terminal; what is cut ends in `...`); --wide shows every row whole. For autograd, each input of an operator's derivatives.yaml entry is translated (the generator compiled the formula), hand-written (a BackwardHooks method the adapter implements, with file:line), missing hook, or not differentiable; operators without an entry say so. Totals come first.

--write regenerates the committed report (diffs/coverage.md and diffs/coverage.json); --check exits 3 when it is stale (CI).

Exit codes: 0 success; 1 error; 2 usage error; 3 --check found the committed report stale; 4 a --fail-under-* threshold was not met."
    )]
    Coverage {
        #[arg(long, value_enum, default_value_t = CoverageFormat::Text)]
        format: CoverageFormat,
        /// Adapter runtime folder to index (default: `[adapter] runtime` of xirang.toml); its src/ is read
        #[arg(long, value_name = "DIR")]
        adapter: Option<PathBuf>,
        /// Adapter configuration (default: xirang.toml in the current folder or a parent)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Write the committed report (diffs/coverage.md, diffs/coverage.json) instead of printing
        #[arg(long, conflicts_with = "check")]
        write: bool,
        /// Do not write; exit 3 and list the stale files when the committed report is not current
        #[arg(long)]
        check: bool,
        /// Text format: show every row whole, whatever the width (default: lines fit the terminal's
        /// width, $COLUMNS, or 100 columns when stdout is not a terminal; what is cut ends in `...`)
        #[arg(long)]
        wide: bool,
        /// Exit 4 when fewer than PCT percent of the operators are reachable (tier other than none)
        #[arg(long, value_name = "PCT")]
        fail_under_reachable: Option<f64>,
        /// Exit 4 when fewer than PCT percent of the differentiable inputs have a backward
        /// (translated or hand-written)
        #[arg(long, value_name = "PCT")]
        fail_under_autograd: Option<f64>,
    },
    /// Add a custom operator with its gradient rule: custom-operator file, generated/, kernel
    /// skeleton and tests (all or nothing)
    #[command(
        name = "new-op",
        long_about = "Adds a custom operator to the adapter.\n\n\
Validates the schema (the native_functions.yaml schema language, with a namespace), checks the name \
against the target PyTorch's operators, the other custom operators and the Rust method names, validates \
each gradient formula against the schema (unknown variables, differentiable Tensor inputs without a \
formula, formulas for non-differentiable inputs) and the reference formula, then writes as one group \
(on any error nothing is written): the entry in the custom-operator file (xirang.toml [operators] \
custom, default custom_ops.yaml), generated/ (generated/custom.rs), the kernel skeleton \
adapter-runtime/src/custom/<name>.rs (returns a \"not implemented\" error until written), \
adapter-runtime/src/custom/mod.rs, and the tests adapter-runtime/tests/custom_<name>.rs (finite-difference \
gradient check in f64, comparison with the reference).\n\n\
Formulas are C++ expressions as in derivatives.yaml: `grad` (the output's gradient), `result`, the \
arguments, existing operators (`tanh(self)`, `at::mul(a, b)`, `self.exp()`), + - * / and literals.\n\n\
Example:\n  xirang-scan new-op \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\" \\\n    \
--grad \"self: gelu_backward(grad * scale, self)\" --reference \"gelu(self) * scale\"\n\n\
Without a schema, on a terminal, it asks for the schema, the gradient rules and the reference."
    )]
    NewOp {
        /// `namespace::name(args) -> returns`, e.g. "xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor"
        schema: Option<String>,
        /// A gradient rule "<input>: <formula>" (repeat for each differentiable input)
        #[arg(long = "grad", value_name = "RULE")]
        grads: Vec<String>,
        /// The same function written with existing operators (the tests compare the kernel with it)
        #[arg(long, value_name = "FORMULA")]
        reference: Option<String>,
        /// Adapter configuration (default: xirang.toml in the current folder or a parent)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Validate and list the files that would be written, without writing
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum SnapshotCmd {
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

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DiffFormat {
    Terminal,
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum CoverageFormat {
    Text,
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum FailOn {
    Breaking,
    Action,
    Info,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// Standard output of a command that works while it prints. A closed pipe (`| head -1`) stops the
/// printing but not the work (`snapshot sync ... | head -1` still imports every release); any other
/// write error (`> /dev/full`) is reported once the work is done. Never a panic.
mod out {
    use std::io::Write;
    use std::sync::Mutex;

    #[derive(Default)]
    struct State {
        closed: bool,
        error: Option<std::io::Error>,
    }

    static STATE: Mutex<State> = Mutex::new(State { closed: false, error: None });

    /// Writes `text` to standard output, unless an earlier write failed.
    pub fn write(text: &str) {
        let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
        if st.closed || st.error.is_some() {
            return;
        }
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        match lock.write_all(text.as_bytes()).and_then(|_| lock.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => st.closed = true,
            Err(e) => st.error = Some(e),
        }
    }

    /// Writes a line to standard error; a failure there has nowhere to be reported.
    pub fn warn(text: &str) {
        let _ = writeln!(std::io::stderr(), "{text}");
    }

    /// The first write error other than a closed pipe.
    pub fn take_error() -> Option<std::io::Error> {
        STATE.lock().unwrap_or_else(|p| p.into_inner()).error.take()
    }
}

/// `println!` through [`out::write`].
macro_rules! say {
    ($($arg:tt)*) => {
        out::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`out::warn`].
macro_rules! warn {
    ($($arg:tt)*) => {
        out::warn(&format!($($arg)*))
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli);
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            let usage = e.is_usage();
            let report = miette::Report::new(e);
            out::warn(&format!("{report:?}"));
            ExitCode::from(if usage { 2 } else { 1 })
        }
    };
    if let Some(e) = out::take_error() {
        out::warn(&format!("xirang-scan: cannot write the output: {e}"));
        return ExitCode::from(1);
    }
    code
}

fn run(cli: Cli) -> Result<ExitCode, Error> {
    let store_flag = cli.store.clone();
    let store = || Store::discover(store_flag.as_deref()).map_err(Error::from);
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
        Command::Snapshot(SnapshotCmd::Import { source, as_version, force }) => {
            let v = exact_version(&as_version)?;
            let spec = SourceSpec::parse(&source)?;
            let files = source::read(&spec)?;
            files.require_complete(&v)?;
            let snap = PytorchSnapshot::build(&files, &v)?;
            let st = store_for_write(store_flag.as_deref())?;
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
        }
        Command::Headers { vendor, target, format } => {
            let st = store();
            let in_store = Version::parse(&target).is_some() && !std::path::Path::new(&target).exists();
            let snap = if in_store {
                let st = st?;
                let v = st.resolve(&vendor, &target)?;
                st.load_headers(&vendor, &v)?
            } else {
                let folder = PathBuf::from(&target);
                if !folder.is_dir() {
                    return Err(xirang_store::Error::SourceNotFound(format!(
                        "`{target}` is neither a {vendor} release in the store nor a folder"
                    ))
                    .into());
                }
                let v =
                    Version::parse(&folder.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default())
                        .unwrap_or(Version { parts: vec![0], suffix: None });
                xirang_scan::snapshot::HeaderSnapshot::scan(&vendor, &folder, &v)?
            };
            let text = match format {
                Format::Jsonl => xirang_headers::to_jsonl(&snap.set),
                Format::Table => xirang_headers::to_table(&snap.set),
            };
            print_str(&text)?;
        }
        Command::Snapshot(SnapshotCmd::Sync { folder, upstream, dry_run }) if upstream == "pytorch-cxx" => {
            let st = store_for_write(store_flag.as_deref())?;
            let entries = release_folders(&folder)?;
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
        }
        Command::Snapshot(SnapshotCmd::Sync { folder, upstream, dry_run }) if upstream != "pytorch" => {
            let st = store_for_write(store_flag.as_deref())?;
            let entries = release_folders(&folder)?;
            for (v, path) in entries {
                if dry_run {
                    say!("would import {} as {upstream} {v}", path.display());
                    continue;
                }
                let snap = xirang_scan::snapshot::HeaderSnapshot::scan(&upstream, &path, &v)?;
                st.write_headers(&snap)?;
                let c = &snap.meta.counts;
                say!(
                    "{upstream} {v}: {} files, {} functions, {} enumerators",
                    c.get("files").copied().unwrap_or(0),
                    c.get("function").copied().unwrap_or(0),
                    c.get("enumerator").copied().unwrap_or(0)
                );
            }
        }
        Command::Snapshot(SnapshotCmd::Sync { folder, upstream: _, dry_run }) => {
            let st = store_for_write(store_flag.as_deref())?;
            let entries = release_folders(&folder)?;
            for (v, path) in entries {
                if dry_run {
                    say!("would import {} as {v}", path.display());
                    continue;
                }
                let files = source::read(&SourceSpec::Folder(path.clone()))?;
                files.require_complete(&v)?;
                let snap = PytorchSnapshot::build(&files, &v)?;
                st.write_pytorch(&snap)?;
                say!(
                    "{v}: {} operators, {} derivative entries",
                    snap.meta.counts.operators,
                    snap.meta.counts.derivatives
                );
            }
        }
        Command::Diff {
            old,
            new,
            format,
            upstream,
            backend,
            allow,
            fail_on,
            adapter,
            color,
            limit,
            wide,
            today,
            no_coverage,
        } => {
            return run_diff(DiffArgs {
                store: &store,
                old,
                new,
                format,
                upstream,
                backend,
                allow,
                fail_on,
                adapter,
                color,
                limit,
                wide,
                today,
                coverage: !no_coverage,
            });
        }
        Command::Rules { format } => {
            let rules = diff::RuleSet::builtin();
            let text = match format {
                ShowFormat::Text => rules.list_text(),
                ShowFormat::Json => {
                    let mut t = serde_json::to_string_pretty(rules.all()).map_err(|e| Error::Usage(e.to_string()))?;
                    t.push('\n');
                    t
                }
            };
            print_str(&text)?;
        }
        Command::Explain { id } => {
            print_str(&diff::RuleSet::builtin().explain_text(&id)?)?;
        }
        Command::Generate { check, config, pytorch } => {
            use xirang_scan::generate;
            let mut cfg = match &config {
                Some(p) => generate::config::LoadedConfig::load(p)?,
                None => {
                    generate::config::LoadedConfig::discover(&std::env::current_dir().map_err(|e| Error::io(".", e))?)?
                }
            };
            if let Some(v) = pytorch {
                cfg.config.pytorch.version = v;
            }
            let st = match &store_flag {
                Some(_) => store()?,
                None => Store::discover(Some(&cfg.path("schemas"))).or_else(|_| store())?,
            };
            let inputs = generate::Inputs::load(cfg, &st)?;
            let summary = generate::generate(&inputs, check)?;
            let mut stale = false;
            for (path, status) in &summary.files {
                let p = summary.folder.join(path);
                match status {
                    generate::FileStatus::Unchanged => {}
                    generate::FileStatus::Written => say!("wrote {}", p.display()),
                    generate::FileStatus::Stale => {
                        stale = true;
                        warn!("stale: {}", p.display())
                    }
                    generate::FileStatus::Removed if check => {
                        stale = true;
                        warn!("stale (no longer generated): {}", p.display())
                    }
                    generate::FileStatus::Removed => say!("removed {}", p.display()),
                }
            }
            if check && stale {
                warn!("generated/ is not current: run `xirang-scan generate` and commit the result");
                return Ok(ExitCode::from(3));
            }
            say!(
                "{} operators, {} files {} in {}",
                summary.operators,
                summary.files.len(),
                if check { "current" } else { "generated" },
                summary.folder.display()
            );
        }
        Command::Coverage {
            format,
            adapter,
            config,
            write,
            check,
            wide,
            fail_under_reachable,
            fail_under_autograd,
        } => {
            use xirang_scan::{coverage, generate};
            let cfg = match &config {
                Some(p) => generate::config::LoadedConfig::load(p)?,
                None => {
                    generate::config::LoadedConfig::discover(&std::env::current_dir().map_err(|e| Error::io(".", e))?)?
                }
            };
            let reachable_min = fail_under_reachable.map(|v| coverage::threshold("reachable", v)).transpose()?;
            let autograd_min = fail_under_autograd.map(|v| coverage::threshold("autograd", v)).transpose()?;
            let st = match &store_flag {
                Some(_) => store()?,
                None => Store::discover(Some(&cfg.path("schemas"))).or_else(|_| store())?,
            };
            let root = cfg.root.clone();
            let inputs = generate::Inputs::load(cfg, &st)?;
            let report = coverage::build(&inputs, adapter.as_deref())?;
            if check {
                let stale = coverage::check(&root, &report)?;
                if !stale.is_empty() {
                    for p in &stale {
                        warn!("stale: {}", p.display());
                    }
                    warn!(
                        "the coverage report is not current: run `xirang-scan coverage --write` and commit the result"
                    );
                    return Ok(ExitCode::from(3));
                }
                say!("{} and {} current", coverage::REPORT_MD, coverage::REPORT_JSON);
            } else if write {
                for p in coverage::write(&root, &report)? {
                    say!("wrote {}", p.display());
                }
            } else {
                let text = match format {
                    CoverageFormat::Text => coverage::render_text(
                        &report,
                        if wide { None } else { Some(xirang_scan::width::output_width()) },
                    ),
                    CoverageFormat::Markdown => coverage::render_markdown(&report),
                    CoverageFormat::Json => coverage::render_json(&report)?,
                };
                print_str(&text)?;
            }
            let mut under = false;
            if let Some(min) = reachable_min
                && report.reachable_pct() < min
            {
                warn!("coverage: {:.1}% of the operators are reachable, under {min}%", report.reachable_pct());
                under = true;
            }
            if let Some(min) = autograd_min
                && report.autograd_pct() < min
            {
                warn!(
                    "coverage: {:.1}% of the differentiable inputs have a backward, under {min}%",
                    report.autograd_pct()
                );
                under = true;
            }
            if under {
                return Ok(ExitCode::from(4));
            }
        }
        Command::NewOp { schema, grads, reference, config, dry_run } => {
            use xirang_scan::generate;
            let cfg = match &config {
                Some(p) => generate::config::LoadedConfig::load(p)?,
                None => {
                    generate::config::LoadedConfig::discover(&std::env::current_dir().map_err(|e| Error::io(".", e))?)?
                }
            };
            let req = match schema {
                Some(schema) => generate::newop::NewOp { schema, grads, reference },
                None => prompt_new_op(grads, reference)?,
            };
            let st = match &store_flag {
                Some(_) => store()?,
                None => Store::discover(Some(&cfg.path("schemas"))).or_else(|_| store())?,
            };
            let inputs = generate::Inputs::load(cfg, &st)?;
            let plan =
                if dry_run { generate::newop::plan(&inputs, &req)? } else { generate::newop::run(&inputs, &req)? };
            for w in &plan.writes {
                say!("{} {}", if dry_run { "would write" } else { "wrote" }, w.path);
            }
            if !dry_run {
                let stem = plan.writes.iter().rev().find_map(|w| {
                    w.path.strip_prefix("adapter-runtime/tests/").and_then(|p| p.strip_suffix(".rs")).map(String::from)
                });
                say!("added `{}`", plan.qualified);
                if let Some(t) = stem {
                    say!("next: write the kernel, then `cargo test -p xirang-runtime --test {t}`");
                }
            }
        }
        Command::Diffs { check } => {
            let st = store()?;
            let rules = diff::RuleSet::builtin();
            if check {
                let stale = diff::committed::check_reports(&st, &rules)?;
                if !stale.is_empty() {
                    for p in &stale {
                        warn!("stale: {}", p.display());
                    }
                    warn!("diffs/ is not current: run `xirang-scan diffs` and commit the result");
                    return Ok(ExitCode::from(3));
                }
                say!("diffs/ is current");
            } else {
                let written = diff::committed::write_reports(&st, &rules)?;
                for p in &written {
                    say!("wrote {}", p.display());
                }
                say!("{} file(s) changed", written.len());
            }
        }
        Command::Bot(args) => return Ok(ExitCode::from(xirang_scan::bot::cli::main(args))),
        Command::Snapshot(SnapshotCmd::List) => {
            let st = store()?;
            for up in xirang_scan::snapshot::UPSTREAMS {
                let vs = st.versions(up);
                if !vs.is_empty() {
                    let names: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
                    say!("{up}: {}", names.join(" "));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
fn release_folders(folder: &std::path::Path) -> Result<Vec<(Version, PathBuf)>, Error> {
    let mut entries: Vec<(Version, PathBuf)> = std::fs::read_dir(folder)
        .map_err(|e| Error::io(folder, e))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .collect();
    entries.sort();
    Ok(entries)
}

/// `new-op` without a schema: ask on the terminal.
fn prompt_new_op(grads: Vec<String>, reference: Option<String>) -> Result<xirang_scan::generate::newop::NewOp, Error> {
    use std::io::{BufRead, IsTerminal};
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "new-op: give the schema, e.g. `xirang-scan new-op \"xirang::my_op(Tensor self) -> Tensor\" --grad \"self: grad\"` \
             (it is asked for only on a terminal)"
                .into(),
        ));
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = |q: &str| -> Result<String, Error> {
        out::write(q);
        match lines.next() {
            Some(l) => l.map(|s| s.trim().to_string()).map_err(|e| Error::io("<stdin>", e)),
            None => Ok(String::new()),
        }
    };
    let schema = ask("schema (namespace::name(args) -> returns): ")?;
    if schema.is_empty() {
        return Err(Error::Usage("new-op: no schema given".into()));
    }
    let mut grads = grads;
    if grads.is_empty() {
        loop {
            let g = ask("gradient rule `<input>: <formula>` (empty line to finish): ")?;
            if g.is_empty() {
                break;
            }
            grads.push(g);
        }
    }
    let reference = match reference {
        Some(r) => Some(r),
        None => Some(ask("reference formula in existing operators (empty: none): ")?).filter(|r| !r.is_empty()),
    };
    Ok(xirang_scan::generate::newop::NewOp { schema, grads, reference })
}

fn store_for_write(explicit: Option<&std::path::Path>) -> Result<Store, Error> {
    match Store::discover(explicit) {
        Ok(s) => Ok(s),
        Err(_) => Ok(Store::new("schemas")),
    }
}

/// The `--backend` yamls, each with the path it is reported under. Every PyTorch operator they
/// name must exist in one of the two versions compared (`names`, sorted), or it is a typo.
fn backend_yamls(
    paths: &[PathBuf],
    names: &[&str],
    versions: &str,
) -> Result<Vec<(String, xirang_scan::backend::BackendYaml)>, Error> {
    let mut srcs = Vec::new();
    for p in paths {
        let text = xirang_scan::fsio::read_text(p, xirang_scan::fsio::MAX_INPUT_BYTES)?;
        srcs.push(xirang_scan::SourceFile::new(p.display().to_string(), text));
    }
    // the files go together: a `custom:` operator of one may be listed as supported in another
    let yamls = xirang_scan::backend::load_all_checked(&srcs, names, versions)?;
    Ok(paths.iter().map(|p| p.display().to_string()).zip(yamls).collect())
}

/// The store and the version `target` names when it is a version of the store (as [`load_target`]
/// reads it), else `None` (a source folder, wheel or git ref).
fn store_version(store: &dyn Fn() -> Result<Store, Error>, target: &str) -> Result<Option<(Store, Version)>, Error> {
    if Version::parse(target).is_none() || std::path::Path::new(target).exists() {
        return Ok(None);
    }
    let st = store()?;
    let v = st.resolve("pytorch", target)?;
    Ok(Some((st, v)))
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
    out::write(text);
    Ok(())
}

struct DiffArgs<'a> {
    store: &'a dyn Fn() -> Result<Store, Error>,
    old: String,
    new: String,
    format: DiffFormat,
    upstream: String,
    backend: Vec<PathBuf>,
    allow: Option<PathBuf>,
    fail_on: Option<FailOn>,
    adapter: Option<PathBuf>,
    color: ColorWhen,
    limit: usize,
    wide: bool,
    today: Option<String>,
    /// Join the adapter's coverage of both versions.
    coverage: bool,
}

/// `xirang-scan diff`: load, compare, join with the adapter, render, and compute the exit code.
fn run_diff(a: DiffArgs<'_>) -> Result<ExitCode, Error> {
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
    let report = if a.upstream == "pytorch" {
        pytorch_diff_report(&a, &rules, allow.as_ref(), &today)?
    } else if a.upstream == "pytorch-cxx" {
        let st = (a.store)()?;
        let load = |spec: &str| -> Result<xirang_scan::cxx_snapshot::CxxSnapshot, Error> {
            let p = std::path::Path::new(spec);
            if p.is_dir() {
                let v = Version::parse(&p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default())
                    .unwrap_or(Version { parts: vec![0], suffix: None });
                return Ok(xirang_scan::cxx_snapshot::CxxSnapshot::scan(p, &v)?);
            }
            let v = st.resolve("pytorch-cxx", spec)?;
            Ok(st.load_cxx(&v)?)
        };
        let (old, new) = (load(&a.old)?, load(&a.new)?);
        let root = adapter_root(Some(&st));
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
        diff::pipeline::cxx_report(&old, &new, &index, autocast, allow.as_ref(), &today, &rules)
    } else {
        let st = (a.store)()?;
        let (vo, vn) = (st.resolve(&a.upstream, &a.old)?, st.resolve(&a.upstream, &a.new)?);
        let (old, new) = (st.load_headers(&a.upstream, &vo)?, st.load_headers(&a.upstream, &vn)?);
        let root = diff::pipeline::repo_root(&st);
        let dir = a.adapter.clone().unwrap_or_else(|| root.join(diff::pipeline::ADAPTER_DIR));
        let uses = diff::header::SymbolUses::index_dir(&dir, &root)?;
        diff::pipeline::header_report(&a.upstream, &old, &new, &uses, allow.as_ref(), &today, &rules)
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
    print_str(&text)?;
    let fail_on = a.fail_on.map(|f| match f {
        FailOn::Breaking => diff::Severity::Breaking,
        FailOn::Action => diff::Severity::Action,
        FailOn::Info => diff::Severity::Info,
    });
    Ok(ExitCode::from(diff::exit_code(&report, fail_on)))
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
fn warn_if_no_kernels(
    kernels: &diff::adapter_index::AdapterIndex,
    adapter: Option<&std::path::Path>,
    root: &std::path::Path,
) {
    for w in &kernels.warnings {
        warn!("warning: {w}");
    }
    if kernels.kernels.is_empty() {
        let dir = adapter.map(std::path::Path::to_path_buf).unwrap_or_else(|| root.join(diff::pipeline::ADAPTER_DIR));
        warn!(
            "warning: no hand-written kernels indexed in {}: the report names no file to edit; \
             run inside the adapter's repository or pass --adapter DIR",
            dir.display()
        );
    }
}

/// The PyTorch side of `diff`: snapshots or sources, kernels, backend yaml, generated files.
fn pytorch_diff_report(
    a: &DiffArgs<'_>,
    rules: &diff::RuleSet,
    allow: Option<&diff::allow::AllowList>,
    today: &str,
) -> Result<diff::Report, Error> {
    // two versions of the store: read as a pair, parsing only the entries that differ
    let pair = match (store_version(a.store, &a.old)?, store_version(a.store, &a.new)?) {
        (Some((st, vo)), Some((_, vn))) => Some((st.load_pytorch_pair(&vo, &vn)?, st, vo, vn)),
        _ => None,
    };
    if let Some((pair, st, vo, vn)) = pair {
        let root = adapter_root(Some(&st));
        let cfg = adapter_config(&root);
        // the coverage join needs whole snapshots (the pair holds only what differs): they load on
        // their own thread while the adapter is indexed
        return std::thread::scope(|s| {
            let whole = (cfg.is_some() && a.coverage).then(|| s.spawn(|| st.load_pytorch_both(&vo, &vn)));
            // and the generated files' index beside them
            let generated = s.spawn(|| generated_index(&root, cfg.as_ref()));
            // the custom operators' formulas, resolved against the old version (only what they call is parsed)
            let custom = match diff::custom::CustomOperators::load(&root)? {
                Some(c) => Some(c.resolve_in(&st, &vo)?),
                None => None,
            };
            let mut kernels = match &a.adapter {
                Some(dir) => {
                    let map = diff::pipeline::pair_method_map(&pair);
                    diff::adapter_index::index_dir(dir, dir.parent().unwrap_or(dir), &map)?
                }
                None => diff::pipeline::index_adapter_pair(&root, &pair)?,
            };
            // a C++ adapter (--adapter DIR): its kernels matched to operators by name and C++ signature
            let cxx_kernels = match &a.adapter {
                Some(dir) => {
                    let ck = diff::cxx_kernels::join(
                        &mut kernels,
                        dir,
                        dir.parent().unwrap_or(dir),
                        &st,
                        &[vo.clone(), vn.clone()],
                    )?;
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
            let yamls = backend_yamls(&a.backend, &names, &versions)?;
            let backends: Vec<diff::impact::Backend<'_>> =
                yamls.iter().map(|(path, yaml)| diff::impact::Backend { path: path.clone(), yaml }).collect();
            warn_if_no_kernels(&kernels, a.adapter.as_deref(), &root);
            let generated =
                generated.join().map_err(|_| Error::Internal("the generated files' index panicked".into()))?;
            // the coverage of both versions, from the whole snapshots loaded meanwhile
            let states = match whole {
                Some(h) => {
                    let (old, new) = h.join().map_err(|_| Error::Internal("the snapshot loader panicked".into()))??;
                    join_states(cfg.as_ref(), a.adapter.is_none(), &old, &new, &kernels)
                }
                None => None,
            };
            let title = format!("pytorch {} -> {}", pair.old.meta.version, pair.new.meta.version);
            let d = xirang_scan::compare::PairDiff {
                title,
                kernels: &kernels,
                backends: &backends,
                generated: &generated,
                allow,
                today,
                states: states.as_ref(),
                custom: custom.as_ref(),
            };
            let mut report = xirang_scan::compare::pytorch_pair_report(&pair, d, rules);
            if let Some(ck) = &cxx_kernels {
                diff::cxx_kernels::refine(&mut report, ck, &st, &vn)?;
            }
            Ok(report)
        });
    }
    let old = load_target(a.store, &a.old, None)?;
    let new = load_target(a.store, &a.new, None)?;
    let root = adapter_root((a.store)().ok().as_ref());
    let kernels = match &a.adapter {
        Some(dir) => {
            let map = diff::adapter_index::method_map(
                old.registry.functions.iter().chain(new.registry.functions.iter()).map(|f| &f.func.name),
            );
            diff::adapter_index::index_dir(dir, dir.parent().unwrap_or(dir), &map)?
        }
        None => diff::pipeline::index_adapter(&root, &[&old, &new])?,
    };
    let all: Vec<String> =
        old.registry.functions.iter().chain(new.registry.functions.iter()).map(|f| f.func.name.to_string()).collect();
    let mut names: Vec<&str> = all.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let versions = format!("{} or {}", old.meta.version, new.meta.version);
    let yamls = backend_yamls(&a.backend, &names, &versions)?;
    let backends: Vec<diff::impact::Backend<'_>> =
        yamls.iter().map(|(path, yaml)| diff::impact::Backend { path: path.clone(), yaml }).collect();
    warn_if_no_kernels(&kernels, a.adapter.as_deref(), &root);
    let cfg = adapter_config(&root);
    let generated = generated_index(&root, cfg.as_ref());
    let states = if a.coverage { join_states(cfg.as_ref(), a.adapter.is_none(), &old, &new, &kernels) } else { None };
    let title = format!("pytorch {} -> {}", old.meta.version, new.meta.version);
    let custom = diff::custom::CustomOperators::load(&root)?.map(|c| c.resolve(&old.registry.functions));
    Ok(xirang_scan::compare::pytorch_report(
        xirang_scan::compare::PytorchDiff {
            old: &old,
            new: &new,
            title,
            kernels: &kernels,
            backends: &backends,
            generated: &generated,
            allow,
            today,
            states: states.as_ref(),
            custom: custom.as_ref(),
        },
        rules,
    ))
}

/// The adapter's `xirang.toml` at `root`, if any (a broken one is reported and left out).
fn adapter_config(root: &std::path::Path) -> Option<xirang_scan::generate::config::LoadedConfig> {
    match xirang_scan::compare::config_at(root) {
        Ok(c) => c,
        Err(e) => {
            warn!("warning: {}: {e}; the report leaves out the adapter's coverage", root.join("xirang.toml").display());
            None
        }
    }
}

/// The generated files of the adapter (`[adapter] generated`, default `generated/`).
fn generated_index(
    root: &std::path::Path,
    cfg: Option<&xirang_scan::generate::config::LoadedConfig>,
) -> diff::impact::GeneratedIndex {
    match cfg {
        Some(c) => diff::impact::GeneratedIndex::load_from(root, &c.config.adapter.generated),
        None => diff::impact::GeneratedIndex::load(root),
    }
}

/// The adapter's coverage of both versions, or `None` (with a warning when it cannot be built).
fn join_states(
    cfg: Option<&xirang_scan::generate::config::LoadedConfig>,
    repository_index: bool,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    kernels: &diff::adapter_index::AdapterIndex,
) -> Option<diff::AdapterStates> {
    match xirang_scan::compare::adapter_states(cfg, old, new, kernels, repository_index) {
        Ok(s) => s,
        Err(e) => {
            warn!("warning: the adapter's coverage could not be joined into the report: {e}");
            None
        }
    }
}
