//! The precision suite: every PyTorch golden case through the runtime on
//! the simulated device, native kernels where the device has them, CPU
//! fallback otherwise. See `support/precision_suite.rs`.

use crate::suite;

use xirang_runtime::dispatch::{FallbackMode, Policy};

#[test]
fn precision_suite_matches_pytorch() {
    let tiers = suite::run("precision_report", Policy { mode: FallbackMode::Silent, ..Policy::default() });
    assert!(tiers.get("native").copied().unwrap_or(0) >= 2000, "native kernels should serve most cases: {tiers:?}");
}
