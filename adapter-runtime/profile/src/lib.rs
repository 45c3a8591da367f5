//! xirang-prof: reads the operator profiles the runtime records (`xirang_runtime::profile`,
//! `XIRANG_PROFILE=FILE`) and renders ([`report`]: summary table, Chrome trace, flame graph),
//! compares ([`compare`]: against a previous profile or a PyTorch baseline) and advises
//! ([`advise`]: tuning advice from the rules in `advice.toml`). Its own crate, so that what only the
//! tools need (inferno, clap, toml) stays out of the runtime and of the bridge's shared library.

pub mod advise;
pub mod compare;
pub mod report;

pub use xirang_runtime::profile::{Call, Profile, ProfileError, Result, model};
