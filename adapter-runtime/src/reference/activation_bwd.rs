//! Backward operators of the activations: `threshold_backward` (relu),
//! `gelu_backward`, `silu_backward`, `sigmoid_backward`, `tanh_backward`.
//! Computed in f64 and rounded once to the promoted dtype of the two inputs.

use super::{on_host1, require_float};
use crate::dtype::{DType, Scalar, promote_types};
use crate::error::{Result, shape_err};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

fn pointwise2(
    name: &'static str,
    grad: &Tensor,
    x: &Tensor,
    float_only: bool,
    f: impl Fn(f64, f64) -> f64 + Send + Sync,
) -> Result<Tensor> {
    let d = promote_types(grad.dtype(), x.dtype());
    if float_only {
        require_float(name, d)?;
    }
    on_host1(name, &[grad, x], |h| {
        let shape = broadcast_shapes(h[0].sizes(), h[1].sizes())?;
        let g = super::f64s(&h[0], &shape)?;
        let v = super::f64s(&h[1], &shape)?;
        let out = super::pmap2(&g, &v, f);
        if d.is_floating() {
            Tensor::from_f64(&out, &shape, d)
        } else {
            Tensor::from_i64(&out.iter().map(|v| *v as i64).collect::<Vec<_>>(), &shape, d)
        }
    })
}

/// `threshold_backward(grad_output, self, threshold)`: `grad` where `self > threshold`, else 0.
/// xirang-fallback: threshold_backward
pub fn threshold_backward(grad: &Tensor, x: &Tensor, threshold: Scalar) -> Result<Tensor> {
    if grad.dtype() == DType::Bool {
        return shape_err("threshold_backward: bool gradients are not supported");
    }
    let th = threshold.to_f64();
    pointwise2("threshold_backward", grad, x, false, move |g, v| if v <= th { 0.0 } else { g })
}

/// d gelu(x)/dx, exact (`approximate='none'`).
pub fn gelu_grad_f64(x: f64) -> f64 {
    let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
    let pdf = (-0.5 * x * x).exp() * (1.0 / (2.0 * std::f64::consts::PI).sqrt());
    cdf + x * pdf
}

/// d gelu(x)/dx, tanh approximation (PyTorch's formula).
pub fn gelu_tanh_grad_f64(x: f64) -> f64 {
    let k_beta = std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5;
    let k_kappa = 0.044715;
    let x_sq = x * x;
    let inner = k_beta * (x + k_kappa * x_sq * x);
    let t = inner.tanh();
    let left = 0.5 * x;
    let right = 1.0 + t;
    0.5 * right + left * (1.0 - t * t) * k_beta * (1.0 + 3.0 * k_kappa * x_sq)
}

/// `gelu_backward(grad_output, self, approximate)`.
/// xirang-fallback: gelu_backward
pub fn gelu_backward(grad: &Tensor, x: &Tensor, approximate: &str) -> Result<Tensor> {
    let tanh = match approximate {
        "none" => false,
        "tanh" => true,
        other => {
            return Err(crate::Error::InvalidArgument(format!(
                "approximate argument must be either none or tanh, got {other:?}"
            )));
        }
    };
    pointwise2("gelu_backward", grad, x, true, move |g, v| {
        g * if tanh { gelu_tanh_grad_f64(v) } else { gelu_grad_f64(v) }
    })
}

/// `silu_backward(grad_output, self)`: `g * s * (1 + x * (1 - s))`, `s = sigmoid(x)`.
pub fn silu_backward(grad: &Tensor, x: &Tensor) -> Result<Tensor> {
    pointwise2("silu_backward", grad, x, true, |g, v| {
        let s = super::sigmoid_f64(v);
        g * s * (1.0 + v * (1.0 - s))
    })
}

/// `sigmoid_backward(grad_output, output)`: `g * (1 - y) * y`.
/// xirang-fallback: sigmoid_backward
pub fn sigmoid_backward(grad: &Tensor, y: &Tensor) -> Result<Tensor> {
    pointwise2("sigmoid_backward", grad, y, true, |g, y| g * (1.0 - y) * y)
}

/// `tanh_backward(grad_output, output)`: `g * (1 - y^2)`.
/// xirang-fallback: tanh_backward
pub fn tanh_backward(grad: &Tensor, y: &Tensor) -> Result<Tensor> {
    pointwise2("tanh_backward", grad, y, true, |g, y| g * (1.0 - y * y))
}

/// `elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)`.
/// xirang-fallback: elu_backward
pub fn elu_backward(
    grad: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
) -> Result<Tensor> {
    let (neg, pos, ipt) = (alpha.to_f64() * scale.to_f64(), scale.to_f64(), input_scale.to_f64());
    // `x <= 0` picks the negative side (NaN takes the positive one, as PyTorch)
    pointwise2("elu_backward", grad, self_or_result, true, move |g, x| {
        if x <= 0.0 { if is_result { g * ipt * (x + neg) } else { g * ipt * neg * (x * ipt).exp() } } else { g * pos }
    })
}

/// `hardsigmoid_backward(grad_output, self)`: `grad * (1/6)` on `(-3, 3)`, else 0; the constant is
/// PyTorch's float `1.0f / 6.0f`, also for double.
/// xirang-fallback: hardsigmoid_backward
pub fn hardsigmoid_backward(grad: &Tensor, x: &Tensor) -> Result<Tensor> {
    let sixth = f64::from(1.0f32 / 6.0f32);
    pointwise2("hardsigmoid_backward", grad, x, true, move |g, v| if v > -3.0 && v < 3.0 { g * sixth } else { 0.0 })
}

/// `hardswish_backward(grad_output, self)`: 0 up to -3, `grad * (x / 3 + 0.5)` below 3, else
/// `grad` (0 at -3 and `grad` at 3, as PyTorch).
/// xirang-fallback: hardswish_backward
pub fn hardswish_backward(grad: &Tensor, x: &Tensor) -> Result<Tensor> {
    pointwise2("hardswish_backward", grad, x, true, |g, v| {
        if v <= -3.0 {
            0.0
        } else if v < 3.0 {
            g * (v / 3.0 + 0.5)
        } else {
            g
        }
    })
}

/// `hardtanh_backward(grad_output, self, min_val, max_val)`: 0 outside `(min_val, max_val)`.
/// xirang-fallback: hardtanh_backward
pub fn hardtanh_backward(grad: &Tensor, x: &Tensor, min_val: Scalar, max_val: Scalar) -> Result<Tensor> {
    let (lo, hi) = (min_val.to_f64(), max_val.to_f64());
    pointwise2("hardtanh_backward", grad, x, false, move |g, v| if v <= lo || v >= hi { 0.0 } else { g })
}

/// `leaky_relu_backward(grad_output, self, negative_slope, self_is_result)`.
/// xirang-fallback: leaky_relu_backward
pub fn leaky_relu_backward(grad: &Tensor, x: &Tensor, negative_slope: Scalar, self_is_result: bool) -> Result<Tensor> {
    let _ = self_is_result;
    let slope = negative_slope.to_f64();
    pointwise2("leaky_relu_backward", grad, x, true, move |g, v| if v > 0.0 { g } else { g * slope })
}
