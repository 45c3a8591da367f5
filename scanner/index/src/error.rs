//! The adapter index's error type: an adapter folder that cannot be walked or read, or a Rust file
//! that does not lex (positioned, with a snippet).

use std::path::PathBuf;

use miette::Diagnostic;
pub use xirang_ir::error::{SourceError, SourceFile};

/// Everything indexing an adapter can fail with.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    /// A Rust file that does not lex.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Source(#[from] Box<SourceError>),
    /// Reading a file of the adapter (`xirang_store::fsio`: size limit, not a regular file, UTF-8).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] xirang_store::Error),
    /// A worker thread of the index panicked (a bug, reported instead of a second panic).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<SourceError> for Error {
    fn from(e: SourceError) -> Self {
        Error::Source(Box::new(e))
    }
}

impl Error {
    /// An I/O failure on `path`: the store's `Io` error, the one every scanner crate reports.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Store(xirang_store::Error::io(path, source))
    }
}
