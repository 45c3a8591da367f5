//! xirang-index: what an adapter implements by hand, and the one operator -> method naming the
//! generator and the index share.
//!
//! - [`adapter_index`]: `syn` over the adapter's Rust sources -> the operators implemented by hand
//!   (trait methods, `/// xirang-kernel:` and `/// xirang-fallback:` markers), with file and line;
//! - [`naming`]: operator name -> Rust method name;
//! - [`error`]: this crate's error type.

pub mod adapter_index;
pub mod error;
pub mod naming;

pub use error::Error;
pub(crate) use xirang_ir::schema;
pub(crate) use xirang_store::fsio;
#[cfg(test)]
pub(crate) use xirang_store::snapshot;
