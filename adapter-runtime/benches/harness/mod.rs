//! Timing shared by the runtime's bench binaries.

use std::time::Instant;

/// Median over `batches` of the mean time per call of `iters` calls, in units of `1/scale`
/// seconds (`1e6`: µs, `1e9`: ns), after `warmup` untimed calls.
pub fn median_per_call(batches: usize, iters: usize, warmup: usize, scale: f64, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut v: Vec<f64> = (0..batches.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * scale / iters.max(1) as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
