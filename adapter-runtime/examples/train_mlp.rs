//! Trains `logits = fc2(relu(fc1(x)))` with mean cross-entropy and
//! full-batch SGD on the simulated device, printing one JSON line per step
//! (the loss before that step's update):
//!
//! ```text
//! cargo run --release -p xirang-runtime --example train_mlp -- --init W --data D --steps N --lr LR
//! cargo run --release --example train_mlp -- -i W -d D -n N -l LR      # short form
//! ```
//!
//! With `XIRANG_PROFILE=FILE` the run is profiled per operator call and the
//! profile is written to FILE (read it with `xirang-prof`).
//!
//! W: safetensors with f32 `fc1.weight` [H, D], `fc1.bias` [H],
//! `fc2.weight` [C, H], `fc2.bias` [C]; D: f32 `x` [N, D], i64 `y` [N].

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
}

fn parse() -> Result<Args, String> {
    let (mut init, mut data, mut steps, mut lr) = (None, None, 10usize, 0.1f64);
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
            "--help" | "-h" => {
                return Err("usage: train_mlp --init W.safetensors --data D.safetensors [--steps N] [--lr LR]".into());
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
    })
}

fn run() -> Result<(), String> {
    let args = parse()?;
    let init = io::load_safetensors(&args.init).map_err(|e| e.to_string())?;
    let data = io::load_safetensors(&args.data).map_err(|e| e.to_string())?;
    let rt = Runtime::simulator().map_err(|e| e.to_string())?;
    let guard = profile::from_env().map_err(|e| format!("XIRANG_PROFILE: {e}"))?;
    let mut diverged = None;
    let (_, _, mem) = train::train_mlp_autograd(&rt, Device::Npu(0), &init, &data, args.steps, args.lr, |i, loss| {
        println!("{}", train::loss_line(i, loss));
        if !loss.is_finite() && diverged.is_none() {
            diverged = Some((i, loss));
        }
    })
    .map_err(|e| e.to_string())?;
    eprintln!(
        "device memory: peak {} bytes, {} bytes live after the last backward",
        mem.peak_bytes, mem.after_backward_bytes
    );
    if let Some(g) = guard {
        let path = g.path().display().to_string();
        let p = g.finish().map_err(|e| format!("XIRANG_PROFILE: {e}"))?;
        eprintln!("train_mlp: profile of {} operator calls written to {path}", p.calls.len());
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
            eprintln!("train_mlp: {e}");
            ExitCode::FAILURE
        }
    }
}
