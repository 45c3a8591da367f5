//! `xirang-scan show`: one operator of a version or a source.

use xirang_scan::error::Error;
use xirang_scan::render;

use super::{Ctx, ShowFormat, print_str};

#[derive(clap::Args)]
pub struct Args {
    /// A snapshot version or a source
    target: String,
    /// Operator as `name.overload` (or `name` for the default overload)
    op: String,
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    format: ShowFormat,
    #[arg(long, value_name = "VERSION")]
    torch_version: Option<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<(), Error> {
    let snap = ctx.load_target(&a.target, a.torch_version.as_deref())?;
    print_str(&match a.format {
        ShowFormat::Text => render::show_text(&snap, &a.op)?,
        ShowFormat::Json => render::show_json(&snap, &a.op)?,
    });
    Ok(())
}
