//! Trains a pre-norm transformer block (attention with `--heads` heads, a
//! GELU MLP, mean pooling over the sequence, a linear classifier) with mean
//! cross-entropy and full-batch SGD on the simulated device, through
//! autograd, printing one JSON line per step (the loss before that step's
//! update):
//!
//! ```text
//! cargo run --release -p xirang-runtime --example train_transformer -- --init W --data D --steps N --lr LR [--heads H]
//! cargo run --release --example train_transformer -- -i W -d D -n N -l LR -H H   # short form
//! ```
//!
//! With `XIRANG_PROFILE=FILE` the run is profiled per operator call and the
//! profile is written to FILE (read it with `xirang-prof`).
//!
//! W: safetensors with the f32 parameters of `train::TRANSFORMER_PARAMS`
//! (`ln1.weight` [D], `attn.q.weight` [D, D], `fc1.weight` [F, D], `head.weight`
//! [C, D], ...); D: f32 `x` [B, T, D], i64 `y` [B]. The model is documented at
//! `train::train_transformer`; `goldens/make_transformer_goldens.py` is the same in PyTorch.

use std::process::ExitCode;

use xirang_runtime::{Device, Runtime, io, profile};

#[allow(dead_code)] // each includer uses part of it
#[path = "common/train.rs"]
mod train;

struct Args {
    init: String,
    data: String,
    steps: usize,
    lr: f64,
    heads: usize,
}

fn parse() -> Result<Args, String> {
    let (mut init, mut data, mut steps, mut lr, mut heads) = (None, None, 10usize, 0.1f64, 2usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{key} needs a value"));
        match key.as_str() {
            "--init" | "-i" => init = Some(value()?),
            "--data" | "-d" => data = Some(value()?),
            "--steps" | "-n" | "-s" => steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--lr" | "-l" => lr = value()?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--heads" | "-H" => heads = value()?.parse().map_err(|e| format!("--heads: {e}"))?,
            "--help" | "-h" => {
                return Err("usage: train_transformer --init W.safetensors --data D.safetensors [--steps N] [--lr LR] [--heads H]".into());
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if !lr.is_finite() {
        return Err("--lr must be finite".into());
    }
    Ok(Args {
        init: init.ok_or("--init W.safetensors is required")?,
        data: data.ok_or("--data D.safetensors is required")?,
        steps,
        lr,
        heads,
    })
}

fn run() -> Result<(), String> {
    let args = parse()?;
    let init = io::load_safetensors(&args.init).map_err(|e| e.to_string())?;
    let data = io::load_safetensors(&args.data).map_err(|e| e.to_string())?;
    let rt = Runtime::simulator().map_err(|e| e.to_string())?;
    let guard = profile::from_env().map_err(|e| format!("XIRANG_PROFILE: {e}"))?;
    let mut diverged = None;
    train::train_transformer(&rt, Device::Npu(0), &init, &data, args.heads, args.steps, args.lr, |i, loss| {
        println!("{}", train::loss_line(i, loss));
        if !loss.is_finite() && diverged.is_none() {
            diverged = Some((i, loss));
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(g) = guard {
        let path = g.path().display().to_string();
        let p = g.finish().map_err(|e| format!("XIRANG_PROFILE: {e}"))?;
        eprintln!("train_transformer: profile of {} operator calls written to {path}", p.calls.len());
    }
    if let Some((step, loss)) = diverged {
        return Err(format!(
            "the loss was {loss} at step {step} (printed as null): the run diverged; try a smaller --lr or check the initial weights"
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train_transformer: {e}");
            ExitCode::FAILURE
        }
    }
}
