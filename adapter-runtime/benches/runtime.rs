//! Runtime benchmarks, side by side with PyTorch CPU when torch is
//! installed (a python subprocess; `XIRANG_BENCH_PYTHON` picks the
//! interpreter, default `python3`; skipped with a message otherwise).
//!
//! ```text
//! cargo bench -p xirang-runtime --bench runtime
//! XIRANG_BENCH_PYTHON=/tmp/torchvenv/bin/python cargo bench -p xirang-runtime --bench runtime
//! ```
//!
//! Measures (median of batches, microseconds per call):
//! * dispatch overhead of a native op on tiny tensors (`add.Tensor` on 4
//!   f32 through `boxed::call`, enqueue throughput with one sync per batch,
//!   and latency with a sync after every call) vs `torch.add` eager;
//! * elementwise add on 1M f32 (native kernel, synchronized) vs `torch.add`;
//! * 512x512 f32 matmul (native kernel, synchronized) vs `torch.mm`;
//! * the cost of one CPU fallback (`add.Tensor` on 4 f32 forced onto the
//!   fallback tier) next to the native call.

use std::process::Command;

use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::{DType, Device, Runtime, Scalar, Tensor, boxed, kernels};

mod harness;

/// Median over `batches` of the mean time per call (µs) of `iters` calls.
fn time(batches: usize, iters: usize, f: impl FnMut()) -> f64 {
    harness::median_per_call(batches, iters, iters.min(10), 1e6, f)
}

const TORCH: &str = r#"
import json, time, torch
torch.set_num_threads(int(__import__("os").environ.get("XIRANG_BENCH_THREADS", "0")) or torch.get_num_threads())
def t(batches, iters, f):
    for _ in range(min(iters, 10)): f()
    v = []
    for _ in range(batches):
        s = time.perf_counter()
        for _ in range(iters): f()
        v.append((time.perf_counter() - s) * 1e6 / iters)
    v.sort(); return v[len(v) // 2]
a, b = torch.randn(4), torch.randn(4)
x, y = torch.randn(1 << 20), torch.randn(1 << 20)
m, n = torch.randn(512, 512), torch.randn(512, 512)
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
    "tiny_add": t(7, 20000, lambda: torch.add(a, b)),
    "add_1m": t(7, 50, lambda: torch.add(x, y)),
    "mm_512": t(5, 10, lambda: torch.mm(m, n))}))
"#;

fn torch_timings() -> Option<serde_json::Value> {
    let py = std::env::var("XIRANG_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&py).arg("-c").arg(TORCH).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last()?).ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo test --benches` runs bench binaries with `--bench`-less args; keep it quick then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (b, s) = if quick { (1, 20) } else { (7, 1) };
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, alert_threshold: u64::MAX, ..Policy::default() });
    let rt = Runtime::simulator()?;
    let ctx = rt.device(0)?.clone();
    let dev = |t: Tensor| t.to_device(&rt, Device::Npu(0));
    let sync = || ctx.synchronize();

    let a = dev(Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[4])?)?;
    let c = dev(Tensor::from_vec(vec![0.5f32; 4], &[4])?)?;
    let args = || vec![IValue::Tensor(a.clone()), IValue::Tensor(c.clone()), IValue::Scalar(Scalar::Int(1))];
    let tiny_async = time(b, 20000 / s, || {
        let _ = boxed::call("add.Tensor", args());
    });
    sync()?;
    let tiny_sync = time(b, 5000 / s, || {
        let _ = boxed::call("add.Tensor", args());
        let _ = sync();
    });
    let tiny_kernel = time(b, 20000 / s, || {
        let _ = kernels::add_tensor(&a, &c, Scalar::Int(1));
    });
    sync()?;

    let n = 1 << 20;
    let x = dev(Tensor::from_vec((0..n).map(|i| (i % 97) as f32 * 0.01).collect(), &[n])?)?;
    let y = dev(Tensor::from_vec((0..n).map(|i| (i % 89) as f32 * 0.02).collect(), &[n])?)?;
    let add_1m = time(b, 50 / s.min(50), || {
        let _ = kernels::add_tensor(&x, &y, Scalar::Int(1));
        let _ = sync();
    });

    let m = dev(Tensor::from_vec((0..512 * 512).map(|i| ((i % 13) as f32 - 6.0) * 0.1).collect(), &[512, 512])?)?;
    let mm_512 = time(b.min(5), if quick { 1 } else { 10 }, || {
        let _ = kernels::mm(&m, &m);
        let _ = sync();
    });

    dispatch::set_policy(Policy {
        mode: FallbackMode::Silent,
        alert_threshold: u64::MAX,
        force_fallback: ["add.Tensor".to_string()].into(),
    });
    let fallback = time(b, 5000 / s, || {
        let _ = boxed::call("add.Tensor", args());
    });
    sync()?;
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    let _ = DType::F32;

    println!("xirang runtime benchmarks (simulated device, µs per call, median of batches)");
    println!("  native add.Tensor, 4 f32, boxed dispatch (enqueue, sync per batch): {tiny_async:10.2}");
    println!("  native add.Tensor, 4 f32, kernel fn direct (enqueue):            {tiny_kernel:10.2}");
    println!("  native add.Tensor, 4 f32, boxed dispatch + sync each call:         {tiny_sync:10.2}");
    println!("  CPU fallback add.Tensor, 4 f32 (copy to host, compute, copy back): {fallback:10.2}");
    println!("  fallback cost over native (boxed, synchronized):                   {:10.2}", fallback - tiny_sync);
    println!("  native add, 1M f32 (synchronized):                                 {add_1m:10.2}");
    println!("  native mm, 512x512 f32 (synchronized):                             {mm_512:10.2}");
    match torch_timings() {
        None => println!(
            "PyTorch comparison skipped: no torch in `{}` (set XIRANG_BENCH_PYTHON)",
            std::env::var("XIRANG_BENCH_PYTHON").unwrap_or_else(|_| "python3".into())
        ),
        Some(t) => {
            let f = |k: &str| t[k].as_f64().unwrap_or(f64::NAN);
            println!("PyTorch {} CPU eager ({} threads), µs per call:", t["torch"], t["threads"]);
            println!("  torch.add 4 f32:     {:10.2}", f("tiny_add"));
            println!("  torch.add 1M f32:    {:10.2}", f("add_1m"));
            println!("  torch.mm 512x512:    {:10.2}", f("mm_512"));
            println!("ratios (xirang / torch; below 1 is faster):");
            println!(
                "  dispatch overhead, tiny native op (enqueue):  {:6.2}  (target < 1)",
                tiny_async / f("tiny_add")
            );
            println!("  dispatch overhead, tiny native op (synced):   {:6.2}", tiny_sync / f("tiny_add"));
            println!("  add 1M f32:                                   {:6.2}  (target <= 1.3)", add_1m / f("add_1m"));
            println!("  mm 512x512 f32:                               {:6.2}  (target <= 2)", mm_512 / f("mm_512"));
            println!("  one fallback vs torch.add tiny:               {:6.2}", fallback / f("tiny_add"));
        }
    }
    Ok(())
}
