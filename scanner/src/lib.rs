//! xirang-scan: PyTorch's operator registry and vendor driver interfaces -> one Interface IR.
//!
//! Map of the crate (see ARCHITECTURE.md for the whole workspace):
//! - [`schema`]: the operator schema language (parse, canonical print).
//! - [`yaml`]: a YAML tree with source positions.
//! - [`registry`]: `native_functions.yaml` + `tags.yaml` -> operators, with `autogen` expansion.
//! - [`error`]: source files, positions, typed errors.

pub mod backend;
pub mod bot;
pub mod compare;
pub mod coverage;
pub mod cxx_snapshot;
pub mod derivatives;
pub mod diff;
pub mod error;
pub mod fsio;
pub mod generate;
pub mod naming;
pub mod registry;
pub mod render;
pub mod schema;
pub mod snapshot;
pub mod source;
pub mod suggest;
pub mod version;
pub mod width;
pub mod yaml;

pub use error::{Error, Pos, Result, SourceError, SourceFile};
