//! `xirang-scan coverage`: the tier of every selected operator and the backward of each
//! differentiable input.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use xirang_scan::error::Error;
use xirang_scan::{coverage, generate};

use super::{Ctx, load_config, print_str};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CoverageFormat {
    Text,
    Markdown,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn run(ctx: &Ctx, a: Args) -> Result<ExitCode, Error> {
    let cfg = load_config(a.config.as_deref())?;
    let reachable_min = a.fail_under_reachable.map(|v| coverage::threshold("reachable", v)).transpose()?;
    let autograd_min = a.fail_under_autograd.map(|v| coverage::threshold("autograd", v)).transpose()?;
    let st = ctx.store_near(&cfg)?;
    let root = cfg.root.clone();
    let inputs = generate::Inputs::load(cfg, st)?;
    let report = coverage::build(&inputs, a.adapter.as_deref())?;
    if a.check {
        let stale = coverage::check(&root, &report)?;
        if !stale.is_empty() {
            for p in &stale {
                warn!("stale: {}", p.display());
            }
            warn!("the coverage report is not current: run `xirang-scan coverage --write` and commit the result");
            return Ok(ExitCode::from(3));
        }
        say!("{} and {} current", coverage::REPORT_MD, coverage::REPORT_JSON);
    } else if a.write {
        for p in coverage::write(&root, &report)? {
            say!("wrote {}", p.display());
        }
    } else {
        let text = match a.format {
            CoverageFormat::Text => {
                coverage::render_text(&report, if a.wide { None } else { Some(xirang_scan::width::output_width()) })
            }
            CoverageFormat::Markdown => coverage::render_markdown(&report),
            CoverageFormat::Json => coverage::render_json(&report)?,
        };
        print_str(&text);
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
        warn!("coverage: {:.1}% of the differentiable inputs have a backward, under {min}%", report.autograd_pct());
        under = true;
    }
    Ok(if under { ExitCode::from(4) } else { ExitCode::SUCCESS })
}
