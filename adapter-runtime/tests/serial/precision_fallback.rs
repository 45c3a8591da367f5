//! The precision suite with every natively implemented operator forced
//! onto the CPU fallback (`XIRANG_FORCE_FALLBACK`'s policy), so that both
//! tiers are checked against the same PyTorch goldens. Its own test binary:
//! the dispatch policy is process-wide.

use crate::suite;

use xirang_runtime::dispatch::{FallbackMode, Policy};
use xirang_runtime::kernels;

#[test]
fn precision_suite_matches_pytorch_on_the_fallback_tier() {
    let _serial = crate::serial();
    let force = kernels::operators().into_iter().map(String::from).collect();
    let tiers = suite::run(
        "precision_report_fallback",
        Policy { mode: FallbackMode::Silent, force_fallback: force, ..Policy::default() },
    );
    assert_eq!(tiers.get("native"), None, "forced operators must not run natively: {tiers:?}");
}
