//! The runtime's integration tests, one binary (one link of the runtime, one instantiation of the
//! generic operator front-ends for `NpuOps`): the tests that leave process-wide state alone (the
//! fallback policy apart from `silent`, the tier counters, the default generator). Tests that set or
//! read that state are in `tests/serial/`. `simulator.rs`, `sim_lifecycle.rs` and `allocator.rs`
//! configure the process-wide simulator each its own way, `sim_env.rs` through environment
//! variables, and `dlopen.rs` loads a driver library by path: each needs a process of its own. Run one module: `cargo test -p xirang-runtime --test runtime views::`.

mod autograd_engine;
mod broadcasting;
mod conv;
mod core_aten_more;
/// Custom operators' tests, one module each (`xirang-scan new-op` adds them).
mod custom;
mod forward_ad;
mod generated_autograd;
mod generated_driver;
mod index_math;
mod matmul_layouts;
mod ops_reference;
mod precision;
mod promotion;
mod readme_counts;
mod registry_schemas;
mod view_properties;
mod views;
mod zero_dim_empty;

#[path = "../support/precision_suite.rs"]
pub mod suite;
