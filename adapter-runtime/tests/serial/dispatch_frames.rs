//! The dispatcher's frames and force-fallback list (`dispatch.rs`): tier counters are
//! process-wide, so these run serially.

use xirang_runtime::dispatch::{Policy, Tier, call, counters, mark};

#[test]
fn frames_count_the_final_tier() {
    let _g = crate::serial();
    call("x.test_native", || Ok(())).unwrap();
    call("x.test_recipe", || {
        mark(Tier::Recipe);
        call("x.test_native", || Ok(()))
    })
    .unwrap();
    let c = counters();
    assert_eq!(c["x.test_native"].native, 2);
    assert_eq!(c["x.test_recipe"].recipe, 1);
}

#[test]
fn force_list_matches_base_and_qualified_names() {
    let _g = crate::serial();
    let p = Policy { force_fallback: ["add".to_string(), "mm.out".to_string()].into(), ..Policy::default() };
    assert!(p.forces("add.Tensor"));
    assert!(p.forces("mm.out"));
    assert!(!p.forces("mm"));
    assert!(!p.forces("addmm"));
}
