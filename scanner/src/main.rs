//! `xirang-scan`: the command-line front end. See `xirang-scan --help`. The subcommands live in
//! `cmd/`, one file each.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xirang_scan::error::Error;

#[macro_use]
mod cmd;

/// The CLI allocates many small strings and vectors (schemas, index entries); mimalloc serves them
/// faster than glibc's allocator (ARCHITECTURE.md, "Dependencies beyond the brief's list").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Ops(cmd::ops::Args),
    /// Show one operator: schema, dispatch, tags, structured links, derivative formulas
    Show(cmd::show::Args),
    /// Scan vendor driver headers: `headers ascend v2.14.0`, `headers generic path/to/include`
    #[command(long_about = "Scans vendor driver C headers (tree-sitter-cpp) into declarations: functions with \
parameters, enums with resolved enumerator values, structs/unions with fields, typedefs, #define constants, \
deprecations and the include graph.\n\nVENDOR is `ascend`, `cuda` (profiles that know their export and \
calling-convention macros) or `generic` (detects such macros in unknown headers). TARGET is a release in the \
snapshot store (schemas/VENDOR/) or a folder of headers.")]
    Headers(cmd::headers::Args),
    /// Manage the snapshot store
    #[command(subcommand)]
    Snapshot(cmd::snapshot::Cmd),
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
    Diff(cmd::diff::Args),
    /// List the drift rules (id, severity, PyTorch BC verdict, title)
    Rules(cmd::rules::Args),
    /// Explain one drift rule: what it means and what to do
    Explain(cmd::explain::Args),
    /// Regeneration bot: import new PyTorch releases, regenerate, check, push, open a pull request
    Bot(xirang_scan::bot::cli::BotArgs),
    /// Regenerate the committed drift reports in diffs/ (or check them with --check; exit 3 when stale)
    Diffs(cmd::diffs::Args),
    /// Generate the typed adapter runtime into generated/ (driver bindings, operator stubs,
    /// autograd skeletons, composition recipes) from xirang.toml and the snapshot store
    Generate(cmd::generate::Args),
    /// Coverage report: the tier of every selected operator (native, recipe, fallback, none) and
    /// the backward of each differentiable input (translated, hand-written hook, missing hook)
    #[command(
        long_about = "Lists every operator xirang.toml selects (as `generate` does) with the tier the generated front-ends dispatch it to: native (a kernel function marked `xirang-kernel:`, attached by `generate`, or a hand-written `impl AtenOps` method), recipe (a composition recipe of templates/recipes.toml or an out=/in-place wrapper over the functional operator; counted only when every operator it calls is reachable), fallback (a host implementation in the runtime's fallback table), or none; with the file:line of the kernel or host implementation. The text format fits the terminal's width ($COLUMNS, or 100 columns when stdout is not a terminal; what is cut ends in `...`); --wide shows every row whole. For autograd, each input of an operator's derivatives.yaml entry is translated (the generator compiled the formula), hand-written (a BackwardHooks method the adapter implements, with file:line), missing hook, or not differentiable; operators without an entry say so. Totals come first.

--write regenerates the committed report (diffs/coverage.md and diffs/coverage.json); --check exits 3 when it is stale (CI).

Exit codes: 0 success; 1 error; 2 usage error; 3 --check found the committed report stale; 4 a --fail-under-* threshold was not met."
    )]
    Coverage(cmd::coverage::Args),
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
    NewOp(cmd::new_op::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli);
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            let usage = e.is_usage();
            let report = miette::Report::new(e);
            cmd::out::warn(&format!("{report:?}"));
            ExitCode::from(if usage { 2 } else { 1 })
        }
    };
    if let Some(e) = cmd::out::take_error() {
        cmd::out::warn(&format!("xirang-scan: cannot write the output: {e}"));
        return ExitCode::from(1);
    }
    code
}

/// Runs one subcommand (each in its own file of `cmd/`), the store discovered once.
fn run(cli: Cli) -> Result<ExitCode, Error> {
    let ctx = cmd::Ctx::new(cli.store);
    let done = |r: Result<(), Error>| r.map(|()| ExitCode::SUCCESS);
    match cli.command {
        Command::Ops(a) => done(cmd::ops::run(&ctx, a)),
        Command::Show(a) => done(cmd::show::run(&ctx, a)),
        Command::Headers(a) => done(cmd::headers::run(&ctx, a)),
        Command::Snapshot(c) => done(cmd::snapshot::run(&ctx, c)),
        Command::Diff(a) => cmd::diff::run(&ctx, a),
        Command::Rules(a) => done(cmd::rules::run(a)),
        Command::Explain(a) => done(cmd::explain::run(a)),
        Command::Bot(args) => Ok(ExitCode::from(xirang_scan::bot::cli::main(args))),
        Command::Diffs(a) => cmd::diffs::run(&ctx, a),
        Command::Generate(a) => cmd::generate::run(&ctx, a),
        Command::Coverage(a) => cmd::coverage::run(&ctx, a),
        Command::NewOp(a) => done(cmd::new_op::run(&ctx, a)),
    }
}
