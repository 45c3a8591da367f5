//! The end-to-end tests of the workspace against the upstream corpus, one binary: the suites are
//! modules (run one with `cargo test -p xirang-tests --test end_to_end <module>::`).

mod backend_yaml;
mod bot_dialects;
mod bot_failures;
mod bot_flow;
mod bot_headers;
/// The fake forge and repository fixtures of the bot suites (also `#[path]`-included by the
/// scanner's `bot_cli` tests).
pub mod bot_support;
mod cxx_kernels;
mod cxx_store;
mod diff_known_changes;
mod diff_npu_eval;
mod header_store;
mod layers;
mod registry_conformance;
mod snapshot_store;
mod sources;
