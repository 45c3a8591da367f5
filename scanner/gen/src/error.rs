//! The generator's error type: `xirang.toml` and the knowledge base (positioned), custom-operator
//! files, the coverage report, rendering, and the failures of the store and adapter index it reads.

use std::path::PathBuf;

use miette::Diagnostic;
pub use xirang_ir::error::{Pos, Snippet, SourceError, SourceFile};

/// Everything generating the adapter or its coverage report can fail with.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    /// `xirang.toml` or the recipe knowledge base, at a position of the file.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Source(#[from] Box<SourceError>),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] xirang_store::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Index(#[from] xirang_index::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    CustomOp(#[from] Box<crate::custom::CustomOpError>),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Coverage(#[from] crate::coverage::CoverageError),
    /// A command-line mistake (no configuration found).
    #[error("{0}")]
    #[diagnostic(code(xirang::usage))]
    Usage(String),
    /// A configuration or adapter the generator cannot use as it is (two kernels for one operator,
    /// a driver entry the headers lack).
    #[error("{0}")]
    #[diagnostic(code(xirang::invalid))]
    Invalid(String),
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

    /// Whether the error is a mistake on the command line (the CLI exits 2 for those).
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Usage(_) | Error::Coverage(crate::coverage::CoverageError::BadThreshold { .. }) => true,
            Error::Store(e) => e.is_usage(),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
