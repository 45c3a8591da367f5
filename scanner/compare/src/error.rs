//! The comparison builder's error type: the failures of the layers it joins, and a configuration
//! (`xirang.toml`) it cannot read.

use miette::Diagnostic;

/// Everything building a comparison can fail with.
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
    /// A configuration this crate reads itself (the `[operators]` table of `xirang.toml`).
    #[error("{0}")]
    #[diagnostic(code(xirang::invalid))]
    Invalid(String),
    /// A bug of this tool.
    #[error("internal error: {0}")]
    #[diagnostic(code(xirang::internal))]
    Internal(String),
}

impl From<xirang_ir::error::SourceError> for Error {
    fn from(e: xirang_ir::error::SourceError) -> Self {
        Error::Store(e.into())
    }
}

impl Error {
    /// Whether the error is a mistake on the command line.
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Store(e) => e.is_usage(),
            Error::Drift(e) => e.is_usage(),
            Error::Gen(e) => e.is_usage(),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
