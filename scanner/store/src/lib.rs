//! xirang-store: the scanner's snapshot store and its sources.
//!
//! - [`fsio`]: every file the scanner reads from outside, and every write of a folder it owns (journalled
//!   write groups, confinement to the repository);
//! - [`source`]: where a PyTorch version comes from (a folder, a wheel, a git ref);
//! - [`snapshot`]: the store `schemas/<upstream>/<version>/` (PyTorch registries, vendor headers), its
//!   discovery and loading;
//! - [`cxx_snapshot`]: snapshots of PyTorch's C++ extension interface;
//! - [`width`]: text layout for the reports (terminal width, one-line clipping);
//! - [`error`]: this crate's error type (positioned source errors come from `xirang-ir`).

pub mod cxx_snapshot;
pub mod error;
pub mod fsio;
pub mod snapshot;
pub mod source;
pub mod width;

pub use error::{Error, Pos, Result, SourceError, SourceFile};
pub(crate) use xirang_ir::{derivatives, registry, schema, version};
