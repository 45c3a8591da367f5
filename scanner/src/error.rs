//! Source files, positions and the library's error types.
//!
//! Every error that comes from an input file carries the file name, the 1-based line and column
//! and the source text, so the CLI (miette) can render `file:line:col` with a snippet.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use miette::{Diagnostic, NamedSource, SourceSpan};

/// A position in a source file: 1-based line and column (in characters), and byte offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
    pub offset: usize,
}

/// A named text with a line index.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: Arc<str>,
    text: Arc<str>,
    line_starts: Arc<[usize]>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text: String = text.into();
        let mut starts = vec![0usize];
        starts.extend(text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i + 1));
        SourceFile { name: Arc::from(name.into()), text: Arc::from(text), line_starts: starts.into() }
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn text(&self) -> &str {
        &self.text
    }
    /// Position from a parser marker (1-based line, 0-based column in characters).
    pub fn pos_of_marker(&self, line: usize, col_chars: usize) -> Pos {
        let line = line.max(1);
        let Some(&start) = self.line_starts.get(line - 1) else {
            return Pos { line: line as u32, col: col_chars as u32 + 1, offset: self.text.len() };
        };
        let rest = &self.text[start..];
        let byte_col = rest.char_indices().nth(col_chars).map(|(i, _)| i).unwrap_or(rest.len());
        Pos { line: line as u32, col: col_chars as u32 + 1, offset: start + byte_col }
    }
    /// Position of a byte offset.
    pub fn pos_of_offset(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let line_idx = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.line_starts[line_idx];
        let col = self.text.get(start..offset).map(|s| s.chars().count()).unwrap_or(offset - start);
        Pos { line: line_idx as u32 + 1, col: col as u32 + 1, offset }
    }
    /// Builds a located error pointing at `len` bytes from `pos`.
    pub fn error(&self, pos: Pos, len: usize, message: impl Into<String>) -> SourceError {
        let offset = pos.offset.min(self.text.len());
        let len = len.min(self.text.len() - offset);
        SourceError {
            message: message.into(),
            file: self.name.to_string(),
            // positions are 1-based; a default position means "start of file"
            line: pos.line.max(1),
            col: pos.col.max(1),
            src: NamedSource::new(&*self.name, self.text.clone()),
            span: SourceSpan::new(offset.into(), len),
        }
    }
}

/// An error located in an input file.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("{file}:{line}:{col}: {message}")]
pub struct SourceError {
    pub message: String,
    pub file: String,
    pub line: u32,
    pub col: u32,
    #[source_code]
    pub src: NamedSource<Arc<str>>,
    #[label("here")]
    pub span: SourceSpan,
}

impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.file == other.file && self.line == other.line && self.col == other.col
    }
}

/// Everything the scanner library can fail with.
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
    #[error("{0}")]
    #[diagnostic(code(xirang::usage))]
    Usage(String),
    #[error(transparent)]
    #[diagnostic(transparent)]
    CustomOp(#[from] Box<crate::generate::custom::CustomOpError>),
    #[error(transparent)]
    #[diagnostic(code(xirang::headers))]
    Headers(#[from] xirang_headers::HeaderError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Coverage(#[from] crate::coverage::CoverageError),
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
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}
