//! A small YAML document tree with source positions, built on `saphyr-parser`'s event stream.
//!
//! The upstream files are plain YAML (no anchors in practice, but aliases are resolved anyway);
//! every node keeps the line and column where it starts so that loaders can point at the exact
//! place of a bad key or value.

use std::borrow::Cow;

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::error::{Pos, SourceFile};

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub value: Value,
}

/// The node's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar, with whether it was written plain (unquoted): plain `null`/`True` etc. are
    /// interpreted by the loaders, quoted ones are strings.
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(v) => Some(v),
            _ => None,
        }
    }
    /// A plain scalar that YAML 1.1 (PyYAML) reads as boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Scalar { text, plain: true } => match text.as_str() {
                "True" | "true" | "TRUE" | "yes" | "Yes" | "on" | "On" => Some(true),
                "False" | "false" | "FALSE" | "no" | "No" | "off" | "Off" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if text.is_empty() || text == "null" || text == "~" || text == "Null" || text == "NULL")
    }
    /// What kind of node this is, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match &self.value {
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
    /// Looks up a key in a mapping node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
    }
}

/// A YAML syntax error.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub message: String,
    pub pos: Pos,
}

/// Deepest nesting of collections accepted (upstream files nest 4 deep; the loaders walk the tree
/// recursively, so the depth is bounded here).
pub const MAX_DEPTH: usize = 128;

/// Most nodes that aliases may add to a tree (upstream files use no aliases at all; a "billion
/// laughs" file would otherwise expand exponentially).
pub const MAX_ALIAS_NODES: usize = 100_000;

/// Byte offsets from the parser's character indices, without rescanning from the line start for
/// every event (a 50 MB line would make that quadratic).
struct Offsets<'t> {
    text: &'t str,
    ascii: bool,
    chars: usize,
    bytes: usize,
}

impl<'t> Offsets<'t> {
    fn new(text: &'t str) -> Self {
        Offsets { text, ascii: text.is_ascii(), chars: 0, bytes: 0 }
    }

    fn pos(&mut self, m: &saphyr_parser::Marker) -> Pos {
        let offset = if self.ascii {
            m.index().min(self.text.len())
        } else {
            if m.index() < self.chars {
                (self.chars, self.bytes) = (0, 0);
            }
            let mut it = self.text[self.bytes..].char_indices();
            while self.chars < m.index() {
                match it.next() {
                    Some((_, c)) => {
                        self.bytes += c.len_utf8();
                        self.chars += 1;
                    }
                    None => break,
                }
            }
            self.bytes
        };
        Pos { line: m.line().max(1) as u32, col: m.col() as u32 + 1, offset }
    }
}

/// Parses `src`, which must hold one document (as torchgen's loader requires). An empty file gives
/// a null scalar. Refused with a position: a second document (`---` after the first), collections
/// nested deeper than [`MAX_DEPTH`], aliases expanding to more than [`MAX_ALIAS_NODES`] nodes, and
/// a key repeated in one mapping (torchgen: "Found a duplicate key in the yaml").
pub fn parse(src: &SourceFile) -> Result<Node, YamlError> {
    let text = src.text();
    let mut parser = Parser::new_from_str(text);
    let mut offsets = Offsets::new(text);
    let mut stack: Vec<Frame> = Vec::new();
    // anchored nodes with their size in nodes
    let mut anchors: Vec<Option<(Node, usize)>> = Vec::new();
    let mut alias_nodes = 0usize;
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    while let Some(ev) = parser.next_event() {
        let (event, span) = ev.map_err(|e| YamlError {
            message: e.info().to_string(),
            pos: src.pos_of_marker(e.marker().line(), e.marker().col()),
        })?;
        let pos = offsets.pos(&span.start);
        let finished: Option<(Node, usize, usize)> = match event {
            Event::StreamStart | Event::Nothing | Event::StreamEnd | Event::DocumentEnd => None,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlError {
                        message: "a second YAML document starts here; the file must hold one document \
                                  (everything after this `---` would be ignored)"
                            .into(),
                        pos,
                    });
                }
                None
            }
            Event::Scalar(text, style, anchor, _) => {
                let plain = matches!(style, ScalarStyle::Plain);
                Some((Node { pos, value: Value::Scalar { text: cow_string(text), plain } }, anchor, 1))
            }
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq { pos, items: Vec::new(), anchor, size: 1 });
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map { pos, items: Vec::new(), key: None, anchor, size: 1 });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { pos, items, anchor, size }) => {
                    Some((Node { pos, value: Value::Seq(items) }, anchor, size))
                }
                _ => {
                    return Err(YamlError { message: "unbalanced sequence end".into(), pos });
                }
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { pos, items, key, anchor, size }) => {
                    if key.is_some() {
                        return Err(YamlError { message: "mapping key without a value".into(), pos });
                    }
                    Some((Node { pos, value: Value::Map(items) }, anchor, size))
                }
                _ => {
                    return Err(YamlError { message: "unbalanced mapping end".into(), pos });
                }
            },
            Event::Alias(id) => match anchors.get(id).and_then(|n| n.as_ref()) {
                Some((n, size)) => {
                    alias_nodes += size;
                    if alias_nodes > MAX_ALIAS_NODES {
                        return Err(YamlError {
                            message: format!(
                                "aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?); \
                                 upstream files use no aliases"
                            ),
                            pos,
                        });
                    }
                    let mut n = n.clone();
                    n.pos = pos;
                    Some((n, 0, *size))
                }
                None => {
                    return Err(YamlError { message: format!("unknown alias {id}"), pos });
                }
            },
        };
        if stack.len() > MAX_DEPTH {
            return Err(YamlError { message: format!("collections nested deeper than {MAX_DEPTH}"), pos });
        }
        if let Some((node, anchor, size)) = finished {
            if anchor > 0 {
                if anchors.len() <= anchor {
                    anchors.resize(anchor + 1, None);
                }
                anchors[anchor] = Some((node.clone(), size));
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Frame::Seq { items, size: s, .. }) => {
                    *s += size;
                    items.push(node)
                }
                Some(Frame::Map { items, key, size: s, .. }) => {
                    *s += size;
                    match key.take() {
                        None => {
                            if let Some(name) = node.as_str()
                                && let Some((first, _)) = items.iter().find(|(k, _)| k.as_str() == Some(name))
                            {
                                return Err(YamlError {
                                    message: format!(
                                        "duplicate key `{name}` in this mapping (first at line {})",
                                        first.pos.line
                                    ),
                                    pos: node.pos,
                                });
                            }
                            *key = Some(node)
                        }
                        Some(k) => items.push((k, node)),
                    }
                }
            }
        }
    }
    Ok(root.unwrap_or(Node {
        pos: Pos { line: 1, col: 1, offset: 0 },
        value: Value::Scalar { text: String::new(), plain: true },
    }))
}

fn cow_string(c: Cow<'_, str>) -> String {
    c.into_owned()
}

/// A collection being built, with its size in nodes so far (for the alias budget).
enum Frame {
    Seq { pos: Pos, items: Vec<Node>, anchor: usize, size: usize },
    Map { pos: Pos, items: Vec<(Node, Node)>, key: Option<Node>, anchor: usize, size: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let src = SourceFile::new("t.yaml", "- func: abs(Tensor self) -> Tensor\n  variants: function, method\n");
        let n = parse(&src).unwrap();
        let e = &n.as_seq().unwrap()[0];
        let f = e.get("func").unwrap();
        assert_eq!(f.as_str(), Some("abs(Tensor self) -> Tensor"));
        assert_eq!((f.pos.line, f.pos.col), (1, 9));
        let v = e.get("variants").unwrap();
        assert_eq!((v.pos.line, v.pos.col), (2, 13));
    }

    #[test]
    fn empty_document_is_at_line_one() {
        let n = parse(&SourceFile::new("e.yaml", "")).unwrap();
        assert_eq!((n.pos.line, n.pos.col), (1, 1));
    }

    #[test]
    fn a_second_document_is_refused() {
        let e = parse(&SourceFile::new("t.yaml", "- a: 1\n---\n- b: 2\n")).unwrap_err();
        assert_eq!(e.pos.line, 2, "{e:?}");
        assert!(e.message.contains("second YAML document"));
        // an explicit start, and an end marker with nothing after it, are one document
        assert!(parse(&SourceFile::new("t.yaml", "---\n- a: 1\n...\n")).is_ok());
        let e = parse(&SourceFile::new("t.yaml", "- a: 1\n...\n- b: 2\n")).unwrap_err();
        assert!(e.message.contains("second YAML document"), "{e:?}");
    }

    #[test]
    fn nesting_is_bounded_but_flat_lists_are_not() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let e = parse(&SourceFile::new("t.yaml", deep)).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e:?}");
        // far deeper: the parser's own limit answers first
        assert!(parse(&SourceFile::new("t.yaml", "[".repeat(10_000))).is_err());
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&SourceFile::new("t.yaml", ok)).is_ok());
        // 20,000 sibling entries: width is not depth
        let flat: String = (0..20_000).map(|i| format!("- func: f{i}\n  variants: function\n")).collect();
        assert_eq!(parse(&SourceFile::new("t.yaml", flat)).unwrap().as_seq().unwrap().len(), 20_000);
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut t = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..9 {
            let p = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
            t.push_str(&format!("l{i}: &l{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"));
        }
        let e = parse(&SourceFile::new("bomb.yaml", t)).unwrap_err();
        assert!(e.message.contains("alias"), "{e:?}");
        // a few small aliases are fine
        let n = parse(&SourceFile::new("t.yaml", "a: &x [1, 2]\nb: *x\n")).unwrap();
        assert_eq!(n.get("b").unwrap().as_seq().unwrap().len(), 2);
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let e = parse(&SourceFile::new("t.yaml", "- func: a() -> Tensor\n  func: b() -> Tensor\n")).unwrap_err();
        assert_eq!((e.pos.line, e.pos.col), (2, 3));
        assert!(e.message.contains("duplicate key `func` in this mapping (first at line 1)"), "{e:?}");
    }

    #[test]
    fn positions_on_a_long_non_ascii_line_are_exact() {
        let line: String = (0..2000).map(|i| format!("é{i}, ")).collect();
        let src = SourceFile::new("t.yaml", format!("a: [{line}x]\nb: 1\n"));
        let n = parse(&src).unwrap();
        let last = n.get("a").unwrap().as_seq().unwrap().last().unwrap();
        assert_eq!(&src.text()[last.pos.offset..last.pos.offset + 1], "x");
        assert_eq!(n.get("b").unwrap().pos.line, 2);
    }

    #[test]
    fn syntax_error_has_position() {
        let src = SourceFile::new("t.yaml", "- a: [1, 2\n- b: 3\n");
        let e = parse(&src).unwrap_err();
        assert!(e.pos.line >= 1);
    }
}
