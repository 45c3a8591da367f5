//! Source files, positions and positioned errors.
//!
//! Every error that comes from an input file carries the file name, the 1-based line and column
//! and the source text, so the CLI (miette) can render `file:line:col` with a snippet.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

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
    /// Builds a located error pointing at `len` bytes from `pos`. The message is cut to
    /// [`MAX_MESSAGE`] bytes and the snippet to a window around the span (see [`Snippet`]), so an
    /// error about a 50 MB line prints a few hundred bytes.
    pub fn error(&self, pos: Pos, len: usize, message: impl Into<String>) -> SourceError {
        let offset = pos.offset.min(self.text.len());
        let len = len.min(self.text.len() - offset).min(MAX_LABEL);
        SourceError {
            message: clip(message.into(), MAX_MESSAGE),
            file: self.name.to_string(),
            // positions are 1-based; a default position means "start of file"
            line: pos.line.max(1),
            col: pos.col.max(1),
            src: Snippet { file: self.clone() },
            span: SourceSpan::new(offset.into(), len),
        }
    }
}

/// Longest error message kept (messages quote the input, which may be huge).
pub const MAX_MESSAGE: usize = 600;
/// Longest span a label underlines.
const MAX_LABEL: usize = 240;
/// Widest snippet line printed; longer lines are shown as a window around the span.
const SNIPPET_WIDTH: usize = 160;

/// `s` cut to at most `max` bytes (at a character boundary), with `...` when cut.
pub fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// The source of an error snippet: the whole file, but [`SourceCode::read_span`] returns only the
/// lines around the span, and only a window of them when a line is wider than [`SNIPPET_WIDTH`].
#[derive(Debug, Clone)]
pub struct Snippet {
    file: SourceFile,
}

impl Snippet {
    fn line_of(&self, offset: usize) -> usize {
        match self.file.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    fn line_end(&self, line: usize) -> usize {
        let text = &self.file.text;
        self.file
            .line_starts
            .get(line + 1)
            .map_or(text.len(), |&next| next.saturating_sub(1))
            .max(self.file.line_starts[line])
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl SourceCode for Snippet {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let text: &str = &self.file.text;
        let (off, len) = (span.offset(), span.len());
        if off > text.len() || off + len > text.len() {
            return Err(MietteError::OutOfBounds);
        }
        let first = self.line_of(off);
        let last = self.line_of((off + len).saturating_sub(1).max(off));
        let lo = first.saturating_sub(before);
        let hi = (last + after).min(self.file.line_starts.len() - 1);
        let wide = (lo..=hi).any(|l| self.line_end(l) - self.file.line_starts[l] > SNIPPET_WIDTH);
        let name = self.file.name.to_string();
        if !wide {
            let start = self.file.line_starts[lo];
            let end = self.line_end(hi);
            return Ok(Box::new(MietteSpanContents::new_named(
                name,
                &text.as_bytes()[start..end],
                SourceSpan::new(start.into(), end - start),
                lo,
                0,
                hi - lo + 1,
            )));
        }
        // one line, a window around the span
        let line_start = self.file.line_starts[first];
        let line_end = self.line_end(first).max(off);
        let start = floor_boundary(text, off.saturating_sub(SNIPPET_WIDTH / 2).max(line_start));
        let end = floor_boundary(text, (off + len.max(1) + SNIPPET_WIDTH / 2).min(line_end).max(off));
        let column = text[line_start..start].chars().count();
        Ok(Box::new(MietteSpanContents::new_named(
            name,
            &text.as_bytes()[start..end],
            SourceSpan::new(start.into(), end - start),
            first,
            column,
            1,
        )))
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
    pub src: Snippet,
    #[label("here")]
    pub span: SourceSpan,
}

impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.file == other.file && self.line == other.line && self.col == other.col
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}
