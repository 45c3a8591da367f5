//! Data types, scalars and PyTorch's type promotion.
//!
//! `promote_types` is `torch.promote_types`; `result_type` is
//! `torch.result_type`, with PyTorch's three operand categories: tensors
//! with dimensions, zero-dim tensors, and wrapped Python scalars.

use half::{bf16, f16};

/// Element types (the subset of `torch.dtype` the adapter supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
}

/// The default floating dtype (`torch.get_default_dtype()`).
pub const DEFAULT_FLOAT: DType = DType::F32;

impl DType {
    /// All supported dtypes.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    pub fn is_floating(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Integral, excluding bool (`isIntegralType(t, includeBool=false)`).
    pub fn is_integral(self) -> bool {
        matches!(self, DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// PyTorch's name, e.g. `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parse a PyTorch dtype name (`"float32"`, `"float"`, `"torch.half"` ...).
    pub fn from_name(name: &str) -> Option<DType> {
        let n = name.strip_prefix("torch.").unwrap_or(name);
        Some(match n {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "int8" => DType::I8,
            "int16" | "short" => DType::I16,
            "int32" | "int" => DType::I32,
            "int64" | "long" => DType::I64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            _ => return None,
        })
    }

    /// The accumulation dtype PyTorch uses for `sum`/`prod` without an
    /// explicit dtype: integral and bool inputs accumulate (and return) int64.
    pub fn sum_dtype(self) -> DType {
        if self.is_floating() { self } else { DType::I64 }
    }

    /// Rank inside the integral lattice: (bits, signed).
    fn int_rank(self) -> (u32, bool) {
        match self {
            DType::U8 => (8, false),
            DType::I8 => (8, true),
            DType::I16 => (16, true),
            DType::I32 => (32, true),
            DType::I64 => (64, true),
            _ => (0, false),
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

/// `torch.promote_types(a, b)`.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (F16, BF16) | (BF16, F16) => F32,
        (x, y) if x.is_floating() && y.is_floating() => {
            if x.size() >= y.size() {
                x
            } else {
                y
            }
        }
        (x, _) if x.is_floating() => x,
        (_, y) if y.is_floating() => y,
        (x, y) => {
            let (bx, sx) = x.int_rank();
            let (by, sy) = y.int_rank();
            match (sx, sy) {
                (true, true) => {
                    if bx >= by {
                        x
                    } else {
                        y
                    }
                }
                // u8 with a signed type: the signed type, or int16 for int8.
                (false, true) => {
                    if by > 8 {
                        y
                    } else {
                        I16
                    }
                }
                (true, false) => {
                    if bx > 8 {
                        x
                    } else {
                        I16
                    }
                }
                (false, false) => x,
            }
        }
    }
}

/// A Python-number-like scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }
    /// The dtype a wrapped number of this kind has before category rules
    /// (`bool`, `int64`, `float64`).
    pub fn wrapped_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
        }
    }
    pub fn is_floating(self) -> bool {
        matches!(self, Scalar::Float(_))
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

/// One operand of `result_type`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// A tensor with at least one dimension.
    Tensor(DType),
    /// A zero-dim tensor.
    ZeroDim(DType),
    /// A Python number.
    Scalar(Scalar),
}

fn promote_opt(a: Option<DType>, b: DType) -> DType {
    match a {
        Some(a) => promote_types(a, b),
        None => b,
    }
}

fn combine_categories(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match higher {
        Some(h) if h.is_floating() => return Some(h),
        _ => {}
    }
    match (higher, lower) {
        (Some(h), Some(l)) if h == DType::Bool || l.is_floating() => Some(promote_types(h, l)),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// `torch.result_type` over any number of operands (at least one).
pub fn result_type(operands: &[Operand]) -> Option<DType> {
    let (mut dim, mut zero, mut wrapped) = (None, None, None);
    for op in operands {
        match *op {
            Operand::Tensor(t) => dim = Some(promote_opt(dim, t)),
            Operand::ZeroDim(t) => zero = Some(promote_opt(zero, t)),
            Operand::Scalar(s) => {
                let t = match s {
                    Scalar::Float(_) => DEFAULT_FLOAT,
                    other => other.wrapped_dtype(),
                };
                wrapped = Some(promote_opt(wrapped, t));
            }
        }
    }
    combine_categories(dim, combine_categories(zero, wrapped))
}

/// Whether a value of `from` may be cast to `to` for an in-place/out=
/// result (`torch.can_cast`).
pub fn can_cast(from: DType, to: DType) -> bool {
    if from.is_floating() && !to.is_floating() {
        return false;
    }
    if from != DType::Bool && to == DType::Bool {
        return false;
    }
    true
}

// ------------------------------------------------------------ element codec

/// Decode element `i` of a little-endian buffer as f64.
#[inline]
pub fn load_f64(b: &[u8], dtype: DType, i: usize) -> f64 {
    let s = dtype.size();
    let p = &b[i * s..i * s + s];
    match dtype {
        DType::Bool => (p[0] != 0) as u8 as f64,
        DType::U8 => p[0] as f64,
        DType::I8 => p[0] as i8 as f64,
        DType::I16 => i16::from_le_bytes([p[0], p[1]]) as f64,
        DType::I32 => i32::from_le_bytes([p[0], p[1], p[2], p[3]]) as f64,
        DType::I64 => i64::from_le_bytes(p.try_into().unwrap_or([0; 8])) as f64,
        DType::F16 => f16::from_le_bytes([p[0], p[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([p[0], p[1]]).to_f64(),
        DType::F32 => f32::from_le_bytes([p[0], p[1], p[2], p[3]]) as f64,
        DType::F64 => f64::from_le_bytes(p.try_into().unwrap_or([0; 8])),
    }
}

/// Decode element `i` as i64 (floats truncate toward zero, like a C cast).
#[inline]
pub fn load_i64(b: &[u8], dtype: DType, i: usize) -> i64 {
    let s = dtype.size();
    let p = &b[i * s..i * s + s];
    match dtype {
        DType::Bool => (p[0] != 0) as i64,
        DType::U8 => p[0] as i64,
        DType::I8 => p[0] as i8 as i64,
        DType::I16 => i16::from_le_bytes([p[0], p[1]]) as i64,
        DType::I32 => i32::from_le_bytes([p[0], p[1], p[2], p[3]]) as i64,
        DType::I64 => i64::from_le_bytes(p.try_into().unwrap_or([0; 8])),
        _ => load_f64(b, dtype, i) as i64,
    }
}

/// Encode an f64 into `dtype` at element `i` (PyTorch's `static_cast`
/// semantics: round to nearest for floats, truncate then wrap for ints,
/// `!= 0` for bool).
#[inline]
pub fn store_f64(b: &mut [u8], dtype: DType, i: usize, v: f64) {
    let s = dtype.size();
    let p = &mut b[i * s..i * s + s];
    match dtype {
        DType::Bool => p[0] = (v != 0.0) as u8,
        DType::F16 => p.copy_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => p.copy_from_slice(&bf16::from_f64(v).to_le_bytes()),
        DType::F32 => p.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => p.copy_from_slice(&v.to_le_bytes()),
        _ => store_i64(b, dtype, i, v as i64),
    }
}

/// Encode an i64 into `dtype` at element `i` (wrapping for narrow ints).
#[inline]
pub fn store_i64(b: &mut [u8], dtype: DType, i: usize, v: i64) {
    let s = dtype.size();
    let p = &mut b[i * s..i * s + s];
    match dtype {
        DType::Bool => p[0] = (v != 0) as u8,
        DType::U8 => p[0] = v as u8,
        DType::I8 => p[0] = v as i8 as u8,
        DType::I16 => p.copy_from_slice(&(v as i16).to_le_bytes()),
        DType::I32 => p.copy_from_slice(&(v as i32).to_le_bytes()),
        DType::I64 => p.copy_from_slice(&v.to_le_bytes()),
        _ => store_f64(b, dtype, i, v as f64),
    }
}
