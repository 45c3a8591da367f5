//! The operator schema language of PyTorch (`native_functions.yaml` `func:` entries).
//!
//! Parses `name[.overload](ARGS) -> RETURNS` into typed values and prints them back in
//! torchgen's canonical form (`str(FunctionSchema)`), so `parse(s).to_string() == s` for every
//! canonical schema. The grammar follows `torchgen/model.py`; see
//! `../shared/docs/upstream-formats.md` for the summary.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A schema that failed to parse: what went wrong and where (byte offsets into the schema text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    pub message: String,
    /// Byte offset of the offending text inside the schema string.
    pub offset: usize,
    /// Length in bytes of the offending text (at least 1 where the text is non-empty).
    pub len: usize,
}

impl SchemaError {
    fn new(message: impl Into<String>, offset: usize, len: usize) -> Self {
        SchemaError { message: message.into(), offset, len }
    }
}

/// Base (non-composite) types of the schema language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BaseTy {
    Generator,
    ScalarType,
    Tensor,
    #[serde(rename = "int")]
    Int,
    Dimname,
    DimVector,
    #[serde(rename = "float")]
    Float,
    #[serde(rename = "str")]
    Str,
    #[serde(rename = "bool")]
    Bool,
    Layout,
    Device,
    DeviceIndex,
    Scalar,
    MemoryFormat,
    QScheme,
    Storage,
    Stream,
    SymInt,
    SymBool,
    ConstQuantizerPtr,
    GraphModule,
}

impl BaseTy {
    pub const ALL: [BaseTy; 21] = [
        BaseTy::Generator,
        BaseTy::ScalarType,
        BaseTy::Tensor,
        BaseTy::Int,
        BaseTy::Dimname,
        BaseTy::DimVector,
        BaseTy::Float,
        BaseTy::Str,
        BaseTy::Bool,
        BaseTy::Layout,
        BaseTy::Device,
        BaseTy::DeviceIndex,
        BaseTy::Scalar,
        BaseTy::MemoryFormat,
        BaseTy::QScheme,
        BaseTy::Storage,
        BaseTy::Stream,
        BaseTy::SymInt,
        BaseTy::SymBool,
        BaseTy::ConstQuantizerPtr,
        BaseTy::GraphModule,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BaseTy::Generator => "Generator",
            BaseTy::ScalarType => "ScalarType",
            BaseTy::Tensor => "Tensor",
            BaseTy::Int => "int",
            BaseTy::Dimname => "Dimname",
            BaseTy::DimVector => "DimVector",
            BaseTy::Float => "float",
            BaseTy::Str => "str",
            BaseTy::Bool => "bool",
            BaseTy::Layout => "Layout",
            BaseTy::Device => "Device",
            BaseTy::DeviceIndex => "DeviceIndex",
            BaseTy::Scalar => "Scalar",
            BaseTy::MemoryFormat => "MemoryFormat",
            BaseTy::QScheme => "QScheme",
            BaseTy::Storage => "Storage",
            BaseTy::Stream => "Stream",
            BaseTy::SymInt => "SymInt",
            BaseTy::SymBool => "SymBool",
            BaseTy::ConstQuantizerPtr => "ConstQuantizerPtr",
            BaseTy::GraphModule => "GraphModule",
        }
    }

    pub fn from_name(s: &str) -> Option<BaseTy> {
        // a match instead of a scan of `ALL` (this runs for every type of every schema loaded)
        Some(match s {
            "Generator" => BaseTy::Generator,
            "ScalarType" => BaseTy::ScalarType,
            "Tensor" => BaseTy::Tensor,
            "int" => BaseTy::Int,
            "Dimname" => BaseTy::Dimname,
            "DimVector" => BaseTy::DimVector,
            "float" => BaseTy::Float,
            "str" => BaseTy::Str,
            "bool" => BaseTy::Bool,
            "Layout" => BaseTy::Layout,
            "Device" => BaseTy::Device,
            "DeviceIndex" => BaseTy::DeviceIndex,
            "Scalar" => BaseTy::Scalar,
            "MemoryFormat" => BaseTy::MemoryFormat,
            "QScheme" => BaseTy::QScheme,
            "Storage" => BaseTy::Storage,
            "Stream" => BaseTy::Stream,
            "SymInt" => BaseTy::SymInt,
            "SymBool" => BaseTy::SymBool,
            "ConstQuantizerPtr" => BaseTy::ConstQuantizerPtr,
            "GraphModule" => BaseTy::GraphModule,
            _ => return None,
        })
    }
}

/// A type: base, optional (`T?`), list (`T[]`, `T[N]`) or a TorchScript custom class.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Type {
    Base(BaseTy),
    Optional(Box<Type>),
    List {
        elem: Box<Type>,
        size: Option<u32>,
    },
    /// `__torch__.torch.classes.<ns>.<Name>`; holds the text after `__torch__.torch.classes.`.
    CustomClass(String),
}

impl Type {
    pub fn base(t: BaseTy) -> Type {
        Type::Base(t)
    }
    pub fn is_tensor_like(&self) -> bool {
        match self {
            Type::Base(b) => *b == BaseTy::Tensor,
            Type::Optional(e) => e.is_tensor_like(),
            Type::List { elem, .. } => elem.is_tensor_like(),
            Type::CustomClass(_) => false,
        }
    }
    pub fn is_optional(&self) -> bool {
        matches!(self, Type::Optional(_))
    }
    pub fn is_list(&self) -> bool {
        match self {
            Type::List { .. } => true,
            Type::Optional(e) => e.is_list(),
            _ => false,
        }
    }
    /// `SymInt` anywhere in the type.
    pub fn is_symint_like(&self) -> bool {
        match self {
            Type::Base(b) => *b == BaseTy::SymInt,
            Type::Optional(e) => e.is_symint_like(),
            Type::List { elem, .. } => elem.is_symint_like(),
            Type::CustomClass(_) => false,
        }
    }
    /// The type with every `SymInt` replaced by `int` (torchgen's "fake type" for BC checks).
    pub fn without_symint(&self) -> Type {
        match self {
            Type::Base(BaseTy::SymInt) => Type::Base(BaseTy::Int),
            Type::Base(b) => Type::Base(*b),
            Type::Optional(e) => Type::Optional(Box::new(e.without_symint())),
            Type::List { elem, size } => Type::List { elem: Box::new(elem.without_symint()), size: *size },
            Type::CustomClass(c) => Type::CustomClass(c.clone()),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Base(b) => f.write_str(b.as_str()),
            Type::Optional(e) => write!(f, "{e}?"),
            Type::List { elem, size: Some(n) } => write!(f, "{elem}[{n}]"),
            Type::List { elem, size: None } => write!(f, "{elem}[]"),
            Type::CustomClass(c) => write!(f, "__torch__.torch.classes.{c}"),
        }
    }
}

/// An alias annotation: `a`, `a!`, `a|b`, `a -> *`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Annotation {
    pub alias_set: Vec<String>,
    pub is_write: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alias_set_after: Vec<String>,
}

impl fmt::Display for Annotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.alias_set.join("|"))?;
        if self.is_write {
            f.write_str("!")?;
        }
        if !self.alias_set_after.is_empty() {
            write!(f, " -> {}", self.alias_set_after.join("|"))?;
        }
        Ok(())
    }
}

/// A default value, typed, with the text it was written as (printing uses the text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Default {
    pub text: String,
    pub value: DefaultValue,
}

/// The meaning of a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum DefaultValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// An enum constant such as `long`, `contiguous_format`, `Mean`.
    Ident(String),
    List(Vec<DefaultValue>),
}

/// One argument: `Tensor(a!) self`, `int[2] stride=1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Argument {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: Type,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<Annotation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Default>,
}

impl Argument {
    pub fn is_write(&self) -> bool {
        self.annotation.as_ref().is_some_and(|a| a.is_write)
    }
}

/// Writes a type with its alias annotation folded in after `Tensor` (`Tensor(a!)[]`).
fn write_annotated(f: &mut fmt::Formatter<'_>, ty: &Type, ann: &Option<Annotation>) -> fmt::Result {
    match ann {
        None => write!(f, "{ty}"),
        Some(a) => {
            let t = ty.to_string();
            match t.strip_prefix("Tensor") {
                Some(rest) => write!(f, "Tensor({a}){rest}"),
                None => write!(f, "{t}"),
            }
        }
    }
}

impl fmt::Display for Argument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_annotated(f, &self.ty, &self.annotation)?;
        write!(f, " {}", self.name)?;
        if let Some(d) = &self.default {
            write!(f, "={}", d.text)?;
        }
        Ok(())
    }
}

/// One return: `Tensor`, `Tensor(a!)`, `Tensor values`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Return {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub ty: Type,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<Annotation>,
}

impl fmt::Display for Return {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_annotated(f, &self.ty, &self.annotation)?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        Ok(())
    }
}

/// The arguments of a schema, split at the keyword-only marker and the out= group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, std::default::Default)]
pub struct Arguments {
    pub positional: Vec<Argument>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kwarg_only: Vec<Argument>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out: Vec<Argument>,
}

impl Arguments {
    /// All arguments in schema order.
    pub fn all(&self) -> impl Iterator<Item = &Argument> {
        self.positional.iter().chain(self.kwarg_only.iter()).chain(self.out.iter())
    }
    pub fn len(&self) -> usize {
        self.positional.len() + self.kwarg_only.len() + self.out.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Index of the `self` argument among the positional ones.
    pub fn self_index(&self) -> Option<usize> {
        self.positional.iter().position(|a| a.name == "self")
    }
    /// Start index and length of the TensorOptions group (`dtype, layout, device, pin_memory`)
    /// inside `kwarg_only`, as torchgen groups it.
    pub fn tensor_options_range(&self) -> Option<usize> {
        let preds: [(&str, BaseTy); 4] = [
            ("dtype", BaseTy::ScalarType),
            ("layout", BaseTy::Layout),
            ("device", BaseTy::Device),
            ("pin_memory", BaseTy::Bool),
        ];
        let kw = &self.kwarg_only;
        if kw.len() < 4 {
            return None;
        }
        (0..=kw.len() - 4).find(|&i| {
            preds.iter().zip(&kw[i..i + 4]).all(|((n, t), a)| {
                a.name == *n && (a.ty == Type::Base(*t) || a.ty == Type::Optional(Box::new(Type::Base(*t))))
            })
        })
    }
}

impl fmt::Display for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            Ok(())
        };
        for a in &self.positional {
            sep(f)?;
            write!(f, "{a}")?;
        }
        if !self.kwarg_only.is_empty() || !self.out.is_empty() {
            sep(f)?;
            f.write_str("*")?;
        }
        for a in self.kwarg_only.iter().chain(&self.out) {
            sep(f)?;
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// `name[.overload]`, with the facts torchgen derives from the base name. Serializes as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperatorName {
    /// The base name as written (`add_`, `__iand__`, `foo_functional`).
    pub name: String,
    /// The overload name (empty for the default overload).
    pub overload: String,
}

impl OperatorName {
    pub fn new(name: impl Into<String>, overload: impl Into<String>) -> Self {
        OperatorName { name: name.into(), overload: overload.into() }
    }

    /// Parses `name` or `name.overload`.
    pub fn parse(s: &str) -> Result<OperatorName, SchemaError> {
        let (name, overload) = OperatorName::split_valid(s)?;
        Ok(OperatorName::new(name, overload))
    }

    /// Checks `s` as [`OperatorName::parse`] does, without building the name: `s` is then the
    /// canonical text of the name (`parse(s)?.to_string() == s`).
    pub fn validate(s: &str) -> Result<(), SchemaError> {
        OperatorName::split_valid(s).map(|_| ())
    }

    fn split_valid(s: &str) -> Result<(&str, &str), SchemaError> {
        let (name, overload) = match s.split_once('.') {
            Some((n, o)) => (n, o),
            None => (s, ""),
        };
        check_ident(name, 0, "operator name")?;
        if s.contains('.') {
            check_ident(overload, name.len() + 1, "overload name")?;
            if overload == "default" {
                return Err(SchemaError::new("overload name 'default' is reserved", name.len() + 1, overload.len()));
            }
        }
        Ok((name, overload))
    }

    pub fn base(&self) -> BaseName {
        BaseName::of(&self.name)
    }

    /// `add.Tensor` or `abs` (no dot for the default overload).
    pub fn qualified(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for OperatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.overload.is_empty() { f.write_str(&self.name) } else { write!(f, "{}.{}", self.name, self.overload) }
    }
}

/// augmented assignment dunders whose `__iX__` spelling is the in-place form.
const AUGMENTED_ASSIGNMENT_NAMES: [&str; 12] =
    ["add", "sub", "mul", "div", "mod", "pow", "lshift", "rshift", "and", "xor", "or", "matmul"];

/// torchgen's `BaseOperatorName`: the stem plus in-place / dunder / functional flags.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseName {
    pub base: String,
    pub inplace: bool,
    pub dunder: bool,
    pub functional_overload: bool,
}

impl BaseName {
    pub fn of(op: &str) -> BaseName {
        if let Some(inner) = op.strip_prefix("__").and_then(|s| s.strip_suffix("__"))
            && !inner.is_empty()
            && !inner.contains('_')
        {
            let (base, inplace) = match inner.strip_prefix('i') {
                Some(rest) if AUGMENTED_ASSIGNMENT_NAMES.contains(&rest) => (rest.to_string(), true),
                _ => (inner.to_string(), false),
            };
            return BaseName { base, inplace, dunder: true, functional_overload: false };
        }
        let (base, inplace) = match op.strip_suffix('_') {
            Some(b) => (b.to_string(), true),
            None => (op.to_string(), false),
        };
        if !inplace && let Some(b) = base.strip_suffix("_functional") {
            return BaseName { base: b.to_string(), inplace: false, dunder: false, functional_overload: true };
        }
        BaseName { base, inplace, dunder: false, functional_overload: false }
    }
}

impl fmt::Display for BaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dunder {
            let i = if self.inplace { "i" } else { "" };
            write!(f, "__{i}{}__", self.base)
        } else {
            let suffix = if self.inplace {
                "_"
            } else if self.functional_overload {
                "_functional"
            } else {
                ""
            };
            write!(f, "{}{suffix}", self.base)
        }
    }
}

/// The kind of a schema (torchgen's `SchemaKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaKind {
    Functional,
    Inplace,
    Out,
    Mutable,
    Scratch,
}

/// A parsed operator schema. Serializes as its canonical text (and deserializes by parsing).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSchema {
    pub name: OperatorName,
    pub arguments: Arguments,
    pub returns: Vec<Return>,
}

impl fmt::Display for FunctionSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}) -> ", self.name, self.arguments)?;
        if self.returns.len() == 1 {
            write!(f, "{}", self.returns[0])
        } else {
            f.write_str("(")?;
            for (i, r) in self.returns.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{r}")?;
            }
            f.write_str(")")
        }
    }
}

impl Serialize for FunctionSchema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Deserializes a string by parsing it, borrowing the text from the input where the format allows
/// (serde_json does for strings without escapes), so loading a snapshot does not copy every schema.
struct ParseVisitor<T>(fn(&str) -> Result<T, SchemaError>);

impl<T> serde::de::Visitor<'_> for ParseVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        (self.0)(text).map_err(|e| E::custom(format!("{text}: {e}")))
    }
}

impl<'de> Deserialize<'de> for FunctionSchema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ParseVisitor(FunctionSchema::parse))
    }
}

impl Serialize for OperatorName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for OperatorName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ParseVisitor(OperatorName::parse))
    }
}

impl FunctionSchema {
    /// Parses a schema; never panics.
    pub fn parse(s: &str) -> Result<FunctionSchema, SchemaError> {
        Parser::new(s).schema()
    }

    pub fn kind(&self) -> SchemaKind {
        let is_out = !self.arguments.out.is_empty();
        let is_scratch = self.arguments.out.iter().any(|a| a.name.starts_with("_scratch_"));
        let is_inplace = self.name.base().inplace;
        let post_self = match self.arguments.self_index() {
            Some(i) => &self.arguments.positional[i + 1..],
            None => &self.arguments.positional[..],
        };
        let is_mutable = post_self.iter().any(Argument::is_write);
        if is_inplace {
            SchemaKind::Inplace
        } else if is_scratch {
            SchemaKind::Scratch
        } else if is_out {
            SchemaKind::Out
        } else if is_mutable {
            SchemaKind::Mutable
        } else {
            SchemaKind::Functional
        }
    }

    /// True when any argument or return mentions `SymInt`.
    pub fn has_symint(&self) -> bool {
        self.arguments.all().any(|a| a.ty.is_symint_like())
    }

    /// Mutates an argument (any `!` annotation).
    pub fn is_mutating(&self) -> bool {
        self.arguments.all().any(Argument::is_write)
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn check_ident(s: &str, offset: usize, what: &str) -> Result<(), SchemaError> {
    if s.is_empty() {
        return Err(SchemaError::new(format!("empty {what}"), offset, 1));
    }
    if let Some(i) = s.bytes().position(|b| !is_ident_byte(b)) {
        return Err(SchemaError::new(
            format!("invalid character {:?} in {what}", s[i..].chars().next().unwrap_or('?')),
            offset + i,
            1,
        ));
    }
    if s.as_bytes()[0].is_ascii_digit() {
        return Err(SchemaError::new(format!("{what} starts with a digit"), offset, 1));
    }
    Ok(())
}

/// Tracks quoted strings (`'...'`, `"..."`, backslash escapes) while scanning bytes.
#[derive(Default)]
struct Quotes {
    quote: Option<u8>,
    escaped: bool,
}

impl Quotes {
    /// Feeds one byte; true when it belongs to a string literal (including its quotes).
    fn consumes(&mut self, b: u8) -> bool {
        match self.quote {
            Some(q) => {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == q {
                    self.quote = None;
                }
                true
            }
            None if b == b'\'' || b == b'"' => {
                self.quote = Some(b);
                true
            }
            None => false,
        }
    }

    fn open(&self) -> bool {
        self.quote.is_some()
    }
}

/// Splits `text` (starting at `base` in the schema) at top-level commas, outside brackets,
/// parentheses and quotes. Returns `(offset, piece)` with pieces trimmed.
fn split_top_level(text: &str, base: usize) -> Result<Vec<(usize, &str)>, SchemaError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut depth: i32 = 0;
    let mut quotes = Quotes::default();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if quotes.consumes(b) {
            continue;
        }
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SchemaError::new("unbalanced closing bracket", base + i, 1));
                }
            }
            b',' if depth == 0 => {
                out.push(trimmed(text, start, i, base));
                start = i + 1;
            }
            _ => {}
        }
    }
    if quotes.open() {
        return Err(SchemaError::new("unterminated string literal", base + start, text.len() - start));
    }
    if depth != 0 {
        return Err(SchemaError::new("unbalanced brackets", base, text.len().max(1)));
    }
    out.push(trimmed(text, start, text.len(), base));
    Ok(out)
}

fn trimmed(text: &str, start: usize, end: usize, base: usize) -> (usize, &str) {
    let piece = &text[start..end];
    let lead = piece.len() - piece.trim_start().len();
    (base + start + lead, piece.trim())
}

struct Parser<'a> {
    src: &'a str,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser { src }
    }

    fn schema(&self) -> Result<FunctionSchema, SchemaError> {
        let s = self.src;
        let open =
            s.find('(').ok_or_else(|| SchemaError::new("expected '(' after the operator name", 0, s.len().max(1)))?;
        let name_text = s[..open].trim_end();
        let name = OperatorName::parse(name_text)?;
        // find the ')' matching `open`
        let bytes = s.as_bytes();
        let mut depth = 0i32;
        let mut quotes = Quotes::default();
        let mut close = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            if quotes.consumes(b) {
                continue;
            }
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        if b != b')' {
                            return Err(SchemaError::new("mismatched ']'", i, 1));
                        }
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close.ok_or_else(|| SchemaError::new("unclosed argument list", open, s.len() - open))?;
        let arguments = self.arguments(&s[open + 1..close], open + 1)?;
        let rest = &s[close + 1..];
        let arrow = rest.trim_start();
        let arrow_at = close + 1 + (rest.len() - arrow.len());
        let Some(ret_text) = arrow.strip_prefix("->") else {
            return Err(SchemaError::new(
                "expected '->' and a return type after the argument list",
                arrow_at.min(s.len().saturating_sub(1)),
                1,
            ));
        };
        let ret_trim = ret_text.trim();
        let ret_at = arrow_at + 2 + (ret_text.len() - ret_text.trim_start().len());
        let returns = self.returns(ret_trim, ret_at)?;
        // torchgen: out arguments are returned in the same order; returns that are written
        // must alias an argument.
        Ok(FunctionSchema { name, arguments, returns })
    }

    fn arguments(&self, text: &str, base: usize) -> Result<Arguments, SchemaError> {
        let mut args = Arguments::default();
        if text.trim().is_empty() {
            return Ok(args);
        }
        #[derive(PartialEq)]
        enum Acc {
            Positional,
            Kwarg,
            Out,
        }
        let mut acc = Acc::Positional;
        let pieces = split_top_level(text, base)?;
        let mut seen_names: Vec<&str> = Vec::with_capacity(pieces.len());
        args.positional.reserve(pieces.len());
        for (off, piece) in pieces {
            if piece.is_empty() {
                return Err(SchemaError::new("empty argument", off.min(self.src.len()), 1));
            }
            if piece == "*" {
                if acc != Acc::Positional {
                    return Err(SchemaError::new("duplicate keyword-only marker '*'", off, 1));
                }
                acc = Acc::Kwarg;
                continue;
            }
            let (arg, name) = self.argument(piece, off)?;
            if seen_names.contains(&name) {
                return Err(SchemaError::new(format!("duplicate argument name '{}'", arg.name), off, piece.len()));
            }
            if arg.is_write() {
                if acc == Acc::Kwarg {
                    acc = Acc::Out;
                }
            } else if acc == Acc::Out {
                return Err(SchemaError::new(
                    "non-mutable keyword-only argument after the out= arguments",
                    off,
                    piece.len(),
                ));
            }
            seen_names.push(name);
            match acc {
                Acc::Positional => args.positional.push(arg),
                Acc::Kwarg => args.kwarg_only.push(arg),
                Acc::Out => args.out.push(arg),
            }
        }
        Ok(args)
    }

    /// Parses `TYPE[(annot)]...` at the start of `text`; returns type, annotation, bytes used.
    fn annotated_type(&self, text: &str, base: usize) -> Result<(Type, Option<Annotation>, usize), SchemaError> {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() && (is_ident_byte(bytes[i]) || bytes[i] == b'.') {
            i += 1;
        }
        let head = &text[..i];
        if head.is_empty() {
            return Err(SchemaError::new("expected a type", base, text.len().clamp(1, 16)));
        }
        let mut ty = if let Some(c) = head.strip_prefix("__torch__.torch.classes.") {
            if c.is_empty() {
                return Err(SchemaError::new("empty custom class name", base, head.len()));
            }
            Type::CustomClass(c.to_string())
        } else {
            match BaseTy::from_name(head) {
                Some(b) => Type::Base(b),
                None => {
                    return Err(SchemaError::new(format!("unknown type '{head}'"), base, head.len()));
                }
            }
        };
        let mut annotation = None;
        if i < bytes.len() && bytes[i] == b'(' {
            if ty != Type::Base(BaseTy::Tensor) {
                return Err(SchemaError::new(
                    format!("alias annotations are only allowed on Tensor, not '{head}'"),
                    base + i,
                    1,
                ));
            }
            let end = text[i..]
                .find(')')
                .map(|j| i + j)
                .ok_or_else(|| SchemaError::new("unclosed alias annotation", base + i, text.len() - i))?;
            annotation = Some(parse_annotation(&text[i + 1..end], base + i + 1)?);
            i = end + 1;
        }
        loop {
            if i < bytes.len() && bytes[i] == b'[' {
                let end =
                    text[i..].find(']').map(|j| i + j).ok_or_else(|| SchemaError::new("unclosed '['", base + i, 1))?;
                let inner = &text[i + 1..end];
                let size = if inner.is_empty() {
                    None
                } else {
                    match inner.parse::<u32>() {
                        Ok(n) if inner.bytes().all(|b| b.is_ascii_digit()) => Some(n),
                        _ => {
                            return Err(SchemaError::new(
                                format!("invalid list size '{inner}'"),
                                base + i + 1,
                                inner.len(),
                            ));
                        }
                    }
                };
                ty = Type::List { elem: Box::new(ty), size };
                i = end + 1;
            } else if i < bytes.len() && bytes[i] == b'?' {
                if ty.is_optional() {
                    return Err(SchemaError::new("doubly optional type", base + i, 1));
                }
                ty = Type::Optional(Box::new(ty));
                i += 1;
            } else {
                break;
            }
        }
        Ok((ty, annotation, i))
    }

    /// One argument, and its name as a slice of `piece`.
    fn argument<'p>(&self, piece: &'p str, off: usize) -> Result<(Argument, &'p str), SchemaError> {
        let (ty, annotation, used) = self.annotated_type(piece, off)?;
        let rest = &piece[used..];
        if !rest.starts_with(' ') {
            return Err(SchemaError::new(
                "expected a space and an argument name after the type",
                off + used.min(piece.len().saturating_sub(1)),
                1,
            ));
        }
        let rest_trim = rest.trim_start();
        let name_off = off + used + (rest.len() - rest_trim.len());
        let (name, default) = match rest_trim.split_once('=') {
            Some((n, d)) => (n.trim_end(), Some((d.trim(), name_off + n.len() + 1))),
            None => (rest_trim, None),
        };
        check_ident(name, name_off, "argument name")?;
        let default = match default {
            None => None,
            Some((d, doff)) => Some(parse_default(d, doff)?),
        };
        Ok((Argument { name: name.to_string(), ty, annotation, default }, name))
    }

    fn returns(&self, text: &str, base: usize) -> Result<Vec<Return>, SchemaError> {
        if text == "()" {
            return Ok(Vec::new());
        }
        if text.is_empty() {
            return Err(SchemaError::new("missing return type", base.min(self.src.len()), 1));
        }
        let (inner, inner_at) = if text.starts_with('(') && text.ends_with(')') && text.len() >= 2 {
            (&text[1..text.len() - 1], base + 1)
        } else {
            (text, base)
        };
        let pieces = split_top_level(inner, inner_at)?;
        let mut out = Vec::with_capacity(pieces.len());
        for (off, piece) in pieces {
            if piece.is_empty() {
                return Err(SchemaError::new("empty return", off.min(self.src.len()), 1));
            }
            let (ty, annotation, used) = self.annotated_type(piece, off)?;
            let rest = &piece[used..];
            let name = if rest.is_empty() {
                None
            } else {
                let n = rest.trim_start();
                if !rest.starts_with(' ') {
                    return Err(SchemaError::new("unexpected text after return type", off + used, rest.len()));
                }
                check_ident(n, off + used + (rest.len() - n.len()), "return name")?;
                Some(n.to_string())
            };
            out.push(Return { name, ty, annotation });
        }
        Ok(out)
    }
}

fn parse_annotation(text: &str, base: usize) -> Result<Annotation, SchemaError> {
    let (before, after) = match text.split_once("->") {
        Some((b, a)) => (b.trim(), Some(a.trim())),
        None => (text.trim(), None),
    };
    let (set_text, is_write) = match before.strip_suffix('!') {
        Some(s) => (s, true),
        None => (before, false),
    };
    let parse_set = |s: &str| -> Result<Vec<String>, SchemaError> {
        let mut v = Vec::new();
        for part in s.split('|') {
            let ok = part == "*" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase()));
            if !ok {
                return Err(SchemaError::new(
                    format!("invalid alias set '{s}' (expected letters like 'a', 'a|b', or '*')"),
                    base,
                    text.len().max(1),
                ));
            }
            v.push(part.to_string());
        }
        Ok(v)
    };
    let alias_set = parse_set(set_text)?;
    let alias_set_after = match after {
        Some(a) => parse_set(a)?,
        None => Vec::new(),
    };
    Ok(Annotation { alias_set, is_write, alias_set_after })
}

fn parse_default(text: &str, off: usize) -> Result<Default, SchemaError> {
    if text.is_empty() {
        return Err(SchemaError::new("empty default value", off, 1));
    }
    let value = default_value(text, off)?;
    Ok(Default { text: text.to_string(), value })
}

fn default_value(text: &str, off: usize) -> Result<DefaultValue, SchemaError> {
    let t = text.trim();
    match t {
        "None" => return Ok(DefaultValue::None),
        "True" => return Ok(DefaultValue::Bool(true)),
        "False" => return Ok(DefaultValue::Bool(false)),
        _ => {}
    }
    let b = t.as_bytes();
    if b.is_empty() {
        return Err(SchemaError::new("empty default value", off, 1));
    }
    if (b[0] == b'\'' || b[0] == b'"') && b.len() >= 2 && b[b.len() - 1] == b[0] {
        return Ok(DefaultValue::Str(unescape(&t[1..t.len() - 1])));
    }
    if b[0] == b'[' {
        if b[b.len() - 1] != b']' {
            return Err(SchemaError::new("unclosed list default", off, t.len()));
        }
        let inner = &t[1..t.len() - 1];
        if inner.trim().is_empty() {
            return Ok(DefaultValue::List(Vec::new()));
        }
        let mut items = Vec::new();
        for (o, p) in split_top_level(inner, off + 1)? {
            items.push(default_value(p, o)?);
        }
        return Ok(DefaultValue::List(items));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(DefaultValue::Int(i));
    }
    if (b[0].is_ascii_digit() || b[0] == b'-' || b[0] == b'.')
        && let Ok(f) = t.parse::<f64>()
    {
        return Ok(DefaultValue::Float(f));
    }
    if t.bytes().all(|c| is_ident_byte(c) || c == b'.' || c == b':') && !b[0].is_ascii_digit() {
        return Ok(DefaultValue::Ident(t.to_string()));
    }
    Err(SchemaError::new(format!("invalid default value '{t}'"), off, t.len()))
}

/// Python-style backslash unescaping of a quoted default (`\\'` -> `'`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) {
        let p = FunctionSchema::parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"));
        assert_eq!(p.to_string(), s);
    }

    #[test]
    fn round_trips() {
        rt("abs(Tensor self) -> Tensor");
        rt("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)");
        rt("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]");
        rt("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
        rt("_foo(Tensor(a!)[] self, Tensor?[] idx, int[2] stride=1, str mode='none') -> ()");
        rt("x(Tensor(a|b) self, float eps=1e-05, ScalarType? dtype=None, int[] dims=[0,1]) -> int");
        rt("y(__torch__.torch.classes.quantized.Conv2dPackedParamsBase packed) -> Tensor(a!)?");
        rt("z(Tensor self, *, MemoryFormat memory_format=contiguous_format) -> Tensor");
        rt("__iand__.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
        rt("f() -> (Tensor, Tensor)");
        rt(r#"_test_string_default(Tensor dummy, str a="\"'\\", str b='"\'\\') -> Tensor"#);
    }

    #[test]
    fn kinds_and_groups() {
        let s = FunctionSchema::parse("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)")
            .unwrap();
        assert_eq!(s.kind(), SchemaKind::Inplace);
        let s = FunctionSchema::parse(
            "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
        )
        .unwrap();
        assert_eq!(s.kind(), SchemaKind::Out);
        assert_eq!(s.arguments.out.len(), 1);
        assert_eq!(BaseName::of("__iand__").base, "and");
        assert!(BaseName::of("__iand__").inplace);
        assert!(BaseName::of("foo_functional").functional_overload);
    }

    #[test]
    fn errors_have_positions() {
        let e = FunctionSchema::parse("abs(Tensr self) -> Tensor").unwrap_err();
        assert_eq!(e.offset, 4);
        let e = FunctionSchema::parse("abs(Tensor self").unwrap_err();
        assert!(e.message.contains("unclosed"));
        let e = FunctionSchema::parse("abs(Tensor self) Tensor").unwrap_err();
        assert!(e.message.contains("->"));
        assert!(FunctionSchema::parse("a(Tensor(A) x) -> Tensor").is_err());
        assert!(FunctionSchema::parse("a(int x=) -> Tensor").is_err());
        assert!(FunctionSchema::parse("a.default(int x) -> Tensor").is_err());
    }
}
