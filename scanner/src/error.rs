//! The CLI's error: the wrapper over every library crate's error type, and its own command-line and
//! output failures. Each library crate of the scanner returns its own type (`xirang_store::Error`,
//! `xirang_index::Error`, `xirang_drift::Error`, `xirang_gen::Error`, `xirang_compare::Error`); only
//! this crate knows them all. Source files, positions and positioned errors are the IR's
//! (`xirang_ir::error`), re-exported here.
//!
//! Every error that comes from an input file carries the file name, the 1-based line and column
//! and the source text, so the CLI (miette) can render `file:line:col` with a snippet.

use std::path::PathBuf;

use miette::Diagnostic;

pub use xirang_ir::error::*;

/// Everything a command of `xirang-scan` can fail with.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] xirang_store::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Index(#[from] xirang_index::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Drift(#[from] xirang_drift::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Gen(#[from] xirang_gen::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Compare(#[from] xirang_compare::Error),
    #[error(transparent)]
    #[diagnostic(code(xirang::cxx))]
    Cxx(#[from] xirang_cxx::CxxError),
    /// A command-line mistake (exit code 2).
    #[error("{0}")]
    #[diagnostic(code(xirang::usage))]
    Usage(String),
    /// A bug of this tool (rendering, serialization).
    #[error("internal error: {0}")]
    #[diagnostic(code(xirang::internal))]
    Internal(String),
}

impl From<SourceError> for Error {
    fn from(e: SourceError) -> Self {
        Error::Store(e.into())
    }
}

impl From<Box<SourceError>> for Error {
    fn from(e: Box<SourceError>) -> Self {
        Error::Store(e.into())
    }
}

impl Error {
    /// An I/O failure on `path`: the store's `Io` error, the one every scanner crate reports.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Store(xirang_store::Error::io(path, source))
    }

    /// Whether the error is a mistake on the command line (the CLI exits 2 for those).
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Usage(_) => true,
            Error::Store(e) => e.is_usage(),
            Error::Drift(e) => e.is_usage(),
            Error::Gen(e) => e.is_usage(),
            Error::Compare(e) => e.is_usage(),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
