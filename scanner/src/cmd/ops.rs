//! `xirang-scan ops`: the operators of a version or a source.

use xirang_scan::error::Error;
use xirang_scan::render;

use super::{Ctx, Format, print_str};

#[derive(clap::Args)]
pub struct Args {
    /// A snapshot version (v2.1, v2.1.0) or a source (folder, .whl, REPO@REF)
    target: String,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// torchgen behaviour for a source whose version is unknown (e.g. 2.5); default: from the
    /// folder name, else the newest
    #[arg(long, value_name = "VERSION")]
    torch_version: Option<String>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<(), Error> {
    let snap = ctx.load_target(&a.target, a.torch_version.as_deref())?;
    print_str(&match a.format {
        Format::Jsonl => render::ops_jsonl(&snap),
        Format::Table => render::ops_table(&snap),
    });
    Ok(())
}
