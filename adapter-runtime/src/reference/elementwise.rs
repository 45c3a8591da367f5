//! Elementwise arithmetic, comparisons, `where`, `masked_fill`, `clamp`.

use super::{Rhs, f64s, i64s, on_host1, operand, pmap, pmap2, require_float};
use crate::dtype::{DEFAULT_FLOAT, DType, Operand, Scalar, result_type};
use crate::error::{Error, Result, dtype_err};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// Division rounding mode (`rounding_mode=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundingMode {
    Trunc,
    Floor,
}

fn common(ops: &[Operand]) -> Result<DType> {
    result_type(ops).ok_or_else(|| Error::DType("no operands".into()))
}

fn out_f(v: Vec<f64>, shape: &[usize], d: DType) -> Result<Tensor> {
    Tensor::from_f64(&v, shape, d)
}
fn out_i(v: Vec<i64>, shape: &[usize], d: DType) -> Result<Tensor> {
    Tensor::from_i64(&v, shape, d)
}
fn out_b(v: Vec<bool>, shape: &[usize]) -> Result<Tensor> {
    Tensor::from_i64(&v.into_iter().map(i64::from).collect::<Vec<_>>(), shape, DType::Bool)
}

fn check_alpha(name: &str, dtype: DType, alpha: Scalar) -> Result<()> {
    if !dtype.is_floating() && alpha.is_floating() {
        return dtype_err(format!(
            "{name}: For integral input tensors, argument alpha must not be a floating point number."
        ));
    }
    if dtype != DType::Bool && matches!(alpha, Scalar::Bool(_)) {
        return dtype_err(format!("{name}: Boolean alpha only supported for Boolean results."));
    }
    Ok(())
}

fn binary(
    name: &'static str,
    a: &Tensor,
    b: Rhs<'_>,
    body: impl FnOnce(&Tensor, &Tensor, DType, &[usize]) -> Result<Tensor>,
) -> Result<Tensor> {
    let bt = b.tensor();
    let ops = [operand(a), b.operand()];
    let d = common(&ops)?;
    let b_is_scalar = matches!(b, Rhs::Scalar(_));
    on_host1(name, &[a, &bt], |h| {
        let shape = broadcast_shapes(h[0].sizes(), h[1].sizes())?;
        let x = to_common(&h[0], false, d)?;
        let y = to_common(&h[1], b_is_scalar, d)?;
        body(&x, &y, d, &shape)
    })
}

/// Cast an operand to the common dtype before computing, as
/// TensorIterator does: tensors (and integral scalars) become `common`,
/// so e.g. a wider zero-dim operand wraps; floating Python scalars become
/// the op-math type (`float32` for reduced precision, `float64` for double).
pub(crate) fn to_common(t: &Tensor, wrapped_scalar: bool, common: DType) -> Result<Tensor> {
    if wrapped_scalar && common.is_floating() {
        let opmath = if common == DType::F64 { DType::F64 } else { DType::F32 };
        return t.to_dtype(opmath);
    }
    t.to_dtype(common)
}

/// `torch.add(a, b, alpha=alpha)`.
/// xirang-fallback: add.Tensor, add.Scalar
pub fn add<'a>(a: &Tensor, b: impl Into<Rhs<'a>>, alpha: Scalar) -> Result<Tensor> {
    add_sub("add", a, b.into(), alpha, false)
}

/// `torch.sub(a, b, alpha=alpha)`.
/// xirang-fallback: sub.Tensor, sub.Scalar
pub fn sub<'a>(a: &Tensor, b: impl Into<Rhs<'a>>, alpha: Scalar) -> Result<Tensor> {
    add_sub("sub", a, b.into(), alpha, true)
}

fn add_sub(name: &'static str, a: &Tensor, b: Rhs<'_>, alpha: Scalar, neg: bool) -> Result<Tensor> {
    let b_bool = match b {
        Rhs::Tensor(t) => t.dtype() == DType::Bool,
        Rhs::Scalar(s) => matches!(s, Scalar::Bool(_)),
    };
    if neg && (a.dtype() == DType::Bool || b_bool) {
        return dtype_err(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
        );
    }
    binary(name, a, b, |x, y, d, shape| {
        check_alpha(name, d, alpha)?;
        if d.is_floating() {
            let al = if neg { -alpha.to_f64() } else { alpha.to_f64() };
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, |p, q| p + al * q), shape, d)
        } else {
            let al = alpha.to_i64();
            let al = if neg { al.wrapping_neg() } else { al };
            out_i(pmap2(&i64s(x, shape)?, &i64s(y, shape)?, |p, q| p.wrapping_add(al.wrapping_mul(q))), shape, d)
        }
    })
}

/// `torch.mul(a, b)`.
/// xirang-fallback: mul.Tensor, mul.Scalar
pub fn mul<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    binary("mul", a, b.into(), |x, y, d, shape| {
        if d.is_floating() {
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, |p, q| p * q), shape, d)
        } else {
            out_i(pmap2(&i64s(x, shape)?, &i64s(y, shape)?, i64::wrapping_mul), shape, d)
        }
    })
}

/// PyTorch's `div_floor_floating`.
pub fn div_floor_f64(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let mut fl = div.floor();
        if div - fl > 0.5 {
            fl += 1.0;
        }
        fl
    } else {
        (0.0f64).copysign(a / b)
    }
}

/// Python-style floor division for integers.
pub fn div_floor_i64(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if (a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0)) { q.wrapping_sub(1) } else { q }
}

/// `torch.div(a, b, rounding_mode=...)`. True division promotes integral
/// results to the default float dtype; integer division by zero is an error.
pub fn div<'a>(a: &Tensor, b: impl Into<Rhs<'a>>, rounding: Option<RoundingMode>) -> Result<Tensor> {
    binary("div", a, b.into(), |x, y, d, shape| match rounding {
        None => {
            let od = if d.is_floating() { d } else { DEFAULT_FLOAT };
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, |p, q| p / q), shape, od)
        }
        Some(mode) => {
            if d == DType::Bool {
                return dtype_err("\"div_floor_cpu\"/\"div_trunc_cpu\" not implemented for 'Bool'");
            }
            if d.is_floating() {
                let f = match mode {
                    RoundingMode::Trunc => |p: f64, q: f64| (p / q).trunc(),
                    RoundingMode::Floor => div_floor_f64,
                };
                out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, f), shape, d)
            } else {
                let (p, q) = (i64s(x, shape)?, i64s(y, shape)?);
                if q.contains(&0) {
                    return Err(Error::InvalidArgument("ZeroDivisionError".into()));
                }
                // Divide in the result dtype's range (e.g. int8 -128 / -1 wraps).
                let f = match mode {
                    RoundingMode::Trunc => i64::wrapping_div,
                    RoundingMode::Floor => div_floor_i64,
                };
                out_i(pmap2(&p, &q, f), shape, d)
            }
        }
    })
}

/// Integer power with PyTorch's rules for negative exponents.
fn powi(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut e, mut r) = (a, b as u64, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    r
}

/// `torch.pow(a, b)`.
/// xirang-fallback: pow.Tensor_Tensor, pow.Tensor_Scalar
pub fn pow<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    let b = b.into();
    if let Rhs::Scalar(s) = b
        && !a.dtype().is_floating()
        && !s.is_floating()
        && s.to_i64() < 0
    {
        return dtype_err("Integers to negative integer powers are not allowed.");
    }
    binary("pow", a, b, |x, y, d, shape| {
        if d == DType::Bool {
            return dtype_err("\"pow\" not implemented for 'Bool'");
        }
        if d.is_floating() {
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, f64::powf), shape, d)
        } else {
            out_i(pmap2(&i64s(x, shape)?, &i64s(y, shape)?, powi), shape, d)
        }
    })
}

/// `torch.maximum` (NaN-propagating).
/// xirang-fallback: maximum
pub fn maximum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    min_max("maximum", a, b, true)
}

/// `torch.minimum` (NaN-propagating).
/// xirang-fallback: minimum
pub fn minimum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    min_max("minimum", a, b, false)
}

fn min_max(name: &'static str, a: &Tensor, b: &Tensor, max: bool) -> Result<Tensor> {
    binary(name, a, Rhs::Tensor(b), |x, y, d, shape| {
        if d.is_floating() {
            let f = move |p: f64, q: f64| {
                if p.is_nan() || q.is_nan() {
                    f64::NAN
                } else if max {
                    p.max(q)
                } else {
                    p.min(q)
                }
            };
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, f), shape, d)
        } else {
            let f = move |p: i64, q: i64| if max { p.max(q) } else { p.min(q) };
            out_i(pmap2(&i64s(x, shape)?, &i64s(y, shape)?, f), shape, d)
        }
    })
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// `torch.eq/ne/lt/le/gt/ge`: compares in the promoted dtype, returns bool.
pub fn compare<'a>(op: CmpOp, a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    binary("compare", a, b.into(), |x, y, d, shape| {
        let v: Vec<i64> = if d.is_floating() {
            pmap2(&f64s(x, shape)?, &f64s(y, shape)?, move |p, q| cmp(op, p, q) as i64)
        } else {
            pmap2(&i64s(x, shape)?, &i64s(y, shape)?, move |p, q| cmp(op, p, q) as i64)
        };
        out_i(v, shape, DType::Bool)
    })
}

fn cmp<T: PartialOrd>(op: CmpOp, p: T, q: T) -> bool {
    match op {
        CmpOp::Eq => p == q,
        CmpOp::Ne => p != q,
        CmpOp::Lt => p < q,
        CmpOp::Le => p <= q,
        CmpOp::Gt => p > q,
        CmpOp::Ge => p >= q,
    }
}

/// xirang-fallback: eq.Tensor, eq.Scalar
pub fn eq<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Eq, a, b)
}
/// xirang-fallback: ne.Tensor, ne.Scalar
pub fn ne<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Ne, a, b)
}
/// xirang-fallback: lt.Tensor, lt.Scalar
pub fn lt<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Lt, a, b)
}
/// xirang-fallback: le.Tensor, le.Scalar
pub fn le<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Le, a, b)
}
/// xirang-fallback: gt.Tensor, gt.Scalar
pub fn gt<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Gt, a, b)
}
/// xirang-fallback: ge.Tensor, ge.Scalar
pub fn ge<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    compare(CmpOp::Ge, a, b)
}

// ------------------------------------------------------------------ unary

/// Unary ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    Neg,
    Abs,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Sigmoid,
    Tanh,
    Relu,
    Gelu,
    GeluTanh,
    Silu,
}

/// `gelu` with `approximate='none'`.
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}

/// `gelu` with `approximate='tanh'`.
pub fn gelu_tanh_f64(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
}

pub fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Apply a unary op with PyTorch's dtype rules: `exp log sqrt rsqrt
/// sigmoid tanh` promote integral inputs to the default float dtype;
/// `gelu silu` require floats; `neg abs relu` keep integral dtypes and
/// reject bool.
pub fn unary(op: Unary, x: &Tensor) -> Result<Tensor> {
    on_host1("unary", &[x], |h| {
        let t = &h[0];
        let d = t.dtype();
        let shape = t.sizes().to_vec();
        match op {
            Unary::Neg | Unary::Abs | Unary::Relu => {
                if d == DType::Bool {
                    return dtype_err(format!("{op:?} is not supported for bool tensors"));
                }
                if d.is_floating() {
                    let f = match op {
                        Unary::Neg => |v: &f64| -v,
                        Unary::Abs => |v: &f64| v.abs(),
                        _ => |v: &f64| if v.is_nan() { *v } else { v.max(0.0) },
                    };
                    out_f(pmap(&t.to_f64_vec()?, f), &shape, d)
                } else {
                    let f = match op {
                        Unary::Neg => |v: &i64| v.wrapping_neg(),
                        Unary::Abs => |v: &i64| v.wrapping_abs(),
                        _ => |v: &i64| (*v).max(0),
                    };
                    out_i(pmap(&t.to_i64_vec()?, f), &shape, d)
                }
            }
            Unary::Gelu | Unary::GeluTanh | Unary::Silu => {
                require_float(&format!("{op:?}"), d)?;
                let f = match op {
                    Unary::Gelu => |v: &f64| gelu_f64(*v),
                    Unary::GeluTanh => |v: &f64| gelu_tanh_f64(*v),
                    _ => |v: &f64| v * sigmoid_f64(*v),
                };
                out_f(pmap(&t.to_f64_vec()?, f), &shape, d)
            }
            _ => {
                let od = if d.is_floating() { d } else { DEFAULT_FLOAT };
                let f = match op {
                    Unary::Exp => |v: &f64| v.exp(),
                    Unary::Expm1 => |v: &f64| v.exp_m1(),
                    Unary::Log => |v: &f64| v.ln(),
                    Unary::Log1p => |v: &f64| v.ln_1p(),
                    Unary::Sqrt => |v: &f64| v.sqrt(),
                    Unary::Rsqrt => |v: &f64| 1.0 / v.sqrt(),
                    Unary::Sigmoid => |v: &f64| sigmoid_f64(*v),
                    _ => |v: &f64| v.tanh(),
                };
                out_f(pmap(&t.to_f64_vec()?, f), &shape, od)
            }
        }
    })
}

/// xirang-fallback: neg
pub fn neg(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Neg, x)
}
/// xirang-fallback: abs
pub fn abs(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Abs, x)
}
/// xirang-fallback: exp
pub fn exp(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Exp, x)
}
/// xirang-fallback: log
pub fn log(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Log, x)
}
/// xirang-fallback: expm1
pub fn expm1(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Expm1, x)
}
/// xirang-fallback: log1p
pub fn log1p(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Log1p, x)
}

/// A floating three-tensor elementwise op over the broadcast of `a`, `b` and `c`, computed in f64
/// and rounded once to their common dtype (`addcmul`, `addcdiv`, `lerp`).
fn ternary_f(
    name: &'static str,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    f: impl Fn(f64, f64, f64) -> f64,
) -> Result<Tensor> {
    let d = common(&[operand(a), operand(b), operand(c)])?;
    require_float(name, d)?;
    on_host1(name, &[a, b, c], |h| {
        let shape = broadcast_shapes(&broadcast_shapes(h[0].sizes(), h[1].sizes())?, h[2].sizes())?;
        let (x, y, z) = (f64s(&h[0], &shape)?, f64s(&h[1], &shape)?, f64s(&h[2], &shape)?);
        let v = x.iter().zip(y.iter().zip(&z)).map(|(x, (y, z))| f(*x, *y, *z)).collect();
        out_f(v, &shape, d)
    })
}

/// `addcmul(self, tensor1, tensor2, value)`: `self + value * tensor1 * tensor2`.
/// xirang-fallback: addcmul
pub fn addcmul(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: Scalar) -> Result<Tensor> {
    let v = value.to_f64();
    ternary_f("addcmul", self_, tensor1, tensor2, move |s, a, b| s + v * a * b)
}

/// `addcdiv(self, tensor1, tensor2, value)`: `self + value * tensor1 / tensor2`.
/// xirang-fallback: addcdiv
pub fn addcdiv(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: Scalar) -> Result<Tensor> {
    let v = value.to_f64();
    ternary_f("addcdiv", self_, tensor1, tensor2, move |s, a, b| s + v * (a / b))
}

fn lerp_f64(s: f64, e: f64, w: f64) -> f64 {
    if w.abs() < 0.5 { s + w * (e - s) } else { e - (e - s) * (1.0 - w) }
}

/// `lerp.Tensor(self, end, weight)`.
/// xirang-fallback: lerp.Tensor
pub fn lerp_tensor(self_: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    ternary_f("lerp", self_, end, weight, lerp_f64)
}

/// `lerp.Scalar(self, end, weight)`.
/// xirang-fallback: lerp.Scalar
pub fn lerp_scalar(self_: &Tensor, end: &Tensor, weight: Scalar) -> Result<Tensor> {
    let w = weight.to_f64();
    let wt = super::on_device_of(Tensor::from_f64(&[w], &[], self_.dtype())?, self_)?;
    ternary_f("lerp", self_, end, &wt, lerp_f64)
}
/// xirang-fallback: sqrt
pub fn sqrt(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Sqrt, x)
}
/// xirang-fallback: rsqrt
pub fn rsqrt(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Rsqrt, x)
}
/// xirang-fallback: sigmoid
pub fn sigmoid(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Sigmoid, x)
}
/// xirang-fallback: tanh
pub fn tanh(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Tanh, x)
}
/// xirang-fallback: relu
pub fn relu(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Relu, x)
}
/// xirang-fallback: silu
pub fn silu(x: &Tensor) -> Result<Tensor> {
    unary(Unary::Silu, x)
}
/// `hardsigmoid`: `relu6(x + 3) / 6`.
/// xirang-fallback: hardsigmoid
pub fn hardsigmoid(x: &Tensor) -> Result<Tensor> {
    require_float("hardsigmoid", x.dtype())?;
    float_fn("hardsigmoid", x, |v| (v + 3.0).clamp(0.0, 6.0) / 6.0)
}
/// `hardswish`: `x * relu6(x + 3) / 6`.
/// xirang-fallback: hardswish
pub fn hardswish(x: &Tensor) -> Result<Tensor> {
    require_float("hardswish", x.dtype())?;
    float_fn("hardswish", x, |v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0)
}
/// `hardswish_`: [`hardswish`] written into `x`.
/// xirang-fallback: hardswish_
pub fn hardswish_(x: &Tensor) -> Result<Tensor> {
    x.copy_(&hardswish(x)?)?;
    Ok(x.clone())
}

/// `gelu(approximate=...)`: `"none"` or `"tanh"`.
/// xirang-fallback: gelu
pub fn gelu(x: &Tensor, approximate: &str) -> Result<Tensor> {
    match approximate {
        "none" => unary(Unary::Gelu, x),
        "tanh" => unary(Unary::GeluTanh, x),
        other => {
            Err(Error::InvalidArgument(format!("approximate argument must be either none or tanh, got {other:?}")))
        }
    }
}

/// `torch.clamp(x, min, max)` with scalar bounds. The result dtype is
/// `result_type(x, min, max)`; NaN inputs and NaN bounds give NaN; if
/// `min > max` every element becomes `max`.
pub fn clamp(x: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(Error::InvalidArgument("torch.clamp: At least one of 'min' or 'max' must not be None".into()));
    }
    let mut ops = vec![operand(x)];
    ops.extend(min.map(Operand::Scalar));
    ops.extend(max.map(Operand::Scalar));
    let d = common(&ops)?;
    if d == DType::Bool {
        return dtype_err("\"clamp_cpu\" not implemented for 'Bool'");
    }
    on_host1("clamp", &[x], |h| {
        let t = &to_common(&h[0], false, d)?;
        let shape = t.sizes().to_vec();
        if d.is_floating() {
            // Float bounds are rounded to the op-math type.
            let opmath = if d == DType::F64 { DType::F64 } else { DType::F32 };
            let cast = |s: Scalar| Tensor::scalar_of(s, opmath).to_f64_vec().map(|v| v[0]);
            let lo = min.map(cast).transpose()?;
            let hi = max.map(cast).transpose()?;
            let f = move |v: &f64| {
                let mut v = *v;
                if v.is_nan() {
                    return v;
                }
                if let Some(l) = lo {
                    if l.is_nan() {
                        return l;
                    }
                    v = v.max(l);
                }
                if let Some(u) = hi {
                    if u.is_nan() {
                        return u;
                    }
                    v = v.min(u);
                }
                v
            };
            out_f(pmap(&t.to_f64_vec()?, f), &shape, d)
        } else {
            // Bounds are cast to the result dtype first (so they wrap).
            let cast = |s: Scalar| Tensor::scalar_of(s, d).to_i64_vec().map(|v| v[0]);
            let lo = min.map(cast).transpose()?;
            let hi = max.map(cast).transpose()?;
            let f = move |v: &i64| {
                let mut v = *v;
                if let Some(l) = lo {
                    v = v.max(l);
                }
                if let Some(u) = hi {
                    v = v.min(u);
                }
                v
            };
            out_i(pmap(&t.to_i64_vec()?, f), &shape, d)
        }
    })
}

/// `torch.where(cond, a, b)`: `cond` must be bool; the result dtype is
/// `result_type(a, b)`; all three broadcast.
/// xirang-fallback: where.self
pub fn where_<'a, 'b>(cond: &Tensor, a: impl Into<Rhs<'a>>, b: impl Into<Rhs<'b>>) -> Result<Tensor> {
    if cond.dtype() != DType::Bool {
        return dtype_err(format!(
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            cond.dtype().name()
        ));
    }
    let (a, b) = (a.into(), b.into());
    let d = common(&[a.operand(), b.operand()])?;
    let (at, bt) = (a.tensor(), b.tensor());
    on_host1("where", &[cond, &at, &bt], |h| {
        let shape = broadcast_shapes(&broadcast_shapes(h[0].sizes(), h[1].sizes())?, h[2].sizes())?;
        let c = h[0].broadcast_to(&shape)?.to_bool_vec()?;
        if d.is_floating() {
            let (x, y) = (f64s(&h[1], &shape)?, f64s(&h[2], &shape)?);
            let v = c.iter().zip(x.iter().zip(&y)).map(|(c, (x, y))| if *c { *x } else { *y }).collect();
            out_f(v, &shape, d)
        } else {
            let (x, y) = (i64s(&h[1], &shape)?, i64s(&h[2], &shape)?);
            let v = c.iter().zip(x.iter().zip(&y)).map(|(c, (x, y))| if *c { *x } else { *y }).collect();
            out_i(v, &shape, d)
        }
    })
}

/// `Tensor.masked_fill(mask, value)`: out-of-place; `mask` (bool) must
/// broadcast to `x`'s shape; the result keeps `x`'s dtype.
/// xirang-fallback: masked_fill.Scalar
pub fn masked_fill(x: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    if mask.dtype() != DType::Bool {
        return dtype_err(format!(
            "masked_fill_ only supports boolean masks, but got mask with dtype {}",
            mask.dtype().name()
        ));
    }
    on_host1("masked_fill", &[x, mask], |h| {
        let shape = h[0].sizes().to_vec();
        let m = h[1].broadcast_to(&shape)?.to_bool_vec()?;
        let out = h[0].clone_contiguous()?;
        let fill = Tensor::scalar_of(value, x.dtype()).broadcast_to(&shape)?;
        // Rebuild with selected positions replaced.
        let d = x.dtype();
        if d.is_floating() {
            let (mut v, f) = (out.to_f64_vec()?, fill.to_f64_vec()?);
            for (i, mm) in m.iter().enumerate() {
                if *mm {
                    v[i] = f[i];
                }
            }
            out_f(v, &shape, d)
        } else {
            let (mut v, f) = (out.to_i64_vec()?, fill.to_i64_vec()?);
            for (i, mm) in m.iter().enumerate() {
                if *mm {
                    v[i] = f[i];
                }
            }
            out_i(v, &shape, d)
        }
    })
}

/// `Tensor.masked_fill_(mask, value)`: in place (works on views and device tensors).
pub fn masked_fill_(x: &Tensor, mask: &Tensor, value: Scalar) -> Result<()> {
    let r = masked_fill(x, mask, value)?;
    x.copy_(&r)
}

/// Store an op's result into `x` in place (PyTorch's in-place rules):
/// the result dtype must be castable to `x`'s dtype and the broadcast
/// shape must equal `x`'s shape.
pub fn assign_inplace(x: &Tensor, result: &Tensor) -> Result<()> {
    if !crate::dtype::can_cast(result.dtype(), x.dtype()) {
        return dtype_err(format!(
            "result type {} can't be cast to the desired output type {}",
            result.dtype().name(),
            x.dtype().name()
        ));
    }
    if result.sizes() != x.sizes() {
        return Err(Error::Shape(format!(
            "output with shape {:?} doesn't match the broadcast shape {:?}",
            x.sizes(),
            result.sizes()
        )));
    }
    copy_into_view(x, result)
}

/// `dst.copy_(src)`: the device's copy kernel when both are on one device (no host round
/// trip), else [`Tensor::copy_`] through the host.
pub fn copy_into_view(dst: &Tensor, src: &Tensor) -> Result<()> {
    match crate::kernels::copy_strided(dst, src) {
        Err(Error::Unsupported(_)) => dst.copy_(src),
        r => r,
    }
}

/// Store an op's result into an `out=` tensor: the dtype must be castable;
/// an `out` of a different shape is replaced by a fresh tensor of the
/// result's shape on `out`'s device (PyTorch resizes it).
pub fn write_out(result: &Tensor, out: &mut Tensor) -> Result<()> {
    if !crate::dtype::can_cast(result.dtype(), out.dtype()) {
        return dtype_err(format!(
            "result type {} can't be cast to the desired output type {}",
            result.dtype().name(),
            out.dtype().name()
        ));
    }
    if result.sizes() != out.sizes() {
        let fresh = result.to_dtype(out.dtype())?.clone_contiguous()?;
        *out = match out.device_ctx() {
            Some(ctx) => fresh.to_ctx(ctx)?,
            None => fresh.to_cpu()?,
        };
        return Ok(());
    }
    copy_into_view(out, result)
}

/// `Tensor.add_(other, alpha)`.
pub fn add_<'a>(x: &Tensor, other: impl Into<Rhs<'a>>, alpha: Scalar) -> Result<()> {
    assign_inplace(x, &add(x, other, alpha)?)
}

/// `Tensor.sub_(other, alpha)`.
pub fn sub_<'a>(x: &Tensor, other: impl Into<Rhs<'a>>, alpha: Scalar) -> Result<()> {
    assign_inplace(x, &sub(x, other, alpha)?)
}

/// `Tensor.mul_(other)`.
pub fn mul_<'a>(x: &Tensor, other: impl Into<Rhs<'a>>) -> Result<()> {
    assign_inplace(x, &mul(x, other)?)
}

/// `Tensor.div_(other, rounding_mode)`: true division into an integral
/// tensor is an error (the float result cannot be cast back).
pub fn div_<'a>(x: &Tensor, other: impl Into<Rhs<'a>>, rounding: Option<RoundingMode>) -> Result<()> {
    assign_inplace(x, &div(x, other, rounding)?)
}

// ------------------------------------------------------------------ Core ATen math
//
// Host references of the trigonometric and hyperbolic functions, `erf`, rounding, `sign`,
// NaN/inf predicates, logical and bitwise operators, `atan2`, `fmod` and `remainder`, with
// PyTorch's dtype rules. Floats compute in f64 and round once.

/// A float function; integral and bool inputs promote to the default float dtype.
fn float_fn(name: &'static str, x: &Tensor, f: fn(f64) -> f64) -> Result<Tensor> {
    on_host1(name, &[x], |h| {
        let t = &h[0];
        let d = if t.dtype().is_floating() { t.dtype() } else { DEFAULT_FLOAT };
        out_f(pmap(&t.to_f64_vec()?, |v| f(*v)), t.sizes(), d)
    })
}

/// A rounding function: integers are returned unchanged (a copy); bool is an error.
fn rounding_fn(name: &'static str, x: &Tensor, f: fn(f64) -> f64) -> Result<Tensor> {
    on_host1(name, &[x], |h| {
        let t = &h[0];
        let d = t.dtype();
        if d == DType::Bool {
            return dtype_err(format!("\"{name}\" not implemented for 'Bool'"));
        }
        if d.is_floating() {
            out_f(pmap(&t.to_f64_vec()?, |v| f(*v)), t.sizes(), d)
        } else {
            out_i(t.to_i64_vec()?, t.sizes(), d)
        }
    })
}

/// A bool-valued function of the value (integers and bool as f64).
fn predicate_fn(name: &'static str, x: &Tensor, f: fn(f64) -> bool) -> Result<Tensor> {
    on_host1(name, &[x], |h| {
        let t = &h[0];
        let v = if t.dtype().is_floating() {
            t.to_f64_vec()?
        } else {
            t.to_i64_vec()?.into_iter().map(|v| v as f64).collect()
        };
        out_b(pmap(&v, |v| f(*v)), t.sizes())
    })
}

/// xirang-fallback: sin
pub fn sin(x: &Tensor) -> Result<Tensor> {
    float_fn("sin", x, f64::sin)
}
/// xirang-fallback: cos
pub fn cos(x: &Tensor) -> Result<Tensor> {
    float_fn("cos", x, f64::cos)
}
/// xirang-fallback: tan
pub fn tan(x: &Tensor) -> Result<Tensor> {
    float_fn("tan", x, f64::tan)
}
/// xirang-fallback: asin
pub fn asin(x: &Tensor) -> Result<Tensor> {
    float_fn("asin", x, f64::asin)
}
/// xirang-fallback: acos
pub fn acos(x: &Tensor) -> Result<Tensor> {
    float_fn("acos", x, f64::acos)
}
/// xirang-fallback: atan
pub fn atan(x: &Tensor) -> Result<Tensor> {
    float_fn("atan", x, f64::atan)
}
/// xirang-fallback: sinh
pub fn sinh(x: &Tensor) -> Result<Tensor> {
    float_fn("sinh", x, f64::sinh)
}
/// xirang-fallback: cosh
pub fn cosh(x: &Tensor) -> Result<Tensor> {
    float_fn("cosh", x, f64::cosh)
}
/// xirang-fallback: asinh
pub fn asinh(x: &Tensor) -> Result<Tensor> {
    float_fn("asinh", x, f64::asinh)
}
/// xirang-fallback: acosh
pub fn acosh(x: &Tensor) -> Result<Tensor> {
    float_fn("acosh", x, f64::acosh)
}
/// xirang-fallback: atanh
pub fn atanh(x: &Tensor) -> Result<Tensor> {
    float_fn("atanh", x, f64::atanh)
}
/// xirang-fallback: exp2
pub fn exp2(x: &Tensor) -> Result<Tensor> {
    float_fn("exp2", x, f64::exp2)
}
/// xirang-fallback: erf
pub fn erf(x: &Tensor) -> Result<Tensor> {
    float_fn("erf", x, libm::erf)
}
/// xirang-fallback: ceil
pub fn ceil(x: &Tensor) -> Result<Tensor> {
    rounding_fn("ceil", x, f64::ceil)
}
/// xirang-fallback: floor
pub fn floor(x: &Tensor) -> Result<Tensor> {
    rounding_fn("floor", x, f64::floor)
}
/// `round`: halves to even.
/// xirang-fallback: round
pub fn round(x: &Tensor) -> Result<Tensor> {
    rounding_fn("round", x, f64::round_ties_even)
}
/// xirang-fallback: trunc
pub fn trunc(x: &Tensor) -> Result<Tensor> {
    rounding_fn("trunc", x, f64::trunc)
}
/// xirang-fallback: isnan
pub fn isnan(x: &Tensor) -> Result<Tensor> {
    predicate_fn("isnan", x, f64::is_nan)
}
/// xirang-fallback: isinf
pub fn isinf(x: &Tensor) -> Result<Tensor> {
    predicate_fn("isinf", x, f64::is_infinite)
}
/// xirang-fallback: isneginf
pub fn isneginf(x: &Tensor) -> Result<Tensor> {
    predicate_fn("isneginf", x, |v| v == f64::NEG_INFINITY)
}
/// xirang-fallback: logical_not
pub fn logical_not(x: &Tensor) -> Result<Tensor> {
    predicate_fn("logical_not", x, |v| v == 0.0)
}

/// `sign`: -1, 0 or 1 in the input's dtype (NaN gives 0; bool is unchanged).
/// xirang-fallback: sign
pub fn sign(x: &Tensor) -> Result<Tensor> {
    on_host1("sign", &[x], |h| {
        let t = &h[0];
        let d = t.dtype();
        if d.is_floating() {
            let f = |v: &f64| {
                if *v > 0.0 {
                    1.0
                } else if *v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            };
            out_f(pmap(&t.to_f64_vec()?, f), t.sizes(), d)
        } else {
            out_i(pmap(&t.to_i64_vec()?, |v| v.signum()), t.sizes(), d)
        }
    })
}

/// `logical_and` / `logical_or` / `logical_xor`: bool results over truth values, any dtypes.
fn logical_fn(name: &'static str, a: &Tensor, b: &Tensor, f: fn(bool, bool) -> bool) -> Result<Tensor> {
    on_host1(name, &[a, b], |h| {
        let shape = broadcast_shapes(h[0].sizes(), h[1].sizes())?;
        let truth = |t: &Tensor| -> Result<Vec<bool>> {
            Ok(if t.dtype().is_floating() {
                f64s(t, &shape)?.into_iter().map(|v| v != 0.0).collect()
            } else {
                i64s(t, &shape)?.into_iter().map(|v| v != 0).collect()
            })
        };
        let (x, y) = (truth(&h[0])?, truth(&h[1])?);
        out_b(pmap2(&x, &y, f), &shape)
    })
}
/// xirang-fallback: logical_and
pub fn logical_and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    logical_fn("logical_and", a, b, |p, q| p && q)
}
/// xirang-fallback: logical_or
pub fn logical_or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    logical_fn("logical_or", a, b, |p, q| p || q)
}
/// xirang-fallback: logical_xor
pub fn logical_xor(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    logical_fn("logical_xor", a, b, |p, q| p != q)
}

/// A bitwise operator in the common integral or bool dtype (floats are an error).
fn bitwise_fn(name: &'static str, a: &Tensor, b: Rhs<'_>, f: fn(i64, i64) -> i64) -> Result<Tensor> {
    binary(name, a, b, move |x, y, d, shape| {
        if d.is_floating() {
            return dtype_err(format!("\"{name}\" not implemented for '{}'", d.name()));
        }
        out_i(pmap2(&i64s(x, shape)?, &i64s(y, shape)?, f), shape, d)
    })
}
/// xirang-fallback: bitwise_and.Tensor, bitwise_and.Scalar
pub fn bitwise_and<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    bitwise_fn("bitwise_and", a, b.into(), |x, y| x & y)
}
/// xirang-fallback: bitwise_or.Tensor, bitwise_or.Scalar
pub fn bitwise_or<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    bitwise_fn("bitwise_or", a, b.into(), |x, y| x | y)
}
/// xirang-fallback: bitwise_xor.Tensor, bitwise_xor.Scalar
pub fn bitwise_xor<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    bitwise_fn("bitwise_xor", a, b.into(), |x, y| x ^ y)
}
/// `bitwise_not`: `!x` on integers, logical not on bool (floats are an error).
/// xirang-fallback: bitwise_not
pub fn bitwise_not(x: &Tensor) -> Result<Tensor> {
    on_host1("bitwise_not", &[x], |h| {
        let t = &h[0];
        let d = t.dtype();
        match d {
            DType::Bool => out_i(pmap(&t.to_i64_vec()?, |v| i64::from(*v == 0)), t.sizes(), d),
            d if d.is_floating() => dtype_err(format!("\"bitwise_not\" not implemented for '{}'", d.name())),
            _ => out_i(pmap(&t.to_i64_vec()?, |v| !v), t.sizes(), d),
        }
    })
}

/// `atan2(self, other)`: integral inputs promote to the default float dtype.
/// xirang-fallback: atan2
pub fn atan2(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary("atan2", a, Rhs::Tensor(b), |x, y, d, shape| {
        let od = if d.is_floating() { d } else { DEFAULT_FLOAT };
        out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, f64::atan2), shape, od)
    })
}

/// `fmod` (C `fmod`, the dividend's sign) and `remainder` (Python `%`, the divisor's sign);
/// an integral zero divisor is `ZeroDivisionError`.
fn modulo(name: &'static str, a: &Tensor, b: Rhs<'_>, python: bool) -> Result<Tensor> {
    binary(name, a, b, move |x, y, d, shape| {
        if d.is_floating() {
            let f = move |p: f64, q: f64| {
                let m = p % q;
                if python && m != 0.0 && ((q < 0.0) != (m < 0.0)) { m + q } else { m }
            };
            out_f(pmap2(&f64s(x, shape)?, &f64s(y, shape)?, f), shape, d)
        } else {
            let (p, q) = (i64s(x, shape)?, i64s(y, shape)?);
            if q.contains(&0) {
                return Err(Error::InvalidArgument(format!("{name}: ZeroDivisionError")));
            }
            let f = move |p: i64, q: i64| {
                let m = p.wrapping_rem(q);
                if python && m != 0 && ((q < 0) != (m < 0)) { m + q } else { m }
            };
            out_i(pmap2(&p, &q, f), shape, d)
        }
    })
}
/// xirang-fallback: fmod.Tensor, fmod.Scalar
pub fn fmod<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    modulo("fmod", a, b.into(), false)
}
/// xirang-fallback: remainder.Tensor, remainder.Scalar
pub fn remainder<'a>(a: &Tensor, b: impl Into<Rhs<'a>>) -> Result<Tensor> {
    modulo("remainder", a, b.into(), true)
}
