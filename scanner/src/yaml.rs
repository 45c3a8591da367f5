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

/// Parses the first document of `src`. An empty file gives a null scalar.
pub fn parse(src: &SourceFile) -> Result<Node, YamlError> {
    let text = src.text();
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: Vec<Option<Node>> = Vec::new();
    let mut root: Option<Node> = None;
    let mut depth_guard = 0usize;
    while let Some(ev) = parser.next_event() {
        let (event, span) = ev.map_err(|e| YamlError {
            message: e.info().to_string(),
            pos: src.pos_of_marker(e.marker().line(), e.marker().col()),
        })?;
        let pos = src.pos_of_marker(span.start.line(), span.start.col());
        let finished: Option<(Node, usize)> = match event {
            Event::StreamStart | Event::DocumentStart(_) | Event::Nothing => None,
            Event::StreamEnd | Event::DocumentEnd => {
                if root.is_some() {
                    break;
                }
                None
            }
            Event::Scalar(text, style, anchor, _) => {
                let plain = matches!(style, ScalarStyle::Plain);
                Some((Node { pos, value: Value::Scalar { text: cow_string(text), plain } }, anchor))
            }
            Event::SequenceStart(anchor, _) => {
                depth_guard += 1;
                stack.push(Frame::Seq { pos, items: Vec::new(), anchor });
                None
            }
            Event::MappingStart(anchor, _) => {
                depth_guard += 1;
                stack.push(Frame::Map { pos, items: Vec::new(), key: None, anchor });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { pos, items, anchor }) => Some((Node { pos, value: Value::Seq(items) }, anchor)),
                _ => {
                    return Err(YamlError { message: "unbalanced sequence end".into(), pos });
                }
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { pos, items, key, anchor }) => {
                    if key.is_some() {
                        return Err(YamlError { message: "mapping key without a value".into(), pos });
                    }
                    Some((Node { pos, value: Value::Map(items) }, anchor))
                }
                _ => {
                    return Err(YamlError { message: "unbalanced mapping end".into(), pos });
                }
            },
            Event::Alias(id) => match anchors.get(id).and_then(|n| n.clone()) {
                Some(mut n) => {
                    n.pos = pos;
                    Some((n, 0))
                }
                None => {
                    return Err(YamlError { message: format!("unknown alias {id}"), pos });
                }
            },
        };
        if depth_guard > 10_000 {
            return Err(YamlError { message: "nesting too deep".into(), pos });
        }
        if let Some((node, anchor)) = finished {
            if anchor > 0 {
                if anchors.len() <= anchor {
                    anchors.resize(anchor + 1, None);
                }
                anchors[anchor] = Some(node.clone());
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Frame::Seq { items, .. }) => items.push(node),
                Some(Frame::Map { items, key, .. }) => match key.take() {
                    None => *key = Some(node),
                    Some(k) => items.push((k, node)),
                },
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

enum Frame {
    Seq { pos: Pos, items: Vec<Node>, anchor: usize },
    Map { pos: Pos, items: Vec<(Node, Node)>, key: Option<Node>, anchor: usize },
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
    fn syntax_error_has_position() {
        let src = SourceFile::new("t.yaml", "- a: [1, 2\n- b: 3\n");
        let e = parse(&src).unwrap_err();
        assert!(e.pos.line >= 1);
    }
}
