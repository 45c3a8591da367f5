//! The training loops of the examples, benches and golden tests (not part of the library: each
//! includes this file with `#[path]`).
//!
//! A two-layer MLP trained with full-batch SGD on the device. [`train_mlp`]
//! takes its gradients from autograd ([`xirang_runtime::autograd`], the generated
//! backward nodes); [`train_mlp_explicit`] calls the backward operators by
//! hand (the cross-check: both must give the same losses). Shared by
//! `examples/train_mlp.rs` and its golden test.
//!
//! Model: `logits = fc2(relu(fc1(x)))`, loss = mean cross-entropy
//! (`_log_softmax` + `nll_loss_forward`), as `torch.nn.functional.cross_entropy`.
//! Every operator goes through [`xirang_runtime::boxed::call`], so it runs on the
//! native tier where the device has a kernel and is counted per tier.

use std::collections::BTreeMap;

use xirang_runtime::autograd::TensorAutograd;
use xirang_runtime::device::Device;
use xirang_runtime::dtype::{DType, Scalar};
use xirang_runtime::error::{Error, Result};
use xirang_runtime::ivalue::IValue;
use xirang_runtime::runtime::Runtime;
use xirang_runtime::tensor::Tensor;

/// Parameter names in the init file.
pub const PARAMS: [&str; 4] = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];

fn op(name: &str, args: Vec<IValue>) -> Result<Vec<Tensor>> {
    xirang_runtime::boxed::call(name, args)?
        .into_iter()
        .map(|v| match v {
            IValue::Tensor(t) => Ok(t),
            other => Err(Error::InvalidArgument(format!("{name}: expected tensor results, got {}", other.kind()))),
        })
        .collect()
}

fn op1(name: &str, args: Vec<IValue>) -> Result<Tensor> {
    op(name, args)?.into_iter().next().ok_or_else(|| Error::InvalidArgument(format!("{name}: no result")))
}

fn get<'a>(m: &'a BTreeMap<String, Tensor>, what: &str, name: &str) -> Result<&'a Tensor> {
    m.get(name).ok_or_else(|| Error::InvalidArgument(format!("{what}: missing tensor `{name}`")))
}

fn shape_err<T>(msg: String) -> Result<T> {
    Err(Error::Shape(msg))
}

/// One line of the step log the training examples print, a JSON object:
/// `{"step": i, "loss": L}`. JSON has no NaN or infinity, so a loss that is
/// not a finite number (a diverged run) is `null` with a flag that says
/// which it was: `{"step": i, "loss": null, "nonfinite": "NaN"}` (or `"inf"`,
/// `"-inf"`).
pub fn loss_line(step: usize, loss: f64) -> String {
    if loss.is_finite() {
        format!("{{\"step\": {step}, \"loss\": {loss}}}")
    } else {
        let what = if loss.is_nan() {
            "NaN"
        } else if loss > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        format!("{{\"step\": {step}, \"loss\": null, \"nonfinite\": \"{what}\"}}")
    }
}

/// Checks the shapes and dtypes of W and D: returns (N, D, H, C).
pub fn check_inputs(
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
) -> Result<(usize, usize, usize, usize)> {
    for p in PARAMS {
        if get(init, "init", p)?.dtype() != DType::F32 {
            return Err(Error::DType(format!("init: `{p}` must be float32")));
        }
    }
    let (x, y) = (get(data, "data", "x")?, get(data, "data", "y")?);
    if x.dtype() != DType::F32 || y.dtype() != DType::I64 {
        return Err(Error::DType("data: `x` must be float32 and `y` int64".into()));
    }
    let (w1, b1, w2, b2) =
        (get(init, "", PARAMS[0])?, get(init, "", PARAMS[1])?, get(init, "", PARAMS[2])?, get(init, "", PARAMS[3])?);
    let &[n, d] = x.sizes() else { return shape_err(format!("data: `x` must be [N, D], got {:?}", x.sizes())) };
    let &[h, d1] = w1.sizes() else {
        return shape_err(format!("init: `fc1.weight` must be [H, D], got {:?}", w1.sizes()));
    };
    let &[c, h1] = w2.sizes() else {
        return shape_err(format!("init: `fc2.weight` must be [C, H], got {:?}", w2.sizes()));
    };
    if d1 != d || h1 != h || b1.sizes() != [h] || b2.sizes() != [c] || y.sizes() != [n] {
        return shape_err(format!(
            "inconsistent shapes: x {:?}, y {:?}, fc1.weight {:?}, fc1.bias {:?}, fc2.weight {:?}, fc2.bias {:?}",
            x.sizes(),
            y.sizes(),
            w1.sizes(),
            b1.sizes(),
            w2.sizes(),
            b2.sizes()
        ));
    }
    if n == 0 {
        return shape_err("data: `x` has no rows".into());
    }
    if let Some(bad) = y.to_i64_vec()?.into_iter().find(|&v| v < 0 || v as usize >= c) {
        return Err(Error::Index(format!("data: label {bad} is out of range for {c} classes")));
    }
    Ok((n, d, h, c))
}

/// What a training run reports besides the losses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepMemory {
    /// Peak device bytes in use during the run (caching allocator, live blocks).
    pub peak_bytes: usize,
    /// Device bytes in use after the last step's backward, with the step's activations dropped:
    /// the parameters, their gradients, the inputs.
    pub after_backward_bytes: usize,
}

/// Trains for `steps` full-batch SGD steps with learning rate `lr` on
/// logical device `device` with gradients from autograd, calling
/// `on_step(i, loss)` with each step's loss before its update. Returns the
/// losses and the trained parameters (on the host).
pub fn train_mlp(
    rt: &Runtime,
    device: Device,
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
    steps: usize,
    lr: f64,
    on_step: impl FnMut(usize, f64),
) -> Result<(Vec<f64>, BTreeMap<String, Tensor>)> {
    train_mlp_autograd(rt, device, init, data, steps, lr, on_step).map(|(l, p, _)| (l, p))
}

/// [`train_mlp`], also reporting device memory ([`StepMemory`]).
pub fn train_mlp_autograd(
    rt: &Runtime,
    device: Device,
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
    steps: usize,
    lr: f64,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Vec<f64>, BTreeMap<String, Tensor>, StepMemory)> {
    use xirang_runtime::generated::ops::ag;
    let o = &xirang_runtime::kernels::npu_ops::NpuOps;
    check_inputs(init, data)?;
    let dev = |t: &Tensor| t.to_device(rt, device)?.clone_contiguous();
    let param = |name: &str| -> Result<Tensor> { Ok(dev(get(init, "init", name)?)?.requires_grad_(true)) };
    let (w1, b1, w2, b2) = (param(PARAMS[0])?, param(PARAMS[1])?, param(PARAMS[2])?, param(PARAMS[3])?);
    let x = dev(get(data, "data", "x")?)?;
    let y = dev(get(data, "data", "y")?)?;
    let ctx = rt.context(device)?;
    let mut mem = StepMemory::default();
    let mut losses = Vec::with_capacity(steps);
    let one = Scalar::Int(1);
    for step in 0..steps {
        let loss = {
            let h = ag::relu(o, &ag::addmm(o, &b1, &x, &ag::t(o, &w1)?, one, one)?)?;
            let logits = ag::addmm(o, &b2, &h, &ag::t(o, &w2)?, one, one)?;
            let lsm = ag::_log_softmax(o, &logits, 1, false)?;
            ag::nll_loss_forward(o, &lsm, &y, None, 1, -100)?.0
        };
        let l = loss.item()?.to_f64();
        on_step(step, l);
        losses.push(l);
        loss.backward(o)?;
        drop(loss);
        // count after the queued work (a kernel holds buffers of other streams until it has run)
        ctx.synchronize()?;
        mem.after_backward_bytes = ctx.stats().allocated_bytes;
        // SGD: p += (-lr) * p.grad, in place, outside the graph
        let _no_grad = xirang_runtime::autograd::no_grad();
        for p in [&w1, &b1, &w2, &b2] {
            let g = p.grad().ok_or_else(|| Error::InvalidArgument("a parameter got no gradient".into()))?;
            // `add_.Tensor` is not in the generated selection (in-place): the runtime's kernel
            xirang_runtime::boxed::call("add_.Tensor", vec![p.detach().into(), g.into(), Scalar::Float(-lr).into()])?;
            p.bump_version();
            p.zero_grad();
        }
    }
    mem.peak_bytes = ctx.stats().peak_allocated_bytes;
    let mut params = BTreeMap::new();
    for (name, t) in PARAMS.iter().zip([&w1, &b1, &w2, &b2]) {
        params.insert(name.to_string(), t.to_cpu()?.detach());
    }
    Ok((losses, params, mem))
}

/// [`train_mlp`] with the backward operators called explicitly (no autograd): the reference the
/// autograd path is checked against.
pub fn train_mlp_explicit(
    rt: &Runtime,
    device: Device,
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
    steps: usize,
    lr: f64,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Vec<f64>, BTreeMap<String, Tensor>)> {
    check_inputs(init, data)?;
    let dev = |t: &Tensor| t.to_device(rt, device)?.clone_contiguous();
    let w1 = dev(get(init, "init", PARAMS[0])?)?;
    let b1 = dev(get(init, "init", PARAMS[1])?)?;
    let w2 = dev(get(init, "init", PARAMS[2])?)?;
    let b2 = dev(get(init, "init", PARAMS[3])?)?;
    let x = dev(get(data, "data", "x")?)?;
    let y = dev(get(data, "data", "y")?)?;
    let one = Tensor::ones(&[], DType::F32).to_device(rt, device)?;
    let mean = IValue::Int(1);
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        // forward
        let hpre = op1("addmm", vec![b1.clone().into(), x.clone().into(), w1.t()?.into(), 1i64.into(), 1i64.into()])?;
        let h = op1("relu", vec![hpre.into()])?;
        let logits = op1("addmm", vec![b2.clone().into(), h.clone().into(), w2.t()?.into(), 1i64.into(), 1i64.into()])?;
        let lsm = op1("_log_softmax", vec![logits.into(), 1i64.into(), false.into()])?;
        let out = op(
            "nll_loss_forward",
            vec![lsm.clone().into(), y.clone().into(), IValue::None, mean.clone(), (-100i64).into()],
        )?;
        let [loss, total_weight] = <[Tensor; 2]>::try_from(out)
            .map_err(|_| Error::InvalidArgument("nll_loss_forward: expected two results".into()))?;
        let l = loss.item()?.to_f64();
        on_step(step, l);
        losses.push(l);
        // backward
        let g_lsm = op1(
            "nll_loss_backward",
            vec![
                one.clone().into(),
                lsm.clone().into(),
                y.clone().into(),
                IValue::None,
                mean.clone(),
                (-100i64).into(),
                total_weight.into(),
            ],
        )?;
        let g_logits =
            op1("_log_softmax_backward_data", vec![g_lsm.into(), lsm.into(), 1i64.into(), IValue::DType(DType::F32)])?;
        let g_w2 = op1("mm", vec![g_logits.t()?.into(), h.clone().into()])?;
        let g_b2 =
            op1("sum.dim_IntList", vec![g_logits.clone().into(), vec![0i64].into(), false.into(), IValue::None])?;
        let g_h = op1("mm", vec![g_logits.into(), w2.clone().into()])?;
        let g_hpre = op1("threshold_backward", vec![g_h.into(), h.into(), Scalar::Int(0).into()])?;
        let g_w1 = op1("mm", vec![g_hpre.t()?.into(), x.clone().into()])?;
        let g_b1 = op1("sum.dim_IntList", vec![g_hpre.into(), vec![0i64].into(), false.into(), IValue::None])?;
        // SGD: p += (-lr) * g, in place
        for (p, g) in [(&w1, g_w1), (&b1, g_b1), (&w2, g_w2), (&b2, g_b2)] {
            op("add_.Tensor", vec![p.clone().into(), g.into(), Scalar::Float(-lr).into()])?;
        }
    }
    let mut params = BTreeMap::new();
    for (name, t) in PARAMS.iter().zip([&w1, &b1, &w2, &b2]) {
        params.insert(name.to_string(), t.to_cpu()?);
    }
    Ok((losses, params))
}

/// Parameter names of [`train_transformer`]'s init file.
pub const TRANSFORMER_PARAMS: [&str; 18] = [
    "attn.k.bias",
    "attn.k.weight",
    "attn.out.bias",
    "attn.out.weight",
    "attn.q.bias",
    "attn.q.weight",
    "attn.v.bias",
    "attn.v.weight",
    "fc1.bias",
    "fc1.weight",
    "fc2.bias",
    "fc2.weight",
    "head.bias",
    "head.weight",
    "ln1.bias",
    "ln1.weight",
    "ln2.bias",
    "ln2.weight",
];

/// The sizes of a transformer training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformerDims {
    /// Batch, sequence length, model width, heads, MLP width, classes.
    pub b: usize,
    pub t: usize,
    pub d: usize,
    pub heads: usize,
    pub ff: usize,
    pub c: usize,
}

/// Checks the shapes and dtypes of the transformer's W and D for `heads` heads.
pub fn check_transformer_inputs(
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
    heads: usize,
) -> Result<TransformerDims> {
    for p in TRANSFORMER_PARAMS {
        if get(init, "init", p)?.dtype() != DType::F32 {
            return Err(Error::DType(format!("init: `{p}` must be float32")));
        }
    }
    let (x, y) = (get(data, "data", "x")?, get(data, "data", "y")?);
    if x.dtype() != DType::F32 || y.dtype() != DType::I64 {
        return Err(Error::DType("data: `x` must be float32 and `y` int64".into()));
    }
    let &[b, t, d] = x.sizes() else { return shape_err(format!("data: `x` must be [B, T, D], got {:?}", x.sizes())) };
    let ff = get(init, "init", "fc1.bias")?.numel();
    let c = get(init, "init", "head.bias")?.numel();
    if heads == 0 || d % heads != 0 {
        return shape_err(format!("{heads} heads do not divide the model width {d}"));
    }
    if b == 0 || t == 0 || y.sizes() != [b] {
        return shape_err(format!("data: `x` {:?} and `y` {:?} do not match (or are empty)", x.sizes(), y.sizes()));
    }
    let want = |name: &str| -> Vec<usize> {
        let (outer, inner) = match name.rsplit_once('.').map_or("", |p| p.0) {
            "ln1" | "ln2" => return vec![d],
            "fc1" => (ff, d),
            "fc2" => (d, ff),
            "head" => (c, d),
            _ => (d, d),
        };
        if name.ends_with(".weight") { vec![outer, inner] } else { vec![outer] }
    };
    for p in TRANSFORMER_PARAMS {
        let got = get(init, "init", p)?.sizes();
        if got != want(p).as_slice() {
            return shape_err(format!("init: `{p}` must be {:?} for x {:?}, got {got:?}", want(p), x.sizes()));
        }
    }
    if let Some(bad) = y.to_i64_vec()?.into_iter().find(|&v| v < 0 || v as usize >= c) {
        return Err(Error::Index(format!("data: label {bad} is out of range for {c} classes")));
    }
    Ok(TransformerDims { b, t, d, heads, ff, c })
}

/// Trains a pre-norm transformer block for `steps` full-batch SGD steps with learning rate `lr`
/// on logical device `device`, with gradients from autograd, calling `on_step(i, loss)` with each
/// step's loss before its update. Returns the losses and the trained parameters (on the host).
///
/// Model (`goldens/make_transformer_goldens.py` is the same in PyTorch), x [B, T, D] f32, y [B] i64:
///
/// ```text
/// a  = LN1(x)                                       native_layer_norm over D
/// q, k, v = linear(a): view [B,T,H,Dh] -> permute(0,2,1,3) -> clone -> _unsafe_view [B*H,T,Dh]
/// p  = _softmax(bmm(q, k.transpose(1,2)) * Dh^-1/2, -1)
/// h  = x + out(bmm(p, v) -> view [B,H,T,Dh] -> permute -> clone -> _unsafe_view [B*T, D])
/// h2 = h + fc2(gelu(fc1(LN2(h))))
/// logits = head(mean(h2, dim 1)); loss = nll_loss(_log_softmax(logits)), mean reduction
/// ```
///
/// Linear layers are `addmm(bias, x2d, t(W))` on [B*T, D] views, as PyTorch's `linear` does for
/// contiguous 3-d inputs.
#[allow(clippy::too_many_arguments)]
pub fn train_transformer(
    rt: &Runtime,
    device: Device,
    init: &BTreeMap<String, Tensor>,
    data: &BTreeMap<String, Tensor>,
    heads: usize,
    steps: usize,
    lr: f64,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Vec<f64>, BTreeMap<String, Tensor>)> {
    use xirang_runtime::generated::ops::ag;
    use xirang_runtime::ivalue::MemoryFormat;
    let o = &xirang_runtime::kernels::npu_ops::NpuOps;
    let TransformerDims { b, t, d, heads: h, .. } = check_transformer_inputs(init, data, heads)?;
    let (b, t, d, h) = (b as i64, t as i64, d as i64, h as i64);
    let dh = d / h;
    let dev = |t: &Tensor| t.to_device(rt, device)?.clone_contiguous();
    let mut params = BTreeMap::new();
    for name in TRANSFORMER_PARAMS {
        params.insert(name, dev(get(init, "init", name)?)?.requires_grad_(true));
    }
    let p = |name: &str| -> Result<&Tensor> {
        params.get(name).ok_or_else(|| Error::InvalidArgument(format!("init: missing tensor `{name}`")))
    };
    let x = dev(get(data, "data", "x")?)?;
    let y = dev(get(data, "data", "y")?)?;
    let one = Scalar::Int(1);
    let linear = |z: &Tensor, name: &str| -> Result<Tensor> {
        let (w, bias) = (p(&format!("{name}.weight"))?, p(&format!("{name}.bias"))?);
        ag::addmm(o, bias, z, &ag::t(o, w)?, one, one)
    };
    let layer_norm = |z: &Tensor, name: &str| -> Result<Tensor> {
        let (w, bias) = (p(&format!("{name}.weight"))?, p(&format!("{name}.bias"))?);
        Ok(ag::native_layer_norm(o, z, &[d], Some(w), Some(bias), 1e-5)?.0)
    };
    // [B, T, H, Dh]-shaped data -> `perm` -> contiguous -> `to`
    let regroup = |z: &Tensor, from: &[i64], to: &[i64]| -> Result<Tensor> {
        let v = ag::permute(o, &ag::view(o, z, from)?, &[0, 2, 1, 3])?;
        ag::_unsafe_view(o, &ag::clone(o, &v, Some(MemoryFormat::Contiguous))?, to)
    };
    let split = |z: &Tensor| regroup(z, &[b, t, h, dh], &[b * h, t, dh]);
    let scale = Scalar::Float(1.0 / (dh as f64).sqrt());
    let ctx = rt.context(device)?;
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        let loss = {
            let a = ag::view(o, &layer_norm(&x, "ln1")?, &[b * t, d])?;
            let (q, k, v) =
                (split(&linear(&a, "attn.q")?)?, split(&linear(&a, "attn.k")?)?, split(&linear(&a, "attn.v")?)?);
            let s = ag::mul_scalar(o, &ag::bmm(o, &q, &ag::transpose_int(o, &k, 1, 2)?)?, scale)?;
            let pr = ag::_softmax(o, &s, -1, false)?;
            let att = regroup(&ag::bmm(o, &pr, &v)?, &[b, h, t, dh], &[b * t, d])?;
            let hid = ag::add_tensor(o, &x, &ag::view(o, &linear(&att, "attn.out")?, &[b, t, d])?, one)?;
            let m = ag::view(o, &layer_norm(&hid, "ln2")?, &[b * t, d])?;
            let m = linear(&ag::gelu(o, &linear(&m, "fc1")?, "none")?, "fc2")?;
            let h2 = ag::add_tensor(o, &hid, &ag::view(o, &m, &[b, t, d])?, one)?;
            let logits = linear(&ag::mean_dim(o, &h2, Some(&[1]), false, None)?, "head")?;
            let lsm = ag::_log_softmax(o, &logits, 1, false)?;
            ag::nll_loss_forward(o, &lsm, &y, None, 1, -100)?.0
        };
        let l = loss.item()?.to_f64();
        on_step(step, l);
        losses.push(l);
        loss.backward(o)?;
        drop(loss);
        ctx.synchronize()?;
        // SGD: p += (-lr) * p.grad, in place, outside the graph
        let _no_grad = xirang_runtime::autograd::no_grad();
        for (name, p) in &params {
            let g = p.grad().ok_or_else(|| Error::InvalidArgument(format!("`{name}` got no gradient")))?;
            xirang_runtime::boxed::call("add_.Tensor", vec![p.detach().into(), g.into(), Scalar::Float(-lr).into()])?;
            p.bump_version();
            p.zero_grad();
        }
    }
    let mut out = BTreeMap::new();
    for (name, t) in &params {
        out.insert(name.to_string(), t.to_cpu()?.detach());
    }
    Ok((losses, out))
}
