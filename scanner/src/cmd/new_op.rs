//! `xirang-scan new-op`: a custom operator with its gradient rule, written as one group.

use std::path::PathBuf;

use xirang_scan::error::Error;
use xirang_scan::generate;

use super::{Ctx, load_config};

#[derive(clap::Args)]
pub struct Args {
    /// `namespace::name(args) -> returns`, e.g. "xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor"
    schema: Option<String>,
    /// A gradient rule "<input>: <formula>" (repeat for each differentiable input)
    #[arg(long = "grad", value_name = "RULE")]
    grads: Vec<String>,
    /// The same function written with existing operators (the tests compare the kernel with it)
    #[arg(long, value_name = "FORMULA")]
    reference: Option<String>,
    /// Adapter configuration (default: xirang.toml in the current folder or a parent)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Validate and list the files that would be written, without writing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<(), Error> {
    let cfg = load_config(a.config.as_deref())?;
    let req = match a.schema {
        Some(schema) => generate::newop::NewOp { schema, grads: a.grads, reference: a.reference },
        None => prompt(a.grads, a.reference)?,
    };
    let st = ctx.store_near(&cfg)?;
    let inputs = generate::Inputs::load(cfg, st)?;
    let dry_run = a.dry_run;
    let plan = if dry_run { generate::newop::plan(&inputs, &req)? } else { generate::newop::run(&inputs, &req)? };
    for w in &plan.writes {
        say!("{} {}", if dry_run { "would write" } else { "wrote" }, w.path);
    }
    if !dry_run {
        let stem = plan.writes.iter().rev().find_map(|w| {
            w.path.strip_prefix("adapter-runtime/tests/").and_then(|p| p.strip_suffix(".rs")).map(String::from)
        });
        say!("added `{}`", plan.qualified);
        if let Some(t) = stem {
            say!("next: write the kernel, then `cargo test -p xirang-runtime --test {t}`");
        }
    }
    Ok(())
}

/// `new-op` without a schema: ask on the terminal.
fn prompt(grads: Vec<String>, reference: Option<String>) -> Result<generate::newop::NewOp, Error> {
    use std::io::{BufRead, IsTerminal};
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "new-op: give the schema, e.g. `xirang-scan new-op \"xirang::my_op(Tensor self) -> Tensor\" --grad \"self: grad\"` \
             (it is asked for only on a terminal)"
                .into(),
        ));
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = |q: &str| -> Result<String, Error> {
        super::out::write(q);
        match lines.next() {
            Some(l) => l.map(|s| s.trim().to_string()).map_err(|e| Error::io("<stdin>", e)),
            None => Ok(String::new()),
        }
    };
    let schema = ask("schema (namespace::name(args) -> returns): ")?;
    if schema.is_empty() {
        return Err(Error::Usage("new-op: no schema given".into()));
    }
    let mut grads = grads;
    if grads.is_empty() {
        loop {
            let g = ask("gradient rule `<input>: <formula>` (empty line to finish): ")?;
            if g.is_empty() {
                break;
            }
            grads.push(g);
        }
    }
    let reference = match reference {
        Some(r) => Some(r),
        None => Some(ask("reference formula in existing operators (empty: none): ")?).filter(|r| !r.is_empty()),
    };
    Ok(generate::newop::NewOp { schema, grads, reference })
}
