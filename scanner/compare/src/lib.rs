//! xirang-compare: one comparison builder, where the drift engine (`xirang-drift`) meets the
//! generator and coverage (`xirang-gen`).
//!
//! - [`report`]: a PyTorch drift report joined with the adapter (kernels, backend yaml, generated
//!   files, coverage, custom operators): the CLI's `diff`, the bot, `diffs` and the benches build
//!   every PyTorch report with [`pytorch_report`] or [`pytorch_pair_report`];
//! - [`inputs`]: what a report joins besides the two versions (adapter configuration, generated
//!   files, custom operators, backend yaml), assembled once for the CLI, the bot and `diffs`;
//! - [`states`]: the adapter's coverage in both versions of a comparison ([`adapter_states`]);
//! - [`custom`]: the adapter's custom operators x a report's changes;
//! - [`committed`]: the reports committed under `diffs/` (`xirang-scan diffs`, `diffs --check`);
//! - [`error`]: this crate's error type (wraps the store's, the index's, the drift engine's and the
//!   generator's).

pub mod committed;
pub mod custom;
pub mod error;
pub mod inputs;
pub mod report;
pub mod states;

pub use error::{Error, Result};
pub use inputs::{AdapterInputs, BackendFiles, WholeDiff, whole_report};
pub use report::{PairDiff, PytorchDiff, pytorch_pair_report, pytorch_report};
pub use states::{
    adapter_states, adapter_states_of_models, config_at, foreign, kernel_file, states, states_of, states_of_model,
};

pub(crate) use xirang_drift as diff;
pub(crate) use xirang_gen::{self as generate, coverage};
pub(crate) use xirang_index::naming;
pub(crate) use xirang_ir::{registry, schema};
pub(crate) use xirang_store::{cxx_snapshot, fsio, snapshot};
