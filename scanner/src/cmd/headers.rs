//! `xirang-scan headers`: vendor driver headers, from the store or a folder, as declarations.

use std::path::PathBuf;

use xirang_scan::error::Error;

use super::{Ctx, Format, folder_version, names_a_version, print_str};

#[derive(clap::Args)]
pub struct Args {
    /// ascend, cuda or generic
    #[arg(value_parser = ["ascend", "cuda", "generic"])]
    vendor: String,
    /// A release in the store (v2.14.0, v12.4) or a folder of headers
    target: String,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<(), Error> {
    let snap = if names_a_version(&a.target) {
        let st = ctx.store()?;
        let v = st.resolve(&a.vendor, &a.target)?;
        st.load_headers(&a.vendor, &v)?
    } else {
        let folder = PathBuf::from(&a.target);
        if !folder.is_dir() {
            return Err(xirang_store::Error::SourceNotFound(format!(
                "`{}` is neither a {} release in the store nor a folder",
                a.target, a.vendor
            ))
            .into());
        }
        xirang_scan::snapshot::HeaderSnapshot::scan(&a.vendor, &folder, &folder_version(&folder))?
    };
    print_str(&match a.format {
        Format::Jsonl => xirang_headers::to_jsonl(&snap.set),
        Format::Table => xirang_headers::to_table(&snap.set),
    });
    Ok(())
}
