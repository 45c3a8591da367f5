//! The runtime's tests that set or read process-wide state (the fallback policy, the tier counters,
//! the default generator's seed), one binary: every test holds [`serial`] for its whole run, so
//! they run one at a time, each from the default policy and zeroed counters, as in a process of its
//! own.

mod autograd_goldens;
mod autograd_gradcheck;
mod autograd_memory;
mod coverage_truth;
mod device_tensors;
mod dispatch_frames;
mod generated_dispatch;
mod precision_fallback;
mod train_mlp;
mod train_transformer;

#[path = "../support/autograd_scope.rs"]
pub mod scope;
#[allow(dead_code)]
#[path = "../support/precision_suite.rs"]
pub mod suite;
/// The training loops (shared with the examples and benches; not part of the library).
#[allow(dead_code)]
#[path = "../../examples/common/train.rs"]
pub mod train;

/// The lock every test of this binary holds (a failed test does not poison it for the others); it
/// restores the default fallback policy and zeroes the tier counters.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    xirang_runtime::dispatch::set_policy(xirang_runtime::dispatch::Policy::default());
    xirang_runtime::dispatch::reset_counters();
    g
}
