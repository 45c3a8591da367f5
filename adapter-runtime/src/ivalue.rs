//! Boxed values: the dynamic form of operator arguments and results.
//!
//! The generated boxed entry point (`generated::ops::call_boxed`) takes an
//! operator name and a `Vec<IValue>`, unboxes them into the typed trait
//! method's arguments and boxes the results. The CPU-fallback tier works on
//! the same boxed form ([`crate::dispatch::fallback`]).
//!
//! Schema type -> Rust type (typed API) -> boxed variant:
//!
//! | schema | typed argument | boxed |
//! | --- | --- | --- |
//! | `Tensor`, `Tensor(a!)` | `&Tensor` (a handle: writes go to its storage) | `Tensor` |
//! | `Tensor?` | `Option<&Tensor>` | `Tensor` or `None` |
//! | `Tensor[]` | `&[Tensor]` | `TensorList` |
//! | `Tensor?[]` | `&[Option<Tensor>]` | `OptTensorList` |
//! | `int`, `SymInt`, `DeviceIndex` | `i64` | `Int` |
//! | `int[]`, `SymInt[]`, `int[N]`, `DimVector` | `&[i64]` | `IntList` |
//! | `float` | `f64` | `Float` |
//! | `float[]` | `&[f64]` | `FloatList` |
//! | `bool`, `SymBool` | `bool` | `Bool` |
//! | `bool[N]` | `&[bool]` | `BoolList` |
//! | `Scalar` | `Scalar` | `Scalar` (an `Int`/`Float`/`Bool` is accepted too) |
//! | `Scalar[]` | `&[Scalar]` | `ScalarList` |
//! | `str`, `Dimname` | `&str` | `Str` |
//! | `str[]`, `Dimname[]` | `&[String]` | `StrList` |
//! | `ScalarType` | `DType` | `DType` |
//! | `Layout` | `Layout` | `Layout` |
//! | `MemoryFormat` | `MemoryFormat` | `MemoryFormat` |
//! | `Device` | `Device` | `Device` |
//! | `Generator` | `&Generator` | `Generator` |
//! | `Storage`, `Stream`, `QScheme`, `ConstQuantizerPtr`, `GraphModule`, custom classes | `&Opaque` | `Opaque` |
//!
//! `T?` is `Option<typed T>` and boxes as `None` when absent.

use std::sync::{Arc, Mutex};

use crate::device::Device;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `torch.layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    Strided,
    SparseCoo,
    SparseCsr,
    SparseCsc,
    SparseBsr,
    SparseBsc,
    Mkldnn,
    Jagged,
}

/// `torch.memory_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryFormat {
    Contiguous,
    Preserve,
    ChannelsLast,
    ChannelsLast3d,
}

/// A value of a schema type the runtime does not model (storages, streams,
/// quantizers, graph modules, TorchScript classes): carried by name so that
/// such operators still have a typed signature and reach the fallback tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opaque {
    /// The schema type (`Storage`, `Stream`, ...).
    pub kind: String,
    /// A description of the value.
    pub value: String,
}

/// A shareable random generator (`Generator?` arguments).
#[derive(Debug, Clone)]
pub struct Generator(pub Arc<Mutex<crate::rng::Generator>>);

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator(Arc::new(Mutex::new(crate::rng::Generator::new(seed))))
    }
    /// Runs `f` with the generator state locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut crate::rng::Generator) -> R) -> R {
        match self.0.lock() {
            Ok(mut g) => f(&mut g),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

/// A boxed argument or result.
#[derive(Debug, Clone)]
pub enum IValue {
    None,
    Tensor(Tensor),
    TensorList(Vec<Tensor>),
    OptTensorList(Vec<Option<Tensor>>),
    Int(i64),
    IntList(Vec<i64>),
    Float(f64),
    FloatList(Vec<f64>),
    Bool(bool),
    BoolList(Vec<bool>),
    Scalar(Scalar),
    ScalarList(Vec<Scalar>),
    Str(String),
    StrList(Vec<String>),
    DType(DType),
    Layout(Layout),
    MemoryFormat(MemoryFormat),
    Device(Device),
    Generator(Generator),
    Opaque(Opaque),
}

impl IValue {
    /// The variant's name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            IValue::None => "None",
            IValue::Tensor(_) => "Tensor",
            IValue::TensorList(_) => "Tensor[]",
            IValue::OptTensorList(_) => "Tensor?[]",
            IValue::Int(_) => "int",
            IValue::IntList(_) => "int[]",
            IValue::Float(_) => "float",
            IValue::FloatList(_) => "float[]",
            IValue::Bool(_) => "bool",
            IValue::BoolList(_) => "bool[]",
            IValue::Scalar(_) => "Scalar",
            IValue::ScalarList(_) => "Scalar[]",
            IValue::Str(_) => "str",
            IValue::StrList(_) => "str[]",
            IValue::DType(_) => "ScalarType",
            IValue::Layout(_) => "Layout",
            IValue::MemoryFormat(_) => "MemoryFormat",
            IValue::Device(_) => "Device",
            IValue::Generator(_) => "Generator",
            IValue::Opaque(_) => "opaque",
        }
    }
    pub fn is_none(&self) -> bool {
        matches!(self, IValue::None)
    }
}

fn mismatch<T>(op: &str, arg: &str, want: &str, got: &IValue) -> Result<T> {
    Err(Error::InvalidArgument(format!("{op}: argument `{arg}` expects {want}, got {}", got.kind())))
}

/// Unboxing helpers used by the generated boxed entry point. Each takes the
/// operator and argument names for the error message.
pub mod unbox {
    use super::*;

    /// `"#i"`, the name of positional argument `i` in an error message, without formatting a
    /// string on every call (the boxed kernel tables unbox by position on the hot path).
    pub fn position(i: usize) -> &'static str {
        const NAMES: [&str; 32] = [
            "#0", "#1", "#2", "#3", "#4", "#5", "#6", "#7", "#8", "#9", "#10", "#11", "#12", "#13", "#14", "#15",
            "#16", "#17", "#18", "#19", "#20", "#21", "#22", "#23", "#24", "#25", "#26", "#27", "#28", "#29", "#30",
            "#31",
        ];
        NAMES.get(i).copied().unwrap_or("#32+")
    }

    pub fn tensor<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a Tensor> {
        match v {
            IValue::Tensor(t) => Ok(t),
            other => mismatch(op, arg, "Tensor", other),
        }
    }
    pub fn opt_tensor<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<Option<&'a Tensor>> {
        match v {
            IValue::None => Ok(None),
            other => tensor(op, arg, other).map(Some),
        }
    }
    pub fn tensor_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [Tensor]> {
        match v {
            IValue::TensorList(t) => Ok(t),
            other => mismatch(op, arg, "Tensor[]", other),
        }
    }
    pub fn opt_tensor_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [Option<Tensor>]> {
        match v {
            IValue::OptTensorList(t) => Ok(t),
            other => mismatch(op, arg, "Tensor?[]", other),
        }
    }
    pub fn int(op: &str, arg: &str, v: &IValue) -> Result<i64> {
        match v {
            IValue::Int(i) => Ok(*i),
            IValue::Scalar(Scalar::Int(i)) => Ok(*i),
            other => mismatch(op, arg, "int", other),
        }
    }
    pub fn int_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [i64]> {
        match v {
            IValue::IntList(l) => Ok(l),
            other => mismatch(op, arg, "int[]", other),
        }
    }
    pub fn float(op: &str, arg: &str, v: &IValue) -> Result<f64> {
        match v {
            IValue::Float(f) => Ok(*f),
            IValue::Int(i) => Ok(*i as f64),
            IValue::Scalar(s) => Ok(s.to_f64()),
            other => mismatch(op, arg, "float", other),
        }
    }
    pub fn float_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [f64]> {
        match v {
            IValue::FloatList(l) => Ok(l),
            other => mismatch(op, arg, "float[]", other),
        }
    }
    pub fn bool(op: &str, arg: &str, v: &IValue) -> Result<bool> {
        match v {
            IValue::Bool(b) => Ok(*b),
            other => mismatch(op, arg, "bool", other),
        }
    }
    pub fn bool_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [bool]> {
        match v {
            IValue::BoolList(l) => Ok(l),
            other => mismatch(op, arg, "bool[]", other),
        }
    }
    pub fn scalar(op: &str, arg: &str, v: &IValue) -> Result<Scalar> {
        match v {
            IValue::Scalar(s) => Ok(*s),
            IValue::Int(i) => Ok(Scalar::Int(*i)),
            IValue::Float(f) => Ok(Scalar::Float(*f)),
            IValue::Bool(b) => Ok(Scalar::Bool(*b)),
            other => mismatch(op, arg, "Scalar", other),
        }
    }
    pub fn scalar_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [Scalar]> {
        match v {
            IValue::ScalarList(l) => Ok(l),
            other => mismatch(op, arg, "Scalar[]", other),
        }
    }
    pub fn str<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a str> {
        match v {
            IValue::Str(s) => Ok(s),
            other => mismatch(op, arg, "str", other),
        }
    }
    pub fn str_list<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a [String]> {
        match v {
            IValue::StrList(l) => Ok(l),
            other => mismatch(op, arg, "str[]", other),
        }
    }
    pub fn dtype(op: &str, arg: &str, v: &IValue) -> Result<DType> {
        match v {
            IValue::DType(d) => Ok(*d),
            other => mismatch(op, arg, "ScalarType", other),
        }
    }
    pub fn layout(op: &str, arg: &str, v: &IValue) -> Result<Layout> {
        match v {
            IValue::Layout(l) => Ok(*l),
            other => mismatch(op, arg, "Layout", other),
        }
    }
    pub fn memory_format(op: &str, arg: &str, v: &IValue) -> Result<MemoryFormat> {
        match v {
            IValue::MemoryFormat(m) => Ok(*m),
            other => mismatch(op, arg, "MemoryFormat", other),
        }
    }
    pub fn device(op: &str, arg: &str, v: &IValue) -> Result<Device> {
        match v {
            IValue::Device(d) => Ok(*d),
            other => mismatch(op, arg, "Device", other),
        }
    }
    pub fn generator<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a Generator> {
        match v {
            IValue::Generator(g) => Ok(g),
            other => mismatch(op, arg, "Generator", other),
        }
    }
    pub fn opaque<'a>(op: &str, arg: &str, v: &'a IValue) -> Result<&'a Opaque> {
        match v {
            IValue::Opaque(o) => Ok(o),
            other => mismatch(op, arg, "an opaque value", other),
        }
    }
    /// `T?` for any `T`: `None` stays `None`, anything else goes through `f`.
    pub fn opt<'a, T>(
        op: &str,
        arg: &str,
        v: &'a IValue,
        f: impl FnOnce(&str, &str, &'a IValue) -> Result<T>,
    ) -> Result<Option<T>> {
        match v {
            IValue::None => Ok(None),
            other => f(op, arg, other).map(Some),
        }
    }
}

macro_rules! from_impls {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl From<$t> for IValue {
            fn from(x: $t) -> IValue {
                IValue::$v(x)
            }
        })*
    };
}

/// An undefined tensor ([`Tensor::undefined`]: a result the operator did not compute) boxes as
/// `None`, as PyTorch's boxed calls carry an undefined `at::Tensor`.
impl From<Tensor> for IValue {
    fn from(t: Tensor) -> IValue {
        if t.is_undefined() { IValue::None } else { IValue::Tensor(t) }
    }
}

from_impls! {
    Vec<Tensor> => TensorList,
    Vec<Option<Tensor>> => OptTensorList,
    i64 => Int,
    Vec<i64> => IntList,
    f64 => Float,
    Vec<f64> => FloatList,
    bool => Bool,
    Vec<bool> => BoolList,
    Scalar => Scalar,
    Vec<Scalar> => ScalarList,
    String => Str,
    Vec<String> => StrList,
    DType => DType,
    Layout => Layout,
    MemoryFormat => MemoryFormat,
    Device => Device,
    Generator => Generator,
    Opaque => Opaque,
}

impl From<&Tensor> for IValue {
    fn from(t: &Tensor) -> IValue {
        IValue::Tensor(t.clone())
    }
}
impl From<&str> for IValue {
    fn from(s: &str) -> IValue {
        IValue::Str(s.to_string())
    }
}
impl<T: Into<IValue>> From<Option<T>> for IValue {
    fn from(x: Option<T>) -> IValue {
        x.map_or(IValue::None, Into::into)
    }
}

/// Conversion of a boxed result back into a typed return value.
pub trait FromIValue: Sized {
    fn from_ivalue(op: &str, v: IValue) -> Result<Self>;
}

macro_rules! from_ivalue_impls {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl FromIValue for $t {
            fn from_ivalue(op: &str, v: IValue) -> Result<$t> {
                match v {
                    IValue::$v(x) => Ok(x),
                    other => mismatch(op, "result", stringify!($v), &other),
                }
            }
        })*
    };
}

/// A `None` result where the schema returns `Tensor` is PyTorch's undefined tensor (a masked-off
/// gradient): [`Tensor::undefined`].
impl FromIValue for Tensor {
    fn from_ivalue(op: &str, v: IValue) -> Result<Tensor> {
        match v {
            IValue::Tensor(x) => Ok(x),
            IValue::None => Ok(Tensor::undefined()),
            other => mismatch(op, "result", "Tensor", &other),
        }
    }
}

from_ivalue_impls! {
    Vec<Tensor> => TensorList,
    i64 => Int,
    f64 => Float,
    bool => Bool,
    Scalar => Scalar,
    DType => DType,
    Opaque => Opaque,
    Vec<Option<Tensor>> => OptTensorList,
    Vec<f64> => FloatList,
    Vec<bool> => BoolList,
    Vec<Scalar> => ScalarList,
    String => Str,
    Vec<String> => StrList,
    Layout => Layout,
    MemoryFormat => MemoryFormat,
    Device => Device,
    Generator => Generator,
}

impl FromIValue for Vec<i64> {
    fn from_ivalue(op: &str, v: IValue) -> Result<Vec<i64>> {
        match v {
            IValue::IntList(x) => Ok(x),
            other => mismatch(op, "result", "int[]", &other),
        }
    }
}

impl<T: FromIValue> FromIValue for Option<T> {
    fn from_ivalue(op: &str, v: IValue) -> Result<Option<T>> {
        match v {
            IValue::None => Ok(None),
            other => T::from_ivalue(op, other).map(Some),
        }
    }
}

/// Arguments of a boxed call with missing trailing arguments filled from `default(i)` (the
/// schema defaults); an argument without a default must be given.
pub fn with_defaults<'a>(
    op: &str,
    args: &'a [IValue],
    n: usize,
    // a function, not a generic closure: one copy of this function, not one per operator
    default: fn(usize) -> Option<IValue>,
) -> Result<std::borrow::Cow<'a, [IValue]>> {
    if args.len() > n {
        return Err(Error::InvalidArgument(format!("{op}: expected at most {n} arguments, got {}", args.len())));
    }
    if args.len() == n {
        return Ok(std::borrow::Cow::Borrowed(args));
    }
    let mut v = args.to_vec();
    for i in args.len()..n {
        match default(i) {
            Some(d) => v.push(d),
            None => {
                return Err(Error::InvalidArgument(format!(
                    "{op}: argument {i} has no default and was not given ({} given)",
                    args.len()
                )));
            }
        }
    }
    Ok(std::borrow::Cow::Owned(v))
}

/// Takes exactly `N` results out of a boxed result list.
pub fn results<const N: usize>(op: &str, v: Vec<IValue>) -> Result<[IValue; N]> {
    let n = v.len();
    v.try_into().map_err(|_| Error::InvalidArgument(format!("{op}: expected {N} results, got {n}")))
}
