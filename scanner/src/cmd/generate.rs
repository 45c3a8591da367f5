//! `xirang-scan generate`: the typed adapter runtime into `generated/`.

use std::path::PathBuf;
use std::process::ExitCode;

use xirang_scan::error::Error;
use xirang_scan::generate;

use super::{Ctx, load_config};

#[derive(clap::Args)]
pub struct Args {
    /// Do not write; exit 3 and list the stale files when generated/ is not current
    #[arg(long)]
    check: bool,
    /// Adapter configuration (default: xirang.toml in the current folder or a parent)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Generate for this PyTorch version instead of the one xirang.toml names
    #[arg(long, value_name = "VERSION")]
    pytorch: Option<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<ExitCode, Error> {
    let check = a.check;
    let mut cfg = load_config(a.config.as_deref())?;
    if let Some(v) = a.pytorch {
        cfg.config.pytorch.version = v;
    }
    let st = ctx.store_near(&cfg)?;
    let inputs = generate::Inputs::load(cfg, st)?;
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
    Ok(ExitCode::SUCCESS)
}
