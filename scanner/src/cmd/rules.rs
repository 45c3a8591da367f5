//! `xirang-scan rules`: the drift rule catalogue.

use xirang_scan::diff;
use xirang_scan::error::Error;

use super::{ShowFormat, print_str};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    format: ShowFormat,
}

pub fn run(a: Args) -> Result<(), Error> {
    let rules = diff::RuleSet::builtin();
    let text = match a.format {
        ShowFormat::Text => rules.list_text(),
        ShowFormat::Json => {
            let mut t = serde_json::to_string_pretty(rules.all()).map_err(|e| Error::Usage(e.to_string()))?;
            t.push('\n');
            t
        }
    };
    print_str(&text);
    Ok(())
}
