//! `xirang-scan diffs`: the committed drift reports of `diffs/`.

use std::process::ExitCode;

use xirang_scan::diff;
use xirang_scan::error::Error;

use super::Ctx;

#[derive(clap::Args)]
pub struct Args {
    /// Do not write; exit 3 and list the stale files when diffs/ is not current
    #[arg(long)]
    check: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<ExitCode, Error> {
    let st = ctx.store()?;
    let rules = diff::RuleSet::builtin();
    if a.check {
        let stale = diff::committed::check_reports(st, &rules)?;
        if !stale.is_empty() {
            for p in &stale {
                warn!("stale: {}", p.display());
            }
            warn!("diffs/ is not current: run `xirang-scan diffs` and commit the result");
            return Ok(ExitCode::from(3));
        }
        say!("diffs/ is current");
    } else {
        let written = diff::committed::write_reports(st, &rules)?;
        for p in &written {
            say!("wrote {}", p.display());
        }
        say!("{} file(s) changed", written.len());
    }
    Ok(ExitCode::SUCCESS)
}
