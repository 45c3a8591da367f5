//! Cost of the operator profiler (`cargo bench -p xirang-runtime --bench profile_overhead`).
//!
//! Prints, in nanoseconds per operator call (median of batches):
//! * `flag`: the off-path check alone (one relaxed atomic load and a branch);
//! * `bare`: an uninstrumented copy of `dispatch::call` (frame push/pop and the
//!   tier counter) around an empty body;
//! * `off`: `dispatch::call` around an empty body, profiling off; `off - bare` is
//!   the cost the profiler adds when it is not running;
//! * `on`: the same with a session running (a record per call);
//! * a native `add.Tensor` on 4 f32 through `boxed::call` (one kernel launch,
//!   allocator, device events when on), off and on;
//! * `train_mlp` on the goldens (20 steps), off and on, per operator call.

use std::cell::RefCell;
use std::hint::black_box;
use std::time::Instant;

use xirang_runtime::dispatch::{self, FallbackMode, Policy, Tier};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::{DType, Device, Runtime, Scalar, Tensor, boxed, io, profile};

#[allow(dead_code)] // each includer uses part of it
#[path = "../examples/common/train.rs"]
mod train;

mod harness;

/// Median over `batches` of the mean time per call (ns) of `iters` calls.
fn time(batches: usize, iters: usize, f: impl FnMut()) -> f64 {
    harness::median_per_call(batches, iters, iters.min(100), 1e9, f)
}

thread_local! {
    static BARE_FRAMES: RefCell<Vec<Tier>> = const { RefCell::new(Vec::new()) };
}

/// `dispatch::call` without the profiler hook.
#[inline(never)]
fn bare_call<R>(op: &'static str, f: impl FnOnce() -> xirang_runtime::Result<R>) -> xirang_runtime::Result<R> {
    BARE_FRAMES.with(|fr| fr.borrow_mut().push(Tier::Native));
    let out = f();
    let tier = BARE_FRAMES.with(|fr| fr.borrow_mut().pop()).unwrap_or(Tier::Native);
    dispatch::record(op, tier);
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let (b, n) = (9, 200_000);
    let flag = time(b, n, || {
        black_box(profile::enabled());
    });
    let bare = time(b, n, || {
        let _ = black_box(bare_call("x.bench", || Ok(black_box(1))));
    });
    let off = time(b, n, || {
        let _ = black_box(dispatch::call("x.bench", || Ok(black_box(1))));
    });
    profile::start()?;
    let on = time(b, 20_000, || {
        let _ = black_box(dispatch::call("x.bench", || Ok(black_box(1))));
    });
    let empty_calls = profile::stop()?.calls.len();
    println!("empty dispatch::call (ns/call, median of {b} batches):");
    println!("  flag check alone    {flag:8.1}");
    println!("  uninstrumented copy {bare:8.1}");
    println!("  profiling off       {off:8.1}   (off - uninstrumented: {:+.1} ns)", off - bare);
    println!(
        "  profiling on        {on:8.1}   (on - off: {:+.1} ns per recorded call; {empty_calls} calls recorded)",
        on - off
    );

    let rt = Runtime::simulator()?;
    let dev = |t: Tensor| t.to_device(&rt, Device::Npu(0));
    let a = dev(Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[4])?)?;
    let c = dev(Tensor::ones(&[4], DType::F32))?;
    let args = || vec![IValue::from(a.clone()), IValue::from(c.clone()), Scalar::Int(1).into()];
    let add = |n| {
        time(7, n, || {
            black_box(boxed::call("add.Tensor", args()).unwrap());
        })
    };
    let add_off = add(5_000);
    profile::start()?;
    let add_on = add(2_000);
    let _ = profile::stop()?;
    println!(
        "native add.Tensor, 4 f32 (ns/call): off {add_off:.0}, on {add_on:.0} ({:+.0} ns, {:+.1}%)",
        add_on - add_off,
        100.0 * (add_on / add_off - 1.0)
    );

    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("goldens");
    let init = io::load_safetensors(root.join("mlp_init.safetensors"))?;
    let data = io::load_safetensors(root.join("mlp_data.safetensors"))?;
    let run = || train::train_mlp(&rt, Device::Npu(0), &init, &data, 20, 0.1, |_, _| {}).map(|_| ());
    run()?;
    let mut offs = Vec::new();
    let mut ons = Vec::new();
    let mut calls = 0;
    for _ in 0..5 {
        let t = Instant::now();
        run()?;
        offs.push(t.elapsed().as_secs_f64() * 1e3);
        profile::start()?;
        let t = Instant::now();
        run()?;
        let p = profile::stop()?;
        ons.push(t.elapsed().as_secs_f64() * 1e3);
        calls = p.calls.len();
    }
    offs.sort_by(f64::total_cmp);
    ons.sort_by(f64::total_cmp);
    let (off_ms, on_ms) = (offs[2], ons[2]);
    println!(
        "train_mlp 20 steps ({calls} operator calls): off {off_ms:.2} ms, on {on_ms:.2} ms (stop included: device events resolved); {:+.1} us per call, {:+.1}%",
        (on_ms - off_ms) * 1e3 / calls as f64,
        100.0 * (on_ms / off_ms - 1.0)
    );
    Ok(())
}
