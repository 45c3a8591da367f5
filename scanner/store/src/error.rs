//! The store's error type, and the general failures of the crates above it (an input file, a source,
//! a snapshot, a command-line mistake). Source files, positions and positioned errors are the IR's
//! (`xirang_ir::error`), re-exported here. The crates above wrap this type in their own; the CLI's
//! error (`xirang_scan::error::Error`) wraps them all.
//!
//! Every error that comes from an input file carries the file name, the 1-based line and column
//! and the source text, so the CLI (miette) can render `file:line:col` with a snippet.

use std::path::PathBuf;

use miette::Diagnostic;

pub use xirang_ir::error::*;

/// Everything the store and sources can fail with.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Source(#[from] Box<SourceError>),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid UTF-8")]
    Utf8 { path: PathBuf },
    /// An input that is not a readable file of a sane size (a FIFO, a folder, a link loop, /dev/zero).
    #[error("{path}: {message}")]
    #[diagnostic(code(xirang::input))]
    Input { path: PathBuf, message: String },
    #[error("{0}")]
    #[diagnostic(code(xirang::source))]
    SourceNotFound(String),
    #[error("{context}: {message}")]
    #[diagnostic(code(xirang::archive))]
    Archive { context: String, message: String },
    #[error("git: {0}")]
    #[diagnostic(code(xirang::git))]
    Git(String),
    #[error("snapshot {path}: {message}")]
    #[diagnostic(code(xirang::snapshot))]
    Snapshot { path: PathBuf, message: String },
    /// A command-line mistake (exit code 2).
    #[error("{0}")]
    #[diagnostic(code(xirang::usage))]
    Usage(String),
    /// Bad input or configuration that has no better place (exit code 1).
    #[error("{0}")]
    #[diagnostic(code(xirang::invalid))]
    Invalid(String),
    /// A bug of this tool (rendering, serialization).
    #[error("internal error: {0}")]
    #[diagnostic(code(xirang::internal))]
    Internal(String),
    #[error(transparent)]
    #[diagnostic(code(xirang::headers))]
    Headers(#[from] xirang_headers::HeaderError),
}

impl From<SourceError> for Error {
    fn from(e: SourceError) -> Self {
        Error::Source(Box::new(e))
    }
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Whether the error is a mistake on the command line (the CLI exits 2 for those).
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Usage(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
