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
//!
//! The machine these run on is shared and noisy, so the two sides are measured in alternation:
//! `ROUNDS` rounds (`XIRANG_BENCH_ROUNDS` to change), each timing xirang and then PyTorch (one python process kept alive, asked for
//! a round over a pipe). Each ratio is taken within a round and the median over rounds is
//! reported, next to every round's ratio.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use xirang_runtime::dispatch::{self, FallbackMode, Policy};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::{Device, Runtime, Scalar, Tensor, boxed, kernels};

mod harness;

/// Median over `batches` of the mean time per call (µs) of `iters` calls.
fn time(batches: usize, iters: usize, f: impl FnMut()) -> f64 {
    harness::median_per_call(batches, iters, iters.min(10), 1e6, f)
}

/// Rounds of alternating xirang / PyTorch measurements (see the module docs).
const ROUNDS: usize = 3;

const TORCH: &str = r#"
import json, sys, time, torch
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
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
for _ in sys.stdin:
    print(json.dumps({
        "tiny_add": t(7, 20000, lambda: torch.add(a, b)),
        "add_1m": t(7, 50, lambda: torch.add(x, y)),
        "mm_512": t(5, 10, lambda: torch.mm(m, n))}), flush=True)
"#;

/// A python process with torch that times one round per request.
struct Torch {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    header: serde_json::Value,
}

impl Torch {
    fn start() -> Option<Torch> {
        let py = std::env::var("XIRANG_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(&py)
            .arg("-c")
            .arg(TORCH)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        let mut stdout = BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        stdout.read_line(&mut line).ok()?;
        let header = serde_json::from_str(&line).ok()?;
        Some(Torch { child, stdin, stdout, header })
    }

    fn round(&mut self) -> Option<serde_json::Value> {
        self.stdin.write_all(b"round\n").ok()?;
        self.stdin.flush().ok()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    }
}

impl Drop for Torch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One round of xirang timings (µs per call).
struct Round {
    tiny_async: f64,
    tiny_kernel: f64,
    tiny_sync: f64,
    fallback: f64,
    add_1m: f64,
    mm_512: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo test --benches` runs bench binaries with `--bench`-less args; keep it quick then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (b, s) = if quick { (1, 20) } else { (7, 1) };
    let rt = Runtime::simulator()?;
    let ctx = rt.device(0)?.clone();
    let dev = |t: Tensor| t.to_device(&rt, Device::Npu(0));
    let sync = || ctx.synchronize();

    let a = dev(Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[4])?)?;
    let c = dev(Tensor::from_vec(vec![0.5f32; 4], &[4])?)?;
    let args = || vec![IValue::Tensor(a.clone()), IValue::Tensor(c.clone()), IValue::Scalar(Scalar::Int(1))];
    let n = 1 << 20;
    let x = dev(Tensor::from_vec((0..n).map(|i| (i % 97) as f32 * 0.01).collect(), &[n])?)?;
    let y = dev(Tensor::from_vec((0..n).map(|i| (i % 89) as f32 * 0.02).collect(), &[n])?)?;
    let m = dev(Tensor::from_vec((0..512 * 512).map(|i| ((i % 13) as f32 - 6.0) * 0.1).collect(), &[512, 512])?)?;

    let xirang_round = || -> Result<Round, Box<dyn std::error::Error>> {
        dispatch::set_policy(Policy { mode: FallbackMode::Silent, alert_threshold: u64::MAX, ..Policy::default() });
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
        let add_1m = time(b, 50 / s.min(50), || {
            let _ = kernels::add_tensor(&x, &y, Scalar::Int(1));
            let _ = sync();
        });
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
        Ok(Round { tiny_async, tiny_kernel, tiny_sync, fallback, add_1m, mm_512 })
    };

    let mut torch = Torch::start();
    let rounds = if quick {
        1
    } else {
        std::env::var("XIRANG_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(ROUNDS)
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        ours.push(xirang_round()?);
        if let Some(t) = torch.as_mut().and_then(Torch::round) {
            theirs.push(t);
        }
    }

    let med = |f: fn(&Round) -> f64| median(ours.iter().map(f).collect());
    let (tiny_async, tiny_sync, fallback) = (med(|r| r.tiny_async), med(|r| r.tiny_sync), med(|r| r.fallback));
    println!("xirang runtime benchmarks (simulated device, µs per call, median of batches, median of {rounds} rounds)");
    println!("  native add.Tensor, 4 f32, boxed dispatch (enqueue, sync per batch): {tiny_async:10.2}");
    println!("  native add.Tensor, 4 f32, kernel fn direct (enqueue):            {:10.2}", med(|r| r.tiny_kernel));
    println!("  native add.Tensor, 4 f32, boxed dispatch + sync each call:         {tiny_sync:10.2}");
    println!("  CPU fallback add.Tensor, 4 f32 (copy to host, compute, copy back): {fallback:10.2}");
    println!("  fallback cost over native (boxed, synchronized):                   {:10.2}", fallback - tiny_sync);
    println!("  native add, 1M f32 (synchronized):                                 {:10.2}", med(|r| r.add_1m));
    println!("  native mm, 512x512 f32 (synchronized):                             {:10.2}", med(|r| r.mm_512));
    let Some(torch) = torch.filter(|_| theirs.len() == ours.len()) else {
        println!(
            "PyTorch comparison skipped: no torch in `{}` (set XIRANG_BENCH_PYTHON)",
            std::env::var("XIRANG_BENCH_PYTHON").unwrap_or_else(|_| "python3".into())
        );
        return Ok(());
    };
    let tm = |k: &str| median(theirs.iter().map(|t| t[k].as_f64().unwrap_or(f64::NAN)).collect());
    println!(
        "PyTorch {} CPU eager ({} threads), µs per call, median of rounds:",
        torch.header["torch"], torch.header["threads"]
    );
    println!("  torch.add 4 f32:     {:10.2}", tm("tiny_add"));
    println!("  torch.add 1M f32:    {:10.2}", tm("add_1m"));
    println!("  torch.mm 512x512:    {:10.2}", tm("mm_512"));
    println!("ratios (xirang / torch within each round; median, then every round; below 1 is faster):");
    let ratio = |name: &str, ours_of: fn(&Round) -> f64, key: &str, target: &str| {
        let per: Vec<f64> =
            ours.iter().zip(&theirs).map(|(o, t)| ours_of(o) / t[key].as_f64().unwrap_or(f64::NAN)).collect();
        let each: Vec<String> = per.iter().map(|r| format!("{r:.2}")).collect();
        println!("  {name:<45} {:6.2}  [{}]{target}", median(per.clone()), each.join(" "));
    };
    ratio("dispatch overhead, tiny native op (enqueue):", |r| r.tiny_async, "tiny_add", "  (target < 1)");
    ratio("dispatch overhead, tiny native op (synced):", |r| r.tiny_sync, "tiny_add", "");
    ratio("add 1M f32:", |r| r.add_1m, "add_1m", "  (target <= 1.3)");
    ratio("mm 512x512 f32:", |r| r.mm_512, "mm_512", "  (target <= 2)");
    ratio("one fallback vs torch.add tiny:", |r| r.fallback, "tiny_add", "");
    Ok(())
}
