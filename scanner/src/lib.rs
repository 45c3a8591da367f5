//! xirang-scan: PyTorch's operator registry and vendor driver interfaces -> one Interface IR; the
//! `xirang-scan` command line over the scanner's crates.
//!
//! Map of the scanner (see ARCHITECTURE.md, "Crates", for the layers the build enforces):
//! - `xirang-ir`: the IR and its parsers ([`schema`], [`yaml`], [`registry`], [`derivatives`],
//!   [`backend`], [`version`], [`suggest`]);
//! - `xirang-store`: [`fsio`], [`source`], [`snapshot`], [`cxx_snapshot`], [`width`];
//! - `xirang-index`: the adapter index ([`diff::adapter_index`]) and [`naming`];
//! - `xirang-drift`: the drift engine ([`diff`]);
//! - `xirang-gen`: the code generator ([`generate`]) and [`coverage`];
//! - `xirang-compare`: the comparison builder ([`compare`]; `diffs/`: [`diff::committed`]);
//! - `xirang-bot`: the regeneration bot ([`bot`]);
//! - this crate: the CLI, its error wrapper ([`error`]) and the IR's text renderings ([`render`]).
//!
//! The modules of the lower crates are re-exported here under the paths they had when the scanner
//! was one crate, for the end-to-end tests, benches and fuzz targets.

pub mod error;
pub mod render;

pub use error::{Error, Pos, Result, SourceError, SourceFile};
pub use xirang_bot as bot;
pub use xirang_compare as compare;
pub use xirang_gen as generate;
pub use xirang_gen::coverage;
pub use xirang_index::naming;
pub use xirang_ir::{backend, derivatives, registry, schema, suggest, version, yaml};
pub use xirang_store::{cxx_snapshot, fsio, snapshot, source, width};

/// The drift engine (`xirang-drift`), with the adapter index and the comparison's modules at the
/// paths they had inside it.
pub mod diff {
    pub use xirang_compare::{committed, custom};
    pub use xirang_drift::*;
    pub use xirang_index::adapter_index;
}
