//! The drift engine's error type: its rule catalogue and allow lists, the adapter sources it scans
//! for uses of changed symbols, and the failures of the store and the adapter index it reads.

use std::path::PathBuf;

use miette::Diagnostic;
pub use xirang_ir::error::{Pos, Snippet, SourceError, SourceFile};

/// Everything the drift engine can fail with.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    /// An allow list entry at a position of its file.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Source(#[from] Box<SourceError>),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] xirang_store::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Index(#[from] xirang_index::Error),
    /// The adapter's C++ sources (`xirang-cxx`'s index).
    #[error(transparent)]
    #[diagnostic(code(xirang::cxx))]
    Cxx(#[from] xirang_cxx::CxxError),
    /// A rule catalogue that does not parse or names a rule twice.
    #[error("rule catalogue {path}: {message}")]
    #[diagnostic(code(xirang::rules))]
    Rules { path: String, message: String },
    /// A command-line mistake (a rule id that names no rule).
    #[error("{0}")]
    #[diagnostic(code(xirang::usage))]
    Usage(String),
    /// A bug of this tool (rendering).
    #[error("internal error: {0}")]
    #[diagnostic(code(xirang::internal))]
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

    /// Whether the error is a mistake on the command line.
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Usage(_) => true,
            Error::Store(e) => e.is_usage(),
            _ => false,
        }
    }
}
