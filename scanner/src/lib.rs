//! xirang-scan: PyTorch's operator registry and vendor driver interfaces -> one Interface IR.
//!
//! Map of the crate (see ARCHITECTURE.md for the whole workspace):
//! - the IR and its parsers live in `xirang-ir` and are re-exported under their old paths:
//!   [`schema`] (the operator schema language), [`yaml`] (a YAML tree with source positions),
//!   [`registry`] (`native_functions.yaml` + `tags.yaml` -> operators), [`derivatives`], [`backend`]
//!   (vendor backend yaml), [`version`], [`suggest`];
//! - [`error`]: the library's error type (positioned errors come from `xirang-ir`).

pub mod bot;
pub mod compare;
pub mod coverage;
pub mod cxx_snapshot;
pub mod diff;
pub mod error;
pub mod fsio;
pub mod generate;
pub mod naming;
pub mod render;
pub mod snapshot;
pub mod source;
pub mod width;

pub use error::{Error, Pos, Result, SourceError, SourceFile};
pub use xirang_ir::{backend, derivatives, registry, schema, suggest, version, yaml};
