//! `xirang-prof`: reads the operator profiles the runtime writes
//! (`XIRANG_PROFILE=FILE`) and renders, compares and advises.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use xirang_prof::{advise, compare, report};
use xirang_runtime::profile::{Profile, ProfileError};

const AFTER_HELP: &str = "\
Exit codes:
  0  success (compare: no operator regressed beyond the threshold)
  1  error (unreadable or malformed profile, baseline or rules file; unwritable output)
  2  usage error
  4  compare: at least one operator regressed beyond the threshold

Record a profile with XIRANG_PROFILE=FILE, e.g.
  XIRANG_PROFILE=mlp.json cargo run --release -p xirang-runtime --example train_mlp -- \\
      -i adapter-runtime/goldens/mlp_init.safetensors -d adapter-runtime/goldens/mlp_data.safetensors";

#[derive(Parser)]
#[command(name = "xirang-prof", version, about = "Operator profiles of the Xirang runtime: summary, trace, flame graph, comparison, tuning advice", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Fmt {
    Table,
    Markdown,
}

#[derive(Clone, Copy, ValueEnum)]
enum AdviceFmt {
    Text,
    Markdown,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per-operator summary: calls, tiers, host/self/device time, bytes, launches
    Summary {
        profile: PathBuf,
        #[arg(long, value_enum, default_value = "table")]
        format: Fmt,
    },
    /// Chrome trace-event JSON (open in Perfetto or chrome://tracing)
    Trace {
        profile: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Flame graph SVG of the nested operator calls (self host time)
    Flamegraph {
        profile: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Also write the folded stacks to this file
        #[arg(long)]
        folded: Option<PathBuf>,
    },
    /// Per-operator time per call against a baseline (xirang profile or torch-profile JSON)
    Compare {
        base: PathBuf,
        new: PathBuf,
        /// Flag operators whose time per call grew beyond this ratio
        #[arg(long, default_value_t = 1.2)]
        threshold: f64,
        /// Ignore operators whose new total time is below this many microseconds
        #[arg(long, default_value_t = 0.0)]
        min_us: f64,
        #[arg(long, value_enum, default_value = "table")]
        format: Fmt,
    },
    /// Tuning advice from the rules in profile/advice.toml (or --rules FILE)
    Advise {
        profile: PathBuf,
        #[arg(long)]
        rules: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        format: AdviceFmt,
    },
}

fn fmt(f: Fmt) -> report::Format {
    match f {
        Fmt::Table => report::Format::Table,
        Fmt::Markdown => report::Format::Markdown,
    }
}

fn write(path: &PathBuf, text: &str) -> Result<(), ProfileError> {
    std::fs::write(path, text).map_err(|source| ProfileError::Io { path: path.clone(), source })
}

fn run(cli: Cli) -> Result<u8, ProfileError> {
    match cli.cmd {
        Cmd::Summary { profile, format } => {
            print!("{}", report::summary(&Profile::read(profile)?, fmt(format)));
        }
        Cmd::Trace { profile, out } => {
            let p = Profile::read(profile)?;
            write(&out, &report::chrome_trace(&p))?;
            eprintln!("xirang-prof: {} events written to {}", p.calls.len(), out.display());
        }
        Cmd::Flamegraph { profile, out, folded } => {
            let p = Profile::read(&profile)?;
            let title = format!("xirang operators: {}", profile.file_name().unwrap_or_default().to_string_lossy());
            write(&out, &report::flamegraph(&p, &title)?)?;
            if let Some(f) = folded {
                write(&f, &report::folded(&p))?;
            }
        }
        Cmd::Compare { base, new, threshold, min_us, format } => {
            if !(threshold.is_finite() && threshold > 0.0 && min_us.is_finite() && min_us >= 0.0) {
                eprintln!("xirang-prof: --threshold must be positive and --min-us non-negative");
                return Ok(2);
            }
            let b = compare::Baseline::read(base)?;
            let n = Profile::read(new)?;
            let c = compare::compare(&b, &n, threshold, (min_us * 1e3) as u64);
            print!("{}", compare::render(&c, fmt(format)));
            if c.regressions().next().is_some() {
                return Ok(4);
            }
        }
        Cmd::Advise { profile, rules, format } => {
            let rules = match rules {
                Some(r) => advise::Rules::read(r)?,
                None => advise::Rules::builtin()?,
            };
            let a = advise::advise(&Profile::read(profile)?, &rules);
            match format {
                AdviceFmt::Text => print!("{}", advise::render(&a, false)),
                AdviceFmt::Markdown => print!("{}", advise::render(&a, true)),
                AdviceFmt::Json => {
                    println!("{}", serde_json::to_string_pretty(&a).unwrap_or_else(|_| "[]".into()))
                }
            }
        }
    }
    Ok(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("xirang-prof: {e}");
            ExitCode::from(1)
        }
    }
}
