//! The Xirang Interface IR and its parsers (layer 0 of the scanner): PyTorch's function schema
//! language (`schema`), `native_functions.yaml` and `tags.yaml` as torchgen reads them (`registry`),
//! `derivatives.yaml` (`derivatives`), vendor backend yaml (`backend`), the YAML reader they share
//! with positions (`yaml`), versions (`version`), spelling suggestions (`suggest`) and the positioned
//! errors every parser returns (`error`). Nothing here reads the store, the adapter or the network.

pub mod backend;
pub mod derivatives;
pub mod error;
pub mod registry;
pub mod schema;
pub mod suggest;
pub mod version;
pub mod yaml;

pub use error::{Pos, SourceError, SourceFile};
