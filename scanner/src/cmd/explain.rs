//! `xirang-scan explain`: one drift rule, what it means and what to do.

use xirang_scan::diff;
use xirang_scan::error::Error;

use super::print_str;

#[derive(clap::Args)]
pub struct Args {
    /// Rule id, e.g. arg.inserted
    id: String,
}

pub fn run(a: Args) -> Result<(), Error> {
    print_str(&diff::RuleSet::builtin().explain_text(&a.id)?);
    Ok(())
}
