//! Schema types -> Rust types of the generated operator API (the table is documented in
//! `adapter-runtime/src/ivalue.rs`, the runtime module the generated code compiles against).

use crate::schema::{Argument, BaseTy, DefaultValue, Return, Type};

/// How one argument appears in the generated code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgMap {
    /// Rust parameter type.
    pub ty: String,
    /// Expression boxing the parameter named `{x}` into an `IValue`.
    pub boxed: String,
    /// Expression unboxing `{v}` (an `&IValue`) into the parameter type (may borrow from `{v}`).
    pub unboxed: String,
    /// A plain `Tensor` (device-checked, made contiguous / non-scalar when declared).
    pub plain_tensor: bool,
    /// A `Tensor?`.
    pub optional_tensor: bool,
}

fn base_map(b: BaseTy) -> (&'static str, &'static str, &'static str, bool) {
    // (typed, unbox fn, owned conversion for boxing, copy)
    match b {
        BaseTy::Tensor => ("&Tensor", "tensor", "{x}.clone()", false),
        BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => ("i64", "int", "{x}", true),
        BaseTy::Float => ("f64", "float", "{x}", true),
        BaseTy::Bool | BaseTy::SymBool => ("bool", "bool", "{x}", true),
        BaseTy::Scalar => ("Scalar", "scalar", "{x}", true),
        BaseTy::Str | BaseTy::Dimname => ("&str", "str", "{x}.to_string()", false),
        BaseTy::ScalarType => ("DType", "dtype", "{x}", true),
        BaseTy::Layout => ("Layout", "layout", "{x}", true),
        BaseTy::MemoryFormat => ("MemoryFormat", "memory_format", "{x}", true),
        BaseTy::Device => ("Device", "device", "{x}", true),
        BaseTy::Generator => ("&Generator", "generator", "{x}.clone()", false),
        BaseTy::DimVector => ("&[i64]", "int_list", "{x}.to_vec()", false),
        BaseTy::QScheme | BaseTy::Storage | BaseTy::Stream | BaseTy::ConstQuantizerPtr | BaseTy::GraphModule => {
            ("&Opaque", "opaque", "{x}.clone()", false)
        }
    }
}

fn list_map(elem: &Type) -> Option<(&'static str, &'static str)> {
    // (typed, unbox fn)
    Some(match elem {
        Type::Base(BaseTy::Tensor) => ("&[Tensor]", "tensor_list"),
        Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => ("&[Option<Tensor>]", "opt_tensor_list"),
        Type::Base(BaseTy::Int | BaseTy::SymInt) => ("&[i64]", "int_list"),
        Type::Base(BaseTy::Float) => ("&[f64]", "float_list"),
        Type::Base(BaseTy::Bool) => ("&[bool]", "bool_list"),
        Type::Base(BaseTy::Scalar) => ("&[Scalar]", "scalar_list"),
        Type::Base(BaseTy::Str | BaseTy::Dimname) => ("&[String]", "str_list"),
        _ => return None,
    })
}

/// Maps a schema type. `out` arguments are `&mut Tensor` (they may be resized).
pub fn arg_map(ty: &Type, is_out: bool) -> ArgMap {
    let x = "{x}";
    match ty {
        Type::Base(BaseTy::Tensor) if is_out => ArgMap {
            ty: "&mut Tensor".into(),
            boxed: "IValue::from(&*{x})".into(),
            unboxed: "unbox::tensor(OP, \"{n}\", {v})?".into(),
            plain_tensor: false,
            optional_tensor: false,
        },
        Type::Base(b) => {
            let (t, un, owned, _) = base_map(*b);
            ArgMap {
                ty: t.into(),
                boxed: format!("IValue::from({})", owned.replace("{x}", x)),
                unboxed: format!("unbox::{un}(OP, \"{{n}}\", {{v}})?"),
                plain_tensor: *b == BaseTy::Tensor,
                optional_tensor: false,
            }
        }
        Type::List { elem, .. } => match list_map(elem) {
            Some((t, un)) => ArgMap {
                ty: t.into(),
                boxed: "IValue::from({x}.to_vec())".into(),
                unboxed: format!("unbox::{un}(OP, \"{{n}}\", {{v}})?"),
                plain_tensor: false,
                optional_tensor: false,
            },
            None => opaque(),
        },
        Type::Optional(inner) => match &**inner {
            Type::Base(BaseTy::Tensor) => ArgMap {
                ty: "Option<&Tensor>".into(),
                boxed: "IValue::from({x}.cloned())".into(),
                unboxed: "unbox::opt_tensor(OP, \"{n}\", {v})?".into(),
                plain_tensor: false,
                optional_tensor: true,
            },
            Type::Base(b) => {
                let (t, un, owned, copy) = base_map(*b);
                let boxed = if copy {
                    "IValue::from({x})".to_string()
                } else if owned == "{x}.clone()" {
                    "IValue::from({x}.cloned())".to_string()
                } else {
                    format!("IValue::from({x}.map(|y| {}))", owned.replace("{x}", "y"))
                };
                ArgMap {
                    ty: format!("Option<{t}>"),
                    boxed,
                    unboxed: format!("unbox::opt(OP, \"{{n}}\", {{v}}, unbox::{un})?"),
                    plain_tensor: false,
                    optional_tensor: false,
                }
            }
            Type::List { elem, .. } => match list_map(elem) {
                Some((t, un)) => ArgMap {
                    ty: format!("Option<{t}>"),
                    boxed: "IValue::from({x}.map(|y| y.to_vec()))".into(),
                    unboxed: format!("unbox::opt(OP, \"{{n}}\", {{v}}, unbox::{un})?"),
                    plain_tensor: false,
                    optional_tensor: false,
                },
                None => opaque_opt(),
            },
            _ => opaque_opt(),
        },
        Type::CustomClass(_) => opaque(),
    }
}

fn opaque() -> ArgMap {
    ArgMap {
        ty: "&Opaque".into(),
        boxed: "IValue::from({x}.clone())".into(),
        unboxed: "unbox::opaque(OP, \"{n}\", {v})?".into(),
        plain_tensor: false,
        optional_tensor: false,
    }
}

fn opaque_opt() -> ArgMap {
    ArgMap {
        ty: "Option<&Opaque>".into(),
        boxed: "IValue::from({x}.cloned())".into(),
        unboxed: "unbox::opt(OP, \"{n}\", {v}, unbox::opaque)?".into(),
        plain_tensor: false,
        optional_tensor: false,
    }
}

/// The Rust type of one return.
pub fn return_ty(r: &Return) -> String {
    match &r.ty {
        Type::Base(BaseTy::Tensor) => "Tensor".into(),
        Type::Base(BaseTy::Int | BaseTy::SymInt) => "i64".into(),
        Type::Base(BaseTy::Float) => "f64".into(),
        Type::Base(BaseTy::Bool | BaseTy::SymBool) => "bool".into(),
        Type::Base(BaseTy::Scalar) => "Scalar".into(),
        Type::Base(BaseTy::ScalarType) => "DType".into(),
        Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor) => "Vec<Tensor>".into(),
        Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) => "Vec<i64>".into(),
        Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => "Option<Tensor>".into(),
        _ => "Opaque".into(),
    }
}

/// The Rust return type of a schema's returns.
pub fn returns_ty(rets: &[Return]) -> String {
    match rets.len() {
        0 => "()".into(),
        1 => return_ty(&rets[0]),
        _ => format!("({})", rets.iter().map(return_ty).collect::<Vec<_>>().join(", ")),
    }
}

/// Rust keywords an argument name may collide with.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "do", "dyn", "else", "enum", "extern",
    "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro", "match", "mod", "move", "mut",
    "override", "priv", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "try",
    "type", "typeof", "unsafe", "use", "virtual", "where", "while", "yield", "abstract", "become", "unsized",
];

/// Names the generated bodies use themselves.
const RESERVED: &[&str] = &["o", "a", "r", "args", "zd", "OP"];

/// The Rust parameter name of a schema argument (`self` -> `self_`).
pub fn arg_name(name: &str) -> String {
    if KEYWORDS.contains(&name) || RESERVED.contains(&name) { format!("{name}_") } else { name.to_string() }
}

/// An `IValue` expression for a schema default of an argument, or `None` if the default cannot
/// be expressed (the boxed entry point then requires the argument).
pub fn default_ivalue(a: &Argument) -> Option<String> {
    let d = a.default.as_ref()?;
    let base = match &a.ty {
        Type::Optional(inner) => &**inner,
        t => t,
    };
    value_ivalue(&d.value, base)
}

fn value_ivalue(v: &DefaultValue, ty: &Type) -> Option<String> {
    Some(match (v, ty) {
        (DefaultValue::None, _) => "IValue::None".into(),
        (DefaultValue::Bool(b), Type::Base(BaseTy::Scalar)) => format!("IValue::Scalar(Scalar::Bool({b}))"),
        (DefaultValue::Bool(b), _) => format!("IValue::Bool({b})"),
        (DefaultValue::Int(i), Type::Base(BaseTy::Float)) => format!("IValue::Float({i}.0)"),
        (DefaultValue::Int(i), Type::Base(BaseTy::Scalar)) => format!("IValue::Scalar(Scalar::Int({i}))"),
        (DefaultValue::Int(i), Type::List { elem, size }) => {
            let n = size.unwrap_or(1).max(1);
            match &**elem {
                Type::Base(BaseTy::Bool) => format!("IValue::BoolList(vec![{}; {n}])", *i != 0),
                Type::Base(BaseTy::Float) => format!("IValue::FloatList(vec![{i}.0; {n}])"),
                _ => format!("IValue::IntList(vec![{i}; {n}])"),
            }
        }
        (DefaultValue::Int(i), _) => format!("IValue::Int({i})"),
        (DefaultValue::Float(f), Type::Base(BaseTy::Scalar)) => format!("IValue::Scalar(Scalar::Float({}))", lit(*f)?),
        (DefaultValue::Float(f), _) => format!("IValue::Float({})", lit(*f)?),
        (DefaultValue::Str(s), _) => format!("IValue::Str({s:?}.to_string())"),
        (DefaultValue::List(items), Type::List { elem, .. }) => {
            let parts: Option<Vec<String>> = items
                .iter()
                .map(|it| match (it, &**elem) {
                    (DefaultValue::Int(i), Type::Base(BaseTy::Float)) => Some(format!("{i}.0")),
                    (DefaultValue::Int(i), _) => Some(i.to_string()),
                    (DefaultValue::Float(f), _) => lit(*f),
                    (DefaultValue::Bool(b), _) => Some(b.to_string()),
                    _ => None,
                })
                .collect();
            let parts = parts?;
            match &**elem {
                Type::Base(BaseTy::Bool) => format!("IValue::BoolList(vec![{}])", parts.join(", ")),
                Type::Base(BaseTy::Float) => format!("IValue::FloatList(vec![{}])", parts.join(", ")),
                _ => format!("IValue::IntList(vec![{}])", parts.join(", ")),
            }
        }
        (DefaultValue::Ident(id), _) => ident_ivalue(id)?,
        _ => return None,
    })
}

fn lit(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    let s = format!("{f:?}");
    Some(if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") })
}

fn ident_ivalue(id: &str) -> Option<String> {
    Some(match id {
        "long" => "IValue::DType(DType::I64)".into(),
        "int" => "IValue::DType(DType::I32)".into(),
        "float" => "IValue::DType(DType::F32)".into(),
        "double" => "IValue::DType(DType::F64)".into(),
        "contiguous_format" => "IValue::MemoryFormat(MemoryFormat::Contiguous)".into(),
        "preserve_format" => "IValue::MemoryFormat(MemoryFormat::Preserve)".into(),
        "strided" => "IValue::Layout(Layout::Strided)".into(),
        // at::Reduction
        "Mean" => "IValue::Int(1)".into(),
        "Sum" => "IValue::Int(2)".into(),
        "None" => "IValue::None".into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FunctionSchema;

    #[test]
    fn every_type_in_every_shipped_schema_maps_to_something_typed() {
        let Ok(store) = crate::snapshot::Store::discover(None) else { return };
        let Some(v) = store.versions("pytorch").last().cloned() else { return };
        let snap = store.load_pytorch(&v).expect("loads");
        let mut opaque = 0;
        for f in &snap.registry.functions {
            for a in f.func.arguments.all() {
                if arg_map(&a.ty, false).ty.contains("Opaque") {
                    opaque += 1;
                }
            }
        }
        // Storage, Stream, QScheme, quantizer and TorchScript-class arguments only.
        assert!(opaque < 60, "{opaque} arguments fell back to Opaque");
    }

    #[test]
    fn mapping_examples() {
        let s = FunctionSchema::parse(
            "f(Tensor self, Tensor? w, int[2] stride=1, float? eps=None, ScalarType? dtype=None, *, Tensor(a!) out) -> Tensor(a!)",
        )
        .unwrap();
        let tys: Vec<String> = s.arguments.all().map(|a| arg_map(&a.ty, false).ty).collect();
        assert_eq!(tys, ["&Tensor", "Option<&Tensor>", "&[i64]", "Option<f64>", "Option<DType>", "&Tensor"]);
        assert_eq!(arg_map(&s.arguments.out[0].ty, true).ty, "&mut Tensor");
        assert_eq!(default_ivalue(&s.arguments.positional[2]).unwrap(), "IValue::IntList(vec![1; 2])");
        assert_eq!(arg_name("self"), "self_");
        assert_eq!(returns_ty(&s.returns), "Tensor");
    }
}
